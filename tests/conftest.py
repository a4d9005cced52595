import os
from pathlib import Path

# OpenMP threads (torch's libgomp) spin while they wait by default; with the notebooks, JupyterLab, chromium and the
# tests sharing 2 cores, the spinning cost bonemet's two registration tests 454 s instead of 18.6 s (load 4). Set
# before any test module imports torch; subprocesses (nbdev_test, kernels, `iclr25 serve`) inherit it.
os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get('ICLR25_CHROMIUM', '/usr/bin/chromium')


def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: long-running (reproductions, long training); run with -m slow')
    config.addinivalue_line('markers', 'e2e: real-browser tests with playwright and Debian chromium')


def pytest_collection_modifyitems(config, items):
    if Path(CHROMIUM).exists(): return            # the browser tests/_browser.py launches
    skip = pytest.mark.skip(reason=f'no chromium at {CHROMIUM}')
    for item in items:
        if 'e2e' in item.keywords: item.add_marker(skip)


@pytest.fixture(scope='session')
def shared_data() -> Path:
    "The real data sets beside the project: $ICLR25_DATA or ../shared/data."
    p = Path(os.environ.get('ICLR25_DATA', ROOT.parent / 'shared' / 'data'))
    if not p.is_dir(): pytest.skip(f'no shared data folder at {p}')
    return p
