"""The SQL readings of the Python-parsed formats store what the Python readings store.

Every variant is loaded twice into fresh stores: once as the loader reads it (the SQL reading where it
applies, which hands over to the Python reading on a line it would read another way) and once with the
SQL reading switched off. The stored rows (every column), the counts and the rejects (row, field, reason)
must be equal; each test also checks which reading ran, so a reading that silently fell back cannot pass
for the SQL one.
"""
import gzip
import json
import re
from datetime import datetime

import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import IngestOptions, ingest_path
from helpers import DATA


def _load(path, options):
    con = store.connect(":memory:")
    try:
        r = ingest_path(con, path, options)[0]
        cur = con.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        return (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped, r.rejects), rows
    finally:
        con.close()


def _counting(monkeypatch, module, name):
    """Wrap ``module.name`` to count its calls (the Python reading's row generator)."""
    calls = []
    real = getattr(module, name)

    def wrapped(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(module, name, wrapped)
    return calls


def both_ways(monkeypatch, path, options, module, switch, rows_fn, off=False, rows_module=None):
    """(the loader's result, the Python reading's result, whether the first ran the Python reading):
    ``module.switch`` returning ``off`` turns the SQL reading off; ``rows_module.rows_fn`` is the Python
    reading (counted)."""
    calls = _counting(monkeypatch, rows_module or module, rows_fn)
    fast = _load(path, options)
    used_python = bool(calls)
    with monkeypatch.context() as m:
        m.setattr(module, switch, lambda *a, **k: off)
        slow = _load(path, options)
    assert calls, "the Python reading never ran"
    return fast, slow, used_python


# ---------------------------------------------------------------- gateway-log

GATEWAY_PLAIN = "\n".join([
    "INFO:     Started server process [4242]",
    "",
    "2026-11-29 10:00:00,123 [ROUTE] target=slow len=63 route_ms=0.01 queue_ms=812.3 service_ms=4000.5 "
    "total_ms=4812.812 cost=8.0 inject=True",
    "2026-11-29T10:00:01.5 [ROUTE] target=fast len=7 route_ms=0.00 queue_ms=0.0 service_ms=12.0 total_ms=12.0",
    "  2026-11-29 10:00:02.1234567\t[ROUTE]  target=fast len=9 total_ms=1000 note=\"a\\b\" x=a=b  ",
    "2026-11-29 10:00:03 [ROUTE] target=slow len=3 queue_ms=abc total_ms=-5.5 cost=1.0",
    "2026-11-29 10:00:04,000 [ROUTE] target=fast len=2",                      # no total_ms: logged time kept
    "garbage [ROUTE] target=fast",                                          # not a [ROUTE] line: ts missing
    "2026-11-29 10:00:05,999 [ROUTE] target=fast len=2 total_ms=0.001 word",
    "2026-11-29 10:00:06,000 [ROUTE] target=fast len=2 total_ms=2000",
    "2026-11-29 10:00:06,000 [ROUTE] target=fast len=2 total_ms=2000",      # the same line again: numbered
    "INFO:     Shutting down",
]) + "\n"

# each turns the SQL reading over to the Python one (a line it would read another way)
GATEWAY_HANDED_OVER = {
    "key twice": "2026-11-29 10:00:00,000 [ROUTE] target=fast target=slow total_ms=1.0\n",
    "total_ms Python reads another way": "2026-11-29 10:00:00,000 [ROUTE] target=fast total_ms=1e3\n",
    "total_ms no number": "2026-11-29 10:00:00,000 [ROUTE] target=fast total_ms=abc\n",
    "time no date": "2026-13-45 10:00:00,000 [ROUTE] target=fast total_ms=1.0\n",
    "pair inside a word": "2026-11-29 10:00:00,000 [ROUTE] target=fast a-b=c total_ms=1.0\n",
    "reserved key": "2026-11-29 10:00:00,000 [ROUTE] target=fast logged_at=x total_ms=1.0\n",
    "tab between pairs": "2026-11-29 10:00:00,000 [ROUTE] target=fast\ttotal_ms=1.0\n",
}
# files the SQL reading leaves to the Python one from the start (bytes Python reads another way)
GATEWAY_NOT_PLAIN = {
    "carriage returns": b"2026-11-29 10:00:00,000 [ROUTE] target=fast total_ms=1.0\r\n"
                        b"2026-11-29 10:00:01,000 [ROUTE] target=slow total_ms=2.0\r\n",
    "UTF-8 beyond ASCII": "2026-11-29 10:00:00,000 [ROUTE] target=fast note=caf\u00e9 total_ms=1.0\n".encode(),
}


def _gateway(monkeypatch, path):
    from finops.ingest import formats
    return both_ways(monkeypatch, path, IngestOptions(format="gateway-log"), formats, "_plain_text", "_gateway_rows")


@pytest.mark.parametrize("name", ["seed_gateway_injected.log", "seed_gateway_verbatim.log"])
def test_gateway_fixtures_read_in_sql_store_what_python_stores(monkeypatch, name):
    fast, slow, used_python = _gateway(monkeypatch, DATA / name)
    assert not used_python
    assert fast == slow
    assert fast[0][1] == 8


@pytest.mark.parametrize("compress", [False, True])
def test_gateway_variants_read_in_sql_store_what_python_stores(monkeypatch, tmp_path, compress):
    path = tmp_path / ("plain.log.gz" if compress else "plain.log")
    path.write_bytes(gzip.compress(GATEWAY_PLAIN.encode()) if compress else GATEWAY_PLAIN.encode())
    fast, slow, used_python = _gateway(monkeypatch, path)
    assert not used_python
    assert fast == slow
    (read, ingested, rejected, duplicates, rejects), rows = fast
    assert (read, ingested, rejected, duplicates) == (9, 7, 2, 0)
    assert [(r["row"], r["field"]) for r in rejects] == [(6, "queue_ms"), (8, "ts")]
    by_line = {json.loads(r["attrs"] or "{}").get("logged_at"): r for r in rows}
    # arrival = the logged time less total_ms (10:00:00.123 - 4812.812 ms)
    first = by_line["2026-11-29 10:00:00,123"]
    assert str(first["ts"]) == "2026-11-29 09:59:55.310188"
    assert json.loads(first["attrs"]) == {"relative_cost": "8.0", "slow_inject": "True",
                                          "logged_at": "2026-11-29 10:00:00,123"}
    assert str(by_line["2026-11-29 10:00:04,000"]["ts"]) == "2026-11-29 10:00:04"
    assert json.loads(by_line["2026-11-29 10:00:02.1234567"]["attrs"])["note"] == '"a\\b"'


@pytest.mark.parametrize("name", sorted(GATEWAY_HANDED_OVER))
def test_gateway_lines_the_sql_reading_hands_to_python(monkeypatch, tmp_path, name):
    path = tmp_path / "odd.log"
    path.write_text(GATEWAY_PLAIN + GATEWAY_HANDED_OVER[name])
    fast, slow, used_python = _gateway(monkeypatch, path)
    assert used_python
    assert fast == slow


@pytest.mark.parametrize("name", sorted(GATEWAY_NOT_PLAIN))
def test_gateway_files_left_to_python(monkeypatch, tmp_path, name):
    from finops.ingest import formats
    from finops.ingest.base import probe
    path = tmp_path / "odd.log"
    path.write_bytes(GATEWAY_NOT_PLAIN[name])
    assert not formats._plain_text(probe(path))
    fast, slow, used_python = _gateway(monkeypatch, path)
    assert used_python and fast == slow


def _gateway_counting_general(monkeypatch, path):
    """_gateway, counting the general SQL reading's calls (the shape reading handed the file over)."""
    from finops.ingest import formats
    general = _counting(monkeypatch, formats, "_gateway_general_source")
    fast, slow, used_python = _gateway(monkeypatch, path)
    return fast, slow, used_python, bool(general)


# lines of one shape (the commonest of the probe): read by the shape reading, no list lambdas
GATEWAY_ONE_SHAPE = "\n".join([
    "INFO:     Started server process [4242]",
    "2026-11-29 10:00:00,123 [ROUTE] target=slow len=63 total_ms=4812.812 cost=8.0 x=a=b inject=True",
    "2026-11-29T10:00:01.5 [ROUTE] target=fast len=7 total_ms=12.0 cost=1.0 x=/p?q=1 inject=False",
    "2026-11-29 10:00:02.1234567 [ROUTE] target=fast len=9 total_ms=-5.5 cost=1.0 x=y inject=False",
    "2026-11-29 10:00:03 [ROUTE] target=slow len=abc total_ms=1000 cost=8.0 x={} inject=True",
    "garbage [ROUTE] target=fast",                                          # not a [ROUTE] line: ts missing
    "2026-11-29 10:00:06,000 [ROUTE] target=fast len=2 total_ms=2000 cost=1.0 x=1 inject=False",
    "2026-11-29 10:00:06,000 [ROUTE] target=fast len=2 total_ms=2000 cost=1.0 x=1 inject=False",  # again
    "",
]) + "\n"


@pytest.mark.parametrize("name", ["seed_gateway_injected.log", "seed_gateway_verbatim.log"])
def test_gateway_fixtures_read_by_shape_store_what_python_stores(monkeypatch, name):
    from finops.ingest import formats
    from finops.ingest.base import probe
    assert formats.gateway_shape(probe(DATA / name)) == [
        "target", "len", "route_ms", "queue_ms", "service_ms", "total_ms", "cost", "inject"]
    fast, slow, used_python, used_general = _gateway_counting_general(monkeypatch, DATA / name)
    assert not used_python and not used_general
    assert fast == slow and fast[0][1] == 8


@pytest.mark.parametrize("compress", [False, True])
def test_gateway_one_shape_reads_by_shape(monkeypatch, tmp_path, compress):
    path = tmp_path / ("shape.log.gz" if compress else "shape.log")
    path.write_bytes(gzip.compress(GATEWAY_ONE_SHAPE.encode()) if compress else GATEWAY_ONE_SHAPE.encode())
    from finops.ingest import loader
    staged, real = [], loader._stage
    monkeypatch.setattr(loader, "_stage", lambda con, source, *more: staged.append(real(con, source, *more)) or staged[-1])
    fast, slow, used_python, used_general = _gateway_counting_general(monkeypatch, path)
    assert not used_python and not used_general
    # read on every thread, every line staged and numbered by its place, the lines without [ROUTE] dropped
    assert staged[0] == ["VIEW _stage", "TABLE _staged"]
    assert fast == slow
    (read, ingested, rejected, duplicates, rejects), rows = fast
    assert (read, ingested, rejected, duplicates) == (7, 4, 3, 0)
    assert [(r["row"], r["field"]) for r in rejects] == [(4, "total_ms"), (5, "prompt_chars"), (6, "ts")]
    first = next(r for r in rows if r["prompt_chars"] == 63)
    assert str(first["ts"]) == "2026-11-29 09:59:55.310188"      # 10:00:00.123 less 4812.812 ms
    assert json.loads(first["attrs"]) == {"relative_cost": "8.0", "x": "a=b", "slow_inject": "True",
                                          "logged_at": "2026-11-29 10:00:00,123"}


@pytest.mark.parametrize("keys", ["target=fast len=2", "len=2 target=fast total_ms=1.5", "total_ms=1.5 note=n"])
def test_gateway_shapes_without_some_keys(monkeypatch, tmp_path, keys):
    path = tmp_path / "shape.log"
    path.write_text("".join(f"2026-11-29 10:00:0{i},500 [ROUTE] {keys}\n" for i in range(3)))
    fast, slow, used_python, used_general = _gateway_counting_general(monkeypatch, path)
    assert not used_python and not used_general
    assert fast == slow and fast[0][0] == 3


# a line the shape reading does not take: the general SQL reading takes the file (Python only where it must)
GATEWAY_OTHER_SHAPE = {
    "another key order": ("2026-11-29 10:00:09,000 [ROUTE] len=2 target=fast total_ms=2000 cost=1.0 x=1 "
                          "inject=False\n", False),
    "white space around": ("  2026-11-29T10:00:09.5\t[ROUTE] \t target=fast len=7 total_ms=12.0 cost=1.0 x=1 "
                           "inject=False  \n", False),
    "two spaces between pairs": ("2026-11-29 10:00:09,000 [ROUTE] target=fast  len=2 total_ms=2000 cost=1.0 x=1 "
                                 "inject=False\n", False),
    "a quote in a value": ('2026-11-29 10:00:09,000 [ROUTE] target=fast len=2 total_ms=2000 cost=1.0 x="1" '
                           'inject=False\n', False),
    "total_ms of 4 places": ("2026-11-29 10:00:09,000 [ROUTE] target=fast len=2 total_ms=1.0001 cost=1.0 x=1 "
                             "inject=False\n", True),
    "time no date": ("2026-13-45 10:00:00,000 [ROUTE] target=fast len=2 total_ms=1.0 cost=1.0 x=1 inject=False\n",
                     True),
}


@pytest.mark.parametrize("name", sorted(GATEWAY_OTHER_SHAPE))
def test_gateway_line_of_another_shape_hands_over(monkeypatch, tmp_path, name):
    line, python = GATEWAY_OTHER_SHAPE[name]
    path = tmp_path / "odd.log"
    path.write_text(GATEWAY_ONE_SHAPE + line)
    fast, slow, used_python, used_general = _gateway_counting_general(monkeypatch, path)
    assert used_general and used_python == python
    assert fast == slow


# ---------------------------------------------------------------- llmperf

LLMPERF = DATA / "llmperf" / "individual"


def _llmperf(monkeypatch, path, options):
    from finops.ingest import benchruns
    return both_ways(monkeypatch, path, options, benchruns, "read_llmperf_streamed", "read_llmperf", off=None)


def _runs(path, options):
    con = store.connect(":memory:")
    try:
        ingest_path(con, path, options)
        return con.execute("SELECT * EXCLUDE (loaded_at) FROM benchmark_runs").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("name", sorted(p.name for p in LLMPERF.glob("*.json")))
def test_llmperf_fixtures_read_in_sql_store_what_python_stores(monkeypatch, name):
    fast, slow, used_python = _llmperf(monkeypatch, LLMPERF / name, IngestOptions())
    assert not used_python
    assert fast == slow
    assert fast[0][1] == 150


def _llmperf_records():
    base = json.loads((LLMPERF / "fireworks_70b.json").read_text())[:6]
    base[1] = {**base[1], "error_code": 500, "error_msg": "  Internal Server Error: "}
    base[2] = {**base[2], "error_code": "timeout", "error_msg": None}
    base[3] = {k: v for k, v in base[3].items() if k not in ("ttft_s", "number_output_tokens")}
    base[4] = {**base[4], "number_input_tokens": 550.0, "number_output_tokens": 12.5, "ttft_s": 1}
    return base + [{}, {"error_code": 429, "error_msg": "x" * 300}]


# each makes a record the SQL reading does not read as Python does: the file is read by read_llmperf
LLMPERF_ODD = {
    "latency as text": {"end_to_end_latency_s": "4.5"},
    "count as a boolean": {"number_input_tokens": True},
    "error code a float": {"error_code": 500.0},
    "message a number": {"error_code": 1, "error_msg": 7},
    "a field of the run's attrs": {"provider": "mine"},
    "white space strip() takes": {"error_code": 1, "error_msg": "gone\u00a0"},
}


@pytest.mark.parametrize("compress", [False, True])
def test_llmperf_variants_read_in_sql_store_what_python_stores(monkeypatch, tmp_path, compress):
    path = tmp_path / ("run.json.gz" if compress else "run.json")
    text = json.dumps(_llmperf_records(), indent=2).encode()
    path.write_bytes(gzip.compress(text) if compress else text)
    options = IngestOptions(start=datetime(2025, 3, 4, 15), model="llama-x")
    fast, slow, used_python = _llmperf(monkeypatch, path, options)
    assert not used_python
    assert fast == slow
    rows = {r["request_id"].rsplit(":", 1)[1]: r for r in fast[1]}
    assert rows["1"]["error_type"] == "500:   Internal Server Error"
    assert rows["2"]["error_type"] == "timeout"
    assert rows["7"]["error_type"] == "429: " + "x" * 195
    assert (rows["4"]["input_tokens"], rows["4"]["output_tokens"], rows["4"]["ttft_ms"]) == (550, None, 1000.0)
    # the run's summary, computed from the same requests both ways
    with monkeypatch.context() as m:
        from finops.ingest import benchruns
        runs_fast = _runs(path, options)
        m.setattr(benchruns, "read_llmperf_streamed", lambda *a, **k: None)
        assert _runs(path, options) == runs_fast
    assert len(runs_fast) == 1


@pytest.mark.parametrize("name", sorted(LLMPERF_ODD))
def test_llmperf_records_the_sql_reading_leaves_to_python(monkeypatch, tmp_path, name):
    records = _llmperf_records()
    records[2] = {**records[2], **LLMPERF_ODD[name]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(records))
    fast, slow, used_python = _llmperf(monkeypatch, path, IngestOptions(start=datetime(2025, 3, 4), model="m"))
    assert used_python and fast == slow


# a run field's name as the record writes it: (the text put into record 2, whether Python reads the file)
LLMPERF_RUN_FIELD_TEXT = {
    "a key written with an escape": ('"run\\u005fid": "mine", ', True),
    "a key after white space": ('\n  "offset_s" : 1, ', True),
    "the name quoted inside a value": ('"note": "the \\"run_id\\" and a \\\\ backslash", ', False),
    "the name as a value": ('"note": "provider", ', True),
}


@pytest.mark.parametrize("name", sorted(LLMPERF_RUN_FIELD_TEXT))
def test_llmperf_run_fields_found_however_the_record_writes_them(monkeypatch, tmp_path, name):
    text, python = LLMPERF_RUN_FIELD_TEXT[name]
    records = [json.dumps(r) for r in _llmperf_records()]
    records[2] = "{" + text + records[2][1:]
    path = tmp_path / "run.json"
    path.write_text("[" + ",\n".join(records) + "]")
    fast, slow, used_python = _llmperf(monkeypatch, path, IngestOptions(start=datetime(2025, 3, 4), model="m"))
    assert used_python == python and fast == slow


@pytest.mark.parametrize("doc", [[], [1, 2], {"results_ttft_s_mean": 1.0, "num_concurrent_requests": 1}])
def test_llmperf_files_that_are_no_records_get_the_python_readings_message(monkeypatch, tmp_path, doc):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    options = IngestOptions(format="llmperf", start=datetime(2025, 3, 4), model="m")
    with pytest.raises(InputError) as fast:
        ingest_path(store.connect(":memory:"), path, options)
    from finops.ingest import benchruns
    monkeypatch.setattr(benchruns, "read_llmperf_streamed", lambda *a, **k: None)
    with pytest.raises(InputError) as slow:
        ingest_path(store.connect(":memory:"), path, options)
    assert str(fast.value) == str(slow.value)


def test_llmperf_without_summary_or_start_is_refused_the_same_way(monkeypatch):
    lone = DATA / "llmperf_individual_only" / "perplexity_70b.json"
    with pytest.raises(InputError, match="carry no timestamps"):
        ingest_path(store.connect(":memory:"), lone, IngestOptions())
    fast, slow, used_python = _llmperf(monkeypatch, lone, IngestOptions(start=datetime(2025, 1, 1)))
    assert not used_python and fast == slow


def test_llmperf_tenant_field_keeps_the_python_reading(monkeypatch):
    fast, slow, used_python = _llmperf(monkeypatch, LLMPERF / "lepton_7b.json", IngestOptions(tenant_field="provider"))
    assert used_python and fast == slow


# ---------------------------------------------------------------- vllm-bench

def _vllm(monkeypatch, path, options):
    from finops.ingest import benchruns
    return both_ways(monkeypatch, path, options, benchruns, "read_vllm_streamed", "read_vllm_bench_runs", off=None)


def _same(fast, slow):
    """Equal results, attrs compared as JSON (Python writes non-ASCII text escaped, DuckDB as UTF-8)."""
    assert fast[0] == slow[0]
    assert len(fast[1]) == len(slow[1])
    for a, b in zip(fast[1], slow[1], strict=True):
        assert {**a, "attrs": json.loads(a["attrs"])} == {**b, "attrs": json.loads(b["attrs"])}


def test_vllm_fixture_read_streamed_stores_what_python_stores(monkeypatch):
    fast, slow, used_python = _vllm(monkeypatch, DATA / "vllm_bench_serve_detailed.json", IngestOptions())
    assert not used_python
    _same(fast, slow)
    assert fast[0][1] == 10


def _vllm_doc(**change):
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    doc["errors"][3] = "Traceback (most recent call last):\n  ...\naiohttp.ClientResponseError: 500, message='x'\n"
    doc["generated_texts"][1] = "caf\u00e9 \u00fcber"
    doc["itls"][2] = []
    for k, v in change.items():
        if v is None:
            doc.pop(k)
        else:
            doc[k] = v
    return doc


VLLM_VARIANTS = {
    "as written": {},
    "no errors (old vLLM)": {"errors": None},
    "no generated texts, no queue times": {"generated_texts": None, "queue_times": None},
    "no output lens, no itls": {"output_lens": None, "itls": None},
}


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("name", sorted(VLLM_VARIANTS))
def test_vllm_variants_read_streamed_store_what_python_stores(monkeypatch, tmp_path, name, compress):
    path = tmp_path / ("run.json.gz" if compress else "run.json")
    text = json.dumps(_vllm_doc(**VLLM_VARIANTS[name]), indent=2).encode()
    path.write_bytes(gzip.compress(text) if compress else text)
    fast, slow, used_python = _vllm(monkeypatch, path, IngestOptions())
    assert not used_python
    _same(fast, slow)
    from finops.ingest import benchruns
    runs_fast = _runs(path, IngestOptions())
    monkeypatch.setattr(benchruns, "read_vllm_streamed", lambda *a, **k: None)
    assert _runs(path, IngestOptions()) == runs_fast


def test_vllm_error_text_is_the_tracebacks_last_line(monkeypatch, tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_vllm_doc()))
    fast, _, _ = _vllm(monkeypatch, path, IngestOptions(start=datetime(2025, 3, 4, 15)))
    errors = {r["request_id"].rsplit(":", 1)[1]: r["error_type"] for r in fast[1] if r["status"] == "error"}
    assert errors["3"] == "aiohttp.ClientResponseError: 500, message='x'"


# each hands the file to read_vllm_bench_runs (values json.load reads another way, or a file it refuses)
VLLM_TO_PYTHON = {
    "a start time written as an integer": lambda d: d["start_times"].__setitem__(0, 81234),
    "a null error": lambda d: d["errors"].__setitem__(0, None),
    "a count as a boolean": lambda d: d["input_lens"].__setitem__(0, True),
    "a series of another length": lambda d: d["ttfts"].pop(),
    "no start times": lambda d: d.pop("start_times"),
    "no model": lambda d: d.pop("model_id"),
}


@pytest.mark.parametrize("name", sorted(VLLM_TO_PYTHON))
def test_vllm_documents_left_to_python(monkeypatch, tmp_path, name):
    doc = _vllm_doc()
    VLLM_TO_PYTHON[name](doc)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    from finops.ingest import benchruns
    assert benchruns.read_vllm_streamed(store.connect(":memory:"), path) is None
    options = IngestOptions(format="vllm-bench")
    try:
        fast = _load(path, options)
    except InputError as exc:
        monkeypatch.setattr(benchruns, "read_vllm_streamed", lambda *a, **k: None)
        with pytest.raises(InputError) as slow:
            _load(path, options)
        assert str(exc) == str(slow.value)
        return
    monkeypatch.setattr(benchruns, "read_vllm_streamed", lambda *a, **k: None)
    _same(fast, _load(path, options))


def test_vllm_append_result_file_keeps_the_line_reading(monkeypatch, tmp_path):
    path = tmp_path / "runs.json"
    doc = _vllm_doc()
    path.write_text(json.dumps(doc) + "\n" + json.dumps({**doc, "date": "20250304-150500"}))
    fast, slow, used_python = _vllm(monkeypatch, path, IngestOptions())
    assert used_python
    _same(fast, slow)
    assert fast[0][1] == 20


# ---------------------------------------------------------------- mooncake

MOONCAKE = ["mooncake_conversation_head300.jsonl", "mooncake_conversation_rows1337_1346.jsonl"]
MOONCAKE_OPTIONS = IngestOptions(format="mooncake", model="kimi", start=datetime(2025, 1, 1))


def _mooncake(monkeypatch, path, options=MOONCAKE_OPTIONS):
    from finops.ingest import ecosystem, formats
    calls = _counting(monkeypatch, ecosystem, "_python_source")
    fast = _load(path, options)
    used_python = bool(calls)
    with monkeypatch.context() as m:
        m.setattr(formats, "_plain_text", lambda *a, **k: False)
        slow = _load(path, options)
    assert len(calls) > int(used_python)
    return fast, slow, used_python


@pytest.mark.parametrize("name", MOONCAKE)
def test_mooncake_fixtures_read_in_sql_store_what_python_stores(monkeypatch, name):
    fast, slow, used_python = _mooncake(monkeypatch, DATA / name)
    assert not used_python
    _same(fast, slow)


MOONCAKE_LINES = [
    '{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}',
    "",
    '{"timestamp": 5, "input_length": 1500, "output_length": 12, "hash_ids": [1, 2, 3]}',
    '  {"timestamp": 7, "input_length": 700, "output_length": 3, "hash_ids": [1, 9, 2]}  ',
    '{"timestamp": 9, "input_length": 700, "output_length": 3, "hash_ids": [1, 2], "session": "s-1"}',
    '{"timestamp": 11, "output_length": 3, "hash_ids": [7]}',                  # no length: its blocks not seen
    '{"timestamp": 12, "input_length": 600.0, "output_length": 2.5, "hash_ids": [7, 7]}',
    '{"timestamp": 13, "input_length": 10, "output_length": 1, "hash_ids": []}',
    '{"timestamp": 14, "input_length": 10, "output_length": 1, "hash_ids": "none"}',
    '{"input_length": 10, "output_length": 1}',                                # no time: rejected
    '{"timestamp": 9, "input_length": 700, "output_length": 3, "hash_ids": [1, 2], "session": "s-1"}',
]


@pytest.mark.parametrize("compress", [False, True])
def test_mooncake_variants_read_in_sql_store_what_python_stores(monkeypatch, tmp_path, compress):
    path = tmp_path / ("t.jsonl.gz" if compress else "t.jsonl")
    text = ("\n".join(MOONCAKE_LINES) + "\n").encode()
    path.write_bytes(gzip.compress(text) if compress else text)
    fast, slow, used_python = _mooncake(monkeypatch, path)
    assert not used_python
    _same(fast, slow)
    (read, ingested, rejected, _, rejects), rows = fast
    assert (read, rejected) == (10, 1) and [r["row"] for r in rejects] == [10]
    cached = {json.loads(r["attrs"])["timestamp_ms"]: (r["cached_input_tokens"], json.loads(r["attrs"])["prefix_blocks_reused"])
              for r in rows}
    # prefix_cached_tokens' doctest, and the rows after it
    assert [cached[t] for t in (0, 5, 7, 11, 12, 13, 14)] == [(0, 0), (1024, 2), (512, 1), (None, None), (0, 0),
                                                              (0, 0), (None, None)]
    assert cached[9] == (700, 2)


def test_mooncake_white_space_around_lines_read_in_sql(monkeypatch, tmp_path):
    """The SQL reading trims only a line that starts or ends with a space or a tab; a blank line of white space
    is skipped; the content hash is of the trimmed line, as Python's strip() gives it."""
    path = tmp_path / "ws.jsonl"
    path.write_text("\n".join([
        '\t{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}',
        ' \t ',
        '{"timestamp": 5, "input_length": 1500, "output_length": 12, "hash_ids": [1, 2, 3]}\t',
        '{"timestamp": 7, "input_length": 700, "output_length": 3, "hash_ids": [1, 9, 2]} ',
        '{"timestamp": 5, "input_length": 1500, "output_length": 12, "hash_ids": [1, 2, 3]}',   # the same, trimmed
        '\t',
    ]) + "\n")
    fast, slow, used_python = _mooncake(monkeypatch, path)
    assert not used_python
    _same(fast, slow)
    (read, ingested, rejected, duplicates, _), rows = fast
    assert (read, ingested, rejected, duplicates) == (4, 4, 0, 0)
    by_ts = {json.loads(r["attrs"])["timestamp_ms"]: r for r in rows}
    assert [by_ts[t]["cached_input_tokens"] for t in (0, 7)] == [0, 512]
    # lines 3 and 5 are one record once trimmed: one content hash, numbered by occurrence (1024, then 1500)
    fives = sorted((r["request_id"], r["cached_input_tokens"]) for r in rows if r["request_id"].split("-")[0]
                   == by_ts[5]["request_id"].split("-")[0])
    assert [c for _, c in fives] == [1024, 1500] and [i[-2:] for i, _ in fives] == ["-1", "-2"]


MOONCAKE_ODD = {
    "a float time": '{"timestamp": 1.5, "input_length": 10, "output_length": 1, "hash_ids": [1]}',
    "a text length": '{"timestamp": 1, "input_length": "10", "output_length": 1, "hash_ids": [1]}',
    "float hashes": '{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1.5]}',
    "an attrs field": '{"timestamp": 1, "input_length": 10, "output_length": 1, "timestamp_ms": 3}',
}


@pytest.mark.parametrize("name", sorted(MOONCAKE_ODD))
def test_mooncake_records_the_sql_reading_hands_to_python(monkeypatch, tmp_path, name):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(MOONCAKE_LINES[:5] + [MOONCAKE_ODD[name]]) + "\n")
    fast, slow, used_python = _mooncake(monkeypatch, path)
    assert used_python
    _same(fast, slow)


# ---------------------------------------------------------------- an id that is only spaces (or empty)

BLANK_ID_START = datetime(2025, 1, 1)
# adapter: (fixture, the id's path in a record (a CSV: its column), the module and function of its SQL reading,
# options, the two records blanked: ones that load); each SQL reading hands a record with a blank id to the Python one, which hashes it as it hashes a
# record without an id
BLANK_IDS = {
    "openrouter": ("providers/openrouter_generations.jsonl", ("data", "id"), "providers", "openrouter_fast_source", {}, (1, 2)),
    "openai-batch": ("providers/openai_batch_output.jsonl", ("id",), "providers", "openai_batch_fast_source", {}, (0, 1)),
    "anthropic-batch": ("providers/anthropic_batch_results.jsonl", ("result", "message", "id"), "providers",
                        "anthropic_batch_fast_source", {"start": BLANK_ID_START}, (0, 1)),
    "langfuse-jsonl": ("langfuse/ui_export_observations.jsonl", ("id",), "ecosystem", "langfuse_fast_source", {}, (1, 2)),
    "langfuse-csv": ("langfuse/ui_export_observations.csv", ("id",), "ecosystem", "langfuse_fast_source", {}, (1, 2)),
    "litellm-csv": ("litellm/spendlogs_v1_74.csv", ("request_id",), "ecosystem", "litellm_fast_source", {}, (1, 2)),
    "litellm-json": ("litellm/spend_logs.json", ("request_id",), "ecosystem", "litellm_fast_source", {}, (1, 2)),
}


def _blank_ids(src, tmp_path, path, blanks, at):
    """The fixture with the id of the records at positions ``at`` set to ``blanks`` (a CSV: cells; JSON: values)."""
    import csv
    import io
    out = tmp_path / f"blank{src.suffix}"
    if src.suffix == ".csv":
        rows = list(csv.DictReader(io.StringIO(src.read_text())))
        for i, b in zip(at, blanks, strict=True):
            rows[i][path[0]] = b
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        out.write_text(buf.getvalue())
        return out
    doc = ([json.loads(line) for line in src.read_text().splitlines() if line.strip()] if src.suffix == ".jsonl"
           else json.loads(src.read_text()))
    for i, b in zip(at, blanks, strict=True):
        rec = doc[i]
        for k in path[:-1]:
            rec = rec[k]
        rec[path[-1]] = b
    out.write_text("".join(json.dumps(r) + "\n" for r in doc) if src.suffix == ".jsonl" else json.dumps(doc))
    return out


@pytest.mark.parametrize("blanks", [("  ", ""), ("   ", " ")])
@pytest.mark.parametrize("name", sorted(BLANK_IDS))
def test_a_blank_id_is_hashed_as_a_missing_one_by_the_sql_and_python_readings(monkeypatch, tmp_path, name, blanks):
    from finops.ingest import ecosystem, providers
    fixture, path, module, switch, extra, at = BLANK_IDS[name]
    module = {"ecosystem": ecosystem, "providers": providers}[module]
    options = IngestOptions(format=name.split("-csv")[0].split("-json")[0], **extra)
    as_committed = _load(DATA / fixture, options)
    f = _blank_ids(DATA / fixture, tmp_path, path, blanks, at)
    fast = _load(f, options)
    with monkeypatch.context() as m:
        m.setattr(module, switch, lambda *a, **k: None)
        slow = _load(f, options)
    assert fast == slow
    # every record is read as before, the two blanked ones under a content hash instead of their id
    assert fast[0][:4] == as_committed[0][:4]
    before = {r["request_id"] for r in as_committed[1]}
    after = {r["request_id"] for r in fast[1]}
    hashed = sorted(after - before)
    assert len(hashed) == 2 and all(re.fullmatch(r"[0-9a-f]{32}-1", i) for i in hashed)
    assert len(before - after) == 2
