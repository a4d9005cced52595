"""SPACE benchmark: generation and evaluation throughput, and our BFS against networkx (the peer upstream uses).

1. Shortest paths on mazes of three sizes: our `shortest_path` (a BFS over flat indices of the padded grid that
   stops at the goal) against networkx's `shortest_path_length` (bidirectional BFS) on the 4-connected grid graph of
   the same free cells, with the graph built per call (as upstream builds it per environment) and built once;
   paired rounds in CPU seconds (median and quartiles of the ratios); agreement = the largest difference in path
   length (0 = identical).
2. Maze generation at three sizes: our `carve_maze` (iterative depth-first backtracker) against mazelib's
   BacktrackingGenerator (the `bench` extra), the same algorithm and grid layout (1 = free in ours, 0 = free in
   mazelib); paired CPU-time rounds; agreement = both grids are perfect mazes (2hw - 1 free cells, one component).
3. Items generated per second per task (text and image), and evaluation throughput (items or episodes scored per
   second) of the oracle agent.

Run: python benchmarks/space.py [--cells 10 30 60] [--repeats 15] [--items 50]
"""
import argparse
import time

import numpy as np

from _timing import Row, markdown, paired, spread, table, time_call


def bfs_vs_networkx(cells: int, repeat: int, pairs: int = 10):
    """Rows for one maze size: our BFS against networkx with the graph built per call (as upstream does per
    environment) and against networkx on a graph built once; paired rounds in CPU seconds."""
    from iclr25_nb.space import braid, carve_maze, shortest_path
    rng = np.random.default_rng(cells)
    grid = braid(carve_maze(cells, cells, rng), 0.2, rng)
    free = [tuple(map(int, p)) for p in np.argwhere(grid == 1)]
    ends = [(free[i], free[j]) for i, j in rng.integers(0, len(free), (pairs, 2))]
    ours = lambda: [len(shortest_path(grid, a, b)) - 1 for a, b in ends]
    size = f'{grid.shape[0]}x{grid.shape[1]}, {pairs} pairs'
    try:
        import networkx as nx
    except ImportError as e:
        return [Row.skipped('shortest paths', size, time_call(ours, repeat, clock='cpu'), 'networkx', e)]

    def build():
        g = nx.grid_2d_graph(*grid.shape)
        g.remove_nodes_from([tuple(p) for p in np.argwhere(grid == 0)])
        return g
    g0 = build()
    fns = {'ours': ours, 'nx': lambda: (lambda g: [nx.shortest_path_length(g, a, b) for a, b in ends])(build()),
           'nx_prebuilt': lambda: [nx.shortest_path_length(g0, a, b) for a, b in ends]}
    med, ts = paired(fns, repeat, clock='cpu')
    diff = float(np.max(np.abs(np.subtract(ours(), fns['nx']()))))
    return [Row('shortest paths (graph built per call, as upstream)', size, med['ours'], med['nx'],
                f'{diff:.0f} max |length diff|; ratio {spread(ts, "ours", "nx")}', 'networkx'),
            Row('shortest paths (graph built once)', size, med['ours'], med['nx_prebuilt'],
                f'ratio {spread(ts, "ours", "nx_prebuilt")}', 'networkx')]


def _perfect(free: np.ndarray, h: int, w: int) -> bool:
    "A perfect maze on h x w cells: 2hw - 1 free grid squares (cells and passages) forming one 4-connected component."
    from scipy.ndimage import label
    return int(free.sum()) == 2 * h * w - 1 and label(free)[1] == 1


def maze_vs_mazelib(cells: int, repeat: int) -> Row:
    "One row: a perfect cells x cells maze, ours against mazelib's backtracker, paired CPU-time rounds."
    from iclr25_nb.space import carve_maze
    rng = np.random.default_rng(cells)
    ours = lambda: carve_maze(cells, cells, rng)
    g = ours()
    size = f'{g.shape[0]}x{g.shape[1]}'
    try:
        from mazelib import Maze
        from mazelib.generate.BacktrackingGenerator import BacktrackingGenerator
    except ImportError as e:
        return Row.skipped('perfect maze (DFS backtracker)', size, time_call(ours, repeat, clock='cpu'), 'mazelib', e)

    def peer():
        m = Maze(cells)
        m.generator = BacktrackingGenerator(cells, cells)
        m.generate()
        return m.grid
    med, ts = paired({'ours': ours, 'mazelib': peer}, repeat, clock='cpu')
    both = _perfect(ours() == 1, cells, cells) and _perfect(peer() == 0, cells, cells)
    return Row('perfect maze (DFS backtracker)', size, med['ours'], med['mazelib'],
               f'{"both perfect" if both else "NOT both perfect"}; ratio {spread(ts, "ours", "mazelib")}', 'mazelib')


def throughput(n: int):
    from iclr25_nb.space import PRESENTATIONS, TASKS, OracleAgent, evaluate, generate
    rows = []
    for task in TASKS:
        for pres in PRESENTATIONS[task]:
            t0 = time.perf_counter(); items = generate(task, n, pres, seed=0); t_gen = time.perf_counter() - t0
            t0 = time.perf_counter(); evaluate(OracleAgent(), (task,), items={task: items})
            t_eval = time.perf_counter() - t0
            rows.append((task, pres, n / t_gen, n / t_eval))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--cells', type=int, nargs='+', default=[10, 30, 60])
    ap.add_argument('--repeats', type=int, default=15)
    ap.add_argument('--items', type=int, default=50)
    args = ap.parse_args()
    print(table([r for c in args.cells for r in bfs_vs_networkx(c, args.repeats)], 'BFS shortest paths: ours vs networkx',
                unit='ms', agreement='agreement; ours / peer median [quartiles] of paired CPU-time rounds'))
    print()
    print(table([maze_vs_mazelib(c, args.repeats) for c in args.cells], 'maze generation: ours vs mazelib', unit='ms',
                agreement='agreement; ours / peer median [quartiles] of paired CPU-time rounds'))
    print()
    rows = throughput(args.items)
    print('## generation and evaluation throughput (oracle agent)\n')
    print(markdown(['task', 'presentation', 'items generated / s', 'items scored / s'], rows))


if __name__ == '__main__':
    main()
