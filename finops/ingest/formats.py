"""The log formats of the foundation: canonical, generic and the seed gateway's text log.

Each is one :class:`~finops.ingest.base.Adapter` in the table; later formats
register the same way in their own modules (listed in ``finops.ingest.__init__``).
"""
from __future__ import annotations

import json
import math
import re

import pyarrow as pa

from finops import schema
from finops.errors import InputError
from finops.ingest.base import Adapter, IngestOptions, Probe, Source, iso_time, register, time_after
from finops.ingest.tabular import (
    first_json_record,
    mapped_source,
    nested_source,
    rows_to_parquet,
    user_mapping,
    wrapped_json,
)

TABULAR = ("csv", "jsonl", "json", "parquet")


# ---------------------------------------------------------------- canonical

def _columns(p: Probe) -> list[str]:
    """The source columns detection judges: a table's header or first record's keys; for a JSON array, its first
    record's keys (where the probe's head holds it whole). A wrapped document (``{"data": [...]}``) has none."""
    if p.kind == "json" and not wrapped_json(p):
        rec = first_json_record(p, "array")
        return list(rec) if isinstance(rec, dict) else []
    return p.columns


def _sniff_canonical(p: Probe) -> float:
    if p.kind not in TABULAR:
        return 0.0
    cols = set(_columns(p))
    if not {"ts", "model"} <= cols:
        return 0.0
    known = len(cols & set(schema.NAMES))
    # three canonical columns, or a file whose every column is canonical (a bare ts,model log)
    return 0.9 if known >= 3 or cols <= set(schema.NAMES) else 0.0


def _read_canonical(con, p: Probe, options: IngestOptions) -> Source:
    """JSON Lines, JSON arrays and CSV in our schema read typed first (fast); any misfit value falls back to checked
    reading."""
    if p.kind not in ("jsonl", "json", "csv") or options.mapping:
        return mapped_source(con, p, options)
    src = mapped_source(con, p, options, typed=True)
    src.fallback = lambda: mapped_source(con, p, options, hash_as_typed=True)
    return src


register(Adapter(
    name="canonical", label="finops canonical schema",
    source_tool="finops (this project), our gateway's JSONL log",
    export_hint="columns named as in finops/schema.py; CSV, JSON Lines, a JSON array or Parquet",
    sniff=_sniff_canonical,
    read=lambda con, p, o: _read_canonical(con, p, o),
    example="tests/data/canonical_sample.csv",
))


# ---------------------------------------------------------------- generic

def _read_generic(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """Columns mapped in SQL (fast); field paths (``usage.prompt_tokens``), a wrapped JSON document
    (``{"data": [...]}``, ``{"items": [...]}``) or ``--records-path`` are read a record at a time, as every
    CSV or JSON file is with ``fast=False`` (the tests' second reading: both store the same)."""
    if not options.mapping and not options.tenant_field:
        raise InputError("the generic format needs a column mapping, e.g. "
                         "--map ts=TIMESTAMP,input_tokens=ContextTokens,output_tokens=GeneratedTokens",
                         file=p.name)
    mapping = user_mapping(options)
    paths = [src for src in mapping.values() if src not in p.columns and "." in src]
    if not (paths or options.records_path or wrapped_json(p)) and (fast or p.kind == "parquet"):
        return mapped_source(con, p, options)
    for canon in mapping:
        if canon not in schema.NAMES:
            raise InputError(f"--map names {canon!r}, which is not a canonical column; "
                             f"canonical columns: {', '.join(schema.NAMES)}", file=p.name, field=canon)
    return nested_source(p, options, mapping)


register(Adapter(
    name="generic", label="any CSV / JSON Lines / Parquet with a column mapping",
    source_tool="anything tabular",
    export_hint="--format generic --map ts=COL,model=COL,input_tokens=COL,... [--model M] [--tenant T]; a "
                "dotted path reaches a nested field (input_tokens=response.body.usage.prompt_tokens); a JSON "
                "document's records are its array, its data/items array, or the array at --records-path",
    sniff=lambda p: 0.0,        # never guessed: chosen with --format generic or a mapping
    read=_read_generic,
    example="tests/data/azure_code_excerpt.csv",
))


# ---------------------------------------------------------------- gateway-log

# 2026-11-29 10:00:00,123 [ROUTE] target=slow len=63 route_ms=0.01 queue_ms=812.3 ...
ROUTE_LINE = re.compile(r"^(?P<ts>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)\s+\[ROUTE\]\s+(?P<kv>.*)$")
KV = re.compile(r"(\w+)=(\S+)")
GATEWAY_FIELDS = {  # log key -> canonical column
    "target": "model", "len": "prompt_chars", "route_ms": "route_ms", "queue_ms": "queue_ms",
    "service_ms": "service_ms", "total_ms": "total_ms",
}


def _sniff_gateway(p: Probe) -> float:
    if p.kind != "text":
        return 0.0
    hits = sum(1 for ln in p.lines[:200] if "[ROUTE]" in ln and ROUTE_LINE.match(ln.strip()))
    return 0.95 if hits else 0.0


def _arrival(logged: str, total_ms: str | None) -> str:
    """The seed gateway logs a request when it *finishes*; ``ts`` is its arrival: log time - total_ms.

    Anything unreadable is passed through for the loader to reject with its reason (a total_ms that is no finite
    number: the logged time, the row rejected for its total_ms); an arrival beyond Python's years is the text
    DuckDB writes for it (:func:`time_after`), as the SQL reading computes it.
    """
    try:
        at = iso_time(logged.replace(",", "."))
        took = float(total_ms)
    except (TypeError, ValueError, OverflowError):
        return logged
    return time_after(at, -took) if math.isfinite(took) else logged


def _gateway_rows(p: Probe):
    import gzip
    opener = gzip.open if p.container == "gzip" else open
    with opener(p.path, "rt", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, start=1):
            if "[ROUTE]" not in line:
                continue            # other log lines (server start-up, access log) are not requests
            m = ROUTE_LINE.match(line.strip())
            row = {"_row": lineno, "raw_line": line.rstrip("\n")}
            if not m:
                row["ts"] = None
                yield row
                continue
            kv = dict(KV.findall(m.group("kv")))
            for key, canon in GATEWAY_FIELDS.items():
                row[canon] = kv.pop(key, None)
            row["ts"] = _arrival(m.group("ts"), row["total_ms"])
            kv["logged_at"] = m.group("ts")
            row["route"] = row["model"]
            # the seed logs a *relative* cost (fast 1, slow 8): kept in attrs, priced from the book
            extra = {("relative_cost" if k == "cost" else ("slow_inject" if k == "inject" else k)): v
                     for k, v in kv.items()}
            row["attrs"] = json.dumps(extra)
            yield row


# The same reading in SQL over DuckDB's line reader, for a file of plain ASCII lines (see _plain_text): the
# [ROUTE] line's regular expression and key=value pairs as _gateway_rows reads them (RE2 and Python's re
# agree on ASCII), the arrival computed as _arrival does. A line this reading would not read the same way
# stops it with an error (the loader then reads the file through _gateway_rows): a key given twice, a key
# the renames would collide with, a word with '=' that is no key=value pair (the regular expression would
# find a pair inside it) or a tab between pairs, a time DuckDB cannot read, or a total_ms that is no plain decimal of
# at most 3 places (Python's float() and timedelta take more forms).
GATEWAY_RE = r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)[ \t]+\[ROUTE\][ \t]+(.*)$"
GATEWAY_FAST_SQL = r"""
WITH l AS (
  SELECT ordinality AS _row, line, trim(line, ' ' || chr(9)) AS s
  FROM read_csv(?, columns = {'line': 'VARCHAR'}, header = false, delim = chr(1), quote = '', escape = '',
                auto_detect = false, strict_mode = false, compression = 'auto') WITH ORDINALITY
  WHERE contains(line, '[ROUTE]')),
g AS (SELECT _row, line, regexp_extract(s, ?, ['logged', 'kv']) AS g FROM l),
p AS (
  SELECT _row, line, g.logged, contains(g.kv, chr(9)) AS tab, list_transform(
      list_filter(string_split(g.kv, ' '), lambda w: contains(w, '=')),
      lambda w: {'k': split_part(w, '=', 1), 'v': w[strpos(w, '=') + 1:], 'ok': regexp_full_match(w, '\w+=\S+')})
    AS kv
  FROM g),
m AS (
  SELECT _row, line, logged <> '' AS hit, logged, tab OR NOT coalesce(list_bool_and([e.ok for e in kv]), true) AS odd,
         [e.k for e in kv] AS k, [e.v for e in kv] AS v
  FROM p),
f AS (
  SELECT _row, line, hit, logged, odd, k, v,
         v[list_position(k, 'target')] AS model, v[list_position(k, 'len')] AS prompt_chars,
         v[list_position(k, 'route_ms')] AS route_ms, v[list_position(k, 'queue_ms')] AS queue_ms,
         v[list_position(k, 'service_ms')] AS service_ms, v[list_position(k, 'total_ms')] AS total_ms,
         TRY_CAST(replace(logged, ',', '.') AS TIMESTAMP) AS logged_ts
  FROM m),
a AS (
  SELECT *, logged_ts - to_microseconds(CAST(round(TRY_CAST(total_ms AS DOUBLE) * 1000) AS BIGINT)) AS arrived
  FROM f),
t AS (
  SELECT *, CASE
    WHEN NOT hit THEN NULL
    WHEN odd OR len(list_distinct(k)) <> len(k) OR list_has_any(k, ['relative_cost', 'slow_inject', 'logged_at'])
      THEN error('gateway-log fast path: a pair split another way, a key given twice or a reserved name')
    WHEN total_ms IS NULL THEN logged
    WHEN NOT regexp_full_match(total_ms, '-?[0-9]+(\.[0-9]{1,3})?') OR logged_ts IS NULL
      THEN error('gateway-log fast path: a time or total_ms read another way')
    ELSE strftime(arrived, '%Y-%m-%d %H:%M:%S')
         || CASE WHEN strftime(arrived, '%f') <> '000000' THEN '.' || strftime(arrived, '%f') ELSE '' END
    END AS ts
  FROM a)
SELECT _row, md5(line) AS _hash, ts, CASE WHEN hit THEN model END AS model, CASE WHEN hit THEN model END AS route,
  CASE WHEN hit THEN prompt_chars END AS prompt_chars, CASE WHEN hit THEN route_ms END AS route_ms,
  CASE WHEN hit THEN queue_ms END AS queue_ms, CASE WHEN hit THEN service_ms END AS service_ms,
  CASE WHEN hit THEN total_ms END AS total_ms, 'ok' AS status, ? AS tenant,
  CASE WHEN hit THEN '{' || array_to_string(list_transform(
      list_filter(range(1, len(k) + 1),
                  lambda i: NOT list_contains(['target', 'len', 'route_ms', 'queue_ms', 'service_ms', 'total_ms'], k[i])),
      lambda i: to_json(CASE k[i] WHEN 'cost' THEN 'relative_cost' WHEN 'inject' THEN 'slow_inject' ELSE k[i] END)
           || ': ' || to_json(v[i])) || [to_json('logged_at') || ': ' || to_json(logged)], ', ') || '}' END AS attrs
FROM t"""
#: the bytes of a line _gateway_rows and DuckDB's line reader read alike: printable ASCII and tab
_PLAIN = bytes(range(0x20, 0x7F)) + b"\t\n"


def _plain_text(p: Probe) -> bool:
    """Whether every byte of the (decompressed) file is printable ASCII, a tab or a newline: no carriage
    return (Python reads one as a line end), no other control byte and no UTF-8 beyond ASCII (Python's
    white space, word characters and ``strip`` take Unicode), so the SQL reading sees the lines and fields Python does."""
    import gzip
    opener = gzip.open if p.container == "gzip" else open
    with opener(p.path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            if chunk.translate(None, _PLAIN):
                return False
    return True


# The reading of a file whose [ROUTE] lines share one shape, the commonest in the probe: the time, one space,
# [ROUTE], one space and the pairs, no white space around the line; the same keys in the same order, one space
# between pairs, no value with a quote or a backslash and a total_ms that is a plain decimal of at most 3 places.
# One regular expression without captures (RE2's DFA) on the line as read tells a line of that shape (no trim); its
# pairs are then words at known places (string_split), and attrs is text joined from the words (no list lambdas,
# no per-word regex): for such a line Python's KV.findall finds exactly these words split at their first '='. A
# [ROUTE] line of another shape stops the reading (error), and the general SQL reading above takes the file (then,
# if need be, Python).
GATEWAY_HEAD = r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?[ \t]+\[ROUTE\][ \t]+"
#: the line of the shape reading: its time, one space, [ROUTE], one space, its pairs (no white space around)
GATEWAY_SHAPE_HEAD = r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)? \[ROUTE\] "
_SHAPE_VALUE = r'[^\s"\\]+'
_SHAPE_TOTAL_MS = r"-?[0-9]+(?:\.[0-9]{1,3})?"
_SHAPE_LINE = re.compile(GATEWAY_SHAPE_HEAD)
_SHAPE_WORD = re.compile(r'(\w+)=[^\s"\\]+')
_RESERVED = ("relative_cost", "slow_inject", "logged_at")
_ATTR_NAMES = {"cost": "relative_cost", "inject": "slow_inject"}
GATEWAY_SHAPE_SQL = r"""
WITH l AS (
  SELECT ordinality AS _row, line
  FROM read_csv(?, columns = {'line': 'VARCHAR'}, header = false, delim = chr(1), quote = '', escape = '',
                auto_detect = false, strict_mode = false, compression = 'auto') WITH ORDINALITY
  WHERE contains(line, '[ROUTE]')),
c AS (
  SELECT _row, line, CASE WHEN regexp_full_match(line, ?) THEN 1
                          WHEN regexp_full_match(trim(line, ' ' || chr(9)), ?) THEN 2 ELSE 0 END AS shape,
         strpos(line, ' [ROUTE] ') AS route_at
  FROM l),
w AS (
  SELECT _row, line,
         CASE WHEN shape = 2 THEN error('gateway-log fast path: a [ROUTE] line of another shape') ELSE shape = 1 END
           AS hit,
         left(line, route_at - 1) AS logged, string_split(substr(line, route_at + 9), ' ') AS words
  FROM c),
f AS (
  SELECT _row, line, hit, logged, words, __TOTAL__ AS total_ms,
         TRY_CAST(replace(logged, ',', '.') AS TIMESTAMP) AS logged_ts
  FROM w),
a AS (
  SELECT *, logged_ts - to_microseconds(CAST(round(TRY_CAST(total_ms AS DOUBLE) * 1000) AS BIGINT)) AS arrived
  FROM f),
t AS (
  SELECT *, CASE
    WHEN NOT hit THEN NULL
    WHEN total_ms IS NULL THEN logged
    WHEN logged_ts IS NULL THEN error('gateway-log fast path: a time read another way')
    WHEN epoch_us(arrived) % 1000000 = 0 THEN strftime(arrived, '%Y-%m-%d %H:%M:%S')
    ELSE strftime(arrived, '%Y-%m-%d %H:%M:%S.%f')
    END AS ts
  FROM a)
SELECT _row, md5(line) AS _hash, ts, CASE WHEN hit THEN __MODEL__ END AS model, CASE WHEN hit THEN __MODEL__ END AS route,
  CASE WHEN hit THEN __LEN__ END AS prompt_chars, CASE WHEN hit THEN __ROUTE_MS__ END AS route_ms,
  CASE WHEN hit THEN __QUEUE_MS__ END AS queue_ms, CASE WHEN hit THEN __SERVICE_MS__ END AS service_ms,
  CASE WHEN hit THEN total_ms END AS total_ms, 'ok' AS status, ? AS tenant,
  CASE WHEN hit THEN __ATTRS__ || logged || '"}' END AS attrs
FROM t"""
_SHAPE_NUMBERED = """  SELECT ordinality AS _row, line
  FROM read_csv(?, columns = {'line': 'VARCHAR'}, header = false, delim = chr(1), quote = '', escape = '',
                auto_detect = false, strict_mode = false, compression = 'auto') WITH ORDINALITY
  WHERE contains(line, '[ROUTE]')),"""
_SHAPE_UNNUMBERED = """  SELECT CAST(NULL AS BIGINT) AS _row, line
  FROM read_csv(?, columns = {'line': 'VARCHAR'}, header = false, delim = chr(1), quote = '', escape = '',
                auto_detect = false, strict_mode = false, compression = 'auto')),"""
#: the placeholders of GATEWAY_SHAPE_SQL filled with a word's value (or NULL), by log key
_SHAPE_SLOTS = {"__MODEL__": "target", "__LEN__": "len", "__ROUTE_MS__": "route_ms", "__QUEUE_MS__": "queue_ms",
                "__SERVICE_MS__": "service_ms", "__TOTAL__": "total_ms"}
#: the value of word ? (1-based) of key length ? (the key and its '=' cut off)
_WORD_VALUE = "substr(words[?], ?)"


def gateway_shape(p: Probe) -> list[str] | None:
    """The keys, in order, of the commonest shape among the probe's [ROUTE] lines that the shape reading can
    take (pairs ``key=value`` one space apart, each key once, none of the names attrs reserves), else None."""
    from collections import Counter
    shapes: Counter = Counter()
    for ln in p.lines:
        m = _SHAPE_LINE.match(ln) if "[ROUTE]" in ln else None
        if not m:
            continue
        words = ln[m.end():].split(" ")
        matches = [_SHAPE_WORD.fullmatch(w) for w in words]
        if not all(matches):
            continue
        keys = tuple(x.group(1) for x in matches)
        if len(set(keys)) == len(keys) and not set(keys) & set(_RESERVED):
            shapes[keys] += 1
    return list(shapes.most_common(1)[0][0]) if shapes else None


def _gateway_shape_source(p: Probe, keys: list[str], tenant: str) -> Source:
    """GATEWAY_SHAPE_SQL for the shape ``keys``: its regular expression and the place of each value, bound
    (the placeholders in the order of the text: the path, the two regular expressions, total_ms, the SELECT
    list's columns, the tenant, the attrs)."""
    shape_re = GATEWAY_SHAPE_HEAD + " ".join(
        k + "=" + (_SHAPE_TOTAL_MS if k == "total_ms" else _SHAPE_VALUE) for k in keys)
    shape_sql, params = GATEWAY_SHAPE_SQL, [str(p.path), shape_re, GATEWAY_HEAD + ".*"]
    for slot in ("__TOTAL__", "__MODEL__", "__MODEL__", "__LEN__", "__ROUTE_MS__", "__QUEUE_MS__", "__SERVICE_MS__"):
        # word i of the line less its 'key=' (a value of the shape has no quote or backslash: JSON as it is)
        key = _SHAPE_SLOTS[slot]
        shape_sql = shape_sql.replace(slot, _WORD_VALUE if key in keys else "CAST(NULL AS VARCHAR)", 1)
        params.extend([keys.index(key) + 1, len(key) + 2] if key in keys else [])
    params.append(tenant)
    # attrs as json.dumps writes the dict: '{"relative_cost": "8.0", "slow_inject": "False", "logged_at": "..."}'
    parts, text = ["?"], "{"
    for i, k in enumerate(keys, start=1):
        if k in GATEWAY_FIELDS:
            continue
        params.extend([text + json.dumps(_ATTR_NAMES.get(k, k)) + ': "', i, len(k) + 2])
        parts.extend([_WORD_VALUE, "?"])
        text = '", '
    params.append(text + json.dumps("logged_at") + ': "')
    shape_sql = shape_sql.replace("__ATTRS__", " || ".join(parts))
    # unnumbered: every line read on every thread, numbered by the loader by its place; the lines without
    # [ROUTE] are marked _skip (Source.unnumbered_sql)
    unnumbered_sql = shape_sql.replace(_SHAPE_NUMBERED, _SHAPE_UNNUMBERED).replace(
        "SELECT _row, md5(line) AS _hash,", "SELECT _row, line IS NULL OR NOT contains(line, '[ROUTE]') AS _skip, "
        "md5(line) AS _hash,")
    return Source(shape_sql, params, unnumbered_sql=unnumbered_sql)


def _gateway_general_source(con, p: Probe, options: IngestOptions, tenant: str) -> Source:
    """GATEWAY_FAST_SQL: the SQL reading of any [ROUTE] line, Python behind it."""
    return Source(GATEWAY_FAST_SQL, [str(p.path), GATEWAY_RE, tenant],
                  fallback=lambda: _read_gateway(con, p, options, fast=False))


def _read_gateway(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    tenant = options.tenant or "default"
    if fast and _plain_text(p):
        keys = gateway_shape(p)
        if keys is None:
            return _gateway_general_source(con, p, options, tenant)
        src = _gateway_shape_source(p, keys, tenant)
        src.fallback = lambda: _gateway_general_source(con, p, options, tenant)
        return src
    cols = {"_row": pa.int64(), "raw_line": pa.string(), "ts": pa.string(), "model": pa.string(),
            "route": pa.string(), "prompt_chars": pa.string(), "route_ms": pa.string(),
            "queue_ms": pa.string(), "service_ms": pa.string(), "total_ms": pa.string(), "attrs": pa.string()}
    path, cleanup = rows_to_parquet(_gateway_rows(p), cols)
    sql = ("SELECT _row, md5(raw_line) AS _hash, ts, model, route, prompt_chars, route_ms, queue_ms, "
           "service_ms, total_ms, 'ok' AS status, ? AS tenant, attrs FROM read_parquet(?)")
    return Source(sql, [tenant, path], cleanup=cleanup)


register(Adapter(
    name="gateway-log", label="a dual-model gateway's [ROUTE] text log",
    source_tool="a small FastAPI gateway that logs [ROUTE] lines (uvicorn + logging)",
    export_hint="save the gateway's stdout/stderr: lines like "
                "'2026-11-29 10:00:00,123 [ROUTE] target=slow len=63 route_ms=0.01 queue_ms=812.3 ...'",
    sniff=_sniff_gateway, read=_read_gateway,
    example="tests/data/seed_gateway_injected.log",
))
