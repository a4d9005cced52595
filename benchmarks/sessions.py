"""Explorers under load: `iclr25 serve` with 1 and with N browser sessions training the same page.

For each session: time from the Start click to the first step shown on the page (the status line's "step k"), the
median interval between changes of the page's figures while training (of their curves: traces' x, y, z; and of
anything drawn: also the markers' colours and angles and the titles), and how many sessions advanced their step counter
and redrew a figure during the measuring window (its second half). After each round the sessions are closed and the server's resident memory is
read once the closed sessions' threads have been joined.

    python benchmarks/sessions.py --paper eign --sessions 1 8 --train-s 20 --rounds 2

Needs Debian's chromium and playwright (the `dev` extra); prints a markdown table and writes
benchmarks/results/sessions.json.
"""
import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tests'))
from _browser import ARGS, CHROMIUM, free_port, rss_mb, server, settle        # noqa: E402

STEP = re.compile(r'step (\d+)')
# per figure: its traces' x, y, z (the curves) and, second, those with the markers' colours and angles and the title
# (a network's arrows turn and recolour with every step while their positions stay)
FIGS = ("els => [els.map(e => JSON.stringify((e.data || []).map(t => [t.x, t.y, t.z]))), "
        "els.map(e => JSON.stringify([(e.data || []).map(t => [t.x, t.y, t.z, t.marker && t.marker.color, "
        "t.marker && t.marker.angle]), e.layout && e.layout.title && e.layout.title.text]))]")


def _step(pg) -> int:
    "The step on the page's status line (`**running** · step k`, inside Bokeh's shadow roots)."
    strong = pg.locator('strong', has_text=re.compile(r'^(idle|running|paused|done|stopped|error)$')).first
    if strong.count() == 0: return -1
    text = strong.evaluate('s => (s.parentElement && s.parentElement.parentElement || s).textContent')
    m = STEP.findall(text)
    return int(m[0]) if m else -1


def session_round(url: str, n: int, train_s: float) -> dict:
    "Open `n` sessions, press Start in each, watch them for `train_s` seconds, close them; per-session measurements."
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            pages = []
            for _ in range(n):
                pg = browser.new_context(viewport={'width': 1200, 'height': 900}).new_page()
                pg.goto(url, timeout=180000); pages.append(pg)
            for pg in pages: pg.wait_for_selector('.js-plotly-plot', timeout=180000)
            started, first_step, steps0 = {}, {}, {}
            changes, changes_any, figs = {i: [] for i in range(n)}, {i: [] for i in range(n)}, {}
            for i, pg in enumerate(pages):
                figs[i] = pg.locator('.js-plotly-plot').evaluate_all(FIGS)
                pg.click('button:has-text("Start")'); started[i] = time.monotonic()
            t_end = time.monotonic() + train_s
            window_start = None
            while time.monotonic() < t_end:
                for i, pg in enumerate(pages):
                    now = time.monotonic()
                    s = _step(pg)
                    if s > 0 and i not in first_step: first_step[i] = now - started[i]
                    f = pg.locator('.js-plotly-plot').evaluate_all(FIGS)
                    if f[0] != figs[i][0]: changes[i].append(now)
                    if f[1] != figs[i][1]: changes_any[i].append(now)
                    figs[i] = f
                    if window_start is None and now - min(started.values()) >= train_s / 2:
                        window_start = now
                    if window_start is not None and i not in steps0: steps0[i] = s
                time.sleep(0.1)
            ends = [next((s for s in (_step(pg) for _ in range(5)) if s >= 0), -1) for pg in pages]   # a status
            # line read while Bokeh replaces it reads as -1: read again
            advanced = sum(e > steps0.get(i, 10 ** 9) for i, e in enumerate(ends))
        finally:
            browser.close()
    gaps = [b - a for c in changes.values() for a, b in zip(c, c[1:])]
    gaps_any = [b - a for c in changes_any.values() for a, b in zip(c, c[1:])]
    median = lambda g: round(statistics.median(g), 2) if g else None
    p90 = lambda g: round(sorted(g)[int(0.9 * (len(g) - 1))], 2) if g else None
    return dict(sessions=n, first_step_s=[round(first_step.get(i, float('nan')), 2) for i in range(n)],
                redraw_median_s=median(gaps), redraw_p90_s=p90(gaps),
                redraw_any_median_s=median(gaps_any), redraw_any_p90_s=p90(gaps_any),
                pages_redrawn_in_second_half=sum(any(t >= window_start for t in c) for c in changes_any.values())
                if window_start is not None else None,
                advanced_in_second_half=advanced, steps_mid=[steps0.get(i) for i in range(n)], steps_end=ends)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--paper', default='eign')
    ap.add_argument('--sessions', type=int, nargs='+', default=[1, 8])
    ap.add_argument('--train-s', type=float, default=20.0)
    ap.add_argument('--rounds', type=int, default=2, help='rounds of the largest session count, for memory growth')
    a = ap.parse_args(argv)
    port = free_port()
    rows = []
    with server([sys.executable, '-m', 'iclr25_nb.cli', 'serve', '--port', str(port)], f'http://127.0.0.1:{port}/',
                cwd=ROOT, timeout=180) as (proc, startup):
        settle(proc.pid, timeout=120)
        rss = [rss_mb(proc.pid)]
        plan = a.sessions[:-1] + [a.sessions[-1]] * a.rounds
        for n in plan:
            load0 = os.getloadavg()[0]
            r = session_round(f'http://127.0.0.1:{port}/{a.paper}', n, a.train_s)
            r['load_1min'] = [round(load0, 1), round(os.getloadavg()[0], 1)]      # before and after the round
            settle(proc.pid, timeout=120); time.sleep(3)
            rss.append(rss_mb(proc.pid)); r['rss_after_mb'] = round(rss[-1])
            rows.append(r); print(r, flush=True)
    out = dict(paper=a.paper, train_s=a.train_s, cpus=os.cpu_count(), server_start_s=round(startup, 1),
               rss_start_mb=round(rss[0]),
               rounds=rows, growth_last_round_mb=round(rss[-1] - rss[-2]))
    res = ROOT / 'benchmarks' / 'results'; res.mkdir(parents=True, exist_ok=True)
    (res / 'sessions.json').write_text(json.dumps(out, indent=1))
    print(f"\n| sessions | first step after Start (s, max) | curves redrawn (s apart, median / p90) | any figure change "
          f"(s apart, median / p90) | advanced / redrew in 2nd half | server RSS after (MB) | load (1 min) |\n"
          f"|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['sessions']} | {max(r['first_step_s'])} | {r['redraw_median_s']} / {r['redraw_p90_s']} | "
              f"{r['redraw_any_median_s']} / {r['redraw_any_p90_s']} | {r['advanced_in_second_half']} / "
              f"{r['pages_redrawn_in_second_half']} of {r['sessions']} | {r['rss_after_mb']} | {r['load_1min']} |")
    print(f"server RSS at start {rss[0]:.0f} MB; growth over the last round {rss[-1] - rss[-2]:.0f} MB")


if __name__ == '__main__':
    main()
