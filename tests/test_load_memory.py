"""Issue 15's flat memory: a load runs under loader.LOAD_MEMORY_LIMIT and puts the store's own limit back; a
Python reading whose rows all have ids is staged as a view of its Parquet file, not copied into a table."""
import json

import duckdb
import pytest

from finops import store
from finops.ingest import IngestOptions, ecosystem, ingest_path, loader
from helpers import DATA

AZURE_MAP = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}


def _limit(con) -> str:
    return con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]


def _load_seeing_limit(con, path, options) -> set[str]:
    seen = set()
    ingest_path(con, path, options, progress=lambda fraction, what: seen.add(_limit(con)))
    return seen


@pytest.fixture()
def con(tmp_path):
    c = store.connect(tmp_path / "s.duckdb")     # store.connect sets 1536MB
    yield c
    c.close()


def test_a_load_runs_under_the_load_limit_and_puts_the_store_limit_back(con):
    before = _limit(con)
    assert before == "1.4 GiB"
    seen = _load_seeing_limit(con, DATA / "azure_conv.csv", IngestOptions(mapping=AZURE_MAP, model="m"))
    # 768MB is 732.4 MiB: every step of the load after reading ran under it; the first step ran before it
    assert "732.4 MiB" in seen and seen <= {"732.4 MiB", before}
    assert _limit(con) == before
    assert con.execute("SELECT count(*) FROM requests").fetchall()[0][0] == 19_366


def test_a_lower_limit_is_left_as_it_is(con):
    con.execute("SET memory_limit = '256MB'")
    seen = _load_seeing_limit(con, DATA / "azure_conv.csv", IngestOptions(mapping=AZURE_MAP, model="m"))
    assert seen == {"244.1 MiB"} and _limit(con) == "244.1 MiB"


def test_the_limit_is_put_back_when_a_load_fails(con, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")     # a header and no rows
    before = _limit(con)
    with pytest.raises(Exception, match="no rows"):
        ingest_path(con, bad, IngestOptions(mapping=AZURE_MAP, model="m"))
    assert _limit(con) == before


@pytest.mark.parametrize("text, expected", [("1.4 GiB", 1.4 * 2 ** 30), ("732.4 MiB", 732.4 * 2 ** 20),
                                            ("768MB", 768e6), ("500 KiB", 500 * 1024), ("unlimited", None)])
def test_memory_sizes_read_as_duckdb_writes_them(text, expected):
    assert loader._bytes(text) == expected


# ---------------------------------------------------------------- a Python reading staged as a view

def test_python_rows_with_ids_are_staged_as_a_view_and_rows_without_as_a_table():
    keyed = ecosystem._python_source(iter([{"_row": 1, "request_id": "a", "model": "m"},
                                           {"_row": 2, "request_id": "b", "model": "m"}]))
    unkeyed = ecosystem._python_source(iter([{"_row": 1, "request_id": "a", "model": "m"},
                                             {"_row": 2, "model": "m"}]))
    try:
        assert keyed.stage_as_view and not unkeyed.stage_as_view
        c = duckdb.connect()
        got = c.execute(f"SELECT _row, request_id, _hash IS NOT NULL FROM ({unkeyed.sql}) s ORDER BY _row",
                        unkeyed.params).fetchall()
        assert got == [(1, "a", False), (2, None, True)]
    finally:
        keyed.cleanup()
        unkeyed.cleanup()


def _stored(path, options, monkeypatch, as_view: bool):
    real = loader._stage

    def stage(con, source, *more):
        if not as_view:
            source.stage_as_view = False
        return real(con, source, *more)
    monkeypatch.setattr(loader, "_stage", stage)
    con = store.connect(":memory:")
    [r] = ingest_path(con, path, options)
    rows = con.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id").fetchall()
    again = ingest_path(con, path, options)[0]
    con.close()
    monkeypatch.setattr(loader, "_stage", real)
    return rows, (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped, r.rejects), \
        (again.rows_ingested, again.duplicates_skipped)


@pytest.mark.parametrize("rel, options", [
    ("otel_genai_spans.jsonl", {}),
    ("providers/helicone_requests.json", {}),
    ("langfuse/api_v1_observations.json", {"format": "langfuse"}),
])
def test_a_python_reading_staged_as_a_view_stores_what_the_staged_table_did(rel, options, monkeypatch):
    opts = IngestOptions(**options)
    as_view = _stored(DATA / rel, opts, monkeypatch, as_view=True)
    as_table = _stored(DATA / rel, opts, monkeypatch, as_view=False)
    assert as_view[0] and as_view == as_table


def test_a_python_reading_with_bad_rows_and_a_repeated_id_stores_what_the_staged_table_did(monkeypatch, tmp_path):
    # OpenTelemetry spans (read in Python; the fixture's 3 lines hold 5 model-call spans): one span's input
    # tokens negative (rejected), then the second line again and the first unchanged: 9 spans read, 1 rejected,
    # 3 ids repeated in the file, 5 stored (the rejected span's copy at the end loads).
    # The view's load takes the batch out again and the general path keeps the first row of an id
    lines = (DATA / "otel_genai_spans.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    spans = [sp for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for sp in ss["spans"]]
    tokens = next(a for sp in spans for a in sp["attributes"] if a["key"] == "gen_ai.usage.input_tokens")
    tokens["value"] = {"intValue": "-5"}
    path = tmp_path / "spans.jsonl"
    path.write_text("\n".join([json.dumps(doc), *lines[1:], lines[1], lines[0]]) + "\n")
    as_view = _stored(path, IngestOptions(), monkeypatch, as_view=True)
    as_table = _stored(path, IngestOptions(), monkeypatch, as_view=False)
    assert as_view[1][:4] == (9, 5, 1, 3) and as_view == as_table
