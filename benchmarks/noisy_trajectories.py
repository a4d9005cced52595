"""Benchmark: our Bures / full-GP W2 against POT (`ot.gaussian`) on the same Gaussians, and the cost of causal OT
as N and T grow.

    python benchmarks/noisy_trajectories.py [--quick]

Prints two tables: (1) time and agreement of our squared Bures distance vs POT's `bures_wasserstein_distance`
(POT returns W; we compare W²), for plain covariances and for the NT-dimensional Gaussians of two Gaussian processes
at a fixed alignment; (2) seconds for the block Cholesky factors and per alternating iteration of `causal_ot`.
"""
import argparse
import math

import numpy as np

from _timing import Row, markdown, table, time_call, timed
from iclr25_nb.noisy_trajectories import (AlternatingAligner, GaussianProcessSummary, block_cholesky, bures_sq,
                                          causal_ot, objective_at)


def random_cov(n, rng):
    W = rng.standard_normal((n, n)) / math.sqrt(n)
    return W @ W.T + 0.1 * np.eye(n)


def random_gp(T, N, rng):
    return GaussianProcessSummary(rng.standard_normal((T, N)), random_cov(T * N, rng))


def main(quick: bool = False):
    try:
        import ot
    except ImportError as e:
        ot = e
    rng = np.random.default_rng(0)
    rows = []
    for n in ((50, 200) if quick else (50, 200, 500)):
        A, B = random_cov(n, rng), random_cov(n, rng)
        m0 = np.zeros(n)
        t_ours, ours = timed(lambda: bures_sq(A, B))
        if isinstance(ot, ImportError):
            rows.append(Row.skipped('Bures W², covariances', f'dim {n}', t_ours, 'POT', ot)); continue
        t_pot, pot = timed(lambda: ot.gaussian.bures_wasserstein_distance(m0, m0, A, B) ** 2)
        rows.append(Row('Bures W², covariances', f'dim {n}', t_ours, t_pot, float(abs(ours - pot)),
                        'POT bures_wasserstein_distance²'))
    for T, N in ((10, 10),) if quick else ((10, 10), (20, 10)):
        x, y = random_gp(T, N, rng), random_gp(T, N, rng)
        task, size = 'full-GP W² at Q = I', f'T={T}, N={N} (dim {T * N})'
        t_ours, ours = timed(lambda: objective_at(x, y, np.eye(N), 'w2'))
        if isinstance(ot, ImportError):
            rows.append(Row.skipped(task, size, t_ours, 'POT', ot)); continue
        t_pot, pot = timed(lambda: ot.gaussian.bures_wasserstein_distance(x.mean.ravel(), y.mean.ravel(), x.cov, y.cov) ** 2)
        rows.append(Row(task, size, t_ours, t_pot, float(abs(ours - pot)), 'POT bures_wasserstein_distance²'))
    print(table(rows, 'Bures / W2: ours vs POT (same Gaussians, same run)', unit='ms', agreement='abs diff of W²'))

    cost = []
    sizes = ((5, 10), (10, 10), (10, 25), (25, 25)) if quick else ((5, 10), (10, 10), (10, 25), (25, 25), (50, 25), (25, 50), (50, 50))
    for N, T in sizes:
        x, y = random_gp(T, N, rng), random_gp(T, N, rng)
        t_chol = time_call(lambda: (block_cholesky(x.cov, N), block_cholesky(y.cov, N)), repeat=3)
        x.cholesky_blocks(); y.cholesky_blocks()                            # fill the caches causal_ot uses
        al = AlternatingAligner(x, y, 'causal')
        Q = np.eye(N)
        def iteration():
            nonlocal Q
            _, _, P = al.evaluate(Q); Q = al.update(Q, P)
        t_it = time_call(iteration, repeat=5)
        t_fit, r = timed(lambda: causal_ot(x, y, max_iter=50), repeat=1, warmup=0)
        cost.append((N, T, N * T, t_chol, t_it, len(r.loss_history), t_fit))
    print('\n## Causal OT cost as N and T grow (no peer implements it)\n')
    print(markdown(['N', 'T', 'NT', 'block Cholesky x2 (s)', 'per iteration (s)', 'iterations', 'fit (s)'], cost))
    print('\nours / POT below 1: ours is faster; median of 5 calls after 1 warm-up (block Cholesky: of 3; fit: one run)')


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='smaller sizes')
    main(ap.parse_args().quick)
