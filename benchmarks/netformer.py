"""NetFormer benchmark: our batched VAR / ridge against scikit-learn on the same data (agreement and time), and
NetFormer training throughput on the connectivity-constrained network.

    python benchmarks/netformer.py [--n 200] [--steps 30000] [--repeats 3]
"""
import argparse
import time

import numpy as np
import torch

from iclr25_nb.netformer import NetFormer, connectivity_constrained, make_windows, ridge_var


def best_time(fn, repeats):
    ts = []
    for _ in range(repeats):
        t = time.perf_counter(); out = fn(); ts.append(time.perf_counter() - t)
    return min(ts), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=200)
    ap.add_argument('--steps', type=int, default=30_000)
    ap.add_argument('--repeats', type=int, default=3)
    ap.add_argument('--train-steps', type=int, default=5)
    a = ap.parse_args()
    from sklearn.linear_model import LinearRegression, Ridge

    x, W, types = connectivity_constrained(a.n, a.steps, 3.5, seed=0)
    rows = []
    for lags, alpha in ((1, 0.0), (3, 0.0), (3, 10.0)):
        t_ours, (B, c) = best_time(lambda: ridge_var(x, lags, alpha), a.repeats)
        X = np.concatenate([x[lags - l:len(x) - l] for l in range(1, lags + 1)], 1).astype(np.float64)
        Y = x[lags:].astype(np.float64)
        est = LinearRegression() if alpha == 0 else Ridge(alpha=alpha)
        t_sk, est = best_time(lambda: est.fit(X, Y), a.repeats)
        ours = np.concatenate(list(B), 1)
        rows.append((f'VAR lags={lags} alpha={alpha}', t_ours, t_sk, float(np.abs(ours - est.coef_).max()),
                     float(np.abs(c - est.intercept_).max())))

    print(f'# NetFormer benchmark: connectivity-constrained network, N = {a.n}, T = {a.steps}')
    print('| task | ours (s) | scikit-learn (s) | ours / sklearn | max |coef diff| | max |intercept diff| |')
    print('|---|---|---|---|---|---|')
    for name, to, ts, dc, di in rows:
        print(f'| {name} | {to:.3f} | {ts:.3f} | {to / ts:.2f} | {dc:.1e} | {di:.1e} |')

    # training throughput: the paper's connectivity-constrained model shape with a shorter window
    for H, bs in ((20, 64), (99, 32)):
        tok, tgt = make_windows(x[:4000], H)
        torch.manual_seed(0)
        m = NetFormer(a.n, H, a.n, layernorm=True)
        opt = torch.optim.Adam(m.parameters(), 1e-3)
        g = torch.Generator().manual_seed(0)
        def train(steps=a.train_steps):
            for _ in range(steps):
                idx = torch.randint(0, len(tok), (bs,), generator=g)
                p, _ = m(tok[idx]); loss = ((p - tgt[idx]) ** 2).mean()
                opt.zero_grad(); loss.backward(); opt.step()
        train(2)   # warm-up
        t, _ = best_time(train, 1)
        print(f'\nNetFormer training, N = {a.n}, H = {H}, d_E = {a.n}, batch {bs}: '
              f'{a.train_steps * bs / t:.0f} samples/s ({1e3 * t / a.train_steps:.1f} ms/step, torch {torch.__version__}, CPU)')


if __name__ == '__main__':
    main()
