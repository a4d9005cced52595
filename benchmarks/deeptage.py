"""DeepTAGE benchmark: our multi-step LIF layer against spikingjelly (torch backend, multi-step) and snntorch
(`Leaky` stepped in a Python loop) on the same (T, batch, neurons) tensors, forward + backward, with the time ratio
and spike agreement; and the training-step overhead of DeepTAGE (TASG + deep supervision) over TET on the same net.
Rows against spikingjelly and snntorch are `kind='peer'` (the race); the TASG overhead, the step-by-step reference and
the training steps of TET / TASG / DS / DeepTAGE are ours against ours, `kind='cost'`.

    python benchmarks/deeptage.py [--repeats 30] [--threads 1] [--no-training]
"""
import argparse

import torch

from _timing import Row, markdown, paired, spread, table, time_call
from iclr25_nb import deeptage as dt


SIZES = ((4, 32, (16, 8, 8)), (6, 64, (32, 8, 8)), (8, 64, (64, 8, 8)), (8, 128, (4096,)))
"(T, batch, neuron shape) of the LIF comparison: conv-like feature maps of three sizes and one wide dense layer."


def _peer_layers():
    "name -> (layer callable on (T, B, ...), reset or None) for each installed peer; skipped peers -> reason."
    peers, skipped = {}, {}
    try:
        from spikingjelly.activation_based import neuron, surrogate, functional
    except ImportError as e:
        skipped['spikingjelly LIFNode (m, torch)'] = e
    else:
        sj = neuron.LIFNode(tau=2.0, decay_input=False, v_threshold=1.0, v_reset=0.0,
                            surrogate_function=surrogate.ATan(alpha=2.0), step_mode='m')
        peers['spikingjelly LIFNode (m, torch)'] = (sj, functional.reset_net)
    try:
        import snntorch as snn
        from snntorch import surrogate as ssur
    except ImportError as e:
        skipped['snntorch Leaky (Python loop)'] = e
    else:
        leaky = snn.Leaky(beta=0.5, threshold=1.0, spike_grad=ssur.atan(alpha=2.0), reset_mechanism='zero')

        def loop(x):
            mem, out = leaky.init_leaky(), []
            for t in range(x.shape[0]):
                s, mem = leaky(x[t], mem); out.append(s)
            return torch.stack(out)
        peers['snntorch Leaky (Python loop)'] = (loop, None)
    return peers, skipped


def lif_peers(sizes=SIZES, repeats=30):
    """Forward + backward of the same (T, B, N) input through our `LIFLayer` (the fused `MultiStepLIF` path, the
    documented one) and each peer, timed with `paired` (`repeats` rounds, every function once a round): the rows give
    the medians, the spread table median [quartiles] of the paired ratios."""
    peers, skipped = _peer_layers()
    rows, spreads = [], []
    for T, B, shape in sizes:
        torch.manual_seed(0)
        x0 = torch.randn(T, B, *shape) * 1.5
        g = torch.randn_like(x0)
        task, size = 'LIF forward+backward', f"T={T}, B={B}, {'x'.join(map(str, shape))} neurons"

        def run(layer, reset=None):
            def f():
                x = x0.clone().requires_grad_(True)
                s = layer(x)
                (s * g).sum().backward()
                if reset: reset(layer)
                return s
            return f
        ours = dt.LIFLayer(tau=2.0, v_th=1.0, surrogate='atan', width=1.0)
        ours_tasg = dt.LIFLayer(tau=2.0, v_th=1.0, surrogate='atan', width=1.0, temporal_align=True, w=0.25)
        stepwise = lambda x: ours.forward_stepwise(x)
        with torch.no_grad(): spikes = ours(x0); s_step = ours.forward_stepwise(x0)
        fns = {'ours': run(ours), 'ours TASG': run(ours_tasg), 'ours stepwise': run(stepwise),
               **{k: run(l, r) for k, (l, r) in peers.items()}}
        med, ts = paired(fns, repeats)                                  # interleaved: load drifts hit all alike
        ratio = lambda k: spread(ts, 'ours', k)
        agree = lambda s: f"{100 * (s == spikes).float().mean().item():.2f}% spikes"
        rows.append(Row(task + ', TASG w=0.25', size, med['ours TASG'], med['ours'], None, 'ours, fixed ATan (TASG overhead)',
                        kind='cost'))
        rows.append(Row(task, size, med['ours'], med['ours stepwise'], agree(s_step), 'ours, step-by-step autograd (before)',
                        kind='cost'))
        spreads.append((size, 'ours step-by-step', ratio('ours stepwise')))
        for k, (l, r) in peers.items():
            with torch.no_grad():
                s_p = l(x0)
                if r: r(l)
            rows.append(Row(task, size, med['ours'], med[k], agree(s_p), k))
            spreads.append((size, k, ratio(k)))
        for k, e in skipped.items(): rows.append(Row.skipped(task, size, med['ours'], k, e))
    return rows, spreads


def training_overhead(repeats=10):
    "One optimiser step of each variant on the same quick-preset net; TET is the baseline row."
    t = {}
    for v in ('TET', 'TASG', 'DS', 'DeepTAGE'):
        exp = dt.make_experiment('quick', 0, variant=v, steps=10 ** 6)
        t[v] = time_call(exp.step, repeats)
    size = 'quick preset: depth 10, 16 ch, T=4, batch 64'
    return [Row(f'training step, {v}', size, t[v], t['TET'], None, 'TET (same net)', kind='cost') for v in t]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeats', type=int, default=30)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--no-training', action='store_true')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}; median of {a.repeats} after 1 warm-up\n")
    rows, spreads = lif_peers(repeats=a.repeats)
    print(table(rows, 'LIF layer: ours (fixed ATan, fused MultiStepLIF) vs peers', unit='ms',
                agreement='spike agreement with ours'))
    print()
    print(markdown(['size', 'peer', f'ours / peer: median [quartiles] of {a.repeats} paired calls'], spreads, 'LIF ratio spread'))
    if a.no_training: return
    print()
    print(table(training_overhead(max(3, a.repeats // 2)), 'DeepTAGE training-step overhead over TET', unit='ms'))
    print('\nours / peer below 1: ours is faster; in the training table the ratio is the overhead over TET')


if __name__ == '__main__':
    main()
