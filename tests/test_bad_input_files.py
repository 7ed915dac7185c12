"""Issue 17, whole files: valid CSV that DuckDB's fast path refused, lines over the limit, NUL bytes,
and reader errors that must reach a person as a sentence (the reader's own message in the log)."""
import gzip
import logging

import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import IngestOptions, ingest_path
from finops.ingest.base import HEAD_BYTES, MAX_LINE_BYTES

HEADER = "request_id,ts,model,tenant,input_tokens,output_tokens\n"


def _row(i, tenant="acme"):
    return f"r{i},2026-11-20T10:00:{i % 60:02d}Z,gpt-4o,{tenant},10,5\n"


@pytest.fixture()
def con():
    c = store.connect(":memory:")
    yield c
    c.close()


def _unchanged(con):
    assert store.row_count(con) == 0
    assert store.batches(con).empty


def test_a_quoted_newline_in_a_field_loads(con, tmp_path):
    f = tmp_path / "quoted.csv"
    f.write_text(HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,"ac\nme",10,5\n' + _row(2))
    r = ingest_path(con, f)[0]
    assert (r.rows_ingested, r.rows_rejected) == (2, 0)
    assert sorted(t for (t,) in con.execute("SELECT tenant FROM requests").fetchall()) == ["ac\nme", "acme"]


def test_a_quoted_newline_past_the_probed_head_loads(con, tmp_path):
    """Detection sees only the first 256 KiB: the loader reads again on one thread when DuckDB's
    parallel scanner meets the quoted newline further on."""
    body = "".join(_row(i) for i in range(8000))
    assert len(body) > HEAD_BYTES
    f = tmp_path / "late.csv"
    f.write_text(HEADER + body + 'q1,2026-11-20T11:00:00Z,gpt-4o,"multi\nline",10,5\n' + _row(9001))
    r = ingest_path(con, f)[0]
    assert (r.rows_ingested, r.rows_rejected) == (8002, 0)
    assert con.execute("SELECT tenant FROM requests WHERE request_id = 'q1'").fetchall() == [("multi\nline",)]


@pytest.mark.parametrize("gz", [False, True])
def test_a_line_over_the_limit_refuses_the_file_naming_line_and_limit(con, tmp_path, gz):
    text = HEADER + _row(1) + _row(2, tenant="x" * (MAX_LINE_BYTES + 10)) + _row(3)
    f = tmp_path / ("long.csv.gz" if gz else "long.csv")
    f.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    with pytest.raises(InputError) as exc:
        ingest_path(con, f)
    msg = str(exc.value)
    assert msg.startswith(f"file {f.name}: line 3 is longer than the limit of 1,048,576 bytes (1 MiB)")
    _unchanged(con)


def test_a_line_at_the_limit_loads(con, tmp_path):
    row = _row(2, tenant="")
    pad = "y" * (MAX_LINE_BYTES - len(row))      # the line with its newline is exactly the limit
    f = tmp_path / "edge.csv"
    f.write_text(HEADER + _row(1) + row.replace(",,", f",{pad},"))
    assert ingest_path(con, f)[0].rows_ingested == 2


@pytest.mark.parametrize("before", [0, 60, 4000, HEAD_BYTES // 40 + 100])
def test_a_nul_byte_refuses_the_file_naming_its_offset_wherever_it_is(con, tmp_path, before):
    """One rule before and after the first 4 KiB and past the probed head: refused, offset and line named."""
    head = HEADER + "".join(_row(i) for i in range(before))
    f = tmp_path / "nul.csv"
    f.write_bytes((head + "r,2026-11-20T10:00:00Z,gpt-4o,ac\0me,10,5\n" + _row(1)).encode())
    offset = len(head.encode()) + len("r,2026-11-20T10:00:00Z,gpt-4o,ac")
    with pytest.raises(InputError) as exc:
        ingest_path(con, f)
    assert str(exc.value).startswith(f"file nul.csv: the file holds a NUL byte at byte {offset:,} "
                                     f"(line {before + 2:,}): it is binary or UTF-16")
    _unchanged(con)


def test_a_real_binary_file_is_still_called_binary(con, tmp_path):
    f = tmp_path / "image.csv"
    f.write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)) * 4)
    with pytest.raises(InputError, match="the file is binary"):
        ingest_path(con, f)


def test_a_folder_is_refused_in_a_sentence_naming_it(con, tmp_path):
    """``finops ingest logs/`` stopped with IsADirectoryError's traceback."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.csv").write_text(HEADER + _row(1))
    with pytest.raises(InputError, match=r"file .*logs: is a folder: give the files in it \(e.g. .*logs/\*.csv\)"):
        ingest_path(con, tmp_path / "logs")
    _unchanged(con)


def test_a_file_the_process_may_not_read_is_refused_in_a_sentence(con, tmp_path, monkeypatch):
    """A file without read permission (the tests run as root, who may read any file: the open's PermissionError
    is raised in its place) is a sentence naming it, not a traceback."""
    from finops.ingest import loader

    def denied(path, name=None):
        raise PermissionError(13, "Permission denied", str(path))
    f = tmp_path / "locked.csv"
    f.write_text(HEADER + _row(1))
    monkeypatch.setattr(loader, "probe", denied)
    with pytest.raises(InputError, match="file locked.csv: cannot be read: Permission denied"):
        ingest_path(con, f)
    _unchanged(con)


def test_a_records_path_given_for_a_csv_is_refused_not_ignored(con, tmp_path):
    """--records-path names where a JSON document keeps its records; a CSV has none (the path was ignored and
    the file read as if it had been found)."""
    f = tmp_path / "calls.csv"
    f.write_text(HEADER + _row(1))
    with pytest.raises(InputError, match="file calls.csv, field records_path: --records-path reaches into a JSON "
                                         "document or JSON lines; this file is a CSV"):
        ingest_path(con, f, IngestOptions(records_path="data"))
    _unchanged(con)


def test_a_corrupt_parquet_is_a_sentence_without_the_server_path(con, tmp_path, caplog):
    f = tmp_path / "upload-7f3a" / "fleet.parquet"
    f.parent.mkdir()
    f.write_bytes(b"PAR1" + b"\x15\x00" * 50)
    with caplog.at_level(logging.WARNING, logger="finops"), pytest.raises(InputError) as exc:
        ingest_path(con, f)
    msg = str(exc.value)
    assert msg == ("file fleet.parquet: the Parquet file is truncated or corrupt: export it again (the "
                   "reader's own message is in the server log)")
    assert str(tmp_path) in caplog.text           # the detail is logged, for the operator
    _unchanged(con)


def test_a_reader_error_is_a_sentence_and_the_detail_is_logged(con, tmp_path, caplog):
    """A JSON Lines file broken in the middle: DuckDB's message (with the server path) stays in the log; the person
    is told the line to mend (Python's reading of it: DuckDB's own names a line after the record it lost)."""
    good = '{"request_id": "r%d", "ts": "2026-11-20T10:00:00Z", "model": "m", "input_tokens": 1}\n'
    f = tmp_path / "broken.jsonl"
    f.write_text(good % 1 + '{"request_id": "r2", "ts": broken\n' + good % 3)
    with caplog.at_level(logging.WARNING, logger="finops"), pytest.raises(InputError) as exc:
        ingest_path(con, f)
    assert str(exc.value) == ("file broken.jsonl, row 2: line 2 is not valid JSON (Expecting value at character 28): "
                              "fix or remove that line, then load the file again; nothing was loaded")
    assert str(f) not in str(exc.value)
    assert str(f) in caplog.text and "Malformed JSON" in caplog.text
    _unchanged(con)


def test_a_ts_and_model_only_csv_is_detected_as_canonical(con, tmp_path):
    f = tmp_path / "minimal.csv"
    f.write_text("ts,model\n2026-11-20T10:00:00Z,gpt-4o\n")
    r = ingest_path(con, f)[0]
    assert (r.format, r.rows_ingested) == ("canonical", 1)


# ---------------------------------------------------------------- quotes DuckDB's reader would misread

def _refused(con, tmp_path, text, name="quotes.csv"):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(InputError) as exc:
        ingest_path(con, f)
    _unchanged(con)
    return str(exc.value)


def test_an_unclosed_quote_refuses_the_file_naming_the_line_it_opened_and_the_field(con, tmp_path):
    """DuckDB read the rest of the file into that one field: one row stored, r2 and r3 lost in silence."""
    msg = _refused(con, tmp_path, HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,"acme,10,5\n' + _row(2) + _row(3))
    assert msg.startswith("file quotes.csv, field tenant: line 2: the quote that opens this field is never closed")
    assert 'double a quote that is part of the text ("")' in msg


def test_a_stray_quote_that_a_later_quote_closes_refuses_the_file(con, tmp_path):
    """The unclosed quote of line 2 ran into line 4's quoted field: DuckDB swallowed r2 and r3 into r1's tenant."""
    msg = _refused(con, tmp_path, HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,"acme,10,5\n' + _row(2)
                   + 'r3,2026-11-20T10:00:02Z,gpt-4o,"acme",10,5\n' + _row(4))
    assert msg.startswith("file quotes.csv, field tenant: line 2: the quoted field that opens here ends on line 4 "
                          "with text after its closing quote ('acme\",10,5')")


def test_a_stray_quote_closed_by_a_later_quoted_quote_refuses_the_file_naming_the_swallowed_row(con, tmp_path):
    """Found by Hypothesis: the stray quote of line 2 is closed, validly, by the stray quote of line 5's tenant;
    every row between is one tenant's text. Python's csv reads it the same way, so only their shape tells."""
    msg = _refused(con, tmp_path, HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,"acme,10,5\n' + _row(2) + _row(3)
                   + 'r4,2026-11-20T10:00:03Z,gpt-4o,acme",10,5\n')
    assert msg.startswith("file quotes.csv, field tenant: line 2: the quoted field that opens here holds line 3 "
                          "whole, with the 6 fields of a row, and closes on line 5")


def test_a_stray_quote_closed_where_the_next_rows_field_opens_refuses_the_file(con, tmp_path):
    """Found by Hypothesis: line 2's stray quote closes at the quote opening line 3's tenant, so line 3's first
    three fields (``r2``, its time, its model) became line 2's tenant text and r2 was lost."""
    msg = _refused(con, tmp_path, HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,"acme,"",10,5\n'
                   + 'r2,2026-11-20T10:00:01Z,gpt-4o,",,",10,5\n' + _row(3))
    assert msg.startswith("file quotes.csv, field tenant: line 2: the quoted field that opens here closes on line 3 "
                          "after the first 3 fields of what reads as a row ('r2' ...)")


def test_quoted_prompts_whose_lines_have_commas_load(con, tmp_path):
    """Lines with as many commas as a row, or as the field's position, but not shaped as a row's start, are text."""
    f = tmp_path / "prompt.csv"
    f.write_text(HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,"first line\n- a, b, c, d",10,5\n'
                 + 'r2,2026-11-20T10:00:01Z,gpt-4o,"\na,,,",10,5\n'        # Hypothesis: a valid file, refused once
                 + 'r3,2026-11-20T10:00:02Z,gpt-4o,"x\n,,,,,\ny",10,5\n')   # a whole line of 5 commas
    r = ingest_path(con, f)[0]
    assert (r.rows_ingested, r.rows_rejected) == (3, 0)
    assert con.execute("SELECT tenant FROM requests ORDER BY request_id").fetchall() == [
        ("first line\n- a, b, c, d",), ("\na,,,",), ("x\n,,,,,\ny",)]


def test_a_prompt_of_several_lines_with_commas_in_a_quoted_field_loads(con, tmp_path):
    """Lines of a quoted field with fewer delimiters than a row are text, as before."""
    f = tmp_path / "prompt.csv"
    f.write_text(HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,"a, b\nc, d, e\nf",10,5\n' + _row(2))
    r = ingest_path(con, f)[0]
    assert (r.rows_ingested, r.rows_rejected) == (2, 0)
    assert con.execute("SELECT tenant FROM requests WHERE request_id = 'r1'").fetchone() == ("a, b\nc, d, e\nf",)


def test_a_space_before_an_opening_quote_refuses_the_file(con, tmp_path):
    """DuckDB opens a quoted field after one space at a field's start; Python's csv keeps ` "acme"` as text.
    Found by Hypothesis, where the two read a different number of rows."""
    msg = _refused(con, tmp_path, HEADER + _row(1) + 'r2,2026-11-20T10:00:01Z,gpt-4o, "acme",10,5\n' + _row(3))
    assert msg.startswith("file quotes.csv, field tenant: line 3: the field starts with a space and then a quote")
    assert msg.endswith("Nothing loaded: remove the space, or put it inside the quotes")


def test_text_after_a_closing_quote_refuses_the_file_naming_line_and_field(con, tmp_path):
    """``"ac"me``: DuckDB stored 'acm', the rest of the field dropped."""
    msg = _refused(con, tmp_path, HEADER + _row(1) + 'r2,2026-11-20T10:00:01Z,"gpt"4o,acme,10,5\n')
    assert msg.startswith("file quotes.csv, field model: line 3: the quoted field that opens here ends with text "
                          "after its closing quote ('4o,acme,10,5')")


def test_a_quoted_field_over_the_line_limit_refuses_the_file(con, tmp_path):
    from finops.ingest.base import MAX_QUOTED_FIELD_LINES
    body = "\n".join(f"line {i}" for i in range(MAX_QUOTED_FIELD_LINES + 1))
    msg = _refused(con, tmp_path, HEADER + f'r1,2026-11-20T10:00:00Z,gpt-4o,"{body}",10,5\n' + _row(2))
    assert msg.startswith("file quotes.csv, field tenant: line 2: the quoted field that opens here runs over more "
                          f"than {MAX_QUOTED_FIELD_LINES:,} lines")


def test_a_quote_inside_an_unquoted_field_is_text_and_loads(con, tmp_path):
    """As DuckDB reads it: a quote that does not open a field is part of it; escaped quotes load too."""
    f = tmp_path / "inch.csv"
    f.write_text(HEADER + 'r1,2026-11-20T10:00:00Z,gpt-4o,ac"me,10,5\n'
                 + 'r2,2026-11-20T10:00:01Z,gpt-4o,"say ""hi"", then\ngo",10,5\n' + _row(3))
    r = ingest_path(con, f)[0]
    assert (r.rows_ingested, r.rows_rejected) == (3, 0)
    assert dict(con.execute("SELECT request_id, tenant FROM requests").fetchall()) == {
        "r1": 'ac"me', "r2": 'say "hi", then\ngo', "r3": "acme"}


@pytest.mark.parametrize("block", [1, 2, 3, 5, 64])
def test_quotes_are_followed_across_block_boundaries(block):
    """Whatever the blocks' size, the same verdict (the scanner reads 1 MiB blocks of any file)."""
    from finops.ingest.base import CsvQuotes
    cols = HEADER.strip().split(",")
    cases = {'r1,t,m,"a,""b""\nc",1,2\nr2,t,m,x"y,1,2\n': None,
             'r1,t,m,"a,1,2\nr2,t,m,b,1,2\n': "never closed",
             'r1,t,m,"a""\nb"c,1,2\n': "text after its closing quote",
             'r1,t,m,"ab"': None}
    for text, verdict in cases.items():
        data = (HEADER + text).encode()
        q = CsvQuotes("f.csv", cols)
        try:
            for i in range(0, len(data), block):
                q.feed(data[i:i + block])
            q.finish()
            got = None
        except InputError as exc:
            got = str(exc)
            assert "field tenant: line 2:" in got, got
        assert (got is None) == (verdict is None) and (verdict is None or verdict in got), (text, block, got)


# ---------------------------------------------------------------- a record of another JSON type

NOT_OBJECTS = {"an array": "[1, 2]", "a number": "3", "a string": '"x"', "null": "null"}


def _stored_state(con):
    return (store.row_count(con), len(store.batches(con)),
            con.execute("SELECT list(request_id ORDER BY request_id) FROM requests").fetchall())


def _with_rows(con, tmp_path):
    """A store already holding a load, to show a refused file leaves it as it was."""
    f = tmp_path / "first.csv"
    f.write_text(HEADER + _row(1) + _row(2))
    ingest_path(con, f)
    return _stored_state(con)


def _refused_naming(con, tmp_path, f, options=None):
    before = _with_rows(con, tmp_path)
    with pytest.raises(InputError) as exc:
        ingest_path(con, f, options)
    assert _stored_state(con) == before
    return exc.value


MOONCAKE_LINE = '{{"timestamp": {t}, "input_length": 100, "output_length": 5, "hash_ids": [1, 2]}}'


@pytest.mark.parametrize("kind", sorted(NOT_OBJECTS))
def test_a_mooncake_line_that_is_no_object_names_file_row_and_field(con, tmp_path, kind):
    from datetime import datetime

    from finops.ingest import IngestOptions
    f = tmp_path / "trace.jsonl"
    f.write_text("\n".join([MOONCAKE_LINE.format(t=0), MOONCAKE_LINE.format(t=5), NOT_OBJECTS[kind],
                            MOONCAKE_LINE.format(t=9)]) + "\n")
    err = _refused_naming(con, tmp_path, f, IngestOptions(format="mooncake", model="kimi", start=datetime(2025, 1, 1)))
    assert (err.file, err.row, err.field) == ("trace.jsonl", 3, "timestamp")
    assert str(err) == (f"file trace.jsonl, row 3, field timestamp: expected a Mooncake request (a JSON object), "
                        f"found {kind}")


CANONICAL_LINE = '{{"request_id": "r{i}", "ts": "2026-11-20T10:00:0{i}Z", "model": "gpt-4o"}}'


def _stored_rows(con) -> list[tuple]:
    return con.execute("SELECT * EXCLUDE (batch_id) FROM requests ORDER BY request_id").fetchall()


@pytest.mark.parametrize("kind", ["an array", "a number", "a string"])
@pytest.mark.parametrize("late", [False, True])
def test_a_canonical_json_lines_record_that_is_no_object_is_a_row_rejected_naming_it(con, tmp_path, kind, late):
    """DuckDB would read the file as one column of values (every row rejected "ts: missing"); past its type
    sample (``late``) the typed reading fails and the checked one reads it. The record is rejected naming what it
    is, the rest load exactly as the same file without it does, and loading it again adds nothing."""
    lines = [CANONICAL_LINE.format(i=i % 10).replace(f'"r{i % 10}"', f'"r{i}"') for i in range(30_000 if late else 2)]
    lines[1] = lines[1].replace('"model"', '"attrs": {"team": "a"}, "cost_usd": null, "model"')
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(lines) + "\n")
    lines[len(lines) - 1:len(lines) - 1] = [NOT_OBJECTS[kind]]
    f = tmp_path / "requests.jsonl"
    f.write_text("\n".join(lines) + "\n")
    r = ingest_path(con, f)[0]
    row = len(lines) - 1
    assert (r.format, r.rows_read, r.rows_ingested, r.rows_rejected) == ("canonical", len(lines), len(lines) - 1, 1)
    assert [(x["row"], x["field"], x["reason"]) for x in r.rejects] == [
        (row, "row", f"row: expected a record (a JSON object), found {kind}")]
    assert ingest_path(con, f)[0].rows_ingested == 0
    other = store.connect(":memory:")
    ingest_path(other, clean)
    assert _stored_rows(con) == _stored_rows(other)


@pytest.mark.parametrize("kind", ["an array", "a number", "a string"])
def test_a_canonical_json_array_element_that_is_no_object_is_a_row_rejected(con, tmp_path, kind):
    from finops.ingest import IngestOptions
    f = tmp_path / "requests.json"
    f.write_text(f"[{CANONICAL_LINE.format(i=1)}, {NOT_OBJECTS[kind]}, {CANONICAL_LINE.format(i=2)}]")
    r = ingest_path(con, f, IngestOptions(format="canonical"))[0]
    assert (r.rows_read, r.rows_ingested) == (3, 2)
    assert [(x["row"], x["reason"]) for x in r.rejects] == [(2, f"row: expected a record (a JSON object), found {kind}")]


@pytest.mark.parametrize("kind", ["an array", "a number", "null"])
def test_a_json_file_of_no_object_at_all_is_refused(con, tmp_path, kind):
    f = tmp_path / "requests.jsonl"
    f.write_text("\n".join([NOT_OBJECTS[kind]] * 3) + "\n")
    assert _refused_naming(con, tmp_path, f).file == "requests.jsonl"


NULL_REJECT = "row: expected a record (a JSON object), found null"


@pytest.mark.parametrize("ext", ["jsonl", "json"])
def test_a_null_json_record_is_a_row_rejected_as_no_object(con, tmp_path, ext):
    """DuckDB reads a record ``null`` as one of no fields (as ``{}``): that row is rejected saying it is no JSON
    object (it said "ts: missing; model: missing"), the rest load; a record ``{}`` keeps the checks' reason."""
    records = [CANONICAL_LINE.format(i=1), "null", "{}", CANONICAL_LINE.format(i=2), "  null  "]
    f = tmp_path / f"requests.{ext}"
    f.write_text("\n".join(records) + "\n" if ext == "jsonl" else "[" + ",\n".join(records) + "]")
    r = ingest_path(con, f)[0]
    assert (r.file, r.format, r.rows_read, r.rows_ingested, r.rows_rejected) == (f.name, "canonical", 5, 2, 3)
    assert [(x["row"], x["field"], x["reason"]) for x in r.rejects] == [
        (2, "row", NULL_REJECT), (3, "ts", "ts: missing; model: missing (give one with --model)"),
        (5, "row", NULL_REJECT)]
    assert con.execute("SELECT list(request_id ORDER BY request_id) FROM requests").fetchall()[0][0] == ["r1", "r2"]


def test_a_null_json_lines_record_with_strict_refuses_the_file_naming_it(con, tmp_path):
    from finops.ingest import IngestOptions
    f = tmp_path / "requests.jsonl"
    f.write_text("\n".join([CANONICAL_LINE.format(i=1), "null", CANONICAL_LINE.format(i=2)]) + "\n")
    err = _refused_naming(con, tmp_path, f, IngestOptions(strict=True))
    assert str(err) == f"file requests.jsonl: 1 bad rows, nothing loaded (--strict). First: row 2: {NULL_REJECT}"


def _otel_lines():
    from helpers import DATA
    return [line for line in (DATA / "otel_genai_spans.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("bad,found", [("3", "a number"), ('"x"', "a string"), ("null", "null"),
                                       ("[1, 2]", "a number")])      # a line that is an array is a page of records
def test_an_otel_line_that_is_no_object_names_file_and_row(con, tmp_path, bad, found):
    lines = _otel_lines()
    f = tmp_path / "spans.jsonl"
    f.write_text("\n".join(lines[:2] + [bad] + lines[2:]) + "\n")
    err = _refused_naming(con, tmp_path, f)
    assert str(err) == f"file spans.jsonl, row 3: expected an OTLP/JSON ExportTraceServiceRequest (a JSON object), found {found}"


@pytest.mark.parametrize("change,field,message", [
    (lambda d: d.update(resourceSpans=3), "resourceSpans", "expected a list of ResourceSpans (a JSON array), found a number"),
    (lambda d: d["resourceSpans"][0].update(resource=[1]), "resourceSpans[0].resource",
     "expected a Resource (a JSON object), found an array"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0].update(spans=[None]), "resourceSpans[0].scopeSpans[0].spans[0]",
     "expected Spans (a JSON object), found null"),
    (lambda d: d["resourceSpans"][0]["resource"].update(attributes=3), "resourceSpans[0].resource.attributes",
     "expected a list of KeyValues (a JSON array), found a number"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][0].update(attributes=[[1]]),
     "resourceSpans[0].scopeSpans[0].spans[0].attributes[0]", "expected KeyValues (a JSON object), found an array"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][0].update(status="ok"),
     "resourceSpans[0].scopeSpans[0].spans[0].status", "expected a Status (a JSON object), found a string"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "abc"}}),
     "resourceSpans[0].scopeSpans[0].spans[0].attributes",
     "attribute 'gen_ai.usage.input_tokens': intValue 'abc' is not an integer"),
    (lambda d: d["resourceSpans"][0]["resource"]["attributes"].append({"key": "x", "value": {"doubleValue": [1]}}),
     "resourceSpans[0].resource.attributes", "attribute 'x': doubleValue [1] is not a number"),
    (lambda d: d["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(
        {"key": "tags", "value": {"arrayValue": {"values": {"a": 1}}}}),
     "resourceSpans[0].scopeSpans[0].spans[0].attributes", "attribute 'tags': values is not a list"),
])
def test_an_otel_field_of_another_json_type_names_file_row_and_field(con, tmp_path, change, field, message):
    import json
    lines = _otel_lines()
    doc = json.loads(lines[1])
    change(doc)
    f = tmp_path / "spans.jsonl"
    f.write_text("\n".join([lines[0], json.dumps(doc)] + lines[2:]) + "\n")
    err = _refused_naming(con, tmp_path, f)
    assert (err.row, err.field) == (2, field)
    assert str(err) == f"file spans.jsonl, row 2, field {field}: {message}"


@pytest.mark.parametrize("kind", sorted(NOT_OBJECTS))
def test_an_llmperf_record_that_is_no_object_names_file_and_row(con, tmp_path, kind):
    import json
    from datetime import datetime

    from finops.ingest import IngestOptions
    from helpers import DATA
    doc = json.loads((DATA / "llmperf" / "individual" / "bedrock_13b.json").read_text())
    f = tmp_path / "bedrock_13b.json"
    f.write_text(json.dumps(doc[:2] + [json.loads(NOT_OBJECTS[kind])] + doc[2:]))
    err = _refused_naming(con, tmp_path, f, IngestOptions(format="llmperf", start=datetime(2025, 1, 1), model="m"))
    assert str(err) == f"file bedrock_13b.json, row 3: expected an LLMPerf request (a JSON object), found {kind}"


@pytest.mark.parametrize("kind", sorted(NOT_OBJECTS))
def test_a_vllm_bench_appended_line_that_is_no_object_names_file_and_line(con, tmp_path, kind):
    import json

    from helpers import DATA
    one = json.dumps(json.loads((DATA / "vllm_bench_serve_detailed.json").read_text()))
    f = tmp_path / "runs.jsonl"
    f.write_text("\n".join([one, NOT_OBJECTS[kind], one]) + "\n")
    err = _refused_naming(con, tmp_path, f)
    assert str(err) == f"file runs.jsonl:2: expected a vllm bench serve result (a JSON object), found {kind}"


@pytest.mark.parametrize("field,value,message", [
    ("input_lens", 5, "field input_lens: expected one value per request (a JSON array), found a number"),
    ("itls", {"a": 1}, "field itls: expected one value per request (a JSON array), found an object"),
    ("start_times", None, "row 1, field start_times: a start time is a number of seconds, found null"),
    ("errors", 3, "row 1, field errors: an error is a text, found a number"),
])
def test_a_vllm_bench_series_of_another_json_type_names_its_field(con, tmp_path, field, value, message):
    import json

    from helpers import DATA
    doc = json.loads((DATA / "vllm_bench_serve_detailed.json").read_text())
    n = len(doc["input_lens"])
    doc[field] = [value] * n if field in ("start_times", "errors") else value
    f = tmp_path / "run.json"
    f.write_text(json.dumps(doc))
    err = _refused_naming(con, tmp_path, f)
    assert str(err) == f"file run.json, {message}"


@pytest.mark.parametrize("block,kind", [([1], "an array"), ({"h": 1}, "an object")])
def test_a_mooncake_block_hash_of_another_json_type_names_file_row_and_field(con, tmp_path, block, kind):
    import json
    from datetime import datetime

    from finops.ingest import IngestOptions
    f = tmp_path / "trace.jsonl"
    odd = json.dumps({"timestamp": 7, "input_length": 100, "output_length": 5, "hash_ids": [1, block]})
    f.write_text("\n".join([MOONCAKE_LINE.format(t=0), odd, MOONCAKE_LINE.format(t=9)]) + "\n")
    err = _refused_naming(con, tmp_path, f, IngestOptions(format="mooncake", model="kimi", start=datetime(2025, 1, 1)))
    assert str(err) == f"file trace.jsonl, row 2, field hash_ids: a block hash is a number, found {kind}"


def test_a_refusal_the_quote_checks_make_after_the_rows_were_inserted_leaves_the_store_as_it_was(con, tmp_path,
                                                                                                monkeypatch):
    """A CSV's quotes are followed on a thread beside the load (base.TextScan). Here that thread is held back
    until the load has inserted its rows and written its rollups: the quote it then finds (DuckDB had stored
    'gpt' and dropped the rest of the field) still refuses the file whole, and nothing the load wrote stays."""
    import threading

    from finops.ingest import base

    inserted = threading.Event()
    real_scan, real_rollups = base.scan_text, store.insert_rollups

    def late_scan(p, stop=None, lines=True, quotes=True):
        assert inserted.wait(60), "the load never reached its rollups"
        real_scan(p, stop, lines, quotes)

    def rollups(*a, **k):
        real_rollups(*a, **k)
        inserted.set()

    monkeypatch.setattr(base, "scan_text", late_scan)
    monkeypatch.setattr(store, "insert_rollups", rollups)
    f = tmp_path / "late_quote.csv"
    body = HEADER + "".join(_row(i) for i in range(3000))
    f.write_text(body + 'r,2026-11-20T10:00:01Z,"gpt"4o,acme,10,5\n')
    with pytest.raises(InputError) as exc:
        ingest_path(con, f)
    assert str(exc.value).startswith("file late_quote.csv, field model: line 3,002: the quoted field that opens "
                                     "here ends with text after its closing quote ('4o,acme,10,5')")
    assert inserted.is_set()
    _unchanged(con)
    monkeypatch.undo()
    # the refusal is not remembered: the same file, fixed, loads
    f.write_text(body + 'r,2026-11-20T10:00:01Z,"gpt-4o",acme,10,5\n')
    assert ingest_path(con, f)[0].rows_ingested == 3001


def test_a_nul_byte_is_refused_before_any_reader_meets_the_file(con, tmp_path, monkeypatch):
    """The NUL and line-length checks come before the reading (a line too long never reaches a reader that
    would hold it in memory): the adapter is not even asked to read."""
    from finops.ingest import loader

    def no_read(*a, **k):
        raise AssertionError("the file was read")

    monkeypatch.setattr(loader, "_read_and_load", no_read)
    f = tmp_path / "nul.csv"
    body = HEADER + "".join(_row(i) for i in range(3000))
    f.write_bytes((body + "r,2026-11-20T10:00:00Z,gpt-4o,ac\0me,10,5\n").encode())
    with pytest.raises(InputError, match=r"NUL byte at byte"):
        ingest_path(con, f)
    _unchanged(con)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 64, 1 << 20])
def test_the_scan_finds_blank_json_lines_and_names_the_line_of_a_fault_across_block_boundaries(monkeypatch, tmp_path,
                                                                                               block):
    """The scan notes whether a JSON Lines file has a blank line (white space only) and numbers the line of a NUL
    byte or a line too long only when it refuses the file: the same answers whatever the blocks' size, checked
    against the whole text read at once."""
    import random
    import re

    from finops.ingest import base
    from finops.ingest.base import probe, scan_text
    monkeypatch.setattr(base, "SCAN_CHUNK", block)
    rng = random.Random(block)
    pieces = ['{"a": 1}', '{"b": " x "}', "\n", "\n", " ", "\t", "\r", "\r\n"]
    texts = ["", "\n", " \n", '{"a": 1}\n\n', '\n{"a": 1}\n', '{"a": 1}\n  ', '{"a": 1}\r\n \t\r\n{"a": 1}\n',
             '{"a": 1}\n{"b": 2}\n']
    texts += ['{"a": 0}\n' + "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30))) + "\n"
              for _ in range(60)]
    for i, text in enumerate(texts):
        f = tmp_path / f"t{i}.jsonl"
        f.write_bytes(text.encode())
        p = probe(f)
        if p.kind != "jsonl":
            continue
        scan_text(p)
        assert p.blank_json_lines is (re.search(rb"\n[ \t\r]*\n", b"\n" + text.encode()) is not None), repr(text)
    for i, (before, fault) in enumerate([(0, "\0"), (3, "\0"), (7, "x" * 40)]):
        text = '{"a": 1}\n' * before + '{"b": "' + fault + '"}\n' + '{"a": 1}\n'
        f = tmp_path / f"fault{i}.jsonl"
        f.write_bytes(b'{"a": 1}\n')
        clean = probe(f)        # probed clean: the probe refuses a NUL byte in the first bytes itself
        f.write_bytes(text.encode())
        monkeypatch.setitem(base.LINE_LIMITS, "jsonl", 30)
        with pytest.raises(InputError, match=rf"(line {before + 1} is longer|\(line {before + 1}\))"):
            scan_text(clean)


@pytest.mark.parametrize("late", [False, True])
@pytest.mark.parametrize("gz", [False, True])
def test_a_json_lines_line_that_does_not_parse_refuses_the_file_naming_its_line(con, tmp_path, late, gz):
    """A canonical JSON Lines file with one cut-off line in the middle (a writer killed mid-line) was refused as
    "the file does not parse ... (quotes closed, the same fields on every line)", naming no line: in a file of
    30,000 lines the person could not find it. The refusal names the line; the store is as it was."""
    lines = [CANONICAL_LINE.format(i=i % 10).replace(f'"r{i % 10}"', f'"r{i}"') for i in range(30_000 if late else 5)]
    bad = len(lines) - 2 if late else 2
    lines[bad] = '{"request_id": "r2", "ts"'       # 25 characters: the writer stopped there
    text = "\n".join(lines) + "\n"
    f = tmp_path / ("requests.jsonl.gz" if gz else "requests.jsonl")
    f.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    err = _refused_naming(con, tmp_path, f)
    assert (err.file, err.row) == (f.name, bad + 1)
    assert str(err) == (f"file {f.name}, row {bad + 1}: line {bad + 1:,} is not valid JSON (Expecting ':' delimiter "
                        "at character 26): fix or remove that line, then load the file again; nothing "
                        "was loaded")


# ---------------------------------------------------------------- text that is not UTF-8

EXCEL_ROWS = [("e1", "2026-11-20 10:00:00", "gpt-4o", "Zürich ops", "812", "143"),      # HEADER's order
              ("e2", "2026-11-20 10:00:01", "gpt-4o-mini", "東京", "450", "96")]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_utf16_file_as_excel_saves_unicode_text_loads_as_its_utf8_twin(con, tmp_path, encoding):
    """Excel's "Unicode Text" (and PowerShell's Out-File) write UTF-16 with a byte-order mark, tab-separated: it was
    refused as "the file is binary, not CSV, JSON(L), Parquet or log text". Its text is read as written."""
    bom = {"utf-16": "", "utf-16-le": "\ufeff", "utf-16-be": "\ufeff"}[encoding]
    text = "\r\n".join("\t".join(r) for r in [tuple(HEADER.strip().split(",")), *EXCEL_ROWS]) + "\r\n"
    f = tmp_path / "excel.txt"
    f.write_bytes((bom + text).encode(encoding))
    [r] = ingest_path(con, f)
    assert (r.file, r.format, r.rows_read, r.rows_ingested, r.rows_rejected) == ("excel.txt", "canonical", 2, 2, 0)
    got = con.execute("SELECT request_id, strftime(ts, '%Y-%m-%d %H:%M:%S'), model, tenant, input_tokens, "
                      "output_tokens FROM requests ORDER BY request_id").fetchall()
    assert got == [(a, b, c, d, int(e), int(g)) for a, b, c, d, e, g in EXCEL_ROWS]
    again = ingest_path(con, f)[0]
    assert (again.rows_ingested, again.duplicates_skipped) == (0, 2) and store.row_count(con) == 2


@pytest.mark.parametrize("late", [False, True])
def test_a_latin1_file_is_refused_naming_the_line_of_its_first_byte_that_is_not_utf8(con, tmp_path, late):
    """Excel's "CSV (Comma delimited)" writes the Windows code page: "Zürich" as 0xFC. Early in the file it was
    refused as "binary"; past the first 256 KiB as "the file does not parse ... quotes closed". The refusal names
    the byte and its line and says how to save the file; the store is as it was."""
    rows = [_row(i) for i in range(1, (12_000 if late else 4))]
    at = len(rows) - 2
    rows[at] = rows[at].replace("acme", "Zürich")
    f = tmp_path / "excel.csv"
    f.write_bytes((HEADER + "".join(rows)).encode("cp1252"))
    offset = len((HEADER + "".join(rows[:at])).encode("cp1252")) + rows[at].index("ü")
    assert late == (offset > HEAD_BYTES)
    err = _refused_naming(con, tmp_path, f)
    assert (err.file, err.row) == ("excel.csv", at + 2)
    assert str(err) == (f"file excel.csv, row {at + 2}: the file is not UTF-8 text: byte 0xFC at byte {offset:,} "
                        f"(line {at + 2:,}) is not UTF-8 (a Latin-1 / Windows-1252 file, as Excel's \"CSV (Comma "
                        "delimited)\" saves it). Save it as UTF-8 (Excel: \"CSV UTF-8 (Comma delimited)\") and load "
                        "it again")


# ---------------------------------------------------------------- a file too wide to read

@pytest.mark.parametrize("kind", ["csv", "jsonl", "json"])
def test_a_file_of_more_columns_than_the_limit_is_refused_before_it_is_read(con, tmp_path, kind):
    """Three rows of 10,000 columns (300 KB): as CSV the load ran out of its 768 MB and was refused as "the file
    does not parse ... (quotes closed ...)"; as JSON Lines it loaded after 610 s at 1.3 GB. A file of more than
    MAX_COLUMNS columns is refused at once, saying how many it has; the store is as it was."""
    import json

    from finops.ingest.base import MAX_COLUMNS
    assert MAX_COLUMNS == 1_000
    recs = [{"request_id": f"w{k}", "ts": "2026-11-20T10:00:00Z", "model": "gpt-4o",
             **{f"c{i}": i for i in range(10_000)}} for k in range(3)]
    f = tmp_path / f"wide.{kind}"
    if kind == "csv":
        f.write_text(",".join(recs[0]) + "\n" + "".join(",".join(map(str, r.values())) + "\n" for r in recs))
    else:
        f.write_text("".join(json.dumps(r) + "\n" for r in recs) if kind == "jsonl" else json.dumps(recs))
    err = _refused_naming(con, tmp_path, f)
    assert str(err) == (f"file wide.{kind}: the file has 10,003 columns, more than the 1,000 a log file may have "
                        "(each is read for every row): keep the columns the requests need and load it again")


def test_a_file_of_as_many_columns_as_the_limit_loads(con, tmp_path):
    from finops.ingest.base import MAX_COLUMNS
    names = ["request_id", "ts", "model"] + [f"c{i}" for i in range(MAX_COLUMNS - 3)]
    f = tmp_path / "wide.csv"
    f.write_text(",".join(names) + "\n" + "r1,2026-11-20T10:00:00Z,gpt-4o," + ",".join("7" * (MAX_COLUMNS - 3)) + "\n")
    [r] = ingest_path(con, f)
    assert (r.rows_ingested, r.rows_rejected) == (1, 0)


def test_a_csv_header_that_repeats_a_column_name_names_it_and_both_places(con, tmp_path):
    """A spreadsheet export with two "model" columns was refused as "the CSV header repeats a column name": in a
    header of 40 columns the person had to find which. The refusal names the column, both its places and the fix."""
    f = tmp_path / "dup.csv"
    f.write_text("request_id,ts,model,tenant,model\nr1,2026-11-20T10:00:00Z,gpt-4o,acme,other\n")
    err = _refused_naming(con, tmp_path, f)
    assert str(err) == ("file dup.csv, row 1, field model: the CSV header repeats the column 'model' (columns 3 and "
                        "5): rename or remove one and load the file again")


def test_canonical_columns_named_in_another_case_are_named_with_the_mapping_that_loads_them(con, tmp_path):
    """A canonical CSV whose header a spreadsheet capitalised ("Model", "Input_Tokens") was refused as "no known log
    format recognised ... use --format generic with --map", naming neither column. The refusal names them and
    gives the --map that loads the file (it does: the same rows as the lower-case header gives)."""
    from finops.ingest import IngestOptions
    f = tmp_path / "caps.csv"
    f.write_text("request_id,TS,Model,Input_Tokens\nc1,2026-11-20T10:00:00Z,gpt-4o,812\n")
    err = _refused_naming(con, tmp_path, f)
    assert str(err) == ("file caps.csv: no known log format recognised, but the columns TS, Model, Input_Tokens are "
                        "the canonical ts, model, input_tokens written in another case: rename them, or load it with "
                        "--map ts=TS,model=Model,input_tokens=Input_Tokens")
    [r] = ingest_path(con, f, IngestOptions(mapping={"ts": "TS", "model": "Model", "input_tokens": "Input_Tokens"}))
    assert r.rows_ingested == 1
    assert con.execute("SELECT model, input_tokens FROM requests WHERE request_id = 'c1'").fetchall() == [("gpt-4o", 812)]


@pytest.mark.parametrize("text", ["[]", " [ \n ]\n", '{"data": []}'])
def test_an_empty_json_array_is_refused_as_holding_no_rows(con, tmp_path, text):
    """An export of no requests (``[]``, or a page ``{"data": []}``) was refused as "no known log format recognised;
    supported formats: ... use --format generic with --map": there is no format to pick. It says the file holds
    no rows, as a CSV of a header only does."""
    f = tmp_path / "none.json"
    f.write_text(text)
    err = _refused_naming(con, tmp_path, f)
    assert str(err) == "file none.json: the file holds no rows (an empty JSON array)"
