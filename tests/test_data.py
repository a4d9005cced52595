"""Real data sets: the pinned sha256 of every data set against the shared copy (offline), where modules look,
`iclr25 data` and `iclr25 data get` from a local stand-in for GitHub (no network), and the generator fallback line."""
import gzip
import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from iclr25_nb import data
from iclr25_nb.cli import main
from iclr25_nb.data import DATASETS, tree_sha256

ROOT = Path(__file__).resolve().parents[1]


def _shared() -> Path | None:
    "The shared data folder: $ICLR25_DATA, else ../shared/data beside the checkout (CI)."
    for p in (os.environ.get('ICLR25_DATA'), ROOT.parent / 'shared' / 'data'):
        if p and Path(p).is_dir(): return Path(p)
    return None


SHARED = _shared()
needs_shared = pytest.mark.skipif(SHARED is None, reason='no shared data folder ($ICLR25_DATA or ../shared/data)')


@needs_shared
@pytest.mark.parametrize('name', list(DATASETS))
def test_pinned_sha256_matches_the_shared_copy(name):
    d = DATASETS[name]
    assert (SHARED / d.folder).is_dir(), f'{SHARED / d.folder} missing'
    assert tree_sha256(SHARED / d.folder) == d.sha256


def test_registry_is_complete():
    "Each data set names its papers (real modules), license, size and a pinned commit and sha256."
    from iclr25_nb.core import PAPERS
    for d in DATASETS.values():
        assert set(d.papers) <= set(PAPERS) and d.license and d.size and len(d.sha256) == 64 and len(d.commit) == 40
        assert d.files or d.dirs


def test_tree_sha256_reads_gz_content_and_paths(tmp_path):
    "A re-compressed .gz checks the same (its content is hashed); a renamed or changed file does not."
    a, b = tmp_path / 'a', tmp_path / 'b'
    a.mkdir(); b.mkdir()
    with gzip.GzipFile(a / 'x.gz', 'wb', mtime=0, compresslevel=1) as f: f.write(b'hello\n' * 100)
    with gzip.GzipFile(b / 'x.gz', 'wb', mtime=12345, compresslevel=9) as f: f.write(b'hello\n' * 100)
    assert (a / 'x.gz').read_bytes() != (b / 'x.gz').read_bytes() and tree_sha256(a) == tree_sha256(b)
    (b / 'x.gz').rename(b / 'y.gz')
    assert tree_sha256(a) != tree_sha256(b)


def test_data_roots_order(tmp_path, monkeypatch):
    "ICLR25_DATA first, then the user cache; a pip install without ICLR25_DATA looks in the cache."
    monkeypatch.setenv('ICLR25_DATA', str(tmp_path / 'mine'))
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
    roots = data.data_roots()
    assert roots[0] == tmp_path / 'mine'
    if os.name == 'posix' and not data.sys.platform == 'darwin': assert roots[1] == tmp_path / 'cache' / 'iclr25_nb'
    monkeypatch.delenv('ICLR25_DATA')
    monkeypatch.setattr(data, 'checkout_data_dir', lambda: None)             # as installed from a wheel
    assert data.data_roots() == [data.user_cache_dir()] and data.find_data('zinc') is None
    (data.user_cache_dir() / 'zinc').mkdir(parents=True)
    assert data.find_data('zinc') == data.user_cache_dir() / 'zinc'


def _stand_in(tmp_path: Path, names) -> tuple[str, callable]:
    """A local copy of what GitHub serves for `names`, rebuilt from the shared data: raw files at
    <root>/<repo>/<commit>/<path>, and the folder listing the contents API would give."""
    root = tmp_path / 'github'
    for name in names:
        d = DATASETS[name]
        base = root / d.repo / d.commit
        for src, dst in d.files:
            (base / src).parent.mkdir(parents=True, exist_ok=True)
            if name == 'zinc' and dst.endswith('.smi.gz'):                 # upstream: a gzipped tar holding zinc.txt
                text = gzip.decompress((SHARED / d.folder / dst).read_bytes())
                with tarfile.open(base / src, 'w:gz') as t:
                    info = tarfile.TarInfo('zinc.txt'); info.size = len(text)
                    t.addfile(info, io.BytesIO(text))
            else: shutil.copy(SHARED / d.folder / dst, base / src)
        for src, dst, suffix in d.dirs:
            (base / src).mkdir(parents=True, exist_ok=True)
            for f in (SHARED / d.folder / dst).iterdir():
                if f.name.endswith(suffix): shutil.copy(f, base / src / f.name)
    return f"file://{root}/{{repo}}/{{commit}}/{{path}}", lambda d, path: os.listdir(root / d.repo / d.commit / path)


@needs_shared
@pytest.mark.parametrize('name', list(DATASETS))
def test_get_downloads_and_verifies(name, tmp_path, monkeypatch):
    url, listing = _stand_in(tmp_path, [name])
    monkeypatch.setattr(data, 'RAW', url)
    monkeypatch.setattr(data, '_github_dir', listing)
    got = data.get(name, to=tmp_path / 'cache')
    assert got == tmp_path / 'cache' / DATASETS[name].folder and tree_sha256(got) == DATASETS[name].sha256
    assert data.get(name, to=tmp_path / 'cache') == got                     # there and verified: no download


@needs_shared
def test_get_refuses_a_changed_file_and_writes_nothing(tmp_path, monkeypatch):
    url, listing = _stand_in(tmp_path, ['planetoid'])
    d = DATASETS['planetoid']
    (tmp_path / 'github' / d.repo / d.commit / 'data' / 'ind.cora.y').write_bytes(b'tampered')
    monkeypatch.setattr(data, 'RAW', url)
    with pytest.raises(ValueError, match='does not match the pinned'): data.get('planetoid', to=tmp_path / 'cache')
    assert not (tmp_path / 'cache' / 'planetoid').exists()
    assert not [p for p in (tmp_path / 'cache').iterdir()]                  # no temporary folder left behind


@needs_shared
def test_cli_data_lists_and_gets(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('ICLR25_DATA', str(SHARED))
    assert main(['data', '--check']) == 0
    out = capsys.readouterr().out
    assert '$ICLR25_DATA' in out and 'the user cache' in out
    for d in DATASETS.values(): assert d.name in out and d.sha256 in out and d.license in out
    assert out.count('sha256 verified') == len(DATASETS)
    url, listing = _stand_in(tmp_path, ['tinyshakespeare'])
    monkeypatch.setattr(data, 'RAW', url)
    assert main(['data', 'get', 'tinyshakespeare', '--to', str(tmp_path / 'got')]) == 0
    assert 'verified' in capsys.readouterr().out and (tmp_path / 'got' / 'text' / 'tinyshakespeare.txt').is_file()


@pytest.mark.parametrize('args,message', [(['data', 'get'], 'data get needs a NAME'),
                                          (['data', 'get', 'imagenet'], "unknown data set 'imagenet'")])
def test_cli_data_bad_arguments(args, message, capsys):
    with pytest.raises(SystemExit) as e: main(args)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_cli_data_get_offline_is_one_line(tmp_path, monkeypatch, capsys):
    "No network (here: a source that does not exist): one line, exit 1, nothing written."
    monkeypatch.setattr(data, 'RAW', f"file://{tmp_path}/nowhere/{{repo}}/{{commit}}/{{path}}")
    assert main(['data', 'get', 'tinyshakespeare', '--to', str(tmp_path / 'got')]) == 1
    err = capsys.readouterr().err
    assert err.startswith('iclr25 data: error: could not download') and len(err.strip().splitlines()) == 1 and 'Traceback' not in err
    assert not (tmp_path / 'got' / 'text').exists()


def test_fallback_says_so(caplog):
    line = data.fallback('molleo', 'ZINC-250k', "RDKit's NCI molecules")
    assert 'using RDKit' in line and 'iclr25 data get zinc' in line and line in caplog.text
