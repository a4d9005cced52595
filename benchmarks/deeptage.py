"""DeepTAGE benchmark: our multi-step LIF layer against spikingjelly (torch backend, multi-step) and snntorch
(`Leaky` stepped in a Python loop) on the same (T, batch, neurons) tensors, forward + backward, with the time ratio
and spike agreement; and the training-step overhead of DeepTAGE (TASG + deep supervision) over TET on the same net.

    python benchmarks/deeptage.py [--repeats 20]
"""
import argparse
import time

import torch

from iclr25_nb import deeptage as dt


def _time(fn, repeats):
    fn()                                                     # warm-up
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2]                                  # median


def lif_peers(T=6, B=64, shape=(32, 8, 8), repeats=20):
    torch.manual_seed(0)
    x0 = torch.randn(T, B, *shape) * 1.5
    g = torch.randn_like(x0)
    rows, spikes = [], {}

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
    rows.append(('iclr25_nb LIFLayer (fixed ATan)', _time(run(ours), repeats))); spikes['ours'] = ours(x0)
    rows.append(('iclr25_nb LIFLayer (TASG, w=0.25)', _time(run(ours_tasg), repeats)))
    try:
        from spikingjelly.activation_based import neuron, surrogate, functional
        sj = neuron.LIFNode(tau=2.0, decay_input=False, v_threshold=1.0, v_reset=0.0,
                            surrogate_function=surrogate.ATan(alpha=2.0), step_mode='m')
        rows.append(('spikingjelly LIFNode (m, torch)', _time(run(sj, functional.reset_net), repeats)))
        with torch.no_grad(): spikes['spikingjelly'] = sj(x0); functional.reset_net(sj)
    except ImportError:
        rows.append(('spikingjelly (not installed)', float('nan')))
    try:
        import snntorch as snn
        from snntorch import surrogate as ssur
        leaky = snn.Leaky(beta=0.5, threshold=1.0, spike_grad=ssur.atan(alpha=2.0), reset_mechanism='zero')

        def loop(x):
            mem, out = leaky.init_leaky(), []
            for t in range(x.shape[0]):
                s, mem = leaky(x[t], mem); out.append(s)
            return torch.stack(out)
        rows.append(('snntorch Leaky (Python loop)', _time(run(loop), repeats)))
        with torch.no_grad(): spikes['snntorch'] = loop(x0)
    except ImportError:
        rows.append(('snntorch (not installed)', float('nan')))
    agree = {k: (v == spikes['ours']).float().mean().item() for k, v in spikes.items() if k != 'ours'}
    return rows, agree


def training_overhead(repeats=10):
    x, y, _, _ = dt.digits_static(seed=0)
    out = {}
    for v in ('TET', 'TASG', 'DS', 'DeepTAGE'):
        exp = dt.make_experiment('quick', 0, variant=v, steps=10 ** 6)
        out[v] = _time(lambda: exp.step(), repeats)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--repeats', type=int, default=20)
    a = ap.parse_args()
    rows, agree = lif_peers(repeats=a.repeats)
    base = rows[0][1]
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}; LIF forward+backward, T=6, B=64, 32x8x8 neurons")
    print(f"{'implementation':40s} {'median ms':>10s} {'ours (fixed) / row':>20s}")
    for name, t in rows:
        print(f"{name:40s} {1e3 * t:10.2f} {base / t:20.2f}")
    print('spike agreement with our LIFLayer:', ', '.join(f"{k} {100 * v:.2f}%" for k, v in agree.items()))
    tr = training_overhead(max(3, a.repeats // 2))
    print('\ntraining step, quick preset (depth 10, 16 ch, T=4, batch 64), median s:')
    for k, t in tr.items():
        print(f"{k:10s} {t:8.3f}  ratio to TET {t / tr['TET']:.2f}")


if __name__ == '__main__':
    main()
