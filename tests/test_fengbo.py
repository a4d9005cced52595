"Fengbo: Cl(3,0) axioms, Clifford layers (delta kernels, FFT round trip, covariance, peer cross-check), potential flow."
import numpy as np
import pytest
import torch

from iclr25_nb.core import overlap_count
from iclr25_nb.fengbo import (BLADES, CAYLEY, MIXING, CliffordConv3d, CliffordGroupNorm3d, CliffordSpectralConv3d,
                              FNO3d, Fengbo, RealCNNFNO, UNet3d, build_model, captured_inputs, clifford_fft, clifford_ifft, count_parameters, covariance_error, dual,
                              ellipsoid_flow, embed_grade, fibonacci_sphere, geometric_product, grade,
                              make_ellipsoid_dataset, make_experiment, multivector_kernel, random_rotation,
                              rankine_flow, rankine_half_length, reverse, rotate_field, sphere_flow,
                              sphere_closed_form, free_stream, rel_l2, versor_matrix, voxelize)

E = torch.eye(8, dtype=torch.float64)


def mv(name):
    return E[BLADES.index(name)]


def test_basis_vectors_square_to_one_and_anticommute():
    for i in ('e1', 'e2', 'e3'):
        torch.testing.assert_close(geometric_product(mv(i), mv(i)), mv('1'))
    for i, j in (('e1', 'e2'), ('e1', 'e3'), ('e2', 'e3')):
        torch.testing.assert_close(geometric_product(mv(i), mv(j)), -geometric_product(mv(j), mv(i)))
        torch.testing.assert_close(geometric_product(mv(i), mv(j)), mv(i + j[1]))


def test_pseudoscalar_squares_to_minus_one_and_is_central():
    I = mv('e123')
    torch.testing.assert_close(geometric_product(I, I), -mv('1'))
    x = torch.randn(20, 8, dtype=torch.float64)
    torch.testing.assert_close(geometric_product(I.expand_as(x), x), geometric_product(x, I.expand_as(x)))


def test_associativity_and_distributivity():
    g = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(50, 8, dtype=torch.float64, generator=g) for _ in range(3))
    ab_c = geometric_product(geometric_product(a, b), c)
    torch.testing.assert_close(ab_c, geometric_product(a, geometric_product(b, c)), atol=1e-12, rtol=0)
    torch.testing.assert_close(geometric_product(a, b + c), geometric_product(a, b) + geometric_product(a, c))


def test_reverse_and_dual_identities():
    g = torch.Generator().manual_seed(1)
    a, b = (torch.randn(30, 8, dtype=torch.float64, generator=g) for _ in range(2))
    torch.testing.assert_close(reverse(geometric_product(a, b)), geometric_product(reverse(b), reverse(a)))
    v = embed_grade(torch.randn(30, 3, dtype=torch.float64, generator=g), 1)
    torch.testing.assert_close(dual(dual(v)), -v)
    torch.testing.assert_close(dual(mv('e1')), -mv('e23'))          # convention x* = x I^-1
    assert torch.all(grade(dual(v), 2) == dual(v))                   # vectors -> bivectors
    for k in range(4):
        x = torch.randn(5, 8, dtype=torch.float64, generator=g)
        torch.testing.assert_close(grade(grade(x, k), k), grade(x, k))
    # the norm of a vector is its geometric square: v v~ = |v|^2
    torch.testing.assert_close(geometric_product(v, reverse(v))[:, 0], (v ** 2).sum(1))


def test_versor_matrix_is_an_algebra_automorphism():
    R = random_rotation(np.random.default_rng(0))
    V = versor_matrix(R)
    g = torch.Generator().manual_seed(2)
    a, b = (torch.randn(20, 8, dtype=torch.float64, generator=g) for _ in range(2))
    torch.testing.assert_close(geometric_product(a, b) @ V.T, geometric_product(a @ V.T, b @ V.T))


def test_conv_with_a_delta_kernel_is_the_pointwise_product():
    torch.manual_seed(0)
    conv = CliffordConv3d(1, 1, 3, bias=False).double()
    with torch.no_grad():
        conv.weight.zero_()
        w = torch.randn(8, dtype=torch.float64)
        conv.weight[:, 0, 0, 1, 1, 1] = w                            # delta at the kernel centre
    x = torch.randn(2, 1, 5, 5, 5, 8, dtype=torch.float64)
    torch.testing.assert_close(conv(x), geometric_product(x, w.expand_as(x)))   # x w: input left, weight right


def test_blade_product_is_channelwise():
    w = torch.randn(8, 1, 1, dtype=torch.float64)
    K = multivector_kernel(w, 'blade')
    torch.testing.assert_close(K, torch.diag(w[:, 0, 0]))


def test_clifford_fft_round_trip_and_low_pass_identity():
    x = torch.randn(2, 3, 8, 8, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(clifford_ifft(clifford_fft(x)), x)
    spec = CliffordSpectralConv3d(1, 1, modes=4).double()
    with torch.no_grad():
        spec.weight.zero_(); spec.weight[0] = 1                      # scalar weight 1 on every mode, modes = M/2
    x = torch.randn(2, 1, 8, 8, 8, 8, dtype=torch.float64)
    torch.testing.assert_close(spec(x), x)


def test_conv_translation_covariance():
    torch.manual_seed(3)
    conv = CliffordConv3d(2, 3, 3, padding=0).double()
    x = torch.randn(1, 2, 9, 9, 9, 8, dtype=torch.float64)
    shifted = torch.roll(x, 2, dims=2)
    torch.testing.assert_close(conv(shifted)[:, :, 2:], conv(x)[:, :, :-2])


def test_conv_rotation_covariance_and_the_blade_control():
    torch.manual_seed(4)
    conv = CliffordConv3d(2, 2, 3).double()
    x = torch.randn(1, 2, 6, 6, 6, 8, dtype=torch.float64)
    assert covariance_error(conv, x) < 1e-12
    assert covariance_error(conv, x, product='blade') > 0.1
    M = 6
    g = torch.linspace(-1, 1, M, dtype=torch.float64)
    pos = embed_grade(torch.stack(torch.meshgrid(g, g, g, indexing='ij'), -1), 1)
    torch.testing.assert_close(rotate_field(pos), pos)                # f(r) = r is invariant


def test_untrained_fengbo_convs_are_rotation_covariant_and_the_ablation_is_not():
    "Covariance is an identity of the geometric product: an untrained network meets it (a test, not a claim)."
    torch.manual_seed(6)
    d = make_ellipsoid_dataset(1, grid=8, seed=3, surface_points=300)
    inputs = tuple(d[k].double() for k in ('x_p', 'x_u', 'mask_s', 'mask_u'))
    for product, bound in (('clifford', 1e-10), ('real', None)):
        model = Fengbo(**{**Fengbo.config('small'), 'modes': 2}, product=product).double()
        errs = [covariance_error(m, x) for _, m, x in captured_inputs(model, inputs)]
        assert len(errs) == 16
        if bound: assert max(errs) < bound
        else: assert min(errs) > 0.05                                  # the generic mixing is no geometric product


def test_ablation_keeps_inputs_and_parameters():
    "The ablation's generic mixing: same parameter count, every input blade reaches every output blade."
    arch = {**Fengbo.config('small'), 'modes': 2}
    assert count_parameters(Fengbo(**arch, product='real')) == count_parameters(Fengbo(**arch))
    w = torch.randn(8, 1, 1, dtype=torch.float64)
    K = multivector_kernel(w, 'real')
    assert torch.all(K.abs() > 0)                                      # dense 8x8 block: no blade is cut off
    torch.testing.assert_close(MIXING.pow(2).sum(1).mean(), torch.tensor(1.0, dtype=torch.float64), atol=0.3, rtol=0)
    # the pressure output (grade 0) depends on the position and normal blades of x_p under the ablation
    d = make_ellipsoid_dataset(1, grid=8, seed=4, surface_points=300)
    model = Fengbo(**arch, product='real')
    x_p = d['x_p'].clone().requires_grad_(True)
    p, _ = model(x_p, d['x_u'], d['mask_s'], d['mask_u'])
    p.sum().backward()
    assert x_p.grad[..., 1:7].abs().sum() > 0


def test_group_norm_whitens():
    norm = CliffordGroupNorm3d(2).double()
    torch.manual_seed(0)
    scales = torch.diag(torch.linspace(0.5, 2, 8, dtype=torch.float64))
    mix = scales @ torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64))[0]
    x = torch.randn(2, 2, 4, 4, 4, 8, dtype=torch.float64) @ mix
    y = norm(x).reshape(2, -1, 8)
    cov = y.transpose(1, 2) @ y / y.shape[1]
    torch.testing.assert_close(cov, torch.eye(8, dtype=torch.float64).expand(2, 8, 8), atol=1e-3, rtol=0)


def test_cliffordlayers_cross_check():
    cl = pytest.importorskip('cliffordlayers')
    from cliffordlayers.nn.modules.cliffordconv import CliffordConv3d as PeerConv
    from cliffordlayers.nn.modules.cliffordfourier import CliffordSpectralConv3d as PeerSpec
    torch.manual_seed(5)
    ours = CliffordConv3d(2, 3, 3, padding=1)
    peer = PeerConv(g=[1, 1, 1], in_channels=2, out_channels=3, kernel_size=3, padding=1)
    with torch.no_grad():
        for n, w in enumerate(peer.weight): w.copy_(ours.weight[n])
        peer.bias.copy_(ours.bias)
    x = torch.randn(2, 2, 6, 6, 6, 8)
    torch.testing.assert_close(ours(x), peer(x), atol=1e-5, rtol=1e-5)
    spec, pspec = CliffordSpectralConv3d(2, 2, 2), PeerSpec([1, 1, 1], 2, 2, 2, 2, 2)
    with torch.no_grad(): pspec.weights.copy_(spec.weight)
    diff = clifford_fft(spec(x) - pspec(x))                           # the peer copies a wrong block into one corner
    diff[:, :, -2:, :2, -2:] = 0
    assert diff.abs().max() < 1e-4


def test_masking_and_grades_of_the_outputs():
    d = make_ellipsoid_dataset(2, grid=8, seed=0, surface_points=300)
    model = Fengbo(**{**Fengbo.config('small'), 'modes': 2})
    p, u = model(d['x_p'], d['x_u'], d['mask_s'], d['mask_u'])
    assert p.shape == (2, 8, 8, 8) and u.shape == (2, 8, 8, 8, 3)
    assert torch.all(p[d['mask_s'] == 0] == 0) and torch.all(u[d['mask_u'] == 0] == 0)


def test_parameter_counts():
    cfg = Fengbo.config('paper')
    n = count_parameters(cfg)
    spectral = 2 * 8 * 25 * 25 * 16 ** 3
    assert spectral == 40_960_000 and 40.5e6 <= n <= 43e6 and n - spectral < 0.1e6
    small = Fengbo(**Fengbo.config('small'))
    assert count_parameters(small) == count_parameters(Fengbo.config('small'))
    real = RealCNNFNO.matching(count_parameters(small), **Fengbo.config('small'))
    assert 0.9 < count_parameters(real) / count_parameters(small) < 1.1


def test_ellipsoid_with_equal_axes_is_the_sphere():
    rng = np.random.default_rng(0)
    P = rng.normal(size=(400, 3))
    P *= rng.uniform(0.31, 3, (400, 1)) / np.linalg.norm(P, axis=1, keepdims=True)
    e, s = ellipsoid_flow(P, [0.3] * 3, random_rotation(rng)), sphere_flow(P, 0.3)
    np.testing.assert_allclose(e['u'], s['u'], atol=1e-10)
    np.testing.assert_allclose(e['phi'], s['phi'], atol=1e-10)
    t = fibonacci_sphere(200)
    cp = sphere_flow(0.3 * t, 0.3)['cp']
    np.testing.assert_allclose(cp, 1 - 9 / 4 * (1 - t[:, 0] ** 2), atol=1e-12)   # 1 - 9/4 sin^2 theta


def test_ellipsoid_boundary_condition_incompressibility_far_field_and_gradient():
    rng = np.random.default_rng(1)
    a, R = np.array([0.5, 0.3, 0.2]), random_rotation(rng)
    s = fibonacci_sphere(300)
    xs = (s * a * (1 + 1e-10)) @ R.T
    n = (s / a) @ R.T; n /= np.linalg.norm(n, axis=1, keepdims=True)
    f = ellipsoid_flow(xs, a, R)
    assert np.abs((f['u'] * n).sum(1)).max() < 1e-7                  # no penetration
    assert f['cp'].max() <= 1 + 1e-12
    X = rng.uniform(-1.5, 1.5, (300, 3))
    X = X[~ellipsoid_flow(X, a * 1.2, R)['inside']]                  # well outside the body
    h = 1e-4
    u_at = lambda Y: ellipsoid_flow(Y, a, R)['u']
    div = sum((u_at(X + h * np.eye(3)[i])[:, i] - u_at(X - h * np.eye(3)[i])[:, i]) / (2 * h) for i in range(3))
    assert np.abs(div).max() < 1e-4
    hp = 1e-6
    phi_at = lambda Y: ellipsoid_flow(Y, a, R)['phi']
    grad = np.stack([(phi_at(X + hp * np.eye(3)[i]) - phi_at(X - hp * np.eye(3)[i])) / (2 * hp) for i in range(3)], 1)
    np.testing.assert_allclose(grad, ellipsoid_flow(X, a, R)['u'], atol=1e-7)
    far = fibonacci_sphere(50) * 10
    assert np.abs(ellipsoid_flow(far, a, R)['u'] - [1, 0, 0]).max() < 1e-3
    aligned = ellipsoid_flow(xs @ R, a)['cp']                         # fore-aft symmetry of an aligned ellipsoid
    np.testing.assert_allclose(aligned, ellipsoid_flow(-(xs @ R), a)['cp'], atol=1e-9)


def test_rankine_ovoid_streamfunction_divergence_gradient_and_stagnation():
    Q, d = 0.5, 0.2
    L = rankine_half_length(Q, d)
    np.testing.assert_allclose(rankine_flow(np.array([[-L, 0, 0], [L, 0, 0]]), Q, d)['u'], 0, atol=1e-9)
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (300, 3))
    X = X[~rankine_flow(X, Q, d)['inside'] & (np.linalg.norm(X[:, 1:], axis=1) > 0.05)]
    at = lambda Y, key: rankine_flow(Y, Q, d)[key]
    h = 1e-6
    grad = lambda key: np.stack([(at(X + h * np.eye(3)[i], key) - at(X - h * np.eye(3)[i], key)) / (2 * h)
                                 for i in range(3)], 1)
    u = at(X, 'u')
    np.testing.assert_allclose(grad('phi'), u, atol=1e-6)                # u = grad Phi
    assert np.abs((u * grad('psi')).sum(1)).max() < 1e-6                 # psi constant along streamlines
    h = 1e-4
    div = sum((at(X + h * np.eye(3)[i], 'u')[:, i] - at(X - h * np.eye(3)[i], 'u')[:, i]) / (2 * h) for i in range(3))
    assert np.abs(div).max() < 1e-4


def test_rivals_are_parameter_matched_and_masked():
    small = Fengbo.config('small')
    n = count_parameters(small)
    d = make_ellipsoid_dataset(2, grid=8, seed=0, surface_points=300)
    for name in ('real', 'unet', 'fno'):
        model = build_model(name, n, **{**small, 'modes': 2})
        p, u = model(d['x_p'], d['x_u'], d['mask_s'], d['mask_u'])
        assert p.shape == (2, 8, 8, 8) and u.shape == (2, 8, 8, 8, 3)
        assert torch.all(p[d['mask_s'] == 0] == 0) and torch.all(u[d['mask_u'] == 0] == 0)
    for cls in (UNet3d, FNO3d):
        assert 0.85 < count_parameters(cls.matching(n)) / n < 1.15


def test_sphere_null_is_exact_on_spheres_and_free_stream_scores_one():
    d = make_ellipsoid_dataset(3, grid=12, seed=1, aspect=(1.0, 1.0), surface_points=800)
    inputs = (d['x_p'], d['x_u'], d['mask_s'], d['mask_u'])
    p, u = sphere_closed_form(*inputs)
    torch.testing.assert_close(p, d['p'], atol=1e-5, rtol=0)         # the closed form is the sphere's exact Cp
    torch.testing.assert_close(rel_l2(free_stream(*inputs)[0], d['p']), torch.ones(3))


def test_held_out_shapes():
    "Train, validation, test and unseen-aspect shapes never coincide (core.overlap_count == 0)."
    exp = make_experiment('quick', seed=0, grid=8, modes=2, n_train=32, n_val=8, n_test=8, n_ood=8, steps=1,
                          surface_points=100, query_fraction=0.2, models=('fengbo',), lrs=(1e-3,))
    key = lambda a: tuple(np.round(np.asarray(a), 8).ravel())
    shape = lambda s: [key(np.concatenate([a.numpy().ravel(), r.numpy().ravel()]))
                       for a, r in zip(exp.data[s]['axes'], exp.data[s]['rotation'])]
    train = shape('train')
    for split in ('val', 'test', 'ood'):
        assert overlap_count(train, shape(split)) == 0
        assert overlap_count(exp.data['train']['x_p'], exp.data[split]['x_p'], key=lambda t: key(t)) == 0
    assert overlap_count(shape('val'), shape('test')) == 0


def test_voxelize_keeps_points_in_their_voxels():
    P = np.random.default_rng(2).uniform(-1, 1, (500, 3))
    vox, keep = voxelize(P, 8)
    idx = np.floor((P[keep] + 1) * 7 / 2).astype(int)
    np.testing.assert_array_equal((idx[:, 0] * 8 + idx[:, 1]) * 8 + idx[:, 2], vox)
    assert len(np.unique(vox)) == len(vox) <= len(P)


def test_bad_input():
    with pytest.raises(ValueError, match='points'):
        ellipsoid_flow(np.zeros((4, 2)), [1, 1, 1])
    with pytest.raises(ValueError, match='axes'):
        ellipsoid_flow(np.ones((4, 3)), [1, -1, 1])
    with pytest.raises(ValueError, match='rotation'):
        ellipsoid_flow(np.ones((4, 3)), [1, 1, 1], np.ones((3, 3)))
    with pytest.raises(ValueError, match='positive'):
        rankine_flow(np.ones((2, 3)), strength=-1.0)
    with pytest.raises(ValueError, match='multivector'):
        CliffordConv3d(2, 2)(torch.zeros(1, 3, 4, 4, 4, 8))
    with pytest.raises(ValueError, match='modes'):
        CliffordSpectralConv3d(1, 1, 5)(torch.zeros(1, 1, 8, 8, 8, 8))
    with pytest.raises(ValueError, match='product'):
        CliffordConv3d(1, 1, product='octonion')
    with pytest.raises(ValueError, match='unknown'):
        Fengbo.config('huge')
    with pytest.raises(ValueError, match='batch'):
        make_experiment(n_train=2, batch=4)
    with pytest.raises(ValueError, match='aspect'):
        make_ellipsoid_dataset(2, 8, aspect=(2.0, 1.0))
