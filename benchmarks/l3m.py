"""L3M benchmarks.

1. Exact testbed: our closed-form KKT solution (scipy brentq on the multiplier) against scipy SLSQP on the simplex,
   for 50, 200 and 1000 responses: time and agreement of the optimal task loss.
2. Training-step overhead of the L3M objective over plain SFT on the tiny LM, at three sizes (hidden width, samples
   per step): one step = sample G x K responses, re-score them, one Adam step; SFT skips the constraint gradient.

Run: python benchmarks/l3m.py
"""
import numpy as np
import torch

from _timing import Row, table, timed, time_call
from iclr25_nb import l3m as L


def bench_kkt():
    rows = []
    for M in (50, 100, 200):
        b = L.CategoricalBandit.default(M=M)
        t_ours, ours = timed(b.kkt_solution, repeat=5)
        t_peer, peer = timed(b.scipy_solution, repeat=1, warmup=0)
        rows.append(Row('bandit optimum (closed-form KKT vs SLSQP)', f'M={M}', t_ours, t_peer,
                        abs(ours['H'] - peer['H']), 'scipy SLSQP'))
    return rows


def bench_step(steps=3):
    rows = []
    for hidden, G, K in ((32, 8, 4), (64, 16, 4), (128, 32, 4)):
        def run(method):
            exp = L.make_experiment('quick', seed=0, pretrain_steps=1, steps=steps + 2, methods=(method,),
                                    hidden=hidden, prompts=G, k_samples=K, eval_samples=16, n_heldout=16)
            exp.run(2)                                                # pre-training step + first fine-tuning step
            return lambda: exp.run(1)
        t_sft = time_call(run('sft'), repeat=steps, warmup=0)
        t_l3m = time_call(run('l3m'), repeat=steps, warmup=0)
        rows.append(Row('one fine-tuning step, L3M vs SFT', f'hidden {hidden}, {G}x{K} samples', t_l3m, t_sft, None,
                        'SFT (samples drawn, no constraint gradient)', kind='cost'))   # ours vs ours: what the barrier costs
    return rows


if __name__ == '__main__':
    torch.set_num_threads(1)
    rows = bench_kkt() + bench_step()
    print(table(rows, 'L3M: exact testbed solver vs scipy; step overhead of the barrier objective over SFT',
                unit='ms', agreement='|H difference|'))
    print('\nours / peer below 1: ours is faster; the step rows are the overhead of the barrier objective')
