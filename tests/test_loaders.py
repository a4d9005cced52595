"""Every public single-path loader of every paper (`load_*(path)`, found by name, so a new loader inherits the test)
handed broken files raises a `ValueError` that names the file: random bytes, an empty file and truncated text, each
under several extensions (a loader that dispatches on the extension sees each of its formats broken). Truncated text
is still text: a plain-text loader (one that returns `str`) may accept it."""
import importlib
import inspect
import os
import random

import pytest

from iclr25_nb.core import PAPERS

EXTENSIONS = ('', '.txt', '.csv', '.json', '.jsonl', '.npy', '.npz', '.pt', '.cif', '.h5', '.mat', '.xyz', '.smi', '.aedat')
CONTENTS = {
    'random bytes': random.Random(0).randbytes(700),
    'empty': b'',
    'truncated text': b'{"name": "sample", "values": [[0.5, 1.5, 2.5], [3.5, 4.',
}
# loaders known to fail this test, with the reason, until their owners fix them
KNOWN: dict[str, str] = {}   # 'paper.load_x': why it does not name the file yet (strict xfail: remove once fixed)
PATH_NAMES = ('path', 'folder')


def _single_path(fn) -> bool:
    "A loader of one path: its first parameter is a path or folder, every other one has a default."
    try: params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError): return False
    return bool(params) and params[0].name in PATH_NAMES and all(p.default is not p.empty for p in params[1:])


def loaders() -> list:
    out = []
    for name, paper in PAPERS.items():
        if not paper.implemented: continue
        module = importlib.import_module(paper.module_name)
        for attr in sorted(vars(module)):
            fn = getattr(module, attr)
            if attr.startswith('load_') and inspect.isfunction(fn) and fn.__module__ == module.__name__ \
                    and _single_path(fn):
                key = f'{name}.{attr}'
                marks = [pytest.mark.xfail(reason=KNOWN[key], strict=True)] if key in KNOWN else []
                out.append(pytest.param(fn, id=key, marks=marks))
    return out


LOADERS = loaders()


def test_the_loaders_are_found():
    names = {p.id for p in LOADERS}
    assert len(names) >= 15 and {'deeptage.load_optdigits', 'mofflow.load_cif', 'bonemet.load_records'} <= names


@pytest.mark.parametrize('loader', LOADERS)
def test_a_loader_names_the_broken_file_in_a_value_error(loader, tmp_path):
    failures = []
    returns_text = inspect.signature(loader).return_annotation in (str, 'str')
    for what, content in CONTENTS.items():
        if what == 'truncated text' and returns_text: continue
        for ext in EXTENSIONS:
            path = tmp_path / f"broken_{what.replace(' ', '_')}{ext}"
            path.write_bytes(content)
            try: loader(path)
            except ValueError as e:
                if str(path) not in str(e) and path.name not in str(e):
                    failures.append(f"{what}, {ext or 'no extension'}: ValueError without the file: {e}")
            except Exception as e:
                failures.append(f"{what}, {ext or 'no extension'}: {type(e).__name__}: {str(e)[:200]}")
            else:
                failures.append(f"{what}, {ext or 'no extension'}: accepted")
            finally:
                os.unlink(path)
    assert not failures, '\n'.join(failures)
