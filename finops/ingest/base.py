"""The adapter table: one small object per log format.

An adapter knows how to recognise its format from a :class:`Probe` (the first
bytes of a file, decompressed) and how to read a file as a DuckDB SELECT that
yields, per source row:

``_row``      the 1-based row number in the source (for reject messages);
``_hash``     a content hash of the source row, used for ``request_id`` where the
              source has none (NULL when every row carries an id);
``_legacy_hash`` (optional) the hash an earlier version gave such a row, where it differs: the loader
              looks the row up by it too (tabular.legacy_text_sql);
canonical columns, raw (any type: the loader casts and validates them);
``attrs``     JSON of every source field without a canonical home.

Adapters read files as streams through DuckDB wherever the format allows; the
few that must parse in Python (text logs, nested JSON) build an Arrow table in
chunks.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb

from finops.errors import InputError


@dataclass(frozen=True)
class IngestOptions:
    format: str | None = None                   # force an adapter by name
    mapping: dict[str, str] = field(default_factory=dict)  # canonical -> source column
    model: str | None = None                    # constant model where the source has none
    tenant: str | None = None                   # constant tenant
    tenant_field: str | None = None             # source field that counts as tenant
    start: datetime | None = None               # start time for traces with relative times
    strict: bool = False                        # any bad row fails the whole batch
    file_label: str | None = None               # the name users know the file by (uploads)
    records_path: str | None = None             # dotted path to the records array of a JSON document

    def as_json(self) -> str:
        d = {"format": self.format, "mapping": dict(sorted(self.mapping.items())), "model": self.model,
             "tenant": self.tenant, "tenant_field": self.tenant_field,
             "start": self.start.isoformat() if self.start else None}
        return json.dumps(d, sort_keys=True)


@dataclass
class Probe:
    """What detection sees of a file: its name, container, first bytes and shape."""
    path: Path
    name: str
    container: str              # parquet | gzip | text
    head: bytes                 # first bytes (decompressed)
    kind: str                   # parquet | jsonl | json | csv | text | empty | binary
    columns: list[str] = field(default_factory=list)    # header / first-object keys
    first_record: dict | None = None
    lines: list[str] = field(default_factory=list)
    delimiter: str = ","
    # read a CSV on one thread: DuckDB's parallel scanner cannot split rows with a quoted newline
    serial_csv: bool = False
    # JSON Lines (uncompressed): whether a line is blank or white space only, as :func:`scan_text` found
    # (None: not scanned yet); the SQL readings number rows by record, the Python ones by line
    blank_json_lines: bool | None = None


@dataclass
class Source:
    """A file read as SQL: ``SELECT _row, _hash, <canonical...>, attrs FROM ...``."""
    sql: str
    params: list = field(default_factory=list)
    has_ids: bool = False       # every row carries request_id
    cleanup: Callable[[], None] | None = None
    # a slower, more forgiving reading to use when this one fails on a value (typed fast paths)
    fallback: Callable[[], Source] | None = None
    # re-reading is cheaper than a copy (Parquet: columnar, pruned): stage as a view, not a table
    stage_as_view: bool = False
    # the same rows with ``_row`` NULL, for a reader that numbers rows on one thread only (WITH
    # ORDINALITY): the loader stages these in parallel, in order, and numbers them by position
    # from ``first_row``; a BOOLEAN ``_skip`` column marks rows that count for the numbering only
    # (a log's lines that are no requests), dropped once numbered
    unnumbered_sql: str | None = None
    first_row: int = 1
    # a second look at the rejected rows (``{row, field, reason}``, the first :data:`loader.MAX_REJECTS_KEPT`):
    # gives the reason the checks cannot, for a row the reader read as a record of no fields (a JSON Lines line
    # ``null``); called only where rows were rejected
    explain: Callable[[list[dict]], None] | None = None
    # numbers written with a decimal comma (``0,0012``): a semicolon-separated CSV, as spreadsheets in much of
    # Europe write it; set by the loader from the file (:func:`decimal_comma`), read by its checks
    decimal_comma: bool = False
    # the settings key of the first batch whose rows without an id were hashed as this reading hashes them, where
    # that is not ``loader.CONTENT_HASHES_SINCE`` (:data:`LITELLM_HASHES_SINCE`): a store holding an earlier batch
    # is looked up by ``_legacy_hash`` too
    hashes_since: str | None = None


#: the settings key of the first batch whose LiteLLM rows without an id were hashed from the fields that identify
#: the request (``ecosystem._litellm_identity_hash``); rows of earlier batches carry the hash of every field
LITELLM_HASHES_SINCE = "litellm_hashes_since_batch"


def decimal_comma(p: Probe) -> bool:
    """Whether the file writes numbers with a decimal comma: a CSV separated by semicolons (the comma is then free
    to be the decimal mark, and spreadsheets in much of Europe write both so)."""
    return p.kind == "csv" and p.delimiter == ";"


@dataclass(frozen=True)
class Adapter:
    name: str
    label: str
    source_tool: str
    export_hint: str
    sniff: Callable[[Probe], float]             # 0 = not this format; higher = surer
    read: Callable[[duckdb.DuckDBPyConnection, Probe, IngestOptions], Source]
    example: str | None = None                  # example file under tests/data/


ADAPTERS: list[Adapter] = []


# ---------------------------------------------------------------- a row without an id

#: what DuckDB's ``trim`` takes off both ends: Unicode's space separators (category Zs), not tabs or newlines
#: (every code point checked against DuckDB 1.x's trim: tests/test_ingest.py)
DUCKDB_TRIMMED = " \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"


def blank(v: str) -> bool:
    """Whether text is empty as the loader reads it: ``nullif(trim(v), '')`` is NULL."""
    return not v.strip(DUCKDB_TRIMMED)


def missing_id(v) -> bool:
    """Whether a row's ``request_id`` is missing as the loader reads it: None, empty or only spaces (the loader
    stores ``nullif(trim(id), '')``; DuckDB's trim takes Unicode's spaces, not tabs). Such a row needs a ``_hash``.

    >>> [missing_id(v) for v in (None, "", "   ", "\\u00a0", "r1", " r1 ", "\\t", 0)]
    [True, True, True, True, False, False, False, False]
    """
    return v is None or (isinstance(v, str) and blank(v))


def missing_id_sql(x: str) -> str:
    """:func:`missing_id` in SQL, for an adapter's ``CASE WHEN ... THEN <content hash> END``: the trim runs only
    on a text that is empty or starts with a space or a control character (``< '!'``) or a character from U+00A0
    on (where Unicode's other spaces are), so an ASCII id costs two comparisons more than ``x IS NULL``."""
    return (f"({x} IS NULL OR ((CAST({x} AS VARCHAR) < '!' OR CAST({x} AS VARCHAR) >= '\u00a0') "
            f"AND trim(CAST({x} AS VARCHAR)) = ''))")


def json_kind(v) -> str:
    """The JSON type of a parsed value, as a message names it ("an array", "a number", "null")."""
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "an array"
    if isinstance(v, bool):
        return f"{str(v).lower()}"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    return "null" if v is None else type(v).__name__


def expect_object(v, what: str, *, file: str, row: int | None, field: str | None = None) -> dict:
    """``v`` itself where it is a JSON object; else InputError naming the file, row and field and what was found
    (a JSON Lines line that is an array, a number, a string or null): ``what`` says what was expected."""
    if not isinstance(v, dict):
        raise InputError(f"expected {what} (a JSON object), found {json_kind(v)}", file=file, row=row, field=field)
    return v


def expect_objects(v, what: str, *, file: str, row: int | None, field: str) -> list[dict]:
    """``v`` where it is a list of JSON objects (None: no list, an empty one); else InputError naming the file, the
    row and the field (``field[i]`` for an element that is no object)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError(f"expected a list of {what} (a JSON array), found {json_kind(v)}", file=file, row=row,
                         field=field)
    return [expect_object(x, what, file=file, row=row, field=f"{field}[{i}]") for i, x in enumerate(v)]


_END_OF_DAY = re.compile(r"(\d{4}-\d{2}-\d{2}[ T])24:00:00(\.0+)?(Z|[+-]\d{2}:\d{2})?")


def iso_time(text: str) -> datetime:
    """``datetime.fromisoformat``, and ISO 8601's ``24:00:00`` (a day's end: the next day's midnight), which
    DuckDB's casts read and Python's does not (ValueError, or OverflowError at the end of year 9999)."""
    m = _END_OF_DAY.fullmatch(text)
    if m is None:
        return datetime.fromisoformat(text)
    return datetime.fromisoformat(m.group(1) + "00:00:00" + (m.group(3) or "")) + timedelta(days=1)


UNIX_EPOCH = datetime(1970, 1, 1)
_US_PER_DAY = 86_400_000_000
_CYCLE_DAYS = 146_097           # the days of 400 Gregorian years: the calendar repeats after them


def time_after(t: datetime, ms: float = 0.0, *, seconds: float | None = None, microseconds: int | None = None) -> str:
    """``t`` plus ``ms`` milliseconds (or ``seconds``, or whole ``microseconds``; negative: before ``t``) as the text
    a reading hands the loader: ISO 8601 where Python's ``datetime`` holds it (years 1 to 9999), rounded to the
    microsecond as ``timedelta`` rounds. Beyond those years it is the text DuckDB writes for that time
    (``287451-10-14 08:59:00.992000``, ``0001-12-31 (BC) 23:59:59.982000``), which the loader reads and rejects
    naming the time, as the SQL readings' own arithmetic gives it; a shift no timestamp holds (or no finite
    number) is text naming the sum, which the loader rejects as unreadable. An aware ``t`` is taken in UTC.
    Never raises: a file's numbers cannot stop a load with Python's OverflowError."""
    unit, amount = (("microseconds", microseconds) if microseconds is not None else
                    ("seconds", seconds) if seconds is not None else ("milliseconds", ms))
    try:
        return (t + timedelta(**{unit: amount})).isoformat(sep=" ")
    except (OverflowError, ValueError, TypeError):
        pass
    base = t.replace(tzinfo=None) - (t.utcoffset() or timedelta(0))
    one = timedelta(microseconds=1)
    try:
        shift = amount if unit == "microseconds" else timedelta(**{unit: amount}) // one
        total = (base - UNIX_EPOCH) // one + int(shift)
    except (OverflowError, ValueError, TypeError):
        total = None
    if total is None or not -(2 ** 63) < total < 2 ** 63 - 1:
        return f"{base.isoformat(sep=' ')} + {amount} {unit}"
    days, us = divmod(total, _US_PER_DAY)
    cycles, day = divmod(days, _CYCLE_DAYS)
    d = date(1970, 1, 1) + timedelta(days=day)
    year = d.year + 400 * cycles
    era = f"{year:04d}-{d.month:02d}-{d.day:02d}" if year >= 1 else f"{1 - year:04d}-{d.month:02d}-{d.day:02d} (BC)"
    seconds_of_day, us = divmod(us, 1_000_000)
    return (f"{era} {seconds_of_day // 3600:02d}:{seconds_of_day // 60 % 60:02d}:{seconds_of_day % 60:02d}"
            f".{us:06d}")


def register(adapter: Adapter) -> Adapter:
    if any(a.name == adapter.name for a in ADAPTERS):
        raise ValueError(f"duplicate adapter {adapter.name}")
    ADAPTERS.append(adapter)
    return adapter


def adapter_named(name: str) -> Adapter:
    for a in ADAPTERS:
        if a.name == name:
            return a
    raise InputError(f"unknown format {name!r}; supported: {', '.join(a.name for a in ADAPTERS)}")


# ---------------------------------------------------------------- probing

HEAD_BYTES = 256 * 1024
#: the longest line a CSV or text log may have (a longer one is refused naming the line); DuckDB's
#: CSV reader stops at 2 MB with a message about its own buffers
MAX_LINE_BYTES = 1 << 20
#: the longest line of a JSON Lines file (DuckDB's largest JSON object, 16 MiB)
MAX_JSON_LINE_BYTES = 16 << 20
#: the most columns (CSV header fields, JSON keys, Parquet columns) a file may have: the readers hold a block of
#: 2,048 rows of every column in memory (10,000 text columns: 330 MB a block, a thread), and three JSON Lines records
#: of 10,000 keys took ten minutes to read
MAX_COLUMNS = 1_000
LINE_LIMITS = {"csv": MAX_LINE_BYTES, "text": MAX_LINE_BYTES, "jsonl": MAX_JSON_LINE_BYTES}
SCAN_CHUNK = 1 << 20

log = logging.getLogger("finops")


def unreadable(exc: BaseException, *, file: str, what: str, p: Probe | None = None) -> InputError:
    """An unexpected reader error (DuckDB's, Arrow's) as a sentence saying what to do; the original,
    with any server path in it, goes to the ``finops`` log only. For JSON Lines (``p``) the first line that is
    no JSON is named (:func:`bad_json_line`): DuckDB's reader names none a person can act on."""
    log.warning("reading %s as %s failed", file, what, exc_info=exc)
    if p is not None and p.kind in ("csv", "jsonl", "json", "text"):
        # a reader stops at a byte that is no UTF-8 (past the head the probe read) without naming its line
        bad = not_utf8(p)
        if bad is not None:
            return bad
    if p is not None and p.kind == "jsonl":
        bad = bad_json_line(p)
        if bad is not None:
            return bad
    return InputError(f"cannot read it as {what}: the file does not parse. Check that it is complete "
                      f"and valid {what} (quotes closed, the same fields on every line), or pick another format; "
                      "the reader's own message is in the server log", file=file)


def width(p: Probe) -> int:
    """The columns of a probed file: its header's, its first record's keys (JSON Lines, a JSON array whose first
    record is within the head the probe read), else 0 (not known before it is read)."""
    if p.columns or p.kind != "json":
        return len(p.columns)
    text = p.head.decode("utf-8", errors="ignore").lstrip("\ufeff").lstrip()
    if not text.startswith("["):
        return 0
    try:
        first, _ = json.JSONDecoder().raw_decode(text[1:].lstrip())
    except json.JSONDecodeError:
        return 0
    return len(first) if isinstance(first, dict) else 0


def too_wide(p: Probe) -> InputError | None:
    """The refusal of a file of more than :data:`MAX_COLUMNS` columns (:func:`width`), or None."""
    columns = width(p)
    if columns <= MAX_COLUMNS:
        return None
    return InputError(f"the file has {columns:,} columns, more than the {MAX_COLUMNS:,} a log file may have (each is "
                      "read for every row): keep the columns the requests need and load it again", file=p.name)


def open_probed(p: Probe, mode: str = "rb", **kwargs):
    """The probed file's (decompressed) content, opened in ``mode``: a gzip file through :mod:`gzip`."""
    import gzip

    return (gzip.open if p.container == "gzip" else open)(p.path, mode, **kwargs)


def bad_json_line(p: Probe) -> InputError | None:
    """The refusal naming the first line of a JSON Lines file that does not parse as JSON, or None when every
    line does. Streamed a line at a time (lines are at most :data:`MAX_JSON_LINE_BYTES`, :func:`scan_text`)."""
    with open_probed(p, "rt", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                json.loads((line.lstrip("\ufeff") if lineno == 1 else line).rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                return InputError(f"line {lineno:,} is not valid JSON ({exc.msg} at character {exc.pos + 1}): fix "
                                  "or remove that line, then load the file again; nothing was loaded",
                                  file=p.name, row=lineno)
    return None


#: the bytes of a text file besides printable ones (tab, newline, carriage return, form feed, escape)
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\x1b")


def looks_like_text(head: bytes) -> bool:
    """No control byte but a text file's: not UTF-8 maybe, but text (a Latin-1 CSV), not binary."""
    return not any(c < 0x20 and c not in _TEXT_CONTROLS or c == 0x7f for c in head[:4096])


def not_utf8(p: Probe) -> InputError | None:
    """The refusal naming the first byte of a text file that is not UTF-8, with its offset and line, or None when
    every byte is. Streamed a MiB at a time (decompressed)."""
    offset, line, carry = 0, 1, b""
    with open_probed(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            data = carry + chunk
            try:
                data.decode("utf-8")
                carry = b""
            except UnicodeDecodeError as exc:
                if exc.reason == "unexpected end of data" and len(data) - exc.start < 4:
                    carry = data[exc.start:]            # a character cut by the chunk's end
                    data = data[:exc.start]
                else:
                    at = offset + exc.start
                    line += data.count(b"\n", 0, exc.start)
                    return InputError(
                        f"the file is not UTF-8 text: byte 0x{data[exc.start]:02X} at byte {at:,} (line {line:,}) "
                        "is not UTF-8 (a Latin-1 / Windows-1252 file, as Excel's \"CSV (Comma delimited)\" saves "
                        "it). Save it as UTF-8 (Excel: \"CSV UTF-8 (Comma delimited)\") and load it again",
                        file=p.name, row=line)
            offset += len(data)
            line += data.count(b"\n")
    return None


def _nul_error(name: str, offset: int, line: int, container: str) -> InputError:
    where = " of its decompressed text" if container == "gzip" else ""
    return InputError(f"the file holds a NUL byte at byte {offset:,}{where} (line {line:,}): it is binary or "
                      "UTF-16, not UTF-8 text. Re-export it as UTF-8, or remove the NUL bytes", file=name)


def _line_error(name: str, line: int, limit: int) -> InputError:
    return InputError(f"line {line:,} is longer than the limit of {limit:,} bytes ({limit >> 20} MiB) a line "
                      "may have: refused whole, nothing loaded. Split the field or the line", file=name)


#: a quoted CSV field may span at most this many lines (a prompt with newlines spans a few; an unclosed
#: quote swallows the rest of the file) and hold at most :data:`MAX_LINE_BYTES` bytes
MAX_QUOTED_FIELD_LINES = 200


def _shape(field: bytes) -> bytes:
    """A field's shape, to compare two rows' first fields: each run of letters one ``a``, of digits one ``9``
    (``q0`` and ``q17`` are ``a9``; ``chatcmpl-4f2`` is ``a-9a9``)."""
    return re.sub(rb"[0-9]+", b"9", re.sub(rb"[A-Za-z]+", b"a", field))


#: a quoted field's text, from where it stands to its closing quote (or the block's end): runs without a quote
#: and doubled quotes (one regular expression, so a field full of "" costs no Python step per quote)
_QUOTED_TEXT = re.compile(rb'[^"]*(?:""[^"]*)*')


class CsvQuotes:
    """Follows a CSV's quotes block by block as DuckDB's reader reads them, to refuse what it would misread.

    A quote opens a field only at the field's start (after the delimiter or a line break; one in the
    middle of an unquoted field is text, as DuckDB reads it). In a quoted field ``""`` is a quote; the
    quote that closes it must be followed by the delimiter or the line's end. Refused (an
    :class:`~finops.errors.InputError` naming the file, the line where the quote opened and the field):

    * a quote never closed: DuckDB reads the rest of the file into that one field, its rows lost;
    * a quoted field over :data:`MAX_QUOTED_FIELD_LINES` lines or :data:`MAX_LINE_BYTES` bytes: most
      likely an unclosed quote that a later stray quote closed, the rows between swallowed;
    * a quoted field holding a whole line with as many delimiters as the header (a row of the file
      read as text): the same unclosed quote, closed a few rows later;
    * a quoted field holding a whole line with as many delimiters as the header, or closing on a later
      line after as many fields as it opened after, that line's first field shaped as its own row's
      (``q1`` under ``q0``): a row of the file read as text, an unclosed quote closed by a later one;
    * text after a closing quote (``"ac"me``): DuckDB keeps part of the field and drops the rest;
    * a field that starts with one space and then a quote: DuckDB opens a quoted field there, Python's
      ``csv`` keeps both as text, so the rows read depend on the reader.

    Only the quotes that open or close a field are visited (``bytes.find``/``count`` between them, a quoted
    field's text and its doubled quotes matched by one regular expression), so a file without quotes costs one
    ``find`` per block.
    """

    def __init__(self, name: str, columns: list[str], delimiter: str = ","):
        self.name, self.columns, self.delim = name, list(columns), delimiter.encode()
        # the spaces since the current field's start, -1 once it holds anything else: 0 is the start itself,
        # where a quote opens a quoted field; DuckDB opens one after a single space too
        self.line, self.field, self.lead = 1, 0, 0
        self.inside = self.pending = False
        self.open_line = self.open_field = self.span_lines = self.span_bytes = 0
        # inside a quoted field: the delimiters on its current line, and whether that line began at a
        # line break inside the field (a whole line of it, not the one the quote opened on)
        self.row_delims = len(self.columns) - 1 if len(self.columns) >= 3 else -1
        self.line_delims, self.line_whole, self.row_line = 0, False, 0
        # the first field of the row the quoted field opened on, and of the field's current line
        self.row_head, self.line_head = b"", b""
        # a line of fields each unquoted (no quote, no line break) or quoted and closed on the line, then \n: steps
        # of a quoted field and its delimiter (or the line's end), or of unquoted fields up to the last delimiter
        # before a quote or the line's end (one run, taken whole: atomic), then the last unquoted field. The same
        # lines as field by field (cell(,cell)*\n), about three times faster: a run of unquoted fields is one
        # step, and nothing is tried twice
        d = re.escape(self.delim)
        step = rb'(?:"[^"\n\r]*(?:""[^"\n\r]*)*"(?:' + d + rb'|(?=\n))|(?>[^"\n\r]*' + d + rb'))'
        self.simple = re.compile(rb"(?:" + step + rb'*+[^"\n\r]*\n)*')

    def _field_name(self) -> str:
        k = self.open_field
        return self.columns[k] if k < len(self.columns) else f"{k + 1} (beyond the header's {len(self.columns)})"

    def _error(self, what: str, fix: str = 'close the quote, or double a quote that is part of the text ("")'
               ) -> InputError:
        return InputError(f"line {self.open_line:,}: {what}. Nothing loaded: {fix}", file=self.name,
                          field=self._field_name())

    def feed(self, chunk: bytes) -> None:
        i, n, d = 0, len(chunk), self.delim
        if self.pending and n:          # the last block ended on a quote inside a quoted field
            self.pending = False
            i = self._after_quote(chunk, -1, n)
        while i < n:
            if not self.inside:
                q = chunk.find(b'"', i)
                end = q if q >= 0 else n
                if end > i:
                    nl = chunk.count(b"\n", i, end)
                    if nl:
                        self.line += nl
                        last = chunk.rfind(b"\n", i, end)
                        # whole lines from here whose every quote opens a field and closes it on the line
                        # (the common case) hold nothing to refuse: skipped in one match, counted as lines
                        skip = self.simple.match(chunk, last + 1).end()
                        if skip > last + 1:
                            self.line += chunk.count(b"\n", last + 1, skip)
                            self.field, self.lead, i = 0, 0, skip
                            continue
                        self.field = chunk.count(d, last + 1, end)
                    else:
                        self.field += chunk.count(d, i, end)
                    self.lead = self._lead(chunk, i, end)
                if q < 0:
                    return
                if self.lead == 0:
                    self.inside, self.open_line, self.open_field = True, self.line, self.field
                    self.span_lines = self.span_bytes = 0
                    self.line_delims, self.line_whole, self.row_line = 0, False, 0
                    row_start = chunk.rfind(b"\n", 0, q)
                    self.row_head = self._head(chunk, row_start + 1, q) if row_start >= 0 else b""
                elif self.lead == 1:
                    self.open_line, self.open_field = self.line, self.field
                    raise self._error("the field starts with a space and then a quote, which readers take two ways "
                                      "(DuckDB opens a quoted field there, Python's csv module keeps both as text)",
                                      "remove the space, or put it inside the quotes")
                self.lead = -1
                i = q + 1
            else:
                # the field's text up to its closing quote in one step: a doubled quote ("") is text
                end = _QUOTED_TEXT.match(chunk, i).end()
                c = end if end < n else -1
                nl = chunk.count(b"\n", i, end)
                if nl:
                    self._lines_inside(chunk, i, end)
                else:
                    self.line_delims += chunk.count(d, i, end)
                self.line += nl
                self.span_lines += nl
                self.span_bytes += end - i
                if self.span_lines >= MAX_QUOTED_FIELD_LINES or self.span_bytes > MAX_LINE_BYTES:
                    raise self._error(f"the quoted field that opens here runs over more than "
                                      f"{MAX_QUOTED_FIELD_LINES:,} lines or {MAX_LINE_BYTES >> 20} MiB, more than a "
                                      "field holds: a quote is most likely unclosed, the rows after it read as text")
                if c < 0:
                    return
                if c + 1 >= n:
                    self.pending = True
                    return
                i = self._after_quote(chunk, c, n)

    def _lead(self, chunk: bytes, i: int, end: int) -> int:
        """:attr:`lead` after the unquoted text ``chunk[i:end]``."""
        start = max(chunk.rfind(self.delim, i, end), chunk.rfind(b"\n", i, end), chunk.rfind(b"\r", i, end)) + 1
        base = 0 if start > 0 else self.lead
        start = start or i
        if base < 0 or end - start > 2 or chunk[start:end].strip(b" "):
            return -1
        return base + end - start

    def _head(self, chunk: bytes, start: int, end: int) -> bytes:
        """The first field of the text ``chunk[start:end]`` (at most 64 bytes of it)."""
        d = chunk.find(self.delim, start, end)
        return chunk[start:d if d >= 0 else end][:64]

    def _lines_inside(self, chunk: bytes, i: int, end: int) -> None:
        """A run of a quoted field's text with line breaks: refuses a whole line of it shaped as a row."""
        d, start, line, first = self.delim, i, self.line, True
        while True:
            nl = chunk.find(b"\n", start, end)
            stop = nl if nl >= 0 else end
            if not first:               # a line that begins in this run: its first field, up to a quote
                q = chunk.find(b'"', start, stop)
                self.line_head, self.line_delims = self._head(chunk, start, q if q >= 0 else stop), 0
            self.line_delims += chunk.count(d, start, stop)
            if nl < 0:
                return
            if (self.line_whole and self.line_delims == self.row_delims and self._row_shaped()
                    and not self.row_line):
                self.row_line = line    # refused when the field closes (never closed: refused as that)
            line += 1
            self.line_whole, start, first = True, nl + 1, False

    def _row_shaped(self) -> bool:
        """Whether the current line of the quoted field starts as its own row does (:func:`_shape`)."""
        return bool(self.row_head) and _shape(self.line_head) == _shape(self.row_head)

    def _after_quote(self, chunk: bytes, c: int, n: int) -> int:
        """Inside a quoted field, a quote at ``c`` (-1: the last byte of the previous block): returns where to go on."""
        nxt = chunk[c + 1:c + 2]
        if nxt == b'"':
            self.span_bytes += 2
            return c + 2
        if nxt in (self.delim, b"\n", b"\r"):
            if self.row_line:
                raise self._error(f"the quoted field that opens here holds line {self.row_line:,} whole, with "
                                  f"the {len(self.columns)} fields of a row, and closes on line {self.line:,}: a "
                                  "quote is most likely unclosed, the rows after it read as its text")
            if (self.span_lines and self.line_whole and self.open_field and self.line_delims == self.open_field
                    and self._row_shaped()):
                head = self.line_head.decode("utf-8", errors="replace")
                raise self._error(f"the quoted field that opens here closes on line {self.line:,} after the first "
                                  f"{self.open_field:,} field{'s' if self.open_field != 1 else ''} of what reads as "
                                  f"a row ({head!r} ...), where its own field starts: a quote is most likely unclosed, "
                                  "the rows after it read as its text")
            self.inside = False
            return c + 1
        ends = f" on line {self.line:,}" if self.line != self.open_line else ""
        text = chunk[c + 1:c + 21].split(b"\n")[0].decode("utf-8", errors="replace")
        raise self._error(f"the quoted field that opens here ends{ends} with text after its closing quote "
                          f"({text!r}), which the reader would drop")

    def finish(self) -> None:
        """At the end of the file: a quoted field still open was never closed (a last quote closes it)."""
        if self.inside and self.pending:
            self._after_quote(b"\n", -1, 1)        # the file's last byte closes the field
        if self.inside and not self.pending:
            raise self._error(f"the quote that opens this field is never closed: it runs to the end of the file (line "
                              f"{self.line:,}), "
                              f"{self.span_lines:,} more line{'s' if self.span_lines != 1 else ''} read as its text")


class ScanStopped(Exception):
    """:func:`scan_text` was asked to stop before the file's end (the load it ran beside ended first)."""


def scan_text(p: Probe, stop: threading.Event | None = None, lines: bool = True, quotes: bool = True) -> None:
    """Read a text file to its end once (decompressed), in :data:`SCAN_CHUNK` blocks: refuse a NUL byte
    anywhere (the rule the probe applies to the first bytes), a line over :data:`LINE_LIMITS` and, in a
    CSV, a quote DuckDB would misread (:class:`CsvQuotes`).

    With blocks no longer than the limit, a line over it is seen as a run between newlines that
    crosses a block boundary, so only the first and last newline of each block are looked up.
    ``lines=False`` leaves out the NUL and line checks, ``quotes=False`` the quotes' (the loader runs the
    first before reading a file and the second beside it: :class:`TextScan`). ``stop``, once set, ends
    the reading at the next block with :class:`ScanStopped`.
    """
    limit = LINE_LIMITS.get(p.kind)
    if limit is None or p.container not in ("text", "gzip"):
        return
    quotes = quotes and p.kind == "csv"
    if not (lines or quotes):
        return
    chunk_size = min(SCAN_CHUNK, limit)
    offset, since_nl = 0, 0
    follow = CsvQuotes(p.name, p.columns, p.delimiter) if quotes else None
    # JSON Lines: a blank line anywhere (the start of the file counts as a line's start)
    blanks = lines and p.kind == "jsonl" and p.container == "text"
    blank, pending = False, True        # pending: only white space since the last newline
    try:
        with open_probed(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(chunk_size), b""):
                if stop is not None and stop.is_set():
                    raise ScanStopped
                if lines:
                    nul = chunk.find(b"\0")
                    if nul >= 0:
                        raise _nul_error(p.name, offset + nul, _line_at(p, offset + nul), p.container)
                if follow is not None:
                    follow.feed(chunk)
                if not lines:
                    continue
                first = chunk.find(b"\n")
                if first < 0:
                    since_nl += len(chunk)
                    if since_nl > limit:
                        raise _line_error(p.name, _line_at(p, offset), limit)
                    pending = blanks and pending and _WHITE.fullmatch(chunk) is not None
                else:
                    if since_nl + first > limit:
                        raise _line_error(p.name, _line_at(p, offset), limit)
                    last = chunk.rfind(b"\n")
                    since_nl = len(chunk) - last - 1
                    if blanks and not blank:
                        blank = ((pending and _WHITE.fullmatch(chunk, 0, first) is not None)
                                 or BLANK_JSON_LINE.search(chunk) is not None)
                        pending = _WHITE.fullmatch(chunk, last + 1) is not None
                offset += len(chunk)
            if follow is not None:
                follow.finish()
    except (OSError, EOFError) as exc:
        raise InputError(f"the file is truncated or corrupt, cannot decompress it ({exc})", file=p.name) from None
    if blanks:
        p.blank_json_lines = blank


#: a blank line of JSON Lines (white space only) between two newlines; :data:`_WHITE`, a run of that white space
BLANK_JSON_LINE = re.compile(rb"\n[ \t\r]*\n")
_WHITE = re.compile(rb"[ \t\r]*")


def _line_at(p: Probe, offset: int) -> int:
    """The number of the line that holds byte ``offset`` of the (decompressed) text: its newlines before it are
    counted only where a message needs them (a refused file), not on every scan."""
    line, left = 1, offset
    with open_probed(p, "rb") as fh:
        while left > 0:
            chunk = fh.read(min(SCAN_CHUNK, left))
            if not chunk:
                break
            line += chunk.count(b"\n")
            left -= len(chunk)
    return line


class TextScan:
    """A CSV's quotes followed (:func:`scan_text`, ``lines=False``) on a thread beside the load, which reads
    the same file meanwhile: where a core is free they cost no time of their own (a 736 MB LiteLLM CSV: 3.5 s
    of Python that came before DuckDB's reading; the NUL and line checks, 0.35 s, still come first: they keep
    a line too long from reaching a reader). The load asks :meth:`result` before it commits, so a file the
    checks refuse is still refused whole; where the load fails too, the checks' message is the one given (the
    reader's own error about the same fault names no line or field).

    Used as a context manager: leaving it stops the thread at its next block."""

    def __init__(self, p: Probe):
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(p,), name=f"quotes of {p.name}", daemon=True)
        self._thread.start()

    def _run(self, p: Probe) -> None:
        try:
            scan_text(p, self._stop, lines=False)
        except ScanStopped:
            pass
        except BaseException as exc:        # handed to the load's thread by result()
            self._error = exc

    def result(self) -> None:
        """Wait for the scan's end; raise what it refused the file for."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def refusal(self) -> BaseException | None:
        """After the load failed: the scan's own refusal of the file, if it has one (waits for its end)."""
        self._thread.join()
        return self._error

    def __enter__(self) -> TextScan:
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head[:4096]:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the end of the head is fine
        return exc.start < len(head) - 4
    return False


def _long_first_line(opener, path: Path) -> dict | None:
    """The first line of a file as an object when it is one (up to :data:`MAX_JSON_LINE_BYTES`) and the file
    goes on with another non-blank line; else None. Looks for the line's end a chunk at a time first, so a
    single big document costs a chunk of memory, not its size."""
    with opener(path, "rb") as fh:
        length = 0
        while length <= MAX_JSON_LINE_BYTES:
            chunk = fh.read(1 << 20)
            if not chunk:
                return None
            cut = chunk.find(b"\n")
            if cut >= 0:
                rest = chunk[cut + 1:]
                while not rest.strip():
                    rest = fh.read(1 << 16)
                    if not rest:
                        return None
                length += cut
                break
            length += len(chunk)
        else:
            return None
    with opener(path, "rb") as fh:
        first = fh.read(length)
    try:
        rec = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


def probe(path: Path, name: str | None = None) -> Probe:
    """Read the first bytes of a (possibly gzip-compressed) file and classify its shape."""
    import gzip

    name = name or path.name
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic == b"PAR1":
        try:
            cols = [d[0] for d in duckdb.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()]
        except duckdb.Error as exc:
            log.warning("reading %s as Parquet failed", name, exc_info=exc)
            raise InputError("the Parquet file is truncated or corrupt: export it again (the reader's own "
                             "message is in the server log)", file=name) from None
        return Probe(path, name, "parquet", magic, "parquet", columns=cols)
    gz = magic[:2] == b"\x1f\x8b"
    container = "gzip" if gz else "text"
    opener = gzip.open if gz else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except (OSError, EOFError) as exc:
        raise InputError(f"the file is truncated or corrupt, cannot decompress it ({exc})", file=name) from None
    if not head.strip():
        return Probe(path, name, container, head, "empty")
    nul = head.find(b"\0")
    if nul >= 0 and not _looks_binary(head.replace(b"\0", b"")):
        # text with a NUL in it: refused the same way wherever the NUL is (see scan_text)
        raise _nul_error(name, nul, head.count(b"\n", 0, nul) + 1, container)
    if _looks_binary(head):
        return Probe(path, name, container, head, "binary")
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff")
    lines = text.splitlines()
    if len(head) == HEAD_BYTES and lines:
        lines = lines[:-1]          # the last line may be cut by the head limit
    stripped = text.lstrip()
    if stripped.startswith("{"):
        first = next((ln for ln in lines if ln.strip()), "")
        try:
            rec = json.loads(first)
            if isinstance(rec, dict):
                return Probe(path, name, container, head, "jsonl", columns=list(rec), first_record=rec, lines=lines)
        except json.JSONDecodeError:
            pass
        if not lines and len(head) == HEAD_BYTES:
            # the first line is longer than the head: JSON Lines of big records (a Helicone page of 1,000
            # requests per line) when it is a whole object with more lines after it, else one document
            rec = _long_first_line(opener, path)
            if rec is not None:
                return Probe(path, name, container, head, "jsonl", columns=list(rec), first_record=rec, lines=lines)
        return Probe(path, name, container, head, "json", lines=lines)
    if stripped.startswith("["):
        return Probe(path, name, container, head, "json", lines=lines)
    if lines:
        # the delimiter that splits the header into the most named fields
        best = max((len(next(csv.reader(io.StringIO(lines[0]), delimiter=d))), d) for d in ",\t;|")
        header = next(csv.reader(io.StringIO(lines[0]), delimiter=best[1]))
        if best[0] >= 2 and all(h.strip() for h in header) and "[" not in lines[0]:
            return Probe(path, name, container, head, "csv", columns=[h.strip() for h in header], lines=lines,
                         delimiter=best[1], serial_csv=_quoted_newline(text, best[1]))
    return Probe(path, name, container, head, "text", lines=lines)


def _quoted_newline(text: str, delimiter: str) -> bool:
    """True when a field of the first rows holds a newline inside quotes (valid CSV)."""
    if '"' not in text:
        return False
    try:
        return any("\n" in f or "\r" in f for row in csv.reader(io.StringIO(text), delimiter=delimiter)
                   for f in row)
    except csv.Error:
        return True

