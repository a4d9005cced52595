"""TopoLM benchmarks.

1. Moran's I of 24 maps of 28 x 28 (the paper's sheet count and size): our vectorised `morans_i` against
   esda.Moran with libpysal.lat2W queen weights (what the paper's eval/moran.py calls), agreement and time.
2. Training-step time of the quick TopoGPT with and without the spatial loss (its overhead ratio).

Run: python benchmarks/topolm.py
"""
import numpy as np
import torch

from _timing import Row, table, time_call, timed
from iclr25_nb import topolm as T


def bench_moran():
    rng = np.random.default_rng(0)
    maps = rng.normal(size=(24, 28, 28)).cumsum(-1)                      # 24 sheets, some spatial structure
    task, size = "Moran's I, queen weights", '24 maps of 28x28'
    t_ours, ours = timed(lambda: T.morans_i(maps))
    try:
        import esda
        import libpysal
    except ImportError as e:
        return [Row.skipped(task, size, t_ours, 'esda.Moran + libpysal.lat2W', e)], None
    w = libpysal.weights.lat2W(28, 28, rook=False)
    t_peer, peer = timed(lambda: np.array([esda.moran.Moran(m.ravel(), w, permutations=0).I for m in maps]), 3)
    t_w = time_call(lambda: esda.moran.Moran(maps[0].ravel(), libpysal.weights.lat2W(28, 28, rook=False),
                                             permutations=0).I, repeat=1)
    return [Row(task, size, t_ours, t_peer, float(np.abs(ours - peer).max()), 'esda.Moran + lat2W (weights built once)')], t_w


def bench_step(steps=5):
    cfg = T.TopoLMConfig.quick()
    torch.manual_seed(0)
    model = T.TopoGPT(146, cfg.n_layer, cfg.n_head, cfg.grid, cfg.ctx)
    index = {n: T.neighbourhoods(model.coords[s], cfg.radius) for s, n in enumerate(model.sheet_names)}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 146, (cfg.batch, cfg.ctx + 1), generator=torch.Generator().manual_seed(0))
    def run(alpha):
        def go():
            for _ in range(steps):
                out = T.topo_loss(model, x[:, :-1], x[:, 1:], alpha, cfg.radius, cfg.n_neighbourhoods, index=index)
                opt.zero_grad(); out['loss'].backward(); opt.step()
        return go
    t_plain = time_call(run(0.0), repeat=2)                               # time_call warms up each first
    t_topo = time_call(run(cfg.alpha), repeat=2)
    size = f'quick TopoGPT, batch {cfg.batch}, ctx {cfg.ctx}; time of {steps} steps'
    return [Row('training, CE + alpha * spatial loss', size, t_topo, t_plain, None, 'CE only (alpha = 0)', kind='cost')]


if __name__ == '__main__':
    rows, t_w = bench_moran()
    rows += bench_step()
    print(table(rows, 'TopoLM: vectorised Moran\'s I vs esda; spatial-loss overhead', agreement='max abs diff'))
    print('\nours / peer below 1: ours is faster; the training row is the overhead of the spatial loss')
    if t_w is not None: print(f'esda, building lat2W(28, 28) queen weights + one Moran: {t_w:.4f} s')
