"The notebooks run (nbdev_test), are committed clean, and the library equals what nbdev_export writes."
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_notebooks_run():
    flags = os.environ.get('NBDEV_FLAGS', '').split()
    cmd = [str(BIN / 'nbdev_test'), '--n_workers', os.environ.get('NBDEV_WORKERS', '2'), '--timing']
    if flags: cmd += ['--flags', *flags]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-5000:]


def test_library_matches_notebooks(tmp_path):
    "Export into a copy and compare with the committed library."
    copy = tmp_path / 'repo'
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns('.venv', '.git', '_docs', '_proc', '*.egg-info', '__pycache__', 'reports'))
    r = subprocess.run([str(BIN / 'nbdev_export')], cwd=copy, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for f in sorted((ROOT / 'iclr25_nb').glob('*.py')):
        assert (copy / 'iclr25_nb' / f.name).read_text() == f.read_text(), f"{f.name} differs from its notebook: run nbdev_export"
    assert sorted(p.name for p in (copy / 'iclr25_nb').glob('*.py')) == sorted(p.name for p in (ROOT / 'iclr25_nb').glob('*.py'))


def test_notebooks_have_no_outputs():
    import json
    for nb in sorted((ROOT / 'nbs').glob('*.ipynb')):
        cells = json.loads(nb.read_text())['cells']
        dirty = [i for i, c in enumerate(cells) if c['cell_type'] == 'code' and (c.get('outputs') or c.get('execution_count'))]
        assert not dirty, f"{nb.name}: cells {dirty} have outputs; run nbdev_clean"
