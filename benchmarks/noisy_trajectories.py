"""Benchmark: our Bures / full-GP W2 against POT (`ot.gaussian`) on the same Gaussians, and the cost of causal OT
as N and T grow.

    python benchmarks/noisy_trajectories.py [--quick]

Prints two tables: (1) time and agreement of our squared Bures distance vs POT's `bures_wasserstein_distance`
(POT returns W; we compare W²), for plain covariances and for the NT-dimensional Gaussians of two Gaussian processes
at a fixed alignment; (2) seconds for the block Cholesky factors and per alternating iteration of `causal_ot`.
"""
import argparse
import math
import time

import numpy as np

from iclr25_nb.noisy_trajectories import GaussianProcessSummary, bures_sq, objective_at, causal_ot, AlternatingAligner


def best_time(fn, repeat=3):
    "Best wall-clock seconds of `repeat` calls, and the last result."
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter(); out = fn(); best = min(best, time.perf_counter() - t0)
    return best, out


def random_cov(n, rng):
    W = rng.standard_normal((n, n)) / math.sqrt(n)
    return W @ W.T + 0.1 * np.eye(n)


def random_gp(T, N, rng):
    return GaussianProcessSummary(rng.standard_normal((T, N)), random_cov(T * N, rng))


def main(quick: bool = False):
    import ot
    rng = np.random.default_rng(0)
    print('## Bures / W2: ours vs POT (same Gaussians, same run)\n')
    print('| case | dim | ours (s) | POT (s) | ours / POT | max abs diff of W² |')
    print('|---|---|---|---|---|---|')
    for n in ((50, 200) if quick else (50, 200, 500)):
        A, B = random_cov(n, rng), random_cov(n, rng)
        m0 = np.zeros(n)
        t_ours, ours = best_time(lambda: bures_sq(A, B))
        t_pot, pot = best_time(lambda: ot.gaussian.bures_wasserstein_distance(m0, m0, A, B) ** 2)
        print(f'| Bures, covariances | {n} | {t_ours:.4f} | {t_pot:.4f} | {t_ours / t_pot:.2f} | {abs(ours - pot):.2e} |')
    for T, N in ((10, 10),) if quick else ((10, 10), (20, 10)):
        x, y = random_gp(T, N, rng), random_gp(T, N, rng)
        t_ours, ours = best_time(lambda: objective_at(x, y, np.eye(N), 'w2'))
        t_pot, pot = best_time(lambda: ot.gaussian.bures_wasserstein_distance(x.mean.ravel(), y.mean.ravel(), x.cov, y.cov) ** 2)
        print(f'| full-GP W2 at Q = I (T={T}, N={N}) | {T * N} | {t_ours:.4f} | {t_pot:.4f} | {t_ours / t_pot:.2f} | {abs(ours - pot):.2e} |')
    print('\n## Causal OT cost as N and T grow (no peer implements it)\n')
    print('| N | T | NT | block Cholesky x2 (s) | per iteration (s) | iterations | fit (s) |')
    print('|---|---|---|---|---|---|---|')
    sizes = ((5, 10), (10, 10), (10, 25), (25, 25)) if quick else ((5, 10), (10, 10), (10, 25), (25, 25), (50, 25), (25, 50), (50, 50))
    for N, T in sizes:
        x, y = random_gp(T, N, rng), random_gp(T, N, rng)
        t0 = time.perf_counter(); x.cholesky_blocks(); y.cholesky_blocks(); t_chol = time.perf_counter() - t0
        al = AlternatingAligner(x, y, 'causal')
        Q = np.eye(N)
        t0 = time.perf_counter()
        for _ in range(5):
            _, _, P = al.evaluate(Q); Q = al.update(Q, P)
        t_it = (time.perf_counter() - t0) / 5
        t0 = time.perf_counter(); r = causal_ot(x, y, max_iter=50); t_fit = time.perf_counter() - t0
        print(f'| {N} | {T} | {N * T} | {t_chol:.3f} | {t_it:.4f} | {len(r.loss_history)} | {t_fit:.2f} |')


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='smaller sizes')
    main(ap.parse_args().quick)
