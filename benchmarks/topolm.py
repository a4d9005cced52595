"""TopoLM benchmarks.

1. Moran's I of 24 maps of 28 x 28 (the paper's sheet count and size): our vectorised `morans_i` against
   esda.Moran with libpysal.lat2W queen weights (what the paper's eval/moran.py calls), agreement and time.
2. Training-step time of the quick TopoGPT with and without the spatial loss (its overhead ratio).

Run: python benchmarks/topolm.py
"""
import time

import numpy as np
import torch

from iclr25_nb import topolm as T


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter(); out = fn(); times.append(time.perf_counter() - t0)
    return min(times), out


def bench_moran():
    import esda
    import libpysal
    rng = np.random.default_rng(0)
    maps = rng.normal(size=(24, 28, 28)).cumsum(-1)                      # 24 sheets, some spatial structure
    w = libpysal.weights.lat2W(28, 28, rook=False)
    t_ours, ours = best_of(lambda: T.morans_i(maps))
    t_peer, peer = best_of(lambda: np.array([esda.moran.Moran(m.ravel(), w, permutations=0).I for m in maps]))
    t_peer_w, _ = best_of(lambda: [esda.moran.Moran(m.ravel(), libpysal.weights.lat2W(28, 28, rook=False), permutations=0).I
                                   for m in maps[:1]], repeat=1)
    return {'ours_s': t_ours, 'esda_s': t_peer, 'ratio': t_ours / t_peer, 'max_abs_diff': float(np.abs(ours - peer).max()),
            'esda_weights_once_s': t_peer_w}


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
    run(2.5)()                                                              # warm-up
    t_plain, _ = best_of(run(0.0), repeat=2)
    t_topo, _ = best_of(run(cfg.alpha), repeat=2)
    return {'plain_ms_per_step': 1e3 * t_plain / steps, 'topo_ms_per_step': 1e3 * t_topo / steps, 'overhead_ratio': t_topo / t_plain}


if __name__ == '__main__':
    m = bench_moran()
    print("| Moran's I, 24 maps of 28x28 | ours (numpy, vectorised) | esda.Moran + lat2W queen | ratio ours/esda | max |diff| |")
    print("|---|---|---|---|---|")
    print(f"| time (s) | {m['ours_s']:.4f} | {m['esda_s']:.4f} | {m['ratio']:.2e} | {m['max_abs_diff']:.1e} |")
    s = bench_step()
    print()
    print("| quick TopoGPT training step | CE only (alpha = 0) | CE + alpha * spatial loss | ratio |")
    print("|---|---|---|---|")
    print(f"| ms per step | {s['plain_ms_per_step']:.1f} | {s['topo_ms_per_step']:.1f} | {s['overhead_ratio']:.2f} |")
