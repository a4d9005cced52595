"Playwright with Debian chromium, blocking every request that leaves this machine (and recording it)."
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CHROMIUM = os.environ.get('ICLR25_CHROMIUM', '/usr/bin/chromium')
ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
        '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage']
LOCAL = ('http://127.0.0.1', 'http://localhost', 'ws://127.0.0.1', 'ws://localhost', 'data:', 'blob:', 'about:')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def wait_http(url: str, timeout: float = 90.0, proc=None):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200: return time.monotonic() - t0
        except OSError: time.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout} s")


@contextlib.contextmanager
def server(cmd: list[str], url: str, cwd=None, env=None, timeout: float = 90.0):
    """Start `cmd`, wait until `url` answers, yield (process, seconds to first answer); terminate it afterwards.
    The server's output goes to a file, `proc.log` (its path): a pipe nobody reads fills after 64 KiB of log and then
    blocks the server in its next write (a JupyterLab server stopped answering that way half-way through a run)."""
    log = Path(tempfile.mkdtemp(prefix='iclr25-server-')) / 'server.log'
    with open(log, 'w') as out:
        proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
    proc.log = log
    try:
        yield proc, wait_http(url, timeout, proc)
    finally:
        proc.terminate()
        try: proc.wait(15)
        except subprocess.TimeoutExpired: proc.kill(); proc.wait(5)


@contextlib.contextmanager
def page():
    "A chromium page; `page.blocked` lists every request to another host (aborted), `page.errors` console errors."
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            pg = browser.new_page(viewport={'width': 1400, 'height': 1000})
            pg.blocked, pg.errors = [], []
            def route(r):
                if r.request.url.startswith(LOCAL): r.continue_()
                else: pg.blocked.append(r.request.url); r.abort()
            pg.route('**/*', route)
            pg.on('console', lambda m: pg.errors.append(m.text) if m.type == 'error' else None)
            yield pg
        finally:
            browser.close()


def rss_mb(pid: int) -> float:
    "A process's resident memory in MB (/proc)."
    with open(f'/proc/{pid}/status') as f:
        return next(int(l.split()[1]) for l in f if l.startswith('VmRSS')) / 1024


def _threads(pid: int) -> int: return len(os.listdir(f'/proc/{pid}/task'))


def settle(pid: int, quiet_s: float = 8.0, timeout: float = 90.0) -> float:
    "Wait until a server's thread count has not changed for `quiet_s` (closed sessions joined); seconds waited."
    t0 = last_change = time.monotonic()
    n = _threads(pid)
    while time.monotonic() - last_change < quiet_s and time.monotonic() - t0 < timeout:
        time.sleep(0.5)
        if _threads(pid) != n: n, last_change = _threads(pid), time.monotonic()
    return time.monotonic() - t0
