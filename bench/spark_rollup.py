"""The rollups and latency sketch of a partitioned Parquet dataset: Spark local against the embedded DuckDB.

    python bench/spark_rollup.py [--rows 10000000] [--days 14] [--workdir /tmp/finops-bench/spark] [--master local[*]]

* The dataset is ``bench/fleet_store.py``'s generator (canonical columns, hash-seeded), written once with
  DuckDB as ``date=YYYY-MM-DD/`` partitions and kept in the work directory for the next run.
* **duckdb** is ``python -m finops rollup --engine duckdb`` (finops.scale.duck.run_rollup): the loader's
  own SQL over the files, on every core.
* **spark** is ``--engine spark`` (finops.scale.spark.run_rollup) on ``--master``; the session's start-up
  is timed apart and not counted.
* Both outputs are checked equal (rollup rows, requests, sketch rows) before the times are printed.

Prints the times and the ratio spark / duckdb, as context: on one machine Spark is not expected to win;
it is for data beyond one machine. Asserts no time.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fleet_store import generator_sql  # noqa: E402

from finops.scale import duck, spark  # noqa: E402


def dataset(workdir: Path, rows: int, days: int) -> Path:
    path = workdir / f"dataset_{rows}_{days}d"
    if not path.exists():
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        t = time.perf_counter()
        con.execute(f"COPY (SELECT *, CAST(ts AS DATE) AS date FROM ({generator_sql(rows, days, 1)})) TO ? "
                    "(FORMAT parquet, PARTITION_BY (date))", [str(path)])
        print(f"dataset: {rows:,} rows in {days} date partitions written in {time.perf_counter() - t:.1f} s")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows in the dataset")
    ap.add_argument("--days", type=int, default=14, help="date partitions")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/finops-bench/spark"), help="where data is kept")
    ap.add_argument("--master", default="local[*]", help="Spark master")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    ds = dataset(args.workdir, args.rows, args.days)

    t = time.perf_counter()
    d = duck.run_rollup(str(ds), str(args.workdir / "out_duckdb"))
    duck_s = time.perf_counter() - t

    t = time.perf_counter()
    session = spark.session(args.master)
    start_s = time.perf_counter() - t
    t = time.perf_counter()
    s = spark.run_rollup(session, str(ds), str(args.workdir / "out_spark"))
    spark_s = time.perf_counter() - t
    session.stop()

    same = (d.rows, d.rollup_rows, d.sketch_rows) == (s.rows, s.rollup_rows, s.sketch_rows)
    print(f"rows {d.rows:,}; rollup rows {d.rollup_rows:,} / {s.rollup_rows:,}; sketch rows {d.sketch_rows:,} / "
          f"{s.sketch_rows:,}: {'the same' if same else 'DIFFERENT'}")
    print(f"duckdb: {duck_s:.1f} s   spark {args.master}: {spark_s:.1f} s (+ {start_s:.1f} s session start)   "
          f"spark / duckdb: {spark_s / duck_s:.1f}x")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
