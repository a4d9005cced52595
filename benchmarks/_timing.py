"""The one timer and the one table printer of `benchmarks/*.py`.

    from _timing import Row, table, time_call, timed
    t = time_call(lambda: f(x), repeat=5, warmup=1)           # median seconds of 5 calls after 1 untimed call
    t, y = timed(lambda: f(x))                                # the same, and the last call's result
    med, ts = paired({'ours': f, 'peer': g}, repeat=30)       # interleaved calls: a load drift hits both alike
    med, ts = paired({'ours': f, 'peer': g}, clock='cpu')     # the same in CPU seconds of this process
    spread(ts, 'ours', 'peer')                                # '0.52 [0.47, 0.58]': median [quartiles] of the ratios
    rows = [Row('Bures W²', 'n=200', t_ours, t_pot, abs(a - b), peer_name='POT')]
    print(table(rows))                                        # markdown: task, size, peer, ours, peer, ours/peer, agreement

Timings are the median of `repeat` calls after `warmup` untimed ones (compilation, caches, lazy imports): on a
shared two-core machine the median is steadier than the mean and, unlike the minimum, not a lucky outlier.
A peer library that is not installed gives a `Row.skipped(...)` row (and a message) instead of stopping the script.

On a machine shared with other jobs a call is often descheduled for a whole time slice (8-12 ms here), which
wall-clock time counts and CPU time does not: `clock='cpu'` (in `timed`, `time_call`, `paired`) measures
`time.process_time()`, the CPU seconds of this process in all its threads, the fairer comparison of single-threaded
kernels under load (the default, `clock='wall'`, is `time.perf_counter()`).

Machine-readable results (for `run_all.py`): when the environment variable `BENCH_JSON` names a file, every `table()`
appends one JSON line per row (task, size, peer, seconds, ratio, agreement, skip, title) and every direct `markdown()`
call one line per table (header and rows); without it nothing is written and the output is unchanged.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

__all__ = ['time_call', 'timed', 'paired', 'spread', 'CLOCKS', 'Row', 'table', 'markdown', 'fmt', 'record', 'JSON_ENV']

JSON_ENV = 'BENCH_JSON'


def _plain(x):
    "A JSON-safe cell: NaN and inf as None, numpy scalars as Python numbers, anything else unknown as str."
    if isinstance(x, (bool, int, str)) or x is None: return x
    try: x = float(x)
    except (TypeError, ValueError): return str(x)
    return x if math.isfinite(x) else None


def record(kind: str, **data) -> None:
    "Append one JSON line {benchmark, kind, **data} to the file named by $BENCH_JSON (nothing when it is unset)."
    path = os.environ.get(JSON_ENV)
    if not path: return
    line = {'benchmark': Path(sys.argv[0]).stem, 'kind': kind,
            **{k: ([[_plain(c) for c in r] for r in v] if k == 'rows' else [_plain(c) for c in v] if isinstance(v, (list, tuple))
                   else _plain(v)) for k, v in data.items()}}
    with open(path, 'a') as f: f.write(json.dumps(line) + '\n')


CLOCKS = {'wall': time.perf_counter, 'cpu': time.process_time}


def _clock(clock: str) -> Callable[[], float]:
    if clock not in CLOCKS: raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    return CLOCKS[clock]


def timed(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1, clock: str = 'wall') -> tuple[float, Any]:
    "Median seconds (`clock`: 'wall' or 'cpu') of `repeat` calls of `fn()` after `warmup` untimed calls, and the last call's result."
    if repeat < 1: raise ValueError(f'repeat must be at least 1, got {repeat}')
    if warmup < 0: raise ValueError(f'warmup must be non-negative, got {warmup}')
    now = _clock(clock)
    out = None
    for _ in range(warmup): out = fn()
    ts = []
    for _ in range(repeat):
        t0 = now(); out = fn(); ts.append(now() - t0)
    return statistics.median(ts), out


def time_call(fn: Callable[[], Any], repeat: int = 5, warmup: int = 1, clock: str = 'wall') -> float:
    "Median seconds (`clock`: 'wall' or 'cpu') of `repeat` calls of `fn()` after `warmup` untimed calls."
    return timed(fn, repeat, warmup, clock)[0]


def paired(fns: dict[str, Callable[[], Any]], repeat: int = 30, warmup: int = 1, clock: str = 'wall') -> tuple[dict, dict]:
    """Time several functions on the same work interleaved: each round calls every one once, so a drift in the
    machine's load hits them alike. Returns (median seconds, all samples) keyed like `fns`; `clock='cpu'` counts
    the CPU seconds of this process instead of wall-clock seconds."""
    if repeat < 1: raise ValueError(f'repeat must be at least 1, got {repeat}')
    now = _clock(clock)
    for _ in range(warmup):
        for f in fns.values(): f()
    ts = {k: [] for k in fns}
    for _ in range(repeat):
        for k, f in fns.items():
            t0 = now(); f(); ts[k].append(now() - t0)
    return {k: statistics.median(v) for k, v in ts.items()}, ts


def spread(ts: dict, a: str, b: str) -> str:
    "Median [lower, upper quartile] of the paired ratios ts[a] / ts[b] (from `paired`), e.g. '0.52 [0.47, 0.58]'."
    r = [x / y for x, y in zip(ts[a], ts[b])]
    if len(r) < 2: return f'{r[0]:.2f}'
    q = statistics.quantiles(r, n=4)
    return f'{statistics.median(r):.2f} [{q[0]:.2f}, {q[2]:.2f}]'


def fmt(x, digits: int = 4) -> str:
    "A table cell: floats to `digits` significant digits, None and NaN as a dash, anything else as str."
    if x is None or (isinstance(x, float) and math.isnan(x)): return '—'
    if isinstance(x, float): return f'{x:.{digits}g}'
    return str(x)


@dataclass
class Row:
    """One line of a benchmark table: the same `task` at `size`, our seconds and the peer's.

    `peer` is None where no peer implements the task (ratio shown as a dash); `agreement` is a number (shown as
    a max |difference|, e.g. `1.2e-09`) or a string (`'99.8% spikes'`); `skip` says why the peer did not run.
    `kind='peer'`: the peer is another library doing the same job (the rows issue 47 asks to be at most 1x);
    `kind='cost'`: the "peer" is ours too (a baseline, a cheaper variant, the previous code): the ratio is what the
    method or a safety check costs, not a race."""
    task: str
    size: str
    ours: float
    peer: float | None = None
    agreement: float | str | None = None
    peer_name: str = ''
    skip: str = ''
    kind: str = 'peer'

    def __post_init__(self):
        if self.kind not in ('peer', 'cost'): raise ValueError(f"Row.kind must be 'peer' or 'cost', got {self.kind!r}")

    @property
    def ratio(self) -> float:
        "ours / peer: below 1 we are faster."
        if self.peer is None or self.skip or not self.peer > 0: return math.nan
        return self.ours / self.peer

    @classmethod
    def skipped(cls, task: str, size: str, ours: float, peer_name: str, reason: BaseException | str,
                kind: str = 'peer') -> 'Row':
        "A row for a peer that could not run (not installed): says so on stderr and in the table."
        why = f'{type(reason).__name__}: {reason}' if isinstance(reason, BaseException) else str(reason)
        print(f'{peer_name}: skipped ({why})', file=sys.stderr)
        return cls(task, size, ours, None, None, peer_name, skip=why if len(why) < 60 else why[:57] + '...', kind=kind)


def markdown(header: Sequence[str], rows: Iterable[Sequence], title: str | None = None) -> str:
    "A markdown table; cells through `fmt`, a `|` inside a cell escaped (`title`: only names it in $BENCH_JSON)."
    rows = [list(r) for r in rows]
    record('table', title=title, header=list(header), rows=rows)
    return _markdown(header, rows)


def _markdown(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    def cell(c): return fmt(c).replace('|', '\\|')
    lines = ['| ' + ' | '.join(map(cell, header)) + ' |', '|' + '---|' * len(header)]
    lines += ['| ' + ' | '.join(map(cell, r)) + ' |' for r in rows]
    return '\n'.join(lines)


def table(rows: Iterable[Row], title: str | None = None, unit: str = 's', agreement: str = 'agreement',
          ours: str = 'ours') -> str:
    """The markdown table of `rows`: task, size, peer, ours and peer time (in `unit`: 's' or 'ms'), ours / peer,
    agreement. A float agreement prints as `1.2e-09`; `title` goes above as a `##` heading."""
    scale = {'s': 1.0, 'ms': 1e3}[unit]
    body = []
    for r in rows:
        record('row', title=title, task=r.task, size=r.size, peer_name=r.peer_name, ours_s=r.ours, peer_s=r.peer,
               ratio=r.ratio, agreement=r.agreement, skip=r.skip, vs=r.kind)
        agree = f'{r.agreement:.1e}' if isinstance(r.agreement, float) and not math.isnan(r.agreement) else fmt(r.agreement)
        body.append((r.task, r.size, r.peer_name or '—', scale * r.ours,
                     f'skipped: {r.skip}' if r.skip else (None if r.peer is None else scale * r.peer),
                     None if math.isnan(r.ratio) else f'{r.ratio:.3g}', agree))
    t = _markdown(['task', 'size', 'peer', f'{ours} ({unit})', f'peer ({unit})', f'{ours} / peer', agreement], body)
    return (f'## {title}\n\n' if title else '') + t
