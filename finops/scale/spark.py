"""Every table the embedded loader writes at load time, computed on Apache Spark from a partitioned Parquet dataset.

The embedded loader (finops.ingest) writes ``rollup_hourly`` and every table of ``store.DERIVED`` (the
latency sketch, the SLA sketch per tenant and tier, the 15-minute queue windows, the cascade subsets'
rollup, and whatever is added there) in DuckDB as it loads; this job writes the same tables, bucket for
bucket, from a dataset too big for one machine: canonical rows (finops.schema) as the loader stores them,
in hive-style ``date=YYYY-MM-DD/`` partitions (e.g. DuckDB's ``COPY requests TO 'ds' (FORMAT parquet,
PARTITION_BY (date))``), on a local path or any Hadoop filesystem URL Spark is configured for.
``attach-rollups`` (finops.scale.attach) then loads the output into a dashboard store.

The tables and their SQL are the store's own, read when the job runs (:func:`tables`: ``rollup_hourly``
from store.rollup_select_sql, each of store.DERIVED from store.derived_select_sql), so a table added to
``store.DERIVED`` is written too. Their DuckDB text is Spark SQL of the same meaning wherever it calls only
the functions of :data:`SAME_IN_SPARK`; each DuckDB-only construct has a rewrite in :func:`rewrites`, and
SQL calling anything else stops the job (:func:`spark_sql`) rather than compute something else. Two tables
(the 50 slowest per hour, the coverage per column) have a Spark SQL of their own (:func:`own_spark_sql`),
used only while the store's DuckDB SQL of them is the text it was checked against (:data:`OWN_SPARK_SQL`).

The engine differences that matter, all measured by tests/test_scale_spark.py (the smaller ones are in
:func:`rewrites`):

* the loader stores a request without a tenant as tenant ``'default'`` (:data:`LOADER_DEFAULT_TENANT`);
  the job does the same before rolling up;
* ``time_bucket(INTERVAL 15 MINUTE, ts)`` has no Spark function: the hour plus whole 15 minutes (DuckDB's
  buckets of minutes start on the hour: its origin is 2000-01-03 00:00);
* the sketch bucket ``k = floor(ln(v) * (1 / ln(gamma)))``: Spark's ``ln`` (Java's StrictMath, fdlibm)
  differs from DuckDB's (the C library's) in the last bit for about 1 value in 100, which moves a value
  on a bucket edge to the next bucket (60 of 7,200 values at and next to the edges gamma^k). So the
  driver works out, with Python's ``math.log`` (the C library's ``log`` DuckDB calls), the smallest double
  of every bucket of every positive double (:func:`bucket_edges`, ~73,000 of them), and the job takes
  Spark's k and moves it by one where v lies on the other side of those edges: comparisons only, so
  executors need no C library of any kind and no Python UDF runs.

pyspark is imported when a session is made: the rest of finops never needs it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import sys
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from finops import schema, sql, store
from finops.errors import InputError

#: the tenant the loader stores for a request without one (finops.ingest.loader: ``coalesce(tenant, 'default')``)
LOADER_DEFAULT_TENANT = "default"
#: functions whose DuckDB meaning Spark SQL shares for the arguments the store's SQL gives them: SQL calling
#: only these (with CAST, CASE, ``count(*) FILTER (WHERE ...)``, ``GROUP BY ALL``, UNION ALL) runs in Spark as
#: written. ``trim``: both remove spaces only; ``round`` of a double: both round half away from zero;
#: ``/``: both divide integers as doubles.
SAME_IN_SPARK = frozenset({"count", "sum", "min", "max", "coalesce", "greatest", "least", "round", "nullif",
                           "date_trunc", "lower", "trim", "floor"})
#: the output columns that are sums of doubles, whose last bits depend on the order each engine adds them in:
#: Spark's and the embedded loader's outputs agree on these to this relative tolerance, on every other column
#: exactly (tests/test_scale_spark.py, bench/spark_rollup.py). A new table's double sum differs until named here.
DOUBLE_SUMS: dict[tuple[str, str], float] = {
    ("queue_15min", "queue_ms_sum"): 1e-12, ("segments_daily", "total_sum"): 1e-12,
    **{("segments_daily", f"{name}_sum"): 1e-12 for name, _ in store.SEGMENT_EXPRS}}
#: the name of the Spark SQL session variable holding the sketch's bucket edges (:func:`bucket_edges`)
EDGES_VARIABLE = "finops_sketch_edges"
#: what the job writes under its output folder (a folder per table, named as the table) and attach-rollups reads
MANIFEST_DIR = "manifest"
OUTPUT_FORMAT = "spark-rollup"
#: the manifest's layout: 2 since the job writes every derived table (1 wrote rollup_hourly and latency_hourly)
OUTPUT_VERSION = 2

# a function call: the store's SQL writes functions in lower case, keywords (CAST, FILTER, NOT, types) in upper
_CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")


def _k_of(v: float, inv: float) -> int:
    return math.floor(math.log(v) * inv)


#: 1 / ln(gamma) of the store's sketch, the bucket of the smallest positive double and of the largest double
SKETCH_INV = 1.0 / math.log(store.SKETCH_GAMMA)
SKETCH_KMIN = _k_of(math.ulp(0.0), SKETCH_INV)
SKETCH_KMAX = _k_of(sys.float_info.max, SKETCH_INV)
#: the sketch's fields (store.SKETCH_FIELDS: the SLA sketch's are among them), whose bucket and NaN test are rewritten
SKETCH_COLUMNS: tuple[str, ...] = tuple(name for name, _ in store.SKETCH_FIELDS)
#: every value the store's SQL buckets (store.sketch_bucket_sql): the sketch's fields and decode_rate_minute's
#: ``v`` (store.DECODE_RATE, tokens/s)
BUCKETED_COLUMNS: tuple[str, ...] = (*SKETCH_COLUMNS, "v")
#: the epoch as Spark SQL: ``ts`` is a wall-clock (TIMESTAMP_NTZ) UTC time, so micros from it need no time zone
_EPOCH = "TIMESTAMP_NTZ '1970-01-01 00:00:00'"
#: the minute buckets rewritten (sql.TIME_BUCKETS of whole minutes that divide an hour), of ts
MINUTE_GRAINS: dict[str, int] = {"5min": 5, "15min": 15}


def _sketch_k_spark(col: str) -> str:
    """Spark's k of ``col`` (clamped to the buckets of finite doubles), moved by one where the value lies
    across its bucket's edges; the edges array (1-based) holds the smallest double of bucket KMIN - 1 + i at i."""
    col = sql.column(col, BUCKETED_COLUMNS, "sketch field")
    inv, kmin, kmax = sql.literal(SKETCH_INV), sql.literal(SKETCH_KMIN), sql.literal(SKETCH_KMAX)
    k0 = f"least(greatest(CAST(floor(ln({col}) * {inv}) AS INT), {kmin}), {kmax})"
    return (f"(CASE WHEN {col} >= element_at({EDGES_VARIABLE}, {k0} - ({kmin}) + 2) THEN {k0} + 1 "
            f"WHEN {col} < element_at({EDGES_VARIABLE}, {k0} - ({kmin}) + 1) THEN {k0} - 1 ELSE {k0} END)")


@functools.lru_cache(maxsize=1)
def rewrites() -> tuple[tuple[str, str, str], ...]:
    """(what, DuckDB text, Spark SQL of the same meaning): the DuckDB-only constructs the store's SQL writes,
    each as the exact text the store writes it (so a changed definition no longer matches, and what it calls
    is refused rather than rewritten wrongly).

    * ``json_extract(attrs, '$.k') IS NOT NULL`` is true when the key is there, a JSON null too; Spark's
      get_json_object says null for that, so the key is looked up among the object's keys;
    * the sketch bucket ``CAST(floor(ln(v) * 1/ln(gamma)) AS INTEGER)``: Spark's ln is not the C library's,
      so k is moved across the edges the C library's log gives (:func:`bucket_edges`);
    * ``isnan(v)``: DuckDB's isnan(NULL) is NULL, Spark's false;
    * ``time_bucket(INTERVAL 15 MINUTE, ts)``: Spark has none; DuckDB's minute buckets start on the hour
      (its origin is 2000-01-03 00:00), so the hour plus whole 15 minutes;
    * ``AS NOT MATERIALIZED (``: a hint to DuckDB's planner; Spark inlines a CTE anyway;
    * ``epoch_us(ts)``: Spark's unix_micros takes a time-zoned timestamp; ts is a UTC wall clock
      (TIMESTAMP_NTZ), so its microseconds from the epoch are a difference of two of them, no time zone read;
    * ``unnest(range(a // w, b // w + 1))``: DuckDB's range excludes its end, Spark's sequence includes it;
      DuckDB's ``//`` of integers and Spark's ``div`` both truncate toward zero;
    * ``make_timestamp(us)``: Spark's make_timestamp takes fields, not microseconds; the epoch plus them is a
      TIMESTAMP_NTZ, as DuckDB's TIMESTAMP (timestamp_micros would be time-zoned).
    """
    out = [("json key present", "json_extract(attrs, '$.source_cost_usd') IS NOT NULL",
            "coalesce(array_contains(json_object_keys(attrs), 'source_cost_usd'), false)")]
    inv = sql.literal(SKETCH_INV)
    for col in BUCKETED_COLUMNS:
        out.append(("sketch bucket", f"CAST(floor(ln({col}) * {inv}) AS INTEGER)", _sketch_k_spark(col)))
        out.append(("isnan of null", f"isnan({col})", f"(CASE WHEN {col} IS NOT NULL THEN isnan({col}) END)"))
    for grain, minutes in MINUTE_GRAINS.items():
        m = sql.literal(minutes)
        out.append(("minute buckets", sql.time_bucket(grain, "ts"),
                    f"({sql.time_bucket('hour', 'ts')} + make_dt_interval(0, 0, CAST(floor(minute(ts) / {m}) * {m} "
                    "AS INT), 0))"))
    out.append(("CTE materialisation", "AS NOT MATERIALIZED (", "AS ("))
    w = sql.literal(store.INSERVICE_WINDOW_US)
    out.append(("epoch microseconds", "epoch_us(ts)", f"timestampdiff(MICROSECOND, {_EPOCH}, ts)"))
    out.append(("minutes a request spans", f"unnest(range(s // {w}, (e - 1) // {w} + 1))",
                f"explode(sequence(s div {w}, (e - 1) div {w}))"))
    out.append(("timestamp of microseconds", f"make_timestamp(m * {w})", f"timestampadd(MICROSECOND, m * {w}, {_EPOCH})"))
    return tuple(out)


def spark_sql(duck_sql: str, what: str = "the SQL") -> str:
    """``duck_sql`` (the store's DuckDB SQL) as Spark SQL of the same meaning: each of :func:`rewrites`
    applied, after checking that what is left calls only :data:`SAME_IN_SPARK`. Raises NotImplementedError
    naming ``what`` and the functions that have no checked Spark meaning.

    >>> spark_sql("SELECT coalesce(sum(x), 0) FROM t GROUP BY ALL")
    'SELECT coalesce(sum(x), 0) FROM t GROUP BY ALL'
    """
    rest = duck_sql
    for _, duck, _ in rewrites():
        rest = rest.replace(duck, " ")
    unknown = sorted({f for f in _CALL.findall(rest) if f not in SAME_IN_SPARK})
    if unknown:
        raise NotImplementedError(f"{what} calls {', '.join(unknown)}, which has no checked Spark SQL meaning: "
                                  "add a rewrite to finops.scale.spark.rewrites")
    for _, duck, spark in rewrites():
        duck_sql = duck_sql.replace(duck, spark)
    return duck_sql


def slowest_spark_sql() -> str:
    """slowest_hourly in Spark SQL: per hour, model and batch the :data:`store.SLOWEST_KEPT` served requests
    with the largest total_ms, ties by request_id, ranked by one window. The store's cut (DuckDB's top-n
    ``max(x, n)``) only spares DuckDB ranking every row; Spark keeps each group's top rows before it shuffles
    (its window group limit), and its ``list_min`` and top-n aggregate have no Spark function. The ranks are
    DuckDB's: total_ms descending, then request_id ascending with nulls last (DuckDB's default null order;
    Spark's puts nulls first), strings in byte order in both; NaN sorts above every number in both."""
    cols = ", ".join(sql.column(c, store.SLOWEST_COLUMNS, "slowest column") for c in store.SLOWEST_COLUMNS)
    kept = sql.literal(store.SLOWEST_KEPT)
    return f"""
WITH src AS (SELECT {sql.time_bucket('hour')} AS hour, coalesce(model, '') AS _model, batch_id, {cols}
             FROM requests WHERE {sql.SERVED} AND total_ms IS NOT NULL),
top AS (SELECT *, row_number() OVER (PARTITION BY hour, _model, batch_id
                                     ORDER BY total_ms DESC NULLS LAST, request_id ASC NULLS LAST) AS _rank FROM src)
SELECT hour, batch_id, {cols} FROM top WHERE _rank <= {kept}"""


def coverage_spark_sql() -> str:
    """coverage_hourly in Spark SQL: per hour, model, tenant, tier and batch, each canonical column's count
    over the served requests, one row per column carried (n > 0). DuckDB's ``UNPIVOT (...) ON cols INTO NAME
    field VALUE n`` is Spark's ``UNPIVOT (n FOR field IN (cols))`` after the subquery, and its identifiers
    are quoted with backticks (a double-quoted name is a string in Spark SQL: ``count("ts")`` would count rows)."""
    names = [f"`{sql.column(n, schema.NAMES, 'canonical column')}`" for n in schema.NAMES]
    counts = ", ".join(f"count({n}) AS {n}" for n in names)
    return ("SELECT _hour AS hour, _model AS model, _tenant AS tenant, _sla_tier AS sla_tier, _batch AS batch_id, "
            f"field, n FROM (SELECT {sql.time_bucket('hour')} AS _hour, coalesce(model, '') AS _model, "
            "coalesce(tenant, '') AS _tenant, coalesce(sla_tier, '') AS _sla_tier, batch_id AS _batch, "
            f"{counts} FROM requests WHERE {sql.SERVED} GROUP BY ALL) AS c "
            f"UNPIVOT EXCLUDE NULLS (n FOR field IN ({', '.join(names)})) WHERE n > 0")


def fingerprint(text: str) -> str:
    """A short digest of a table's DuckDB SQL: what a Spark SQL of its own (:data:`OWN_SPARK_SQL`) was
    checked against."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


#: the tables whose DuckDB SQL is not rewritten text by text but has a Spark SQL of its own, written beside it
#: (:func:`own_spark_sql`): table -> the fingerprint of the store's DuckDB SQL it was checked against. A changed
#: DuckDB SQL (another definition, another canonical column) stops the job until its Spark SQL is checked
#: again (tests/test_scale_spark.py compares the two tables) and the new fingerprint recorded here.
OWN_SPARK_SQL: dict[str, str] = {
    "slowest_hourly": "b99098e82eae49bd",
    "coverage_hourly": "b49279d4c2a8bafd",
}


def own_spark_sql(table: str) -> str:
    """The Spark SQL of its own of a table of :data:`OWN_SPARK_SQL`."""
    if table == "slowest_hourly":
        return slowest_spark_sql()
    if table == "coverage_hourly":
        return coverage_spark_sql()
    raise ValueError(f"{table} has no Spark SQL of its own")


def tables() -> tuple[tuple[str, int], ...]:
    """(table, version) of every table the loader writes at load time, which the job writes: ``rollup_hourly``
    and store.DERIVED's, read now (a table added to DERIVED is in it)."""
    return (("rollup_hourly", store.ROLLUP_VERSION), *((t, version) for t, _, _, version in store.DERIVED))


def table_sql(table: str) -> str:
    """The loader's DuckDB SELECT of ``table`` over all of ``requests`` (with its batch_id column)."""
    if table == "rollup_hourly":
        return store.rollup_select_sql("requests", measures_sql=store.ROLLUP_MEASURES)
    return store.derived_select_sql(table)


def table_spark_sql(table: str) -> str:
    """:func:`table_sql` in Spark SQL, over a view ``requests`` of canonical rows: rewritten (:func:`spark_sql`),
    or the table's own (:data:`OWN_SPARK_SQL`) if the DuckDB SQL is the one it was checked against. Raises
    NotImplementedError naming the table and the function otherwise."""
    if table in OWN_SPARK_SQL:
        if fingerprint(table_sql(table)) != OWN_SPARK_SQL[table]:
            raise NotImplementedError(
                f"the loader's SQL of {table} (fingerprint {fingerprint(table_sql(table))}) is not the one its Spark "
                f"SQL of its own (finops.scale.spark.own_spark_sql) was checked against ({OWN_SPARK_SQL[table]}): "
                "check that Spark SQL against the store's and record the new fingerprint in OWN_SPARK_SQL")
        return own_spark_sql(table)
    return spark_sql(table_sql(table), f"the loader's SQL of {table}")


@functools.lru_cache(maxsize=4)
def bucket_edges(inv: float) -> tuple[int, tuple[float, ...]]:
    """(kmin, edges): the bucket ``floor(ln(v) * inv)`` of every positive double v, computed as DuckDB does
    (the C library's ``log``), as the smallest double of each bucket: ``edges[i]`` (0-based) is the smallest
    v whose k is at least ``kmin + i``, ``kmin`` the bucket of the smallest positive double, the last edge
    +inf. So k(v) = kmin + i for edges[i] <= v < edges[i + 1] (log is monotonic), and a k off by one is
    corrected by two comparisons.

    >>> kmin, e = bucket_edges(1 / math.log(1.02)); e[-kmin] <= 1.0 < e[1 - kmin]   # bucket 0 holds 1.0
    True
    """
    tiny, big = math.ulp(0.0), sys.float_info.max
    kmin, kmax = _k_of(tiny, inv), _k_of(big, inv)
    edges = [tiny]
    for k in range(kmin + 1, kmax + 1):
        v = min(max(math.exp(k / inv), tiny), big)
        while v > tiny and _k_of(v, inv) >= k:
            v = math.nextafter(v, 0.0)
        while _k_of(v, inv) < k:
            v = math.nextafter(v, math.inf)
        edges.append(v)
    edges.append(math.inf)
    return kmin, tuple(edges)


def sketch_ln_k(v: float) -> int:
    """The sketch bucket of a positive value computed as DuckDB computes it (store.sketch_select_sql):
    ``floor(ln(v) * (1 / ln(gamma)))`` with the C library's ``log``.

    >>> sketch_ln_k(1.0), sketch_ln_k(1.02 ** 10 * 1.0001), sketch_ln_k(0.5)
    (0, 10, -36)
    """
    return _k_of(v, SKETCH_INV)


# ---------------------------------------------------------------- the job


@dataclass(frozen=True)
class SparkRollupResult:
    """What a run wrote: its output folder, the rows it read, each table's rows, the time span: its first and
    last hour, and its first and last request's time (what a store records as a batch's span, so a store of
    attached rollups rates an hour the data starts or ends inside over the part of it the data covers, as the
    embedded store does)."""
    output: str
    run_id: str
    rows: int
    table_rows: dict[str, int]
    min_hour: datetime | None
    max_hour: datetime | None
    first_ts: datetime | None = None
    last_ts: datetime | None = None

    @property
    def rollup_rows(self) -> int:
        return self.table_rows["rollup_hourly"]

    @property
    def sketch_rows(self) -> int:
        return self.table_rows["latency_hourly"]

    def as_dict(self) -> dict:
        return {"output": self.output, "run_id": self.run_id, "rows": self.rows, "table_rows": dict(self.table_rows),
                "rollup_rows": self.rollup_rows, "sketch_rows": self.sketch_rows, "min_hour": self.min_hour,
                "max_hour": self.max_hour, "first_ts": self.first_ts, "last_ts": self.last_ts}


def manifest_of(result: SparkRollupResult, dataset: str, engine: str) -> dict:
    """The manifest line both engines write: what attach-rollups checks before it attaches anything."""
    versions = dict(tables())
    return {"output": result.output, "run_id": result.run_id, "rows": result.rows,
            "min_hour": result.min_hour and result.min_hour.isoformat(),
            "max_hour": result.max_hour and result.max_hour.isoformat(),
            "first_ts": result.first_ts and result.first_ts.isoformat(),
            "last_ts": result.last_ts and result.last_ts.isoformat(), "dataset": dataset, "format": OUTPUT_FORMAT,
            "output_version": OUTPUT_VERSION, "sketch_version": store.SKETCH_VERSION, "engine": engine,
            "rollup_version": store.ROLLUP_VERSION,
            "tables": {t: {"rows": n, "version": versions[t]} for t, n in result.table_rows.items()},
            "written_at": datetime.now(UTC).replace(tzinfo=None).isoformat()}


def session(master: str = "local[*]", app_name: str = "finops-rollup", conf: dict | None = None):
    """A Spark session: ``local[N]``/``local[*]``, a cluster's ``spark://host:7077`` (or ``yarn``,
    ``k8s://...``), or a Spark Connect server ``sc://host:15002``. Times are UTC."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise InputError("the Spark engine needs pyspark: pip install pyspark==4.3.0 (or the version of your "
                         "cluster's Spark, 4.0 or later)") from None
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
    the loader's tenant default, a null batch_id; a missing canonical column is read as null."""
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
    return df.select(*cols, F.lit(None).cast("bigint").alias("batch_id"))


def _declare_edges(spark) -> None:
    """The sketch's bucket edges (:func:`bucket_edges`) as the session variable :data:`EDGES_VARIABLE`. Sent
    as Arrow (the JVM reads it; no Python worker runs on an executor), then ordered by index."""
    import pandas as pd

    _, edges = bucket_edges(SKETCH_INV)
    frame = pd.DataFrame({"i": range(len(edges)), "v": edges})
    arrow = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(arrow, "false")
    spark.conf.set(arrow, "true")
    try:
        spark.createDataFrame(frame, "i int, v double").createOrReplaceTempView("finops_edges")
    finally:
        spark.conf.set(arrow, before)
    spark.sql(f"DECLARE OR REPLACE VARIABLE {EDGES_VARIABLE} ARRAY<DOUBLE>")
    spark.sql(f"SET VAR {EDGES_VARIABLE} = (SELECT transform(array_sort(collect_list(struct(i, v))), e -> e.v) "
              "FROM finops_edges)")


def run_rollup(spark, dataset: str, output: str) -> SparkRollupResult:
    """Read ``dataset``, write every table of :func:`tables` (a folder each) and a manifest under ``output``
    (Parquet, replaced if there), and return what was written."""
    from pyspark.sql import functions as F

    for table, _ in tables():                   # refuse before reading anything
        table_spark_sql(table)
    canonical_frame(spark, dataset).createOrReplaceTempView("requests")
    _declare_edges(spark)
    base = output.rstrip("/")
    counts = {}
    for table, _ in tables():
        spark.sql(table_spark_sql(table)).write.mode("overwrite").parquet(f"{base}/{table}")
        counts[table] = spark.read.parquet(f"{base}/{table}").count()
    # read back what was written (small): requests and hours for the manifest; the first and last request's
    # time read from the dataset's ts column alone
    rows, lo, hi = spark.read.parquet(f"{base}/rollup_hourly").agg(
        F.sum("requests"), F.min("hour"), F.max("hour")).collect()[0]
    first, last = spark.sql("SELECT min(ts), max(ts) FROM requests").collect()[0]
    result = SparkRollupResult(base, uuid.uuid4().hex, int(rows or 0), counts, lo, hi, first, last)
    manifest = manifest_of(result, dataset, f"spark {spark.version}")
    # a bound parameter, not a local DataFrame: no Python worker runs anywhere in the job
    spark.sql("SELECT :manifest AS manifest", args={"manifest": json.dumps(manifest, sort_keys=True)}) \
        .coalesce(1).write.mode("overwrite").text(f"{base}/{MANIFEST_DIR}")
    return result
