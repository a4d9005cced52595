"""DeepTAGE benchmark: our multi-step LIF layer against spikingjelly (torch backend, multi-step) and snntorch
(`Leaky` stepped in a Python loop) on the same (T, batch, neurons) tensors, forward + backward, with the time ratio
and spike agreement; and the training-step overhead of DeepTAGE (TASG + deep supervision) over TET on the same net.

    python benchmarks/deeptage.py [--repeats 20]
"""
import argparse

import torch

from _timing import Row, table, time_call
from iclr25_nb import deeptage as dt


def lif_peers(T=6, B=64, shape=(32, 8, 8), repeats=20):
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

    def agree(s):
        return f"{100 * (s == spikes).float().mean().item():.2f}% spikes"

    ours = dt.LIFLayer(tau=2.0, v_th=1.0, surrogate='atan', width=1.0)
    ours_tasg = dt.LIFLayer(tau=2.0, v_th=1.0, surrogate='atan', width=1.0, temporal_align=True, w=0.25)
    t_ours = time_call(run(ours), repeats)
    with torch.no_grad(): spikes = ours(x0)
    rows = [Row(task + ', TASG w=0.25', size, time_call(run(ours_tasg), repeats), t_ours, None,
                'ours, fixed ATan (TASG overhead)')]
    try:
        from spikingjelly.activation_based import neuron, surrogate, functional
    except ImportError as e:
        rows.append(Row.skipped(task, size, t_ours, 'spikingjelly LIFNode', e))
    else:
        sj = neuron.LIFNode(tau=2.0, decay_input=False, v_threshold=1.0, v_reset=0.0,
                            surrogate_function=surrogate.ATan(alpha=2.0), step_mode='m')
        t_sj = time_call(run(sj, functional.reset_net), repeats)
        with torch.no_grad(): s_sj = sj(x0); functional.reset_net(sj)
        rows.append(Row(task, size, t_ours, t_sj, agree(s_sj), 'spikingjelly LIFNode (m, torch)'))
    try:
        import snntorch as snn
        from snntorch import surrogate as ssur
    except ImportError as e:
        rows.append(Row.skipped(task, size, t_ours, 'snntorch Leaky', e))
    else:
        leaky = snn.Leaky(beta=0.5, threshold=1.0, spike_grad=ssur.atan(alpha=2.0), reset_mechanism='zero')

        def loop(x):
            mem, out = leaky.init_leaky(), []
            for t in range(x.shape[0]):
                s, mem = leaky(x[t], mem); out.append(s)
            return torch.stack(out)
        t_snn = time_call(run(loop), repeats)
        with torch.no_grad(): s_snn = loop(x0)
        rows.append(Row(task, size, t_ours, t_snn, agree(s_snn), 'snntorch Leaky (Python loop)'))
    return rows


def training_overhead(repeats=10):
    "One optimiser step of each variant on the same quick-preset net; TET is the baseline row."
    t = {}
    for v in ('TET', 'TASG', 'DS', 'DeepTAGE'):
        exp = dt.make_experiment('quick', 0, variant=v, steps=10 ** 6)
        t[v] = time_call(exp.step, repeats)
    size = 'quick preset: depth 10, 16 ch, T=4, batch 64'
    return [Row(f'training step, {v}', size, t[v], t['TET'], None, 'TET (same net)') for v in t]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeats', type=int, default=20)
    a = ap.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}; median of {a.repeats} after 1 warm-up\n")
    print(table(lif_peers(repeats=a.repeats), 'LIF layer: ours (fixed ATan) vs peers', unit='ms',
                agreement='spike agreement with ours'))
    print()
    print(table(training_overhead(max(3, a.repeats // 2)), 'DeepTAGE training-step overhead over TET', unit='ms'))
    print('\nours / peer below 1: ours is faster; in the training table the ratio is the overhead over TET')


if __name__ == '__main__':
    main()
