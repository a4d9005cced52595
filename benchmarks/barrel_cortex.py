"""Barrel-cortex benchmark: our recurrent ALIF network step against snntorch and spikingjelly LIF loops, and the
dense vs sparse recurrent matmul crossover.

1. Forward of the masked recurrent network for T steps (no gradient), adaptation off (beta = 0) so that a LIF peer
   does the same work: ours (`alif_step` + one masked matmul per step) vs snntorch `Leaky` (subtractive reset; the
   spikes must agree exactly) and spikingjelly `LIFNode` (soft reset; its reset is subtracted before the leak, so
   the spikes differ slightly: the agreement column says how much) with the same recurrent weights.
2. One recurrent matmul s @ W at the anatomical density (about 7 %) for dense and CSR/COO sparse weights, at
   scales 0.05 to 1 (213 to 4,218 neurons).

Run: python benchmarks/barrel_cortex.py [--scales 0.05 0.25 0.5] [--steps 110] [--batch 32] [--repeats 3]
"""
import argparse
import warnings
import math

import torch

from _timing import Row, table, timed


def network(scale, seed=0):
    from iclr25_nb.barrel_cortex import BarrelRSNN
    net = BarrelRSNN(scale, seed=seed)
    W, _ = net.effective_weights()
    return net, W.detach()


def ours_loop(W, I, tau=10.0, b0=0.04):
    from iclr25_nb.barrel_cortex import alif_step
    n = W.shape[0]
    tm, ta = torch.full((n,), tau), torch.full((n,), 5.0)
    v = a = s = torch.zeros(I.shape[1], n); out = []
    with torch.no_grad():
        for t in range(I.shape[0]):
            v, a, s, _ = alif_step(v, a, s, I[t] + s @ W, tm, ta, b0=b0, beta=0.0)
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
    ap.add_argument('--repeats', type=int, default=3)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support")
    torch.manual_seed(0)
    rows = []
    for sc in args.scales:
        net, W = network(sc)
        n = W.shape[0]
        I = 0.6 * torch.rand(args.steps, args.batch, n)
        size = f'N={n}, T={args.steps}, B={args.batch}'
        t_ours, s_ours = timed(lambda: ours_loop(W, I), args.repeats)
        for name, fn in (('snntorch', snntorch_loop), ('spikingjelly', spikingjelly_loop)):
            try:
                t_peer, s_peer = timed(lambda: fn(W, I), args.repeats)
                agree = f'{100 * (s_peer == s_ours).float().mean():.2f}% spikes'
                rows.append(Row('recurrent LIF forward', size, t_ours, t_peer, agree, peer_name=name))
            except ImportError as e:
                rows.append(Row.skipped('recurrent LIF forward', size, t_ours, name, e))
    print(table(rows, 'ALIF network forward (beta = 0) vs LIF peers'))
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
