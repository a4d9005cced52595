"The notebooks run (nbdev_test), are committed clean, and the library equals what tools/export.py writes."
import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
IGNORE = shutil.ignore_patterns('.venv', '.git', '_docs', '_proc', '_exec', '*.egg-info', '__pycache__', 'reports', 'site')


def _library(root: Path) -> dict[str, str]:
    "Every module of the library under `root`, subpackages included, by relative path."
    lib = root / 'iclr25_nb'
    return {str(f.relative_to(lib)): f.read_text() for f in sorted(lib.rglob('*.py')) if '__pycache__' not in f.parts}


def _export(root: Path):
    r = subprocess.run([sys.executable, 'tools/export.py'], cwd=root, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_notebooks_run():
    flags = os.environ.get('NBDEV_FLAGS', '').split()
    cmd = [str(BIN / 'nbdev_test'), '--n_workers', os.environ.get('NBDEV_WORKERS', '2'), '--timing']
    if flags: cmd += ['--flags', *flags]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]


def test_library_matches_notebooks(tmp_path):
    "Export into a copy and compare with the committed library, module by module (subpackages included)."
    copy = tmp_path / 'repo'
    shutil.copytree(ROOT, copy, ignore=IGNORE)
    _export(copy)
    ours, theirs = _library(ROOT), _library(copy)
    assert sorted(ours) == sorted(theirs), set(ours) ^ set(theirs)
    for name in ours: assert ours[name] == theirs[name], f"{name} differs from its notebook: run tools/export.py"


FAKE_PAPER = '''# %% [markdown]
# # fake_sub
#
# > A paper whose one notebook exports into a subpackage.

# %%
#| default_exp fake_sub.__init__

# %%
#| export
PAPER = dict(number=99, name='fake_sub', title='A fake paper', authors='Nobody', code=None, field='tests',
             ablation='the model off')

# %%
#| export fake_sub.model
from iclr25_nb.core import Experiment, ConfigBase, bound
from dataclasses import dataclass

@dataclass
class FakeConfig(ConfigBase):
    steps: int = bound(5, ge=1)

class FakeExperiment(Experiment):
    Config = FakeConfig
    name = 'fake_sub'
    def step(self): return {'loss': 1.0}

# %%
#| export
from iclr25_nb.fake_sub.model import FakeExperiment
make_experiment = FakeExperiment.from_preset

def reproduce(preset='quick', seed=0, ablate=False, data=None, device='cpu'): return None

def explorer(autostart=False, **config): return None
'''


def test_a_paper_may_export_into_a_subpackage(tmp_path):
    "One notebook, several modules under iclr25_nb/<paper>/: exported twice alike, and the registry reads it."
    copy = tmp_path / 'repo'
    shutil.copytree(ROOT, copy, ignore=IGNORE)
    (tmp_path / 'fake.py').write_text(FAKE_PAPER)
    r = subprocess.run([sys.executable, 'tools/nbpercent.py', 'to-nb', str(tmp_path / 'fake.py'), 'nbs/99_fake_sub.ipynb'],
                       cwd=copy, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    _export(copy)
    first = _library(copy)
    assert {'fake_sub/__init__.py', 'fake_sub/model.py'} <= set(first)
    _export(copy)
    assert _library(copy) == first, 'exporting twice changed the subpackage'
    probe = ("import json, iclr25_nb, iclr25_nb.fake_sub as m; from iclr25_nb.core import read_paper_meta, check_contract;"
             "print(json.dumps([iclr25_nb.__file__, read_paper_meta('iclr25_nb.fake_sub'), check_contract(m),"
             " m.make_experiment(steps=3).config.steps]))")
    r = subprocess.run([sys.executable, '-c', probe], cwd=copy, capture_output=True, text=True,
                       env={**os.environ, 'PYTHONPATH': str(copy)})
    assert r.returncode == 0, r.stderr
    where, meta, problems, steps = json.loads(r.stdout)
    assert where.startswith(str(copy)) and meta['title'] == 'A fake paper' and problems == [] and steps == 3


def test_notebooks_have_no_outputs():
    for nb in sorted((ROOT / 'nbs').glob('*.ipynb')):
        cells = json.loads(nb.read_text())['cells']
        dirty = [i for i, c in enumerate(cells) if c['cell_type'] == 'code' and (c.get('outputs') or c.get('execution_count'))]
        assert not dirty, f"{nb.name}: cells {dirty} have outputs; run nbdev_clean"


def _names(source: str) -> set:
    "The identifiers in `source`'s code (comments and strings left out)."
    import io, tokenize
    try: return {t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.NAME}
    except (tokenize.TokenError, IndentationError, SyntaxError): return set()


def _defined(source: str) -> set:
    import ast
    try: tree = ast.parse(source)
    except SyntaxError: return set()
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)): out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                if isinstance(t, ast.Name): out.add(t.id)
    return out


def test_reproduce_runs_top_to_bottom():
    """A notebook calls `reproduce` only after everything it needs is defined: run top to bottom (Run All in
    JupyterLab) the library's functions are the notebook's cells, and a figure defined below the call is a NameError
    that nbdev_test, which skips the slow cell, never sees."""
    late = {}
    for nb in sorted((ROOT / 'nbs').glob('[1-9][0-9]_*.ipynb')):
        code = [''.join(c['source']) for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code']
        exported = [s.lstrip().startswith('#| export') for s in code]
        calls = [i for i, s in enumerate(code) if not exported[i] and 'reproduce(' in s and '#| eval: false' not in s]
        if not calls: continue
        i = calls[0]
        after = set().union(*(_defined(s) for s, e in zip(code[i + 1:], exported[i + 1:]) if e))
        before = set().union(*(_defined(s) for s, e in zip(code[:i], exported[:i]) if e))
        used = set().union(*(_names(s) for s, e in zip(code[:i], exported[:i]) if e))
        missing = sorted((used & after) - before)
        if missing: late[nb.name] = missing
    assert not late, f"reproduce is called before these are defined (move the call below them): {late}"


def test_exported_code_does_not_need_module_file():
    """Exported cells run as the notebook's own cells too (Run All), where `__file__` is not defined: a path found from
    the module's `__file__` is a NameError there (top's and l3m's data folders were, found by Run All in JupyterLab).
    Use `iclr25_nb.__file__`, or guard with `'__file__' in globals()`."""
    bare = {}
    for nb in sorted((ROOT / 'nbs').glob('[0-9][0-9]_*.ipynb')):
        for c in json.loads(nb.read_text())['cells']:
            s = ''.join(c['source'])
            if c['cell_type'] != 'code' or not s.lstrip().startswith('#| export'): continue
            for line in s.splitlines():
                code = line.split('#')[0]
                if re.search(r'(?<![\w.])__file__\b', code) and "'__file__' in globals()" not in code \
                        and "globals()['__file__']" not in code:
                    bare.setdefault(nb.name, []).append(line.strip())
    assert not bare, f"exported code reads the module's __file__ (undefined in the notebook): {bare}"


SECTIONS = ('Paper', 'Data', 'Method', 'Baselines', 'Experiment', 'Reproduction', 'Explorer', 'Benchmark')


def section_order(nb: Path) -> list[str]:
    "The notebook's `## ` sections, a subtitle after a colon left out, repeated sections (Method: a, Method: b) once."
    cells = json.loads(nb.read_text())['cells']
    heads = [line[3:].split(':')[0].strip() for c in cells if c['cell_type'] == 'markdown'
             for line in ''.join(c['source']).splitlines() if line.startswith('## ')]
    return [h for i, h in enumerate(heads) if i == 0 or h != heads[i - 1]]


def test_paper_notebooks_follow_the_section_order():
    """Every paper notebook on Claims v3 has CONTRIBUTING.md's sections in order: Paper · Data · Method · Baselines ·
    Experiment · Reproduction (results table) · Explorer · Benchmark, then optionally `Explorer, live`."""
    from test_contract import NOT_CONVERTED
    wrong = {}
    for nb in sorted((ROOT / 'nbs').glob('[1-9][0-9]_*.ipynb')):
        if nb.stem.split('_', 1)[1] in NOT_CONVERTED: continue
        order = section_order(nb)
        if order not in (list(SECTIONS), [*SECTIONS, 'Explorer, live']): wrong[nb.name] = order
    assert not wrong, f"sections out of order (want {' · '.join(SECTIONS)}): {wrong}"


def test_every_paper_page_has_a_replay():
    """The docs site is static: where a live view would be, each paper's page shows a recorded short run
    (`live.replay`) executed in the notebook's Explorer section."""
    missing = [nb.name for nb in sorted((ROOT / 'nbs').glob('[1-9][0-9]_*.ipynb'))
               if not any(c['cell_type'] == 'code' and 'replay(' in ''.join(c['source'])
                          and '#| eval: false' not in ''.join(c['source'])
                          for c in json.loads(nb.read_text())['cells'])]
    assert not missing, f"paper notebooks without an executed replay: {missing}"
