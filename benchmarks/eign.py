"""EIGN benchmark: our sparse edge operators against PyTorch Geometric's line graph + message passing.

Same work on both sides: apply the unsigned edge operator |B|^T |B| (the line-graph adjacency plus 2 I, i.e. EIGN's
L_inv at q = 0) to a (m, c) edge signal. PyG builds the line graph with `LineGraph` and propagates with a scatter-add
over its edges; we multiply by the two sparse factors of the (n, m) incidence (CSR; their construction is timed in
'build'). Apply times are paired (each round calls ours and PyG once) and the spread table gives median [quartiles]
of the paired ratios. We also time EIGN's complex magnetic
operator (q > 0, no PyG counterpart) and report the memory a dense m x m operator would need.

Run: python benchmarks/eign.py [--sizes 1000 10000 100000] [--channels 16] [--repeats 30] [--threads 1]

`--explorer` instead times the live explorer, in CPU milliseconds of this process (`time.process_time`, which the
load of a shared machine does not inflate): one training step of the explorer's run, one snapshot, and one redraw, the
stateless `explorer_render` (every figure rebuilt) against the view's `ExplorerRender` (what changed only).
"""
import argparse

import numpy as np
import torch

from _timing import Row, markdown, paired, spread, table, timed


def delaunay_graph(m_target: int, seed: int = 0):
    "A random planar graph with about `m_target` edges (Delaunay triangulation, thinned), 30% of edges directed."
    from scipy.spatial import Delaunay
    from iclr25_nb.eign import EdgeGraph
    rng = np.random.default_rng(seed)
    n = max(10, int(m_target / 2.6))
    pos = rng.random((n, 2))
    tri = Delaunay(pos).simplices
    pairs = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]]), 1), axis=0)
    pairs = pairs[rng.permutation(len(pairs))[:m_target]]
    swap = rng.random(len(pairs)) < 0.5
    pairs[swap] = pairs[swap][:, ::-1]
    return EdgeGraph(torch.from_numpy(pairs.T.copy()), torch.from_numpy(rng.random(len(pairs)) > 0.3), n)


def build(g, x, q=0.0, src='inv', dst='inv', normalise=False, **kw):
    "Our operator with both sparse factors built (they are otherwise built on the first apply)."
    from iclr25_nb.eign import edge_operator
    op = edge_operator(g, q, src, dst, normalise=normalise, **kw)
    op.matrix('boundary', x), op.matrix('coboundary', x)
    return op


def run(sizes, channels: int = 16, repeat: int = 30):
    try:
        from torch_geometric.data import Data
        from torch_geometric.transforms import LineGraph
        from torch_geometric.utils import scatter
        pyg = None
    except ImportError as e:
        pyg = e
    rows, extra, spreads = [], [], []
    for m in sizes:
        g = delaunay_graph(m)
        m = g.num_edges
        x = torch.randn(m, channels)
        # ours: build the operator (incidence entries + closed-form degrees) and apply it
        t_build, op = timed(lambda: build(g, x), max(3, repeat // 10))
        ours = op(x)
        size = f'm={m}, c={channels}'
        if pyg is not None:
            rows += [Row.skipped('build the unsigned edge operator', size, t_build, 'PyG LineGraph', pyg),
                     Row.skipped('apply the unsigned edge operator', size, timed(lambda: op(x), repeat)[0],
                                 'PyG scatter-add', pyg)]
        else:
            # PyG: line graph construction, then message passing over its edges (+ 2 x for the diagonal)
            data = Data(edge_index=torch.cat([g.edge_index, g.edge_index.flip(0)], 1), num_nodes=g.num_nodes)
            t_pyg_build, lg = timed(lambda: LineGraph(force_directed=False)(data.clone()), max(3, repeat // 10))
            src, dst = lg.edge_index
            key = torch.minimum(g.edge_index[0], g.edge_index[1]) * g.num_nodes + torch.maximum(g.edge_index[0], g.edge_index[1])
            order = torch.argsort(key)                  # PyG numbers the undirected edges in sorted (min, max) order
            xs = x[order]
            pyg_apply = lambda: scatter(xs[src], dst, 0, dim_size=m, reduce='sum') + 2 * xs
            med, ts = paired({'ours': lambda: op(x), 'PyG': pyg_apply}, repeat)
            t_apply, t_pyg_apply = med['ours'], med['PyG']
            agree = (ours[order] - pyg_apply()).abs().max().item()
            spreads.append((size, spread(ts, 'ours', 'PyG')))
            size += f', line graph {int(src.numel())} edges'
            rows += [Row('build the unsigned edge operator', size, t_build, t_pyg_build, None, 'PyG LineGraph'),
                     Row('apply the unsigned edge operator', size, t_apply, t_pyg_apply, agree, 'PyG scatter-add')]
        # EIGN's complex magnetic operator (no PyG counterpart)
        xc = torch.randn(m, channels // 2, dtype=torch.complex64)
        opq = build(g, xc, 1.0, 'equ', 'equ', normalise=True, q_normalisation='per_edge')
        t_mag, _ = timed(lambda: opq(xc), repeat)
        rows.append(Row('apply magnetic operator (q=1, complex)', f'm={m}, c={channels // 2}', t_mag))
        csr = [t for a in op._csr.values() for t in (a.crow_indices(), a.col_indices(), a.values())]
        ours_mb = sum(t.numel() * t.element_size() for t in [op.rows, op.cols, op.b_src, op.b_dst, op.deg_inv_sqrt, *csr]) / 2**20
        extra.append((m, ours_mb, m * m * 8 / 2**30))
    return rows, extra, spreads


def explorer_costs(frames: int = 10) -> list[tuple]:
    "CPU ms (median over `frames`) of a step, a snapshot and a redraw of the eign explorer, each after one more step."
    import statistics
    import time
    from iclr25_nb.eign import ExplorerRender, explorer_render, make_experiment
    exp = make_experiment('quick', hiddens=(16,), lrs=(0.01,), steps=100_000)      # the explorer's run
    history, out = [], {k: [] for k in ('step', 'snapshot', 'full', 'network', 'typical')}
    every_frame, throttled = ExplorerRender(0.0), ExplorerRender(float("inf"))   # the network: every frame, never

    def cpu(key, fn):
        t0 = time.process_time(); r = fn(); out[key].append(time.process_time() - t0); return r
    for _ in range(frames + 1):
        m = cpu('step', exp.step); exp.step_count += 1
        history.append({'step': exp.step_count, **m})
        snap = cpu('snapshot', exp.snapshot)
        cpu('full', lambda: explorer_render(snap, history))
        cpu('network', lambda: every_frame(snap, history))
        cpu('typical', lambda: throttled(snap, history))
    ms = {k: 1e3 * statistics.median(v[1:]) for k, v in out.items()}
    return [('one training step (9 models, 8 graphs)', f"{ms['step']:.1f}"), ('one snapshot', f"{ms['snapshot']:.1f}"),
            ('redraw, every figure rebuilt (explorer_render)', f"{ms['full']:.1f}"),
            ('redraw, ExplorerRender with the network redrawn', f"{ms['network']:.1f}"),
            ('redraw, ExplorerRender between network redraws (1 s apart)', f"{ms['typical']:.1f}")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--explorer', action='store_true', help='time the explorer (step, snapshot, redraw) instead')
    ap.add_argument('--sizes', type=int, nargs='+', default=[1000, 10000, 100000])
    ap.add_argument('--channels', type=int, default=16)
    ap.add_argument('--repeats', type=int, default=30)
    ap.add_argument('--threads', type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}\n")
    if args.explorer:
        print(markdown(['eign explorer', 'CPU ms (median)'], explorer_costs(), 'EIGN explorer costs'))
        return
    rows, extra, spreads = run(args.sizes, args.channels, args.repeats)
    print(table(rows, 'EIGN edge operators vs PyTorch Geometric', unit='ms', agreement='max abs diff'))
    print('\nratios are ours / PyG (below 1: we are faster)\n')
    print(markdown(['size', f'apply, ours / PyG: median [quartiles] of {args.repeats} paired calls'], spreads,
                   'EIGN apply ratio spread'))
    print()
    print(markdown(['m', 'our operator (MB)', 'one dense m x m complex64 operator (GB)'], extra))


if __name__ == '__main__':
    main()
