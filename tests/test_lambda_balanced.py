"""Properties of the exact λ-balanced dynamics (iclr25_nb.lambda_balanced): conservation, closed forms against
numerical integration and autograd, limits, metric axioms, bad input, and the experiment contract."""
import math

import numpy as np
import pytest
import torch

from iclr25_nb import lambda_balanced as lb

DIMS = [(5, 5, 5), (3, 3, 6), (6, 3, 3)]


def task(n_in, n_out, seed=0, P=None):
    X, Y = lb.random_task(P or 2 * n_in, n_in, n_out, rng=seed)
    return X, Y, lb.sigma_yx(X, Y)


def flow_rhs(S, n_in, n_h, n_out):
    "Gradient flow on whitened data, flattened for solve_ivp: dW1 = W2ᵀ(Σ − W2W1), dW2 = (Σ − W2W1)W1ᵀ."
    def f(t, w):
        W1 = w[:n_h * n_in].reshape(n_h, n_in); W2 = w[n_h * n_in:].reshape(n_out, n_h)
        E = S - W2 @ W1
        return np.concatenate([(W2.T @ E).ravel(), (E @ W1.T).ravel()])
    return f


def integrate_flow(W1, W2, S, ts):
    from scipy.integrate import solve_ivp
    n_h, n_in = W1.shape; n_out = W2.shape[0]
    sol = solve_ivp(flow_rhs(S, n_in, n_h, n_out), (0, ts[-1]), np.concatenate([W1.ravel(), W2.ravel()]),
                    t_eval=ts, method='DOP853', rtol=1e-11, atol=1e-12)
    W1s = sol.y[:n_h * n_in].T.reshape(-1, n_h, n_in); W2s = sol.y[n_h * n_in:].T.reshape(-1, n_out, n_h)
    return W1s, W2s


def qqt_of(W1s, W2s):
    Q = np.concatenate([np.swapaxes(W1s, -1, -2), W2s], axis=-2)
    return Q @ np.swapaxes(Q, -1, -2)


# ---------------------------------------------------------------- initialisation and conservation
@pytest.mark.parametrize('lmda,dims', [(1.3, (5, 5, 5)), (-0.7, (3, 3, 6)), (2.0, (6, 3, 3)), (0.0, (2, 4, 3)),
                                       (0.8, (3, 5, 7)), (-1.1, (7, 5, 3)), (0.5, (4, 2, 6))])
def test_constructor_is_exactly_balanced(lmda, dims):
    n_in, n_h, n_out = dims
    W1, W2 = lb.make_lambda_balanced(lmda, n_in, n_h, n_out, scale=0.6, rng=3)
    assert W1.shape == (n_h, n_in) and W2.shape == (n_out, n_h)
    np.testing.assert_allclose(lb.balance(W1, W2), lmda * np.eye(n_h), atol=1e-10)
    sv = np.linalg.svd(W2 @ W1, compute_uv=False)[:min(dims)]
    np.testing.assert_allclose(sv, 0.6, atol=1e-10)
    assert lb.nearest_lambda(W1, W2) == pytest.approx(lmda, abs=1e-10)


def test_aligned_init_shares_task_singular_vectors():
    _, _, S = task(4, 4, seed=1)
    U, s, Vt = np.linalg.svd(S)
    W1, W2 = lb.make_lambda_balanced(-0.5, 4, 4, 4, scale=0.1, rng=2, aligned_to=S)
    D = U.T @ W2 @ W1 @ Vt.T
    np.testing.assert_allclose(D, np.diag(np.diag(D)), atol=1e-12)
    np.testing.assert_allclose(np.abs(np.diag(D)), 0.1, atol=1e-12)


@pytest.mark.parametrize('lmda,dims,msg', [(-0.5, (3, 5, 7), 'needs lmda ≥ 0'), (0.5, (7, 5, 3), 'needs lmda ≤ 0'),
                                           (1e-3, (2, 5, 3), 'needs lmda ≤ 0'), (-1e-3, (2, 5, 3), 'needs lmda ≥ 0')])
def test_infeasible_lambda_raises(lmda, dims, msg):
    with pytest.raises(ValueError, match=msg):
        lb.make_lambda_balanced(lmda, *dims)


def test_balance_is_conserved_by_gradient_flow():
    pytest.importorskip('scipy')
    for lmda, (n_in, n_h, n_out) in [(1.2, (3, 3, 6)), (-0.8, (6, 3, 3)), (0.0, (4, 4, 4))]:
        _, _, S = task(n_in, n_out, seed=4)
        W1, W2 = lb.make_lambda_balanced(lmda, n_in, n_h, n_out, scale=0.3, rng=5)
        W1s, W2s = integrate_flow(W1, W2, S, np.linspace(0, 6, 7))
        drift = max(np.abs(lb.balance(a, b) - lmda * np.eye(n_h)).max() for a, b in zip(W1s, W2s))
        assert drift < 1e-8


def test_gd_breaks_the_balance_at_second_order():
    X, Y, _ = task(4, 4, seed=6)
    W1, W2 = lb.make_lambda_balanced(0.5, 4, 4, 4, scale=0.2, rng=7)
    drift = []
    for lr in (4e-3, 2e-3):
        tr = lb.simulate_gd(W1, W2, X, Y, lr, int(round(2.0 / lr)), record_every=10 ** 6)
        drift.append(np.abs(lb.balance(tr.W1[-1], tr.W2[-1]) - 0.5 * np.eye(4)).max())
    assert drift[0] > 0 and 1.6 < drift[0] / drift[1] < 2.5     # O(η²) per step × t/η steps = O(η)


def test_gaussian_init_concentrates_on_its_lambda():
    rng = np.random.default_rng(0)
    errs = []
    n_h = 10
    for width in (100, 1600):          # outer layers widen, relative fluctuations fall like 1/√width
        n_in, n_out, s1, s2 = width, 2 * width, 1 / math.sqrt(width), 0.5 / math.sqrt(width)
        W1 = s1 * rng.standard_normal((n_h, n_in)); W2 = s2 * rng.standard_normal((n_out, n_h))
        lam = n_out * s2 ** 2 - n_in * s1 ** 2                 # E[W2ᵀW2 − W1W1ᵀ] = (No σ2² − Ni σ1²) I
        errs.append(np.linalg.norm(lb.balance(W1, W2) - lam * np.eye(n_h), 2) / abs(lam))
        assert lb.nearest_lambda(W1, W2) == pytest.approx(lam, abs=3 * errs[-1] * abs(lam))
    assert errs[1] < errs[0] / 2


# ---------------------------------------------------------------- the exact solution
@pytest.mark.parametrize('dims', DIMS)
@pytest.mark.parametrize('lmda', [-1.5, 0.0, 0.7])
def test_qqt_exact_matches_solve_ivp(dims, lmda):
    pytest.importorskip('scipy')
    n_in, n_h, n_out = dims
    _, _, S = task(n_in, n_out, seed=8)
    W1, W2 = lb.make_lambda_balanced(lmda, n_in, n_h, n_out, scale=0.4, rng=9)
    ts = np.linspace(0, 8, 9)
    ref = qqt_of(*integrate_flow(W1, W2, S, ts))
    np.testing.assert_allclose(lb.qqt_exact(W1, W2, S, ts), ref, atol=1e-8)


def test_riccati_residual_by_central_differences():
    _, _, S = task(3, 6, seed=10)
    W1, W2 = lb.make_lambda_balanced(0.9, 3, 3, 6, scale=0.2, rng=11)
    F, h = lb.riccati_F(S, 0.9), 1e-4
    for t in (0.3, 1.7, 4.0):
        q = lb.qqt_exact(W1, W2, S, t)
        dq = (lb.qqt_exact(W1, W2, S, t + h) - lb.qqt_exact(W1, W2, S, t - h)) / (2 * h)
        np.testing.assert_allclose(dq, F @ q + q @ F - q @ q, atol=1e-6)


def test_qqt_structure_and_limits():
    _, _, S = task(6, 3, seed=12)
    W1, W2 = lb.make_lambda_balanced(-0.6, 6, 3, 3, scale=0.05, rng=13)
    Q0 = np.concatenate([W1.T, W2])
    q = lb.qqt_exact(W1, W2, S, np.array([0.0, 0.5, 3.0, 2000.0]))
    np.testing.assert_allclose(q[0], Q0 @ Q0.T, atol=1e-14)
    for qt in q:
        np.testing.assert_allclose(qt, qt.T, atol=1e-12)
        ev = np.linalg.eigvalsh(qt)
        assert ev.min() > -1e-10 * ev.max() and (ev > 1e-9 * ev.max()).sum() <= 3
    np.testing.assert_allclose(lb.split_qqt(q[-1], 6)[1], S, atol=1e-9)          # W2W1 → Σyx
    assert lb.qqt_exact(W1, W2, S, 3.0).shape == (9, 9)


def test_eig_and_stable_forms_agree_and_stable_survives_large_t():
    _, _, S = task(4, 4, seed=14)
    W1, W2 = lb.make_lambda_balanced(3.0, 4, 4, 4, scale=0.1, rng=15)
    ts = np.linspace(0, 6, 13)
    np.testing.assert_allclose(lb.qqt_exact(W1, W2, S, ts, method='eig'), lb.qqt_exact(W1, W2, S, ts), atol=1e-8)
    far = lb.qqt_exact(W1, W2, S, 500.0)
    assert np.isfinite(far).all()
    np.testing.assert_allclose(lb.split_qqt(far, 4)[1], S, atol=1e-9)


def test_riccati_F_spectrum():
    for n_in, n_out, lmda in [(5, 3, 0.8), (3, 5, -1.4)]:
        _, _, S = task(n_in, n_out, seed=16)
        s = np.linalg.svd(S, compute_uv=False)
        r = min(n_in, n_out)
        expect = np.concatenate([np.sqrt(s ** 2 + lmda ** 2 / 4), -np.sqrt(s ** 2 + lmda ** 2 / 4),
                                 np.full(n_in - r, -lmda / 2), np.full(n_out - r, lmda / 2)])
        np.testing.assert_allclose(np.linalg.eigvalsh(lb.riccati_F(S, lmda)), np.sort(expect), atol=1e-12)


def test_factor_restarts_the_flow():
    _, _, S = task(3, 6, seed=17)
    W1, W2 = lb.make_lambda_balanced(0.4, 3, 3, 6, scale=0.2, rng=18)
    W1t, W2t = lb.qqt_factor(W1, W2, S, 1.5)
    np.testing.assert_allclose(lb.balance(W1t, W2t), 0.4 * np.eye(3), atol=1e-10)
    np.testing.assert_allclose(lb.qqt_exact(W1t, W2t, S, 2.0), lb.qqt_exact(W1, W2, S, 3.5), atol=1e-10)


# ---------------------------------------------------------------- aligned modes
@pytest.mark.parametrize('s,a0,lmda', [(2.0, 1e-3, 0.7), (2.0, 1e-3, -0.7), (1.0, -0.4, 2.5), (1.5, 0.3, -3.0),
                                       (-1.0, 1.0, 0.05), (-1.0, 1.0, -0.05), (0.8, 0.2, 0.0), (1.2, -0.5, 1e-4),
                                       (1.0, -0.5, 0.0), (-1.0, 1.0, 0.0), (0.5, 1.5, 0.0), (-0.7, -0.1, 0.0)])
def test_aligned_mode_matches_solve_ivp(s, a0, lmda):
    from scipy.integrate import solve_ivp
    ts = np.linspace(0, 10, 41)
    sol = solve_ivp(lambda t, a: lb.aligned_mode_rhs(a, s, lmda), (0, 10), [a0], t_eval=ts, method='DOP853',
                    rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lb.aligned_mode(ts, s, a0, lmda), sol.y[0], atol=1e-8)


def test_aligned_mode_equals_the_general_solution():
    _, _, S = task(3, 3, seed=19)
    U, s, Vt = np.linalg.svd(S)
    for lmda in (-1.0, 0.0, 2.0):
        W1, W2 = lb.make_lambda_balanced(lmda, 3, 3, 3, scale=0.05, rng=20, aligned_to=S)
        ts = np.linspace(0, 5, 11)
        a = np.einsum('ij,tjk,kl->til', U.T, lb.split_qqt(lb.qqt_exact(W1, W2, S, ts), 3)[1], Vt.T).diagonal(axis1=1, axis2=2)
        a0 = np.diag(U.T @ W2 @ W1 @ Vt.T)
        ref = np.stack([lb.aligned_mode(ts, si, a0i, lmda) for si, a0i in zip(s, a0)], 1)
        np.testing.assert_allclose(a, ref, atol=1e-9)


def test_limits_of_the_aligned_mode():
    ts = np.linspace(0, 6, 25)
    np.testing.assert_allclose(lb.aligned_mode(ts, 1.5, 0.01, 1e-9), 1.5 / (1 + (1.5 / 0.01 - 1) * np.exp(-3 * ts)), atol=1e-7)
    errs = []
    for lam in (50.0, 100.0, 200.0):
        tl = ts / lam                      # same progress in the exponential's own time
        shallow = 1.5 + (0.01 - 1.5) * np.exp(-lam * tl)
        errs.append(np.abs(lb.aligned_mode(tl, 1.5, 0.01, lam) - shallow).max())
    assert errs[0] < 1.5 / 50 and errs[0] / errs[1] > 1.6 and errs[1] / errs[2] > 1.6   # O(1/|λ|) (here even 1/λ²)


def test_aligned_mode_time_inverts_the_closed_form():
    for s, a0, lmda, a in [(2.0, 1e-3, 0.0, 1.8), (2.0, 1e-3, -3.0, 1.8), (-1.0, 1.0, 0.01, -0.5), (-1.0, 1.0, -1e-4, -0.5)]:
        t = lb.aligned_mode_time(a, s, a0, lmda)
        assert lb.aligned_mode(t, s, a0, lmda) == pytest.approx(a, abs=1e-9)
    assert lb.aligned_mode_time(-0.5, -1.0, 1.0, 0.0) == math.inf
    t = lb.aligned_mode_time(0.1, -1.0, 1.0, 0.0)          # λ = 0 reversal: decays towards the saddle
    assert lb.aligned_mode(t, -1.0, 1.0, 0.0) == pytest.approx(0.1, abs=1e-12)


# ---------------------------------------------------------------- NTK and kernel distance
def test_ntk_matches_torch_func_jacobians():
    from torch.func import jacrev
    X, _, _ = task(4, 3, seed=21, P=6)
    rng = np.random.default_rng(22)
    W1, W2 = rng.standard_normal((5, 4)), rng.standard_normal((3, 5))
    Xt = torch.tensor(X)
    f = lambda w1, w2: (w2 @ w1 @ Xt).reshape(-1)              # rows: (output unit, sample)
    J1, J2 = jacrev(f, argnums=(0, 1))(torch.tensor(W1), torch.tensor(W2))
    J = torch.cat([J1.reshape(J1.shape[0], -1), J2.reshape(J2.shape[0], -1)], 1).numpy()
    K = lb.ntk(W1, W2, X)
    np.testing.assert_allclose(K, J @ J.T, atol=1e-10)
    np.testing.assert_allclose(K, K.T, atol=1e-12)
    assert np.linalg.eigvalsh(K).min() > -1e-10


def test_kernel_distance_axioms_and_trajectory_form():
    rng = np.random.default_rng(23)
    A = rng.standard_normal((6, 6)); K0 = A @ A.T
    B = rng.standard_normal((6, 6)); K1 = B @ B.T
    assert lb.kernel_distance(K0, K0) == pytest.approx(0, abs=1e-14)
    assert lb.kernel_distance(K0, 7.0 * K1) == pytest.approx(lb.kernel_distance(K0, K1), abs=1e-14)
    assert 0 <= lb.kernel_distance(K0, K1) <= 1
    X, _, S = task(3, 4, seed=24)
    W1, W2 = lb.make_lambda_balanced(0.3, 3, 3, 4, scale=0.2, rng=25)
    ts = np.array([0.0, 0.7, 3.0])
    q = lb.qqt_exact(W1, W2, S, ts)
    W1t, W2t = lb.qqt_factor(W1, W2, S, ts)
    explicit = [lb.kernel_distance(lb.ntk(W1, W2, X), lb.ntk(a, b, X)) for a, b in zip(W1t, W2t)]
    np.testing.assert_allclose(lb.kernel_distance_qqt(q[0], q, X), explicit, atol=1e-12)


def test_lazy_regime_has_a_frozen_kernel():
    X, _, S = task(4, 4, seed=26)
    d = []
    for lmda in (0.01, 1.0, 30.0):
        W1, W2 = lb.make_lambda_balanced(lmda, 4, 4, 4, scale=0.01, rng=27)
        q = lb.qqt_exact(W1, W2, S, np.array([0.0, 30.0]))
        d.append(lb.kernel_distance_qqt(q[0], q[1], X))
    assert d[0] > d[1] > d[2] and d[2] < 1e-3


def test_representations():
    _, _, S = task(3, 3, seed=28)
    W1, W2 = lb.make_lambda_balanced(1.0, 3, 3, 3, scale=0.1, rng=29)
    q = lb.qqt_exact(W1, W2, S, 200.0)
    A, _, B = lb.split_qqt(q, 3)
    U, s, Vt = np.linalg.svd(S)
    # converged representations fixed by λ: W2W2ᵀ = Ũ diag((√(λ²+4s²)+λ)/2) Ũᵀ, W1ᵀW1 = Ṽ diag((√(λ²+4s²)−λ)/2) Ṽᵀ
    np.testing.assert_allclose(B, U @ np.diag((np.sqrt(1 + 4 * s ** 2) + 1) / 2) @ U.T, atol=1e-9)
    np.testing.assert_allclose(A, Vt.T @ np.diag((np.sqrt(1 + 4 * s ** 2) - 1) / 2) @ Vt, atol=1e-9)
    X, Y = lb.hierarchy_task(2)
    assert lb.rsm_input(np.eye(4), X).shape == (4, 4) and lb.rsm_output(np.eye(7), Y).shape == (4, 4)


# ---------------------------------------------------------------- forgetting
def test_forgetting_is_lambda_independent_and_matches_the_formula():
    r = lb.run_continual(lmdas=(-1.0, 1.0), T=50.0, seed=3)
    assert r['max_err'] < 1e-6 and r['spread'] < 1e-6
    Si, Sj = np.eye(2), np.zeros((2, 2))
    assert lb.forgetting(Si, Sj, Sj) == 0 and lb.forgetting(Si, Sj, -Si) == pytest.approx(0.5 * (8 - 2))


# ---------------------------------------------------------------- transfer
@pytest.mark.parametrize('frozen', ['input', 'output'])
def test_probe_loss_is_the_gd_probe_in_closed_form(frozen):
    "k GD steps on a new zero layer with the other frozen: the loss `probe_loss` predicts from the representation."
    X, _, S = task(4, 4, seed=40)
    W1, W2 = lb.make_lambda_balanced(0.7, 4, 4, 4, scale=0.8, rng=41)
    _, Y_new, S_new = task(4, 4, seed=42)
    rep = W1.T @ W1 if frozen == 'input' else W2 @ W2.T
    eta = 0.5 / np.linalg.eigvalsh(rep).max()
    Xw = lb.whiten(np.random.default_rng(43).standard_normal((4, 12)))
    gd = lb._gd_probe(W1, W2, Xw, S_new @ Xw, eta, 7, frozen)
    assert lb.probe_loss(rep, S_new, 7, eta, frozen) == pytest.approx(gd, rel=1e-10)
    assert lb.probe_loss(rep, S_new, 0, eta, frozen) == pytest.approx(0.5 * (S_new ** 2).sum())
    with pytest.raises(ValueError, match="frozen must be"): lb.probe_loss(rep, S_new, 3, eta, 'both')
    with pytest.raises(ValueError, match='rep must be 4x4'): lb.probe_loss(rep[:3, :3], S_new, 3, eta, frozen)
    with pytest.raises(ValueError, match='k must be'): lb.probe_loss(rep, S_new, -1, eta, frozen)


def test_transfer_follows_the_sign_of_lambda_and_the_ablation_misses_it():
    "Frozen first layer: λ < 0 transfers to A's weak input directions, λ > 0 does not; the mirror for the last layer."
    r = lb.run_transfer(lmdas=(-2.0, 0.0, 2.0), T=10.0, seed=5)
    by = {(x['lmda'], x['frozen']): x for x in r['rows']}
    for frozen, good, bad in (('input', -2.0, 2.0), ('output', 2.0, -2.0)):
        assert by[(good, frozen)]['gd'] < 1e-3 and by[(bad, frozen)]['gd'] > 0.5
        assert by[(0.0, frozen)]['gd'] > 10 * by[(good, frozen)]['gd']
    assert max(abs(math.log10(x['theory'] / x['gd'])) for x in r['rows']) < 1e-3
    wrong = lb.run_transfer(lmdas=(-2.0, 2.0), T=10.0, seed=5, ablate=True)['rows']
    assert max(abs(math.log10(x['theory'] / x['gd'])) for x in wrong) > 1.0
    with pytest.raises(ValueError, match='len\\(s_new\\)'): lb.run_transfer(s_new=(1.0,))


# ---------------------------------------------------------------- bad input
def test_bad_input_raises_clear_value_errors():
    X, Y, S = task(3, 3, seed=30)
    W1, W2 = lb.make_lambda_balanced(0.5, 3, 3, 3, scale=0.2, rng=31)
    Xr = np.random.default_rng(0).standard_normal(X.shape)
    with pytest.raises(ValueError, match='not whitened'): lb.simulate_gd(W1, W2, Xr, Y, 0.01, 5)
    with pytest.raises(ValueError, match='not whitened'): lb.sigma_yx(Xr, Y)
    lb.simulate_gd(W1, W2, Xr, Y, 0.01, 5, whitened=False)      # allowed when asked for
    with pytest.raises(ValueError, match='W2_0 has shape'): lb.qqt_exact(W1, W2[:, :2], S, 1.0)
    with pytest.raises(ValueError, match='Syx has shape'): lb.qqt_exact(W1, W2, S[:2], 1.0)
    with pytest.raises(ValueError, match='not λ-balanced'): lb.qqt_exact(W1 + 0.1 * Xr[:, :3], W2, S, 1.0)
    with pytest.raises(ValueError, match='non-negative'): lb.qqt_exact(W1, W2, S, -1.0)
    with pytest.raises(ValueError, match='1-D'): lb.qqt_exact(W1, W2, S, np.ones((2, 2)))
    with pytest.raises(ValueError, match='NaN'): lb.qqt_exact(W1 * np.nan, W2, S, 1.0)
    with pytest.raises(ValueError, match="method must be"): lb.qqt_exact(W1, W2, S, 1.0, method='rk4')
    with pytest.raises(ValueError, match='Y has shape'): lb.simulate_gd(W1, W2, X, Y[:, :4], 0.01, 5)
    with pytest.raises(ValueError, match='lr must be'): lb.simulate_gd(W1, W2, X, Y, -0.1, 5)
    with pytest.raises(ValueError, match='whitening needs'): lb.whiten(np.ones((5, 3)))
    with pytest.raises(ValueError, match='rank deficient'): lb.whiten(np.ones((2, 6)))
    with pytest.raises(ValueError, match='s must be non-zero'): lb.aligned_mode(1.0, 0.0, 0.1, 1.0)
    with pytest.raises(ValueError, match='zero kernel'): lb.kernel_distance(np.zeros((2, 2)), np.eye(2))
    with pytest.raises(ValueError, match='K has shape'): lb.kernel_distance(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match='scale must be'): lb.make_lambda_balanced(0.0, 2, 2, 2, scale=-1.0)
    with pytest.raises(ValueError, match='n_hidden must be'): lb.make_lambda_balanced(0.0, 2, 0, 2)
    with pytest.raises(ValueError, match='rng must be'): lb.make_lambda_balanced(0.0, 2, 2, 2, rng='x')


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match='task must be one of'): lb.make_experiment(task='xor')
    with pytest.raises(ValueError, match='would diverge'): lb.make_experiment(lmda=50.0, lr=0.05)
    with pytest.raises(ValueError, match='P must be'): lb.make_experiment(n_in=8, P=4)
    with pytest.raises(ValueError, match='scale must be'): lb.make_experiment(scale=0.0)
    with pytest.raises(ValueError, match='no field'): lb.make_experiment(width=3)


# ---------------------------------------------------------------- the experiment contract
@pytest.mark.parametrize('task_name', lb.TASKS)
def test_experiment_tracks_the_exact_solution(task_name):
    exp = lb.make_experiment(task=task_name, lmda=0.5, steps=60)
    hist = exp.run()
    assert len(hist) == 60 and all(np.isfinite(h['loss']) for h in hist)
    assert exp.evaluate()['qqt_rel_err'] < 0.02
    assert max(abs(h['loss'] - h['loss_exact']) for h in hist) < 0.02 * max(h['loss_exact'] for h in hist) + 1e-9


def test_checkpoint_resume_continues_identically(tmp_path):
    from iclr25_nb.core import BackgroundTrainer
    a = lb.make_experiment(steps=30, seed=4)
    tr = BackgroundTrainer(a, checkpoint_dir=tmp_path, max_steps=10).start().join(30)
    assert tr.status == 'done' and tr.error is None
    tr.save()
    b = lb.make_experiment(steps=30, seed=4)
    tr2 = BackgroundTrainer(b, checkpoint_dir=tmp_path, resume=True)
    assert tr2.resumed_from == 10
    b.run(); a.run()
    np.testing.assert_array_equal(a.W1, b.W1); np.testing.assert_array_equal(a.W2, b.W2)


def test_explorer_builds_without_running_and_refreshes():
    view = lb.explorer(steps=15, delay=0.0)
    try:
        assert view.trainer.status == 'idle' and view.trainer.step == 0
        view.start(); view.trainer.join(30)
        assert view.refresh(force=True) and view.trainer.status == 'done'
        view.controls['task'].value = 'reversal'; view.new_run(); view.trainer.join(30)
        assert view.trainer.experiment.config.task == 'reversal'
        view.view_controls['step'].value = 5
        assert view.refresh(force=True)
    finally:
        view.close()


def test_render_needs_only_the_snapshot():
    exp = lb.make_experiment(steps=12, task='continual', lmda=0.5)
    hist = exp.run(6)
    snap = exp.snapshot()
    import pickle; pickle.dumps(snap)
    figs = lb.lambda_render(snap, hist, step=2)
    assert set(figs) == {'loss', 'modes', 'kernel', 'representations', 'phase'}
    assert all(f.layout.title.text for f in figs.values())


def test_wrong_lambda_solution_departs_from_gd():
    "The ablation's theory (the zero-balanced formula for a λ ≠ 0 start) is far from GD; the right λ is not."
    X, Y, S = task(4, 4)
    W1, W2 = lb.make_lambda_balanced(2.0, 4, 4, 4, scale=0.3, rng=1)
    tr = lb.simulate_gd(W1, W2, X, Y, 1e-3, 2000, 500)
    right, wrong = lb.qqt_exact(W1, W2, S, tr.t), lb.qqt_exact(W1, W2, S, tr.t, lmda=0.0)
    assert lb._rel_err(right, tr.qqt()) < 2e-3 < 0.1 < lb._rel_err(wrong, tr.qqt())
    W1b, W2b = lb.make_lambda_balanced(0.0, 4, 4, 4, scale=0.3, rng=1)     # for λ = 0 both are the same formula
    np.testing.assert_allclose(lb.qqt_exact(W1b, W2b, S, 1.0, lmda=0.0), lb.qqt_exact(W1b, W2b, S, 1.0), atol=1e-12)


def test_reproduce_rejects_data():
    with pytest.raises(ValueError, match='no real data'): lb.reproduce(data='x.npy')


def test_qqt_lazy_is_the_linearised_flow():
    "The lazy null: representations frozen at t = 0, W2W1 solving dP/dt = (Σ − P)A + B(Σ − P) (checked by solve_ivp)."
    from scipy.integrate import solve_ivp
    X, Y = lb.random_task(12, 3, 4, rng=0); S = lb.sigma_yx(X, Y)
    W1, W2 = lb.make_lambda_balanced(0.7, 3, 3, 4, scale=0.4, rng=1)
    A, B = W1.T @ W1, W2 @ W2.T
    rhs = lambda t, p: ((S - p.reshape(4, 3)) @ A + B @ (S - p.reshape(4, 3))).ravel()
    ts = np.array([0.0, 0.3, 1.5])
    sol = solve_ivp(rhs, (0, 1.5), (W2 @ W1).ravel(), t_eval=ts, rtol=1e-11, atol=1e-12)
    q = lb.qqt_lazy(W1, W2, S, ts)
    for k in range(3):
        A_t, P_t, B_t = lb.split_qqt(q[k], 3)
        assert np.allclose(P_t, sol.y[:, k].reshape(4, 3), atol=1e-8)
        assert np.allclose(A_t, A) and np.allclose(B_t, B) and np.allclose(q[k], q[k].T)
    assert lb.qqt_lazy(W1, W2, S, 0.3).shape == (7, 7)


def test_lazy_null_approaches_the_exact_solution_as_lambda_grows():
    X, Y = lb.random_task(12, 3, 3, rng=2); S = lb.sigma_yx(X, Y)
    errs = []
    for lmda in (1.0, 10.0, 100.0):
        W1, W2 = lb.make_lambda_balanced(lmda, 3, 3, 3, scale=0.3, rng=3)
        ts = np.linspace(0, 5 / lmda, 6)
        qe = lb.qqt_exact(W1, W2, S, ts)
        errs.append(np.abs(lb.qqt_lazy(W1, W2, S, ts) - qe).max() / np.abs(qe).max())
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.01, errs
