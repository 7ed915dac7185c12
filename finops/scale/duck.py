"""The Spark job's output computed on the embedded DuckDB instead (``rollup --engine duckdb``): the same
folders, written with the loader's own SQL (store.rollup_select_sql, store.sketch_select_sql) over the
dataset read in place, no store needed. The baseline bench/spark_rollup.py times Spark against, and the
way to roll up a dataset that fits one machine without loading its rows.
"""
from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from finops import schema, sql, store
from finops.scale.spark import (
    LOADER_DEFAULT_TENANT,
    MANIFEST_DIR,
    OUTPUT_FORMAT,
    ROLLUP_DIR,
    SKETCH_DIR,
    SparkRollupResult,
)


def _canonical_view(con: duckdb.DuckDBPyConnection, dataset: str) -> None:
    """A view ``requests`` over the dataset's Parquet files as the loader stores rows (the tenant default;
    missing canonical columns null; batch_id null: attach-rollups gives the output its batch)."""
    files = [str(p) for p in sorted(Path(dataset).rglob("*.parquet"))]
    if not files:
        from finops.errors import InputError
        raise InputError(f"{dataset} holds no .parquet files")
    have = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = true)",
                                      [files]).fetchall()}
    cols = []
    for c in schema.COLUMNS:
        name = sql.column(c.name, schema.NAMES)
        expr = f"CAST({name} AS {c.sql_type})" if name in have else f"CAST(NULL AS {c.sql_type})"
        if name == "tenant":
            expr = f"coalesce({expr}, ?)"
        cols.append(f"{expr} AS {name}")
    body = sql.view_body(con, f"SELECT {', '.join(cols)}, CAST(NULL AS BIGINT) AS batch_id "
                              "FROM read_parquet(?, hive_partitioning = true)", [LOADER_DEFAULT_TENANT, files],
                         "finops_scale")
    con.execute(f"CREATE OR REPLACE TEMP VIEW requests AS {body}")


def run_rollup(dataset: str, output: str, threads: int | None = None) -> SparkRollupResult:
    """Write ``dataset``'s rollups, sketch and manifest under ``output`` as finops.scale.spark.run_rollup does."""
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    if threads:
        con.execute("SET threads = ?", [threads])
    _canonical_view(con, dataset)
    out = Path(output)
    for sub in (ROLLUP_DIR, SKETCH_DIR, MANIFEST_DIR):
        (out / sub).mkdir(parents=True, exist_ok=True)
        for old in (out / sub).iterdir():
            old.unlink()
    con.execute(f"COPY ({store.rollup_select_sql('requests', with_batch=False)}) TO ? (FORMAT parquet)",
                [str(out / ROLLUP_DIR / "part-0.parquet")])
    con.execute(f"COPY (SELECT * EXCLUDE (batch_id) FROM ({store.sketch_select_sql()})) TO ? (FORMAT parquet)",
                [str(out / SKETCH_DIR / "part-0.parquet")])
    rows, rollup_rows, lo, hi = con.execute("SELECT coalesce(sum(requests), 0), count(*), min(hour), max(hour) "
                                            "FROM read_parquet(?)", [str(out / ROLLUP_DIR / "part-0.parquet")]
                                            ).fetchall()[0]
    sketch_rows = con.execute("SELECT count(*) FROM read_parquet(?)",
                              [str(out / SKETCH_DIR / "part-0.parquet")]).fetchall()[0][0]
    result = SparkRollupResult(str(out), uuid.uuid4().hex, int(rows), int(rollup_rows), int(sketch_rows), lo, hi)
    manifest = {**result.as_dict(), "min_hour": lo and lo.isoformat(), "max_hour": hi and hi.isoformat(),
                "dataset": dataset, "format": OUTPUT_FORMAT, "rollup_version": store.ROLLUP_VERSION,
                "sketch_version": store.SKETCH_VERSION, "engine": f"duckdb {duckdb.__version__}",
                "written_at": datetime.now(UTC).replace(tzinfo=None).isoformat()}
    (out / MANIFEST_DIR / "part-0.txt").write_text(json.dumps(manifest, sort_keys=True) + "\n", encoding="utf-8")
    return result
