"`iclr25 serve` in a real browser: pages load, Start makes figures change, clicks answer quickly."
import json
import sys
import time
from pathlib import Path

import pytest

from _browser import free_port, page, server
from iclr25_nb.core import implemented_papers

ROOT = Path(__file__).resolve().parents[1]
FIGS = "els => els.map(e => JSON.stringify((e.data || []).map(t => [t.x, t.y, t.z, t.marker && t.marker.color, t.line && t.line.color])))"


@pytest.fixture(scope='module')
def app():
    port = free_port()
    with server([sys.executable, '-m', 'iclr25_nb.cli', 'serve', '--port', str(port)], f'http://127.0.0.1:{port}/',
                cwd=ROOT, timeout=120) as (proc, startup):
        print(f"iclr25 serve answered after {startup:.1f} s")
        yield f'http://127.0.0.1:{port}'


def _figures(pg):
    return pg.locator('.js-plotly-plot').evaluate_all(FIGS)


def _wait_change(pg, before, timeout):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        now = _figures(pg)
        if now and now != before: return time.monotonic() - t0
        time.sleep(0.2)
    raise AssertionError(f"no figure changed within {timeout} s of pressing Start")


@pytest.mark.e2e
def test_index_lists_papers(app):
    with page() as pg:
        pg.goto(app + '/')
        pg.wait_for_selector('text=live explorers', timeout=60000)
        assert pg.blocked == [], pg.blocked


@pytest.mark.e2e
def test_demo_page_updates_live_and_answers_clicks(app):
    with page() as pg:
        t0 = time.monotonic()
        pg.goto(app + '/demo')
        pg.wait_for_selector('.js-plotly-plot .scatterlayer .trace', timeout=60000)
        before = _figures(pg)
        pg.click('button:has-text("Start")')
        first_update = _wait_change(pg, before, 30)
        print(f"demo: first figure update {first_update:.2f} s after Start ({time.monotonic() - t0:.1f} s after goto)")
        latencies = []
        for _ in range(5):                                # Pause / Start round trips while training runs
            t1 = time.monotonic(); pg.click('button:has-text("Pause")')
            pg.wait_for_selector('text=paused', timeout=5000); latencies.append(time.monotonic() - t1)
            pg.click('button:has-text("Start")'); pg.wait_for_selector('text=running', timeout=5000)
        print(f"click → status latencies: {[round(x, 3) for x in latencies]}")
        assert sorted(latencies)[2] < 1.0, latencies     # median of five round trips
        assert pg.blocked == [], pg.blocked


@pytest.mark.e2e
@pytest.mark.parametrize('name', [p.name for p in implemented_papers()])
def test_paper_page_updates_after_start(app, name):
    with page() as pg:
        pg.goto(f'{app}/{name}')
        pg.wait_for_selector('.js-plotly-plot', timeout=90000)
        assert pg.locator('text=could not be built').count() == 0
        before = _figures(pg)
        pg.click('button:has-text("Start")')
        took = _wait_change(pg, before, 90)
        print(f"{name}: first figure change {took:.2f} s after Start")
        assert pg.blocked == [], pg.blocked


@pytest.mark.e2e
def test_closing_the_page_stops_and_joins_the_training_thread():
    "In-process server: a trainer thread runs while the page is open and is gone soon after the page closes."
    import threading
    from iclr25_nb.app import serve
    port = free_port()
    srv = serve(port=port, threaded=True, verbose=False)
    trainers = lambda: [t for t in threading.enumerate() if t.name.startswith('trainer-')]
    try:
        from _browser import wait_http
        wait_http(f'http://127.0.0.1:{port}/demo')
        with page() as pg:
            pg.goto(f'http://127.0.0.1:{port}/demo')
            pg.wait_for_selector('.js-plotly-plot .scatterlayer .trace', timeout=60000)
            pg.click('button:has-text("Start")')
            t0 = time.monotonic()
            while not trainers() and time.monotonic() - t0 < 30: time.sleep(0.1)
            assert trainers(), 'Start did not start a training thread'
        t0 = time.monotonic()                     # the browser is closed now
        while trainers() and time.monotonic() - t0 < 60: time.sleep(0.2)
        assert not trainers(), f"training threads still alive {time.monotonic() - t0:.0f} s after the page closed"
    finally:
        srv.stop()
