"""Numbers in a file past what Python or Arrow hold, and values of the wrong JSON type where a reading computes.

Times: a reading computes a request's time from a start and an offset (a Mooncake trace's milliseconds, a gateway
line's logged end less its total_ms, an OTel span's nanoseconds, a benchmark's offsets). Python's ``datetime``
holds years 1 to 9999, DuckDB's timestamps some 290,000 years either side: each reading used to stop the whole load
with Python's OverflowError (the file's other rows lost, a traceback for a message), or, for LLMPerf's SQL reading,
wrapped the microseconds round and stored every later request at the run's start. Counts: a token count of 1e300
stopped a Python reading's Arrow table (int64). Now such a row is rejected with its row and field, by the SQL and
the Python reading alike (the expected times computed here by DuckDB's own arithmetic, not by the code under
test), and a value of the wrong type where a benchmark reading computes refuses the file naming it.
Found by the differential fuzz tests in test_fuzz_ingest.py."""
import gzip
import json
from datetime import datetime

import duckdb
import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import IngestOptions, ingest_path
from finops.ingest.base import time_after
from helpers import DATA, use_python_reading

START = datetime(2025, 1, 1)
WINDOW = "is outside 2015-01-01 to"


def _duck_time(start: datetime, ms: int) -> str:
    """DuckDB's own sum of a start and whole milliseconds, as it writes the timestamp."""
    return duckdb.sql("SELECT CAST(CAST(? AS TIMESTAMP) + to_milliseconds(?) AS VARCHAR)",
                      params=[start, ms]).fetchall()[0][0]


def _load(path, python: bool = False, **options):
    """(rows_ingested, rejects, stored (request_id, ts) pairs) of one load, by the format's SQL reading or
    (``python``) its reader called with fast=False."""
    con = store.connect(":memory:")
    try:
        opts = IngestOptions(**options)
        if python:
            with pytest.MonkeyPatch.context() as m:
                use_python_reading(m, opts.format)
                r = ingest_path(con, path, opts)[0]
        else:
            r = ingest_path(con, path, opts)[0]
        return r.rows_ingested, r.rejects, con.execute("SELECT request_id, ts FROM requests ORDER BY ts").fetchall()
    finally:
        con.close()


def test_time_after_spells_a_time_beyond_python_years_as_duckdb_reads_it():
    """In Python's years the ISO text; beyond them DuckDB's own spelling (which it reads back to the same time);
    beyond any timestamp, text naming the sum. Never OverflowError."""
    assert time_after(START, 1500) == "2025-01-01 00:00:01.500000"
    for ms in (9007199254740992, -9007199254740992, -63_800_000_000_000):
        text = time_after(START, ms)
        assert duckdb.sql("SELECT CAST(CAST(? AS TIMESTAMP) AS VARCHAR)", params=[text]).fetchall()[0][0] \
            == _duck_time(START, ms)
    assert _duck_time(START, 9007199254740992) == "287451-10-14 08:59:00.992"
    assert time_after(START, 10 ** 18) == "2025-01-01 00:00:00 + 1000000000000000000 milliseconds"
    assert time_after(START, float("inf")) == "2025-01-01 00:00:00 + inf milliseconds"
    assert time_after(datetime(9999, 12, 31, 23, 59, 59), seconds=1.5) == "10000-01-01 00:00:00.500000"


@pytest.mark.parametrize("python", [False, True])
def test_a_mooncake_offset_past_year_9999_is_a_rejected_row_not_a_failed_load(tmp_path, python):
    """A trace line 2^53 ms after the start (year 287451) and one 10^18 ms after it: each rejected naming its row
    and the time, the good line stored; the same by both readings (and for a gzip file, which only Python reads)."""
    lines = [{"timestamp": 9007199254740992, "input_length": 10, "output_length": 2, "hash_ids": [1]},
             {"timestamp": 10 ** 18, "input_length": 10, "output_length": 2, "hash_ids": [2]},
             {"timestamp": 1500, "input_length": 700, "output_length": 5, "hash_ids": [1, 3]}]
    text = "".join(json.dumps(x) + "\n" for x in lines)
    plain, packed = tmp_path / "trace.jsonl", tmp_path / "trace.jsonl.gz"
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    for f in (plain, packed):
        n, rejects, stored = _load(f, python, format="mooncake", model="kimi-k2", start=START)
        assert n == 1 and [s[1] for s in stored] == [datetime(2025, 1, 1, 0, 0, 1, 500000)]
        assert [(r["row"], r["field"]) for r in rejects] == [(1, "ts"), (2, "ts")]
        assert rejects[0]["reason"].startswith(f"ts: {_duck_time(START, 9007199254740992)} {WINDOW}")
        assert rejects[1]["reason"] == "ts: cannot read 2025-01-01 00:00:00 + 1e+18 milliseconds as a time"


@pytest.mark.parametrize("python", [False, True])
def test_a_gateway_line_with_an_infinite_or_huge_total_ms_is_rejected_and_24_00_is_the_next_midnight(tmp_path,
                                                                                                        python):
    """total_ms=inf: the row rejected for its total_ms; 1e300: for its time; a line logged at 24:00:00 (ISO 8601's
    end of a day, which DuckDB reads as the next midnight) arrived total_ms before that midnight."""
    head = "[ROUTE] target=fast len=6 route_ms=0.00 queue_ms=0.0 service_ms=62.5"
    f = tmp_path / "gateway.log"
    f.write_text(f"2026-11-29 13:36:53,082 {head} total_ms=inf cost=1.0 inject=False\n"
                 f"2026-11-29 13:36:54,082 {head} total_ms=1e300 cost=1.0 inject=False\n"
                 f"2026-11-29 24:00:00,000 {head} total_ms=62.6 cost=1.0 inject=False\n")
    n, rejects, stored = _load(f, python, format="gateway-log")
    assert n == 1 and [s[1] for s in stored] == [datetime(2026, 11, 29, 23, 59, 59, 937400)]
    assert [(r["row"], r["reason"].split(";")[0]) for r in rejects] == [
        (1, "total_ms: inf is not a finite number"),
        (2, "ts: cannot read 2026-11-29 13:36:54.082000 + -1e+300 milliseconds as a time")]


def test_an_otel_span_time_beyond_any_timestamp_is_a_rejected_row(tmp_path):
    """A span whose startTimeUnixNano has 30 digits (no int64): its row rejected naming the time, the file's
    other spans stored (the load used to stop with OverflowError)."""
    docs = [json.loads(x) for x in (DATA / "otel_genai_spans.jsonl").read_text().splitlines()]
    spans = [s for d in docs for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    expected = len(_load(DATA / "otel_genai_spans.jsonl", format="otel")[2])
    # spans[1] is the first model call ("chat gpt-4o-mini"; spans[0] is the HTTP span around it, not a row)
    assert spans[1]["name"] == "chat gpt-4o-mini"
    spans[1]["startTimeUnixNano"] = "9" * 30
    f = tmp_path / "spans.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in docs))
    n, rejects, stored = _load(f, format="otel")
    # one row fewer, rejected for its time; the file's other model calls stored
    assert len(rejects) == 1 and n == expected - 1
    assert rejects[0]["field"] == "ts"
    # the time as DuckDB spells it, cut at 60 characters with "..." (and the span's negative duration)
    assert rejects[0]["reason"] == ("ts: cannot read 1970-01-01 00:00:00 + 999999999999999999999999999 microsecon... "
                                    "as a time; total_ms: negative value -9.999999999982589e+23")


def test_a_vllm_run_lasting_1e300_s_is_refused_naming_the_field(tmp_path):
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    f = tmp_path / "result.json"
    f.write_text(json.dumps(dict(doc, duration=1e300)))
    with pytest.raises(InputError) as err:
        _load(f)
    assert err.value.field == "duration" and "the run lasts 1e+300 s and ended 2025-03-04 14:05:00" in str(err.value)


@pytest.mark.parametrize("python", [False, True])
def test_an_llmperf_latency_of_1e300_s_rejects_the_requests_after_it_instead_of_storing_them_at_the_start(
        tmp_path, python):
    """One client (no summary: concurrency 1), the first request lasting 1e300 s: every later request starts past
    any timestamp. The SQL reading wrapped their microseconds round and stored all 149 at the run's start; both
    readings now reject them naming the time (and the first for its total_ms, above the limit)."""
    recs = json.loads((DATA / "llmperf" / "individual" / "bedrock_13b.json").read_text())
    ok = next(i for i, r in enumerate(recs) if not r.get("error_code"))
    recs = [dict(recs[ok], end_to_end_latency_s=1e300), *recs[:ok], *recs[ok + 1:]]
    f = tmp_path / "run_individual_responses.json"
    f.write_text(json.dumps(recs))
    n, rejects, stored = _load(f, python, format="llmperf", start=START, model="llama-2-13b-chat")
    assert n == 0 and stored == [] and len(rejects) == len(recs)
    assert rejects[0] == {"row": 1, "field": "total_ms", "reason": "total_ms: 1e+303 is above the limit of 604,800,000"}
    assert {r["reason"] for r in rejects[1:]} == {"ts: cannot read 2025-01-01 00:00:00 + 1e+300 seconds as a time"}


def test_an_llmperf_summary_timestamp_past_any_year_is_refused_naming_the_field(tmp_path):
    (tmp_path / "individual").mkdir()
    (tmp_path / "summary").mkdir()
    for part in ("individual", "summary"):
        doc = json.loads((DATA / "llmperf" / part / "bedrock_13b.json").read_text())
        if part == "summary":
            doc["timestamp"] = 1e300
        (tmp_path / part / "bedrock_13b.json").write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        _load(tmp_path / "individual" / "bedrock_13b.json")
    assert err.value.field == "timestamp" and "timestamp of '1e+300'" in str(err.value)


@pytest.mark.parametrize("start", [1e300, float("nan"), -1e20])
def test_a_billing_bucket_time_past_any_year_is_refused_naming_row_and_field(tmp_path, start):
    """An OpenAI costs bucket whose start_time is no Unix time Python holds: the file refused naming the bucket and
    the field (it stopped with OverflowError, or ValueError for NaN), the billing lines left as they were."""
    from finops.ingest.billing import load_billing_file
    doc = json.loads((DATA / "providers" / "openai_costs.json").read_text())
    doc["data"][1]["start_time"] = start
    f = tmp_path / "costs.json"
    f.write_text(json.dumps(doc, allow_nan=True))
    con = store.connect(":memory:")
    try:
        with pytest.raises(InputError) as err:
            load_billing_file(con, f)
        assert (err.value.row, err.value.field) == (2, "start_time") and "is not a time" in str(err.value)
    finally:
        con.close()


@pytest.mark.parametrize("python", [False, True])
def test_token_counts_past_int64_are_rejected_naming_the_field(tmp_path, python):
    """A Mooncake line with input_length 2^63 and output_length 1e300 (Arrow's int64 stopped the load): the row
    rejected for both counts, above the store's limit (not "cannot read": whole numbers both), the good line stored;
    the same from a gzip file (the Python reading)."""
    text = ('{"timestamp": 5, "input_length": 9223372036854775808, "output_length": 1e300, "hash_ids": [1]}\n'
            '{"timestamp": 6, "input_length": 3, "output_length": 1, "hash_ids": [1]}\n')
    plain, packed = tmp_path / "t.jsonl", tmp_path / "t.jsonl.gz"
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    for f in (plain, packed):
        n, rejects, stored = _load(f, python, format="mooncake", model="kimi-k2", start=START)
        assert n == 1 and rejects == [{"row": 1, "field": "input_tokens", "reason": (
            "input_tokens: 9.223372036854776e+18 is above the limit of 1,000,000,000; "
            "output_tokens: 1e+300 is above the limit of 1,000,000,000")}]


@pytest.mark.parametrize("python", [False, True])
def test_llmperf_token_counts_past_int64_are_rejected_naming_the_field(tmp_path, python):
    recs = json.loads((DATA / "llmperf" / "individual" / "bedrock_13b.json").read_text())[:3]
    recs = [dict(r, error_code=0) for r in recs]
    recs[1]["number_input_tokens"] = 2 ** 62
    recs[2]["number_output_tokens"] = 1.7976931348623157e308
    f = tmp_path / "run_individual_responses.json"
    f.write_text(json.dumps(recs))
    n, rejects, _ = _load(f, python, format="llmperf", start=START, model="llama-2-13b-chat")
    assert n == 1 and rejects == [
        {"row": 2, "field": "input_tokens", "reason": "input_tokens: 4611686018427387904 is above the limit of 1,000,000,000"},
        {"row": 3, "field": "output_tokens", "reason": "output_tokens: 1.7976931348623157e+308 is above the limit of 1,000,000,000"}]


@pytest.mark.parametrize("python", [False, True])
@pytest.mark.parametrize(("field", "value", "row", "message"), [
    ("itls", ["0.01", 0.02], 1, "a request's inter-token latencies are a list of seconds, found a string in it"),
    ("itls", 0.5, 1, "a request's inter-token latencies are a list of seconds, found a number"),
    ("model_id", 1e-308, None, "the run's model_id is the model's name (a text), found a number"),
])
def test_a_vllm_result_with_a_value_of_the_wrong_type_is_refused_naming_it(tmp_path, python, field, value, row,
                                                                             message):
    """An inter-token latency that is text, a request's latencies that are no list, a model_id that is a number:
    the file refused naming row and field (numpy's mean or Arrow's text column stopped the load with a TypeError,
    or the model was stored as the number's text by one reading only)."""
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    if field == "itls":
        doc["itls"][0] = value
    else:
        doc[field] = value
    f = tmp_path / "result.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        _load(f, python, format="vllm-bench")
    assert (err.value.row, err.value.field) == (row, field) and message in str(err.value)
