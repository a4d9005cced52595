"""Foundation timings: import time, `iclr25 serve` start to first plot update, and plot-update / click latency in a
real browser while training saturates both cores. Run: `.venv/bin/python benchmarks/foundation.py`."""
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tests'))
from _browser import free_port, page, server  # noqa: E402
from _timing import markdown  # noqa: E402

FIGS = "els => els.map(e => JSON.stringify((e.data || []).map(t => [t.x, t.y])))"

HEAVY_APP = """
import sys, panel as pn
from iclr25_nb.live import demo_explorer
port = int(sys.argv[1])
# n = 2 million samples and no delay: every step is a full-data torch pass, which keeps both cores busy
pn.serve({'/': lambda: demo_explorer(steps=10**7, delay=0.0, n=2_000_000)}, port=port, address='127.0.0.1',
         websocket_origin=[f'127.0.0.1:{port}'], show=False)
"""


def import_time():
    code = 'import time; t=time.perf_counter(); import iclr25_nb, iclr25_nb.core; print(time.perf_counter()-t)'
    "Median over 3 fresh interpreters of the time the import takes inside each (interpreter start-up excluded)."
    return statistics.median(float(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout)
                             for _ in range(3))


def serve_to_first_update():
    port = free_port(); t0 = time.monotonic()
    with server([sys.executable, '-m', 'iclr25_nb.cli', 'serve', '--port', str(port)], f'http://127.0.0.1:{port}/demo', cwd=ROOT):
        up = time.monotonic() - t0
        with page() as pg:
            pg.goto(f'http://127.0.0.1:{port}/demo')
            pg.wait_for_selector('.js-plotly-plot .scatterlayer .trace', timeout=60000)
            shown = time.monotonic() - t0
            before = pg.locator('.js-plotly-plot').evaluate_all(FIGS)
            pg.click('button:has-text("Start")'); t1 = time.monotonic()
            while pg.locator('.js-plotly-plot').evaluate_all(FIGS) == before: time.sleep(0.02)
            return up, shown, time.monotonic() - t1


def saturated_latencies(seconds=20):
    port = free_port()
    with server([sys.executable, '-c', HEAVY_APP, str(port)], f'http://127.0.0.1:{port}/', cwd=ROOT):
        with page() as pg:
            pg.goto(f'http://127.0.0.1:{port}/')
            pg.wait_for_selector('.js-plotly-plot .scatterlayer .trace', timeout=60000)
            pg.click('button:has-text("Start")')
            last, t_last, gaps = None, time.monotonic(), []
            t_end = time.monotonic() + seconds
            while time.monotonic() < t_end:
                now = pg.locator('.js-plotly-plot').evaluate_all(FIGS)
                if now != last:
                    t = time.monotonic()
                    if last is not None: gaps.append(t - t_last)
                    last, t_last = now, t
                time.sleep(0.02)
            clicks = []
            for _ in range(5):
                t = time.monotonic(); pg.click('button:has-text("Pause")'); pg.wait_for_selector('text=paused', timeout=10000)
                clicks.append(time.monotonic() - t)
                pg.click('button:has-text("Start")'); pg.wait_for_selector('text=running', timeout=10000)
            load = subprocess.run(['cat', '/proc/loadavg'], capture_output=True, text=True).stdout.split()[0]
            return gaps, clicks, load


def main():
    rows = [('import iclr25_nb.core', f'{import_time():.2f} s', 'median of 3 fresh interpreters')]
    up, shown, first = serve_to_first_update()
    rows += [('iclr25 serve: HTTP up', f'{up:.1f} s', 'from the start of the process'),
             ('iclr25 serve: /demo figure shown', f'{shown:.1f} s', 'from the start of the process'),
             ('first plot update after Start', f'{first:.2f} s', 'real browser')]
    gaps, clicks, load = saturated_latencies()
    rows += [(f'plot update interval, training saturating the cores (load {load})',
              f'{statistics.median(gaps):.2f} s', f'median of {len(gaps)}, max {max(gaps):.2f} s'),
             ('Pause click to status shown, same load', f'{statistics.median(clicks):.3f} s',
              f'median of {len(clicks)}, max {max(clicks):.3f} s')]
    print(markdown(['measure', 'value', 'how'], rows))


if __name__ == '__main__':
    main()
