"""Load one file into the store: detect, read, cast, validate, de-duplicate, insert, roll up.

A load is one transaction. Bad rows are rejected with their row number, field and
reason while good rows load (``strict`` fails the whole batch instead). A file
that cannot be read at all (empty, binary, truncated, unknown format) raises
:class:`~finops.errors.InputError` and leaves the store as it was. A file whose every row
is rejected leaves it as it was too (no batch, no new data version): its result reports the rejects. Rows whose
``request_id`` is already stored are skipped, so loading a file twice adds nothing.
"""
from __future__ import annotations

import codecs
import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import duckdb
import pyarrow as pa

from finops import access, schema, sql, store
from finops.errors import InputError
from finops.ingest.base import (
    ADAPTERS,
    LITELLM_HASHES_SINCE,
    IngestOptions,
    Probe,
    Source,
    TextScan,
    adapter_named,
    decimal_comma,
    looks_like_text,
    missing_id_sql,
    not_utf8,
    probe,
    scan_text,
    too_wide,
    unreadable,
)

MAX_REJECTS_KEPT = 10_000
Progress = Callable[[float, str], None]

#: DuckDB's memory while a file loads: the staged rows of a larger file spill to the store's temporary
#: folder (``<store>.tmp``) instead of growing the process, so a load's peak memory stays flat as files grow
#: (bench/adapters.py: 1M and 3M rows). Lower than a store's own 1536MB (store.connect), never raised.
LOAD_MEMORY_LIMIT = "768MB"
_UNITS = {"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 1 << 10, "MIB": 1 << 20,
          "GIB": 1 << 30, "TIB": 1 << 40}


def _bytes(setting: str) -> float | None:
    """DuckDB's rendering of a memory size ("1.4 GiB", "768MB") in bytes; None for one it does not state."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([A-Za-z]*)\s*", setting)
    unit = m and _UNITS.get(m.group(2).upper())
    return float(m.group(1)) * unit if unit else None


def _set_limit(con, rendered: str) -> None:
    """Set DuckDB's memory limit back to the one it rendered as ``rendered``: DuckDB shows a limit to a tenth
    of its unit ("1.4 GiB" for 1536MB) and setting that text gives a lower one ("1.3 GiB"), so the limit set
    is the largest whole MB that DuckDB renders as ``rendered`` (1536MB for "1.4 GiB": the limit a store
    opens with comes back exactly; another comes back within a tenth of its unit, the same each time)."""
    def shows(mb: int) -> str:
        con.execute("SET memory_limit = ?", [f"{mb}MB"])
        return con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]

    lo = int(_bytes(rendered) // 1e6)               # renders as ``rendered`` or lower
    hi = lo * 2 + 16                                # renders higher
    while shows(lo) != rendered and lo < hi:        # DuckDB rounded down below the rendering: step up
        lo += 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if shows(mid) == rendered else (lo, mid)
    con.execute("SET memory_limit = ?", [f"{lo}MB"])


@contextmanager
def load_memory(con) -> Iterator[None]:
    """DuckDB's memory limit lowered to :data:`LOAD_MEMORY_LIMIT` for one load, then put back.

    The limit is the database's, not the connection's: a page served meanwhile by the same process spills
    sooner too (its results are the same). A load that starts while another holds the lower limit leaves it
    alone (the first one puts the limit back), so the store never keeps the load's limit afterwards.
    """
    before = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    have, want = _bytes(before), _bytes(LOAD_MEMORY_LIMIT)
    if have is None or have <= want * 1.01:
        yield
        return
    con.execute("SET memory_limit = ?", [LOAD_MEMORY_LIMIT])
    try:
        yield
    finally:
        _set_limit(con, before)


@dataclass
class IngestResult:
    file: str
    format: str
    batch_id: int | None
    rows_read: int
    rows_ingested: int
    rows_rejected: int
    duplicates_skipped: int
    rejects: list[dict] = field(default_factory=list)   # {row, field, reason}

    @property
    def every_row_rejected(self) -> bool:
        """A failed load: the file had rows and none was kept (the store is as it was, ``batch_id`` None); a file
        loaded again (every row already stored) is not one."""
        return bool(self.rows_read) and self.rows_rejected == self.rows_read

    def as_dict(self) -> dict:
        return {"file": self.file, "format": self.format, "batch_id": self.batch_id,
                "rows_read": self.rows_read, "rows_ingested": self.rows_ingested,
                "rows_rejected": self.rows_rejected, "duplicates_skipped": self.duplicates_skipped,
                "rejects": self.rejects}


class NothingKept(Exception):
    """Raised inside a load's transaction where every row of the file was rejected: a load that keeps no row is a
    failed load, rolled back (no batch, no new data version). ``result`` reports its rejects (file, row, field)."""

    def __init__(self, result: IngestResult):
        super().__init__(f"file {result.file}: every row was rejected, nothing loaded")
        self.result = result


def _committed(con, load: Callable[[], IngestResult]) -> IngestResult:
    """``load()`` in one transaction, with the load's memory limit; one that raised :class:`NothingKept` is rolled
    back (the store as it was) and its result, the rejects, returned."""
    try:
        with load_memory(con), store.transaction(con):
            return load()
    except NothingKept as nothing:
        return nothing.result


# ---------------------------------------------------------------- detection

def _empty_json_array(head: bytes) -> bool:
    """The whole file (its head) is ``[]`` or an object whose only array is empty (``{"data": []}``)."""
    try:
        doc = json.loads(head.decode("utf-8").lstrip("\ufeff"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False
    if isinstance(doc, dict):
        arrays = [v for v in doc.values() if isinstance(v, list)]
        return len(arrays) == 1 and not arrays[0]
    return doc == []


def detect(p: Probe, forced: str | None = None, mapped: bool = False):
    """Pick the adapter for a probed file, or raise with the candidates."""
    if p.kind == "empty":
        raise InputError("the file is empty", file=p.name)
    if p.kind == "binary":
        if looks_like_text(p.head):
            refusal = not_utf8(p)
            if refusal is not None:
                raise refusal
        raise InputError("the file is binary, not CSV, JSON(L), Parquet or log text", file=p.name)
    if forced:
        return adapter_named(forced)
    if mapped:
        return adapter_named("generic")
    scored = sorted(((a.sniff(p), a) for a in ADAPTERS), key=lambda t: -t[0])
    scored = [(s, a) for s, a in scored if s > 0]
    if not scored:
        if p.kind in ("json", "jsonl") and _empty_json_array(p.head):
            raise InputError("the file holds no rows (an empty JSON array)", file=p.name)
        cased = [(schema_name, c) for c in p.columns for schema_name in schema.NAMES
                 if c != schema_name and c.lower() == schema_name]
        if cased:
            raise InputError("no known log format recognised, but the columns " + ", ".join(c for _, c in cased)
                             + " are the canonical " + ", ".join(n for n, _ in cased) + " written in another case: "
                             "rename them, or load it with --map " + ",".join(f"{n}={c}" for n, c in cased),
                             file=p.name)
        raise InputError("no known log format recognised; supported formats: "
                         + ", ".join(a.name for a in ADAPTERS)
                         + ". For any other CSV/JSONL/Parquet use --format generic with --map", file=p.name)
    top = [a for s, a in scored if s == scored[0][0]]
    if len(top) > 1:
        raise InputError("the file matches several formats: " + ", ".join(a.name for a in top)
                         + "; pick one with --format", file=p.name)
    return scored[0][1]


# ---------------------------------------------------------------- casting & validation

def _ts_expr(x: str, src_type: str) -> str:
    t = src_type.upper()
    if t.startswith("TIMESTAMP WITH TIME ZONE"):
        return f"timezone('UTC', {x})"
    if t.startswith("TIMESTAMP") or t == "DATE":
        return f"CAST({x} AS TIMESTAMP)"
    if t in ("BIGINT", "INTEGER", "HUGEINT", "UBIGINT", "SMALLINT", "TINYINT", "UINTEGER"):
        return f"finops_epoch_whole(TRY_CAST({x} AS BIGINT), CAST({x} AS DOUBLE))"
    if t in ("DOUBLE", "FLOAT", "DECIMAL") or t.startswith("DECIMAL"):
        return f"finops_epoch(CAST({x} AS DOUBLE))"
    s = f"trim(CAST({x} AS VARCHAR))"
    # the common ISO forms parse in one cast; epochs, comma decimals ("10:00:00,123") and
    # more than 6 fractional digits take the slower path, only for the rows that need it
    return (f"coalesce(timezone('UTC', TRY_CAST({s} AS TIMESTAMPTZ)), "
            f"CASE WHEN {s} = '' THEN NULL "
            f"WHEN regexp_full_match({s}, '-?\\d+') THEN finops_epoch_whole(TRY_CAST({s} AS BIGINT), CAST({s} AS DOUBLE)) "
            f"WHEN regexp_full_match({s}, '-?\\d+(\\.\\d+)?([eE][+-]?\\d+)?') THEN finops_epoch(CAST({s} AS DOUBLE)) "
            f"ELSE timezone('UTC', TRY_CAST(regexp_replace(replace({s}, ',', '.'), '(\\.\\d{{6}})\\d+', '\\1') "
            f"AS TIMESTAMPTZ)) END)")


def _typed_expr(name: str, x: str, src_type: str, comma: bool = False) -> str:
    """A canonical column's typed value from the source's ``x``; ``comma``: text numbers may write their
    decimals after a comma (:func:`finops.ingest.base.decimal_comma`)."""
    target = schema.TYPES[name]
    t = src_type.upper()
    if name == "ts":
        return _ts_expr(x, src_type)
    if name == "status":
        return f"nullif(lower(trim(CAST({x} AS VARCHAR))), '')"
    if target == "VARCHAR":
        return f"nullif(trim(CAST({x} AS VARCHAR)), '')"
    if target == "JSON":
        if t == "JSON":
            return x
        if t == "VARCHAR":
            # text that is JSON as it is, other text as a JSON string: one parse (json_valid then CAST parsed
            # twice; TRY_CAST is NULL exactly where json_valid is false)
            return f"coalesce(TRY_CAST({x} AS JSON), to_json({x}))"
        return f"to_json({x})"
    if target == "BOOLEAN":
        if t == "BOOLEAN":
            return x
        if t == "VARCHAR":
            return (f"CASE lower(trim({x})) WHEN 'true' THEN true WHEN 't' THEN true WHEN '1' THEN true "
                    f"WHEN 'yes' THEN true WHEN 'y' THEN true WHEN 'false' THEN false WHEN 'f' THEN false "
                    f"WHEN '0' THEN false WHEN 'no' THEN false WHEN 'n' THEN false END")
        return f"(TRY_CAST({x} AS DOUBLE) <> 0)"
    if t == target and target != "DOUBLE":
        return x
    if t == "BOOLEAN":
        # true or false is no count, time or price: rejected as unreadable (a cast would read it as 1 or 0)
        return f"CAST(NULL AS {target})"
    if target in ("BIGINT", "INTEGER"):
        d = _double_sql(x, t, comma)
        return f"CASE WHEN {d} = floor({d}) THEN TRY_CAST({d} AS {target}) END"
    if t == target:
        value = x
    elif t == "VARCHAR":
        value = f"TRY_CAST({_number_sql(x, comma)} AS {target})"
    else:
        value = f"TRY_CAST({x} AS {target})"
    # + 0.0 turns -0.0 into 0.0 (IEEE 754) and leaves every other value as it is: a cost or latency of -0.0 passes the
    # checks (it is not below 0) and was stored as -0.0, which a table's format shows as "$-0.00"
    return f"({value} + 0.0)" if target == "DOUBLE" else value


def _number_sql(value_sql: str, comma: bool) -> str:
    """Text of a number, blank as NULL; ``comma``: a decimal comma read as the point it stands for."""
    blank_sql = f"nullif(trim({value_sql}), '')"
    return f"replace({blank_sql}, ',', '.')" if comma else blank_sql


def _double_sql(x: str, src_type: str, comma: bool) -> str:
    """The source's ``x`` (of type ``src_type``, upper case) as a DOUBLE, NULL where it is no number: what a
    whole-number column is cast through."""
    if src_type == "VARCHAR":
        return f"TRY_CAST({_number_sql(f'CAST({x} AS VARCHAR)', comma)} AS DOUBLE)"
    return f"TRY_CAST({x} AS DOUBLE)"


#: each range's upper bound as a person reads it ("604,800,000"), written into the reject reason
RANGE_LABELS = {name: f"{hi:,.0f}" for name, (_, hi) in schema.RANGES.items()}


#: how many characters of a value a reject reason quotes ("..." where it is longer)
SHOWN_CHARS = 60


def _shown_sql(raw: str) -> str:
    """SQL for a value as a reject reason quotes it: its first SHOWN_CHARS characters, "..." where it is longer."""
    return (f"(left(CAST({raw} AS VARCHAR), {SHOWN_CHARS}) || CASE WHEN length(CAST({raw} AS VARCHAR)) > {SHOWN_CHARS} "
            "THEN '...' ELSE '' END)")


#: a column type as a reject reason names it to the person who wrote the file ("cannot read 12.5 as a whole
#: number", not "as bigint")
TYPE_WORDS = {"BIGINT": "a whole number", "INTEGER": "a whole number", "DOUBLE": "a number", "TIMESTAMP": "a time",
              "BOOLEAN": "true or false", "JSON": "JSON", "VARCHAR": "text"}


def _checks(name: str, raw: str, typed: str, src_type: str, comma: bool = False) -> list[str]:
    """SQL expressions yielding a reason string (or NULL) for one column: unreadable, not finite, out of range.
    ``comma`` as for :func:`_typed_expr`."""
    name = sql.column(name, sql.CANONICAL_COLUMNS)
    target = schema.TYPES[name]
    t = src_type.upper()
    unreadable = f"'{name}: cannot read ' || {_shown_sql(raw)} || ' as {TYPE_WORDS[target]}'"
    if target in ("BIGINT", "INTEGER") and name in schema.RANGES and t not in (target, "BOOLEAN"):
        # a whole number past what the column's type holds (2**63 - 1 and more for a count) is no unreadable value:
        # it is past the column's range, said as a number within the type is (below)
        d = _double_sql(raw, t, comma)
        unreadable = (f"CASE WHEN isfinite({d}) AND {d} = floor({d}) AND {d} > {sql.literal(schema.RANGES[name][1])} "
                      f"THEN '{name}: ' || {_shown_sql(raw)} || ' is above the limit of {RANGE_LABELS[name]}' "
                      f"WHEN isfinite({d}) AND {d} = floor({d}) AND {d} < 0 THEN '{name}: negative value ' "
                      f"|| {_shown_sql(raw)} ELSE {unreadable} END")
    out = [] if t == target and name != "ts" else [
        f"CASE WHEN {raw} IS NOT NULL AND {typed} IS NULL AND trim(CAST({raw} AS VARCHAR)) <> '' THEN {unreadable} END"]
    if target == "DOUBLE":
        out.append(f"CASE WHEN NOT isfinite({typed}) THEN '{name}: ' || CAST({typed} AS VARCHAR) "
                   f"|| ' is not a finite number' END")
    if name in schema.UNIT_INTERVAL_COLUMNS:
        out.append(f"CASE WHEN {typed} < 0 OR {typed} > 1 THEN '{name}: ' || CAST({typed} AS VARCHAR) "
                   f"|| ' is outside [0, 1]' END")
    elif name in schema.RANGES:
        lo, hi = schema.RANGES[name]
        assert lo == 0, "ranges start at zero"
        finite = f"isfinite({typed}) AND " if target == "DOUBLE" else ""
        out.append(f"CASE WHEN {typed} < 0 THEN '{name}: negative value ' || CAST({typed} AS VARCHAR) "
                   f"WHEN {finite}{typed} > {sql.literal(hi)} THEN '{name}: ' || CAST({typed} AS VARCHAR) "
                   f"|| ' is above the limit of {RANGE_LABELS[name]}' END")
    if name == "ts":
        out.append(f"CASE WHEN {typed} < getvariable('finops_ts_min') OR {typed} > getvariable('finops_ts_max') "
                   f"THEN 'ts: ' || CAST({typed} AS VARCHAR) || ' is outside ' "
                   f"|| CAST(CAST(getvariable('finops_ts_min') AS DATE) AS VARCHAR) || ' to ' "
                   f"|| CAST(CAST(getvariable('finops_ts_max') AS DATE) AS VARCHAR) "
                   f"|| ' (set FINOPS_TS_MIN / FINOPS_TS_MAX to widen)' END")
    if name == "status":
        # typed is nullif(lower(trim(raw)), ''): NULL for no text, else the lowered text, never ''. Its lowered
        # text is tested once, against the statuses and '' (a filter expands typed and IN (...) in place: the
        # test "typed IS NOT NULL AND lower(typed) NOT IN (...)" evaluated lower(trim(raw)) ten times a row)
        allowed = ", ".join(f"'{s}'" for s in ("", *schema.STATUSES))
        out.append(f"CASE WHEN NOT coalesce(list_contains([{allowed}], lower(lower(trim(CAST({raw} AS VARCHAR))))), "
                   f"true) THEN 'status: ' || {typed} || ' is not one of {'/'.join(schema.STATUSES)}' END")
    return out


def timestamp_window(now: datetime | None = None, strict: bool = True) -> tuple[datetime, datetime]:
    """The timestamps a load accepts: ``schema.TS_MIN`` to a year ahead, or ``$FINOPS_TS_MIN`` / ``$FINOPS_TS_MAX``.

    A setting that is not an ISO date raises InputError, or (``strict=False``, for reading) is ignored.
    """
    def parse(env: str, default: datetime) -> datetime:
        text = os.environ.get(env)
        if not text:
            return default
        try:
            return datetime.fromisoformat(text).replace(tzinfo=None)
        except ValueError:
            if not strict:
                return default
            raise InputError(f"{env}={text!r} is not an ISO date (e.g. 2015-01-01)") from None
    now = (now or datetime.now(UTC)).replace(tzinfo=None)
    lo = parse("FINOPS_TS_MIN", datetime.fromisoformat(schema.TS_MIN))
    hi = parse("FINOPS_TS_MAX", now + timedelta(days=schema.TS_MAX_AHEAD_DAYS))
    return lo, hi


@dataclass(frozen=True)
class StoredSpan:
    """The stored requests' time span within :func:`timestamp_window`, and how many lie outside it
    (rows loaded before the window was enforced, or under a wider one): what the period filter offers."""
    first: datetime | None
    last: datetime | None
    outside: int
    window: tuple[datetime, datetime]


def stored_span(con: duckdb.DuckDBPyConnection) -> StoredSpan:
    """First and last stored request inside the accepted window, and the count of those outside it.

    A store holding a row dated 9999-12-31 still has a period a date picker and an hourly chart can
    take; the pages say how many requests it leaves out and where to delete them. A store of attached
    rollups only (no raw rows) spans their hours.
    """
    lo, hi = timestamp_window(strict=False)
    # the batches table knows each load's span: only batches that reach outside the window are scanned
    first, last, wide = con.execute(
        "SELECT min(min_ts), max(max_ts), list(batch_id) FILTER (WHERE min_ts < ? OR max_ts > ?) FROM batches",
        [lo, hi]).fetchall()[0]
    outside = 0
    if wide:
        marks = ", ".join("?" for _ in wide)
        in_first, in_last, outside = con.execute(
            "SELECT min(ts) FILTER (WHERE ts BETWEEN ? AND ?), max(ts) FILTER (WHERE ts BETWEEN ? AND ?), "
            f"count(*) FILTER (WHERE ts < ? OR ts > ?) FROM requests WHERE batch_id IN ({marks})",
            [lo, hi, lo, hi, lo, hi, *wide]).fetchall()[0]
        rest = con.execute(f"SELECT min(min_ts), max(max_ts) FROM batches WHERE batch_id NOT IN ({marks})",
                           list(wide)).fetchall()[0]
        firsts = [v for v in (in_first, rest[0]) if v is not None]
        lasts = [v for v in (in_last, rest[1]) if v is not None]
        first, last = (min(firsts) if firsts else None), (max(lasts) if lasts else None)
    if store.row_count(con) == 0 and not store.rollup_only(con):
        first = last = None
    if first is None and not outside and store.rollup_only(con):
        # rollups attached without raw rows (finops.scale): their hours, the last one to its end
        first, last = con.execute(
            "SELECT min(hour), max(hour) + INTERVAL 1 HOUR - INTERVAL 1 MICROSECOND FROM rollup_hourly "
            "WHERE hour BETWEEN ? AND ?", [lo, hi]).fetchall()[0]
    return StoredSpan(first, last, int(outside or 0), (lo, hi))


def _install_macros(con: duckdb.DuckDBPyConnection) -> None:
    lo, hi = timestamp_window()
    con.execute("SET VARIABLE finops_ts_min = CAST(? AS TIMESTAMP)", [lo])
    con.execute("SET VARIABLE finops_ts_max = CAST(? AS TIMESTAMP)", [hi])
    # seconds, milliseconds, microseconds or nanoseconds since the epoch, told apart by magnitude (under 1e11 s is
    # before the year 5138, as 1e14 ms and 1e17 us are; nanoseconds since 1973 are past 1e17); NULL (the row rejected:
    # "cannot read ... as a time") for one no microsecond count holds (1e300, NaN: the cast to BIGINT stopped the
    # whole load)
    con.execute("""CREATE OR REPLACE TEMP MACRO finops_epoch(v) AS
        CASE WHEN v IS NULL OR NOT isfinite(v) OR abs(v) >= 9223372036854775808.0 THEN NULL
             WHEN abs(v) < 1e11 THEN make_timestamp(CAST(v * 1e6 AS BIGINT))
             WHEN abs(v) < 1e14 THEN make_timestamp(CAST(v * 1e3 AS BIGINT))
             WHEN abs(v) < 1e17 THEN make_timestamp(CAST(v AS BIGINT))
             ELSE make_timestamp(CAST(trunc(v / 1e3) AS BIGINT)) END""")
    # the same for a whole count ``n`` (``v`` the same as a double, for one past BIGINT): read exactly, not through
    # a double (1767603600123456789 ns is 1767603600123456768 as one, and rounded up a microsecond)
    con.execute("""CREATE OR REPLACE TEMP MACRO finops_epoch_whole(n, v) AS
        CASE WHEN n IS NULL THEN finops_epoch(v)
             WHEN abs(v) < 1e11 THEN make_timestamp(n * 1000000)
             WHEN abs(v) < 1e14 THEN make_timestamp(n * 1000)
             WHEN abs(v) < 1e17 THEN make_timestamp(n)
             ELSE make_timestamp(n // 1000) END""")


def validated_sql(con: duckdb.DuckDBPyConnection, source_sql: str, params: list, checks_on: bool = True,
                  absent: bool = True, decimal_comma: bool = False, legacy: bool = False) -> str:
    """Wrap an adapter's SELECT: typed canonical columns, ``_row``, ``_hash``, ``_reject``.

    ``checks_on=False`` leaves ``_reject`` empty: for a second reading of a file already found clean.
    ``absent=False`` leaves out the canonical columns the source does not have (NULL in every row), for a
    staged table that adds them back when read (:func:`_stage`). ``legacy``: keep the source's ``_legacy_hash``
    (a store holding rows an earlier version loaded, :func:`_earlier_hashes`); else it is never computed.
    """
    described = con.execute(f"DESCRIBE {source_sql}", params).fetchall()
    src_types = {r[0]: r[1] for r in described}
    exprs, checks, raws = {}, [], {}
    for name in schema.NAMES:
        if name in src_types:
            x = f"s.{name}"
            t = src_types[name].upper() if schema.TYPES[name] != "JSON" else ""
            if t == "JSON":
                # a column of mixed JSON types (DuckDB's read_json): each value as its text, a string unquoted, as a
                # record's reading gives it ("" is then empty, not the text '""')
                x, src_types[name] = f"json_extract_string(s.{name}, '$')", "VARCHAR"
            elif t.startswith(("STRUCT", "MAP")) or t.endswith("]"):
                # an object or a list where a value belongs: its JSON text, as the file wrote it (not DuckDB's
                # spelling of a STRUCT), which the checks reject or a text column keeps
                x, src_types[name] = f"CAST(to_json(s.{name}) AS VARCHAR)", "VARCHAR"
            raws[name] = x
            exprs[name] = _typed_expr(name, x, src_types[name], decimal_comma)
            checks.extend(_checks(name, x, exprs[name], src_types[name], decimal_comma))
        else:
            exprs[name] = f"CAST(NULL AS {schema.TYPES[name]})"
    typed = [f"{expr} AS {name}" for name, expr in exprs.items() if absent or name in src_types]
    # required fields and defaults are checked on the typed columns
    ts_raw = raws.get("ts", "NULL")
    model_expr = exprs["model"]
    # text that is only spaces is no time either (the typed time is NULL and no "cannot read" names it)
    spaces = f" OR trim({ts_raw}) = ''" if src_types.get("ts", "").upper() == "VARCHAR" else ""
    checks.append(f"CASE WHEN {ts_raw} IS NULL{spaces} THEN 'ts: missing' END")
    checks.append(f"CASE WHEN ({model_expr}) IS NULL THEN 'model: missing (give one with --model)' END")
    checks.append(f"CASE WHEN length({model_expr}) > {sql.literal(schema.MAX_MODEL_CHARS)} THEN 'model: ' "
                  f"|| {_shown_sql(model_expr)} || ' is ' || format('{{:,}}', length({model_expr})) "
                  f"|| ' characters long, above the limit of {schema.MAX_MODEL_CHARS}' END")
    typed_of = exprs
    for whole, parts in (("input_tokens", schema.INPUT_PARTS), ("output_tokens", schema.OUTPUT_PARTS)):
        present = [n for n in parts if n in src_types]
        if whole not in src_types or not present:
            continue
        total = " + ".join(f"coalesce({typed_of[n]}, 0)" for n in present)
        label = " + ".join(present)
        # only where a part is given: a row with none has nothing to exceed its whole; and only where the whole is
        # not negative (a negative whole is rejected as negative: "0 exceeds input_tokens -5" beside it said nothing)
        given = f"coalesce({', '.join(typed_of[n] for n in present)}) IS NOT NULL"
        checks.append(f"CASE WHEN {given} AND ({typed_of[whole]}) >= 0 AND ({total}) > ({typed_of[whole]}) "
                      f"THEN '{present[0]}: {label} = ' "
                      f"|| CAST(({total}) AS VARCHAR) || ' exceeds {whole} ' || CAST(({typed_of[whole]}) AS VARCHAR) "
                      f"|| ' ({whole} counts them too)' END")
    if "_shape" in src_types:
        checks.insert(0, "s._shape")
    reasons = ", ".join(checks) if checks_on else "''"
    hash_expr = "s._hash" if "_hash" in src_types else "CAST(NULL AS VARCHAR)"
    # the hash earlier versions gave a row (tabular.legacy_text_sql), where the source has one
    legacy = ", s._legacy_hash AS _legacy_hash" if legacy and "_legacy_hash" in src_types else ""
    # an unnumbered reading's lines that are no rows (Source.unnumbered_sql): kept to be numbered, then dropped
    skip = ", s._skip AS _skip" if "_skip" in src_types else ""
    return (f"SELECT s._row AS _row, {hash_expr} AS _hash{legacy}, {', '.join(typed)}, "
            f"concat_ws('; ', {reasons}) AS _reject{skip} "
            f"FROM ({source_sql}) s")


# ---------------------------------------------------------------- files

def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_truncated(p: Probe) -> None:
    """A text file that ends mid-line, on a line that does not parse, was cut short."""
    if p.kind not in ("csv", "jsonl"):
        return
    opener = gzip.open if p.container == "gzip" else open
    try:
        with opener(p.path, "rb") as fh:
            if opener is open:
                fh.seek(0, 2)
                size = fh.tell()
                fh.seek(max(0, size - 65536))
                tail = fh.read()
            else:
                tail = b""
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    tail = (tail + chunk)[-65536:]
    except (OSError, EOFError) as exc:
        raise InputError(f"the file is truncated or corrupt ({exc})", file=p.name) from None
    if not tail or tail.endswith(b"\n"):
        return
    last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    if p.kind == "jsonl":
        try:
            json.loads(last)
            return
        except json.JSONDecodeError:
            raise InputError("the file is truncated: its last line is not complete JSON", file=p.name) from None
    import csv
    import io
    try:
        fields = next(csv.reader(io.StringIO(last), strict=True))
    except (csv.Error, StopIteration):
        fields = []
    if last.count('"') % 2 == 1 or len(fields) < len(p.columns):
        raise InputError(f"the file is truncated: its last line has {len(fields)} of {len(p.columns)} fields",
                         file=p.name)


#: an archive member may expand to at most this many times its compressed size (real logs: 5-50×)
MAX_ZIP_RATIO = 200
#: and an archive to at most this many bytes in all ($FINOPS_MAX_UNZIPPED_BYTES overrides)
MAX_UNZIPPED_BYTES = 4 * 1024 ** 3
#: members up to this size are not judged by their own ratio (a tiny file compresses oddly), and an
#: archive that expands to no more than this in all is not judged by its whole ratio
RATIO_EXEMPT_BYTES = 1 << 20
WHOLE_RATIO_EXEMPT_BYTES = 64 << 20


def _zip_limit() -> int:
    text = os.environ.get("FINOPS_MAX_UNZIPPED_BYTES")
    return int(text) if text and text.isdigit() else MAX_UNZIPPED_BYTES


def utf8_text(path: Path, workdir: Path, name: str) -> Path:
    """A UTF-16 text file (its byte-order mark first: Excel's "Unicode Text", PowerShell's ``Out-File``) copied to
    ``workdir`` as UTF-8, the text every reader takes; any other file is itself. At most 1.5 bytes of UTF-8 per
    2 of UTF-16: refused when the temporary folder has not that much free."""
    with open(path, "rb") as fh:
        bom = fh.read(2)
    if bom not in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return path
    need = path.stat().st_size * 3 // 2
    free = shutil.disk_usage(workdir).free
    if need > free:
        raise InputError(f"the UTF-16 file needs {need:,} bytes as UTF-8 and the temporary folder has {free:,} "
                         "free: save it as UTF-8", file=name)
    target = workdir / f"utf8-{len(list(workdir.iterdir())):04d}-{path.name}"
    try:
        with open(path, encoding="utf-16", newline="") as src, open(target, "w", encoding="utf-8", newline="") as dst:
            for chunk in iter(lambda: src.read(1 << 20), ""):
                dst.write(chunk)
    except UnicodeError:
        raise InputError("the file starts as UTF-16 text (its byte-order mark) but holds bytes that are not: save it "
                         "again as UTF-8", file=name) from None
    return target


def expand(path: Path, workdir: Path) -> list[tuple[Path, str]]:
    """A zip becomes its members (extracted to ``workdir``); anything else is itself.

    An archive is checked before anything is written: each member's declared size against
    :data:`MAX_ZIP_RATIO` × its compressed size, the whole archive's likewise (many small members), the sum against :data:`MAX_UNZIPPED_BYTES` and the
    free disk. While copying, a member that yields more than it declared is refused (zipfile stops at
    the declared size and the CRC check fails), so a crafted header cannot fill the disk either.
    """
    if not zipfile.is_zipfile(path):
        return [(path, path.name)]
    out = []
    try:
        with zipfile.ZipFile(path) as zf:
            members = [i for i in zf.infolist() if not i.is_dir() and not i.filename.startswith("__MACOSX/")]
            limit = _zip_limit()
            total = sum(i.file_size for i in members)
            for info in members:
                ratio = info.file_size / max(info.compress_size, 1)
                if info.file_size > RATIO_EXEMPT_BYTES and ratio > MAX_ZIP_RATIO:
                    raise InputError(f"the archive member {info.filename!r} expands {ratio:,.0f}× "
                                     f"({info.compress_size:,} to {info.file_size:,} bytes), more than the "
                                     f"{MAX_ZIP_RATIO}× a log file does: refused as a zip bomb", file=path.name)
            whole = total / max(path.stat().st_size, 1)
            if total > WHOLE_RATIO_EXEMPT_BYTES and whole > MAX_ZIP_RATIO:
                # many members each too small to judge alone (a thousand 1 MiB files of zeros)
                raise InputError(f"the archive's {len(members):,} members expand {whole:,.0f}× in all "
                                 f"({path.stat().st_size:,} to {total:,} bytes), more than the {MAX_ZIP_RATIO}× "
                                 "log files do: refused as a zip bomb", file=path.name)
            if total > limit:
                raise InputError(f"the archive expands to {total:,} bytes, more than the {limit:,} allowed "
                                 "(FINOPS_MAX_UNZIPPED_BYTES)", file=path.name)
            free = shutil.disk_usage(workdir).free
            if total > free:
                raise InputError(f"the archive expands to {total:,} bytes and the temporary folder has "
                                 f"{free:,} free", file=path.name)
            for info in members:
                target = workdir / f"{len(out):04d}_{Path(info.filename).name}"
                written = 0
                with zf.open(info) as src, open(target, "wb") as dst:
                    for chunk in iter(lambda: src.read(1 << 20), b""):
                        written += len(chunk)
                        if written > info.file_size:
                            raise InputError(f"the archive member {info.filename!r} holds more than the "
                                             f"{info.file_size:,} bytes it declares", file=path.name)
                        dst.write(chunk)
                out.append((target, f"{path.name}:{info.filename}"))
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise InputError(f"the zip archive is corrupt ({exc})", file=path.name) from None
    if not out:
        raise InputError("the zip archive holds no files", file=path.name)
    return out


# ---------------------------------------------------------------- the load

def ingest_path(con: duckdb.DuckDBPyConnection, path: str | Path, options: IngestOptions | None = None,
                progress: Progress | None = None) -> list[IngestResult]:
    """Load one file (a zip: each member) into the store. One batch per file."""
    access.require("upload")
    options = options or IngestOptions()
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", file=str(path))
    if path.is_dir():
        raise InputError(f"is a folder: give the files in it (e.g. {path / '*.csv'})", file=str(path))
    with tempfile.TemporaryDirectory(prefix="finops-") as tmp:
        members = [(utf8_text(m, Path(tmp), name), name) for m, name in expand(path, Path(tmp))]
        label = options.file_label or path.name
        results = []
        for member, name in members:
            shown = name if len(members) > 1 else label
            results.append(_ingest_one(con, member, shown, options, progress))
        return results


def _ingest_one(con, path: Path, name: str, options: IngestOptions, progress: Progress | None) -> IngestResult:
    def step(fraction: float, what: str) -> None:
        if progress:
            progress(fraction, f"{name}: {what}")

    step(0.0, "reading")
    try:
        p = probe(path, name)
    except OSError as exc:          # no permission to read it, a device, a file gone meanwhile
        raise InputError(f"cannot be read: {exc.strerror or exc}", file=name) from None
    if options.records_path and p.kind in ("csv", "parquet", "text"):
        # it was ignored: the file read as it is, as if the path had been found
        raise InputError(f"--records-path reaches into a JSON document or JSON lines; this file is "
                         f"{ {'csv': 'a CSV', 'parquet': 'Parquet', 'text': 'text'}[p.kind]}", file=name,
                         field="records_path")
    wide = too_wide(p)
    if wide is not None:
        raise wide
    # a column mapping implies generic; --tenant-field alone does not (every format may take one)
    adapter = detect(p, options.format, bool(options.mapping))
    # the file's hash on a thread (hashlib lets go of the GIL) while the checks below read it: 0.45 s of a
    # 661 MB file that came after them
    hashing = ThreadPoolExecutor(1, thread_name_prefix="sha256")
    sha = hashing.submit(file_sha256, path)
    hashing.shutdown(wait=False)
    scan_text(p, quotes=False)      # NUL bytes and lines too long: refused before any reader meets them
    # a CSV's quotes are followed on a thread while the load reads the file: they pass before the load commits
    with TextScan(p) as scan:
        try:
            return _read_and_load(con, p, adapter, name, options, step, scan, sha.result())
        except Exception as exc:
            refusal = scan.refusal()
            if refusal is not None and refusal is not exc:
                raise refusal from None
            raise


def _read_and_load(con, p: Probe, adapter, name: str, options: IngestOptions, step, scan: TextScan,
                   sha: str) -> IngestResult:
    _check_truncated(p)
    opts_json = options.as_json()

    prior = _prior(con, sha, adapter.name, opts_json)
    if prior is not None:
        # the same bytes, read the same way, are already stored: nothing new can come of them
        read, rejected = prior
        _strict_on_prior(options, rejected, name)
        step(1.0, "already loaded")
        return IngestResult(name, adapter.name, None, read, 0, rejected, read - rejected, [])

    _install_macros(con)
    try:
        source = adapter.read(con, p, options)
    except (duckdb.Error, pa.ArrowException) as exc:
        raise unreadable(exc, file=name, what=adapter.name, p=p) from None
    while True:
        source.decimal_comma = decimal_comma(p)
        current = source        # the reading this attempt used: the one to clean up, whatever comes next
        try:
            result = _committed(con, partial(_load_scanned, con, scan, adapter.name, source, name, sha, opts_json,
                                             options, step))
            break
        except (duckdb.Error, pa.ArrowException) as exc:
            if p.kind == "csv" and not p.serial_csv and "quoted new line" in str(exc):
                # a quoted newline past the probed head: DuckDB's parallel scanner cannot split such
                # rows; read the file again on one thread
                p.serial_csv = True
                source = adapter.read(con, p, options)
                continue
            if source.fallback is None:
                raise unreadable(exc, file=name, what=adapter.name, p=p) from None
            # the fast typed read met a value it cannot take: read again untyped, row by row checks
            source = source.fallback()
        finally:
            if current.cleanup:
                current.cleanup()
    step(1.0, f"{result.rows_ingested:,} rows ingested")
    return result


def _load_scanned(con, scan: TextScan, *load_args) -> IngestResult:
    """:func:`_load` of a file whose text checks run beside it (``scan``): a file they refuse is refused whole
    (the load rolls back), whether its rows loaded or were every one rejected."""
    try:
        result = _load(con, *load_args)
    except NothingKept:
        scan.result()
        raise
    scan.result()
    return result


def _stage(con, source, legacy: bool = False) -> list[str]:
    """Stage the source's validated rows as ``_stage`` (with ``_legacy_hash`` if ``legacy``); returns the objects
    to drop afterwards."""
    if source.stage_as_view:
        # a view takes no parameters: it reads them from session variables (sql.view_body)
        valid = validated_sql(con, source.sql, source.params, decimal_comma=source.decimal_comma, legacy=legacy)
        body = sql.view_body(con, valid, source.params, "finops_stage")
        con.execute(f"CREATE OR REPLACE TEMP VIEW _stage AS {body}")
        return ["VIEW _stage"]
    ordered = con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()[0][0]
    if source.unnumbered_sql and ordered:
        # read on every thread (WITH ORDINALITY reads on one) and kept in file order, so a row's
        # position in the new table gives its number: its rowid less the first one (rowids made
        # in a transaction start high), the rowids being consecutive
        # the columns the source lacks are not stored in the staged table (a NULL column costs a twentieth
        # of a narrow file's staging): the view adds them back
        stage_sql = validated_sql(con, source.unnumbered_sql, source.params, absent=False,
                                  decimal_comma=source.decimal_comma, legacy=legacy)
        con.execute(f"CREATE OR REPLACE TEMP TABLE _staged AS {stage_sql}", source.params)
        first, last, n = con.execute("SELECT min(rowid), max(rowid), count(*) FROM _staged").fetchall()[0]
        if not n or last - first + 1 == n:
            staged_cols = [d[0] for d in con.execute("SELECT * FROM _staged LIMIT 0").description]
            nulls = "".join(f", CAST(NULL AS {schema.TYPES[c]}) AS {c}" for c in schema.NAMES if c not in staged_cols)
            # a row marked _skip (a line that is no row: a log's other lines) counts for the numbering only
            numbered = (f"SELECT * EXCLUDE (_skip) REPLACE (rowid - ? + ? AS _row){nulls} FROM _staged WHERE NOT _skip"
                        if "_skip" in staged_cols else f"SELECT * REPLACE (rowid - ? + ? AS _row){nulls} FROM _staged")
            body = sql.view_body(con, numbered, [int(first or 0), int(source.first_row)], "finops_rows")
            con.execute(f"CREATE OR REPLACE TEMP VIEW _stage AS {body}")
            return ["VIEW _stage", "TABLE _staged"]
        con.execute("DROP TABLE _staged")
    con.execute("CREATE OR REPLACE TEMP TABLE _stage AS "
                f"{validated_sql(con, source.sql, source.params, decimal_comma=source.decimal_comma, legacy=legacy)}",
                source.params)
    return ["TABLE _stage"]


def _strict_on_prior(options: IngestOptions, rejected: int, name: str) -> None:
    """--strict refuses a file with bad rows even when it is stored already (loaded before without --strict): a
    script that checks its files by their exit code must not see it pass the second time."""
    if options.strict and rejected:
        rows = f"{rejected:,} bad row{'s' if rejected != 1 else ''}"
        raise InputError(f"{rows} (--strict): this file was loaded before without --strict, its good rows are in "
                         "the store and its bad rows were left out; nothing new loaded. The Data page lists them",
                         file=name)


def _prior(con, sha: str, fmt: str, opts_json: str) -> tuple[int, int] | None:
    """(rows_read, rows_rejected) of the batch that already holds these bytes read this way, if any."""
    rows = con.execute("SELECT rows_read, rows_rejected FROM batches WHERE sha256 = ? AND format = ? "
                       "AND options = ? ORDER BY batch_id LIMIT 1", [sha, fmt, opts_json]).fetchall()
    return rows[0] if rows else None


def _counts(con) -> tuple[int, int, int, int, int]:
    """rows_read, rows_rejected, rows without an id, rows with neither id nor hash, distinct id hashes:
    one pass over ``_stage`` for every count the load needs, and the screen for ids repeated within the
    file (distinct 64-bit hashes prove distinct ids; only a shortfall needs the exact count)."""
    return con.execute(
        "SELECT count(*), count(*) FILTER (WHERE _reject <> ''), "
        "count(*) FILTER (WHERE _reject = '' AND request_id IS NULL), "
        "count(*) FILTER (WHERE _reject = '' AND request_id IS NULL AND _hash IS NULL), "
        "count(DISTINCT hash(request_id)) FILTER (WHERE _reject = '' AND request_id IS NOT NULL) "
        "FROM _stage").fetchall()[0]


def _insert(con, valid_sql: str, batch_id: int, has_rows: bool, ids_sql: str | None = None,
            new_rows: int | None = None, legacy_ids: bool = False) -> tuple[int, datetime | None, datetime | None]:
    """Insert the rows of the SELECT ``valid_sql`` whose ``request_id`` is not stored yet as batch ``batch_id``;
    returns the batch's row count, first and last ts.

    ``ids_sql`` selects the file's ids (every id ``valid_sql`` can give, more allowed) and ``new_rows`` says about
    how many rows the file has. DuckDB builds an anti join's hash table on the stored side: every stored id, so 10k
    new rows into a 100M-row store took 11 s, 10.8 of them building it. Where the store holds more rows than the
    file, the stored ids among the file's are found first (the stored ids probe a hash table of the file's: one
    scan of the id column) and the insert skips those. ``legacy_ids``: ``valid_sql`` has ``_legacy_id``, the id an
    earlier version made of a row's content (``ids_sql`` gives those too); a row stored under it is skipped."""
    known = "requests"
    if has_rows and ids_sql is not None and new_rows is not None and new_rows < store.row_count(con):
        con.execute("CREATE OR REPLACE TEMP TABLE _known_ids AS SELECT DISTINCT r.request_id FROM requests r "
                    f"WHERE r.request_id IN ({ids_sql})")
        known = "_known_ids"
    anti = f"WHERE NOT EXISTS (SELECT 1 FROM {known} r WHERE r.request_id = v.request_id)" if has_rows else ""
    if has_rows and legacy_ids:
        # a row stored by an earlier version under the id its content hashed to then (tabular.legacy_text_sql)
        anti += f" AND NOT EXISTS (SELECT 1 FROM {known} r WHERE r.request_id = v._legacy_id)"
    tenant = "coalesce(v.tenant, 'default')"
    # column order must follow the table: build the select list in schema order
    select_list = ", ".join(tenant if n == "tenant" else f"v.{n}" for n in schema.NAMES)
    con.execute(f"INSERT INTO requests ({', '.join(schema.NAMES)}, batch_id) SELECT {select_list}, ? "
                f"FROM ({valid_sql}) v {anti}", [batch_id])
    if known == "_known_ids":
        con.execute("DROP TABLE _known_ids")
    return tuple(con.execute("SELECT count(*), min(ts), max(ts) FROM requests WHERE batch_id = ?",
                             [batch_id]).fetchall()[0])


def _insert_first(con, source, name: str, batch_id: int, has_rows: bool, step):
    """The common load of a file read as a view (Parquet): insert the rows that pass the checks and are new in
    one reading of the file, then prove that was all of them, each with an id. Returns (counts, inserted),
    ``inserted`` None when the batch was taken out again for the general path (rows without an id, an id
    repeated within the file: both need the whole file's view before inserting).

    When every row of the file went in (the usual case), only a row without an id or an id repeated within the
    file can be wrong: the count of the batch's stored ids and their distinct hashes prove there is neither,
    and the file is read once, not twice (once to validate, once to insert)."""
    step(0.1, "inserting")
    # a file with an id column inserts its rows without an id too, and the check below finds them: a filter on
    # the id evaluates its trim once more for every row, in the scan (10M rows: 0.8-1.1 s of CPU)
    keep = "_reject = ''" if source.has_ids else "_reject = '' AND request_id IS NOT NULL"
    # the reader's own count (no casts, no checks): from the Parquet footer
    rows_read = con.execute(f"SELECT count(*) FROM ({source.sql}) s", source.params).fetchall()[0][0]
    # the file's ids, for a store larger than the file: the view computes only this column
    inserted = _insert(con, f"SELECT * FROM _stage WHERE {keep}", batch_id, has_rows,
                       ids_sql="SELECT request_id FROM _stage", new_rows=rows_read)
    if rows_read and inserted[0] == rows_read:
        step(0.5, "checking ids")
        n_hashes, n_ids = con.execute("SELECT count(DISTINCT hash(request_id)), count(request_id) FROM requests "
                                      "WHERE batch_id = ?", [batch_id]).fetchall()[0]
        if n_ids == rows_read and (n_hashes == rows_read or con.execute(
                "SELECT count(DISTINCT request_id) FROM requests WHERE batch_id = ?", [batch_id]).fetchall()[0][0]
                == rows_read):
            return (rows_read, 0, 0, 0, rows_read), inserted
    step(0.5, "validating")
    counts = _counts(con)
    rows_read, rows_rejected, n_without, _, n_id_hashes = counts
    repeated = rows_read - rows_rejected - n_id_hashes
    if repeated and not n_without:
        repeated = con.execute("SELECT count(*) - count(DISTINCT request_id) FROM _stage "
                               "WHERE _reject = '' AND request_id IS NOT NULL").fetchall()[0][0]
    if not n_without and not repeated:
        # rows rejected or already stored, rightly left out
        return counts, inserted
    con.execute("DELETE FROM requests WHERE batch_id = ?", [batch_id])
    return counts, None


def _insert_general(con, source, name: str, batch_id: int, has_rows: bool, counts, staged, step,
                    legacy_wanted: bool = False):
    """Insert the valid rows of ``_stage`` given its :func:`_counts`: rows without an id get a content hash,
    an id repeated within the file keeps its first row, ids already stored are skipped."""
    rows_read, rows_rejected, n_without, n_unkeyed, n_id_hashes = counts
    if staged == ["VIEW _stage"] and rows_rejected == 0:
        # every row passed: the insert re-reads the file without evaluating the checks again
        body = sql.view_body(con, validated_sql(con, source.sql, source.params, checks_on=False,
                                           decimal_comma=source.decimal_comma, legacy=legacy_wanted), source.params,
                             "finops_stage")
        con.execute(f"CREATE OR REPLACE TEMP VIEW _stage AS {body}")
    step(0.4, "removing duplicates")
    if n_unkeyed:
        raise InputError("rows have neither request_id nor a content hash (adapter bug)", file=name)
    # filters only where the counts show a row they would drop
    keep = (["_reject = ''"] if rows_rejected else []) + (["request_id IS NOT NULL"] if n_without else [])
    with_ids = "SELECT * FROM _stage" + (f" WHERE {' AND '.join(keep)}" if keep else "")
    # the staged rows carry the earlier versions' hash where it was asked for and the source gives one
    legacy = legacy_wanted and bool(n_without) and "_legacy_hash" in [
        d[0] for d in con.execute("SELECT * FROM _stage LIMIT 0").description]
    if n_without:
        # rows with no id get a content hash plus their occurrence number among identical rows: "-1" for a
        # row no other row equals (nearly all), found by one grouping of the hashes; only the rows whose hash
        # repeats are numbered in order by a window (a window over every row sorts them all: 3x the CPU)
        unkeyed = "SELECT * FROM _stage WHERE _reject = '' AND request_id IS NULL"
        # the grouping is of the content hashes' own 64-bit hashes (DuckDB's hash()), not of their 32-character
        # text (3M rows grouped alone: 422 MB peak against 549-590 MB; an azure-trace load's 3M peak 50 MB
        # lower). Two different content hashes sharing a 64-bit hash only send both rows to the window, which
        # still partitions by the full text: each is numbered "-1" in its own partition, the same id as the
        # grouping of the text gives
        con.execute(f"CREATE OR REPLACE TEMP TABLE _repeated AS SELECT hash(_hash) AS _hash64 FROM ({unkeyed}) "
                    "GROUP BY _hash64 HAVING count(*) > 1")
        numbered = "row_number() OVER (PARTITION BY _hash ORDER BY _row)"
        # and the id an earlier version made of the row (tabular.legacy_text_sql), numbered alike: rows of one
        # file with the same content now had the same content then
        first_old = "_legacy_hash || '-1'" if legacy else "CAST(NULL AS VARCHAR)"
        nth_old = f"_legacy_hash || '-' || {numbered}" if legacy else "CAST(NULL AS VARCHAR)"
        ids = (f"SELECT * REPLACE (_hash || '-1' AS request_id), {first_old} AS _legacy_id FROM ({unkeyed}) u "
               "WHERE hash(u._hash) NOT IN (SELECT _hash64 FROM _repeated) UNION ALL "
               f"SELECT * REPLACE (_hash || '-' || {numbered} AS request_id), {nth_old} AS _legacy_id "
               f"FROM ({unkeyed}) u WHERE hash(u._hash) IN (SELECT _hash64 FROM _repeated)")
        valid = f"(SELECT *, CAST(NULL AS VARCHAR) AS _legacy_id FROM ({with_ids})) UNION ALL ({ids})"
        # the ids made ("hash-k", k digits after the last '-') differ from one another, so an id can repeat only
        # among the file's own ids (their distinct hashes count them) or be made too: one of the file's ids
        # ending in "-<digits>" (none, nearly always) sends it to the exact count below
        with_id_rows = rows_read - rows_rejected - n_without
        dup_in_file = with_id_rows - n_id_hashes + (con.execute(
            f"SELECT count(*) FROM ({with_ids}) WHERE regexp_matches(request_id, '-[0-9]+$')").fetchall()[0][0]
            if with_id_rows else 0)
    else:
        valid = with_ids
        dup_in_file = rows_read - rows_rejected - n_id_hashes
    # within one file the first row of an id wins; the rest are duplicates
    if dup_in_file:
        dup_in_file = con.execute(f"SELECT count(*) - count(DISTINCT request_id) FROM ({valid})").fetchall()[0][0]
    if dup_in_file:
        valid = f"SELECT * FROM ({valid}) QUALIFY row_number() OVER (PARTITION BY request_id ORDER BY _row) = 1"
    step(0.5, "inserting")
    ids_sql = f"SELECT request_id FROM ({valid})" + (
        f" UNION ALL SELECT _legacy_id FROM ({valid}) WHERE _legacy_id IS NOT NULL" if legacy else "")
    inserted = _insert(con, valid, batch_id, has_rows, ids_sql=ids_sql, new_rows=rows_read - rows_rejected,
                       legacy_ids=legacy)
    if n_without:
        con.execute("DROP TABLE _repeated")
    return inserted


#: the settings key of the first batch whose rows without an id were hashed from their fields that hold a value
#: (tabular.content_text_sql); rows of earlier batches may carry the hash earlier versions gave them
CONTENT_HASHES_SINCE = "content_hashes_since_batch"
#: every such key: each noted at the first load of the version that brought it, whatever the file
HASHES_SINCE = (CONTENT_HASHES_SINCE, LITELLM_HASHES_SINCE)


def _earlier_hashes(con, batch_id: int, key: str = CONTENT_HASHES_SINCE) -> bool:
    """Whether the store may hold rows an earlier version hashed otherwise than the source's hashes (a batch loaded
    before the first of the version that hashes as ``key`` says): the load then looks its rows up by that hash too.
    Each of :data:`HASHES_SINCE` is noted at this version's first load, inside it."""
    since = {}
    for k in HASHES_SINCE:
        since[k] = store.get_setting(con, k)
        if since[k] is None:
            since[k] = batch_id
            con.execute("INSERT INTO settings VALUES (?, ?)", [k, json.dumps(batch_id)])
    return bool(con.execute("SELECT EXISTS (SELECT 1 FROM batches WHERE batch_id < ?)",
                            [int(since[key])]).fetchall()[0][0])


def _load(con, fmt: str, source, name: str, sha: str, opts_json: str, options: IngestOptions, step) -> IngestResult:
    if sha and (prior := _prior(con, sha, fmt, opts_json)) is not None:
        # the same file loaded by another tab or thread while this one read it: it is stored once
        read, rejected = prior
        _strict_on_prior(options, rejected, name)
        step(1.0, "already loaded")
        return IngestResult(name, fmt, None, read, 0, rejected, read - rejected, [])
    step(0.05, "staging")
    batch_id = con.execute("SELECT coalesce(max(batch_id), 0) + 1 FROM batches").fetchall()[0][0]
    has_rows = con.execute("SELECT EXISTS (SELECT 1 FROM requests)").fetchall()[0][0]
    legacy = _earlier_hashes(con, batch_id, source.hashes_since or CONTENT_HASHES_SINCE) and has_rows
    staged = _stage(con, source, legacy)
    if staged == ["VIEW _stage"]:
        counts, inserted = _insert_first(con, source, name, batch_id, has_rows, step)
    else:
        step(0.1, "validating")
        counts, inserted = _counts(con), None
    rows_read, rows_rejected, n_without, n_unkeyed, n_id_hashes = counts
    if rows_read == 0:
        raise InputError("the file holds no rows", file=name)
    rejects = [{"row": r, "field": reason.split(":", 1)[0], "reason": reason}
               for r, reason in con.execute(
                   "SELECT _row, _reject FROM _stage WHERE _reject <> '' ORDER BY _row LIMIT ?",
                   [MAX_REJECTS_KEPT]).fetchall()] if rows_rejected else []
    if rejects and source.explain:
        source.explain(rejects)
    if options.strict and rows_rejected:
        first = "; ".join(f"row {r['row']}: {r['reason']}" for r in rejects[:3])
        raise InputError(f"{rows_rejected:,} bad rows, nothing loaded (--strict). First: {first}", file=name)
    if rows_rejected == rows_read:
        # nothing to keep: no batch of 0 rows, no new data version (every cached page read again for nothing)
        raise NothingKept(IngestResult(name, fmt, None, rows_read, 0, rows_rejected, 0, rejects))
    if inserted is None:
        inserted = _insert_general(con, source, name, batch_id, has_rows, counts, staged, step, legacy)
    n_ingested, min_ts, max_ts = inserted
    # the hourly rollups, latency sketches, queue windows and subset rollups of the new rows
    store.insert_rollups(con, batch_id, lambda table: step(0.8, f"writing {table}"))
    step(0.95, "pricing new models")
    store.refresh_resolution(con)           # a new model or provider is priced (or listed as unpriced) at once
    duplicates = rows_read - rows_rejected - n_ingested
    con.execute("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [batch_id, name, sha, fmt, opts_json, rows_read, n_ingested, rows_rejected, duplicates,
                 datetime.now(UTC).replace(tzinfo=None), min_ts, max_ts])
    store.bump_data_version(con)
    for dropped in staged:
        con.execute(f"DROP {dropped}")
    return IngestResult(name, fmt, batch_id, rows_read, n_ingested, rows_rejected, duplicates, rejects)


def ingest_frame(con: duckdb.DuckDBPyConnection, frame, name: str = "frame", fmt: str = "canonical") -> IngestResult:
    """Load an in-memory table (pandas DataFrame or Arrow) of canonical columns, idempotently."""
    _install_macros(con)
    con.register("_frame_in", frame)
    try:
        cols = ([sql.column(c, sql.CANONICAL_COLUMNS) for c in frame.columns if c in schema.NAMES]
                if hasattr(frame, "columns") else schema.NAMES)
        # a row without an id (none, empty or spaces) gets a content hash of its columns, as an adapter's does
        no_id = missing_id_sql("request_id") if "request_id" in cols else "true"
        content = ", ".join(f"{c} := {c}" for c in cols)
        src = (f"SELECT row_number() OVER () AS _row, CASE WHEN {no_id} THEN md5(CAST(struct_pack({content}) AS VARCHAR)) "
               f"END AS _hash, {', '.join(cols)} FROM _frame_in")
        result = _committed(con, lambda: _load(con, fmt, Source(src), name, "", "{}", IngestOptions(),
                                               lambda f, w: None))
    finally:
        con.unregister("_frame_in")
    return result


def ingest_source(con: duckdb.DuckDBPyConnection, source: Source, name: str, fmt: str) -> IngestResult:
    """Load the rows an adapter made from records pulled from a service (``ecosystem.litellm_source``,
    ``langfuse_source``), in one transaction, idempotently by ``request_id`` as a file load is."""
    _install_macros(con)
    try:
        return _committed(con, lambda: _load(con, fmt, source, name, "", "{}", IngestOptions(), lambda f, w: None))
    finally:
        if source.cleanup:
            source.cleanup()
