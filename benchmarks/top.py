"""TOP benchmarks: our sparse GCN against PyTorch Geometric on the same work, on CSBM graphs of three sizes.

1. Normalisation, like for like: `normalized_adjacency_scipy(clean=False)` (D^-1/2 (A + I) D^-1/2 of an edge list
   already clean, as gcn_norm assumes: add self-loops, scatter degrees, scale; ours also sorts into CSR) vs PyG's
   `gcn_norm`; agreement = max |entry difference| of the two matrices. The validation, symmetrisation and
   deduplication that the default `clean=True` adds is timed separately, ours against ours (a `cost` row: what the
   check costs, not a race with PyG). The experiment builds its adjacency once, with `clean=False` (its graphs come
   out of `clean_edges`), and every batch reuses its precomputed blocks: nothing is validated per batch.
2. Full-batch GCN forward + backward (3 layers, hidden 64, no dropout): our `TOPGCN` on the torch CSR adjacency vs
   a stack of PyG `GCNConv` (cached normalisation, the default scatter path) with the same weights; agreement = max
   |logit difference| and max |weight-gradient difference|.
3. One Cluster-GCN epoch (20 METIS parts, 2 per batch, one Adam step per batch in the same order, loss on the
   batch's training nodes): our `ClusterGCN` trainer + `train_epoch` vs PyG `GCNConv` (normalize=False, edge
   weights = the same blocks of the full graph's normalised adjacency) on the same batches; agreement = max |weight
   difference| after the epoch. PyG's own `ClusterData` / `ClusterLoader` need METIS from torch_sparse or pyg-lib:
   where neither is installed (here) that row says so.
4. One TOP epoch vs one Cluster-GCN epoch and one GAS epoch of ours (the compensation's overhead against dropping
   the messages and against historical embeddings; TOP's precomputation not timed): `cost` rows, ours vs ours.

Rows 1-3 (the peer rows) time ours and PyG in paired rounds on the CPU clock (`paired(..., clock='cpu')`: each
round calls both, so a drift in the machine's load hits both alike); the agreement column adds the median
[quartiles] of the per-round ratios.
5. `--scaling`: the epoch-time scaling curve of `iclr25_nb.top.scaling_study` (full-batch, Cluster-GCN, GAS, TOP,
   the exact L-hop mini-batch; METIS batches of about 1,000 nodes; the mini-batch trainers timed on 2 sampled batches
   and scaled to the epoch) on CSBM graphs of 10^4 to 10^6 nodes (`--scaling-sizes`), with the ratios exact / TOP
   and TOP / Cluster-GCN measured in the same run.

Run: python benchmarks/top.py [--quick] [--scaling]   (--quick: small graphs, about a minute)
"""
import argparse
import warnings

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from _timing import Row, markdown, paired, spread, table
from iclr25_nb import top as T

HIDDEN, LAYERS, PARTS, PER_BATCH = 64, 3, 20, 2


def pyg():
    import torch_geometric  # noqa: F401
    from torch_geometric.nn import GCNConv
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    return GCNConv, gcn_norm


class PygGCN(torch.nn.Module):
    "GCNConv layers with ReLU between, weights copied from a TOPGCN."

    def __init__(self, ours, **kw):
        super().__init__()
        GCNConv, _ = pyg()
        self.convs = torch.nn.ModuleList()
        for c in ours.convs:
            d_out, d_in = c.lin.weight.shape
            p = GCNConv(d_in, d_out, **kw)
            with torch.no_grad():
                p.lin.weight.copy_(c.lin.weight); p.bias.copy_(c.bias)
            self.convs.append(p)

    def forward(self, x, edge_index, edge_weight=None):
        for l, conv in enumerate(self.convs):
            x = conv(x, edge_index, edge_weight)
            if l < len(self.convs) - 1: x = torch.relu(x)
        return x


def weights(model):
    return [c.lin.weight for c in model.convs] + [c.bias for c in model.convs]


def bench_norm(g, size, repeat=30):
    _, gcn_norm = pyg()
    ei = torch.from_numpy(g.edge_index)
    e = T.clean_edges(g.edge_index, g.n)                   # an edge list already clean, as gcn_norm assumes
    A = T.normalized_adjacency_scipy(g.edge_index, g.n)    # the checked default
    A2 = T.normalized_adjacency_scipy(e, g.n, clean=False)
    pei, pw = gcn_norm(ei, None, g.n, add_self_loops=True)
    B = sp.csr_matrix((pw.double().numpy(), (pei[1].numpy(), pei[0].numpy())), shape=(g.n, g.n))
    med, ts = paired({'ours': lambda: T.normalized_adjacency_scipy(e, g.n, clean=False),
                      'peer': lambda: gcn_norm(ei, None, g.n, add_self_loops=True)}, repeat=repeat, clock='cpu')
    cmed, cts = paired({'checked': lambda: T.normalized_adjacency_scipy(g.edge_index, g.n),
                        'hot': lambda: T.normalized_adjacency_scipy(e, g.n, clean=False)}, repeat=repeat, clock='cpu')
    return [Row('normalised adjacency, clean edge list (the hot path)', size, med['ours'], med['peer'],
                f"{float(abs(A2 - B).max()):.1e}; ratio {spread(ts, 'ours', 'peer')}", 'PyG gcn_norm'),
            Row('normalised adjacency: validate, symmetrise, dedup (clean=True) vs clean=False', size, cmed['checked'],
                cmed['hot'], f"{float(abs(A - A2).max()):.1e}; ratio {spread(cts, 'checked', 'hot')}",
                'ours: clean=False', kind='cost')]


def bench_full(g, size, repeat=10):
    torch.manual_seed(0)
    x, y = torch.from_numpy(g.x), torch.from_numpy(g.y)
    ours = T.TOPGCN(g.x.shape[1], HIDDEN, g.num_classes, LAYERS, dropout=0.0)
    peer = PygGCN(ours, cached=True)
    A = T.normalized_adjacency(g.edge_index, g.n)
    ei = torch.from_numpy(g.edge_index)

    def step(model, fwd):
        model.zero_grad(set_to_none=True)
        out = fwd(); F.cross_entropy(out, y).backward()
        return out.detach(), [w.grad.clone() for w in weights(model)]

    o1, g1 = step(ours, lambda: ours(A, x))
    o2, g2 = step(peer, lambda: peer(x, ei))
    agree = max(float((o1 - o2).abs().max()), max(float((a - b).abs().max()) for a, b in zip(g1, g2)))
    med, ts = paired({'ours': lambda: step(ours, lambda: ours(A, x)), 'peer': lambda: step(peer, lambda: peer(x, ei))},
                     repeat=repeat, clock='cpu')
    return Row(f'full-batch GCN fwd+bwd ({LAYERS} layers, hidden {HIDDEN})', size, med['ours'], med['peer'],
               f"{agree:.1e}; ratio {spread(ts, 'ours', 'peer')}", 'PyG GCNConv (cached)')


def bench_cluster(g, size, batches, A_sp, repeat=10):
    x, y, train = torch.from_numpy(g.x), torch.from_numpy(g.y), torch.from_numpy(g.train)
    torch.manual_seed(0)
    ours = T.TOPGCN(g.x.shape[1], HIDDEN, g.num_classes, LAYERS, dropout=0.0)
    peer = PygGCN(ours, normalize=False, add_self_loops=False)
    method = T.ClusterGCN(A_sp, g.x, batches)
    pyg_batches = []                                       # the same blocks A_BB as (edge_index, weight) per batch
    for b in method.batches:
        blk = sp.coo_matrix(A_sp[b][:, b])
        pyg_batches.append((torch.from_numpy(np.stack([blk.col, blk.row]).astype(np.int64)),
                            torch.from_numpy(blk.data.astype(np.float32)), x[b], torch.from_numpy(b)))

    def ours_epoch(opt):
        return lambda: T.train_epoch(ours, opt, method, y, train, np.random.default_rng(0))

    def peer_epoch(opt):
        def run():
            peer.train()
            for i in np.random.default_rng(0).permutation(len(pyg_batches)):
                ei, w, xb, nodes = pyg_batches[i]
                m = train[nodes]
                if not bool(m.any()): continue
                loss = F.cross_entropy(peer(xb, ei, w)[m], y[nodes][m])
                opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        return run

    # agreement: one epoch from the same weights with fresh optimisers, then the timing (further epochs)
    oo, op = torch.optim.Adam(ours.parameters(), 1e-2), torch.optim.Adam(peer.parameters(), 1e-2)
    ours_epoch(oo)(); peer_epoch(op)()
    agree = max(float((a - b).detach().abs().max()) for a, b in zip(weights(ours), weights(peer)))
    med, ts = paired({'ours': ours_epoch(oo), 'peer': peer_epoch(op)}, repeat=repeat, warmup=0, clock='cpu')
    t_ours = med['ours']
    rows = [Row(f'Cluster-GCN epoch ({len(batches)} batches)', size, t_ours, med['peer'],
                f"{agree:.1e}; ratio {spread(ts, 'ours', 'peer')}", 'PyG GCNConv on the same blocks')]
    try:
        from torch_geometric.data import Data
        from torch_geometric.loader import ClusterData
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            ClusterData(Data(x=x, edge_index=torch.from_numpy(g.edge_index), num_nodes=g.n), PARTS, log=False)
        rows.append(Row('Cluster-GCN epoch, PyG ClusterData/ClusterLoader', size, t_ours, None, None,
                        'PyG ClusterData', skip='installed but not benchmarked (own partition, not the same work)'))
    except Exception as e:                                 # ImportError: METIS needs torch_sparse or pyg-lib
        rows.append(Row.skipped('Cluster-GCN epoch, PyG ClusterData/ClusterLoader', size, t_ours, 'PyG ClusterData',
                                e))
    return rows, ours


def bench_top(g, size, batches, A_sp, rank=64, repeat=5):
    x, y, train = torch.from_numpy(g.x), torch.from_numpy(g.y), torch.from_numpy(g.train)
    torch.manual_seed(0)
    model = T.TOPGCN(g.x.shape[1], HIDDEN, g.num_classes, LAYERS, dropout=0.0)
    factory = lambda: T.TOPGCN(g.x.shape[1], HIDDEN, g.num_classes, LAYERS, dropout=0.0)  # noqa: E731
    Q = T.basis_for_batches(T.build_basis(factory, A_sp, g.x, random_num=1), rank,   # as the official code: max(r, k)
                            min(len(b) for b in batches))                          # where narrower than a batch
    top, cluster = T.TOP(A_sp, g.x, batches, Q, inb_size=10_000), T.ClusterGCN(A_sp, g.x, batches)
    gas = T.GAS(A_sp, g.x, batches)
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    epoch = lambda m: lambda: T.train_epoch(model, opt, m, y, train, np.random.default_rng(0))  # noqa: E731
    med, _ = paired({'top': epoch(top), 'cluster': epoch(cluster), 'gas': epoch(gas)}, repeat=repeat, clock='cpu')
    err = T.embedding_error(model, top)[-1] / T.embedding_error(model, cluster)[-1]
    return [Row(f'TOP epoch vs Cluster-GCN epoch (rank {Q.shape[1]})', size, med['top'], med['cluster'],
                f'error ratio {err:.2f}', 'ours: Cluster-GCN', kind='cost'),
            Row('TOP epoch vs GAS epoch (historical embeddings)', size, med['top'], med['gas'], '-', 'ours: GAS',
                kind='cost')]


def main(sizes):
    try: pyg()
    except ImportError as e:
        raise SystemExit(f'torch_geometric is not installed ({e}): nothing to compare against')
    rows = []
    for n in sizes:
        g = T.csbm(n, seed=0)
        size = f'n={n:,}, {g.num_edges // 2:,} edges'
        A_sp = T.normalized_adjacency_scipy(g.edge_index, g.n, clean=False)
        batches = T.make_batches(*T.partition(g.edge_index, g.n, PARTS, seed=0), PER_BATCH, seed=0)
        rows += bench_norm(g, size)
        rows.append(bench_full(g, size))
        cl, _ = bench_cluster(g, size, batches, A_sp)
        rows += cl
        rows += bench_top(g, size, batches, A_sp)
    return rows


def scaling(sizes, batch_nodes=1000):
    rows = T.scaling_study(sizes=sizes, batch_nodes=batch_nodes, sample_batches=2, repeats=1)
    body = [[f"{r['n']:,}", f"{r['edges']:,}", r['batches'], f"{r['exact_nodes']:,.0f}",
             *(r[f'epoch_s_{k}'] for k in T.TRAINERS), r['epoch_s_exact'] / r['epoch_s_top'],
             r['epoch_s_top'] / r['epoch_s_cluster'], r['epoch_s_top'] / r['epoch_s_gas'],
             r['precompute_basis_s'] + r['precompute_top_s']] for r in rows]
    return markdown(['nodes', 'edges', 'batches', 'exact batch nodes',
                     *(f'{T.LABELS[k]} s/epoch' for k in T.TRAINERS), 'exact / TOP', 'TOP / Cluster-GCN', 'TOP / GAS',
                     'TOP precompute s'],
                    body, title='TOP: epoch time vs graph size')


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='small graphs (about a minute)')
    ap.add_argument('--sizes', type=int, nargs='*', help='CSBM node counts (default 10k 30k 100k; quick 2k 5k 20k)')
    ap.add_argument('--scaling', action='store_true', help='only the epoch-time scaling curve (to 10^6 nodes)')
    ap.add_argument('--scaling-sizes', type=int, nargs='*', default=[10_000, 30_000, 100_000, 300_000, 1_000_000])
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.scaling:
        print('## TOP: epoch time vs graph size (CSBM, METIS batches of about 1,000 nodes, one torch thread)\n')
        print(scaling(a.scaling_sizes))
        raise SystemExit(0)
    sizes = a.sizes or ((2_000, 5_000, 20_000) if a.quick else (10_000, 30_000, 100_000))
    print(table(main(sizes), 'TOP: our sparse GCN vs PyTorch Geometric (CSBM, one torch thread)', unit='ms',
                agreement='agreement (max |diff|)'))
    print('\nours / peer below 1: ours is faster. Cluster-GCN rows: the same blocks of the full graph\'s normalised '
          'adjacency and the same batch order on both sides; TOP row: the compensation\'s overhead over our '
          'Cluster-GCN epoch, with TOP / Cluster-GCN last-layer embedding error.')
