"""3D-PC benchmarks.

1. Renderer throughput: our batched torch ray caster (analytic spheres and boxes, a ground plane) against trimesh's
   ray caster (`intersects_first`: its numpy triangle test behind an rtree index; embree is not installed) on the same
   scenes triangulated (level-3 icospheres, box meshes, a ground quad) and the same primary rays, at three image sizes:
   CPU seconds of the rays' first hits, and the share of rays whose first hit is the same object. The meshes and
   trimesh's index are built before the clock starts (only the ray queries are timed on its side; ours times its rays
   and its whole trace). trimesh is optional (the `bench` extra): where it is not installed the row says so.
2. The linear probe, two races at three data sizes on the same frozen features of the synthetic depth-order task,
   paired rounds in CPU seconds:
   - the paper's probe (`linear_probe`: BatchNorm without affine, dropout, AdamW, best-validation epoch; its steps
     written out without autograd) against the official code's loop (`LinearProbe`, autograd, `torch.optim.AdamW`):
     the same job, the same accuracies;
   - the L2 logistic-regression probe (`logistic_probe`: standardised features, C = 0.1, tol = 1e-4; Newton in the
     dual coefficients since there are fewer frames than features) against scikit-learn's `StandardScaler` +
     `LogisticRegression(C=0.1, tol=1e-4)` (L-BFGS): the same estimator, objective, scaling and stopping rule
     (max |grad| <= tol); agreement: test accuracies and the largest coefficient difference relative to the largest
     coefficient.

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


def _trimesh_meshes(sc, idx):
    "One triangulated scene per frame, its triangles' owners (0 ball 1 body 2 nose 3 box -1 ground), index built."
    import trimesh
    out = []
    for s in idx:
        parts, tags = [], []
        for tag, (c, r) in enumerate(zip((sc.ball[s], sc.viewer[s], sc.nose[s]), sc.radii[s])):  # per-scene radii
            parts.append(trimesh.creation.icosphere(3, r).apply_translation(c)); tags.append(tag)
        for b in sc.boxes[s]:
            if b[4] > 0:
                parts.append(trimesh.creation.box(bounds=[b[:3], b[3:]])); tags.append(3)
        ground = trimesh.Trimesh([[-50, 0, -50], [50, 0, -50], [50, 0, 50], [-50, 0, 50]], [[0, 2, 1], [0, 3, 2]])
        parts.append(ground); tags.append(-1)
        mesh = trimesh.util.concatenate(parts)
        mesh.triangles_tree                                                  # build the rtree index now, untimed
        out.append((mesh, np.concatenate([[t] * len(p.faces) for t, p in zip(tags, parts)])))
    return out


def _trimesh_ids(meshes, cams, res):
    o_all, d_all = T.camera_rays(cams, res)
    out = []
    for m, (mesh, owner) in enumerate(meshes):
        tri = mesh.ray.intersects_first(o_all[m].numpy(), d_all[m].numpy())
        out.append(np.where(tri < 0, -2, owner[np.maximum(tri, 0)]))
    return np.stack(out)


def bench_render():
    rows = []
    sc, idx, cams = _scenes()
    for res in (16, 24, 32):
        t_ours, _ = timed(lambda: T.render(sc, idx, cams, res), repeat=3, clock='cpu')
        fps = len(idx) / t_ours
        try:
            meshes = _trimesh_meshes(sc, idx)
        except ImportError as e:
            rows.append(Row.skipped(f'render {len(idx)} frames ({fps:.0f} frames/s ours)', f'{res}x{res}', t_ours,
                                    'trimesh', e))
            continue
        t_ours_p, ids = timed(lambda: _ours_ids(sc, idx, cams, res), repeat=5, clock='cpu')
        t_peer, ids_peer = timed(lambda: _trimesh_ids(meshes, cams, res), repeat=1, warmup=0, clock='cpu')
        rows.append(Row(f'primary rays, first hit, {len(idx)} frames ({fps:.0f} frames/s ours, shaded)',
                        f'{res}x{res} ({len(idx) * res * res} rays)', t_ours_p, t_peer,
                        f'{100 * (ids == ids_peer).mean():.2f}% same object', 'trimesh (rtree, no embree)'))
    return rows


def bench_probe(rounds: int = 7):
    """The probe at three data sizes, paired rounds in CPU seconds: the paper's probe (`linear_probe`) against the
    official code's loop, and the L2 logistic-regression probe (`logistic_probe`) against scikit-learn's standardised
    LogisticRegression, the same estimator (C = 0.1, tol = 1e-4, max |grad| <= tol). Ours also scores the test set
    inside its timed call; scikit-learn's timed call is the fit alone."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    C, tol = 0.1, 1e-4
    rows = []
    for n_settings in (40, 80, 160):
        d = T.make_dataset('depth', n_settings, 3, 32, seed=0)
        torch.manual_seed(0)
        f = T.extract_features(T.SmallCNN(16), d['images']); y = d['labels']
        tr, va, te = (torch.as_tensor(m) for m in T.split_by_setting(d['setting']))
        args = (f[tr], y[tr], (f[va], y[va]), {'test': (f[te], y[te])})
        x_tr, y_tr, x_te, y_te = f[tr].numpy(), y[tr].numpy(), f[te].numpy(), y[te].numpy()
        fns = {'ours': lambda: T.linear_probe(*args), 'autograd': lambda: T._linear_probe_autograd(*args),
               'logistic': lambda: T.logistic_probe(f[tr], y[tr], {'test': (f[te], y[te])}, C=C, tol=tol),
               'sklearn': lambda: make_pipeline(StandardScaler(), LogisticRegression(C=C, tol=tol, max_iter=3000)).fit(
                   x_tr, y_tr)}
        med, ts = paired(fns, rounds, clock='cpu')
        acc, acc_ref, lo, lr = fns['ours'](), fns['autograd'](), fns['logistic'](), fns['sklearn']()
        coef_sk = lr[-1].coef_[0]
        dcoef = np.abs(lo['coef'].numpy() - coef_sk).max() / np.abs(coef_sk).max()
        size = f'{int(tr.sum())} train frames, {f.shape[1]} features'
        rows.append(Row('depth-order linear probe, official protocol', size, med['ours'], med['autograd'],
                        f"test acc ours {acc['test']:.3f}, official loop {acc_ref['test']:.3f}; ratio "
                        f"{spread(ts, 'ours', 'autograd')}", 'official loop (torch nn + AdamW)',
                        kind='cost'))   # the official loop as we wrote it in torch: ours against ours
        rows.append(Row(f'depth-order L2 logistic-regression probe (standardised, C = {C}, tol = {tol:g})', size,
                        med['logistic'], med['sklearn'],
                        f"test acc ours {lo['test']:.3f}, sklearn {lr.score(x_te, y_te):.3f}; max |coef diff| / max "
                        f"|coef| {dcoef:.1e}; {lo['n_iter']} Newton steps vs {lr[-1].n_iter_[0]} L-BFGS; ratio "
                        f"{spread(ts, 'logistic', 'sklearn')}", 'sklearn StandardScaler + LogisticRegression'))
    return rows


if __name__ == '__main__':
    torch.set_num_threads(1)
    print(table(bench_render(), 'Renderer: torch ray caster vs trimesh'))
    print()
    print(table(bench_probe(), 'Linear probes: the official-style probe vs the official loop; the L2 '
                'logistic-regression probe vs scikit-learn',
                agreement='test accuracies; ours / peer median [quartiles] of paired CPU-time rounds'))
