"The core contract: configs, the background trainer, checkpoints, reports, the registry."
import json
import re
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from iclr25_nb.core import (PAPERS, BackgroundTrainer, Claim, ConfigBase, Experiment, NonFiniteLossError,
                            RegressionConfig, RegressionDemo, Report, get_paper, load_checkpoint, save_checkpoint)

ROOT = Path(__file__).resolve().parents[1]


def demo(**kw): return RegressionDemo(RegressionConfig(**kw), seed=0)


# -- configs ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize('field,value,msg', [('lr', 0.0, 'lr must be greater than 0'), ('n', 1, 'n must be at least 2'),
                                             ('noise', -0.1, 'noise must be at least 0'), ('steps', 0, 'steps must be at least 1')])
def test_config_rejects_bad_values_naming_the_field(field, value, msg):
    with pytest.raises(ValueError, match=re.escape(f"RegressionConfig.{msg} (got {value!r})")): RegressionConfig(**{field: value})


def test_config_presets_and_unknown_fields():
    assert RegressionConfig.full().steps == 2000 and RegressionConfig.quick().steps == 200
    assert RegressionConfig.preset('full', lr=0.1).lr == 0.1
    with pytest.raises(ValueError, match=r"no field\(s\) \['bogus'\]"): RegressionConfig.quick(bogus=1)
    with pytest.raises(ValueError, match='preset must be'): RegressionConfig.preset('huge')
    with pytest.raises(ValueError, match='lr'): RegressionConfig().replace(lr=-1)


def test_experiment_rejects_wrong_config_type():
    with pytest.raises(TypeError, match='needs a RegressionConfig'): RegressionDemo(object())


# -- trainer ---------------------------------------------------------------------------------------------
def test_pause_resume_stop_and_no_leaked_threads():
    before = threading.active_count()
    tr = BackgroundTrainer(demo(steps=10**6, delay=0.001)).start()
    assert tr.wait(10) and tr.status == 'running'
    tr.pause(); time.sleep(0.05); s = tr.step; time.sleep(0.2)
    assert tr.step == s and tr.status == 'paused'
    tr.resume(); assert tr.wait(s + 10)
    tr.stop()
    assert tr.status == 'stopped' and not tr.alive and threading.active_count() == before
    h = tr.history
    assert [r['step'] for r in h] == list(range(1, tr.step + 1)) and tr.latest['step'] == tr.step


def test_run_to_completion_and_restart_refused():
    tr = BackgroundTrainer(demo(steps=30)).start().join(10)
    assert tr.status == 'done' and tr.step == 30 and tr.error is None
    with pytest.raises(RuntimeError, match='make a new BackgroundTrainer'): tr.start()


def test_nan_loss_stops_with_clear_error():
    tr = BackgroundTrainer(demo(lr=1.99, a=1e30, steps=1000)).start().join(10)
    assert tr.status == 'error' and isinstance(tr.error, NonFiniteLossError)
    assert 'loss=' in str(tr.error) and 'training stopped' in str(tr.error)
    with pytest.raises(NonFiniteLossError): tr.raise_error()


class Exploding(RegressionDemo):
    def step(self):
        if self.step_count == 5: raise RuntimeError('boom at step 5')
        return super().step()


def test_exception_in_step_is_surfaced_and_history_kept():
    tr = BackgroundTrainer(Exploding(RegressionConfig(steps=100))).start().join(10)
    assert tr.status == 'error' and 'boom at step 5' in str(tr.error) and len(tr.history) == 5


def test_step_must_return_scalars():
    class Bad(RegressionDemo):
        def step(self): return {'loss': [1, 2]}
    tr = BackgroundTrainer(Bad(RegressionConfig())).start().join(10)
    assert isinstance(tr.error, TypeError) and "metric 'loss'" in str(tr.error)


def test_checkpoint_roundtrip_resumes_identically(tmp_path):
    ref = demo(steps=60); ref.run()
    tr = BackgroundTrainer(demo(steps=60), checkpoint_dir=tmp_path, max_steps=25).start().join(10)
    assert tr.step == 25 and (tmp_path / 'checkpoint.pt').exists()
    tr2 = BackgroundTrainer(demo(steps=60), checkpoint_dir=tmp_path, resume=True)
    assert tr2.resumed_from == 25
    tr2.start().join(10)
    assert tr2.status == 'done' and [h['step'] for h in tr2.history] == list(range(1, 61))
    assert torch.equal(tr2.experiment.model.weight, ref.model.weight)   # same trajectory as an uninterrupted run


def test_checkpoint_is_weights_only_and_refuses_other_configs(tmp_path):
    BackgroundTrainer(demo(steps=5), checkpoint_dir=tmp_path).start().join(10)
    state = torch.load(tmp_path / 'checkpoint.pt', weights_only=True)   # raises if anything but plain data
    assert state['experiment']['step_count'] == 5
    with pytest.raises(ValueError, match='checkpoint was made with config'):
        BackgroundTrainer(demo(steps=6), checkpoint_dir=tmp_path, resume=True)
    (tmp_path / 'bad').mkdir(); (tmp_path / 'bad' / 'checkpoint.pt').write_bytes(b'not a checkpoint')
    with pytest.raises(ValueError, match='not a readable checkpoint'): load_checkpoint(tmp_path / 'bad' / 'checkpoint.pt')


def test_save_checkpoint_is_atomic(tmp_path, monkeypatch):
    path = save_checkpoint({'a': torch.ones(3)}, tmp_path / 'c.pt')
    def broken(obj, f): f.write(b'partial'); raise OSError('disk full')
    monkeypatch.setattr(torch, 'save', broken)
    with pytest.raises(OSError, match='disk full'): save_checkpoint({'a': torch.zeros(3)}, path)
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)['a'], torch.ones(3))   # the old checkpoint survives
    assert [p.name for p in tmp_path.iterdir()] == ['c.pt']          # no temporary file left behind


def test_sigkill_mid_run_then_resume(tmp_path):
    "Kill -9 a training process while it checkpoints; the checkpoint left is whole and resuming finishes the run."
    args = [sys.executable, '-m', 'iclr25_nb.cli', 'train', 'demo', '--set', 'steps=400', '--set', 'delay=0.002',
            '--checkpoint-dir', str(tmp_path), '--checkpoint-every', '0.05']
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    ck = tmp_path / 'checkpoint.pt'
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        if ck.exists() and load_checkpoint(ck)['experiment']['step_count'] > 50: break
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL); p.wait(10)
    killed_at = load_checkpoint(ck)['experiment']['step_count']
    assert 50 < killed_at < 400
    r = subprocess.run(args + ['--resume'], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f'resumed from step {killed_at}' in r.stdout
    assert json.loads(r.stdout.strip().splitlines()[-1])['step'] == 400
    state = load_checkpoint(ck)
    assert [h['step'] for h in state['history']] == list(range(1, 401))


# -- reports ---------------------------------------------------------------------------------------------
def test_claims():
    assert Claim.compare('x', 2.0, '>', 1).holds and not Claim.compare('x', float('nan'), '<', 1).holds
    assert Claim.compare('x', 1.0, '>=', 1).expected == '>= 1'
    assert Claim.between('x', 0.5, 0, 1).holds and not Claim.between('x', 2, 0, 1).holds
    with pytest.raises(ValueError, match='op must be one of'): Claim.compare('x', 1, '==', 1)


def test_report_formats(tmp_path):
    import plotly.graph_objects as go
    r = Report('demo', 'Demo', meta={'seed': 0})
    r.add_row('a', mse=0.5, note='x|y').add_row('b', mse=float('inf'))
    r.add_claim(Claim.compare('a beats b', 0.5, '<', 1.0)).add_claim(Claim.compare('fails', 2.0, '<', 1.0))
    r.figures['f'] = go.Figure(go.Scatter(y=[1, 2, 3])); r.figures['g'] = go.Figure(go.Bar(y=[1]))
    assert not r.all_hold
    md = r.to_markdown()
    assert '| sanity | a beats b | 0.5 | < 1 |  |  |  |  | yes |' in md and '**no**' in md and 'x\\|y' in md
    d = json.loads(r.to_json())
    assert d['rows'][1]['mse'] == 'inf' and d['all_hold'] is False and set(d['figures']) == {'f', 'g'}
    assert Report.from_json(r.to_json()).to_markdown() == md
    paths = r.save(tmp_path)
    html = paths['html'].read_text()
    assert html.count('plotly.js v') == 1                      # plotly.js inlined once for two figures
    assert '<script src="http' not in html and 'cdn.plot.ly' not in html.split('plotly.js v')[0]
    with pytest.raises(TypeError, match='needs a Claim'): r.add_claim(('x', 1, 2, True))


# -- registry --------------------------------------------------------------------------------------------
def test_registry_lists_nineteen_papers():
    assert len(PAPERS) == 19 and [p.number for p in PAPERS.values()] == list(range(10, 29))
    with pytest.raises(ValueError, match='unknown paper'): get_paper('resnet')
    planned = [p for p in PAPERS.values() if not p.implemented]
    if planned:
        with pytest.raises(ValueError, match='not implemented yet'): planned[0].load()


def test_import_is_light():
    code = 'import sys, time; t=time.perf_counter(); import iclr25_nb; print(time.perf_counter()-t, "torch" in sys.modules, "panel" in sys.modules)'
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT).stdout.split()
    assert out[1:] == ['False', 'False'], out


# -- one writer per checkpoint folder ----------------------------------------------------------------------
from iclr25_nb.core import (LOCK_NAME, CheckpointDirLocked, CheckpointLock, ItemError, each_item, item_failures,
                            pid_alive)

HOLD = ("import sys, time; from iclr25_nb.core import CheckpointLock; "
        "held = CheckpointLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(120)")


def test_a_second_live_run_on_a_folder_is_refused_naming_the_holder(tmp_path):
    holder = subprocess.Popen([sys.executable, '-c', HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT, env={**os.environ, 'PYTHONPATH': str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == 'held'
        tr = BackgroundTrainer(demo(steps=5), checkpoint_dir=tmp_path)
        with pytest.raises(CheckpointDirLocked) as e: tr.start()
        assert f'pid {holder.pid} on host' in str(e.value) and 'in use by' in str(e.value)
        assert e.value.holder['pid'] == holder.pid and tr.status == 'idle' and not tr.alive
        assert not (tmp_path / 'checkpoint.pt').exists()
    finally:
        holder.kill(); holder.wait()
    # its holder killed (no chance to clean up), the folder is free again: the kernel dropped the flock
    assert not pid_alive(holder.pid) and (tmp_path / LOCK_NAME).exists()
    tr = BackgroundTrainer(demo(steps=5), checkpoint_dir=tmp_path).start().join(10)
    assert tr.status == 'done' and sorted(p.name for p in tmp_path.iterdir()) == ['checkpoint.pt']


def test_a_stale_lock_of_a_dead_pid_is_taken_over_and_its_temporary_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, '-c', 'pass']); dead.wait()
    import socket
    (tmp_path / LOCK_NAME).write_text(json.dumps({'pid': dead.pid, 'host': socket.gethostname()}))
    (tmp_path / 'checkpoint.pt.x1y2.tmp').write_bytes(b'half a checkpoint')
    tr = BackgroundTrainer(demo(steps=10**6, delay=0.001), checkpoint_dir=tmp_path).start()
    assert tr.wait(3)
    assert json.loads((tmp_path / LOCK_NAME).read_text())['pid'] == os.getpid()    # held while it runs
    with pytest.raises(CheckpointDirLocked, match=f'pid {os.getpid()}'):             # a second trainer, same process
        BackgroundTrainer(demo(steps=5), checkpoint_dir=tmp_path).start()
    tr.stop()
    assert tr.status == 'stopped' and sorted(p.name for p in tmp_path.iterdir()) == ['checkpoint.pt']


def test_a_lock_from_another_host_is_refused_with_what_to_do(tmp_path):
    (tmp_path / LOCK_NAME).write_text(json.dumps({'pid': 123, 'host': 'node17', 'since': '2026-12-05T10:00:00+00:00'}))
    with pytest.raises(CheckpointDirLocked, match='pid 123 on host node17.*delete the lock file'):
        CheckpointLock(tmp_path).acquire()


# -- one bad item never kills a run --------------------------------------------------------------------------
def test_each_item_counts_the_items_own_failures_and_stops_on_program_errors():
    def answer(prompt):
        if prompt == 'bad': raise ItemError(f"a prompt of {len(prompt) * 1000} tokens exceeds the context")
        if prompt == 'odd': raise ValueError('malformed item 7')
        return prompt.upper()
    r = Report(paper='demo')
    with item_failures(r) as failed:
        assert each_item(answer, ['a', 'bad', 'b', 'bad', 'odd'], failed='') == ['A', '', 'B', '', '']
        with item_failures() as inner:                   # an inner block counts into the outer one too
            each_item(answer, ['bad'], failed=lambda item: f'<{item}>') == ['<bad>']
    assert inner.total == 1 and failed.total == 4
    assert r.meta['item_failures'] == {'ItemError: a prompt of # tokens exceeds the context': 3,
                                       'ValueError: malformed item #': 1}
    with pytest.raises(TypeError): each_item(lambda x: x + 1, [1, None])              # the program's fault
    with pytest.raises(ZeroDivisionError): each_item(lambda x: 1 / x, [1, 0], errors=(ItemError,))


# the papers' loops over items, each with an injected bad item
class _ContextLimitedModel:
    "A stand-in for iclr25_nb.llm.LocalLLM: `option_logprobs` fails as llama.cpp does on a prompt past its context."
    def __init__(self, too_long: str): self.too_long, self.calls = too_long, 0

    def option_logprobs(self, prompt, options):
        self.calls += 1
        if self.too_long in prompt: raise RuntimeError('llama_decode returned 1')
        return [-float(k) for k in range(len(options))]


def test_space_a_prompt_past_the_context_is_counted_and_evaluation_goes_on():
    from iclr25_nb import space
    items = space.generate('mrt', 4, 'text', 0)
    model = _ContextLimitedModel(items[2].prompt)
    with item_failures() as failed:
        out = space.evaluate(space.LikelihoodAgent(model), ['mrt'], items={'mrt': items})
    assert model.calls == 4 and 0 <= out['mrt']['accuracy'] <= 75                    # the bad item scores as wrong
    assert failed.as_meta() == {'ItemError: the model could not score this mrt prompt: llama_decode returned #': 1}
    nav = space.generate('route', 1, 'text', 0)
    calls = []
    def breaks_on_the_third_turn(messages):
        calls.append(1)
        if len(calls) == 3: raise ValueError('a history of 5000 tokens exceeds the context of 4096')
        return '{"action": "up"}'
    with item_failures() as failed:
        res = space.evaluate(space.CallableAgent(breaks_on_the_third_turn), ['route'], items={'route': nav})
    assert res['route']['success'] == 0.0 and failed.total == 1 and len(calls) == 3     # the episode ended there
    class Broken(space.Agent):
        def answer(self, item): raise AttributeError('a bug, not an item')
    with pytest.raises(AttributeError): space.evaluate(Broken(), ['mrt'], items={'mrt': items})


def test_rational_llm_a_bad_problem_is_counted_and_the_others_answered():
    import numpy as np
    from iclr25_nb import rational_llm as rl
    problems = rl.make_problems(5, seed=0)
    class SecondPromptTooLong:
        calls = 0
        def option_logprobs(self, prompt, options):
            self.calls += 1
            if self.calls == 2: raise RuntimeError('llama_decode returned 1')
            return [-1.0, -0.5]
    model = SecondPromptTooLong()
    with item_failures() as failed:
        rates = rl.ask_logprobs(model, problems, 'individual')['rates']
    assert np.isnan(rates[1]) and np.isfinite(np.delete(rates, 1)).all() and failed.total == 1
    def endpoint(messages):                                    # refuses the third prompt, as an HTTP 400 would
        endpoint.n += 1
        if endpoint.n == 3: raise ValueError('HTTP 400: the prompt exceeds the context length')
        return '{"choice": "B"}'
    endpoint.n = 0
    with item_failures() as failed:
        out = rl.ask(endpoint, problems, 'individual', 'cot')
    assert failed.total == 1 and out['failed'] == 1 and np.isnan(out['rates']).sum() == 1 and out['calls'] == 5


def test_mofflow_a_structure_the_matcher_fails_on_is_no_match_and_counted(monkeypatch):
    from iclr25_nb import mofflow
    def rms(c, t, tol='paper'):
        if c == 'degenerate': raise ValueError('singular lattice matrix')
        return 0.1
    monkeypatch.setattr(mofflow, 'rms_dist', rms)
    with item_failures() as failed:
        assert mofflow.match_rate([['degenerate', 'ok'], ['degenerate']], ['t1', 't2'], k=2) == (0.5, 0.1)
    assert failed.as_meta() == {'ValueError: singular lattice matrix': 2}
    monkeypatch.setattr(mofflow, 'rms_dist', lambda c, t, tol='paper': c.lattice)     # a bug: AttributeError
    with pytest.raises(AttributeError): mofflow.match_rate(['x'], ['t'])
