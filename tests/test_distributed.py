"""Data-parallel training through torchrun (gloo on CPU, 2 processes): the 2-process curve is the 1-process one with
the same global batch, a run stopped mid-way resumes with 1 process from the 2-process checkpoint, rank 0 alone
writes files, and bad launch values exit 2. Each torchrun start costs about 5 s here."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from iclr25_nb.cli import main
from iclr25_nb.core import CheckpointLock, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]
RTOL = 1e-5   # demo, full-batch gradient descent: 2 half-batch means vs one mean, float32 reduction order only
ENV = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONPATH': str(ROOT)}


def train(*args, nproc=1, timeout=150):
    cmd = [sys.executable, '-m', 'iclr25_nb.cli', 'train', *args, '--nproc', str(nproc)]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def losses(folder, key='loss') -> list[float]:
    "The metric `key` at every step that reports it (evaluation metrics come every `eval_every` steps)."
    return [h[key] for h in load_checkpoint(Path(folder) / 'checkpoint.pt')['history'] if key in h]


def assert_curves_close(a, b, rtol):
    assert len(a) == len(b) > 0
    worst = max(abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b))
    assert worst <= rtol, f"curves differ by {worst:.3g} (relative), tolerance {rtol}"


STDOUT = {}   # the demo runs' output, by process count


@pytest.fixture(scope='module')
def demo_runs(tmp_path_factory):
    "The demo, 20 full-batch steps, in 1 and in 2 processes."
    one, two = tmp_path_factory.mktemp('one'), tmp_path_factory.mktemp('two')
    STDOUT[1] = train('demo', '--set', 'steps=20', '--checkpoint-dir', str(one)).stdout
    STDOUT[2] = train('demo', '--set', 'steps=20', '--checkpoint-dir', str(two), nproc=2).stdout
    return one, two


@pytest.mark.parametrize('nproc,backend', [(1, 'none'), (2, 'gloo')])
def test_train_says_how_it_runs_once_and_in_its_json_line(demo_runs, nproc, backend):
    out = STDOUT[nproc]
    line = f"train demo: world size {nproc}, backend {backend}, device cpu, seed 0"
    assert out.count('world size') == 1 and line in out, out[-2000:]                  # once: rank 0 alone
    last = json.loads(out.strip().splitlines()[-1])
    assert {k: last[k] for k in ('world_size', 'backend', 'device', 'seed', 'step')} == \
        {'world_size': nproc, 'backend': backend, 'device': 'cpu', 'seed': 0, 'step': 20}


def test_two_processes_follow_the_one_process_curve(demo_runs):
    one, two = demo_runs
    assert_curves_close(losses(two), losses(one), RTOL)
    a, b = (load_checkpoint(d / 'checkpoint.pt')['experiment']['objects']['model'] for d in demo_runs)
    assert list(b) == ['weight', 'bias']                       # the unwrapped module's state, no 'module.' prefix
    for k in a: torch.testing.assert_close(b[k], a[k], rtol=RTOL, atol=1e-6)
    assert sorted(p.name for p in two.iterdir()) == ['checkpoint.pt']   # one file, no temporary left over


def test_resume_with_one_process_from_a_two_process_checkpoint(demo_runs, tmp_path):
    one, _ = demo_runs
    train('demo', '--set', 'steps=20', '--checkpoint-dir', str(tmp_path), '--max-steps', '10', nproc=2)
    assert load_checkpoint(tmp_path / 'checkpoint.pt')['experiment']['step_count'] == 10
    r = train('demo', '--set', 'steps=20', '--checkpoint-dir', str(tmp_path), '--resume')
    assert 'resumed from step 10' in r.stdout
    assert_curves_close(losses(tmp_path), losses(one), RTOL)


def test_a_killed_two_process_run_resumes_with_one_process(tmp_path):
    "SIGTERM to `iclr25 train --nproc 2` mid-run: both ranks stop after the same step and rank 0 saves."
    cmd = [sys.executable, '-m', 'iclr25_nb.cli', 'train', 'demo', '--set', 'steps=100000', '--set', 'delay=0.01',
           '--checkpoint-dir', str(tmp_path), '--checkpoint-every', '0.2', '--nproc', '2']
    p = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not (tmp_path / 'checkpoint.pt').exists() and time.monotonic() - t0 < 60: time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0
    step = load_checkpoint(tmp_path / 'checkpoint.pt')['experiment']['step_count']
    assert 0 < step < 100000, err[-2000:]
    r = train('demo', '--set', 'steps=100000', '--set', 'delay=0.01', '--checkpoint-dir', str(tmp_path), '--resume',
              '--max-steps', str(step + 3))
    assert f'resumed from step {step}' in r.stdout and '"step": %d' % (step + 3) in r.stdout


RANKS_SCRIPT = textwrap.dedent('''
    import sys
    from pathlib import Path
    import torch.distributed as dist
    from iclr25_nb.core import BackgroundTrainer, RegressionConfig, RegressionDemo, Report
    from iclr25_nb.distributed import DistributedModule, process_group, rank, world_size
    out = Path(sys.argv[1])
    with process_group('cpu'):
        exp = RegressionDemo(RegressionConfig(steps=5), seed=0)
        assert world_size() == 2 and isinstance(exp.train_module('model'), DistributedModule)
        assert exp.train_module('model').weight is exp.model.weight          # attributes fall back to the module
        tr = BackgroundTrainer(exp, checkpoint_dir=out / f'ckpt{rank()}').start().join()
        assert tr.status == 'done' and tr.error is None, tr.error
        with Report.run('deeptage', 'quick', 0, False, 'cpu') as report: pass   # the registry only
        report.save(out / f'report{rank()}')
        assert all(h['step'] == i + 1 for i, h in enumerate(tr.history))
''')


def test_rank_zero_alone_writes_checkpoints_and_reports(tmp_path):
    script = tmp_path / 'ranks.py'; script.write_text(RANKS_SCRIPT)
    out = tmp_path / 'out'; out.mkdir()
    r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node=2',
                        str(script), str(out)], capture_output=True, text=True, cwd=ROOT, timeout=150, env=ENV)
    assert r.returncode == 0, r.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ['ckpt0', 'report0']
    assert (out / 'ckpt0' / 'checkpoint.pt').exists() and (out / 'report0' / 'report.json').exists()


@pytest.mark.parametrize('args,message', [
    (['--nproc', '0'], '--nproc must be at least 1'),
    (['--nproc', '2', '--nnodes', '0'], '--nnodes must be at least 1'),
    (['--nproc', '2', '--nnodes', '2'], '--nnodes 2 needs --rdzv-endpoint'),
    (['--nproc', '2', '--nnodes', '2', '--node-rank', '2', '--rdzv-endpoint', 'h:29500'],
     '--node-rank must be in 0..1'),
    (['--nproc', '2', '--nnodes', '2', '--rdzv-endpoint', 'h:0'], '--rdzv-endpoint must be HOST:PORT'),
    (['--nproc', '2', '--rdzv-endpoint', 'nohost'], '--rdzv-endpoint must be HOST:PORT'),
    (['--nproc', '2', '--set', 'lr=-1'], 'RegressionConfig.lr must be greater than 0'),
    (['--nproc', '2', '--device', 'mps'], 'mps'),
    (['--max-steps', '0'], '--max-steps must be at least 1'),
    (['--ddp-worker'], 'not started by torchrun'),
])
def test_bad_launch_values_exit_2_with_message(args, message, capsys):
    with pytest.raises(SystemExit) as e: main(['train', 'demo', *args])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_paper_that_has_not_opted_in_is_refused(capsys, monkeypatch):
    from iclr25_nb import cli
    from iclr25_nb.core import Experiment, RegressionDemo
    class NotOptedIn(RegressionDemo): ddp_modules = Experiment.ddp_modules
    monkeypatch.setattr(cli, '_experiment_factory', lambda name: NotOptedIn.from_preset)
    with pytest.raises(SystemExit) as e: main(['train', 'demo', '--nproc', '2'])
    assert e.value.code == 2 and 'has not opted in to data-parallel training' in capsys.readouterr().err


# The opted-in papers on tiny configs: (overrides, {metric: relative tolerance}). The tolerances are what data
# parallel changes by design: deeptage's BatchNorm normalises over each rank's shard; topolm's spatial loss is a
# correlation over the batch's stimuli, so it sees the shard, while its control (alpha = 0: a plain GPT, a mean
# loss) follows the 1-process curve to float precision (measured 5e-8) and TopoLM's CE nearly so (1.3e-4).
# netformer, eign and neural_fdm train on mean losses, so 2 processes are 1 up to float32 reduction order:
# measured 1.8e-6 (netformer's next-step MSE, ~1e-7 at the end on the linear toy, so relative round-off is larger),
# 1.4e-7 (every EIGN run: each rank sums its graphs' squared errors over the whole batch's masked edges) and
# 2.4e-7 (neural_fdm, FormFinder and the NN baseline). FormFinder's `residual` is left out: it is an identity
# (the FDM decoder is in equilibrium), ~1e-5 of round-off on forces ~100, where a relative tolerance means nothing.
PAPERS = {
    'deeptage': (['steps=8', 'eval_every=4', 'depth=4'], {'loss': 2e-2}),
    'topolm': (['steps=6', 'eval_every=100', 'corpus_tokens=2000', 'n_stimuli=8'],
               {'ce_control': 1e-5, 'ce_topo': 1e-3, 'loss': 5e-2}),
    'netformer': (['steps=20', 'eval_every=10'], {'loss': 1e-4, 'pearson_netformer': 1e-5}),
    'eign': (['n_nodes=30', 'n_train=4', 'n_val=2', 'n_test=2', 'batch_graphs=2', 'steps=6', 'eval_every=3',
              'hiddens=(4,)', 'lrs=(0.01,)'],
             {**{f'loss_{k}': 1e-5 for k in ('eign', 'eign_q0', 'hodge', 'hodge_inv', 'hodge_dir', 'line_graph', 'mlp')},
              'rmse_eign': 1e-5}),
    'neural_fdm': (['steps=8', 'test_size=4', 'batch_size=8', 'width=32', 'n_direct=1'],
                   {'loss': 1e-5, 'shape': 1e-5, 'nn_loss': 1e-5, 'nn_residual': 1e-5}),
}


@pytest.mark.parametrize('paper', list(PAPERS))
def test_opted_in_paper_trains_with_two_processes_like_one(paper, tmp_path):
    sets, tolerances = PAPERS[paper]
    args = [paper, *[a for s in sets for a in ('--set', s)]]
    train(*args, '--checkpoint-dir', str(tmp_path / 'one'))
    train(*args, '--checkpoint-dir', str(tmp_path / 'two'), nproc=2)
    for key, rtol in tolerances.items():
        assert_curves_close(losses(tmp_path / 'two', key), losses(tmp_path / 'one', key), rtol)


# -- a run's processes die with it; one writer per checkpoint folder ------------------------------------------
def _alive_with(marker: str) -> list[tuple[int, str]]:
    "(pid, command) of the live processes (zombies excluded) whose command line contains `marker`."
    out = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            cmd = Path(f'/proc/{pid}/cmdline').read_bytes().replace(b'\0', b' ').decode(errors='replace')
            state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
        except (OSError, IndexError): continue
        if marker in cmd and state != 'Z': out.append((int(pid), cmd))
    return out


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc')
def test_workers_die_with_their_launcher_killed_by_sigkill(tmp_path):
    """A scheduler kills the job's process group with SIGKILL: the launcher and torchrun die at once; the workers,
    in sessions of their own, must notice and stop within a few seconds, leaving a readable checkpoint."""
    ckpt = tmp_path / 'run'
    cmd = [sys.executable, '-m', 'iclr25_nb.cli', 'train', 'demo', '--set', 'steps=100000', '--set', 'delay=0.01',
           '--checkpoint-dir', str(ckpt), '--checkpoint-every', '0.2', '--nproc', '2']
    p = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)                       # its own process group, as under a scheduler
    try:
        t0 = time.monotonic()
        while not (ckpt / 'checkpoint.pt').exists() and p.poll() is None and time.monotonic() - t0 < 120: time.sleep(0.1)
        workers = [pid for pid, c in _alive_with(str(ckpt)) if '--ddp-worker' in c and 'torch.distributed.run' not in c]
        assert len(workers) == 2, (workers, p.poll())
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        err = p.communicate(timeout=30)[1]
    t0 = time.monotonic()
    while _alive_with(str(ckpt)) and time.monotonic() - t0 < 10: time.sleep(0.1)
    left = _alive_with(str(ckpt))
    for pid, _ in left: os.kill(pid, signal.SIGKILL)                   # never leave them behind, even on failure
    assert not left, f"still alive 10 s after the launcher's group was killed: {left}"
    state = load_checkpoint(ckpt / 'checkpoint.pt')                    # whole: saves are atomic
    assert state['experiment']['step_count'] > 0, err[-2000:]
    CheckpointLock(ckpt).acquire().release()   # the next run takes the folder: the lock was given back, or is stale
    assert sorted(p.name for p in ckpt.iterdir()) == ['checkpoint.pt']     # and no temporary is left


HOLD = ("import sys, time; from iclr25_nb.core import CheckpointLock; "
        "held = CheckpointLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)")


@pytest.mark.parametrize('nproc', [1, 2])
def test_a_second_run_on_a_held_checkpoint_folder_exits_naming_the_holder(tmp_path, nproc, capsys):
    "Another live run holds the folder: `train` exits 1 before it writes anything, naming that run's pid and host."
    holder = subprocess.Popen([sys.executable, '-c', HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env=ENV)
    try:
        assert holder.stdout.readline().strip() == 'held'
        code = main(['train', 'demo', '--set', 'steps=5', '--checkpoint-dir', str(tmp_path), '--nproc', str(nproc)])
        err = capsys.readouterr().err
    finally:
        holder.kill(); holder.wait()
    assert code == 1 and f'is in use by pid {holder.pid} on host' in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ['checkpoint.lock']     # nothing written
    assert main(['train', 'demo', '--set', 'steps=5', '--checkpoint-dir', str(tmp_path)]) == 0   # stale: taken over
    assert sorted(p.name for p in tmp_path.iterdir()) == ['checkpoint.pt']
