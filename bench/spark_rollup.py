"""Every table the loader writes at load time, of a partitioned Parquet dataset: Spark local against the embedded DuckDB.

    python bench/spark_rollup.py [--parquet /work/scale-data/fleet_10000000.parquet] [--repeat 2] [--master local[*]]

* The dataset is the Parquet file given (default: the 10M-row fleet of ``bench/fleet_store.py`` kept in
  /work/scale-data, only read), written once with DuckDB as canonical rows (the schema's types, as a store's
  export holds them) in ``date=YYYY-MM-DD/`` partitions under ``--workdir`` (/tmp), deleted at the end
  (``--keep`` keeps it).
* **duckdb** is ``python -m finops rollup --engine duckdb`` (finops.scale.duck.run_rollup): the loader's
  own SQL over the files, on every core.
* **spark** is ``--engine spark`` (finops.scale.spark.run_rollup) on ``--master``; the session's start-up
  is timed apart and not counted.
* The runs alternate (duckdb, spark, duckdb, spark, ...; the machine is shared, so a slow minute hits
  both), and the load average is printed with each.
* The two outputs are compared table by table in DuckDB (every row, every column exactly, but the double
  sums of finops/tests' APPROX list to 1e-12 relative) before the times are printed.

Prints the times and the ratio spark / duckdb (medians), as context: on one machine Spark is not expected
to win; it is for data beyond one machine. Asserts no time.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from finops import schema, sql, store  # noqa: E402
from finops.scale import attach_rollups, duck, spark  # noqa: E402

#: columns compared with a relative tolerance: sums of doubles, whose last bits depend on the order of addition
#: (the same list as tests/test_scale_spark.py's)
APPROX_COLUMNS = spark.DOUBLE_SUMS


def write_dataset(parquet: Path, path: Path) -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    have = {r[0] for r in con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(parquet)]).fetchall()}
    cols = ", ".join(f"CAST({sql.column(c.name, schema.NAMES)} AS {c.sql_type}) AS {c.name}" for c in schema.COLUMNS
                     if c.name in have)
    t = time.perf_counter()
    con.execute(f"COPY (SELECT {cols}, CAST(ts AS DATE) AS date FROM read_parquet(?)) TO ? "
                "(FORMAT parquet, PARTITION_BY (date))", [str(parquet), str(path)])
    days = len([p for p in path.iterdir() if p.name.startswith("date=")])
    print(f"dataset: {parquet.name} as {days} date partitions in {path}, written in {time.perf_counter() - t:.1f} s")


def compare(a: Path, b: Path) -> list[str]:
    """What differs between two outputs, table by table as attach-rollups stores them (empty: the same)."""
    con = store.connect(":memory:")
    attach_rollups(con, a)
    attach_rollups(con, b)            # batch 2
    problems = []
    for table, _ in spark.tables():
        cols = [r[0] for r in con.execute("SELECT name FROM pragma_table_info(?)", [table]).fetchall()]
        keys = [c for c in cols if c != "batch_id" and (table, c) not in APPROX_COLUMNS]
        exact = ", ".join(sql.quote_ident(c) for c in keys)
        name = sql.column(table, tuple(t for t, _ in spark.tables()), "table")
        n_a, n_b = (con.execute(f"SELECT count(*) FROM {name} WHERE batch_id = ?", [i]).fetchall()[0][0] for i in (1, 2))
        differ = con.execute(f"SELECT count(*) FROM (SELECT {exact} FROM {name} WHERE batch_id = 1 EXCEPT ALL "
                             f"SELECT {exact} FROM {name} WHERE batch_id = 2)", []).fetchall()[0][0]
        line = f"  {table}: {n_a:,} / {n_b:,} rows, {differ:,} differ"
        for (t, c), rtol in APPROX_COLUMNS.items():
            if t != table:
                continue
            on = " AND ".join(f"x.{sql.quote_ident(k)} IS NOT DISTINCT FROM y.{sql.quote_ident(k)}" for k in keys)
            col = sql.quote_ident(c)
            worst = con.execute(f"SELECT max(abs(x.{col} - y.{col}) / nullif(abs(x.{col}), 0)) FROM {name} x "
                                f"JOIN {name} y ON {on} WHERE x.batch_id = 1 AND y.batch_id = 2", []).fetchall()[0][0]
            line += f"; {c} within {worst or 0.0:.1e} relative"
            if (worst or 0.0) > rtol:
                problems.append(f"{table}.{c} differs by {worst:.1e} relative")
        print(line)
        if n_a != n_b or differ:
            problems.append(f"{table}: {differ:,} rows differ")
    return problems


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parquet", type=Path, default=Path("/work/scale-data/fleet_10000000.parquet"),
                    help="canonical rows (only read)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/finops-bench/spark"), help="where the dataset and "
                    "outputs are written (deleted at the end)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each engine, alternating")
    ap.add_argument("--master", default="local[*]", help="Spark master")
    ap.add_argument("--keep", action="store_true", help="keep the dataset and outputs")
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    ds = args.workdir / "dataset"
    try:
        shutil.rmtree(ds, ignore_errors=True)
        write_dataset(args.parquet, ds)
        t = time.perf_counter()
        session = spark.session(args.master)
        session.sparkContext.setLogLevel("ERROR")
        start_s = time.perf_counter() - t
        times: dict[str, list[float]] = {"duckdb": [], "spark": []}
        for i in range(args.repeat):
            for engine in ("duckdb", "spark"):
                out = str(args.workdir / f"out_{engine}")
                print(f"run {i + 1} {engine}: {load()}", flush=True)
                t = time.perf_counter()
                r = duck.run_rollup(str(ds), out) if engine == "duckdb" else spark.run_rollup(session, str(ds), out)
                times[engine].append(time.perf_counter() - t)
                print(f"run {i + 1} {engine}: {times[engine][-1]:.1f} s, {r.rows:,} requests; {load()}", flush=True)
        session.stop()
        problems = compare(args.workdir / "out_duckdb", args.workdir / "out_spark")
        d, s = statistics.median(times["duckdb"]), statistics.median(times["spark"])
        print(f"duckdb: {', '.join(f'{x:.1f}' for x in times['duckdb'])} s   spark {args.master}: "
              f"{', '.join(f'{x:.1f}' for x in times['spark'])} s (+ {start_s:.1f} s session start)   "
              f"spark / duckdb (medians): {s / d:.2f}x   "
              f"pairs: {', '.join(f'{b / a:.2f}x' for a, b in zip(times['duckdb'], times['spark'], strict=True))}")
        if problems:
            print("DIFFERENT: " + "; ".join(problems))
            sys.exit(1)
        print("the two outputs are the same")
    finally:
        if not args.keep:
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
