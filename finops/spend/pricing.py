"""The price book and the cost of requests.

Rules
-----
* A request's cost is its recorded ``cost_usd`` where the source has one.
* Otherwise, for a model with token prices (``kind = 'api'``)::

      cost = (input - cached) * in_price / 1e6 + cached * cached_price / 1e6
             + output * out_price / 1e6 + request_usd

  (``cached_price`` falls back to ``in_price`` when the book has none.)
* A semantic-cache hit costs nothing unless the source recorded a cost.
* A self-hosted model (``kind = 'self_hosted'``) costs its fleet every hour:
  ``replicas * gpus_per_replica * gpu_hour_usd``. Each hour its utilisation is
  ``busy_ms / (replicas * slots_per_replica * 3.6e6)`` (capped at 1), where
  ``busy_ms`` sums the requests' service time. A self-hosted model is paid for
  over the whole period shown once the store holds any of its traffic. ``utilisation * fleet cost`` is
  allocated to that hour's requests by their share of busy time; the rest is
  the *idle* line, reported on its own and never spread over requests. An hour
  with requests but no timing at all allocates the whole fleet cost by request
  count and leaves utilisation unknown.
* A model missing from the book costs nothing and is listed by
  :func:`unpriced_models`, so a page can say so.

Costs are computed when queried, from the rollups and the ``prices`` table, so
editing the book reprices everything without re-ingesting.

>>> token_cost_usd(1_000_000, 0, 1_000_000, input_usd_per_1m=2.5, output_usd_per_1m=10.0)
12.5
"""
from __future__ import annotations

import math

import duckdb
import pandas as pd

from finops import sql, store


def token_cost_usd(input_tokens: float, cached_input_tokens: float, output_tokens: float, *,
                   input_usd_per_1m: float, output_usd_per_1m: float,
                   cached_input_usd_per_1m: float | None = None, request_usd: float = 0.0,
                   requests: float = 1.0) -> float:
    """Cost of token-priced usage (the rule above), for hand checks and what-ifs."""
    cached_price = input_usd_per_1m if cached_input_usd_per_1m is None else cached_input_usd_per_1m
    uncached = max(input_tokens - cached_input_tokens, 0)
    return (uncached * input_usd_per_1m + cached_input_tokens * cached_price
            + output_tokens * output_usd_per_1m) / 1e6 + request_usd * requests


#: what an edited price book may hold, per column: (lowest, highest, whole numbers only). Empty cells
#: stay empty (a self-hosted row has no token prices, an API row no GPU fields).
PRICE_LIMITS: dict[str, tuple[float, float, bool]] = {
    "input_usd_per_1m": (0, 10_000, False), "output_usd_per_1m": (0, 10_000, False),
    "cached_input_usd_per_1m": (0, 10_000, False), "request_usd": (0, 1_000, False),
    "gpu_hour_usd": (0, 1_000, False), "gpus_per_replica": (1, 64, True), "replicas": (0, 10_000, True),
    "slots_per_replica": (1, 10_000, True),
}


def price_book(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    return con.execute("SELECT * FROM prices ORDER BY kind DESC, model").df()


def save_price_book(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> int:
    """Replace the price book with an edited table. Rows without a model are dropped."""
    from finops.errors import InputError

    cols = [n for n, _ in store.PRICE_COLUMNS]
    missing = [c for c in cols if c not in frame.columns]
    if missing:
        raise InputError(f"price book lacks columns: {', '.join(missing)}")
    frame = frame[cols].copy()
    frame = frame[frame["model"].notna() & (frame["model"].astype(str).str.strip() != "")]
    dupes = frame["model"][frame["model"].duplicated()].tolist()
    if dupes:
        raise InputError(f"price book lists a model twice: {', '.join(map(str, dupes))}", field="model")
    bad = frame[~frame["kind"].isin(["api", "self_hosted"])]
    if len(bad):
        raise InputError(f"kind must be api or self_hosted (model {bad['model'].iloc[0]})", field="kind")
    for i, row in enumerate(frame.itertuples(index=False), start=1):
        for c, (lo, hi, whole) in PRICE_LIMITS.items():
            raw = getattr(row, c)
            if raw is None or (isinstance(raw, float) and math.isnan(raw)) or raw is pd.NA or raw is pd.NaT:
                continue
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise InputError(f"{c} {raw!r} of model {row.model} is not a number", row=i, field=c) from None
            if not math.isfinite(value) or value < lo or value > hi or (whole and value != int(value)):
                kind = "a whole number" if whole else "a number"
                raise InputError(f"{c} {raw!r} of model {row.model} must be {kind} from {lo:,} to {hi:,}",
                                 row=i, field=c)
    con.register("_prices_in", frame)
    try:
        with store.transaction(con):
            con.execute("DELETE FROM prices")
            casts = ", ".join(f"CAST({n} AS {t}) AS {n}" for n, t in store.PRICE_COLUMNS)
            con.execute(f"INSERT INTO prices SELECT {casts} FROM _prices_in")
            store.bump_data_version(con)
    finally:
        con.unregister("_prices_in")
    return len(frame)


def unpriced_models(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Models with traffic but no row in the price book."""
    rows = con.execute("SELECT DISTINCT r.model FROM rollup_hourly r ANTI JOIN prices p ON p.model = r.model "
                       "WHERE r.recorded_requests < r.requests ORDER BY 1").fetchall()
    return [r[0] for r in rows]


# SQL fragments over a rollup-shaped relation ``r`` joined to prices ``p``.
TOKEN_COST_SQL = """(CASE WHEN coalesce(p.kind, 'api') = 'api' THEN
    (r.priced_uncached_input_tokens * coalesce(p.input_usd_per_1m, 0)
     + r.priced_cached_input_tokens * coalesce(p.cached_input_usd_per_1m, p.input_usd_per_1m, 0)
     + r.priced_output_tokens * coalesce(p.output_usd_per_1m, 0)) / 1e6
    + r.priced_requests * coalesce(p.request_usd, 0) ELSE 0 END)"""

# what the cache hits would have cost on their model (token-priced models only)
CACHE_SAVED_SQL = """(CASE WHEN coalesce(p.kind, 'api') = 'api' THEN
    (r.cache_uncached_input_tokens * coalesce(p.input_usd_per_1m, 0)
     + r.cache_cached_input_tokens * coalesce(p.cached_input_usd_per_1m, p.input_usd_per_1m, 0)
     + r.cache_output_tokens * coalesce(p.output_usd_per_1m, 0)) / 1e6
    + r.cache_hits * coalesce(p.request_usd, 0) ELSE 0 END)"""


def costed_rollup_sql(source: str, hours_sql: str) -> str:
    """Rollup rows with ``cost_usd`` (recorded + token-priced + allocated GPU time) and ``cache_saved_usd``,
    plus one idle row per self-hosted model and hour (``is_idle``).

    ``source`` is a rollup-shaped relation already filtered; ``hours_sql`` a query
    yielding the ``hour`` values the fleet is paid for (the period shown). The
    allocation uses each hour's busy time of *all* traffic of the model, so a
    tenant filter does not inflate its share.
    """
    return f"""
WITH r AS ({source}),
alloc AS ({alloc_sql(hours_sql)})
SELECT r.*, false AS is_idle,
       r.recorded_cost_usd + {TOKEN_COST_SQL}
       + coalesce(CASE WHEN a.busy_ms > 0 THEN a.allocated_usd * r.busy_ms / a.busy_ms
                       WHEN a.served > 0 THEN a.allocated_usd * {sql.served_requests('r')} / a.served END, 0)
         AS cost_usd,
       {CACHE_SAVED_SQL} AS cache_saved_usd
FROM r LEFT JOIN prices p ON p.model = r.model
       LEFT JOIN alloc a ON a.model = r.model AND a.hour = {sql.time_bucket('hour', 'r.hour')}
UNION ALL BY NAME
SELECT a.hour, a.model, '(idle capacity)' AS tenant, '' AS route, '' AS sla_tier, '' AS status,
       true AS is_idle, a.fleet_cost_usd - a.allocated_usd AS cost_usd, 0.0 AS cache_saved_usd
FROM alloc a WHERE a.fleet_cost_usd - a.allocated_usd > 0
"""


def alloc_sql(hours_sql: str) -> str:
    """Per self-hosted model and paid hour: fleet_cost_usd, busy_ms, served, utilization, allocated_usd."""
    return f"""
WITH fleet AS (
  SELECT h.hour, p.model, p.replicas * p.gpus_per_replica * p.gpu_hour_usd AS fleet_cost_usd,
         p.replicas * p.slots_per_replica * 3.6e6 AS capacity_ms
  FROM ({hours_sql}) h CROSS JOIN prices p
  WHERE p.kind = 'self_hosted' AND p.model IN (SELECT DISTINCT model FROM rollup_hourly)),
busy AS (
  SELECT hour, model, sum(busy_ms) AS busy_ms, sum({sql.served_requests()}) AS served
  FROM rollup_hourly GROUP BY ALL)
SELECT f.hour, f.model, f.fleet_cost_usd, b.busy_ms, coalesce(b.served, 0) AS served,
       CASE WHEN coalesce(b.busy_ms, 0) > 0 THEN least(b.busy_ms / f.capacity_ms, 1.0)
            WHEN coalesce(b.served, 0) = 0 THEN 0.0 END AS utilization,
       CASE WHEN coalesce(b.busy_ms, 0) > 0 THEN f.fleet_cost_usd * least(b.busy_ms / f.capacity_ms, 1.0)
            WHEN coalesce(b.served, 0) > 0 THEN f.fleet_cost_usd ELSE 0 END AS allocated_usd
FROM fleet f LEFT JOIN busy b ON b.hour = f.hour AND b.model = f.model"""


def hours_sql(since=None, until=None) -> tuple[str, list]:
    """The paid hours of a period: [since, until) floored to hours, else the store's span."""
    lo = sql.time_bucket("hour", "CAST(? AS TIMESTAMP)") if since is not None else "(SELECT min(hour) FROM rollup_hourly)"
    hi = (sql.time_bucket("hour", "CAST(? AS TIMESTAMP) - INTERVAL 1 MICROSECOND") if until is not None
          else "(SELECT max(hour) FROM rollup_hourly)")
    params = [v for v in (since, until) if v is not None]
    return (f"SELECT unnest(generate_series({lo}, {hi}, INTERVAL 1 HOUR)) AS hour "
            f"WHERE {lo} IS NOT NULL AND {hi} IS NOT NULL"), params + params


def fleet_utilization(con: duckdb.DuckDBPyConnection, since=None, until=None) -> pd.DataFrame:
    """Per self-hosted model and hour: fleet cost, allocated and idle $, utilisation (None = unknown)."""
    hours, params = hours_sql(since, until)
    return con.execute(f"SELECT *, fleet_cost_usd - allocated_usd AS idle_usd FROM ({alloc_sql(hours)}) "
                       f"ORDER BY model, hour", params).df()
