"MolLEO: oracles against RDKit references, PMO's AUC, the oracle budget, Graph GA rules, editors, bad input."
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('rdkit')
from rdkit import Chem, RDConfig

from iclr25_nb import molleo as M


@pytest.fixture(autouse=True, scope='module')
def one_thread():
    "Tiny torch models: one thread (much faster than two on a shared machine)."
    import torch
    n = torch.get_num_threads(); torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope='module')
def zinc():
    "200 pool molecules (ZINC-250k where the shared data is, else RDKit's NCI set)."
    pool = M.load_pool()
    rng = np.random.default_rng(0)
    return [pool[i] for i in rng.choice(len(pool), 200, replace=False)]


# ---- oracles ------------------------------------------------------------------------------------------------------

def test_sa_score_matches_the_shipped_reference():
    path = Path(RDConfig.RDContribDir) / 'SA_Score' / 'data' / 'zim.100.txt'
    rows = [line.split('\t') for line in path.read_text().splitlines()[1:] if line.strip()]
    err = [abs(M.sa_score(Chem.MolFromSmiles(s)) - float(ref)) for s, _, ref in rows]
    assert len(err) == 100 and max(err) < 1e-3


def test_qed_is_rdkits_and_in_unit_interval(zinc):
    from rdkit.Chem import QED
    for s in zinc[:50]:
        m = Chem.MolFromSmiles(s)
        v = M.task('qed').score(m)
        assert 0 <= v <= 1 and v == pytest.approx(QED.qed(m), abs=1e-12)


def test_similarity_targets_score_one_and_are_clipped():
    for drug, name in (('celecoxib', 'celecoxib_rediscovery'), ('troglitazone', 'troglitazone_rediscovery'),
                       ('thiothixene', 'thiothixene_rediscovery'), ('albuterol', 'albuterol_similarity'),
                       ('mestranol', 'mestranol_similarity')):
        assert M.task(name).score(Chem.MolFromSmiles(M._DRUGS[drug])) == pytest.approx(1.0)
    # clipping: a molecule with AP similarity above 0.75 to mestranol scores exactly 1
    near = Chem.MolFromSmiles('COc1ccc2[C@H]3CC[C@@]4(C)[C@@H](CC[C@@]4(O)C#C)[C@@H]3CCc2c1C')
    sim = M.tanimoto(M.fingerprint(near, 'AP'), M._target_fp('mestranol', 'AP'))
    assert 0.75 <= sim < 1 and M.task('mestranol_similarity').score(near) == 1.0


def test_morgan_generators_equal_legacy_fingerprints(zinc):
    from rdkit import DataStructs
    from rdkit.Chem import AllChem
    ref = Chem.MolFromSmiles(M._DRUGS['albuterol'])
    for s in zinc[:40]:
        m = Chem.MolFromSmiles(s)
        for kind, radius, feat in (('ECFP4', 2, False), ('ECFP6', 3, False), ('FCFP4', 2, True)):
            legacy = DataStructs.TanimotoSimilarity(AllChem.GetMorganFingerprint(m, radius, useFeatures=feat),
                                                    AllChem.GetMorganFingerprint(ref, radius, useFeatures=feat))
            assert M.tanimoto(M.fingerprint(m, kind), M.fingerprint(ref, kind)) == pytest.approx(legacy, abs=1e-12)


def test_isomer_score_closed_form():
    t = M.parse_formula('C7H8N2O2')
    exact = Chem.MolFromSmiles('Nc1ccc(C(N)=O)cc1O')           # C7H8N2O2
    assert M.element_counts(exact) == {'C': 7, 'H': 8, 'N': 2, 'O': 2}
    assert M.isomer_score(exact, t) == 1.0
    more = Chem.MolFromSmiles('Nc1ccc(C(N)=O)cc1OC')           # one C and two H more
    g = np.exp(-0.5)                                            # C off by one (sigma 1)
    expected = (g * np.exp(-0.5 * 4) * 1 * 1 * np.exp(-0.5 * (3 / 2) ** 2)) ** (1 / 5)
    assert M.isomer_score(more, t) == pytest.approx(expected)
    assert M.isomer_score(Chem.MolFromSmiles('Nc1ccc(C(N)=O)cc1'), t) < 1


def test_geometric_mean_is_zero_when_a_factor_is():
    assert M.geometric_mean([0.9, 0.0, 0.5]) == 0.0
    assert M.geometric_mean([0.25, 1.0]) == pytest.approx(0.5)


@pytest.mark.parametrize('name', sorted(M.TASKS))
def test_every_task_is_invariant_to_smiles_randomisation(name, zinc):
    t = M.task(name)
    rng = np.random.default_rng(1)
    for s in zinc[:8]:
        m = Chem.MolFromSmiles(s)
        v = t.score(m)
        assert 0 <= v <= 1
        for _ in range(2):
            r = Chem.MolToSmiles(m, doRandom=True)
            order = [int(i) for i in rng.permutation(m.GetNumAtoms())]
            assert t.score(Chem.MolFromSmiles(r)) == pytest.approx(v, abs=1e-12)
            assert t.score(Chem.RenumberAtoms(m, order)) == pytest.approx(v, abs=1e-12)


# ---- the oracle and the AUC ---------------------------------------------------------------------------------------

def test_oracle_charges_distinct_molecules_only_and_never_exceeds_the_budget(zinc):
    o = M.Oracle('qed', budget=30)
    for s in zinc[:20]:
        m = Chem.MolFromSmiles(s)
        o(s); o(Chem.MolToSmiles(m, doRandom=True)); o('C1CC' + 'x')          # same molecule, invalid
    assert o.calls == len({Chem.MolToSmiles(Chem.MolFromSmiles(s)) for s in zinc[:20]}) and o.invalid == 20
    o(zinc[20:80])
    assert o.calls == 30 and o.finished and o(zinc[100]) == 0.0 and o.calls == 30
    assert o(zinc[0]) == o.cache[Chem.MolToSmiles(Chem.MolFromSmiles(zinc[0]))]   # cached after the budget too


def test_user_oracle_slot():
    o = M.Oracle(lambda smiles: smiles.count('N') / 10, budget=10)
    assert o('NCCN') == pytest.approx(0.2) and o.task.name == 'custom'
    bad = M.Oracle(lambda smiles: 2.0, budget=10)
    with pytest.raises(ValueError, match='in \\[0, 1\\]'): bad('CCO')


def _pmo_auc(scores, k, budget, freq):
    "PMO's loop over a buffer dict, written plainly (for the cross-check)."
    buf = {f'm{i}': (s, i + 1) for i, s in enumerate(scores)}
    ordered = sorted(buf.items(), key=lambda kv: kv[1][1])
    total, prev, called = 0.0, 0.0, 0
    for idx in range(freq, min(len(buf), budget), freq):
        now = np.mean(sorted([v[0] for _, v in ordered[:idx]], reverse=True)[:k])
        total += freq * (now + prev) / 2
        prev, called = now, idx
    now = np.mean(sorted([v[0] for _, v in ordered], reverse=True)[:k])
    total += (len(buf) - called) * (now + prev) / 2
    if len(buf) < budget: total += (budget - len(buf)) * now
    return total / budget


@pytest.mark.parametrize('n', [5, 100, 250, 1000])
def test_auc_equals_a_plain_pmo_loop(n):
    s = np.random.default_rng(n).random(n)
    for k in (1, 10, 100):
        assert M.top_k_auc(s, k, 1000, 100) == pytest.approx(_pmo_auc(s, k, 1000, 100), abs=1e-12)


def test_auc_axioms():
    rng = np.random.default_rng(0)
    s = rng.random(700)
    a1, a10, a100 = (M.top_k_auc(s, k, 1000) for k in (1, 10, 100))
    assert 0 <= a100 <= a10 <= a1 <= 1
    assert M.top_k_auc([0.3] * 1000, 10, 1000, 100) == pytest.approx(0.3 * (1 - 100 / 2000))
    assert M.top_k_auc(np.sort(s)[::-1], 10, 1000) >= M.top_k_auc(np.sort(s), 10, 1000)   # earlier is better
    assert M.top_k_auc(s, 10, 1000, finished=False) < M.top_k_auc(s, 10, 1000)            # padding adds
    assert M.top_k_auc([], 10, 1000) == 0.0
    with pytest.raises(ValueError): M.top_k_auc([np.nan], 10, 1000)
    with pytest.raises(ValueError): M.top_k_auc([0.5], 0, 1000)


# ---- Graph GA -----------------------------------------------------------------------------------------------------

def test_children_are_valid_ring_ok_and_new(zinc):
    rng = np.random.default_rng(0)
    made = 0
    for i in range(0, 40, 2):
        a, b = Chem.MolFromSmiles(zinc[i]), Chem.MolFromSmiles(zinc[i + 1])
        child = M.crossover(a, b, rng)
        if child is None: continue
        made += 1
        s = Chem.MolToSmiles(child)
        assert Chem.MolFromSmiles(s) is not None and M.ring_ok(child) and 5 < child.GetNumAtoms()
        assert s not in (Chem.MolToSmiles(a), Chem.MolToSmiles(b))
        mut = M.mutate(child, rng, 1.0)
        if mut is not None: assert Chem.MolFromSmiles(Chem.MolToSmiles(mut)) is not None and M.ring_ok(mut)
    assert made >= 15


def test_mating_pool_frequencies_follow_scores(zinc):
    scipy_stats = pytest.importorskip('scipy.stats')
    s = M.GeneticSearch(M.Oracle('qed', 500), zinc, mu=20, lam=10, seed=0)
    counts = dict.fromkeys(s.population, 0)
    for _ in range(300):
        for m, _ in s._mating_pool(): counts[m] += 1
    obs = np.array([counts[m] for m in s.population])
    w = np.asarray(s.scores) + 1e-10
    p = scipy_stats.chisquare(obs, obs.sum() * w / w.sum()).pvalue
    assert p > 1e-3


def test_selection_keeps_the_best_mu_distinct(zinc):
    o = M.Oracle('qed', 1000)
    s = M.GeneticSearch(o, zinc, mu=30, lam=20, seed=0)
    s.step()
    assert len(set(s.population)) == len(s.population) == 30
    assert s.scores == sorted(s.scores, reverse=True)
    assert s.scores == pytest.approx([x for _, x in o.top(30)])          # elitist: the best 30 ever seen


def test_search_is_seeded_monotone_and_within_budget(zinc):
    runs = [M.run_ga(M.Oracle('isomers_c7h8n2o2', 300), pool=zinc, mu=30, lam=20, seed=3) for _ in range(2)]
    assert runs[0].oracle.history == runs[1].oracle.history
    best = [r['best'] for r in runs[0].log]
    assert all(b >= a for a, b in zip(best, best[1:])) and runs[0].oracle.calls <= 300


# ---- editors ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('mode', ['crossover', 'mutation'])
def test_invalid_editor_proposals_fall_back_without_crashing(zinc, mode):
    ed = M.ScriptedEditor(['not a molecule', RuntimeError('boom'), None, 'C1CC', 'CCOC(=O)c1ccccc1'])
    s = M.GeneticSearch(M.Oracle('qed', 400), zinc, ed, mu=20, lam=10, p_mut=0.0, mode=mode, bin_size=20, seed=0)
    for _ in range(3): s.step()
    st = ed.stats()
    assert st['failures'] >= 3 * st['valid'] and st['calls'] > 0
    if mode == 'crossover': assert s.fallbacks == st['failures']
    assert all(Chem.MolFromSmiles(m) is not None for m in s.population)


def test_formula_expert_pays_for_every_objective_call():
    t = M.task('isomers_c9h10n2o2pf2cl')
    rng = np.random.default_rng(0)
    calls = []
    t_counted = M.Task(t.name, lambda m: calls.append(1) or t.score(m), t.description, t.formula)
    oracle = M.Oracle('qed', budget=2000)
    oracle.task = t_counted
    ed, s = M.FormulaExpertEditor(oracle=oracle), 'CC(=O)Nc1ccc(O)cc1'
    start = t.score(Chem.MolFromSmiles(s))
    for _ in range(10): s = ed.edit([(s, 0.0)], t_counted, rng) or s
    assert t.score(Chem.MolFromSmiles(s)) > start + 0.3
    assert len(calls) == oracle.calls > 10          # every evaluation of the objective went through the budget
    assert M.FormulaExpertEditor().edit([(s, 0.0)], t, rng) is None     # without an oracle it refuses


def test_every_objective_call_of_a_molleo_run_is_charged():
    """Count every evaluation of the task's objective during whole runs (expert, SELFIES LM, Graph GA): each one is
    an entry of the oracle's history, and the history never exceeds the budget."""
    pool = M.load_pool()[:3000]
    lm, _ = M.train_selfies_lm(pool[:1000], steps=20, seed=0)
    for editor in (M.FormulaExpertEditor(), M.SelfiesLMEditor(lm), None):
        t = M.task('isomers_c9h10n2o2pf2cl')
        calls = []
        oracle = M.Oracle(t.name, budget=300)
        oracle.task = M.Task(t.name, lambda m: calls.append(1) or t.score(m), t.description, t.formula)
        s = M.run_ga(oracle, editor, pool, mu=30, lam=20, bin_size=30, seed=0)
        assert len(calls) == oracle.calls <= 300, (editor, len(calls), oracle.calls)
        assert s.generation > 0


def test_prompt_holds_parents_scores_and_task_text():
    msgs = M.build_prompt([('CCO', 0.25), ('c1ccccc1', 0.5)], M.task('perindopril_mpo'))
    text = msgs[1]['content']
    assert msgs[0]['role'] == 'system' and 'CCO,0.2500' in text and 'c1ccccc1,0.5000' in text
    assert 'aromatic rings' in text and '\\box{' in text


@pytest.mark.parametrize('reply, expected', [(r'\box{CCO}', 'CCO'), (r'a \box{CCN} b \box{CCO}', 'CCN'),
                                             (r'\boxed{c1ccccc1}', 'c1ccccc1'), ('no box', None), (r'\box{}', None),
                                             (r'\box{C{C}}', None), (None, None)])
def test_parse_box(reply, expected):
    assert M.parse_box(reply) == expected


class _FakeOpenAI(BaseHTTPRequestHandler):
    replies, requests = [], []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        type(self).requests.append(body)
        reply = type(self).replies.pop(0) if type(self).replies else r'\box{CCO}'
        if reply == 503:
            self.send_response(503); self.end_headers(); self.wfile.write(b'busy'); return
        data = json.dumps({'choices': [{'message': {'content': reply}}],
                           'usage': {'prompt_tokens': 10, 'completion_tokens': 5}}).encode()
        self.send_response(200); self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data))); self.end_headers(); self.wfile.write(data)

    def log_message(self, *a): pass


def test_chat_editor_against_a_loopback_openai_server(tmp_path):
    llm = pytest.importorskip('iclr25_nb.llm')
    server = HTTPServer(('127.0.0.1', 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True); thread.start()
    try:
        _FakeOpenAI.replies[:] = [503, 'no molecule here', r'ok \box{C1=CC=CC=C1N}']
        cache = llm.ResponseCache(tmp_path / 'cache.jsonl')
        url = f'http://127.0.0.1:{server.server_port}/v1'
        client = llm.OpenAIClient(url, 'fake-model', cache=cache, temperature=0.0, backoff=0.0)
        ed = M.ChatEditor(client, retries=3)
        a, b = [('CCO', 0.4), ('CCN', 0.3)], [('CCO', 0.4), ('CCC', 0.2)]
        assert ed.edit(a, M.task('qed'), None) is None                      # HTTP 503 retried, then no box
        assert client.retries == 1 and ed.unparsed == 1 and ed.failures == 1
        assert ed.edit(b, M.task('qed'), None) == 'Nc1ccccc1'
        body = _FakeOpenAI.requests[-1]
        assert body['model'] == 'fake-model' and body['temperature'] == 0.0
        assert 'CCC,0.2000' in body['messages'][1]['content']
        n = len(_FakeOpenAI.requests)
        again = M.ChatEditor(llm.OpenAIClient(url, 'fake-model', cache=cache, temperature=0.0, backoff=0.0))
        assert again.edit(b, M.task('qed'), None) == 'Nc1ccccc1' and again.edit(a, M.task('qed'), None) is None
        assert again.client.cache_hits == 2 and len(_FakeOpenAI.requests) == n     # answered from the cache
    finally:
        server.shutdown(); server.server_close()


def test_selfies_lm_learns_and_samples_valid_molecules(zinc):
    pytest.importorskip('selfies')
    lm, losses = M.train_selfies_lm(zinc, steps=40, hidden=64, batch=32, seed=0)
    assert np.mean(losses[-5:]) < losses[0] - 0.5
    ed, rng = M.SelfiesLMEditor(lm), np.random.default_rng(0)
    outs = [ed.edit([(s, 0.5)], M.task('qed'), rng) for s in zinc[:30]]
    assert sum(o is not None for o in outs) >= 27


def _local_ok():
    try:
        from iclr25_nb import llm
        return llm.local_available()
    except Exception as e:
        return False, str(e)


@pytest.mark.skipif(not _local_ok()[0], reason=f"local LLM unavailable: {_local_ok()[1]}")
def test_local_gemma_as_an_editor_is_parsed_and_falls_back():
    from iclr25_nb import llm
    ed = M.ChatEditor(M.primed_client(llm.local_llm(), max_tokens=24), retries=1)
    out = ed.edit([('CCO', 0.4), ('c1ccccc1O', 0.45)], M.task('qed'), np.random.default_rng(0))
    assert ed.calls == 1 and ed.valid + ed.failures == 1 and ed.requests == 1
    assert out is None or Chem.MolFromSmiles(out) is not None
    assert len(ed.transcript) == 1 and ed.transcript[0][1].startswith('\\box{')


# ---- data and bad input -------------------------------------------------------------------------------------------

def test_zinc_pool_loads(shared_data):
    path = Path(shared_data) / 'zinc' / 'zinc250k.smi.gz'
    if not path.is_file(): pytest.skip('no ZINC-250k in the shared data')
    pool = M.load_smiles(path)
    assert len(pool) == 249_455 and Chem.MolFromSmiles(pool[0]) is not None


@pytest.mark.parametrize('content, message', [(b'', 'no SMILES'), (b'\x89PNG\r\n\x1a\n\x00\x00', 'not a'),
                                              (b'CCO\nC[C@H](N)C(=O)O\nC{C}\n', 'line 3'),
                                              (b'smiles\n\n', 'no SMILES')])
def test_bad_smiles_files_raise(tmp_path, content, message):
    p = tmp_path / 'bad.smi'
    p.write_bytes(content)
    with pytest.raises(ValueError, match=message) as e: M.load_smiles(p)
    assert str(p) in str(e.value)


def test_truncated_and_fake_gzip_raise(tmp_path):
    p = tmp_path / 'pool.smi.gz'
    p.write_bytes(gzip.compress(b''.join(f'C{"C" * (i % 30)}O\n'.encode() for i in range(2000)))[:60])
    with pytest.raises(ValueError, match='not a readable'): M.load_smiles(p)
    p.write_bytes(b'CCO\nCCN\n')
    with pytest.raises(ValueError, match='not a readable'): M.load_smiles(p)
    with pytest.raises(ValueError, match='no such file'): M.load_smiles(tmp_path / 'missing.smi')


def test_bad_arguments_raise(zinc):
    with pytest.raises(ValueError, match='budget'): M.Oracle('qed', 0)
    with pytest.raises(ValueError, match='unknown task'): M.task('jnk3')
    with pytest.raises(ValueError, match='mode'): M.GeneticSearch(M.Oracle('qed', 100), zinc, mode='both')
    with pytest.raises(ValueError, match='bin_size'): M.GeneticSearch(M.Oracle('qed', 100), zinc, lam=70, bin_size=10)
    with pytest.raises(ValueError, match='kind'): M.fingerprint(Chem.MolFromSmiles('CCO'), 'MACCS')
    with pytest.raises(ValueError, match='formula'): M.parse_formula('water')
    with pytest.raises(ValueError, match='editor'): M.make_editor('gpt5', zinc)
    with pytest.raises(ValueError, match='retries'): M.ChatEditor(lambda m: '', retries=0)


def test_without_rdkit_the_first_call_names_the_extra(monkeypatch):
    "A base install (no RDKit): make_experiment and load_pool raise one ImportError naming `iclr25_nb[molleo]`."
    import sys
    for m in [m for m in sys.modules if m == 'rdkit' or m.startswith('rdkit.')]: monkeypatch.delitem(sys.modules, m)
    monkeypatch.setitem(sys.modules, 'rdkit', None)                       # `import rdkit` raises ImportError
    for call in (M.load_pool, lambda: M.make_experiment('quick', seed=0)):
        with pytest.raises(ImportError, match=r"pip install 'iclr25_nb\[molleo\]'"): call()


def test_pool_fallback_is_logged(monkeypatch, caplog):
    "Without ZINC-250k the pool is RDKit's NCI set, and a warning says so and how to get ZINC."
    monkeypatch.setattr(M, 'default_pool_path', lambda: None)
    path, source = M.pool_source()
    assert path.name == 'first_5K.smi' and 'not found' in source
    assert 'iclr25 data get zinc' in caplog.text


def test_headline_is_the_lm_editor_against_graph_ga_with_three_nulls():
    from iclr25_nb.core import Report, claim_problems
    run = lambda auc: {'auc': auc, 'calls': 1000, 'monotone': True, 'valid': True}
    res = {'budget': 1000, 'initial': {'a': 0.3, 'b': 0.2},
           'tasks': {'a': {'graph_ga': run(0.6), 'selfies_lm': run(0.7), 'blind_ops': run(0.62), 'random': run(0.4)},
                     'b': {'graph_ga': run(0.5), 'selfies_lm': run(0.5), 'blind_ops': run(0.5), 'random': run(0.3)}}}
    r = Report('molleo')
    M._claims(r, res)
    head = r.claims[0]
    assert head.kind == 'headline' and abs(head.measured - 0.05) < 1e-12 and head.set == 'before'
    assert {n['name']: round(n['measured'], 6) for n in head.nulls} == {
        M.NULL_NAMES['blind_ops']: 0.01, M.NULL_NAMES['random']: -0.2, M.NULL_NAMES['initial']: -0.3}
    assert not claim_problems(head)
