"""Property and bad-input tests of iclr25_nb.eign (EIGN, Fuchsgruber et al., ICLR 2025)."""
import io
import json
import math

import numpy as np
import pytest
import torch

from iclr25_nb.eign import (EIGN, COMPONENTS, EdgeGraph, EdgeOperator, EdgeTask, HodgeGNN, HodgeGNNDir, LineGraphGNN,
                            MagneticEdgeConv, edge_pairs, line_graph_operator, directed_pair_operators, reverse_directed,
                            MagneticEdgeConvHidden, as_complex, circuit_tasks, edge_operator, flip_change, fit_step,
                            kirchhoff_flows, load_circuit, load_circuits, magnetic_incidence, make_experiment,
                            make_flow_network, make_model, make_task, reversal_change, EIGNConfig, DirGNN, EIGNSingle,
                            edge_components, magnetic_encodings, rossi_pair_operators)


def small_graph(seed=0, n=12, frac_directed=0.4):
    return make_flow_network(n, frac_directed, seed, edge_factor=1.8).graph


def dense_incidence(graph, theta, kind):
    "Independent dense reference of the magnetic incidence from the table of the paper's code."
    B = torch.zeros(graph.num_nodes, graph.num_edges, dtype=torch.complex128)
    for e, (t, h) in enumerate(graph.edge_index.T.tolist()):
        ph = 0.0 if graph.undirected[e] else theta
        B[h, e] = complex(math.cos(-ph), math.sin(-ph))
        B[t, e] = (-1 if kind == 'equ' else 1) * complex(math.cos(ph), math.sin(ph))
    return B


def dense_op(graph, theta, src, dst, normalise=True):
    L = dense_incidence(graph, theta, dst).conj().T @ dense_incidence(graph, theta, src)
    if not normalise: return L
    d = L.abs().sum(1).pow(-0.5)
    d[torch.isinf(d)] = 0
    return d[:, None] * L * d[None, :]


# -- 1. incidence at q = 0, cross-checked against networkx ----------------------------------------------------
def test_incidence_q0_is_signed_and_unsigned_incidence():
    nx = pytest.importorskip('networkx')
    g = small_graph()
    Be = magnetic_incidence(g, 0.0, 'equ').to_dense()
    Bi = magnetic_incidence(g, 0.0, 'inv').to_dense()
    assert torch.allclose(Be.sum(0), torch.zeros(g.num_edges, dtype=Be.dtype))
    assert torch.all(Bi.real[Bi.abs() > 0] == 1) and torch.all(Bi.imag == 0)
    G = nx.DiGraph(); G.add_nodes_from(range(g.num_nodes)); edges = [tuple(e) for e in g.edge_index.T.tolist()]
    G.add_edges_from(edges)
    ref = nx.incidence_matrix(G, nodelist=range(g.num_nodes), edgelist=edges, oriented=True).toarray()
    np.testing.assert_allclose(Be.real.numpy(), ref)        # -1 at the tail, +1 at the head
    Lp = edge_operator(g, 0.0, 'equ', 'equ', normalise=False).dense().real.numpy()
    np.testing.assert_allclose(Lp, ref.T @ ref, atol=1e-6)  # Hodge down-Laplacian L1 = B1^T B1


def test_line_graph_matches_torch_geometric():
    pyg = pytest.importorskip('torch_geometric')
    from torch_geometric.data import Data
    from torch_geometric.transforms import LineGraph
    g = small_graph(1)
    ei = torch.cat([g.edge_index, g.edge_index.flip(0)], 1)
    lg = LineGraph(force_directed=False)(Data(edge_index=ei, num_nodes=g.num_nodes))
    # PyG orders undirected edges by (min, max) node; map to ours
    key = (torch.minimum(g.edge_index[0], g.edge_index[1]) * g.num_nodes + torch.maximum(g.edge_index[0], g.edge_index[1]))
    order = torch.argsort(key)
    A = torch.zeros(g.num_edges, g.num_edges)
    A[lg.edge_index[0], lg.edge_index[1]] = 1
    ours = edge_operator(g, 0.0, 'inv', 'inv', normalise=False).dense().real[order][:, order]
    assert torch.allclose(ours - 2 * torch.eye(g.num_edges), A)      # |B|^T|B| = A_line + 2 I


# -- 2, 3. Hermitian and PSD ------------------------------------------------------------------------------
@pytest.mark.parametrize('qn', ['absolute', 'per_edge'])
def test_hermitian_and_psd(qn):
    g = small_graph(2)
    for kind in ('equ', 'inv'):
        for norm in (False, True):
            L = edge_operator(g, 0.3 if qn == 'absolute' else 5.0, kind, kind, norm, qn, torch.complex128).dense()
            assert torch.allclose(L, L.conj().T, atol=1e-12)
            assert torch.linalg.eigvalsh(L).min() >= -1e-6
    Lei = edge_operator(g, 0.3, 'equ', 'inv', True, 'absolute', torch.complex128).dense()
    Lie = edge_operator(g, 0.3, 'inv', 'equ', True, 'absolute', torch.complex128).dense()
    assert torch.allclose(Lie, Lei.conj().T, atol=1e-12)


def test_phases_only_where_directed_edges_are_involved():
    g = small_graph(5)
    L = edge_operator(g, 0.3, 'equ', 'equ', True, 'absolute', torch.complex128).dense()
    und = g.undirected
    both_und = und[:, None] & und[None, :]
    assert torch.all(L.imag[both_und] == 0)
    assert L.imag[~both_und].abs().max() > 1e-3
    assert torch.all(edge_operator(g, 0.0, 'equ', 'equ', True, dtype=torch.complex128).dense().imag == 0)


# -- 4, 5. equivariance of operators and invariant node signals --------------------------------------------
def test_operator_equivariance_under_flips():
    g = small_graph(3)
    mask = torch.rand(g.num_edges, generator=torch.Generator().manual_seed(0)) < 0.5
    mask &= g.undirected
    assert mask.any()
    S = torch.diag(g.signs(mask)).to(torch.complex128)
    gf = g.flip(mask)
    op = lambda gr, a, b: edge_operator(gr, 0.4, a, b, True, 'absolute', torch.complex128).dense()
    assert torch.allclose(op(gf, 'equ', 'equ'), S @ op(g, 'equ', 'equ') @ S, atol=1e-12)
    assert torch.allclose(op(gf, 'inv', 'inv'), op(g, 'inv', 'inv'), atol=1e-12)
    assert torch.allclose(op(gf, 'equ', 'inv'), op(g, 'equ', 'inv') @ S, atol=1e-12)
    assert torch.allclose(op(gf, 'inv', 'equ'), S @ op(g, 'inv', 'equ'), atol=1e-12)
    # 5. node signals: divergence of an equivariant signal and sum of an invariant one do not change
    x_equ, x_inv = torch.randn(g.num_edges, 3, dtype=torch.complex128), torch.randn(g.num_edges, 3, dtype=torch.complex128)
    for kind, x, xf in (('equ', x_equ, S @ x_equ), ('inv', x_inv, x_inv)):
        b, bf = edge_operator(g, 0.4, kind, kind, True, 'absolute', torch.complex128), \
                edge_operator(gf, 0.4, kind, kind, True, 'absolute', torch.complex128)
        assert torch.allclose(bf.boundary(xf), b.boundary(x), atol=1e-12)


# -- 6. model-level equivariance / invariance --------------------------------------------------------------
def _model_io(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    g = small_graph(seed, n=20)
    x_equ, x_inv = torch.randn(g.num_edges, 2, dtype=dtype), torch.randn(g.num_edges, 3, dtype=dtype)
    mask = torch.rand(g.num_edges, generator=torch.Generator().manual_seed(seed)) < 0.5
    mask &= g.undirected
    return g, x_equ, x_inv, mask, g.signs(mask).to(dtype)[:, None]


@pytest.mark.parametrize('dtype,atol', [(torch.float32, 1e-5), (torch.float64, 1e-10)])
def test_eign_equivariant_and_invariant_outputs(dtype, atol):
    g, x_equ, x_inv, mask, s = _model_io(0, dtype)
    equ = EIGN(2, 3, hidden=8, out=2, layers=3, q=0.3, q_normalisation='absolute', hidden_node=8).to(dtype)
    inv = EIGN(2, 3, hidden=8, out=2, layers=3, q=0.3, equivariant_target=False, q_normalisation='absolute', hidden_node=8).to(dtype)
    gf = g.flip(mask)
    assert torch.allclose(equ(gf, s * x_equ, x_inv), s * equ(g, x_equ, x_inv), atol=atol)
    assert torch.allclose(inv(gf, s * x_equ, x_inv), inv(g, x_equ, x_inv), atol=atol)
    # a non-equivariant baseline does change
    lg = LineGraphGNN(2, 3, 8, 2, 2).to(dtype)
    assert not torch.allclose(lg(gf, s * x_equ, x_inv), s * lg(g, x_equ, x_inv), atol=1e-3)


def test_eign_equivariance_after_training():
    net = make_flow_network(40, 0.3, seed=5)
    task = make_task(net, 'simulate', float(np.std(net.flow)))
    torch.manual_seed(0)
    model = make_model('eign', 2, 4, 8, 2, q=0.3, hidden_node=8)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for _ in range(15): fit_step(model, opt, task)
    assert flip_change(model, task, 0.5, seed=1) < 1e-5
    assert flip_change(make_model('line_graph', 2, 4, 8, 2), task, 0.5, seed=1) > 1e-3


# -- 7. permutation equivariance ----------------------------------------------------------------------------
def test_permutation_equivariance():
    g, x_equ, x_inv, _, _ = _model_io(1, torch.float64)
    model = EIGN(2, 3, hidden=8, out=1, layers=2, q=0.3, q_normalisation='absolute', hidden_node=8).double()
    gen = torch.Generator().manual_seed(3)
    pn, pe = torch.randperm(g.num_nodes, generator=gen), torch.randperm(g.num_edges, generator=gen)
    out = model(g.permute(pn, pe), x_equ[pe], x_inv[pe])
    assert torch.allclose(out, model(g, x_equ, x_inv)[pe], atol=1e-10)


# -- 8. direction awareness ---------------------------------------------------------------------------------
def test_direction_awareness_needs_the_phase():
    g, x_equ, x_inv, _, _ = _model_io(2, torch.float64)
    e = int(torch.nonzero(g.directed)[0])
    toggled = g.undirected.clone(); toggled[e] = True
    g2 = g.with_undirected(toggled)
    torch.manual_seed(0)
    m = EIGN(2, 3, 8, 1, 2, q=0.3, q_normalisation='absolute', hidden_node=8).double()
    assert (m(g2, x_equ, x_inv) - m(g, x_equ, x_inv)).abs().max() > 1e-6
    m0 = EIGN(2, 3, 8, 1, 2, q=0.0, hidden_node=8).double()
    assert torch.allclose(m0(g2, x_equ, x_inv), m0(g, x_equ, x_inv), atol=1e-12)


# -- 9. reversal of a directed edge -------------------------------------------------------------------------
def test_reversal_of_directed_edges():
    g, x_equ, x_inv, _, _ = _model_io(3, torch.float64)
    d = g.directed
    gr = g.reverse(d)
    for kind, f in (('equ', lambda c: -c.conj()), ('inv', lambda c: c.conj())):
        B = magnetic_incidence(g, 0.3, kind, 'absolute', torch.complex128).to_dense()
        Br = magnetic_incidence(gr, 0.3, kind, 'absolute', torch.complex128).to_dense()
        assert torch.allclose(Br[:, d], f(B[:, d]), atol=1e-12)
        assert torch.allclose(Br[:, ~d], B[:, ~d])
    s = g.signs(d).double()[:, None]
    m = EIGN(2, 3, 8, 1, 2, q=0.3, q_normalisation='absolute', hidden_node=8).double()
    assert (s * m(gr, s * x_equ, x_inv) - m(g, x_equ, x_inv)).abs().max() > 1e-6
    m0 = EIGN(2, 3, 8, 1, 2, q=0.0, hidden_node=8).double()
    assert torch.allclose(s * m0(gr, s * x_equ, x_inv), m0(g, x_equ, x_inv), atol=1e-12)   # q = 0: just a flip


# -- 10. sparse equals dense (including the closed-form degrees) --------------------------------------------
@pytest.mark.parametrize('src,dst', [('equ', 'equ'), ('inv', 'inv'), ('equ', 'inv'), ('inv', 'equ')])
def test_sparse_equals_dense(src, dst):
    g = make_flow_network(20, 0.3, seed=4).graph
    theta = math.pi * 0.7 / g.num_edges
    op = edge_operator(g, 0.7, src, dst, True, 'per_edge', torch.complex128)
    ref = dense_op(g, theta, src, dst)
    x = torch.randn(g.num_edges, 4, dtype=torch.complex128)
    assert torch.allclose(op(x), ref @ x, atol=1e-10)
    assert torch.allclose(op.dense(), ref, atol=1e-10)


# -- 11. the generator obeys Kirchhoff --------------------------------------------------------------------
def test_generator_kirchhoff_and_valves():
    net = make_flow_network(80, 0.3, seed=6)
    g = net.graph
    B = magnetic_incidence(g, 0.0, 'equ', dtype=torch.complex128).to_dense().real.numpy()
    assert np.abs(B @ net.flow - net.s).max() <= 1e-8
    assert net.flow[g.directed.numpy()].min() >= -1e-10
    assert np.sum(net.flow ** 2 / net.g) >= 0
    closed = np.abs(net.flow[g.directed.numpy()]) < 1e-12
    assert closed.any() and (~closed).any()                           # some valves shut, some open
    # flipping an undirected edge negates its flow
    e = int(torch.nonzero(g.undirected)[0])
    f2, _ = kirchhoff_flows(g.flip([e]), net.g, net.s)
    assert abs(f2[e] + net.flow[e]) < 1e-8 and np.allclose(np.delete(f2, e), np.delete(net.flow, e), atol=1e-8)


def test_generator_closed_form_without_valves():
    net = make_flow_network(40, 0.0, seed=7)
    B = magnetic_incidence(net.graph, 0.0, 'equ', dtype=torch.complex128).to_dense().real.numpy()
    G = np.diag(net.g)
    ref = G @ B.T @ np.linalg.pinv(B @ G @ B.T) @ net.s
    np.testing.assert_allclose(net.flow, ref, atol=1e-8)


# -- 12. gradient check through the complex layers ---------------------------------------------------------
def test_gradcheck_complex_layers():
    g, _, _, _, _ = _model_io(4, torch.float64)
    g = make_flow_network(8, 0.3, seed=8, edge_factor=1.5).graph
    torch.manual_seed(0)
    conv, hid = MagneticEdgeConv(2, 4, bias=False).double(), MagneticEdgeConvHidden(2, 4, bias=True, hidden_channels=4).double()
    op = edge_operator(g, 0.3, 'equ', 'inv', True, 'absolute', torch.complex128)
    x = torch.randn(g.num_edges, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: conv(op, x), (x,))
    # the hidden state's ReLU has kinks; gradcheck away from them holds almost surely for random inputs
    assert torch.autograd.gradcheck(lambda x: hid(op, x), (x,))


# -- bad input ---------------------------------------------------------------------------------------------
def test_bad_graphs():
    und = torch.tensor([True, True])
    with pytest.raises(ValueError, match='out of range'): EdgeGraph(torch.tensor([[0, 1], [1, 3]]), und, 3)
    with pytest.raises(ValueError, match='self-loop'): EdgeGraph(torch.tensor([[0, 2], [1, 2]]), und, 3)
    with pytest.raises(ValueError, match='one flag per edge'): EdgeGraph(torch.tensor([[0, 1], [1, 2]]), torch.tensor([True]), 3)
    with pytest.raises(ValueError, match='parallel'): EdgeGraph(torch.tensor([[0, 1], [1, 0]]), und, 2)
    with pytest.raises(ValueError, match='shape'): EdgeGraph(torch.tensor([0, 1]), und, 2)
    with pytest.raises(ValueError, match='integers'): EdgeGraph(torch.tensor([[0., 1.], [1., 2.]]), und, 3)
    with pytest.raises(ValueError, match='bool'): EdgeGraph(torch.tensor([[0, 1], [1, 2]]), torch.tensor([1, 1]), 3)
    g = EdgeGraph(torch.tensor([[0, 1], [1, 2]]), torch.tensor([True, False]), 3)
    with pytest.raises(ValueError, match='directed edge 1'): g.flip([1])
    with pytest.raises(ValueError, match='even'): EIGN(1, 1, hidden=7)
    with pytest.raises(ValueError, match='q_normalisation'): edge_operator(g, 0.1, q_normalisation='bogus')
    with pytest.raises(ValueError, match='x_equ'): EIGN(1, 1, hidden=4)(g, torch.zeros(3, 1), torch.zeros(2, 1))
    with pytest.raises(ValueError, match='sum to 0'): kirchhoff_flows(g, np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match='frac_directed'): EIGNConfig(frac_directed=0.9)
    with pytest.raises(ValueError, match='models'): EIGNConfig(models=('eign', 'nope'))


# -- real circuits ------------------------------------------------------------------------------------------
def test_real_circuits_load(shared_data):
    circuits = load_circuits(shared_data / 'electrical_circuits' / 'v1')
    assert len(circuits) >= 190
    c = circuits[0]
    assert sorted(set(c.components)) <= sorted(COMPONENTS) and c.components.count('v') == 1
    assert torch.equal(c.graph.undirected, torch.tensor([k != 'd' for k in c.components]))
    diodes = np.concatenate([x.current[np.array(x.components) == 'd'] for x in circuits])
    assert diodes.min() > -1e-4 and diodes.max() > 1e-3                  # diodes conduct row -> col
    tasks = circuit_tasks(circuits[:10])
    assert tasks[0].x_equ.shape == (c.graph.num_edges, 1) and tasks[0].x_inv.shape == (c.graph.num_edges, 4)


@pytest.fixture
def circuit_json(shared_data):
    p = sorted((shared_data / 'electrical_circuits' / 'v1').glob('*.json'))[0]
    return p.read_text()


@pytest.mark.parametrize('corrupt,message', [
    (lambda t: t[: len(t) // 2], 'not a readable JSON'),                                        # truncated
    (lambda t: json.dumps({**json.loads(t), 'col': {'0': 1}}), 'do not have'),                # wrong shape
    (lambda t: json.dumps({**json.loads(t), 'row': [0, 1]}), "'row' must be"),                  # wrong type
    (lambda t: t.replace('"edge_current": {"0": ', '"edge_current": {"0": NaN, "x": '), 'non-integer'),
    (lambda t: json.dumps({**json.loads(t), 'edge_current': {k: float('nan') for k in json.loads(t)['edge_current']}}), 'NaN'),
    (lambda t: json.dumps({**json.loads(t), 'components': {k: 'x' for k in json.loads(t)['components']}}), 'unknown component'),
    (lambda t: '[1, 2]', 'expected a JSON object'),
])
def test_broken_circuit_files(tmp_path, circuit_json, corrupt, message):
    p = tmp_path / 'broken.json'
    p.write_text(corrupt(circuit_json))
    with pytest.raises(ValueError, match=message) as e: load_circuit(p)
    assert 'broken.json' in str(e.value)


def test_circuit_file_nan_current(tmp_path, circuit_json):
    d = json.loads(circuit_json); d['edge_current']['0'] = float('nan')
    p = tmp_path / 'nan.json'; p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match='nan.json: edge_current contains NaN'): load_circuit(p)


# -- experiment --------------------------------------------------------------------------------------------
def test_experiment_checkpoint_roundtrip():
    kw = dict(n_nodes=20, n_train=2, n_val=1, n_test=1, batch_graphs=1, steps=4, hiddens=(4,), lrs=(0.01, 0.003),
              models=('eign', 'hodge_inv', 'line_graph', 'dir_gnn', 'mlp'))
    a = make_experiment('quick', 0, **kw); a.run(2)
    buf = io.BytesIO(); torch.save(a.state_dict(), buf); buf.seek(0)      # through bytes, like a checkpoint
    b = make_experiment('quick', 0, **kw); b.load_state_dict(torch.load(buf, weights_only=True))
    ha, hb = a.run(), b.run()
    assert [h['loss_eign'] for h in ha] == pytest.approx([h['loss_eign'] for h in hb], rel=1e-5)
    snap = b.flip_display().snapshot()
    assert snap['moved']['eign'] < 1e-5 and snap['moved']['line_graph'] > 0


def test_selection_by_validation_survives_a_checkpoint():
    kw = dict(n_nodes=20, n_train=2, n_val=1, n_test=1, batch_graphs=1, steps=3, eval_every=1, hiddens=(4, 6),
              lrs=(0.01,), models=('eign', 'mlp'))
    a = make_experiment('quick', 0, **kw); a.run()
    keys = [k for k in a.grid if k.startswith('eign__')]
    assert a.best_key('eign') == min(keys, key=lambda k: a.val_rmse[k])      # chosen on validation graphs
    b = make_experiment('quick', 0, **kw); b.load_state_dict(a.state_dict())
    assert b.best_key('eign') == a.best_key('eign') and b.evaluate() == pytest.approx(a.evaluate())


def test_timed_evaluation_only_in_the_explorer_path():
    "`eval_every_s` (the explorer's) adds evaluations by wall time; unset (reproduce), the history is the untimed one."
    kw = dict(n_nodes=20, n_train=2, n_val=1, n_test=1, batch_graphs=1, steps=6, eval_every=3, hiddens=(4,),
              lrs=(0.01,), models=('eign', 'mlp'))
    a = make_experiment('quick', 0, **kw); a.eval_every_s = None
    ha = a.run()
    assert [i for i, h in enumerate(ha) if 'rmse_eign' in h] == [0, 3, 5] and set(a.val_rmse) == set(a.grid)
    b = make_experiment('quick', 0, **kw); b.eval_every_s = 0.0        # every step is due by time
    hb = b.run()
    assert all('rmse_eign' in h for h in hb) and b.val_rmse == {}      # one grid point per model: no validation pass
    assert [h['loss_eign'] for h in hb] == pytest.approx([h['loss_eign'] for h in ha], rel=1e-6)   # same training
    c = make_experiment('quick', 0, **{**kw, 'lrs': (0.01, 0.003)}); c.eval_every_s = 0.0
    c.run(1); assert set(c.val_rmse) == set(c.grid)                    # a grid to choose from: validation kept


def test_line_magnet_unfused_inference_is_the_same_model():
    "The explorer's Line-MagNet evaluates through the layers' regular path: the same predictions to float precision."
    from iclr25_nb.eign import LineMagNet, predict
    task = make_task(make_flow_network(30, 0.3, seed=1))
    torch.manual_seed(0); m = LineMagNet(task.x_equ.shape[1], task.x_inv.shape[1], 16, 1, 2)
    fused = predict(m, task)
    assert torch.allclose(predict(m.fused_inference(False), task), fused, atol=1e-5)
    assert len(m._unfused) == 2 and predict(m.fused_inference(True), task).equal(fused) and not hasattr(m, '_unfused')


# -- the defect shared with the official code: an edge alone in its component ------------------------------
@pytest.mark.parametrize('dtype', [torch.complex64, torch.complex128])
def test_isolated_directed_edge_gets_zero_degree_not_a_blow_up(dtype):
    # edge 2 (directed) joins nodes 3 and 4, which touch nothing else: the mixed operators' row is exactly 0
    g = EdgeGraph(torch.tensor([[0, 1, 3], [1, 2, 4]]), torch.tensor([True, False, False]), 5)
    for src, dst in (('equ', 'inv'), ('inv', 'equ')):
        op = edge_operator(g, 0.3, src, dst, True, 'absolute', dtype)
        assert op.deg_inv_sqrt[2] == 0                                        # closed-form degree 0, not ~1e-8
        x = torch.randn(3, 2, dtype=dtype)
        assert op(x).abs().max() < 10
    same = edge_operator(g, 0.3, 'equ', 'equ', True, 'absolute', dtype)
    assert abs(float(same.deg_inv_sqrt[2]) - 2 ** -0.5) < 1e-6               # |L_22| = 2 for the same kind


# -- the official baselines' operators ----------------------------------------------------------------------
def test_line_graph_operator_is_the_official_normalised_laplacian():
    g = small_graph(6)
    Babs = magnetic_incidence(g, 0.0, 'inv', dtype=torch.complex128).to_dense().real
    A = Babs.T @ Babs; A.fill_diagonal_(0)                                   # line-graph adjacency
    L = torch.diag(A.sum(1)) - A
    d = L.abs().sum(1).pow(-0.5); d[torch.isinf(d)] = 0
    assert torch.allclose(line_graph_operator(g).dense().double(), d[:, None] * L * d[None, :], atol=1e-6)
    i, j, v = edge_pairs(g)
    assert torch.all(v[i == j] == 2) and torch.all(v[i != j].abs() == 1)


def test_hodge_dir_sees_valve_direction_but_is_not_equivariant():
    g, x_equ, x_inv, mask, s = _model_io(5, torch.float64)
    l_pos, l_neg = directed_pair_operators(g)
    both_dir = g.directed[l_pos.i] & g.directed[l_pos.j]
    assert torch.all(l_pos.vals >= 0) and torch.all(l_neg.vals <= 0)
    assert torch.all((l_pos.vals[~both_dir] > 0) & (l_neg.vals[~both_dir] < 0))   # +-|L1| where an undirected edge is
    assert torch.all((l_pos.vals[both_dir] > 0) != (l_neg.vals[both_dir] < 0))    # between valves: one sign or the other
    torch.manual_seed(0)
    m = HodgeGNNDir(2, 3, 8, 1, 2).double()
    gf = g.flip(mask)
    assert (m(gf, s * x_equ, x_inv) - s * m(g, x_equ, x_inv)).abs().max() > 1e-6   # breaks orientation equivariance
    net = make_flow_network(30, 0.4, seed=2)
    task = make_task(net, 'simulate', float(np.std(net.flow)))
    m2 = make_model('hodge_dir', 2, 4, 8, 2)
    assert reversal_change(m2, task) > 1e-4                                  # and sees the valves' direction


def test_reverse_directed_is_an_involution():
    net = make_flow_network(30, 0.4, seed=3)
    task = make_task(net, 'simulate', 1.0)
    back = reverse_directed(reverse_directed(task))
    assert torch.equal(back.graph.edge_index, task.graph.edge_index) and torch.equal(back.x_equ, task.x_equ)


def test_config_bounds_name_the_field():
    with pytest.raises(ValueError, match='EIGNConfig.q must be at least 0'): EIGNConfig(q=-0.1)
    with pytest.raises(ValueError, match='EIGNConfig.lrs'): EIGNConfig(lrs=(0.01, 2.0))
    with pytest.raises(ValueError, match='hiddens'): EIGNConfig(hiddens=(6, 9))
    with pytest.raises(ValueError, match='task'): EIGNConfig(task='nope')


# -- DirGNN, Line-MagNet and the single-stream ablation ------------------------------------------------------
def test_rossi_operators_against_a_dense_reference():
    g = small_graph(7)
    B = magnetic_incidence(g, 0.0, 'equ', dtype=torch.complex128).to_dense().real
    und = g.undirected
    parts = {'equ': (B * und, (B * ~und).clamp_min(0), (B * ~und).clamp_max(0))}
    parts['inv'] = tuple(p.abs() for p in parts['equ'][:2]) + (torch.zeros_like(B),)
    for src in ('equ', 'inv'):
        for dst in ('equ', 'inv'):
            for op, b_src, b_dst in zip(rossi_pair_operators(g, src, dst), parts[src], parts[dst]):
                L = b_dst.T @ b_src
                d = L.abs().sum(1).pow(-0.5); d[torch.isinf(d)] = 0
                assert torch.allclose(op.dense().double(), d[:, None] * L * d[None, :], atol=1e-6)


def test_dir_gnn_is_equivariant_and_direction_aware():
    g, x_equ, x_inv, mask, s = _model_io(5, torch.float64)
    torch.manual_seed(0)
    m = DirGNN(2, 3, 8, 1, 2).double()
    assert (m(g.flip(mask), s * x_equ, x_inv) - s * m(g, x_equ, x_inv)).abs().max() < 1e-10
    net = make_flow_network(30, 0.4, seed=2)
    task = make_task(net, 'simulate', float(np.std(net.flow)))
    assert reversal_change(make_model('dir_gnn', 2, 4, 8, 2), task) > 1e-4


def test_line_magnet_attends_within_each_graph_only():
    nets = [make_flow_network(20, 0.3, seed=i) for i in range(2)]
    tasks = [make_task(n, 'simulate', 1.0) for n in nets]
    both = EdgeTask.batch(tasks)
    torch.manual_seed(0)
    m = make_model('line_magnet', 2, 4, 8, 2).eval()
    with torch.no_grad():
        alone, together = m(tasks[0].graph, tasks[0].x_equ, tasks[0].x_inv), m(both.graph, both.x_equ, both.x_inv)
    assert torch.allclose(together[:tasks[0].graph.num_edges], alone, atol=1e-5)
    pe = magnetic_encodings(tasks[0].graph, 0.1, 4)
    assert pe.shape == (tasks[0].graph.num_edges, 16) and torch.isfinite(pe).all()
    assert len(edge_components(both.graph)) == 2
    tiny = EdgeGraph(torch.tensor([[0], [1]]), torch.tensor([False]), 2)          # fewer than k + 2 edges: ones
    assert torch.equal(magnetic_encodings(tiny, 0.1, 4), torch.ones(1, 16))


def test_single_stream_ablation_and_streams_argument():
    g, x_equ, x_inv, mask, s = _model_io(5, torch.float64)
    torch.manual_seed(0)
    m = make_model('eign', 2, 3, 8, 2, streams=1).double()
    assert isinstance(m, EIGNSingle)
    # the invariant inputs ride in the equivariant stream: orientation equivariance is lost
    assert (m(g.flip(mask), s * x_equ, x_inv) - s * m(g, x_equ, x_inv)).abs().max() > 1e-6
    with pytest.raises(ValueError, match='streams must be 1 or 2'): make_model('eign', 2, 3, 8, 2, streams=3)
    with pytest.raises(ValueError, match='streams'): EIGNConfig(streams=0)
    exp = make_experiment('quick', 0, n_nodes=20, n_train=2, n_val=1, n_test=1, batch_graphs=1, steps=2, hiddens=(8,),
                          lrs=(0.01,), models=('eign', 'dir_gnn', 'line_magnet'), streams=1)
    exp.run()
    assert isinstance(exp.best('eign'), EIGNSingle) and math.isfinite(exp.evaluate()['rmse_line_magnet'])


# ---- LD-Cycles (edge classification) ----
from iclr25_nb.eign import (longest_directed_cycles, make_cycles_graph, make_cycles_task, make_classifier,
                            train_classifier, classifier_metrics, cycles_benchmark, predict, random_flip_mask)


def _brute_longest(graph):
    "Independent reference: every ordered node sequence, every way to walk it (itertools, tiny graphs)."
    import itertools
    arcs = {}
    for e, (t, h) in enumerate(graph.edge_index.T.tolist()):
        arcs[(t, h)] = e
        if graph.undirected[e]: arcs[(h, t)] = e
    best, sets = 0, set()
    for k in range(3, graph.num_nodes + 1):
        for seq in itertools.permutations(range(graph.num_nodes), k):
            steps = list(zip(seq, seq[1:] + seq[:1]))
            if all(s in arcs for s in steps):
                es = frozenset(arcs[s] for s in steps)
                if len(es) == k:
                    if k > best: best, sets = k, set()
                    sets.add(es)
    return best, sorted(sets, key=sorted)


def test_longest_cycle_hand_made():
    # 5-cycle 0->1->2->3->4->0, directed chord 2->0 (3-cycle), undirected chord 1-3 (4-cycle 0->1-3->4->0)
    g = EdgeGraph(torch.tensor([[0, 1, 2, 3, 4, 2, 1], [1, 2, 3, 4, 0, 0, 3]]), torch.tensor([False] * 6 + [True]), 5)
    assert longest_directed_cycles(g) == (5, [frozenset({0, 1, 2, 3, 4})])
    # reversing 2->3 breaks it; two 4-cycles remain, 0->1-3->4->0 and 0->1-3->2->0: a tie
    g2 = g.reverse(torch.tensor([2]))
    assert longest_directed_cycles(g2) == (4, [frozenset({0, 2, 5, 6}), frozenset({0, 3, 4, 6})])
    # an undirected edge alone cannot be walked there and back (no 2-cycles); a path has no cycle
    path = EdgeGraph(torch.tensor([[0, 1], [1, 2]]), torch.tensor([True, True]), 3)
    assert longest_directed_cycles(path) == (0, [])
    # an all-undirected triangle: one edge set, whichever way round
    tri = EdgeGraph(torch.tensor([[0, 1, 2], [1, 2, 0]]), torch.tensor([True, False, True]), 3)
    assert longest_directed_cycles(tri) == (3, [frozenset({0, 1, 2})])


def test_longest_cycle_matches_brute_force():
    for seed in range(6):
        g = small_graph(seed, n=7, frac_directed=0.5)
        assert longest_directed_cycles(g) == _brute_longest(g)


def test_tie_is_detected_and_rejected():
    tie = EdgeGraph(torch.tensor([[0, 1, 2, 3, 4, 5, 2], [1, 2, 0, 4, 5, 3, 3]]), torch.tensor([False] * 6 + [True]), 6)
    length, sets = longest_directed_cycles(tie)
    assert length == 3 and len(sets) == 2
    for seed in range(20):                      # every generated graph has a unique longest cycle
        g, cyc = make_cycles_graph(8, seed)
        length, sets = longest_directed_cycles(g)
        assert sets == [cyc] and len(cyc) == length >= 3


def test_cycles_task_shapes_and_labels():
    t = make_cycles_task(10, seed=3)
    m = t.graph.num_edges
    assert t.x_equ.shape == (m, 1) and t.x_inv.shape == (m, 1) and t.y.shape == (m, 1) and t.mask.all()
    assert (t.x_equ == 0).all() and (t.x_inv == 1).all()               # uninformative inputs
    length, sets = longest_directed_cycles(t.graph)
    assert set(t.y[:, 0].nonzero().flatten().tolist()) == set(sets[0]) and int(t.y.sum()) == length
    assert make_cycles_task(10, seed=3).graph.edge_index.equal(t.graph.edge_index)       # deterministic
    with pytest.raises(ValueError): make_cycles_graph(3)
    with pytest.raises(ValueError): make_cycles_graph(6, p_undirected=1.0)
    with pytest.raises(ValueError): make_cycles_graph(6, edge_factor=10.0)


def test_classifier_trains_and_metrics():
    batch = EdgeTask.batch([make_cycles_task(8, s) for s in range(4)])
    model = make_classifier(0.25, hidden=8, layers=2, hidden_node=8)
    losses = train_classifier(model, batch, epochs=8, lr=0.01)
    assert losses[-1] < losses[0]
    mt = classifier_metrics(model, batch)
    assert 0 <= mt['balanced_accuracy'] <= 1 and 0.5 <= mt['majority_accuracy'] <= 1
    # the logits are orientation-invariant: flipping undirected edges does not change them
    flip = random_flip_mask(batch.graph, 0.5, 0)
    assert (predict(model, batch.flip(flip)) - predict(model, batch)).abs().max() < 1e-4
    with pytest.raises(ValueError): train_classifier(model, batch, epochs=0)


def test_cycles_benchmark_ablation_has_no_gap():
    "Under --ablate (q = 0) both arms of the LD-Cycles claim are the same model: the gap is 0, so the claim fails."
    r = cycles_benchmark(0, n_train=3, n_test=2, n_nodes=7, epochs=2, q=0.0, hidden=4, layers=1)
    assert r['eign'] == r['eign_q0'] and 0 < r['positive_fraction'] < 1


# ---- RW-Comp and Tri-Flow (edge classification) ----
import itertools
from iclr25_nb.eign import (auc, random_walk, make_walk_task, triangle_flow_labels, make_triflow_task,
                            classification_benchmark, walk_benchmark, triflow_benchmark)


def test_auc_hand_values():
    assert auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    assert auc([1.0, 1.0, 1.0], [0, 1, 1]) == 0.5                     # ties count half
    assert auc([0.0, 1.0], [0, 1]) == 1.0 and auc([1.0, 0.0], [0, 1]) == 0.0
    assert math.isnan(auc([0.3, 0.4], [1, 1]))
    with pytest.raises(ValueError, match='shape'): auc([0.1, 0.2, 0.3], [0, 1])


def test_random_walk_steps_and_weights():
    # 0 -> 1 (w 1), 0 -> 2 (w 3), 1 -> 3, 2 -> 3, 3 -> 0: from 0 the walk takes 0 -> 2 with probability 3/4
    g = EdgeGraph(torch.tensor([[0, 0, 1, 2, 3], [1, 2, 3, 3, 0]]), torch.zeros(5, dtype=torch.bool), 4)
    w = np.array([1.0, 3.0, 1.0, 1.0, 1.0])
    rng = np.random.default_rng(0)
    walks = [random_walk(g, w, 3, rng, start=0) for _ in range(4000)]
    assert all(wk[0] == 0 and wk[2] == 3 and wk[3] == 0 and len(wk) == 4 for wk in walks)
    frac2 = np.mean([wk[1] == 2 for wk in walks])
    assert abs(frac2 - 0.75) < 0.03                                  # 4000 draws: sd 0.007
    sink = EdgeGraph(torch.tensor([[0, 1], [1, 2]]), torch.zeros(2, dtype=torch.bool), 3)
    assert random_walk(sink, [1.0, 1.0], 5, np.random.default_rng(0), start=0) is None
    with pytest.raises(ValueError, match='weights'): random_walk(g, w[:3], 2, rng)
    with pytest.raises(ValueError, match='weights'): random_walk(g, -w, 2, rng)
    with pytest.raises(ValueError, match='undirected'): random_walk(g.with_undirected(torch.ones(5, dtype=torch.bool)), w, 2, rng)


def _walk_exists(graph, labelled, length):
    "Independent check: is there a walk of exactly `length` directed steps whose edge set is exactly `labelled`?"
    arcs = {}
    for e, (t, h) in enumerate(graph.edge_index.T.tolist()):
        if e in labelled: arcs.setdefault(t, []).append((h, e))
    def go(v, k, used):
        if k == length: return used == labelled
        return any(go(h, k + 1, used | {e}) for h, e in arcs.get(v, []))
    return any(go(v, 0, frozenset()) for v in range(graph.num_nodes))


def test_walk_task_brute_force_and_inputs():
    for seed in range(6):
        t = make_walk_task(8, 14, 6, seed=seed)
        g, m = t.graph, t.graph.num_edges
        assert m == 14 and not g.undirected.any()
        labelled = frozenset(torch.nonzero(t.y[:, 0]).flatten().tolist())
        assert _walk_exists(g, labelled, 6)
        shown = t.x_inv[:, 2] > 0.5
        assert torch.equal(t.mask, ~shown) and torch.equal(t.x_inv[:, 0], t.y[:, 0] * shown)
        assert ((t.x_inv[:, 1] > 0) & (t.x_inv[:, 1] <= 1)).all() and (t.x_equ == 0).all()


def test_walk_task_deterministic_and_bad_input():
    a, b = make_walk_task(seed=5), make_walk_task(seed=5)
    assert torch.equal(a.graph.edge_index, b.graph.edge_index) and torch.equal(a.y, b.y) and torch.equal(a.x_inv, b.x_inv)
    assert not torch.equal(make_walk_task(seed=6).graph.edge_index, a.graph.edge_index)
    with pytest.raises(ValueError, match='n_nodes'): make_walk_task(2, 1)
    with pytest.raises(ValueError, match='n_edges'): make_walk_task(5, 11)
    with pytest.raises(ValueError, match='walk_length'): make_walk_task(walk_length=0)
    with pytest.raises(ValueError, match='p_show'): make_walk_task(p_show=1.0)
    with pytest.raises(ValueError, match='no graph'): make_walk_task(3, 2, 40, max_tries=5)   # a path: always stuck


def _brute_triangle_labels(graph, types):
    "Independent reference: every node triple, both senses; per edge the set of signs it gets."
    arcs = {}
    for e, (t, h) in enumerate(graph.edge_index.T.tolist()):
        arcs[(t, h)] = (e, 1); arcs[(h, t)] = (e, -1)
    signs, ambiguous = {}, False
    for a, b, c in itertools.combinations(range(graph.num_nodes), 3):
        if not all(p in arcs for p in ((a, b), (b, c), (c, a))): continue
        for cyc in ((a, b, c), (a, c, b)):
            sides = [arcs[(cyc[i], cyc[(i + 1) % 3])] for i in range(3)]
            if len({int(types[e]) for e, _ in sides}) != 1: continue
            directed = [s for e, s in sides if not graph.undirected[e]]
            if not directed: ambiguous = True; continue
            if all(s == 1 for s in directed):
                for e, s in sides: signs.setdefault(e, set()).add(s)
    labels = np.zeros(graph.num_edges)
    for e, s in signs.items():
        if len(s) > 1: ambiguous = True
        labels[e] = next(iter(s))
    return labels, ambiguous


def test_triangle_labels_hand_made():
    # directed 0 -> 1, undirected 1 - 2 stored 2 -> 1, undirected 2 - 0 stored 2 -> 0; one type: the sense 0 -> 1 -> 2
    g = EdgeGraph(torch.tensor([[0, 2, 2], [1, 1, 0]]), torch.tensor([False, True, True]), 3)
    lab, why = triangle_flow_labels(g, [1, 1, 1])
    assert why is None and lab.tolist() == [1, -1, 1]
    assert triangle_flow_labels(g, [1, 1, 0])[0].tolist() == [0, 0, 0]                      # wrong type
    along = g.reverse(torch.tensor([1])).with_undirected(torch.tensor([False, False, True]))  # 0 -> 1, 1 -> 2 directed
    assert triangle_flow_labels(along, [0, 0, 0])[0].tolist() == [1, 1, 1]
    against = g.with_undirected(torch.tensor([False, False, True]))                          # 0 -> 1 and 2 -> 1 disagree
    assert triangle_flow_labels(against, [0, 0, 0])[0].tolist() == [0, 0, 0]
    assert triangle_flow_labels(g.with_undirected(torch.ones(3, dtype=torch.bool)), [0, 0, 0])[1] is not None
    with pytest.raises(ValueError, match='types'): triangle_flow_labels(g, [0, 0])


def test_triangle_labels_match_brute_force():
    rng = np.random.default_rng(0)
    n_amb = 0
    for trial in range(60):          # random small mixed graphs with few types: many triangles, some ambiguous
        n = 6
        pairs = [p for p in itertools.combinations(range(n), 2) if rng.random() < 0.6] or [(0, 1)]
        ei = np.array(pairs).T
        flip = rng.random(len(pairs)) < 0.5
        ei[:, flip] = ei[::-1, flip]
        g = EdgeGraph(torch.from_numpy(ei.copy()), torch.from_numpy(rng.random(len(pairs)) < 0.4), n)
        types = rng.integers(0, 2, len(pairs))
        lab, why = triangle_flow_labels(g, types)
        ref, amb = _brute_triangle_labels(g, types)
        assert (why is not None) == amb
        n_amb += amb
        if not amb: assert lab.tolist() == ref.tolist()
    assert 0 < n_amb < 60


def test_triflow_task_generator():
    for seed in range(5):
        t = make_triflow_task(seed=seed)
        g = t.graph
        types = t.x_inv.argmax(1).numpy()
        ref, amb = _brute_triangle_labels(g, types)
        assert not amb and t.y[:, 0].tolist() == ref.tolist()
        assert g.num_edges == 26 and g.num_nodes == 18 and t.x_inv.shape == (26, 3)
        assert torch.equal(t.x_equ[g.directed, 0], torch.ones(int(g.directed.sum())))
        assert (t.x_equ.abs() == 1).all()
    a, b = make_triflow_task(seed=3), make_triflow_task(seed=3)
    assert torch.equal(a.graph.edge_index, b.graph.edge_index) and torch.equal(a.y, b.y) and torch.equal(a.x_equ, b.x_equ)
    assert not torch.equal(make_triflow_task(seed=4).y, a.y)
    with pytest.raises(ValueError, match='n_triangles'): make_triflow_task(1)
    with pytest.raises(ValueError, match='n_types'): make_triflow_task(n_types=1)
    with pytest.raises(ValueError, match='p_undirected'): make_triflow_task(p_undirected=1.0)
    with pytest.raises(ValueError, match='n_edges'): make_triflow_task(4, 11)


def test_triflow_labels_and_model_are_equivariant():
    "Flipping an undirected edge's stored orientation flips its label (recomputed from the flipped graph) and EIGN's output."
    batch = EdgeTask.batch([make_triflow_task(seed=s) for s in range(3)])
    types = batch.x_inv.argmax(1).numpy()
    flip = random_flip_mask(batch.graph, 0.5, 1)
    assert flip.any()
    s = batch.graph.signs(flip)[:, None]
    flipped = batch.flip(flip)
    relabel, why = triangle_flow_labels(flipped.graph, types)
    assert why is None and np.array_equal(relabel, flipped.y[:, 0].numpy())
    assert torch.equal(flipped.y, s * batch.y) and (batch.y[flip] != 0).any()
    model = make_classifier(0.25, hidden=8, layers=2, hidden_node=8, equ_in=1, inv_in=3, equivariant=True)
    train_classifier(model, batch, epochs=5, lr=0.01, loss='mse')
    out, out_f = predict(model, batch), predict(model, flipped)
    assert out.abs().max() > 1e-3 and (s * out_f - out).abs().max() < 1e-4
    mt = classifier_metrics(model, batch, equivariant=True)
    assert 0 <= mt['balanced_accuracy'] <= 1 and 1 / 3 <= mt['majority_accuracy'] <= 1
    with pytest.raises(ValueError, match='loss'): train_classifier(model, batch, epochs=1, loss='hinge')


def test_walk_and_triflow_benchmarks_ablation_has_no_gap():
    "Under --ablate (q = 0) both arms are the same model: the gap is exactly 0, so the claims fail."
    for f in (walk_benchmark, triflow_benchmark):
        r = f(0, n_train=3, n_test=2, epochs=2, q=0.0, hidden=4, layers=1)
        a, b = r['eign'], r['eign_q0']
        assert a.keys() == b.keys() and all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)
        assert 0 < r['positive_fraction'] < 1
    with pytest.raises(ValueError, match='n_train'): classification_benchmark(make_walk_task, n_train=0)


# ---- Claims v3: held-out test items, the nulls and the blind cues ----
from iclr25_nb.core import overlap_count
from iclr25_nb.eign import (ABLATION, CLASSIFICATION_BASELINES, PAPER, ScoreRule, circuit_key, circuit_split,
                            directed_cue, flow_nulls, same_type_triangle_cue, shown_neighbour_cue, default_circuits_path)


def _graph_key(t):
    return (t.graph.num_nodes, t.graph.edge_index.numpy().tobytes(), t.graph.undirected.numpy().tobytes())


def test_kirchhoff_test_graphs_never_in_training():
    c = EIGNConfig()
    for seed in (0, 1, 2):
        nets = [make_flow_network(c.n_nodes, c.frac_directed, seed=seed * 100_003 + i)
                for i in range(c.n_train + c.n_val + c.n_test)]
        train, test = nets[:c.n_train], nets[c.n_train + c.n_val:]
        assert overlap_count(train, test, key=lambda n: n.graph.edge_index.numpy().tobytes()) == 0
    exp = make_experiment('quick', 2, steps=1)                         # the experiment draws these very graphs
    assert exp.test.graph.num_edges == sum(n.graph.num_edges for n in test)


def test_classification_test_graphs_never_in_training():
    for builder, n_train, n_test, salt in ((lambda s: make_cycles_task(10, s), 200, 100, 0),
                                           (lambda s: make_walk_task(seed=s), 120, 60, 101),
                                           (lambda s: make_triflow_task(seed=s), 120, 60, 202)):
        base = 1_000_003 * (0 + 1) + salt
        train = [builder(base + i) for i in range(n_train)]
        test = [builder(base + n_train + i) for i in range(n_test)]
        assert overlap_count(train, test, key=_graph_key) == 0


def test_circuit_split_by_circuit_not_by_file(shared_data):
    circuits = load_circuits(shared_data / 'electrical_circuits' / 'v1')
    assert len({circuit_key(c) for c in circuits}) < len(circuits)          # the data set repeats circuits
    for seed in (0, 1, 2):
        tr, va, te = circuit_split(circuits, seed)
        assert len(tr) + len(va) + len(te) == len(circuits) and 0.35 < len(te) / len(circuits) < 0.65
        assert overlap_count([circuits[i] for i in tr], [circuits[i] for i in te], key=circuit_key) == 0
        assert overlap_count([circuits[i] for i in tr], [circuits[i] for i in va], key=circuit_key) == 0


def test_flow_nulls_are_measured_on_the_test_graphs():
    exp = make_experiment('quick', 0, n_nodes=30, n_train=4, n_val=2, n_test=2, batch_graphs=2, steps=2, hiddens=(8,),
                          lrs=(0.01,), models=('eign', 'hodge_inv'))
    exp.run()
    nulls = flow_nulls(exp)
    assert set(nulls) == {'zero flow', 'mean flow per edge kind', 'least squares on the inputs', 'EIGN at initialisation'}
    y = exp.test.y[exp.test.mask]
    assert math.isclose(nulls['zero flow'], y.pow(2).mean().sqrt().item(), rel_tol=1e-5)
    assert all(math.isfinite(v) and v > 0 for v in nulls.values())


def test_blind_cues():
    task = make_cycles_task(10, 3)
    test_rule = ScoreRule(directed_cue)
    out = test_rule(task.graph, task.x_equ, task.x_inv)[:, 0]
    assert torch.equal(out > 0, task.graph.directed)
    wt = make_walk_task(seed=0)
    assert shown_neighbour_cue(wt.graph, wt.x_equ, wt.x_inv).shape == (wt.graph.num_edges,)
    tt = make_triflow_task(seed=0)
    cue = same_type_triangle_cue(tt.graph, tt.x_equ, tt.x_inv)
    assert ((cue != 0) >= (tt.y[:, 0] != 0)).all()                     # every labelled edge is on a same-type triangle
    mask = random_flip_mask(tt.graph, 0.5, 0)                           # the cue is orientation-equivariant
    s = tt.graph.signs(mask)
    tf = tt.flip(mask)
    assert torch.equal(same_type_triangle_cue(tf.graph, tf.x_equ, tf.x_inv), s * cue)


def test_classification_benchmark_trains_the_baselines_and_the_nulls():
    r = cycles_benchmark(0, n_train=3, n_test=2, n_nodes=7, epochs=2, hidden=4, layers=1)
    assert set(CLASSIFICATION_BASELINES) <= set(r) and {'eign_init', 'cue'} <= set(r)
    assert r['cue']['name'] == 'directed edge' and 0 <= r['cue']['balanced_accuracy'] <= 1


def test_ablation_is_the_phase_alone():
    assert ABLATION == {'q': 0.0} and 'q = 0' in PAPER['ablation']
    exp = make_experiment('quick', 0, n_nodes=20, n_train=2, n_val=1, n_test=1, batch_graphs=1, steps=1, hiddens=(8,),
                          lrs=(0.01,), models=('eign', 'line_magnet'), **ABLATION)
    assert isinstance(exp.best('eign'), EIGN) and exp.best('eign').q == 0.0
    assert exp.best('line_magnet').q == exp.config.magnet_q > 0            # a baseline's own phase is not ablated
