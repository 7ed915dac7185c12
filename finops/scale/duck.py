"""The Spark job's output computed on the embedded DuckDB instead (``rollup --engine duckdb``): the same
folders, written with the loader's own SQL (finops.scale.spark.table_sql: the rollup and every table of
store.DERIVED) over the dataset read in place, no store needed. The baseline bench/spark_rollup.py times
Spark against, and the way to roll up a dataset that fits one machine without loading its rows.
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import duckdb

from finops import schema, sql
from finops.errors import InputError
from finops.scale.spark import (
    LOADER_DEFAULT_TENANT,
    MANIFEST_DIR,
    SparkRollupResult,
    manifest_of,
    table_sql,
    tables,
)


def canonical_sql(con: duckdb.DuckDBPyConnection, files: list[str]) -> tuple[str, list]:
    """(SELECT, parameters) of the Parquet ``files``' rows as the loader stores them: the tenant default,
    a canonical column the files lack read as null, ``batch_id`` null."""
    if not files:
        raise InputError("no .parquet files to read")
    have = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = true, "
                                      "union_by_name = true)", [files]).fetchall()}
    cols = []
    for c in schema.COLUMNS:
        name = sql.column(c.name, schema.NAMES)
        expr = f"CAST({name} AS {c.sql_type})" if name in have else f"CAST(NULL AS {c.sql_type})"
        cols.append(f"coalesce({expr}, ?) AS {name}" if name == "tenant" else f"{expr} AS {name}")
    return (f"SELECT {', '.join(cols)}, CAST(NULL AS BIGINT) AS batch_id "
            "FROM read_parquet(?, hive_partitioning = true, union_by_name = true)", [LOADER_DEFAULT_TENANT, files])


def _canonical_view(con: duckdb.DuckDBPyConnection, dataset: str) -> None:
    """A view ``requests`` over the dataset's Parquet files (:func:`canonical_sql`)."""
    if not Path(dataset).exists():
        raise InputError("no such folder", file=str(dataset))
    if not Path(dataset).is_dir():
        raise InputError("is a file: give the dataset's folder (date=YYYY-MM-DD/ folders of .parquet files)",
                         file=str(dataset))
    files = [str(p) for p in sorted(Path(dataset).rglob("*.parquet"))]
    if not files:
        raise InputError(f"{dataset} holds no .parquet files")
    text, params = canonical_sql(con, files)
    con.execute(f"CREATE OR REPLACE TEMP VIEW requests AS {sql.view_body(con, text, params, 'finops_scale')}")


def run_rollup(dataset: str, output: str, threads: int | None = None) -> SparkRollupResult:
    """Write ``dataset``'s tables and manifest under ``output`` as finops.scale.spark.run_rollup does."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    if threads:
        con.execute("SET threads = ?", [threads])
    _canonical_view(con, dataset)
    out = Path(output)
    counts = {}
    for table, _ in (*tables(), (MANIFEST_DIR, 0)):
        (out / table).mkdir(parents=True, exist_ok=True)
        for old in (out / table).iterdir():
            old.unlink()
    for table, _ in tables():
        part = str(out / table / "part-0.parquet")
        con.execute(f"COPY ({table_sql(table)}) TO ? (FORMAT parquet)", [part])
        counts[table] = con.execute("SELECT count(*) FROM read_parquet(?)", [part]).fetchall()[0][0]
    rows, lo, hi = con.execute("SELECT coalesce(sum(requests), 0), min(hour), max(hour) FROM read_parquet(?)",
                               [str(out / "rollup_hourly" / "part-0.parquet")]).fetchall()[0]
    first, last = con.execute("SELECT min(ts), max(ts) FROM requests").fetchall()[0]
    result = SparkRollupResult(str(out), uuid.uuid4().hex, int(rows), counts, lo, hi, first, last)
    manifest = manifest_of(result, dataset, f"duckdb {duckdb.__version__}")
    (out / MANIFEST_DIR / "part-0.txt").write_text(json.dumps(manifest, sort_keys=True) + "\n", encoding="utf-8")
    return result
