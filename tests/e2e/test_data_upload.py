"""Browser tests of the Data page's upload: an Azure trace excerpt with a column mapping is ingested, and the
same file loaded from two tabs at once is stored once.

Each runs its own server on a copy of the demo store, so that the rows it adds do not change what the other
browser tests see.
"""
import re
import shutil

import pytest
from browser import exceptions_on, shoot, wait_ready

from helpers import ROOT, dashboard

pytestmark = pytest.mark.e2e
EXCERPT = ROOT / "tests" / "data" / "azure_code_excerpt.csv"
MAPPING = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}
MODEL = "azure-code-model"


@pytest.fixture(scope="module")
def upload_db(demo_db, tmp_path_factory):
    db = tmp_path_factory.mktemp("e2e-upload") / "upload.duckdb"
    shutil.copy(demo_db, db)
    return db


@pytest.fixture(scope="module")
def upload_server(upload_db):
    with dashboard(upload_db, log=upload_db.parent / "streamlit.log") as (url, _):
        yield url


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


def _upload(page, url: str, path) -> int:
    """Open the Data page, upload ``path`` and wait for its panel; the store's request count before."""
    page.set_viewport_size({"width": 1440, "height": 2400})
    page.goto(url + "/data")
    wait_ready(page)
    before = _requests_in_sidebar(page)
    page.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(str(path))
    page.get_by_text("Read it as").wait_for(timeout=60_000)
    wait_ready(page)
    return before


def test_upload_with_a_mapping_is_ingested(upload_server, page):
    before = _upload(page, upload_server, EXCERPT)
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


MOONCAKE = ROOT / "tests" / "data" / "mooncake_conversation_head300.jsonl"


def test_a_trace_of_relative_times_loads_with_the_start_given_on_the_page(upload_server, upload_db, page):
    """A Mooncake trace (times in ms from its start, no model) could be loaded from the command line only
    (``--start``, ``--model``): the page had no field for the start and the load button stayed off. The Start
    field shows for the formats that take one; the stored times are the start plus each request's offset."""
    import json
    from datetime import datetime, timedelta

    from finops import store

    before = _upload(page, upload_server, MOONCAKE)
    load = page.get_by_role("button", name=f"Load {MOONCAKE.name} into the store")
    assert not load.is_enabled()
    model = page.get_by_label("Model, for rows that name none")
    model.fill("kimi-trace")
    model.press("Enter")
    wait_ready(page)
    start = page.get_by_label("Start (UTC), the time the file's first request was sent")
    start.fill("not a time")
    start.press("Enter")
    wait_ready(page)
    assert page.get_by_text("Start: 'not a time' is not an ISO date and time").count() == 1
    assert not load.is_enabled() and exceptions_on(page) == []
    start.fill("2025-01-01T08:00:00Z")
    start.press("Enter")
    wait_ready(page)
    assert load.is_enabled()
    shoot(page, "data_start_field")
    load.click()
    page.get_by_text("Validation report", exact=True).wait_for(timeout=120_000)
    wait_ready(page)
    assert exceptions_on(page) == []
    report = page.locator("[data-testid='stMetric']").all_inner_texts()
    assert any("Rows ingested" in m and "300" in m for m in report), report
    assert _requests_in_sidebar(page) == before + 300
    # the store is held by the dashboard: read it through it, as any other process does
    offsets = [json.loads(line)["timestamp"] for line in MOONCAKE.read_text().splitlines() if line.strip()]
    con = store.connect(str(upload_db))
    try:
        lo, hi, models = con.execute("SELECT min(ts), max(ts), list(DISTINCT model) FROM requests "
                                     "WHERE batch_id = (SELECT max(batch_id) FROM batches)").fetchone()
    finally:
        con.close()
    start_at = datetime(2025, 1, 1, 8)            # the Z given, in the store's naive UTC
    assert (lo, hi, models) == (start_at + timedelta(milliseconds=min(offsets)),
                                start_at + timedelta(milliseconds=max(offsets)), ["kimi-trace"])


def _canonical_file(path, rows: int = 400):
    """A canonical CSV (our own schema, as the README documents it) of ``rows`` requests with known ids and tokens."""
    lines = ["request_id,ts,tenant,sla_tier,model,input_tokens,output_tokens,ttft_ms,total_ms,status"]
    for i in range(rows):
        lines.append(f"two-tabs-{i:04d},2026-11-20 10:{i // 60 % 60:02d}:{i % 60:02d}.000,acme-support,standard,"
                     f"gpt-4o-mini,{100 + i},{10 + i % 7},120.5,900.25,ok")
    path.write_text("\n".join(lines) + "\n")
    return path


def _load_in_two_tabs(browser, url: str, path) -> list[str]:
    """Both tabs upload ``path`` and press its load button together; each tab's text once both reports show."""
    contexts = [browser.new_context(viewport={"width": 1440, "height": 2400}) for _ in range(2)]
    tabs = [c.new_page() for c in contexts]
    try:
        for tab in tabs:
            tab.goto(url + "/data")
            wait_ready(tab)
            tab.locator("[data-testid='stFileUploader'] input[type='file']").set_input_files(str(path))
            tab.get_by_role("button", name=f"Load {path.name} into the store").wait_for(timeout=60_000)
            wait_ready(tab)
        buttons = [tab.get_by_role("button", name=f"Load {path.name} into the store") for tab in tabs]
        assert all(b.is_enabled() for b in buttons)
        for b in buttons:                       # as close together as two clicks go
            b.click(no_wait_after=True)
        for tab in tabs:
            tab.get_by_text("Validation report", exact=True).wait_for(timeout=120_000)
            wait_ready(tab)
            assert exceptions_on(tab) == []
        return [tab.locator("[data-testid='stMain']").inner_text() for tab in tabs]
    finally:
        for c in contexts:
            c.close()


def test_the_same_file_uploaded_in_two_tabs_at_once_is_stored_once(demo_db, browser, tmp_path):
    """Two browser tabs (two sessions of one person) upload one file and press load together: one batch, no
    duplicate row, no exception in either tab; the store then holds exactly the file's rows (read once the
    dashboard, which holds the store, has stopped)."""
    from finops import store

    db = tmp_path / "tabs.duckdb"
    shutil.copy(demo_db, db)
    path = _canonical_file(tmp_path / "two_tabs.csv")
    with dashboard(db, env={"FINOPS_INGESTER": "0"}, log=tmp_path / "streamlit.log") as (url, _):
        texts = _load_in_two_tabs(browser, url, path)
    con = store.connect(str(db), read_only=True)
    try:
        n, ids, batches = con.execute(
            "SELECT count(*), count(DISTINCT request_id), count(DISTINCT batch_id) FROM requests "
            "WHERE request_id LIKE 'two-tabs-%'").fetchone()
        tokens = con.execute("SELECT sum(input_tokens) FROM requests WHERE request_id LIKE 'two-tabs-%'").fetchone()[0]
        dup_batches = con.execute("SELECT count(*) - count(DISTINCT batch_id) FROM batches").fetchone()[0]
    finally:
        con.close()
    assert (n, ids, batches) == (400, 400, 1)
    assert tokens == sum(100 + i for i in range(400))
    assert dup_batches == 0
    assert sum("already" in t.lower() for t in texts) >= 1, "the second load says the file was loaded already"
