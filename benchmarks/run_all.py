"""Run every benchmark and write one table (markdown + JSON) with the machine, torch threads and versions.

    python benchmarks/run_all.py [--quick] [--out benchmarks/results] [--only eign noisy_trajectories] [--timeout 900]
    python benchmarks/run_all.py --quick --only space threedpc --update     # rerun these, keep the others' rows

Each `benchmarks/*.py` (not `_*.py`, not this file) runs as its own subprocess, with `--quick` when `--quick` is given
and the script accepts it (its source mentions `--quick`), and with `$BENCH_JSON` naming a file that `_timing.table()`
and `_timing.markdown()` append their rows to. A benchmark that fails, times out or lacks a peer library becomes a row
that says so; its full output is kept as `<out>/<name>.txt`. Writes `<out>/results.md` and `<out>/results.json`.

Each row says what it races (`vs`, from `_timing.Row.kind`): `peer` = another library doing the same job (the rows
issue 47 wants at or below 1x), `cost` = ours against ours (a method's overhead over its baseline, the previous
code). Above the table one line sums up the peer rows: how many, how many at or below 1.0x, and which are above.
`--update` reruns only the benchmarks named by `--only` and merges their rows into the existing results.json and
results.md: the other benchmarks keep their rows, each with the date and load of its own run (per script, below the
table).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _timing import JSON_ENV, _markdown, fmt  # noqa: E402

PACKAGES = ('numpy', 'scipy', 'torch', 'POT', 'scikit-learn', 'scikit-image', 'cliffordlayers', 'roma', 'networkx',
            'snntorch', 'spikingjelly', 'torch_geometric', 'esda', 'compas_fd', 'jax', 'jax_fdm', 'pymatgen', 'rdkit',
            'iclr25_nb')


def discover(folder: Path, only: list[str] | None = None) -> list[tuple[str, Path | None]]:
    "(name, path) of the benchmarks in `folder`, sorted; names in `only` that have no script come back with path None."
    found = {p.stem: p for p in sorted(folder.glob('*.py')) if not p.name.startswith('_') and p.name != Path(__file__).name}
    if not only: return sorted(found.items())
    return [(n, found.get(n)) for n in only]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')


def machine() -> dict:
    "The machine, threads and library versions the table was measured with."
    info = {'date': _now(), 'platform': platform.platform(),
            'processor': platform.processor() or platform.machine(), 'cpu_count': os.cpu_count(),
            'python': platform.python_version(),
            'env': {k: os.environ[k] for k in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS') if k in os.environ}}
    try:
        with open('/proc/cpuinfo') as f:
            m = re.search(r'model name\s*:\s*(.+)', f.read()); info['processor'] = m.group(1).strip() if m else info['processor']
    except OSError: pass
    try: info['load_avg'] = [round(x, 2) for x in os.getloadavg()]
    except OSError: pass
    try:
        import torch
        info['torch_threads'] = torch.get_num_threads(); info['torch_interop_threads'] = torch.get_num_interop_threads()
    except Exception as e: info['torch_threads'] = f'unavailable ({type(e).__name__})'
    versions = {}
    for p in PACKAGES:
        try: versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError: pass
    info['versions'] = versions
    return info


def _why_failed(out: str) -> str:
    "A one-line reason from a failed benchmark's output: a missing module is a missing peer."
    m = re.findall(r"(?:ModuleNotFoundError|ImportError): (.+)", out)
    if m: return f'missing peer or dependency: {m[-1].strip()}'
    lines = [l for l in out.strip().splitlines() if l.strip()]
    return lines[-1].strip()[:200] if lines else 'no output'


def run_one(name: str, path: Path | None, quick: bool, timeout: float, out_dir: Path) -> dict:
    "Run one benchmark as a subprocess and collect its rows from $BENCH_JSON."
    res = {'name': name, 'status': 'ok', 'seconds': None, 'command': None, 'quick': False, 'rows': [], 'tables': [],
           'date': _now()}
    if path is None: res.update(status='missing', reason='no such benchmark script'); return res
    quick_ok = quick and '--quick' in path.read_text()
    cmd = [sys.executable, str(path)] + (['--quick'] if quick_ok else [])
    res.update(command=' '.join([Path(cmd[0]).name, *cmd[1:]]), quick=quick_ok)
    fd, jpath = tempfile.mkstemp(prefix=f'bench_{name}_', suffix='.jsonl'); os.close(fd)
    env = {**os.environ, JSON_ENV: jpath}
    try: res['load_avg_start'] = [round(x, 2) for x in os.getloadavg()]
    except OSError: pass
    t0 = time.perf_counter()
    # its own session, so that a timeout ends the benchmark and whatever it started (servers, browsers), and only those
    p = subprocess.Popen(cmd, cwd=HERE.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout); rc = p.returncode
    except subprocess.TimeoutExpired:
        try: os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError: pass
        stdout, stderr = p.communicate(); rc = None
        res.update(status='timeout', reason=f'stopped after {timeout:g} s')
    output = stdout + ('\n--- stderr ---\n' + stderr if stderr.strip() else '')
    res['seconds'] = round(time.perf_counter() - t0, 2)
    if rc not in (0, None):
        why = _why_failed(output)
        res.update(status='missing peer' if why.startswith('missing peer') else 'failed', reason=f'exit {rc}: {why}')
    (out_dir / f'{name}.txt').write_text(output)
    with open(jpath) as f:
        for line in f:
            try: item = json.loads(line)
            except json.JSONDecodeError: continue
            (res['rows'] if item.get('kind') == 'row' else res['tables']).append(item)
    os.unlink(jpath)
    if res['status'] == 'ok' and not res['rows'] and not res['tables']:
        res['note'] = f'no machine-readable rows (its output is in {name}.txt)'
    return res


def _ratio_cell(r: dict) -> str:
    x = r.get('ratio')
    return '—' if x is None or (isinstance(x, float) and math.isnan(x)) else f'{x:.3g}'


def _agree_cell(a) -> str:
    return f'{a:.1e}' if isinstance(a, float) else fmt(a)


def peer_summary(results: list[dict]) -> dict:
    "The peer rows of `results` (run_one's dicts): `iclr25_nb.docs.peer_summary`, which the docs page uses too."
    from iclr25_nb.docs import peer_summary as summary
    return summary({'benchmarks': results})


def summary_line(results: list[dict]) -> str:
    "'peer rows: N; at or below 1.0x: K; above: (benchmark, task, size, ratio), ...': `iclr25_nb.docs.benchmark_summary`."
    from iclr25_nb.docs import benchmark_summary
    return benchmark_summary({'benchmarks': results})


def to_markdown(info: dict, results: list[dict], quick: bool) -> str:
    "The one table: a row per benchmark row (with ratio), and a row per benchmark that failed, timed out or is missing."
    v = ', '.join(f'{k} {x}' for k, x in info['versions'].items())
    head = [f"# Benchmarks ({'--quick' if quick else 'full'}), {info['date']}", '',
            f"Machine: {info['processor']}, {info['cpu_count']} CPUs, {info['platform']}, Python {info['python']}; "
            f"torch threads {info.get('torch_threads')}; load average (1, 5, 15 min) {info.get('load_avg')} at the start, "
            f"{info.get('load_avg_end')} at the end"
            + (f"; env {info['env']}" if info['env'] else '') + '.', '', f'Versions: {v}.', '',
            'ours / peer below 1: ours is faster (each benchmark: median of its repeats, both sides in the same run). '
            "vs: `peer` = another library doing the same job; `cost` = ours against ours (a method's overhead over its "
            'baseline, the previous code), not a race.', '']
    for u in info.get('updates', []):
        head.append(f"Updated {u['date']} (load average {u.get('load_avg')}): reran {', '.join(u['names'])}; the other "
                    'rows are from their own runs (dates per script below).')
    if info.get('updates'): head.append('')
    head += [summary_line(results), '', '']
    body = []
    for b in results:
        if b['status'] != 'ok':
            body.append((b['name'], f"**{b['status']}**: {b.get('reason', '')}", '', '', '', '', '', '', '', fmt(b['seconds'])))
        for r in b['rows']:
            peer = f"skipped: {r['skip']}" if r.get('skip') else r.get('peer_s')
            body.append((b['name'], r.get('task'), r.get('size'), r.get('vs', 'peer'), r.get('peer_name') or '—',
                         r.get('ours_s'), peer, _ratio_cell(r), _agree_cell(r.get('agreement')), ''))
        if b['status'] == 'ok' and not b['rows']:
            body.append((b['name'], b.get('note') or f"{len(b['tables'])} table(s) without ratios (see results.json)",
                         '', '', '', '', '', '', '', fmt(b['seconds'])))
    table = _markdown(['benchmark', 'task', 'size', 'vs', 'peer', 'ours (s)', 'peer (s)', 'ours / peer', 'agreement',
                       'script (s)'], body)
    per = [f"{b['name']}: {b['status']}, {fmt(b['seconds'])} s" + (' (--quick)' if b.get('quick') else '')
           + (f", load {b['load_avg_start'][0]}" if b.get('load_avg_start') else '')
           + f", {b.get('date') or info['date']}" for b in results]
    return ('\n'.join(head) + table + '\n\nPer script (seconds, 1-minute load average when it started, date): '
            + '; '.join(per) + '.\n')


def merge(old: dict, new: list[dict], info: dict) -> tuple[dict, list[dict]]:
    """Results of an `--update`: `old` (a results.json) with the benchmarks in `new` replaced (or added), sorted by
    name; the machine description is the old one (its date the first run's) plus this update in `updates`. A
    benchmark of the old table without its own date gets the old table's date."""
    m = dict(old.get('machine') or info)
    for b in old.get('benchmarks', []): b.setdefault('date', m.get('date'))
    names = {b['name'] for b in new}
    results = sorted([b for b in old.get('benchmarks', []) if b['name'] not in names] + new, key=lambda b: b['name'])
    m['updates'] = list(m.get('updates', [])) + [{'date': info['date'], 'names': sorted(names),
                                                  'load_avg': info.get('load_avg'), 'versions': info.get('versions')}]
    return m, results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--quick', action='store_true', help='pass --quick to the benchmarks that accept it')
    ap.add_argument('--out', type=Path, default=HERE / 'results', help='folder for results.md, results.json and outputs')
    ap.add_argument('--only', nargs='+', metavar='NAME', help='run only these benchmarks (file names without .py)')
    ap.add_argument('--timeout', type=float, default=None, help='seconds per benchmark (default 600 with --quick, else 3600)')
    ap.add_argument('--update', action='store_true',
                    help="rerun only --only's benchmarks and merge their rows into the existing results in --out")
    ap.add_argument('--dir', type=Path, default=HERE, help=argparse.SUPPRESS)       # another folder of benchmarks (tests)
    a = ap.parse_args(argv)
    timeout = a.timeout or (600.0 if a.quick else 3600.0)
    a.out.mkdir(parents=True, exist_ok=True)
    info, results = machine(), []
    for name, path in discover(a.dir, a.only):
        print(f'{name} ...', end=' ', flush=True)
        res = run_one(name, path, a.quick, timeout, a.out); results.append(res)
        print(res['status'], f"{res['seconds']} s" if res['seconds'] is not None else '', res.get('reason', ''), flush=True)
    try: info['load_avg_end'] = [round(x, 2) for x in os.getloadavg()]
    except OSError: pass
    quick = a.quick
    if a.update:
        prev = a.out / 'results.json'
        if prev.exists():
            old = json.loads(prev.read_text())
            info, results = merge(old, results, info)
            quick = bool(old.get('quick', a.quick))
            if quick != a.quick: print(f'note: the table was measured with quick={quick}, this update with quick={a.quick}')
        else: print(f'--update: no {prev}, writing a new table')
    md = to_markdown(info, results, quick)
    (a.out / 'results.md').write_text(md)
    (a.out / 'results.json').write_text(json.dumps({'machine': info, 'quick': quick, 'benchmarks': results}, indent=1))
    print(md)
    print(f"wrote {a.out / 'results.md'} and {a.out / 'results.json'}")
    return 0


if __name__ == '__main__':
    sys.exit(main())
