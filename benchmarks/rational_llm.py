"""rational_llm benchmarks: fitting the decision-model zoo, ours vs a scipy-only baseline, on the same work.

The baseline is what a user would write with scipy alone: per-problem Python loops over each gamble's outcomes
(the value function, the TK92 weights, and for CPT the rank-dependent decision weights recomputed at every
evaluation), minimised by the same `scipy.optimize.minimize(method='L-BFGS-B')` with the same bounds, start and
iteration cap. Ours evaluates all problems as padded arrays in one vectorised pass and caches CPT's decumulative
probabilities per problem set. Agreement: max |fitted parameter difference| (the two objectives are the same
function, so the fits should agree to the optimiser's tolerance).

1. EV, EU, PT and CPT fitted to 10^2, 10^3, 10^4 problems answered by a CPT agent (TK92 parameters, 85 choices each);
   the baseline is capped at 5 L-BFGS-B iterations for every model (ours with the same cap) so that the 10^4 rows
   finish in a minute; `--full` lifts the cap (minutes).
2. The rationality gap with a 1,000-sample bootstrap: ours (vectorised row-wise correlations) vs a loop of
   `scipy.stats.pearsonr` over bootstrap samples; agreement = |CI bound difference|.

Run: python benchmarks/rational_llm.py [--full]
"""
import argparse
import math
import time

import numpy as np
from scipy.optimize import minimize
from scipy.stats import pearsonr

from _timing import Row, table, timed
from iclr25_nb import rational_llm as R


def _w(p, g):
    return p ** g / (p ** g + (1 - p) ** g) ** (1 / g) if 0 < p < 1 else float(p >= 1)


def _v(x, a, lam):
    return x ** a if x >= 0 else -lam * (-x) ** a


def scalar_value(kind, th, g):
    "The value of one Gamble under model `kind` with parameters th, by loops (the scipy-only user's code)."
    xs, ps = list(g.outcomes), list(g.probs)
    if kind == 'EV': return sum(p * x for x, p in zip(xs, ps))
    if kind == 'EU': return sum(p * math.copysign(abs(x) ** th[0], x) for x, p in zip(xs, ps))
    a, lam, gam = th[0], th[1], th[2]
    if kind == 'PT': return sum(_w(p, gam) * _v(x, a, lam) for x, p in zip(xs, ps))
    order = sorted(range(len(xs)), key=lambda i: (xs[i], i))
    total = 0.0
    for rank, i in enumerate(order):                                   # rank-dependent weights, recomputed
        if xs[i] > 0:
            above = sum(ps[j] for j in order[rank + 1:])
            total += (_w(above + ps[i], gam) - _w(above, gam)) * _v(xs[i], a, lam)
        elif xs[i] < 0:
            below = sum(ps[j] for j in order[:rank])
            total += (_w(below + ps[i], gam) - _w(below, gam)) * _v(xs[i], a, lam)
    return total


def scalar_fit(kind, problems, rates, maxiter):
    names = list(R.ZOO[kind].defaults)
    box = [R.ZOO[kind].bounds[k] for k in names]

    def loss(th):
        total = 0.0
        for q, r in zip(problems.problems, rates):
            z = th[-1] * (scalar_value(kind, th, q.B) - scalar_value(kind, th, q.A))
            p = min(max(1 / (1 + math.exp(-max(min(z, 700), -700))), 1e-9), 1 - 1e-9)
            total -= r * math.log(p) + (1 - r) * math.log(1 - p)
        return total / len(rates)
    x0 = np.array([R.ZOO[kind].defaults[k] for k in names])
    res = minimize(loss, x0, method='L-BFGS-B', bounds=box, options=dict(maxiter=maxiter))
    return dict(zip(names, res.x))


def fit_rows(sizes, maxiter):
    rows = []
    for n in sizes:
        ps = R.make_problems(n, seed=0)
        rates = R.simulate_rates(R.CPT(**R.TK92, beta=0.1), ps, rng=0)
        for kind in ('EV', 'EU', 'PT', 'CPT'):
            def ours():
                fresh = R.ProblemSet(ps.problems)                    # no cache carried over between repeats
                return R.fit(R.ZOO[kind](), fresh, rates, loss='ce', n_starts=1, maxiter=maxiter).params
            rep = 3 if n <= 1000 else 1
            t_ours, p_ours = timed(ours, repeat=rep, warmup=0 if n > 1000 else 1)
            t_peer, p_peer = timed(lambda: scalar_fit(kind, ps, rates, maxiter), repeat=1, warmup=0)
            agree = max(abs(p_ours[k] - p_peer[k]) for k in p_ours)
            rows.append(Row(f'fit {kind} (L-BFGS-B, cross-entropy, <= {maxiter} it.)', f'{n} problems', t_ours,
                            t_peer, agree, peer_name='scipy + loops'))
    return rows


def gap_rows(sizes):
    rows = []
    for n in sizes:
        ps = R.make_problems(n, seed=1)
        humans = R.simulate_rates(R.CPT(**R.TK92, beta=0.1), ps, rng=0)
        llm = R.simulate_rates(R.EV(beta=2.0), ps, 1, rng=1)
        ev = R.ev_choice(ps)
        t_ours, g = timed(lambda: R.rationality_gap(llm, humans, ev, n_boot=1000, seed=0), repeat=3)

        def peer():
            L, H, E = R.binarise(llm), R.binarise(humans), ev
            idx = np.random.default_rng(0).integers(0, n, size=(1000, n))
            d = [pearsonr(L[i], E[i]).statistic - pearsonr(H[i], E[i]).statistic for i in idx]
            return np.percentile(d, [2.5, 97.5])
        t_peer, ci = timed(peer, repeat=1, warmup=0)
        rows.append(Row('rationality gap, 1,000-sample bootstrap CI', f'{n} problems', t_ours, t_peer,
                        float(np.max(np.abs(np.array(g['gap_ci']) - ci))), peer_name='scipy.stats.pearsonr loop'))
    return rows


if __name__ == '__main__':
    ap = argparse.ArgumentParser()
    ap.add_argument('--full', action='store_true', help='no iteration cap (minutes)')
    args = ap.parse_args()
    t0 = time.time()
    print(table(fit_rows((100, 1000, 10_000), 200 if args.full else 5), title='Fitting the zoo'))
    print(table(gap_rows((500, 2000, 10_000)), title='Rationality gap with a bootstrap interval', unit='ms'))
    print(f'\n(total {time.time() - t0:.0f} s)')
