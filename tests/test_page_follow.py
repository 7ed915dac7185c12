"""The Data page follows a live gateway log; the sidebar keeps loading new lines on every page."""
import json

from finops import store
from helpers import run_page


def _line(i):
    return json.dumps({"request_id": f"live{i}", "ts": f"2026-11-29T10:00:{i:02d}Z", "model": "slow",
                       "tenant": "lab", "route": "slow", "queue_ms": 10.0 * i, "service_ms": 700.0,
                       "total_ms": 700.0 + 10 * i, "status": "ok"}) + "\n"


def test_follow_a_growing_log(empty_db, tmp_path):
    log = tmp_path / "gateway.jsonl"
    log.write_text(_line(1) + _line(2))
    at = run_page(empty_db, "views/data.py")
    assert not at.exception
    at.text_input(key="follow_path").set_value(str(log)).run()
    next(b for b in at.button if b.label == "Follow it live").click().run()
    assert not at.exception
    at.switch_page("views/overview.py").run()     # following runs in the sidebar, on every page
    assert not at.exception
    con = store.connect(empty_db)
    assert store.row_count(con) == 2
    with open(log, "a") as fh:
        fh.write(_line(3))
    at.run()
    assert not at.exception
    assert store.row_count(con) == 3
    assert any("Following" in c.value and "3 new requests" in c.value for c in at.sidebar.caption)
    con.close()
