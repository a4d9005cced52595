"The offline docs site in a real browser: interactive plotly figure, rendered maths, no request to any other host."
import re
import sys
import time
from pathlib import Path

import pytest

from _browser import free_port, page, server

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    from iclr25_nb.docs import build_docs
    out = tmp_path_factory.mktemp('site')
    t0 = time.perf_counter()
    build_docs(ROOT / 'nbs', out, only=['00_core', '01_live'])
    print(f"docs build (3 notebooks): {time.perf_counter() - t0:.1f} s")
    return out


@pytest.mark.e2e
def test_docs_site_offline_and_interactive(site):
    assert (site / 'assets' / 'plotly.min.js').exists()
    assert not re.search(r'href="[^"]*\.ipynb', (site / 'index.html').read_text())   # notebook links → pages
    for f in site.glob('*.html'):
        html = f.read_text()
        assert '<script src="http' not in html and 'cdn.' not in html, f.name
        assert html.count('plotly.js v') == 0, f"{f.name} inlines plotly.js; the site ships it once"
    port = free_port()
    with server([sys.executable, '-m', 'http.server', str(port), '--bind', '127.0.0.1', '-d', str(site)],
                f'http://127.0.0.1:{port}/index.html'):
        with page() as pg:
            pg.goto(f'http://127.0.0.1:{port}/01_live.html')
            pg.wait_for_selector('.js-plotly-plot .scatterlayer .trace', timeout=30000)
            plot = pg.locator('.js-plotly-plot').first
            plot.scroll_into_view_if_needed()
            before = plot.evaluate('el => JSON.stringify(el._fullLayout.xaxis.range)')
            box = pg.locator('.js-plotly-plot .nsewdrag').first.bounding_box()
            y = box['y'] + box['height'] * 0.5                                            # interactive: drag to zoom
            pg.mouse.move(box['x'] + box['width'] * 0.2, y); pg.mouse.down()
            pg.mouse.move(box['x'] + box['width'] * 0.4, y, steps=8); pg.mouse.up()
            pg.wait_for_function('([el, b]) => JSON.stringify(el._fullLayout.xaxis.range) !== b',
                                 arg=[plot.element_handle(), before], timeout=10000)
            assert 'live view appears here' in pg.inner_text('article')
            replay = pg.locator('.js-plotly-plot:has(.updatemenu-button)').first      # the demo's recorded replay
            replay.scroll_into_view_if_needed()
            first = replay.evaluate('el => el._fullLayout.title.text')
            replay.locator('.updatemenu-button').first.click()                          # ▶ play
            pg.wait_for_function('([el, t]) => el._fullLayout.title.text !== t', arg=[replay.element_handle(), first],
                                 timeout=15000)
            assert replay.evaluate('el => el._transitionData._frames.length') > 5
            pg.goto(f'http://127.0.0.1:{port}/00_core.html')
            pg.wait_for_selector('.MathJax', timeout=30000)                                # maths typeset offline
            assert 'seed_everything' in pg.inner_text('article')                             # show_doc rendered
            pg.click('nav >> text=live')                                                     # navigation between pages
            pg.wait_for_url('**/01_live.html')
            assert pg.blocked == [], pg.blocked
