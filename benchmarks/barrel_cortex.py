"""Barrel-cortex benchmark: our recurrent ALIF network step against snntorch and spikingjelly LIF loops, and the
dense vs sparse recurrent matmul crossover.

1. Forward of the masked recurrent network for T steps (no gradient), adaptation off (beta = 0) so that a LIF peer
   does the same work: ours is the model's own no-gradient path (`alif_decay` once, the in-place `alif_step_`, and
   `rec_product(W, 'auto')`: dense below 400 presynaptic neurons, CSR of W^T above, at 7 % density) against snntorch
   `Leaky` (subtractive reset; with the dense product the spikes agree exactly) and spikingjelly `LIFNode` (soft
   reset; its reset is subtracted before the leak, so the spikes differ slightly: the agreement column says how
   much), with the same recurrent weights. Cost rows (ours against ours): the previous per-step `alif_step` loop, and
   the dense and CSR products forced.
2. One recurrent matmul s @ W at the anatomical density (about 7 %), CSR against dense (both ours: the crossover that
   sets `SPARSE_MIN_N`), at scales 0.05 to 1 (213 to 4,218 neurons).

Every timing is paired (each round runs every variant once, so a load drift hits all alike) and in CPU seconds of
this process (`clock='cpu'`, which the load of a shared machine does not inflate); a table gives median [quartiles]
of the paired ratios.

Run: python benchmarks/barrel_cortex.py [--scales 0.05 0.25 0.5] [--steps 110] [--batch 32] [--repeats 10] [--threads 1]
"""
import argparse
import warnings
import math

import torch

from _timing import Row, markdown, paired, spread, table


def network(scale, seed=0):
    from iclr25_nb.barrel_cortex import BarrelRSNN
    net = BarrelRSNN(scale, seed=seed)
    W, _ = net.effective_weights()
    return net, W.detach()


def ours_loop(W, I, tau=10.0, b0=0.04, sparse='auto'):
    "Our forward, the model's no-gradient path; `sparse`: True (CSR), False (dense) or 'auto' (as `BarrelRSNN`)."
    from iclr25_nb.barrel_cortex import alif_decay, alif_step_, rec_product
    n = W.shape[0]
    rec = rec_product(W, sparse)
    dec = alif_decay(torch.full((n,), tau), torch.full((n,), 5.0))
    v, a, s = torch.zeros(I.shape[1], n), torch.zeros(I.shape[1], n), torch.zeros(I.shape[1], n)
    out = []
    with torch.no_grad():
        for t in range(I.shape[0]):
            v, a, s, _ = alif_step_(v, a, s, rec(s).add_(I[t]), dec, b0=b0, beta=0.0)
            out.append(s)
    return torch.stack(out)


def previous_loop(W, I, tau=10.0, b0=0.04):
    "The loop before issue 47: `alif_step` (decays recomputed every step, out of place) and a dense product."
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
        from iclr25_nb.barrel_cortex import SPARSE_MIN_N
        auto = 'CSR' if n >= SPARSE_MIN_N else 'dense'
        ours = {'ours': lambda: ours_loop(W, I), 'ours (dense W)': lambda: ours_loop(W, I, sparse=False),
                'ours (CSR W)': lambda: ours_loop(W, I, sparse=True), 'ours (previous alif_step loop)':
                lambda: previous_loop(W, I)}
        peers = {}
        for name, fn in (('snntorch', snntorch_loop), ('spikingjelly', spikingjelly_loop)):
            try: fn(W, I[:1]); peers[name] = (lambda fn=fn: fn(W, I))
            except ImportError as e: rows.append(Row.skipped('recurrent LIF forward', size, math.nan, name, e))
        med, ts = paired({**ours, **peers}, args.repeats, clock='cpu')
        s_ours, s_dense, s_prev = ours_loop(W, I), ours_loop(W, I, sparse=False), previous_loop(W, I)
        assert torch.equal(s_dense, s_prev), 'the in-place step must equal alif_step bit for bit'
        for name, fn in peers.items():
            s_peer = fn()
            agree = (f'{100 * (s_peer == s_ours).float().mean():.2f}% spikes (dense: '
                     f'{100 * (s_peer == s_dense).float().mean():.2f}%)')
            rows.append(Row(f'recurrent LIF forward, ours ({auto} W, chosen)', size, med['ours'], med[name], agree,
                            peer_name=name))
            spreads.append((size, f'ours ({auto})', name, spread(ts, 'ours', name)))
        for k in ('ours (dense W)', 'ours (CSR W)'):
            rows.append(Row(f'recurrent LIF forward, {k}', size, med[k], med['ours (previous alif_step loop)'],
                            f"{100 * (ours_loop(W, I, sparse=k == 'ours (CSR W)') == s_prev).float().mean():.2f}% spikes",
                            peer_name='ours (previous alif_step loop)', kind='cost'))
            spreads.append((size, k, 'ours (previous loop)', spread(ts, k, 'ours (previous alif_step loop)')))
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
        med, _ = paired({'dense': lambda: s @ W, 'csr': lambda: (Ws @ s.t()).t()}, 10 * args.repeats, clock='cpu')
        y_dense, y_sparse = s @ W, (Ws @ s.t()).t()
        rows.append(Row('s @ W, one step', f'N={n}, density {float((W != 0).float().mean()):.3f}', med['csr'],
                        med['dense'], float((y_dense - y_sparse).abs().max()), peer_name='ours, dense (ours: CSR)',
                        kind='cost'))
    print()
    print(table(rows, 'recurrent matmul: sparse CSR vs dense (both ours: the crossover)', unit='ms'))


if __name__ == '__main__':
    main()
