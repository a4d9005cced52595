"Properties, closed forms, gradients, cross-checks and bad input of iclr25_nb.neural_fdm."
import json
import math

import numpy as np
import pytest
import torch

from iclr25_nb.core import BackgroundTrainer, overlap_count
from iclr25_nb.neural_fdm import (BezierShellGenerator, FormFinder, MLPEncoder, NeuralFDMConfig, Structure,
                                  TowerGenerator, area_loads, direct_optimize, edge_forces, fdm_solve, grid_mesh,
                                  load_network, make_experiment, node_areas, residuals, save_network, shape_error_l2,
                                  solve_structure, tube_mesh, sign_violations)


def random_network(seed, n=30, n_fixed=6, extra=40):
    "A random connected network: a random spanning tree plus extra random edges; the first n_fixed nodes fixed."
    rng = np.random.default_rng(seed)
    edges = [(i, int(rng.integers(0, i))) for i in range(1, n)]
    while len(edges) < n - 1 + extra:
        u, v = rng.integers(0, n, 2)
        if u != v: edges.append((int(u), int(v)))
    xyz = rng.normal(size=(n, 3)) * 3
    loads = rng.normal(size=(n, 3))
    fixed = np.zeros(n, bool); fixed[:n_fixed] = True
    return xyz, np.array(edges), fixed, loads, rng


# -- equilibrium ---------------------------------------------------------------------------------------
@pytest.mark.parametrize('seed', range(4))
@pytest.mark.parametrize('sign', [-1.0, 1.0])
def test_equilibrium_random_networks(seed, sign):
    xyz, edges, fixed, loads, rng = random_network(seed)
    q = sign * rng.uniform(0.5, 5, len(edges))
    x_eq = fdm_solve(q, xyz, edges, fixed, loads)
    R = residuals(q, x_eq, edges, fixed, loads)
    assert np.linalg.norm(R[~fixed]) / np.linalg.norm(loads[~fixed]) < 1e-10
    np.testing.assert_allclose(x_eq[fixed], xyz[fixed])                       # supports stay
    # the free nodes' input positions are ignored
    xyz2 = xyz.copy(); xyz2[~fixed] += 100
    np.testing.assert_allclose(fdm_solve(q, xyz2, edges, fixed, loads), x_eq, atol=1e-10)


def test_load_balance_with_reactions():
    "Sum of loads + reactions = 0: the residual at the supports carries the whole load (global equilibrium)."
    xyz, edges, fixed, loads, rng = random_network(7)
    q = -rng.uniform(0.5, 5, len(edges))
    x_eq = fdm_solve(q, xyz, edges, fixed, loads)
    R = residuals(q, x_eq, edges, fixed, loads)
    np.testing.assert_allclose(R.sum(0), loads.sum(0), atol=1e-10)   # Cᵀ(...) sums to zero over all nodes


def test_numpy_and_torch_kinds_and_batches():
    xyz, edges, fixed, loads, rng = random_network(1)
    q = rng.uniform(1, 2, (5, len(edges)))
    out = fdm_solve(q, xyz, edges, fixed, loads)
    assert isinstance(out, np.ndarray) and out.shape == (5, len(xyz), 3) and out.dtype == np.float64
    out_t = fdm_solve(torch.tensor(q), torch.tensor(xyz), edges, torch.tensor(fixed), torch.tensor(loads))
    assert isinstance(out_t, torch.Tensor) and out_t.shape == (5, len(xyz), 3)
    np.testing.assert_allclose(out_t.numpy(), out, atol=1e-12)
    for b in range(5):
        np.testing.assert_allclose(fdm_solve(q[b], xyz, edges, np.flatnonzero(fixed), loads), out[b], atol=1e-12)
    assert residuals(q[0], out[0], edges, fixed, loads).shape == (len(xyz), 3)


# -- closed forms --------------------------------------------------------------------------------------
def test_single_node_four_supports():
    xyz = np.array([[1, 1, 0], [-1, 1, 0], [-1, -1, 0], [1, -1, 0], [5, 5, 5.0]])
    edges = [(4, 0), (4, 1), (4, 2), (4, 3)]
    loads = np.zeros((5, 3)); loads[4] = [0, 0, -3.0]
    for qv in (0.5, 2.0, 7.0):
        x = fdm_solve(np.full(4, qv), xyz, edges, [0, 1, 2, 3], loads)
        np.testing.assert_allclose(x[4], [0, 0, -3.0 / (4 * qv)], atol=1e-14)


def test_uniform_chain_is_a_parabola():
    N, q, p = 12, 3.0, -0.7
    xyz = np.zeros((N + 1, 3)); xyz[:, 0] = np.arange(N + 1)
    edges = [(i, i + 1) for i in range(N)]
    loads = np.zeros((N + 1, 3)); loads[1:-1, 2] = p
    z = fdm_solve(np.full(N, q), xyz, edges, [0, N], loads)[:, 2]
    i = np.arange(N + 1)
    np.testing.assert_allclose(z, p / (2 * q) * i * (N - i), atol=1e-12)          # discrete catenary = parabola
    np.testing.assert_allclose(np.diff(z, 2), np.full(N - 1, -p / q), atol=1e-12)  # constant second difference


# -- invariances ---------------------------------------------------------------------------------------
def random_rotation(rng):
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q if np.linalg.det(Q) > 0 else -Q


@pytest.mark.parametrize('seed', range(3))
def test_rigid_motion_equivariance(seed):
    xyz, edges, fixed, loads, rng = random_network(seed)
    q = -rng.uniform(0.5, 5, len(edges))
    Rm, t = random_rotation(rng), rng.normal(size=3) * 10
    x = fdm_solve(q, xyz, edges, fixed, loads)
    x_moved = fdm_solve(q, xyz @ Rm.T + t, edges, fixed, loads @ Rm.T)    # loads are vectors: rotate only
    np.testing.assert_allclose(x_moved, x @ Rm.T + t, atol=1e-9)


@pytest.mark.parametrize('alpha', [0.1, 3.0, 17.0])
def test_q_scaling_law(alpha):
    xyz, edges, fixed, loads, rng = random_network(3)
    q = -rng.uniform(0.5, 5, len(edges))
    np.testing.assert_allclose(fdm_solve(alpha * q, xyz, edges, fixed, loads),
                               fdm_solve(q, xyz, edges, fixed, loads / alpha), atol=1e-10)
    # with supports at z = 0, the sag scales by 1 / alpha
    xyz0 = xyz.copy(); xyz0[:, 2] = 0; lz = np.zeros_like(loads); lz[:, 2] = loads[:, 2]
    z1 = fdm_solve(q, xyz0, edges, fixed, lz)[:, 2]
    np.testing.assert_allclose(fdm_solve(alpha * q, xyz0, edges, fixed, lz)[:, 2], z1 / alpha, atol=1e-10)


def test_node_permutation():
    xyz, edges, fixed, loads, rng = random_network(5)
    q = rng.uniform(0.5, 5, len(edges))
    perm = rng.permutation(len(xyz)); inv = np.argsort(perm)      # new node i = old node perm[i]
    x = fdm_solve(q, xyz, edges, fixed, loads)
    x_p = fdm_solve(q, xyz[perm], inv[edges], fixed[perm], loads[perm])
    np.testing.assert_allclose(x_p, x[perm], atol=1e-10)
    e_perm = rng.permutation(len(edges))                           # edge order and orientation do not matter
    x_e = fdm_solve(q[e_perm], xyz, edges[e_perm][:, ::-1], fixed, loads)
    np.testing.assert_allclose(x_e, x, atol=1e-10)


def test_masked_edges_have_no_effect():
    s, xyz = grid_mesh(6)
    rng = np.random.default_rng(0)
    q = -rng.uniform(1, 3, s.m)
    loads = area_loads(xyz.numpy(), s.faces)
    x = fdm_solve(q, xyz.numpy(), s.edges, s.fixed, loads)
    q2 = q.copy(); q2[s.mask.numpy() == 0] = rng.uniform(-50, 50, int((s.mask == 0).sum()))
    np.testing.assert_allclose(fdm_solve(q2, xyz.numpy(), s.edges, s.fixed, loads), x, atol=1e-12)


# -- encoder sign guarantees ---------------------------------------------------------------------------
@pytest.mark.parametrize('seed', range(5))
@pytest.mark.parametrize('tau', [0.0, 1.0])
def test_encoder_signs_for_any_input(seed, tau):
    torch.manual_seed(seed)
    s, _ = tube_mesh(levels=7, sides=5, rings=(0, 3, 6))
    enc = MLPEncoder(12, s.signs, s.mask, tau=tau, width=16, depth=2)
    for p in enc.parameters(): p.data.normal_(0, 3)                # arbitrary weights
    x = torch.randn(64, 12) * torch.logspace(-3, 3, 64)[:, None]   # inputs over six orders of magnitude
    q = enc(x)
    live = s.mask > 0
    assert torch.all(s.signs[live] * q[:, live] >= tau)
    assert torch.all(q[:, ~live] == 0)
    assert sign_violations(q, s, tau) == 0
    if tau > 0: assert torch.all(q[:, live].abs() >= tau)
    assert sign_violations(-q, s, tau) > 0                         # the counter can fail


# -- gradients -----------------------------------------------------------------------------------------
def test_implicit_backward_gradcheck_and_autograd():
    xyz, edges, fixed, loads, rng = random_network(2, n=12, n_fixed=4, extra=10)
    s = Structure(torch.tensor(edges), torch.tensor(fixed))
    q = torch.tensor(-rng.uniform(1, 3, (2, len(edges))), requires_grad=True)
    X_F = torch.tensor(xyz[fixed][None].repeat(2, 0), requires_grad=True)
    P = torch.tensor(loads[None].repeat(2, 0), requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b, c: solve_structure(a, b, c, s), (q, X_F, P), eps=1e-6, atol=1e-6)
    w = torch.randn(2, len(xyz), 3, dtype=torch.float64)
    g_imp = torch.autograd.grad((solve_structure(q, X_F, P, s) * w).sum(), (q, X_F, P))
    g_ad = torch.autograd.grad((solve_structure(q, X_F, P, s, implicit=False) * w).sum(), (q, X_F, P))
    for a, b in zip(g_imp, g_ad): torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_adjoint_closed_form():
    "∂L/∂q_e = −⟨(Cλ)_e, (CX)_e⟩ with λ = K⁻¹ ∂L/∂X_N."
    xyz, edges, fixed, loads, rng = random_network(4, n=10, n_fixed=3, extra=8)
    s = Structure(torch.tensor(edges), torch.tensor(fixed))
    q = torch.tensor(-rng.uniform(1, 3, (1, len(edges))), requires_grad=True)
    X = solve_structure(q, torch.tensor(xyz[fixed][None]), torch.tensor(loads[None]), s)
    g = torch.randn_like(X); g[:, s.fixed_idx] = 0
    (dq,) = torch.autograd.grad((X * g).sum(), q)
    from iclr25_nb.neural_fdm import stiffness
    K = stiffness(q.detach(), s.edges, s.n)[0]
    f = s.free_idx
    lam = torch.zeros_like(X[0]); lam[f] = torch.linalg.solve(K[f][:, f], g[0, f])
    Xd = X[0].detach(); u, v = s.edges.T
    torch.testing.assert_close(dq[0], -((lam[u] - lam[v]) * (Xd[u] - Xd[v])).sum(-1))


# -- loads ---------------------------------------------------------------------------------------------
def test_area_load_conservation():
    gen = BezierShellGenerator('saddle', 'none')
    x = gen.sample(4, torch.Generator().manual_seed(0))
    s = gen.structure
    P = area_loads(x, s.faces, load=-0.5)
    a = x[:, s.faces]; c = a.mean(2, keepdim=True); b = x[:, s.faces.roll(-1, 1)]
    fan_area = 0.5 * torch.linalg.cross(a - c, b - c).norm(dim=-1).sum((1, 2))
    torch.testing.assert_close(P[..., 2].sum(1), -0.5 * fan_area)
    assert torch.all(P[..., :2] == 0)
    s0, xyz0 = grid_mesh(7, size=6.0)                          # flat: exactly load × plan area
    assert abs(area_loads(xyz0.numpy(), s0.faces, -2.0)[:, 2].sum() - (-2.0 * 36)) < 1e-10


def test_tributary_areas_flat_grid():
    s, xyz = grid_mesh(5, size=4.0)                            # unit squares
    A = node_areas(xyz[None], s.faces)[0].view(5, 5)
    assert torch.allclose(A[1:-1, 1:-1], torch.ones(3, 3, dtype=torch.float64))    # interior: 4 × 1/4
    assert torch.allclose(A[0, 1:-1], torch.full((3,), 0.5, dtype=torch.float64))  # edge: 2 × 1/4
    assert float(A[0, 0]) == pytest.approx(0.25)                                     # corner: 1/4


# -- generators ----------------------------------------------------------------------------------------
@pytest.mark.parametrize('bounds', ['pillow', 'dome', 'saddle'])
def test_shell_symmetry_and_supports(bounds):
    gen = BezierShellGenerator(bounds, 'double')
    x = gen.sample(5, torch.Generator().manual_seed(1)).view(5, 10, 10, 3)
    torch.testing.assert_close(x.flip(1) * torch.tensor([-1, 1, 1.]), x, atol=1e-12, rtol=0)
    torch.testing.assert_close(x.flip(2) * torch.tensor([1, -1, 1.]), x, atol=1e-12, rtol=0)
    if bounds == 'pillow':
        assert x.view(5, -1, 3)[:, gen.structure.fixed_idx, 2].abs().max() < 1e-12
    xa = BezierShellGenerator(bounds, 'none').sample(5, torch.Generator().manual_seed(1)).view(5, 10, 10, 3)
    assert (xa.flip(1) * torch.tensor([-1, 1, 1.]) - xa).abs().max() > 1e-3        # asymmetric really is


def test_tower_generator():
    tg = TowerGenerator(twisted=True)
    x = tg.sample(3, torch.Generator().manual_seed(0)).view(3, 21, 16, 3)
    assert torch.allclose(x[:, 0, :, 2], torch.zeros(3, 16, dtype=torch.float64))
    assert torch.allclose(x[:, -1, :, 2], torch.full((3, 16), 10.0, dtype=torch.float64))
    assert tg.rings.tolist() == [0, 10, 20] and len(tg.ring_nodes) == 48
    r = x[..., :2].norm(dim=-1)
    assert r.min() >= 2 * 0.5 - 1e-9 and r.max() <= 2 * 1.5 + 1e-9
    xs = TowerGenerator(twisted=False).sample(3, torch.Generator().manual_seed(0)).view(3, 21, 16, 3)
    assert torch.allclose(xs[:, 10, 0, 1], torch.zeros(3, dtype=torch.float64), atol=1e-12)   # no rotation: node 0 on the x axis


def test_tower_formfinder_tension_only_cables():
    tg = TowerGenerator()
    model = FormFinder(tg.structure, load=0.0, tau=1.0, width=16, depth=2, input_nodes=tg.ring_nodes)
    x = tg.sample(4, torch.Generator().manual_seed(0))
    x_hat, q, P = model(x)
    s = tg.structure
    cables = (s.signs > 0) & (s.mask > 0)
    assert torch.all(q[:, cables] >= 1.0) and torch.all(q[:, s.signs < 0] <= 0)
    R = residuals(q, x_hat, s.edges, s.fixed, P)[:, s.free_idx]
    assert R.abs().max() < 1e-6 * q.abs().max()


# -- peers ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize('seed', range(3))
def test_cross_check_compas_fd(seed):
    fd = pytest.importorskip('compas_fd.solvers')
    gen = BezierShellGenerator('saddle', 'none')
    x = gen.sample(1, torch.Generator().manual_seed(seed))[0].numpy()
    s = gen.structure
    q = -np.random.default_rng(seed).uniform(0.5, 10, s.m)
    loads = area_loads(x, s.faces)
    ours = fdm_solve(q, x, s.edges, s.fixed, loads)
    res = fd.fd_numpy(vertices=x, fixed=s.fixed_idx.tolist(), edges=s.edges.tolist(), forcedensities=q.tolist(), loads=loads)
    assert np.abs(ours - np.asarray(res.vertices)).max() < 1e-9
    np.testing.assert_allclose(residuals(q, ours, s.edges, s.fixed, loads), np.asarray(res.residuals), atol=1e-9)
    np.testing.assert_allclose(edge_forces(q, ours, s.edges), np.asarray(res.forces).ravel(), atol=1e-9)


# -- direct optimisation -------------------------------------------------------------------------------
def test_direct_optimisation_decreases_loss():
    gen = BezierShellGenerator('pillow', num_uv=5)
    x = gen.sample(1, torch.Generator().manual_seed(0))[0]
    r = direct_optimize(x, gen.structure, lambda a, b, q: shape_error_l2(a, b), maxiter=60,
                        generator=torch.Generator().manual_seed(0))
    assert r['loss'] < 0.5 * r['history'][0] and r['history'][-1] <= r['history'][0]
    live = gen.structure.mask > 0
    assert torch.all(r['q'][live] < 0)                            # compression only within the bounds


# -- bad input -----------------------------------------------------------------------------------------
def chain():
    xyz = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0.]]); edges = [(0, 1), (1, 2)]
    return xyz, edges, [0, 2], np.array([[0, 0, 0], [0, 0, -1.], [0, 0, 0]])


def test_bad_input_disconnected_free_node():
    xyz = np.zeros((4, 3)); loads = np.zeros((4, 3))
    with pytest.raises(ValueError, match=r'free node\(s\) \[3\].*not connected'):
        fdm_solve(np.ones(2), xyz, [(0, 1), (1, 2)], [0, 2], loads)


def test_bad_input_singular_and_zero_q():
    xyz, edges, fixed, loads = chain()
    with pytest.raises(ValueError, match='singular'):
        fdm_solve(np.array([1.0, -1.0]), xyz, edges, fixed, loads)        # the node's stiffness cancels
    with pytest.raises(ValueError, match='q.*not connected'):
        fdm_solve(np.zeros(2), xyz, edges, fixed, loads)
    with pytest.raises(ValueError, match='q.*not connected'):
        fdm_solve(np.array([[1.0, 1.0], [0.0, 0.0]]), xyz, edges, fixed, loads)   # one bad batch item


@pytest.mark.parametrize('kwargs, match', [
    (dict(q=np.ones(3)), r'q must have shape \(m,\)'),
    (dict(xyz=np.zeros((3, 2))), r'xyz must have shape'),
    (dict(loads=np.zeros((4, 3))), r'loads must have shape'),
    (dict(edges=[(0, 5), (1, 2)]), r'outside \[0, 3\)'),
    (dict(edges=[(0, 0), (1, 2)]), 'self-loop'),
    (dict(edges=np.zeros((2, 3), int)), r'edges must have shape \(m, 2\)'),
    (dict(fixed=[0, 7]), r'indices must lie in \[0, 3\)'),
    (dict(fixed=np.ones(3, bool)), 'every node'),
    (dict(fixed=np.zeros(3, bool)), 'no support'),
    (dict(fixed=np.ones(2, bool)), r'boolean mask must have shape'),
    (dict(q=np.array([1.0, np.nan])), 'q contains NaN'),
    (dict(loads=np.full((3, 3), np.inf)), 'loads contains NaN'),
    (dict(q=np.ones((2, 2)), loads=np.zeros((3, 3, 3))), 'batch sizes'),
    (dict(q='abc'), 'numeric'),
])
def test_bad_input_raises_value_error(kwargs, match):
    xyz, edges, fixed, loads = chain()
    args = dict(q=np.ones(2), xyz=xyz, edges=edges, fixed=fixed, loads=loads)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        fdm_solve(**args)


def test_bad_config_and_generators():
    with pytest.raises(ValueError, match='task'): NeuralFDMConfig(task='bridge')
    with pytest.raises(ValueError, match='lr'): NeuralFDMConfig(lr=0)
    with pytest.raises(ValueError, match='load'): NeuralFDMConfig(load=0.5)
    with pytest.raises(ValueError, match='direct_method'): NeuralFDMConfig(direct_method='BFGS')
    with pytest.raises(ValueError, match='no field'): make_experiment(widht=3)
    with pytest.raises(ValueError, match='bounds'): BezierShellGenerator('blob')
    with pytest.raises(ValueError, match='symmetry'): BezierShellGenerator(symmetry='triple')
    with pytest.raises(ValueError, match='rings'): tube_mesh(rings=(0, 5))
    with pytest.raises(ValueError, match='num_uv'): grid_mesh(2)
    with pytest.raises(ValueError, match='method'):
        direct_optimize(torch.zeros(9, 3), grid_mesh(3)[0], lambda a, b, q: (a - b).sum(), method='Nelder-Mead')


# -- loader --------------------------------------------------------------------------------------------
def test_network_file_round_trip_and_broken_files(tmp_path):
    xyz, edges, fixed, loads = chain()
    f = save_network(tmp_path / 'net.json', xyz, edges, np.isin(np.arange(3), fixed), [2.0, 2.0], loads)
    net = load_network(f)
    np.testing.assert_allclose(fdm_solve(net['q'], net['xyz'], net['edges'], net['fixed'], net['loads'])[1], [1, 0, -0.25])
    good = json.loads(f.read_text())
    broken = {
        'truncated.json': f.read_text()[:40],
        'not_object.json': '[1, 2]',
        'missing.json': json.dumps({k: v for k, v in good.items() if k != 'edges'}),
        'wrong_shape.json': json.dumps({**good, 'vertices': [[0, 0], [1, 0], [2, 0]]}),
        'wrong_type.json': json.dumps({**good, 'forcedensities': ['a', 'b']}),
        'nan.json': json.dumps({**good, 'vertices': [[0, 0, 0], [1, 0, float('nan')], [2, 0, 0]]}),
        'bad_index.json': json.dumps({**good, 'edges': [[0, 1], [1, 9]]}),
        'q_length.json': json.dumps({**good, 'forcedensities': [1.0]}),
    }
    for name, text in broken.items():
        p = tmp_path / name; p.write_text(text)
        with pytest.raises(ValueError, match=name.replace('.', r'\.')):
            load_network(p)


# -- experiment contract -------------------------------------------------------------------------------
def test_experiment_steps_checkpoint_and_resume(tmp_path):
    exp = make_experiment(test_size=4, batch_size=4, width=16)
    t = BackgroundTrainer(exp, checkpoint_dir=tmp_path, max_steps=3).start()
    t.join(120); t.raise_error()
    assert exp.step_count == 3 and t.history[-1]['nn_residual'] > 0 and t.history[-1]['residual'] < 1e-3
    exp2 = make_experiment(test_size=4, batch_size=4, width=16)
    t2 = BackgroundTrainer(exp2, checkpoint_dir=tmp_path, resume=True)
    assert t2.resumed_from == 3
    for a, b in zip(exp.model.parameters(), exp2.model.parameters()): assert torch.equal(a, b)
    m1, m2 = exp.step(), exp2.step()
    assert m1 == pytest.approx(m2)
    ev = exp.evaluate()
    assert ev['formfinder_residual_rel_max'] < 1e-9 and ev['formfinder_sign_violations'] == 0


def test_tower_experiment_step():
    exp = make_experiment(task='tower', test_size=2, batch_size=2, width=16)
    m = exp.step()
    assert math.isfinite(m['loss']) and m['residual'] < 1e-2
    assert exp.evaluate()['formfinder_sign_violations'] == 0


def test_explorer_builds_and_refreshes():
    pytest.importorskip('panel')
    from iclr25_nb.neural_fdm import explorer
    view = explorer()
    try:
        assert view.trainer.status == 'idle'
        view.trainer.experiment.run(1); view.trainer.refresh_snapshot()
        assert view.refresh(force=True)
        title = view.panes['design'].object.layout.title.text
        view.view_controls['baseline'].value = True
        view.view_controls['baseline'].value = False
        view.view_controls['load'].value = -1.0                   # the same design under another load: a new shape
        assert view.panes['design'].object.layout.title.text != title
        view.controls['task'].value = 'tower'; view.new_run(); view.trainer.pause()
        assert view.refresh(force=True)
    finally:
        view.close()


def test_render_needs_only_the_snapshot():
    "render draws from a pickled snapshot (CPU weights), not from the live experiment."
    import pickle
    from iclr25_nb.neural_fdm import neural_fdm_render
    exp = make_experiment(test_size=2, batch_size=2, width=16)
    hist = [{'step': i + 1, **h} for i, h in enumerate(exp.run(2))]
    snap = pickle.loads(pickle.dumps(exp.snapshot()))
    figs = neural_fdm_render(snap, hist, load=-1.0)
    assert set(figs) == {'design', 'tower', 'q', 'curves', 'residual'}
    x, q, _ = exp.predict(exp.x_test[:1])
    assert figs['q'].data[0].x is not None


def test_live_redraws_send_only_what_changed():
    """While training: a refresh at the same step redraws nothing, a design that did not visibly move keeps its
    traces (only the title goes out), and the network has no NaN (Panel resends an array holding NaN every time)."""
    import plotly.graph_objects as go
    from iclr25_nb.neural_fdm import _keep_unmoved, neural_fdm_render
    exp = make_experiment(test_size=2, batch_size=2, width=16)
    hist = [{'step': i + 1, **h} for i, h in enumerate(exp.run(2))]
    snap, cache = exp.snapshot(), {}
    a = neural_fdm_render(snap, hist, cache=cache, slow_s=5.0)
    net = next(t for t in a['design'].data if t.name == 'network')
    assert None in net.x and not np.isnan(np.asarray([v for v in net.x if v is not None], float)).any()
    b = neural_fdm_render(snap, hist, cache=cache, slow_s=5.0)
    assert all(b[k] is a[k] for k in a)
    new = go.Figure(a['design']); new.update_layout(title='later')
    kept = _keep_unmoved(a['design'], new)
    assert kept.layout.title.text == 'later' and kept.data[1].x == a['design'].data[1].x
    moved = go.Figure(new); moved.data[1].x = tuple(None if v is None else v + 1.0 for v in net.x)
    assert _keep_unmoved(a['design'], moved) is moved


def test_ablation_removes_the_physics():
    "decoder='mlp' (the --ablate switch): the model's outputs are no longer in equilibrium."
    exp = make_experiment(decoder='mlp', test_size=4, batch_size=4, width=16)
    exp.run(2)
    ev = exp.evaluate()
    assert ev['formfinder_residual_rel'] > 1e-3 and ev['formfinder_eq_shape'] != pytest.approx(ev['formfinder_shape'])
    with pytest.raises(ValueError, match='decoder'): make_experiment(decoder='none')


def test_structure_to_device_keeps_the_solution():
    s, xyz = grid_mesh(5)
    s2 = s.to('cpu')
    assert s2 is s                                             # already there
    q = -torch.ones(1, s.m, dtype=torch.float64)
    P = area_loads(xyz[None], s.faces)
    x1 = solve_structure(q, xyz[None, s.fixed_idx], P, s)
    s._blocks = None
    torch.testing.assert_close(solve_structure(q, xyz[None, s.fixed_idx], P, s), x1)


def test_batched_direct_optimisation_recovers_solver_shapes():
    from iclr25_nb.neural_fdm import direct_optimize_batch
    s, xyz0 = grid_mesh(4)
    q_true = -torch.stack([torch.linspace(1, 3, s.m), torch.linspace(3, 1, s.m)]).double() * s.mask
    x0 = xyz0[None].expand(2, -1, -1)
    x_true = solve_structure(q_true, x0[:, s.fixed_idx], area_loads(x0, s.faces, -1.0), s)
    per = lambda x, xh, q: (x - xh).square().flatten(1).sum(1)
    r = direct_optimize_batch(x_true, s, per, load=-1.0, maxiter=300, generator=torch.Generator().manual_seed(0))
    assert r['loss'].shape == (2,) and torch.all(r['loss'] < 1e-3 * r['history'][0])
    assert torch.all(r['q'][:, s.mask > 0] < 0)


def test_solve_after_set_num_threads():
    "MKL's batched LU gives invalid pivots once torch.set_num_threads(2) was called (Report.run does it): still solves."
    n = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        exp = make_experiment(task='tower', test_size=2, batch_size=2, width=16)
        m = exp.step()
        assert math.isfinite(m['loss']) and m['residual'] < 1e-2
        s = exp.structure
        q = exp.model.encode(exp.x_test)
        a = solve_structure(q, exp.x_test[:, s.fixed_idx], torch.zeros_like(exp.x_test), s)
        b = solve_structure(q, exp.x_test[:, s.fixed_idx], torch.zeros_like(exp.x_test), s, implicit=False)
        torch.testing.assert_close(a, b)
    finally:
        torch.set_num_threads(n)


def test_factor_cholesky_lu_and_fallback():
    "Definite K (q of one sign): the batched Cholesky path; mixed signs: per-item LU; a wrong factor is caught and redone."
    import iclr25_nb.neural_fdm as M
    gen = BezierShellGenerator('saddle', 'none', num_uv=5)
    s = gen.structure
    g = torch.Generator().manual_seed(0)
    q = -torch.rand(3, s.m, generator=g, dtype=torch.float64) - 0.5              # compression: -K definite
    K, _ = M.stiffness_blocks(q, s)
    B = torch.randn(3, K.shape[1], 3, generator=g, dtype=torch.float64)
    f = M._Factor(K)
    assert f.L is not None and f.LU is None
    torch.testing.assert_close(f.solve(B), torch.linalg.solve(K, B))
    f.L = f.L * 1.01                                                              # a silently wrong factor
    torch.testing.assert_close(f.solve(B), torch.linalg.solve(K, B))             # caught by the backward-error check
    assert f.L is None and f.LU is not None
    qm = q.clone(); qm[1, ::2] *= -1.0                                            # mixed signs: K indefinite
    Km, _ = M.stiffness_blocks(qm, s)
    fm = M._Factor(Km)
    assert fm.L is None
    torch.testing.assert_close(fm.solve(B), torch.linalg.solve(Km, B))


def test_cross_check_with_jax_fdm():
    "The same shells solved by jax_fdm's EquilibriumModel (the official code's library) agree to float64 precision."
    pytest.importorskip('jax_fdm')
    import jax
    jax.config.update('jax_enable_x64', True)
    import jax.numpy as jnp
    from jax_fdm.equilibrium import EquilibriumModel, EquilibriumStructure
    gen = BezierShellGenerator('saddle', 'none', num_uv=6)
    s = gen.structure
    x = gen.sample(3, torch.Generator().manual_seed(0))
    q = -torch.rand(3, s.m, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 9.5 - 0.5
    P = area_loads(x, s.faces, -0.5)
    ours = fdm_solve(q.numpy(), x.numpy(), s.edges.numpy(), s.fixed.numpy(), P.numpy())
    st = EquilibriumStructure(nodes=np.arange(s.n), edges=s.edges.numpy(), supports=s.fixed.numpy().astype(np.int64))
    model, fixed = EquilibriumModel(tmax=1), s.fixed_idx.numpy()
    for b in range(3):
        xi, Pi = jnp.asarray(x[b].numpy()), jnp.asarray(P[b].numpy())
        free = model.nodes_free_positions(jnp.asarray(q[b].numpy()), xi[fixed], Pi, st)
        theirs = np.asarray(model.nodes_positions(free, xi[fixed], st))
        np.testing.assert_allclose(ours[b], theirs, atol=1e-10)


def test_pinn_sweep_and_its_report_rows(monkeypatch):
    "The κ sweep of `reproduce` on a tiny config: deterministic per κ, its rows, claims and figure in the report."
    import iclr25_nb.neural_fdm as M
    from iclr25_nb.neural_fdm import pinn_sweep, reproduce
    exp = make_experiment(num_uv=4, test_size=4, batch_size=4, width=16, steps=3)
    a, b = pinn_sweep(exp, (1.0, 100.0)), pinn_sweep(exp, (1.0,))
    assert [p['kappa'] for p in a] == [1.0, 100.0]
    for p in a:
        assert all(math.isfinite(p[k]) and p[k] > 0 for k in ('shape', 'eq_shape', 'residual_rel', 'seconds_per_design'))
    assert a[0]['shape'] == b[0]['shape'] and a[0]['residual_rel'] == b[0]['residual_rel']   # same init, same batches
    with pytest.raises(ValueError, match='positive'): pinn_sweep(exp, (0.0,))
    monkeypatch.setitem(M.TOWER_SIZES, 'quick', dict(steps=2, test_size=2, n_direct=2, direct_maxiter=2))
    monkeypatch.setattr(M, 'DIRECT_MAXITER', 20)
    rep = reproduce('quick', num_uv=4, test_size=4, batch_size=4, width=16, steps=3, n_direct=2, direct_maxiter=3)
    text = json.dumps(rep.to_dict(), default=str, ensure_ascii=False)
    assert 'PINN baseline, κ = 100' in text and 'best PINN' in text and 'pinn_sweep' in rep.figures
    fig = rep.figures['pinn_sweep']
    assert fig.layout.xaxis.title.text.startswith('κ') and fig.layout.yaxis2.title.text


def test_best_constant_q_and_lookup():
    "The blind strategies of the null ladder: a uniform q on the grid is recovered exactly; the lookup picks the nearest."
    from iclr25_nb.neural_fdm import best_constant_q, nearest_q
    st, xt0 = tube_mesh(levels=5, sides=6, rings=(0, 2, 4))     # unloaded, both signs: only the ratio matters
    cs = torch.logspace(0, math.log10(20.0), 21, dtype=torch.float64)
    per = lambda a, b, q: (a - b).abs().flatten(1).sum(1)
    for k in (3, 15):
        q = st.signs.double() * st.mask.double() * torch.where(st.signs < 0, cs[k], 1.0).double()
        x = solve_structure(q[None], xt0[None, st.fixed_idx], torch.zeros(1, st.n, 3, dtype=torch.float64), st)
        torch.testing.assert_close(best_constant_q(x, st, per, load=0.0, lo=1.0, hi=20.0, n=21), q, rtol=0, atol=1e-9)
    s, _ = grid_mesh(5)
    pool, qp = torch.randn(4, 25, 3, dtype=torch.float64), torch.randn(4, s.m, dtype=torch.float64)
    assert torch.equal(nearest_q(pool[[2, 0]] + 1e-3, pool, qp), qp[[2, 0]])


def test_direct_optimize_each_per_design():
    "Per-design L-BFGS-B to the stopping rule: per-design losses, iterations, flags, times; warm starts kept per design."
    from iclr25_nb.neural_fdm import direct_optimize_each, seconds_to_reach
    s, xyz0 = grid_mesh(4)
    q_true = -torch.linspace(1, 3, s.m, dtype=torch.float64) * s.mask
    x = solve_structure(q_true[None].expand(2, -1), xyz0[None, s.fixed_idx], area_loads(xyz0[None], s.faces, -1.0), s)
    per = lambda a, b, q: (a - b).square().flatten(1).sum(1)
    r = direct_optimize_each(x, s, per, load=-1.0, maxiter=400, seed=3)
    assert r['loss'].shape == r['nit'].shape == r['converged'].shape == r['seconds'].shape == (2,)
    assert torch.all(r['loss'] < 1e-3 * r['first'])
    w = direct_optimize_each(x, s, per, load=-1.0, q0=r['q'], maxiter=50)
    torch.testing.assert_close(w['first'], r['loss'], rtol=1e-9, atol=0)   # a warm start starts where it says
    t = seconds_to_reach(r, r['first'])                                     # the start itself: 0 seconds
    assert t.tolist() == [0.0, 0.0]


def test_null_pool_and_test_sets_do_not_overlap():
    "The training targets the nulls are fitted on (the model's first batches) never occur in the test set."
    exp = make_experiment(test_size=50)
    pool = exp.gen.sample(32, torch.Generator().manual_seed(int(exp.seed)))
    assert overlap_count(pool, exp.x_test.cpu()) == 0
    assert overlap_count(pool, pool[:3]) == 3                              # the count does find copies


def test_tower_study_in_reproduce(monkeypatch):
    "The tower study (tiny sizes): official tower settings, three starts with one budget, its rows, claims, findings."
    import iclr25_nb.neural_fdm as M
    monkeypatch.setitem(M.TOWER_SIZES, 'quick', dict(steps=2, test_size=3, n_direct=2, direct_maxiter=3))
    monkeypatch.setattr(M, 'DIRECT_MAXITER', 20)                            # the random start's cap, kept small here
    t = M.tower_study('quick', seed=0)
    c = t['exp'].config
    assert (c.task, c.depth, c.grad_clip, c.batch_size, c.decoder) == ('tower', 5, 0.01, 16, 'fdm')
    s = t['exp'].structure_cpu
    q0 = M.expert_q(s, 2)
    assert q0.shape == (2, s.m) and set(q0.abs().unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(q0[0], s.signs.double() * s.mask.double())
    assert M.sign_violations(q0, s, tau=1.0) == 0                           # the expert start is feasible (|q| = τ)
    e = t['expert']
    e0 = float(M._per_design_loss(t['exp'])(t['xs'], t['exp'].equilibrium(t['xs'], q0), q0).mean())
    assert e['history'][0] == pytest.approx(e0, rel=1e-9)                   # iteration 0 = the expert's q
    for k in ('expert', 'warm'): assert t[k]['nit'] <= 3 and t[k]['loss'].shape == (2,)
    r = t['rand']                                                           # per tower, to the stopping rule
    assert r['loss'].shape == r['nit'].shape == r['converged'].shape == (2,) and len(r['histories']) == 2
    assert set(t['null_err']) >= {'expert q = ±1, not optimised', 'the model at initialisation'} and len(t['null_err']) >= 4
    assert overlap_count(t['pool']['x'], t['exp'].x_test.cpu()) == 0     # the nulls' training towers are not test towers
    assert torch.all(t['q_model'][:, s.mask > 0].abs() >= 1.0 - 1e-9)      # |q| >= τ = 1
    ta = M.tower_study('quick', seed=0, ablate=True)
    assert ta['exp'].config.decoder == 'mlp'
    assert torch.equal(ta['rand']['first'], t['rand']['first'])           # the same random start, the same towers
    rep = M.reproduce('quick', num_uv=4, test_size=4, batch_size=4, width=16, steps=2, n_direct=2, direct_maxiter=2)
    text = json.dumps(rep.to_dict(), default=str, ensure_ascii=False)
    assert 'not measured by reproduce' not in text
    for row in ('tower: FormFinder (depth 5, clip 0.01)', 'tower null: expert q = ±1, not optimised',
                'tower: direct L-BFGS-B per tower from random q', 'tower: direct L-BFGS-B, expert start (q = ±1)',
                'tower: direct L-BFGS-B, predict-then-optimise'):
        assert row in text, row
    heads = [cl for cl in rep.claims if cl.kind == 'headline']
    assert any(h.statement.startswith('towers: the model') for h in heads)
    for h in heads: assert len(h.nulls) >= 3 and h.set is not None, h.statement    # Claims v3: a null ladder each
    assert rep.claims[0].kind == 'headline'
    assert any('expert initialisation' in f.statement for f in rep.findings)
    assert {'tower_design', 'tower_race'} <= set(rep.figures)
