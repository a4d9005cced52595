"""NetFormer benchmark: our batched VAR / ridge against scikit-learn on the same data (agreement and time), and
NetFormer training throughput on the connectivity-constrained network.

    python benchmarks/netformer.py [--n 200] [--steps 30000] [--repeats 3] [--train-steps 5] [--quick]

`--quick`: N = 100 neurons, T = 10,000 steps, 2 repeats (run_all's table).
"""
import argparse

import numpy as np
import torch

from _timing import Row, markdown, table, time_call, timed
from iclr25_nb.netformer import NetFormer, connectivity_constrained, make_windows, ridge_var


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=200)
    ap.add_argument('--steps', type=int, default=30_000)
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--train-steps', type=int, default=5)
    ap.add_argument('--quick', action='store_true', help='N=100, T=10000, 2 repeats')
    a = ap.parse_args()
    if a.quick: a.n, a.steps, a.repeats = 100, 10_000, 2
    try:
        from sklearn.linear_model import LinearRegression, Ridge
        sk = None
    except ImportError as e:
        sk = e

    x, W, types = connectivity_constrained(a.n, a.steps, 3.5, seed=0)
    rows = []
    size = f'N={a.n}, T={a.steps}'
    for lags, alpha in ((1, 0.0), (3, 0.0), (3, 10.0)):
        task = f'VAR fit, lags={lags}, ridge alpha={alpha:g}'
        t_ours, (B, c) = timed(lambda: ridge_var(x, lags, alpha), a.repeats)
        if sk is not None:
            rows.append(Row.skipped(task, size, t_ours, 'scikit-learn', sk)); continue
        X = np.concatenate([x[lags - l:len(x) - l] for l in range(1, lags + 1)], 1).astype(np.float64)
        Y = x[lags:].astype(np.float64)
        est = LinearRegression() if alpha == 0 else Ridge(alpha=alpha)
        t_sk, est = timed(lambda: est.fit(X, Y), a.repeats)
        ours = np.concatenate(list(B), 1)
        agree = f'coef {np.abs(ours - est.coef_).max():.1e}, intercept {np.abs(c - est.intercept_).max():.1e}'
        rows.append(Row(task, size, t_ours, t_sk, agree, type(est).__name__))
    print(table(rows, 'NetFormer: batched VAR / ridge vs scikit-learn (connectivity-constrained network)',
                agreement='max abs diff'))

    # training throughput: the paper's connectivity-constrained model shape with a shorter window (no peer)
    thr = []
    for H, bs in ((20, 64), (99, 32)):
        tok, tgt = make_windows(x[:4000], H)
        torch.manual_seed(0)
        m = NetFormer(a.n, H, a.n, layernorm=True)
        opt = torch.optim.Adam(m.parameters(), 1e-3)
        g = torch.Generator().manual_seed(0)
        def step():
            idx = torch.randint(0, len(tok), (bs,), generator=g)
            p, _ = m(tok[idx]); loss = ((p - tgt[idx]) ** 2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
        t = time_call(step, a.train_steps, warmup=2)
        thr.append((f'N={a.n}, H={H}, d_E={a.n}', bs, 1e3 * t, bs / t))
    print(f'\n## NetFormer training step (torch {torch.__version__}, CPU, median of {a.train_steps} after 2 warm-up)\n')
    print(markdown(['model', 'batch', 'ms / step', 'samples / s'], thr))


if __name__ == '__main__':
    main()
