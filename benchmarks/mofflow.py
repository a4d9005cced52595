"""MOFFlow benchmarks: our batched torch SO(3) maps against scipy and roma, and CIF parsing with pymatgen against
gemmi and ase, on the same inputs in the same run.

1. `so3.log_map` (matrix -> rotation vector: Shepperd's four quaternion candidates in one matrix product) and
   `so3.exp_map` (rotation vector -> matrix) on n random rotations (float64), against
   `scipy.spatial.transform.Rotation` (`from_matrix(...).as_rotvec()`, `from_rotvec(...).as_matrix()`) and roma
   (`rotmat_to_rotvec`, `rotvec_to_rotmat`); each (ours, peer) pair in its own paired rounds in CPU seconds
   (`paired(..., clock='cpu')`; interleaving all of them put roma's large allocations before our call), the median
   and quartiles of the per-round ratios printed beside the table; agreement = max |difference|.
   `exp_map` of a CPU tensor without a gradient runs `_exp_map_chunked` (the quaternion's 10 distinct products and
   one (B, 10) x (10, 9) product per cache-sized chunk of 16,384) from 4,096 rotations on, and scipy's compiled loop
   below (torch's per-call overhead loses there): at n = 10^3 the scipy row times that loop without the `Rotation`
   object, from 10^4 on our torch kernel. The torch path (autograd, GPU) is timed like for like against roma with
   `requires_grad` inputs, forward + backward ("autograd" rows).
2. Reading a CIF into Cartesian coordinates: pymatgen's `CifParser` (what `load_cif` uses, without our checks)
   against gemmi (`cif.read` + `make_small_structure_from_block`, its asymmetric unit expanded with `get_all_unit_cell_sites`)
   and ase (`ase.io.read`), on three real MOFs of increasing size; agreement = atom counts (ours / peer).
   `kind='cost'`: pymatgen is not our kernel, and no user waits on it: `load_cif` reads one CIF per run (MOF-5,
   ~0.3 s of the quick preset) and what follows needs a pymatgen `Structure` (primitive cell, neighbour lists,
   `StructureMatcher`), so gemmi could only be a front end that rebuilds one.

Run: python benchmarks/mofflow.py [--quick]   (--quick: 10^3, 10^4, 10^5 rotations and 3 CIFs, well under a minute)
"""
import argparse
import os
import warnings
from pathlib import Path

import numpy as np
import torch

from _timing import Row, paired, spread, table, timed
from iclr25_nb.mofflow import so3

DATA = Path(os.environ.get('ICLR25_DATA', Path(__file__).resolve().parents[2] / 'shared' / 'data')) / 'mof_cif'
CIFS = ('MOF-74-Zn.cif', 'qmof-fef756d.cif', 'mof-5_cellopt.cif')


def _fwd_bwd(f, x):
    "f(x).sum() backward: the autograd path, like for like (x requires grad)."
    def run():
        x.grad = None
        f(x).sum().backward()
    return run


def bench_so3(n: int, repeat: int = 30) -> list:
    from scipy.spatial.transform import Rotation
    R = so3.uniform(n, torch.Generator().manual_seed(0))
    Rn = R.numpy()
    w = so3.log_map(R)
    w_sp, M_sp = Rotation.from_matrix(Rn).as_rotvec(), Rotation.from_rotvec(w.numpy()).as_matrix()
    size = f'n={n:,}'
    fns = {'log': lambda: so3.log_map(R), 'log_sp': lambda: Rotation.from_matrix(Rn).as_rotvec(),
           'exp': lambda: so3.exp_map(w), 'exp_sp': lambda: Rotation.from_rotvec(w_sp).as_matrix()}
    try:
        import roma
        fns |= {'log_roma': lambda: roma.rotmat_to_rotvec(R), 'exp_roma': lambda: roma.rotvec_to_rotmat(w)}
        Rg, wg = R.clone().requires_grad_(), w.clone().requires_grad_()
        Rr, wr = R.clone().requires_grad_(), w.clone().requires_grad_()
        fns |= {'log_g': _fwd_bwd(so3.log_map, Rg), 'log_g_roma': _fwd_bwd(roma.rotmat_to_rotvec, Rr),
                'exp_g': _fwd_bwd(so3.exp_map, wg), 'exp_g_roma': _fwd_bwd(roma.rotvec_to_rotmat, wr)}
    except ImportError as e:
        roma = e
    med, ts = {}, {}
    for ours, peer in (('log', 'log_sp'), ('exp', 'exp_sp'), ('log', 'log_roma'), ('exp', 'exp_roma'),
                       ('log_g', 'log_g_roma'), ('exp_g', 'exp_g_roma')):    # each pair in its own rounds
        if peer not in fns: continue
        m, t = paired({ours: fns[ours], peer: fns[peer]}, repeat=repeat, clock='cpu')
        med[peer], ts[peer] = m[peer], t[peer]
        med[(ours, peer)], ts[(ours, peer)] = m[ours], t[ours]
    w_ours, M_ours = so3.log_map(R), so3.exp_map(w)
    rows = [Row('log map (matrix -> rotvec)', size, med[('log', 'log_sp')], med['log_sp'], float(np.abs(w_ours.numpy() - w_sp).max()), 'scipy'),
            Row('exp map (rotvec -> matrix; scipy\'s loop below 4,096)', size, med[('exp', 'exp_sp')], med['exp_sp'],
                float(np.abs(M_ours.numpy() - M_sp).max()), 'scipy')]
    spreads = [('log / scipy', spread(ts, ('log', 'log_sp'), 'log_sp')), ('exp / scipy', spread(ts, ('exp', 'exp_sp'), 'exp_sp'))]
    if isinstance(roma, ImportError):
        rows.append(Row.skipped('log / exp map', size, med[('log', 'log_sp')], 'roma', roma))
    else:
        M_g = so3.exp_map(w.clone().requires_grad_()).detach()
        rows += [Row('log map (matrix -> rotvec)', size, med[('log', 'log_roma')], med['log_roma'],
                     float((w_ours - roma.rotmat_to_rotvec(R)).abs().max()), 'roma'),
                 Row('exp map (rotvec -> matrix)', size, med[('exp', 'exp_roma')], med['exp_roma'],
                     float((M_ours - roma.rotvec_to_rotmat(w)).abs().max()), 'roma'),
                 Row('log map, autograd (forward + backward)', size, med[('log_g', 'log_g_roma')], med['log_g_roma'],
                     float((Rg.grad - Rr.grad).abs().max()), 'roma'),
                 Row('exp map, autograd (torch path, forward + backward)', size, med[('exp_g', 'exp_g_roma')], med['exp_g_roma'],
                     float((M_g - roma.rotvec_to_rotmat(w)).abs().max()), 'roma')]
        spreads += [('log / roma', spread(ts, ('log', 'log_roma'), 'log_roma')), ('exp / roma', spread(ts, ('exp', 'exp_roma'), 'exp_roma')),
                    ('log autograd / roma', spread(ts, ('log_g', 'log_g_roma'), 'log_g_roma')),
                    ('exp autograd / roma', spread(ts, ('exp_g', 'exp_g_roma'), 'exp_g_roma'))]
    print(f'{size}: ' + '; '.join(f'{k} {v}' for k, v in spreads) + ' (median [quartiles] of paired CPU-time ratios)')
    return rows


def _pymatgen(path):
    from pymatgen.io.cif import CifParser
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return len(CifParser(str(path)).parse_structures(primitive=False)[0])


def _gemmi(path):
    import gemmi
    st = gemmi.make_small_structure_from_block(gemmi.cif.read(str(path)).sole_block())
    return len(st.get_all_unit_cell_sites())


def _ase(path):
    import ase.io
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return len(ase.io.read(str(path)))


def bench_cif(name: str) -> list:
    path = DATA / name
    t_ours, n_ours = timed(lambda: _pymatgen(path), repeat=3)
    rows = []
    for peer, fn in (('gemmi', _gemmi), ('ase', _ase)):
        try:
            t, n = timed(lambda: fn(path), repeat=3)
            rows.append(Row('read a CIF (pymatgen CifParser; not on a path users wait on)', f'{name} ({n_ours} atoms)',
                            t_ours, t, f'{n_ours} / {n} atoms', peer, kind='cost'))
        except Exception as e:      # not installed, or the peer cannot read this file
            rows.append(Row.skipped('read a CIF (pymatgen CifParser)', name, t_ours, peer, e, kind='cost'))
    return rows


def main(sizes):
    rows = []
    for n in sizes: rows += bench_so3(n)
    if (DATA / CIFS[0]).is_file():
        for name in CIFS: rows += bench_cif(name)
    else:
        print(f'no CIFs in {DATA}: the CIF rows are skipped')
    return rows


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='10^3..10^5 rotations (the default is 10^4..10^6)')
    a = ap.parse_args()
    torch.set_num_threads(1)
    sizes = (1_000, 10_000, 100_000) if a.quick else (10_000, 100_000, 1_000_000)
    print(table(main(sizes), 'MOFFlow: SO(3) maps vs scipy / roma, CIF parsing vs gemmi / ase (one torch thread)',
                unit='ms', agreement='agreement'))
    print('\nours / peer below 1: ours is faster. SO(3) rows: float64, the same matrices and rotation vectors on '
          'both sides. CIF rows: "ours" is pymatgen (the parser load_cif uses), the peers read the same file.')
