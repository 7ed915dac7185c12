"""Slow-path analytics: percentiles, queue-time histograms, segment breakdowns, buckets, concurrency.

Every function takes a DuckDB connection and :class:`~finops.filters.Filters` and returns a
pandas DataFrame. All percentiles are **exact** (DuckDB ``quantile_cont``: linear interpolation
between order statistics, the same as ``numpy.percentile``'s default), never sketched.

What is measured
----------------
* Only requests a model served: semantic-cache hits (``cache_hit = true``) never reached a model
  and are left out of every latency figure (their cost and count are on the Routing page).
* A field the logs lack gives null, never 0: ``ttft_ms_p99`` is null for a gateway log that has
  no TTFT. :func:`coverage` says which fields the filtered rows carry.
* ``ts`` is the arrival at the gateway (finops.schema); a request occupies ``[ts, ts + total_ms]``.

Segments at a percentile (:func:`segments`)
-------------------------------------------
The segment breakdown at P99 is the **mean of each segment over the requests whose total_ms lies
between the 98.5th and the 99.5th percentiles** (±0.5 percentage points around P99), or the
request at the 99th percentile when a group is too small for the band to hold one. So the segments
of a bar add up to that band's mean total_ms, which is close to the P99 of total_ms. It is *not* each
segment's own P99: those would not add up, and the slowest queue and the slowest decode are
rarely the same request.

Segments: ``route`` (route_ms), ``queue`` (queue_ms), ``prefill`` and ``decode`` where the logs
split service time, else ``service`` (service_ms), and ``other`` = total_ms minus the known
segments (network, gateway overhead, unlogged time).
"""
from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from finops import store
from finops.errors import InputError
from finops.filters import Filters

LATENCY_FIELDS: tuple[str, ...] = ("total_ms", "ttft_ms", "queue_ms", "service_ms")
QUANTILES: tuple[float, ...] = (0.5, 0.95, 0.99)
SERVED_SQL = "NOT coalesce(cache_hit, false)"
GROUPS: tuple[str, ...] = ("model", "tenant", "route", "sla_tier", "status", "replica", "site", "strategy")
TIME_GRAINS: dict[str, str] = {
    "minute": "date_trunc('minute', ts)",
    "5min": "time_bucket(INTERVAL 5 MINUTE, ts)",
    "15min": "time_bucket(INTERVAL 15 MINUTE, ts)",
    "hour": "date_trunc('hour', ts)",
    "day": "date_trunc('day', ts)",
    "week": "date_trunc('week', ts)",
}
NONE_LABEL = "(none)"
# segment name -> per-row SQL (null where the logs lack it); "other" closes the sum to total_ms
SEGMENTS: tuple[tuple[str, str], ...] = (
    ("route", "route_ms"),
    ("queue", "queue_ms"),
    ("prefill", "prefill_ms"),
    ("decode", "decode_ms"),
    ("service", "CASE WHEN prefill_ms IS NULL AND decode_ms IS NULL THEN service_ms END"),
)
LENGTH_FIELDS: tuple[str, ...] = ("input_tokens", "output_tokens", "prompt_chars")
# decode time of a request: decode_ms, else everything after the first token
DECODE_MS_SQL = "coalesce(decode_ms, total_ms - ttft_ms)"
TPOT_SQL = "(CASE WHEN output_tokens > 1 THEN coalesce(total_ms - ttft_ms, decode_ms) / (output_tokens - 1) END)"


def grain_for(since, until) -> str:
    """Time grain for percentiles over time: 5 min up to 6 hours, 15 min up to 2 days, hours up to 3 weeks,
    days beyond (a percentile needs enough requests per bucket, a chart enough buckets).

    >>> from datetime import datetime
    >>> grain_for(datetime(2026, 1, 1), datetime(2026, 1, 15))
    'hour'
    """
    if since is None or until is None:
        return "hour"
    hours = (until - since).total_seconds() / 3600
    return "5min" if hours <= 6 else "15min" if hours <= 48 else "hour" if hours <= 21 * 24 else "day"


def p_label(q: float) -> str:
    """0.99 -> 'p99', 0.5 -> 'p50', 0.999 -> 'p99.9'."""
    return "p" + f"{q * 100:.10g}"


def _group_sql(by: str | None) -> str:
    if by is None:
        return "'all'"
    if by in GROUPS:
        return f"coalesce(CAST({by} AS VARCHAR), '{NONE_LABEL}')"
    raise InputError(f"cannot group latency by {by}; choose from {', '.join(GROUPS)}")


def _keys(by) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _check_field(name: str, allowed=LATENCY_FIELDS + ("route_ms", "prefill_ms", "decode_ms")) -> str:
    if name not in allowed:
        raise InputError(f"not a latency field: {name}; choose from {', '.join(allowed)}")
    return name


def _served(f: Filters, extra: str = "TRUE") -> tuple[str, list]:
    where, params = f.where()
    return f"{where} AND {SERVED_SQL} AND ({extra})", params


def coverage(con: duckdb.DuckDBPyConnection, f: Filters) -> dict[str, int]:
    """Non-null count of every canonical column over the served rows matching ``f``."""
    where, params = _served(f)
    return store.field_coverage(con, where, params)


def lacking(cov: dict[str, int], fields) -> list[str]:
    """The fields of ``fields`` that no filtered row carries (for "these logs carry no queue_ms")."""
    return [n for n in fields if not cov.get(n)]


# ---------------------------------------------------------------- percentiles

def _quantile_cols(fields, quantiles) -> tuple[str, str]:
    """(inner aggregate SQL, outer unpacking SQL) for exact percentiles of ``fields``."""
    qs = ", ".join(repr(float(q)) for q in quantiles)
    inner = ", ".join(f"quantile_cont({c}, [{qs}]) AS _q_{c}" for c in fields)
    outer = ", ".join(f"_q_{c}[{i + 1}] AS {c}_{p_label(q)}" for c in fields for i, q in enumerate(quantiles))
    return inner, outer


def percentiles(con: duckdb.DuckDBPyConnection, f: Filters, by=("model",), fields=LATENCY_FIELDS,
                quantiles=QUANTILES) -> pd.DataFrame:
    """Per group: ``requests`` and ``<field>_p50``, ``<field>_p95``, ``<field>_p99`` of each field.

    A percentile is null where no request of the group carries the field.
    ``by`` lists dimensions of :data:`GROUPS` and/or one time grain of :data:`TIME_GRAINS`.
    """
    fields = [_check_field(c) for c in fields]
    keys = _keys(by)
    exprs = [f"{TIME_GRAINS[k]} AS {k}" if k in TIME_GRAINS else f"{_group_sql(k)} AS {k}" for k in keys]
    where, params = _served(f)
    inner, outer = _quantile_cols(fields, quantiles)
    group = f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}" if keys else ""
    key_list = "".join(f"{k}, " for k in keys)
    sql = (f"SELECT {key_list}requests, {outer} FROM ("
           f"SELECT {''.join(e + ', ' for e in exprs)}count(*) AS requests, {inner} "
           f"FROM requests WHERE {where} {group}) "
           f"{'ORDER BY ' + ', '.join(keys) if keys else ''}")
    out = con.execute(sql, params).df()
    if not keys and len(out) and out["requests"].iloc[0] == 0:
        return out.iloc[0:0]
    for c in out.columns:
        if c not in keys and c != "requests":
            out[c] = out[c].astype("float64")
    return out


def over_time(con: duckdb.DuckDBPyConnection, f: Filters, field: str = "total_ms", grain: str = "hour",
              by: str | None = "model", quantiles=QUANTILES) -> pd.DataFrame:
    """Per time bucket (``ts``) and group: requests and the percentiles of ``field`` (p50, p95, p99)."""
    if grain not in TIME_GRAINS:
        raise InputError(f"unknown time grain {grain}; choose from {', '.join(TIME_GRAINS)}")
    _check_field(field)
    where, params = _served(f, f"{field} IS NOT NULL")
    qs = ", ".join(repr(float(q)) for q in quantiles)
    outer = ", ".join(f"_q[{i + 1}] AS {p_label(q)}" for i, q in enumerate(quantiles))
    sql = (f"SELECT ts, grp, requests, {outer} FROM ("
           f"SELECT {TIME_GRAINS[grain]} AS ts, {_group_sql(by)} AS grp, count(*) AS requests, "
           f"quantile_cont({field}, [{qs}]) AS _q FROM requests WHERE {where} GROUP BY 1, 2) ORDER BY grp, ts")
    out = con.execute(sql, params).df()
    for q in quantiles:
        out[p_label(q)] = out[p_label(q)].astype("float64")
    return out


# ---------------------------------------------------------------- histograms

def histogram_edges(lo: float, hi: float, bins: int, scale: str = "linear",
                    lowest_positive: float | None = None) -> np.ndarray:
    """Bin edges for values in ``[lo, hi]``.

    ``linear``: ``numpy.linspace(lo, hi, bins + 1)``, widened to ``lo - 0.5, hi + 0.5`` when
    ``lo == hi`` (as ``numpy.histogram`` does). ``log``: a first bin ``[0, a)`` for the zeros
    (a request that did not wait has queue_ms = 0, which no log bin holds), then ``bins``
    geometric bins from ``a`` = the lowest positive value to ``hi``.

    >>> histogram_edges(0.0, 10.0, 5).tolist()
    [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    >>> histogram_edges(0.0, 1000.0, 3, "log", lowest_positive=1.0).tolist()
    [0.0, 1.0, 10.0, 100.0, 1000.0]
    """
    if bins < 1:
        raise InputError("a histogram needs at least one bin")
    if scale == "linear":
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        return np.linspace(lo, hi, bins + 1)
    if scale != "log":
        raise InputError(f"unknown histogram scale {scale}; choose linear or log")
    if lowest_positive is None or not lowest_positive > 0:
        return np.array([0.0, 1.0])            # nothing positive: one bin holding the zeros
    a, b = float(lowest_positive), float(max(hi, lowest_positive))
    if b <= a:
        a, b = a / np.sqrt(10.0), a * np.sqrt(10.0)
    edges = np.geomspace(a, b, bins + 1)
    edges[0], edges[-1] = a, b
    return np.concatenate([[0.0], edges])


def histogram(con: duckdb.DuckDBPyConnection, f: Filters, field: str = "queue_ms", bins: int = 40,
              scale: str = "linear", by: str | None = "model") -> pd.DataFrame:
    """Counts of ``field`` per group on linear or log bins: columns ``grp, bin, lo, hi, count``.

    Each group gets its own edges from its own range (:func:`histogram_edges`); a group's edges
    are ``lo`` of its bins plus the last ``hi``. Bins are half-open ``[lo, hi)`` except the last,
    which is closed: the same counts as ``numpy.histogram(values, bins=edges)``.
    """
    _check_field(field)
    g = _group_sql(by)
    where, params = _served(f, f"{field} IS NOT NULL")
    stats = con.execute(f"SELECT {g} AS grp, min({field}), max({field}), min({field}) FILTER (WHERE {field} > 0) "
                        f"FROM requests WHERE {where} GROUP BY 1 ORDER BY 1", params).fetchall()
    cols = ["grp", "bin", "lo", "hi", "count"]
    if not stats:
        return pd.DataFrame({c: [] for c in cols})
    groups, los, norms, edge_lists, nbins, logs = [], [], [], [], [], []
    for grp, lo, hi, pos in stats:
        edges = histogram_edges(float(lo), float(hi), bins, scale, None if pos is None else float(pos))
        groups.append(grp)
        edge_lists.append(edges.tolist())
        nbins.append(len(edges) - 1)
        if scale == "log" and len(edges) > 2:
            logs.append(True)
            los.append(float(np.log(edges[1])))
            norms.append((len(edges) - 2) / float(np.log(edges[-1]) - np.log(edges[1])))
        else:
            logs.append(False)
            los.append(float(edges[0]))
            norms.append((len(edges) - 1) / float(edges[-1] - edges[0]))
    # first guess of the bin from the formula, then one step of correction against the edges
    # themselves: numpy.histogram's own rule for uniform bins, so the counts are identical.
    sql = f"""
WITH e AS (SELECT unnest(?::VARCHAR[]) AS grp, unnest(?::DOUBLE[]) AS lo, unnest(?::DOUBLE[]) AS norm,
                  unnest(?::DOUBLE[][]) AS edges, unnest(?::INTEGER[]) AS nb, unnest(?::BOOLEAN[]) AS lg),
x AS (SELECT {g} AS grp, {field} AS v FROM requests WHERE {where}),
i0 AS (SELECT x.grp, v, e.edges, e.nb,
              least(greatest(CAST(CASE WHEN NOT e.lg THEN floor((v - e.lo) * e.norm)
                                       WHEN v < e.edges[2] THEN 0
                                       ELSE 1 + floor((ln(v) - e.lo) * e.norm) END AS BIGINT), 0), e.nb - 1) AS i
       FROM x JOIN e ON e.grp = x.grp),
i1 AS (SELECT grp, i - CAST(v < edges[i + 1] AS INTEGER)
                     + CAST(v >= edges[i + 2] AND i < nb - 1 AS INTEGER) AS bin FROM i0)
SELECT grp, bin, count(*) AS n FROM i1 GROUP BY 1, 2"""
    counted = con.execute(sql, [groups, los, norms, edge_lists, nbins, logs] + params).fetchall()
    counts = {(grp, int(b)): int(n) for grp, b, n in counted}
    rows = []
    for grp, edges in zip(groups, edge_lists, strict=True):
        for b in range(len(edges) - 1):
            rows.append((grp, b, edges[b], edges[b + 1], counts.get((grp, b), 0)))
    out = pd.DataFrame(rows, columns=cols)
    out["count"] = out["count"].astype("int64")
    return out


# ---------------------------------------------------------------- segments

def segments(con: duckdb.DuckDBPyConnection, f: Filters, by: str | None = "model", quantiles=QUANTILES,
             band: float = 0.005) -> pd.DataFrame:
    """Mean segments of the requests around each percentile of total_ms (see the module docstring).

    The band of percentile ``q`` is ``[Q(q - band), Q(q + band)]`` of total_ms (``quantile_cont``),
    widened to take in the order statistic at ``q`` (``quantile_disc``) so that even a group of a
    few requests has one. Long format: ``grp, percentile ('P99'), quantile, requests_in_band,
    total_ms, segment, ms``. Only segments the band's requests carry appear; ``other`` closes the
    sum to ``total_ms``.
    """
    g = _group_sql(by)
    where, params = _served(f, "total_ms IS NOT NULL")
    seg_exprs = ", ".join(f"{sql} AS {name}" for name, sql in SEGMENTS)
    known = " - ".join(f"coalesce({name}, 0)" for name, _ in SEGMENTS)
    seg_aggs = ", ".join(f"CASE WHEN count({name}) > 0 THEN avg(coalesce({name}, 0)) END AS {name}"
                         for name, _ in SEGMENTS)
    qs = [float(q) for q in quantiles]
    bounds = ", ".join(f"{max(q - band, 0.0)!r}, {min(q + band, 1.0)!r}" for q in qs)
    disc = ", ".join(repr(q) for q in qs)
    sql = f"""
WITH r AS (SELECT {g} AS grp, total_ms, {seg_exprs} FROM requests WHERE {where}),
b AS (SELECT grp, quantile_cont(total_ms, [{bounds}]) AS qc, quantile_disc(total_ms, [{disc}]) AS qd
      FROM r GROUP BY grp),
bands AS (SELECT grp, q, least(qc[2 * i + 1], qd[i + 1]) AS lo, greatest(qc[2 * i + 2], qd[i + 1]) AS hi
          FROM b, (SELECT unnest([{disc}]) AS q, unnest(range({len(qs)})) AS i)),
near AS (SELECT r.*, bands.q FROM r JOIN bands ON r.grp = bands.grp AND r.total_ms BETWEEN bands.lo AND bands.hi)
SELECT grp, q AS quantile, count(*) AS requests_in_band, avg(total_ms) AS total_ms, {seg_aggs},
       avg(total_ms - {known}) AS other
FROM near GROUP BY 1, 2 ORDER BY 1, 2"""
    wide = con.execute(sql, params).df()
    names = [n for n, _ in SEGMENTS] + ["other"]
    cols = ["grp", "percentile", "quantile", "requests_in_band", "total_ms", "segment", "ms"]
    if wide.empty:
        return pd.DataFrame({c: [] for c in cols})
    long = wide.melt(id_vars=["grp", "quantile", "requests_in_band", "total_ms"], value_vars=names,
                     var_name="segment", value_name="ms").dropna(subset=["ms"])
    long["percentile"] = long["quantile"].map(lambda q: p_label(q).upper())
    long["order"] = long["segment"].map({n: i for i, n in enumerate(names)})
    long = long.sort_values(["grp", "quantile", "order"]).drop(columns="order").reset_index(drop=True)
    return long[cols]


# ---------------------------------------------------------------- length buckets

def length_buckets(con: duckdb.DuckDBPyConnection, f: Filters, length: str = "input_tokens",
                   by: str | None = "model", quantiles=QUANTILES) -> pd.DataFrame:
    """Latency by power-of-two bucket of a length (prompt: input_tokens / prompt_chars; output_tokens).

    Buckets: ``[0, 32)``, ``[32, 64)``, ``[64, 128)``, ... Per group and bucket: requests,
    total_ms percentiles, the P50 of the segment the length drives (prefill_ms or TTFT for a
    prompt length, decode_ms for an output length; null where absent) and the P50 of ms per
    unit of length. A prefill-bound model's latency climbs with the prompt bucket; a
    decode-bound one with the output bucket.
    """
    if length not in LENGTH_FIELDS:
        raise InputError(f"not a length field: {length}; choose from {', '.join(LENGTH_FIELDS)}")
    g = _group_sql(by)
    where, params = _served(f, f"{length} IS NOT NULL AND total_ms IS NOT NULL")
    seg = "coalesce(prefill_ms, ttft_ms)" if length != "output_tokens" else DECODE_MS_SQL
    qs = ", ".join(repr(float(q)) for q in quantiles)
    outer = ", ".join(f"_q[{i + 1}] AS total_ms_{p_label(q)}" for i, q in enumerate(quantiles))
    sql = f"""
SELECT grp, bucket_lo, CASE WHEN bucket_lo = 0 THEN 32 ELSE 2 * bucket_lo END AS bucket_hi, requests, {outer},
       segment_ms_p50, ms_per_unit_p50 FROM (
  SELECT {g} AS grp,
         CASE WHEN {length} < 32 THEN 0 ELSE CAST(pow(2, floor(log2({length}))) AS BIGINT) END AS bucket_lo,
         count(*) AS requests, quantile_cont(total_ms, [{qs}]) AS _q,
         quantile_cont({seg}, 0.5) AS segment_ms_p50,
         quantile_cont(total_ms / nullif({length}, 0), 0.5) AS ms_per_unit_p50
  FROM requests WHERE {where} GROUP BY 1, 2) ORDER BY grp, bucket_lo"""
    out = con.execute(sql, params).df()
    out["bucket"] = [f"{lo:,}–{hi - 1:,}" for lo, hi in zip(out["bucket_lo"], out["bucket_hi"], strict=True)]
    for c in out.columns:
        if c.startswith(("total_ms_", "segment_ms", "ms_per_unit")):
            out[c] = out[c].astype("float64")
    out.attrs["segment"] = "prefill_ms (else ttft_ms)" if length != "output_tokens" else "decode_ms (else total − TTFT)"
    return out


# ---------------------------------------------------------------- decode rate vs concurrency

def concurrency_sql(where: str, per: str = "model", extra_cols: str = "", tolerance_ms: float = 0.0) -> str:
    """Per request, the number of requests of the same model (or replica) in service at its start.

    A request is in service over ``[ts + route_ms + queue_ms, ts + total_ms]`` (in flight
    ``[ts, ts + total_ms]`` where queue_ms is absent). Sweep: +1 at each start, -1 at each
    end, a running sum ordered by time; events at the same instant are applied together, so
    back-to-back requests do not overlap. ``tolerance_ms`` trims each end (logs rounded to the
    millisecond make a hand-over look like an overlap). Columns: ``grp, start_ms, end_ms,
    concurrency`` plus ``extra_cols`` (expressions over the request row).
    """
    part = {"model": "model", "replica": "model, coalesce(replica, '')"}[per]
    extra = f", {extra_cols}" if extra_cols else ""
    return f"""
WITH r AS (SELECT model AS grp, {part} AS _p,
                  epoch_us(ts) / 1e3 + coalesce(route_ms, 0) + coalesce(queue_ms, 0) AS start_ms,
                  epoch_us(ts) / 1e3 + total_ms - {float(tolerance_ms)!r} AS end_ms{extra}
           FROM requests WHERE {where} AND total_ms IS NOT NULL),
ev AS (SELECT *, start_ms AS _t, 1 AS _d FROM r
       UNION ALL BY NAME SELECT _p, end_ms AS _t, -1 AS _d FROM r),
c AS (SELECT *, sum(_d) OVER (PARTITION BY _p ORDER BY _t RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             AS concurrency FROM ev)
SELECT * EXCLUDE (_p, _t, _d) FROM c WHERE _d = 1"""


def decode_vs_concurrency(con: duckdb.DuckDBPyConnection, f: Filters, per: str = "model") -> pd.DataFrame:
    """Decode tokens/s against the number of requests in service, per model.

    Decode tokens/s of a request = ``output_tokens / (decode_ms / 1000)`` (decode_ms, else
    total_ms − ttft_ms). Concurrency: :func:`concurrency_sql`. Columns: ``grp, concurrency,
    requests, tokens_per_s_p10, tokens_per_s_p50, tokens_per_s_p90``. If decode speed falls as
    concurrency rises, the model is decode-bound (memory bandwidth / KV cache).
    """
    if per not in ("model", "replica"):
        raise InputError("per must be model or replica")
    where, params = _served(f)
    rate = f"output_tokens / nullif({DECODE_MS_SQL}, 0) * 1000"
    inner = concurrency_sql(where, per, extra_cols=f"{rate} AS rate")
    sql = f"""
SELECT grp, concurrency, count(*) AS requests,
       quantile_cont(rate, 0.1) AS tokens_per_s_p10, quantile_cont(rate, 0.5) AS tokens_per_s_p50,
       quantile_cont(rate, 0.9) AS tokens_per_s_p90
FROM ({inner}) WHERE rate IS NOT NULL AND rate > 0 GROUP BY 1, 2 ORDER BY 1, 2"""
    # the rate is only known where output tokens and a decode time are: skip the sweep otherwise
    cov = con.execute(f"SELECT count(*) FROM requests WHERE {where} AND output_tokens > 0 "
                      f"AND {DECODE_MS_SQL} > 0", params).fetchall()[0][0]
    if not cov:
        return pd.DataFrame({c: [] for c in ("grp", "concurrency", "requests", "tokens_per_s_p10",
                                             "tokens_per_s_p50", "tokens_per_s_p90")})
    out = con.execute(sql, params).df()
    out["concurrency"] = out["concurrency"].astype("int64")
    return out


# ---------------------------------------------------------------- TTFT, TPOT, slowest

def ttft_tpot(con: duckdb.DuckDBPyConnection, f: Filters, by: str | None = "model",
              quantiles=QUANTILES) -> pd.DataFrame:
    """Per group: TTFT percentiles and time per output token (TPOT) percentiles, in ms.

    ``TPOT = (total_ms - ttft_ms) / (output_tokens - 1)`` (the vLLM benchmark definition;
    decode_ms replaces ``total_ms - ttft_ms`` where TTFT is absent), for requests with more
    than one output token. Null where the logs lack the fields.
    """
    g = _group_sql(by)
    where, params = _served(f)
    qs = ", ".join(repr(float(q)) for q in quantiles)
    outer = ", ".join(f"_t[{i + 1}] AS ttft_ms_{p_label(q)}, _p[{i + 1}] AS tpot_ms_{p_label(q)}"
                      for i, q in enumerate(quantiles))
    sql = (f"SELECT grp, requests, with_ttft, with_tpot, {outer} FROM ("
           f"SELECT {g} AS grp, count(*) AS requests, count(ttft_ms) AS with_ttft, count({TPOT_SQL}) AS with_tpot, "
           f"quantile_cont(ttft_ms, [{qs}]) AS _t, quantile_cont({TPOT_SQL}, [{qs}]) AS _p "
           f"FROM requests WHERE {where} GROUP BY 1) ORDER BY grp")
    out = con.execute(sql, params).df()
    for c in out.columns:
        if c.startswith(("ttft_ms_", "tpot_ms_")):
            out[c] = out[c].astype("float64")
    return out


SLOWEST_COLUMNS = ("request_id", "ts", "model", "tenant", "sla_tier", "route", "replica", "input_tokens",
                   "output_tokens", "prompt_chars", "total_ms", "route_ms", "queue_ms", "prefill_ms", "decode_ms",
                   "service_ms", "ttft_ms", "status")


def slowest(con: duckdb.DuckDBPyConnection, f: Filters, n: int = 20) -> pd.DataFrame:
    """The ``n`` slowest requests by total_ms, each with its segments and ``other_ms`` (the unlogged rest)."""
    where, params = _served(f, "total_ms IS NOT NULL")
    known = " - ".join(f"coalesce({sql}, 0)" for _, sql in SEGMENTS)
    sql = (f"SELECT {', '.join(SLOWEST_COLUMNS)}, total_ms - {known} AS other_ms "
           f"FROM requests WHERE {where} ORDER BY total_ms DESC, request_id LIMIT ?")
    return con.execute(sql, params + [int(n)]).df()
