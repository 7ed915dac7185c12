"""Reading tabular files (CSV, JSONL, JSON arrays, Parquet) as SQL, and mapping their columns.

Shared by the ``canonical`` and ``generic`` adapters and by every preset of
``generic``: one mapping mechanism, many formats.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from finops import schema, sql
from finops.errors import InputError
from finops.ingest.base import IngestOptions, Probe, Source, blank, missing_id, missing_id_sql, unreadable
from finops.sql import quote_ident

# the number of the first row of a CSV (after its header) or JSON file, by kind: for rows numbered
# by their position after staging (see relation_sql's ``numbered``)
FIRST_ROW = {"csv": 2, "jsonl": 1, "json": 1}

#: a canonical column's type when a CSV is read typed (see :func:`_reader`)
CSV_TYPED = {"BIGINT": "DOUBLE", "INTEGER": "DOUBLE", "DOUBLE": "DOUBLE", "TIMESTAMP": "TIMESTAMPTZ"}
#: and when JSON is: a time as TIMESTAMPTZ, which keeps a UTC offset (a TIMESTAMP drops it: 12:30+02:00 read as 12:30);
#: a number as its text, read by :func:`_json_number_sql` (the JSON reader's own casts take true as 1, 12.5 as a
#: BIGINT's 12 and "0x10" as 16, where the checked reading rejects each by name)
JSON_TYPED = {"TIMESTAMP": "TIMESTAMPTZ", "BIGINT": "VARCHAR", "INTEGER": "VARCHAR", "DOUBLE": "VARCHAR"}


def _json_number_sql(x: str, name: str) -> str:
    """A canonical number the typed JSON reading read as text (``x``: a number as the file spells it, a string's
    text, true as 'true') as its column's type; error() for anything the checked reading would not read the same
    (not a number, a count that is not whole or past 2^53, not finite), and the caller reads the file checked,
    which rejects that row by name."""
    name = sql.column(name, sql.CANONICAL_COLUMNS)
    d = f"TRY_CAST({x} AS DOUBLE)"
    if schema.TYPES[name] in ("BIGINT", "INTEGER"):
        return (f"CASE WHEN {x} IS NULL THEN NULL WHEN {d} = floor({d}) AND abs({d}) < 9007199254740992 "
                f"THEN CAST({d} AS BIGINT) ELSE error('{name}: not a whole number: read checked') END")
    return f"CASE WHEN {x} IS NULL THEN NULL WHEN isfinite({d}) THEN {d} ELSE error('{name}: not a number: read checked') END"


def _typed_value_sql(c: str, typed_json: bool) -> str:
    """A source column as :func:`mapped_source` reads it: a canonical number the typed JSON reading read as text
    through :func:`_json_number_sql`, anything else as it came."""
    if typed_json and JSON_TYPED.get(schema.TYPES.get(c)) == "VARCHAR":
        return _json_number_sql(quote_ident(c), c)
    return quote_ident(c)


def _reader(con: duckdb.DuckDBPyConnection, p: Probe, typed: bool) -> tuple[str, list, list[str], str, str, dict]:
    """``(table function call, params, source columns, ordinal column, _row expression, the JSON reader's
    detected column types (a JSON file read checked; else empty))``: the path,
    the delimiter and the column types go in as parameters (a view staged from it reads them from
    variables: see :func:`finops.sql.view_body`)."""
    path = str(p.path)
    if p.kind == "parquet":
        return ("read_parquet(?, file_row_number = true)", [path], list(p.columns),
                "file_row_number", "file_row_number + 1", {})
    if p.kind == "csv":
        cols = list(p.columns)
        seen: dict[str, int] = {}
        for i, c in enumerate(cols, start=1):
            if c in seen:
                raise InputError(f"the CSV header repeats the column {c!r} (columns {seen[c]} and {i}): rename or "
                                 "remove one and load the file again", file=p.name, row=1, field=c)
            seen[c] = i
        spec = {c: "VARCHAR" for c in cols + ["_extra"]}
        if typed:
            # canonical names read as numbers and times by the CSV reader itself (a fifth less CPU than text
            # cast afterwards); a value that does not parse fails the read, and the caller falls back to
            # the text reading. Only types the reader parses as the checked path does: whole numbers as
            # DOUBLE (a BIGINT column would round "12.5" to 13, which the checks reject), a time as
            # TIMESTAMPTZ (the text path's first cast), flags and JSON as text
            spec.update({c: CSV_TYPED[schema.TYPES[c]] for c in cols if schema.TYPES.get(c) in CSV_TYPED})
        call = ("read_csv(?, auto_detect = false, delim = ?, quote = '\"', escape = '\"', "
                "header = false, skip = 1, columns = ?, null_padding = true, strict_mode = false, "
                "compression = 'auto'" + (", parallel = false" if p.serial_csv else "") + ")")
        return call, [path, p.delimiter, spec], cols, "ordinality", "ordinality + 1", {}
    if p.kind in ("jsonl", "json"):
        fmt = "newline_delimited" if p.kind == "jsonl" else "array"
        # untyped (the fallback after a typed read failed on a value): detect types from every row, so a
        # value unlike the first rows' (a word where numbers were) makes its column text, and that one
        # row is rejected by the checks rather than the whole file failing to read
        sample = "" if typed else ", sample_size = -1"
        call = f"read_json(?, format = ?, compression = 'auto'{sample})"
        try:
            described = [r[:2] for r in con.execute(f"DESCRIBE SELECT * FROM {call}", [path, fmt]).fetchall()]
        except duckdb.Error as exc:
            raise unreadable(exc, file=p.name, what="JSON", p=p) from None
        cols = [c for c, _ in described]
        if len(described) == 1 and described[0][0] == "json":
            # DuckDB reads records that are not all objects as one column of values: read the objects field by
            # field, each other record as a row of no fields (rejected, and named by _non_object_records).
            # Unpacked and returned element by element so that the SQL-vocabulary check
            # (tests/test_sql_vocabulary.py) judges each element by its own source, a *_sql function
            body, params, cols, ordinal, row = _mixed_records_sql(con, p, call, [path, fmt])
            return body, params, cols, ordinal, row, {}
        if typed:
            # canonical names parse straight into their types (as fast as an untyped read); a value
            # that does not fit fails the read, and the caller falls back to the checked path
            types = {c: JSON_TYPED.get(schema.TYPES[c], schema.TYPES[c]) if c in schema.TYPES
                     else "JSON" if t == '"NULL"' else t for c, t in described}
            call = call.replace("compression = 'auto')", "compression = 'auto', columns = ?)")
            return call, [path, fmt, types], cols, "ordinality", "ordinality", {}
        return call, [path, fmt], cols, "ordinality", "ordinality", dict(described)
    raise InputError(f"not a table (CSV, JSON Lines, JSON array or Parquet): looks like {p.kind}", file=p.name)


#: the ordinal column of :func:`_mixed_records_sql` (a name no export uses)
MIXED_ORDINAL = "_finops_record"


def _mixed_records_sql(con: duckdb.DuckDBPyConnection, p: Probe, call: str,
                       params: list) -> tuple[str, list, list[str], str, str]:
    """:func:`_reader`'s answer for a JSON or JSON Lines file some of whose records are no object (an array, a
    number, a string): the objects' keys as columns, read as text (JSON where a value nests), from every object;
    any other record is a row with every column NULL, which the checks reject and :func:`_non_object_records`
    names. A file with no object at all is refused, naming its first record."""
    objects = "read_json_objects(?, format = ?, compression = 'auto')"
    try:
        (structure,) = con.execute(f"SELECT json_group_structure(json) FROM {objects} "
                                   "WHERE json_type(json) = 'OBJECT'", params).fetchone()
    except duckdb.Error as exc:
        raise unreadable(exc, file=p.name, what="JSON", p=p) from None
    keys = json.loads(structure) if structure else {}
    if not isinstance(keys, dict) or not keys or MIXED_ORDINAL in keys:
        _not_object(con, p, call, params)
    spec = json.dumps({k: "JSON" if isinstance(v, (dict, list)) else "VARCHAR" for k, v in keys.items()})
    body = (f"(SELECT ordinality AS {MIXED_ORDINAL}, unnest(json_transform(CASE WHEN json_type(json) = 'OBJECT' "
            f"THEN json ELSE '{{}}' END, ?)) FROM {objects} WITH ORDINALITY)")
    return body, [spec, *params], list(keys), MIXED_ORDINAL, MIXED_ORDINAL


def _not_object(con: duckdb.DuckDBPyConnection, p: Probe, call: str, params: list) -> None:
    """Raise InputError naming the first record of a JSON or JSON Lines file that is no object (an array, a
    number, a string, null), numbered as the loader numbers rows; nothing where every record is an object."""
    objects = call.replace("read_json(", "read_json_objects(").replace(", sample_size = -1", "")
    try:
        found = con.execute(f"SELECT ordinality, json_type(json) FROM {objects} WITH ORDINALITY "
                            "WHERE json_type(json) IS DISTINCT FROM 'OBJECT' ORDER BY ordinality LIMIT 1",
                            params).fetchall()
    except duckdb.Error as exc:
        raise unreadable(exc, file=p.name, what="JSON", p=p) from None
    if found:
        row, kind = found[0]
        raise InputError(f"expected a record (a JSON object), found {_kind(kind)}", file=p.name, row=int(row))


def _non_object_records(con: duckdb.DuckDBPyConnection, p: Probe) -> Callable[[list[dict]], None]:
    """:attr:`Source.explain` for a JSON or JSON Lines file: a record that is no object (``null``, which DuckDB
    reads as one of no fields, or an array, number or string of a file :func:`_mixed_records_sql` reads) is a row
    with no field, which the checks reject as "ts: missing"; such a row's reason becomes that it is no JSON
    object, naming what it is. The file is read again only for a reject that starts "ts: missing", and only
    those rows are looked at."""
    fmt = "newline_delimited" if p.kind == "jsonl" else "array"

    def explain(rejects: list[dict]) -> None:
        rows = [r["row"] for r in rejects if r["reason"].startswith("ts: missing")]
        if not rows:
            return
        kinds = dict(con.execute(
            "SELECT ordinality, json_type(json) FROM read_json_objects(?, format = ?, compression = 'auto') "
            "WITH ORDINALITY WHERE json_type(json) IS DISTINCT FROM 'OBJECT' AND ordinality IN (SELECT unnest(?))",
            [str(p.path), fmt, rows]).fetchall())
        for r in rejects:
            if r["row"] in kinds:
                r["field"], r["reason"] = "row", f"row: expected a record (a JSON object), found {_kind(kinds[r['row']])}"
    return explain


def _kind(json_type: str | None) -> str:
    """A DuckDB ``json_type`` as a message names it (:func:`finops.ingest.base.json_kind`'s words)."""
    return {"ARRAY": "an array", "NULL": "null", "VARCHAR": "a string", "BOOLEAN": "true or false"}.get(
        json_type or "NULL", "a number")


def _rows_sql(call: str, ordinal: str, row: str, numbered: bool) -> str:
    if ordinal == "ordinality":
        if not numbered:
            return f"SELECT CAST(NULL AS BIGINT) AS _row, * FROM {call}"
        call += " WITH ORDINALITY"
    return f"SELECT {row} AS _row, * EXCLUDE ({ordinal}) FROM {call}"


def relation_sql(con: duckdb.DuckDBPyConnection, p: Probe, typed: bool = False,
                 numbered: bool = True) -> tuple[str, list, list[str]]:
    """``(sql, params, source_columns)``: the file as rows with a 1-based ``_row``.

    CSV rows are numbered by their line in the file (the header is line 1). JSON
    Lines rows by their line. Parquet rows by their position (1 = first row).
    ``numbered=False`` leaves a CSV's or JSON file's ``_row`` NULL: ``WITH ORDINALITY``
    reads a file on one thread, so the loader numbers those rows by their position
    once staged instead (the first is :data:`FIRST_ROW`).
    """
    call, params, cols, ordinal, row, _ = _reader(con, p, typed)
    return _rows_sql(call, ordinal, row, numbered), params, cols


def user_mapping(options: IngestOptions, preset: dict[str, str] | None = None) -> dict[str, str]:
    """Canonical column -> the file's field: a format's ``preset``, then the user's ``--map``, then
    ``--tenant-field`` for the tenant."""
    mapping = {**(preset or {}), **options.mapping}
    if options.tenant_field:
        mapping["tenant"] = options.tenant_field
    return mapping


def merged_attrs_sql(own_sql: str, packed_sql: str) -> str:
    """SQL for a row's ``attrs`` column ``own_sql`` patched by ``packed_sql``, the JSON object of its other unmapped
    columns (the rule :func:`merged_attrs` states). Text that is no JSON no longer stops the load."""
    own_json = f"TRY_CAST({own_sql} AS JSON)"
    return (f"CASE WHEN {own_sql} IS NULL OR trim(CAST({own_sql} AS VARCHAR)) = '' THEN {packed_sql} "
            f"WHEN json_type({own_json}) = 'OBJECT' THEN json_merge_patch({own_json}, {packed_sql}) "
            f"ELSE json_merge_patch(json_object('attrs', coalesce({own_json}, to_json(CAST({own_sql} AS VARCHAR)))), "
            f"{packed_sql}) END")


def _merge_patch(target, patch):
    """RFC 7386's JSON merge patch (DuckDB's ``json_merge_patch``): ``patch``'s keys set, a null one removed, an
    object merged key by key."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge_patch(out.get(k), v)
    return out


def merged_attrs(own: str | None, extra: dict) -> str | None:
    """A record's own ``attrs`` text and ``extra``, its other unmapped fields, as the JSON text stored (the reading
    a record at a time; :func:`merged_attrs_sql` is the same rule in SQL). No ``extra``: ``own`` as it is (the
    loader keeps JSON as JSON, other text as a JSON string); no ``own`` (or blank): ``extra``; a JSON object
    patched by ``extra`` (RFC 7386: the other fields win, a null one removes its key); anything else (a number, a
    list, text that is no JSON) is kept under the key ``attrs`` and patched so."""
    if not extra:
        return own
    if own is None or blank(own):
        merged = extra
    else:
        try:
            parsed = json.loads(own)
        except json.JSONDecodeError:
            parsed = own
        merged = _merge_patch(parsed if isinstance(parsed, dict) else {"attrs": parsed}, extra)
    return json.dumps(merged, separators=(",", ":"), default=str)


def _hashed_sql(c: str, typed_json: bool, as_typed: bool, source_types: dict) -> str:
    """A column's value in the content hash of a row without an id. The typed JSON reading hashes its time as the
    TIMESTAMP it is in UTC and its numbers as their types; ``as_typed`` (the checked reading of the same file)
    hashes a canonical time and number as those too, whatever DuckDB detected (a TIMESTAMPTZ, a count column
    made text by one bad row, a cost of whole numbers read BIGINT): a row hashes the same by either reading,
    and a log that grew a bad line, read checked, does not store its earlier rows again. Anything else as read."""
    q = quote_ident(c)
    target = schema.TYPES.get(c)
    if typed_json:
        return f"CAST({q} AS TIMESTAMP)" if target == "TIMESTAMP" else _typed_value_sql(c, typed_json)
    if not as_typed:
        return q
    if target == "TIMESTAMP":
        # the loader's reading of a time (the loader imports this module)
        from finops.ingest.loader import _ts_expr
        return _ts_expr(q, str(source_types[c]))
    if target in ("BIGINT", "INTEGER"):
        return f"TRY_CAST(TRY_CAST({q} AS DOUBLE) AS BIGINT)"
    return f"TRY_CAST({q} AS DOUBLE)" if target == "DOUBLE" else q


def content_text_sql(names: list[str], exprs: list[str]) -> str:
    """The text a row without an id is hashed from, ``names`` the file's columns and ``exprs`` the SQL of their
    values: each field that holds a value as a one-key JSON object of its text, in the order of the fields' names
    (JSON's quoting keeps two rows apart whatever their text holds; as text, 70 read as a number and "70" read as
    text are one).

    A field the row leaves empty is not in it, so a column a later line of the file adds (a key only failures
    carry, a column appended to a CSV) changes no earlier row's hash, and a log that grew one is not stored again;
    nor does the order of the file's columns (a CSV export that moved a column, a JSON writer that orders its keys
    otherwise), as the record-at-a-time reading's JSON with sorted keys.
    Earlier versions hashed :func:`legacy_text_sql`'s text, which the loader looks up too where the store holds
    rows they loaded.

    >>> import duckdb
    >>> text, legacy = content_text_sql(["a", "b"], ["a", "b"]), legacy_text_sql(["a", "b"], ["a", "b"])
    >>> duckdb.sql(f"SELECT {text}, {legacy} FROM (VALUES ('x', 1), ('y', NULL)) t(a, b)").fetchall()
    [('{"a":"x"},{"b":"1"}', "{'a': x, 'b': 1}"), ('{"a":"y"}', "{'a': y, 'b': NULL}")]
    >>> content_text_sql(["b", "a"], ["b", "a"]) == text
    True
    """
    held = ", ".join([f"CASE WHEN ({x}) IS NOT NULL THEN CAST(to_json(struct_pack({quote_ident(c)} := CAST({x} AS VARCHAR))) "
                      "AS VARCHAR) END" for c, x in sorted(zip(names, exprs, strict=True))])
    return f"concat_ws(',', {held})" if held else "''"


def legacy_text_sql(names: list[str], exprs: list[str]) -> str:
    """The text earlier versions hashed a row without an id from: the STRUCT of every column of the file as DuckDB
    writes it, an empty field as NULL (so a column another line added changed it)."""
    return _struct_text_sql(names, exprs)


def _struct_text_sql(names: list[str], exprs: list[str]) -> str:
    return f"CAST(struct_pack({', '.join([f'{quote_ident(c)} := {x}' for c, x in zip(names, exprs, strict=True)])}) AS VARCHAR)"


def mapped_source(con: duckdb.DuckDBPyConnection, p: Probe, options: IngestOptions,
                  preset: dict[str, str] | None = None, exprs: dict[str, tuple[str, list[str]]] | None = None,
                  attrs_exprs: dict[str, str] | None = None, typed: bool = False,
                  hash_as_typed: bool = False) -> Source:
    """Map a tabular file onto canonical columns.

    ``preset`` (canonical -> source column) is applied first, then the user's
    ``options.mapping``; a source column named like a canonical one maps to it
    unless mapped elsewhere. ``exprs`` gives SQL expressions over the source
    columns for canonical columns that need a computation (a preset's unit
    conversions). Every unmapped column is kept in ``attrs``; ``attrs_exprs`` gives the
    SQL for a source column's value there (e.g. JSON text kept as JSON). ``hash_as_typed`` (the canonical
    reading's checked fallback of a JSON file): a row without an id hashes its time and numbers as the typed
    reading does, whatever types the file's other rows made DuckDB detect.
    """
    if typed and p.kind == "csv" and "request_id" not in p.columns:
        typed = False       # every row would be hashed from its text (below)
    typed_csv = typed and p.kind == "csv"
    typed_json = typed and p.kind in ("json", "jsonl")
    call, params, cols, ordinal, row, source_types = _reader(con, p, typed)
    mapping = user_mapping(options, preset)
    for canon, src in mapping.items():
        if canon not in schema.NAMES:
            raise InputError(f"--map names {canon!r}, which is not a canonical column; "
                             f"canonical columns: {', '.join(schema.NAMES)}", file=p.name, field=canon)
        if src not in cols:
            raise InputError(f"--map {canon}={src}: the file has no column {src!r}; its columns: "
                             f"{', '.join(cols)}", file=p.name, field=src)
    for name in schema.NAMES:
        if name not in mapping and name in cols and name not in mapping.values():
            mapping[name] = name
    exprs = dict(exprs or {})
    used = set(mapping.values()) | {c for _, uses in exprs.values() for c in uses}
    # the select list and the values it binds (the --model / --tenant constants), in placeholder order
    select, select_params = ["_row"], []
    # the reader's column types, where a --model / --tenant constant needs them (a JSON column's "" is no value)
    types = (dict(r[:2] for r in con.execute(f"DESCRIBE SELECT * FROM {call}", params).fetchall())
             if options.model is not None or options.tenant is not None else {})
    for name in schema.NAMES:
        if name == "attrs":
            continue
        expr = exprs[name][0] if name in exprs else (
            _typed_value_sql(mapping[name], typed_json) if name in mapping else None)
        const = {"model": options.model, "tenant": options.tenant}.get(name)
        if const is not None:
            # the constant where the file gives none: no value, or an empty one (text of spaces, "" in JSON)
            text = (f"json_extract_string({expr}, '$')" if expr and name not in exprs
                    and types.get(mapping[name]) == "JSON" else f"CAST({expr} AS VARCHAR)")
            expr = f"coalesce(nullif(trim({text}), ''), CAST(? AS VARCHAR))" if expr else "CAST(? AS VARCHAR)"
            select_params.append(str(const))
        if expr and typed_csv and schema.TYPES[name] in ("BIGINT", "INTEGER"):
            # read as DOUBLE (see CSV_TYPED): a count that is not a whole number a double holds exactly ends
            # the typed reading, so its reject names the value as written ("12.50"), as the text reading does
            expr = (f"CASE WHEN {expr} IS NULL OR ({expr} = floor({expr}) AND abs({expr}) < 9007199254740992) "
                    f"THEN {expr} ELSE error('{name}: not a whole number: read as text') END")
        if expr:
            select.append(f"{expr} AS {name}")
    rest = [c for c in cols if c not in used and c != "attrs"]
    kept = attrs_exprs or {}
    packed = (f"to_json(struct_pack({', '.join(f'{quote_ident(c)} := {kept.get(c, quote_ident(c))}' for c in rest)}))"
              if rest else None)
    own = quote_ident(mapping.get("attrs", "attrs")) if ("attrs" in cols or "attrs" in mapping) else None
    if own and packed:
        select.append(f"{merged_attrs_sql(own, packed)} AS attrs")
    elif own or packed:
        select.append(f"{own or packed} AS attrs")
    has_ids = "request_id" in mapping or "request_id" in exprs
    # a content hash (plus the constants given) for rows without an id (NULL, empty or spaces: the loader's
    # reading of none); CASE keeps it lazy
    hashed_sql = [_hashed_sql(c, typed_json, hash_as_typed and c in source_types, source_types) for c in cols]
    id_col = exprs["request_id"][0] if "request_id" in exprs else (
        quote_ident(mapping["request_id"]) if "request_id" in mapping else "NULL")
    if typed_csv:
        # the content hash is of the text as written (a number read typed prints otherwise: 70.0 for 70), so
        # a row without an id ends the typed reading and the caller reads the file as text
        select.append(f"CASE WHEN {missing_id_sql(id_col)} THEN error('a row without request_id: read as text') END "
                      "AS _hash")
    else:
        select.append(f"CASE WHEN {missing_id_sql(id_col)} THEN md5({content_text_sql(cols, hashed_sql)} || ?) END AS _hash")
        # the hash this version's predecessors gave a row with an empty field, which the loader also looks up
        select.append(f"CASE WHEN {missing_id_sql(id_col)} THEN md5({legacy_text_sql(cols, hashed_sql)} || ?) END "
                      "AS _legacy_hash")
        select_params.extend([f"{options.model or ''}|{options.tenant or ''}"] * 2)
    if p.kind == "csv":
        select.append("CASE WHEN _extra IS NOT NULL THEN 'fields: the row has more fields than the header' END AS _shape")
    def body(numbered: bool) -> str:
        return f"SELECT {', '.join(select)} FROM ({_rows_sql(call, ordinal, row, numbered)})"

    return Source(body(True), select_params + params, has_ids=has_ids, stage_as_view=p.kind == "parquet",
                  unnumbered_sql=body(False) if p.kind in FIRST_ROW else None, first_row=FIRST_ROW.get(p.kind, 1),
                  explain=_non_object_records(con, p) if p.kind in ("json", "jsonl") else None)


def _record_hash(rec: dict, salt: str) -> str:
    """The content hash of a record read a record at a time: its JSON, keys sorted, and the constants given."""
    return hashlib.md5((json.dumps(rec, sort_keys=True, separators=(",", ":"), default=str) + salt).encode()).hexdigest()


def rows_to_parquet(rows: Iterable[dict], columns: dict[str, pa.DataType], chunk: int = 100_000) -> tuple[str, callable]:
    """Write Python-parsed rows to a temporary Parquet file in chunks (constant memory).

    Returns ``(path, cleanup)``. For adapters that must parse in Python.
    """
    tmp = tempfile.NamedTemporaryFile(prefix="finops-", suffix=".parquet", delete=False)
    tmp.close()
    sch = pa.schema([(k, v) for k, v in columns.items()])
    writer = pq.ParquetWriter(tmp.name, sch)
    buf: list[dict] = []
    try:
        for row in rows:
            buf.append(row)
            if len(buf) >= chunk:
                writer.write_table(pa.Table.from_pylist(buf, schema=sch))
                buf = []
        writer.write_table(pa.Table.from_pylist(buf, schema=sch))
    except BaseException:
        writer.close()
        Path(tmp.name).unlink(missing_ok=True)     # a parser that raises leaves no temporary file
        raise
    writer.close()
    return tmp.name, lambda: Path(tmp.name).unlink(missing_ok=True)


# ---------------------------------------------------------------- records of JSON / JSON Lines / CSV files

#: the keys of an API page or export that hold its records: ``{"data": [...], "meta": ...}``
RECORD_KEYS = ("data", "items")
JSON_CHUNK = 1 << 20


def open_text(p: Probe):
    return gzip.open(p.path, "rt", encoding="utf-8", errors="replace") if p.container == "gzip" \
        else open(p.path, encoding="utf-8", errors="replace")


def cell(v: str | None):
    """A CSV cell: empty is None; a cell holding a JSON object or array is parsed."""
    if v is None or v == "":
        return None
    s = v.strip()
    if s[:1] in "{[":
        try:
            return json.loads(s)
        except json.JSONDecodeError:
            return v
    return v


def _unpage(doc, records_path: str | None = None) -> list:
    """A JSON value's records: an array, a page ``{"data": [...]}`` / ``{"items": [...]}``, or one object."""
    if records_path:
        for part in records_path.split("."):
            doc = doc.get(part) if isinstance(doc, dict) else None
        return doc if isinstance(doc, list) else []
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in RECORD_KEYS:
            if isinstance(doc.get(key), list):
                return doc[key]
    return [doc]


class _JsonStream:
    """A JSON document read a value at a time from a text file (``json.JSONDecoder.raw_decode`` on a
    buffer that grows only as far as the value being read), so one huge array costs the memory of
    one record, not of the file."""

    def __init__(self, fh, name: str):
        self.fh, self.name, self.buf, self.pos, self.eof = fh, name, "", 0, False
        self.decoder = json.JSONDecoder()

    def _more(self, size: int = JSON_CHUNK) -> bool:
        if self.eof:
            return False
        chunk = self.fh.read(size)
        if not chunk:
            self.eof = True
            return False
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space (or the BOM), '' at the end."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n\ufeff":
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._more():
                return ""

    def expect(self, chars: str, where: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            found = repr(c) if c else "the end of the file"
            raise InputError(f"not valid JSON: expected {' or '.join(repr(x) for x in chars)} {where}, "
                             f"found {found}", file=self.name)
        self.pos += 1
        return c

    def value(self, record: int | None = None):
        self.peek()
        size = JSON_CHUNK
        while True:
            try:
                val, end = self.decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if self._more(size):
                    size *= 2       # a record larger than the buffer: read on (doubling: linear overall)
                    continue
                raise InputError(f"not valid JSON ({exc.msg})" + ("" if record else f" at character {exc.pos}"),
                                 file=self.name, row=record) from None
            if end == len(self.buf) and self._more():
                continue            # a number or literal may go on in the next chunk
            self.pos = end
            return val

    def array(self) -> Iterator:
        """The elements of the array whose '[' was just read."""
        n = 0
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            n += 1
            yield self.value(record=n)
            if self.expect(",]", f"after record {n}") == "]":
                return


def json_records(p: Probe, records_path: str | None = None) -> Iterator[tuple[int, object]]:
    """``(row, record)`` of a JSON document, streamed: an array, or the array at ``records_path``
    (dotted, e.g. ``response.data``) or under ``data`` / ``items`` of an object; an object with
    none is one record. Rows are numbered from 1 in the array."""
    parts = records_path.split(".") if records_path else None
    with open_text(p) as fh:
        js = _JsonStream(fh, p.name)
        if js.peek() == "[":
            if parts:
                raise InputError(f"--records-path {records_path}: the document is an array, not an object",
                                 file=p.name, field=records_path)
            js.pos += 1
            yield from enumerate(js.array(), start=1)
            return
        js.expect("{", "at the start")
        depth, seen = 0, {}
        while True:
            if js.peek() == "}":
                break
            key = js.value()
            if not isinstance(key, str):
                raise InputError("not valid JSON: an object key is not a string", file=p.name)
            js.expect(":", f"after the key {key!r}")
            nxt = js.peek()
            if parts and key == parts[depth] and depth < len(parts) - 1 and nxt == "{":
                js.pos += 1
                depth, seen = depth + 1, {}
                continue
            if nxt == "[" and ((parts and depth == len(parts) - 1 and key == parts[depth])
                               or (not parts and key in RECORD_KEYS)):
                js.pos += 1
                yield from enumerate(js.array(), start=1)
                return
            seen[key] = js.value()
            if js.expect(",}", f"after the value of {key!r}") == "}":
                break
        if parts:
            raise InputError(f"--records-path {records_path}: no array there; the object's keys: "
                             f"{', '.join(seen) or '(none)'}", file=p.name, field=records_path)
        yield 1, seen


def iter_records(p: Probe, records_path: str | None = None) -> Iterator[tuple[int, object]]:
    """``(row, record)`` for each record of a JSON Lines, JSON or CSV file, streamed.

    JSON Lines stream one line at a time (a line may itself be an API page of records). A JSON
    document streams a record at a time (:func:`json_records`). CSV rows stream; cells holding JSON
    objects or arrays are parsed.
    """
    if p.kind == "jsonl":
        with open_text(p) as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON ({exc.msg})", file=p.name, row=lineno) from None
                for rec in _unpage(doc, records_path):
                    yield lineno, rec
    elif p.kind == "json":
        yield from json_records(p, records_path)
    elif p.kind == "csv":
        with open_text(p) as fh:
            reader = csv.DictReader(fh, delimiter=p.delimiter)
            for rec in reader:
                yield reader.line_num, {k: cell(v) for k, v in rec.items() if k is not None}
    else:
        raise InputError(f"expected JSON, JSON Lines or CSV, found {p.kind}", file=p.name)


def dig(rec, path: str):
    """``(found, value)`` of a field of a record by name, or by a dotted path into nested objects
    (``response.body.usage.prompt_tokens``; a number indexes an array; JSON text is parsed on the way).
    A key that itself contains dots (``gen_ai.usage.input_tokens``) is matched whole first."""
    if isinstance(rec, dict) and path in rec:
        return True, rec[path]
    cur = rec
    for part in path.split("."):
        if isinstance(cur, str) and cur.strip()[:1] in "{[":
            cur = cell(cur)
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return False, None
    return True, cur


def first_json_record(p: Probe, fmt: str):
    """The file's first record as the probe's head holds it (``fmt``: ``newline_delimited`` or ``array``, read_json's
    names, as ``ecosystem.json_records_format`` gives them), or None where the head does not hold it whole."""
    if fmt == "newline_delimited":
        return p.first_record
    text = p.head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")[1:]
    try:
        return json.JSONDecoder().raw_decode(text.lstrip(" \t\r\n"))[0] if text.strip() else None
    except json.JSONDecodeError:
        return None


def wrapped_json(p: Probe) -> bool:
    """A JSON document that is an object (an API page, an export wrapped in ``{"data": [...]}``)."""
    return p.kind == "json" and p.head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")[:1] == "{"


def _text_value(v) -> str | None:
    """A record's value as the text the loader casts: a boolean as JSON spells it (a count of ``true`` is then
    "cannot read true as a whole number", as the SQL reading says), an object or a list as JSON."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), default=str)
    return str(v)


def nested_source(p: Probe, options: IngestOptions, mapping: dict[str, str]) -> Source:
    """A JSON, JSON Lines or CSV file mapped by field paths, read a record at a time.

    ``mapping`` is canonical -> path (see :func:`dig`); a top-level field named like a canonical column
    maps to it unless mapped elsewhere, and every other top-level field not mapped is kept in ``attrs``.
    Values go to the loader as text, which casts and checks them (a bad value is rejected with its row and
    field). A path found in no record is refused by name.
    """
    if p.kind not in ("json", "jsonl", "csv"):
        raise InputError(f"field paths and --records-path read JSON, JSON Lines or CSV; this file is {p.kind}",
                         file=p.name)
    columns = {"_row": pa.int64(), "_hash": pa.string(), "_legacy_hash": pa.string(),
               **{n: pa.string() for n in schema.NAMES}}
    consts = {"model": options.model, "tenant": options.tenant}
    salt = f"|{options.model or ''}|{options.tenant or ''}"

    def rows():
        found = dict.fromkeys(mapping, False)
        n = 0
        for row, rec in iter_records(p, options.records_path):
            n += 1
            if not isinstance(rec, dict):
                raise InputError(f"expected a record (an object), found {type(rec).__name__}", file=p.name, row=row)
            out = {"_row": row}
            for canon, path in mapping.items():
                ok, v = dig(rec, path)
                found[canon] |= ok
                out[canon] = _text_value(v)
            # a top-level field named like a canonical column maps to it unless the mapping names the column or
            # uses the field (as mapped_source does)
            named = [c for c in schema.NAMES if c in rec and c not in mapping and c not in mapping.values()]
            for canon in named:
                out[canon] = _text_value(rec[canon])
            for canon, const in consts.items():
                if (out.get(canon) is None or blank(out[canon])) and const is not None:
                    out[canon] = str(const)
            extra = {k: v for k, v in rec.items() if k not in mapping.values() and k not in named}
            out["attrs"] = merged_attrs(out.get("attrs"), extra)
            if missing_id(out.get("request_id")):
                # its fields that hold a value (as content_text_sql): a CSV column or a key other records add
                # changes no record's hash; a record with an empty one is also looked up by its earlier hash
                held = {k: v for k, v in rec.items() if v is not None}
                out["_hash"] = _record_hash(held, salt)
                if len(held) < len(rec):
                    out["_legacy_hash"] = _record_hash(rec, salt)
            yield out
        missing = [f"{c}={mapping[c]}" for c, ok in found.items() if not ok]
        if n and missing:
            raise InputError(f"--map {', '.join(missing)}: no record has that field", file=p.name,
                             field=mapping[next(c for c, ok in found.items() if not ok)])
        if not n:
            raise InputError("no records" + (f" at --records-path {options.records_path}"
                                             if options.records_path else ""), file=p.name)

    path, cleanup = rows_to_parquet(rows(), columns)
    cols_sql = ", ".join(quote_ident(c) for c in columns)
    return Source(f"SELECT {cols_sql} FROM read_parquet(?)", [path], cleanup=cleanup)
