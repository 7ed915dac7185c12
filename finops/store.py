"""The request store: one DuckDB file holding requests, load batches, hourly rollups and the price book.

Tables
------
``requests``       the canonical columns (finops.schema) plus ``batch_id``.
                   No PRIMARY KEY: a key index makes bulk loads several times slower
                   (bench/ingest.py measures it); uniqueness of ``request_id`` is kept
                   by the loader, which inserts only keys not stored yet.
``batches``        one row per load: file, sha256, format, row counts, time.
``rollup_hourly``  hour x model x tenant x route x sla_tier x status x batch_id sums,
                   written at each load, so spend views never scan raw rows.
``latency_hourly`` hour x model x batch_id x field x bucket counts of the served requests' latency
                   fields (a log-bucket sketch, see :data:`SKETCH_GAMMA`), written at each load,
                   so the latency percentiles of whole hours never sort raw rows.
``latency_sla_hourly`` the same per tenant and SLA tier too, for the SLA latencies (the alert rules).
``queue_15min``    served requests with a queue_ms and its sum per 15 min x model x tenant x tier
                   (the queue-length alert).
``rollup_cascade_hourly`` the rollup of the escalated attempts and of the cascade's requests (the
                   cascade summary).
``slowest_hourly`` the 50 slowest served requests per hour x model x batch_id (the slowest requests).
``coverage_hourly`` per hour x model x tenant x tier x batch_id, how many served requests carry each column.
``inservice_minute`` per minute x model x batch_id, the served requests' time in service within the minute
                   (whole microseconds): the mean number in service, for decode speed against concurrency.
``decode_rate_minute`` the sketch of the decode speed (tokens/s) per minute of arrival x model x batch_id.
``length_latency_daily`` the total_ms sketch per day x model x batch_id x length field x power-of-two bucket.
``segments_daily`` per day x model x batch_id x total_ms sketch bucket: counts and sums of total_ms and of
                   every segment (the segments at a percentile). All of these are :data:`DERIVED`: written
                   at each load, additive over loads (a load's rows are its own, deleted with it). What reads
                   raw rows reads at most :data:`RAW_ROW_BUDGET` of them at once (:func:`raw_scope`).
``prices``         the price book (seeded from data/prices.csv; editable).
``fleet_schedule`` the periods each self-hosted fleet ran: from, to (open-ended allowed), replicas, GPUs
                   per replica, $ per GPU-hour, GPU type, site (:mod:`finops.spend.fleets`).
``fleet_reservations`` replicas (weights) each tenant reserved of a self-hosted fleet, for the
                   "spread by reservations" idle policy.
``budgets``        monthly budget per tenant.
``settings``       small key/value pairs (e.g. readiness ticks, alert delivery targets).
``alert_states``   an alert a person acknowledged or snoozed: its identity (finops.ops.alerts.alert_id and
                   the rule, model, tenant, window start it is made of) and window end, who, when, until, a note.
``alert_deliveries`` every attempt to deliver an alert (or a digest, or a test) to a target: when, the
                   outcome (sent / failed) and why, so an alert is sent once and a failure is retried.
``engine_metrics`` the inference engine's own series, one row per sample per scrape (vLLM's ``/metrics``:
                   ts, replica, model, metric, labels as JSON, value; :mod:`finops.ingest.engine`).
``data_version``   one counter that every write bumps (:func:`bump_data_version`): the dashboard's
                   cache key, so a load, a deletion, a price, budget or setting edit shows at once.

One connection per process; callers take ``con.cursor()`` per thread.
"""
from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from finops import access, catalogue, remote, schema, sql
from finops.errors import InputError
from finops.filters import Filters

log = logging.getLogger("finops")
WRITE_LOCK = threading.RLock()     # one write transaction at a time in this process (see transaction)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB = ROOT / "data" / "finops.duckdb"

# Rollup measures: name -> SQL aggregate over canonical rows. Table-driven so the
# rollup written at load time and the on-the-fly one over raw rows are the same code.
# "busy_ms" is the self-hosted allocation weight: a request's time on a slot (sql.BUSY_MS).
_PRICED = f"cost_usd IS NULL AND {sql.SERVED}"     # tokens of rows without a recorded cost, not cache hits
# the token classes a price applies to (schema: input_tokens counts cache reads and writes)
_UNCACHED = ("greatest(coalesce(input_tokens, 0) - coalesce(cached_input_tokens, 0) - coalesce(cache_write_tokens, 0)"
             " - coalesce(cache_write_1h_tokens, 0), 0)")
_TOKEN_CLASSES: tuple[tuple[str, str], ...] = (
    ("uncached_input_tokens", _UNCACHED), ("cached_input_tokens", "coalesce(cached_input_tokens, 0)"),
    ("cache_write_tokens", "coalesce(cache_write_tokens, 0)"),
    ("cache_write_1h_tokens", "coalesce(cache_write_1h_tokens, 0)"), ("output_tokens", "coalesce(output_tokens, 0)"),
)
ROLLUP_MEASURES: tuple[tuple[str, str, str], ...] = (
    ("requests", "BIGINT", "count(*)"),
    ("input_tokens", "BIGINT", "coalesce(sum(input_tokens), 0)"),
    ("output_tokens", "BIGINT", "coalesce(sum(output_tokens), 0)"),
    ("cached_input_tokens", "BIGINT", "coalesce(sum(cached_input_tokens), 0)"),
    ("cache_write_tokens", "BIGINT", "coalesce(sum(cache_write_tokens), 0)"),
    ("cache_write_1h_tokens", "BIGINT", "coalesce(sum(cache_write_1h_tokens), 0)"),
    ("reasoning_tokens", "BIGINT", "coalesce(sum(reasoning_tokens), 0)"),
    ("recorded_requests", "BIGINT", "count(cost_usd)"),
    # money is summed exactly: each request's cost as a decimal of 12 places, so one store gives one
    # figure to the last digit whatever order the rows are added in
    ("recorded_cost_usd", "DECIMAL(38,12)", "coalesce(sum(CAST(cost_usd AS DECIMAL(38,12))), 0)"),
    # requests whose source wrote a cost of 0 though they had tokens (it could not price them): the
    # adapter leaves cost_usd empty so the price book or catalogue prices them, and keeps the 0 here
    ("source_unpriced_requests", "BIGINT",
     "count(*) FILTER (WHERE cost_usd IS NULL AND json_extract(attrs, '$.source_cost_usd') IS NOT NULL)"),
    # tokens of rows whose cost is not recorded and that are not cache hits: priced from the book
    ("priced_requests", "BIGINT", f"count(*) FILTER (WHERE {_PRICED})"),
    *[(f"priced_{name}", "BIGINT", f"coalesce(sum({expr}) FILTER (WHERE {_PRICED}), 0)")
      for name, expr in _TOKEN_CLASSES],
    # the same classes of the served rows whose cost the source recorded: what the list prices say they cost
    # (a cache hit reached no model: its list cost is 0, whatever the source wrote for it)
    ("recorded_served_requests", "BIGINT", f"count(*) FILTER (WHERE cost_usd IS NOT NULL AND {sql.SERVED})"),
    *[(f"recorded_{name}", "BIGINT", f"coalesce(sum({expr}) FILTER (WHERE cost_usd IS NOT NULL AND {sql.SERVED}), 0)")
      for name, expr in _TOKEN_CLASSES],
    ("cache_hits", "BIGINT", f"count(*) FILTER (WHERE {sql.CACHE_HIT})"),
    ("cache_uncached_input_tokens", "BIGINT", f"coalesce(sum({_UNCACHED}) FILTER (WHERE {sql.CACHE_HIT}), 0)"),
    ("cache_cached_input_tokens", "BIGINT",
     f"coalesce(sum(coalesce(cached_input_tokens, 0)) FILTER (WHERE {sql.CACHE_HIT}), 0)"),
    ("cache_output_tokens", "BIGINT", f"coalesce(sum(coalesce(output_tokens, 0)) FILTER (WHERE {sql.CACHE_HIT}), 0)"),
    ("escalations", "BIGINT", "count(*) FILTER (WHERE escalated)"),
    ("cascade_requests", "BIGINT", "count(*) FILTER (WHERE escalated IS NOT NULL AND strategy = 'cascade')"),
    ("errors", "BIGINT", f"count(*) FILTER (WHERE NOT ({sql.OK}))"),
    # summed as whole microseconds: exact, so the GPU allocation that divides by it is the same every run
    ("busy_ms", "DOUBLE",
     f"coalesce(sum(CAST(round({sql.BUSY_MS} * 1000) AS BIGINT)) FILTER (WHERE {sql.SERVED}), 0) / 1000.0"),
    # the part of busy_ms spent on the prompt (prefill) rather than the answer (decode): the split of a
    # self-hosted fleet's cost into input and output (sql.PREFILL_SHARE), and the busy time whose split
    # is the documented estimate from token counts rather than measured
    ("busy_prefill_ms", "DOUBLE",
     f"coalesce(sum(CAST(round({sql.BUSY_MS} * {sql.PREFILL_SHARE} * 1000) AS BIGINT)) FILTER (WHERE {sql.SERVED}), 0)"
     " / 1000.0"),
    ("busy_split_estimated_ms", "DOUBLE",
     f"coalesce(sum(CAST(round({sql.BUSY_MS} * 1000) AS BIGINT)) FILTER (WHERE {sql.SERVED} AND NOT "
     f"{sql.PREFILL_SPLIT_MEASURED}), 0) / 1000.0"),
    ("total_ms_sum", "DOUBLE", "coalesce(sum(CAST(round(total_ms * 1000) AS BIGINT)), 0) / 1000.0"),
    ("total_ms_count", "BIGINT", "count(total_ms)"),
)


ROLLUP_VERSION = 4          # bump when the rollup's keys or measures change: a store rebuilds them on open


def rollup_select_sql(source: str, where: str = "TRUE", with_batch: bool = True,
                      measures_sql: tuple[tuple[str, str, str], ...] = ROLLUP_MEASURES,
                      extra_keys_sql: tuple[tuple[str, str], ...] = ()) -> str:
    """SELECT producing rollup rows from canonical rows in ``source``.

    ``measures_sql`` is :data:`ROLLUP_MEASURES` or the same measures written in another engine's SQL
    (finops.scale.spark: Spark SQL), so the keys are written once for both engines. ``extra_keys_sql``:
    (name, SQL expression) keys after ``batch_id`` (:data:`SUBSET_KEYS`)."""
    dims = ", ".join((sql.SERVICE_TIER if d == "service_tier" else f"coalesce({d}, '')") + f" AS {d}"
                     for d in sql.ROLLUP_DIMS)
    measures = ", ".join(f"{expr} AS {name}" for name, _, expr in measures_sql)
    batch = (", batch_id" if with_batch else "") + "".join(f", {expr} AS {name}" for name, expr in extra_keys_sql)
    dims += f", {sql.input_band()} AS input_band"
    group = ", ".join(str(i) for i in range(1, len(sql.ROLLUP_DIMS) + 3 + (1 if with_batch else 0)
                                            + len(extra_keys_sql)))
    return (f"SELECT {sql.time_bucket('hour')} AS hour, {dims}{batch}, {measures} "
            f"FROM {source} WHERE {where} GROUP BY {group}")


# Latency sketch: per hour, model and batch, each served request's value of each field is counted in
# the bucket [SKETCH_GAMMA^k, SKETCH_GAMMA^(k+1)) with its min and max, zero and below in bucket
# SKETCH_ZERO_K. Any percentile read from it is within SKETCH_ALPHA (relative) of the exact one.
SKETCH_VERSION = 1
SKETCH_GAMMA = 1.02
SKETCH_ALPHA = (SKETCH_GAMMA - 1) / (SKETCH_GAMMA + 1)      # 0.0099: "within 1%"
SKETCH_ZERO_K = -(2 ** 31)
SKETCH_FIELDS: tuple[tuple[str, str], ...] = (
    ("total_ms", "total_ms"), ("queue_ms", "queue_ms"), ("service_ms", "service_ms"), ("ttft_ms", "ttft_ms"),
    ("tpot_ms", sql.TPOT_MS),
)


def sketch_select_sql(where: str = "TRUE", keys: tuple[str, ...] = (),
                      fields_sql: tuple[tuple[str, str], ...] = SKETCH_FIELDS) -> str:
    """SELECT producing latency_hourly rows from the served requests matching ``where``.

    ``keys``: more key columns after ``model`` (``tenant``, ``sla_tier``: :data:`SLA_SKETCH_KEYS`), ``''``
    for none; ``fields_sql`` the fields sketched, (name, SQL expression) pairs. One aggregate per field, UNION ALL: half the time of one
    aggregate over the fields unnested into rows (bench: 1.2 s against 2.5 s for 10M requests)."""
    inv = sql.literal(1.0 / math.log(SKETCH_GAMMA))
    keys = tuple(sql.column(k, SLA_SKETCH_KEYS, "sketch key") for k in keys)
    key_cols = "".join(f"{k}, " for k in keys)
    key_exprs = "".join(f"coalesce({k}, '') AS {k}, " for k in keys)
    cols = ", ".join(f"CAST({expr} AS DOUBLE) AS {name}" for name, expr in fields_sql)
    parts = " UNION ALL ".join(f"""
SELECT hour, model, {key_cols}batch_id, '{name}' AS field,
       CASE WHEN {name} > 0 THEN CAST(floor(ln({name}) * {inv}) AS INTEGER) ELSE {SKETCH_ZERO_K} END AS k,
       count(*) AS n, min({name}) AS lo, max({name}) AS hi
FROM src WHERE {name} IS NOT NULL AND NOT isnan({name}) GROUP BY ALL""" for name, _ in fields_sql)
    # NOT MATERIALIZED: each part scans the table again rather than holding every row in memory
    return (f"WITH src AS NOT MATERIALIZED (SELECT {sql.time_bucket('hour')} AS hour, coalesce(model, '') AS model, "
            f"{key_exprs}batch_id, {cols} FROM requests WHERE ({where}) AND {sql.SERVED}) {parts}")


# The SLA sketch: the same buckets per hour, model, tenant and SLA tier, of the latencies an SLA may be on
# (sql.SLA_COLUMNS), so the alert rule "P99 over the tier's SLA" per model x tenant x tier x hour (or day)
# reads no raw row. Rows: hour, model, tenant, sla_tier ('' none), batch_id, field, k, n, lo, hi.
SLA_SKETCH_KEYS: tuple[str, ...] = ("tenant", "sla_tier")
SLA_SKETCH_FIELDS: tuple[tuple[str, str], ...] = tuple((n, e) for n, e in SKETCH_FIELDS if n in sql.SLA_COLUMNS)


def sla_sketch_select_sql(where: str = "TRUE") -> str:
    """SELECT producing latency_sla_hourly rows from the served requests matching ``where``."""
    return sketch_select_sql(where, SLA_SKETCH_KEYS, SLA_SKETCH_FIELDS)


# Queue windows: per 15 minutes, model, tenant and SLA tier, the served requests that logged a queue_ms and
# the sum of it, so the queue-length alert (Little's law, per 15 min, hour or day) reads no raw row.
QUEUE_WINDOW = "15min"


def queue_windows_select_sql(where: str = "TRUE") -> str:
    """SELECT producing queue_15min rows from the requests matching ``where``."""
    return (f"SELECT {sql.time_bucket(QUEUE_WINDOW)} AS window_start, coalesce(model, '') AS model, "
            "coalesce(tenant, '') AS tenant, coalesce(sla_tier, '') AS sla_tier, batch_id, count(*) AS requests, "
            f"sum(queue_ms) AS queue_ms_sum FROM requests WHERE ({where}) AND {sql.SERVED} AND queue_ms IS NOT NULL "
            "GROUP BY ALL")


def sketch_bucket_sql(expr: str) -> str:
    """The sketch bucket ``k`` of the value ``expr`` (:data:`SKETCH_GAMMA`; :data:`SKETCH_ZERO_K` for zero and below)."""
    inv = sql.literal(1.0 / math.log(SKETCH_GAMMA))
    return f"CASE WHEN {expr} > 0 THEN CAST(floor(ln({expr}) * {inv}) AS INTEGER) ELSE {SKETCH_ZERO_K} END"


# In service per minute: per minute, model and batch, the time the served requests spent in service in it
# (each request's [ts + route_ms + queue_ms, ts + total_ms] cut at the minute edges, as whole microseconds so
# that sums are exact), so the mean number in service over a minute (busy_us / 60e6) reads no raw row.
# Additive over loads: the minutes of a request that started before another load's are its own rows.
INSERVICE_WINDOW_US = 60_000_000
_SERVICE_START_US = "(epoch_us(ts) + CAST(round((coalesce(route_ms, 0) + coalesce(queue_ms, 0)) * 1000) AS BIGINT))"
_SERVICE_END_US = "(epoch_us(ts) + CAST(round(total_ms * 1000) AS BIGINT))"


def inservice_select_sql(where: str = "TRUE") -> str:
    """SELECT producing inservice_minute rows from the requests matching ``where``."""
    w = str(INSERVICE_WINDOW_US)
    return f"""
WITH r AS (SELECT coalesce(model, '') AS model, batch_id, {_SERVICE_START_US} AS s, {_SERVICE_END_US} AS e
           FROM requests WHERE ({where}) AND {sql.SERVED} AND total_ms IS NOT NULL),
m AS (SELECT model, batch_id, s, e, unnest(range(s // {w}, (e - 1) // {w} + 1)) AS m FROM r WHERE e > s)
SELECT make_timestamp(m * {w}) AS window_start, model, batch_id,
       CAST(sum(least(e, (m + 1) * {w}) - greatest(s, m * {w})) AS BIGINT) AS busy_us
FROM m GROUP BY ALL"""


#: a request's decode speed, tokens per second: its output tokens over its decode time (sql.DECODE_MS)
DECODE_RATE = f"output_tokens / nullif({sql.DECODE_MS}, 0) * 1000"


def decode_rate_select_sql(where: str = "TRUE") -> str:
    """SELECT producing decode_rate_minute rows (the sketch of :data:`DECODE_RATE` per minute of arrival, model
    and batch: k, n, lo, hi as in latency_hourly) from the requests matching ``where``."""
    return f"""
WITH r AS (SELECT {sql.time_bucket('minute')} AS window_start, coalesce(model, '') AS model, batch_id,
                  CAST({DECODE_RATE} AS DOUBLE) AS v
           FROM requests WHERE ({where}) AND {sql.SERVED} AND total_ms IS NOT NULL)
SELECT window_start, model, batch_id, {sketch_bucket_sql('v')} AS k, count(*) AS n, min(v) AS lo, max(v) AS hi
FROM r WHERE v > 0 AND NOT isnan(v) GROUP BY ALL"""


def length_bucket_sql(length: str) -> str:
    """The lower edge of ``length``'s power-of-two bucket: 0 below 32, then 32, 64, 128, ..."""
    length = sql.column(length, sql.LENGTH_COLUMNS, "length field")
    # by comparisons: cheaper per row than pow(2, floor(log2(x)))
    steps = " ".join(f"WHEN {length} < {2 ** (i + 1)} THEN {2 ** i}" for i in range(5, 62))
    return f"CASE WHEN {length} < 32 THEN 0 {steps} END"


def length_latency_select_sql(where: str = "TRUE") -> str:
    """SELECT producing length_latency_daily rows: per day, model, batch, length field and power-of-two bucket
    of it, the sketch of the served requests' total_ms (k, n, lo, hi), for latency by prompt and output length.
    One part per length field, UNION ALL, over the requests scanned again by each (NOT MATERIALIZED)."""
    lengths = ", ".join(sql.LENGTH_COLUMNS)
    parts = " UNION ALL ".join(f"""
SELECT day, model, batch_id, '{length}' AS length, {length_bucket_sql(length)} AS bucket_lo, k, count(*) AS n,
       min(total_ms) AS lo, max(total_ms) AS hi
FROM src WHERE {length} IS NOT NULL GROUP BY ALL""" for length in sql.LENGTH_COLUMNS)
    return (f"WITH src AS NOT MATERIALIZED (SELECT {sql.time_bucket('day')} AS day, coalesce(model, '') AS model, "
            f"batch_id, {lengths}, total_ms, {sketch_bucket_sql('total_ms')} AS k FROM requests "
            f"WHERE ({where}) AND {sql.SERVED} AND total_ms IS NOT NULL AND NOT isnan(total_ms)) {parts}")


_LENGTH_FINE = "_finops_fine_length_latency"


def _fused_length_latency(con: duckdb.DuckDBPyConnection, where: str, params: list) -> None:
    """length_latency_daily's rows from one scan of the requests matching ``where``, not one per length field:
    the counts, min and max of total_ms per day, model, batch, sketch bucket and the power-of-two bucket of every
    length field at once into a temporary table (about half the rows of the table itself), then each length
    field's rows summed from it. Counts add and min/max combine exactly: the same rows as
    :func:`length_latency_select_sql` (tests/test_rollup_fused.py)."""
    lengths = sql.LENGTH_COLUMNS
    buckets = ", ".join(f"{length_bucket_sql(c)} AS _bucket_{c}, {c} IS NOT NULL AS _has_{c}" for c in lengths)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_LENGTH_FINE} AS SELECT {sql.time_bucket('day')} AS day, "
                f"coalesce(model, '') AS model, batch_id, {buckets}, {sketch_bucket_sql('total_ms')} AS k, "
                "count(*) AS n, min(total_ms) AS lo, max(total_ms) AS hi FROM requests "
                f"WHERE ({where}) AND {sql.SERVED} AND total_ms IS NOT NULL AND NOT isnan(total_ms) GROUP BY ALL",
                params)
    try:
        for c in lengths:
            con.execute(f"INSERT INTO length_latency_daily SELECT day, model, batch_id, '{c}' AS length, "
                        f"_bucket_{c} AS bucket_lo, k, CAST(sum(n) AS BIGINT) AS n, min(lo) AS lo, max(hi) AS hi "
                        f"FROM {_LENGTH_FINE} WHERE _has_{c} GROUP BY ALL")
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_LENGTH_FINE}")


#: the segments of a request (finops.latency.stats.SEGMENTS): name -> per-row SQL, null where not logged.
#: ``first_token`` and ``after_first_token`` stand in for prefill and decode where only the time to first token
#: is logged (:data:`finops.sql.TTFT_SPLIT`: LiteLLM's completionStartTime, Langfuse, OTel, LLMPerf, vLLM's
#: benchmark); service time where none of these is.
SEGMENT_EXPRS: tuple[tuple[str, str], ...] = (
    ("route", "route_ms"), ("queue", "queue_ms"), ("prefill", "prefill_ms"), ("decode", "decode_ms"),
    ("first_token", sql.FIRST_TOKEN_MS), ("after_first_token", sql.AFTER_FIRST_TOKEN_MS),
    ("service", f"CASE WHEN prefill_ms IS NULL AND decode_ms IS NULL AND NOT coalesce({sql.TTFT_SPLIT}, false) "
                "THEN service_ms END"),
)

#: the segments computed from other columns rather than stored as such: a trace reads them beside its columns
COMPUTED_SEGMENTS = ("first_token", "after_first_token")

#: the segments' names in words, for charts and sentences
SEGMENT_LABELS = {"route": "route", "queue": "queue", "prefill": "prefill", "decode": "decode",
                  "first_token": "to first token", "after_first_token": "after first token", "service": "service",
                  "other": "other"}


def segment_select_sql(where: str = "TRUE") -> str:
    """SELECT producing segments_daily rows: per day, model, batch and sketch bucket of total_ms, the served
    requests' count, min, max and sum of total_ms and, per segment, its sum (0 where not logged) and how many
    logged it, for the segment breakdown at a percentile."""
    segs = ", ".join(f"sum(coalesce({expr}, 0)) AS {name}_sum, count({expr}) AS {name}_n"
                     for name, expr in SEGMENT_EXPRS)
    return (f"SELECT {sql.time_bucket('day')} AS day, coalesce(model, '') AS model, batch_id, "
            f"{sketch_bucket_sql('total_ms')} AS k, count(*) AS n, min(total_ms) AS lo, max(total_ms) AS hi, "
            f"sum(total_ms) AS total_sum, {segs} FROM requests WHERE ({where}) AND {sql.SERVED} "
            "AND total_ms IS NOT NULL AND NOT isnan(total_ms) GROUP BY ALL")


# Field coverage per hour: per hour, model, tenant, SLA tier and batch, how many served requests carry each
# canonical column (one row per column carried), so "these logs carry no queue_ms" reads no raw row.
def coverage_select_sql(where: str = "TRUE") -> str:
    """SELECT producing coverage_hourly rows (hour, model, tenant, sla_tier, batch_id, field, n) from the
    served requests matching ``where``."""
    counts = ", ".join(f"count({sql.quote_ident(n)}) AS {sql.quote_ident(n)}" for n in schema.NAMES)
    on = ", ".join(sql.quote_ident(n) for n in schema.NAMES)
    # the keys as _hour, _model...: the counts carry the canonical names (model, tenant among them)
    return ("SELECT _hour AS hour, _model AS model, _tenant AS tenant, _sla_tier AS sla_tier, _batch AS batch_id, "
            f"field, n FROM (UNPIVOT (SELECT {sql.time_bucket('hour')} AS _hour, coalesce(model, '') AS _model, "
            "coalesce(tenant, '') AS _tenant, coalesce(sla_tier, '') AS _sla_tier, batch_id AS _batch, "
            f"{counts} FROM requests WHERE ({where}) AND {sql.SERVED} GROUP BY ALL) ON {on} INTO NAME field VALUE n) "
            "WHERE n > 0")


# The slowest requests per hour: per hour, model and batch, the SLOWEST_KEPT served requests with the largest
# total_ms (ties by request_id), so the slowest n <= SLOWEST_KEPT of any whole hours and models are among them.
SLOWEST_COLUMNS: tuple[str, ...] = (
    "request_id", "ts", "model", "tenant", "sla_tier", "route", "replica", "input_tokens", "output_tokens",
    "prompt_chars", "total_ms", "route_ms", "queue_ms", "prefill_ms", "decode_ms", "service_ms", "ttft_ms", "status")
SLOWEST_KEPT = 50


def slowest_select_sql(where: str = "TRUE") -> str:
    """SELECT producing slowest_hourly rows (hour, batch_id, then :data:`SLOWEST_COLUMNS`) from the served
    requests matching ``where``. Each group's cut (its SLOWEST_KEPT-th largest total_ms, DuckDB's top-n
    ``max(x, n)``, a streaming aggregate) first, then the rows at or above it ranked: a window over every row
    sorts them all (a minute for 10M requests), this reads them twice (seconds). Rows of no batch (the
    dataset ``rollup --engine duckdb`` reads) are one group, as any other batch."""
    cols = ", ".join(SLOWEST_COLUMNS)
    hour, kept = sql.time_bucket("hour"), str(SLOWEST_KEPT)
    return f"""
WITH src AS NOT MATERIALIZED (SELECT {hour} AS hour, coalesce(model, '') AS _model, batch_id, {cols}
                              FROM requests WHERE ({where}) AND {sql.SERVED} AND total_ms IS NOT NULL),
cut AS (SELECT hour, _model, batch_id, list_min(max(total_ms, {kept})) AS cut FROM src GROUP BY ALL),
top AS (SELECT src.*, row_number() OVER (PARTITION BY src.hour, src._model, src.batch_id
                                         ORDER BY src.total_ms DESC, src.request_id) AS _rank
        FROM src JOIN cut ON src.hour = cut.hour AND src._model = cut._model
             AND src.batch_id IS NOT DISTINCT FROM cut.batch_id
        WHERE src.total_ms >= cut.cut)
SELECT hour, batch_id, {cols} FROM top WHERE _rank <= {kept}"""


def _slowest_columns() -> str:
    types = {c.name: c.sql_type for c in schema.COLUMNS}
    return "hour TIMESTAMP, batch_id BIGINT, " + ", ".join(f"{c} {types[c]}" for c in SLOWEST_COLUMNS)


def _rollup_columns(extra: str = "") -> str:
    return ", ".join(["hour TIMESTAMP"] + [f"{d} VARCHAR" for d in sql.ROLLUP_DIMS]
                     + ["input_band BIGINT", "batch_id BIGINT" + extra] + [f"{n} {t}" for n, t, _ in ROLLUP_MEASURES])


# The rollups of two subsets the cascade summary costs (finops.spend.routing.cascade_summary): the rejected
# small-model attempts (escalated) and the cascade's requests, so it reads no raw row either. One table,
# one scan at load time: the rows of either subset, keyed by which they belong to (SUBSET_KEYS).
ESCALATED_WHERE = "escalated"
CASCADE_WHERE = "strategy = 'cascade' AND escalated IS NOT NULL"
SUBSET_KEYS: tuple[tuple[str, str], ...] = (("is_escalated", f"coalesce({ESCALATED_WHERE}, false)"),
                                            ("in_cascade", f"coalesce({CASCADE_WHERE}, false)"))

#: What the loader writes besides the rollups, per load, and a store opened read-write rebuilds when its
#: version setting is not the current one: (table, columns, setting, version); the rows are
#: :func:`derived_select_sql`'s.
DERIVED: tuple[tuple[str, str, str, int], ...] = (
    ("latency_sla_hourly", "hour TIMESTAMP, model VARCHAR, tenant VARCHAR, sla_tier VARCHAR, batch_id BIGINT, "
     "field VARCHAR, k INTEGER, n BIGINT, lo DOUBLE, hi DOUBLE", "latency_sla_version", 1),
    ("latency_hourly", "hour TIMESTAMP, model VARCHAR, batch_id BIGINT, field VARCHAR, k INTEGER, n BIGINT, "
     "lo DOUBLE, hi DOUBLE", "latency_sketch_version", SKETCH_VERSION),
    ("queue_15min", "window_start TIMESTAMP, model VARCHAR, tenant VARCHAR, sla_tier VARCHAR, batch_id BIGINT, "
     "requests BIGINT, queue_ms_sum DOUBLE", "queue_windows_version", 1),
    ("rollup_cascade_hourly", _rollup_columns(", is_escalated BOOLEAN, in_cascade BOOLEAN"), "rollup_subsets_version",
     ROLLUP_VERSION),
    ("slowest_hourly", _slowest_columns(), "slowest_version", 1),
    ("coverage_hourly", "hour TIMESTAMP, model VARCHAR, tenant VARCHAR, sla_tier VARCHAR, batch_id BIGINT, "
     "field VARCHAR, n BIGINT", "coverage_version", 1),
    ("inservice_minute", "window_start TIMESTAMP, model VARCHAR, batch_id BIGINT, busy_us BIGINT",
     "inservice_version", 1),
    ("decode_rate_minute", "window_start TIMESTAMP, model VARCHAR, batch_id BIGINT, k INTEGER, n BIGINT, lo DOUBLE, "
     "hi DOUBLE", "decode_rate_version", 1),
    ("length_latency_daily", "day TIMESTAMP, model VARCHAR, batch_id BIGINT, length VARCHAR, bucket_lo BIGINT, "
     "k INTEGER, n BIGINT, lo DOUBLE, hi DOUBLE", "length_latency_version", 1),
    ("segments_daily", "day TIMESTAMP, model VARCHAR, batch_id BIGINT, k INTEGER, n BIGINT, lo DOUBLE, hi DOUBLE, "
     "total_sum DOUBLE, " + ", ".join(f"{name}_sum DOUBLE, {name}_n BIGINT" for name, _ in SEGMENT_EXPRS),
     "segments_version", 2),
)


def derived_select_sql(table: str, where: str = "TRUE") -> str:
    """The SELECT writing the derived table ``table`` (:data:`DERIVED`) from the requests matching ``where``."""
    if table == "latency_hourly":
        return sketch_select_sql(where)
    if table == "latency_sla_hourly":
        return sla_sketch_select_sql(where)
    if table == "queue_15min":
        return queue_windows_select_sql(where)
    if table == "coverage_hourly":
        return coverage_select_sql(where)
    if table == "slowest_hourly":
        return slowest_select_sql(where)
    if table == "inservice_minute":
        return inservice_select_sql(where)
    if table == "decode_rate_minute":
        return decode_rate_select_sql(where)
    if table == "length_latency_daily":
        return length_latency_select_sql(where)
    if table == "segments_daily":
        return segment_select_sql(where)
    if table == "rollup_cascade_hourly":
        return rollup_select_sql("requests", f"({where}) AND (({ESCALATED_WHERE}) OR ({CASCADE_WHERE}))",
                                 extra_keys_sql=SUBSET_KEYS)
    raise ValueError(f"not a derived table: {table}")


def derived_ready(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """Whether the store's derived table ``table`` (one of :data:`DERIVED`) is current (false for a
    read-only store older than it)."""
    [(_, _, key, version)] = [d for d in DERIVED if d[0] == table]
    try:
        return get_setting(con, key) == version
    except duckdb.CatalogException:
        return False


def sketch_ready(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store's latency sketch is current (false for a read-only store older than it)."""
    return derived_ready(con, "latency_hourly")


def rebuild_derived(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """Write the derived table ``table`` (:data:`DERIVED`) of every stored request (a store made before it
    existed, or by another version of it)."""
    for name, cols, key, version in DERIVED:
        if name != table:
            continue
        with transaction(con):
            # made again, not emptied: a new version may have new columns
            con.execute(f"DROP TABLE IF EXISTS {name}")
            con.execute(f"CREATE TABLE {name} ({cols})")
            con.execute(f"INSERT INTO {name} {derived_select_sql(name)}")
            bump_data_version(con)
        # after the commit: cut short in between, the next opening simply builds it again
        set_setting(con, key, version)


def rebuild_sketch(con: duckdb.DuckDBPyConnection) -> None:
    """Write the latency sketch of every stored request (a store made before the sketch existed)."""
    rebuild_derived(con, "latency_hourly")


#: the latency sketch's fields the SLA sketch does not hold: read from the raw rows at load time
_NON_SLA_FIELDS: tuple[tuple[str, str], ...] = tuple(x for x in SKETCH_FIELDS if x not in SLA_SKETCH_FIELDS)


_SUMMED = re.compile(r"^(coalesce\(sum\(.*\), 0\)|count\(.*\))$", re.S)
_PER_MILLE = " / 1000.0"
#: where the partial's column goes in a measure's combining SQL (:func:`measure_parts_sql`)
PARTIAL = "PARTIAL"


def measure_parts_sql(expr: str) -> tuple[str, str]:
    """(partial, combine) of a rollup measure: the aggregate at a finer grain, and the SQL summing those
    partials (:data:`PARTIAL` for the partial's column) into the measure's value, the same to the last digit.

    A count or a ``coalesce(sum(...), 0)`` sums exactly (integers, DECIMAL); ``... / 1000.0`` of a sum of whole
    microseconds keeps the integer sum and divides once at the end, as the measure itself does. Any other
    form raises ValueError (the load then writes each rollup on its own)."""
    if expr.endswith(_PER_MILLE) and _SUMMED.match(expr[:-len(_PER_MILLE)]):
        return expr[:-len(_PER_MILLE)], f"sum({PARTIAL}){_PER_MILLE}"
    if _SUMMED.match(expr):
        return expr, f"coalesce(sum({PARTIAL}), 0)"
    raise ValueError(f"no exact partial for the rollup measure {expr!r}")


#: the fused path's finest grain: rollup_hourly's keys and the cascade subsets' (:data:`SUBSET_KEYS`)
_FINE = "_finops_fine_rollup"
#: the derived tables :func:`_fused_rollups` writes besides rollup_hourly (the rows of either subset of
#: :data:`SUBSET_KEYS`); any other entry of :data:`DERIVED` is written on its own (:func:`insert_derived`)
_FUSED_ROLLUPS = ("rollup_cascade_hourly",)


def _fused_rollups(con: duckdb.DuckDBPyConnection, batch_id: int, step=None) -> None:
    """rollup_hourly and rollup_cascade_hourly of one batch from one scan of its rows: the rollup at the finer
    grain of both (the rollup keys and the two subset flags, about as many rows as rollup_hourly's) into a
    temporary table, then each table summed from it. The same rows as each table's own SELECT
    (:func:`rollup_select_sql`, :func:`derived_select_sql`), :func:`measure_parts_sql` says why."""
    parts = [(name, *measure_parts_sql(expr)) for name, _, expr in ROLLUP_MEASURES]
    fine_measures = tuple((name, "", partial) for name, partial, _ in parts)
    keys = ", ".join(["hour", *sql.ROLLUP_DIMS, "input_band", "batch_id"])
    flags = ", ".join(k for k, _ in SUBSET_KEYS)
    either = " OR ".join(k for k, _ in SUBSET_KEYS)
    combined = ", ".join(combine.replace(PARTIAL, name) + f" AS {name}" for name, _, combine in parts)
    if step:
        step("the finest rollup (one scan)")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {_FINE} AS "
                f"{rollup_select_sql('requests', 'batch_id = ?', measures_sql=fine_measures, extra_keys_sql=SUBSET_KEYS)}",
                [batch_id])
    try:
        if step:
            step("rollup_hourly")
        con.execute(f"INSERT INTO rollup_hourly SELECT {keys}, {combined} FROM {_FINE} GROUP BY ALL")
        for table in _FUSED_ROLLUPS:
            if step:
                step(table)
            con.execute(f"INSERT INTO {table} SELECT {keys}, {flags}, {combined} FROM {_FINE} WHERE {either} "
                        "GROUP BY ALL")
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_FINE}")


def insert_rollups(con: duckdb.DuckDBPyConnection, batch_id: int, step=None) -> None:
    """Write one load's hourly rollup and every derived table's rows (the loader's last step, inside its
    transaction); ``step(table)`` is called before each (the loader's progress).

    rollup_hourly and the cascade subsets' rollup come from one scan of the batch (:func:`_fused_rollups`);
    the rest of :data:`DERIVED` as :func:`insert_derived` writes it, one table at a time."""
    fused = all(t in (d[0] for d in DERIVED) for t in _FUSED_ROLLUPS)
    try:
        for _, _, expr in ROLLUP_MEASURES:
            measure_parts_sql(expr)
    except ValueError:
        fused = False
    if fused:
        _fused_rollups(con, batch_id, step)
    else:
        if step:
            step("rollup_hourly")
        con.execute(f"INSERT INTO rollup_hourly {rollup_select_sql('requests', 'batch_id = ?')}", [batch_id])
    insert_derived(con, batch_id, step, skip=_FUSED_ROLLUPS if fused else ())


def insert_derived(con: duckdb.DuckDBPyConnection, batch_id: int, step=None, skip: tuple[str, ...] = ()) -> None:
    """Write every derived table's rows of one load (but those in ``skip``), inside the load's transaction;
    ``step(table)`` is called before each (the loader's progress).

    The latency sketch's SLA fields are the SLA sketch's buckets (written first) summed over tenant and tier:
    the same rows as from the raw rows, two scans of them fewer; length_latency_daily is one scan, not three
    (:func:`_fused_length_latency`)."""
    for table, *_ in DERIVED:
        if table in skip:
            continue
        if step:
            step(table)
        if table == "latency_hourly":
            con.execute(f"INSERT INTO latency_hourly {sketch_select_sql('batch_id = ?', fields_sql=_NON_SLA_FIELDS)}",
                        [batch_id])
            con.execute("INSERT INTO latency_hourly SELECT hour, model, batch_id, field, k, sum(n), min(lo), max(hi) "
                        "FROM latency_sla_hourly WHERE batch_id = ? GROUP BY ALL", [batch_id])
            continue
        if table == "length_latency_daily":
            _fused_length_latency(con, "batch_id = ?", [batch_id])
            continue
        con.execute(f"INSERT INTO {table} {derived_select_sql(table, 'batch_id = ?')}", [batch_id])


PRICE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "VARCHAR"), ("provider", "VARCHAR"), ("publisher", "VARCHAR"), ("kind", "VARCHAR"),
    ("size_class", "VARCHAR"), ("input_usd_per_1m", "DOUBLE"), ("output_usd_per_1m", "DOUBLE"),
    ("cached_input_usd_per_1m", "DOUBLE"), ("request_usd", "DOUBLE"), ("gpu_hour_usd", "DOUBLE"),
    ("gpus_per_replica", "INTEGER"), ("replicas", "INTEGER"), ("slots_per_replica", "INTEGER"),
    ("price_as_of", "DATE"), ("source", "VARCHAR"),
    # a dated, tiered row: in force from effective_from (inclusive) to effective_to (exclusive), for
    # requests of this service tier ('' standard) whose input tokens exceed min_input_tokens
    ("service_tier", "VARCHAR"), ("min_input_tokens", "BIGINT"), ("effective_from", "DATE"),
    ("effective_to", "DATE"), ("cache_write_usd_per_1m", "DOUBLE"), ("cache_write_1h_usd_per_1m", "DOUBLE"),
)
#: the catalogue's rows (finops.catalogue), synced from the installed genai-prices
CATALOGUE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("provider", "VARCHAR"), ("model", "VARCHAR"), ("service_tier", "VARCHAR"), ("min_input_tokens", "BIGINT"),
    ("effective_from", "DATE"), ("effective_to", "DATE"), ("input_usd_per_1m", "DECIMAL(18,9)"),
    ("cached_input_usd_per_1m", "DECIMAL(18,9)"), ("cache_write_usd_per_1m", "DECIMAL(18,9)"),
    ("cache_write_1h_usd_per_1m", "DECIMAL(18,9)"), ("output_usd_per_1m", "DECIMAL(18,9)"),
    ("request_usd", "DECIMAL(18,9)"), ("source", "VARCHAR"),
)
#: a self-hosted fleet's periods (finops.spend.fleets): ``starts_at`` inclusive, ``ends_at`` exclusive (NULL:
#: open-ended); GPUs per replica and $ per GPU-hour left empty are the price book row's; ``source`` is
#: ``declared`` (entered or loaded) or ``inferred`` (from the replica ids in the logs)
FLEET_COLUMNS: tuple[tuple[str, str], ...] = (
    ("model", "VARCHAR"), ("starts_at", "TIMESTAMP"), ("ends_at", "TIMESTAMP"), ("replicas", "INTEGER"),
    ("gpus_per_replica", "INTEGER"), ("gpu_hour_usd", "DOUBLE"), ("gpu_type", "VARCHAR"), ("site", "VARCHAR"),
    ("source", "VARCHAR"),
)
RESERVATION_COLUMNS: tuple[tuple[str, str], ...] = (("model", "VARCHAR"), ("tenant", "VARCHAR"),
                                                    ("replicas", "DOUBLE"))
PRICES_CSV = ROOT / "data" / "prices.csv"


def _ddl() -> list[str]:
    rollup_cols = ",\n  ".join(
        ["hour TIMESTAMP"] + [f"{d} VARCHAR" for d in sql.ROLLUP_DIMS] + ["input_band BIGINT", "batch_id BIGINT"]
        + [f"{n} {t}" for n, t, _ in ROLLUP_MEASURES])
    price_cols = ", ".join(f"{n} {t}" for n, t in PRICE_COLUMNS)
    return [
        schema.create_table_sql("requests", extra=",\n  batch_id BIGINT"),
        """CREATE TABLE IF NOT EXISTS batches (
  batch_id BIGINT, file_name VARCHAR, sha256 VARCHAR, format VARCHAR, options VARCHAR,
  rows_read BIGINT, rows_ingested BIGINT, rows_rejected BIGINT, rows_duplicate BIGINT,
  loaded_at TIMESTAMP, min_ts TIMESTAMP, max_ts TIMESTAMP)""",
        f"CREATE TABLE IF NOT EXISTS rollup_hourly (\n  {rollup_cols}\n)",
        f"CREATE TABLE IF NOT EXISTS prices ({price_cols})",
        f"CREATE TABLE IF NOT EXISTS fleet_schedule ({', '.join(f'{n} {t}' for n, t in FLEET_COLUMNS)})",
        f"CREATE TABLE IF NOT EXISTS fleet_reservations ({', '.join(f'{n} {t}' for n, t in RESERVATION_COLUMNS)})",
        f"CREATE TABLE IF NOT EXISTS catalogue_prices ({', '.join(f'{n} {t}' for n, t in CATALOGUE_COLUMNS)})",
        # a private or deployment name priced as another model (alias -> model, provider optional)
        "CREATE TABLE IF NOT EXISTS model_aliases (alias VARCHAR, model VARCHAR, provider VARCHAR)",
        # how each logged (model, provider) is priced: from the price book, the catalogue, or not at all
        """CREATE TABLE IF NOT EXISTS model_resolution (model VARCHAR, provider VARCHAR, price_source VARCHAR,
  price_provider VARCHAR, price_model VARCHAR, how VARCHAR)""",
        "CREATE TABLE IF NOT EXISTS budgets (tenant VARCHAR, month DATE, budget_usd DOUBLE)",
        "CREATE TABLE IF NOT EXISTS settings (key VARCHAR, value VARCHAR)",
        """CREATE TABLE IF NOT EXISTS alert_states (alert_id VARCHAR, rule VARCHAR, model VARCHAR, tenant VARCHAR,
  window_start TIMESTAMP, window_end TIMESTAMP, state VARCHAR, actor VARCHAR, acted_at TIMESTAMP, until TIMESTAMP, note VARCHAR)""",
        """CREATE TABLE IF NOT EXISTS alert_deliveries (alert_id VARCHAR, rule VARCHAR, model VARCHAR, tenant VARCHAR,
  window_start TIMESTAMP, window_end TIMESTAMP, severity VARCHAR, target VARCHAR, kind VARCHAR, message_id VARCHAR, attempted_at TIMESTAMP, outcome VARCHAR,
  detail VARCHAR)""",
        *[f"CREATE TABLE IF NOT EXISTS {table} ({cols})" for table, cols, _, _ in DERIVED],
        "CREATE TABLE IF NOT EXISTS data_version (version BIGINT)",
        # the engine's own view, scraped from vLLM's /metrics (finops.ingest.engine)
        """CREATE TABLE IF NOT EXISTS engine_metrics (
  ts TIMESTAMP, replica VARCHAR, model VARCHAR, metric VARCHAR, labels VARCHAR, value DOUBLE)""",
        # what the providers billed, per day (finops.ingest.billing): apart from requests, for reconciliation
        """CREATE TABLE IF NOT EXISTS billing_lines (
  source VARCHAR, provider VARCHAR, day DATE, bucket_start TIMESTAMP, bucket_end TIMESTAMP, model VARCHAR,
  project VARCHAR, api_key_id VARCHAR, service_tier VARCHAR, line_item VARCHAR, input_tokens BIGINT,
  cached_input_tokens BIGINT, cache_write_tokens BIGINT, cache_write_1h_tokens BIGINT, output_tokens BIGINT,
  requests BIGINT, amount_usd DECIMAL(38,12), currency VARCHAR, file_name VARCHAR, file_sha256 VARCHAR,
  loaded_at TIMESTAMP)""",
    ]


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK and re-raise: all of a change or none of it.

    Writes of one process take turns (:data:`WRITE_LOCK`): two browser tabs of one dashboard load on two
    threads, and DuckDB's snapshots would let both read the same next batch id and miss each other's
    rows. Another process cannot write the store at all while this one holds it (DuckDB's file lock)."""
    with WRITE_LOCK:
        con.execute("BEGIN")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


@contextmanager
def snapshot(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Reads that see the store as of one moment: a read-only transaction on ``con`` (a cursor of its own).

    A view that reads several tables in turn (the models, then their latency; the alerts, then the requests
    they hit) while another process loads would otherwise mix two states of the store, and name a model
    one table has and the other has not yet. A write inside fails (DuckDB refuses it) rather than being lost.

    >>> con = duckdb.connect()
    >>> _ = con.execute("CREATE TABLE t (x INTEGER)")
    >>> reader, writer = con.cursor(), con.cursor()
    >>> with snapshot(reader):
    ...     before = reader.execute("SELECT count(*) FROM t").fetchall()
    ...     _ = writer.execute("INSERT INTO t VALUES (1)")
    ...     during = reader.execute("SELECT count(*) FROM t").fetchall()
    >>> before == during == [(0,)], reader.execute("SELECT count(*) FROM t").fetchall()
    (True, [(1,)])
    """
    con.execute("BEGIN TRANSACTION READ ONLY")
    try:
        yield con
    except BaseException:
        with suppress(duckdb.Error, InputError):       # a lost connection has no transaction left to end
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def resolve_path(path: str | os.PathLike | None = None) -> str:
    """The store path: the argument, else ``$FINOPS_DB``, else data/finops.duckdb."""
    if path is None:
        path = os.environ.get("FINOPS_DB") or DEFAULT_DB
    return str(path)


class StoreError(InputError):
    """The store cannot be opened: held by another process, not a store, unreadable; or the process that
    served it to this one went away. Its message is a sentence saying what to do; DuckDB's own text
    (paths, internals) goes to the ``finops`` log. ``held``: the file is locked by another process."""

    held = False


_LOCK_PID = re.compile(r"\(PID (\d+)\)")


DUCKDB_MAGIC = b"DUCK"
"""Bytes 8 to 11 of every DuckDB database file (after the header's checksum)."""


def _not_duckdb(path: str) -> bool:
    """True for a file that holds something other than a DuckDB database: DuckDB opens a CSV or JSON file given as one
    (read-only, its tables kept in memory), so a store that writes there would store nothing."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return False                    # not there yet, a folder, unreadable: DuckDB's own error says which
    return len(head) > 0 and head[8:12] != DUCKDB_MAGIC


def _open(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    if path != ":memory:" and _not_duckdb(path):
        raise _not_a_store(os.path.basename(path))
    try:
        return duckdb.connect(path, read_only=read_only)
    except duckdb.Error as exc:
        text = str(exc)
        log.warning("opening store %s failed: %s", path, text)
        name = os.path.basename(os.path.normpath(path))     # "DIR/" named too, not ""
        if os.path.isdir(path):
            raise StoreError(f"{name} is a folder, not a store file: give the store's file with --db or FINOPS_DB "
                             f"(e.g. {name}/finops.duckdb).") from None
        if "lock" in text.lower():
            pid = _LOCK_PID.search(text)
            who = f"process {pid.group(1)}" if pid else "another process"
            error = StoreError(
                f"The store {name} is in use by {who} (a load, a report or another command that does not serve it "
                "to others): DuckDB lets one process write a store at a time. Wait for it to end and try again; "
                "the dashboard and serve-ingest share a store they hold with every other process.")
            error.held = True
            raise error from None
        if read_only and not os.path.exists(path):
            raise StoreError(f"There is no store at {name}: load logs into it first (python -m finops ingest).") \
                from None
        raise _not_a_store(name) from None


def _not_a_store(name: str) -> StoreError:
    return StoreError(f"{name} could not be opened as a finops store (it may not be a DuckDB file, or be damaged "
                      "or unreadable): check the path given with --db or FINOPS_DB.")


def connect(path: str | os.PathLike | None = None, *, read_only: bool = False,
            memory_limit: str | None = "1536MB", shared: bool = True) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) a store and make sure its tables exist.

    A store another process holds and serves (the dashboard, ``serve-ingest``: its ingester's sidecar
    ``<store>.ingester.json`` names it) is used through that process: the connection returned is a
    :class:`finops.remote.RemoteConnection`, which answers as this one does (``shared=False``: the
    :class:`StoreError` instead). The holder made the tables; ``read_only`` is not enforced there."""
    path = resolve_path(path)
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        con = _open(path, read_only)
    except StoreError as exc:
        served = remote.connect(path, StoreError) if exc.held and shared else None
        if served is None:
            raise
        log.info("the store %s is held by process %s: using it through that process", path, served.holder_pid)
        return served
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    con.execute("SET TimeZone = 'UTC'")
    if not read_only:
        for stmt in _ddl():
            con.execute(stmt)
        _add_new_columns(con, "requests", [(c.name, c.sql_type) for c in schema.COLUMNS])
        _add_new_columns(con, "prices", PRICE_COLUMNS)
        if con.execute("SELECT count(*) FROM data_version").fetchall()[0][0] == 0:
            con.execute("INSERT INTO data_version VALUES (0)")
        if con.execute("SELECT count(*) FROM prices").fetchall()[0][0] == 0:
            load_price_book(con, PRICES_CSV)
        if get_setting(con, "rollup_version") != ROLLUP_VERSION:
            _refuse_emptying(con, path, "rollup_hourly")
            rebuild_rollups(con)
        if get_setting(con, "catalogue.source") != catalogue.catalogue_source():
            sync_catalogue(con)
        for table, *_ in DERIVED:
            if not derived_ready(con, table):
                _refuse_emptying(con, path, table)
                rebuild_derived(con, table)
    return con


def _refuse_emptying(con: duckdb.DuckDBPyConnection, path: str, table: str) -> None:
    """A table written by another version is rebuilt from the raw rows as the store opens; a store of attached
    rollups (finops.scale) has none, so the rebuild would replace what was attached with nothing. Refused,
    with what to do; a table that holds no row yet is built (empty) as usual."""
    if row_count(con):
        return
    try:
        if not con.execute(f"SELECT EXISTS (SELECT 1 FROM {sql.column(table, _REBUILT, 'table')})").fetchall()[0][0]:
            return
    except duckdb.CatalogException:         # not made yet
        return
    con.close()
    raise StoreError(f"{os.path.basename(path)} holds rollups attached from `finops rollup` and no request rows; "
                     f"this version of finops writes {table} differently, so it cannot be rebuilt here. Run "
                     "`python -m finops rollup` again with this version and attach its output to a new store.")


_COLUMN_TYPES = tuple({c.sql_type for c in schema.COLUMNS} | {"DOUBLE", "INTEGER", "BIGINT", "DATE", "VARCHAR"})


#: the tables the store rebuilds from its raw rows when their version changes
_REBUILT = ("rollup_hourly", *(t for t, *_ in DERIVED))


def _add_new_columns(con: duckdb.DuckDBPyConnection, table: str, columns) -> None:
    """A store made before a column existed gets it (empty) when opened read-write."""
    table = sql.column(table, ("requests", "prices"), "table")
    # pragma_table_info rather than information_schema.columns: 0.6 ms against 13 ms of CPU in a freshly opened
    # store, paid at every page's first render in a process (bench/pages.py)
    have = {r[0] for r in con.execute("SELECT name FROM pragma_table_info(?)", [table]).fetchall()}
    for name, sql_type in columns:
        if name not in have:
            checked_type = sql.column(sql_type, _COLUMN_TYPES, "column type")
            con.execute(f"ALTER TABLE {table} ADD COLUMN {sql.quote_ident(name)} {checked_type}")


def rebuild_rollups(con: duckdb.DuckDBPyConnection) -> None:
    """Write the hourly rollups of every stored request again (their keys or measures changed)."""
    rollup_cols = ",\n  ".join(
        ["hour TIMESTAMP"] + [f"{d} VARCHAR" for d in sql.ROLLUP_DIMS] + ["input_band BIGINT", "batch_id BIGINT"]
        + [f"{n} {t}" for n, t, _ in ROLLUP_MEASURES])
    with transaction(con):
        con.execute("DROP TABLE IF EXISTS rollup_hourly")
        con.execute(f"CREATE TABLE rollup_hourly (\n  {rollup_cols}\n)")
        con.execute(f"INSERT INTO rollup_hourly {rollup_select_sql('requests')}")
        refresh_resolution(con)
        bump_data_version(con)
    set_setting(con, "rollup_version", ROLLUP_VERSION)


def sync_catalogue(con: duckdb.DuckDBPyConnection) -> int:
    """Replace the stored catalogue rows with those of the installed genai-prices. Returns the row count."""
    import pandas as pd
    rows = catalogue.catalogue_rows()
    names = [n for n, _ in CATALOGUE_COLUMNS]
    source = catalogue.catalogue_source()
    frame = pd.DataFrame([(*(getattr(r, n) for n in names[:-1]), source) for r in rows], columns=names)
    for n, t in CATALOGUE_COLUMNS:
        if t.startswith("DECIMAL"):
            frame[n] = frame[n].map(lambda v: None if v is None else str(v))
    con.register("_catalogue_in", frame)
    try:
        with transaction(con):
            con.execute("DELETE FROM catalogue_prices")
            casts = ", ".join(f"CAST({n} AS {t}) AS {n}" for n, t in CATALOGUE_COLUMNS)
            con.execute(f"INSERT INTO catalogue_prices SELECT {casts} FROM _catalogue_in")
            refresh_resolution(con)
            bump_data_version(con)
    finally:
        con.unregister("_catalogue_in")
    set_setting(con, "catalogue.source", source)
    return len(frame)


def price_names(con: duckdb.DuckDBPyConnection) -> tuple[set[str], dict[str, tuple[str, str | None]]]:
    """What a logged name resolves against (:func:`finops.catalogue.price_key`): the price book's model names
    and the alias table (alias -> (model, provider or None))."""
    book = {r[0] for r in con.execute("SELECT DISTINCT model FROM prices WHERE model IS NOT NULL").fetchall()}
    aliases = {r[0]: (r[1], r[2] or None) for r in con.execute(
        "SELECT alias, model, provider FROM model_aliases WHERE alias IS NOT NULL AND model IS NOT NULL").fetchall()}
    return book, aliases


def refresh_resolution(con: duckdb.DuckDBPyConnection) -> None:
    """Work out again how every logged (model, provider) is priced (``model_resolution``), after a load, a
    price-book or alias edit or a catalogue sync: an alias first, then the price book's own row for the
    name, then the catalogue (dated names, provider prefixes), else unpriced. Call inside the write's
    transaction."""
    pairs = con.execute("SELECT DISTINCT model, provider FROM rollup_hourly").fetchall()
    book, aliases = price_names(con)
    rows = [(m, p, *catalogue.price_key(m, p or None, book, aliases)) for m, p in pairs]
    con.execute("DELETE FROM model_resolution")
    if rows:
        con.executemany("INSERT INTO model_resolution VALUES (?, ?, ?, ?, ?, ?)", rows)


def load_price_book(con: duckdb.DuckDBPyConnection, csv_path: str | os.PathLike) -> int:
    """Replace the price book with a CSV of PRICE_COLUMNS (columns it lacks stay empty). Returns rows loaded."""
    with transaction(con):
        con.execute("DELETE FROM prices")
        con.execute("INSERT INTO prices BY NAME SELECT * FROM read_csv(?, header=true, types=?)",
                    [str(csv_path), dict(PRICE_COLUMNS)])
        refresh_resolution(con)
        bump_data_version(con)
    return con.execute("SELECT count(*) FROM prices").fetchall()[0][0]


def row_count(con: duckdb.DuckDBPyConnection) -> int:
    return con.execute("SELECT count(*) FROM requests").fetchall()[0][0]


def rollup_only(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store holds rollups but no raw rows: outputs of the Spark job attached with
    ``python -m finops attach-rollups`` (finops.scale), so what needs raw rows has nothing to read."""
    return row_count(con) == 0 and con.execute("SELECT EXISTS (SELECT 1 FROM rollup_hourly)").fetchall()[0][0]


#: what a section that reads raw rows says on a rollup-only store (:func:`rollup_only`)
RAW_ROWS_NEEDED = ("this needs raw request rows, and this store holds only the hourly rollups attached with "
                   "`python -m finops attach-rollups` (from the Spark job). Load the period's requests with "
                   "`python -m finops ingest` to see it.")


#: The most raw rows an analysis that reads them (exact percentiles, breakdowns, the diagnosis, the
#: routing replay) reads by default: a period holding more is narrowed to its latest hours (:func:`raw_scope`).
#: DuckDB's holistic aggregates (quantiles) hold their group's values in memory and do not spill: over
#: 100M rows they run out of the dashboard's memory_limit; over 10M they take a second or less.
RAW_ROW_BUDGET = 10_000_000


@dataclass(frozen=True)
class RawScope:
    """The filters a raw-row analysis runs on (:func:`raw_scope`) and what they cover."""
    filters: Filters
    requests: int            # requests in the scope (counted in the rollups)
    period_requests: int     # requests in the period asked for
    narrowed: bool           # the scope is the latest part of the period, not all of it

    def note(self) -> str:
        """One sentence for a page, empty when the scope is the whole period."""
        if not self.narrowed:
            return ""
        since = self.filters.since
        return (f"This period holds {self.period_requests:,} requests, more than the {RAW_ROW_BUDGET:,} the sections "
                f"that read single requests read at once: they cover its latest part, from {since:%Y-%m-%d %H:%M} "
                f"UTC ({self.requests:,} requests). Totals, spend and the percentiles read from the hourly sketch "
                "cover the whole period. Narrow the dates or pick a model to see another slice exactly.")


def raw_scope(con: duckdb.DuckDBPyConnection, f: Filters, budget: int | None = None) -> RawScope:
    """``f`` itself when its period holds at most ``budget`` (:data:`RAW_ROW_BUDGET`) requests, else ``f``
    from the start of the latest whole hours that together hold at most that many (at least the last
    hour). Counted in the hourly rollups (no raw row is read); a period of partial hours counts the
    hours it touches."""
    budget = RAW_ROW_BUDGET if budget is None else int(budget)
    where, params = Filters(tenants=f.tenants, models=f.models, sla_tiers=f.sla_tiers).where(ts_col="hour")
    span = []
    if f.since is not None:
        span.append(f"hour >= {sql.time_bucket('hour', 'CAST(? AS TIMESTAMP)')}")
        params.append(f.since)
    if f.until is not None:
        span.append("hour < ?")
        params.append(f.until)
    where = " AND ".join([where, *span])
    hours = con.execute(f"SELECT hour, sum(requests) AS n FROM rollup_hourly WHERE {where} GROUP BY 1 "
                        "ORDER BY 1 DESC", params).fetchall()
    total = sum(int(n) for _, n in hours)
    if total <= budget:
        return RawScope(f, total, total, False)
    kept, since = 0, None
    for hour, n in hours:
        if since is not None and kept + int(n) > budget:
            break
        kept, since = kept + int(n), hour
    if f.since is not None and since <= f.since:
        return RawScope(f, total, total, False)
    return RawScope(replace(f, since=since), kept, total, True)


def whole_hours(f: Filters) -> bool:
    """Whether ``f``'s period starts and ends on the hour (or is open): what the hourly tables answer exactly."""
    return all(t is None or not (t.minute or t.second or t.microsecond) for t in (f.since, f.until))


def rollup_requests(con: duckdb.DuckDBPyConnection) -> int:
    """The requests counted in the hourly rollups (on a rollup-only store, every request it knows of)."""
    return int(con.execute("SELECT coalesce(sum(requests), 0) FROM rollup_hourly").fetchall()[0][0])


def time_span(con: duckdb.DuckDBPyConnection):
    """(first ts, last ts) in the store, or (None, None) when empty. Read from the batches table."""
    return tuple(con.execute("SELECT min(min_ts), max(max_ts) FROM batches").fetchall()[0])


def distinct_values(con: duckdb.DuckDBPyConnection, column: str) -> list[str]:
    """Distinct non-empty values of a rollup dimension (model, tenant, route, sla_tier, status)."""
    column = sql.column(column, sql.ROLLUP_DIMS, "rollup dimension")
    rows = con.execute(f"SELECT DISTINCT {column} FROM rollup_hourly WHERE {column} <> '' ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def field_coverage(con: duckdb.DuckDBPyConnection, where: str = "TRUE", params: list | None = None) -> dict[str, int]:
    """Non-null count of every canonical column among the rows matching ``where``."""
    exprs = ", ".join(f"count({n}) AS {n}" for n in schema.NAMES)
    row = con.execute(f"SELECT {exprs} FROM requests WHERE {where}", params or []).fetchall()[0]
    return dict(zip(schema.NAMES, row, strict=True))


def batches(con: duckdb.DuckDBPyConnection):
    """The loaded batches, newest first, as a DataFrame."""
    return con.execute("SELECT * FROM batches ORDER BY batch_id DESC").df()


def delete_batch(con: duckdb.DuckDBPyConnection, batch_id: int) -> int:
    """Delete one batch's rows, rollups and record in one transaction. Returns rows deleted."""
    access.require("delete_batch")
    with transaction(con):
        n = con.execute("SELECT count(*) FROM requests WHERE batch_id = ?", [batch_id]).fetchall()[0][0]
        con.execute("DELETE FROM requests WHERE batch_id = ?", [batch_id])
        con.execute("DELETE FROM rollup_hourly WHERE batch_id = ?", [batch_id])
        for table, *_ in DERIVED:
            con.execute(f"DELETE FROM {table} WHERE batch_id = ?", [batch_id])
        con.execute("DELETE FROM batches WHERE batch_id = ?", [batch_id])
        refresh_resolution(con)
        bump_data_version(con)
    return n


def get_setting(con: duckdb.DuckDBPyConnection, key: str, default=None):
    """A JSON value from the ``settings`` table, or ``default``."""
    rows = con.execute("SELECT value FROM settings WHERE key = ?", [key]).fetchall()
    return json.loads(rows[-1][0]) if rows else default


def set_setting(con: duckdb.DuckDBPyConnection, key: str, value) -> None:
    """Store a JSON value under ``key``, replacing any previous one."""
    text = json.dumps(value, sort_keys=True)
    with transaction(con):
        con.execute("DELETE FROM settings WHERE key = ?", [key])
        con.execute("INSERT INTO settings VALUES (?, ?)", [key, text])
        bump_data_version(con)


def bump_data_version(con: duckdb.DuckDBPyConnection) -> None:
    """Count one write. Every function that changes what a query can return calls this inside its
    transaction: loads, deletions, prices, budgets, settings (alert rules, floors, readiness ticks)."""
    con.execute("UPDATE data_version SET version = version + 1")


def data_version(con: duckdb.DuckDBPyConnection) -> int:
    """The store's write counter (see :func:`bump_data_version`); 0 for a store that has none yet."""
    try:
        rows = con.execute("SELECT max(version) FROM data_version").fetchall()
    except duckdb.CatalogException:        # a store made before the counter, opened read-only
        return 0
    return int(rows[0][0] or 0)
