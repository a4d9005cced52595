"""Benchmark: our Bures / full-GP W2 against POT (`ot.gaussian`) on the same Gaussians, and the cost of causal OT
as N and T grow.

    python benchmarks/noisy_trajectories.py [--quick]

All times are CPU seconds of this process (`clock='cpu'`). Rows of ours against ours (the previous code, the
plain alternation) are `kind='cost'`; POT's rows are peers. Prints these tables: (1) time and agreement of our squared Bures distance vs POT's `bures_wasserstein_distance`
(POT returns W; we compare W²), for plain covariances and for the NT-dimensional Gaussians of two Gaussian processes
at a fixed alignment; (2) one causal-OT alternating iteration (P-step + Q-step) of `AlternatingAligner` (block
columns stored once, N × kN layout) against the same iteration written with dense NT × NT factors (the previous
implementation, kept here as the reference) and, as a scale reference since no public library implements causal OT,
POT's full W2 between the same NT-dimensional Gaussians; (3) whole fits to the same tolerance, accelerated (the
default: Anderson's extrapolation, then the over-relaxed step) against the plain alternation and against the over-
relaxed step alone (the previous default, `accelerate='relax'`);
(4) the whole causal-OT fit from the two covariances (block Cholesky factors, aligner, accelerated fit to tol 1e-10)
against POT's full Gaussian W2 from the same covariances, in CPU seconds of this process (`clock='cpu'`, so that
another job's time slices on this shared machine do not count), N = T = 25 (7 paired rounds) and N = T = 50 (one
call each: POT takes 13-30 CPU seconds there), also with --quick. A scale reference, not a race on the same task:
POT fits no alignment and runs once (two eigendecompositions of NT x NT), the causal fit alternates tens of times to
tol 1e-10 (`max_iter=2000`, never reached here; the iteration count is in the row); issue 47's goal is at most
0.15 x POT's time at N = T = 50.
"""
import argparse
import math

import numpy as np

from _timing import Row, markdown, paired, spread, table, time_call, timed
from iclr25_nb.noisy_trajectories import (AlternatingAligner, GaussianProcessSummary, block_cholesky, bures_sq,
                                          objective_at)


def random_cov(n, rng):
    W = rng.standard_normal((n, n)) / math.sqrt(n)
    return W @ W.T + 0.1 * np.eye(n)


def random_gp(T, N, rng):
    return GaussianProcessSummary(rng.standard_normal((T, N)), random_cov(T * N, rng), check=False)


def dense_iteration(Lx, Ly, mx, my, Q, alpha=1.0):
    """One plain causal-OT iteration with dense NT × NT block-Cholesky factors and Q̄ = I_T ⊗ Q applied to all of L_y
    (the implementation before the block-column layout): (objective at Q, next Q)."""
    T, N = mx.shape; R = Lx.shape[0]; a = alpha
    G = (Q @ Ly.reshape(T, N, -1)).reshape(R, -1)
    K = Lx.reshape(R, T, N).transpose(1, 2, 0) @ G.reshape(R, T, N).transpose(1, 0, 2)
    U, S, Vt = np.linalg.svd(K)
    obj = a * ((mx - my @ Q.T) ** 2).sum() + (2 - a) * ((Lx ** 2).sum() + (Ly ** 2).sum() - 2 * S.sum())
    P = np.swapaxes(Vt, -1, -2) @ np.swapaxes(U, -1, -2)
    FyP = (Ly.reshape(R, T, N).transpose(1, 0, 2) @ P).transpose(1, 0, 2).reshape(R, -1)
    rows = lambda F: F.reshape(T, N, -1).transpose(1, 0, 2).reshape(N, -1)
    U, _, Vt = np.linalg.svd(a * mx.T @ my + (2 - a) * rows(Lx) @ rows(FyP).T)
    return obj, U @ Vt


def main(quick: bool = False):
    try:
        import ot
    except ImportError as e:
        ot = e
    rng = np.random.default_rng(0)
    rows, spreads = [], []
    for n in (50, 200, 500):
        A, B = random_cov(n, rng), random_cov(n, rng)
        m0 = np.zeros(n)
        ours_fn = lambda: bures_sq(A, B)
        if isinstance(ot, ImportError):
            rows.append(Row.skipped('Bures W², covariances', f'dim {n}', timed(ours_fn, repeat=7)[0], 'POT', ot)); continue
        pot_fn = lambda: ot.gaussian.bures_wasserstein_distance(m0, m0, A, B) ** 2
        med, ts = paired({'ours': ours_fn, 'POT': pot_fn}, 15, clock='cpu')   # interleaved: a load drift hits both alike
        rows.append(Row('Bures W², covariances', f'dim {n}', med['ours'], med['POT'], float(abs(ours_fn() - pot_fn())),
                        'POT bures_wasserstein_distance²'))
        spreads.append(('Bures W²', f'dim {n}', spread(ts, 'ours', 'POT')))
    for T, N in ((10, 10), (20, 10), (20, 25)):
        x, y = random_gp(T, N, rng), random_gp(T, N, rng)
        task, size = 'full-GP W² at Q = I', f'T={T}, N={N} (dim {T * N})'
        ours_fn = lambda: objective_at(x, y, np.eye(N), 'w2')
        if isinstance(ot, ImportError):
            rows.append(Row.skipped(task, size, timed(ours_fn, repeat=7)[0], 'POT', ot)); continue
        pot_fn = lambda: ot.gaussian.bures_wasserstein_distance(x.mean.ravel(), y.mean.ravel(), x.cov, y.cov) ** 2
        med, ts = paired({'ours': ours_fn, 'POT': pot_fn}, 15, clock='cpu')
        rows.append(Row(task, size, med['ours'], med['POT'], float(abs(ours_fn() - pot_fn())), 'POT bures_wasserstein_distance²'))
        spreads.append((task, size, spread(ts, 'ours', 'POT')))
    print(table(rows, 'Bures / W2: ours vs POT (same Gaussians, same run)', unit='ms', agreement='abs diff of W²'))
    print()
    print(markdown(['task', 'size', 'ours / POT: median [quartiles] of 15 paired calls'], spreads, 'Bures / W2 ratio spread'))

    it_rows, pot_rows, fits = [], [], []
    sizes = ((10, 10), (10, 25), (25, 25), (50, 50)) if quick else ((5, 10), (10, 10), (10, 25), (25, 25), (50, 25), (25, 50), (50, 50))
    for N, T in sizes:
        x, y = random_gp(T, N, rng), random_gp(T, N, rng)
        t_chol = time_call(lambda: (block_cholesky(x.cov, N), block_cholesky(y.cov, N)), repeat=1, warmup=0)
        Lx, Ly = x.cholesky_blocks(), y.cholesky_blocks()                   # fill the caches the aligner uses
        al = AlternatingAligner(x, y, 'causal')
        Q0 = np.linalg.qr(np.random.default_rng(N * T).standard_normal((N, N)))[0]
        def iteration():
            obj, _, P = al.evaluate(Q0); return obj, al.update(Q0, P)
        size = f'N={N}, T={T} (NT={N * T})'
        n_rep = 1 if N * T > 1500 else 5
        t_it, (obj, Q1) = timed(iteration, repeat=max(n_rep, 3), clock='cpu')
        t_dense, (obj_d, Q1_d) = timed(lambda: dense_iteration(Lx, Ly, x.mean, y.mean, Q0), repeat=n_rep, warmup=int(n_rep > 1),
                                       clock='cpu')
        agree = max(abs(obj - obj_d) / max(1.0, obj_d), float(np.abs(Q1 - Q1_d).max()))
        it_rows.append(Row('causal OT, one iteration', size, t_it, t_dense, agree, 'dense NT×NT factors (previous code)', kind='cost'))
        if isinstance(ot, ImportError): pot_rows.append(Row.skipped('causal OT, one iteration', size, t_it, 'POT', ot))
        elif quick and N * T > 1500:
            pot_rows.append(Row.skipped('causal OT, one iteration', size, t_it, 'POT full W2 (scale reference)',
                                        'not in --quick (13-30 CPU s at NT=2500; the whole-fit table below has it)'))
        else:
            t_pot = time_call(lambda: ot.gaussian.bures_wasserstein_distance(x.mean.ravel(), y.mean.ravel(), x.cov, y.cov),
                              repeat=n_rep, warmup=int(n_rep > 1), clock='cpu')
            pot_rows.append(Row('causal OT, one iteration', size, t_it, t_pot, None, 'POT full W2 (scale reference)'))
        if quick and N * T > 1500: continue
        t_fast, r_fast = timed(lambda: al.fit(max_iter=2000), repeat=1, warmup=0, clock='cpu')
        t_plain, r_plain = timed(lambda: al.fit(max_iter=2000, accelerate=False), repeat=1, warmup=0, clock='cpu')
        t_relax, r_relax = timed(lambda: al.fit(max_iter=2000, accelerate='relax'), repeat=1, warmup=0, clock='cpu')
        its = lambda r: f'{len(r.loss_history)}' + (' (the cap: unconverged)' if len(r.loss_history) == 2000 else '')
        fits.append(Row('causal OT fit to tol 1e-10', f'{size}: {its(r_fast)} vs {its(r_plain)} iterations',
                        t_fast, t_plain, (r_fast.squared - r_plain.squared) / max(1.0, r_plain.squared), 'plain alternation',
                        kind='cost'))
        fits.append(Row('causal OT fit to tol 1e-10', f'{size}: {its(r_fast)} vs {its(r_relax)} iterations',
                        t_fast, t_relax, (r_fast.squared - r_relax.squared) / max(1.0, r_relax.squared),
                        "over-relaxed step alone (previous default)", kind='cost'))
        print(f'{size}: block Cholesky x2 {t_chol:.3g} s', flush=True)
    print()
    print(table(it_rows, 'Causal OT: one alternating iteration, block columns vs dense factors (same Q, same run)',
                agreement='rel. obj diff / max |ΔQ|'))
    print()
    print(table(pot_rows, 'Causal OT iteration vs POT full W2 at the same NT (scale reference; no peer implements causal OT)'))
    print()
    print(table(fits, 'Causal OT: accelerated fit vs the plain alternation and the over-relaxed step (same start, same tolerance)',
                ours='accelerated', agreement='(accel − other) / max(1, other) objective'))
    print()
    print(table(fit_vs_pot(ot, quick), 'Causal OT: the whole fit from the covariances vs POT full W2 (CPU seconds, scale reference)',
                ours='causal OT fit', agreement='iterations; ratio median [quartiles]'))
    print('\nours / peer below 1: ours is faster; median of the repeats after one warm-up (NT > 1500: one call); '
          'a negative objective difference means the accelerated fit ended lower')


def fit_vs_pot(ot, quick: bool) -> list:
    "Rows of the whole causal-OT fit (Cholesky factors included) against POT's full W2 on the same covariances."
    rows, rng = [], np.random.default_rng(47)
    for N, T, rounds in ((25, 25, 7), (50, 50, 1)):
        x, y = random_gp(T, N, rng), random_gp(T, N, rng)
        def ours():                                                     # fresh summaries: no cached factors
            xs, ys = (GaussianProcessSummary(s.mean, s.cov, check=False) for s in (x, y))
            return AlternatingAligner(xs, ys, 'causal').fit(max_iter=2000)
        size = f'N={N}, T={T} (NT={N * T})'
        if isinstance(ot, ImportError):
            rows.append(Row.skipped('causal OT fit vs full W2', size, time_call(ours, 1, 0, 'cpu'), 'POT', ot)); continue
        pot = lambda: ot.gaussian.bures_wasserstein_distance(x.mean.ravel(), y.mean.ravel(), x.cov, y.cov)
        med, ts = paired({'ours': ours, 'POT': pot}, rounds, warmup=0, clock='cpu')
        rows.append(Row('causal OT fit vs full W2', size, med['ours'], med['POT'],
                        f'{len(ours().loss_history)} iterations; ratio {spread(ts, "ours", "POT")}',
                        'POT full W2 (scale reference: one distance, no alignment)'))
    return rows


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='fewer sizes; N = T = 50 iteration only, no fit there')
    main(ap.parse_args().quick)
