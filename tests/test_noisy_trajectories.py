"""Properties of the noisy-trajectories metrics (Procrustes, SSD, full W2, causal OT) and bad-input tests."""
import math
import time
import warnings

import numpy as np
import pytest

from iclr25_nb import noisy_trajectories as nt
from iclr25_nb.noisy_trajectories import (GaussianProcessSummary, procrustes_distance, ssd, gp_w2, causal_ot, distance,
                                          objective_at, block_cholesky, bures_sq, adapted_bures_sq, METRICS)


def random_gp(T, N, rng, mean_scale=1.0, ridge=0.1):
    W = rng.standard_normal((T * N, T * N)) / math.sqrt(T * N)
    return GaussianProcessSummary(mean_scale * rng.standard_normal((T, N)), W @ W.T + ridge * np.eye(T * N))


def rand_orth(N, rng):
    Q, R = np.linalg.qr(rng.standard_normal((N, N)))
    return Q * np.sign(np.diag(R))


# ---- closed forms and special cases ---------------------------------------------------------------------------------
@pytest.mark.parametrize('gamma,eps', [(0.7, 0.5), (2.0, 1.3), (0.0, 1.0)])
def test_two_step_analytic(gamma, eps):
    X, Y = nt.two_step_process(gamma, eps)
    assert abs(ssd(X, Y).value - eps) < 1e-8
    assert abs(gp_w2(X, Y).value - eps) < 1e-8
    assert abs(causal_ot(X, Y).value - eps * math.sqrt(1 + 2 * gamma ** 2)) < 1e-8


@pytest.mark.parametrize('T', [1, 2, 5, 9])
def test_constant_vs_white_analytic(T):
    X, Y = nt.constant_vs_white(T)
    assert procrustes_distance(X, Y).value < 1e-12 and ssd(X, Y).value < 1e-8
    assert abs(gp_w2(X, Y).squared - (2 * T - 2 * math.sqrt(T))) < 1e-8
    assert abs(causal_ot(X, Y).squared - (2 * T - 2)) < 1e-8


def test_T1_equals_bures_and_pot():
    ot = pytest.importorskip('ot')
    rng = np.random.default_rng(0)
    for N in (1, 3, 6):
        x, y = random_gp(1, N, rng), random_gp(1, N, rng)
        pot = ot.gaussian.bures_wasserstein_distance(x.mean[0], y.mean[0], x.cov, y.cov)   # POT returns W, not W²
        for fn in (ssd, gp_w2, causal_ot):
            assert abs(objective_at(x, y, np.eye(N), fn.__name__.replace('gp_', '').replace('_ot', '')) - pot ** 2) < 1e-8
        assert abs(adapted_bures_sq(x.cov, y.cov, N) - bures_sq(x.cov, y.cov)) < 1e-8


def test_full_w2_at_fixed_Q_matches_pot_on_NT_gaussians():
    ot = pytest.importorskip('ot')
    rng = np.random.default_rng(1)
    x, y = random_gp(4, 3, rng), random_gp(4, 3, rng)
    pot = ot.gaussian.bures_wasserstein_distance(x.mean.ravel(), y.mean.ravel(), x.cov, y.cov)
    assert abs(objective_at(x, y, np.eye(3), 'w2') - pot ** 2) < 1e-8


def test_N1_equals_gunasingam_wong_columnwise():
    rng = np.random.default_rng(2)
    diffs = []
    for T in (2, 3, 6):
        x, y = random_gp(T, 1, rng), random_gp(T, 1, rng)
        L, M = np.linalg.cholesky(x.cov), np.linalg.cholesky(y.cov)
        # column-wise: (Lᵀ M)_ii is the dot product of column i of L with column i of M
        gw = np.trace(x.cov) + np.trace(y.cov) - 2 * np.abs(np.einsum('ri,ri->i', L, M)).sum()
        assert abs(adapted_bures_sq(x.cov, y.cov, 1) - gw) < 1e-10
        # the row-wise variant (the official code's upper-factor bug) is a different number
        row = np.trace(x.cov) + np.trace(y.cov) - 2 * np.abs(np.einsum('ir,ir->i', L, M)).sum()
        diffs.append(abs(row - gw))
    assert max(diffs) > 1e-3


def test_alpha_two_is_procrustes_and_alpha_zero_ignores_means():
    rng = np.random.default_rng(3)
    x, y = random_gp(3, 2, rng), random_gp(3, 2, rng)
    p = procrustes_distance(x, y).value
    for fn in (ssd, gp_w2, causal_ot):
        assert abs(fn(x, y, alpha=2.0).squared - 2 * p ** 2) < 1e-8
    y2 = GaussianProcessSummary(y.mean + 5.0, y.cov)
    for fn in (ssd, causal_ot):
        assert abs(fn(x, y, alpha=0.0, n_restarts=4).value - fn(x, y2, alpha=0.0, n_restarts=4).value) < 1e-6


# ---- metric axioms -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('metric', METRICS)
def test_metric_axioms_on_random_triples(metric):
    rng = np.random.default_rng(4)
    kw = {} if metric == 'procrustes' else dict(n_restarts=4)
    for _ in range(2):
        x, y, z = (random_gp(3, 2, rng) for _ in range(3))
        dxy, dyx = distance(metric, x, y, **kw).value, distance(metric, y, x, **kw).value
        assert distance(metric, x, x, **kw).value < 1e-6                                          # identity
        assert distance(metric, x, x.aligned(rand_orth(2, rng)), **kw).value < 1e-6               # rotation invariance
        assert abs(dxy - dyx) < 1e-6 and dxy >= 0                                                 # symmetry, non-negativity
        assert distance(metric, x, z, **kw).value <= dxy + distance(metric, y, z, **kw).value + 1e-6   # triangle


def test_permutation_and_identity_groups():
    rng = np.random.default_rng(5)
    x = random_gp(3, 4, rng)
    Pm = np.eye(4)[rng.permutation(4)]
    assert causal_ot(x, x.aligned(Pm), group='perm').value < 1e-6
    assert procrustes_distance(x, x.aligned(Pm), group='perm').value < 1e-12
    r = causal_ot(x, x.aligned(rand_orth(4, rng)), group='identity')
    assert r.value > 1e-3 and np.allclose(r.Q, np.eye(4)) and len(r.loss_history) == 1


# ---- ordering, equality, brute force -------------------------------------------------------------------------------
def test_ordering_ssd_w2_causal():
    rng = np.random.default_rng(6)
    for _ in range(4):
        x, y = random_gp(4, 2, rng), random_gp(4, 2, rng)
        s, w, c = (fn(x, y, n_restarts=3).value for fn in (ssd, gp_w2, causal_ot))
        assert s <= w + 1e-8 and w <= c + 1e-8
        # at any fixed Q too
        Q = rand_orth(2, rng)
        s2, w2, c2 = (objective_at(x, y, Q, m) for m in ('ssd', 'w2', 'causal'))
        assert s2 <= w2 + 1e-8 <= c2 + 2e-8


def test_temporally_independent_processes_all_equal():
    from scipy.linalg import block_diag
    rng = np.random.default_rng(7)
    def indep(T, N):
        blocks = [(lambda W: W @ W.T + 0.1 * np.eye(N))(rng.standard_normal((N, N))) for _ in range(T)]
        return GaussianProcessSummary(rng.standard_normal((T, N)), block_diag(*blocks))
    x, y = indep(4, 3), indep(4, 3)
    for Q in (np.eye(3), rand_orth(3, rng)):
        vals = [objective_at(x, y, Q, m) for m in ('ssd', 'w2', 'causal')]
        assert max(vals) - min(vals) < 1e-8


@pytest.mark.parametrize('N', [1, 2])
@pytest.mark.parametrize('metric', ['ssd', 'w2', 'causal'])
def test_brute_force_over_O_N_agrees_with_alternation(N, metric):
    rng = np.random.default_rng(8 + N)
    x, y = random_gp(4, N, rng), random_gp(4, N, rng)
    if N == 1: grid = [np.array([[1.0]]), np.array([[-1.0]])]
    else:
        th = np.linspace(0, 2 * np.pi, 1441)
        rot = lambda a: np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
        grid = [rot(a) @ np.diag([1, s]) for a in th for s in (1, -1)]
    aligner = nt.AlternatingAligner(x, y, metric)
    brute = min(aligner.evaluate(Q)[0] for Q in grid)
    assert abs(brute - min(objective_at(x, y, Q, metric) for Q in grid[:: max(1, len(grid) // 50)])) < 10
    alt = distance(metric, x, y, n_restarts=5).squared
    assert alt <= brute + 1e-6 and brute - alt < 1e-4


def test_explicit_synchronous_coupling_equals_closed_form():
    rng = np.random.default_rng(10)
    x, y = random_gp(3, 3, rng), random_gp(3, 3, rng)
    r = causal_ot(x, y, n_restarts=2)
    Lx, Ly = x.cholesky_blocks(), y.cholesky_blocks()
    Qb = np.kron(np.eye(3), r.Q)
    from scipy.linalg import block_diag
    # y' = Q̄(m_y + L_y P ε), x = m_x + L_x ε: E‖x − y'‖² with the fitted P_t
    cost = ((x.mean.ravel() - Qb @ y.mean.ravel()) ** 2).sum() + ((Lx - Qb @ Ly @ block_diag(*r.P)) ** 2).sum()
    assert abs(cost - r.squared) < 1e-8
    assert abs(r.per_time.sum() - r.squared) < 1e-8


def test_block_formula_invariant_to_square_root_choice():
    rng = np.random.default_rng(11)
    x, y = random_gp(4, 3, rng), random_gp(4, 3, rng)
    from scipy.linalg import block_diag
    R = block_diag(*[rand_orth(3, rng) for _ in range(4)])
    Lx, Ly = x.cholesky_blocks(), y.cholesky_blocks()
    s1 = np.linalg.svd(np.stack([Lx[:, 3 * t:3 * t + 3].T @ Ly[:, 3 * t:3 * t + 3] for t in range(4)]), compute_uv=False).sum()
    LyR = Ly @ R
    s2 = np.linalg.svd(np.stack([Lx[:, 3 * t:3 * t + 3].T @ LyR[:, 3 * t:3 * t + 3] for t in range(4)]), compute_uv=False).sum()
    assert abs(s1 - s2) < 1e-10


def test_loss_history_monotone():
    rng = np.random.default_rng(12)
    for metric in ('ssd', 'w2', 'causal'):
        x, y = random_gp(5, 3, rng), random_gp(5, 3, rng)
        h = distance(metric, x, y, n_restarts=3, seed=1).loss_history
        assert len(h) >= 2 and all(b <= a + 1e-9 for a, b in zip(h, h[1:]))


# ---- singular covariances and generators ------------------------------------------------------------------------------
def test_block_cholesky_singular_fallback():
    rng = np.random.default_rng(13)
    W = rng.standard_normal((12, 5))
    S = W @ W.T                                               # rank 5 of 12
    L = block_cholesky(S, 3)
    assert np.abs(L @ L.T - S).max() < 1e-9
    s_idx, t_idx = np.triu_indices(4, 1)
    assert np.abs(L.reshape(4, 3, 4, 3)[s_idx, :, t_idx, :]).max() < 1e-12   # block lower triangular
    _, Y = nt.two_step_process(0.7, 0.5)                      # Y1 = 0: plain Cholesky fails
    with pytest.raises(np.linalg.LinAlgError): np.linalg.cholesky(Y.cov)
    Ly = Y.cholesky_blocks(); assert np.allclose(Ly @ Ly.T, Y.cov)


def test_motor_generator_means_marginals_and_markov():
    A = nt.rotational_lds(N=6, T=7, rho=1.0, n_cond=2, obs_noise=0.0, seed=3)
    B = nt.rotational_lds(N=6, T=7, rho=0.0, n_cond=2, obs_noise=0.0, seed=3)
    H = nt.rotational_lds(N=6, T=7, rho=0.5, n_cond=2, obs_noise=0.0, seed=3)
    for a, b, h in zip(A, B, H):
        assert np.allclose(a.mean, b.mean) and np.allclose(a.marginals(), b.marginals()) and np.allclose(h.marginals(), a.marginals())
        assert np.allclose(h.block(4, 1), 0.5 * a.block(4, 1)) and np.allclose(b.block(4, 1), 0)
    a = A[0]                                                  # ρ = 1: a Markov (AR(1)) latent process
    for t in range(5):
        pred = a.block(t + 2, t + 1) @ np.linalg.pinv(a.block(t + 1, t + 1), rcond=1e-10) @ a.block(t + 1, t)
        assert np.abs(pred - a.block(t + 2, t)).max() < 1e-8


def test_empirical_covariance_of_sampled_trials():
    a = nt.rotational_lds(N=3, T=4, rho=1.0, n_cond=1, seed=0)[0]
    x = a.sample(100_000, np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        est = GaussianProcessSummary.from_trials(x, shrinkage=None, eps=0)
    assert np.abs(est.cov - a.cov).max() < 0.05 * np.abs(a.cov).max()
    assert np.abs(est.mean - a.mean).max() < 0.02 * np.abs(a.mean).max() + 0.02


def test_diffusion_samplers_share_marginals_not_dynamics():
    s, o = nt.diffusion_processes(4, 10, 'sde', 1, seed=2), nt.diffusion_processes(4, 10, 'ode', 1, seed=2)
    assert np.allclose(s.mean, o.mean) and np.allclose(s.marginals(), o.marginals(), atol=1e-12)
    assert np.linalg.matrix_rank(o.cov, tol=1e-8) == 4                      # ODE: a deterministic map of the initial noise
    for k in range(8):                                                     # SDE: Markov
        pred = s.block(k + 2, k + 1) @ np.linalg.solve(s.block(k + 1, k + 1), s.block(k + 1, k))
        assert np.abs(pred - s.block(k + 2, k)).max() < 1e-10
    assert ssd(s, o).squared < 1e-10 and causal_ot(s, o).value > 0.5 and procrustes_distance(s, o).value < 1e-12


def test_pairwise_and_mds():
    rng = np.random.default_rng(14)
    xs = [random_gp(2, 2, rng) for _ in range(4)]
    D = nt.pairwise(xs, 'causal')
    assert np.allclose(D, D.T) and np.allclose(np.diag(D), 0)
    E = nt.mds_embed(D, 3)
    assert E.shape == (4, 3)
    Deu = np.linalg.norm(np.linspace(0, 1, 5)[:, None] - np.linspace(0, 1, 5)[None], axis=-1) if False else None
    pts = rng.standard_normal((5, 2)); Dp = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    Ep = nt.mds_embed(Dp, 2)
    assert np.allclose(np.linalg.norm(Ep[:, None] - Ep[None], axis=-1), Dp, atol=1e-8)   # Euclidean distances recovered


# ---- bad input -------------------------------------------------------------------------------------------------------------
def test_bad_input_raises_value_error():
    rng = np.random.default_rng(15)
    x, y = random_gp(3, 2, rng), random_gp(4, 2, rng)
    for fn in (procrustes_distance, ssd, gp_w2, causal_ot):
        with pytest.raises(ValueError, match='mismatched T'): fn(x, y)
    with pytest.raises(ValueError, match='positive semi-definite'): GaussianProcessSummary(np.zeros((2, 2)), np.diag([1., 1, -1, 1]))
    with pytest.raises(ValueError, match='symmetric'): GaussianProcessSummary(np.zeros((1, 2)), np.array([[1., 0.5], [0, 1]]))
    with pytest.raises(ValueError, match='shape'): GaussianProcessSummary(np.zeros((2, 2)), np.eye(3))
    with pytest.raises(ValueError, match='NaN'): GaussianProcessSummary(np.full((1, 2), np.nan), np.eye(2))
    trials = rng.standard_normal((20, 3, 2)); trials[3, 1, 0] = np.nan
    with pytest.raises(ValueError, match='NaN'): GaussianProcessSummary.from_trials(trials)
    with pytest.raises(ValueError, match='shape'): GaussianProcessSummary.from_trials(np.zeros((5, 3)))
    with pytest.raises(ValueError, match='shrinkage'): GaussianProcessSummary.from_trials(rng.standard_normal((20, 3, 2)), shrinkage='magic')
    with pytest.raises(ValueError, match='alpha'): causal_ot(x, x, alpha=3)
    with pytest.raises(ValueError, match='group'): ssd(x, x, group='affine')
    with pytest.raises(ValueError, match='GaussianProcessSummary'): causal_ot(x, np.zeros((3, 2)))
    with pytest.raises(ValueError, match='metric'): distance('cka', x, x)


def test_few_trials_warns_and_shrinks():
    rng = np.random.default_rng(16)
    with pytest.warns(UserWarning, match='K=10'):
        g = GaussianProcessSummary.from_trials(rng.standard_normal((10, 5, 4)))
    assert np.linalg.eigvalsh(g.cov).min() > 0


def test_loader_reads_and_refuses(tmp_path):
    rng = np.random.default_rng(17)
    good = rng.standard_normal((6, 4, 3))
    np.save(tmp_path / 'ok.npy', good); np.savez(tmp_path / 'ok.npz', trials=good)
    assert np.allclose(nt.load_trials(tmp_path / 'ok.npy'), good) and np.allclose(nt.load_trials(tmp_path / 'ok.npz'), good)
    raw = (tmp_path / 'ok.npy').read_bytes()
    (tmp_path / 'trunc.npy').write_bytes(raw[: len(raw) // 2])
    np.save(tmp_path / 'shape.npy', good[0])
    np.save(tmp_path / 'type.npy', np.array([[['a']]]))
    bad = good.copy(); bad[0, 0, 0] = np.nan; np.save(tmp_path / 'nan.npy', bad)
    np.savez(tmp_path / 'nokey.npz', x=good)
    np.save(tmp_path / 'obj.npy', np.array([good, None], dtype=object), allow_pickle=True)
    np.save(tmp_path / 'one.npy', good[:1])
    for name, msg in [('trunc.npy', 'not a readable'), ('shape.npy', 'shape'), ('type.npy', 'real numbers'), ('nan.npy', 'NaN'),
                      ('nokey.npz', "no array 'trials'"), ('obj.npy', 'not a readable'), ('missing.npy', 'no such file'),
                      ('one.npy', 'at least')]:
        with pytest.raises(ValueError, match=msg) as e: nt.load_trials(tmp_path / name)
        assert str(e.value).startswith(str(tmp_path / name))                     # the message names the file first


def test_sklearn_missing_names_the_extra(monkeypatch):
    "scikit-learn is optional: without it, Ledoit–Wolf and the reproduce path say how to install it (not a raw ModuleNotFoundError)."
    import sys
    monkeypatch.setitem(sys.modules, 'sklearn.covariance', None)
    monkeypatch.setitem(sys.modules, 'sklearn.metrics', None)
    trials = np.random.default_rng(0).standard_normal((30, 2, 2))
    with pytest.raises(ImportError, match=r"pip install 'iclr25_nb\[noisy_trajectories\]'"):
        GaussianProcessSummary.from_trials(trials)
    with pytest.raises(ImportError, match=r"pip install 'iclr25_nb\[noisy_trajectories\]'"):
        nt._diffusion_study(dict(d=2, T_diff=3, max_iter_diff=5), 0)
    assert GaussianProcessSummary.from_trials(trials, shrinkage=0.1).cov.shape == (4, 4)   # the other estimators need nothing


def test_split_halves_are_disjoint_held_out_trials():
    "The split-half test never compares a trial with itself: the halves share no trial (core.overlap_count)."
    from iclr25_nb.core import overlap_count
    rng = np.random.default_rng(3)
    (A,), _ = nt.planning_pair(N=3, T=4, n_cond=1)
    trials = A.sample(40, rng)
    for _ in range(5):
        i1, i2 = nt.split_halves(40, rng)
        assert overlap_count(trials[i1], trials[i2]) == 0 and len(i1) == len(i2) == 20
    with pytest.raises(ValueError, match='at least 4'): nt.split_halves(3, rng)


def test_null_ladder_statistics():
    rng = np.random.default_rng(5)
    x, y = random_gp(3, 2, rng), random_gp(3, 2, rng)
    assert nt.moment_distance(x, x) == 0 and nt.moment_distance(x, y) == pytest.approx(nt.moment_distance(y, x))
    assert nt.moment_distance(x, y) == pytest.approx(math.sqrt(((x.mean - y.mean) ** 2).sum() + ((x.cov - y.cov) ** 2).sum()))
    assert nt.split_half_z([1.0, 1.1, 0.9], [1.0, 1.1, 0.9]) == 0
    assert set(nt.SPLIT_NULLS) == set(nt.SPLIT_NULL_NAMES)


# ---- experiment contract -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('bad', [dict(system='lfads'), dict(N=1), dict(rho=1.5), dict(K=1), dict(alpha=-0.1), dict(n_restarts=0), dict(noise=0)])
def test_config_rejects_bad_values(bad):
    with pytest.raises(ValueError, match=next(iter(bad))): nt.make_experiment('quick', **bad)


@pytest.mark.parametrize('system,K', [('motor', 0), ('diffusion', 0), ('motor', 60)])
def test_experiment_runs_checkpoints_and_resumes(tmp_path, system, K):
    from iclr25_nb.core import BackgroundTrainer
    t0 = time.perf_counter()
    e = nt.make_experiment('quick', system=system, K=K, N=4, T=6)
    assert time.perf_counter() - t0 < 30
    tr = BackgroundTrainer(e, checkpoint_dir=tmp_path, max_steps=3).start(); tr.join(60)
    assert tr.error is None and e.step_count == 3
    e2 = nt.make_experiment('quick', system=system, K=K, N=4, T=6)
    tr2 = BackgroundTrainer(e2, checkpoint_dir=tmp_path, resume=True)
    assert tr2.resumed_from == 3 and np.allclose(e2.Q, e.Q)
    rest1, rest2 = e.run(), e2.run()
    assert [r['loss'] for r in rest1] == pytest.approx([r['loss'] for r in rest2])
    assert e.done and abs(e.distances()['causal'] - causal_ot(e.x, e.y, n_restarts=3).value) < 1e-3
    assert e.end_reason.startswith('converged: 3 restarts') and e.step_count < e.max_steps   # why it stopped early
    snap = e.snapshot(); assert set(snap['distances']) == set(METRICS)


def test_explorer_builds_and_refreshes():
    pytest.importorskip('panel')
    v = nt.explorer()
    try:
        assert v.trainer.status == 'idle'
        v.trainer.experiment.run(2); assert v.refresh(force=True)
    finally: v.close()


def test_planning_pair_w2_nearly_blind_causal_not():
    A, B = nt.planning_pair(N=3, T=6, n_cond=1, seed=3)
    np.testing.assert_allclose(A[0].mean, B[0].mean); np.testing.assert_allclose(A[0].marginals(), B[0].marginals())
    d = {m: nt.distance(m, A[0], B[0]).value for m in METRICS}
    assert d['procrustes'] < 1e-8 and d['ssd'] < 1e-6 and d['causal'] > 4 * d['w2']
    with pytest.raises(ValueError, match='T_prep'): nt.planning_pair(T=4, T_prep=4)


def test_render_needs_only_the_snapshot_and_action_restarts():
    e = nt.make_experiment('quick', system='planning', N=3, T=6)
    hist = e.run(3); e.random_restart()
    figs = nt.render(e.snapshot(), hist, t=1)
    assert set(figs) == {'trajectories', 'distances', 'per_time', 'objective', 'Q'} and all(f.layout.title.text for f in figs.values())


def test_reproduce_rejects_data():
    with pytest.raises(ValueError, match='data must be None'): nt.reproduce(data='x.npz')


# ---- the block-column layout and the accelerated fit against a straightforward dense reference ---------------------------
def _dense_reference(x, y, metric, alpha, Q):
    """Objective and Q-step written out with dense NT × NT factors (symmetric roots for SSD and W2, the block-Cholesky
    factor for causal OT), Q̄ = I_T ⊗ Q, one SVD per column block and the stacked Procrustes of the narrative."""
    from scipy.linalg import block_diag
    def root(S):
        lam, V = np.linalg.eigh(S); return (V * np.sqrt(np.clip(lam, 0, None))) @ V.T
    T, N = x.T, x.N
    if metric == 'causal': (Fx, Fy), nb = (block_cholesky(s.cov, N) for s in (x, y)), N
    elif metric == 'w2': (Fx, Fy), nb = (root(s.cov) for s in (x, y)), T * N
    else: (Fx, Fy), nb = (block_diag(*[root(S) for S in s.marginals()]) for s in (x, y)), N
    Qb = np.kron(np.eye(T), Q)
    Ps = []
    for b in range(T * N // nb):
        c = slice(b * nb, (b + 1) * nb)
        U, _, Vt = np.linalg.svd(Fx[:, c].T @ Qb @ Fy[:, c]); Ps.append(Vt.T @ U.T)
    FyP = Fy @ block_diag(*Ps)
    obj = alpha * ((x.mean.ravel() - Qb @ y.mean.ravel()) ** 2).sum() + (2 - alpha) * ((Fx - Qb @ FyP) ** 2).sum()
    stack = lambda m, F: np.hstack([math.sqrt(alpha) * m.T] + [math.sqrt(2 - alpha) * F[t * N:(t + 1) * N] for t in range(T)])
    U, _, Vt = np.linalg.svd(stack(x.mean, Fx) @ stack(y.mean, FyP).T)
    return obj, U @ Vt


@pytest.mark.parametrize('metric', ['ssd', 'w2', 'causal'])
@pytest.mark.parametrize('T,N,alpha', [(5, 3, 1.0), (4, 4, 0.3), (1, 3, 1.7), (6, 2, 0.0)])
def test_block_columns_match_dense_reference(metric, T, N, alpha):
    rng = np.random.default_rng(20 + T + N)
    x, y = random_gp(T, N, rng), random_gp(T, N, rng)
    al = nt.AlternatingAligner(x, y, metric, alpha)
    for Q in (np.eye(N), rand_orth(N, rng)):
        obj_ref, Q_ref = _dense_reference(x, y, metric, alpha, Q)
        obj, per, P = al.evaluate(Q)
        assert abs(obj - obj_ref) < 1e-10 * max(1.0, obj_ref)
        assert abs(al.evaluate(Q, rotations=False)[0] - obj) < 1e-10 * max(1.0, obj)
        if per is not None: assert abs(per.sum() - obj) < 1e-10 * max(1.0, obj)
        assert np.abs(al.update(Q, P) - Q_ref).max() < 1e-9


def test_block_columns_match_reference_on_singular_covariances():
    X, Y = nt.two_step_process(0.7, 0.5)                      # rank-1 covariances: the symmetric-root / fallback paths
    for metric in ('ssd', 'w2', 'causal'):
        obj_ref, _ = _dense_reference(X, Y, metric, 1.0, np.eye(1))
        assert abs(objective_at(X, Y, np.eye(1), metric) - obj_ref) < 1e-10


@pytest.mark.parametrize('metric', ['ssd', 'w2', 'causal'])
def test_accelerated_fit_reaches_the_plain_alternations_objective(metric):
    rng = np.random.default_rng(30)
    x, y = random_gp(6, 5, rng), random_gp(6, 5, rng)
    al = nt.AlternatingAligner(x, y, metric)
    plain = al.fit(tol=1e-14, max_iter=20000, accelerate=False)
    fast = al.fit(tol=1e-14, max_iter=20000)
    assert abs(fast.squared - plain.squared) < 1e-10 * max(1.0, plain.squared)
    assert len(fast.loss_history) < len(plain.loss_history)
    h = fast.loss_history; assert all(b <= a for a, b in zip(h, h[1:]))              # every recorded step decreases
    assert abs(al.evaluate(fast.Q)[0] - fast.squared) < 1e-12 * max(1.0, fast.squared)


def test_plain_fit_is_the_papers_alternation():
    rng = np.random.default_rng(31)
    x, y = random_gp(4, 3, rng), random_gp(4, 3, rng)
    al = nt.AlternatingAligner(x, y, 'causal')
    r = al.fit(max_iter=7, accelerate=False)
    Q = al.initial(0, np.random.default_rng(0)); hist = []
    for _ in range(7):
        obj, _, P = al.evaluate(Q); hist.append(obj); Q = al.update(Q, P)
    assert len(r.loss_history) == 7 and np.allclose(r.loss_history, hist, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match='grow'): al.fit(grow=0.5)


def test_bures_cholesky_path_matches_symmetric_root():
    from scipy.linalg import sqrtm
    rng = np.random.default_rng(32)
    for A, B in [(np.eye(6) + 0.1, np.eye(6)), (random_gp(1, 7, rng).cov, random_gp(1, 7, rng).cov)]:
        sA = np.real(sqrtm(A))
        ref = np.trace(A) + np.trace(B) - 2 * np.trace(np.real(sqrtm(sA @ B @ sA)))
        assert abs(bures_sq(A, B) - ref) < 1e-10
    v, B = rng.standard_normal(5), random_gp(1, 5, rng).cov       # A = v vᵀ singular: tr(A^½BA^½)^½ = √(vᵀBv)
    assert abs(bures_sq(np.outer(v, v), B) - (v @ v + np.trace(B) - 2 * math.sqrt(v @ B @ v))) < 1e-10


def test_dsa_null_is_rotation_invariant_and_sees_other_dynamics():
    "The DSA rung (our reimplementation): DMD on the delay embedding, Procrustes over vector fields."
    (A,), _ = nt.planning_pair(N=3, T=6, n_cond=1)
    x = A.sample(300, 0)
    R = rand_orth(3, np.random.default_rng(1))
    assert nt.dmd_operator(x).shape == (6, 6) and nt.dmd_operator(x, n_delays=1).shape == (3, 3)
    assert nt.dsa_distance(x, x @ R.T) < 1e-8                               # neurons rotated: the same dynamics
    assert nt.dsa_distance(x, x[:, ::-1]) > 0.1                             # time reversed: other dynamics
    assert nt.dsa_distance(x, A.sample(300, 2)) == pytest.approx(nt.dsa_distance(A.sample(300, 2), x), rel=1e-6, abs=1e-8)
    with pytest.raises(ValueError, match='T > n_delays'): nt.dmd_operator(x[:, :2], n_delays=2)


# ---- issue 47: the torch block products and polar factors, and the Anderson-accelerated fit ---------------------------
def _previous_evaluate_update(al, Q):
    """One evaluation and Q-step as written before issue 47's third pass (numpy stack of per-block products, numpy
    products around torch's `eigh`, a Python `sum` of the Q-step's parts), for the block-column path (N·T > 150)."""
    import torch
    nb, a = al.nb, al.alpha
    K = np.stack([(Q.T @ X_b).reshape(-1, nb).T @ Y_b.reshape(-1, nb) for X_b, Y_b in zip(al.X, al.Y)])
    lam, V = (t.numpy() for t in torch.linalg.eigh(torch.from_numpy(np.swapaxes(K, -1, -2) @ K)))
    ok = lam[:, 0] > nt._POLAR_COND * lam[:, -1]
    S = np.sqrt(np.clip(lam, 0.0, None)); P = np.empty_like(K)
    if ok.any(): P[ok] = V[ok] @ np.swapaxes((K[ok] @ V[ok]) / S[ok][:, None, :], -1, -2)
    if not ok.all():
        U, S_bad, Vt = np.linalg.svd(K[~ok]); S[~ok] = S_bad; P[~ok] = np.swapaxes(Vt, -1, -2) @ np.swapaxes(U, -1, -2)
    dm = ((al.x.mean - al.y.mean @ Q.T) ** 2).sum(1)
    obj = a * dm.sum() + (2 - a) * (al.tr_x + al.tr_y - 2 * S.sum())
    M = sum(X_b @ (Y_b.reshape(-1, nb) @ P_b).reshape(Y_b.shape).T for X_b, Y_b, P_b in zip(al.X, al.Y, P))
    return obj, P, nt._align(a * al.mm + (2 - a) * M, al.group)


@pytest.mark.parametrize('alpha', [1.0, 0.3])
def test_torch_block_path_matches_the_previous_implementation(alpha):
    rng = np.random.default_rng(47)
    T, N = 10, 25                                          # N·T > 150 and the first blocks above _TORCH_MIN: torch products
    x, y = random_gp(T, N, rng), random_gp(T, N, rng)
    al = nt.AlternatingAligner(x, y, 'causal', alpha)
    assert al._stack is None and al.X[0].size * N >= nt._TORCH_MIN > al.X[-1].size * N
    for Q in (np.eye(N), rand_orth(N, rng)):
        obj_ref, P_ref, Q_ref = _previous_evaluate_update(al, Q)
        obj, per, P = al.evaluate(Q)
        assert abs(obj - obj_ref) < 1e-12 * max(1.0, obj_ref) and abs(per.sum() - obj) < 1e-10 * obj
        assert np.abs(P - P_ref).max() < 1e-10 and np.abs(al.update(Q, P) - Q_ref).max() < 1e-10
    Lx = block_cholesky(x.cov, N)                          # MKL's Cholesky (torch) against numpy's
    assert np.abs(Lx - np.linalg.cholesky(x.cov)).max() < 1e-12


def test_polar_factors_with_ill_conditioned_blocks():
    rng = np.random.default_rng(48)
    K = rng.standard_normal((6, 5, 5))
    K[1, :, 0] = 1e-9 * K[1, :, 1]; K[4] = 0.0              # one nearly singular block, one zero block: the SVD branch
    S, P = nt._svals_polar(K)
    U, S_ref, Vt = np.linalg.svd(K)
    assert np.abs(np.sort(S, 1) - np.sort(S_ref, 1)).max() < 1e-12               # (eigh's order is ascending)
    assert np.abs(np.einsum('bij,bji->b', K, P) - S_ref.sum(1)).max() < 1e-12       # tr(K_b P_b) = ‖K_b‖_*
    assert np.abs(P @ np.swapaxes(P, -1, -2) - np.eye(5)).max() < 1e-12                # rotations


def test_anderson_fit_reaches_the_optimum_in_fewer_iterations_than_over_relaxation():
    rng = np.random.default_rng(30)
    x, y = random_gp(6, 5, rng), random_gp(6, 5, rng)
    for metric in ('ssd', 'w2', 'causal'):
        al = nt.AlternatingAligner(x, y, metric)
        ref = al.fit(tol=1e-15, max_iter=20000, accelerate=False).squared
        fast, relax = al.fit(), al.fit(accelerate='relax')
        assert abs(fast.squared - ref) <= abs(relax.squared - ref) + 1e-12 * ref
        assert len(fast.loss_history) < len(relax.loss_history)
        assert al.fit(accelerate='anderson').loss_history == fast.loss_history
    with pytest.raises(ValueError, match='accelerate'): al.fit(accelerate='nesterov')
    with pytest.raises(ValueError, match='memory'): al.fit(memory=0)
