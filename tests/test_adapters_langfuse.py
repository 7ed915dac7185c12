"""Langfuse in every shape it exports: the v1 and v2 API pages, the UI's CSV and JSONL export, the
blob-storage export. The files are written from real ClickHouse by tests/tools/langfuse_exports_run.py
(see tests/data/README.md); expected values are computed here from the raw files."""
import csv
import json
import tracemalloc
from datetime import UTC, datetime

import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import ADAPTERS, IngestOptions, ingest_path, probe
from finops.ingest.loader import detect
from finops.ingest.tabular import iter_records
from helpers import DATA, loaded_attrs

LF = DATA / "langfuse"
BLOB = LF / "blob" / "proj-1" / "observations" / "2025-03-04T15-00-00.jsonl"
FILES = {
    "api_v1": LF / "api_v1_observations.json",
    "api_v2": LF / "api_v2_observations.json",
    "ui_csv": LF / "ui_export_observations.csv",
    "ui_jsonl": LF / "ui_export_observations.jsonl",
    "blob": BLOB,
}
MODEL_CALLS = ("GENERATION", "EMBEDDING")


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _raw(path):
    """The file's observations as plain dicts, read without finops (CSV cells JSON-decoded the way
    Langfuse's stringifyForCsv encoded them: objects and dates as JSON text)."""
    if path.suffix == ".csv":
        out = []
        with open(path, newline="", encoding="utf-8") as fh:
            for rec in csv.DictReader(fh):
                row = {}
                for k, v in rec.items():
                    try:
                        row[k] = json.loads(v) if v[:1] in '{["' else (v or None)
                    except json.JSONDecodeError:
                        row[k] = v
                out.append(row)
        return out
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())["data"]


def _get(rec, *names):
    return next((rec[n] for n in names if rec.get(n) not in (None, "")), None)


def _when(text):
    """An ISO 'Z' time or ClickHouse's 'YYYY-MM-DD hh:mm:ss.sss' (UTC) as a naive UTC datetime."""
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def _expected(path):
    """request_id -> the canonical values, computed from the raw records."""
    traces = {}
    tfile = path.with_name(path.name.replace("observations", "traces"))
    if path == BLOB:
        tfile = LF / "blob" / "proj-1" / "traces" / path.name
    if tfile.exists():
        traces = {t["id"]: t for t in _raw(tfile)}
    out = {}
    for r in _raw(path):
        if r["type"] not in MODEL_CALLS:
            continue
        usage = _get(r, "usageDetails", "usage_details") or {}
        cost = _get(r, "costDetails", "cost_details") or {}
        start = _when(_get(r, "startTime", "start_time"))
        end = _when(_get(r, "endTime", "end_time"))
        first = _get(r, "completionStartTime", "completion_start_time")
        trace = traces.get(_get(r, "traceId", "trace_id"), {})
        meta = r.get("metadata") or {}
        inp = sum(v for k, v in usage.items() if "input" in k) if any("input" in k for k in usage) else None
        out_ = sum(v for k, v in usage.items() if "output" in k) if any("output" in k for k in usage) else None
        total_cost = cost.get("total")
        out[r["id"]] = {
            "ts": start, "model": _get(r, "providedModelName", "provided_model_name", "model"),
            "provider": meta.get("ls_provider"),
            "tenant": _get(r, "userId") or _get(trace, "userId", "user_id"),
            "input_tokens": inp, "output_tokens": out_,
            "cached_input_tokens": sum(v for k, v in usage.items() if "cache_read" in k or "cached" in k) or
            (0 if any("cache_read" in k or "cached" in k for k in usage) else None),
            "cache_write_tokens": usage.get("input_cache_creation", usage.get("cache_creation_input_tokens")),
            "reasoning_tokens": usage.get("output_reasoning_tokens"),
            # a 0 on a call with tokens is Langfuse's "no price": unpriced; a 0 on a call without is free
            "cost_usd": None if total_cost is None or (total_cost == 0 and (inp or out_)) else total_cost,
            "ttft_ms": round((_when(first) - start).total_seconds() * 1000, 3) if first else None,
            "total_ms": round((end - start).total_seconds() * 1000, 3),
            "status": "error" if r["level"] == "ERROR" else "ok",
        }
    return out


COLS = ("ts", "model", "provider", "tenant", "input_tokens", "output_tokens", "cached_input_tokens",
        "cache_write_tokens", "reasoning_tokens", "cost_usd", "ttft_ms", "total_ms", "status")


def _loaded(con):
    rows = con.execute(f"SELECT request_id, {', '.join(COLS)} FROM requests").fetchall()
    return {r[0]: {c: (round(v, 3) if c.endswith("_ms") and v is not None else v) for c, v in zip(COLS, r[1:], strict=True)}
            for r in rows}


@pytest.mark.parametrize("shape", sorted(FILES))
def test_detection_picks_langfuse_with_a_unique_top_score(shape):
    p = probe(FILES[shape])
    assert detect(p).name == "langfuse"
    scores = sorted((a.sniff(p) for a in ADAPTERS), reverse=True)
    assert scores[0] > scores[1]


@pytest.mark.parametrize("shape", sorted(FILES))
def test_every_shape_loads_the_values_of_its_raw_file_and_reloading_adds_nothing(con, shape):
    first = ingest_path(con, FILES[shape])[0]
    assert (first.format, first.rows_rejected) == ("langfuse", 0)
    got, want = _loaded(con), _expected(FILES[shape])
    assert sorted(got) == sorted(want) == ["obs-002", "obs-003", "obs-004", "obs-005", "obs-006", "obs-007"]
    for rid in want:
        for c in COLS:
            w = want[rid][c]
            assert got[rid][c] == pytest.approx(w) if isinstance(w, float) else got[rid][c] == w, (rid, c)
    again = ingest_path(con, FILES[shape])[0]
    assert again.rows_ingested == 0
    assert con.execute("SELECT count(*) FROM requests").fetchone()[0] == 6


@pytest.mark.parametrize("shape", sorted(FILES))
def test_hand_counts_in_the_canonical_convention(con, shape):
    ingest_path(con, FILES[shape])
    q = ("SELECT request_id, input_tokens, cached_input_tokens, cache_write_tokens, output_tokens, reasoning_tokens, "
         "model, cost_usd, json_extract(attrs, '$.source_cost_usd') FROM requests ORDER BY request_id")
    got = {r[0]: r[1:] for r in con.execute(q).fetchall()}
    # OpenAI via Langfuse's OpenAICompletionUsageSchema: input 226 + input_cached_tokens 1024 (+ audio 0)
    assert got["obs-002"][:5] == (1250, 1024, None, 180, 0)
    assert got["obs-002"][6] == pytest.approx(0.0002187)
    # o3-mini: output 188 + output_reasoning_tokens 512 = the 700 completion tokens
    assert got["obs-003"][:5] == (900, 0, None, 700, 512)
    # Anthropic-shaped usage: input 1052 excludes the 2048 cache reads and 300 cache writes
    assert got["obs-004"][:5] == (3400, 2048, 300, 260, None)
    # a model Langfuse has no price for: cost_details empty. The v1 API's calculatedTotalCost and the
    # UI export's totalCost write 0 for it (reduceUsageOrCostDetails: total ?? 0): unpriced, the 0 kept
    # in attrs; the v2 API and the blob export write no cost at all
    unpriced = "0.0" if shape in ("api_v1", "ui_csv", "ui_jsonl") else None
    assert got["obs-007"][5:] == ("acme-llama-70b", None, unpriced)
    # the failed call has no usage; Langfuse priced its nothing at 0 (cost_details {"total": 0}): free
    assert got["obs-005"][:1] == (None,) and got["obs-005"][5:7] == ("gpt-4o-mini", 0.0)


def test_tenants_come_from_the_observation_or_the_traces_beside_it(con):
    for path in FILES.values():
        ingest_path(con, path)
    got = con.execute("SELECT request_id, list(DISTINCT tenant ORDER BY tenant) FROM requests GROUP BY 1 "
                      "ORDER BY 1").fetchall()
    assert got == [("obs-002", ["user-17"]), ("obs-003", ["user-17"]), ("obs-004", ["user-42"]),
                   ("obs-005", ["user-42"]), ("obs-006", ["user-42"]), ("obs-007", ["user-42"])]


def test_the_five_shapes_agree(con):
    seen = {}
    for shape, path in FILES.items():
        c = store.connect(":memory:")
        ingest_path(c, path)
        seen[shape] = {k: {c_: v[c_] for c_ in COLS if c_ != "provider"} for k, v in _loaded(c).items()}
        c.close()
    first = seen.pop("api_v1")
    for shape, rows in seen.items():
        assert rows == first, shape


def test_the_csv_export_writes_dates_with_their_own_quotes():
    head = FILES["ui_csv"].read_text().splitlines()[1]
    assert '"""2025-03-04T14:00:00.000Z"""' in head


def test_a_traces_export_is_refused_with_advice_and_a_blob_export_is_not(con):
    traces = LF / "blob" / "proj-1" / "traces" / BLOB.name
    assert detect(probe(traces)).name == "langfuse"
    with pytest.raises(InputError, match="traces export: load the observations"):
        ingest_path(con, traces)
    assert ingest_path(con, BLOB, IngestOptions(format="langfuse"))[0].rows_ingested == 6


def test_a_malformed_file_names_file_row_and_field(con, tmp_path):
    page = json.loads(FILES["api_v2"].read_text())
    bad = tmp_path / "observations_cut.json"
    text = json.dumps(page)
    bad.write_text(text[: text.index('"obs-004"') + 40])
    with pytest.raises(InputError) as e:
        ingest_path(con, bad)
    assert "observations_cut.json" in str(e.value) and "row 4" in str(e.value)      # obs-004 is the 4th record
    rows = FILES["ui_csv"].read_text().splitlines()
    rows[2] = rows[2].replace('""input"":226', '""input"":""lots""')
    broken = tmp_path / "ui_export_observations.csv"
    broken.write_text("\n".join(rows) + "\n")
    res = ingest_path(con, broken)[0]
    assert res.rows_rejected == 1
    assert res.rejects[0]["row"] == 3 and "input_tokens" in res.rejects[0]["reason"]


def test_generic_reaches_nested_fields_and_a_records_path(con, tmp_path):
    mapping = {"request_id": "id", "ts": "startTime", "model": "providedModelName",
               "input_tokens": "usageDetails.input", "output_tokens": "usageDetails.output",
               "cost_usd": "costDetails.total"}
    res = ingest_path(con, FILES["api_v2"], IngestOptions(format="generic", mapping=mapping))[0]
    assert res.rows_rejected == 1          # the span has no model
    raw = {r["id"]: r for r in _raw(FILES["api_v2"])}
    got = dict(con.execute("SELECT request_id, input_tokens FROM requests WHERE request_id = 'obs-002'").fetchall())
    assert got == {"obs-002": raw["obs-002"]["usageDetails"]["input"]}
    nested = tmp_path / "export.json"
    nested.write_text(json.dumps({"response": {"page": 1, "rows": raw and list(raw.values())}}))
    c2 = store.connect(":memory:")
    opts = IngestOptions(format="generic", mapping=mapping, records_path="response.rows")
    assert ingest_path(c2, nested, opts)[0].rows_ingested == 6
    with pytest.raises(InputError, match="records-path response.items"):
        ingest_path(store.connect(":memory:"), nested, IngestOptions(format="generic", mapping=mapping, records_path="response.items"))


def test_a_json_document_streams_with_flat_memory(tmp_path):
    rec = json.loads(FILES["api_v2"].read_text())["data"][1]

    def peak(n):
        path = tmp_path / f"obs_{n}.json"
        with open(path, "w") as fh:
            fh.write('{"data": [')
            fh.write(",".join(json.dumps({**rec, "id": f"o{i}"}) for i in range(n)))
            fh.write('], "meta": {}}')
        tracemalloc.start()
        count = sum(1 for _ in iter_records(probe(path)))
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert count == n
        return size, path.stat().st_size
    small, small_bytes = peak(5_000)
    large, large_bytes = peak(15_000)
    assert large_bytes > 2.9 * small_bytes
    assert large < 1.5 * small          # the file tripled; the peak did not


# ---------------------------------------------------------------- the typed fast path of JSON observations

def test_langfuse_csv_read_unnumbered_stores_what_python_stores(tmp_path, monkeypatch):
    """The UI's CSV export is read on every thread too: every record staged and numbered by its line (the header
    is line 1), the spans dropped once numbered; a record over two lines or with a surplus field hands the file
    to Python, and a rejected row keeps its line number."""
    from finops.ingest import ecosystem, loader
    staged, real = [], loader._stage
    monkeypatch.setattr(loader, "_stage", lambda con, source, *more: staged.append(real(con, source, *more)) or staged[-1])
    variants = {k: v for k, v in _langfuse_variants(tmp_path).items() if k.startswith("ui_csv")}
    with FILES["ui_csv"].open(newline="") as fh:
        header, *rows = list(csv.reader(fh))
    bad = [list(r) for r in rows]
    bad[3][header.index("endTime")] = '"2025-03-04T14:04:00.000Z"'      # before its start: rejected by the loader
    path = tmp_path / "ui_bad_value.csv"
    with path.open("w", newline="") as fh:
        csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header, *bad])
    variants["ui_csv a rejected value"] = (path, True)
    for name, (path, fast) in variants.items():
        staged.clear()
        fast_rows = _fast_stored(path, IngestOptions())
        fast_staged = list(staged)
        with monkeypatch.context() as m:
            assert _fast_stored(path, IngestOptions(), m, python_only=True) == fast_rows, name
        if fast:
            assert fast_staged == [["VIEW _stage", "TABLE _staged"]], name
            src = ecosystem.langfuse_fast_source(probe(path), IngestOptions(), store.connect(":memory:"))
            assert src.unnumbered_sql and "_skip" in src.unnumbered_sql and src.first_row == 2, name
    rejects = _fast_stored(variants["ui_csv a rejected value"][0], IngestOptions())[-1]["rejects"]
    assert len(rejects) == 1 and rejects[0]["row"] == 5, rejects


def _fast_stored(path, options, monkeypatch=None, python_only=False) -> list[dict]:
    from finops.ingest import ecosystem
    c = store.connect(":memory:")
    try:
        if python_only:
            monkeypatch.setattr(ecosystem, "langfuse_fast_source", lambda p, o, con=None: None)
        (res,) = ingest_path(c, path, options)
        if python_only:
            monkeypatch.undo()
        df = c.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id, ts").df()
        rows = json.loads(df.to_json(orient="records", date_format="iso"))
        for r in rows:      # the same JSON value (the fast path may spell a number or a character differently)
            r["attrs"] = json.loads(r["attrs"]) if r["attrs"] else None
        return rows + [{"rejects": res.rejects}]
    finally:
        c.close()


def _odd(obs: list[dict]) -> list[dict]:
    """The observations with the values the rules treat apart."""
    gens = [dict(o) for o in obs if o.get("type") == "GENERATION"]
    out = []
    for n, o in enumerate(gens * 2):
        o = {**o, "id": f"odd-{n}"}
        usage_key = "usageDetails" if "usageDetails" in o else "usage_details"
        cost_key = "costDetails" if "costDetails" in o else "cost_details"
        if n == 0:      # a 0 with tokens: unpriced by Langfuse
            o[cost_key] = {"total": 0}
        if n == 1:      # cost details without a total: their sum; a count written as text
            o[cost_key] = {"input": 0.001, "output": 0.002}
            o[usage_key] = {"input": "120", "output": 30}
        if n == 2:      # a failure with its message; the provider in metadata.attributes
            o["level"], o["metadata"] = "ERROR", {"attributes": {"gen_ai.system": "anthropic"}}
            o["statusMessage" if "statusMessage" in o or "traceId" in o else "status_message"] = "upstream 529"
        if n == 3:      # no end time: the latency; a 1-hour cache write
            o["endTime" if "endTime" in o else "end_time"] = None
            o[usage_key] = {"input": 50, "input_cache_creation_1h": 20, "output": 5}
        if n == 4:      # no usage details at all: the deprecated usage
            o.pop(usage_key)
            o["usage"] = {"input": 7, "output": 3, "total": 10}
        out.append(o)
    return out


def _langfuse_variants(tmp_path) -> dict[str, tuple[object, bool]]:
    """name -> (file, whether the fast path reads it whole)"""
    out = {}
    jsonl = {"ui_jsonl": [json.loads(x) for x in FILES["ui_jsonl"].read_text().splitlines() if x.strip()],
             "blob": [json.loads(x) for x in BLOB.read_text().splitlines() if x.strip()]}
    pages = {k: json.loads(FILES[k].read_text())["data"] for k in ("api_v1", "api_v2")}
    for name, obs in jsonl.items():
        f = tmp_path / f"{name}_export.jsonl"      # no traces beside it (a traces file: the Python path joins it)
        f.write_text("\n".join(json.dumps(o) for o in obs) + "\n")
        out[name] = (f, True)
        f = tmp_path / f"{name}_odd.jsonl"
        f.write_text("\n".join(json.dumps(o) for o in obs + _odd(obs)) + "\n")
        out[f"{name} odd values"] = (f, True)
    for name, obs in pages.items():
        f = tmp_path / f"{name}_array.json"
        f.write_text(json.dumps(obs + _odd(obs), indent=1))
        out[f"{name} as an array"] = (f, True)
        f = tmp_path / f"{name}_pages.jsonl"
        f.write_text("\n".join(json.dumps({"data": obs[i:i + 3], "meta": {"page": i}}) for i in range(0, len(obs), 3))
                     + "\n")
        out[f"{name} a page per line"] = (f, True)
        # not the fast path's: an observation without id (hashed), a usage value that is no number, a time it
        # does not read alike
        for odd, change in (("no id", {"id": None}), ("usage not a number", {"usageDetails": {"input": True}}),
                            ("comma time", {"startTime": "2025-03-04T14:00:00,5Z"})):
            f = tmp_path / f"{name}_{odd.replace(' ', '_')}.json"
            f.write_text(json.dumps(obs + [{**_odd(obs)[0], "id": "x-1", **change}]))
            out[f"{name} {odd}"] = (f, False)
    # the UI's CSV export (every cell quoted, dates as JSON text), without the traces beside it
    with FILES["ui_csv"].open(newline="") as fh:
        header, *rows = list(csv.reader(fh))
    i = {h: k for k, h in enumerate(header)}

    def write(name, body, extra_header=()):
        path = tmp_path / name
        with path.open("w", newline="") as fh:
            csv.writer(fh, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([header + list(extra_header), *body])
        return path
    out["ui_csv"] = (write("ui_export.csv", rows), True)
    gens = [r for r in rows if r[i["type"]] == "GENERATION"]
    odd = []
    for n, src in enumerate(gens * 3):
        r = list(src)
        r[i["id"]] = f"odd-{n}"
        if n == 0:      # a 0 with tokens: unpriced
            r[i["costDetails"]], r[i["totalCost"]] = '{"total":0}', "0"
        if n == 1:      # cost details without a total; a count written as text
            r[i["costDetails"]], r[i["usageDetails"]] = '{"input":0.001,"output":0.002}', '{"input":"120","output":30}'
        if n == 2:      # a failure with its message; the provider in metadata.attributes; no user
            r[i["level"]], r[i["statusMessage"]] = "ERROR", "upstream 529"
            r[i["metadata"]], r[i["userId"]] = '{"attributes":{"gen_ai.system":"anthropic"}}', ""
        if n == 3:      # no end time: the latency; a 1-hour cache write; a cell that is not the JSON it looks like
            r[i["endTime"]], r[i["usageDetails"]] = "", '{"input":50,"input_cache_creation_1h":20,"output":5}'
            r[i["modelParameters"]] = "{not json"
        if n == 4:      # no usage, no cost: empty cells; a quoted text that is no JSON string
            r[i["usageDetails"]], r[i["costDetails"]], r[i["totalCost"]] = "", "", ""
            r[i["name"]] = '"a"b"'
        if n == 5:      # a time without quotes; no type (a generation)
            r[i["startTime"]], r[i["type"]] = "2025-03-04T14:00:00.100Z", ""
        odd.append(r)
    out["ui_csv odd values"] = (write("ui_odd.csv", rows + odd), True)
    two = [list(r) for r in rows]
    two[1][i["name"]] = "two\nlines"
    out["ui_csv a record over two lines"] = (write("ui_two_lines.csv", two), False)
    extra = [list(r) for r in rows]
    extra[2].append("surplus")
    out["ui_csv more fields than the header"] = (write("ui_extra.csv", extra), False)
    late = [list(r) for r in rows]
    late[1][i["startTime"]] = '"2025-03-04T14:00:00,5Z"'
    out["ui_csv a comma time"] = (write("ui_comma.csv", late), False)
    return out


def test_langfuse_fast_path_reads_the_json_exports_in_sql(tmp_path):
    import duckdb

    from finops.ingest import ecosystem
    c = duckdb.connect()
    for name, (path, fast) in _langfuse_variants(tmp_path).items():
        src = ecosystem.langfuse_fast_source(probe(path), IngestOptions(), c)
        if fast:
            calls = sum(1 for _, o in iter_records(probe(path)) if str(o.get("type") or "GENERATION") in MODEL_CALLS)
            assert len(c.execute(src.sql, src.params).fetchall()) == calls, name
        else:
            assert src is None or pytest.raises(duckdb.InvalidInputException, c.execute, src.sql, src.params), name
    assert ecosystem.langfuse_fast_source(probe(BLOB), IngestOptions()) is None       # traces beside it


def test_langfuse_fast_and_python_paths_store_the_same_rows(tmp_path, monkeypatch):
    for name, (path, _) in _langfuse_variants(tmp_path).items():
        for opts in (IngestOptions(), IngestOptions(tenant="t0", model="m0")):
            fast = _fast_stored(path, opts)
            slow = _fast_stored(path, opts, monkeypatch, python_only=True)
            assert fast == slow, name
            assert len(fast) >= 5, name


def test_langfuse_records_read_unnumbered_store_what_python_stores(tmp_path, monkeypatch):
    """One observation a record (JSON Lines, an array): read on every thread, every record staged and numbered
    by its place, those that are no model call dropped once numbered; pages per line keep the numbered reading,
    and a page met after records hands the file to it."""
    from finops.ingest import ecosystem, loader
    staged, real = [], loader._stage
    monkeypatch.setattr(loader, "_stage", lambda con, source, *more: staged.append(real(con, source, *more)) or staged[-1])
    variants = _langfuse_variants(tmp_path)
    obs = [json.loads(x) for x in BLOB.read_text().splitlines() if x.strip()]
    late_page = tmp_path / "blob_late_page.jsonl"
    late_page.write_text("\n".join(json.dumps(o) for o in obs + [{"data": _odd(obs)[:2]}]) + "\n")
    variants["blob, then a page"] = (late_page, True)
    for name, (path, fast) in variants.items():
        if not fast or "ui_csv" in name:
            continue
        staged.clear()
        fast_rows = _fast_stored(path, IngestOptions())
        fast_staged = list(staged)      # a reading that stopped staged nothing
        with monkeypatch.context() as m:
            assert _fast_stored(path, IngestOptions(), m, python_only=True) == fast_rows, name
        unnumbered = "page" not in name
        assert fast_staged == [["VIEW _stage", "TABLE _staged"] if unnumbered else ["TABLE _stage"]], name
        # the unnumbered reading drops the records that are no model call, and only those
        if unnumbered:
            src = ecosystem.langfuse_fast_source(probe(path), IngestOptions())
            assert src.unnumbered_sql and "_skip" in src.unnumbered_sql and "_skip" not in src.sql, name


def test_which_json_files_the_fast_paths_read_record_by_record(tmp_path):
    """DuckDB numbers records, the Python path lines: the two agree on uncompressed JSON Lines without a blank
    line, and on an uncompressed JSON array; anything else is the Python path's."""
    import gzip

    from finops.ingest.ecosystem import json_records_format
    obs = [json.loads(x) for x in BLOB.read_text().splitlines() if x.strip()]
    cases = {"plain.jsonl": ("\n".join(json.dumps(o) for o in obs) + "\n", "newline_delimited"),
             "blank_line.jsonl": ("\n".join(json.dumps(o) for o in obs[:2]) + "\n\n" + json.dumps(obs[2]) + "\n", None),
             "blank_first.jsonl": ("\n" + "\n".join(json.dumps(o) for o in obs) + "\n", None),
             "array.json": (json.dumps(obs, indent=2), "array"),
             # one page on one line is a page per line; over many lines it is one document
             "page_line.json": (json.dumps({"data": obs, "meta": {}}), "newline_delimited"),
             "page.json": (json.dumps({"data": obs, "meta": {}}, indent=1), None)}
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text)
        assert json_records_format(probe(tmp_path / name)) == expected, name
    with gzip.open(tmp_path / "plain.jsonl.gz", "wt") as fh:
        fh.write(cases["plain.jsonl"][0])
    assert json_records_format(probe(tmp_path / "plain.jsonl.gz")) is None


def test_the_fast_path_reads_pages_once_and_keeps_any_key_in_attrs(tmp_path, monkeypatch):
    """A v2 page per line read in SQL, in one reading; a key with quotes or SQL in it is kept in attrs as it is;
    the Python path stores the same rows."""
    import dataclasses

    from finops.ingest import ecosystem
    from finops.ingest.base import ADAPTERS as TABLE
    obs = json.loads(FILES["api_v2"].read_text())["data"]
    odd_keys = {"o'brien": 1, 'say "hi"': "x", "x'); DROP TABLE requests; --": [1, 2]}
    obs = [{**o, **odd_keys} for o in obs]
    path = tmp_path / "v2_pages.jsonl"
    path.write_text("\n".join(json.dumps({"data": obs[i:i + 2], "meta": {"cursor": str(i)}})
                              for i in range(0, len(obs), 2)) + "\n")
    taken, read = [], ecosystem._read_langfuse

    def spy(con, p, options, fast=True):
        src = read(con, p, options, fast=fast)
        taken.append(fast and src.fallback is not None)
        return src
    at = next(k for k, a in enumerate(TABLE) if a.name == "langfuse")
    original = TABLE[at]
    monkeypatch.setattr(ecosystem, "_read_langfuse", spy)
    TABLE[at] = dataclasses.replace(original, read=spy)
    try:
        c = store.connect(":memory:")
        [r] = ingest_path(c, path)
        attrs = [json.loads(a) for (a,) in c.execute("SELECT attrs FROM requests").fetchall()]
        c.close()
    finally:
        TABLE[at] = original
    assert taken == [True]
    calls = [o for o in obs if str(o.get("type") or "GENERATION") in MODEL_CALLS]
    assert r.rows_ingested == len(calls) > 0
    assert all({k: a[k] for k in odd_keys} == odd_keys for a in attrs)
    monkeypatch.undo()
    assert _fast_stored(path, IngestOptions()) == _fast_stored(path, IngestOptions(), monkeypatch, python_only=True)


def test_langfuse_attrs_joined_from_the_first_observations_fields_are_the_merge_patchs_text(tmp_path, monkeypatch):
    """attrs of an observation with the first one's fields in their order are joined from the values read once:
    the same text as the merge patch of any other observation writes (reordered, a field missing, one more, odd
    values), and the same rows as the Python path."""
    from finops.ingest import ecosystem
    obs = [json.loads(x) for x in BLOB.read_text().splitlines() if x.strip()]
    gen = next(o for o in obs if o.get("type") == "GENERATION")
    mixed = [{**gen, "id": f"m-{n}"} for n in range(4)]
    mixed[1] = dict(reversed(list(mixed[1].items())))
    mixed[2] = {k: v for k, v in mixed[2].items() if k != "name"}
    mixed[3] = {**mixed[3], "extra": {"a": [1, 2.50, None, -0.0, 1e300, "é"]}}
    odd_values = {**gen, "id": "m-4", "name": None, "version": 12345678901234567890, "input": 1.5e-7,
                  "output": True, "metadata": {"ls_provider": "openai", "x": "é\u2028"}}
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(o) for o in [*mixed, odd_values, *obs, *_odd(obs)]) + "\n")
    variants = {"mixed": path, **{n: p for n, (p, fast) in _langfuse_variants(tmp_path).items()
                                  if fast and "ui_csv" not in n}}

    assert ecosystem.plain_fields(gen) == list(gen)
    for name, p in variants.items():
        joined = loaded_attrs(p)
        with monkeypatch.context() as m:
            m.setattr(ecosystem, "plain_fields", lambda rec: None)
            assert loaded_attrs(p) == joined, name
        with monkeypatch.context() as m:
            assert _fast_stored(p, IngestOptions()) == _fast_stored(p, IngestOptions(), m, python_only=True), name


@pytest.mark.parametrize("field, value", [("statusMessage", "0"), ("statusMessage", "false"), ("statusMessage", "{}"),
                                          ("model", "{}"), ("userId", "[]"), ("type", "0"), ("type", "{}"),
                                          ("type", '""')])
def test_langfuse_csv_cells_python_passes_over_read_alike_in_sql(tmp_path, monkeypatch, field, value):
    """A cell is text ("0", "false": kept, as the Python reading keeps them) unless it holds JSON (``{}``, ``[]``,
    ``""``: passed over as Python's ``or`` does: the default type, --model, the default tenant, "error"). The SQL
    reading took "0" and "false" for nothing and kept ``{}`` and ``[]``."""
    import io

    from finops.ingest import ecosystem
    src = FILES["ui_csv"].read_text()
    rows = list(csv.DictReader(io.StringIO(src)))
    row = {**next(r for r in rows if r["type"] == "GENERATION"), "level": "ERROR", field: value}
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
    w.writeheader()
    w.writerow(row)
    f = tmp_path / "generations.csv"
    f.write_text(out.getvalue())

    def stored(python: bool):
        con = store.connect(":memory:")
        with monkeypatch.context() as m:
            if python:
                m.setattr(ecosystem, "langfuse_fast_source", lambda *a, **k: None)
            try:
                r = ingest_path(con, f, IngestOptions(model="m-given"))[0]
            except InputError as exc:
                return str(exc)
            finally:
                got = con.execute("SELECT model, tenant, error_type FROM requests").fetchall()
                con.close()
        return r.rows_read, r.rows_ingested, got

    fast = stored(False)
    assert fast == stored(True)
    expected = {("statusMessage", "0"): "0", ("statusMessage", "false"): "false", ("statusMessage", "{}"): "error"}
    if (field, value) in expected:
        assert fast[2][0][2] == expected[(field, value)]
    if field == "model":
        assert fast[2][0][0] == "m-given"
    if field == "userId":
        assert fast[2][0][1] == "default"
    if field == "type":         # "0" is a type of its own (no model call); {} and "" are none: a GENERATION
        assert fast == "file generations.csv: the file holds no rows" if value == "0" else fast[1] == 1


def test_a_trace_id_that_is_a_list_joins_no_trace_and_loads(tmp_path):
    """A traces file whose second trace has an id of [1, "a"], and an observation whose traceId is {"a": 1}: those
    observations join no trace (the default tenant), the rest theirs; the load used to stop with Python's
    'unhashable type' TypeError."""
    traces = json.loads((LF / "api_v1_traces.json").read_text())
    traces["data"][1]["id"] = [1, "a"]
    obs = json.loads((LF / "api_v1_observations.json").read_text())
    obs["data"][1]["traceId"] = {"a": 1}          # obs-002, of trace tr-001
    (tmp_path / "api_observations.json").write_text(json.dumps(obs))
    (tmp_path / "api_traces.json").write_text(json.dumps(traces))
    c = store.connect(":memory:")
    [r] = ingest_path(c, tmp_path / "api_observations.json")
    got = c.execute("SELECT request_id, tenant FROM requests ORDER BY 1").fetchall()
    assert r.rows_rejected == 0 and got == [("obs-002", "default"), ("obs-003", "user-17"), ("obs-004", "default"),
                                            ("obs-005", "default"), ("obs-006", "default"), ("obs-007", "default")]
