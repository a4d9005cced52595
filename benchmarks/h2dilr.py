"""H2DiLR benchmarks.

1. The vector-quantisation layer (`VectorQuantizer.forward`: nearest code, codebook + commitment loss,
   straight-through tokens) against a plain reference written here (torch.cdist + argmin + gather): agreement of
   codes (asserted identical) and quantised tokens, and CPU time in paired rounds, at the quick and the full preset's
   sizes. Ours finds the code from ||z||^2 - 2 z.e + ||e||^2 (one addmm, no square root) and numpy's argmin.
2. Training throughput: one H2DiLR stage-1 step (four subjects' encoders, codebooks and decoders) and one stage-2
   step (the shared transformer on frozen codes) against one step of the four per-subject decoders (the
   heterogeneous paradigm), on the quick preset's data; trials per second and the ratio, measured in the same run
   (ours against ours: Row kind 'cost', what the unified model's step costs, not a race).

Run: python benchmarks/h2dilr.py
"""
import torch
import torch.nn.functional as F

from _timing import Row, markdown, paired, spread, table, timed
from iclr25_nb import h2dilr as H


def reference_vq(z: torch.Tensor, codebook: torch.Tensor, beta: float = 0.25):
    "The textbook VQ-VAE quantiser: nearest code by Euclidean distance, codebook + beta x commitment loss."
    flat = z.reshape(-1, z.shape[-1])
    codes = torch.cdist(flat, codebook).argmin(1)
    e = codebook[codes]
    loss = F.mse_loss(e, flat.detach()) + beta * F.mse_loss(flat, e.detach())
    return (flat + (e - flat).detach()).reshape(z.shape), codes.reshape(z.shape[:-1]), loss


def bench_vq(repeat: int = 60):
    "Paired rounds on the CPU clock (a load drift of the shared machine hits both alike); rows and ratio spreads."
    rows, spreads = [], []
    for size, (n, L, K, D) in {'quick: 128 trials x 16 tokens, K=32, D=16': (128, 16, 32, 16),
                               'full: 512 trials x 32 tokens, K=128, D=32': (512, 32, 128, 32)}.items():
        torch.manual_seed(0)
        vq = H.VectorQuantizer(K, D).eval()
        z = torch.randn(n, L, D)
        zq, codes, loss, _ = vq(z)
        zr, cr, lr = reference_vq(z, vq.codebook.detach())
        if not torch.equal(codes, cr): raise AssertionError(f'{size}: the codes differ from the reference')
        med, ts = paired({'ours': lambda: vq(z), 'ref': lambda: reference_vq(z, vq.codebook.detach())},
                         repeat=repeat, warmup=3, clock='cpu')
        agree = (f"codes identical, |z_q diff| {float((zq - zr).abs().max()):.1e}, "
                 f"|loss diff| {abs(float(loss.detach() - lr)):.1e}")
        rows.append(Row('VQ forward (nearest code, loss)', size, med['ours'], med['ref'], agree,
                        'cdist + argmin reference'))
        spreads.append((size, spread(ts, 'ours', 'ref')))
    return rows, spreads


def bench_throughput(steps: int = 5):
    torch.manual_seed(0)
    exp = H.H2DiLRExperiment(H.H2DiLRConfig.quick(), seed=0)
    c, (Xs, ys) = exp.config, exp.data['train']
    n_trials = sum(min(c.batch, len(X)) for X in Xs)                   # trials seen per step (one batch per subject)
    g = torch.Generator().manual_seed(0)
    opt1 = torch.optim.Adam(exp.model.stage1_parameters(), lr=c.lr1)
    t1 = timed(lambda: exp.model.stage1_step(Xs, opt1, c.batch, g), repeat=steps)[0]
    exp.model.freeze_stage1()
    feats = [exp.model.decoder_tokens(exp.model.tokens(X, m)) for m, X in enumerate(Xs)]
    opt2 = torch.optim.Adam(exp.model.transformer.parameters(), lr=c.lr2)
    t2 = timed(lambda: exp.model.stage2_step(feats, ys, opt2, c.batch, g), repeat=steps)[0]
    base = torch.nn.ModuleList([H.PerSubjectDecoder(C, c.D) for C in exp.gen.channels])
    opt_b = torch.optim.Adam(base.parameters(), lr=c.lr2)

    def per_subject_step():
        opt_b.zero_grad(set_to_none=True)
        loss = sum(F.cross_entropy(net(X[i]), y[i]) for net, X, y in zip(base, Xs, ys)
                   for i in [H._batches(len(X), c.batch, g)])
        loss.backward(); opt_b.step()
    tb = timed(per_subject_step, repeat=steps)[0]
    size = f'{len(Xs)} subjects x batch {c.batch}'
    return [Row('H2DiLR stage-1 step vs per-subject step', size, t1, tb, f'{n_trials / t1:.0f} vs {n_trials / tb:.0f} '
                'trials/s', 'per-subject decoders', kind='cost'),
            Row('H2DiLR stage-2 step vs per-subject step', size, t2, tb, f'{n_trials / t2:.0f} vs {n_trials / tb:.0f} '
                'trials/s', 'per-subject decoders', kind='cost')]


if __name__ == '__main__':
    torch.set_num_threads(1)
    vq_rows, vq_spreads = bench_vq()
    print(table(vq_rows + bench_throughput()))
    print(markdown(['size', 'ours / reference: median [quartiles] of paired CPU-clock rounds'], vq_spreads,
                   'VQ forward ratio spread'))
