"""Ingestion: adapters, idempotence, rejects, bad files, quoting."""
import csv
import gzip
import hashlib
import json
import re
import shutil
import zipfile
from datetime import datetime

import duckdb
import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import IngestOptions, ingest_path, probe
from finops.ingest.loader import detect
from helpers import DATA

AZURE_MAP = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _csv_sums(path):
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return len(rows), sum(int(r["ContextTokens"]) for r in rows), sum(int(r["GeneratedTokens"]) for r in rows)


def test_azure_conversation_trace_loads_once_through_generic(con):
    opts = IngestOptions(mapping=AZURE_MAP, model="azure-conv")
    [first] = ingest_path(con, DATA / "azure_conv.csv", opts)
    assert (first.format, first.rows_ingested, first.rows_rejected) == ("generic", 19_366, 0)
    [again] = ingest_path(con, DATA / "azure_conv.csv", opts)
    assert (again.rows_ingested, again.duplicates_skipped) == (0, 19_366)
    n, ctx, gen = _csv_sums(DATA / "azure_conv.csv")
    got = con.execute("SELECT count(*), sum(input_tokens), sum(output_tokens) FROM requests").fetchall()[0]
    assert got == (n, ctx, gen) == (19_366, ctx, gen)
    # 7 fractional digits are read (to the microsecond), as UTC
    first_ts = con.execute("SELECT min(ts) FROM requests").fetchall()[0][0]
    assert first_ts.isoformat() == "2023-11-16T18:15:46.680590"
    # the rollups agree with the raw rows
    assert con.execute("SELECT sum(requests), sum(input_tokens) FROM rollup_hourly").fetchall()[0] == (n, ctx)


def test_changed_copy_adds_only_new_rows(con, tmp_path):
    """Not the same bytes, so the row-level anti-join decides: only the new row goes in."""
    src = (DATA / "azure_code_excerpt.csv").read_text().splitlines()
    a = tmp_path / "a.csv"
    a.write_text("\n".join(src[:101]) + "\n")
    b = tmp_path / "b.csv"
    b.write_text("\n".join(src[:101] + ["2023-11-16 20:00:00.0000000,10,20"]) + "\n")
    opts = IngestOptions(mapping=AZURE_MAP, model="azure-code")
    assert ingest_path(con, a, opts)[0].rows_ingested == 100
    r = ingest_path(con, b, opts)[0]
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (101, 1, 100)


def test_identical_rows_in_one_file_are_two_requests(con, tmp_path):
    f = tmp_path / "twins.csv"
    f.write_text("ts,model,input_tokens,output_tokens\n"
                 "2026-01-01 00:00:00,m,5,6\n2026-01-01 00:00:00,m,5,6\n2026-01-01 00:00:01,m,5,6\n")
    assert ingest_path(con, f)[0].rows_ingested == 3
    assert ingest_path(con, f)[0].rows_ingested == 0
    f2 = tmp_path / "twins_and_one.csv"     # other bytes: the row-level path must give the same ids
    f2.write_text(f.read_text() + "2026-01-01 00:00:00,m,5,6\n")
    r = ingest_path(con, f2)[0]
    assert (r.rows_ingested, r.duplicates_skipped) == (1, 3)


def test_an_id_equal_to_one_made_for_a_row_without_id_is_a_repeat_within_the_file(con, tmp_path):
    """A row without request_id gets its content hash and occurrence number ("<md5>-1"); a row of the same file
    whose own id is that text is the same request twice, and the file's first of the two rows is kept."""
    one = tmp_path / "one.csv"
    one.write_text("request_id,ts,model,input_tokens\n,2026-01-01 00:00:00,m,5\n")
    assert ingest_path(con, one)[0].rows_ingested == 1
    [(made,)] = con.execute("SELECT request_id FROM requests").fetchall()
    assert re.fullmatch(r"[0-9a-f]{32}-1", made)
    other = store.connect(":memory:")
    both = tmp_path / "both.csv"
    both.write_text(f"request_id,ts,model,input_tokens\nr1,2026-01-01 00:00:00,m,1\n,2026-01-01 00:00:00,m,5\n"
                    f"{made},2026-01-01 00:00:09,m,7\n")
    r = ingest_path(other, both)[0]
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (3, 2, 1)
    assert other.execute("SELECT request_id, input_tokens FROM requests ORDER BY 1").fetchall() == \
        sorted([("r1", 1), (made, 5)])
    other.close()


BAD = ("ts,model,tenant,input_tokens,queue_ms,confidence,status\n"
       "2026-01-01 00:00:00,a,t1,10,5,0.5,ok\n"          # line 2: good
       "yesterday,b,t1,1,1,0.1,ok\n"                     # line 3: bad ts
       "2026-01-01 00:00:02,c,t1,-3,1,0.2,ok\n"          # line 4: negative tokens
       "2026-01-01 00:00:03,,t1,1,1,0.2,ok\n"            # line 5: no model
       "2026-01-01 00:00:04,e,t1,1,1,1.5,ok\n"           # line 6: confidence out of range
       "2026-01-01 00:00:05,f,t1,1,1,0.2,sideways\n"     # line 7: unknown status
       "2026-01-01 00:00:06,g,t1,1,1,0.2,OK,extra\n"     # line 8: too many fields
       "2026-01-01 00:00:07,h,t1,7,1,0.9,Error\n")       # line 9: good (status case-folded)


def test_bad_rows_are_rejected_with_row_and_field(con, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text(BAD)
    r = ingest_path(con, f)[0]
    assert (r.format, r.rows_read, r.rows_ingested, r.rows_rejected) == ("canonical", 8, 2, 6)
    by_row = {x["row"]: x for x in r.rejects}
    assert sorted(by_row) == [3, 4, 5, 6, 7, 8]
    assert by_row[3]["field"] == "ts" and "yesterday" in by_row[3]["reason"]
    assert by_row[4]["field"] == "input_tokens" and "negative" in by_row[4]["reason"]
    assert by_row[5]["field"] == "model"
    assert by_row[6]["field"] == "confidence"
    assert by_row[7]["field"] == "status"
    assert "more fields" in by_row[8]["reason"]
    assert sorted(x[0] for x in con.execute("SELECT status FROM requests").fetchall()) == ["error", "ok"]


def test_strict_changes_nothing(con, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text(BAD)
    before = con.execute("SELECT count(*) FROM batches").fetchall()
    with pytest.raises(InputError, match=r"6 bad rows, nothing loaded.*row 3"):
        ingest_path(con, f, IngestOptions(strict=True))
    assert store.row_count(con) == 0
    assert con.execute("SELECT count(*) FROM batches").fetchall() == before
    assert con.execute("SELECT count(*) FROM rollup_hourly").fetchall()[0][0] == 0


@pytest.mark.parametrize("name,content,message", [
    ("empty.csv", b"", "empty"),
    ("blank.jsonl", b"\n\n  \n", "empty"),
    ("image.csv", bytes(range(256)) * 40, "binary"),
    ("cut.csv", b"ts,model,input_tokens\n2026-01-01 00:00:00,a,10\n2026-01-01 00:00:01,b", "truncated"),
    ("cut.jsonl", b'{"ts": "2026-01-01 00:00:00", "model": "a", "tenant": "x"}\n{"ts": "2026-01-0', "truncated"),
    ("cut.csv.gz", gzip.compress(b"ts,model,tenant\n2026-01-01 00:00:00,a,b\n" * 50)[:-30], "truncated|corrupt"),
    ("notes.txt", b"just some words\nwithout any structure\n", "no known log format"),
])
def test_unreadable_files_get_a_clear_message_and_change_nothing(con, tmp_path, name, content, message):
    f = tmp_path / name
    f.write_bytes(content)
    ingest_path(con, DATA / "azure_code_excerpt.csv", IngestOptions(mapping=AZURE_MAP, model="m"))
    before = store.row_count(con), con.execute("SELECT count(*) FROM batches").fetchall()[0][0]
    with pytest.raises(InputError, match=message) as err:
        ingest_path(con, f)
    assert name in str(err.value)
    assert (store.row_count(con), con.execute("SELECT count(*) FROM batches").fetchall()[0][0]) == before


def test_truncated_parquet_is_refused(con, tmp_path):
    good = tmp_path / "good.parquet"
    con.execute(f"COPY (SELECT TIMESTAMP '2026-01-01' + INTERVAL (i) SECOND AS ts, 'm' AS model, 't' AS tenant, "
                f"i AS input_tokens FROM range(1000) r(i)) TO '{good}' (FORMAT parquet)")
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[:-200])
    with pytest.raises(InputError, match="cut.parquet"):
        ingest_path(con, cut)
    assert store.row_count(con) == 0
    assert ingest_path(con, good)[0].rows_ingested == 1000


def test_gzip_and_zip_and_jsonl(con, tmp_path):
    rows = [{"request_id": f"q{i}", "ts": f"2026-01-01T00:00:{i:02d}Z", "model": "gpt-4o-mini", "tenant": "t",
             "input_tokens": i, "output_tokens": 2 * i, "queue_ms": 1.5, "extra_field": {"k": i}} for i in range(10)]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    r = ingest_path(con, tmp_path / "a.jsonl.gz")[0]
    assert (r.format, r.rows_ingested) == ("canonical", 10)
    attrs = json.loads(con.execute("SELECT attrs FROM requests WHERE request_id = 'q3'").fetchall()[0][0])
    assert attrs == {"extra_field": {"k": 3}}     # unmapped fields are kept, not dropped
    with zipfile.ZipFile(tmp_path / "b.zip", "w") as zf:
        zf.writestr("logs/a.jsonl", text)
        zf.writestr("logs/b.csv", "request_id,ts,model,tenant\nz1,2026-01-01 01:00:00,gpt-4o,t\n")
    results = ingest_path(con, tmp_path / "b.zip")
    assert [(x.rows_ingested, x.duplicates_skipped) for x in results] == [(0, 10), (1, 0)]


CANONICAL_RECORDS = [
    {"request_id": "a1", "ts": "2026-11-01T10:00:00Z", "tenant": "acme", "model": "gpt-4o", "input_tokens": 120,
     "output_tokens": 30, "cached_input_tokens": 100, "cache_hit": False, "queue_ms": 1.5, "total_ms": 812.25,
     "status": "ok", "cost_usd": 0.00042, "extra": {"k": [1, 2]}},
    {"request_id": "a2", "ts": "2026-11-01T12:30:01+02:00", "model": "llama-3.1-8b", "input_tokens": 7,
     "output_tokens": 0, "status": "error", "error_type": "timeout", "attrs": {"route_reason": "x"}},
    {"ts": "2026-11-01 10:00:02", "model": "gpt-4o", "input_tokens": 5, "output_tokens": 1},     # no id: hashed
    {"request_id": "a4", "ts": "2026-11-01T10:00:03Z", "model": "gpt-4o", "input_tokens": -5},  # rejected
]


@pytest.mark.parametrize("gz", [False, True])
def test_a_canonical_json_array_is_detected_and_stores_what_json_lines_store(tmp_path, gz):
    """A JSON array of canonical records is detected as canonical (no --format) and read as the same records as
    JSON Lines are: counts, rejects and every stored column equal."""
    texts = {"rows.jsonl": "".join(json.dumps(r) + "\n" for r in CANONICAL_RECORDS),
             "rows.json": json.dumps(CANONICAL_RECORDS, indent=1)}
    loaded = {}
    for name, text in texts.items():
        f = tmp_path / (name + (".gz" if gz else ""))
        f.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
        assert detect(probe(f)).name == "canonical"
        c = store.connect(":memory:")
        [r] = ingest_path(c, f)
        loaded[name] = (r.format, _outcome(r), _stored(c))
        c.close()
    assert loaded["rows.json"] == loaded["rows.jsonl"]
    fmt, outcome, rows = loaded["rows.json"]
    assert fmt == "canonical"
    # the file gives no cached tokens for that row: they exceed nothing (only a given part is checked)
    assert outcome == (4, 3, 1, 0, [4], ["input_tokens: negative value -5"])
    cols = [d[0] for d in store.connect(":memory:").execute("SELECT * EXCLUDE (batch_id) FROM requests").description]
    got = {r[cols.index("request_id")]: dict(zip(cols, r, strict=True)) for r in rows}
    a1, a2 = got["a1"], got["a2"]
    assert (a1["ts"].isoformat(), a1["tenant"], a1["input_tokens"], a1["output_tokens"], a1["cached_input_tokens"],
            a1["cache_hit"], a1["queue_ms"], a1["total_ms"], a1["cost_usd"]) == (
        "2026-11-01T10:00:00", "acme", 120, 30, 100, False, 1.5, 812.25, 0.00042)
    assert json.loads(a1["attrs"]) == {"extra": {"k": [1, 2]}}
    assert (a2["ts"].isoformat(), a2["tenant"], a2["status"], a2["error_type"]) == (
        "2026-11-01T10:30:01", "default", "error", "timeout")
    assert json.loads(a2["attrs"]) == {"route_reason": "x"}
    [hashed] = [v for k, v in got.items() if k not in ("a1", "a2")]
    assert (hashed["ts"].isoformat(), hashed["input_tokens"], hashed["request_id"][-2:]) == (
        "2026-11-01T10:00:02", 5, "-1")


def test_gateway_log_detected_and_read():
    con = store.connect(":memory:")
    p = probe(DATA / "seed_gateway_injected.log")
    assert detect(p).name == "gateway-log"
    r = ingest_path(con, DATA / "seed_gateway_injected.log")[0]
    lines = [ln for ln in (DATA / "seed_gateway_injected.log").read_text().splitlines() if "[ROUTE]" in ln]
    assert (r.rows_read, r.rows_ingested, r.rows_rejected) == (len(lines), len(lines), 0)
    first = lines[0]
    kv = dict(part.split("=", 1) for part in first.split("[ROUTE]")[1].split())
    got = con.execute("SELECT model, route, prompt_chars, queue_ms, service_ms, total_ms, attrs FROM requests "
                      "ORDER BY ts, request_id").fetchall()
    assert any(g[0] == kv["target"] and g[2] == int(kv["len"]) and g[3] == float(kv["queue_ms"])
               and g[5] == float(kv["total_ms"]) for g in got)
    assert "relative_cost" in json.loads(got[0][6])


def test_delete_batch(con):
    opts = IngestOptions(mapping=AZURE_MAP, model="m")
    [r] = ingest_path(con, DATA / "azure_code_excerpt.csv", opts)
    assert store.delete_batch(con, r.batch_id) == 500
    assert store.row_count(con) == 0
    assert con.execute("SELECT count(*) FROM rollup_hourly").fetchall()[0][0] == 0
    assert ingest_path(con, DATA / "azure_code_excerpt.csv", opts)[0].rows_ingested == 500


def test_mapping_errors_name_the_field(con):
    with pytest.raises(InputError, match="no column 'Nope'"):
        ingest_path(con, DATA / "azure_code_excerpt.csv", IngestOptions(mapping={"ts": "Nope"}))
    with pytest.raises(InputError, match="not a canonical column"):
        ingest_path(con, DATA / "azure_code_excerpt.csv", IngestOptions(mapping={"when": "TIMESTAMP"}))


def test_copy_is_not_needed_for_paths_with_quotes(con, tmp_path):
    odd = tmp_path / "it's a log.csv"
    shutil.copy(DATA / "azure_code_excerpt.csv", odd)
    assert ingest_path(con, odd, IngestOptions(mapping=AZURE_MAP, model="m"))[0].rows_ingested == 500


def test_a_repeated_request_id_in_one_file_keeps_the_first(con, tmp_path):
    f = tmp_path / "dup_ids.csv"
    f.write_text("request_id,ts,model,tenant,input_tokens\n"
                 "a,2026-01-01 00:00:00,m,t,1\nb,2026-01-01 00:00:01,m,t,2\na,2026-01-01 00:00:02,m,t,3\n")
    r = ingest_path(con, f)[0]
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (3, 2, 1)
    assert con.execute("SELECT input_tokens FROM requests WHERE request_id = 'a'").fetchall() == [(1,)]


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_rows_of_a_file_read_in_parallel_keep_their_numbers(con, tmp_path, fmt):
    # ~40 MB of JSON Lines: more than one reader buffer, so several threads read it; rows are
    # numbered by their position once staged, which must be their line in the file
    n = 100_000
    f = tmp_path / f"big.{'jsonl' if fmt == 'json' else 'csv'}"
    gen = duckdb.connect()
    gen.execute(f"""COPY (SELECT CASE WHEN i = {n - 5} THEN 'r10' ELSE 'r' || i END AS request_id,
        TIMESTAMP '2026-01-01' + to_seconds(i) AS ts, 'm' AS model,
        CASE WHEN i IN (3, {n - 10}) THEN -i ELSE i END AS input_tokens, repeat('x', 300) AS note
        FROM range(1, {n + 1}) t(i)) TO '{f}' ({'FORMAT json' if fmt == 'json' else 'HEADER'})""")
    gen.close()
    r = ingest_path(con, f)[0]
    line = 0 if fmt == "json" else 1          # a CSV's header is line 1
    assert (r.rows_read, r.rows_rejected, r.duplicates_skipped) == (n, 2, 1)
    assert [x["row"] for x in r.rejects] == [3 + line, n - 10 + line]
    assert all(f"-{i}" in x["reason"] for i, x in zip((3, n - 10), r.rejects, strict=True))
    # the first row of a repeated id wins, wherever the two rows were read
    assert con.execute("SELECT input_tokens FROM requests WHERE request_id = 'r10'").fetchall() == [(10,)]


def test_rows_without_id_repeated_far_apart_in_a_large_file_are_found_and_numbered(con, tmp_path):
    # 300,000 rows: several row groups, grouped on several threads; a row repeated at the file's start, middle
    # and end is numbered -1, -2, -3, every other row -1 (the grouping of the content hashes' 64-bit hashes
    # finds the repeats wherever they were read)
    n = 300_000
    f = tmp_path / "azure_repeats.csv"
    gen = duckdb.connect()
    gen.execute(f"""COPY (SELECT strftime(TIMESTAMP '2023-11-16 18:15:46' + to_microseconds(CASE WHEN i IN (5, {n // 2},
        {n - 3}) THEN 0 ELSE i * 1000 END), '%Y-%m-%d %H:%M:%S.%f') AS "TIMESTAMP",
        CASE WHEN i IN (5, {n // 2}, {n - 3}) THEN 7 ELSE 50 + i % 3000 END AS "ContextTokens",
        CASE WHEN i IN (5, {n // 2}, {n - 3}) THEN 9 ELSE 10 + i % 600 END AS "GeneratedTokens"
        FROM range({n}) t(i) ORDER BY i) TO '{f}' (HEADER)""")
    gen.close()
    r = ingest_path(con, f, IngestOptions(format="azure-trace", model="gpt-4o"))[0]
    assert (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped) == (n, n, 0, 0)
    suffixes = con.execute("SELECT regexp_extract(request_id, '-([0-9]+)$', 1) AS k, count(*), "
                           "count(DISTINCT regexp_extract(request_id, '^[0-9a-f]{32}')) FROM requests "
                           "GROUP BY k ORDER BY k").fetchall()
    assert suffixes == [("1", n - 2, n - 2), ("2", 1, 1), ("3", 1, 1)]
    assert con.execute("SELECT count(DISTINCT split_part(request_id, '-', 1)) FROM requests "
                       "WHERE input_tokens = 7").fetchall() == [(1,)]
    [again] = ingest_path(con, f, IngestOptions(format="azure-trace", model="gpt-4o"))
    assert (again.rows_ingested, again.duplicates_skipped) == (0, n)


MOONCAKE_X = '{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}'
MOONCAKE_Y = '{"timestamp": 3, "input_length": 600, "output_length": 4, "hash_ids": [5]}'


def test_rows_repeating_a_content_hash_are_numbered_in_file_order_and_a_reload_adds_nothing(con, tmp_path):
    """Identical Mooncake lines share a content hash but not their cached tokens (the prefix cache has seen
    the blocks from the second on): -1 is the file's first such line, -2 the next, and so on."""
    opts = IngestOptions(format="mooncake", model="kimi", start=datetime(2025, 1, 1))
    f = tmp_path / "repeats.jsonl"
    f.write_text("\n".join([MOONCAKE_X, MOONCAKE_Y, MOONCAKE_X, MOONCAKE_X, MOONCAKE_Y]) + "\n")
    r = ingest_path(con, f, opts)[0]
    assert (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped) == (5, 5, 0, 0)
    rows = con.execute("SELECT split_part(request_id, '-', 1), split_part(request_id, '-', 2), input_tokens, "
                       "cached_input_tokens FROM requests ORDER BY input_tokens DESC, request_id").fetchall()
    (x, _, _, _), (y, _, _, _) = rows[0], rows[-1]
    assert x != y and all(re.fullmatch(r"[0-9a-f]{32}", h) for h in (x, y))
    # X's blocks are cached from its second line (1,000 tokens, its whole input), Y's one block from its second
    assert rows == [(x, "1", 1000, 0), (x, "2", 1000, 1000), (x, "3", 1000, 1000), (y, "1", 600, 0),
                    (y, "2", 600, 512)]
    # the same file again; the same rows in other bytes (a blank line at the end): the row-level path
    assert (ingest_path(con, f, opts)[0].rows_ingested, con.execute("SELECT count(*) FROM requests").fetchall()) \
        == (0, [(5,)])
    same = tmp_path / "same_rows.jsonl"
    same.write_text(f.read_text() + "\n")
    r2 = ingest_path(con, same, opts)[0]
    assert (r2.rows_read, r2.rows_ingested, r2.duplicates_skipped) == (5, 0, 5)
    # one more X: only it goes in, as X-4
    more = tmp_path / "one_more.jsonl"
    more.write_text(f.read_text() + MOONCAKE_X + "\n")
    r3 = ingest_path(con, more, opts)[0]
    assert (r3.rows_read, r3.rows_ingested, r3.duplicates_skipped) == (6, 1, 5)
    assert con.execute("SELECT cached_input_tokens FROM requests WHERE request_id = ?", [f"{x}-4"]).fetchall() \
        == [(1000,)]


def test_a_misfit_value_past_the_type_sample_rejects_its_row_only(con, tmp_path):
    """DuckDB guesses JSON column types from the first rows: a word where 30,000 rows held numbers is one
    bad row (reported with its line and field), not a file that cannot be read."""
    n, bad = 30_000, 25_000
    f = tmp_path / "late.jsonl"
    with f.open("w") as fh:
        for i in range(1, n + 1):
            fh.write(json.dumps({"request_id": f"l{i}", "ts": "2026-11-20T10:00:00", "model": "m",
                                 "input_tokens": "lots" if i == bad else i % 500}) + "\n")
    r = ingest_path(con, f)[0]
    assert (r.rows_read, r.rows_ingested, r.rows_rejected) == (n, n - 1, 1)
    [reject] = r.rejects
    assert reject["row"] == bad and reject["field"] == "input_tokens" and "lots" in reject["reason"]
    total = con.execute("SELECT sum(input_tokens) FROM requests").fetchall()[0][0]
    assert total == sum(i % 500 for i in range(1, n + 1) if i != bad)


# ---------------------------------------------------------------- canonical CSV: typed first, text when it must

TYPED_CSV_HEADER = "request_id,ts,model,tenant,input_tokens,output_tokens,total_ms,cost_usd,cache_hit\n"
TYPED_CSV_CLEAN = ["a1,2026-11-01 10:00:00,m,t1,100,5,12.5,0.001,true",
                   "a2,2026-11-01T10:00:01Z,m,t1, 7 ,1e3,1.5e3,,no",           # spaces, exponents, empty, 'no'
                   "a3,2026-11-01 12:00:02+05:30,m,,00012,0,,2.5e-4,",         # an offset, leading zeros
                   "a4,2026-11-01 10:00:03,m,t2,-5,9,inf,0,1",                 # checked: negative, not finite
                   "a5,2026-11-01,m,t2,30,3,40,0.002,f"]
TYPED_CSV_TEXT_ONLY = {"12.50": "a6,2026-11-01 10:00:04,m,t1,12.50,3,40,0,",      # not a whole number
                       "1e400": "a6,2026-11-01 10:00:04,m,t1,1e400,3,40,0,",      # beyond a double
                       "big": "a6,2026-11-01 10:00:04,m,t1,9007199254740993,3,40,0,",
                       "epoch": "a6,1730455204,m,t1,4,3,40,0,",                  # a time the text path reads
                       "no_id": ",2026-11-01 10:00:04,m,t1,4,3,40,0,"}          # hashed from its text


def _typed_and_text(tmp_path, lines):
    """The same canonical CSV loaded as the canonical format reads it (typed first) and through a column
    mapping (always read as text and cast afterwards): (result, stored rows) of each."""
    f = tmp_path / "typed.csv"
    f.write_text(TYPED_CSV_HEADER + "\n".join(lines) + "\n")
    out = []
    for opts in (IngestOptions(format="canonical"), IngestOptions(format="canonical", mapping={"model": "model"})):
        c = store.connect(":memory:")
        [r] = ingest_path(c, f, opts)
        out.append((_outcome(r), _stored(c)))
        c.close()
    return out


def test_a_canonical_csv_read_typed_stores_what_the_text_reading_stores(tmp_path):
    """A canonical CSV is read with its numbers and times typed by the CSV reader (faster than text cast
    afterwards). Spaces, exponents, empty fields, offsets and the checks' rejects come out as the text
    reading gives them."""
    (typed, typed_rows), (text, text_rows) = _typed_and_text(tmp_path, TYPED_CSV_CLEAN)
    assert typed == text and typed_rows == text_rows
    assert typed[:3] == (5, 4, 1)
    assert typed[5] == ["input_tokens: negative value -5; total_ms: inf is not a finite number"]
    got = {r[0]: r for r in typed_rows}
    assert got["a2"][1].isoformat() == "2026-11-01T10:00:01" and got["a3"][1].isoformat() == "2026-11-01T06:30:02"


@pytest.mark.parametrize("case", sorted(TYPED_CSV_TEXT_ONLY))
def test_a_canonical_csv_value_the_typed_reading_cannot_keep_is_read_as_text(tmp_path, case):
    """A count that is not a whole number a double holds, a time only the text path reads, a row without an
    id (its content hash is of the text as written): the file is read as text, so the stored rows, the
    rejects and their wording ("12.50", not 12.5) are the text reading's."""
    (typed, typed_rows), (text, text_rows) = _typed_and_text(tmp_path, TYPED_CSV_CLEAN + [TYPED_CSV_TEXT_ONLY[case]])
    assert typed == text and typed_rows == text_rows
    if case in ("12.50", "1e400"):
        assert f"input_tokens: cannot read {case} as a whole number" in typed[5]
    elif case == "big":     # the text reading goes through a double too: 2^53 + 1 is read as 2^53
        assert "input_tokens: 9007199254740992 is above the limit of 1,000,000,000" in typed[5]
    else:
        assert typed[:3] == (6, 5, 1)


OFFSET_RECORDS = [
    {"ts": "2026-11-01T10:00:02Z", "model": "gpt-4o", "input_tokens": 5},
    {"ts": "2026-11-01 10:00:03", "model": "gpt-4o", "input_tokens": 6},
    {"request_id": "z", "ts": "2026-11-01T12:30:01+02:00", "model": "gpt-4o"},
]


@pytest.mark.parametrize("ext", ["jsonl", "json"])
def test_a_canonical_json_time_with_an_offset_read_typed_is_stored_in_utc(tmp_path, ext):
    """JSON read typed kept 12:30:01+02:00 as 12:30:01 (a TIMESTAMP drops the offset); the text reading and a CSV
    store 10:30:01 UTC. The content hash of a row without an id is of its time as the typed reading reads it."""
    f = tmp_path / f"offsets.{ext}"
    f.write_text("".join(json.dumps(r) + "\n" for r in OFFSET_RECORDS) if ext == "jsonl" else json.dumps(OFFSET_RECORDS))
    got = []
    for opts in (IngestOptions(format="canonical"), IngestOptions(format="canonical", mapping={"model": "model"})):
        c = store.connect(":memory:")
        ingest_path(c, f, opts)
        got.append(c.execute("SELECT request_id, ts FROM requests ORDER BY ts").fetchall())
        c.close()
    typed, text = got
    # a row without an id is hashed from its fields that hold a value (its request_id is empty: each other field's
    # text as a one-key JSON object, in the order of their names, the time as the typed reading reads it) and the
    # constants given ("|": none)
    def hashed(text: str) -> str:
        return hashlib.md5(f"{text}|".encode()).hexdigest() + "-1"
    assert [(i, t.isoformat()) for i, t in typed] == [
        (hashed('{"input_tokens":"5"},{"model":"gpt-4o"},{"ts":"2026-11-01 10:00:02"}'), "2026-11-01T10:00:02"),
        (hashed('{"input_tokens":"6"},{"model":"gpt-4o"},{"ts":"2026-11-01 10:00:03"}'), "2026-11-01T10:00:03"),
        ("z", "2026-11-01T10:30:01")]
    assert [t for _, t in text] == [t for _, t in typed]


# ---------------------------------------------------------------- Parquet: insert first, then prove it was all

def _parquet_and_csv(tmp_path, rows: str, name: str):
    """The same rows (an SQL SELECT) as a Parquet file (read as a view: the insert-first path) and a CSV
    (staged as a table: the general path)."""
    gen = duckdb.connect()
    pq, cs = tmp_path / f"{name}.parquet", tmp_path / f"{name}.csv"
    gen.execute(f"COPY ({rows}) TO '{pq}' (FORMAT parquet)")
    gen.execute(f"COPY ({rows}) TO '{cs}' (HEADER)")
    gen.close()
    return pq, cs


def _stored(c):
    return c.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id, ts, input_tokens").fetchall()


def _outcome(r, header_lines: int = 0):
    """Counts and rejects; a CSV's rows are its lines, the header line 1 (``header_lines=1``)."""
    return (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped,
            [x["row"] - header_lines for x in r.rejects], [x["reason"] for x in r.rejects])


ROWS = ("SELECT CASE WHEN i = 7 THEN NULL WHEN i = 9 THEN 'r3' ELSE 'r' || i END AS request_id, "
        "TIMESTAMP '2026-11-01' + to_seconds(i * 60) AS ts, 'm' AS model, 't' || (i % 3) AS tenant, "
        "CASE WHEN i = 5 THEN -1 ELSE i * 10 END AS input_tokens, i AS output_tokens, 12.5 * i AS total_ms "
        "FROM range(1, {n}) t(i)")


@pytest.mark.parametrize("case", ["clean", "rejects", "no_id", "repeated_id", "all_three"])
def test_parquet_loads_as_the_general_path_does(con, tmp_path, case):
    """A Parquet file is inserted in one reading, then the counts prove every row went in; a bad row, a row
    with no id or an id repeated in the file sends it back to the general path. Either way the stored rows,
    the counts and the rejects are those of the same rows loaded as CSV (staged as a table)."""
    rows = {"clean": "SELECT * REPLACE ('r' || i AS request_id, i * 10 AS input_tokens) FROM ({r})",
            "rejects": "SELECT * REPLACE ('r' || i AS request_id) FROM ({r})",
            "no_id": "SELECT * REPLACE (CASE WHEN i = 7 THEN NULL ELSE 'r' || i END AS request_id, "
                     "i * 10 AS input_tokens) FROM ({r})",
            "repeated_id": "SELECT * REPLACE (CASE WHEN i = 9 THEN 'r3' ELSE 'r' || i END AS request_id, "
                           "i * 10 AS input_tokens) FROM ({r})",
            "all_three": "SELECT * FROM ({r})"}[case]
    body = ROWS.format(n=41).replace("FROM range", ", i FROM range")
    pq, cs = _parquet_and_csv(tmp_path, f"SELECT * EXCLUDE (i) FROM ({rows.format(r=body)})", case)
    [a] = ingest_path(con, pq)
    other = store.connect(":memory:")
    [b] = ingest_path(other, cs)
    assert _outcome(a) == _outcome(b, header_lines=1)
    expected = {"clean": (40, 40, 0, 0), "rejects": (40, 39, 1, 0), "no_id": (40, 40, 0, 0),
                "repeated_id": (40, 39, 0, 1), "all_three": (40, 38, 1, 1)}[case]
    assert _outcome(a)[:4] == expected
    assert _stored(con) == _stored(other)
    # the rollups count exactly the stored rows
    assert con.execute("SELECT sum(requests), sum(input_tokens) FROM rollup_hourly").fetchall() == \
        con.execute("SELECT count(*), sum(input_tokens) FROM requests").fetchall()
    # a copy of the file under another name (other bytes: the sha differs) adds nothing
    again = tmp_path / f"{case}_again.parquet"
    duckdb.connect().execute(f"COPY (SELECT * FROM read_parquet('{pq}') ORDER BY ts DESC) TO '{again}' (FORMAT parquet)")
    [c] = ingest_path(con, again)
    assert (c.rows_ingested, c.duplicates_skipped) == (0, expected[0] - expected[2])
    assert store.row_count(con) == expected[1]
    other.close()


@pytest.mark.parametrize("ids", ["some_missing", "all_missing"])
def test_parquet_ids_missing_load_as_the_general_path_does(con, tmp_path, ids):
    """Rows of a Parquet id column that are NULL (a quarter, or all) are inserted by the first reading and
    found by the count of stored ids (their one NULL hash would pass the distinct-hash count): the batch goes
    the general path (content hashes), as the same rows read as CSV."""
    rid = {"some_missing": "CASE WHEN i % 4 = 0 THEN NULL ELSE 'r' || i END",
           "all_missing": "CAST(NULL AS VARCHAR)"}[ids]
    rows = (f"SELECT {rid} AS request_id, TIMESTAMP '2026-11-01' + to_seconds(i * 60) AS ts, 'm' AS model, "
            "i AS output_tokens FROM range(1, 21) t(i)")
    pq, cs = _parquet_and_csv(tmp_path, rows, ids)
    [a] = ingest_path(con, pq)
    other = store.connect(":memory:")
    [b] = ingest_path(other, cs)
    assert _outcome(a) == _outcome(b, header_lines=1)
    assert _outcome(a)[:4] == (20, 20, 0, 0)
    assert _stored(con) == _stored(other)
    assert con.execute("SELECT count(*) FROM requests WHERE request_id IS NULL").fetchall() == [(0,)]
    assert ingest_path(con, pq)[0].rows_ingested == 0
    other.close()


def test_status_spellings_and_reasons(con, tmp_path):
    """A status is trimmed and lower-cased; blank is none; anything else is rejected, its reason naming it."""
    path = tmp_path / "status.csv"
    path.write_text("request_id,ts,model,status\n"
                    "a,2026-01-01 00:00:00,m, OK \nb,2026-01-01 00:00:01,m,Error\nc,2026-01-01 00:00:02,m,\n"
                    "d,2026-01-01 00:00:03,m,   \ne,2026-01-01 00:00:04,m,TimeOut\n"
                    "f,2026-01-01 00:00:05,m, Sideways\ng,2026-01-01 00:00:06,m,okay\n")
    [r] = ingest_path(con, path)
    assert [(x["row"], x["reason"]) for x in r.rejects] == [
        (7, "status: sideways is not one of ok/error/timeout/rejected"),
        (8, "status: okay is not one of ok/error/timeout/rejected")]
    assert con.execute("SELECT request_id, status FROM requests ORDER BY 1").fetchall() == [
        ("a", "ok"), ("b", "error"), ("c", None), ("d", None), ("e", "timeout")]


def test_parquet_overlapping_the_store_adds_only_new_rows(con, tmp_path):
    first, _ = _parquet_and_csv(tmp_path, "SELECT * EXCLUDE (i) FROM (" + ROWS.format(n=21).replace(
        "CASE WHEN i = 7 THEN NULL WHEN i = 9 THEN 'r3' ELSE 'r' || i END", "'r' || i").replace(
        "CASE WHEN i = 5 THEN -1 ELSE i * 10 END", "i * 10").replace("FROM range", ", i FROM range") + ")", "first")
    second, _ = _parquet_and_csv(tmp_path, "SELECT * EXCLUDE (i) FROM (" + ROWS.format(n=31).replace(
        "CASE WHEN i = 7 THEN NULL WHEN i = 9 THEN 'r3' ELSE 'r' || i END", "'r' || i").replace(
        "CASE WHEN i = 5 THEN -1 ELSE i * 10 END", "i * 10").replace("FROM range", ", i FROM range") + ")", "second")
    assert ingest_path(con, first)[0].rows_ingested == 20
    r = ingest_path(con, second)[0]
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (30, 10, 20)
    assert con.execute("SELECT count(*), count(DISTINCT request_id), sum(output_tokens) FROM requests").fetchall() \
        == [(30, 30, sum(range(1, 31)))]
    assert con.execute("SELECT sum(requests), sum(output_tokens) FROM rollup_hourly").fetchall() == [(30, 465)]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_file_smaller_than_the_store_skips_the_ids_already_stored(con, tmp_path, fmt):
    """A file smaller than the store finds the stored ids among its own first (the stored ids probe the file's),
    then inserts the rest: the same rows as the anti join over every stored id gave. Parquet goes the insert-first
    path, CSV the general one; rows without an id get the same content hash ids however the file orders them."""
    big, _ = _parquet_and_csv(tmp_path, "SELECT 'r' || i AS request_id, TIMESTAMP '2026-11-01' + to_seconds(i * 60) "
                                        "AS ts, 'm' AS model, i AS output_tokens FROM range(100) t(i)", "big")
    assert ingest_path(con, big)[0].rows_ingested == 100
    # ten stored ids (r90..r99), five new ones, and four rows without an id
    rows = ("SELECT * FROM (SELECT 'r' || i AS request_id, TIMESTAMP '2026-11-01' + to_seconds(i * 60) AS ts, 'm' AS "
            "model, i AS output_tokens FROM range(90, 105) t(i) UNION ALL SELECT NULL, TIMESTAMP '2026-11-02' + "
            "to_seconds(i), 'm', 1000 + i FROM range(4) t(i)) ORDER BY {order}")
    files = [_parquet_and_csv(tmp_path, rows.format(order=o), f"small_{k}")[0 if fmt == "parquet" else 1]
             for k, o in enumerate(("output_tokens", "output_tokens DESC"))]
    r = ingest_path(con, files[0])[0]
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (19, 9, 10)
    # the same rows in another order (other bytes): each id, given or made from the row, is stored already
    r = ingest_path(con, files[1])[0]
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (19, 0, 19)
    assert con.execute("SELECT count(*), count(DISTINCT request_id), sum(output_tokens) FROM requests").fetchall() \
        == [(109, 109, sum(range(105)) + sum(range(1000, 1004)))]
    assert con.execute("SELECT sum(requests), sum(output_tokens) FROM rollup_hourly").fetchall() == [
        (109, sum(range(105)) + sum(range(1000, 1004)))]
    assert not con.execute("SELECT * FROM duckdb_tables() WHERE table_name = '_known_ids'").fetchall()


def test_parquet_strict_with_a_bad_row_changes_nothing(con, tmp_path):
    pq, _ = _parquet_and_csv(tmp_path, "SELECT * EXCLUDE (i) FROM (" + ROWS.format(n=11).replace(
        "FROM range", ", i FROM range") + ")", "strict")
    with pytest.raises(InputError, match=r"1 bad rows, nothing loaded.*row 5: input_tokens: negative"):
        ingest_path(con, pq, IngestOptions(strict=True))
    assert store.row_count(con) == 0
    assert [con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
            for t in ("batches", "rollup_hourly", *(d[0] for d in store.DERIVED))] == [0] * (2 + len(store.DERIVED))


# ---------------------------------------------------------------- an id that is only spaces

BLANK_ID_ROWS = ("SELECT CASE WHEN i % 4 = 0 THEN '  ' ELSE 'r' || i END AS request_id, "
                 "TIMESTAMP '2026-11-01' + to_seconds(i * 60) AS ts, 'm' AS model FROM range(1, 21) t(i)")
BLANK_ID_FORMATS = {"csv": "(HEADER)", "parquet": "(FORMAT parquet)", "jsonl": "(FORMAT json)",
                    "json": "(FORMAT json, ARRAY true)"}


# a JSON array is not detected by its content (its first record is not probed): named
CANONICAL = IngestOptions(format="canonical")


def _blank_id_file(tmp_path, ext, rows=BLANK_ID_ROWS):
    f = tmp_path / f"blank.{ext}"
    duckdb.connect().execute(f"COPY ({rows}) TO '{f}' {BLANK_ID_FORMATS[ext]}")
    return f


@pytest.mark.parametrize("ext", sorted(BLANK_ID_FORMATS))
def test_an_id_of_spaces_is_a_missing_id_with_a_content_hash(con, tmp_path, ext):
    """Rows 4, 8, ..., 20 carry request_id '  ': each gets a content hash of its row, as a row without an id
    does (not "rows have neither request_id nor a content hash"); loading the file again adds nothing."""
    r = ingest_path(con, _blank_id_file(tmp_path, ext), CANONICAL)[0]
    assert (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped) == (20, 20, 0, 0)
    ids = [i for (i,) in con.execute("SELECT request_id FROM requests ORDER BY ts").fetchall()]
    assert [ids[k - 1] for k in range(1, 21) if k % 4] == [f"r{k}" for k in range(1, 21) if k % 4]
    hashed = [ids[k - 1] for k in range(4, 21, 4)]
    assert all(re.fullmatch(r"[0-9a-f]{32}-1", i) for i in hashed) and len(set(hashed)) == 5
    again = tmp_path / "again"
    again.mkdir()
    r2 = ingest_path(con, _blank_id_file(again, ext, BLANK_ID_ROWS.replace("range(1, 21)", "range(1, 25)")), CANONICAL)[0]
    assert (r2.rows_read, r2.rows_ingested, r2.duplicates_skipped) == (24, 4, 20)


@pytest.mark.parametrize("ext", sorted(BLANK_ID_FORMATS))
def test_empty_and_space_ids_repeated_are_numbered_like_missing_ones(con, tmp_path, ext):
    rows = ("SELECT ['', ' ', '   ', 'a', ''][i] AS request_id, TIMESTAMP '2026-11-01' AS ts, 'm' AS model "
            "FROM range(1, 6) t(i)")
    r = ingest_path(con, _blank_id_file(tmp_path, ext, rows), CANONICAL)[0]
    assert (r.rows_read, r.rows_ingested, r.rows_rejected) == (5, 5, 0)
    ids = sorted(i for (i,) in con.execute("SELECT request_id FROM requests").fetchall())
    assert "a" in ids and len(set(ids)) == 5
    # a CSV writes '' as an empty cell (no id at all); rows whose id differs only in its spaces differ in content
    assert all(re.fullmatch(r"[0-9a-f]{32}-[12]", i) for i in ids if i != "a")


def test_a_frame_with_blank_or_missing_ids_loads_each_row_once(con):
    import pandas as pd

    from finops.ingest import ingest_frame
    frame = pd.DataFrame({"request_id": ["a", "  ", None, None], "ts": pd.to_datetime(["2026-11-01"] * 4),
                          "model": ["m"] * 4})
    r = ingest_frame(con, frame)
    assert (r.rows_read, r.rows_ingested) == (4, 4)
    ids = sorted(i for (i,) in con.execute("SELECT request_id FROM requests").fetchall())
    # the two rows without an id are one content: numbered -1 and -2
    assert "a" in ids and sorted(i[-2:] for i in ids if i != "a") == ["-1", "-1", "-2"]
    assert ingest_frame(con, frame).rows_ingested == 0


def test_an_id_of_spaces_gets_the_same_hash_from_csv_parquet_and_json_lines(tmp_path):
    """The content hash is of the row's values as read: the same row in each format is one request."""
    hashed = {}
    for ext in ("csv", "parquet", "jsonl"):
        c = store.connect(":memory:")
        (tmp_path / ext).mkdir()
        ingest_path(c, _blank_id_file(tmp_path / ext, ext))
        hashed[ext] = c.execute("SELECT list(request_id ORDER BY ts) FROM requests WHERE request_id NOT LIKE 'r%'"
                                ).fetchall()[0][0]
        c.close()
    assert len(hashed["csv"]) == 5 and hashed["csv"] == hashed["parquet"] == hashed["jsonl"]


# ---------------------------------------------------------------- found by the fuzz test of mapped files
# (tests/test_fuzz_ingest.py: the columns mapped in SQL against the records read one at a time)

GENERIC_MAP = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens",
               "request_id": "id"}


def _generic(tmp_path, name: str, text: str, fast: bool, **options):
    """Load ``text`` as file ``name`` with --format generic and GENERIC_MAP: by its SQL reading, or (``fast``
    False) a record at a time. Returns the result and the stored rows by request_id."""
    from helpers import use_python_reading
    f = tmp_path / name
    f.write_text(text)
    c = store.connect(":memory:")
    with pytest.MonkeyPatch.context() as m:
        if not fast:
            use_python_reading(m, "generic")
        [r] = ingest_path(c, f, IngestOptions(format="generic", mapping=GENERIC_MAP, **options))
    cur = c.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id")
    cols = [d[0] for d in cur.description]
    rows = {row[0]: dict(zip(cols, row, strict=True)) for row in cur.fetchall()}
    c.close()
    return r, rows


@pytest.mark.parametrize("fast", [True, False])
def test_a_time_of_spaces_is_missing_not_stored_as_no_time(tmp_path, fast):
    """A row whose time is " " was stored with ts NULL (no check named it): rejected "ts: missing" now."""
    r, rows = _generic(tmp_path, "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens,id\n   ,1,2,a\n"
                       "2023-11-16 18:15:46,3,4,b\n", fast, model="m")
    assert _outcome(r, 1) == (2, 1, 1, 0, [1], ["ts: missing"])
    assert list(rows) == ["b"] and rows["b"]["ts"].isoformat() == "2023-11-16T18:15:46"


@pytest.mark.parametrize("fast", [True, False])
def test_a_mapped_json_file_reads_blank_values_booleans_and_objects_alike(tmp_path, fast):
    """JSON Lines whose columns mix types (DuckDB reads them as JSON): "" is no value (so --model applies, where
    SQL used to store the model '""'); true is no count ("cannot read true", where SQL counted it 1); an object where
    text belongs is its JSON text (not DuckDB's {'a': 1}); a column named like a canonical one is read as it by both
    readings (the record reading used to keep it in attrs)."""
    recs = [{"TIMESTAMP": "2023-11-16 18:15:46", "ContextTokens": 5, "GeneratedTokens": 1, "id": "a", "model": "",
             "tenant": "acme"},
            {"TIMESTAMP": "2023-11-16 18:15:47", "ContextTokens": True, "GeneratedTokens": 1, "id": "b",
             "model": "gpt-4o", "tenant": 7},
            {"TIMESTAMP": "2023-11-16 18:15:48", "ContextTokens": "", "GeneratedTokens": 2, "id": "c",
             "model": {"a": 1}, "tenant": None}]
    r, rows = _generic(tmp_path, "t.jsonl", "".join(json.dumps(x) + "\n" for x in recs), fast, model="m1")
    assert _outcome(r) == (3, 2, 1, 0, [2], ["input_tokens: cannot read true as a whole number"])
    assert {k: (v["model"], v["tenant"], v["input_tokens"], v["output_tokens"]) for k, v in rows.items()} == {
        "a": ("m1", "acme", 5, 1), "c": ('{"a":1}', "default", None, 2)}


@pytest.mark.parametrize("fast", [True, False])
def test_an_attrs_column_that_is_no_json_is_kept_under_attrs_with_the_other_columns(tmp_path, fast):
    """A generic file's own attrs column beside other unmapped columns: the SQL reading stopped the load ("the file
    does not parse") on a cell that is no JSON. Now both readings: an object patched by the other columns (RFC 7386:
    theirs win, an empty one removes nothing it does not name), anything else kept under "attrs"."""
    text = ("TIMESTAMP,ContextTokens,GeneratedTokens,id,attrs,note\n"
            "2023-11-16 18:15:46,1,1,a,2023-11-16,x\n"
            '2023-11-16 18:15:46,1,1,b,"{""k"": null, ""note"": ""own""}",y\n'
            "2023-11-16 18:15:46,1,1,c,5,\n"
            "2023-11-16 18:15:46,1,1,d,,z\n")
    r, rows = _generic(tmp_path, "t.csv", text, fast, model="m")
    assert (r.rows_ingested, r.rows_rejected) == (4, 0)
    assert {k: json.loads(v["attrs"]) for k, v in rows.items()} == {
        "a": {"attrs": "2023-11-16", "note": "x"}, "b": {"k": None, "note": "y"}, "c": {"attrs": 5},
        "d": {"note": "z"}}


def test_a_time_written_as_an_epoch_with_an_exponent_or_a_sign_is_read_as_an_epoch(tmp_path):
    """"1.7e9" is 1.7 billion seconds after 1970 (as the number 1.7e9 in a JSON file is); "-1" a second before it,
    outside the stored range and rejected so, not "cannot read"."""
    r, rows = _generic(tmp_path, "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens,id\n1.7e9,1,1,a\n-1,1,1,b\n",
                       True, model="m")
    assert rows["a"]["ts"].isoformat() == "2023-11-14T22:13:20"
    assert r.rejects[0]["field"] == "ts" and "is outside" in r.rejects[0]["reason"]


def test_the_python_readings_blank_is_duckdbs_trim():
    """base.DUCKDB_TRIMMED is exactly what DuckDB's trim takes off, over every code point (Unicode's space separators,
    not tabs): the record readings decide "no id" / "no model" by it, the loader by trim."""
    from finops.ingest.base import DUCKDB_TRIMMED
    got = duckdb.execute("SELECT list(i ORDER BY i) FROM range(1, 1114112) t(i) "
                         "WHERE (i < 55296 OR i > 57343) AND trim(chr(CAST(i AS INTEGER)) || 'a') = 'a'").fetchall()[0][0]
    assert "".join(map(chr, got)) == DUCKDB_TRIMMED


def test_a_request_id_of_a_no_break_space_is_no_id(tmp_path):
    """The loader reads an id of U+00A0 as none (trim takes it), the adapter's check took only ASCII spaces: the
    row had neither id nor content hash and the whole file failed ("adapter bug"). Now it gets a content hash."""
    f = tmp_path / "ids.csv"
    f.write_text("request_id,ts,model,input_tokens\n\u00a0,2026-11-01T10:00:00Z,gpt-4o,5\n"
                 "b,2026-11-01T10:00:00Z,gpt-4o,6\n")
    c = store.connect(":memory:")
    [r] = ingest_path(c, f)
    assert (r.rows_ingested, r.rows_rejected) == (2, 0)
    ids = dict(c.execute("SELECT input_tokens, request_id FROM requests").fetchall())
    assert ids[6] == "b" and re.fullmatch(r"[0-9a-f]{32}-1", ids[5])


EPOCHS = {"s": "1767603600", "ms": "1767603600123", "us": "1767603600123456", "ns": "1767603600123456789",
          "ns_late": "1767603600999999999"}


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_time_in_epoch_nanoseconds_is_read_as_nanoseconds(tmp_path, kind):
    """OpenTelemetry, Go and pandas write times as nanoseconds since 1970: 1767603600123456789 was read as
    microseconds, the year 57983, and every row rejected "outside 2015-01-01 to ...". Seconds, milliseconds,
    microseconds and nanoseconds are told apart by magnitude; a whole count is read as a whole number (through a
    double, .123456789 s became .123457 and .999999999 the next second)."""
    if kind == "csv":
        text = "request_id,ts,model\n" + "".join(f"{k},{v},gpt-4o\n" for k, v in EPOCHS.items())
    else:
        text = "".join(f'{{"request_id": "{k}", "ts": {v}, "model": "gpt-4o"}}\n' for k, v in EPOCHS.items())
    f = tmp_path / f"epochs.{kind}"
    f.write_text(text)
    c = store.connect(":memory:")
    [r] = ingest_path(c, f)
    assert (r.rows_ingested, r.rows_rejected) == (5, 0), r.rejects
    got = dict(c.execute("SELECT request_id, strftime(ts, '%Y-%m-%d %H:%M:%S.%f') FROM requests").fetchall())
    assert got == {"s": "2026-01-05 09:00:00.000000", "ms": "2026-01-05 09:00:00.123000",
                   "us": "2026-01-05 09:00:00.123456", "ns": "2026-01-05 09:00:00.123456",
                   "ns_late": "2026-01-05 09:00:00.999999"}
