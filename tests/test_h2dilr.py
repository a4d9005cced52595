"Properties and bad input of iclr25_nb.h2dilr: VQ, codebook ownership, freezing, the generator's ground truth, loading."
import math

import numpy as np
import pytest
import torch

from iclr25_nb import h2dilr as H


def test_vq_nearest_code_and_straight_through():
    vq = H.VectorQuantizer(16, 4); vq.train()
    z = torch.randn(10, 4, requires_grad=True)
    z_q, codes, loss, ppl = vq(z)
    brute = torch.cdist(z.detach(), vq.codebook.detach()).argmin(1)
    assert torch.equal(codes, brute)
    (z_q * torch.arange(4.0)).sum().backward()
    assert torch.allclose(z.grad, torch.arange(4.0).expand(10, 4))          # dz_q/dz_e = I
    assert 1 <= ppl <= 16


def test_commitment_loss_zero_on_a_code():
    vq = H.VectorQuantizer(8, 3); vq.eval()
    z = vq.codebook.detach()[[1, 5, 5]].clone()
    _, codes, loss, ppl = vq(z)
    assert codes.tolist() == [1, 5, 5] and float(loss) < 1e-12
    assert abs(ppl - math.exp(-(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3)))) < 1e-5


def test_usage_accounting_and_dead_code_restart():
    vq = H.VectorQuantizer(8, 2); vq.train()
    vq(torch.randn(50, 2))
    assert int(vq.counts.sum()) == 50 and len(H.code_usage(torch.tensor([0, 2, 2, -1]), 4)) == 4
    assert H.code_usage(torch.tensor([0, 2, 2, -1]), 4).tolist() == [1, 0, 2, 0]
    vq.restart_dead(); assert int(vq.counts.sum()) == 0


def test_private_codebooks_get_gradient_only_from_their_subject():
    for routing, d in (('split', 4), ('union', 2)):
        dc = H.DualCodebook(8, 4, n_subjects=3, D=2, routing=routing); dc.train()
        out = dc(torch.randn(6, 5, d, requires_grad=True), m=2)
        out['loss'].backward()
        assert dc.privates[0].codebook.grad is None and dc.privates[1].codebook.grad is None
        if routing == 'split': assert dc.shared.codebook.grad.abs().sum() > 0


def test_nu_fraction_routes_exactly_ceil_nu_n():
    for nu in (0.25, 0.5, 0.75):
        dc = H.DualCodebook(8, 4, 2, 3, routing='nu_fraction', nu=nu)
        out = dc(torch.randn(7, 3, 3), m=1)
        assert int((out['shared_codes'] >= 0).sum()) == math.ceil(nu * 21)
        assert int((out['private_codes'] >= 0).sum()) == 21 - math.ceil(nu * 21)


def test_stage2_leaves_stage1_bit_identical():
    g = H.SyntheticSEEG(n_subjects=2, n_syllables=2, n_reps=3, channels_range=(4, 6), seed=0)
    data = H.subject_data(g)
    model = H.H2DiLR(g.channels, D=4, shared_K=8, private_K=4)
    model.fit_stage1(data['train'][0], steps=3)
    before = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith('transformer')}
    model.fit_stage2(*data['train'], steps=3)
    after = model.state_dict()
    assert all(torch.equal(v, after[k]) for k, v in before.items())
    assert model.predict(data['test'][0][1], 1).shape == (len(data['test'][1][1]),)


def test_generator_deterministic_balanced_and_snr():
    a, b = H.SyntheticSEEG(seed=3), H.SyntheticSEEG(seed=3)
    Xa, ya, _, la = a.subject(1); Xb, yb, _, _ = b.subject(1)
    assert np.array_equal(Xa, Xb) and np.array_equal(ya, yb)
    assert np.bincount(ya).tolist() == [len(ya) // 4] * 4
    assert abs(la['realised_snr'] / la['snr'] - 1) < 0.1
    assert Xa.shape[1] == a.channels[1] and len(set(a.channels)) > 1


def test_oracle_recovers_tone_and_articulation_does_not():
    from sklearn.linear_model import LogisticRegression
    g = H.SyntheticSEEG(seed=0)
    X, y, _, lat = g.subject(0)
    sp = g.split(0)
    tr, te = np.r_[sp['train'], sp['val']], sp['test']
    S = lat['s'][:, :, ::4].reshape(len(y), -1)
    assert LogisticRegression(max_iter=2000).fit(S[tr], y[tr]).score(S[te], y[te]) >= 0.9
    A = lat['a'][:, :, ::4].reshape(len(y), -1)
    assert LogisticRegression(max_iter=2000).fit(A[tr], y[tr]).score(A[te], y[te]) <= 0.35
    rng = np.random.default_rng(0)
    ys = rng.permutation(y)
    assert LogisticRegression(max_iter=2000).fit(S[tr], ys[tr]).score(S[te], ys[te]) <= 0.45


def test_split_by_repetition():
    g = H.SyntheticSEEG(n_reps=4)
    sp = g.split(0); rep = g.design()[2]
    assert set(rep[sp['test']]) == {3} and set(rep[sp['val']]) == {2} and set(rep[sp['train']]) == {0, 1}


@pytest.mark.parametrize('kw', [dict(n_subjects=0), dict(n_reps=2), dict(channels_range=(10, 5)),
                                dict(snr_range=(0, 1)), dict(private_scale=-1)])
def test_generator_rejects_bad_settings(kw):
    with pytest.raises(ValueError): H.SyntheticSEEG(**kw)


def test_model_rejects_bad_input():
    model = H.H2DiLR([4, 6], D=4, shared_K=8, private_K=4)
    with pytest.raises(ValueError, match='subject 1'):
        H.check_subject_arrays([torch.randn(3, 4, 16), torch.randn(3, 5, 16)], model.n_channels)
    with pytest.raises(ValueError, match='NaN'):
        H.check_subject_arrays([torch.randn(3, 4, 16), torch.full((3, 6, 16), float('nan'))], model.n_channels)
    with pytest.raises(ValueError, match='tones'):
        H.check_subject_arrays([torch.randn(3, 4, 16)], [4], [torch.tensor([0, 1, 7])])
    with pytest.raises(ValueError): H.H2DiLR([4], decoder_inputs='all')
    with pytest.raises(ValueError): H.DualCodebook(8, 4, 2, 3, routing='nearest')


def _save(path, **arrays): np.savez(path, **arrays); return path


def test_loader_reads_and_rejects_broken_files(tmp_path):
    X = np.random.default_rng(0).normal(size=(8, 3, 20)).astype(np.float32)
    tone, rep = np.arange(8) % 4, np.arange(8) // 4
    good = _save(tmp_path / 'good.npz', X=X, tone=tone, repetition=rep)
    Xl, yl, rl = H.load_subject(good)
    assert np.array_equal(Xl, X) and np.array_equal(yl, tone)
    Xn = X.copy(); Xn[0, 0, 0] = np.nan
    bad = {'nan.npz': dict(X=Xn, tone=tone, repetition=rep), 'shape.npz': dict(X=X[0], tone=tone, repetition=rep),
           'len.npz': dict(X=X, tone=tone[:5], repetition=rep), 'tone.npz': dict(X=X, tone=tone + 4, repetition=rep),
           'noX.npz': dict(tone=tone, repetition=rep), 'frac.npz': dict(X=X, tone=tone + 0.5, repetition=rep)}
    for name, arrays in bad.items():
        with pytest.raises(ValueError, match=name): H.load_subject(_save(tmp_path / name, **arrays))
    trunc = tmp_path / 'trunc.npz'; trunc.write_bytes(good.read_bytes()[:100])
    with pytest.raises(ValueError, match='trunc.npz'): H.load_subject(trunc)
    txt = tmp_path / 'text.npz'; txt.write_text('not an array')
    with pytest.raises(ValueError, match='text.npz'): H.load_subject(txt)


def test_predict_runs_the_transformer_in_eval_mode_and_keeps_modes():
    "Regression: tokens() used to switch the whole model (the transformer too) back to training, so predict() ran"
    " with dropout on."
    g = H.SyntheticSEEG(n_subjects=2, n_syllables=2, n_reps=3, channels_range=(4, 6), seed=0)
    data = H.subject_data(g)
    model = H.H2DiLR(g.channels, D=4, shared_K=8, private_K=4, dropout=0.5)
    model.fit_stage1(data['train'][0], steps=2)
    model.fit_stage2(*data['train'], steps=2)
    model.train()
    X = data['test'][0][0]
    a, b = model.predict(X, 0), model.predict(X, 0)
    assert torch.equal(a, b)                                    # no dropout at prediction
    assert model.transformer.training and model.encoders.training   # modes restored as they were
    tok = model.decoder_tokens(model.tokens(X, 0))
    model.transformer.eval()
    assert torch.equal(model.transformer(tok).argmax(1), a)


def test_early_stopping_keeps_the_best_validation_checkpoint():
    net = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad(): net.weight.zero_()
    scores = iter([0.2, 0.9, 0.5])                              # evaluated after steps 2, 4, 6: best after step 4

    def step():
        with torch.no_grad(): net.weight += 1.0
    H._train_selected(net, step, 6, lambda: next(scores), eval_every=2)
    assert float(net.weight) == 4.0
    H._train_selected(net, step, 3)                             # no score: the last state
    assert float(net.weight) == 7.0


def test_subject_sweep_trains_on_the_first_k_subjects_only():
    c = H.H2DiLRConfig(steps=6, stage1_steps=3, n_subjects=3, n_syllables=2, channels=(4, 6), n_time=16, D=4,
                       shared_K=4, private_K=2, batch=8, eval_every=2)
    gen = H.SyntheticSEEG(c.n_subjects, c.n_syllables, c.n_reps, c.channels, n_time=c.n_time, seed=0)
    data = H.subject_data(gen)
    sw = H.subject_sweep(c, 0, data, ks=(1, 2))
    assert sorted(sw) == [1, 2] and [len(sw[k]) for k in (1, 2)] == [1, 2]
    assert all(0 <= a <= 1 for k in sw for a in sw[k])
    assert sw == H.subject_sweep(c, 0, data, ks=(1, 2))                  # seeded: the same numbers again
    for bad in ((), (0,), (4,)):
        with pytest.raises(ValueError, match='ks must lie'): H.subject_sweep(c, 0, data, ks=bad)


def _ema_vq(decay=0.5):
    vq = H.VectorQuantizer(3, 2, ema=True, decay=decay); vq.train()
    with torch.no_grad(): vq.codebook.copy_(torch.tensor([[0.0, 0.0], [5.0, 5.0], [-5.0, 5.0]]))
    vq.initialised.fill_(True); vq._reset_ema()
    return vq


def test_ema_moves_codes_toward_their_assigned_means():
    torch.manual_seed(0)
    vq = _ema_vq()
    near0 = torch.tensor([1.0, -1.0]) + 0.1 * torch.randn(20, 2)        # all nearest to code 0
    near1 = torch.tensor([4.0, 6.0]) + 0.1 * torch.randn(10, 2)         # all nearest to code 1; code 2 unused
    z = torch.cat([near0, near1]).requires_grad_(True)
    before = vq.codebook.detach().clone()
    _, codes, loss, _ = vq(z)
    assert codes.tolist() == [0] * 20 + [1] * 10
    after = vq.codebook.detach()
    for k, pts in ((0, near0), (1, near1)):
        mean = pts.mean(0)
        assert torch.norm(after[k] - mean) < 0.5 * torch.norm(before[k] - mean)      # moved most of the way
        n = len(pts)                                                     # closed form: weights decay vs (1-decay) n
        expected = (0.5 * before[k] + 0.5 * pts.sum(0)) / (0.5 + 0.5 * n)
        assert torch.allclose(after[k], expected, atol=1e-3)
    assert torch.allclose(after[2], before[2], atol=1e-3)                # an unused code keeps its place
    loss.backward()
    assert vq.codebook.grad is None                                      # codes move by averaging, not by gradient
    assert torch.allclose(loss, 0.25 * torch.nn.functional.mse_loss(z, before[codes]))   # commitment term only
    for _ in range(40): vq(z.detach())
    assert torch.allclose(vq.codebook.detach()[0], near0.mean(0), atol=1e-3)           # converges to the mean
    assert torch.allclose(vq.codebook.detach()[1], near1.mean(0), atol=1e-3)


def test_ema_codes_stay_put_when_frozen_or_in_eval():
    vq = _ema_vq(); z = torch.tensor([[1.0, -1.0]] * 4)
    before = vq.codebook.detach().clone()
    vq.eval(); vq(z)
    assert torch.equal(vq.codebook.detach(), before)
    vq.train(); vq.codebook.requires_grad_(False); vq(z)
    assert torch.equal(vq.codebook.detach(), before)
    vq.codebook.requires_grad_(True); vq(z)
    assert not torch.equal(vq.codebook.detach(), before)                 # the control: training moves it
    with pytest.raises(ValueError, match='decay'): H.VectorQuantizer(4, 2, ema=True, decay=1.0)


def test_ema_union_routing_updates_only_the_codebook_a_token_went_to():
    torch.manual_seed(0)
    dc = H.DualCodebook(4, 4, n_subjects=2, D=2, routing='union', ema=True); dc.train()
    dc(torch.randn(8, 3, 2), m=0)                                        # data-dependent initialisation
    S, P0, P1 = (q.codebook.detach().clone() for q in (dc.shared, dc.privates[0], dc.privates[1]))
    out = dc(torch.randn(8, 3, 2) * 3, m=0)
    moved = lambda q, old: (q.codebook.detach() - old).norm(dim=1) > 1e-3
    used_s = H.code_usage(out['shared_codes'], 4) > 0; used_p = H.code_usage(out['private_codes'], 4) > 0
    assert torch.equal(moved(dc.shared, S), used_s) and torch.equal(moved(dc.privates[0], P0), used_p)
    assert torch.equal(dc.privates[1].codebook.detach(), P1)            # another subject's codebook is untouched


def test_per_subject_calibration_responds_to_snr_and_matches_reproduce_setup():
    kw = dict(steps=8, stage1_steps=4, n_subjects=2, n_syllables=4, channels=(6, 8), n_time=32, D=4, batch=16,
              eval_every=2)
    hi = H.per_subject_calibration(seeds=(0,), snr=(50.0, 50.0), resp_frac=(0.5, 0.5), **kw)
    lo = H.per_subject_calibration(seeds=(0,), snr=(0.01, 0.01), resp_frac=(0.5, 0.5), **kw)
    assert set(hi) == {0} and len(hi[0]['per_subject']) == 2 and len(hi[0]['raw_probe']) == 2
    assert np.mean(hi[0]['raw_probe']) >= np.mean(lo[0]['raw_probe']) + 0.3   # the SNR knob sets how hard it is
    assert hi == H.per_subject_calibration(seeds=(0,), snr=(50.0, 50.0), resp_frac=(0.5, 0.5), **kw)   # seeded


# -- Claims v3: held-out test trials, claims as declared, nulls, fair tuning, optional scikit-learn -----------------

def test_test_trials_are_held_out():
    "No test trial (nor its syllable-tone-repetition) occurs in training or validation, for every subject."
    from iclr25_nb.core import overlap_count
    c = H.H2DiLRConfig.quick()
    gen = H.SyntheticSEEG(c.n_subjects, c.n_syllables, c.n_reps, c.channels, n_time=c.n_time, snr_range=c.snr,
                          resp_frac_range=c.resp_frac, private_scale=c.private_scale, seed=0)
    data = H.subject_data(gen)
    tone, syl, rep = gen.design()
    for m in range(gen.n_subjects):
        X, Xv, Xt = data['train'][0][m], data['val'][0][m], data['test'][0][m]
        assert overlap_count(X, Xt) == 0 and overlap_count(Xv, Xt) == 0 and overlap_count(X, Xv) == 0
        sp = gen.split(m)
        keys = lambda idx: list(zip(tone[idx], syl[idx], rep[idx]))
        assert overlap_count(keys(sp['train']), keys(sp['test'])) == 0
        assert len(Xt) == c.n_syllables * 4                                     # one repetition of every pair


def test_private_codes_identify_the_subject_by_construction():
    "Each subject's private tokens are codes of its own private codebook, which no other subject uses: a lookup of "
    "which codebook holds a private token names its subject every time (why this is a test, not a claim)."
    g = H.SyntheticSEEG(n_subjects=3, n_syllables=2, n_reps=3, channels_range=(4, 8), n_time=16, seed=0)
    data = H.subject_data(g)
    torch.manual_seed(0)
    model = H.H2DiLR(g.channels, D=4, shared_K=8, private_K=4)
    model.fit_stage1(data['train'][0], steps=5, batch=8)
    books = [q.codebook.detach() for q in model.codebook.privates]
    for m, X in enumerate(data['test'][0]):
        tok = model.tokens(X, m)['private'].reshape(-1, 4)
        d2 = torch.stack([((tok[:, None] - b[None]) ** 2).sum(-1).min(1).values for b in books])   # exact
        owner = d2.argmin(0)
        assert torch.equal(owner, torch.full_like(owner, m))
        assert d2[m].max() < 1e-10 and all(d2[k].min() > 1e-6 for k in range(len(books)) if k != m)


def test_missing_sklearn_names_the_extra(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, 'sklearn', None)
    with pytest.raises(ImportError, match=r"pip install 'iclr25_nb\[h2dilr\]'"):
        H.probe(np.zeros((4, 2)), [0, 1, 0, 1], np.zeros((2, 2)), [0, 1])
    with pytest.raises(ImportError, match=r"pip install 'iclr25_nb\[h2dilr\]'"):
        H.reproduce('quick', seed=0)                                          # before any training


def test_nulls_majority_and_lookup():
    assert H.majority_class([1, 1, 2], [1, 2, 2, 1]) == 0.5
    X = torch.randn(12, 3, 8); y = torch.arange(12) % 4
    assert H.nearest_trial_lookup(X, y, X.clone(), y) == 1.0
    assert H.nearest_trial_lookup(X, y, X.clone(), (y + 1) % 4) == 0.0


def test_fit_tuned_starts_every_lr_from_the_same_weights_and_keeps_the_best():
    torch.manual_seed(0)
    X = torch.randn(32, 2, 16); y = (X[:, 0].mean(1) > 0).long()
    inits = []

    def make():
        net = H.PerSubjectDecoder(2, D=4)
        inits.append(next(net.parameters()).detach().clone())
        return net
    net, lr, score = H.fit_tuned(make, [X], [y], ([X], [y]), steps=4, grid=(1e-3, 3e-3), batch=8, eval_every=2)
    assert len(inits) == 2 and torch.equal(inits[0], inits[1]) and lr in (1e-3, 3e-3)
    assert score == H.accuracy(net, X, y)


def test_tune_stage2_leaves_stage1_alone_and_returns_a_grid_lr():
    g = H.SyntheticSEEG(n_subjects=2, n_syllables=2, n_reps=3, channels_range=(4, 6), n_time=16, seed=0)
    data = H.subject_data(g)
    model = H.H2DiLR(g.channels, D=4, shared_K=8, private_K=4)
    model.fit_stage1(data['train'][0], steps=2, batch=8)
    before = {k: v.clone() for k, v in model.state_dict().items() if not k.startswith('transformer')}
    lr, score = H.tune_stage2(model, *data['train'], data['val'], steps=4, batch=8, eval_every=2)
    assert lr in H.LR_GRID and 0 <= score <= 1
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    acc = float(np.mean([float((model.predict(X, m) == y).float().mean()) for m, (X, y) in enumerate(zip(*data['val']))]))
    assert acc == score                                                    # the model ends at the kept transformer


def _fake_run(private=True):
    return {'config': H.H2DiLRConfig(private=private), 'h2dilr': [0.3] * 4, 'all_shared': [0.35] * 4,
            'per_subject': [0.5] * 4, 'two_stage_per_subject': [0.3] * 4, 'continuous': [0.37] * 4,
            'separate_on_codes': [0.33] * 4, 'raw_probe': [0.6] * 4, 'sweep': {1: [0.3], 4: [0.3] * 4},
            'nulls': {'majority class': [0.25] * 4, 'lookup: nearest training trial': [0.28] * 4},
            'probes': dict(tone_shared=0.3, tone_private=0.3, subject_shared=0.97, subject_private=1.0,
                           tone_encoder=0.35),
            'probes_all_shared': dict(tone_shared=0.3, tone_private=0.3, subject_shared=0.9, subject_private=0.9)}


def test_claims_v3_shape():
    "Two headlines (the paper's comparison) with the null ladder, declared NOT REPRODUCED, thresholds set before."
    from iclr25_nb.core import Report, check_report, scorecard_status
    rep = Report('h2dilr', meta={'claims': 'v3'})
    H._claims(rep, _fake_run())
    heads = rep.headlines
    assert [c.kind for c in rep.claims[:2]] == ['headline', 'headline'] and len(heads) == 2
    assert abs(heads[0].measured - (0.3 - 0.5)) < 1e-12 and heads[0].control['measured'] == 0.5
    assert {n['name']: round(n['measured'], 6) for n in heads[0].nulls} == {'majority class': -0.25,
                                                                            'lookup: nearest training trial': -0.22}
    assert all(c.set == 'before' and not c.reproduced for c in rep.claims)
    assert check_report(rep) == [] and scorecard_status(rep) == 'NOT REPRODUCED'
    assert 'private' not in ' '.join(c.statement for c in rep.claims if c.kind == 'sanity')   # now a test


def test_ablation_switches_off_only_the_private_codebooks():
    a, b = H.H2DiLRConfig.preset('quick'), H.H2DiLRConfig.preset('quick', private=False)
    diff = {k for k in vars(a) if getattr(a, k) != getattr(b, k)}
    assert diff == {'private'}
