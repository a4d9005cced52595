"""Fengbo benchmark: our Clifford layers against microsoft's cliffordlayers 0.1.1 (the library the paper vendors).

Same work on both sides, the same weights: a 3D Clifford convolution (C_in = C_out = 4 multivector channels, kernel 3,
padding 1) and a Clifford spectral convolution (4 -> 4 channels, 4 modes per axis), forward + backward on a
(2, 4, M, M, M, 8) field, at three grid sizes. Agreement: max |ours - peer| of the outputs; for the spectral layer
outside the one corner of the modes that cliffordlayers 0.1.1 fills from a wrong block (and, in brackets, with it).

Timing: paired rounds (ours and the peer alternate on the same input), CPU seconds of this process (`clock='cpu'`:
a call that loses its core to another job for a time slice does not count that slice), one torch thread; the
agreement column ends with the median [quartiles] of the per-round ratios.

Run: python benchmarks/fengbo.py [--quick] [--sizes 8 16 24] [--repeats 15]   (--quick: 7 rounds)
(cliffordlayers is not a dependency: `pip install cliffordlayers==0.1.1`, or put its wheel's folder on PYTHONPATH.)
"""
import argparse

import torch

from _timing import Row, paired, spread, table, timed


def fwd_bwd(layer, x):
    def run():
        layer.zero_grad(set_to_none=True)
        y = layer(x)
        y.square().sum().backward()
        return y.detach()
    return run


def run(sizes, channels: int = 4, modes: int = 4, repeat: int = 15):
    from iclr25_nb.fengbo import CliffordConv3d, CliffordSpectralConv3d, clifford_fft
    try:
        from cliffordlayers.nn.modules.cliffordconv import CliffordConv3d as PeerConv
        from cliffordlayers.nn.modules.cliffordfourier import CliffordSpectralConv3d as PeerSpec
        peer = None
    except ImportError as e:
        peer = e
    rows = []
    for M in sizes:
        torch.manual_seed(0)
        x = torch.randn(2, channels, M, M, M, 8)
        size = f'M={M}, C={channels}'
        conv = CliffordConv3d(channels, channels, 3, padding=1)
        spec = CliffordSpectralConv3d(channels, channels, min(modes, M // 2))
        if peer is not None:
            t_conv, t_spec = timed(fwd_bwd(conv, x), repeat, clock='cpu')[0], timed(fwd_bwd(spec, x), repeat, clock='cpu')[0]
            rows += [Row.skipped('Clifford conv3d fwd+bwd', size, t_conv, 'cliffordlayers', peer),
                     Row.skipped('Clifford spectral conv3d fwd+bwd', size, t_spec, 'cliffordlayers', peer)]
            continue
        pconv = PeerConv(g=[1, 1, 1], in_channels=channels, out_channels=channels, kernel_size=3, padding=1)
        m = min(modes, M // 2)
        pspec = PeerSpec([1, 1, 1], channels, channels, m, m, m)
        with torch.no_grad():
            for n, w in enumerate(pconv.weight): w.copy_(conv.weight[n])
            pconv.bias.copy_(conv.bias)
            pspec.weights.copy_(spec.weight)
        fns = {'conv': fwd_bwd(conv, x), 'pconv': fwd_bwd(pconv, x), 'spec': fwd_bwd(spec, x), 'pspec': fwd_bwd(pspec, x)}
        med, ts = paired(fns, repeat, clock='cpu')
        t_conv, t_pconv, t_spec, t_pspec = med['conv'], med['pconv'], med['spec'], med['pspec']
        y_conv, p_conv, y_spec, p_spec = fns['conv'](), fns['pconv'](), fns['spec'](), fns['pspec']()
        diff = clifford_fft(y_spec - p_spec)
        whole = float(diff.abs().max())
        diff[:, :, -m:, :m, -m:] = 0
        rows += [Row('Clifford conv3d fwd+bwd', size, t_conv, t_pconv,
                     f'{float((y_conv - p_conv).abs().max()):.1e}; ratio {spread(ts, "conv", "pconv")}',
                     peer_name='cliffordlayers'),
                 Row('Clifford spectral conv3d fwd+bwd', size, t_spec, t_pspec,
                     f'{float(diff.abs().max()):.1e} ({whole:.1e} with the (-,+,-) corner); ratio {spread(ts, "spec", "pspec")}',
                     peer_name='cliffordlayers')]
    return rows


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', type=int, nargs='+', default=[8, 16, 24])
    ap.add_argument('--repeats', type=int, default=None, help='paired rounds (default 15, --quick 7)')
    ap.add_argument('--quick', action='store_true', help='7 paired rounds instead of 15')
    args = ap.parse_args()
    torch.set_num_threads(1)
    title = 'Fengbo layers vs cliffordlayers 0.1.1 (one torch thread, CPU time, paired rounds)'
    print(table(run(args.sizes, repeat=args.repeats or (7 if args.quick else 15)), title, unit='ms'))
