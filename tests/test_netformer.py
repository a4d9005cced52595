"Properties and bad input of iclr25_nb.netformer."
import copy
import importlib.util
import math

import numpy as np
import pytest
import torch

from iclr25_nb.netformer import (NetFormer, NetFormerConfig, NetFormerExperiment, make_experiment, toy_system,
                                 connectivity_constrained, celltype_weights, stdp_lif, task_rnn, evidence_task,
                                 make_windows, load_activity, connectivity, attention_timeseries, ridge_var,
                                 ols_connectivity, lagged_xcorr, offdiag_corr, temporal_corr, celltype_aggregate, r2,
                                 match_scale, sign_agreement, P_TABLE, MU_TABLE)


# -- the model ----------------------------------------------------------------------------------------------------
def test_attention_formula_by_hand():
    torch.manual_seed(1)
    m = NetFormer(6, 4, 3).double()
    x = torch.randn(5, 6, 4, dtype=torch.float64)
    pred, A = m(x)
    Z = torch.cat([x, m.embedding.expand(5, -1, -1)], -1)
    WQ, WK = m.W_Q.weight, m.W_K.weight
    A_hand = torch.einsum('bid,ed,bjf,ef->bij', Z, WQ, Z, WK) / math.sqrt(7)
    assert torch.allclose(A, A_hand, atol=1e-12)
    assert torch.allclose(pred, x[..., -1] + torch.einsum('bij,bj->bi', A_hand, x[..., -1]), atol=1e-12)


def test_bilinear_decomposition_and_static_term():
    "A = ee + eh + he + hh blocks of W_Q^T W_K; with zero histories only the static embedding term is left."
    torch.manual_seed(2)
    H, dE = 3, 4
    m = NetFormer(5, H, dE).double()
    x = torch.randn(2, 5, H, dtype=torch.float64)
    _, A = m(x)
    M = m.W_Q.weight.T @ m.W_K.weight / math.sqrt(H + dE)          # (d, d)
    e = m.embedding
    parts = (torch.einsum('bih,hk,bjk->bij', x, M[:H, :H], x) + torch.einsum('bih,hk,jk->bij', x, M[:H, H:], e)
             + torch.einsum('ih,hk,bjk->bij', e, M[H:, :H], x) + (e @ M[H:, H:] @ e.T)[None])
    assert torch.allclose(A, parts, atol=1e-12)
    _, A0 = m(torch.zeros(1, 5, H, dtype=torch.float64))
    assert torch.allclose(A0[0], e @ M[H:, H:] @ e.T, atol=1e-12)


def test_permutation_equivariance():
    torch.manual_seed(3)
    m = NetFormer(7, 5, 4, layernorm=True)
    x = torch.randn(3, 7, 5)
    perm = torch.randperm(7)
    m2 = NetFormer(7, 5, 4, layernorm=True); m2.load_state_dict(m.state_dict())
    with torch.no_grad(): m2.embedding.copy_(m.embedding[perm])
    p1, A1 = m(x); p2, A2 = m2(x[:, perm])
    assert torch.allclose(A2, A1[:, perm][:, :, perm], atol=1e-5)       # P A P^T
    assert torch.allclose(p2, p1[:, perm], atol=1e-5)


def test_exact_representability_linear_static_float64():
    "With e = I and W_Q, W_K acting on the embeddings only, A = k W exactly and NetFormer is the Euler step."
    x, W_t = toy_system('linear', dynamic=False, n=5, steps=600, seed=0)
    W, k = W_t[0].astype(np.float64), 0.01
    m = NetFormer(5, 1, 5).double()
    d = 6
    with torch.no_grad():
        m.embedding.copy_(torch.eye(5, dtype=torch.float64))
        WQ = torch.zeros(d, d, dtype=torch.float64); WQ[1:, 1:] = torch.from_numpy(math.sqrt(d) * k * W).T
        WK = torch.zeros(d, d, dtype=torch.float64); WK[1:, 1:] = torch.eye(5, dtype=torch.float64)
        m.W_Q.weight.copy_(WQ); m.W_K.weight.copy_(WK)
    tok, tgt = make_windows(x.astype(np.float64), 1)
    pred, A = m(tok.double())
    assert offdiag_corr(A.mean(0).detach().numpy(), W) > 0.999999
    assert r2(pred.detach().numpy(), tgt.numpy()) > 0.9999


@pytest.mark.slow
def test_training_recovers_linear_static_float64():
    "Trained from scratch in float64 on the linear static toy, the mean attention matches W off the diagonal."
    x, W_t = toy_system('linear', dynamic=False, steps=5000, seed=0)
    tok, tgt = make_windows(x[:3001].astype(np.float64), 1)
    tok, tgt = tok.double(), tgt.double()
    torch.manual_seed(0); g = torch.Generator().manual_seed(0)
    m = NetFormer(5, 1, 5, init_scale=0.1).double()
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, 800, 0.8)
    for _ in range(4000):
        idx = torch.randint(0, 2400, (80,), generator=g)
        loss = ((m(tok[idx])[0] - tgt[idx]) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
    assert offdiag_corr(connectivity(m, tok[2400:]), W_t[0]) > 0.999


def _official_forward(m, x, activation='none', layernorm=True):
    "The official NetFormer_sim forward (NetFormer/models.py + layers.py), written out from its equations."
    e = m.embedding.expand(x.shape[0], -1, -1)
    xe = torch.cat([x, e], -1)
    if layernorm: xe = torch.nn.functional.layer_norm(xe, xe.shape[-1:], m.ln_in.weight, m.ln_in.bias)
    h = xe[..., :x.shape[-1]]
    logits = m.W_Q(xe) @ m.W_K(xe).transpose(-1, -2)
    act = {'none': lambda a: a, 'softmax': lambda a: a.softmax(-1), 'sigmoid': torch.sigmoid, 'tanh': torch.tanh}
    A = act[activation](logits) * (x.shape[-1] + e.shape[-1]) ** -0.5          # activate, then scale
    out = A @ h + h
    if layernorm: out = torch.nn.functional.layer_norm(out, out.shape[-1:], m.ln_out.weight, m.ln_out.bias)
    return out[..., -1], A


@pytest.mark.parametrize('activation', ['none', 'softmax', 'sigmoid', 'tanh'])
def test_defaults_match_the_official_layers(activation):
    "Joint layer norm over [x; e], activation before the scale: our defaults give the official predictions."
    torch.manual_seed(5)
    m = NetFormer(6, 4, 3, layernorm=True, activation=activation).double()
    with torch.no_grad():
        for p in (m.ln_in.weight, m.ln_in.bias, m.ln_out.weight, m.ln_out.bias): p.normal_()
    x = torch.randn(3, 6, 4, dtype=torch.float64)
    p_ours, A_ours = m(x)
    p_off, A_off = _official_forward(m, x, activation)
    assert torch.allclose(A_ours, A_off, atol=1e-12) and torch.allclose(p_ours, p_off, atol=1e-12)
    old = NetFormer(6, 4, 3, layernorm=True, activation=activation, norm='history', scale_first=True).double()
    state = {k: v for k, v in m.state_dict().items() if not k.startswith('ln_in')}
    old.load_state_dict(state, strict=False)
    assert not torch.allclose(old(x)[0], p_off, atol=1e-6)                  # our first version's choices differ


def test_without_layernorm_and_activation_all_variants_agree():
    torch.manual_seed(6)
    m = NetFormer(5, 3, 2).double()
    x = torch.randn(4, 5, 3, dtype=torch.float64)
    old = NetFormer(5, 3, 2, norm='history', scale_first=True).double(); old.load_state_dict(m.state_dict())
    assert torch.allclose(m(x)[0], _official_forward(m, x, layernorm=False)[0], atol=1e-12)
    assert torch.allclose(m(x)[0], old(x)[0], atol=1e-12)


def test_embedding_init_std():
    torch.manual_seed(7)
    assert abs(NetFormer(400, 2, 50).embedding.std().item() - 1.0) < 0.02          # official: N(0, 1)
    assert abs(NetFormer(400, 2, 50, embed_std=50 ** -0.5).embedding.std().item() - 50 ** -0.5) < 0.01


def test_static_attention_is_one_constant_matrix():
    "The ablation: A = e W_Q^T (e W_K^T)^T / sqrt(d), the same for every sample whatever the histories."
    torch.manual_seed(8)
    m = NetFormer(5, 3, 4, attention='static').double()
    x = torch.randn(6, 5, 3, dtype=torch.float64)
    pred, A = m(x)
    Z0 = torch.cat([torch.zeros(5, 3, dtype=torch.float64), m.embedding], -1)
    A_hand = m.W_Q(Z0) @ m.W_K(Z0).T / math.sqrt(7)
    assert torch.allclose(A, A_hand.expand(6, -1, -1), atol=1e-12)
    assert torch.allclose(pred, x[..., -1] + x[..., -1] @ A_hand.T, atol=1e-12)
    with pytest.raises(ValueError, match='static'): NetFormer(5, 3, 0, attention='static')


def test_static_attention_is_constant_with_layer_norm():
    "With the joint layer norm the ablation still gives one matrix: the histories are zeroed before the norm."
    torch.manual_seed(9)
    for norm in ('joint', 'history'):
        m = NetFormer(6, 4, 5, n_query=2, layernorm=True, norm=norm, attention='static').double()
        _, A = m(torch.randn(7, 6, 4, dtype=torch.float64))
        assert A.shape == (7, 2, 6) and torch.allclose(A, A[:1].expand(7, -1, -1), atol=1e-12)
        d = NetFormer(6, 4, 5, n_query=2, layernorm=True, norm=norm).double()
        d.load_state_dict(m.state_dict())
        _, Ad = d(torch.zeros(1, 6, 4, dtype=torch.float64))
        assert torch.allclose(A[:1], Ad, atol=1e-12)            # = the dynamic attention of all-zero histories


def test_sign_agreement():
    W = np.array([[0, 1, -1], [2, 0, 0], [-3, 4, 0]], float)
    assert sign_agreement(W, W) == 1.0 and sign_agreement(-W, W) == 0.0
    assert sign_agreement(np.abs(W) + 1, W) == pytest.approx(3 / 5)      # non-negative estimate: share of positives


def test_softmax_ablation_is_nonnegative_rows_sum_to_one():
    "Official order: softmax, then the 1/sqrt(H + d_E) scale, so rows sum to that scale; scale_first: rows sum to 1."
    m = NetFormer(4, 2, 3, activation='softmax')
    _, A = m(torch.randn(3, 4, 2))
    assert (A >= 0).all() and torch.allclose(A.sum(-1), torch.full((3, 4), 5 ** -0.5))
    _, A1 = NetFormer(4, 2, 3, activation='softmax', scale_first=True)(torch.randn(3, 4, 2))
    assert torch.allclose(A1.sum(-1), torch.ones(3, 4))


def test_n_query_and_extra_tokens():
    m = NetFormer(6, 3, 2, n_query=4)
    pred, A = m(torch.randn(2, 6, 3))
    assert pred.shape == (2, 4) and A.shape == (2, 4, 6)


def test_connectivity_is_mean_attention():
    torch.manual_seed(4)
    m = NetFormer(3, 2, 2)
    tok = torch.randn(300, 3, 2)
    assert np.allclose(connectivity(m, tok, chunk=64), attention_timeseries(m, tok).mean(0), atol=1e-6)


# -- simulators -----------------------------------------------------------------------------------------------------
def test_celltype_connection_probabilities_and_means():
    W, types = celltype_weights(n=600, seed=0)
    for a in range(4):
        for b in range(4):
            block = W[types == a][:, types == b]
            n = block.size - (block.shape[0] if a == b else 0)
            p_hat = (block != 0).sum() / n
            se = math.sqrt(P_TABLE[a, b] * (1 - P_TABLE[a, b]) / n)
            assert abs(p_hat - P_TABLE[a, b]) < 3 * se + 1e-9, (a, b, p_hat)
            if (block != 0).sum() >= 30: assert abs(block[block != 0].mean() - MU_TABLE[a, b]) < 0.05


def test_stdp_conductances_bounded_and_plastic():
    V, spikes, post, g = stdp_lif(n_pre=100, steps=4000, seed=1)
    assert g.min() >= 0 and g.max() <= 0.024 + 1e-9
    assert post.sum() > 0 and np.abs(g[-1] - g[0]).max() > 0
    assert set(np.unique(spikes)) <= {0, 1}
    assert abs(spikes.mean() - 50 * 1e-3) < 0.01                # Poisson rate 50 Hz at dt = 1 ms


def test_toy_systems_bounded_and_state_dependent():
    for kind in ('linear', 'tanh'):
        x, W_t = toy_system(kind, dynamic=True, seed=2)
        assert np.all(np.isfinite(x)) and np.abs(x).max() < 10
        dx, dW = (x - x[:1]).astype(np.float64), (W_t - W_t[:1]).astype(np.float64)
        a = dx[1] @ dW[1] / (dx[1] @ dx[1])                         # W_t - W_0 = (x_t - x_0) a^T for every t
        assert np.allclose(dW, dx[:, :, None] * a[None, None, :], atol=1e-4)
        assert abs(np.linalg.norm(a) - 2.5) < 1e-3                  # |a| = a_scale
        assert np.linalg.cond(x[:2400]) <= 60                      # the trajectory excites every direction
    xs, Ws = toy_system('linear', dynamic=False, seed=2)
    assert np.allclose(Ws, Ws[0])


def test_task_rnn_learns_the_evidence_task():
    h, u, W_hh, acc = task_rnn(n_hidden=4, n_trials=100, iters=150, seed=0)  # evidence task
    assert acc > 0.8 and np.abs(h).max() <= 1 and W_hh.shape == (4, 4)
    u2, y2 = evidence_task(10, seed=3)
    assert u2.shape == (10, 40, 3) and set(np.unique(y2)) <= {0, 1, 2}


@pytest.mark.skipif(importlib.util.find_spec('neurogym') is not None, reason='neurogym is installed')
def test_neurogym_task_without_neurogym_raises():
    "neurogym is the netformer extra, left out of `all` (it pins an older numpy): the error names the extra."
    import importlib.util
    if importlib.util.find_spec('neurogym') is not None: pytest.skip('neurogym is installed')
    with pytest.raises(ImportError, match=r"neurogym: pip install 'iclr25_nb\[netformer\]'"):
        task_rnn(task='PerceptualDecisionMaking-v0', iters=1)


# -- metrics and baselines ----------------------------------------------------------------------------------------
def test_metrics_axioms():
    rng = np.random.default_rng(0)
    W = rng.normal(size=(8, 8))
    assert offdiag_corr(W, W) == pytest.approx(1.0)
    assert offdiag_corr(2.5 * W, W) == pytest.approx(1.0)                    # scale freedom
    assert offdiag_corr(-W, W) == pytest.approx(-1.0)                        # a sign flip flips the sign
    assert offdiag_corr(W + 100 * np.eye(8), W) == pytest.approx(1.0)       # diagonal excluded
    assert np.all(np.sign(match_scale(-W, W)) == np.sign(-W))              # match_scale never flips signs
    s = rng.normal(size=(40, 3, 3))
    assert np.nanmin(temporal_corr(s, s, smooth=4)) == pytest.approx(1.0)
    ty = np.array([0, 0, 1, 1, 2, 2, 2])
    B = rng.normal(size=(3, 3))
    assert np.allclose(celltype_aggregate(B[ty][:, ty], ty), B)
    assert r2(W, W) == 1.0


def test_ols_equals_lstsq_and_xcorr_equals_corrcoef():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 4))
    assert np.allclose(ols_connectivity(x), np.linalg.lstsq(x[:-1], x[1:], rcond=None)[0].T, atol=1e-10)
    C = lagged_xcorr(x, lag=2)
    ref = np.array([[np.corrcoef(x[2:, i], x[:-2, j])[0, 1] for j in range(4)] for i in range(4)])
    assert np.allclose(C, ref, atol=1e-10)


def test_ridge_var_matches_scikit_learn():
    sk = pytest.importorskip('sklearn.linear_model')
    rng = np.random.default_rng(2)
    x = rng.normal(size=(500, 5))
    for alpha in (0.0, 3.0):
        B, c = ridge_var(x, lags=2, alpha=alpha)
        X = np.concatenate([x[1:-1], x[:-2]], 1); Y = x[2:]
        est = (sk.LinearRegression() if alpha == 0 else sk.Ridge(alpha=alpha)).fit(X, Y)
        assert np.allclose(np.concatenate([B[0], B[1]], 1), est.coef_, atol=1e-8)
        assert np.allclose(c, est.intercept_, atol=1e-8)


def test_trials_are_windowed_within_trials():
    x = np.arange(2 * 5 * 1, dtype=float).reshape(2, 5, 1)
    tok, tgt = make_windows(x, 2)
    assert tok.shape == (6, 1, 2) and tgt[:, 0].tolist() == [2, 3, 4, 7, 8, 9]


# -- experiment ---------------------------------------------------------------------------------------------------
def test_experiment_checkpoint_resume_is_exact():
    a = make_experiment('quick', 0, steps=20, eval_every=5)
    a.run(10)
    state = copy.deepcopy(a.state_dict())   # state_dict() holds live references (as torch's do): copy, as a file would
    b = make_experiment('quick', 0, steps=20, eval_every=5)
    b.load_state_dict(state)
    ra, rb = a.run(), b.run()
    assert [r['loss'] for r in ra] == [r['loss'] for r in rb]


def test_experiment_systems_build_and_step():
    for system in ('tanh', 'celltype', 'task_rnn', 'stdp'):
        kw = {'celltype': dict(samples=300), 'task_rnn': dict(samples=40), 'stdp': dict(samples=3000)}.get(system, {})
        exp = make_experiment('quick', 0, system=system, steps=3, eval_every=3, **kw)
        out = exp.run()
        assert np.isfinite(out[-1]['loss']) and 'pearson_netformer' in out[-1]
        snap = exp.snapshot()
        assert snap['A'].shape == exp.data.gt.shape


# -- bad input ------------------------------------------------------------------------------------------------------
def test_bad_model_input():
    m = NetFormer(4, 3, 2)
    with pytest.raises(ValueError, match='x must be'): m(torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match='x must be'): m(torch.randn(4, 3))
    with pytest.raises(ValueError, match='activation'): NetFormer(4, 3, 2, activation='relu')
    with pytest.raises(ValueError, match='layernorm'): NetFormer(4, 1, 2, layernorm=True)
    with pytest.raises(ValueError, match='n_query'): NetFormer(4, 3, 2, n_query=5)


def test_bad_activity():
    with pytest.raises(ValueError, match='NaN'): make_windows(np.full((20, 3), np.nan), 2)
    with pytest.raises(ValueError, match='too short'): make_windows(np.zeros((3, 3)), 3)
    with pytest.raises(ValueError, match='dimensions'): make_windows(np.zeros(10), 2)
    with pytest.raises(ValueError, match='history'): make_windows(np.zeros((10, 2)), 0)
    with pytest.raises(ValueError, match='too short'): ridge_var(np.zeros((2, 3)), lags=2)
    with pytest.raises(ValueError, match='shape'): offdiag_corr(np.zeros((3, 3)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match='kind'): toy_system('relu')
    with pytest.raises(ValueError, match='p_table'): celltype_weights(10, p_table=np.ones((3, 3)))


def test_bad_config():
    with pytest.raises(ValueError, match='system'): NetFormerConfig(system='ring')
    with pytest.raises(ValueError, match='attention'): NetFormerConfig(attention='fixed')
    with pytest.raises(ValueError, match='attention'): NetFormerConfig(attention='static', embed_dim=0)
    with pytest.raises(ValueError, match='norm'): NetFormerConfig(norm='batch')
    with pytest.raises(ValueError, match='lr'): NetFormerConfig(lr=-1.0)
    with pytest.raises(ValueError, match='samples'): NetFormerConfig(samples=5)
    with pytest.raises(ValueError, match='no field'): NetFormerConfig.preset('quick', bogus=1)


def test_load_activity_good_and_broken_files(tmp_path):
    x = np.random.default_rng(0).normal(size=(50, 4)).astype(np.float32)
    np.save(tmp_path / 'a.npy', x); np.savez(tmp_path / 'a.npz', activity=x)
    np.savetxt(tmp_path / 'a.csv', x, delimiter=',')
    for f in ('a.npy', 'a.npz', 'a.csv'):
        assert np.allclose(load_activity(tmp_path / f), x, atol=1e-5)
    raw = (tmp_path / 'a.npy').read_bytes()
    (tmp_path / 'trunc.npy').write_bytes(raw[:len(raw) // 2])
    np.save(tmp_path / 'vec.npy', x[:, 0])
    np.save(tmp_path / 'obj.npy', np.array([{'a': 1}], dtype=object), allow_pickle=True)
    bad = x.copy(); bad[3, 1] = np.nan; np.save(tmp_path / 'nan.npy', bad)
    (tmp_path / 'text.csv').write_text('a,b\n1,2\n')
    np.save(tmp_path / 'str.npy', np.array([['a', 'b'], ['c', 'd']]))
    cases = {'trunc.npy': 'readable', 'vec.npy': 'shape', 'obj.npy': 'readable', 'nan.npy': 'NaN', 'text.csv': 'at least',
             'str.npy': 'real numbers', 'missing.npy': 'no such file'}
    for f, msg in cases.items():
        with pytest.raises(ValueError, match=msg) as e: load_activity(tmp_path / f)
        assert f in str(e.value)


def test_stdp_system_alignment_and_tracking_metrics():
    "STDP tokens: V's window ends at t, the spikes' at t + 1 (they move V(t + 1)); g(t) is the truth of row V."
    exp = make_experiment('quick', 0, system='stdp', n_neurons=6, samples=3000, steps=2, eval_every=1)
    d = exp.data
    H = exp.config.history
    V, spikes, _, g = stdp_lif(n_pre=6, steps=3000 + H, g_max=0.4, g_init=0.4 * 14 / 24, seed=0)
    n_train = int(0.8 * len(V)); v = (V - V[:n_train].mean()) / V[:n_train].std()
    tok = torch.cat([d.train_tokens, d.test_tokens]); tgt = torch.cat([d.train_targets, d.test_targets])
    assert tok.shape == (3000, 7, H) and tgt.shape == (3000, 1) and d.n_query == 1 and d.n_keys == 7
    assert np.allclose(tok[:, 0, -1], v[H - 1:-1], atol=1e-5) and np.allclose(tgt[:, 0], v[H:], atol=1e-5)
    assert np.array_equal(tok[:, 1:, -1].numpy(), spikes[H:].astype(np.float32))      # the spikes at t + 1
    assert np.allclose(d.W_all[:, 0, 1:], g[H - 1:-1]) and np.all(d.W_all[:, 0, 0] == 0)
    assert d.gt.shape == (1, 7) and exp.baselines['ols'].shape == (1, 7)
    exp.run()
    snap = exp.snapshot()
    assert snap['A'].shape == (1, 7) and snap['W_t'].shape[1:] == (1, 7)
    m = exp._tracking_over_recording()
    assert set(m) == {'temporal_median', 'temporal_mean', 'temporal_null', 'tracking'}
    assert all(np.isfinite(v) and -1 <= v <= 1 for v in m.values())
    st = make_experiment('quick', 0, system='stdp', n_neurons=6, samples=3000, steps=2, attention='static')
    st.run()
    assert st._tracking_over_recording()['tracking'] == 0.0                 # one constant matrix tracks nothing


def test_train_and_test_windows_are_disjoint():
    "Held-out test items: no test token window (a neuron-by-history slice of activity) occurs among the training ones."
    from iclr25_nb.core import overlap_count
    for kw in (dict(system='linear'), dict(system='tanh'), dict(system='celltype'),
               dict(system='stdp', n_neurons=6, samples=3000)):
        d = make_experiment('quick', 0, steps=1, **kw).data
        assert overlap_count(d.train_tokens.cpu().numpy(), d.test_tokens.cpu().numpy()) == 0, kw
        assert overlap_count(d.train_tokens.cpu().numpy(), d.train_tokens.cpu().numpy()[:5]) == 5   # the check bites


def test_sliding_window_rivals():
    from iclr25_nb.netformer import sliding_window_fit, tune_window, activity_corr, tracking_corr
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3)); M = rng.normal(size=(3, 3)); y = x @ M.T + 0.1 * rng.normal(size=(300, 3))
    B = sliding_window_fit(x, y, 50)
    assert B.shape == (300, 3, 3)
    assert np.allclose(B[100], np.linalg.lstsq(x[50:100], y[50:100], rcond=None)[0].T, atol=1e-5)
    assert np.allclose(B[10], B[50])                                     # before the first full window: the first
    C = sliding_window_fit(x, y, 50, 'xcorr')
    assert np.isclose(C[100][0, 2], np.corrcoef(y[50:100, 0], x[50:100, 2])[0, 1], atol=1e-8)
    assert np.allclose(activity_corr(x), np.corrcoef(x.T), atol=1e-8)
    with pytest.raises(ValueError, match='window'): sliding_window_fit(x, y, 1)
    with pytest.raises(ValueError, match='kind'): sliding_window_fit(x, y, 10, 'ridge')
    with pytest.raises(ValueError, match='length'): sliding_window_fit(x, y[:-1], 10)
    with pytest.raises(ValueError, match='too few'): sliding_window_fit(x[:20], y[:20], 50)
    # a coupling that switches half way: a short window follows it, so tuning picks a short one over a long one
    W = np.stack([M if t < 150 else -M for t in range(300)])
    y2 = np.einsum('tij,tj->ti', W, x)
    assert tune_window(x, y2, W, start=60, windows=(10, 140)) == 10
    assert tracking_corr(sliding_window_fit(x, y2, 10)[60:], W[60:]) > 0.9


def test_headline_nulls_are_measured():
    "The toys' evaluation carries the rivals and nulls of the headlines: sliding windows, NetFormer at initialisation."
    e = make_experiment('quick', 0, system='linear', steps=2)
    e.run()
    ev = e.evaluate()
    for k in ('tracking_sliding_ols', 'tracking_sliding_xcorr', 'tracking_init', 'pearson_init', 'pearson_corr'):
        assert np.isfinite(ev[k]) and -1 <= ev[k] <= 1, k
    assert ev['window_sliding_ols'] in (10, 20, 50, 100, 200, 500)
    ct = make_experiment('quick', 0, system='celltype', steps=1).evaluate()
    assert all(np.isfinite(ct[k]) for k in ('kk_pearson_init', 'kk_pearson_corr', 'kk_pearson_xcorr'))
