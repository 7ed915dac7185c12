"""LiteLLM spend logs written by LiteLLM's own code (tests/tools/litellm_spendlogs_run.py), in the four
export shapes, and LiteLLM's own committed spend-log fixture. Expected values are read from the raw files
here, or are the mock provider's usage the calls were answered with."""
import csv
import json
from datetime import datetime

import pytest

from finops import store
from finops.ingest import IngestOptions, ingest_path, probe
from finops.ingest.loader import detect
from helpers import DATA, loaded_attrs

LITELLM = DATA / "litellm"
SHAPES = ["spendlogs_v1_65.csv", "spendlogs_v1_74.csv", "spend_logs.json", "spend_logs_ui.json"]
COLS = ("request_id, ts, tenant, model, provider, service_tier, cache_hit, input_tokens, output_tokens, "
        "cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_usd, ttft_ms, total_ms, status, error_type")


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _raw(name):
    """The rows of a shape as LiteLLM exported them (JSON columns parsed)."""
    path = LITELLM / name
    if path.suffix == ".csv":
        rows = list(csv.DictReader(path.open()))
        for r in rows:
            for k in ("metadata", "response", "request_tags"):
                r[k] = json.loads(r[k]) if r.get(k) else None
        return rows
    doc = json.loads(path.read_text())
    return doc["data"] if isinstance(doc, dict) else doc


def _t(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).replace(tzinfo=None)


def _ms(a, b):
    return round((_t(b) - _t(a)).total_seconds() * 1000, 3)


@pytest.mark.parametrize("name", SHAPES + ["spend_logs_payload.json"])
def test_detection_and_every_row_loads_once(con, name):
    assert detect(probe(LITELLM / name)).name == "litellm"
    n = len(_raw(name)) if name != "spend_logs_payload.json" else 1
    [r] = ingest_path(con, LITELLM / name)
    assert (r.rows_ingested, r.rows_rejected) == (n, 0)
    [again] = ingest_path(con, LITELLM / name)
    assert again.rows_ingested == 0 and store.row_count(con) == n


@pytest.mark.parametrize("name", SHAPES)
def test_each_shape_matches_the_raw_rows(con, name):
    raw = _raw(name)
    assert len(raw) == 6
    ingest_path(con, LITELLM / name)
    got = con.execute(f"SELECT {COLS} FROM requests ORDER BY ts").fetchall()
    for r, g in zip(sorted(raw, key=lambda r: _t(r["startTime"])), got, strict=True):
        assert g[1] == _t(r["startTime"])
        assert g[2] == r["team_id"]
        # a failure has no first token (LiteLLM logs its completionStartTime at the failure, 0 ms in)
        failed = (r.get("status") or (r.get("metadata") or {}).get("status")) == "failure"     # v1.65: metadata
        assert g[13] == (None if failed else pytest.approx(_ms(r["startTime"], r["completionStartTime"]), abs=1e-6))
        assert g[14] == pytest.approx(_ms(r["startTime"], r["endTime"]), abs=1e-6)
        assert g[8] == int(r["completion_tokens"])
    by_model = {g[3]: g for g in got if g[6] is not True}
    # the mock's usage: OpenAI prompt 1250 with 1024 cached; cache_hit "None" (no lookup) is unknown
    mini = by_model["gpt-4o-mini"]
    assert mini[4:13] == ("openai", "default", None, 1250, 180, 1024, None, 0, 0.0002187)
    # the same call served from LiteLLM's cache: cache_hit "True", spend 0 by the proxy's rule (free)
    [hit] = [g for g in got if g[6] is True]
    assert (hit[3], hit[4], hit[7], hit[12]) == ("gpt-4o-mini", "openai", 1250, 0.0)
    assert by_model["o3-mini"][4:12] == ("openai", "flex", None, 310, 1200, 0, None, 896)
    # Anthropic: input 52 + cache read 2048 + cache write 1500 = 3600 (LiteLLM's prompt_tokens 2100 lacks the write)
    claude = by_model["claude-3-5-sonnet-20241022"]
    assert claude[4:12] == ("anthropic", None, None, 3600, 260, 2048, 1500, None)
    # spend 0 for a model LiteLLM could not price: unpriced (NULL), LiteLLM's 0 kept in attrs
    ft = by_model["ft:gpt-4o-mini-2024-07-18:acme:support:B1xQz"]
    assert (ft[7], ft[8], ft[12]) == (420, 64, None)
    attrs = json.loads(con.execute("SELECT attrs FROM requests WHERE model LIKE 'ft:%'").fetchone()[0])
    assert attrs["source_cost_usd"] == 0.0 and attrs["model_group"] == "support-ft"
    # the 429: request_id "None" (LiteLLM's) is no id, status failure, the provider from error_information
    fail = by_model["gpt-4o"]
    assert fail[0] != "None" and fail[4] == "openai" and fail[15:] == ("error", "RateLimitError")
    assert fail[12] == 0.0 and fail[7] == 0


def test_the_four_shapes_hold_the_same_rows(con):
    seen = []
    for name in SHAPES:
        c = store.connect(":memory:")
        ingest_path(c, LITELLM / name)
        seen.append(c.execute(f"SELECT {COLS} FROM requests WHERE request_id NOT LIKE '%-1' ORDER BY ts").fetchall())
        c.close()
    assert seen[0] == seen[1] == seen[2] == seen[3]


# the 429 of the six calls: request_id "None" in every export, so each load hashes it (loader._insert_general)
FAILED = (datetime(2025, 3, 4, 14, 0, 2, 252000), "team-search", "gpt-4o", "openai", 0, 0, 0.0, "error",
          "RateLimitError")
FAILED_COLS = "ts, tenant, model, provider, input_tokens, output_tokens, cost_usd, status, error_type"


def test_a_failed_call_without_an_id_is_stored_once_whichever_exports_hold_it(con, tmp_path):
    """The 429 (request_id "None", 14:00:02.252, gpt-4o, team-search) was hashed from every field of its row, and
    the exports of the same row differ in fields that are not the request (1.65's CSV lacks session_id and status,
    the JSON spells its JSON columns and times otherwise): a CSV backfill then GET /spend/logs then the 1.65 CSV
    stored it three times ("1 ingested, 5 duplicates skipped" each), tripling the error count."""
    got = []
    for name in ("spendlogs_v1_74.csv", "spend_logs.json", "spendlogs_v1_65.csv", "spend_logs_ui.json"):
        [r] = ingest_path(con, LITELLM / name)
        got.append((r.rows_read, r.rows_ingested, r.duplicates_skipped))
    # each export holds the same six calls: five with an id, the 429 without
    assert got == [(6, 6, 0), (6, 0, 6), (6, 0, 6), (6, 0, 6)]
    assert con.execute(f"SELECT {FAILED_COLS} FROM requests WHERE status = 'error'").fetchall() == [FAILED]
    assert store.row_count(con) == 6
    # loading any of them again adds nothing: as it is, and read anew (other bytes: JSON Lines, keys reversed)
    for name in SHAPES:
        [r] = ingest_path(con, LITELLM / name)
        assert (r.rows_ingested, r.duplicates_skipped) == (0, 6)
    lines = tmp_path / "spend_logs.jsonl"
    lines.write_text("".join(json.dumps(dict(reversed(list(r.items())))) + "\n" for r in _raw("spend_logs.json")))
    [r] = ingest_path(con, lines)
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (6, 0, 6) and store.row_count(con) == 6


def test_failed_calls_without_an_id_that_differ_are_stored_apart(con, tmp_path):
    """Two more 429s without an id: one a second later, one of another team at the same time. Each is a call of
    its own; the same call twice in one file is two calls too (numbered), as for any row without an id."""
    rows = _raw("spend_logs.json")
    [fail] = [r for r in rows if r["request_id"] == "None"]
    later = {**fail, "startTime": "2025-03-04T14:00:03.252000Z", "endTime": "2025-03-04T14:00:03.252000Z",
             "completionStartTime": "2025-03-04T14:00:03.252000Z"}
    other_team = {**fail, "team_id": "team-research"}
    (tmp_path / "more.json").write_text(json.dumps([*rows, later, other_team, fail]))
    [r] = ingest_path(con, tmp_path / "more.json")
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (9, 9, 0)
    assert con.execute("SELECT ts, tenant, count(*) FROM requests WHERE status = 'error' GROUP BY ALL "
                       "ORDER BY ALL").fetchall() == [(FAILED[0], "team-research", 1), (FAILED[0], "team-search", 2),
                                                      (datetime(2025, 3, 4, 14, 0, 3, 252000), "team-search", 1)]
    [r] = ingest_path(con, LITELLM / "spendlogs_v1_74.csv")     # the first 429 and the five calls: all stored
    assert (r.rows_ingested, r.duplicates_skipped) == (0, 6)


def test_a_failed_call_stored_by_an_earlier_version_is_not_stored_again(con, tmp_path, monkeypatch):
    """A store an earlier version loaded holds the 429 under the hash of its every field (ecosystem._litellm_row's
    ``_legacy_hash``; that version noted no first batch of this hash): the CSV grown by another 429 adds that one
    only, the first known by its earlier hash."""
    from finops.ingest import ecosystem
    from finops.ingest.base import LITELLM_HASHES_SINCE
    with monkeypatch.context() as m:
        m.setattr(ecosystem, "_litellm_identity_hash", lambda rec, meta, got: got["_legacy_hash"])
        ingest_path(con, LITELLM / "spendlogs_v1_74.csv")
    con.execute("DELETE FROM settings WHERE key = ?", [LITELLM_HASHES_SINCE])     # an earlier version notes none
    [old_id] = con.execute("SELECT request_id FROM requests WHERE status = 'error'").fetchone()
    header, rows = _csv_rows("spendlogs_v1_74.csv")
    i = header.index("startTime")
    [fail] = [r for r in rows if r[0] == "None"]
    later = [*fail[:i], "2025-03-04 14:00:03.252", "2025-03-04 14:00:03.252", "2025-03-04 14:00:03.252", *fail[i + 3:]]
    [r] = ingest_path(con, _write_csv(tmp_path / "grown.csv", header, [*rows, later]))
    assert (r.rows_read, r.rows_ingested, r.duplicates_skipped) == (7, 1, 6)
    assert con.execute("SELECT ts FROM requests WHERE status = 'error' AND request_id <> ? ",
                       [old_id]).fetchall() == [(datetime(2025, 3, 4, 14, 0, 3, 252000),)]


def test_litellm_own_fixture_loads(con):
    """BerriAI/litellm tests/logging_callback_tests/gcs_pub_sub_body/spend_logs_payload.json: cache_hit "None",
    metadata as JSON text, times naive UTC with microseconds."""
    raw = json.loads((LITELLM / "spend_logs_payload.json").read_text())
    ingest_path(con, LITELLM / "spend_logs_payload.json")
    got = con.execute(f"SELECT {COLS} FROM requests").fetchall()
    assert got == [(raw["request_id"], _t(raw["startTime"]), "default", "gpt-4o", "openai", None, None, 10, 20,
                    None, None, None, raw["spend"], 4.583, 4.583, "ok", None)]


def test_a_provider_prefix_is_the_provider_and_tenant_field_reads_metadata(con, tmp_path):
    rows = _raw("spend_logs.json")
    for r in rows:
        if r["cache_hit"] == "True":        # as older LiteLLM logged a cache hit: the routed name
            r["model"], r["custom_llm_provider"] = "openai/gpt-4o-mini", ""
    (tmp_path / "spend.json").write_text(json.dumps(rows))
    ingest_path(con, tmp_path / "spend.json", IngestOptions(tenant_field="user_api_key_alias"))
    assert con.execute("SELECT DISTINCT provider FROM requests WHERE model = 'gpt-4o-mini'").fetchall() == [("openai",)]
    assert con.execute("SELECT count(*) FROM requests WHERE model = 'gpt-4o-mini'").fetchone()[0] == 2
    assert sorted(t for (t,) in con.execute("SELECT DISTINCT tenant FROM requests").fetchall()) == [
        "svc-research", "svc-search", "svc-support"]


def test_a_malformed_row_names_file_row_and_field(con, tmp_path):
    lines = (LITELLM / "spendlogs_v1_74.csv").read_text().splitlines(keepends=True)
    header = next(csv.reader([lines[0]]))
    rows = list(csv.reader(lines[1:]))
    rows[2][header.index("cache_hit")] = "maybe"
    rows[3][header.index("prompt_tokens")] = "12x"
    with (tmp_path / "bad.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    [r] = ingest_path(con, tmp_path / "bad.csv")
    assert (r.rows_ingested, r.rows_rejected) == (4, 2)
    reasons = " | ".join(str(x) for x in r.rejects)
    assert "cache_hit: cannot read maybe as true or false" in reasons and "input_tokens: cannot read 12x" in reasons


# ---------------------------------------------------------------- the typed fast path of a psql CSV

def _stored(path, options, monkeypatch=None, python_only=False) -> list[dict]:
    from finops.ingest import ecosystem
    c = store.connect(":memory:")
    try:
        if python_only:
            monkeypatch.setattr(ecosystem, "litellm_fast_source", lambda con, p, o: None)
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


def _csv_rows(name):
    rows = list(csv.reader((LITELLM / name).open(newline="")))
    return rows[0], rows[1:]


def _write_csv(path, header, rows, bom=False):
    import io
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, *rows])
    path.write_text(("\ufeff" if bom else "") + out.getvalue(), encoding="utf-8")
    return path


def _litellm_variants(tmp_path) -> dict[str, tuple[object, bool]]:
    """name -> (file, whether the fast path reads it whole)"""
    out = {}
    for name in ("spendlogs_v1_65.csv", "spendlogs_v1_74.csv"):
        header, rows = _csv_rows(name)
        i = {h: k for k, h in enumerate(header)}
        ided = [r for r in rows if r[i["request_id"]] not in ("", "None")]
        out[f"{name} (rows with an id)"] = (_write_csv(tmp_path / f"ids_{name}", header, ided), True)
        out[f"{name} (a row without id: the Python path)"] = (LITELLM / name, False)
        odd = []
        for n, src in enumerate(ided):
            r = list(src)
            r[i["request_id"]] = f"odd-{n}"
            if n == 0:      # a recorded 0 with tokens: unpriced by LiteLLM, kept in attrs
                r[i["spend"]] = "0.0"
            if n == 1:      # a cache hit costs nothing: its 0 is a price
                r[i["spend"]], r[i["cache_hit"]] = "0", "True"
            if n == 2:      # a provider prefix, no custom_llm_provider; aware times
                r[i["model"]], r[i["custom_llm_provider"]] = "anthropic/claude-3-5-haiku", ""
                r[i["startTime"]], r[i["endTime"]] = "2025-03-04T14:00:00Z", "2025-03-04T14:00:01.250Z"
                r[i["completionStartTime"]] = "2025-03-04T14:00:00.300+00:00"
            if n == 3:      # a failure named by the metadata's error_information; an unreadable count
                meta = json.loads(r[i["metadata"]])
                meta["error_information"] = {"error_class": "RateLimitError", "llm_provider": "openai"}
                if "status" in i:
                    r[i["status"]] = "failure"
                else:       # LiteLLM 1.65 kept the status in the metadata only
                    meta["status"] = "failure"
                r[i["metadata"]] = json.dumps(meta)
                r[i["completion_tokens"]] = "lots"
            if n == 4:      # no usage object: the response's usage; a time of one awareness and one of the other
                meta = json.loads(r[i["metadata"]])
                meta.pop("usage_object", None)
                r[i["metadata"]], r[i["cache_hit"]] = json.dumps(meta), "None"
                r[i["completionStartTime"]] = "2025-03-04T14:00:00.300Z"
            odd.append(r)
        out[f"{name} (odd values)"] = (_write_csv(tmp_path / f"odd_{name}", header, odd), True)
        # not the fast path's: a byte-order mark, more fields than the header, a time it does not read alike,
        # a quoted field over two lines (a record of two lines: the Python path numbers it by its last line)
        out[f"{name} (BOM)"] = (_write_csv(tmp_path / f"bom_{name}", header, ided, bom=True), False)
        out[f"{name} (extra field)"] = (_write_csv(tmp_path / f"extra_{name}", header,
                                                   ided[:1] + [ided[1] + ["surplus"]] + ided[2:]), False)
        late = [list(r) for r in ided]
        late[1][i["startTime"]] = "2025-03-04T14:00:00,5"
        out[f"{name} (comma time)"] = (_write_csv(tmp_path / f"comma_{name}", header, late), False)
        multi = [list(r) for r in ided]
        multi[0][i["api_base"]] = "http://a\nhttp://b"
        out[f"{name} (two-line record)"] = (_write_csv(tmp_path / f"multi_{name}", header, multi), False)
    # GET /spend/logs: an array of rows, JSON columns as objects; as JSON Lines too; odd values as JSON has them
    rows = [r for r in json.loads((LITELLM / "spend_logs.json").read_text()) if r["request_id"] not in (None, "None")]
    odd = []
    for n, r in enumerate(rows):
        r = {**r, "request_id": f"odd-{n}"}
        if n == 0:
            r["spend"] = 0
        if n == 1:
            r["spend"], r["cache_hit"] = 0, True
        if n == 2:      # the JSON columns as JSON text (LiteLLM's StandardLoggingPayload writes them so)
            r["metadata"], r["response"] = json.dumps(r["metadata"]), json.dumps(r["response"])
        if n == 3:
            r["model"], r["custom_llm_provider"], r["prompt_tokens"] = "openai/gpt-4o-mini", None, "many"
        odd.append(r)
    for name, data in (("spend_logs.json rows with an id", rows), ("spend_logs.json odd values", odd)):
        f = tmp_path / f"{name.replace(' ', '_')}.json"
        f.write_text(json.dumps(data, indent=1))
        out[name] = (f, True)
        f = tmp_path / f"{name.replace(' ', '_')}.jsonl"
        f.write_text("\n".join(json.dumps(r) for r in data) + "\n")
        out[f"{name}, one per line"] = (f, True)
    out["spend_logs.json (a row without id: the Python path)"] = (LITELLM / "spend_logs.json", False)
    return out


def test_litellm_fast_path_reads_the_csv_exports_in_sql(tmp_path):
    import duckdb

    from finops.ingest import ecosystem
    from finops.ingest.base import scan_text
    from finops.ingest.tabular import iter_records
    c = store.connect(":memory:")
    for name, (path, fast) in _litellm_variants(tmp_path).items():
        p = probe(path)
        scan_text(p)
        src = ecosystem.litellm_fast_source(c, p, IngestOptions())
        if fast:
            n = (len(list(csv.DictReader(path.open()))) if path.suffix == ".csv"
                 else len(list(iter_records(probe(path)))))
            assert len(c.execute(src.sql, src.params).fetchall()) == n, name
        else:
            assert src is None or pytest.raises(duckdb.InvalidInputException, c.execute, src.sql, src.params), name


def test_litellm_fast_and_python_paths_store_the_same_rows(tmp_path, monkeypatch):
    for name, (path, _) in _litellm_variants(tmp_path).items():
        for opts in (IngestOptions(), IngestOptions(tenant="t0", model="m0")):
            fast = _stored(path, opts)
            slow = _stored(path, opts, monkeypatch, python_only=True)
            assert fast == slow, name
            assert len(fast) >= 5, name


def _readings(monkeypatch) -> list[bool]:
    """The readings a load takes, in order: True for the fast path, False for the Python path behind it."""
    from finops.ingest import ecosystem
    taken, read = [], ecosystem._read_litellm

    def spy(con, p, options, fast=True):
        src = read(con, p, options, fast=fast)
        taken.append(fast and src.fallback is not None)
        return src
    monkeypatch.setattr(ecosystem, "_read_litellm", spy)       # the fallback's reading
    import dataclasses

    from finops.ingest.base import ADAPTERS
    at = next(k for k, a in enumerate(ADAPTERS) if a.name == "litellm")
    # the first reading: the table's entry replaced (a list: put back when the test ends, by the fixture below)
    _TABLE_RESTORE.append((at, ADAPTERS[at]))
    ADAPTERS[at] = dataclasses.replace(ADAPTERS[at], read=spy)
    return taken


_TABLE_RESTORE: list = []


@pytest.fixture(autouse=True)
def _adapter_table_restored():
    yield
    from finops.ingest.base import ADAPTERS
    while _TABLE_RESTORE:
        at, original = _TABLE_RESTORE.pop()
        ADAPTERS[at] = original


def _big_csv(tmp_path, name, change=None, rows=400):
    """A psql CSV of ``rows`` copies of the 1.74 export's rows with an id (well past the 256 KiB the probe reads),
    ``change(n, row, index)`` applied to each."""
    header, src = _csv_rows("spendlogs_v1_74.csv")
    i = {h: k for k, h in enumerate(header)}
    ided = [r for r in src if r[i["request_id"]] not in ("", "None")]
    out = []
    for n in range(rows):
        r = list(ided[n % len(ided)])
        r[i["request_id"]] = f"big-{n}"
        if change:
            change(n, r, i)
        out.append(r)
    return _write_csv(tmp_path / name, header, out), i


def test_litellm_fast_path_names_the_row_and_field_of_a_bad_value(tmp_path, monkeypatch):
    def bad(n, r, i):
        if n == 300:
            r[i["prompt_tokens"]] = "12x"
        if n == 350:
            r[i["cache_hit"]] = "maybe"
    path, _ = _big_csv(tmp_path, "bad_far.csv", bad)
    assert path.stat().st_size > 256 * 1024
    taken = _readings(monkeypatch)
    c = store.connect(":memory:")
    [r] = ingest_path(c, path)
    assert taken == [True]              # read in SQL, no second reading
    assert (r.rows_ingested, r.rows_rejected) == (398, 2)
    by_row = {x["row"]: x for x in r.rejects}
    # rows are numbered by their line (the header is line 1): row n is on line n + 2
    assert sorted(by_row) == [302, 352]
    assert "input_tokens" in by_row[302]["reason"] and "12x" in by_row[302]["reason"]
    assert "cache_hit" in by_row[352]["reason"] and "maybe" in by_row[352]["reason"]
    assert r.file == "bad_far.csv" and {x["field"] for x in r.rejects} == {"input_tokens", "cache_hit"}
    c.close()
    monkeypatch.undo()
    assert _stored(path, IngestOptions()) == _stored(path, IngestOptions(), monkeypatch, python_only=True)


def test_a_two_line_record_past_the_probed_head_takes_the_python_path(tmp_path, monkeypatch):
    """A quoted line break the probe did not see: the SQL finds it and the Python path reads the file, so the rows
    after it keep the numbers of their last line."""
    def two_lines(n, r, i):
        if n == 300:
            r[i["api_base"]] = "http://a\nhttp://b"
        if n == 350:
            r[i["prompt_tokens"]] = "12x"
    path, _ = _big_csv(tmp_path, "multi_far.csv", two_lines)
    taken = _readings(monkeypatch)
    c = store.connect(":memory:")
    [r] = ingest_path(c, path)
    c.close()
    assert taken == [True, False]
    assert (r.rows_ingested, r.rows_rejected) == (399, 1)
    assert r.rejects[0]["row"] == 353 and "input_tokens" in r.rejects[0]["reason"]    # line 352 + the break
    monkeypatch.undo()
    assert _stored(path, IngestOptions()) == _stored(path, IngestOptions(), monkeypatch, python_only=True)


def test_the_files_column_names_are_bound_as_attrs_keys(tmp_path, monkeypatch):
    """attrs keys are the CSV's own column names: bound parameters (in the SQL text a name is only ever a quoted
    identifier), so any name is stored as it is."""
    from finops import sql
    from finops.ingest import ecosystem
    from finops.ingest.base import scan_text
    odd_names = ["o'brien", 'say "hi"', "x'); DROP TABLE requests; --", "?", "naïve"]
    header, rows = _csv_rows("spendlogs_v1_74.csv")
    i = {h: k for k, h in enumerate(header)}
    ided = [r for r in rows if r[i["request_id"]] not in ("", "None")]
    path = _write_csv(tmp_path / "names.csv", header + odd_names,
                      [r + [f"v{n}-{k}" for k in range(len(odd_names))] for n, r in enumerate(ided)])
    c = store.connect(":memory:")
    p = probe(path)
    scan_text(p)
    src = ecosystem.litellm_fast_source(c, p, IngestOptions())
    assert not any(sql.string_literal(name) in src.sql for name in odd_names)
    assert all(json.dumps(name) in src.params for name in odd_names)
    taken = _readings(monkeypatch)
    [r] = ingest_path(c, path)
    assert taken == [True] and r.rows_ingested == len(ided)
    attrs = [json.loads(a) for (a,) in c.execute("SELECT attrs FROM requests ORDER BY ts, request_id").fetchall()]
    assert sorted(tuple(a[k] for k in odd_names) for a in attrs) == sorted(
        tuple(f"v{n}-{k}" for k in range(len(odd_names))) for n in range(len(ided)))
    assert c.execute("SELECT count(*) FROM requests").fetchall()[0][0] == len(ided)
    c.close()
    monkeypatch.undo()
    assert _stored(path, IngestOptions()) == _stored(path, IngestOptions(), monkeypatch, python_only=True)


def test_litellm_json_rows_with_json_text_a_model_logged_field_or_a_key_twice_store_what_python_stores(
        tmp_path, monkeypatch):
    """attrs of GET /spend/logs rows: a row whose strings may hold JSON text (spaces before it, a brace written as
    an escape) has its fields parsed as _jsonish does; a model_logged field of its own and a key written twice
    hand the file to Python; each stores what the Python path stores."""
    rows = [r for r in json.loads((LITELLM / "spend_logs.json").read_text()) if r["request_id"] not in (None, "None")]
    text = [{**r, "request_id": f"t-{n}"} for n, r in enumerate(rows)]
    text[0]["messages"] = '  [{"role": "user", "content": "hi"}]'
    text[1]["api_base"] = "{not json"
    variants = {"json text": json.dumps(text).replace('"{not json"', '"\\u007bnot json"'),
                "model_logged": json.dumps([{**rows[0], "model_logged": "mine"}, *rows[1:]]),
                "key twice": json.dumps(rows).replace('"call_type":', '"team_id": "other", "call_type":', 1)}
    for name, body in variants.items():
        path = tmp_path / f"{name.replace(' ', '_')}.json"
        path.write_text(body)
        fast = _stored(path, IngestOptions())
        assert fast == _stored(path, IngestOptions(), monkeypatch, python_only=True), name
        assert len(fast) >= 5, name


def test_litellm_json_rows_with_the_first_rows_fields_or_others_store_what_python_stores(tmp_path, monkeypatch):
    """attrs of a GET /spend/logs row with the first row's fields in their order are joined from the values read
    once; a row with other fields (reordered, one missing, one more, odd values), or a file whose first row has a
    name no JSON path can hold as it is, goes through the merge patch: each stores what the Python path stores, in
    one reading."""
    from finops.ingest import ecosystem
    rows = [r for r in json.loads((LITELLM / "spend_logs.json").read_text()) if r["request_id"] not in (None, "None")]
    rows = [{**r, "request_id": f"k-{n}"} for n, r in enumerate(rows * 3)]
    odd = [dict(reversed(list(rows[1].items()))), {k: v for k, v in rows[2].items() if k != "api_base"},
           {**rows[3], "extra": {"a": [1, 2.50, None, -0.0, 1e300, "é"]}},
           {**rows[4], "api_base": None, "user": 12345678901234567890, "cache_key": 1.5e-7, "session_id": True}]
    variants = {"mixed": [rows[0], *odd, *rows[5:]], "odd first name": [{**rows[0], 'say "hi"': 1}, *rows[1:]]}
    for name, body in variants.items():
        path = tmp_path / f"{name.replace(' ', '_')}.json"
        path.write_text(json.dumps(body))
        p = probe(path)
        known = ecosystem._litellm_known_fields(p, ecosystem.json_records_format(p))
        assert (known == list(body[0])) if name == "mixed" else known is None, name
        taken = _readings(monkeypatch)
        fast = _stored(path, IngestOptions())
        assert taken == [True], name
        monkeypatch.undo()
        assert fast == _stored(path, IngestOptions(), monkeypatch, python_only=True), name
        assert len(fast) == len(body) + 1, name
        # the same attrs text as the merge patch writes (the joined reading off)
        monkeypatch.setattr(ecosystem, "_litellm_known_fields", lambda p, fmt: None)
        patched = loaded_attrs(path)
        monkeypatch.undo()
        assert loaded_attrs(path) == patched, name


