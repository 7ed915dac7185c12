"""Reading tabular files (CSV, JSONL, JSON arrays, Parquet) as SQL, and mapping their columns.

Shared by the ``canonical`` and ``generic`` adapters and by every preset of
``generic``: one mapping mechanism, many formats.
"""
from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from finops import schema
from finops.errors import InputError
from finops.ingest.base import IngestOptions, Probe, Source, unreadable
from finops.sql import quote_ident

# the number of the first row of a CSV (after its header) or JSON file, by kind: for rows numbered
# by their position after staging (see relation_sql's ``numbered``)
FIRST_ROW = {"csv": 2, "jsonl": 1, "json": 1}


def _reader(con: duckdb.DuckDBPyConnection, p: Probe, typed: bool) -> tuple[str, list, list[str], str, str]:
    """``(table function call, params, source columns, ordinal column, _row expression)``: the path,
    the delimiter and the column types go in as parameters (a view staged from it reads them from
    variables: see :func:`finops.sql.view_body`)."""
    path = str(p.path)
    if p.kind == "parquet":
        return ("read_parquet(?, file_row_number = true)", [path], list(p.columns),
                "file_row_number", "file_row_number + 1")
    if p.kind == "csv":
        cols = list(p.columns)
        if len(set(cols)) != len(cols):
            raise InputError("the CSV header repeats a column name", file=p.name, row=1)
        spec = {c: "VARCHAR" for c in cols + ["_extra"]}
        call = ("read_csv(?, auto_detect = false, delim = ?, quote = '\"', escape = '\"', "
                "header = false, skip = 1, columns = ?, null_padding = true, strict_mode = false, "
                "compression = 'auto'" + (", parallel = false" if p.serial_csv else "") + ")")
        return call, [path, p.delimiter, spec], cols, "ordinality", "ordinality + 1"
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
            raise unreadable(exc, file=p.name, what="JSON") from None
        cols = [c for c, _ in described]
        if typed:
            # canonical names parse straight into their types (as fast as an untyped read); a value
            # that does not fit fails the read, and the caller falls back to the checked path
            types = {c: schema.TYPES.get(c, "JSON" if t == '"NULL"' else t) for c, t in described}
            call = call.replace("compression = 'auto')", "compression = 'auto', columns = ?)")
            return call, [path, fmt, types], cols, "ordinality", "ordinality"
        return call, [path, fmt], cols, "ordinality", "ordinality"
    raise InputError(f"not a table (CSV, JSON Lines, JSON array or Parquet): looks like {p.kind}", file=p.name)


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
    call, params, cols, ordinal, row = _reader(con, p, typed)
    return _rows_sql(call, ordinal, row, numbered), params, cols


def mapped_source(con: duckdb.DuckDBPyConnection, p: Probe, options: IngestOptions,
                  preset: dict[str, str] | None = None, exprs: dict[str, tuple[str, list[str]]] | None = None,
                  attrs_exprs: dict[str, str] | None = None, typed: bool = False) -> Source:
    """Map a tabular file onto canonical columns.

    ``preset`` (canonical -> source column) is applied first, then the user's
    ``options.mapping``; a source column named like a canonical one maps to it
    unless mapped elsewhere. ``exprs`` gives SQL expressions over the source
    columns for canonical columns that need a computation (a preset's unit
    conversions). Every unmapped column is kept in ``attrs``; ``attrs_exprs`` gives the
    SQL for a source column's value there (e.g. JSON text kept as JSON).
    """
    call, params, cols, ordinal, row = _reader(con, p, typed)
    mapping = dict(preset or {})
    mapping.update(options.mapping)
    if options.tenant_field:
        mapping["tenant"] = options.tenant_field
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
    for name in schema.NAMES:
        if name == "attrs":
            continue
        expr = exprs[name][0] if name in exprs else (quote_ident(mapping[name]) if name in mapping else None)
        const = {"model": options.model, "tenant": options.tenant}.get(name)
        if const is not None:
            expr = f"coalesce(CAST({expr} AS VARCHAR), CAST(? AS VARCHAR))" if expr else "CAST(? AS VARCHAR)"
            select_params.append(str(const))
        if expr:
            select.append(f"{expr} AS {name}")
    rest = [c for c in cols if c not in used and c != "attrs"]
    kept = attrs_exprs or {}
    packed = (f"to_json(struct_pack({', '.join(f'{quote_ident(c)} := {kept.get(c, quote_ident(c))}' for c in rest)}))"
              if rest else None)
    own = quote_ident(mapping.get("attrs", "attrs")) if ("attrs" in cols or "attrs" in mapping) else None
    if own and packed:
        select.append(f"json_merge_patch(CAST({own} AS JSON), {packed}) AS attrs")
    elif own or packed:
        select.append(f"{own or packed} AS attrs")
    has_ids = "request_id" in mapping or "request_id" in exprs
    # a content hash (plus the constants given) for rows without an id; CASE keeps it lazy
    content = ", ".join(f"{quote_ident(c)} := {quote_ident(c)}" for c in cols)
    id_col = exprs["request_id"][0] if "request_id" in exprs else (
        quote_ident(mapping["request_id"]) if "request_id" in mapping else "NULL")
    select.append(f"CASE WHEN {id_col} IS NULL THEN md5(CAST(struct_pack({content}) AS VARCHAR) || ?) END AS _hash")
    select_params.append(f"{options.model or ''}|{options.tenant or ''}")
    if p.kind == "csv":
        select.append("CASE WHEN _extra IS NOT NULL THEN 'fields: the row has more fields than the header' END AS _shape")
    def body(numbered: bool) -> str:
        return f"SELECT {', '.join(select)} FROM ({_rows_sql(call, ordinal, row, numbered)})"

    return Source(body(True), select_params + params, has_ids=has_ids, stage_as_view=p.kind == "parquet",
                  unnumbered_sql=body(False) if p.kind in FIRST_ROW else None, first_row=FIRST_ROW.get(p.kind, 1))


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
