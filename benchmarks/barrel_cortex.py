"""Barrel-cortex benchmark: our recurrent ALIF network step against snntorch and spikingjelly LIF loops, and the
dense vs sparse recurrent matmul crossover.

1. Forward of the masked recurrent network for T steps (no gradient), adaptation off (beta = 0) so that a LIF peer
   does the same work: ours (`alif_step` + one masked matmul per step, dense; also with CSR weights) vs snntorch `Leaky` (subtractive reset; the
   spikes must agree exactly) and spikingjelly `LIFNode` (soft reset; its reset is subtracted before the leak, so
   the spikes differ slightly: the agreement column says how much) with the same recurrent weights.
2. One recurrent matmul s @ W at the anatomical density (about 7 %) for dense and CSR/COO sparse weights, at
   scales 0.05 to 1 (213 to 4,218 neurons).

The forward loops are timed paired (each round runs ours and both peers once: a load drift hits all alike); a
table gives median [quartiles] of the paired ratios.

Run: python benchmarks/barrel_cortex.py [--scales 0.05 0.25 0.5] [--steps 110] [--batch 32] [--repeats 10] [--threads 1]
"""
import argparse
import warnings
import math

import torch

from _timing import Row, markdown, paired, spread, table, timed


def network(scale, seed=0):
    from iclr25_nb.barrel_cortex import BarrelRSNN
    net = BarrelRSNN(scale, seed=seed)
    W, _ = net.effective_weights()
    return net, W.detach()


def ours_loop(W, I, tau=10.0, b0=0.04, sparse=False):
    "Our forward; `sparse`: the recurrent weights as a CSR matrix (BarrelRSNN(sparse=True)), else dense."
    from iclr25_nb.barrel_cortex import alif_step
    n = W.shape[0]
    Wt = W.t().to_sparse_csr() if sparse else None
    rec = (lambda s: (Wt @ s.t()).t()) if sparse else (lambda s: s @ W)
    tm, ta = torch.full((n,), tau), torch.full((n,), 5.0)
    v = a = s = torch.zeros(I.shape[1], n); out = []
    with torch.no_grad():
        for t in range(I.shape[0]):
            v, a, s, _ = alif_step(v, a, s, I[t] + rec(s), tm, ta, b0=b0, beta=0.0)
            out.append(s)
    return torch.stack(out)


def snntorch_loop(W, I, tau=10.0, b0=0.04):
    import snntorch as snn
    alpha = math.exp(-1 / tau)
    lif = snn.Leaky(beta=alpha, threshold=b0, reset_mechanism='subtract')
    mem = torch.zeros(I.shape[1], W.shape[0]); s = torch.zeros_like(mem); out = []
    with torch.no_grad():
        for t in range(I.shape[0]):
            s, mem = lif((1 - alpha) * (I[t] + s @ W), mem)
            out.append(s)
    return torch.stack(out)


def spikingjelly_loop(W, I, tau=10.0, b0=0.04):
    from spikingjelly.activation_based import neuron
    alpha = math.exp(-1 / tau)
    node = neuron.LIFNode(tau=1 / (1 - alpha), v_threshold=b0, v_reset=None, step_mode='s')
    s = torch.zeros(I.shape[1], W.shape[0]); out = []
    with torch.no_grad():
        for t in range(I.shape[0]):
            s = node(I[t] + s @ W)
            out.append(s)
    node.reset()
    return torch.stack(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--scales', type=float, nargs='+', default=[0.05, 0.25, 0.5])
    ap.add_argument('--steps', type=int, default=110)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--repeats', type=int, default=10)
    ap.add_argument('--threads', type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}\n")
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
    torch.manual_seed(0)
    rows, spreads = [], []
    for sc in args.scales:
        net, W = network(sc)
        n = W.shape[0]
        I = 0.6 * torch.rand(args.steps, args.batch, n)
        size = f'N={n}, T={args.steps}, B={args.batch}'
        ours = {'ours (dense W)': lambda: ours_loop(W, I), 'ours (CSR W)': lambda: ours_loop(W, I, sparse=True)}
        peers = {}
        for name, fn in (('snntorch', snntorch_loop), ('spikingjelly', spikingjelly_loop)):
            try: fn(W, I[:1]); peers[name] = (lambda fn=fn: fn(W, I))
            except ImportError as e: rows.append(Row.skipped('recurrent LIF forward', size, math.nan, name, e))
        med, ts = paired({**ours, **peers}, args.repeats)
        s_ours = ours_loop(W, I)
        for name, fn in peers.items():
            agree = f'{100 * (fn() == s_ours).float().mean():.2f}% spikes'
            for k in ours:
                rows.append(Row(f'recurrent LIF forward, {k}', size, med[k], med[name], agree, peer_name=name))
                spreads.append((size, k, name, spread(ts, k, name)))
    print(table(rows, 'ALIF network forward (beta = 0) vs LIF peers'))
    print()
    print(markdown(['size', 'ours', 'peer', f'ours / peer: median [quartiles] of {args.repeats} paired calls'], spreads,
                   'ALIF forward ratio spread'))
    rows = []
    for sc in sorted(set(args.scales) | {1.0}):
        net, W = network(sc)
        n = W.shape[0]
        s = (torch.rand(args.batch, n) < 0.1).float()
        Ws = W.t().to_sparse_csr()
        t_dense, y_dense = timed(lambda: s @ W, 10 * args.repeats)
        t_sparse, y_sparse = timed(lambda: (Ws @ s.t()).t(), 10 * args.repeats)
        rows.append(Row('s @ W, one step', f'N={n}, density {float((W != 0).float().mean()):.3f}', t_sparse,
                        t_dense, float((y_dense - y_sparse).abs().max()), peer_name='dense torch (ours: CSR)'))
    print()
    print(table(rows, 'recurrent matmul: sparse CSR (ours) vs dense', unit='ms'))


if __name__ == '__main__':
    main()
