"tools/gpu_check.sh: the GPU check runs end to end on the CPU (`--device cpu`) for one cheap paper."
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow      # two quick presets of noisy_trajectories: about 15 s alone, over a minute on a loaded machine
def test_gpu_check_on_cpu_one_paper(tmp_path):
    env = {**os.environ, 'PYTHON': sys.executable, 'OMP_NUM_THREADS': '1'}
    r = subprocess.run(['bash', str(ROOT / 'tools' / 'gpu_check.sh'), '--device', 'cpu', '--out', str(tmp_path),
                        'noisy_trajectories'], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [l for l in r.stdout.splitlines() if l.startswith('noisy_trajectories:')]
    assert len(line) == 1, r.stdout
    assert re.search(r'cpu [\d.]+ s, claims as declared; cpu [\d.]+ s, claims as declared', line[0]), line[0]
    assert 'H1 ' in line[0] and line[0].endswith('max rel diff 0'), line[0]      # the same claims' values, both runs
    assert (tmp_path / 'cpu' / 'noisy_trajectories' / 'report.json').exists()
    assert (tmp_path / 'device' / 'noisy_trajectories' / 'report.json').exists()


def test_gpu_check_rejects_an_unknown_option():
    r = subprocess.run(['bash', str(ROOT / 'tools' / 'gpu_check.sh'), '--bogus'], capture_output=True, text=True)
    assert r.returncode == 2 and 'unknown option' in r.stderr
