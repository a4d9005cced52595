"""3D-PC benchmarks.

1. Renderer throughput: our batched torch ray caster (spheres, boxes, ground, shadow rays) against trimesh's ray
   caster on the same scenes triangulated (icospheres, box meshes, a ground quad), primary rays only for both, at three
   image sizes: frames per second and the agreement of the object hit by each ray. trimesh is optional: where it is
   not installed the row says so.
2. The linear probe: our official-style probe (BatchNorm without affine, dropout, AdamW, best-validation epoch; its steps
   written out without autograd) against the official code's loop (`LinearProbe`, autograd, `torch.optim.AdamW`: the
   same job, the same accuracies) and against scikit-learn's standardised LogisticRegression (C = 0.1; a different
   estimator, not the paper's protocol) on the same frozen features of the synthetic depth-order task, at three data
   sizes: paired rounds in CPU seconds, test accuracies.

Run: python benchmarks/threedpc.py
"""
import numpy as np
import torch

from _timing import Row, paired, spread, table, timed
from iclr25_nb import threedpc as T


def _scenes(n=1, seed=0):
    rng = np.random.default_rng(seed)
    sc = T.stack_scenes([T.sample_scene(rng) for _ in range(n)])
    idx = np.repeat(np.arange(n), 2)
    cams = np.concatenate([T.orbit_cameras(2, p) for p in rng.uniform(0, 6.28, n)])
    return sc, idx, cams


def _ours_ids(sc, idx, cams, res):
    o, d = T.camera_rays(cams, res)
    hit = T.trace(sc, idx, o, d)
    k, K = hit['object'], sc.boxes.shape[1]
    ids = torch.where(k == 3 + K, -1, torch.where(k >= 3, 3, k))          # 0 ball 1 body 2 nose 3 box -1 ground
    return torch.where(torch.isfinite(hit['t']), ids, -2).numpy()       # -2 sky


def _trimesh_ids(sc, idx, cams, res):
    import trimesh
    out = []
    o_all, d_all = T.camera_rays(cams, res)
    for m, s in enumerate(idx):
        parts, tags = [], []
        for tag, (c, r) in enumerate(zip((sc.ball[s], sc.viewer[s], sc.nose[s]), sc.radii[s])):  # per-scene radii
            parts.append(trimesh.creation.icosphere(3, r).apply_translation(c)); tags.append(tag)
        for b in sc.boxes[s]:
            if b[4] > 0:
                parts.append(trimesh.creation.box(bounds=[b[:3], b[3:]])); tags.append(3)
        ground = trimesh.Trimesh([[-50, 0, -50], [50, 0, -50], [50, 0, 50], [-50, 0, 50]], [[0, 2, 1], [0, 3, 2]])
        parts.append(ground); tags.append(-1)
        mesh = trimesh.util.concatenate(parts)
        owner = np.concatenate([[t] * len(p.faces) for t, p in zip(tags, parts)])
        tri = mesh.ray.intersects_first(o_all[m].numpy(), d_all[m].numpy())
        out.append(np.where(tri < 0, -2, owner[np.maximum(tri, 0)]))
    return np.stack(out)


def bench_render():
    rows = []
    sc, idx, cams = _scenes()
    for res in (16, 24, 32):
        t_ours, _ = timed(lambda: T.render(sc, idx, cams, res), repeat=3)
        fps = len(idx) / t_ours
        try:
            import trimesh  # noqa: F401
        except ImportError as e:
            rows.append(Row.skipped(f'render {len(idx)} frames ({fps:.0f} frames/s ours)', f'{res}x{res}', t_ours,
                                    'trimesh', e))
            continue
        t_ours_p, ids = timed(lambda: _ours_ids(sc, idx, cams, res), repeat=3)
        t_peer, ids_peer = timed(lambda: _trimesh_ids(sc, idx, cams, res), repeat=1, warmup=0)
        rows.append(Row(f'primary rays, {len(idx)} frames', f'{res}x{res}', t_ours_p, t_peer,
                        f'{100 * (ids == ids_peer).mean():.2f}% same object', 'trimesh'))
    return rows


def bench_probe(rounds: int = 7):
    """The probe at three data sizes, paired rounds in CPU seconds: ours (`linear_probe`, the steps written out) against
    the official code's loop (`LinearProbe` + autograd + `torch.optim.AdamW`: the same job, the same accuracies) and
    against scikit-learn's standardised LogisticRegression (C = 0.1, L-BFGS): a different estimator (full batch, an L2
    penalty, no dropout, no best-validation epoch), so its accuracies differ; it is not the paper's protocol."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    rows = []
    for n_settings in (40, 80, 160):
        d = T.make_dataset('depth', n_settings, 3, 32, seed=0)
        torch.manual_seed(0)
        f = T.extract_features(T.SmallCNN(16), d['images']); y = d['labels']
        tr, va, te = (torch.as_tensor(m) for m in T.split_by_setting(d['setting']))
        args = (f[tr], y[tr], (f[va], y[va]), {'test': (f[te], y[te])})
        fns = {'ours': lambda: T.linear_probe(*args), 'autograd': lambda: T._linear_probe_autograd(*args),
               'sklearn': lambda: make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=3000)).fit(
                   f[tr].numpy(), y[tr].numpy())}
        med, ts = paired(fns, rounds, clock='cpu')
        acc, acc_ref, lr = fns['ours'](), fns['autograd'](), fns['sklearn']()
        size = f'{int(tr.sum())} train frames, {f.shape[1]} features'
        rows.append(Row('depth-order linear probe, official protocol', size, med['ours'], med['autograd'],
                        f"test acc ours {acc['test']:.3f}, official loop {acc_ref['test']:.3f}; ratio "
                        f"{spread(ts, 'ours', 'autograd')}", 'official loop (torch nn + AdamW)'))
        rows.append(Row('depth-order linear probe vs logistic regression (another estimator)', size, med['ours'],
                        med['sklearn'], f"test acc ours {acc['test']:.3f}, sklearn {lr.score(f[te].numpy(), y[te].numpy()):.3f}; "
                        f"ratio {spread(ts, 'ours', 'sklearn')}", 'sklearn LogisticRegression'))
    return rows


if __name__ == '__main__':
    torch.set_num_threads(1)
    print(table(bench_render(), 'Renderer: torch ray caster vs trimesh'))
    print()
    print(table(bench_probe(), 'Linear probe: official-style probe vs the official loop and logistic regression',
                agreement='test accuracies; ours / peer median [quartiles] of paired CPU-time rounds'))
