"""Issue 17's fuzz test: Hypothesis-made canonical files (numbers at the float edges, huge and tiny
timestamps, unicode, NULs, quoting) through ingest, then through every page's data functions.

Nothing may raise but a reported reject (an InputError naming the file); a refused file leaves the
store as it was; an accepted one accounts for every row. Bounded to run in CI within 60 s.
"""
import contextlib
import copy
import csv
import io
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from finops import store
from finops.errors import InputError
from finops.filters import Filters, filters_for
from finops.ingest import ingest_path
from finops.ingest.loader import stored_span

FIELDS = ["request_id", "ts", "model", "tenant", "sla_tier", "input_tokens", "output_tokens",
          "cached_input_tokens", "total_ms", "queue_ms", "ttft_ms", "cost_usd", "status", "cache_hit"]
EDGE_FLOATS = [0.0, -0.0, 1e-308, 5e-324, 1.7976931348623157e308, -1.7976931348623157e308, math.inf, -math.inf,
               math.nan, 2 ** 53 + 1, 2 ** 63, -(2 ** 63), 1e12]
TIMESTAMPS = ["2026-11-20T10:00:00Z", "2026-11-20 10:00:00.123456789", "9999-12-31T23:59:59Z", "0001-01-01",
              "1970-01-01T00:00:00Z", "2014-12-31T23:59:59Z", "1763632800", "1763632800123", "1e300", "-1",
              "2026-02-30T00:00:00Z", "2026-11-20T10:00:00+14:00", "", "yesterday"]

# the differential tests below (a file's SQL reading against its Python one): 40 examples in CI; before a change to a
# reading lands, run them with FINOPS_FUZZ_EXAMPLES=400
DIFFERENTIAL_EXAMPLES = int(os.environ.get("FINOPS_FUZZ_EXAMPLES", "40"))
differential = settings(max_examples=DIFFERENTIAL_EXAMPLES, deadline=None,
                        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
number = st.one_of(st.sampled_from(EDGE_FLOATS), st.integers(-(2 ** 70), 2 ** 70),
                   st.floats(allow_nan=True, allow_infinity=True))
value = st.one_of(number, text, st.none(), st.booleans())
ts = st.one_of(st.sampled_from(TIMESTAMPS), st.datetimes().map(lambda d: d.isoformat()), text,
               st.floats(allow_nan=True, allow_infinity=True))


@st.composite
def rows(draw):
    n = draw(st.integers(1, 6))
    out = []
    for i in range(n):
        row = {f: draw(value) for f in FIELDS}
        row["ts"] = draw(ts)
        row["model"] = draw(st.one_of(st.sampled_from(["gpt-4o", "llama-3.1-8b"]), text))
        row["request_id"] = draw(st.one_of(st.just(f"r{i}"), text, st.none()))
        out.append(row)
    return out


def _csv(rs, quoting) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, quoting=quoting, lineterminator="\n")
    w.writeheader()
    for r in rs:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    return buf.getvalue().encode("utf-8")


def _jsonl(rs) -> bytes:
    return "".join(json.dumps(r, default=str) + "\n" for r in rs).encode("utf-8")


def _page_functions():
    """What the pages ask of finops for the sidebar's filters (views/*.py, the capacity and cascade
    pages' own tests aside)."""
    from finops.latency import diagnose
    from finops.latency import stats as latency
    from finops.ops import alerts
    from finops.spend import budgets, costviews, exports, pricing, routing
    return [
        costviews.kpis_with_change, costviews.kpi_trends, costviews.spend_over_time, costviews.cost_matrix,
        costviews.cost_per_request, costviews.gpu_fleet, costviews.showback, costviews.token_mix,
        lambda con, f: costviews.top_tenants(con, f, 8), exports.focus_frame, costviews.token_class_prices,
        lambda con, f: costviews.showback(con, f, idle_policy=pricing.IdlePolicy("usage")),
        alerts.open_alerts, alerts.unjudged, diagnose.diagnose,
        latency.coverage, latency.segments, latency.ttft_tpot, lambda con, f: latency.slowest(con, f, 20),
        lambda con, f: latency.percentiles(con, f, by=("model",)),
        lambda con, f: latency.histogram(con, f, "queue_ms"),
        lambda con, f: latency.over_time(con, f, "total_ms"),
        lambda con, f: latency.length_buckets(con, f, "output_tokens"),
        routing.cache_savings, routing.cascade_summary, lambda con, f: routing.mix(con, f, "model"),
        lambda con, f: routing.whatif(con, f, "all-small"),
        lambda con, f: [budgets.status(con, m, f) for m in budgets.months(con)[:1]],
    ]


BASELINE = ("request_id,ts,model,tenant,input_tokens,output_tokens,total_ms\n"
            "base1,2026-11-20T10:00:00Z,gpt-4o,acme,1000,100,900\n")


def _state(con):
    return store.row_count(con), len(store.batches(con)), store.data_version(con)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(rs=rows(), form=st.sampled_from(["csv-minimal", "csv-all", "jsonl"]), nul=st.booleans())
def test_fuzzed_canonical_files_load_or_are_refused_and_every_page_function_answers(tmp_path_factory, rs, form,
                                                                                    nul):
    """A fresh store per example holding one good batch, so a failure replays from its example alone."""
    work = tmp_path_factory.mktemp("fuzz")
    (work / "base.csv").write_text(BASELINE)
    con = store.connect(":memory:")
    ingest_path(con, work / "base.csv")
    try:
        _check(con, work, rs, form, nul)
    finally:
        con.close()


def _check(con, work, rs, form, nul):
    data = _jsonl(rs) if form == "jsonl" else _csv(rs, csv.QUOTE_ALL if form == "csv-all" else csv.QUOTE_MINIMAL)
    if nul:
        data = data[: len(data) // 2] + b"\0" + data[len(data) // 2:]
    f = work / ("rows.jsonl" if form == "jsonl" else "rows.csv")
    f.write_bytes(data)
    before = _state(con)
    try:
        results = ingest_path(con, f)
    except InputError as exc:
        assert str(exc).startswith("file rows."), exc            # a reported reject, naming the file
        assert _state(con) == before                              # and the store as it was
    else:
        for r in results:
            assert r.rows_ingested + r.rows_rejected + r.duplicates_skipped == r.rows_read
            assert all(x["reason"] for x in r.rejects)
        assert not nul                                            # a NUL byte never gets in
    span = stored_span(con)
    lo, hi = span.window
    if span.first is not None:
        assert lo <= span.first <= span.last <= hi
    f_ = filters_for(span.first.date(), span.last.date()) if span.first else Filters()
    for fn in _page_functions():
        with contextlib.suppress(InputError):     # a sentence the page shows (e.g. "mark models small/large")
            fn(con, f_)


# ---------------------------------------------------------------- quoting: valid files round-trip, a stray quote
# is refused naming its line and field or read as Python's csv module reads it, never misread

QUOTE_COLS = ["request_id", "ts", "model", "tenant", "input_tokens", "output_tokens"]
quoted_text = st.lists(st.sampled_from(list('ab ,"\n;é') + ["\r\n"]), max_size=10).map("".join)


def _quote_csv(tenants, quoting) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, quoting=quoting, lineterminator="\n")
    w.writerow(QUOTE_COLS)
    for i, t in enumerate(tenants):
        w.writerow([f"q{i}", "2026-11-20T10:00:00Z", "gpt-4o", t, 10, 5])
    return buf.getvalue()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(tenants=st.lists(quoted_text, min_size=1, max_size=5),
       quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL]), at=st.integers(0, 10 ** 6),
       stray=st.booleans())
def test_fuzzed_quotes_load_exactly_or_are_refused_naming_line_and_field(tmp_path_factory, tenants, quoting, at,
                                                                        stray):
    text = _quote_csv(tenants, quoting)
    header = len(text.split("\n", 1)[0]) + 1
    if stray:                           # one quote anywhere after the header: unclosed, stray or junk
        pos = header + at % (len(text) - header + 1)
        text = text[:pos] + '"' + text[pos:]
    f = tmp_path_factory.mktemp("quotes") / "rows.csv"
    f.write_bytes(text.encode())
    con = store.connect(":memory:")
    try:
        try:
            [r] = ingest_path(con, f)
        except InputError as exc:
            assert stray, f"a valid CSV was refused: {exc}"
            assert str(exc).startswith("file rows.csv, field ") and ": line " in str(exc), exc
            assert store.row_count(con) == 0 and store.batches(con).empty
            return
        # a blank line (one a stray quote left outside a quoted field) is no record to either reader: Python's
        # csv module yields it as [], DuckDB skips it
        records = list(csv.reader(io.StringIO(text, newline="")))[1:]
        records = [rec for rec in records if rec]
        # DuckDB read the records Python's csv module reads (a shifted row is rejected with its reason)...
        assert r.rows_read == len(records), (r.rows_read, records)
        assert all(x["reason"] for x in r.rejects)
        stored = set(con.execute("SELECT request_id, tenant FROM requests").fetchall())
        expected = {(rec[0], (rec[3].strip(" ") if len(rec) > 3 else "") or "default") for rec in records
                    if rec}            # a blank tenant is the default one
        assert stored <= expected, (stored, expected)
        # ...and no stored field swallowed a row: the tenants written never hold a timestamp
        assert not [t for _, t in stored if "2026-11-20T" in t], stored
        if not stray:
            assert r.rows_ingested == len(tenants)
    finally:
        con.close()


# ---------------------------------------------------------------- the SQL reading of Helicone against its Python one:
# fuzzed values in every field helicone_row reads; the two readings store the same rows and reject the same ones

HELICONE_READ = ["request_id", "request_created_at", "request_user_id", "model", "response_model", "provider",
                 "prompt_tokens", "completion_tokens", "prompt_cache_read_tokens", "prompt_cache_write_tokens",
                 "response_status", "cache_reference_id", "costUSD", "cost", "time_to_first_token", "delay_ms"]
HELICONE_NAMES = {"request_id", "request_user_id", "model", "response_model", "provider", "cache_reference_id"}
helicone_texts = st.sampled_from(["None", "", " 12 ", "12.0", "0", "-0", "1e3", "nan", "inf", "1_0", "\u0661",
                                  "00000000-0000-0000-0000-000000000000", " OpenAI ", "\u0130"])
# a value of the field's own JSON type (a name: text; the rest: a number or text), or any (booleans, floats in names)
helicone_name = st.one_of(text, helicone_texts, st.none())
helicone_number = st.one_of(st.integers(-(2 ** 70), 2 ** 70), st.floats(allow_nan=False, allow_infinity=False),
                            st.sampled_from([f for f in EDGE_FLOATS if math.isfinite(f)]), helicone_texts, st.none())


# Unix seconds as a Batch body's ``created``: whole (up to the edge of what the readings take), or with milliseconds
# up to 2033. A fraction far beyond (year 5138) has no microsecond a double can hold: the two readings' rejects
# named times 1 microsecond apart (not a difference the readings can settle; the row is rejected by both)
epoch = st.one_of(st.integers(-10, 2 * 10 ** 11), st.integers(-1000, 2 * 10 ** 12).map(lambda ms: ms / 1000),
                  st.sampled_from([0, 1e11, 1e11 - 1]))


def _put(rec: dict, path: str, v) -> None:
    """Set the dotted ``path`` of ``rec`` to ``v`` (a digit picks a list's item), making the objects on the way
    where a field is missing or null; a path through a value of another type is left alone."""
    *parents, last = path.split(".")
    for k in parents:
        if isinstance(rec, list):
            if not (k.isdigit() and int(k) < len(rec)):
                return
            rec = rec[int(k)]
        elif isinstance(rec, dict):
            if rec.get(k) is None:
                rec[k] = {}
            rec = rec[k]
        if not isinstance(rec, dict | list):
            return
    if isinstance(rec, dict):
        rec[last] = v
    elif last.isdigit() and int(last) < len(rec):
        rec[int(last)] = v


def _fuzzed(draw, first: dict | list[dict], read: list[str], names, time_field: str, id_field: str, id_prefix: str,
            times=None) -> list[dict]:
    """One to four copies of ``first`` (or of one of its records), each with up to six of the ``read`` fields
    (dotted paths) fuzzed: all of one record's of their own JSON type (``names`` text, the time ``times`` or text,
    the rest numbers or text) or of any type."""
    out = []
    for i in range(draw(st.integers(1, 4))):
        rec = json.loads(json.dumps(draw(st.sampled_from(first)) if isinstance(first, list) else first))
        typed = draw(st.booleans())
        for k in draw(st.lists(st.sampled_from(read), max_size=6, unique=True)):
            _put(rec, k, draw(st.one_of(ts if times is None else times, text) if k == time_field else value if not typed
                              else helicone_name if k in names else helicone_number))
        if draw(st.booleans()):
            _put(rec, id_field, f"{id_prefix}{i}")
        out.append(rec)
    return out


@st.composite
def helicone_requests(draw):
    from helpers import DATA
    first = json.loads((DATA / "providers" / "helicone_requests.json").read_text())["data"][0]
    return _fuzzed(draw, {**first, "cache_reference_id": None, "cost": None}, HELICONE_READ, HELICONE_NAMES,
                   "request_created_at", "request_id", "h")


def _stored_rows(path, monkeypatch, python: bool, switch: str = "helicone_fast_source", **options):
    """What one reading stores (with the ingest ``options``): ``python`` with the SQL reading
    ``<switch>`` (of finops.ingest.providers or .ecosystem) turned off, or for ``read:<format>`` that format's
    reader called with ``fast=False``."""
    from finops.ingest import IngestOptions, ecosystem, providers
    from helpers import use_python_reading
    module = providers if hasattr(providers, switch) else ecosystem
    con = store.connect(":memory:")
    try:
        with monkeypatch.context() as m:
            if python and switch.startswith("read:"):
                use_python_reading(m, switch[5:])
            elif python:
                m.setattr(module, switch, lambda *a, **k: None)
            try:
                r = ingest_path(con, path, IngestOptions(**options))[0]
            except InputError as exc:
                return str(exc)
        cur = con.execute("SELECT * EXCLUDE (batch_id, attrs), CAST(attrs AS VARCHAR) FROM requests "
                          "ORDER BY request_id, ts")
        names = [d[0] for d in cur.description]
        out = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        for row in out:      # attrs: the same JSON (a number may be spelt another way)
            attrs = row.pop(names[-1])
            row["attrs"] = None if attrs is None else json.loads(attrs)
        return (r.rows_read, r.rows_ingested, r.rows_rejected, r.duplicates_skipped, r.rejects), \
            json.loads(json.dumps(out, default=str))
    finally:
        con.close()


def _differs(a, b) -> str:
    """Where two readings' results differ: the counts, or each row's fields that differ (for the failure's message)."""
    if isinstance(a, str) or isinstance(b, str) or a[0] != b[0] or len(a[1]) != len(b[1]):
        return f"{a if isinstance(a, str) else a[0]} != {b if isinstance(b, str) else b[0]}"
    return "; ".join(f"row {i} {k}: {x[k]!r} != {y[k]!r}" for i, (x, y) in enumerate(zip(a[1], b[1], strict=True))
                     for k in x if x[k] != y.get(k))


def _same_by_sql_and_python(path, monkeypatch, switch: str, compare=lambda r: r, **options) -> None:
    """The file stores the same by its SQL reading and by its Python one (``switch`` off): counts, rejects, rows;
    each result seen through ``compare``."""
    fast = compare(_stored_rows(path, monkeypatch, False, switch, **options))
    slow = compare(_stored_rows(path, monkeypatch, True, switch, **options))
    assert fast == slow, _differs(fast, slow)


def _records_file(folder, recs: list, shape: str):
    """``recs`` as a JSON array (``shape`` "array": ``records.json``) or a record a line (``records.jsonl``)."""
    f = folder / ("records.json" if shape == "array" else "records.jsonl")
    f.write_text(json.dumps(recs, default=str) if shape == "array"
                 else "".join(json.dumps(r, default=str) + "\n" for r in recs))
    return f


def _timed_ends(draw, recs: list[dict]) -> list[dict]:
    """Each record's end and first-token times fuzzed too, or not."""
    for rec in recs:
        for k in ("endTime", "completionStartTime"):
            if draw(st.booleans()):
                rec[k] = draw(st.one_of(ts, text))
    return recs


@differential
@given(recs=helicone_requests(), shape=st.sampled_from(["pages", "lines"]))
def test_fuzzed_helicone_requests_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, recs, shape):
    """Each reading on its own store: the same counts, rejects (row, field and reason) and rows, attrs as JSON values.
    About a third of such files are read in SQL, the rest handed to Python (a value of another type where a field
    is read); 400 examples run so before it landed found the strip of a name and the spelling of a fraction."""
    f = tmp_path_factory.mktemp("helicone") / "h.jsonl"
    lines = ([{"data": recs[i:i + 2], "error": None} for i in range(0, len(recs), 2)] if shape == "pages" else recs)
    f.write_text("".join(json.dumps(x, default=str) + "\n" for x in lines))
    _same_by_sql_and_python(f, monkeypatch, "helicone_fast_source")


OPENROUTER_READ = ["id", "created_at", "external_user", "model", "provider_name", "service_tier", "native_tokens_prompt",
                   "tokens_prompt", "native_tokens_completion", "tokens_completion", "native_tokens_cached",
                   "native_tokens_reasoning", "latency", "total_cost", "cancelled", "origin"]


@st.composite
def openrouter_generations(draw):
    from helpers import DATA, read_jsonl
    first = read_jsonl(DATA / "providers" / "openrouter_generations.jsonl")[0]["data"]
    return _fuzzed(draw, first, OPENROUTER_READ, ("id", "external_user", "model", "provider_name", "service_tier"),
                   "created_at", "id", "gen-")


@differential
@given(recs=openrouter_generations(), wrapped=st.booleans())
def test_fuzzed_openrouter_generations_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, recs,
                                                                          wrapped):
    """As the Helicone test above, for OpenRouter's generations (a line each, wrapped in ``data`` or not)."""
    f = tmp_path_factory.mktemp("openrouter") / "g.jsonl"
    f.write_text("".join(json.dumps({"data": r} if wrapped else r, default=str) + "\n" for r in recs))
    _same_by_sql_and_python(f, monkeypatch, "openrouter_fast_source")


# ---------------------------------------------------------------- the typed SQL readings of the Batch APIs' results
# against their Python ones: the fields openai_batch_row / anthropic_batch_row read, nested, fuzzed

OPENAI_BATCH_READ = ["id", "custom_id", "error", "error.code", "error.type", "error.message", "response",
                     "response.status_code", "response.request_id", "response.body", "response.body.id",
                     "response.body.object", "response.body.created", "response.body.created_at",
                     "response.body.model", "response.body.service_tier", "response.body.choices.0.finish_reason",
                     "response.body.usage.prompt_tokens", "response.body.usage.completion_tokens",
                     "response.body.usage.input_tokens", "response.body.usage.output_tokens",
                     "response.body.usage.prompt_tokens_details.cached_tokens",
                     "response.body.usage.completion_tokens_details.reasoning_tokens",
                     "response.body.usage.input_tokens_details.cached_tokens",
                     "response.body.usage.output_tokens_details.reasoning_tokens", "response.body.error.code",
                     "response.body.error.type", "response.body.error.message"]
OPENAI_BATCH_NAMES = {"id", "custom_id", "error.code", "error.type", "error.message", "response.request_id",
                      "response.body.id", "response.body.object", "response.body.model", "response.body.service_tier",
                      "response.body.choices.0.finish_reason", "response.body.error.code", "response.body.error.type",
                      "response.body.error.message"}


@st.composite
def openai_batch_lines(draw):
    from helpers import DATA, read_jsonl
    return _fuzzed(draw, read_jsonl(DATA / "providers" / "openai_batch_output.jsonl"), OPENAI_BATCH_READ,
                   OPENAI_BATCH_NAMES, "response.body.created", "id", "batch_req_f", times=epoch)


@differential
@given(lines=openai_batch_lines(), start=st.sampled_from([None, "2025-03-04T17:00:00.250001+02:00"]))
def test_fuzzed_openai_batch_lines_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, lines, start):
    """As the Helicone test above, for an OpenAI Batch output file (with and without --start)."""
    from datetime import datetime
    f = tmp_path_factory.mktemp("openai_batch") / "out.jsonl"
    f.write_text("".join(json.dumps(r, default=str) + "\n" for r in lines))
    opts = {"model": "gpt-4o-mini", "start": datetime.fromisoformat(start) if start else None}
    _same_by_sql_and_python(f, monkeypatch, "openai_batch_fast_source", **opts)


ANTHROPIC_BATCH_READ = ["custom_id", "result", "result.type", "result.message", "result.message.id",
                        "result.message.model", "result.message.stop_reason", "result.message.usage",
                        "result.message.usage.input_tokens", "result.message.usage.output_tokens",
                        "result.message.usage.cache_read_input_tokens",
                        "result.message.usage.cache_creation_input_tokens",
                        "result.message.usage.cache_creation.ephemeral_5m_input_tokens",
                        "result.message.usage.cache_creation.ephemeral_1h_input_tokens",
                        "result.message.usage.service_tier", "result.message.usage.server_tool_use",
                        "result.message.usage.server_tool_use.web_search_requests", "result.error.error.type",
                        "result.error.error.message", "result.error.type"]
ANTHROPIC_BATCH_NAMES = {"custom_id", "result.type", "result.message.id", "result.message.model",
                         "result.message.stop_reason", "result.message.usage.service_tier", "result.error.error.type",
                         "result.error.error.message", "result.error.type"}


@st.composite
def anthropic_batch_lines(draw):
    from helpers import DATA, read_jsonl
    return _fuzzed(draw, read_jsonl(DATA / "providers" / "anthropic_batch_results.jsonl"), ANTHROPIC_BATCH_READ,
                   ANTHROPIC_BATCH_NAMES, "", "result.message.id", "msg_f")


@differential
@given(lines=anthropic_batch_lines())
def test_fuzzed_anthropic_batch_lines_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, lines):
    """As the Helicone test above, for a Message Batches results file (--start and --model given)."""
    from datetime import datetime
    f = tmp_path_factory.mktemp("anthropic_batch") / "results.jsonl"
    f.write_text("".join(json.dumps(r, default=str) + "\n" for r in lines))
    opts = {"model": "claude-3-5-haiku-20241022", "start": datetime.fromisoformat("2025-03-04T15:00:00")}
    _same_by_sql_and_python(f, monkeypatch, "anthropic_batch_fast_source", **opts)


def test_a_server_tool_use_with_a_null_count_is_kept_as_written_by_sql_and_by_python(tmp_path, monkeypatch):
    """Found by a 150-example run: usage.server_tool_use {"web_search_requests": null} was {} in the SQL reading's
    attrs (json_merge_patch drops nulls) and itself in the Python reading's. Both keep it as the file wrote it."""
    from datetime import datetime

    from helpers import DATA
    lines = [json.loads(ln) for ln in (DATA / "providers" / "anthropic_batch_results.jsonl").read_text().splitlines()]
    line = next(ln for ln in lines if ln["result"]["type"] == "succeeded")
    line["result"]["message"]["usage"]["server_tool_use"] = {"web_search_requests": None}
    f = tmp_path / "results.jsonl"
    f.write_text(json.dumps(line) + "\n")
    opts = {"start": datetime.fromisoformat("2025-03-04T15:00:00")}
    _same_by_sql_and_python(f, monkeypatch, "anthropic_batch_fast_source", **opts)
    _, rows = _stored_rows(f, monkeypatch, False, "anthropic_batch_fast_source", **opts)
    assert rows[0]["attrs"]["server_tool_use"] == {"web_search_requests": None}


# ---------------------------------------------------------------- LiteLLM's spend logs (GET /spend/logs JSON) read in
# SQL against the Python reading: the fields _litellm_row reads, nested in metadata and response, fuzzed

LITELLM_READ = ["request_id", "startTime", "endTime", "completionStartTime", "request_duration_ms", "model",
                "model_group", "spend", "prompt_tokens", "completion_tokens", "cache_hit", "custom_llm_provider",
                "status", "team_id", "user", "api_key", "metadata", "metadata.status", "metadata.service_tier",
                "metadata.usage_object", "metadata.usage_object.prompt_tokens_details.cached_tokens",
                "metadata.usage_object.prompt_tokens_details.cache_write_tokens",
                "metadata.usage_object.cache_read_input_tokens", "metadata.usage_object.cache_creation_input_tokens",
                "metadata.usage_object.completion_tokens_details.reasoning_tokens",
                "metadata.usage_object.cache_creation.ephemeral_1h_input_tokens",
                "metadata.additional_usage_values", "metadata.error_information.error_class",
                "metadata.error_information.llm_provider", "response", "response.service_tier",
                "response.usage.cache_read_input_tokens", "proxy_server_request.body.service_tier"]
LITELLM_NAMES = {"request_id", "model", "model_group", "cache_hit", "custom_llm_provider", "status", "team_id", "user",
                 "api_key", "metadata.status", "metadata.service_tier", "metadata.error_information.error_class",
                 "metadata.error_information.llm_provider", "response.service_tier",
                 "proxy_server_request.body.service_tier"}
litellm_flag = st.sampled_from(["None", "True", "False", "true", " false ", "", True, False, None, 1, 0, "yes"])


@st.composite
def litellm_rows(draw):
    from helpers import DATA
    recs = _fuzzed(draw, json.loads((DATA / "litellm" / "spend_logs.json").read_text()), LITELLM_READ,
                   LITELLM_NAMES, "startTime", "request_id", "chatcmpl-f")
    for rec in recs:
        if draw(st.booleans()):
            rec["cache_hit"] = draw(litellm_flag)
    return _timed_ends(draw, recs)


# half as many: each reading plans LiteLLM's SQL, about 0.4 s (a second planned where the file goes to Python)
@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)
@given(recs=litellm_rows(), shape=st.sampled_from(["array", "lines"]))
def test_fuzzed_litellm_spend_logs_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, recs, shape):
    """As the Helicone test above, for LiteLLM's spend logs as GET /spend/logs writes them (an array) and a row a line."""
    _same_by_sql_and_python(_records_file(tmp_path_factory.mktemp("litellm"), recs, shape), monkeypatch,
                            "litellm_fast_source")


def test_an_end_time_centuries_away_is_rejected_with_the_same_figure_by_sql_and_by_python(tmp_path, monkeypatch):
    """Found by the 400-example run: an endTime of 9999-12-31 (2.5e17 µs after the start, past 2**53) gave
    total_ms 251661203998270.03 in SQL (µs as a double / 1e6 * 1000) and ...270.0 in Python (timedelta's exact
    division): the same reject, a reason that differed."""
    from helpers import DATA
    rec = json.loads((DATA / "litellm" / "spend_logs.json").read_text())[0]
    rec.update(startTime="2025-03-04T14:00:00.730000Z", completionStartTime="2025-03-04T14:00:00.731000Z",
               endTime="9999-12-31T23:59:59Z")
    path = _records_file(tmp_path, [rec], "array")
    _same_by_sql_and_python(path, monkeypatch, "litellm_fast_source")
    (_, _, rejected, _, rejects), _ = _stored_rows(path, monkeypatch, False, "litellm_fast_source")
    us = 253402300799_000000 - 1741096800_730000                  # the two times in µs since the epoch
    assert rejected == 1 and rejects[0]["reason"] == f"total_ms: {us / 1e6 * 1000!r} is above the limit of 604,800,000"


def test_a_duration_in_another_scripts_digits_is_no_number_by_sql_or_by_python(tmp_path, monkeypatch):
    """Found by a 150-example run: request_duration_ms '\u0661' (Arabic-Indic one) is 1.0 to Python's float() and no
    number to DuckDB's TRY_CAST: Python stored total_ms 1, SQL the endTime - startTime of 427 ms. Both read 427."""
    from helpers import DATA
    rec = json.loads((DATA / "litellm" / "spend_logs.json").read_text())[0]
    rec.update(startTime="2025-03-04T14:00:00Z", endTime="2025-03-04T14:00:00.427000Z", request_duration_ms="\u0661")
    path = _records_file(tmp_path, [rec], "array")
    _same_by_sql_and_python(path, monkeypatch, "litellm_fast_source")
    (_, ingested, *_), rows = _stored_rows(path, monkeypatch, False, "litellm_fast_source")
    assert ingested == 1 and rows[0]["total_ms"] == 427.0


# ---------------------------------------------------------------- Langfuse observations (the UI's JSON Lines export)
# read in SQL against the Python reading: the fields _langfuse_row reads, usage and cost details among them, fuzzed

LANGFUSE_READ = ["id", "type", "traceId", "startTime", "endTime", "completionStartTime", "model", "providedModelName",
                 "usageDetails", "usageDetails.input", "usageDetails.output", "usageDetails.input_cached_tokens",
                 "usageDetails.input_cache_creation_1h", "usageDetails.output_reasoning_tokens", "usageDetails.total",
                 "costDetails", "costDetails.total", "costDetails.input", "totalCost", "level", "statusMessage",
                 "timeToFirstToken", "latency", "userId", "metadata", "metadata.ls_provider",
                 "metadata.attributes.provider", "usage", "usage.input", "name"]
LANGFUSE_NAMES = {"id", "type", "traceId", "model", "providedModelName", "level", "statusMessage", "userId",
                  "metadata.ls_provider", "metadata.attributes.provider", "name"}


@st.composite
def langfuse_observations(draw):
    from helpers import DATA, read_jsonl
    gens = [r for r in read_jsonl(DATA / "langfuse" / "ui_export_observations.jsonl") if r["type"] == "GENERATION"]
    return _timed_ends(draw, _fuzzed(draw, gens, LANGFUSE_READ, LANGFUSE_NAMES, "startTime", "id", "obs-f"))


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)       # as LiteLLM's: a large SQL to plan
@given(recs=langfuse_observations(), shape=st.sampled_from(["array", "lines"]))
def test_fuzzed_langfuse_observations_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, recs, shape):
    """As the Helicone test above, for Langfuse observations as the UI exports them (a line each) and as an array."""
    _same_by_sql_and_python(_records_file(tmp_path_factory.mktemp("langfuse"), recs, shape), monkeypatch,
                            "langfuse_fast_source")


# ---------------------------------------------------------------- the CSV exports of the same two tools, each cell the
# text of a fuzzed record's value: LiteLLM_SpendLogs as psql's \copy writes it, Langfuse observations as the UI does

def _cells_file(folder, recs: list[dict], header: list[str], cell) -> object:
    """``recs`` as a CSV with ``header`` (a field a record lacks: an empty cell), each value written by ``cell``."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for rec in recs:
        w.writerow([cell(k, rec[k]) if k in rec else "" for k in header])
    f = folder / "export.csv"
    f.write_text(buf.getvalue())
    return f


def _psql_cell(key: str, v) -> str:
    """A value as psql's \\copy ... CSV writes its column: JSON columns as JSON text, NULL as nothing."""
    return ("" if v is None else json.dumps(v) if isinstance(v, dict | list) else str(v).lower() if isinstance(v, bool)
            else str(v))


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 4)   # a quarter: the JSON test plans the same SQL
@given(recs=litellm_rows())
def test_fuzzed_litellm_csv_rows_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, recs):
    """As the LiteLLM test above, for the psql CSV of LiteLLM_SpendLogs: the same fuzzed rows, each cell the text
    psql writes for the value (metadata, response and the other JSON columns as JSON text)."""
    header = list(dict.fromkeys(k for rec in recs for k in rec))
    f = _cells_file(tmp_path_factory.mktemp("litellm-csv"), recs, header, _psql_cell)
    _same_by_sql_and_python(f, monkeypatch, "litellm_fast_source")


LANGFUSE_TIMES = {"startTime", "endTime", "completionStartTime", "createdAt", "updatedAt", "traceTimestamp"}


@st.composite
def langfuse_csv_cells(draw):
    """Fuzzed observations and how the UI's CSV writes each value: a time as JSON text (its own quotes) or not, an
    object or a list as JSON, a number and a boolean as JavaScript spells them, null as nothing."""
    recs = draw(langfuse_observations())
    quoted = draw(st.booleans())

    def cell(key: str, v) -> str:
        if v is None:
            return ""
        if isinstance(v, str):
            return json.dumps(v) if key in LANGFUSE_TIMES and quoted else v
        return str(v).lower() if isinstance(v, bool) else json.dumps(v)
    return recs, cell


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 4)   # a quarter: the JSON test plans the same SQL
@given(made=langfuse_csv_cells())
def test_fuzzed_langfuse_csv_rows_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, made):
    """As the Langfuse test above, for the UI's CSV export (its columns, the fixture's header): the same fuzzed
    observations, each cell the text the UI writes for the value."""
    from helpers import DATA
    recs, cell = made
    header = next(csv.reader(io.StringIO((DATA / "langfuse" / "ui_export_observations.csv").read_text())))
    f = _cells_file(tmp_path_factory.mktemp("langfuse-csv"), recs, header, cell)
    _same_by_sql_and_python(f, monkeypatch, "langfuse_fast_source")


def test_a_cost_total_of_false_is_no_amount_by_sql_or_by_python(tmp_path, monkeypatch):
    """Found by the 400-example run: costDetails.total false read as $0 by Python (float(False)), which set the row
    unpriced, while SQL cannot read false as a number and summed the cost types: the row's cost differed."""
    from helpers import DATA, read_jsonl
    rec = next(r for r in read_jsonl(DATA / "langfuse" / "ui_export_observations.jsonl") if r["type"] == "GENERATION")
    rec["costDetails"] = {"input": 3.39e-05, "output": 0.000108, "input_cached_tokens": 7.68e-05, "total": False}
    header = next(csv.reader(io.StringIO((DATA / "langfuse" / "ui_export_observations.csv").read_text())))
    (tmp_path / "lines").mkdir()
    jsonl = _records_file(tmp_path / "lines", [rec], "lines")
    ui_csv = _cells_file(tmp_path, [rec], header, lambda k, v: "" if v is None else v if isinstance(v, str) else
                         str(v).lower() if isinstance(v, bool) else json.dumps(v))
    for f in (jsonl, ui_csv):
        _same_by_sql_and_python(f, monkeypatch, "langfuse_fast_source")
        _, rows = _stored_rows(f, monkeypatch, True, "langfuse_fast_source")
        assert rows[0]["cost_usd"] == 3.39e-05 + 0.000108 + 7.68e-05                     # the types, in their order


# ---------------------------------------------------------------- Mooncake traces and the gateway's [ROUTE] log: the SQL
# reading over DuckDB's line reader against the Python one (each reader called with fast=False)

MOONCAKE_START = "2025-01-01T00:00:00"
mooncake_number = st.one_of(st.integers(-10, 10 ** 6), st.integers(-(2 ** 64), 2 ** 64),
                            st.floats(-1e6, 1e6), st.sampled_from([0, -0.0, 1.5, 2 ** 53, 2 ** 53 + 2, 1e16]),
                            helicone_texts, st.none(), st.booleans())
# block hashes shared across requests (prefix reuse), repeated within one, odd ones now and then
mooncake_hashes = st.one_of(st.lists(st.integers(0, 6), max_size=6),
                            st.lists(st.one_of(st.integers(-2, 6), st.floats(0, 3), text, st.none(),
                                               st.lists(st.integers(0, 2), max_size=2)), max_size=4),
                            value)


@st.composite
def mooncake_lines(draw):
    """Half the files of the trace's own types (integers, block hashes shared between requests: the SQL reading's
    cases, to the edges of its integers), half with values of any type and lines that are no record."""
    typed = draw(st.booleans())
    whole = st.one_of(st.integers(-10, 10 ** 7), st.integers(-(2 ** 63), 2 ** 63), st.sampled_from([2 ** 53, 2 ** 53 + 1]))
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        rec = {"timestamp": draw(st.one_of(st.integers(0, 10 ** 7), whole if typed else mooncake_number)),
               "input_length": draw(st.one_of(st.integers(0, 5000), whole if typed else mooncake_number)),
               "output_length": draw(st.one_of(st.integers(0, 900), whole if typed else mooncake_number)),
               "hash_ids": draw(st.lists(st.integers(0, 6), max_size=6) if typed else mooncake_hashes)}
        for k in draw(st.lists(st.sampled_from(list(rec)), max_size=1 if typed else 2, unique=True)):
            del rec[k]
        if draw(st.booleans()):
            rec[draw(st.sampled_from(["session", "timestamp_ms", "prefix_blocks_reused", "x"]))] = draw(value)
        keys = list(rec)
        if draw(st.booleans()):
            keys = draw(st.permutations(keys))
        lines.append(json.dumps({k: rec[k] for k in keys}, allow_nan=True))
        if not typed and draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from(["", "  ", "[1, 2]", "null", '"text"', "{", "7"])))
    return lines


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)   # CI's share; 400 before a change
@given(lines=mooncake_lines(), tenant=st.sampled_from([None, "acme"]))
def test_fuzzed_mooncake_traces_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, lines, tenant):
    """As the Helicone test above, for a Mooncake trace (a record a line; times relative to --start, prefix-block
    hashes shared between requests)."""
    from datetime import datetime
    f = tmp_path_factory.mktemp("mooncake") / "trace.jsonl"
    f.write_text("".join(x + "\n" for x in lines))
    _same_by_sql_and_python(f, monkeypatch, "read:mooncake", format="mooncake", model="kimi-k2",
                            tenant=tenant, start=datetime.fromisoformat(MOONCAKE_START))


def test_a_mooncake_length_past_int64_or_a_double_is_rejected_by_name_not_a_crash(tmp_path, monkeypatch):
    """Found by a 150-example run: an input_length of -9223372036854776833 (below int64) or -9007199254740994 (past
    2^53) stopped both readings with pyarrow's error (the prefix cache took int() of the length's double). Each
    row is rejected naming the field; the rest of the file loads, the same by SQL and by Python."""
    from datetime import datetime
    f = tmp_path / "trace.jsonl"
    f.write_text('{"timestamp": 0, "input_length": -9223372036854776833, "output_length": 0, "hash_ids": []}\n'
                 '{"timestamp": 5, "input_length": -9007199254740994, "output_length": 0, "hash_ids": []}\n'
                 '{"timestamp": 9, "input_length": 100, "output_length": 5, "hash_ids": [1]}\n')
    opts = {"format": "mooncake", "model": "kimi-k2", "start": datetime.fromisoformat(MOONCAKE_START)}
    _same_by_sql_and_python(f, monkeypatch, "read:mooncake", **opts)
    (_, ingested, rejected, _, rejects), _ = _stored_rows(f, monkeypatch, False, "read:mooncake", **opts)
    assert (ingested, rejected) == (1, 2)
    assert [r["row"] for r in rejects] == [1, 2] and all(r["field"] == "input_tokens" for r in rejects)


def test_a_mooncake_time_past_2_53_ms_is_the_same_to_the_microsecond_by_sql_and_by_python(tmp_path, monkeypatch):
    """Found by a 150-example run: a timestamp of 9007199254740994 ms read .994048 by SQL (to_milliseconds goes
    through a double) and .994 by Python; an odd one past 2^53 lost its last ms in Python's float. Both add whole
    milliseconds exactly now; the row is rejected by both naming the same time."""
    from datetime import datetime
    f = tmp_path / "trace.jsonl"
    f.write_text('{"timestamp": 9007199254740995, "input_length": 0, "output_length": 0, "hash_ids": []}\n')
    opts = {"format": "mooncake", "model": "kimi-k2", "start": datetime.fromisoformat(MOONCAKE_START)}
    _same_by_sql_and_python(f, monkeypatch, "read:mooncake", **opts)
    (_, _, rejected, _, rejects), _ = _stored_rows(f, monkeypatch, False, "read:mooncake", **opts)
    assert rejected == 1 and rejects[0]["reason"].startswith("ts: 287451-10-14 08:59:00.995 is outside")


GATEWAY_TIMES = ["2026-11-29 13:36:53,082", "2026-11-29T13:36:53.5", "2026-11-29 13:36:53", "2026-02-30 10:00:00,000",
                 "2026-11-29 24:00:00,000", "0001-01-01 00:00:00,001", "9999-12-31 23:59:59,999999999"]
gateway_value = st.one_of(st.sampled_from(["fast", "slow", "0.00", "62.6", "1e3", "-5", "nan", "inf", "1_0", "2125.25",
                                           "2125.2505", "True", '"a b"', "x=y", "\\n", ""]),
                          st.integers(-10, 10 ** 6).map(str), st.floats(0, 1e5).map(str),
                          st.text(alphabet="ab=_ .\"\t", max_size=5))
gateway_key = st.sampled_from(["target", "len", "route_ms", "queue_ms", "service_ms", "total_ms", "cost", "inject",
                               "tenant", "relative_cost", "logged_at", "slow_inject", "a-b"])


@st.composite
def gateway_lines(draw):
    """[ROUTE] lines as the gateway logs them (the usual keys in order), some with a pair changed, dropped, added
    or repeated, odd separators and times, and other log lines between them."""
    usual = ["target", "len", "route_ms", "queue_ms", "service_ms", "total_ms", "cost", "inject"]
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        pairs = [[k, draw(st.sampled_from(["fast", "slow"])) if k == "target" else
                  draw(st.sampled_from(["False", "True"])) if k == "inject" else
                  str(draw(st.integers(0, 3000))) if k == "len" else f"{draw(st.floats(0, 5000)):.1f}"]
                 for k in usual]
        for _ in range(draw(st.integers(0, 3))):
            how = draw(st.sampled_from(["value", "drop", "add"]))
            i = draw(st.integers(0, len(pairs) - 1)) if pairs else 0
            if how == "value" and pairs:
                pairs[i][1] = draw(gateway_value)
            elif how == "drop" and pairs:
                del pairs[i]
            else:
                pairs.insert(i, [draw(gateway_key), draw(gateway_value)])
        sep = draw(st.sampled_from([" ", " ", " ", "  ", "\t"]))
        when = draw(st.one_of(st.sampled_from(GATEWAY_TIMES),
                              st.datetimes().map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3])))
        lines.append(f"{when} [ROUTE] " + sep.join(f"{k}={v}" for k, v in pairs))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["INFO:     127.0.0.1:5000 - \"POST /chat HTTP/1.1\" 200 OK", "",
                                               "2026-11-29 13:36:53,082 [ROUTE]", "[ROUTE] target=fast",
                                               "Traceback (most recent call last):"])))
    return lines


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)   # CI's share; 400 before a change
@given(lines=gateway_lines())
def test_fuzzed_gateway_logs_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, lines):
    """As the Helicone test above, for the gateway's [ROUTE] log: the shape reading (every line the commonest
    shape), the general one and Python's."""
    f = tmp_path_factory.mktemp("gateway") / "gateway.log"
    f.write_text("".join(x + "\n" for x in lines))
    _same_by_sql_and_python(f, monkeypatch, "read:gateway-log", format="gateway-log")


# ---------------------------------------------------------------- LLMPerf's individual responses: the SQL reading
# (streamed, the closed-loop replay beside it) against read_llmperf

LLMPERF_READ = ["error_code", "error_msg", "inter_token_latency_s", "ttft_s", "end_to_end_latency_s",
                "request_output_throughput_token_per_s", "number_total_tokens", "number_output_tokens",
                "number_input_tokens"]


@st.composite
def llmperf_records(draw):
    from helpers import DATA
    recs = json.loads((DATA / "llmperf" / "individual" / "bedrock_13b.json").read_text())[:6]
    return _fuzzed(draw, recs, LLMPERF_READ, {"error_msg"}, "end_to_end_latency_s", "GEN_TEXT", "text ")


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)   # CI's share; 400 before a change
@given(recs=llmperf_records(), concurrency=st.sampled_from([None, 1, 3]))
def test_fuzzed_llmperf_responses_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, recs,
                                                                      concurrency):
    """As the Helicone test above, for LLMPerf's individual responses (a JSON array), with --start and --model, and
    a summary beside them (its concurrency: the replay's clients) or none."""
    from datetime import datetime
    folder = tmp_path_factory.mktemp("llmperf")
    f = folder / "run_individual_responses.json"
    f.write_text(json.dumps(recs, allow_nan=True))
    if concurrency is not None:
        (folder / "run_summary.json").write_text(json.dumps({"num_concurrent_requests": concurrency}))
    _same_by_sql_and_python(f, monkeypatch, "read:llmperf", format="llmperf", model="llama-2-13b-chat",
                            start=datetime.fromisoformat(MOONCAKE_START))


# ---------------------------------------------------------------- vllm bench serve --save-detailed: the streamed SQL
# reading (the per-request lists written to series files, joined by position) against read_vllm_bench

VLLM_READ = ["date", "duration", "model_id", "request_rate", "ttfts.0", "ttfts.3", "latencies.1", "latencies.2",
             "input_lens.2", "output_lens.0", "start_times.0", "start_times.4", "errors.1", "errors.2", "itls.0",
             "itls.5.0", "queue_times.0", "generated_texts.2"]


@st.composite
def vllm_results(draw):
    from helpers import DATA
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    return _fuzzed(draw, doc, VLLM_READ, {"date", "model_id", "errors.1", "errors.2", "generated_texts.2"},
                   "start_times.0", "label", "run ")[0]


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)   # CI's share; 400 before a change
@given(doc=vllm_results(), start=st.sampled_from([None, "2025-03-04T14:00:00"]))
def test_fuzzed_vllm_results_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, doc, start):
    """As the Helicone test above, for a vllm bench serve result (one document), with and without --start."""
    from datetime import datetime
    f = tmp_path_factory.mktemp("vllm") / "result.json"
    f.write_text(json.dumps(doc, allow_nan=True))
    _same_by_sql_and_python(f, monkeypatch, "read:vllm-bench", format="vllm-bench",
                            start=datetime.fromisoformat(start) if start else None)


# ---------------------------------------------------------------- the canonical schema's typed reading (DuckDB's readers
# with the columns' types) against its checked one (every value read as text and checked, as a --map reads it)

canonical_value = st.one_of(st.integers(0, 5000), st.floats(0, 1e4), value,
                            st.sampled_from(["12", " 7 ", "12.5", "0x10", "1e3", "true", "", "NaN", "-0", "1_000"]))


@st.composite
def canonical_records(draw):
    """Records of the canonical schema, each field now and then a value of another type or an odd spelling."""
    out = []
    for i in range(draw(st.integers(1, 5))):
        rec = {"request_id": draw(st.one_of(st.just(f"r{i}"), st.none(), text)),
               "ts": draw(st.one_of(st.just(f"2026-11-20T10:0{i}:00Z"), ts)),
               "model": draw(st.one_of(st.just("gpt-4o"), text, st.none())),
               "cache_hit": draw(st.one_of(st.booleans(), st.none(), st.sampled_from(["true", "0", 1, "yes"]))),
               "status": draw(st.sampled_from(["ok", "error", None]))}
        for name in ("input_tokens", "output_tokens", "cached_input_tokens", "prompt_chars", "queue_ms", "total_ms",
                     "cost_usd"):
            if draw(st.booleans()):
                rec[name] = draw(canonical_value)
        out.append(rec)
    return out


@differential
@given(recs=canonical_records(), form=st.sampled_from(["jsonl", "array", "csv"]))
def test_fuzzed_canonical_files_store_the_same_typed_and_checked(tmp_path_factory, monkeypatch, recs, form):
    """A canonical file stores the same by its typed reading (a value that does not fit its type hands the file to
    the checked reading) as by the checked reading alone (a mapping: no typed reading): rows, counts, rejects."""
    folder = tmp_path_factory.mktemp("canonical")
    if form == "csv":
        names = list(dict.fromkeys(k for r in recs for k in r))
        f = folder / "r.csv"
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=names, lineterminator="\n")
        w.writeheader()
        for r in recs:
            w.writerow({k: "" if r.get(k) is None else str(r[k]).lower() if isinstance(r.get(k), bool) else r[k]
                        for k in names})
        f.write_text(buf.getvalue())
    else:
        f = _records_file(folder, recs, "array" if form == "array" else "lines")
    from finops.ingest import formats
    from finops.ingest.tabular import mapped_source
    typed = _stored_rows(f, monkeypatch, False)
    with monkeypatch.context() as m:        # the canonical reading's checked fallback alone
        m.setattr(formats, "_read_canonical", lambda con, p, o: mapped_source(con, p, o, hash_as_typed=True))
        checked = _stored_rows(f, monkeypatch, False)
    assert typed == checked, _differs(typed, checked)


def test_a_log_that_grew_a_bad_line_stores_its_rows_without_an_id_once(tmp_path):
    """A JSON Lines log without request ids, loaded, then loaded again after it grew a line with a bad count: the
    second file was read checked (the typed reading stops at the bad value), which hashed the rows' times as
    TIMESTAMPTZ where the typed reading had hashed them as TIMESTAMP, so both earlier rows were stored again."""
    rows = [{"ts": f"2026-11-20T10:0{i}:00Z", "model": "gpt-4o", "input_tokens": 10 + i, "output_tokens": 5}
            for i in range(2)]
    first, grown = tmp_path / "day.jsonl", tmp_path / "day-later.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in rows))
    grown.write_text(first.read_text() + json.dumps({**rows[0], "ts": "2026-11-20T10:05:00Z", "input_tokens": "abc"})
                     + "\n")
    for with_ids in (False, True):          # without ids: read checked both times; with: typed, then checked
        if with_ids:
            for f in (first, grown):
                f.write_text("".join(json.dumps({"request_id": None, **json.loads(line)}) + "\n"
                                     for line in f.read_text().splitlines()))
        con = store.connect(":memory:")
        ingest_path(con, first)
        again = ingest_path(con, grown)[0]
        assert (again.rows_read, again.rows_ingested, again.rows_rejected, again.duplicates_skipped) == (3, 0, 1, 2)
        assert [r["reason"] for r in again.rejects] == ["input_tokens: cannot read abc as a whole number"]
        assert store.row_count(con) == 2
        con.close()


def _grown_log(folder, form: str, new_field: bool = True) -> tuple[Path, Path, int]:
    """A log without request ids (some rows leave ttft_ms empty), and the same log grown by one line, which carries a
    field no earlier line has (a failure's ``error``) if ``new_field``: (the log, the grown log, its rows)."""
    rows = [{"ts": f"2026-11-20T10:0{i}:00Z", "model": "gpt-4o", "tenant": "acme", "input_tokens": 100 + i,
             "output_tokens": 5, "ttft_ms": None if i % 2 else 80.0 + i, "cost_usd": "0.0015"} for i in range(4)]
    failed = {**rows[0], "ts": "2026-11-20T10:09:00Z", "ttft_ms": None, **({"error": "timeout"} if new_field else {})}
    first, grown = folder / f"gw.{form}", folder / f"gw-later.{form}"
    for f, recs in ((first, rows), (grown, [*rows, failed])):
        if form == "jsonl":
            f.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in recs))
        else:
            names = list(dict.fromkeys(k for r in recs for k in r))
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=names, lineterminator="\n")
            w.writeheader()
            w.writerows({k: "" if r.get(k) is None else r[k] for k in names} for r in recs)
            f.write_text(buf.getvalue())
    return first, grown, len(rows)


@pytest.mark.parametrize("form", ["jsonl", "csv"])
def test_a_log_that_grew_a_field_stores_its_rows_without_an_id_once(tmp_path, form):
    """A gateway log without request ids, loaded, then loaded again after a new line brought a field no earlier
    line had (a JSON key, a CSV column): every earlier row then read that field as empty, which changed its content
    hash, and all of them were stored (and their spend counted) a second time."""
    first, grown, n = _grown_log(tmp_path, form)
    con = store.connect(":memory:")
    ingest_path(con, first)
    again = ingest_path(con, grown)[0]
    assert (again.rows_read, again.rows_ingested, again.duplicates_skipped) == (n + 1, 1, n)
    count, cost = con.execute("SELECT count(*), sum(cost_usd) FROM requests").fetchall()[0]
    assert count == n + 1 and cost == pytest.approx(5 * 0.0015, abs=1e-12)     # five requests of $0.0015
    from finops.ingest import loader
    assert store.get_setting(con, loader.CONTENT_HASHES_SINCE) == 1     # no earlier version's hashes to look up
    con.close()


def test_a_csv_read_by_field_paths_that_grew_a_column_stores_its_rows_once(tmp_path):
    """The same for a CSV whose cells hold JSON, read a record at a time by a field path (``--map
    input_tokens=usage.prompt``): an earlier record read the added column as empty and hashed otherwise."""
    from finops.ingest import IngestOptions

    head = "ts,model,usage\n"
    lines = [f'2026-11-20T10:0{i}:00Z,gpt-4o,"{{""prompt"": {100 + i}}}"' for i in range(3)]
    first, grown = tmp_path / "u.csv", tmp_path / "u-later.csv"
    first.write_text(head + "".join(f"{line}\n" for line in lines))
    grown.write_text(head.replace("\n", ",error\n") + "".join(f"{line},\n" for line in lines)
                     + '2026-11-20T10:09:00Z,gpt-4o,"{""prompt"": 7}",timeout\n')
    opts = IngestOptions(format="generic", mapping={"input_tokens": "usage.prompt"})
    con = store.connect(":memory:")
    ingest_path(con, first, opts)
    again = ingest_path(con, grown, opts)[0]
    assert (again.rows_read, again.rows_ingested, again.duplicates_skipped) == (4, 1, 3)
    assert con.execute("SELECT sum(input_tokens) FROM requests").fetchall() == [(100 + 101 + 102 + 7,)]
    con.close()


@pytest.mark.parametrize("form", ["jsonl", "csv"])
def test_a_log_whose_columns_moved_stores_its_rows_without_an_id_once(tmp_path, form):
    """The same log without request ids written again with its columns in another order (a CSV export that moved a
    column, a JSON writer that sorts its keys), then grown by a line: the fields were hashed in the file's order,
    so every earlier row was stored (and its spend counted) a second time."""
    first, grown, n = _grown_log(tmp_path, form)
    moved = tmp_path / f"gw-moved.{form}"
    if form == "jsonl":
        moved.write_text("".join(json.dumps(dict(reversed(json.loads(line).items()))) + "\n"
                                 for line in grown.read_text().splitlines()))
    else:
        table = list(csv.reader(io.StringIO(grown.read_text())))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([list(reversed(r)) for r in table])
        moved.write_text(buf.getvalue())
    con = store.connect(":memory:")
    ingest_path(con, first)
    again = ingest_path(con, moved)[0]
    assert (again.rows_read, again.rows_ingested, again.duplicates_skipped) == (n + 1, 1, n)
    assert con.execute("SELECT count(*), sum(input_tokens) FROM requests").fetchall() == [(n + 1, 100 + 101 + 102 + 103 + 100)]
    con.close()


@pytest.mark.parametrize("form", ["jsonl", "csv"])
def test_rows_stored_under_an_earlier_versions_content_hash_are_not_stored_again(tmp_path, monkeypatch, form):
    """A store an earlier version loaded hashed a row without an id from every column of its file, an empty field
    as NULL (tabular.legacy_text_sql's text, put back here as that version's reading; it noted no first batch of
    this version's hashes): the same rows read now, in the log grown by a line, are known by that hash and not
    stored again (the rows with an empty field hash otherwise now: without this, those were stored twice). A store
    this version loaded from the start never computes that hash (loader._earlier_hashes)."""
    from finops.ingest import loader, tabular
    from finops.sql import quote_ident

    def earlier(names, exprs):      # the earlier version's text: the STRUCT of all the file's columns
        return f"CAST(struct_pack({', '.join(f'{quote_ident(c)} := {x}' for c, x in zip(names, exprs, strict=True))}) AS VARCHAR)"

    first, grown, n = _grown_log(tmp_path, form, new_field=False)
    con = store.connect(":memory:")
    with monkeypatch.context() as m:
        m.setattr(tabular, "content_text_sql", earlier)
        m.setattr(tabular, "legacy_text_sql", lambda names, exprs: "CAST(NULL AS VARCHAR)")
        ingest_path(con, first)
    con.execute("DELETE FROM settings WHERE key = ?", [loader.CONTENT_HASHES_SINCE])     # an earlier version notes none
    old_ids = {r for (r,) in con.execute("SELECT request_id FROM requests").fetchall()}
    again = ingest_path(con, grown)[0]
    assert (again.rows_read, again.rows_ingested, again.duplicates_skipped) == (n + 1, 1, n)
    now = {r for (r,) in con.execute("SELECT request_id FROM requests").fetchall()}
    assert len(now) == n + 1 and old_ids < now          # the earlier rows kept their ids; one row added
    con.close()


def test_a_time_no_microsecond_count_holds_is_a_rejected_row_not_a_refused_file(tmp_path):
    """A time of 9.3e18 (or 1e300, or NaN) since the epoch stopped the whole load at the cast to microseconds
    ("the file does not parse"): the row is rejected by name and the others load."""
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps({"ts": 9.3e18, "model": "gpt-4o"}) + "\n" + json.dumps({"ts": "1e300", "model": "gpt-4o"})
                 + "\n" + json.dumps({"ts": 1763632800, "model": "gpt-4o"}) + "\n")
    con = store.connect(":memory:")
    r = ingest_path(con, f)[0]
    assert (r.rows_read, r.rows_ingested, r.rows_rejected) == (3, 1, 2)
    assert [x["reason"] for x in r.rejects] == ["ts: cannot read 9300000000000000000.0 as a time",
                                                "ts: cannot read 1e300 as a time"]
    assert str(con.execute("SELECT ts FROM requests").fetchone()[0]) == "2025-11-20 10:00:00"


# ---------------------------------------------------------------- a boolean where a number belongs: the canonical reading
# rejects a count of true ("cannot read true as a whole number"); the tools' readings took Python's float(True)

def _true_count_files(folder) -> list[tuple[str, object, str, dict]]:
    """One file of each format with a SQL reading, its first request's token count ``true``: ``(label, file, the
    switch of its SQL reading, options)``."""
    from datetime import datetime

    from helpers import DATA, read_jsonl

    def lines(name: str, recs: list) -> object:
        f = folder / name
        f.write_text("".join(json.dumps(r) + "\n" for r in recs))
        return f
    litellm = json.loads((DATA / "litellm" / "spend_logs.json").read_text())[:2]
    litellm[0]["prompt_tokens"] = True
    langfuse = [r for r in read_jsonl(DATA / "langfuse" / "ui_export_observations.jsonl") if r["type"] == "GENERATION"][:2]
    langfuse[0]["usageDetails"]["input"] = True
    helicone = json.loads((DATA / "providers" / "helicone_requests.json").read_text())
    helicone["data"] = helicone["data"][:2]
    helicone["data"][0]["prompt_tokens"] = True
    (folder / "helicone.json").write_text(json.dumps(helicone))
    openrouter = read_jsonl(DATA / "providers" / "openrouter_generations.jsonl")[:2]
    openrouter[0]["data"]["native_tokens_prompt"] = True
    openai = read_jsonl(DATA / "providers" / "openai_batch_output.jsonl")[:2]
    openai[0]["response"]["body"]["usage"]["prompt_tokens"] = True
    anthropic = read_jsonl(DATA / "providers" / "anthropic_batch_results.jsonl")[:2]
    anthropic[0]["result"]["message"]["usage"]["input_tokens"] = True
    (folder / "litellm").mkdir()
    return [("litellm", _records_file(folder / "litellm", litellm, "array"), "litellm_fast_source", {}),
            ("langfuse", lines("langfuse.jsonl", langfuse), "langfuse_fast_source", {}),
            ("helicone", folder / "helicone.json", "helicone_fast_source", {}),
            ("openrouter", lines("openrouter.jsonl", openrouter), "openrouter_fast_source", {}),
            ("openai-batch", lines("openai.jsonl", openai), "openai_batch_fast_source", {"model": "gpt-4o-mini"}),
            ("anthropic-batch", lines("anthropic.jsonl", anthropic), "anthropic_batch_fast_source",
             {"model": "claude-3-5-haiku-20241022", "start": datetime.fromisoformat("2025-03-04T15:00:00")})]


def test_a_token_count_of_true_is_a_rejected_row_by_sql_and_by_python_as_in_the_canonical_reading(tmp_path,
                                                                                                  monkeypatch):
    """Each format stored ``"prompt_tokens": true`` as 1 input token by both readings (Python's float(True); the
    Batch APIs' typed reading's DOUBLE column; the SQL readings' 'true' as '1'), where a canonical file's count
    of true is a rejected row. Now each rejects that request by name, and the other loads."""
    reasons = {"langfuse": "input_tokens: cannot read input=true as a whole number"}
    for label, f, switch, options in _true_count_files(tmp_path):
        _same_by_sql_and_python(f, monkeypatch, switch, **options)
        (read, ingested, rejected, _, rejects), rows = _stored_rows(f, monkeypatch, False, switch, **options)
        assert (read, ingested, rejected) == (2, 1, 1), label
        assert rejects[0]["reason"] == reasons.get(label, "input_tokens: cannot read true as a whole number"), label
        assert rejects[0]["row"] == 1 and rejects[0]["field"] == "input_tokens", label



def test_a_canonical_json_number_the_typed_reading_cast_is_rejected_by_name_as_the_checked_reading_does(tmp_path,
                                                                                                       monkeypatch):
    """The typed reading of a canonical JSON Lines file (DuckDB's JSON reader with the columns' types) stored a
    count of true as 1, 12.5 as 12, "0x10" as 16 and a cost of true as $1, where the checked reading (a CSV, or
    the same file mapped) rejects each row by name. Now the typed reading reads them as the checked one does."""
    def rec(i: int, **fields) -> dict:
        return {"request_id": f"r{i}", "ts": f"2025-03-04T14:00:0{i}", "model": "gpt-4o-mini", "input_tokens": 10,
                "output_tokens": 5, "cost_usd": 0.25, **fields}
    recs = [rec(1, input_tokens=True), rec(2, input_tokens=12.5), rec(3, output_tokens="0x10"),
            rec(4, cost_usd=True), rec(5, input_tokens=12.0, output_tokens="7", cost_usd=" 0.5")]
    f = tmp_path / "canonical.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    from finops.ingest import formats
    from finops.ingest.tabular import mapped_source
    typed = _stored_rows(f, monkeypatch, False)
    with monkeypatch.context() as m:        # the canonical reading's checked fallback alone
        m.setattr(formats, "_read_canonical", lambda con, p, o: mapped_source(con, p, o, hash_as_typed=True))
        checked = _stored_rows(f, monkeypatch, False)
    assert typed == checked, _differs(typed, checked)
    (read, ingested, rejected, _, rejects), rows = typed
    assert (read, ingested, rejected) == (5, 1, 4)
    assert [r["reason"] for r in rejects] == [
        "input_tokens: cannot read true as a whole number", "input_tokens: cannot read 12.5 as a whole number",
        "output_tokens: cannot read 0x10 as a whole number", "cost_usd: cannot read true as a number"]
    assert [(r["input_tokens"], r["output_tokens"], r["cost_usd"]) for r in rows] == [(12, 7, 0.5)]


def test_a_length_or_latency_of_true_is_no_number_in_the_traces_and_benchmark_results(tmp_path, monkeypatch):
    """Mooncake's lengths and the benchmark results' counts and latencies read a value that is no number as
    unknown (text as well): true was 1 token, or a latency of 1 s (Python's float(True))."""
    from datetime import datetime

    from helpers import DATA
    start = datetime.fromisoformat(MOONCAKE_START)
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": true, "output_length": 5, "hash_ids": [1]}\n'
                     '{"timestamp": 5, "input_length": 700, "output_length": 5, "hash_ids": [1]}\n')
    llmperf = json.loads((DATA / "llmperf" / "individual" / "bedrock_13b.json").read_text())[:1]
    llmperf[0].update(number_input_tokens=True, ttft_s=True)
    (tmp_path / "llmperf").mkdir()
    (tmp_path / "llmperf" / "run_individual_responses.json").write_text(json.dumps(llmperf))
    vllm = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    vllm["input_lens"][0], vllm["ttfts"][0] = True, True
    (tmp_path / "vllm.json").write_text(json.dumps(vllm))
    for f, fmt, options in ((trace, "mooncake", {"model": "kimi-k2", "start": start}),
                            (tmp_path / "llmperf" / "run_individual_responses.json", "llmperf",
                             {"model": "llama-2-13b-chat", "start": start}),
                            (tmp_path / "vllm.json", "vllm-bench", {})):
        _same_by_sql_and_python(f, monkeypatch, f"read:{fmt}", format=fmt, **options)
        (_, ingested, rejected, _, _), rows = _stored_rows(f, monkeypatch, False, f"read:{fmt}", format=fmt, **options)
        first = min(rows, key=lambda r: r["ts"])
        assert rejected == 0 and first["input_tokens"] is None, fmt
        if fmt != "mooncake":
            assert first["ttft_ms"] is None, fmt


# ---------------------------------------------------------------- the readings with no second reading to compare
# against (OTel spans, Langfuse's API pages with their traces, the billing reports): any value of any type at any
# place of a real file's JSON loads, is rejected by row, or refuses the file naming it; nothing else is raised

def _paths(doc, at=()) -> list[tuple]:
    """Every place in a JSON document: each object's keys and each list's items, nested."""
    out = [at] if at else []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for k, v in items:
        out.extend(_paths(v, (*at, k)))
    return out


def _set(doc, path: tuple, v):
    *parents, last = path
    for k in parents:
        doc = doc[k]
    doc[last] = v


any_json = st.one_of(value, st.just({}), st.just([]), st.just([1, "a"]), st.just({"a": None}),
                     st.sampled_from(["2025-03-04T14:00:00Z", "1741096800", "-1", "1e300", "NaN", "null", "{}"]))


@st.composite
def mutated_docs(draw, docs: list):
    """Copies of ``docs`` (a file's JSON documents) with one to five places set to a value of any JSON type."""
    docs = json.loads(json.dumps(docs))
    paths = [(i, *p) for i, d in enumerate(docs) for p in _paths(d)]
    for p in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=5)):
        with contextlib.suppress(KeyError, IndexError, TypeError):     # a place an earlier change removed
            _set(docs, p, copy.deepcopy(draw(any_json)))   # st.just gives one object: a copy each time
    return docs


def _loads_or_refuses(f, **options) -> None:
    con = store.connect(":memory:")
    try:
        from finops.ingest import IngestOptions
        with contextlib.suppress(InputError):
            ingest_path(con, f, IngestOptions(**options))
    finally:
        con.close()


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)
@given(data=st.data())
def test_fuzzed_otel_spans_load_or_are_refused_by_name(tmp_path_factory, data):
    from helpers import DATA, read_jsonl
    source = data.draw(st.sampled_from(["otel_genai_spans.jsonl", "openinference_openai_spans.jsonl",
                                        "openllmetry_0_33_openai_spans.jsonl"]))
    docs = data.draw(mutated_docs(read_jsonl(DATA / source)))
    f = tmp_path_factory.mktemp("otel") / "spans.jsonl"
    f.write_text("".join(json.dumps(d, allow_nan=True) + "\n" for d in docs))
    _loads_or_refuses(f, format="otel")


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)
@given(data=st.data())
def test_fuzzed_langfuse_api_pages_with_traces_load_or_are_refused_by_name(tmp_path_factory, data):
    """Langfuse's v1 and v2 observations pages with the traces file beside them (the Python reading joins it)."""
    from helpers import DATA
    version = data.draw(st.sampled_from(["v1", "v2"]))
    folder = tmp_path_factory.mktemp("langfuse-api")
    for part in ("observations", "traces"):
        doc = json.loads((DATA / "langfuse" / f"api_{version}_{part}.json").read_text())
        doc = data.draw(mutated_docs([doc]))[0] if data.draw(st.booleans()) or part == "observations" else doc
        (folder / f"{part}.json").write_text(json.dumps(doc, allow_nan=True))
    _loads_or_refuses(folder / "observations.json")


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)
@given(data=st.data())
def test_fuzzed_billing_reports_load_or_are_refused_by_name(tmp_path_factory, data):
    """The OpenAI costs and usage buckets and Anthropic's cost and usage reports: loaded, or refused naming the
    bucket and field; a refused file leaves the billing lines as they were."""
    from finops.ingest.billing import load_billing_file
    from helpers import DATA
    source = data.draw(st.sampled_from(["openai_costs.json", "openai_usage_completions.json",
                                        "anthropic_cost_report.json", "anthropic_usage_report.json"]))
    doc = data.draw(mutated_docs([json.loads((DATA / "providers" / source).read_text())]))[0]
    f = tmp_path_factory.mktemp("billing") / source
    f.write_text(json.dumps(doc, allow_nan=True))
    con = store.connect(":memory:")
    try:
        before = con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0]
        try:
            load_billing_file(con, f)
        except InputError:
            assert con.execute("SELECT count(*) FROM billing_lines").fetchall()[0][0] == before
    finally:
        con.close()


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)
@given(data=st.data())
def test_fuzzed_litellm_pages_and_langfuse_blob_exports_load_or_are_refused_by_name(tmp_path_factory, data):
    """LiteLLM's /spend/logs/ui page ({"data": [...]}) and one spend-log payload, and Langfuse's blob-storage
    export (observations and traces in their folders): any value of any type at any place."""
    from helpers import DATA, read_jsonl
    folder = tmp_path_factory.mktemp("pages")
    source = data.draw(st.sampled_from(["litellm-ui", "litellm-payload", "langfuse-blob"]))
    if source == "langfuse-blob":
        blob = DATA / "langfuse" / "blob" / "proj-1"
        for part in ("observations", "traces"):
            lines = read_jsonl(next((blob / part).glob("*.jsonl")))
            (folder / part).mkdir()
            (folder / part / "2025-03-04T15-00-00.jsonl").write_text("".join(
                json.dumps(x, allow_nan=True) + "\n" for x in data.draw(mutated_docs(lines))))
        _loads_or_refuses(folder / "observations" / "2025-03-04T15-00-00.jsonl")
        return
    name = "spend_logs_ui.json" if source == "litellm-ui" else "spend_logs_payload.json"
    doc = data.draw(mutated_docs([json.loads((DATA / "litellm" / name).read_text())]))[0]
    (folder / name).write_text(json.dumps(doc, allow_nan=True))
    _loads_or_refuses(folder / name, format="litellm")


# ---------------------------------------------------------------- canonical Parquet as other tools write it: each
# column of an Arrow type of its own (unsigned, narrow, decimal, dictionary, time zones, nested, binary, null), any
# values: the file loads with every row accounted for, or is refused naming it, and the store is as it was

def _arrow_types():
    import pyarrow as pa
    return [pa.int8(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(), pa.float64(), pa.decimal128(18, 6),
            pa.string(), pa.large_string(), pa.binary(), pa.bool_(), pa.timestamp("s"), pa.timestamp("ns"),
            pa.timestamp("us", tz="Asia/Kolkata"), pa.date32(), pa.list_(pa.int64()), pa.struct([("a", pa.int64())]),
            pa.dictionary(pa.int32(), pa.string()), pa.null()]


def _arrow_column(draw, typ, n: int):
    """``n`` values drawn for an Arrow type (None among them), as the column."""
    import datetime as dt
    import decimal

    import pyarrow as pa
    if pa.types.is_dictionary(typ):
        return pa.array([draw(st.one_of(st.none(), text)) for _ in range(n)], pa.string()).dictionary_encode()
    def one():
        if draw(st.integers(0, 5)) == 0 or pa.types.is_null(typ):
            return None
        if pa.types.is_integer(typ):
            info = {8: 127, 32: 2 ** 31 - 1, 64: 2 ** 63 - 1}[typ.bit_width]
            return draw(st.integers(0 if pa.types.is_unsigned_integer(typ) else -info - 1,
                                    2 ** 64 - 1 if pa.types.is_unsigned_integer(typ) else info))
        if pa.types.is_floating(typ):
            return draw(st.one_of(st.floats(width=32 if typ.bit_width == 32 else 64), st.sampled_from([0.0, 1e9, 2e9])))
        if pa.types.is_decimal(typ):
            return decimal.Decimal(draw(st.integers(-(10 ** 17), 10 ** 17))) / 10 ** 6
        if pa.types.is_string(typ) or pa.types.is_large_string(typ):
            return draw(st.one_of(text, st.sampled_from(TIMESTAMPS), st.sampled_from(["gpt-4o", "ok", "error", "12"])))
        if pa.types.is_binary(typ):
            return draw(st.binary(max_size=8))
        if pa.types.is_boolean(typ):
            return draw(st.booleans())
        if pa.types.is_timestamp(typ):
            return draw(st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2200, 1, 1)))
        if pa.types.is_date(typ):
            return draw(st.dates())
        if pa.types.is_list(typ):
            return draw(st.lists(st.integers(-5, 5), max_size=3))
        return {"a": draw(st.integers(-5, 5))}
    return pa.array([one() for _ in range(n)], typ)


@st.composite
def odd_parquet_tables(draw):
    import pyarrow as pa
    n = draw(st.integers(1, 5))
    cols = {"request_id": pa.array([f"p{i}" for i in range(n)]),
            "ts": pa.array(["2026-11-20T10:00:00Z"] * n), "model": pa.array(["gpt-4o"] * n)}
    for name in draw(st.lists(st.sampled_from(FIELDS + ["attrs", "provider", "route"]), min_size=1, max_size=6,
                              unique=True)):
        cols[name] = _arrow_column(draw, draw(st.sampled_from(_arrow_types())), n)
    return pa.table(cols)


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)
@given(table=odd_parquet_tables())
def test_fuzzed_parquet_types_load_or_are_refused_and_the_store_stays_whole(tmp_path_factory, table):
    import pyarrow.parquet as pq
    f = tmp_path_factory.mktemp("parquet") / "rows.parquet"
    pq.write_table(table, f)
    con = store.connect(":memory:")
    try:
        before = _state(con)
        try:
            [r] = ingest_path(con, f)
        except InputError as exc:
            assert str(exc).startswith("file rows.parquet"), exc
            assert _state(con) == before
        else:
            assert r.rows_read == table.num_rows
            assert r.rows_ingested + r.rows_rejected + r.duplicates_skipped == r.rows_read
            assert store.row_count(con) == r.rows_ingested
    finally:
        con.close()


# every JSON format's own example file (a few records of it), any value at any place, read by the format's SQL
# reading or its Python one: it loads, rejects by row or refuses the file by name; nothing else is raised
JSON_EXAMPLES = {
    "langfuse": ("langfuse_observations.json", {}), "otel": ("otel_genai_spans.jsonl", {}),
    "vllm-bench": ("vllm_bench_serve_detailed.json", {}),
    "llmperf": ("llmperf/individual/fireworks_70b.json", {"model": "llama-2-70b-chat", "start": "2025-01-01"}),
    "mooncake": ("mooncake_conversation_head300.jsonl", {"model": "kimi-k2", "start": "2025-01-01"}),
    "openai-batch": ("providers/openai_batch_output.jsonl", {}),
    "anthropic-batch": ("providers/anthropic_batch_results.jsonl", {}),
    "helicone": ("providers/helicone_requests.json", {}), "openrouter": ("providers/openrouter_generations.jsonl", {}),
    "litellm": ("litellm/spend_logs.json", {}),
}


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES)
@given(data=st.data())
def test_fuzzed_example_files_of_every_json_format_load_or_are_refused_by_name(tmp_path_factory, monkeypatch, data):
    from datetime import datetime

    from finops.ingest import IngestOptions
    from helpers import DATA, read_jsonl, use_python_reading
    fmt = data.draw(st.sampled_from(sorted(JSON_EXAMPLES)))
    source, options = JSON_EXAMPLES[fmt]
    path = DATA / source
    lines = path.suffix == ".jsonl"
    docs = read_jsonl(path)[:5] if lines else [json.loads(path.read_text())]
    if fmt == "llmperf":
        docs = [docs[0][:5]]
    docs = data.draw(mutated_docs(docs))
    f = tmp_path_factory.mktemp("examples") / Path(source).name
    f.write_text("".join(json.dumps(d, allow_nan=True) + "\n" for d in docs) if lines
                 else json.dumps(docs[0], allow_nan=True))
    opts = {**options, "format": fmt}
    if "start" in opts:
        opts["start"] = datetime.fromisoformat(opts["start"])
    con = store.connect(":memory:")
    try:
        with monkeypatch.context() as m:
            if data.draw(st.booleans()):          # the Python reading, as the SQL one's fallback is
                use_python_reading(m, fmt)
            before = _state(con)
            try:
                [r] = ingest_path(con, f, IngestOptions(**opts))
            except InputError as exc:
                assert str(exc).startswith(f"file {f.name}"), exc
                assert _state(con) == before
            else:
                assert r.rows_ingested + r.rows_rejected + r.duplicates_skipped == r.rows_read
    finally:
        con.close()


# ---------------------------------------------------------------- generic --map and the Azure trace (its preset): the
# columns mapped in SQL against the same mapping read a record at a time (the reader called with fast=False)

generic_cell = st.one_of(
    st.sampled_from(["", " ", "0", "-0", "12", " 12 ", "12.0", "12.5", "1e3", "-1", "1e300", "inf", "nan", "true",
                     "None", '"q"', "a,b", "\t", "9223372036854775808", "2023-11-16 18:15:46.6805900",
                     "2023-11-16T18:15:46Z", "2023-11-16", "1700000000", "2023-02-30 00:00:00", "0001-01-01 00:00:00",
                     "2023-11-16 18:15:46+05:30", "2023-11-16 24:00:00", "9999-12-31 23:59:59.9999999"]),
    st.integers(-10, 10 ** 6).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00\r\n"),
            max_size=6))
# a JSON value where a cell was: any type, the objects and lists small (read_json types them: a number in one
# is spelt its own way)
generic_json = st.one_of(generic_cell, st.integers(-(2 ** 64), 2 ** 64), st.booleans(), st.none(),
                         st.floats(allow_nan=False, allow_infinity=False),
                         st.dictionaries(st.sampled_from(["a", "attrs"]), st.sampled_from([None, 1, "x", ""]),
                                         max_size=2),
                         st.lists(st.integers(-9, 9), max_size=2))
AZURE_HEADER = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]


@st.composite
def mapped_files(draw):
    """An Azure-trace-like file's header and rows (its three columns, an id, up to three more: named like canonical
    columns, an ``attrs`` of its own, others), and its records as JSON Lines would hold them (values of any type)."""
    extras = draw(st.lists(st.sampled_from(["note", "tenant", "cost_usd", "model", "status", "attrs", "x y"]),
                           max_size=3, unique=True))
    header = [*AZURE_HEADER, "id", *extras]
    rows = [[f"r{i}" if h == "id" else draw(generic_cell) for h in header] for i in range(draw(st.integers(1, 5)))]
    recs = [{h: v if h == "id" else draw(st.one_of(st.just(v), generic_json)) for h, v in zip(header, r, strict=True)}
            for r in rows]
    return header, rows, recs


def _csv_text(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _spelt_alike(result):
    """A load's result with each number in a reject reason and the value a "cannot read" quotes set aside: a
    number read typed by DuckDB is spelt its way (1e+16 as 10000000000000000.0), read as text Python's."""
    import re
    if isinstance(result, str):
        return result
    counts, rows = result
    *head, rejects = counts
    rejects = [dict(r, reason=re.sub(r"-?\d[\d.e+-]*", "N", re.sub(r"cannot read .* as (\w+)", r"cannot read _ as \1",
                                                                      r["reason"]))) for r in rejects]
    return (*head, rejects), rows


def _without_ids(result):
    """A load's rows without their request_id (content hashes, which each reading makes of its own text), in order."""
    if isinstance(result, str):
        return result
    counts, rows = result
    rows = [{k: v for k, v in r.items() if k != "request_id"} for r in rows]
    return counts, sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


@settings(differential, max_examples=DIFFERENTIAL_EXAMPLES // 2)   # CI's share; 400 before a change
@given(made=mapped_files(), kind=st.sampled_from(["csv", "jsonl"]), tenant=st.sampled_from([None, "acme"]))
def test_fuzzed_mapped_files_store_the_same_by_sql_and_by_python(tmp_path_factory, monkeypatch, made, kind, tenant):
    """`--format generic --map ...` (CSV or JSON Lines) and the Azure trace's preset (its CSV): the same counts, rejects
    and rows whether the columns are mapped in SQL or the records read one at a time. Found: a time of spaces stored
    as no time; a column named like a canonical one mapped by one reading and kept in attrs by the other; an attrs
    column that is no JSON stopped the SQL reading; "" in a JSON file was the text '""' in SQL (a model: --model did
    not apply), nothing in Python; a JSON boolean was a count of 1 or 0 in SQL, refused in Python."""
    header, rows, recs = made
    folder = tmp_path_factory.mktemp("mapped")
    f = folder / f"trace.{kind}"
    f.write_text(_csv_text([header, *rows]) if kind == "csv" else "".join(json.dumps(r) + "\n" for r in recs))
    _same_by_sql_and_python(f, monkeypatch, "read:generic", format="generic", model="m1", tenant=tenant,
                            mapping={"ts": "TIMESTAMP", "input_tokens": "ContextTokens",
                                     "output_tokens": "GeneratedTokens", "request_id": "id"},
                            compare=_spelt_alike)
    # the trace's own three columns, no id: each row's content hash differs by reading, the rest is the same
    azure = folder / "AzureLLMInferenceTrace_code.csv"
    azure.write_text(_csv_text([AZURE_HEADER, *(r[:3] for r in rows)]))
    _same_by_sql_and_python(azure, monkeypatch, "read:azure-trace", format="azure-trace", model="m1", tenant=tenant,
                            compare=lambda r: _spelt_alike(_without_ids(r)))


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_a_model_name_past_the_limit_is_rejected_by_name_by_sql_and_by_python(tmp_path, monkeypatch, kind):
    """A model name of 300 characters was stored whole by every reading; now each rejects its row naming the field
    model and the limit (256, schema.MAX_MODEL_CHARS), the same mapped in SQL as read a record at a time, and the
    same by the canonical typed reading as by its checked one."""
    long_name = "g" * 300
    recs = [{"id": "a1", "TIMESTAMP": "2026-11-20T11:00:00Z", "Model": long_name, "ContextTokens": 10},
            {"id": "a2", "TIMESTAMP": "2026-11-20T11:00:01Z", "Model": "gpt-4o", "ContextTokens": 10}]
    f = tmp_path / f"trace.{kind}"
    f.write_text(_csv_text([list(recs[0]), *(list(r.values()) for r in recs)]) if kind == "csv"
                 else "".join(json.dumps(r) + "\n" for r in recs))
    mapped = {"format": "generic", "mapping": {"ts": "TIMESTAMP", "model": "Model", "input_tokens": "ContextTokens",
                                               "request_id": "id"}}
    _same_by_sql_and_python(f, monkeypatch, "read:generic", **mapped)
    (read, ingested, rejected, _, rejects), rows = _stored_rows(f, monkeypatch, False, "read:generic", **mapped)
    assert (read, ingested, rejected) == (2, 1, 1) and [r["model"] for r in rows] == ["gpt-4o"]
    assert [(r["field"], r["reason"]) for r in rejects] == [
        ("model", f"model: {'g' * 60}... is 300 characters long, above the limit of 256")]
    canonical = tmp_path / f"canonical.{kind}"
    canonical.write_text(f.read_text().replace("TIMESTAMP", "ts").replace("Model", "model").replace(
        "ContextTokens", "input_tokens").replace('"id"', '"request_id"').replace("id,", "request_id,", 1))
    from finops.ingest import formats
    from finops.ingest.tabular import mapped_source
    typed = _stored_rows(canonical, monkeypatch, False)
    with monkeypatch.context() as m:        # the canonical reading's checked fallback alone
        m.setattr(formats, "_read_canonical", lambda con, p, o: mapped_source(con, p, o, hash_as_typed=True))
        checked = _stored_rows(canonical, monkeypatch, False)
    assert typed == checked, _differs(typed, checked)
    assert [r["field"] for r in typed[0][4]] == ["model"] and typed[0][1] == 1
