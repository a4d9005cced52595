"The docs' Benchmarks page: built from benchmarks/results/results.json, one plotly figure per kernel with a peer."
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.filterwarnings("error::UserWarning")

from iclr25_nb.docs import PLOTLY_MIME, benchmarks_page, finish_notebook

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / 'benchmarks' / 'results'


def test_benchmarks_page_from_the_committed_table():
    if not (RESULTS / 'results.json').exists(): pytest.skip('no benchmarks/results/results.json committed')
    nbformat = pytest.importorskip('nbformat')
    res = json.loads((RESULTS / 'results.json').read_text())
    page = benchmarks_page(res, (RESULTS / 'results.md').read_text())
    kernels = {(b['name'], r['task'], r['peer_name']) for b in res['benchmarks'] for r in b['rows']
               if r.get('peer_s') is not None and r.get('ours_s') is not None and not r.get('skip')}
    figs = [c for c in page['cells'] if c['cell_type'] == 'code']
    assert len(figs) == len(kernels) > 0
    assert all(len(c['outputs'][0]['data'][PLOTLY_MIME]['data']) == 2 for c in figs)    # ours and the peer
    assert 'load average' in page['cells'][0]['source'] and '| benchmark |' in page['cells'][0]['source']
    nbformat.validate(nbformat.from_dict(finish_notebook(page)))          # cells have ids: no MissingIDFieldWarning
