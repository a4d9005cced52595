"Properties, cross-checks and bad input of iclr25_nb.topolm."
import io

import numpy as np
import pytest
import torch

from iclr25_nb import topolm as T


def _acts(n=400, units=36, seed=0):
    return torch.randn(n, units, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def local_spatial_loss_numpy(acts, coords):
    "Plain reference: explicit double loop over unit pairs, numpy only."
    a, c = np.asarray(acts, float), np.asarray(coords, float)
    k = a.shape[1]
    R, D = [], []
    for i in range(k):
        for j in range(i):
            R.append(np.corrcoef(a[:, i], a[:, j])[0, 1])
            D.append(1 / (1 + np.sqrt(((c[i] - c[j]) ** 2).sum())))
    return 0.5 * (1 - np.corrcoef(R, D)[0, 1])


# -- spatial loss -----------------------------------------------------------------------------------------------
def test_neighbourhoods_count_and_size():
    for G, r in ((6, 2), (10, 3), (12, 3), (16, 4)):
        idx = T.neighbourhoods(T.sheet_positions(G, 1), r)
        assert idx.shape == ((G - 2 * (r - 1)) ** 2, (2 * r - 1) ** 2)
        assert int(idx.max()) < G * G


def test_loss_range_and_noise_level():
    c = T.sheet_positions(10, 0)
    vals = [T.spatial_loss(_acts(300, 100, s).float(), c, 3, 20).item() for s in range(5)]
    assert all(0 <= v <= 1 for v in vals)
    assert abs(np.mean(vals) - 0.5) < 0.05                       # i.i.d. noise: no relation between R and D


def test_smooth_bumps_give_loss_near_zero():
    g = torch.Generator().manual_seed(0)
    c = T.sheet_positions(10, 0)
    bumps = torch.exp(-torch.cdist(c, torch.rand(40, 2, generator=g) * 9).square() / (2 * 1.5 ** 2))
    acts = torch.randn(2000, 40, generator=g) @ bumps.T
    assert T.spatial_loss(acts, c, 3, 36).item() < 0.05


def test_loss_equals_numpy_reference():
    c = T.sheet_positions(6, 3)
    idx = T.neighbourhoods(c, 2)
    a = _acts(50, 36, 1)
    ours = T.local_spatial_losses(a, c.double(), idx)
    ref = [local_spatial_loss_numpy(a[:, i].numpy(), c[i].numpy()) for i in idx]
    np.testing.assert_allclose(ours.numpy(), ref, atol=1e-6)


def test_invariant_to_positive_affine_rescaling_per_unit():
    c, a = T.sheet_positions(8, 0), _acts(200, 64, 2)
    idx = T.neighbourhoods(c, 3)
    scale = torch.rand(64, dtype=torch.float64) * 5 + 0.1
    shift = torch.randn(64, dtype=torch.float64) * 10
    torch.testing.assert_close(T.local_spatial_losses(a, c.double(), idx),
                               T.local_spatial_losses(a * scale + shift, c.double(), idx), atol=1e-9, rtol=0)


def test_invariant_to_relabelling_units_with_coordinates_but_not_coordinates_alone():
    c, a = T.sheet_positions(8, 0), _acts(200, 64, 3)
    perm = torch.randperm(64, generator=torch.Generator().manual_seed(5))
    # same units, listed in another order together with their positions: every neighbourhood holds the same units
    base = T.local_spatial_losses(a, c.double(), T.neighbourhoods(c, 3))
    relab = T.local_spatial_losses(a[:, perm], c[perm].double(), T.neighbourhoods(c[perm], 3))
    # the neighbourhoods come in another order
    torch.testing.assert_close(base.sort().values, relab.sort().values, atol=1e-9, rtol=0)
    # smooth responses, then the coordinates alone shuffled: the loss must change (and get worse)
    g = torch.Generator().manual_seed(0)
    bumps = torch.exp(-torch.cdist(c, torch.rand(20, 2, generator=g) * 7).square() / 4.5).double()
    s = torch.randn(500, 20, generator=g, dtype=torch.float64) @ bumps.T
    good = T.local_spatial_losses(s, c.double(), T.neighbourhoods(c, 3)).mean()
    shuffled = T.local_spatial_losses(s, c[perm].double(), T.neighbourhoods(c[perm], 3)).mean()
    assert shuffled - good > 0.2


def test_gradcheck():
    c = T.sheet_positions(3, 0).double()
    idx = T.neighbourhoods(c, 2)                                 # one 9-unit neighbourhood (3 x 3 sheet)
    a = _acts(12, 9, 4).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: T.local_spatial_losses(x, c, idx), (a,), eps=1e-6, atol=1e-5)


def test_spatial_loss_bad_input():
    c = T.sheet_positions(6, 0)
    with pytest.raises(ValueError, match='acts'): T.spatial_loss(torch.randn(10), c)
    with pytest.raises(ValueError, match='coords'): T.spatial_loss(torch.randn(10, 36), c[:30])
    with pytest.raises(ValueError, match='coords'): T.spatial_loss(torch.randn(10, 36), torch.randn(36, 3))
    with pytest.raises(ValueError, match='radius'): T.spatial_loss(torch.randn(10, 36), c, radius=4)
    with pytest.raises(ValueError, match='n_neighbourhoods'): T.spatial_loss(torch.randn(10, 36), c, 2, 0)
    with pytest.raises(ValueError, match='stimuli'): T.spatial_loss(torch.randn(2, 36), c)
    bad = c.clone(); bad[0, 0] = float('nan')
    with pytest.raises(ValueError, match='NaN'): T.spatial_loss(torch.randn(10, 36), bad)


# -- model -------------------------------------------------------------------------------------------------------
def test_causal_mask():
    torch.manual_seed(0)
    m = T.TopoGPT(20, 2, 2, 4, 12)
    x = torch.randint(0, 20, (3, 12))
    y = x.clone(); y[:, 7] = (y[:, 7] + 3) % 20
    (l1, s1), (l2, s2) = m(x), m(y)
    torch.testing.assert_close(l1[:, :7], l2[:, :7])
    for k in s1: torch.testing.assert_close(s1[k][:, :7], s2[k][:, :7])
    assert not torch.allclose(l1[:, 7:], l2[:, 7:])


def test_alpha_zero_gives_plain_gpt_gradients():
    torch.manual_seed(0)
    m = T.TopoGPT(20, 2, 2, 4, 12)
    x = torch.randint(0, 20, (4, 13))
    out = T.topo_loss(m, x[:, :-1], x[:, 1:], alpha=0.0, radius=2, n_neighbourhoods=3, with_spatial=True)
    out['loss'].backward()
    g_topo = {n: p.grad.clone() for n, p in m.named_parameters()}
    m.zero_grad()
    logits, _ = m(x[:, :-1])                                     # the plain GPT objective
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten()).backward()
    for n, p in m.named_parameters(): assert torch.equal(g_topo[n], p.grad), n
    assert 0 <= out['sl'].item() <= 1


def test_sheets_are_pre_residual_outputs():
    torch.manual_seed(0)
    m = T.TopoGPT(20, 1, 2, 4, 8)
    seen = {}
    m.blocks[0].attn.register_forward_hook(lambda mod, i, o: seen.__setitem__('attn', o))
    m.blocks[0].mlp.register_forward_hook(lambda mod, i, o: seen.__setitem__('mlp', o))
    _, s = m(torch.randint(0, 20, (2, 8)))
    assert torch.equal(s['layer.0.attn'], seen['attn']) and torch.equal(s['layer.0.mlp'], seen['mlp'])


def test_model_bad_input():
    with pytest.raises(ValueError, match='n_head'): T.TopoGPT(20, 1, 3, 4, 8)
    m = T.TopoGPT(20, 1, 2, 4, 8)
    with pytest.raises(ValueError, match='ctx'): m(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match='idx'): m(torch.zeros(9, dtype=torch.long))


# -- statistics and Moran's I -------------------------------------------------------------------------------------
def test_morans_i_equals_esda():
    esda = pytest.importorskip('esda'); libpysal = pytest.importorskip('libpysal')
    rng = np.random.default_rng(0)
    for rook, (H, W) in ((False, (8, 8)), (True, (8, 8)), (False, (10, 7))):
        for transform in ('r', 'b'):                             # 'r' is esda's default, used by the paper
            for _ in range(2):
                m = rng.normal(size=(H, W)) + np.linspace(0, 2, W)
                ref = esda.moran.Moran(m.ravel(), libpysal.weights.lat2W(H, W, rook=rook),
                                       transformation=transform.upper() if transform == 'b' else 'r', permutations=0).I
                assert abs(T.morans_i(m, rook=rook, transform=transform) - ref) < 1e-10


def test_morans_i_closed_forms():
    ys, xs = np.mgrid[:12, :12]
    assert abs(T.morans_i((xs + ys) % 2, rook=True) + 1) < 1e-12
    assert T.morans_i(xs + ys) > 0.9
    rng = np.random.default_rng(1)
    I = T.morans_i(rng.normal(size=(500, 12, 12)))                  # batched over maps
    assert abs(I.mean() - (-1 / 143)) < 0.01
    with pytest.raises(ValueError, match='NaN'): T.morans_i(np.full((4, 4), np.nan))
    with pytest.raises(ValueError, match='map2d'): T.morans_i(np.zeros(5))


def test_welch_t_and_fdr_equal_scipy():
    stats = pytest.importorskip('scipy.stats')
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.2, 1, (40, 3, 7)), rng.normal(0, 1.5, (33, 3, 7))
    t, p = T.welch_t(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    np.testing.assert_allclose(t, ref.statistic, rtol=1e-10); np.testing.assert_allclose(p, ref.pvalue, rtol=1e-9)
    pv = rng.uniform(size=200) ** 3
    np.testing.assert_allclose(T.fdr_bh(pv), stats.false_discovery_control(pv), rtol=1e-12)
    with pytest.raises(ValueError, match='p-values'): T.fdr_bh(np.array([0.1, 1.5]))
    with pytest.raises(ValueError, match='2 samples'): T.welch_t(a[:1], b)


def test_smoothing():
    c = T.sheet_positions(8, 0).numpy()
    v = np.random.default_rng(0).normal(size=(4, 64))
    np.testing.assert_array_equal(T.smooth_responses(v, c, 0.0), v)
    np.testing.assert_allclose(T.smooth_responses(v, c, 1e-3), v, atol=1e-12)
    np.testing.assert_allclose(T.smooth_responses(np.full((2, 64), 3.0), c, 2.0), 3.0)
    smoothed = T.morans_i(T.to_grid(T.smooth_responses(v, c, 2.0), c, 8)).mean()
    assert smoothed > T.morans_i(T.to_grid(v, c, 8)).mean() + 0.3
    with pytest.raises(ValueError, match='fwhm'): T.smooth_responses(v, c, -1)


def test_clusters():
    t = np.zeros((10, 10)); t[1:4, 1:4] = 5; t[7:9, 7:9] = 5; t[0, 9] = 5
    lab = T.grow_clusters(t, 3, min_size=4)
    assert lab.max() == 2 and (lab > 0).sum() == 13


# -- data ---------------------------------------------------------------------------------------------------------
def test_grammar_sentences_parse_and_labels():
    gram = T.SyntheticGrammar(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(300):
        s = gram.sentence(rng)
        assert gram.parses(s), s
    assert not gram.parses(['the', 'dog']) and not gram.parses(['dog', 'the', 'kicks', 'a', 'cat'])
    assert set(gram.word_class) >= {w for c in T.CONTENT for w in T.LEXICON[c]}
    assert not set(gram.nonwords) & set(gram.word_class)
    st = gram.localizer_stimuli(10, 1)
    for s, j in zip(st['S'], st['J']):                          # Jabberwocky keeps exactly the function words
        assert [w for w in s if gram.word_class[w] not in T.CONTENT] == [w for w in j if w in gram.word_class]


def test_real_text_loader_and_tokenizer(shared_data):
    p = shared_data / 'text' / 'tinyshakespeare.txt'
    text = T.load_text(p)
    assert len(text) > 1_000_000
    tok = T.WordTokenizer(2000).fit(text)
    ids = tok.encode(text[:5000])
    assert tok.vocab_size == 2000 and ids.max() < 2000 and (ids > 0).float().mean() > 0.8
    assert tok.decode(tok.encode('First Citizen:')) == ['first', 'citizen', ':']


def test_broken_text_files(tmp_path):
    (tmp_path / 'trunc.txt').write_text('To be')
    (tmp_path / 'bin.txt').write_bytes(bytes(range(256)) * 10)
    (tmp_path / 'nul.txt').write_text('word ' * 300 + '\x00')
    (tmp_path / 'nums.txt').write_text('3.14159 ' * 300)
    for name, msg in (('trunc.txt', 'too short'), ('bin.txt', 'UTF-8'), ('nul.txt', 'NUL'), ('nums.txt', 'letters'),
                      ('absent.txt', 'no such file')):
        with pytest.raises(ValueError, match=msg) as e: T.load_text(tmp_path / name)
        assert name in str(e.value)


def test_text_experiment_steps(shared_data):
    exp = T.make_experiment('quick', corpus='text', text_path=str(shared_data / 'text' / 'tinyshakespeare.txt'),
                            steps=2, eval_every=2, n_stimuli=6)
    ms = exp.run()
    assert len(ms) == 2 and np.isfinite(ms[-1]['ce_topo']) and 'moran_topo' in ms[-1]


# -- experiment ---------------------------------------------------------------------------------------------------
SMALL = dict(steps=4, grid=6, radius=2, ctx=16, batch=4, n_stimuli=6, corpus_tokens=2000, eval_every=2)


def test_config_validation():
    for bad, field in ((dict(alpha=-1), 'alpha'), (dict(grid=10, n_head=3), 'n_head'), (dict(radius=6), 'radius'),
                       (dict(corpus='wiki'), 'corpus'), (dict(corpus='text'), 'text_path'), (dict(lr=0), 'lr'),
                       (dict(steps=0), 'steps'), (dict(fwhm=-1), 'fwhm'), (dict(n_null=10), 'n_null'),
                       (dict(alpha=float('inf')), 'alpha')):
        with pytest.raises(ValueError, match=field): T.TopoLMConfig.quick(**bad)
    with pytest.raises(ValueError, match='nope'): T.TopoLMConfig.quick(nope=1)


def test_experiment_checkpoint_resume_is_exact():
    a = T.make_experiment('quick', 0, **SMALL); a.run(2)
    buf = io.BytesIO(); torch.save(a.state_dict(), buf); buf.seek(0)    # a real checkpoint: copied, weights-only
    b = T.make_experiment('quick', 0, **SMALL); b.load_state_dict(torch.load(buf, weights_only=True))
    ma, mb = a.run(2), b.run(2)
    assert ma == mb
    assert set(a.snapshot()) >= {'resp', 'acts', 'coords', 'sheets', 'grid'}
    ev = a.evaluate()
    assert 0 <= ev['sl_topo'] <= 1 and np.isfinite(ev['val_ce_control'])


def test_control_and_topo_share_positions_and_init():
    e = T.make_experiment('quick', 1, **SMALL)
    assert torch.equal(e.topo.coords, e.control.coords)
    for (n, p), (_, q) in zip(e.topo.named_parameters(), e.control.named_parameters()): assert torch.equal(p, q), n


def test_explorer_constructs_and_refreshes():
    pytest.importorskip('panel')
    view = T.explorer(**{k: v for k, v in SMALL.items() if k != 'steps'})
    try:
        assert view.trainer.status == 'idle'
        assert view.controls['grid'].value == 6 and view.view_controls['unit'].end == 35   # bounded by the snapshot
        view.trainer.experiment.run(2)
        assert view.refresh(force=True)
        assert set(view.panes) == {'maps', 'ce', 'spatial', 'moran', 'inspector', 'profile'}
        view.view_controls['contrast'].value = 'sentences vs non-words'                  # a view control redraws
        assert view.act('Analyse the maps now').result(timeout=30) is not None           # an idle run: at once
    finally:
        view.close()


# -- nulls, optimiser, reproduce -----------------------------------------------------------------------------------
def _smooth_sheet(seed=0, n=40, shift=0.0):
    rng = np.random.default_rng(seed)
    c = T.sheet_positions(8, seed).numpy()[None]
    bumps = np.exp(-((c[0][:, None] - rng.uniform(0, 7, (6, 2))[None]) ** 2).sum(-1) / 4)
    corner = np.exp(-(c[0] ** 2).sum(-1) / 8)
    resp = {'x': (rng.normal(size=(n, 6)) @ bumps.T + shift * corner)[:, None],
            'y': (rng.normal(size=(n, 6)) @ bumps.T)[:, None]}
    return resp, c


def test_random_position_null_is_salt_and_pepper():
    resp, c = _smooth_sheet()
    null = T.random_position_null(resp, c, 8, n_perm=30, seed=1)
    assert T.response_morans_i(resp, c, 8) > 0.5
    assert abs(null.mean() + 1 / 63) < 0.05                    # E[I] = -1/(N-1) for a random placement
    identity = np.arange(64)[None]
    assert T.response_morans_i(resp, c, 8, identity) == pytest.approx(T.response_morans_i(resp, c, 8))
    with pytest.raises(ValueError, match='n_perm'): T.random_position_null(resp, c, 8, n_perm=1)


def test_shuffled_label_null():
    T.CONTRASTS['_t'] = (('x',), ('y',))
    try:
        # a smooth sheet with no real contrast: the true split is one more random split (|z| small on average)
        zs = [T.shuffled_label_null(*_smooth_sheet(s)[:1], '_t', _smooth_sheet(s)[1], 8, 20, seed=s)['z']
              for s in range(6)]
        assert abs(np.mean(zs)) < 1.5
        # salt-and-pepper units with a real, spatially clustered contrast: the true map beats its null
        rng = np.random.default_rng(0)
        c = T.sheet_positions(8, 0).numpy()[None]
        corner = np.exp(-(c[0] ** 2).sum(-1) / 8)
        resp = {'x': (rng.normal(size=(40, 64)) + 1.0 * corner)[:, None], 'y': rng.normal(size=(40, 64))[:, None]}
        out = T.shuffled_label_null(resp, '_t', c, 8, 20)
        assert out['z'] > 3 and out['null'].shape == (20,)
    finally:
        del T.CONTRASTS['_t']
    with pytest.raises(ValueError, match='unknown contrast'): T.shuffled_label_null(resp, 'nope', c, 8)


def test_weight_decay_only_on_matrices():
    e = T.make_experiment('quick', 0, **SMALL)
    decayed, free = e.opt_topo.param_groups
    assert decayed['weight_decay'] == 0.1 and free['weight_decay'] == 0.0
    assert all(p.dim() >= 2 for p in decayed['params']) and all(p.dim() == 1 for p in free['params'])
    ln = {id(p) for n, p in e.topo.named_parameters() if 'ln' in n}
    assert ln and ln <= {id(p) for p in free['params']}


def test_reproduce_rejects_data_and_records_nulls():
    with pytest.raises(ValueError, match='data must be None'): T.reproduce('quick', 0, data='x.txt')
    ev = T.make_experiment('quick', 0, **SMALL).evaluate()
    for tag in ('topo', 'control'):
        assert len(ev[f'null_dist_noun vs verb_{tag}']) == 20 and np.isfinite(ev[f'z_noun vs verb_{tag}'])
        assert np.isfinite(ev[f'moran_resp_randpos_{tag}'])
    assert ev['val_ce_init'] == pytest.approx(ev['val_ce_topo'])      # untrained: both models are at initialisation
    for k in ('z_noun vs verb_init', 'z_noun vs verb_randpos'): assert np.isfinite(ev[k]), k   # the headline's nulls
    assert ev['z_noun vs verb_init'] == pytest.approx(ev['z_noun vs verb_topo'])   # untrained TopoLM is its init


def test_test_stimuli_are_held_out():
    "No localizer or profile sentence occurs in the training stream, and the two splits share no sentence."
    from iclr25_nb.core import overlap_count
    e = T.make_experiment('quick', 0, **{**SMALL, 'corpus_tokens': 20_000, 'n_stimuli': 48})
    train = e.grammar.sentences(e.train_ids.tolist())
    loc, prof = e.test_sentences[:48], e.test_sentences[48:]
    assert len(train) > 1000 and len(loc) == len(prof) == 48
    assert overlap_count(train, e.test_sentences) == 0
    assert overlap_count(loc, prof) == 0
    # the exclusion is what keeps them out: a stream drawn without it does contain some of a large stimulus set
    g = e.grammar
    many = [tuple(x) for x in g.localizer_stimuli(2000, 5)['S']]
    assert overlap_count(g.sentences(g.corpus(20_000, 0).tolist()), many) > 0
    assert overlap_count(g.sentences(g.corpus(20_000, 0, exclude=many).tolist()), many) == 0


def test_headline_nulls_shuffle_positions_and_profile_order():
    resp, c = _smooth_sheet(shift=1.5)
    moved = T.shuffle_positions(resp, seed=0)
    assert T.response_morans_i(moved, c, 8) < 0.1 < 0.5 < T.response_morans_i(resp, c, 8)
    assert T.profile_order_tau({'S': [3], 'W': [2.5], 'N': [1], 'J': [0.5]}) == 1.0
    m = np.zeros((3, 20), bool); m[:, :4] = True
    r = T.random_units(m, 0)
    assert (r.sum(1) == 4).all() and not (r == m).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a CUDA device')
def test_runs_on_cuda():
    e = T.make_experiment('quick', 0, device='cuda', **SMALL)
    m = e.run(2)[-1]
    assert e.topo.coords.is_cuda and np.isfinite(m['loss'])
    assert isinstance(e.snapshot()['coords'], np.ndarray)
