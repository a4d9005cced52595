"""MOFFlow benchmarks: our batched torch SO(3) maps against scipy and roma, and CIF parsing with pymatgen against
gemmi and ase, on the same inputs in the same run.

1. `so3.log_map` (matrix -> rotation vector, via Shepperd quaternions) and `so3.exp_map` (Rodrigues) on n random
   rotations (float64), against `scipy.spatial.transform.Rotation` (`from_matrix(...).as_rotvec()`,
   `from_rotvec(...).as_matrix()`) and roma (`rotmat_to_rotvec`, `rotvec_to_rotmat`); agreement = max |difference|.
2. Reading a CIF into Cartesian coordinates: pymatgen's `CifParser` (what `load_cif` uses, without our checks)
   against gemmi (`cif.read` + `make_small_structure_from_block`, its asymmetric unit expanded with `get_all_unit_cell_sites`)
   and ase (`ase.io.read`), on three real MOFs of increasing size; agreement = atom counts (ours / peer).

Run: python benchmarks/mofflow.py [--quick]   (--quick: 10^3, 10^4, 10^5 rotations and 3 CIFs, well under a minute)
"""
import argparse
import os
import warnings
from pathlib import Path

import numpy as np
import torch

from _timing import Row, table, timed
from iclr25_nb.mofflow import so3

DATA = Path(os.environ.get('ICLR25_DATA', Path(__file__).resolve().parents[2] / 'shared' / 'data')) / 'mof_cif'
CIFS = ('MOF-74-Zn.cif', 'qmof-fef756d.cif', 'mof-5_cellopt.cif')


def bench_so3(n: int) -> list:
    from scipy.spatial.transform import Rotation
    R = so3.uniform(n, torch.Generator().manual_seed(0))
    Rn = R.numpy()
    t_log, w = timed(lambda: so3.log_map(R))
    t_sp, w_sp = timed(lambda: Rotation.from_matrix(Rn).as_rotvec())
    t_exp, M = timed(lambda: so3.exp_map(w))
    t_spe, M_sp = timed(lambda: Rotation.from_rotvec(w_sp).as_matrix())
    size = f'n={n:,}'
    rows = [Row('log map (matrix -> rotvec)', size, t_log, t_sp, float(np.abs(w.numpy() - w_sp).max()), 'scipy'),
            Row('exp map (rotvec -> matrix)', size, t_exp, t_spe, float(np.abs(M.numpy() - M_sp).max()), 'scipy')]
    try:
        import roma
        t_rl, w_r = timed(lambda: roma.rotmat_to_rotvec(R))
        t_re, M_r = timed(lambda: roma.rotvec_to_rotmat(w))
        rows += [Row('log map (matrix -> rotvec)', size, t_log, t_rl, float((w - w_r).abs().max()), 'roma'),
                 Row('exp map (rotvec -> matrix)', size, t_exp, t_re, float((M - M_r).abs().max()), 'roma')]
    except ImportError as e:
        rows.append(Row.skipped('log / exp map', size, t_log, 'roma', e))
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
            rows.append(Row('read a CIF (pymatgen CifParser)', f'{name} ({n_ours} atoms)', t_ours, t,
                            f'{n_ours} / {n} atoms', peer))
        except Exception as e:      # not installed, or the peer cannot read this file
            rows.append(Row.skipped('read a CIF (pymatgen CifParser)', name, t_ours, peer, e))
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
