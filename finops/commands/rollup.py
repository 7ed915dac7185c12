"""python -m finops rollup --engine spark --input DATASET --output DIR [--master URL] [--json]"""
from __future__ import annotations

from finops import fmt
from finops.commands._common import print_json

NAME = "rollup"
HELP = ("Compute the hourly rollups, sketches and every table the loader writes at load time, of a partitioned Parquet dataset of canonical rows "
        "(date=YYYY-MM-DD/ folders) into DIR, for attach-rollups: on Spark for data beyond one machine, or on "
        "the embedded DuckDB.")


def add_arguments(p) -> None:
    p.add_argument("--engine", choices=("duckdb", "spark"), default="duckdb",
                   help="duckdb (default: this machine, embedded) or spark (pyspark; a cluster with --master)")
    p.add_argument("--input", required=True, metavar="DATASET",
                   help="the dataset's folder: a local path, or for Spark any Hadoop filesystem URL it is "
                        "configured for (hdfs://, s3a://, abfss://, gs://)")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="folder to write a folder per table (rollup_hourly/, latency_hourly/, ...) and manifest/ into "
                        "(replaced if there)")
    p.add_argument("--master", default="local[*]",
                   help="Spark master: local[*] (default), local[N], spark://host:7077, yarn, k8s://..., "
                        "or a Spark Connect server sc://host:15002 (--engine spark only)")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")


def run(args) -> int:
    if args.engine == "spark":
        from finops.scale import spark

        result = spark.run_rollup(spark.session(args.master), args.input, args.output)
    else:
        from finops.scale import duck

        result = duck.run_rollup(args.input, args.output)
    if args.json:
        print_json(result.as_dict())
    else:
        # the first and last request where the run read them, else its first and last hour
        if result.first_ts is not None and result.last_ts is not None:
            span = f", {fmt.span(result.first_ts, result.last_ts)} UTC"
        else:
            span = f", {result.min_hour:%Y-%m-%d %H:00} to {result.max_hour:%Y-%m-%d %H:00} UTC" if result.min_hour else ""
        tables = ", ".join(f"{t} {n:,}" for t, n in result.table_rows.items())
        print(f"{args.output}: {result.rows:,} requests{span} ({args.engine}); rows written: {tables}. "
              f"Next: python -m finops attach-rollups {args.output}")
    return 0
