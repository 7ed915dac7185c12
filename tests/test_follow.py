import json

from finops import store
from finops.ingest.follow import ingest_new_lines


def _row(i):
    return json.dumps({"request_id": f"g{i}", "ts": f"2026-11-29T10:00:{i:02d}Z", "model": "slow", "tenant": "t",
                       "route": "slow", "queue_ms": float(i), "total_ms": 100.0 + i, "status": "ok"}) + "\n"


def test_follow_ingests_only_complete_new_lines(tmp_path):
    con = store.connect(":memory:")
    log = tmp_path / "gateway.jsonl"
    log.write_text(_row(1) + _row(2) + _row(3)[:-10])          # the third line is still being written
    step = ingest_new_lines(con, log)
    assert (step.rows_ingested, step.lines_read) == (2, 2)
    assert step.offset == len(_row(1) + _row(2))
    log.write_text(_row(1) + _row(2) + _row(3) + _row(4))
    step = ingest_new_lines(con, log, step.offset)
    assert step.rows_ingested == 2 and store.row_count(con) == 4
    assert ingest_new_lines(con, log, step.offset).rows_ingested == 0      # nothing new
    # rotated: the file starts again; stored rows are not duplicated, the new one is added
    log.write_text(_row(1) + _row(5))
    step2 = ingest_new_lines(con, log, step.offset)
    assert step2.rotated and step2.rows_ingested == 1 and store.row_count(con) == 5
