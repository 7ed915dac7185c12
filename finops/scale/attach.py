"""Load the output of ``python -m finops rollup`` (finops.scale.spark, finops.scale.duck) into a dashboard
store: every table the loader writes at load time, no raw rows.

``rollup_hourly`` and each table of ``store.DERIVED`` get the output's rows under a new batch, ``batches``
one row (format ``spark-rollup``, its time span the dataset's first and last request, or the rollups' whole
hours for an output written before the manifest held them), the price book stays as it is and
``requests`` stays empty: the pages read what the loader would have written, and what needs raw rows says
so (store.RAW_ROWS_NEEDED) or, when the admin gave the dataset's folder (``--dataset``), reads a bounded
slice of it (finops.scale.slices). Attaching the same run twice adds nothing; an output missing a table
this finops writes, or written with another version of one, is refused, and a failed attach changes nothing.
"""
from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import duckdb

from finops import sql, store
from finops.errors import InputError
from finops.scale import slices
from finops.scale.spark import MANIFEST_DIR, OUTPUT_FORMAT, OUTPUT_VERSION, tables

#: the column types a table of the store may have, as attach-rollups casts the output's columns to
_TYPES = ("TIMESTAMP", "VARCHAR", "BIGINT", "INTEGER", "DOUBLE", "BOOLEAN", "DECIMAL(38,12)")


@dataclass(frozen=True)
class AttachResult:
    output: str
    batch_id: int
    run_id: str
    requests: int
    table_rows: dict[str, int] = field(default_factory=dict)
    already_attached: bool = False
    dataset: str | None = None

    @property
    def rollup_rows(self) -> int:
        return self.table_rows.get("rollup_hourly", 0)

    @property
    def sketch_rows(self) -> int:
        return self.table_rows.get("latency_hourly", 0)

    def as_dict(self) -> dict:
        return {"output": self.output, "batch_id": self.batch_id, "run_id": self.run_id, "requests": self.requests,
                "table_rows": dict(self.table_rows), "rollup_rows": self.rollup_rows, "sketch_rows": self.sketch_rows,
                "already_attached": self.already_attached, "dataset": self.dataset}


def _parts(directory: str, sub: str, ext: str) -> list[str]:
    files = sorted(glob.glob(os.path.join(directory, sub, f"*.{ext}")))
    if not files:
        raise InputError(f"{directory} has no {sub}/*.{ext}: not the output of "
                         "`python -m finops rollup` (or the run did not finish)")
    return files


def read_manifest(directory: str) -> dict:
    """The run's manifest, checked against this finops: every table it writes at load time must be there, of
    the version it writes (rows of other keys or measures would be summed with the wrong meaning)."""
    lines = [line for f in _parts(directory, MANIFEST_DIR, "txt")
             for line in open(f, encoding="utf-8").read().splitlines() if line.strip()]
    if len(lines) != 1:
        raise InputError(f"{directory}/{MANIFEST_DIR} holds {len(lines)} manifests, not one")
    manifest = json.loads(lines[0])
    again = "run `python -m finops rollup` again with this version of finops"
    if manifest.get("output_version") != OUTPUT_VERSION:
        raise InputError(f"{directory} was written by an older `finops rollup` (without every table the loader "
                         f"writes): {again}")
    written = manifest.get("tables") or {}
    for table, version in tables():
        if table not in written:
            raise InputError(f"{directory} holds no {table} (the job that wrote it did not know that table): {again}")
        if written[table].get("version") != version:
            raise InputError(f"{directory} was written with {table} version {written[table].get('version')}, this "
                             f"finops writes {version}: {again}")
    return manifest


def _insert_sql(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """INSERT of the output's rows of ``table`` into the store's table, each column cast to the store's type,
    batch_id the first parameter and the Parquet files the second."""
    table = sql.column(table, tuple(t for t, _ in tables()), "table")
    cols = con.execute("SELECT name, type FROM pragma_table_info(?) ORDER BY cid", [table]).fetchall()
    exprs = []
    for name, col_type in cols:
        ident = sql.quote_ident(name)
        exprs.append("?" if name == "batch_id" else f"CAST({ident} AS {sql.column(col_type, _TYPES, 'column type')})")
    return f"INSERT INTO {table} SELECT {', '.join(exprs)} FROM read_parquet(?)"


def _span(directory: str, manifest: dict, lo: datetime | None, hi: datetime | None):
    """The batch's time span: the manifest's first and last request time where it has them (each inside the
    rollups' first and last hour, else the output is refused), else the rollups' hours ``lo`` to ``hi``."""
    first, last = manifest.get("first_ts"), manifest.get("last_ts")
    if lo is None or first is None or last is None:
        return lo, hi
    try:
        first, last = datetime.fromisoformat(first), datetime.fromisoformat(last)
    except (TypeError, ValueError):
        raise InputError(f"{directory}/{MANIFEST_DIR}: first_ts {first!r} or last_ts {last!r} is not a time: "
                         "nothing attached") from None
    if first.tzinfo or last.tzinfo or not (lo <= first < lo + timedelta(hours=1)) or not (hi - timedelta(hours=1) < last <= hi):
        raise InputError(f"{directory}/{MANIFEST_DIR}: the first and last request ({first} to {last}) lie outside the "
                         f"rollups' first and last hour ({lo:%Y-%m-%d %H:00} to {hi:%Y-%m-%d %H:%M:%S}): nothing "
                         "attached")
    return first, last


def attach_rollups(con: duckdb.DuckDBPyConnection, directory: str | os.PathLike,
                   dataset: str | os.PathLike | None = None) -> AttachResult:
    """Attach one output folder to the store (one transaction). A run already attached (its run id) is
    reported, not added again. ``dataset``: the local folder of the dataset the output was computed from,
    recorded (checked first, :func:`finops.scale.slices.check_dataset`) so that what needs raw rows reads a
    bounded slice of it."""
    directory = str(directory).rstrip("/")
    manifest = read_manifest(directory)
    run_id = manifest["run_id"]
    checked = slices.check_dataset(dataset) if dataset is not None else None
    files = {table: _parts(directory, table, "parquet") for table, _ in tables()}
    seen = con.execute("SELECT batch_id FROM batches WHERE format = ? AND sha256 = ?",
                       [OUTPUT_FORMAT, run_id]).fetchall()
    if seen:
        if checked:
            slices.record_dataset(con, checked)
        return AttachResult(directory, seen[0][0], run_id, int(manifest["rows"]),
                            {t: int(v["rows"]) for t, v in manifest["tables"].items()}, True, checked)
    with store.transaction(con):
        batch_id = con.execute("SELECT coalesce(max(batch_id), 0) + 1 FROM batches").fetchall()[0][0]
        counts = {}
        for table, _ in tables():
            con.execute(_insert_sql(con, table), [batch_id, files[table]])
            counts[table] = con.execute(f"SELECT count(*) FROM {sql.column(table, tuple(files), 'table')} "
                                        "WHERE batch_id = ?", [batch_id]).fetchall()[0][0]
        requests, lo, hi = con.execute(
            "SELECT coalesce(sum(requests), 0), min(hour), max(hour) + INTERVAL 1 HOUR - INTERVAL 1 MICROSECOND "
            "FROM rollup_hourly WHERE batch_id = ?", [batch_id]).fetchall()[0]
        want = {t: int(v["rows"]) for t, v in manifest["tables"].items() if t in counts}
        if requests != manifest["rows"] or counts != want:
            differ = ", ".join(f"{t} {counts[t]:,} rows (manifest: {want[t]:,})" for t in counts if counts[t] != want[t])
            raise InputError(f"{directory} holds {requests:,} requests (manifest: {manifest['rows']:,})"
                             f"{', ' + differ if differ else ''}: a partial copy? Nothing attached")
        lo, hi = _span(directory, manifest, lo, hi)
        store.refresh_resolution(con)
        options = json.dumps({"dataset": manifest.get("dataset"), "engine": manifest.get("engine"),
                              "written_at": manifest.get("written_at"), "local_dataset": checked}, sort_keys=True)
        con.execute("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [batch_id, directory, run_id, OUTPUT_FORMAT, options, requests, 0, 0, 0,
                     datetime.now(UTC).replace(tzinfo=None), lo, hi])
        store.bump_data_version(con)
    if checked:
        slices.record_dataset(con, checked)
    return AttachResult(directory, batch_id, run_id, int(requests), counts, False, checked)
