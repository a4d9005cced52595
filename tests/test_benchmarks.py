"benchmarks/_timing.py and run_all.py: the CPU clock of paired rounds, and the load recorded with the table."
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
    assert 'at the start' in md and 'at the end' in md and '| tiny | k | n=1 | peer | 0.5 | 1 | 0.5 |' in md
    assert 'load ' in md.split('Per script')[1]
