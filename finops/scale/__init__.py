"""Beyond one machine: every table the loader writes at load time (rollups, sketches, queue windows, ...) of a
partitioned Parquet dataset computed on Apache Spark, attached to a dashboard store that holds no raw rows,
and bounded slices of the dataset read on demand where raw rows are needed (docs/scale.md).

Modules
-------
``spark``   the Spark job: the loader's SQL of each table in Spark SQL (``run_rollup``, ``session``, ``spark_sql``)
``duck``    the same output on the embedded DuckDB (``rollup --engine duckdb``)
``attach``  an output into a store: each table under a new batch (``attach_rollups``)
``slices``  raw rows on demand: one model, a few hours of the recorded dataset (``open_slice``)

pyspark is needed by ``spark`` only, and only when a session is made.
"""
from finops.scale.attach import AttachResult, attach_rollups
from finops.scale.slices import RawSlice, open_slice
from finops.scale.spark import SparkRollupResult, run_rollup, session

__all__ = ["AttachResult", "RawSlice", "SparkRollupResult", "attach_rollups", "open_slice", "run_rollup", "session",
           "attach", "duck", "slices", "spark"]
