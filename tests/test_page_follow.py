"""The Data page configures a live log; the dashboard's own ingester follows it (no tab needs to stay open),
and the sidebar says what it loaded on every page."""
import json

from finops import store
from helpers import run_page, wait_until


def _line(i):
    return json.dumps({"request_id": f"live{i}", "ts": f"2026-11-29T10:00:{i:02d}Z", "model": "slow",
                       "tenant": "lab", "route": "slow", "queue_ms": 10.0 * i, "service_ms": 700.0,
                       "total_ms": 700.0 + 10 * i, "status": "ok"}) + "\n"


def _rows_total(con) -> int:
    from finops.ingest import service
    return int(service.status_frame(con)["rows_total"].sum())


def test_follow_a_growing_log(empty_db, tmp_path):
    log = tmp_path / "gateway.jsonl"
    log.write_text(_line(1) + _line(2))
    at = run_page(empty_db, "views/data.py")
    assert not at.exception
    assert any("No live source is configured" in i.value for i in at.info)
    at.selectbox(key="source_kind").set_value("follow")
    at.text_input(key="source_target").set_value(str(log))
    next(b for b in at.button if b.label == "Add the source").click().run()
    assert not at.exception
    con = store.connect(empty_db)
    wait_until(lambda: store.row_count(con) == 2, timeout=60, message="the ingester's first load")
    at.switch_page("views/overview.py").run()     # the ingester runs whatever page is open; the sidebar says so
    assert not at.exception
    with open(log, "a") as fh:
        fh.write(_line(3))
    # the source's status (its rows loaded, which the sidebar reads) is saved just after the rows it loaded are
    # committed: wait for both (clean-clone CI of 7337d6a read the sidebar in between, "2 rows loaded")
    wait_until(lambda: store.row_count(con) == 3 and _rows_total(con) == 3, timeout=60, message="the appended line")
    at.switch_page("views/data.py").run()
    assert not at.exception
    assert any("1 live source: 3 rows loaded" in c.value for c in at.sidebar.caption)
    table = at.dataframe[0].value
    assert list(table["source"]) == [f"follow {log.resolve()}"] and list(table["rows_total"]) == ["3"]
    next(b for b in at.button if b.label == "Stop").click().run()          # an engineer's control; LOCAL may
    assert not at.exception
    assert not any("live source" in c.value for c in at.sidebar.caption)
    con.close()
