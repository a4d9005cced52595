"""Benchmark: our batched torch force-density solver vs compas_fd (`fd_numpy`) and, when importable, jax_fdm.

    python benchmarks/neural_fdm.py [--designs 100] [--num-uv 10] [--repeats 15] [--threads 1]

Same networks (Bézier shells, random compression force densities, tributary-area loads), float64. Prints the time
per design of each solver, our time / peer time, and the largest coordinate difference to ours."""
import argparse
import os

import numpy as np
import torch

from _timing import Row, markdown, paired, spread, table
from iclr25_nb.neural_fdm import BezierShellGenerator, area_loads, fdm_solve, solve_structure


def jax_fdm_solver(s, x, q, P):
    "A closure running jax_fdm's EquilibriumModel (jit + vmap) on the batch, or None if jax_fdm is not installed."
    try:
        import jax
        jax.config.update('jax_enable_x64', True)
        import jax.numpy as jnp
        from jax_fdm.equilibrium import EquilibriumModel, EquilibriumStructure
    except ImportError:
        return None
    structure = EquilibriumStructure(nodes=np.arange(s.n), edges=s.edges.numpy(),         # numpy arrays (jax_fdm 0.14)
                                     supports=s.fixed.numpy().astype(np.int64))            # per-node support flags
    model = EquilibriumModel(tmax=1)
    fixed = s.fixed_idx.numpy()

    def one(qi, xi, Pi):
        xyz_free = model.nodes_free_positions(qi, xi[fixed], Pi, structure) if hasattr(model, 'nodes_free_positions') \
            else model.equilibrium(qi, xi[fixed], Pi, structure)
        return model.nodes_positions(xyz_free, xi[fixed], structure) if hasattr(model, 'nodes_positions') else xyz_free

    f = jax.jit(jax.vmap(one))
    args = jnp.asarray(q), jnp.asarray(x), jnp.asarray(P)
    f(*args).block_until_ready()                                  # compile once, outside the timing
    return lambda: np.asarray(f(*args).block_until_ready())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--designs', type=int, default=100)
    ap.add_argument('--num-uv', type=int, default=10)
    ap.add_argument('--repeats', type=int, default=15)
    ap.add_argument('--threads', type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.threads == 1:   # XLA's CPU backend uses every core unless told otherwise: the same single thread for jax_fdm
        os.environ.setdefault('XLA_FLAGS', '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1')
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}\n")
    gen = BezierShellGenerator('saddle', 'none', num_uv=a.num_uv)
    s = gen.structure
    x = gen.sample(a.designs, torch.Generator().manual_seed(0))
    q = -torch.rand(a.designs, s.m, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 9.5 - 0.5
    P = area_loads(x, s.faces, -0.5)
    xn, qn, Pn = x.numpy(), q.numpy(), P.numpy()
    edges, fixed = s.edges.numpy(), s.fixed.numpy()

    size = f'{a.designs} shells, {s.n} nodes, {s.m} edges'
    task = 'FDM equilibrium, batch, float64'
    core_fn = lambda: solve_structure(q, x[:, s.fixed_idx], P, s)
    with torch.no_grad(): core = core_fn()
    ours = fdm_solve(qn, xn, edges, fixed, Pn)
    fns, names, skipped = {'core': core_fn, 'api': lambda: fdm_solve(qn, xn, edges, fixed, Pn)}, {}, []
    try:
        from compas_fd.solvers import fd_numpy
    except ImportError as e:
        skipped.append(('compas_fd fd_numpy', e))
    else:
        fixed_idx, edge_list = s.fixed_idx.tolist(), edges.tolist()
        def compas():
            return np.stack([np.asarray(fd_numpy(vertices=xn[b], fixed=fixed_idx, edges=edge_list,
                                                 forcedensities=qn[b].tolist(), loads=Pn[b]).vertices)
                             for b in range(a.designs)])
        fns['compas_fd fd_numpy (loop)'] = compas
    try:
        jf = jax_fdm_solver(s, xn, qn, Pn)
        if jf is None: skipped.append(('jax_fdm', 'not installed'))
        else: fns['jax_fdm EquilibriumModel (jit + vmap)'] = jf
    except Exception as e:   # an API drift of jax_fdm must not hide the other rows
        skipped.append(('jax_fdm', e))
    with torch.no_grad(): med, ts = paired(fns, a.repeats)        # interleaved: a load drift hits all alike
    t_core = med['core']
    rows = [Row('ours: fdm_solve (numpy API, validated)', size, med['api'], t_core,
                float(np.abs(core.numpy() - ours).max()), 'ours: solve_structure (torch)', kind='cost')]
    spreads = []
    for k, f in fns.items():
        if k in ('core', 'api'): continue
        rows.append(Row(task, size, t_core, med[k], float(np.abs(f() - ours).max()), k))
        spreads.append((k, spread(ts, 'core', k)))
    rows += [Row.skipped(task, size, t_core, k, e) for k, e in skipped]
    print(table(rows, 'Force-density solve: ours (solve_structure, batched torch) vs peers', unit='ms',
                agreement='max abs diff to fdm_solve'))
    print(f"\nmedian of {a.repeats} paired rounds after 1 warm-up; per design: ours {1e3 * t_core / a.designs:.4f} ms"
          + ''.join(f", {r.peer_name} {1e3 * r.peer / a.designs:.4f} ms" for r in rows[1:] if r.peer) + '\n')
    print(markdown(['peer', f'ours / peer: median [quartiles] of {a.repeats} paired calls'], spreads,
                   'FDM solve ratio spread'))


if __name__ == '__main__':
    main()
