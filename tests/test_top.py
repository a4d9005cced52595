"TOP: exactness of the compensation, partitions, normalised adjacency, Planetoid loader and bad input."
import pickle
import shutil

import numpy as np
import pytest
import torch

from iclr25_nb.top import (GAS, ClusterGCN, ExactNeighbourhood, FullBatch, TOP, basis_for_batches, truncated_pinv, TOPGCN, TOPGCNII, TOPGCNConv, as_features,
                           build_basis, csbm, cut_fraction, embedding_error, load_planetoid, make_batches,
                           make_experiment, make_model, normalized_adjacency, normalized_adjacency_scipy,
                           message_error, official_basis, orthonormal_basis, partition, precompute_top_batches,
                           scaling_study)
from iclr25_nb.core import overlap_count


@pytest.fixture(scope='module')
def small():
    g = csbm(1200, features=8, seed=3)
    A = normalized_adjacency_scipy(g.edge_index, g.n)
    batches = make_batches(*partition(g.edge_index, g.n, 6, seed=0), 2)
    return g, A, batches


def _span_basis(A, X, layers):
    blocks = [X]
    for _ in range(layers - 1): blocks.append(A @ blocks[-1])
    return np.concatenate(blocks, 1)


def test_exact_when_embeddings_lie_in_the_span(small):
    g, A, batches = small
    X = g.x.astype(np.float64)
    Q = orthonormal_basis(_span_basis(A, X, 3), rank=24, power_iters=0)
    torch.manual_seed(0)
    model = TOPGCN(8, 8, 8, 3, 0.0, 'identity', bias=False).double()
    top = TOP(A, X, batches, Q, inb_size=200, dtype=torch.float64)
    full = FullBatch(A, X, dtype=torch.float64)
    ref = full.forward(model)[0]
    for i, b in enumerate(batches):
        torch.testing.assert_close(top.forward(model, i)[0], ref[b], atol=1e-8, rtol=0)
    assert min(embedding_error(model, ClusterGCN(A, X, batches, dtype=torch.float64))) > 0.05


def test_layer_one_exact_for_a_nonlinear_model(small):
    g, A, batches = small
    X = g.x.astype(np.float64)
    Q = orthonormal_basis(X, rank=8, power_iters=0)                  # X inside span(Q)
    torch.manual_seed(1)
    model = TOPGCN(8, 16, 3, 2, 0.0).double()
    err = embedding_error(model, TOP(A, X, batches, Q, 100, dtype=torch.float64))
    assert err[0] < 1e-10 and err[1] > 1e-6                          # layer 1 exact, later layers not in span


def test_decomposition_and_pinv_contract(small):
    g, A, batches = small
    Q = orthonormal_basis(g.x.astype(np.float64), 8)
    tb = precompute_top_batches(A, Q, batches, inb_size=50, seed=0, dtype=torch.float64)
    Ad = A.toarray()
    for t in tb:
        out = np.setdiff1d(np.arange(g.n), t.nodes)
        np.testing.assert_allclose(t.C_ob.numpy(), Ad[np.ix_(t.nodes, out)] @ Q[out], atol=1e-12)
        QS = Q[t.nodes[t.anchors.numpy()]]
        pinv = t.codebook.numpy().T
        np.testing.assert_allclose(QS @ pinv @ QS, QS, atol=1e-10)
        np.testing.assert_allclose(pinv @ QS, np.eye(Q.shape[1]), atol=1e-10)


def test_one_batch_is_full_batch(small):
    g, A, _ = small
    X = g.x.astype(np.float64)
    P = build_basis(lambda: TOPGCN(8, 16, 3, 2), A, X, random_num=1)
    Q = orthonormal_basis(P, 16)
    top = TOP(A, X, [np.arange(g.n)], Q, 100, dtype=torch.float64)
    assert float(top.top[0].C_ob.abs().max()) < 1e-12                 # nothing is out of batch
    torch.manual_seed(2)
    model = TOPGCN(8, 16, 3, 2, 0.0).double()
    assert max(embedding_error(model, top)) < 1e-12


def test_growing_the_basis_does_not_increase_the_residual(small):
    g, A, _ = small
    X = g.x.astype(np.float64)
    H = A @ (A @ X) @ np.random.default_rng(0).standard_normal((8, 4))
    P = _span_basis(A, X, 3)
    res = []
    for r in (4, 8, 16, 24):
        Q = orthonormal_basis(P, r)
        res.append(np.linalg.norm(H - Q @ (Q.T @ H)))
    assert all(b <= a + 1e-9 for a, b in zip(res, res[1:])) and res[-1] < 1e-8


def test_exact_neighbourhood_equals_full_batch(small):
    g, A, batches = small
    torch.manual_seed(0)
    model = TOPGCN(8, 16, 3, 3, 0.0)
    ex = ExactNeighbourhood(A, g.x, batches, 3)
    assert max(embedding_error(model, ex)) < 1e-5
    assert all(s[-1] > s[0] for s in ex.sizes)                       # the neighbourhood grows


@pytest.mark.parametrize('arch', ['gcn', 'gcnii'])
def test_exact_for_a_nonlinear_model_when_its_own_embeddings_span_the_basis(small, arch):
    "Message invariance holds exactly when Q spans the model's own message inputs (ReLU nets, every layer)."
    g, A, batches = small
    X = g.x.astype(np.float64)
    torch.manual_seed(3)
    model = make_model(arch, 8, 6, 3, 3, 0.0).double().eval()
    full = FullBatch(A, X, dtype=torch.float64)
    _, hid = model(full.A, full.x, return_hidden=True)
    blocks = [h.detach().numpy() for h in model.message_inputs(hid)]
    if model.raw_features_in_basis: blocks = [X] + blocks
    P = np.concatenate(blocks, 1)
    Q = orthonormal_basis(P, P.shape[1], power_iters=0)
    top = TOP(A, X, batches, Q, inb_size=1000, dtype=torch.float64)
    ref = full.forward(model)[0]
    exact = 0
    for i, t in enumerate(top.top):     # exact where Q_S has full column rank (a ReLU unit alive only outside B
        if np.linalg.cond(Q[t.nodes[t.anchors.numpy()]]) < 1e4:     # makes Q_B rank-deficient: then it is not)
            torch.testing.assert_close(top.forward(model, i)[0], ref[t.nodes], atol=1e-8, rtol=0); exact += 1
    assert exact >= 2
    assert max(embedding_error(model, ClusterGCN(A, X, batches, dtype=torch.float64))) > 1e-3


def test_gcnii_exact_neighbourhood_and_single_batch(small):
    g, A, batches = small
    torch.manual_seed(4)
    model = TOPGCNII(8, 16, 3, layers=3, dropout=0.0)
    assert max(embedding_error(model, ExactNeighbourhood(A, g.x, batches, 3))) < 1e-5
    Q = orthonormal_basis(build_basis(lambda: TOPGCNII(8, 16, 3, 3), A, g.x, random_num=1), 16)
    assert Q.shape[1] <= 16
    assert max(embedding_error(model, TOP(A, g.x, [np.arange(g.n)], Q, 100))) < 1e-5


def test_sparse_features_match_dense(small):
    g, A, batches = small
    x = np.where(np.random.default_rng(0).random((g.n, 40)) < 0.05, 1.0, 0.0).astype(np.float32)
    assert as_features(x).layout == torch.sparse_csr and as_features(g.x).layout == torch.strided
    for arch in ('gcn', 'gcnii'):
        torch.manual_seed(5)
        model = make_model(arch, 40, 16, 3, 2, 0.5).eval()
        sparse, dense = ClusterGCN(A, x, batches), ClusterGCN(A, x, batches)
        dense.x_B = [torch.as_tensor(x[b]) for b in dense.batches]
        assert sparse.x_B[0].layout == torch.sparse_csr
        for i in range(len(batches)):
            torch.testing.assert_close(sparse.forward(model, i)[0], dense.forward(model, i)[0])
        model.train()                                                        # gradients flow through the sparse path
        sparse.forward(model, 0)[0].sum().backward()
        first = model.convs[0].lin if arch == 'gcn' else model.lin_in
        assert first.weight.grad is not None and first.weight.grad.abs().sum() > 0


def test_scaling_study_structure():
    rows = scaling_study(sizes=(300, 900), batch_nodes=150, layers=2, hidden=8, rank=8, inb_size=20,
                         sample_batches=2, repeats=1)
    assert [r['batches'] for r in rows] == [2, 6]
    assert all(r[f'epoch_s_{k}'] > 0 for r in rows for k in ('full', 'cluster', 'top', 'exact'))
    assert rows[1]['exact_nodes'] > rows[1]['batch_nodes']                   # neighbour explosion
    with pytest.raises(ValueError, match='sample_batches'): scaling_study(sizes=(300,), sample_batches=0)


def test_partition_covers_every_node_once_and_metis_beats_random():
    g = csbm(2000, seed=4)
    for method in ('metis', 'rcm', 'random'):
        perm, ptr = partition(g.edge_index, g.n, 10, method, seed=0)
        assert sorted(perm.tolist()) == list(range(g.n)) and ptr[-1] == g.n
        b = make_batches(perm, ptr, 3)
        assert np.array_equal(np.sort(np.concatenate(b)), np.arange(g.n))
    cut = {m: cut_fraction(g.edge_index, make_batches(*partition(g.edge_index, g.n, 10, m), 1), g.n)
           for m in ('metis', 'random')}
    assert cut['metis'] < cut['random']
    assert np.array_equal(partition(g.edge_index, g.n, 10, seed=5)[0], partition(g.edge_index, g.n, 10, seed=5)[0])


def test_normalized_adjacency_closed_form():
    g = csbm(200, seed=0)
    A = normalized_adjacency(g.edge_index, g.n, dtype=torch.float64).to_dense().numpy()
    B = np.zeros((g.n, g.n)); B[g.edge_index[0], g.edge_index[1]] = 1; B += np.eye(g.n)
    d = B.sum(1)
    np.testing.assert_allclose(A, B / np.sqrt(d[:, None] * d[None]), atol=1e-12)
    ev = np.linalg.eigvalsh(A)
    assert ev.min() >= -1 - 1e-9 and ev.max() <= 1 + 1e-9


def test_gradcheck_and_no_gradient_into_the_compensation(small):
    g, A, batches = small
    b = batches[0][:30]
    from iclr25_nb.top import to_torch_csr
    Ab = to_torch_csr(A[b][:, b], torch.float64)
    conv = TOPGCNConv(8, 3).double()
    C = torch.randn(30, 5, dtype=torch.float64); P = torch.randn(10, 5, dtype=torch.float64)
    S = torch.arange(10)
    h = torch.randn(30, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda h: conv(Ab.to_dense(), h, (C, P, S)), (h,))
    conv(Ab, h, (C, P, S)).sum().backward()
    assert not C.requires_grad and C.grad is None and P.grad is None


def test_experiment_is_deterministic():
    kw = dict(n=800, parts=6, steps=2, hidden=8, rank=16, inb_size=50, trainers=('full', 'cluster', 'top'))
    a = make_experiment('quick', 0, **kw); ha = a.run()      # dropout draws from torch's global generator,
    b = make_experiment('quick', 0, **kw); hb = b.run()      # which the experiment seeds
    np.testing.assert_array_equal(a.Q, b.Q)
    assert all(np.array_equal(x, y) for x, y in zip(a.batches, b.batches))
    assert [h['loss_top'] for h in ha] == [h['loss_top'] for h in hb]


def test_ablation_is_cluster_gcn():
    kw = dict(n=800, parts=6, steps=2, hidden=8, rank=16, inb_size=50, trainers=('full', 'cluster', 'top'),
              compensation=False)
    e = make_experiment('quick', 0, **kw)
    assert e.layer_errors()['top'] == e.layer_errors()['cluster']          # the same forward, the same errors


def test_bad_input():
    with pytest.raises(ValueError, match='homophily'): csbm(100, homophily=2)
    with pytest.raises(ValueError, match='outside'): normalized_adjacency(np.array([[0], [7]]), 3)
    with pytest.raises(ValueError, match='parts'): partition(np.array([[0], [1]]), 2, 5)
    with pytest.raises(ValueError, match='rank'): orthonormal_basis(np.ones((4, 2)), 0)
    with pytest.raises(ValueError, match='NaN'): orthonormal_basis(np.full((4, 2), np.nan), 2)
    with pytest.raises(ValueError, match='parts_per_batch'): make_batches(np.arange(4), np.array([0, 2, 4]), 3)
    with pytest.raises(ValueError, match='arch'): make_model('gat', 3, 4, 2, 2)
    with pytest.raises(ValueError, match='alpha'): TOPGCNII(3, 4, 2, alpha=1.5)
    with pytest.raises(ValueError, match='arch'): make_experiment(arch='sage')


# --- the Planetoid loader on the real files and on broken copies -------------------------------------------------
@pytest.fixture(scope='module')
def planetoid(shared_data):
    p = shared_data / 'planetoid'
    if not (p / 'ind.cora.x').is_file(): pytest.skip('no Planetoid files')
    return p


def test_planetoid_loads_cora_and_citeseer(planetoid):
    cora = load_planetoid(planetoid, 'cora')
    assert (cora.n, cora.num_edges // 2, cora.x.shape[1], cora.num_classes) == (2708, 5278, 1433, 7)
    assert (cora.train.sum(), cora.val.sum(), cora.test.sum()) == (140, 500, 1000)
    cs = load_planetoid(planetoid, 'citeseer')
    assert (cs.n, cs.x.shape[1], cs.num_classes, cs.test.sum()) == (3327, 3703, 6, 1000)
    assert np.isfinite(cs.x).all()


def _copy(planetoid, tmp_path):
    for f in planetoid.glob('ind.cora.*'): shutil.copy(f, tmp_path / f.name)
    return tmp_path


class Evil:
    def __reduce__(self): return (print, ('pwned',))


@pytest.mark.parametrize('case', ['unexpected class', 'truncated', 'missing', 'wrong shape', 'nan', 'not one-hot'])
def test_planetoid_refuses_broken_files(planetoid, tmp_path, case):
    d = _copy(planetoid, tmp_path)
    if case == 'unexpected class':
        (d / 'ind.cora.y').write_bytes(pickle.dumps(Evil(), protocol=2)); match = 'refusing to unpickle class'
    elif case == 'truncated':
        raw = (d / 'ind.cora.allx').read_bytes(); (d / 'ind.cora.allx').write_bytes(raw[:len(raw) // 2])
        match = 'ind.cora.allx'
    elif case == 'missing':
        (d / 'ind.cora.graph').unlink(); match = 'no such file'
    elif case == 'wrong shape':
        (d / 'ind.cora.y').write_bytes(pickle.dumps(np.zeros((3, 7), np.float32), protocol=2)); match = 'rows'
    elif case == 'nan':
        (d / 'ind.cora.ty').write_bytes(pickle.dumps(np.full((1000, 7), np.nan, np.float32), protocol=2))
        match = 'NaN'
    else:
        (d / 'ind.cora.y').write_bytes(pickle.dumps(np.full((140, 7), 2.0, np.float32), protocol=2))
        match = 'one-hot'
    with pytest.raises(ValueError, match=match):
        load_planetoid(d, 'cora')


def test_clean_edges_matches_unique_reference():
    from iclr25_nb.top import clean_edges
    rng = np.random.default_rng(0)
    for n, m in ((5, 0), (3, 10), (50, 400), (1000, 20000)):           # duplicates and self-loops included
        e = rng.integers(0, n, (2, m))
        both = np.concatenate([e, e[::-1]], 1); both = both[:, both[0] != both[1]]
        key = np.unique(both[0] * n + both[1])
        np.testing.assert_array_equal(clean_edges(e, n), np.stack([key // n, key % n]))


def test_gcn_matches_pyg_gcnconv(small):
    "Cross-check with PyTorch Geometric: the same weights give the same full-batch logits and gradients."
    pytest.importorskip('torch_geometric')
    from torch_geometric.nn import GCNConv
    g, A, _ = small
    torch.manual_seed(0)
    ours = TOPGCN(g.x.shape[1], 16, g.num_classes, layers=2, dropout=0.0).double()
    peer = [GCNConv(c.lin.weight.shape[1], c.lin.weight.shape[0]).double() for c in ours.convs]
    with torch.no_grad():
        for c, p in zip(ours.convs, peer): p.lin.weight.copy_(c.lin.weight); p.bias.copy_(c.bias)
    x, ei = torch.from_numpy(g.x).double(), torch.from_numpy(g.edge_index)
    out = ours(normalized_adjacency(g.edge_index, g.n, dtype=torch.float64), x)
    ref = peer[1](torch.relu(peer[0](x, ei)), ei)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    out.square().sum().backward(); ref.square().sum().backward()
    for c, p in zip(ours.convs, peer): torch.testing.assert_close(c.lin.weight.grad, p.lin.weight.grad)


def test_without_pymetis_metis_names_the_extra_and_rcm_is_explicit(monkeypatch):
    "No silent substitute for METIS: without pymetis make_experiment raises naming `iclr25_nb[top]`; rcm still runs."
    import iclr25_nb.top as T
    monkeypatch.setattr(T, '_pymetis', lambda: None)
    with pytest.raises(ImportError, match=r"pip install 'iclr25_nb\[top\]'"): make_experiment('quick', seed=0)
    g = csbm(200, seed=0)
    perm, ptr = partition(g.edge_index, g.n, 4, 'rcm')
    assert sorted(perm) == list(range(g.n)) and ptr[-1] == g.n


# --- issue 43: the basis as the official code builds it, and the per-layer message error on real graphs ----------
def test_official_basis_spans_all_of_P(small):
    g, A, batches = small
    P = np.concatenate([g.x, A @ g.x], 1).astype(np.float64)                  # k = 16 columns
    for r in (4, 16, 40):
        Q = official_basis(P, r)
        assert Q.shape == (g.n, max(r, P.shape[1]))                            # max(r, k) columns, never fewer
        np.testing.assert_allclose(Q.T @ Q, np.eye(Q.shape[1]), atol=1e-8)
        np.testing.assert_allclose(Q @ (Q.T @ P), P, atol=1e-8)                # all of span(P)


def test_message_error_csbm_exact_for_layer_one(small):
    g, A, batches = small
    Q = official_basis(g.x.astype(np.float64), 8)
    err = message_error(A, Q, batches, g.x, inb_size=50)
    assert err.max() < 1e-8                                                    # X inside span(Q), Q_S full column rank


def test_train_and_test_nodes_disjoint(small):
    g = small[0]
    assert overlap_count(np.flatnonzero(g.train).tolist(), np.flatnonzero(g.test).tolist()) == 0


@pytest.mark.parametrize('name', ['cora', 'citeseer'])
def test_layer_one_message_error_on_planetoid(planetoid, name):
    """Issue 43: the compensated layer-1 out-of-batch message must beat dropping it (median relative error < 1).
    The official basis (max(r, k) columns) is wider than a batch here: on CiteSeer (3,703 features > 3,327 nodes)
    it is square, so the compensation is exactly zero (error 1); a dominant rank-64 basis is worse than dropping
    (Cora 1.22). `basis_for_batches` (min|B|/8 dominant directions when the official basis is wider than a batch)
    with the truncated pinv beats dropping on both, and stays finite."""
    g = load_planetoid(planetoid, name)
    assert overlap_count(np.flatnonzero(g.train).tolist(), np.flatnonzero(g.test).tolist()) == 0
    A = normalized_adjacency_scipy(g.edge_index, g.n)
    batches = make_batches(*partition(g.edge_index, g.n, 20, seed=0), 1, seed=0)
    min_batch = min(len(b) for b in batches)
    mb = max(min_batch // 64 - 2, 1)
    P = build_basis(lambda: TOPGCN(g.x.shape[1], 64, g.num_classes, 2, 0.5), A, g.x, 2, max_blocks=mb, seed=10_000)
    Q = basis_for_batches(P, 64, min_batch, seed=20_000)
    assert Q.shape[1] == min_batch // 8 < min_batch
    err = message_error(A, Q, batches, g.x, inb_size=10_000)
    assert np.isfinite(err).all() and np.median(err) < 0.99, np.median(err)
    if name == 'citeseer':
        official = np.median(message_error(A, official_basis(P, 64, seed=20_000), batches, g.x, inb_size=10_000))
        assert official > 1 - 1e-9, official                                   # square Q: nothing compensated
    else:
        low_rank = np.median(message_error(A, orthonormal_basis(P, 64, seed=20_000), batches, g.x))
        assert low_rank > 1.1, low_rank                                        # the defect the fix removes


def test_truncated_pinv_bounds_a_rank_deficient_anchor_block(small):
    """A basis direction that lives on out-of-batch nodes makes Q_S (numerically) rank deficient: the official
    pinverse (cut 1e-15) inverts singular values of ~1e-11 and blows the compensation up; the truncated pinv keeps
    the codebook bounded by 1 / (rtol * sigma_max) and is still exact for embeddings inside the rest of the span."""
    g, A, batches = small
    b = batches[0]
    out = np.setdiff1d(np.arange(g.n), b)
    E = np.zeros((g.n, 2)); E[out[0], 0] = 1.0; E[out[1], 1] = 1.0            # two directions outside the batch,
    E[b[0], 0] = E[b[1], 1] = 1e-9                                             # nearly: Q_S singular values ~1e-10
    Q = np.linalg.qr(np.concatenate([g.x.astype(np.float64), E], 1))[0]
    QS = Q[b]
    raw, kept_raw = truncated_pinv(QS, 0.0)
    cut, kept = truncated_pinv(QS, 1e-3)
    assert kept == Q.shape[1] - 2 and np.isfinite(cut).all()
    assert np.abs(cut).max() <= 1e3 / np.linalg.svd(QS, compute_uv=False)[0] + 1e-9
    np.testing.assert_allclose(cut, np.linalg.pinv(QS, rcond=1e-3), atol=1e-10)
    H = Q[:, :g.x.shape[1]] @ np.random.default_rng(0).standard_normal((g.x.shape[1], 3))   # inside span(X)
    rec = Q @ (cut @ H[b])
    rest = np.setdiff1d(np.arange(g.n), out[:2])
    np.testing.assert_allclose(rec[rest], H[rest], atol=1e-8)   # exact except on the two nodes the cut directions
    assert np.isfinite(raw).all() and np.abs(raw).max() > 1e3 * np.abs(cut).max()   # live on; the raw one blows up
    err = message_error(A, Q, batches, g.x, inb_size=10_000)
    assert np.isfinite(err).all() and np.median(err) < 0.5


def test_top_training_stays_finite_on_the_csbm():
    "The quick CSBM protocol at a small size: TOP's loss stays finite and it learns (it diverged with pinv at 1e-15)."
    exp = make_experiment('quick', seed=0, n=2000, parts=8, steps=8, hidden=32, error_every=8,
                          trainers=('full', 'cluster', 'top'))
    hist = exp.run()
    assert all(np.isfinite(h['loss_top']) for h in hist)
    ev = exp.evaluate()
    assert ev['acc_top'] > 0.5 and ev['error_trained_top'] < ev['error_trained_cluster']


def test_gas_with_exact_histories_is_full_batch_and_pushes(small):
    """GAS: with every history equal to the full-batch embeddings, a batch's outputs equal the full-batch ones
    (eval mode); a training step pushes the batch's fresh embeddings into the history and nothing else."""
    g, A, batches = small
    torch.manual_seed(0)
    model = TOPGCN(g.x.shape[1], 16, g.num_classes, 3, 0.5).double().eval()
    full = FullBatch(A, g.x, dtype=torch.float64)
    with torch.no_grad():
        ref, hidden = model(full.A, full.x, return_hidden=True)
    gas = GAS(A, g.x, batches, dtype=torch.float64)
    gas.history = [h.clone() for h in hidden[:-1]]
    for i, b in enumerate(gas.batches):
        with torch.no_grad():
            out, nodes = gas.forward(model, i)
        torch.testing.assert_close(out, ref[nodes])
    gas.history = [torch.zeros_like(h) for h in hidden[:-1]]
    model.train()
    out, nodes = gas.forward(model, 1)
    inb = np.zeros(g.n, bool); inb[nodes] = True
    for h in gas.history:
        assert h[torch.as_tensor(~inb)].abs().max() == 0 and h[torch.as_tensor(inb)].abs().max() > 0


def test_non_metis_partitioner_warns(caplog):
    g = csbm(200, seed=0)
    with caplog.at_level('WARNING', logger='iclr25_nb.top'):
        partition(g.edge_index, g.n, 4, 'rcm')
    assert 'instead of METIS' in caplog.text


def test_normalized_adjacency_fast_path_matches(small):
    "clean=False (no validation, for an edge list already clean) gives the same matrix, sorted CSR."
    from iclr25_nb.top import clean_edges
    g = small[0]
    e = clean_edges(g.edge_index, g.n)
    A, B = normalized_adjacency_scipy(e, g.n), normalized_adjacency_scipy(e, g.n, clean=False)
    assert B.has_sorted_indices and abs(A - B).max() < 1e-15
    C = normalized_adjacency_scipy(e, g.n, self_loops=False, clean=False)
    assert abs(normalized_adjacency_scipy(e, g.n, self_loops=False) - C).max() < 1e-15
    unsorted = e[:, np.random.default_rng(0).permutation(e.shape[1])]
    D = normalized_adjacency_scipy(unsorted, g.n, clean=False)                # sorted first: the same arrays
    assert (D.indptr == B.indptr).all() and (D.indices == B.indices).all() and (D.data == B.data).all()


def test_symmetric_propagation_gives_torchs_gradient(small):
    "Blocks marked symmetric back-propagate A @ grad: the same gradient as torch's own (transposing) backward."
    from iclr25_nb.core import sparse_product
    from iclr25_nb.top import ClusterGCN, ExactNeighbourhood, propagate
    g, A, batches = small
    m = ClusterGCN(A, g.x, batches)
    assert all(getattr(a, '_symmetric', False) for a in m.A_BB)
    ex = ExactNeighbourhood(A, g.x, batches[:1], 2)
    assert not any(getattr(a, '_symmetric', False) for a in ex.blocks[0])     # rectangular: torch's own backward
    Ab = m.A_BB[0]
    h = torch.randn(Ab.shape[0], 6, requires_grad=True); go = torch.randn(Ab.shape[0], 6)
    (Ab @ h).backward(go); want = h.grad.clone(); h.grad = None
    propagate(Ab, h).backward(go)
    assert torch.equal(h.grad, want)
    hd = torch.randn(Ab.shape[0], 3, dtype=torch.float64, requires_grad=True)
    Ad = Ab.to(torch.float64)
    assert torch.autograd.gradcheck(lambda x: sparse_product(Ad, Ad, x), (hd,))
