"""Property tests of iclr25_nb.barrel_cortex: anatomy tables, masks, Dale's law, ALIF closed forms, surrogate,
encoding statistics, deprivation, ordering invariance, scaling, the whisker-file loader on broken files."""
import math
import zipfile

import numpy as np
import pytest
import torch

from iclr25_nb import barrel_cortex as bc


def test_anatomy_tables():
    A = bc.ANATOMY
    assert A.n == 4218 and len(A.subtypes) == 13 and A.sizes[4] == 2232
    P = A.P
    assert P.shape == (13, 13) and (P >= 0).all() and (P <= 1).all()
    assert P[4:, :4].sum() == 0                                   # no L2/3 -> L4
    assert (P > 0).sum() == 113 and (P[[0, 1, 4]] > 0).sum() == 33
    rec, thal = A.expected_synapses()
    assert abs(rec / 1.24e6 - 1) < 0.005 and abs(thal / 26.6e3 - 1) < 0.01
    n = np.array(A.sizes, float)
    indeg = n @ P
    assert round(indeg.min()) == 57 and round(indeg.max()) == 802   # L4SS ... FSBS
    assert A.scaled(1.0).sizes == A.sizes
    assert min(A.scaled(0.01).sizes) == 1


def test_mask_density_within_binomial_bound():
    an = bc.ANATOMY.scaled(0.5)
    m, mt = bc.sample_masks(an, seed=3)
    off, P = an.offsets, an.P
    for i in range(13):
        for j in range(13):
            block = m[off[i]:off[i + 1], off[j]:off[j + 1]]
            n, p = block.size, P[i, j]
            if p == 0: assert block.sum() == 0; continue
            assert abs(block.sum() - n * p) <= 4 * math.sqrt(n * p * (1 - p)) + 1, (i, j)
    for j in range(13):
        block = mt[:, off[j]:off[j + 1]]
        p = an.P_thal[j]
        assert abs(block.sum() - block.size * p) <= 4 * math.sqrt(block.size * p * (1 - p)) + 1


def test_random_rule_keeps_count_and_signs():
    an = bc.ANATOMY.scaled(0.25)
    a, _ = bc.sample_masks(an, 0, 'anatomical')
    r, _ = bc.sample_masks(an, 0, 'random')
    assert abs(r.sum() / a.sum() - 1) < 0.02
    net = bc.BarrelRSNN(0.25, 'random')
    W, _ = net.effective_weights()
    assert (W[net.sign > 0] >= 0).all() and (W[net.sign < 0] <= 0).all()
    with pytest.raises(ValueError, match='rule'): bc.sample_masks(an, 0, 'nope')


def test_dale_and_masks_hold_after_training():
    exp = bc.make_experiment('quick', n_per_class=6, epochs=1, batch=6, frames=20)
    m = exp.model
    nnz = int(m.mask_rec.sum())
    w0 = m.w_rec.detach().clone()
    exp.run()
    W, Wth = m.effective_weights()
    assert (W[m.sign > 0] >= 0).all() and (W[m.sign < 0] <= 0).all() and (Wth >= 0).all()
    assert (W[m.mask_rec == 0] == 0).all() and int(m.mask_rec.sum()) == nnz
    assert (m.w_rec.detach() - w0)[m.mask_rec == 0].abs().max() == 0   # masked magnitudes never move
    assert (m.w_rec >= 0).all() and (m.w_rec <= 1).all()


def test_masked_gradient_is_zero():
    net = bc.BarrelRSNN(0.05)
    x = (torch.rand(2, 15, 186) < 0.3).float()
    net(x).sum().backward()
    assert (net.w_rec.grad[net.mask_rec == 0] == 0).all()


def test_alif_closed_forms():
    tm, ta = torch.full((4,), 7.0), torch.full((4,), 3.0)
    z = torch.zeros(1, 4); I = torch.full((1, 4), 0.3)
    v = a = z
    for t in range(1, 31):                                        # no spikes: v_t = (1 - alpha^t) I
        v, a, _, _ = bc.alif_step(v, a, z, I, tm, ta, b0=5.0)
        assert torch.allclose(v, I * (1 - math.exp(-1 / 7) ** t), atol=1e-6)
    one = torch.ones(1, 4); a = z
    for _ in range(200):                                          # constant spikes: a -> 1, theta -> b0 + beta
        _, a, _, th = bc.alif_step(z, a, one, z, tm, ta, b0=0.04, beta=1.8)
    assert torch.allclose(a, one, atol=1e-6) and torch.allclose(th, torch.full_like(th, 1.84), atol=1e-5)
    _, _, _, _ = bc.alif_step(z, z, z, I, torch.full((4,), -3.0), ta, tau_min=1.0)   # clamp keeps alpha in (0,1)


def test_surrogate_matches_finite_difference_of_gaussian_cdf():
    x = torch.linspace(-2, 2, 41, dtype=torch.float64, requires_grad=True)
    bc.gaussian_surrogate(x, 0.5, 0.5).sum().backward()
    h = 1e-6
    phi = lambda u: 0.5 * 0.5 * (1 + torch.erf(u / (0.5 * math.sqrt(2))))   # gamma * Phi(x / ell)
    fd = (phi(x.detach() + h) - phi(x.detach() - h)) / (2 * h)
    assert torch.allclose(x.grad, fd, atol=1e-6)


def test_encoding_closed_form_and_statistics():
    rng = np.random.default_rng(0)
    f = np.abs(rng.normal(0, 8, (3, 1, 40, 31, 3, 3))).astype(np.float32)
    t = np.abs(rng.normal(0, 60, f.shape)).astype(np.float32)
    p = bc.encode_probabilities(f, t)
    x = np.linalg.norm(f[:, 0].astype(np.float64), axis=-1).reshape(3, 40, -1)
    assert np.abs(p[..., :93] - x / (x + math.exp(2))).max() < 1e-12
    s = bc.encode_spikes(np.repeat(f, 1, 0), t, dt=50, seed=1)
    emp = s.reshape(3, 40, 50, 186).mean(2)
    assert np.abs(emp - p).max() < 5 * 0.5 / math.sqrt(50) and np.abs((emp - p).mean()) < 0.005
    assert (bc.encode_spikes(f, t, seed=4) == bc.encode_spikes(f, t, seed=4)).all()
    pz = bc.encode_probabilities(np.zeros_like(f), np.zeros_like(t))
    assert pz.max() < 2e-6


def test_deprivation_zeroes_exactly_the_chosen_whiskers():
    d = bc.WhiskerSweepSynth(3, seed=1, frames=30)
    f0, t0 = bc.deprive(d.force, d.torque, [])
    assert (f0 == d.force).all() and (t0 == d.torque).all()        # k = 0 is the identity
    idx = [2, 17, 30]
    f, t = bc.deprive(d.force, d.torque, idx)
    assert (f[:, :, :, idx] == 0).all() and (t[:, :, :, idx] == 0).all()
    keep = [w for w in range(31) if w not in idx]
    assert (f[:, :, :, keep] == d.force[:, :, :, keep]).all()
    s = bc.encode_spikes(f, t).reshape(len(d), 30, 2, 31, 3)
    assert s[:, :, :, idx].sum() == 0
    with pytest.raises(ValueError, match='whisker'): bc.deprive(d.force, d.torque, [31])


def test_synchronous_ordering_is_permutation_invariant():
    "Permuting subtypes (and the tables with them) permutes the rasters, nothing else."
    an = bc.ANATOMY.scaled(0.05)
    perm = np.random.default_rng(0).permutation(13)
    an_p = bc.Anatomy(subtypes=tuple(an.subtypes[i] for i in perm), sizes=tuple(an.sizes[i] for i in perm),
                      excitatory=tuple(an.excitatory[i] for i in perm),
                      p_rec=tuple(tuple(an.p_rec[i][j] for j in perm) for i in perm),
                      p_thal=tuple(an.p_thal[i] for i in perm),
                      izhikevich_rates=tuple(an.izhikevich_rates[i] for i in perm), scale=an.scale)
    a, b = bc.BarrelRSNN(0.05, anatomy=an), bc.BarrelRSNN(0.05, anatomy=an_p)
    # neuron order of b in terms of a's neurons
    order = np.concatenate([np.arange(an.offsets[i], an.offsets[i + 1]) for i in perm])
    sd = a.state_dict()
    o = torch.as_tensor(order)
    for k in ('mask_rec', 'w_rec'): sd[k] = sd[k][o][:, o]
    for k in ('mask_th', 'w_th'): sd[k] = sd[k][:, o]
    for k in ('tau_m', 'tau_adp', 'sign'): sd[k] = sd[k][o]
    exc_b = torch.as_tensor(np.argsort(order)[a.exc.numpy()])        # where a's E neurons sit in b
    sd['exc'] = b.exc
    w = sd['readout.0.weight']
    pos = {int(n): i for i, n in enumerate(exc_b)}                   # b's readout column order
    sd['readout.0.weight'] = w[:, [pos[int(n)] for n in b.exc]]
    b.load_state_dict(sd)
    x = (torch.rand(2, 25, 186) < 0.3).float()
    pa, sa, _ = a(x, record=True); pb, sb, _ = b(x, record=True)
    assert torch.equal(sa[:, :, o], sb) and torch.allclose(pa, pb, atol=1e-6)


def test_sequential_ordering_and_sparse_path_run():
    x = (torch.rand(2, 10, 186) < 0.3).float()
    a = bc.BarrelRSNN(0.05, ordering='sequential')
    b = bc.BarrelRSNN(0.05, ordering='sequential', sparse=True); b.load_state_dict(a.state_dict())
    assert torch.allclose(a(x), b(x), atol=1e-5)
    c = bc.BarrelRSNN(0.05, sparse=True); d = bc.BarrelRSNN(0.05); c.load_state_dict(d.state_dict())
    xg = x.clone()
    pc, pd = c(xg), d(xg)
    assert torch.allclose(pc, pd, atol=1e-5)
    pc.sum().backward(); pd.sum().backward()
    assert torch.allclose(c.w_rec.grad, d.w_rec.grad, atol=1e-5)
    with pytest.raises(ValueError, match='ordering'): bc.BarrelRSNN(0.05, ordering='random')


def test_scaling_keeps_mean_input_current():
    "Under the 1/s weight rule the expected recurrent input per neuron does not depend on s."
    cur = []
    for s in (0.25, 0.5):
        net = bc.BarrelRSNN(s, seed=1)
        W, _ = net.effective_weights()
        cur.append(W.abs().sum(0).mean().item())                    # all presynaptic neurons firing at once
    assert abs(cur[0] / cur[1] - 1) < 0.1, cur


def test_generator_ground_truth():
    d = bc.WhiskerSweepSynth(4, seed=2, frames=60)
    assert d.force.shape == (12, 1, 60, 31, 3, 3) and d.contact.shape == (12, 60, 31)
    fmag = np.linalg.norm(d.force[:, 0, :, :, 0], axis=-1)
    assert fmag[d.contact].mean() > 20 * fmag[~d.contact].mean()   # forces where and only where contacts are
    assert set(d.pose) == {'scale', 'yaw', 'distance', 'height', 'speed'}
    with pytest.raises(ValueError): bc.WhiskerSweepSynth(0)


def test_cv_index_of_bernoulli():
    p = 0.2
    s = (np.random.default_rng(0).random((400, 2000)) < p).astype(float)
    assert abs(bc.cv_index(s).mean() / math.sqrt((1 - p) / p) - 1) < 0.02


def test_selectivity_and_rates():
    cnt = np.random.default_rng(1).poisson(4, (90, 10)).astype(float)
    lab = np.repeat([0, 1, 2], 30)
    assert bc.anova_selectivity(cnt, lab) <= 0.1
    cnt[lab == 1, :5] += 8
    assert bc.anova_selectivity(cnt, lab) >= 0.5
    assert math.isnan(bc.pearson([1, 1, 1], [1, 2, 3]))


def _write(path, **arrays): np.savez(path, **arrays)


def test_loader_rejects_malformed_files(tmp_path):
    d = bc.WhiskerSweepSynth(2, seed=0, frames=12)
    ok = tmp_path / 'ok.npz'
    _write(ok, force=d.force, torque=d.torque, label=np.array([53, 55, 113, 53, 55, 113]))
    got = bc.load_whisker_file(ok)
    assert got.labels.tolist() == [0, 1, 2, 0, 1, 2]
    bad = tmp_path / 'bad.npz'
    cases = [dict(force=d.force, label=d.labels),                                          # missing torque
             dict(force=d.force[:, :, :, :30], torque=d.torque[:, :, :, :30], label=d.labels),   # wrong shape
             dict(force=d.force, torque=d.torque[:, :, :5], label=d.labels),               # shapes differ
             dict(force=np.where(d.force > 1, np.nan, d.force), torque=d.torque, label=d.labels),   # NaN
             dict(force=d.force, torque=d.torque, label=np.full(6, 7)),                    # unknown labels
             dict(force=d.force.astype(str), torque=d.torque, label=d.labels)]              # wrong type
    for c in cases:
        _write(bad, **c)
        with pytest.raises(ValueError, match='bad.npz'): bc.load_whisker_file(bad)
    trunc = tmp_path / 'trunc.npz'
    trunc.write_bytes(ok.read_bytes()[:200])
    with pytest.raises(ValueError, match='trunc.npz'): bc.load_whisker_file(trunc)
    obj = tmp_path / 'obj.npz'
    np.savez(obj, force=np.array([object()], dtype=object), torque=d.torque, label=d.labels)
    with pytest.raises(ValueError, match='obj.npz'): bc.load_whisker_file(obj)
    with pytest.raises(ValueError, match='no such file'): bc.load_whisker_file(tmp_path / 'none.npz')
    (tmp_path / 'x.h5').write_bytes(b'not hdf5')
    with pytest.raises(ValueError, match='x.h5'): bc.load_whisker_file(tmp_path / 'x.h5')


def test_alif_without_adaptation_matches_snntorch_leaky():
    "With adaptation off (beta = 0) our ALIF is a LIF with subtractive reset; compare with snntorch's Leaky."
    snn = pytest.importorskip('snntorch')
    torch.manual_seed(0)
    I = torch.rand(50, 1, 8) * 0.5
    tau = 10.0; alpha = math.exp(-1 / tau)
    lif = snn.Leaky(beta=alpha, threshold=0.04, reset_mechanism='subtract')
    mem = torch.zeros(1, 8); out_s = []
    for t in range(50):
        spk, mem = lif((1 - alpha) * I[t], mem); out_s.append(spk)
    v = a = s = torch.zeros(1, 8); ours = []
    tm, ta = torch.full((8,), tau), torch.full((8,), 5.0)
    for t in range(50):
        v, a, s, _ = bc.alif_step(v, a, s, I[t], tm, ta, b0=0.04, beta=0.0)
        ours.append(s)
    # snntorch resets with the previous step's spike inside the same update, like ours (v - theta * s_{t-1})
    assert torch.equal(torch.stack(ours), torch.stack(out_s))


def test_tune_tries_every_rate_of_the_grid_and_keeps_the_best_on_validation():
    c = bc.BarrelConfig(model='lstm', n_per_class=6, frames=12, epochs=1, batch=8, lr_grid=(2.0, 1.0), n_val=3,
                        hidden=8)
    val = bc.validation_tensors(c, seed=0)
    assert val[0].shape[0] == 9 and sorted(val[1].tolist()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    train = bc.whisker_tensors(c.n_per_class, 0, False, c.frames, c.dt)
    assert val[0].shape[1:] == train['X_train'].shape[1:]
    assert not any(torch.equal(v, x) for v in val[0] for x in train['X_train'])     # a draw of its own
    exp = bc.tune(c, 0, val)
    assert [g[0] for g in exp.grid] == pytest.approx([3e-3, 6e-3])                   # rates ascending: lr_ann x factor
    assert exp.val_acc == max(g[1] for g in exp.grid) and exp.lr_chosen in [g[0] for g in exp.grid]
    first = next(g for g in exp.grid if g[1] == exp.val_acc)                         # ties go to the smaller rate
    assert exp.lr_chosen == first[0] and exp.test_acc == first[2]
    snn = bc.BarrelConfig(model='random', n_per_class=5, frames=10, epochs=1, batch=8, lr_grid=(1.0,), n_val=2)
    assert bc.tune(snn, 1, bc.validation_tensors(snn, 1)).lr_chosen == pytest.approx(8e-3)   # SNNs: `lr`
    with pytest.raises(ValueError): bc.BarrelConfig(lr_grid=(1.0, -2.0)).validate()


def test_test_sweeps_never_in_training_or_validation():
    from iclr25_nb import core
    c = bc.BarrelConfig.quick(n_per_class=10, n_val=4, frames=20)
    d = bc.whisker_tensors(c.n_per_class, 0, False, c.frames, c.dt)
    val = bc.validation_tensors(c, 0)
    assert core.overlap_count(d['X_train'], d['X_test']) == 0
    assert core.overlap_count(val[0], d['X_test']) == 0 and core.overlap_count(d['X_train'], val[0]) == 0
    raw = bc.WhiskerSweepSynth(10, seed=0, frames=20)                    # the sweeps themselves, not only spikes
    ntr = len(d['y_train'])
    assert core.overlap_count(raw.force[:ntr], raw.force[ntr:]) == 0


def test_ablation_is_random_connectivity_with_the_same_counts():
    c = bc.BarrelConfig.quick(n_per_class=5, frames=10)
    anat = bc.build_model(c, 0)
    abl = bc.build_model(c.replace(connectivity='random'), 0)
    ctrl = bc.build_model(c.replace(model='random'), 0)
    assert torch.equal(abl.mask_rec, ctrl.mask_rec) and torch.equal(abl.w_rec, ctrl.w_rec)   # the control itself
    assert not torch.equal(anat.mask_rec, abl.mask_rec)
    assert abs(abl.mask_rec.sum() / anat.mask_rec.sum() - 1) < 0.03 and torch.equal(abl.sign, anat.sign)
    redraw = bc.build_model(c.replace(model='random', mask_seed=100), 0)                   # the mask-luck null
    assert not torch.equal(redraw.mask_rec, ctrl.mask_rec)
    assert min(bc.ANATOMY.scaled(c.scale).sizes[:6] + bc.ANATOMY.scaled(c.scale).sizes[7:]) >= 7   # all populated


def test_step_lr_and_original_adaptation_start():
    exp = bc.make_experiment('quick', model='lstm', n_per_class=5, frames=10, epochs=3, batch=12, lr_step=1,
                             lr_gamma=0.5, hidden=4)
    exp.run()
    assert exp.opt.param_groups[0]['lr'] == pytest.approx(exp.config.lr_ann * 0.25)      # two epoch boundaries
    x = torch.zeros(1, 3, 186)
    a = bc.BarrelRSNN(0.05, init_state='original'); z = bc.BarrelRSNN(0.05); z.load_state_dict(a.state_dict())
    pa, sa, _ = a(x, record=True); pz, sz, _ = z(x, record=True)
    assert not torch.equal(sa, sz)


def test_null_strategies():
    assert bc.majority_accuracy([2, 2, 1], [2, 0, 2, 2]) == 0.75
    g = torch.Generator().manual_seed(1)
    y = torch.randint(0, 3, (120,), generator=g)
    X = torch.rand(120, 10, 6, generator=g).lt(0.1).float()                               # no class information
    acc = bc.linear_readout_accuracy(X[:80], y[:80], X[80:100], y[80:100], X[100:], y[100:])
    assert 0 <= acc <= 0.7


def test_no_grad_forward_equals_the_training_forward():
    """Evaluation runs the in-place step (decays once): bit for bit the training forward with the dense product;
    with the CSR product ('auto' from SPARSE_MIN_N neurons) equal to float precision."""
    x = (torch.rand(3, 15, 186, generator=torch.Generator().manual_seed(0)) < 0.3).float()
    for init_state in ('zeros', 'original'):
        net = bc.BarrelRSNN(0.05, seed=1, init_state=init_state, b0=0.01)
        p, s, th = net(x, record=True)
        with torch.no_grad(): p2, s2, th2 = net(x, record=True)
        assert s.sum() > 0 and torch.equal(s, s2) and torch.equal(th, th2) and torch.equal(p.detach(), p2)
    big = bc.BarrelRSNN(0.1, seed=0, b0=0.01)
    assert big.n >= bc.SPARSE_MIN_N
    dense = bc.BarrelRSNN(0.1, seed=0, b0=0.01, sparse=False); dense.load_state_dict(big.state_dict())
    with torch.no_grad():
        (pa, sa, _), (pb, sb, _) = big(x, record=True), dense(x, record=True)
    assert (sa == sb).float().mean() > 0.999 and torch.allclose(pa, pb, atol=1e-4)
    with pytest.raises(ValueError, match='sparse'): bc.BarrelRSNN(0.05, sparse='csr')


def test_shuffled_sweeps_reuse_the_cached_draw():
    a = bc.whisker_tensors(5, seed=3, frames=12)
    b = bc.whisker_tensors(5, seed=3, shuffle=True, frames=12)
    assert b['synth'] is a['synth'] and not torch.equal(a['X_train'], b['X_train'])
    assert bc.whisker_tensors(5, seed=3, frames=12) is a                 # both kept
