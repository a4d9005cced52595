"""MolLEO benchmarks: the PMO oracle's cost and the Graph GA generation, at three sizes each.

1. Oracle throughput: `Oracle('qed')` (parse, canonicalise, cache, history) on a stream of ZINC SMILES in which
   half are repeats written another way (randomised SMILES), against the plain RDKit computation a user would
   write (`QED.qed(Chem.MolFromSmiles(s))` on every string, no cache); agreement = max |score difference| over
   the stream. Also the isomer task (cheap to score: the cache's relative gain is smaller).
2. One Graph GA generation (mating pool, lambda crossovers + mutations, (mu + lambda) selection with the oracle) at
   mol_opt's reference settings (mu = 120, lambda = 70, p_mut = 0.067) against half and double; the "peer" column
   is the reference size, so the ratio shows how the cost grows. No pip-installable Graph GA exists to time against
   (mol_opt and MOLLEO are repositories; guacamol_baselines is not on PyPI).
3. MolLEO's editor step per generation at the reference size: the formula expert and the SELFIES GRU (mutation
   mode with the similarity filter) against Graph GA's own generation.

Rows against plain RDKit (1) are `kind='peer'`; the generation rows (2, 3) compare ours with ours, `kind='cost'`.

Run: python benchmarks/molleo.py   (about a minute with one thread on a quiet machine)
"""
import numpy as np
import torch
from rdkit import Chem
from rdkit.Chem import QED

from _timing import Row, table, timed
from iclr25_nb import molleo as M


def stream(pool, n, seed=0):
    "n SMILES: n/2 distinct molecules, then each again as a randomised SMILES, shuffled."
    rng = np.random.default_rng(seed)
    base = [pool[i] for i in rng.choice(len(pool), n // 2, replace=False)]
    again = [Chem.MolToSmiles(Chem.MolFromSmiles(s), doRandom=True) for s in base]
    out = base + again
    return [out[i] for i in rng.permutation(len(out))]


def oracle_rows(pool):
    rows = []
    for n in (100, 500, 2000):
        smi = stream(pool, n)
        t_ours, ours = timed(lambda: M.Oracle('qed', n)(smi), repeat=2, warmup=0)
        t_peer, peer = timed(lambda: [QED.qed(Chem.MolFromSmiles(s)) for s in smi], repeat=2, warmup=0)
        rows.append(Row('QED oracle, half repeats (calls/s ours: %.0f)' % (n / t_ours), f'n={n}', t_ours, t_peer,
                        float(np.max(np.abs(np.subtract(ours, peer)))), peer_name='RDKit QED, no cache'))
    iso = M.task('isomers_c9h10n2o2pf2cl')
    for n in (100, 500, 2000):
        smi = stream(pool, n)
        t_ours, ours = timed(lambda: M.Oracle(iso, n)(smi), repeat=2, warmup=0)
        t_peer, peer = timed(lambda: [iso.score(Chem.MolFromSmiles(s)) for s in smi], repeat=2, warmup=0)
        rows.append(Row('isomer oracle, half repeats', f'n={n}', t_ours, t_peer,
                        float(np.max(np.abs(np.subtract(ours, peer)))), peer_name='RDKit, no cache'))
    return rows


def generation_seconds(pool, mu, lam, editor=None, gens=2, seed=0):
    "Median seconds of one generation over `gens` generations after the first."
    s = M.GeneticSearch(M.Oracle('isomers_c9h10n2o2pf2cl', 100_000), pool, editor, mu, lam,
                        0.067 if editor is None else 0.0, bin_size=max(100, lam), seed=seed)
    s.step()
    return timed(s.step, repeat=gens, warmup=0)[0]


def ga_rows(pool):
    ref = generation_seconds(pool, 120, 70)
    rows = [Row('Graph GA generation', f'mu={mu}, lam={lam}', generation_seconds(pool, mu, lam) if mu != 120 else ref,
                ref, None, peer_name='ours at mol_opt settings (120, 70)', kind='cost') for mu, lam in ((60, 35), (120, 70),
                                                                                          (240, 140))]
    lm, _ = M.train_selfies_lm(pool[:3000], steps=100, seed=0)
    for name, ed in (('MolLEO generation, formula expert', M.FormulaExpertEditor()),
                     ('MolLEO generation, SELFIES GRU', M.SelfiesLMEditor(lm))):
        rows.append(Row(name, 'mu=120, lam=70, bin 100', generation_seconds(pool, 120, 70, ed), ref, None,
                        peer_name='Graph GA generation', kind='cost'))
    return rows


if __name__ == '__main__':
    torch.set_num_threads(1)
    pool = M.load_pool()
    print(table(oracle_rows(pool), title='Oracle calls: cache and canonicalisation against plain RDKit'))
    print()
    print(table(ga_rows(pool), title='Graph GA and MolLEO generation time'))
