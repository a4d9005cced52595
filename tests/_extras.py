"""Run code as if only `pip install 'iclr25_nb[EXTRA]'` had been done, inside the test venv that has every extra.

CI installs `.[dev,all,test]` once. The README's first command installs `.[dev]` only, and every `iclr25 serve` page
must work after it (issue 46). Rather than a second virtual environment (torch and a compiled llama.cpp again, minutes
of CI), `hide_all_but('dev')` walks the installed metadata from `iclr25_nb[dev]` through every requirement (and
the requirements' own extras and markers) and makes any top-level module that only distributions outside that
closure provide unimportable: `import torch_geometric` then raises ModuleNotFoundError, as it would after `.[dev]`.

    python -c "import _extras; _extras.hide_all_but('dev'); ..."     # tests/ on sys.path
"""
from __future__ import annotations

import importlib.abc
import importlib.metadata as md
import re
import sys

from packaging.markers import default_environment
from packaging.requirements import Requirement


def _norm(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def closure(dist: str = 'iclr25_nb', extras: tuple[str, ...] = ()) -> set[str]:
    "Normalised names of the installed distributions that `pip install dist[extras]` needs (dist included)."
    seen, todo = set(), [(dist, tuple(extras))]
    while todo:
        name, wanted = todo.pop()
        key = (_norm(name), wanted)
        if key in seen: continue
        seen.add(key)
        try: d = md.distribution(name)
        except md.PackageNotFoundError: continue         # a requirement whose marker excludes this platform
        for line in d.requires or []:
            req = Requirement(line)
            if req.marker is not None and not any(
                    req.marker.evaluate({**default_environment(), 'extra': e}) for e in ('', *wanted)):
                continue
            todo.append((req.name, tuple(sorted(req.extras))))
    return {n for n, _ in seen}


def hidden_modules(extras: tuple[str, ...]) -> set[str]:
    "Top-level modules that only installed distributions outside the closure of `iclr25_nb[extras]` provide."
    keep = closure('iclr25_nb', extras)
    return {mod for mod, dists in md.packages_distributions().items()
            if not mod.startswith('_') and not any(_norm(d) in keep for d in dists)}


class _Hide(importlib.abc.MetaPathFinder):
    def __init__(self, names: set[str], why: str): self.names, self.why = names, why

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition('.')[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} ({self.why})", name=fullname)
        return None


def hide_all_but(*extras: str) -> set[str]:
    "Make every module outside `iclr25_nb[extras]` unimportable in this process; returns the hidden top-level names."
    names = hidden_modules(tuple(extras))
    loaded = sorted(n for n in names if n in sys.modules)
    if loaded: raise RuntimeError(f"hide_all_but: already imported, cannot hide: {loaded}")
    sys.meta_path.insert(0, _Hide(names, f"hidden: outside iclr25_nb[{','.join(extras)}]"))
    return names
