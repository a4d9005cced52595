"Properties of rational_llm: gamble algebra, model axioms, fitting, parsers, harness, prompts, inverse model, loaders."
import json

import numpy as np
import pytest

from iclr25_nb import rational_llm as R


@pytest.fixture(scope='module')
def ps():
    return R.make_problems(2000, seed=0)


# ---- gambles and the CPC structure ---------------------------------------------------------------------------------
def test_probabilities_sum_to_one_and_degenerate_ev(ps):
    assert np.allclose(ps.pa.sum(1), 1, atol=1e-9) and np.allclose(ps.pb.sum(1), 1, atol=1e-9)
    assert R.Gamble([7.5], [1.0]).ev == 7.5
    with pytest.raises(ValueError, match='sum to'): R.Gamble([1, 2], [0.3, 0.3])
    with pytest.raises(ValueError, match='finite'): R.Gamble([np.nan, 2], [0.5, 0.5])
    with pytest.raises(ValueError, match='as many'): R.Gamble([1, 2, 3], [0.5, 0.5])


@pytest.mark.parametrize('shape', [1, 2, 3])
@pytest.mark.parametrize('num', range(2, 10))
def test_cpc_lottery_mean_is_hb(shape, num):
    x, p = R.cpc_lottery(23.0, shape, num)
    assert abs(p @ x - 23.0) < 1e-12 and abs(p.sum() - 1) < 1e-12 and len(x) == (num if shape > 1 else num)


def test_cpc_rules_match_choices13k_rows():
    "Structure rules on hand-entered choices13k rows (not the file): rows 3, 4, 5, 10 and 13."
    assert np.allclose(R.cpc_problem(37, .05, 8, 87, .25, -31, 1, 2).B.outcomes, [-31, 86.5, 87.5])
    b = R.cpc_problem(26, 1, 26, 45, .75, -36, 2, 5).B
    assert np.allclose(b.outcomes, [-36, 41, 43, 47, 55, 71])
    assert np.allclose(b.probs[1:], .75 * np.array([.5, .25, .125, .0625, .0625]))
    assert np.allclose(R.cpc_problem(28, 1, 28, 33, .01, 28, 2, 3).B.outcomes, [28, 31, 33, 37])
    assert np.allclose(R.cpc_problem(94, .25, -38, -8, .05, -9, 3, 3).B.outcomes, [-9, -6, -8, -12])
    b = R.cpc_problem(-4, 1, -4, 38, .1, -5, 1, 6).B
    assert np.allclose(b.outcomes[1:], np.arange(35.5, 41)) and np.isclose(b.probs[1], 0.1 / 32)


def test_generator_is_seeded_and_structured(ps):
    a, b = R.make_problems(50, seed=3), R.make_problems(50, seed=3)
    assert all(x.A == y.A and x.B == y.B for x, y in zip(a.problems, b.problems))
    evb = np.array([q.meta['pHb'] * q.meta['Hb'] + (1 - q.meta['pHb']) * q.meta['Lb'] for q in ps.problems])
    assert np.allclose(ps.ev_b, evb) and set(q.meta['LotShapeB'] for q in ps.problems) == {0, 1, 2, 3}


# ---- model axioms --------------------------------------------------------------------------------------------------
def test_ev_invariant_to_outcome_order(ps):
    rng = np.random.default_rng(0)
    perm = np.array([rng.permutation(ps.xb.shape[1]) for _ in range(len(ps))])
    shuffled = R.ProblemSet(ps.problems)
    shuffled.xb, shuffled.pb = np.take_along_axis(ps.xb, perm, 1), np.take_along_axis(ps.pb, perm, 1)
    for m in (R.EV(beta=.3), R.CPT(**R.TK92, beta=.1), R.EU(rho=.7)):
        assert np.allclose(m.prob_b(ps), m.prob_b(shuffled), atol=1e-12)


def test_dominance_and_complement():
    "A first-order stochastically dominant B gets P(B) > 0.5 under EV, EU (increasing u) and CPT."
    A = R.Gamble([10, -5], [.5, .5])
    probs = R.ProblemSet([R.Problem(A, R.Gamble([12, -5], [.5, .5])), R.Problem(A, R.Gamble([10, -5], [.7, .3])),
                          R.Problem(R.Gamble([3], [1.0]), R.Gamble([3, 8], [.99, .01]))])
    for m in (R.EV(), R.EU(rho=.5), R.CPT(**R.TK92), R.PT(**R.TK92)):
        pb = m.prob_b(probs)
        assert (pb > 0.5).all(), m
        swapped = R.ProblemSet([R.Problem(q.B, q.A) for q in probs.problems])
        assert np.allclose(pb + m.prob_b(swapped), 1.0)                              # P(A) + P(B) = 1


def test_nested_models_equal_ev(ps):
    ev = R.EV(beta=.25).prob_b(ps)
    for m in (R.PT(alpha=1, lam=1, gamma=1, beta=.25), R.CPT(alpha=1, lam=1, gamma=1, beta=.25), R.EU(rho=1, beta=.25)):
        assert np.allclose(m.prob_b(ps), ev, atol=1e-12)


def test_weighting_function():
    p = np.linspace(0, 1, 1001)
    for g in (0.3, 0.61, 1.0, 1.7):
        w = R.tk_weight(p, g)
        assert w[0] == 0 and abs(w[-1] - 1) < 1e-12
        if g >= 0.3: assert (np.diff(w) >= -1e-12).all()
    assert np.allclose(R.tk_weight(p, 1.0), p)


def test_cpt_hand_computed():
    "TK92 textbook numbers: w(.5) = .4206; V($100 w.p. .5) = 24.21; V(-$100 / $100 at .5) = -30.25."
    assert abs(R.tk_weight(0.5, 0.61) - 0.42063) < 1e-4
    probs = R.ProblemSet([R.Problem(R.Gamble([100, 0], [.5, .5]), R.Gamble([100, -100], [.5, .5]))])
    c = R.CPT(**R.TK92)
    assert abs(c.values(probs.xa, probs.pa)[0] - 24.205) < 0.01
    assert abs(c.values(probs.xb, probs.pb)[0] - (-30.25)) < 0.03
    # rank dependence: a 3-outcome gain gamble, weights telescope
    x, p = np.array([[10., 20., 30.]]), np.array([[.2, .5, .3]])
    pi = R.CPT(**R.TK92).decision_weights(x, p)[0]
    w = lambda q: R.tk_weight(q, .61)
    assert np.allclose(pi, [w(1) - w(.8), w(.8) - w(.3), w(.3)]) and abs(pi.sum() - 1) < 1e-12


def test_cpt_ties_do_not_double_count():
    x, p = np.array([[5., 5., -2.]]), np.array([[.3, .3, .4]])
    merged_x, merged_p = np.array([[5., -2.]]), np.array([[.6, .4]])
    c = R.CPT(**R.TK92)
    assert np.isclose(c.values(x, p)[0], c.values(merged_x, merged_p)[0])


# ---- fitting -------------------------------------------------------------------------------------------------------
def test_fit_recovers_cpt_parameters(ps):
    rates = R.simulate_rates(R.CPT(**R.TK92, beta=0.1), ps, rng=5)
    m = R.fit(R.CPT(), ps, rates, loss='ce')
    for k, v in R.TK92.items(): assert abs(m.params[k] - v) <= 0.1 * v, (k, m.params[k])
    assert m.history_[-1] <= m.history_[0]


def test_fit_recovers_ev_beta_and_eu_rho(ps):
    r = R.simulate_rates(R.EV(beta=0.3), ps, rng=1)
    assert abs(R.fit(R.EV(), ps, r, loss='ce').params['beta'] - 0.3) < 0.03
    r = R.simulate_rates(R.EU(rho=0.7, beta=0.3), ps, rng=2)
    assert abs(R.fit(R.EU(), ps, r, loss='ce').params['rho'] - 0.7) < 0.07


def test_fit_bad_input(ps):
    with pytest.raises(ValueError, match='rates must be'): R.fit(R.EV(), ps, np.full(len(ps), 2.0))
    with pytest.raises(ValueError, match='loss'): R.fit(R.EV(), ps, np.full(len(ps), .5), loss='l1')
    with pytest.raises(ValueError, match='outside its bounds'): R.EU(rho=9.0)
    with pytest.raises(ValueError, match='no parameter'): R.EV(rho=1.0)


def test_scipy_only_fit_agrees():
    "Our fit of the softmax-EV model agrees with a direct scipy logistic fit on the EV difference."
    from scipy.optimize import minimize_scalar
    ps = R.make_problems(500, seed=1)
    r = R.simulate_rates(R.EV(beta=.2), ps, rng=0)
    d = ps.ev_b - ps.ev_a
    nll = lambda b: np.mean(r * np.logaddexp(0, -b * d) + (1 - r) * np.logaddexp(0, b * d))
    ref = minimize_scalar(nll, bounds=(1e-4, 5), method='bounded', options=dict(xatol=1e-8)).x
    assert abs(R.fit(R.EV(), ps, r, loss='ce').params['beta'] - ref) < 1e-3


# ---- parsers -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('text,want', [
    ('A', 'A'), (' b ', 'B'), ('B.', 'B'), ('**A**', 'A'), ('{"choice": "B"}', 'B'), ("{'choice': 'A'}", 'A'),
    ('Reasoning... EV(A) > EV(B).\n{"choice": "Machine A"}', 'A'), ('I choose machine B.', 'B'),
    ('The answer is: A', 'A'), ('A or B', None), ('Both A and B look good', None), ('', None), (None, None),
    ('no letter here', None)])
def test_parse_choice(text, want):
    assert R.parse_choice(text) == want


@pytest.mark.parametrize('text,want', [
    ('{"A": "60%", "B": "40%"}', 0.4), ('{"A": 30, "B": 90}', 0.75), ("{'A': '25.5%', 'B': '74.5%'}", 0.745),
    ('A: 55%, B: 45%', 0.45), ('{"B": "20%"}', 0.2), ('{"A": 0.7, "B": 0.3}', 0.3), ('nothing', None),
    ('{"A": "x%", "B": "y%"}', None)])
def test_parse_percentages(text, want):
    got = R.parse_percentages(text)
    assert (got is None and want is None) or abs(got - want) < 1e-9


# ---- harness -------------------------------------------------------------------------------------------------------
def test_harness_identities(ps):
    x = np.random.default_rng(0).random(300)
    c = R.compare(x, x, 'rate')
    assert abs(c['pearson'] - 1) < 1e-12 and abs(c['spearman'] - 1) < 1e-12 and c['mse'] == 0
    assert R.binarise([0.5])[0] == 1.0 and R.binarise([0.4999])[0] == 0.0                 # the paper's >= rule
    ev = R.ev_choice(ps)
    tie = R.ProblemSet([R.Problem(R.Gamble([1], [1.]), R.Gamble([2, 0], [.5, .5]))])
    assert R.ev_choice(tie)[0] == 1.0                                                   # EV tie goes to B
    g = R.rationality_gap(ev, ev, ev, n_boot=100)
    assert g['gap'] == 0 and g['gap_ci'] == [0.0, 0.0]
    with pytest.raises(ValueError, match='one shape'): R.rationality_gap(ev[:5], ev, ev)


def test_gap_bootstrap_covers_the_truth(ps):
    "Humans (CPT) vs an EV-like candidate: a positive gap with an interval excluding 0; a fresh human sample: none."
    humans = R.simulate_rates(R.CPT(**R.TK92, beta=.1), ps, rng=0)
    again = R.simulate_rates(R.CPT(**R.TK92, beta=.1), ps, rng=1)
    ev_like = R.simulate_rates(R.EV(beta=2.0), ps, 1, rng=2)
    ev = R.ev_choice(ps)
    g = R.rationality_gap(ev_like, humans, ev, n_boot=300)
    h = R.rationality_gap(again, humans, ev, n_boot=300)
    assert g['gap_ci'][0] > 0.15 and abs(h['gap']) < 0.05 and h['gap_ci'][0] < 0.01 and h['gap_ci'][1] > -0.01


# ---- prompts -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('mode', R.MODES)
@pytest.mark.parametrize('style', R.STYLES)
def test_prompt_has_every_outcome_once(ps, mode, style):
    for i in (0, 3, 4, 11):
        q = ps[i]
        text = R.render_prompt(q, mode, style, rng=i)[-1]['content']
        for name, g in (('A', q.A), ('B', q.B)):
            line = next(l for l in text.splitlines() if l.startswith(f'Machine {name}:'))
            for x, p in zip(g.outcomes, g.probs):
                assert line.count(f"{R._money(x)} with {R._pct(p)} chance") >= 1
            assert line.count(' chance') == len(g)
        back = R.parse_problem(text)
        assert abs(back.A.ev - q.A.ev) < 1e-6 and abs(back.B.ev - q.B.ev) < 1e-4
        if mode == 'aggregate': assert '17 people' in text and 'percentage' in text
        assert ('step by step' in text) == (style == 'cot')


def test_shuffling_changes_only_the_order(ps):
    q = next(q for q in ps.problems if len(q.B) >= 4)
    t0, t1 = (R.render_prompt(q, rng=s)[-1]['content'] for s in (0, 1))
    line_b = lambda t: next(l for l in t.splitlines() if l.startswith('Machine B')).split(': ', 1)[1].rstrip('.')
    b0, b1 = (sorted(line_b(t).split(', ')) for t in (t0, t1))
    assert b0 == b1 and t0 != t1
    assert R.render_prompt(q, shuffle_outcomes=False) == R.render_prompt(q, shuffle_outcomes=False)


def test_model_backed_client_pipeline(ps):
    sub = ps.subset(range(200))
    res = R.ask(R.ModelBackedClient(R.EV(beta=20.0), seed=0), sub, 'individual', 'cot')
    assert res['failed'] == 0 and np.mean(res['rates'] == R.ev_choice(sub)) > 0.97
    agg = R.ask(R.ModelBackedClient(R.CPT(**R.TK92, beta=.1), seed=0, trials=1000), sub, 'aggregate', n_people=100)
    assert np.abs(agg['rates'] - R.CPT(**R.TK92, beta=.1).prob_b(sub)).max() < 0.03
    calls = []
    R.ask(R.CallableClient(lambda p: calls.append(p) or 'A', takes='prompt'), sub.subset(range(3)), n_samples=4)
    assert len(calls) == 12 and all(isinstance(c, str) and 'Machine A' in c for c in calls)
    with pytest.raises(TypeError): R.CallableClient('not callable')


# ---- inverse model -------------------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def u():
    return R.prior_samples(40000, seed=3)


def test_no_choice_is_no_evidence(u):
    for code in ('dcbax', 'x', 'ax'):
        s = R.parse_situation(code)
        assert abs(R.absolute_utility(s, u)) < 1e-12 and abs(R.relative_utility(s, u)) < 1e-12


def test_choosing_ax_over_a(u):
    ax, x = R.absolute_utility(R.parse_situation('a/ax'), u), R.absolute_utility(R.parse_situation('a/x'), u)
    assert ax > 0 and ax >= x
    for sd in (0.5, 2.0):                                 # holds for any prior scale
        v = R.prior_samples(40000, prior_sd=sd, seed=4)
        assert R.absolute_utility(R.parse_situation('a/ax'), v) >= R.absolute_utility(R.parse_situation('a/x'), v)


def test_relabelling_invariance(u):
    sits = R.enumerate_situations()
    base = [R.absolute_utility(s, u) for s in sits]
    relabel = str.maketrans('abcd', 'dcab')
    again = [R.absolute_utility(R.parse_situation(s.code.translate(relabel)), u) for s in sits]
    assert np.allclose(base, again)
    assert len(sits) == 26 and len({s.canonical() for s in sits}) == 26


def test_pairwise_pipeline_and_ranking(u):
    sits = R.enumerate_situations()[:10]
    W = R.pairwise_win_matrix(R.ModelBackedObserver(noise=1e-3, u=u[:4000]), sits, reps=1)
    assert W['failed'] == 0 and W['wins'].sum() == 45
    scores, ranks = R.pairwise_to_ranking(W['wins'])
    truth = [R.absolute_utility(s, u[:4000]) for s in sits]
    assert R.spearman_vs(ranks, truth) > 0.95
    assert np.allclose(R.pairwise_to_ranking(np.zeros((3, 3)))[0], 0.5)
    with pytest.raises(ValueError, match='items from'): R.parse_situation('ay/x')
    with pytest.raises(ValueError, match='rankings differ'): R.spearman_vs([1, 2], [1, 2, 3])


# ---- loaders -------------------------------------------------------------------------------------------------------
@pytest.fixture
def c13k(tmp_path, ps):
    csv, js = tmp_path / 'c13k_selections.csv', tmp_path / 'c13k_problems.json'
    R.write_c13k(ps.subset(range(30)), csv, js, rates=np.linspace(0, 1, 30))
    return csv, js


def test_loader_round_trip(c13k, ps):
    data = R.load_c13k(*c13k)
    assert len(data) == 30 and np.allclose(data.ev_b, ps.ev_b[:30]) and data.rates[-1] == 1.0 and (data.n == 17).all()
    assert len(R.load_c13k(*c13k, rows=[0, 5])) == 2


def _edit_csv(path, fn):
    lines = path.read_text().splitlines()
    path.write_text('\n'.join(fn(lines)) + '\n')


@pytest.mark.parametrize('case,match', [
    ('truncated', 'fields'), ('missing_col', 'missing column'), ('bad_number', 'not a number'),
    ('nan', 'not finite'), ('brate', 'not in \\[0, 1\\]'), ('shape', 'LotShapeB'), ('empty', 'is empty'),
    ('bool', 'not a boolean')])
def test_loader_rejects_broken_csv(c13k, case, match):
    csv, js = c13k
    edits = {'truncated': lambda L: L[:-1] + [L[-1].rsplit(',', 3)[0]],
             'missing_col': lambda L: [L[0].replace('bRate,', 'xRate,')] + L[1:],
             'bad_number': lambda L: [L[0], L[1].replace(',17,', ',seventeen,', 1)] + L[2:],
             'nan': lambda L: [L[0], L[1].replace(',17,', ',nan,', 1)] + L[2:],
             'brate': lambda L: L[:3] + [L[3].rsplit(',', 2)[0] + ',1.5,0.3'] + L[4:],
             'shape': lambda L: [L[0], ','.join(v if k != 10 else '7' for k, v in enumerate(L[1].split(',')))] + L[2:],
             'empty': lambda L: [],
             'bool': lambda L: [L[0], L[1].replace('True', 'maybe', 1)] + L[2:]}
    if case == 'empty': csv.write_text('')
    else: _edit_csv(csv, edits[case])
    with pytest.raises(ValueError, match=match) as e: R.load_c13k(csv, js)
    assert csv.name in str(e.value)


@pytest.mark.parametrize('case,match', [
    ('not_json', 'not valid JSON'), ('count', 'has 29 problems'), ('probs', 'sum to'), ('pairs', 'pairs'),
    ('ev', 'disagree'), ('type', 'expected an object')])
def test_loader_rejects_broken_json(c13k, case, match):
    csv, js = c13k
    doc = json.loads(js.read_text())
    if case == 'not_json': js.write_text(js.read_text()[:100])
    else:
        if case == 'count': doc.pop('29')
        if case == 'probs': doc['3']['A'] = [[0.9, 1.0], [0.5, 2.0]]
        if case == 'pairs': doc['2']['B'] = [[0.5, 1, 2]]
        if case == 'ev': doc['4']['A'] = [[1.0, 999.0]]
        if case == 'type': doc = [1, 2]
        js.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=match) as e: R.load_c13k(csv, js)
    assert js.name in str(e.value)


def test_loader_missing_files(tmp_path, c13k):
    with pytest.raises(ValueError, match='no such file'): R.load_c13k(tmp_path / 'nope.csv', c13k[1])
    with pytest.raises(ValueError, match='no such file'): R.load_c13k(c13k[0], tmp_path / 'nope.json')


# ---- the real choices13k layout --------------------------------------------------------------------------------------
_REAL_CSV = """Problem,Feedback,n,Block,Ha,pHa,La,Hb,pHb,Lb,LotShapeB,LotNumB,Amb,Corr,bRate,bRate_std,BEAST_1,BEAST_2,BEAST_3,BEAST_4,BEAST_5
1,True,15,2,30,0.9,-2,25,0.1,20,0,1,False,0,0.6,0.38,0.44,0.33,0.25,0.25,0.23
2,True,16,4,12,0.6,-15,10,0.25,-4,0,1,True,-1,0.5,0.41,0.54,0.44,0.41,0.41,0.39
3,False,17,1,3,1.0,3,40,0.75,-30,1,2,False,0,0.25,0.39,0.2,0.23,0.24,0.24,0.24
3,True,17,3,3,1.0,3,40,0.75,-30,1,2,False,0,0.3125,0.35,0.2,0.23,0.24,0.24,0.24
4,True,15,5,20,1.0,20,50,0.5,-20,2,3,False,1,0.4,0.45,0.4,0.5,0.51,0.52,0.51
"""
# The official JSON: row index -> {"B": [[p, x], ...], "A": [...]}, B first, a p = 0 outcome kept for one-outcome A.
_REAL_JSON = {"0": {"B": [[0.9, 20.0], [0.1, 25.0]], "A": [[0.9, 30.0], [0.09999999999999998, -2.0]]},
              "1": {"B": [[0.75, -4.0], [0.25, 10.0]], "A": [[0.6, 12.0], [0.4, -15.0]]},
              "2": {"B": [[0.25, -30.0], [0.375, 39.5], [0.375, 40.5]], "A": [[1.0, 3.0], [0.0, 3.0]]},
              "3": {"B": [[0.25, -30.0], [0.375, 39.5], [0.375, 40.5]], "A": [[1.0, 3.0], [0.0, 3.0]]},
              "4": {"B": [[0.5, -20.0], [0.25, 48.0], [0.125, 50.0], [0.125, 54.0]], "A": [[1.0, 20.0], [0.0, 20.0]]}}


def test_loader_reads_the_real_layout(tmp_path):
    "A small hand-written file in the official column layout (extra BEAST columns, True/False, B before A, p = 0)."
    csv, js = tmp_path / 'c13k_selections.csv', tmp_path / 'c13k_problems.json'
    csv.write_text(_REAL_CSV); js.write_text(json.dumps(_REAL_JSON))
    data = R.load_c13k(csv, js)
    assert len(data) == 5 and np.allclose(data.rates, [0.6, 0.5, 0.25, 0.3125, 0.4]) and list(data.n) == [15, 16, 17, 17, 15]
    assert data[2].meta['Feedback'] is False and data[1].meta['Amb'] is True and len(data[2].A) == 1
    assert np.allclose(data.ev_b, [20.5, -0.5, 22.5, 22.5, 15.0]) and np.isclose(data[0].A.ev, 26.8)
    ours = R.cpc_problem(20, 1.0, 20, 50, 0.5, -20, 2, 3)                    # the generator's rule gives the same B
    assert ours.B == data[4].B
    text = R.render_prompt(data[1], rng=0)[-1]['content']
    assert '$-15 with 40% chance' in text and '-$' not in text               # money as the official prompts write it


# ---- by construction: the simulated people and the controls --------------------------------------------------------
def test_ev_agent_is_more_ev_aligned_than_cpt_people(ps):
    "The old headline holds by construction: an EV-softmax agent against CPT agents, through the prompts."
    sub = ps.subset(range(600))
    ev = R.ev_choice(sub)
    humans = R.simulate_rates(R.CPT(**R.TK92, beta=0.1), sub, 85, rng=0)
    agent = R.ask(R.ModelBackedClient(R.EV(beta=2.0), seed=0), sub, 'individual', 'cot')['rates']
    gap = R.rationality_gap(agent, humans, ev, n_boot=200)
    assert gap['gap_ci'][0] > 0.2 and gap['ev_minus_human_ci'][0] > 0.2
    al = R.ev_alignment(agent, humans, ev, n_boot=200)
    assert al['d_lo'] > R.D_LO_MIN
    lam = R.fit(R.CPT(), sub, agent, loss='ce').params['lam']             # its implied model has no loss aversion
    assert abs(lam - 1) < 0.3


def test_calibrated_people_match_choices13k_facts():
    "human_noise and human_beta put r(rate, EV) near 0.49 and the held-out MSE ratio CPT / EV near 0.76."
    c = R.RationalConfig.quick()
    P = R.make_problems(1500, seed=5)
    p = R.human_prob_b(R.CPT(**R.TK92, beta=c.human_beta), P, c.human_noise, rng=1)
    rates = np.random.default_rng(2).binomial(85, p) / 85
    assert abs(R._r0(rates, R.ev_choice(P)) - 0.49) < 0.07
    cv = {m: R.cross_validate(R.ZOO[m](), P, rates, k=3, seed=0, loss='ce')['mean'] for m in ('EV', 'CPT')}
    assert 0.6 < cv['CPT'] / cv['EV'] < 0.92
    noiseless = R.simulate_rates(R.CPT(**R.TK92, beta=c.human_beta), P, 85, rng=1)
    assert R._r0(noiseless, R.ev_choice(P)) > R._r0(rates, R.ev_choice(P)) + 0.08


def test_inverse_rational_observer_tracks_simulated_people():
    "By construction (the simulated observers use the same utilities): Spearman >= 0.85; a random observer does not."
    sit = R.enumerate_situations()
    human = R.human_inverse_ranks(sit, 10, seed=0)
    u = R.prior_samples(4000, seed=1)
    W = R.pairwise_win_matrix(R.ModelBackedObserver(R.absolute_utility, 0.05, u=u, seed=0), sit, 1, seed=0)['wins']
    N = R.pairwise_win_matrix(R.ModelBackedObserver(R.absolute_utility, np.inf, u=u, seed=1), sit, 1, seed=1)['wins']
    assert R.spearman_vs(R.pairwise_to_ranking(W)[1], human) >= 0.85
    assert R.spearman_vs(R.pairwise_to_ranking(N)[1], human) < 0.6


def test_cv_folds_never_share_problems():
    exp = R.RationalExperiment(R.RationalConfig.quick(n_problems=100, llm_problems=5), llm=(None, None, 'none'))
    from iclr25_nb.core import overlap_count
    for f in range(exp.config.folds):
        train, test = exp._split(f)
        assert overlap_count(train.tolist(), test.tolist()) == 0 and len(train) + len(test) == 100


# ---- the language model: scoring, metric, nulls, endpoint ----------------------------------------------------------
class _Stub:
    "A scorer with a three-token vocabulary: 'A', 'B', other; P(B) follows EV(B) - EV(A) when `follow_ev`."
    def __init__(self, follow_ev=False): self.follow_ev, self.calls = follow_ev, 0
    def letter_ids(self): return {'A': [0], 'B': [1]}
    def logprobs(self, messages):
        self.calls += 1
        q = R.parse_problem(messages[-1]['content']) if self.follow_ev else None
        pb = 0.95 if (q is not None and q.B.ev >= q.A.ev) else 0.05
        return np.log([0.8 * (1 - pb), 0.8 * pb, 0.2])


def test_score_letters_and_alignment_metric(ps):
    sc = R.score_letters(np.log([0.2, 0.6, 0.2]), {'A': [0], 'B': [1]}, n_samples=4000, temperature=1.0, rng=0)
    assert abs(sc['p_lik'] - 0.75) < 1e-12 and abs(sc['p_gen'] - 0.75) < 0.03 and abs(sc['mass'] - 0.8) < 1e-12
    sub = ps.subset(range(300))
    ev, humans = R.ev_choice(sub), R.simulate_rates(R.CPT(**R.TK92, beta=0.1), sub, 85, rng=0)
    assert R.ev_alignment(np.zeros(300), humans, ev) == {'r_ev': 0.0, 'r_humans': 0.0, 'n': 300, 'd': 0.0,
                                                        'd_lo': 0.0, 'd_hi': 0.0}
    nulls = R.blind_choices(sub, rng=0)
    for name, v in nulls.items(): assert R.ev_alignment(v, humans, ev)['d_lo'] < R.D_LO_MIN, name
    with pytest.raises(ValueError, match='at least 3'): R.ev_alignment([np.nan] * 3, [0, 1, 0], [1, 0, 1])


def test_local_forward_with_stub_models(ps):
    sub = ps.subset(range(40))
    out = R.local_forward(_Stub(follow_ev=True), sub, n_samples=17, seed=0)
    ev = R.ev_choice(sub)
    assert np.array_equal(R.binarise(out['individual']['lik']), ev) and np.allclose(out['simulate']['mass'], 0.8)
    assert R.ev_alignment(out['individual']['gen'], R.simulate_rates(R.CPT(**R.TK92, beta=.1), sub, 85, rng=0),
                          ev)['d'] > 0.3
    abl = R.local_forward(_Stub(), sub, n_samples=17, seed=0, probs=False)     # prompts without probabilities
    assert np.allclose(abl['individual']['lik'], 0.05)


def test_experiment_with_a_stub_model_runs_and_resumes():
    kw = dict(n_problems=100, batch=50, folds=2, zoo=('EV', 'CPT'), inverse_reps=1, inverse_people=3, llm_problems=6,
              llm_batch=3)
    exp = R.RationalExperiment(R.RationalConfig.quick(**kw), llm=(None, _Stub(True), 'stub'))
    for _ in range(4): exp.step(); exp.step_count += 1
    state = exp.state_dict()
    exp2 = R.RationalExperiment(R.RationalConfig.quick(**kw), llm=(None, _Stub(True), 'stub'))
    exp2.load_state_dict(state)
    assert np.array_equal(np.nan_to_num(exp2.llm_rates['individual/lik'], nan=-1),
                          np.nan_to_num(exp.llm_rates['individual/lik'], nan=-1))
    exp.run(); exp2.run()
    assert exp.fitted == exp2.fitted and np.array_equal(exp.wins['llm'], exp2.wins['llm'])
    al = exp.alignment(n_boot=100)
    assert abs(al['individual/lik']['r_ev'] - 1) < 1e-9 and set(R.NULLS) <= {k[5:] for k in al if k.startswith('null/')}
    assert set(R.explorer_render(exp.snapshot(), [])) >= {'alignment', 'llm scatter', 'who is rational', 'inverse'}


def test_endpoint_config_uses_an_openai_compatible_server(monkeypatch):
    "llm_url / llm_model point the run at any OpenAI-compatible endpoint: here a stub server on loopback (no network)."
    import http.server, threading
    seen = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
            seen.append(body)
            out = json.dumps({'choices': [{'message': {'content': 'B'}}]}).encode()
            self.send_response(200); self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(out))); self.end_headers(); self.wfile.write(out)
        def log_message(self, *a): pass
    srv = http.server.HTTPServer(('127.0.0.1', 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f'http://127.0.0.1:{srv.server_address[1]}/v1'
        cfg = R.RationalConfig.quick(n_problems=60, llm_problems=4, llm_batch=4, llm_samples=3, llm_url=url,
                                     llm_model='my-model')
        monkeypatch.setattr('iclr25_nb.llm.local_available', lambda: (False, 'not in this test'))
        client, scorer, name = R.make_llm(cfg)
        assert scorer is None and client.model == 'my-model' and 'my-model' in name
        exp = R.RationalExperiment(cfg, llm=(client, None, name))
        exp._llm_step(0)
        assert np.allclose(exp.llm_rates['individual/gen'], 1.0) and np.isnan(exp.llm_rates['individual/lik']).all()
        assert len(seen) == 4 * 2 * 3 and seen[0]['model'] == 'my-model' and seen[0]['max_tokens'] == 1
        assert abs(seen[0]['temperature'] - 0.7) < 1e-12
    finally:
        srv.shutdown()
    monkeypatch.setenv('ICLR25_LLM_BASE_URL', 'http://example.invalid/v1')
    assert R._env_llm({})['llm_url'] == 'http://example.invalid/v1' and R._env_llm({'llm_url': 'http://x'})['llm_url'] == 'http://x'
    with pytest.raises(ValueError, match='llm_url'): R.RationalConfig.quick(llm_url='ftp://nope')


def test_experiment_on_user_files(c13k):
    csv, js = c13k
    exp = R.make_experiment('quick', c13k_csv=str(csv), c13k_json=str(js), folds=2, zoo=('EV', 'CPT'),
                            inverse_reps=1, inverse_people=3, llm_problems=3)
    exp.step()
    assert np.allclose(exp.answers['humans'], np.linspace(0, 1, 30)) and exp.N == 30
    with pytest.raises(ValueError, match='together'): R.make_experiment('quick', c13k_csv=str(csv))


def test_reproduce_rejects_bad_data():
    with pytest.raises(ValueError, match='ProblemSet with rates'):
        R._check_data(R.make_problems(10))


def _local():
    from iclr25_nb import llm
    return llm.local_available()


@pytest.mark.skipif(not _local()[0], reason=f"local LLM unavailable: {_local()[1]}")
def test_local_llm_scores_the_letters(ps):
    "Gemma 3 270M in-process: both scorings from one forward pass; a prompt past the context is skipped, not fatal."
    from iclr25_nb import llm
    sc = R.LetterScorer(llm.local_llm(threads=1))
    sub = ps.subset(R.llm_subset(ps, 3)[:1])
    res = R.local_forward(sc, sub, n_samples=17)
    r = res['individual']
    assert 0 < r['lik'][0] < 1 and 0 < r['mass'][0] <= 1 and r['n_a'] + r['n_b'] + r['n_other'] == 17
    assert sc.letter_ids()['A'] and sc.letter_ids()['B']
    long = R.Problem(R.Gamble(np.arange(600.0), np.full(600, 1 / 600)), R.Gamble([1.0], [1.0]))
    from iclr25_nb.core import Report, item_failures
    rep = Report('rational_llm')
    with item_failures(rep):
        out = R.local_forward(sc, R.ProblemSet([long]), modes=('simulate',))
    assert np.isnan(out['simulate']['lik'][0]) and sc.skipped >= 1


@pytest.mark.slow
@pytest.mark.skipif(not _local()[0], reason=f"local LLM unavailable: {_local()[1]}")
def test_local_llm_answers_chat_prompts(ps):
    from iclr25_nb import llm
    out = R.ask(llm.local_llm(max_tokens=4), ps.subset([0]), 'simulate', 'zero_shot')
    assert out['calls'] == 1 and isinstance(out['answers'][0], str)

@pytest.mark.slow
@pytest.mark.skipif(not _local()[0], reason=f"local LLM unavailable: {_local()[1]}")
def test_local_llm_through_its_openai_compatible_server(ps):
    "The same OpenAI client that talks to a hosted endpoint, on llama-cpp-python's server (skipped without it)."
    from iclr25_nb import llm
    try:
        with llm.local_server(max_tokens=8) as client:
            out = R.ask(client, ps.subset([0, 1]), 'simulate', 'zero_shot')
    except llm.Unavailable as e:
        pytest.skip(str(e))
    assert out['calls'] == 2 and all(isinstance(a, str) for a in out['answers'])
