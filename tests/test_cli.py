"The iclr25 command: each subcommand, and bad arguments (clear message, exit status 2)."
import json
import subprocess
import sys
from pathlib import Path

import pytest

from iclr25_nb.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(*args, timeout=120):
    return subprocess.run([sys.executable, '-m', 'iclr25_nb.cli', *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def test_list(capsys):
    assert main(['list']) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 19 and out[0].split()[:2] == ['10', 'deeptage']


@pytest.mark.parametrize('args,message', [
    (['reproduce', 'resnet'], "unknown paper 'resnet'"),
    (['reproduce', 'space'], 'not implemented yet: space'),
    (['reproduce', '--preset', 'huge'], "invalid choice: 'huge'"),
    (['train', 'demo', '--set', 'lr'], '--set expects FIELD=VALUE'),
    (['train', 'demo', '--set', 'lr=-3'], 'RegressionConfig.lr must be in (0, 2)'),
    (['train', 'demo', '--set', 'speed=3'], "no field(s) ['speed']"),
    (['train', 'demo', '--resume'], '--resume needs --checkpoint-dir'),
    (['train', 'demo', '--checkpoint-every', '0'], '--checkpoint-every must be positive'),
    (['serve', '--port', '99999'], '--port must be in 0..65535'),
    (['docs', '--only', 'nonexistent'], "no notebook(s) ['nonexistent']"),
    (['frobnicate'], "invalid choice: 'frobnicate'"),
    ([], 'the following arguments are required: command'),
])
def test_bad_arguments_exit_2_with_message(args, message, capsys):
    with pytest.raises(SystemExit) as e: main(args)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_train_demo_writes_checkpoint(tmp_path):
    r = run('train', 'demo', '--set', 'steps=50', '--checkpoint-dir', str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out['status'] == 'done' and out['step'] == 50 and out['mse'] < 1
    assert (tmp_path / 'checkpoint.pt').exists()


@pytest.mark.parametrize('sig', ['SIGINT', 'SIGTERM'])
def test_train_ctrl_c_saves_and_exits_130(tmp_path, sig):
    "Also when started with SIGINT ignored, as shells start background jobs."
    import signal, time
    sig = getattr(signal, sig)
    p = subprocess.Popen(preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN), args=[sys.executable, '-m', 'iclr25_nb.cli', 'train', 'demo', '--set', 'steps=100000', '--set', 'delay=0.005',
                          '--checkpoint-dir', str(tmp_path), '--checkpoint-every', '0.5'], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not (tmp_path / 'checkpoint.pt').exists() and time.monotonic() - t0 < 120: time.sleep(0.1)   # training runs
    p.send_signal(sig)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 130 and 'interrupted at step' in err and 'checkpoint at' in err
    from iclr25_nb.core import load_checkpoint
    assert load_checkpoint(tmp_path / 'checkpoint.pt')['experiment']['step_count'] > 0


def test_reproduce_check_exit_codes(tmp_path, monkeypatch, capsys):
    "--check turns a claim that does not hold into exit status 1; reports are written either way."
    from iclr25_nb import core
    from iclr25_nb.core import Claim, Report
    class Fake:
        holds = True
        @staticmethod
        def reproduce(preset='quick', seed=0):
            r = Report('fake', 'Fake'); r.add_row('m', x=1.0)
            r.add_claim(Claim.compare('x is positive', 1.0 if Fake.holds else -1.0, '>', 0)); return r
    monkeypatch.setattr(core.Paper, 'implemented', property(lambda self: self.name == 'deeptage'))
    monkeypatch.setattr(core.Paper, 'load', lambda self: Fake)
    assert main(['reproduce', 'deeptage', '--out', str(tmp_path), '--check']) == 0
    assert (tmp_path / 'deeptage' / 'report.html').exists() and 'x is positive' in capsys.readouterr().out
    Fake.holds = False
    assert main(['reproduce', '--out', str(tmp_path), '--check']) == 1
    assert main(['reproduce', '--out', str(tmp_path)]) == 0
