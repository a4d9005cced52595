"benchmarks/_timing.py and run_all.py: the CPU clock of paired rounds, the load recorded with the table, the vs column and peer summary, --update, and the docs page's summary."
import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'benchmarks'))
import _timing  # noqa: E402
import run_all  # noqa: E402


def test_cpu_clock_does_not_count_sleep():
    med, ts = _timing.paired({'sleep': lambda: time.sleep(0.02), 'spin': lambda: sum(range(20000))}, repeat=3,
                             warmup=0, clock='cpu')
    assert med['sleep'] < 0.01 and len(ts['spin']) == 3                  # a descheduled wait is not CPU time
    assert _timing.time_call(lambda: time.sleep(0.02), repeat=1, warmup=0) >= 0.02   # the wall clock counts it
    with pytest.raises(ValueError, match='clock'): _timing.timed(lambda: None, clock='gpu')


def test_table_records_the_load_at_start_and_end(tmp_path):
    (tmp_path / 'tiny.py').write_text(
        'import sys; sys.path.insert(0, %r)\nfrom _timing import Row, table\n'
        "print(table([Row('k', 'n=1', 0.5, 1.0, 0.0, 'peer')]))\n" % str(Path(run_all.__file__).parent))
    out = tmp_path / 'out'
    assert run_all.main(['--dir', str(tmp_path), '--out', str(out)]) == 0
    md = (out / 'results.md').read_text()
    assert 'at the start' in md and 'at the end' in md and '| tiny | k | n=1 | peer | peer | 0.5 | 1 | 0.5 |' in md
    assert 'load ' in md.split('Per script')[1]


def _fake(folder: Path, name: str, rows: str):
    "A benchmark script `name` in `folder` that prints a table of `rows` (Python source of a list of Row)."
    (folder / f'{name}.py').write_text(
        'import sys; sys.path.insert(0, %r)\nfrom _timing import Row, table\n'
        'print(table(%s))\n' % (str(Path(run_all.__file__).parent), rows))


def test_vs_column_and_peer_summary(tmp_path):
    _fake(tmp_path, 'alpha', "[Row('k', 'n=1', 0.5, 1.0, 0.0, 'lib'), Row('k', 'n=2', 3.0, 1.0, 0.0, 'lib'),"
                             " Row('overhead', 'n=2', 2.0, 1.0, None, 'plain', kind='cost'),"
                             " Row.skipped('k', 'n=3', 1.0, 'gone', 'not installed')]")
    out = tmp_path / 'out'
    assert run_all.main(['--dir', str(tmp_path), '--out', str(out)]) == 0
    md = (out / 'results.md').read_text()
    line = 'peer rows: 2; at or below 1.0x: 1; above: (alpha, k, n=2, 3x)'
    assert line in md and md.index(line) < md.index('| benchmark |')           # the summary sits above the table
    assert '| benchmark | task | size | vs | peer |' in md
    assert '| alpha | k | n=1 | peer | lib | 0.5 | 1 | 0.5 |' in md and '| alpha | overhead | n=2 | cost | plain |' in md
    assert '1 peer rows without a ratio' in md                                   # the skipped peer is not counted as a win
    rows = json.loads((out / 'results.json').read_text())['benchmarks'][0]['rows']
    assert [r['vs'] for r in rows] == ['peer', 'peer', 'cost', 'peer']
    s = run_all.peer_summary([{'name': 'old', 'rows': [{'task': 't', 'size': 's', 'ratio': 0.9}]}])   # no 'vs': a peer row
    assert s == {'peer_rows': 1, 'at_or_below_1': 1, 'above': [], 'no_ratio': 0}
    with pytest.raises(ValueError, match='kind'): _timing.Row('k', 'n', 1.0, kind='race')


def test_update_reruns_only_the_named_and_keeps_the_others(tmp_path):
    _fake(tmp_path, 'alpha', "[Row('a', 'n=1', 2.0, 1.0, 0.0, 'lib')]")
    _fake(tmp_path, 'beta', "[Row('b', 'n=1', 0.5, 1.0, 0.0, 'lib')]")
    out = tmp_path / 'out'
    assert run_all.main(['--dir', str(tmp_path), '--out', str(out), '--quick']) == 0
    first = json.loads((out / 'results.json').read_text())
    _fake(tmp_path, 'alpha', "[Row('a', 'n=1', 0.25, 1.0, 0.0, 'lib')]")      # alpha got faster
    _fake(tmp_path, 'beta', "[Row('b', 'n=1', 9.0, 1.0, 0.0, 'lib')]")        # a change not rerun: must not show
    assert run_all.main(['--dir', str(tmp_path), '--out', str(out), '--quick', '--only', 'alpha', '--update']) == 0
    res = json.loads((out / 'results.json').read_text())
    by = {b['name']: b for b in res['benchmarks']}
    assert [b['name'] for b in res['benchmarks']] == ['alpha', 'beta'] and res['quick'] is True
    assert by['alpha']['rows'][0]['ratio'] == 0.25 and by['beta']['rows'][0]['ratio'] == 0.5
    assert by['beta']['date'] == first['benchmarks'][1]['date'] and by['beta']['load_avg_start']
    assert res['machine']['date'] == first['machine']['date'] and res['machine']['updates'][0]['names'] == ['alpha']
    md = (out / 'results.md').read_text()
    assert 'peer rows: 2; at or below 1.0x: 2; above: none' in md and 'reran alpha' in md
    assert md.count('| alpha |') == 1 and '| beta | b | n=1 | peer | lib | 0.5 | 1 | 0.5 |' in md
    per = md.split('Per script')[1]
    assert f"beta: ok" in per and by['beta']['date'] in per and by['alpha']['date'] in per


def test_docs_page_summary_is_the_tables():
    from iclr25_nb.docs import benchmark_summary
    res = [{'name': 'a', 'rows': [{'task': 't', 'size': 'n=1', 'ratio': 0.5, 'peer_name': 'p'},
                                  {'task': 't', 'size': 'n=2', 'ratio': 1.25, 'peer_name': 'p', 'vs': 'peer'},
                                  {'task': 'c', 'size': 'n=2', 'ratio': 4.0, 'peer_name': 'plain', 'vs': 'cost'},
                                  {'task': 's', 'size': 'n=3', 'ratio': None, 'peer_name': 'gone', 'skip': 'absent'}]}]
    assert benchmark_summary({'benchmarks': res}) == run_all.summary_line(res)
    assert run_all.summary_line(res).startswith('peer rows: 2; at or below 1.0x: 1; above: (a, t, n=2, 1.25x)')
