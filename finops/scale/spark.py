"""The hourly rollups and the latency sketch of a partitioned Parquet dataset, computed on Apache Spark.

The embedded loader (finops.ingest) writes ``rollup_hourly`` and ``latency_hourly`` in DuckDB as it
loads; this job writes the same tables, bucket for bucket, from a dataset too big for one machine:
canonical rows (finops.schema) as the loader stores them, in hive-style ``date=YYYY-MM-DD/``
partitions (e.g. DuckDB's ``COPY requests TO 'ds' (FORMAT parquet, PARTITION_BY (date))``), on a
local path or any Hadoop filesystem URL Spark is configured for. ``attach-rollups`` (finops.scale.attach)
then loads the output into a dashboard store.

The definitions are the store's own (store.ROLLUP_MEASURES, store.rollup_select_sql, sql.SERVED,
sql.TPOT_MS, ...): their DuckDB text is Spark SQL with the same meaning wherever it only calls the
functions of :data:`SAME_IN_SPARK`; a measure that calls anything else needs an entry in
:data:`SPARK_REWRITES` (the job refuses to run without one rather than compute something else).

Two engine differences are handled here, both measured by tests/test_scale_spark.py:

* the loader stores a request without a tenant as tenant ``'default'`` (:data:`LOADER_DEFAULT_TENANT`);
  the job does the same before rolling up;
* Spark's ``ln`` (Java's StrictMath, fdlibm) differs from DuckDB's (the C library's) in the last bit for
  about 1 value in 100, which moves ``k = floor(ln(v) / ln(gamma))`` to the next bucket when v lies on a
  bucket edge (60 of 7,200 values at and next to the edges gamma^k). So the job computes k with Spark's
  ``ln`` wherever ``ln(v) / ln(gamma)`` is farther than :data:`EDGE_EPS` from an integer (the two
  ``ln`` differ by a few units in the last place, ~1e-13 here: far less), and for the few values
  nearer an edge computes it again with Python's ``math.log``, the C library's ``log`` that DuckDB
  calls: after a first aggregation, so the Python function sees the distinct edge values only.

pyspark is imported when a session is made: the rest of finops never needs it.
"""
from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from finops import schema, sql, store
from finops.errors import InputError

#: the tenant the loader stores for a request without one (finops.ingest.loader: ``coalesce(tenant, 'default')``)
LOADER_DEFAULT_TENANT = "default"
#: functions whose DuckDB meaning Spark SQL shares for the arguments the measures give them: a measure
#: calling only these runs in Spark as written (with CAST and ``count(*) FILTER (WHERE ...)``)
SAME_IN_SPARK = frozenset({"count", "sum", "coalesce", "greatest", "round", "nullif"})
#: measure -> (its DuckDB fragment, the Spark SQL fragment of the same meaning). DuckDB's
#: ``json_extract(attrs, '$.k') IS NOT NULL`` is true when the key is there, a JSON ``null`` too;
#: Spark's ``get_json_object`` would say null for that, so the key is looked up among the object's keys.
SPARK_REWRITES: dict[str, tuple[str, str]] = {
    "source_unpriced_requests": ("json_extract(attrs, '$.source_cost_usd') IS NOT NULL",
                                 "coalesce(array_contains(json_object_keys(attrs), 'source_cost_usd'), false)"),
}
#: how near an integer ``ln(v) / ln(gamma)`` must be for k to be computed with the C library's log
EDGE_EPS = 1e-9
#: what the job writes under its output folder, and what attach-rollups reads
ROLLUP_DIR, SKETCH_DIR, MANIFEST_DIR = "rollup_hourly", "latency_hourly", "manifest"
OUTPUT_FORMAT = "spark-rollup"

# a function call: the store's SQL writes functions in lower case, keywords (CAST, FILTER, NOT, types) in upper
_CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")


def spark_measures(measures_sql=None) -> tuple[tuple[str, str, str], ...]:
    """store.ROLLUP_MEASURES (or ``measures_sql``, triples of the same shape) as (name, type, Spark SQL): each expression as written when
    it calls only :data:`SAME_IN_SPARK`, else rewritten by :data:`SPARK_REWRITES`; cast to the store's type.

    A measure that calls another function and has no rewrite raises: the Spark side must compute every
    measure the store has, or refuse.
    """
    out = []
    for name, sql_type, expr in (store.ROLLUP_MEASURES if measures_sql is None else measures_sql):
        if name in SPARK_REWRITES:
            duck, spark = SPARK_REWRITES[name]
            if duck not in expr:
                raise NotImplementedError(f"rollup measure {name} changed ({expr}); its Spark rewrite of "
                                          f"{duck!r} no longer applies: update finops.scale.spark.SPARK_REWRITES")
            expr = expr.replace(duck, spark)
        else:
            unknown = sorted({f for f in _CALL.findall(expr) if f not in SAME_IN_SPARK})
            if unknown:
                raise NotImplementedError(f"rollup measure {name} calls {', '.join(unknown)}, which has no "
                                          "checked Spark SQL meaning: add it to finops.scale.spark.SPARK_REWRITES")
        out.append((name, sql_type, f"CAST({expr} AS {sql_type})"))
    return tuple(out)


def rollup_sql_spark(view: str = "canonical") -> str:
    """The Spark SQL of the hourly rollup over the temporary view ``view`` (store.rollup_select_sql's
    keys, without batch_id: attach-rollups gives the output its batch)."""
    view = sql.column(view, ("canonical",), "view")
    return store.rollup_select_sql(view, with_batch=False, measures_sql=spark_measures())


def sketch_ln_k(v: float) -> int:
    """The sketch bucket of a positive value computed as DuckDB computes it (store.sketch_select_sql):
    ``floor(ln(v) * (1 / ln(gamma)))`` with the C library's ``log``.

    >>> sketch_ln_k(1.0), sketch_ln_k(1.02 ** 10 * 1.0001), sketch_ln_k(0.5)
    (0, 10, -36)
    """
    return int(math.floor(math.log(v) * (1.0 / math.log(store.SKETCH_GAMMA))))


# ---------------------------------------------------------------- the job


@dataclass(frozen=True)
class SparkRollupResult:
    """What a run wrote: its output folder, the rows it read, rollup and sketch rows, the time span."""
    output: str
    run_id: str
    rows: int
    rollup_rows: int
    sketch_rows: int
    min_hour: datetime | None
    max_hour: datetime | None

    def as_dict(self) -> dict:
        return {"output": self.output, "run_id": self.run_id, "rows": self.rows, "rollup_rows": self.rollup_rows,
                "sketch_rows": self.sketch_rows, "min_hour": self.min_hour, "max_hour": self.max_hour}


def session(master: str = "local[*]", app_name: str = "finops-rollup", conf: dict | None = None):
    """A Spark session: ``local[N]``/``local[*]``, a cluster's ``spark://host:7077`` (or ``yarn``,
    ``k8s://...``), or a Spark Connect server ``sc://host:15002``. Times are UTC."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError("the Spark engine needs pyspark: pip install pyspark==4.3.0 (or the version of your "
                         "cluster's Spark)") from None
    builder = SparkSession.builder.appName(app_name)
    builder = builder.remote(master) if master.startswith("sc://") else builder.master(master)
    settings = {"spark.sql.session.timeZone": "UTC", **(conf or {})}
    if not master.startswith("sc://"):
        settings.setdefault("spark.ui.enabled", "false")
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def canonical_frame(spark, dataset: str):
    """The dataset's canonical rows as the loader would store them: ts as a UTC wall-clock timestamp,
    the loader's tenant default; a missing canonical column is read as null."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    try:
        df = spark.read.parquet(dataset)        # hive-style date=YYYY-MM-DD/ folders are partitions
    except AnalysisException as exc:            # not there, or not Parquet
        raise InputError(f"Spark cannot read {dataset} as Parquet: {str(exc).splitlines()[0]}") from None
    have = set(df.columns)
    if not {"ts", "model"} <= have:
        raise InputError(f"{dataset} has no {' or '.join(c for c in ('ts', 'model') if c not in have)} column: "
                         "not a dataset of canonical rows (finops/schema.py)")
    spark_types = {"VARCHAR": "string", "TIMESTAMP": "timestamp_ntz", "BOOLEAN": "boolean", "BIGINT": "bigint",
                   "INTEGER": "int", "DOUBLE": "double", "JSON": "string"}
    cols = []
    for c in schema.COLUMNS:
        col = F.col(c.name) if c.name in have else F.lit(None)
        col = col.cast(spark_types[c.sql_type])
        if c.name == "tenant":
            col = F.coalesce(col, F.lit(LOADER_DEFAULT_TENANT))
        cols.append(col.alias(c.name))
    return df.select(*cols)


def sketch_frame(canonical):
    """latency_hourly rows (without batch_id) of the served requests: store.sketch_select_sql in Spark."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    inv = sql.literal(1.0 / math.log(store.SKETCH_GAMMA))
    fields = ", ".join(f"'{name}', CAST({expr} AS DOUBLE)" for name, expr in store.SKETCH_FIELDS)
    src = (canonical.where(sql.SERVED)
           .selectExpr(f"{sql.time_bucket('hour')} AS hour", "coalesce(model, '') AS model",
                       f"stack({len(store.SKETCH_FIELDS)}, {fields}) AS (field, v)")
           .where("v IS NOT NULL AND NOT isnan(v)"))
    t = F.expr(f"ln(v) * {inv}")
    edge = (F.col("v") > 0) & (F.abs(t - F.rint(t)) < F.lit(EDGE_EPS))
    k0 = F.when(F.col("v") > 0, F.floor(t).cast("int")).otherwise(F.lit(store.SKETCH_ZERO_K).cast("int"))
    first = (src.select("hour", "model", "field", "v", k0.alias("k0"), F.when(edge, F.col("v")).alias("edge_v"))
             .groupBy("hour", "model", "field", "k0", "edge_v")
             .agg(F.count(F.lit(1)).alias("n"), F.min("v").alias("lo"), F.max("v").alias("hi")))
    inv_value = 1.0 / math.log(store.SKETCH_GAMMA)

    def edge_k(v, inv=inv_value):
        # sketch_ln_k, self-contained: cloudpickle ships it to executors that need not have finops
        import math
        return None if v is None else int(math.floor(math.log(v) * inv))

    ln_k = F.udf(edge_k, IntegerType())
    k = F.when(F.col("edge_v").isNotNull(), ln_k(F.col("edge_v"))).otherwise(F.col("k0"))
    return (first.withColumn("k", k).groupBy("hour", "model", "field", "k")
            .agg(F.sum("n").cast("bigint").alias("n"), F.min("lo").alias("lo"), F.max("hi").alias("hi")))


def run_rollup(spark, dataset: str, output: str) -> SparkRollupResult:
    """Read ``dataset``, write its hourly rollups, latency sketch and a manifest under ``output``
    (Parquet, replaced if there), and return what was written."""
    from pyspark.sql import functions as F

    canonical = canonical_frame(spark, dataset)
    canonical.createOrReplaceTempView("canonical")
    rollup = spark.sql(rollup_sql_spark("canonical"))
    sketch = sketch_frame(canonical)
    base = output.rstrip("/")
    rollup.write.mode("overwrite").parquet(f"{base}/{ROLLUP_DIR}")
    sketch.write.mode("overwrite").parquet(f"{base}/{SKETCH_DIR}")
    # read back what was written (small): counts and span for the manifest, no second pass over the dataset
    written = spark.read.parquet(f"{base}/{ROLLUP_DIR}")
    rows, rollup_rows, lo, hi = written.agg(F.sum("requests"), F.count(F.lit(1)), F.min("hour"),
                                            F.max("hour")).collect()[0]
    sketch_rows = spark.read.parquet(f"{base}/{SKETCH_DIR}").count()
    result = SparkRollupResult(base, uuid.uuid4().hex, int(rows or 0), int(rollup_rows), int(sketch_rows), lo, hi)
    manifest = {**result.as_dict(), "min_hour": lo and lo.isoformat(), "max_hour": hi and hi.isoformat(),
                "dataset": dataset, "format": OUTPUT_FORMAT, "rollup_version": store.ROLLUP_VERSION,
                "sketch_version": store.SKETCH_VERSION, "spark_version": spark.version,
                "written_at": datetime.now(UTC).replace(tzinfo=None).isoformat()}
    spark.createDataFrame([(json.dumps(manifest, sort_keys=True),)], "manifest string") \
        .coalesce(1).write.mode("overwrite").text(f"{base}/{MANIFEST_DIR}")
    return result
