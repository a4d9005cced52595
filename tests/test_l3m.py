"Properties, closed forms, cross-checks with scipy and bad input of iclr25_nb.l3m."
import math

import numpy as np
import pytest
import torch

from iclr25_nb import l3m as L


# -- the relaxed barrier ----------------------------------------------------------------------------------------
@pytest.mark.parametrize('mu', [1.0, 0.3, 0.01])
def test_barrier_value_and_derivative_identities(mu):
    s = mu ** 2
    f64 = dict(dtype=torch.float64)
    z = torch.cat([torch.linspace(-3, -s * 1.001, 200, **f64), torch.linspace(-s * 0.999, 2, 200, **f64)])
    B = L.relaxed_log_barrier(z, mu)
    log_side, lin_side = z <= -s, z > -s
    assert torch.allclose(B[log_side], -mu * torch.log(-z[log_side]))
    assert torch.allclose(B[lin_side], (mu / s) * z[lin_side] + mu - mu * math.log(s))
    lam = L.barrier_weight(z, mu)
    assert torch.allclose(lam[log_side], mu / -z[log_side]) and torch.allclose(lam[lin_side], torch.full_like(
        lam[lin_side], 1 / mu))
    zz = z.clone().requires_grad_()
    (g,) = torch.autograd.grad(L.relaxed_log_barrier(zz, mu).sum(), zz)
    assert torch.allclose(g, lam)


@pytest.mark.parametrize('mu', [1.0, 0.1, 0.01])
def test_barrier_continuous_and_c1_at_the_relaxation_point(mu):
    s, eps = mu ** 2, 1e-10
    left, right = torch.tensor(-s - eps * s).double(), torch.tensor(-s + eps * s).double()
    assert abs(L.relaxed_log_barrier(left, mu) - L.relaxed_log_barrier(right, mu)) < 1e-6
    assert abs(L.relaxed_log_barrier(-s, mu) - (-mu * math.log(s))) < 1e-12
    assert abs(L.barrier_weight(left, mu) - L.barrier_weight(right, mu)) / (1 / mu) < 1e-6


def test_barrier_convex_increasing_and_limits():
    z = torch.linspace(-2, 2, 2001, dtype=torch.float64)
    for mu in (1.0, 0.1, 0.01):
        B = L.relaxed_log_barrier(z, mu)
        assert (B.diff() > 0).all() and (B.diff().diff() > -1e-9).all()
    assert float(L.relaxed_log_barrier(-0.5, 1e-6)) < 1e-5            # feasible: B -> 0 as mu -> 0
    assert float(L.relaxed_log_barrier(0.01, 1e-3)) > 5                # infeasible: B -> +inf as mu -> 0
    assert float(L.barrier_weight(10.0, 0.05)) == pytest.approx(20.0)  # the weight is bounded by 1 / mu


def test_one_dimensional_closed_form():
    "min (theta - 1)^2 s.t. theta <= 0: theta* = -u, u = (sqrt(1 + 2 mu) - 1) / 2 (log branch), 1 - 1/(2 mu) beyond."
    cases = ((1.0, 0.5, 1.0), (0.1, -0.04772, 2.095), (0.01, -0.004975, 2.0100), (0.001, -0.00049975, 2.0010))
    for mu, want, lam in cases:
        th = torch.zeros(1, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([th], max_iter=500, line_search_fn='strong_wolfe', tolerance_grad=1e-14,
                                tolerance_change=1e-16)

        def closure():
            opt.zero_grad(); loss = (th - 1).pow(2).sum() + L.relaxed_log_barrier(th, mu).sum(); loss.backward()
            return loss
        opt.step(closure)
        assert th.item() == pytest.approx(want, rel=1e-3, abs=1e-6)
        assert float(L.barrier_weight(th.detach(), mu)) == pytest.approx(lam, rel=1e-3)


def test_barrier_bad_input():
    for mu in (0.0, -1.0, float('nan'), float('inf'), True):
        with pytest.raises(ValueError, match='mu'): L.relaxed_log_barrier(-1.0, mu)
    with pytest.raises(ValueError, match='relaxation'): L.barrier_weight(-1.0, 0.1, s=0.0)
    with pytest.raises(ValueError, match='NaN'): L.relaxed_log_barrier(torch.tensor([float('nan')]), 0.1)


# -- schedule, constraints, estimator ---------------------------------------------------------------------------
def test_schedule_is_exponential_then_held():
    s = L.MuSchedule(1.0, 1e-2, steps=11, frac=0.5)
    mus = np.array([s(t) for t in range(11)])
    assert mus[0] == 1.0 and mus[5] == pytest.approx(0.01) and (mus[5:] == pytest.approx(0.01))
    assert np.allclose(np.diff(np.log(mus[:6])), np.log(0.01) / 5)
    assert L.MuSchedule(0.3, 0.01, kind='const')(50) == 0.3
    for bad in (dict(mu0=0.1, mu_min=1.0), dict(mu_min=0.0), dict(steps=0), dict(kind='cosine'), dict(frac=0.0)):
        with pytest.raises(ValueError): L.MuSchedule(**bad)


def test_constraint_parts_and_bad_input():
    c = L.Constraint('reward', lambda r: r, lower=0.5, scale=2.0)
    assert c.names == ['reward>=0.5'] and torch.allclose(c.values(torch.tensor([1.5])), torch.tensor([[-0.5]]).double())
    with pytest.raises(ValueError, match='no bound'): L.Constraint('x', len)
    with pytest.raises(ValueError, match='scale'): L.Constraint('x', len, upper=1, scale=0)
    with pytest.raises(ValueError, match='exceeds'): L.length_band(10, 6)


@pytest.mark.parametrize('estimator', L.ESTIMATORS)
def test_score_function_estimate_is_unbiased(estimator):
    "Monte Carlo: the mean of the estimated gradient of E_pi[cost] is the exact gradient (within 4 standard errors)."
    theta = torch.tensor([0.5, -1.0, 0.2, 0.0, 1.0], dtype=torch.float64, requires_grad=True)
    cost = torch.tensor([3.0, 1.0, 2.5, 4.0, 2.0], dtype=torch.float64)
    (exact,) = torch.autograd.grad(torch.softmax(theta, 0) @ cost, theta)
    g, reps, G, K = torch.Generator().manual_seed(1), 2000, 8, 4
    y = torch.multinomial(torch.softmax(theta, 0).detach(), reps * G * K, True, generator=g).view(reps, G, K)
    logp = torch.log_softmax(theta, 0)
    grads = torch.stack([torch.autograd.grad(L.score_surrogate(cost[y[i]][None], logp[y[i]], estimator).sum(), theta,
                                             retain_graph=True)[0] for i in range(reps)])
    se = grads.std(0) / math.sqrt(reps)
    assert ((grads.mean(0) - exact).abs() <= 4 * se + 1e-12).all()


def test_leave_one_out_baseline_reduces_variance():
    theta = torch.tensor([0.5, -1.0, 0.2, 0.0], dtype=torch.float64, requires_grad=True)
    cost = torch.tensor([13.0, 11.0, 12.5, 14.0], dtype=torch.float64)        # an offset, as lengths have
    g = torch.Generator().manual_seed(2)
    y = torch.multinomial(torch.softmax(theta, 0).detach(), 500 * 16, True, generator=g).view(500, 4, 4)
    logp = torch.log_softmax(theta, 0)
    var = {}
    for e in L.ESTIMATORS:
        gs = torch.stack([torch.autograd.grad(L.score_surrogate(cost[y[i]][None], logp[y[i]], e).sum(), theta,
                                              retain_graph=True)[0] for i in range(500)])
        var[e] = gs.var(0).sum().item()
    assert var['rloo'] < 0.2 * var['none']


def test_estimator_bad_input():
    logp = torch.zeros(3, 4)
    with pytest.raises(ValueError, match='estimator'): L.score_surrogate(torch.zeros(1, 3, 4), logp, 'ppo')
    with pytest.raises(ValueError, match='shape|must be'): L.score_surrogate(torch.zeros(1, 3, 5), logp)
    with pytest.raises(ValueError, match='2 samples'): L.score_surrogate(torch.zeros(1, 3, 1), torch.zeros(3, 1))


# -- objectives -------------------------------------------------------------------------------------------------
def test_objective_exact_gradient_is_the_barrier_gradient():
    theta = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    con = L.Constraint('t', lambda t: t, upper=0.0)
    task = lambda _: (theta - 1).pow(2).sum()
    obj = L.L3MObjective(task, con, L.MuSchedule(0.1, 0.1, kind='const'))
    loss, info = obj(0, None, C=theta[:1])
    (g1,) = torch.autograd.grad(loss, theta)
    (g2,) = torch.autograd.grad(task(None) + L.relaxed_log_barrier(theta[:1], 0.1).sum(), theta)
    assert torch.allclose(g1, g2) and info['weights'][0] == pytest.approx(1 / 0.1)   # infeasible: 1 / mu


def test_ablated_objective_is_sft_and_baselines_weights():
    con = L.length_band(6, 10)
    lengths = torch.full((2, 4), 20.0)
    logp = torch.zeros(2, 4, requires_grad=True)
    off = L.L3MObjective(lambda _: torch.zeros(()), con, L.MuSchedule(), barrier=False)
    loss, info = off(0, None, logp=logp, responses=lengths)
    assert info['weights'] == [0.0, 0.0] and float(loss) == 0.0
    fixed = L.FixedPenalty(lambda _: torch.zeros(()), con, weight=3.0)
    assert fixed(0, None, logp=logp, responses=lengths)[1]['weights'] == [3.0, 3.0]
    dual = L.DualAscent(lambda _: torch.zeros(()), con, lr_dual=0.5)
    w0 = dual.observe(torch.tensor([1.0, -1.0]), 0); w1 = dual.observe(torch.tensor([1.0, -1.0]), 1)
    assert w0.tolist() == [0.0, 0.0] and w1.tolist() == [0.5, 0.0]     # lambda <- max(0, lambda + eta C)
    with pytest.raises(ValueError, match='multiplier'): L.L3MObjective(None, con, L.MuSchedule(), multiplier='x')
    with pytest.raises(ValueError, match='weight'): L.FixedPenalty(None, con, weight=-1)
    with pytest.raises(ValueError, match='lr_dual'): L.DualAscent(None, con, lr_dual=0)
    with pytest.raises(ValueError, match='pass exact'): off(0, None)


# -- the exact testbed ------------------------------------------------------------------------------------------
def test_bandit_kkt_against_scipy_and_numbers():
    b = L.CategoricalBandit.default()
    kkt, ref = b.kkt_solution(), b.scipy_solution()
    assert ref['success'] and abs(kkt['H'] - ref['H']) < 1e-6 and abs(ref['mean'] - 30) < 1e-4
    assert kkt['lam'][0] / b.scale == pytest.approx(0.0343, abs=1e-4) and kkt['H'] == pytest.approx(4.3755, abs=1e-4)
    assert float(b.p @ b.lengths) == pytest.approx(74.6, abs=0.05)
    # stationarity: grad_pi H + nu + lambda len = 0 on the simplex, i.e. p / pi* - lambda (len - u) = 1
    lam = kkt['lam'][0] / b.scale
    assert np.allclose(b.p / kkt['pi'] - lam * (b.lengths - 30), 1.0)


def test_bandit_lower_bound_active_and_interior_cases():
    L_ = np.linspace(1, 100, 20)
    p = np.exp(-L_ / 10); p /= p.sum()                                          # favours short responses
    b = L.CategoricalBandit(L_, p, lo=40, hi=90)
    kkt, ref = b.kkt_solution(), b.scipy_solution()
    assert kkt['lam'][0] == 0 and kkt['lam'][1] > 0 and abs(kkt['H'] - ref['H']) < 1e-6
    inside = L.CategoricalBandit(L_, np.full(20, 0.05), lo=10, hi=90).kkt_solution()
    assert inside['lam'] == [0.0, 0.0]


def test_l3m_reaches_the_kkt_point_and_rescaling_scales_the_multiplier():
    sols = {}
    for scale in (10.0, 20.0):
        b = L.CategoricalBandit.default(scale=scale)
        sols[scale] = L.solve_bandit(b, L.L3MObjective(b.task_loss, b.constraint, L.MuSchedule(1.0, 1e-4, steps=9)))
        kkt = b.kkt_solution()
        assert abs(sols[scale]['H'] - kkt['H']) < 1e-3
        assert sols[scale]['weights'][0] == pytest.approx(kkt['lam'][0], rel=0.02)
        assert sols[scale]['weights'][1] < 1e-3 * sols[scale]['weights'][0]     # the inactive bound
    assert sols[20.0]['weights'][0] == pytest.approx(2 * sols[10.0]['weights'][0], rel=0.02)   # c -> c / 2


def test_bandit_bad_input():
    with pytest.raises(ValueError, match='probability'): L.CategoricalBandit([1, 2], [0.5, 0.6], 1, 2)
    with pytest.raises(ValueError, match='band'): L.CategoricalBandit([1, 2], [0.5, 0.5], 0, 2)
    with pytest.raises(ValueError, match='1-D'): L.CategoricalBandit([1, 2, 3], [0.5, 0.5], 1, 2)


# -- the tiny LM ------------------------------------------------------------------------------------------------
def test_sampled_log_probs_equal_teacher_forced():
    task = L.SyntheticInstructionTask()
    torch.manual_seed(0)
    lm = L.TinyLM(task.vocab_size)
    pr = task.sample(6, np.random.default_rng(0))[0]
    g = torch.Generator().manual_seed(0)
    # sample step by step, recording the probability of each drawn token; compare with response_logp
    y, n = lm.sample(pr, 10, generator=g)
    lp, mask = lm.response_logp(pr, y, n)
    with torch.no_grad():
        manual = torch.zeros(len(pr))
        for i in range(len(pr)):
            seq = torch.cat([pr[i], y[i, :n[i] + 1]])
            logits = lm(seq[None, :-1])[0][0, pr.shape[1] - 1:]
            manual[i] = torch.log_softmax(logits, -1).gather(1, seq[pr.shape[1]:, None]).sum()
    assert torch.allclose(lp.sum(1), manual, atol=1e-5)
    assert (y.gather(1, n[:, None]) == L.EOS).all() and (n <= 10).all()


def test_task_lengths_and_decode():
    task = L.SyntheticInstructionTask()
    pr, rs, ln = task.sample(4000, np.random.default_rng(1))
    assert abs(ln.float().mean().item() - 20) < 0.4 and ln.min() >= 3 and ln.max() <= 40
    assert (rs.gather(1, ln[:, None]) == L.EOS).all()
    assert task.decode(rs[0]).split()[0].startswith(L.TOPICS[int(pr[0, 1]) - 4])
    with pytest.raises(ValueError): L.SyntheticInstructionTask(n_topics=0)
    with pytest.raises(ValueError): L.TinyLM(3)


def test_experiment_config_bad_input_and_data():
    with pytest.raises(ValueError, match='band'): L.make_experiment('quick', band=(10.0, 6.0))
    with pytest.raises(ValueError, match='mu_min'): L.make_experiment('quick', mu0=0.01, mu_min=0.1)
    with pytest.raises(ValueError, match='methods'): L.make_experiment('quick', methods=('ppo',))
    with pytest.raises(ValueError, match='dual_grid'): L.make_experiment('quick', dual_grid=(0.1, 0.1))
    with pytest.raises(ValueError, match='data'): L.reproduce(data='ultrachat.json')


@pytest.mark.slow
def test_short_finetune_moves_l3m_towards_the_band_and_checkpoints():
    exp = L.make_experiment('quick', seed=0, pretrain_steps=30, steps=3, methods=('sft', 'l3m'), eval_samples=32,
                            n_heldout=32)
    hist = exp.run()
    assert len(hist) == 33 and hist[-1]['lam_hi_sft'] == 0 and hist[-1]['lam_hi_l3m'] > 0
    state = exp.state_dict()
    exp2 = L.make_experiment('quick', seed=0, pretrain_steps=30, steps=3, methods=('sft', 'l3m'), eval_samples=32,
                             n_heldout=32)
    exp2.load_state_dict(state)
    for k, v in exp.models['l3m'].state_dict().items(): assert torch.equal(v, exp2.models['l3m'].state_dict()[k])
    ev = exp.evaluate()
    assert set(f'nll_{n}' for n in ('sft', 'l3m')) <= set(ev)


# -- real text ----------------------------------------------------------------------------------------------------
def test_load_text_and_text_task_on_tiny_shakespeare(shared_data):
    path = shared_data / 'text' / 'tinyshakespeare.txt'
    if not path.exists(): pytest.skip(f'no {path}')
    text = L.load_text(path, min_chars=100)
    assert len(text) > 10**6 and text.startswith('First Citizen:')
    task = L.TextTask(text, context_len=32, max_len=48)
    assert task.vocab.chars == sorted(set(text)) and task.vocab_size == 4 + len(set(text))
    assert task.vocab.decode(task.vocab.encode(text[:500])) == text[:500]
    held = set(task.starts[task.n_train:].tolist())
    assert held and held.isdisjoint(task.starts[:task.n_train].tolist())
    for split in ('train', 'heldout'):
        pr, rs, ln = task.sample(200, np.random.default_rng(0), split=split)
        assert pr.shape == (200, 34) and rs.shape == (200, 49) and 1 <= ln.min() and ln.max() <= 48
        assert (rs.gather(1, ln[:, None]) == L.EOS).all()
        for p, r, n in zip(pr[:20], rs[:20], ln[:20]):
            line = task.decode(r)
            assert len(line) == n and task.decode(p[1:-1]) + line + '\n' in text and '\n' not in line
    exp = L.make_experiment('quick', seed=0, data_path=str(path), pretrain_steps=2, steps=1, methods=('l3m',),
                            eval_samples=16, n_heldout=16)
    assert isinstance(exp.task, L.TextTask) and exp.models['l3m'].head.out_features == task.vocab_size


@pytest.mark.parametrize('content, problem', [
    (b'', 'is empty'), (b' \n\t\n', 'only whitespace'), (b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR', 'binary'),
    ('caf\u00e9 au lait\n'.encode('latin-1'), 'not UTF-8'), (b'too short\n', 'too short')])
def test_load_text_broken_files(tmp_path, content, problem):
    p = tmp_path / 'corpus.txt'
    p.write_bytes(content)
    with pytest.raises(ValueError, match=problem) as e: L.load_text(p, min_chars=50)
    assert 'corpus.txt' in str(e.value)


def test_load_text_missing_and_folder_and_line_endings(tmp_path):
    with pytest.raises(ValueError, match='no such file'): L.load_text(tmp_path / 'nope.txt')
    with pytest.raises(ValueError, match='not a file'): L.load_text(tmp_path)
    p = tmp_path / 'crlf.txt'
    p.write_bytes('\ufeffa\r\nb\rc\n'.encode('utf-8'))
    assert L.load_text(p) == 'a\nb\nc\n'


def test_text_task_bad_input(tmp_path):
    with pytest.raises(ValueError, match='at least 2'): L.TextTask('x' * 500, context_len=8, max_len=48)
    with pytest.raises(ValueError, match='context_len'): L.TextTask('ab\ncd\n', context_len=0)
    with pytest.raises(ValueError, match='repetitive'): L.TextTask('ab\ncd\nef\n' * 10, context_len=4, max_len=8)
    task = L.TextTask(''.join(f'ab{i}\ncd\n' for i in range(10)), context_len=4, max_len=8)
    with pytest.raises(ValueError, match='split'): task.sample(2, np.random.default_rng(0), split='test')
    with pytest.raises(ValueError, match='vocabulary'): task.vocab.encode('Q')
    with pytest.raises(ValueError, match='data_path'): L.make_experiment('quick', data_path='')
    with pytest.raises(ValueError, match='reward_min'): L.make_experiment('quick', reward_min=0.5)   # synthetic: none
    with pytest.raises(ValueError, match='reward_min'): L.make_experiment('quick', data_path='x.txt', reward_min=2.0)
    short = tmp_path / 'short.txt'
    short.write_text('a few words\n' * 5, encoding='utf-8')
    with pytest.raises(ValueError, match=r'short\.txt.*too short'): L.make_experiment('quick', data_path=str(short))
    with pytest.raises(ValueError, match=r'data.*nope\.txt.*no such file'): L.reproduce(data=str(tmp_path / 'nope.txt'))


def test_text_reward_is_the_end_punctuation_indicator():
    task = L.TextTask('Speak, speak.\nAll:\nno end here\nWhy?\n' * 5 + 'the very end.\n', context_len=4, max_len=20)
    lines = ['Speak, speak.', 'All:', 'no end here', 'Why?', '']
    ids = [task.vocab.encode(x) for x in lines]
    resp = torch.zeros(len(lines), 21, dtype=torch.long)
    for i, x in enumerate(ids): resp[i, :len(x)] = torch.as_tensor(x); resp[i, len(x)] = L.EOS
    r = task.reward(resp, torch.tensor([len(x) for x in ids]))
    assert r.tolist() == [1.0, 1.0, 0.0, 1.0, 0.0]


def test_two_constraints_on_text_give_three_multipliers(tmp_path):
    "A tiny run with the length band and the reward threshold: three multipliers per step, all non-negative."
    ok = tmp_path / 'lines.txt'
    ok.write_text(''.join(f'line {i}{"." if i % 3 else ""}\n' for i in range(200)), encoding='utf-8')
    exp = L.make_experiment('quick', seed=0, data_path=str(ok), pretrain_steps=2, steps=2, methods=('l3m', 'dual'),
                            dual_grid=(0.1,), band=(2.0, 6.0), reward_min=0.5, max_len=12, context_len=4, d=8, hidden=8, prompts=2,
                            k_samples=2, sft_batch=4, eval_samples=16, n_heldout=16)
    hist = exp.run()
    assert all(h[f'lam_{s}_l3m'] >= 0 for h in hist[2:] for s in ('hi', 'lo', 'rw'))
    assert 0 <= hist[-1]['reward_l3m'] <= 1 and exp.objectives.items['l3m'].names[-1] == 'reward>=0.5'
    ev = exp.evaluate()
    assert 0 <= ev['reward_l3m'] <= 1 and math.isfinite(ev['lam_rw_l3m'])


@pytest.mark.slow
def test_experiment_on_a_small_text_file(tmp_path):
    ok = tmp_path / 'lines.txt'
    ok.write_text(''.join(f'line number {i} {"x" * (i % 20)}\n' for i in range(200)), encoding='utf-8')
    exp = L.make_experiment('quick', seed=0, data_path=str(ok), pretrain_steps=3, steps=2, methods=('sft', 'l3m'),
                            band=(5.0, 10.0), eval_samples=16, n_heldout=16)
    assert math.isnan(exp.evaluate()['lam_hi_l3m'])                     # before fine-tuning: no multiplier yet
    hist = exp.run()
    assert len(hist) == 5 and hist[-1]['lam_hi_l3m'] > 0
    ev = exp.evaluate()
    assert math.isfinite(ev['nll_l3m']) and 0 <= ev['len_l3m'] <= 48
    assert len(exp.snapshot()['sample_lengths']['l3m']) == len(exp.snapshot()['samples']['l3m'])


# -- identities that were claims (they hold by construction) ----------------------------------------------------
def test_bandit_identities_gap_multiplier_error_and_inactive_ratio():
    "The exact testbed: gap to the optimum <= 1e-3 nats, multiplier error <= 5%, inactive / active multiplier <= 1e-3."
    b = L.CategoricalBandit.default()
    kkt = b.kkt_solution()
    sol = L.solve_bandit(b, L.L3MObjective(b.task_loss, b.constraint, L.MuSchedule(1.0, 1e-4, steps=9)))
    assert abs(sol['H'] - kkt['H']) <= 1e-3
    assert abs(sol['weights'][0] - kkt['lam'][0]) / kkt['lam'][0] <= 0.05
    assert sol['weights'][1] / sol['weights'][0] <= 1e-3
    off = L.solve_bandit(b, L.L3MObjective(b.task_loss, b.constraint, L.MuSchedule(1.0, 1e-4, steps=9), barrier=False))
    assert abs(off['H'] - kkt['H']) > 0.5                                  # the ablation: the unconstrained optimum


def test_implied_multipliers_satisfy_perturbed_complementary_slackness():
    "On the log branch lambda_i (-C_i) = mu: an inactive constraint (large slack) gets a multiplier that vanishes with mu."
    obj = L.L3MObjective(None, L.length_band(6, 10), L.MuSchedule(1.0, 0.01, steps=11))
    C = torch.tensor([-0.05, -0.35], dtype=torch.float64)                  # upper nearly active, lower inactive
    for t in (0, 5, 10):
        lam = obj.multipliers(C, t)
        mu = obj.mu(t)
        if mu ** 2 < 0.05: assert torch.allclose(lam * -C, torch.full_like(C, mu))
        assert lam[1] / lam[0] == pytest.approx(0.05 / 0.35) or mu ** 2 >= 0.05


# -- held-out evaluation ----------------------------------------------------------------------------------------
def test_synthetic_heldout_pairs_never_occur_in_training():
    from iclr25_nb.core import overlap_count
    task = L.SyntheticInstructionTask()
    keys = lambda p, r: [tuple(a) + tuple(b) for a, b in zip(p.tolist(), r.tolist())]
    train = task.sample(20000, np.random.default_rng(0))
    held = task.sample(1000, np.random.default_rng(1), split='heldout')
    assert overlap_count(keys(*train[:2]), keys(*held[:2])) == 0
    assert task.pair_is_heldout(*held[:2]).all() and not task.pair_is_heldout(*train[:2]).any()
    exp = L.make_experiment('quick', seed=0, n_heldout=64, eval_samples=16)
    assert task.pair_is_heldout(exp.heldout[0].cpu(), exp.heldout[1].cpu()).all()


def test_text_heldout_passages_never_occur_in_training(shared_data):
    from iclr25_nb.core import overlap_count
    path = shared_data / 'text' / 'tinyshakespeare.txt'
    if not path.exists(): pytest.skip(f'no {path}')
    task = L.TextTask(L.load_text(path), context_len=32, max_len=48)
    train = [task.pair_key(i) for i in range(task.n_train)]
    held = [task.pair_key(i) for i in range(task.n_train, len(task.starts))]
    assert len(held) > 1000 and overlap_count(train, held) == 0
    pr, rs, ln = task.sample(300, np.random.default_rng(0), split='heldout')
    keys = {task.pair_key(i) for i in range(task.n_train, len(task.starts))}
    ids = lambda p, r, n: np.r_[p[1:-1].numpy(), r[:n].numpy()].astype(task.ids.dtype).tobytes()
    assert all(ids(p, r, n) in keys for p, r, n in zip(pr, rs, ln))


# -- the comparison at matched slack, the nulls -------------------------------------------------------------------
def test_merit_slack_and_the_rivals_envelope():
    ev = {'nll_sft': 2.0, 'len_sft': 17.0, 'violation_sft': 7.0}
    for n, (nll, ln) in {'a': (2.04, 9.8), 'b': (2.10, 8.5), 'c': (2.20, 7.5), 'x': (2.01, 11.0)}.items():
        ev.update({f'nll_{n}': nll, f'len_{n}': ln, f'violation_{n}': max(0.0, ln - 10, 6 - ln)})
    assert L.slack(ev, 'x', (6, 10)) == pytest.approx(-1.0) and L.merit(ev, 'x', 0.2) == pytest.approx(0.21)
    pts = [(L.slack(ev, n, (6, 10)), L.merit(ev, n, 0.2)) for n in 'abcx']
    # the envelope is non-decreasing in slack; at a run's own slack it is that run's merit when it is efficient
    assert L.rival_cost_at_slack(pts, 0.2) == pytest.approx(0.04)
    assert L.rival_cost_at_slack(pts, 2.5) == pytest.approx(0.20) and L.rival_cost_at_slack(pts, 9.0) == pytest.approx(0.2)
    assert L.rival_cost_at_slack(pts, -5) == pytest.approx(0.04)           # flat below: the cheapest run with more slack
    assert L.matched_slack_ratio(ev, 'a', list('abcx'), (6, 10), 0.2) == pytest.approx(1.0)
    assert L.matched_slack_ratio(ev, 'sft', list('abc'), (6, 10), 0.2) == pytest.approx(1.4 / 0.04)
    ev.update(nll_z=2.0, len_z=9.0, violation_z=0.0)                         # free: floored denominator, ratio 0
    assert L.matched_slack_ratio(ev, 'z', list('abc'), (6, 10), 0.2) == 0.0
    assert L.rivals(['sft', 'l3m', 'fixed_1', 'dual_0.1']) == ['fixed_1', 'dual_0.1']
    assert L.blind_fixed(['fixed_10', 'fixed_0.3', 'fixed_3', 'fixed_1']) == 'fixed_1'
    with pytest.raises(ValueError, match='no rival'): L.rival_cost_at_slack([], 0.0)


def test_eos_bias_shortens_samples_and_is_restored():
    task = L.SyntheticInstructionTask()
    torch.manual_seed(0)
    lm = L.TinyLM(task.vocab_size)
    pr = task.sample(128, np.random.default_rng(0))[0]
    b = L.fit_eos_bias(lm, pr, 6.0, 40, torch.Generator().manual_seed(0))
    assert lm.eos_bias == 0.0 and b > 0
    lm.eos_bias = b
    assert abs(float(lm.sample(pr, 40, torch.Generator().manual_seed(1))[1].double().mean()) - 6.0) < 1.5
    with pytest.raises(ValueError, match='target'): L.fit_eos_bias(lm, pr, 50.0, 40)
