"""Benchmark: our batched torch force-density solver vs compas_fd (`fd_numpy`) and, when importable, jax_fdm.

    python benchmarks/neural_fdm.py [--designs 100] [--num-uv 10] [--repeats 3]

Same networks (Bézier shells, random compression force densities, tributary-area loads), float64. Prints the time
per design of each solver, our time / peer time, and the largest coordinate difference to ours."""
import argparse
import time

import numpy as np
import torch

from iclr25_nb.neural_fdm import BezierShellGenerator, area_loads, fdm_solve, solve_structure


def best_of(fn, repeats):
    best, out = float('inf'), None
    for _ in range(repeats):
        t0 = time.perf_counter(); out = fn(); best = min(best, time.perf_counter() - t0)
    return best, out


def jax_fdm_solver(s, x, q, P):
    "A closure running jax_fdm's EquilibriumModel (jit + vmap) on the batch, or None if jax_fdm is not installed."
    try:
        import jax
        jax.config.update('jax_enable_x64', True)
        import jax.numpy as jnp
        from jax_fdm.equilibrium import EquilibriumModel, EquilibriumStructure
    except ImportError:
        return None
    structure = EquilibriumStructure(nodes=list(range(s.n)), edges=s.edges.tolist(), supports=s.fixed_idx.tolist())
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
    ap.add_argument('--repeats', type=int, default=3)
    a = ap.parse_args()
    gen = BezierShellGenerator('saddle', 'none', num_uv=a.num_uv)
    s = gen.structure
    x = gen.sample(a.designs, torch.Generator().manual_seed(0))
    q = -torch.rand(a.designs, s.m, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 9.5 - 0.5
    P = area_loads(x, s.faces, -0.5)
    xn, qn, Pn = x.numpy(), q.numpy(), P.numpy()
    edges, fixed = s.edges.numpy(), s.fixed.numpy()

    rows = []
    t_api, ours = best_of(lambda: fdm_solve(qn, xn, edges, fixed, Pn), a.repeats)
    rows.append(('ours: fdm_solve (numpy API, validated, batched)', t_api, 0.0))
    with torch.no_grad():
        t_core, core = best_of(lambda: solve_structure(q, x[:, s.fixed_idx], P, s), a.repeats)
    rows.append(('ours: solve_structure (torch, batched)', t_core, float(np.abs(core.numpy() - ours).max())))
    try:
        from compas_fd.solvers import fd_numpy
        fixed_idx, edge_list = s.fixed_idx.tolist(), edges.tolist()
        def compas():
            return np.stack([np.asarray(fd_numpy(vertices=xn[b], fixed=fixed_idx, edges=edge_list,
                                                 forcedensities=qn[b].tolist(), loads=Pn[b]).vertices)
                             for b in range(a.designs)])
        t_c, c_out = best_of(compas, a.repeats)
        rows.append(('compas_fd 0.5 fd_numpy (loop)', t_c, float(np.abs(c_out - ours).max())))
    except ImportError:
        print('compas_fd not installed: skipped')
    try:
        jf = jax_fdm_solver(s, xn, qn, Pn)
        if jf is None: print('jax_fdm not installed: skipped')
        else:
            t_j, j_out = best_of(jf, a.repeats)
            rows.append(('jax_fdm EquilibriumModel (jit + vmap)', t_j, float(np.abs(j_out - ours).max())))
    except Exception as e:   # an API drift of jax_fdm must not hide the other rows
        print(f'jax_fdm failed ({type(e).__name__}: {e}): skipped')

    print(f"{a.designs} shells, {s.n} nodes, {s.m} edges, float64, best of {a.repeats}")
    print(f"| solver | ms per design | ours (solve_structure) / this | max abs diff to fdm_solve |")
    print('|---|---|---|---|')
    for name, t, diff in rows:
        print(f"| {name} | {1e3 * t / a.designs:.4f} | {t_core / t:.3g} | {diff:.1e} |")


if __name__ == '__main__':
    main()
