"""Beyond one machine: the hourly rollups and latency sketch of a partitioned Parquet dataset computed on
Apache Spark, and attached to a dashboard store that holds no raw rows (docs/scale.md).

Modules
-------
``spark``   the Spark job: the store's rollup measures and sketch in Spark SQL (``run_rollup``, ``session``)
``attach``  the job's output into a store: rollup_hourly, latency_hourly and a batch (``attach_rollups``)

pyspark is needed by ``spark`` only, and only when a session is made.
"""
from finops.scale.attach import AttachResult, attach_rollups
from finops.scale.spark import SparkRollupResult, run_rollup, session

__all__ = ["AttachResult", "SparkRollupResult", "attach_rollups", "run_rollup", "session", "attach", "spark"]
