"""Issue 17, whole files: valid CSV that DuckDB's fast path refused, lines over the limit, NUL bytes,
and reader errors that must reach a person as a sentence (the reader's own message in the log)."""
import gzip
import logging

import pytest

from finops import store
from finops.errors import InputError
from finops.ingest import ingest_path
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
    """A JSON Lines file broken in the middle: DuckDB's message (with the server path) stays in the log."""
    good = '{"request_id": "r%d", "ts": "2026-11-20T10:00:00Z", "model": "m", "input_tokens": 1}\n'
    f = tmp_path / "broken.jsonl"
    f.write_text(good % 1 + '{"request_id": "r2", "ts": broken\n' + good % 3)
    with caplog.at_level(logging.WARNING, logger="finops"), pytest.raises(InputError) as exc:
        ingest_path(con, f)
    assert str(exc.value) == ("file broken.jsonl: cannot read it as JSON: the file does not parse. Check that it "
                              "is complete and valid JSON (quotes closed, the same fields on every line), or pick "
                              "another format; the reader's own message is in the server log")
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
