"The iclr25 command: each subcommand, and bad arguments (clear message, exit status 2)."
import json
import subprocess
import sys
from pathlib import Path

import pytest

from iclr25_nb.cli import main
from iclr25_nb.core import PAPERS

ROOT = Path(__file__).resolve().parents[1]


def run(*args, timeout=120):
    return subprocess.run([sys.executable, '-m', 'iclr25_nb.cli', *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def test_list(capsys):
    "The scorecard: a header, then one line per paper with its status."
    assert main(['list']) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 20 and out[1].split()[:2] == ['10', 'deeptage']
    statuses = ('REPRODUCED', 'PARTLY', 'NOT REPRODUCED', 'not yet on Claims v3')
    assert all(any(s in line for s in statuses) for line in out[1:]), out


def test_readme_shows_the_scorecard(capsys):
    "The README's scorecard is `iclr25 list --markdown` (python tools/scorecard.py rewrites it)."
    assert main(['list', '--markdown']) == 0
    table = capsys.readouterr().out.strip()
    readme = (ROOT / 'README.md').read_text()
    block = readme.split('<!-- scorecard', 1)[1].split('-->', 1)[1].split('<!-- /scorecard -->')[0].strip()
    assert block == table, 'README scorecard is stale: run python tools/scorecard.py'


@pytest.mark.parametrize('args,message', [
    (['reproduce', 'resnet'], "unknown paper 'resnet'"),
    *[(['reproduce', p.name], f'not implemented yet: {p.name}')            # a planned paper not written yet
      for p in list(PAPERS.values()) if not p.implemented][:1],
    (['reproduce', '--preset', 'huge'], "invalid choice: 'huge'"),
    (['train', 'demo', '--set', 'lr'], '--set expects FIELD=VALUE'),
    (['train', 'demo', '--set', 'lr=-3'], 'RegressionConfig.lr must be greater than 0 (got -3)'),
    (['train', 'demo', '--device', 'tpu'], 'device must be cpu, cuda or mps'),
    (['reproduce', 'eign', '--seed', '1', '--seeds', '0-2'], 'give --seed or --seeds, not both'),
    (['reproduce', 'eign', '--seeds', 'x'], 'seeds must look like'),
    (['reproduce', 'eign', '--jobs', '0'], '--jobs must be at least 1'),
    (['reproduce', 'eign', '--device', 'quantum'], 'device must be cpu, cuda or mps'),
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


@pytest.fixture
def fake_paper(monkeypatch):
    "deeptage's registry entry answers with a fake module whose claims hold or not as the test says."
    from iclr25_nb import core
    from iclr25_nb.core import Claim, Report
    class Fake:
        holds = True          # the headline's verdict on the full method
        ablated_holds = False # ... and with the key component off
        @staticmethod
        def reproduce(preset='quick', seed=0, ablate=False, data=None, device='cpu'):
            r = Report('fake', 'Fake', meta=core.run_meta(preset, seed, ablate=ablate)); r.add_row('m', x=1.0)
            ok = Fake.ablated_holds if ablate else Fake.holds
            r.add_claim(Claim.compare('x beats the control', 1.0 + seed if ok else -1.0, '>', 0, kind='headline',
                                      control=('control', 0.0)))
            r.add_claim(Claim.compare('an identity', 0.0, '<=', 0)); return r
    monkeypatch.setattr(core.Paper, 'implemented', property(lambda self: self.name == 'deeptage'))
    monkeypatch.setattr(core.Paper, 'load', lambda self: Fake)
    return Fake


def test_reproduce_check_exit_codes(tmp_path, fake_paper, capsys):
    "--check turns a claim that does not hold into exit status 1; reports are written either way."
    assert main(['reproduce', 'deeptage', '--out', str(tmp_path), '--check']) == 0
    out = capsys.readouterr().out
    assert (tmp_path / 'deeptage' / 'report.html').exists() and 'x beats the control' in out
    assert '1/1 claims hold; 1/1 sanity checks' in out
    fake_paper.holds = False
    assert main(['reproduce', '--out', str(tmp_path), '--check']) == 1
    assert 'does not hold: x beats the control' in capsys.readouterr().err
    assert main(['reproduce', '--out', str(tmp_path)]) == 0


def test_reproduce_ablate_check_passes_only_when_every_headline_fails(tmp_path, fake_paper, capsys):
    assert main(['reproduce', 'deeptage', '--ablate', '--out', str(tmp_path), '--check']) == 0
    assert (tmp_path / 'deeptage' / 'ablate' / 'report.json').exists()
    fake_paper.ablated_holds = True
    assert main(['reproduce', 'deeptage', '--ablate', '--out', str(tmp_path), '--check']) == 1
    assert 'still holds with the ablation: x beats the control' in capsys.readouterr().err


def test_reproduce_seeds_writes_a_seed_table(tmp_path, fake_paper, capsys):
    assert main(['reproduce', 'deeptage', '--seeds', '0-2', '--out', str(tmp_path), '--check']) == 0
    table = json.loads((tmp_path / 'deeptage' / 'seeds.json').read_text())
    assert table[0]['values'] == [1.0, 2.0, 3.0] and table[0]['holds'] == 3 and table[0]['mean'] == 2.0
    assert (tmp_path / 'deeptage' / 'seed-2' / 'report.md').exists()
    assert '| headline | x beats the control | 1 | 2 | 3 |' in (tmp_path / 'deeptage' / 'seeds.md').read_text()


def test_reproduce_seeds_in_parallel_processes(tmp_path):
    "--jobs 2 runs seeds in two spawned processes (the real demo-free path: the cheapest paper, quick preset)."
    from iclr25_nb.core import PAPERS
    if not PAPERS['lambda_balanced'].implemented: pytest.skip('lambda_balanced not implemented')
    r = run('reproduce', 'lambda_balanced', '--seeds', '0-1', '--jobs', '2', '--out', str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    table = json.loads((tmp_path / 'lambda_balanced' / 'seeds.json').read_text())
    assert table and all(row['seeds'] == [0, 1] for row in table)


def test_reproduce_goes_on_after_a_paper_fails(tmp_path, fake_paper, monkeypatch, capsys):
    "Every paper: one that fails leaves its traceback and the next still runs; a summary table, exit status 1."
    from iclr25_nb import core
    class Broken:
        @staticmethod
        def reproduce(**kw): raise ImportError("molleo needs RDKit: pip install 'iclr25_nb[molleo]'")
    monkeypatch.setattr(core.Paper, 'implemented', property(lambda self: self.name in ('deeptage', 'molleo', 'top')))
    monkeypatch.setattr(core.Paper, 'load', lambda self: Broken if self.name == 'molleo' else fake_paper)
    assert main(['reproduce', '--out', str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert (tmp_path / 'deeptage' / 'report.json').exists() and (tmp_path / 'top' / 'report.json').exists()
    assert 'ImportError' in (tmp_path / 'molleo' / 'error.txt').read_text()
    assert "molleo: FAILED" in err and "pip install 'iclr25_nb[molleo]'" in err and 'Traceback' not in err
    summary = (tmp_path / 'summary.md').read_text()
    assert '| molleo | FAILED |' in summary and '| deeptage | ran |' in summary and '| top | ran |' in summary
    assert '| molleo | FAILED |' in out and '1 of 3 papers failed: molleo' in err


def test_train_with_a_missing_extra_is_one_line(monkeypatch, capsys):
    "`iclr25 train molleo` without RDKit: one line naming the extra, exit 1, no traceback."
    for m in [m for m in sys.modules if m == 'rdkit' or m.startswith('rdkit.')]: monkeypatch.delitem(sys.modules, m)
    monkeypatch.setitem(sys.modules, 'rdkit', None)
    assert main(['train', 'molleo', '--max-steps', '1']) == 1
    err = capsys.readouterr().err
    assert err.strip() == "iclr25 train: error: molleo needs RDKit: pip install 'iclr25_nb[molleo]'", err


def test_serve_port_in_use_is_one_line(capsys):
    import socket
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); s.listen(1)
        port = s.getsockname()[1]
        r = run('serve', '--port', str(port), timeout=120)
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith('iclr25 serve: error:'), r.stderr[-2000:]


def test_docs_outside_a_checkout_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, '-m', 'iclr25_nb.cli', 'docs'], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 2 and 'Traceback' not in r.stderr
    assert 'the docs are built from the notebooks of a checkout' in r.stderr and len(r.stderr.strip().splitlines()) == 2


def test_app_page_with_a_missing_extra_names_it(monkeypatch):
    "A page whose explorer needs a missing extra says which one (the paper's), not a traceback."
    from iclr25_nb import app, core
    def load(self): raise ModuleNotFoundError("No module named 'rdkit'", name='rdkit')
    monkeypatch.setattr(core.Paper, 'load', load)
    alert = app.paper_page('molleo')
    assert "pip install 'iclr25_nb[molleo]'" in alert.object and 'could not be built' in alert.object


def test_reproduce_set_passes_fields_or_names_what_it_takes():
    "`iclr25 reproduce P --set FIELD=VALUE` reaches P's reproduce when it takes FIELD, else one clear error."
    from iclr25_nb.cli import _check_overrides, build_parser
    def fixed(preset='quick', seed=0, ablate=False, data=None, device='cpu', llm_url=None): pass
    def loose(preset='quick', seed=0, ablate=False, data=None, device='cpu', **overrides): pass
    _check_overrides(fixed, 'p', {'llm_url': 'http://127.0.0.1:8080/v1'})
    _check_overrides(loose, 'p', {'anything': 1})
    with pytest.raises(ValueError, match=r"p: reproduce takes no --set bogus, seed \(it takes: llm_url\)"):
        _check_overrides(fixed, 'p', {'bogus': 1, 'seed': 3})
    args = build_parser().parse_args(['reproduce', 'rational_llm', '--set', 'llm_model=gemma', '--set', 'n=3'])
    assert args.set == ['llm_model=gemma', 'n=3']
