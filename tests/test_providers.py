"""finops.ingest.providers: OpenAI Batch output, Anthropic Message Batches results, Helicone, OpenRouter.

Every expected number is computed here from the raw file (tests/data/providers/, see its README entry),
not read back from the adapter.
"""
from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import IngestOptions, detect, ingest_path, probe
from helpers import DATA, read_jsonl

P = DATA / "providers"
START = datetime(2025, 3, 4, 15, 0)


@pytest.fixture
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def rows(con) -> dict:
    df = con.execute("SELECT * FROM requests").df()
    return {r["request_id"]: r for r in df.to_dict("records")}


def na(v):
    return None if v is None or v != v else v


@pytest.mark.parametrize("name, fmt", [
    ("openai_batch_output.jsonl", "openai-batch"), ("anthropic_batch_results.jsonl", "anthropic-batch"),
    ("helicone_requests.json", "helicone"), ("openrouter_generations.jsonl", "openrouter")])
def test_detection_picks_the_format(name, fmt):
    assert detect(probe(P / name)).name == fmt


def test_other_formats_files_are_not_taken():
    for f in ("litellm/spend_logs.json", "langfuse_observations.json", "otel_genai_spans.jsonl",
              "mooncake_conversation_head300.jsonl", "litellm/spendlogs_v1_74.csv"):
        assert detect(probe(DATA / f)).name not in ("openai-batch", "anthropic-batch", "helicone", "openrouter")


# ---------------------------------------------------------------- openai-batch

def test_openai_batch_rows_equal_the_file(con):
    raw = read_jsonl(P / "openai_batch_output.jsonl")
    (res,) = ingest_path(con, P / "openai_batch_output.jsonl", IngestOptions(model="gpt-4o-mini-2024-07-18"))
    assert (res.format, res.rows_read, res.rows_rejected) == ("openai-batch", len(raw), 0)
    got = rows(con)
    timed = [r for r in raw if (r["response"] or {}).get("body", {}).get("created")]
    for r in raw:
        row = got[r["id"]]
        assert (row["provider"], row["service_tier"]) == ("openai", "batch")
        body = (r["response"] or {}).get("body") or {}
        if "usage" in body and "error" not in body:
            u = body["usage"]
            assert row["status"] == "ok" and row["model"] == body["model"]
            assert row["input_tokens"] == u["prompt_tokens"]
            assert row["output_tokens"] == u.get("completion_tokens", 0)
            assert na(row["cached_input_tokens"]) == (u.get("prompt_tokens_details") or {}).get("cached_tokens")
            assert na(row["reasoning_tokens"]) == (u.get("completion_tokens_details") or {}).get("reasoning_tokens")
        else:
            assert row["status"] == "error"
            assert row["error_type"] == (body.get("error") or r["error"])["code"]
            assert row["model"] == "gpt-4o-mini-2024-07-18"        # --model: the line names none
        if body.get("created"):
            assert row["ts"] == datetime.fromtimestamp(body["created"], UTC).replace(tzinfo=None)
        else:
            # no time of its own: the nearest timed line before it
            before = [t for t in timed if raw.index(t) < raw.index(r)]
            t = (before[-1] if before else timed[0])["response"]["body"]["created"]
            assert row["ts"] == datetime.fromtimestamp(t, UTC).replace(tzinfo=None)
            assert json.loads(row["attrs"])["ts_from"]
        assert na(row["cost_usd"]) is None
    # loading twice adds nothing
    (again,) = ingest_path(con, P / "openai_batch_output.jsonl", IngestOptions(model="gpt-4o-mini-2024-07-18"))
    assert again.rows_ingested == 0 and store.row_count(con) == len(raw)


def test_openai_batch_failures_without_model_are_rejected_by_name(con):
    (res,) = ingest_path(con, P / "openai_batch_output.jsonl")
    failed = [i for i, r in enumerate(read_jsonl(P / "openai_batch_output.jsonl"), start=1)
              if r["error"] or "error" in r["response"]["body"]]
    assert [r["row"] for r in res.rejects] == failed
    assert all("model: missing" in r["reason"] for r in res.rejects)


def test_openai_batch_input_file_is_refused_with_advice(con, tmp_path):
    f = tmp_path / "batch_input.jsonl"
    f.write_text(json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                             "body": {"model": "gpt-4o-mini", "messages": []}}) + "\n")
    with pytest.raises(InputError, match="Batch input file.*output file"):
        ingest_path(con, f, IngestOptions(format="openai-batch"))


def test_openai_batch_bad_value_is_named_by_row_and_field(con, tmp_path):
    lines = (P / "openai_batch_output.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["response"]["body"]["usage"]["prompt_tokens"] = "many"
    lines[1] = json.dumps(bad)
    f = tmp_path / "out.jsonl"
    f.write_text("\n".join(lines[:2]) + "\n" + "{not json\n")
    with pytest.raises(InputError, match=r"row 3.*not valid JSON"):
        ingest_path(con, f)
    assert store.row_count(con) == 0
    f.write_text("\n".join(lines[:2]) + "\n")
    (res,) = ingest_path(con, f)
    assert res.rejects == [{"row": 2, "field": "input_tokens", "reason": "input_tokens: cannot read many as a whole number"}]


# ---------------------------------------------------------------- anthropic-batch

def test_anthropic_batch_rows_equal_the_file(con):
    raw = read_jsonl(P / "anthropic_batch_results.jsonl")
    (res,) = ingest_path(con, P / "anthropic_batch_results.jsonl",
                         IngestOptions(start=START, model="claude-sonnet-4-20250514"))
    assert (res.format, res.rows_read, res.rows_ingested) == ("anthropic-batch", len(raw), len(raw))
    df = con.execute("SELECT * FROM requests").df()
    by_custom = {json.loads(r["attrs"])["custom_id"]: r for r in df.to_dict("records")}
    expected_status = {"succeeded": "ok", "errored": "error", "canceled": "rejected", "expired": "timeout"}
    for r in raw:
        row = by_custom[r["custom_id"]]
        assert row["ts"] == START and row["provider"] == "anthropic" and row["service_tier"] == "batch"
        assert row["status"] == expected_status[r["result"]["type"]]
        if r["result"]["type"] != "succeeded":
            assert na(row["input_tokens"]) is None
            continue
        m = r["result"]["message"]
        u = m["usage"]
        assert row["request_id"] == m["id"] and row["model"] == m["model"]
        assert row["input_tokens"] == (u["input_tokens"] + u["cache_read_input_tokens"]
                                       + u["cache_creation_input_tokens"])
        assert row["cached_input_tokens"] == u["cache_read_input_tokens"]
        assert row["cache_write_tokens"] == u["cache_creation"]["ephemeral_5m_input_tokens"]
        assert row["cache_write_1h_tokens"] == u["cache_creation"]["ephemeral_1h_input_tokens"]
        assert row["output_tokens"] == u["output_tokens"]
    assert by_custom["doc-3"]["error_type"] == "invalid_request_error"
    (again,) = ingest_path(con, P / "anthropic_batch_results.jsonl",
                           IngestOptions(start=START, model="claude-sonnet-4-20250514"))
    assert again.rows_ingested == 0 and store.row_count(con) == len(raw)


def test_anthropic_batch_needs_start(con):
    with pytest.raises(InputError, match="anthropic_batch_results.jsonl.*--start"):
        ingest_path(con, P / "anthropic_batch_results.jsonl")


def test_anthropic_batch_unknown_result_type_is_named(con, tmp_path):
    f = tmp_path / "results.jsonl"
    f.write_text(json.dumps({"custom_id": "x", "result": {"type": "succeded"}}) + "\n")
    with pytest.raises(InputError, match="row 1, field result.type: result.type 'succeded'"):
        ingest_path(con, f, IngestOptions(start=START))


# ---------------------------------------------------------------- helicone

def test_helicone_rows_equal_the_file(con):
    raw = json.loads((P / "helicone_requests.json").read_text())["data"]
    (res,) = ingest_path(con, P / "helicone_requests.json")
    assert (res.format, res.rows_ingested, res.rows_rejected) == ("helicone", len(raw), 0)
    got = rows(con)
    for r in raw:
        row = got[r["request_id"]]
        ts = datetime.fromisoformat(r["request_created_at"].replace("Z", "+00:00")).replace(tzinfo=None)
        assert row["ts"] == ts and row["model"] == r["model"] and row["provider"] == r["provider"].lower()
        assert row["tenant"] == (r["request_user_id"] or "default")
        assert row["total_ms"] == r["delay_ms"] and na(row["ttft_ms"]) == r["time_to_first_token"]
        assert row["status"] == ("ok" if r["response_status"] == 200 else "error")
        if r["prompt_tokens"] is None:
            assert na(row["input_tokens"]) is None
        else:
            # Helicone's prompt_tokens leave the cache out for every provider (see the adapter's docstring)
            extra = r["prompt_cache_read_tokens"] + r["prompt_cache_write_tokens"]
            assert row["input_tokens"] == r["prompt_tokens"] + extra
            assert row["cached_input_tokens"] == r["prompt_cache_read_tokens"]
            assert row["cache_write_tokens"] == r["prompt_cache_write_tokens"]
            assert row["output_tokens"] == r["completion_tokens"]
        attrs = json.loads(row["attrs"])
        if r["costUSD"] == 0 and (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0) > 0:
            assert na(row["cost_usd"]) is None and attrs["source_cost_usd"] == 0.0     # unpriced by Helicone
        else:
            assert row["cost_usd"] == pytest.approx(r["costUSD"])
    (again,) = ingest_path(con, P / "helicone_requests.json")
    assert again.rows_ingested == 0


def test_helicone_openai_row_counts_its_cached_tokens_once(con):
    # the OpenAI call of row 1 had 1,500 prompt tokens, 1,024 of them cached: Helicone wrote 476 + 1,024
    ingest_path(con, P / "helicone_requests.json")
    row = rows(con)["5f1c9a52-0001-4a6e-9d1e-000000000001"]
    assert (row["input_tokens"], row["cached_input_tokens"], row["output_tokens"]) == (1500, 1024, 200)


def test_helicone_tenant_from_a_property(con):
    ingest_path(con, P / "helicone_requests.json", IngestOptions(tenant_field="team"))
    raw = json.loads((P / "helicone_requests.json").read_text())["data"]
    got = rows(con)
    assert {r["request_id"]: got[r["request_id"]]["tenant"] for r in raw} == {
        r["request_id"]: r["properties"]["team"] for r in raw}


# ---------------------------------------------------------------- openrouter

def test_openrouter_rows_equal_the_file(con):
    raw = [line["data"] for line in read_jsonl(P / "openrouter_generations.jsonl")]
    (res,) = ingest_path(con, P / "openrouter_generations.jsonl")
    assert (res.format, res.rows_ingested, res.rows_rejected) == ("openrouter", len(raw), 0)
    got = rows(con)
    for g in raw:
        row = got[g["id"]]
        ts = datetime.fromisoformat(g["created_at"].replace("Z", "+00:00")).replace(tzinfo=None)
        assert row["ts"] == ts and row["model"] == g["model"] and row["provider"] == g["provider_name"]
        assert row["tenant"] == (g["external_user"] or "default")
        assert row["input_tokens"] == g["native_tokens_prompt"]
        assert row["output_tokens"] == g["native_tokens_completion"]
        assert na(row["cached_input_tokens"]) == g["native_tokens_cached"]
        assert na(row["reasoning_tokens"]) == g["native_tokens_reasoning"]
        assert row["total_ms"] == g["latency"]
        assert row["status"] == ("error" if g["cancelled"] else "ok")
        attrs = json.loads(row["attrs"])
        assert attrs["generation_time"] == g["generation_time"] and attrs["tokens_prompt"] == g["tokens_prompt"]
        if g["total_cost"] == 0:
            assert na(row["cost_usd"]) is None and attrs["source_cost_usd"] == 0.0
        else:
            assert row["cost_usd"] == pytest.approx(g["total_cost"])
    (again,) = ingest_path(con, P / "openrouter_generations.jsonl")
    assert again.rows_ingested == 0


def test_openrouter_json_array_of_data_loads_the_same(con, tmp_path):
    raw = [line["data"] for line in read_jsonl(P / "openrouter_generations.jsonl")]
    f = tmp_path / "generations.json"
    f.write_text(json.dumps(raw, indent=1))
    (res,) = ingest_path(con, f)
    assert res.format == "openrouter" and res.rows_ingested == len(raw)


def test_openrouter_bad_latency_is_named(con, tmp_path):
    line = read_jsonl(P / "openrouter_generations.jsonl")[0]
    line["data"]["latency"] = "slow"
    f = tmp_path / "gen.jsonl"
    f.write_text(json.dumps(line) + "\n")
    (res,) = ingest_path(con, f)
    assert res.rejects == [{"row": 1, "field": "total_ms", "reason": "total_ms: cannot read slow as a number"}]


# ---------------------------------------------------------------- openai-batch: the typed fast path

def _stored(path, options, monkeypatch=None, python_only=False, fast="openai_batch_fast_source") -> list[dict]:
    from finops.ingest import providers
    c = store.connect(":memory:")
    try:
        if python_only:
            monkeypatch.setattr(providers, fast, lambda p, o, **k: None)
        ingest_path(c, path, options)
        if python_only:
            monkeypatch.undo()
        df = c.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id, ts").df()
        return json.loads(df.to_json(orient="records", date_format="iso"))
    finally:
        c.close()


def _variants(tmp_path) -> dict[str, object]:
    lines = (P / "openai_batch_output.jsonl").read_text().splitlines()
    out = {"as committed": P / "openai_batch_output.jsonl"}
    odd = {
        # a blank line: the Python path numbers rows by line
        "blank line": "\n".join(lines[:2] + [""] + lines[2:]) + "\n",
        # a line with no id: the Python path hashes it
        "no id": "\n".join(lines + [json.dumps({**json.loads(lines[0]), "id": None})]) + "\n",
        # an empty error object is no failure
        "empty error": "\n".join(lines + [json.dumps({**json.loads(lines[1]), "id": "batch_req_e", "error": {}})]) + "\n",
        # a count that is not whole: passed to the loader as text, which rejects it by name
        "fractional count": "\n".join(lines + [lines[0].replace('"prompt_tokens": 1200', '"prompt_tokens": 1200.5')
                                               .replace("batch_req_a1", "batch_req_f")]) + "\n",
    }
    for name, text in odd.items():
        f = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        f.write_text(text)
        out[name] = f
    return out


def test_openai_batch_fast_path_reads_the_committed_file_in_sql():
    import duckdb

    from finops.ingest import providers
    opts = IngestOptions(model="gpt-4o-mini-2024-07-18")
    src = providers.openai_batch_fast_source(probe(P / "openai_batch_output.jsonl"), opts)
    assert src is not None
    # the file has a failed request's line, which carries no time: the reading without the neighbouring lines'
    # times refuses it, and the one with them reads every line in SQL (not the Python path)
    with pytest.raises(duckdb.Error, match="a line without a time of its own"):
        duckdb.connect().execute(src.sql, src.params).fetchall()
    again = src.fallback()
    got = duckdb.connect().execute(again.sql, again.params).fetchall()
    assert len(got) == len(read_jsonl(P / "openai_batch_output.jsonl"))     # no line sent it to the Python path


def test_an_openai_batch_file_whose_lines_all_have_their_time_is_read_on_every_thread(tmp_path, monkeypatch):
    """Without a line that takes its neighbours' time, the reading needs no window over the lines in order: the
    unnumbered reading (every thread, numbered once staged) stores what the window's reading and the Python path
    store, row numbers included (a bad row's number is its line)."""
    import duckdb

    from finops.ingest import loader, providers
    recs = [r for r in read_jsonl(P / "openai_batch_output.jsonl") if r.get("response") and r["response"].get("body")
            and r["response"]["body"].get("created")]
    assert len(recs) >= 2
    f = tmp_path / "timed.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    opts = IngestOptions(model="gpt-4o-mini-2024-07-18")
    src = providers.openai_batch_fast_source(probe(f), opts)
    # the readings differ only in the window and the numbering (each built from OPENAI_BATCH_FAST_SQL's text)
    assert "OVER (" in providers.OPENAI_BATCH_FAST_SQL and "OVER (" not in src.sql
    assert "ORDINALITY" in src.sql and "ORDINALITY" not in src.unnumbered_sql
    con = duckdb.connect()
    own = con.execute(f"SELECT * EXCLUDE (_row) FROM ({src.unnumbered_sql})", src.params).fetchall()
    assert sorted(own, key=str) == sorted(con.execute(f"SELECT * EXCLUDE (_row) FROM ({src.fallback().sql})",
                                                      src.params).fetchall(), key=str)
    attempts = []
    real = loader._stage

    def staged(con, source, *more):
        attempts.append(source.sql)
        return real(con, source, *more)

    monkeypatch.setattr(loader, "_stage", staged)
    fast = _stored(f, opts)
    assert attempts == [providers.OPENAI_BATCH_OWN_TIMES_SQL]       # read once, without the window
    monkeypatch.undo()
    assert fast == _stored(f, opts, monkeypatch, python_only=True)


@pytest.mark.parametrize("code", [-(2 ** 63), 2 ** 60, 503])
def test_a_failed_lines_status_code_past_2_53_is_spelt_alike_by_both_readings(tmp_path, monkeypatch, code):
    """The fuzz test's find: a status code of -2**63 was error type 'http_-9223372036854775808' in SQL and
    'http_-9.223372036854776e+18' in Python (a whole number past 2**53 is a float there)."""
    rec = read_jsonl(P / "openai_batch_output.jsonl")[0]
    rec["response"]["status_code"] = code
    f = tmp_path / "code.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    opts = IngestOptions(model="gpt-4o-mini-2024-07-18")
    fast = _stored(f, opts)
    assert fast == _stored(f, opts, monkeypatch, python_only=True)
    assert [r["error_type"] for r in fast] == [f"http_{code}"]


@pytest.mark.parametrize("start", [None, START])
def test_openai_batch_fast_and_python_paths_store_the_same_rows(tmp_path, monkeypatch, start):
    opts = IngestOptions(model="gpt-4o-mini-2024-07-18", start=start)
    for name, path in _variants(tmp_path).items():
        fast = _stored(path, opts)
        slow = _stored(path, opts, monkeypatch, python_only=True)
        assert fast == slow, name
        assert len(fast) >= 6, name


def _spaced(path, tmp_path, name: str, edit) -> object:
    """The file with ``edit`` applied to each record (ids and models with white space at either end)."""
    recs = read_jsonl(path)
    f = tmp_path / name
    f.write_text("".join(json.dumps(edit(i, r)) + "\n" for i, r in enumerate(recs)))
    return f


# --start with an offset and a fraction of a second: the fast path binds it as a TIMESTAMP (UTC, no zone), the
# Python path writes it as text for the loader; ids and models with white space at either end, or none, or a
# character other than ASCII: the fast path trims only those whose first or last character is at or below a space
OFFSET_START = datetime.fromisoformat("2025-03-04T17:00:00.250001+02:00")
SPACES = [" ", "\t", "\n", "\r", "", "\u00e9"]


def _spaced_openai(i: int, rec: dict) -> dict:
    rec = json.loads(json.dumps(rec))
    ws = SPACES[i % len(SPACES)]
    rec["id"] = f"{ws}{rec['id']}{SPACES[(i + 1) % len(SPACES)]}"
    body = (rec.get("response") or {}).get("body")
    if isinstance(body, dict) and body.get("model"):
        body["model"] = f"{body['model']}{ws}"
    return rec


@pytest.mark.parametrize("start", [None, OFFSET_START])
def test_openai_batch_fast_path_trims_and_times_as_the_python_path(tmp_path, monkeypatch, start):
    import duckdb

    from finops.ingest import providers
    f = _spaced(P / "openai_batch_output.jsonl", tmp_path, "spaced.jsonl", _spaced_openai)
    opts = IngestOptions(model="gpt-4o-mini-2024-07-18", start=start)
    src = providers.openai_batch_fast_source(probe(f), opts)
    if start is None:       # the failed request's line takes its neighbours' time: the window's reading
        src = src.fallback()
    assert len(duckdb.connect().execute(src.sql, src.params).fetchall()) == len(read_jsonl(f))   # in SQL
    fast = _stored(f, opts)
    assert fast == _stored(f, opts, monkeypatch, python_only=True)
    ids = {r["request_id"] for r in fast}
    assert ids == {r["id"].strip(" \t\n\r") for r in read_jsonl(f)} and any("\u00e9" in i for i in ids)
    if start is not None and any(r["attrs"] and "ts_from" in r["attrs"] for r in fast):
        # a line without a time before any timed line: --start, 15:00:00.250001 UTC
        assert "2025-03-04T15:00:00.250" in {r["ts"][:23] for r in fast}


def test_anthropic_batch_fast_path_trims_and_times_as_the_python_path(tmp_path, monkeypatch):
    import duckdb

    from finops.ingest import providers
    ok = _anthropic_variants(tmp_path)["succeeded only"]

    def edit(i, rec):
        rec = json.loads(json.dumps(rec))
        m = rec["result"]["message"]
        m["id"] = f"{SPACES[i % len(SPACES)]}{m['id']}{SPACES[(i + 2) % len(SPACES)]}"
        m["model"] = f"{SPACES[(i + 1) % len(SPACES)]}{m['model']}"
        return rec
    f = _spaced(ok, tmp_path, "spaced.jsonl", edit)
    opts = IngestOptions(start=OFFSET_START)
    src = providers.anthropic_batch_fast_source(probe(f), opts)
    assert len(duckdb.connect().execute(src.sql, src.params).fetchall()) == len(read_jsonl(f))   # no fallback
    fast = _stored(f, opts)
    assert fast == _stored(f, opts, monkeypatch, python_only=True, fast="anthropic_batch_fast_source")
    assert {r["ts"] for r in fast} == {"2025-03-04T15:00:00.250"}       # pandas' ISO text keeps milliseconds
    assert {r["request_id"] for r in fast} == {r["result"]["message"]["id"].strip(" \t\n\r") for r in read_jsonl(f)}


def test_helicone_pages_on_lines_longer_than_the_probe_head_all_load(con, tmp_path):
    # one page per line, each page longer than the 256 KiB the probe reads: the file is JSON Lines, not one
    # JSON document (the second page was silently dropped)
    from finops.ingest.base import HEAD_BYTES
    doc = json.loads((P / "helicone_requests.json").read_text())
    per_page = 2 * HEAD_BYTES // min(len(json.dumps(r)) for r in doc["data"])
    pages = []
    for page in range(2):
        recs = [{**doc["data"][i % len(doc["data"])], "request_id": f"req-{page}-{i}"} for i in range(per_page)]
        pages.append(json.dumps({"data": recs, "error": None}))
    assert len(pages[0]) > HEAD_BYTES
    f = tmp_path / "helicone_pages.jsonl"
    f.write_text("\n".join(pages) + "\n")
    assert probe(f).kind == "jsonl"
    (res,) = ingest_path(con, f)
    assert (res.format, res.rows_read) == ("helicone", 2 * per_page)


# ---------------------------------------------------------------- anthropic-batch: the typed fast path

def _anthropic_variants(tmp_path) -> dict[str, object]:
    lines = (P / "anthropic_batch_results.jsonl").read_text().splitlines()
    ok = [ln for ln in lines if json.loads(ln)["result"]["type"] == "succeeded"]
    served = json.loads(ok[0])
    served["custom_id"], served["result"]["message"]["id"] = "doc-9", "msg_09"
    served["result"]["message"]["usage"]["server_tool_use"] = {"web_search_requests": 2}
    no_split = json.loads(ok[1])
    no_split["custom_id"], no_split["result"]["message"]["id"] = "doc-10", "msg_10"
    del no_split["result"]["message"]["usage"]["cache_creation"]
    texts = {"succeeded only": "\n".join(ok) + "\n",
             "tool use, no write split": "\n".join(ok + [json.dumps(served), json.dumps(no_split)]) + "\n",
             "blank line": "\n".join(ok[:1] + [""] + ok[1:]) + "\n"}
    out = {"as committed (failures: the Python path)": P / "anthropic_batch_results.jsonl"}
    for name, text in texts.items():
        f = tmp_path / f"{name.replace(' ', '_').replace(',', '')}.jsonl"
        f.write_text(text)
        out[name] = f
    return out


def test_anthropic_batch_fast_path_reads_a_succeeded_file_in_sql(tmp_path):
    import duckdb

    from finops.ingest import providers
    f = _anthropic_variants(tmp_path)["tool use, no write split"]
    src = providers.anthropic_batch_fast_source(probe(f), IngestOptions(start=START))
    assert len(duckdb.connect().execute(src.sql, src.params).fetchall()) == len(read_jsonl(f))


def test_anthropic_batch_fast_and_python_paths_store_the_same_rows(tmp_path, monkeypatch):
    opts = IngestOptions(start=START, model="claude-sonnet-4-20250514")
    for name, path in _anthropic_variants(tmp_path).items():
        fast = _stored(path, opts)
        slow = _stored(path, opts, monkeypatch, python_only=True, fast="anthropic_batch_fast_source")
        assert fast == slow, name
        assert len(fast) >= 2, name


# ---------------------------------------------------------------- openrouter: the typed fast path

def _openrouter_variants(tmp_path) -> dict[str, object]:
    lines = (P / "openrouter_generations.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    unpriced = {"data": {**first["data"], "id": "gen-zero", "total_cost": 0}}
    free = {"data": {**first["data"], "id": "gen-free", "total_cost": 0, "native_tokens_prompt": 0,
                     "native_tokens_completion": 0}}
    fallback_tokens = {"data": {**first["data"], "id": "gen-norm", "native_tokens_prompt": None,
                                "native_tokens_completion": ""}}
    cancelled = {"data": {**first["data"], "id": "gen-cancel", "cancelled": True, "external_user": None}}
    texts = {
        "odd values": "\n".join(lines + [json.dumps(x) for x in (unpriced, free, fallback_tokens, cancelled)]) + "\n",
        # not the fast path's: a blank line, a generation without id (the Python path hashes it), a page per line
        "blank line": "\n".join(lines[:1] + [""] + lines[1:]) + "\n",
        "no id": "\n".join(lines + [json.dumps({"data": {**first["data"], "id": None}})]) + "\n",
        "page per line": "\n".join(lines + [json.dumps({"data": [{**first["data"], "id": "gen-p1"}]})]) + "\n",
    }
    out = {"as committed": P / "openrouter_generations.jsonl"}
    for name, text in texts.items():
        f = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        f.write_text(text)
        out[name] = f
    array = tmp_path / "generations.json"
    array.write_text(json.dumps([json.loads(ln)["data"] for ln in lines], indent=1))
    out["JSON array"] = array
    return out


def test_openrouter_fast_path_reads_the_committed_file_in_sql():
    import duckdb

    from finops.ingest import providers
    src = providers.openrouter_fast_source(probe(P / "openrouter_generations.jsonl"), IngestOptions())
    got = duckdb.connect().execute(src.sql, src.params).fetchall()
    assert len(got) == len(read_jsonl(P / "openrouter_generations.jsonl"))     # no line sent it to the fallback


def test_openrouter_fast_and_python_paths_store_the_same_rows(tmp_path, monkeypatch):
    for name, path in _openrouter_variants(tmp_path).items():
        for opts in (IngestOptions(), IngestOptions(tenant="t0", model="m0")):
            fast = _stored(path, opts)
            slow = _stored(path, opts, monkeypatch, python_only=True, fast="openrouter_fast_source")
            assert fast == slow, name
            assert len(fast) >= 4, name


def _openrouter_odd_fields(tmp_path, text_values: bool):
    """Generations with the first one's fields (values nested with nulls, empty, escaped; ``text_values``: also
    non-ASCII text and numbers as odd text, which the Python path spells differently), and ones with a field
    more, a field less or the fields in another order (attrs through the MAP)."""
    first = read_jsonl(P / "openrouter_generations.jsonl")[0]["data"]
    odd = [{"a": None, "b": [None, 1, {"c": None}]}, {}, [], 'say "hi" \\ a:b,c}', 2**70, -3, True, None, 0.25]
    recs = []
    for i, value in enumerate(odd):
        recs.append({**first, "id": f"gen-odd-{i}", "origin": value, "router": odd[-1 - i]})
    recs.append({**first, "id": "gen-more", "extra_field": {"x": None}})
    recs.append({k: v for k, v in first.items() if k != "origin"} | {"id": "gen-less"})
    recs.append(dict(reversed(list({**first, "id": "gen-reversed"}.items()))))
    lines = [json.dumps({"data": first})] + [json.dumps({"data": r}) for r in recs]
    if text_values:
        lines.append(json.dumps({"data": {**first, "id": "gen-text", "origin": "é 😀 \u00e9"}}, ensure_ascii=False))
        lines.append(json.dumps({"data": {**first, "id": "gen-ascii", "origin": "é"}}))
        lines.append(json.dumps({"data": {**first, "id": "gen-num", "router": "NUM"}}).replace('"NUM"', "1.50e400"))
        lines.append(json.dumps({"data": {**first, "id": "gen-num2", "router": "NUM"}}).replace('"NUM"', "1.50"))
    f = tmp_path / ("odd_text.jsonl" if text_values else "odd.jsonl")
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f


def test_openrouter_attrs_from_the_first_generations_fields_are_those_of_the_map(tmp_path):
    # a generation with the first one's fields has its attrs joined from a STRUCT of them: the same text as the
    # MAP every other generation goes through, value for value
    import duckdb

    from finops.ingest import providers
    f = _openrouter_odd_fields(tmp_path, text_values=True)
    first = read_jsonl(P / "openrouter_generations.jsonl")[0]["data"]
    p = probe(f)
    src = providers.openrouter_fast_source(p, IngestOptions())
    assert providers._first_generation_keys(p, "newline_delimited") == list(first)
    con = duckdb.connect()
    cursor = con.execute(src.sql, src.params)
    names = [d[0] for d in cursor.description]
    struct_rows = cursor.fetchall()
    map_rows = con.execute(providers._openrouter_fast_sql(None), src.params[:4]).fetchall()
    assert struct_rows == map_rows
    assert len(struct_rows) == len(read_jsonl(f))
    unnumbered = con.execute(src.unnumbered_sql, src.params).fetchall()
    assert [r[1:] for r in unnumbered] == [r[1:] for r in struct_rows]
    assert {r[0] for r in unnumbered} == {None}
    attrs = {r[names.index("request_id")]: json.loads(r[names.index("attrs")]) for r in struct_rows}
    assert attrs["gen-odd-0"]["origin"] == {"a": None, "b": [None, 1, {"c": None}]}     # nested nulls kept
    assert attrs["gen-odd-0"]["router"] == 0.25
    assert "router" not in attrs["gen-odd-1"] and "app_id" not in attrs["gen-odd-0"]      # top-level nulls dropped
    assert attrs["gen-more"]["extra_field"] == {"x": None} and "origin" not in attrs["gen-less"]


def test_openrouter_one_parse_per_line_reads_our_fields_as_the_map_path(tmp_path):
    # the first generation's fields and ours from one json_transform of each line (a field attrs may hold read
    # as its JSON, then as text): the same rows as the reading that extracts the record and transforms it
    # again, for odd values of the fields we map and of tokens_* (which attrs also hold), lines wrapped in data
    # or not, and fields of another case than ours
    import duckdb

    from finops.ingest import providers
    first = read_jsonl(P / "openrouter_generations.jsonl")[0]["data"]
    odd = [" 12 ", "12.0", 1.5, "x", None, "", 6.103515625e-05, "-0", 2**52, "1e3", "\t7\n", 0]
    lines = [json.dumps({"data": first})]
    for i, value in enumerate(odd):
        rec = {**first, "id": f"gen-{i}", "tokens_prompt": value, "tokens_completion": odd[-1 - i],
               "native_tokens_prompt": odd[(i + 3) % len(odd)], "model": f"{odd[i] if isinstance(odd[i], str) else ''}m",
               "native_tokens_cached": odd[(i + 5) % len(odd)], "latency": odd[(i + 7) % len(odd)]}
        lines.append(json.dumps(rec if i % 2 else {"data": rec}))
    f = tmp_path / "odd_ours.jsonl"
    f.write_text("\n".join(lines) + "\n")
    src = providers.openrouter_fast_source(probe(f), IngestOptions(tenant="t", model="m"))
    assert "json_extract(line, '$.data')" not in src.sql.split("json_keys")[0]     # the record is not extracted
    con = duckdb.connect()
    one_parse = con.execute(src.unnumbered_sql, src.params).fetchall()
    map_rows = con.execute(providers._openrouter_fast_sql(None, numbered=False),
                           [str(f), "newline_delimited", "t", "m"]).fetchall()
    assert one_parse == map_rows and len(one_parse) == len(lines)
    assert providers._openrouter_struct(["ID", "model"]) is None and providers._openrouter_struct(["id"])
    # a value Python's str() writes its own way (True, a dict, a list), a count float() reads and DuckDB does
    # not, a count beyond 2**53: both readings hand the file over (error), the Python path reads it
    for field, value in (("tokens_prompt", True), ("latency", {"n": 1}), ("model", [1]), ("tokens_prompt", "\u0661"),
                         ("id", False), ("native_tokens_prompt", 2**70)):
        g = tmp_path / "handed.jsonl"
        g.write_text(json.dumps({"data": first}) + "\n" + json.dumps({"data": {**first, field: value}}) + "\n")
        src = providers.openrouter_fast_source(probe(g), IngestOptions())
        for text in (src.sql, providers._openrouter_fast_sql(None)):
            with pytest.raises(duckdb.Error, match="fast path"):
                con.execute(text, src.params if text is src.sql else src.params[:4]).fetchall()


def test_openrouter_odd_fields_store_the_rows_of_the_python_path(tmp_path, monkeypatch):
    f = _openrouter_odd_fields(tmp_path, text_values=False)
    fast = _stored(f, IngestOptions())
    slow = _stored(f, IngestOptions(), monkeypatch, python_only=True, fast="openrouter_fast_source")
    assert fast == slow
    assert len(fast) == len(read_jsonl(f))


def test_openrouter_fast_path_rejects_a_bad_value_by_row_and_field(con, tmp_path):
    lines = read_jsonl(P / "openrouter_generations.jsonl")
    lines[2]["data"]["native_tokens_prompt"] = "many"
    f = tmp_path / "gen.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (res,) = ingest_path(con, f)
    assert res.rejects == [{"row": 3, "field": "input_tokens", "reason": "input_tokens: cannot read many as a whole number"}]
    assert res.rows_ingested == len(lines) - 1


# ---------------------------------------------------------------- helicone: the typed fast path

def _helicone_requests() -> list[dict]:
    return json.loads((P / "helicone_requests.json").read_text())["data"]


def _helicone_files(tmp_path, recs: list[dict]) -> dict[str, object]:
    """The requests in each shape the SQL reading takes: pages of two per line, one request per line, a JSON array."""
    texts = {
        "pages.jsonl": "".join(json.dumps({"data": recs[i:i + 2], "error": None}) + "\n" for i in range(0, len(recs), 2)),
        "lines.jsonl": "".join(json.dumps(r) + "\n" for r in recs),
        "array.json": json.dumps(recs, indent=1),
    }
    out = {}
    for name, text in texts.items():
        out[name] = tmp_path / name
        out[name].write_text(text)
    return out


def _helicone_odd(recs: list[dict]) -> list[dict]:
    """The committed requests and odd ones: numbers as text (with spaces), a fraction, an unpriced zero, a cache
    hit's zero, a status that is no number, a cost in ``cost`` beside a null ``costUSD``, no user, a model only in
    response_model, spaces around names, an empty name, nested nulls in attrs. Every request gets the fields
    ``cache_reference_id`` and ``cost`` (newer and older Helicone), so all have the same fields."""
    recs = [{**r, "cache_reference_id": r.get("cache_reference_id"), "cost": r.get("cost")} for r in recs]
    first = recs[0]
    odd = [
        {"request_id": "h-text", "prompt_tokens": " 12 ", "completion_tokens": "3", "delay_ms": " 250 ",
         "costUSD": "0.5", "response_status": "201"},
        {"request_id": "h-frac", "prompt_tokens": 12.5, "completion_tokens": 4.0, "time_to_first_token": 1.25},
        {"request_id": "h-zero", "costUSD": 0, "prompt_cache_read_tokens": 5, "prompt_cache_write_tokens": None},
        {"request_id": "h-hit", "costUSD": 0.0, "cache_reference_id": "c-1"},
        {"request_id": "h-nocache", "costUSD": 0, "cache_reference_id": "00000000-0000-0000-0000-000000000000"},
        {"request_id": "h-status", "response_status": "teapot", "costUSD": None, "cost": 0.25},
        {"request_id": "h-nouser", "request_user_id": None, "model": None, "response_model": " resp-m "},
        {"request_id": " h-spaces ", "provider": " Anthropic ", "request_user_id": " bob ", "model": "None"},
        {"request_id": "h-nested", "request_properties": {"a": None, "b": [None, 1, {"c": None}]}, "scores": {}},
        {"request_id": "h-500", "response_status": 500.0, "costUSD": "abc"},
        {"request_id": "h-nan", "costUSD": "nan", "completion_tokens": "-0"},
    ]
    return recs + [{**first, **o} for o in odd]


def _helicone_both(path, options, monkeypatch):
    """(the loader's rows, the Python path's rows, whether the loader's ran the Python path)."""
    from finops.ingest import providers
    calls = []
    real = providers._read_helicone_python
    monkeypatch.setattr(providers, "_read_helicone_python", lambda *a: calls.append(1) or real(*a))
    fast = _stored(path, options)
    used_python = bool(calls)
    slow = _stored(path, options, monkeypatch, python_only=True, fast="helicone_fast_source")
    assert calls, "the Python path never ran"
    return fast, slow, used_python


def test_helicone_fast_path_stores_what_the_python_path_stores(tmp_path, monkeypatch):
    recs = _helicone_odd(_helicone_requests())
    for name, path in _helicone_files(tmp_path, recs).items():
        for opts in (IngestOptions(), IngestOptions(tenant="t0", model="m0")):
            fast, slow, used_python = _helicone_both(path, opts, monkeypatch)
            assert not used_python, name
            assert fast == slow, name
            # rejected by both, naming the field: a fractional count, a cost that is no number, a NaN cost
            assert sorted(r["request_id"] for r in recs if r["request_id"].strip() not in
                          {row["request_id"] for row in fast}) == ["h-500", "h-frac", "h-nan"], name


def test_helicone_fast_path_reads_pages_on_one_thread_and_lines_on_every_thread(tmp_path):
    from finops.ingest import providers
    files = _helicone_files(tmp_path, _helicone_requests())
    opts = IngestOptions()
    paged = providers.helicone_fast_source(probe(files["pages.jsonl"]), opts)
    assert paged is not None and paged.unnumbered_sql is None      # a page's requests share their line's number
    for name in ("lines.jsonl", "array.json"):
        src = providers.helicone_fast_source(probe(files[name]), opts)
        assert src is not None and src.unnumbered_sql is not None, name
    # the wrapped document as Helicone's API answers it is streamed by the Python path (its memory: one request)
    assert providers.helicone_fast_source(probe(P / "helicone_requests.json"), opts) is None
    assert providers.helicone_fast_source(probe(files["pages.jsonl"]), IngestOptions(tenant_field="team")) is None


def test_helicone_fast_path_attrs_keep_nulls_in_the_files_order(tmp_path):
    import duckdb

    from finops.ingest import providers
    recs = _helicone_odd(_helicone_requests())
    path = _helicone_files(tmp_path, recs)["pages.jsonl"]
    src = providers.helicone_fast_source(probe(path), IngestOptions())
    cur = duckdb.connect().execute(src.sql, src.params)
    names = [d[0] for d in cur.description]
    got = {r[names.index("request_id")]: r for r in cur.fetchall()}
    assert sorted(got) == sorted(r["request_id"].strip() for r in recs)
    assert {r[0] for r in got.values()} == {1, 2, 3, 4, 5, 6, 7, 8}       # lines: two requests each
    for r in recs:
        attrs = json.loads(got[r["request_id"].strip()][names.index("attrs")])
        kept = {k: v for k, v in r.items() if k not in providers.HELICONE_MAPPED}
        tokens = sum(v for k in ("prompt_tokens", "completion_tokens", "prompt_cache_read_tokens",
                                 "prompt_cache_write_tokens") if isinstance(v := r[k], int))
        if r["costUSD"] == 0 and tokens and r["cache_reference_id"] in (None, "00000000-0000-0000-0000-000000000000"):
            kept["source_cost_usd"] = 0.0           # unpriced: Helicone's 0 kept beside the fields
        assert attrs == kept and list(attrs) == list(kept), r["request_id"]


# each hands the file to the Python path (a request the SQL would read another way, or one it refuses)
HELICONE_HANDED_OVER = {
    "a field more": lambda r: {**r, "extra": 1},
    "a field less": lambda r: {k: v for k, v in r.items() if k != "scores"},
    "fields reordered": lambda r: dict(reversed(list(r.items()))),
    "a status that is true": lambda r: {**r, "response_status": True},
    "a model that is an object": lambda r: {**r, "model": {"name": "m"}},
    "an id that is a number": lambda r: {**r, "request_id": 7},
    "no id": lambda r: {**r, "request_id": None},
    "a time Python reads another way": lambda r: {**r, "request_created_at": "2025-03-04T14:00:00.250+0100"},
    "a count in Arabic digits": lambda r: {**r, "prompt_tokens": "\u0661\u0662"},
    "a count beyond 2**53": lambda r: {**r, "prompt_tokens": 2**60, "completion_tokens": 2**60},
}


@pytest.mark.parametrize("name", sorted(HELICONE_HANDED_OVER))
def test_helicone_requests_the_sql_hands_to_python(tmp_path, monkeypatch, name):
    recs = _helicone_requests()
    recs = recs[:3] + [{**HELICONE_HANDED_OVER[name](recs[3]), "request_id": recs[3]["request_id"]}
                       if name not in ("an id that is a number", "no id") else HELICONE_HANDED_OVER[name](recs[3])]
    for fname, path in _helicone_files(tmp_path, recs).items():
        fast, slow, used_python = _helicone_both(path, IngestOptions(), monkeypatch)
        assert used_python, (name, fname)
        assert fast == slow, (name, fname)


def test_helicone_line_that_is_no_request_gets_the_python_paths_message(tmp_path, con):
    recs = _helicone_requests()
    f = tmp_path / "h.jsonl"
    f.write_text(json.dumps({"data": recs[:2]}) + "\n5\n")
    with pytest.raises(InputError) as exc:
        ingest_path(con, f)
    assert exc.value.row == 2 and "expected a Helicone request" in str(exc.value)
    assert con.execute("SELECT count(*) FROM requests").fetchall() == [(0,)]


def test_helicone_fast_path_rejects_a_bad_value_by_line_and_field(con, tmp_path):
    recs = _helicone_requests()
    recs[2] = {**recs[2], "prompt_tokens": "many"}
    f = tmp_path / "h.jsonl"
    f.write_text("".join(json.dumps({"data": recs[i:i + 2]}) + "\n" for i in range(0, 4, 2)))
    (res,) = ingest_path(con, f)
    assert res.rejects == [{"row": 2, "field": "input_tokens", "reason": "input_tokens: cannot read many as a whole number"}]
    assert res.rows_ingested == 3
    (again,) = ingest_path(con, f)
    assert again.rows_ingested == 0
