"""Browser test: an Azure trace excerpt uploaded through the Data page with a column mapping is ingested.

Runs its own server on a copy of the demo store, so that the rows it adds do not change what the other
browser tests see.
"""
import os
import re
import shutil
import subprocess
import sys
import urllib.request

import pytest
from browser import exceptions_on, shoot, wait_ready

from helpers import ROOT, free_port, wait_until

pytestmark = pytest.mark.e2e
EXCERPT = ROOT / "tests" / "data" / "azure_code_excerpt.csv"
MAPPING = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}
MODEL = "azure-code-model"


@pytest.fixture(scope="module")
def upload_server(demo_db, tmp_path_factory):
    db = tmp_path_factory.mktemp("e2e-upload") / "upload.duckdb"
    shutil.copy(demo_db, db)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.headless", "true",
         "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=dict(os.environ, FINOPS_DB=str(db), FINOPS_DEMO="0"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if proc.poll() is not None:
            raise RuntimeError("streamlit exited")
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


def _requests_in_sidebar(pg) -> int:
    """The request count of the store caption in the sidebar (written by app.py)."""
    caption = pg.locator("[data-testid='stSidebar']").get_by_text(re.compile(r"[\d,]+ requests"))
    caption.first.wait_for(timeout=60_000)
    return int(re.search(r"([\d,]+) requests", caption.first.inner_text()).group(1).replace(",", ""))


def _choose(pg, label: str, option: str) -> None:
    """Pick ``option`` in the selectbox labelled ``label`` (a combobox)."""
    box = pg.get_by_role("combobox", name=label, exact=True)
    box.click()
    pg.get_by_role("option", name=option, exact=True).click()
    wait_ready(pg)
    assert box.input_value() == option


def test_upload_with_a_mapping_is_ingested(upload_server, page):
    page.set_viewport_size({"width": 1440, "height": 2400})
    page.goto(upload_server + "/data")
    wait_ready(page)
    before = _requests_in_sidebar(page)
    page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(str(EXCERPT))
    page.get_by_text("Read it as").wait_for(timeout=60_000)
    wait_ready(page)
    page.get_by_text("Map the columns myself (generic)").click()
    wait_ready(page)
    for canon, source in MAPPING.items():
        _choose(page, canon, source)
    model = page.get_by_label("Model, for rows that name none")
    model.fill(MODEL)
    model.press("Enter")
    wait_ready(page)
    page.get_by_text("First rows as they will be stored").click()
    load = page.get_by_role("button", name=f"Load {EXCERPT.name} into the store")
    assert load.is_enabled()            # the mapped rows previewed without a problem
    shoot(page, "data_mapping")
    load.click()
    page.get_by_text("Validation report", exact=True).wait_for(timeout=120_000)
    wait_ready(page)
    shoot(page, "data_upload")
    assert exceptions_on(page) == []
    report = page.locator("[data-testid='stMetric']").all_inner_texts()
    assert any("Rows ingested" in m and "500" in m for m in report), report
    assert page.get_by_text(EXCERPT.name).count() >= 2            # the report and the batch list
    assert _requests_in_sidebar(page) == before + 500
