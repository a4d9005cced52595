"""Fengbo benchmark: our Clifford layers against microsoft's cliffordlayers 0.1.1 (the library the paper vendors).

Same work on both sides, the same weights: a 3D Clifford convolution (C_in = C_out = 4 multivector channels, kernel 3,
padding 1) and a Clifford spectral convolution (4 -> 4 channels, 4 modes per axis), forward + backward on a
(2, 4, M, M, M, 8) field, at three grid sizes. Agreement: max |ours - peer| of the outputs; for the spectral layer
outside the one corner of the modes that cliffordlayers 0.1.1 fills from a wrong block (and, in brackets, with it).

Run: python benchmarks/fengbo.py [--sizes 8 16 24] [--repeats 5]
(cliffordlayers is not a dependency: `pip install cliffordlayers==0.1.1`, or put its wheel's folder on PYTHONPATH.)
"""
import argparse

import torch

from _timing import Row, table, timed


def fwd_bwd(layer, x):
    def run():
        layer.zero_grad(set_to_none=True)
        y = layer(x)
        y.square().sum().backward()
        return y.detach()
    return run


def run(sizes, channels: int = 4, modes: int = 4, repeat: int = 5):
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
        t_conv, y_conv = timed(fwd_bwd(conv, x), repeat)
        spec = CliffordSpectralConv3d(channels, channels, min(modes, M // 2))
        t_spec, y_spec = timed(fwd_bwd(spec, x), repeat)
        if peer is not None:
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
        t_pconv, p_conv = timed(fwd_bwd(pconv, x), repeat)
        t_pspec, p_spec = timed(fwd_bwd(pspec, x), repeat)
        diff = clifford_fft(y_spec - p_spec)
        whole = float(diff.abs().max())
        diff[:, :, -m:, :m, -m:] = 0
        rows += [Row('Clifford conv3d fwd+bwd', size, t_conv, t_pconv, float((y_conv - p_conv).abs().max()),
                     peer_name='cliffordlayers'),
                 Row('Clifford spectral conv3d fwd+bwd', size, t_spec, t_pspec,
                     f'{float(diff.abs().max()):.1e} ({whole:.1e} with the (-,+,-) corner)',
                     peer_name='cliffordlayers')]
    return rows


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--sizes', type=int, nargs='+', default=[8, 16, 24])
    ap.add_argument('--repeats', type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    title = 'Fengbo layers vs cliffordlayers 0.1.1 (one torch thread)'
    print(table(run(args.sizes, repeat=args.repeats), title, unit='ms'))
