"""Fixtures only; what test files share otherwise is in helpers.py (import it, never this file)."""
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from helpers import ROOT, free_port, wait_until

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("FINOPS_DB", ":memory:")
os.environ["FINOPS_DEMO"] = "0"      # tests never build the sample store by surprise

DEMO_TEST_DAYS = 9                   # covers both incident windows of the sample fleet


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> str:
    """A store file holding the sample fleet (shorter than the default 14 days, same generator)."""
    from finops import store
    from finops.sample import demo
    path = str(tmp_path_factory.mktemp("demo") / "demo.duckdb")
    con = store.connect(path)
    demo.build_demo(con, days=DEMO_TEST_DAYS)
    con.close()
    return path


@pytest.fixture()
def empty_db(tmp_path) -> str:
    from finops import store
    path = str(tmp_path / "empty.duckdb")
    store.connect(path).close()
    return path


# ---------------------------------------------------------------- browser tests (tests/e2e)
# Here rather than in tests/e2e/conftest.py: one conftest for the suite.

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]


@pytest.fixture(scope="session")
def server(demo_db, tmp_path_factory):
    """Start the dashboard on a copy of the demo store; yield its base URL."""
    db = tmp_path_factory.mktemp("e2e") / "e2e.duckdb"
    shutil.copy(demo_db, db)
    port = free_port()
    env = dict(os.environ, FINOPS_DB=str(db), FINOPS_DEMO="0")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            raise RuntimeError("streamlit exited: " + proc.stdout.read().decode(errors="replace")[-2000:])
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return True
        except OSError:
            return False

    try:
        wait_until(healthy, timeout=60, interval=0.2, message="streamlit answering /_stcore/health")
    except AssertionError:
        proc.kill()
        raise
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


# module scope: Playwright's sync API keeps an event loop running in this thread while it is open,
# which would break asyncio.run() in the tests that come after the browser tests
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does this)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    ctx = browser.new_context(viewport={"width": 1440, "height": 1000})
    pg = ctx.new_page()
    yield pg
    ctx.close()


