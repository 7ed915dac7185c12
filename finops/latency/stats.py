"""Slow-path analytics: percentiles, queue-time histograms, segment breakdowns, buckets, concurrency.

Every function takes a DuckDB connection and :class:`~finops.filters.Filters` and returns a
pandas DataFrame.

Where percentiles come from
---------------------------
* **From the hourly sketch** by default, when the question fits it: whole hours (``since`` and
  ``until`` on the hour), no tenant or SLA-tier filter, grouped by model and/or hour, day or week,
  for the sketched fields (total_ms, queue_ms, service_ms, ttft_ms, tpot_ms), once the store's
  sketch is built for its current version (``store.sketch_ready``). Read by
  :func:`sketch_quantiles` from ``store.latency_hourly``, every percentile is within
  ``store.SKETCH_ALPHA`` (0.99 %) of the exact one; :func:`percentiles`, :func:`over_time` and
  :func:`ttft_tpot` use it unless called with ``exact=True``.
* **Exact** otherwise (a tenant or tier filter, a partial hour, another grouping or field, or
  ``exact=True``): DuckDB ``quantile_cont``, linear interpolation between order statistics, the same as
  ``numpy.percentile``'s default.

``attrs['max_rel_error']`` of their frames says which it is (0 for exact figures).

What else the Latency page reads from tables written at load time (``store.DERIVED``), by model, without
a tenant or tier filter, over whole hours (days for the daily tables), unless called with ``exact=True``:
:func:`histogram` (the hourly sketch: exact edges and totals, a value within 2 % of an edge may be counted
beside it), :func:`segments` (``segments_daily``: the band cut at bucket edges, its total within 2 %),
:func:`length_buckets` (``length_latency_daily``: exact counts, percentiles within 0.99 %),
:func:`decode_vs_concurrency` (``inservice_minute`` and ``decode_rate_minute``: exact levels and counts,
percentiles within 0.99 %), :func:`coverage` and :func:`slowest` (exact). Each says so in its attrs, and
``tests/test_latency_derived.py`` holds each to the raw-row path on the sample store.

What raw rows are read
----------------------
Everything exact reads the requests of ``store.raw_scope(con, f)``: the filtered period while it holds at
most ``store.RAW_ROW_BUDGET`` (10M) requests, else its latest whole hours that hold that many (a quantile
holds its group's values in memory, and over 100M rows it would not fit). Sketch figures cover the
whole period. Pages say when the scope is narrower than the period (``RawScope.note``).

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

from dataclasses import replace

import duckdb
import numpy as np
import pandas as pd

from finops import schema, sql, store
from finops.errors import InputError
from finops.filters import Filters

QUANTILES: tuple[float, ...] = (0.5, 0.95, 0.99)
#: below this many requests a P99 is the slowest request or next to it (one in a hundred left out): the SLO's
#: small-sample notes and the capacity fit of the logged waits both stop judging under it
TAIL_REQUESTS = 100
# the time buckets (sql.time_bucket over ts) latency groups by
TIME_GRAINS: tuple[str, ...] = ("minute", "5min", "15min", "hour", "day", "week")
NONE_LABEL = "(none)"
# segment name -> per-row SQL (null where the logs lack it); "other" closes the sum to total_ms
SEGMENTS: tuple[tuple[str, str], ...] = store.SEGMENT_EXPRS


def p_label(q: float) -> str:
    """0.99 -> 'p99', 0.5 -> 'p50', 0.999 -> 'p99.9'."""
    return "p" + f"{q * 100:.10g}"


def _group_sql(by: str | None) -> str:
    if by is None:
        return "'all'"
    if by not in sql.GROUP_COLUMNS:
        raise InputError(f"cannot group latency by {by}; choose from {', '.join(sql.GROUP_COLUMNS)}")
    by = sql.column(by, sql.GROUP_COLUMNS)
    return f"coalesce(CAST({by} AS VARCHAR), '{NONE_LABEL}')"


def _group_key(by: str) -> str:
    """``by`` checked as a group column (the message of :func:`_group_sql`)."""
    _group_sql(by)
    return sql.column(by, sql.GROUP_COLUMNS)


def _keys(by) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _check_field(name: str) -> str:
    return sql.column(name, sql.LATENCY_COLUMNS, "latency field")


def _scoped(con: duckdb.DuckDBPyConnection, f: Filters) -> Filters:
    """``f`` narrowed to what a raw-row analysis reads at once (``store.raw_scope``): the whole period up to
    ``store.RAW_ROW_BUDGET`` requests, else its latest hours."""
    return store.raw_scope(con, f).filters


def _served_where(f: Filters, extra: str = "TRUE") -> tuple[str, list]:
    where, params = f.where()
    return f"{where} AND {sql.SERVED} AND ({extra})", params


def coverage(con: duckdb.DuckDBPyConnection, f: Filters, exact: bool = False) -> dict[str, int]:
    """Non-null count of every canonical column over the served rows matching ``f``: over whole hours, unless
    ``exact``, summed from ``store.coverage_hourly`` (written at load time: the same counts, for the whole
    period), else counted in the raw rows of ``store.raw_scope``."""
    if not exact and store.whole_hours(f) and store.derived_ready(con, "coverage_hourly"):
        where, params = f.where(ts_col="hour")
        got = dict(con.execute(f"SELECT field, sum(n) FROM coverage_hourly WHERE {where} GROUP BY 1",
                               params).fetchall())
        return {n: int(got.get(n, 0)) for n in schema.NAMES}
    f = _scoped(con, f)
    where, params = _served_where(f)
    return store.field_coverage(con, where, params)


def lacking(cov: dict[str, int], fields) -> list[str]:
    """The fields of ``fields`` that no filtered row carries (for "these logs carry no queue_ms")."""
    return [n for n in fields if not cov.get(n)]


# ---------------------------------------------------------------- the hourly sketch

SKETCH_KEYS: tuple[str, ...] = ("model", "hour", "day", "week")


def sketch_usable(con: duckdb.DuckDBPyConnection, f: Filters, keys) -> bool:
    """Whether percentiles for ``f`` grouped by ``keys`` can be read from the hourly sketch: whole
    hours, no tenant or tier filter (the sketch is per model), keys among :data:`SKETCH_KEYS`."""
    if f.tenants or f.sla_tiers or any(k not in SKETCH_KEYS for k in keys):
        return False
    if any(t is not None and (t.minute or t.second or t.microsecond) for t in (f.since, f.until)):
        return False
    return store.sketch_ready(con)


def _sketch_key_sql(key: str) -> str:
    return {"model": f"CASE WHEN model = '' THEN '{NONE_LABEL}' ELSE model END", "hour": "hour",
            "day": sql.time_bucket("day", "hour"), "week": sql.time_bucket("week", "hour")}[key]


#: the sketch tables (store.DERIVED) and the keys each may be grouped by besides SKETCH_KEYS
SKETCH_TABLES: tuple[str, ...] = ("latency_hourly", "latency_sla_hourly")
LABEL_KEYS: tuple[str, ...] = ("model",) + store.SLA_SKETCH_KEYS


def sketch_quantiles(con: duckdb.DuckDBPyConnection, f: Filters, keys, fields, quantiles=QUANTILES,
                     table: str = "latency_hourly") -> pd.DataFrame:
    """Percentiles read from the hourly sketch (``store.latency_hourly``): per group of ``keys`` and field,
    ``n`` (values counted) and one column per quantile (``p50``...). ``table="latency_sla_hourly"`` reads
    the SLA sketch, which may also be grouped (and filtered) by ``tenant`` and ``sla_tier``.

    The value at a rank lies in a bucket ``[g^k, g^(k+1))`` (g = ``store.SKETCH_GAMMA``) holding values
    between its stored min and max; the estimate is ``2 g^(k+1) / (g + 1)`` clamped to them, within
    ``store.SKETCH_ALPHA`` (0.99%) of every value of the bucket; exact where the bucket holds one value
    (all the zeros of queue_ms, for one). A percentile interpolates between two ranks as numpy does, so
    it too is within 0.99% of the exact percentile (for positive values).
    """
    table = sql.column(table, SKETCH_TABLES, "sketch table")
    allowed = SKETCH_KEYS + (store.SLA_SKETCH_KEYS if table == "latency_sla_hourly" else ())
    where, params = f.where(ts_col="hour")
    fields = list(fields)
    keys = [sql.column(k, allowed, "sketch key") for k in keys]
    labels = {k: store.distinct_values(con, k) for k in keys if k in LABEL_KEYS}
    cols = list(keys) + ["field", "n"] + [p_label(q) for q in quantiles]
    # Fetch the buckets as numbers (no GROUP BY or ORDER BY in SQL: with hours as keys there are as many
    # groups as rows); numpy sorts them by group and bucket and sums the buckets several loads share.
    key_num = {"model": "coalesce(list_position(?, model), 0)", "tenant": "coalesce(list_position(?, tenant), 0)",
               "sla_tier": "coalesce(list_position(?, sla_tier), 0)", "hour": "epoch_us(hour)",
               "day": f"epoch_us({sql.time_bucket('day', 'hour')})", "week": f"epoch_us({sql.time_bucket('week', 'hour')})"}
    key_params = [labels[k] for k in keys if k in labels]
    select = "".join(f"{key_num[k]} AS {k}, " for k in keys)
    if "hour" in keys:
        got = con.sql(f"SELECT {select}list_position(?, field) - 1 AS field, k, n, lo, hi FROM {table} "
                      f"WHERE {where} AND list_contains(?, field)",
                      params=key_params + [fields] + params + [fields]).fetchnumpy()
    else:   # days, weeks, models or nothing: few groups, so DuckDB sums the buckets before they are fetched
        group = ", ".join(str(i + 1) for i in range(len(keys) + 2))
        got = con.sql(f"SELECT {select}list_position(?, field) - 1 AS field, k, sum(n) AS n, min(lo) AS lo, "
                      f"max(hi) AS hi FROM {table} WHERE {where} AND list_contains(?, field) GROUP BY {group}",
                      params=key_params + [fields] + params + [fields]).fetchnumpy()
    if len(got["k"]) == 0:
        return pd.DataFrame({c: [] for c in cols})
    # group columns packed into one integer key (field, model, time, bucket) and sorted once
    names_in_order = ["field"] + sorted(keys, key=lambda c: c != "model")
    group_cols = [np.asarray(got[c], dtype=np.int64) for c in names_in_order]
    k = np.asarray(got["k"], dtype=np.int64)
    order = _sort_order(group_cols + [np.where(k == store.SKETCH_ZERO_K, k.min(initial=0) - 1, k)])
    group_cols = [c[order] for c in group_cols]
    k = k[order]
    n = np.asarray(got["n"], dtype=np.int64)[order]
    lo, hi = np.asarray(got["lo"], dtype=float)[order], np.asarray(got["hi"], dtype=float)[order]
    new_group = np.zeros(len(k), dtype=bool)
    new_group[0] = True
    for c in group_cols:
        new_group[1:] |= c[1:] != c[:-1]
    # one entry per (group, bucket): loads sharing an hour put the same bucket in several rows
    run = np.flatnonzero(new_group | np.r_[True, k[1:] != k[:-1]])
    n = np.add.reduceat(n, run)
    lo, hi = np.minimum.reduceat(lo, run), np.maximum.reduceat(hi, run)
    k, new_group = k[run], new_group[run]
    group_cols = [c[run] for c in group_cols]
    first = np.flatnonzero(new_group)
    cum = np.cumsum(n)
    before = cum[first] - n[first]                       # values in earlier groups
    size = np.add.reduceat(n, first)
    g = store.SKETCH_GAMMA
    with np.errstate(over="ignore"):
        rep = np.where(k == store.SKETCH_ZERO_K, (lo + hi) / 2, 2 * np.power(g, k + 1.0) / (g + 1))
    est = np.clip(rep, lo, hi)
    out = pd.DataFrame({c: v[first] for c, v in zip(names_in_order, group_cols, strict=True)})
    for key in keys:
        if key in labels:
            names = np.array([NONE_LABEL] + labels[key], dtype=object)
            out[key] = names[out[key].to_numpy()]
        else:
            out[key] = pd.to_datetime(out[key].to_numpy(), unit="us")
    out["field"] = np.array(fields, dtype=object)[out["field"].to_numpy()]
    out["n"] = size
    for q in quantiles:
        h = (size - 1) * float(q)
        j = np.floor(h).astype(np.int64)
        frac = h - j
        j1 = np.minimum(j + 1, size - 1)
        a = est[np.searchsorted(cum, before + j, side="right")]
        b = est[np.searchsorted(cum, before + j1, side="right")]
        out[p_label(q)] = a + frac * (b - a)
    return out[cols]


def _sort_order(columns: list[np.ndarray]) -> np.ndarray:
    """Stable order sorting by ``columns`` (integers, first column first): one sort of a packed 64-bit
    key where the value ranges allow (about half the time of lexsort over the columns), else lexsort."""
    packed = np.zeros(len(columns[0]), dtype=np.int64)
    bits = 0
    for c in columns:
        lo, span = (int(c.min()), int(c.max()) - int(c.min()) + 1) if len(c) else (0, 1)
        width = max(span - 1, 1).bit_length()
        bits += width
        if bits > 62:
            return np.lexsort(columns[::-1])
        packed = (packed << width) | (c - lo)
    return np.argsort(packed, kind="stable")


def bucket_estimates(k: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The value a sketch bucket stands for: ``2 g^(k+1) / (g + 1)`` clamped to the bucket's stored min and max
    (the middle of min and max for the bucket of zero and below), within ``store.SKETCH_ALPHA`` of each of its
    values (:func:`sketch_quantiles`)."""
    g = store.SKETCH_GAMMA
    with np.errstate(over="ignore"):
        rep = np.where(k == store.SKETCH_ZERO_K, (lo + hi) / 2, 2 * np.power(g, k + 1.0) / (g + 1))
    return np.clip(rep, lo, hi)


def bucket_quantiles(group: np.ndarray, k: np.ndarray, n: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                     quantiles) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentiles per group from sketch buckets, one row per (group, bucket) (groups as integer codes, any
    order; a bucket appears once per group: sum the loads' rows first). Returns ``(groups, sizes, values)``,
    ``values[i, j]`` the ``quantiles[j]`` of ``groups[i]``: the rank interpolated as numpy does between the
    buckets' estimates (:func:`bucket_estimates`), within ``store.SKETCH_ALPHA`` of the exact percentile for
    positive values."""
    group, k = np.asarray(group, dtype=np.int64), np.asarray(k, dtype=np.int64)
    order = np.lexsort((k, group))
    group, k = group[order], k[order]
    n = np.asarray(n, dtype=np.int64)[order]
    est = bucket_estimates(k, np.asarray(lo, dtype=float)[order], np.asarray(hi, dtype=float)[order])
    if len(k) == 0:
        return group, n, np.zeros((0, len(quantiles)))
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    cum = np.cumsum(n)
    before = cum[first] - n[first]
    size = np.add.reduceat(n, first)
    values = np.empty((len(first), len(quantiles)))
    for j, q in enumerate(quantiles):
        h = (size - 1) * float(q)
        i = np.floor(h).astype(np.int64)
        frac = h - i
        a = est[np.searchsorted(cum, before + i, side="right")]
        b = est[np.searchsorted(cum, before + np.minimum(i + 1, size - 1), side="right")]
        values[:, j] = a + frac * (b - a)
    return group[first], size, values


def whole_days(f: Filters) -> bool:
    """Whether ``f``'s period starts and ends at midnight UTC (or is open): what the daily tables answer."""
    return all(t is None or not (t.hour or t.minute or t.second or t.microsecond) for t in (f.since, f.until))


def derived_usable(con: duckdb.DuckDBPyConnection, f: Filters, table: str, by: str | None = "model",
                   grain: str = "day") -> bool:
    """Whether the derived table ``table`` (``store.DERIVED``, per model and ``grain``) answers ``f`` grouped by
    ``by``: by model, no tenant or tier filter, a period of whole ``grain`` (day, hour or minute), the table
    current. Otherwise the raw rows of ``store.raw_scope`` are read."""
    if by != "model" or f.tenants or f.sla_tiers:
        return False
    whole = {"day": whole_days(f), "hour": store.whole_hours(f),
             "minute": all(t is None or not (t.second or t.microsecond) for t in (f.since, f.until))}[grain]
    return whole and store.derived_ready(con, table)


def _model_names(names) -> np.ndarray:
    """Stored model names as the raw-row path labels them ('' is :data:`NONE_LABEL`)."""
    return np.array([NONE_LABEL if m == "" else m for m in names], dtype=object)


def _served_requests(con: duckdb.DuckDBPyConnection, f: Filters, keys) -> pd.DataFrame:
    """Served (not cache-hit) requests per group of ``keys``, from the hourly rollups."""
    where, params = f.where(ts_col="hour")
    keys = [sql.column(k, SKETCH_KEYS, "sketch key") for k in keys]
    key_sql = ", ".join(f"{_sketch_key_sql(k)} AS {k}" for k in keys)
    group = "GROUP BY ALL" if keys else ""
    return con.sql(f"SELECT {key_sql + ', ' if keys else ''}sum({sql.served_requests()}) AS requests "
                   f"FROM rollup_hourly WHERE {where} {group}", params=params).df()


def _from_sketch(con, f: Filters, keys: list[str], fields, quantiles, counts: dict[str, str] | None = None
                 ) -> pd.DataFrame:
    """:func:`percentiles` from the sketch: the same columns, ``attrs['max_rel_error']`` set. ``counts``
    names a column for the number of requests carrying a field (e.g. ``{"ttft_ms": "with_ttft"}``)."""
    counts = counts or {}
    served = _served_requests(con, f, keys)
    out = served[served["requests"] > 0]
    on = keys or ["_all"]
    if not keys:
        out = out.assign(_all=0)
    q = sketch_quantiles(con, f, keys, fields, quantiles)
    for field in fields:
        names = {p_label(x): f"{field}_{p_label(x)}" for x in quantiles}
        keep = list(names.values()) + ([counts[field]] if field in counts else [])
        sub = q[q["field"] == field].rename(columns={**names, "n": counts.get(field, "n")})
        if sub.empty:
            out = out.assign(**{c: np.nan for c in keep})
        else:
            out = out.merge(sub.assign(_all=0)[on + keep], how="left", on=on)
    out = out.drop(columns=["_all"], errors="ignore")
    if keys:
        out = out.sort_values(keys).reset_index(drop=True)
    for c in out.columns:
        if c == "requests" or c in counts.values():
            out[c] = out[c].fillna(0).astype("int64")
        elif c not in keys:
            out[c] = out[c].astype("float64")
    out.attrs["max_rel_error"] = store.SKETCH_ALPHA
    return out


# ---------------------------------------------------------------- percentiles

def _quantile_list(quantiles) -> list[float]:
    """The quantiles as the one bound list ``quantile_cont(x, ?)`` takes."""
    return [float(q) for q in quantiles]


def _p_cols(prefix: str, expr: str, quantiles) -> str:
    """``expr[1] AS <prefix>p50, ...``: one column per quantile, unpacked from the list ``expr``."""
    return ", ".join(f"{expr}[{i + 1}] AS {sql.quote_ident(prefix + p_label(q))}" for i, q in enumerate(quantiles))


def _quantile_cols(fields, quantiles, counted: bool = False) -> tuple[str, str, list]:
    """(inner aggregate SQL, outer unpacking SQL, the inner SQL's parameters) for exact percentiles of
    ``fields``; ``counted``: each field's ``requests_with_<field>`` too, the requests carrying it."""
    fields = [_check_field(c) for c in fields]
    inner = ", ".join(f"quantile_cont({c}, ?) AS _q_{c}" + (f", count({c}) AS requests_with_{c}" if counted else "")
                      for c in fields)
    outer = ", ".join(_p_cols(f"{c}_", f"_q_{c}", quantiles) + (f", requests_with_{c}" if counted else "")
                      for c in fields)
    return inner, outer, [_quantile_list(quantiles)] * len(fields)


def percentiles(con: duckdb.DuckDBPyConnection, f: Filters, by=("model",), fields=sql.LATENCY_FIELDS,
                quantiles=QUANTILES, exact: bool = False) -> pd.DataFrame:
    """Per group: ``requests`` (served) and, of each field, ``<field>_p50``, ``<field>_p95``, ``<field>_p99`` and
    ``requests_with_<field>``, the requests carrying it: the count its percentiles are over.

    A percentile is null where no request of the group carries the field.
    ``by`` lists dimensions of :data:`finops.sql.GROUP_COLUMNS` and/or one time grain of :data:`TIME_GRAINS`.
    Unless ``exact``, whole hours grouped by model, hour, day or week are read from the hourly
    sketch (:func:`sketch_quantiles`, within 0.99%); ``attrs['max_rel_error']`` then says so
    (0 for exact figures).
    """
    fields = [_check_field(c) for c in fields]
    keys = [sql.column(k, TIME_GRAINS) if k in TIME_GRAINS else _group_key(k) for k in _keys(by)]
    if not exact and all(c in dict(store.SKETCH_FIELDS) for c in fields) and sketch_usable(con, f, keys):
        return _from_sketch(con, f, keys, fields, quantiles, counts={c: f"requests_with_{c}" for c in fields})
    f = _scoped(con, f)
    exprs = [f"{sql.time_bucket(k)} AS {k}" if k in TIME_GRAINS else f"{_group_sql(k)} AS {k}" for k in keys]
    where, params = _served_where(f)
    inner, outer, q_params = _quantile_cols(fields, quantiles, counted=True)
    group = f"GROUP BY {', '.join(str(i + 1) for i in range(len(keys)))}" if keys else ""
    key_list = "".join(f"{k}, " for k in keys)
    query = (f"SELECT {key_list}requests, {outer} FROM ("
             f"SELECT {''.join(e + ', ' for e in exprs)}count(*) AS requests, {inner} "
             f"FROM requests WHERE {where} {group}) "
             f"{'ORDER BY ' + ', '.join(keys) if keys else ''}")
    out = con.execute(query, q_params + params).df()
    out.attrs["max_rel_error"] = 0.0
    if not keys and len(out) and out["requests"].iloc[0] == 0:
        return out.iloc[0:0]
    for c in out.columns:
        if c == "requests" or c.startswith("requests_with_"):
            out[c] = out[c].astype("int64")
        elif c not in keys:
            out[c] = out[c].astype("float64")
    return out


def over_time(con: duckdb.DuckDBPyConnection, f: Filters, field: str = "total_ms", grain: str = "hour",
              by: str | None = "model", quantiles=QUANTILES, exact: bool = False) -> pd.DataFrame:
    """Per time bucket (``ts``) and group: requests and the percentiles of ``field`` (p50, p95, p99).

    ``requests`` counts the requests carrying ``field``. Hour, day and week buckets by model (or
    overall) come from the hourly sketch unless ``exact`` (see :func:`percentiles`).
    """
    if grain not in TIME_GRAINS:
        raise InputError(f"unknown time grain {grain}; choose from {', '.join(TIME_GRAINS)}")
    field = _check_field(field)
    keys = [grain] + ([by] if by else [])
    if (not exact and grain in SKETCH_KEYS and field in dict(store.SKETCH_FIELDS)
            and (by is None or by == "model") and sketch_usable(con, f, keys)):
        q = sketch_quantiles(con, f, keys, [field], quantiles)
        out = q.rename(columns={grain: "ts", "n": "requests"}).drop(columns="field")
        out["grp"] = out.pop(by) if by else "all"
        out = out[["ts", "grp", "requests"] + [p_label(x) for x in quantiles]]
        out = out.sort_values(["grp", "ts"]).reset_index(drop=True)
        out["requests"] = out["requests"].astype("int64")
        out.attrs["max_rel_error"] = store.SKETCH_ALPHA
        return out
    f = _scoped(con, f)
    where, params = _served_where(f, f"{field} IS NOT NULL")
    query = (f"SELECT ts, grp, requests, {_p_cols('', '_q', quantiles)} FROM ("
             f"SELECT {sql.time_bucket(grain)} AS ts, {_group_sql(by)} AS grp, count(*) AS requests, "
             f"quantile_cont({field}, ?) AS _q FROM requests WHERE {where} GROUP BY 1, 2) ORDER BY grp, ts")
    out = con.execute(query, [_quantile_list(quantiles)] + params).df()
    for q in quantiles:
        out[p_label(q)] = out[p_label(q)].astype("float64")
    out.attrs["max_rel_error"] = 0.0
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
              scale: str = "linear", by: str | None = "model", exact: bool = False) -> pd.DataFrame:
    """Counts of ``field`` per group on linear or log bins: columns ``grp, bin, lo, hi, count``.

    Each group gets its own edges from its own range (:func:`histogram_edges`); a group's edges
    are ``lo`` of its bins plus the last ``hi``. Bins are half-open ``[lo, hi)`` except the last,
    which is closed: the same counts as ``numpy.histogram(values, bins=edges)``.

    By model over whole hours, for a sketched field, and unless ``exact``, it is counted from the hourly
    latency sketch (``store.latency_hourly``): the edges are the exact ones (a group's min, max and lowest
    positive value are the sketch's stored min and max), and each sketch bucket is counted in the bin of its
    estimate (:func:`bucket_estimates`). A bucket spans a factor ``store.SKETCH_GAMMA`` (2 %), so only a value
    within 2 % of a bin edge may be counted in the neighbouring bin: ``attrs['edge_tolerance']`` is that factor
    (0 for exact counts). Totals per group are exact.
    """
    field = _check_field(field)
    cols = ["grp", "bin", "lo", "hi", "count"]
    sketched = (not exact and by == "model" and field in dict(store.SKETCH_FIELDS)
                and sketch_usable(con, f, ["model"]))
    if sketched:
        where, params = f.where(ts_col="hour")
        got = con.execute(f"SELECT model, k, sum(n) AS n, min(lo) AS lo, max(hi) AS hi FROM latency_hourly WHERE {where} "
                          "AND field = ? GROUP BY 1, 2 ORDER BY 1, 2", params + [field]).fetchnumpy()
        names = _model_names(got["model"])
        stats = []
        for name in sorted(set(names)):
            m = names == name
            pos = m & (got["k"] != store.SKETCH_ZERO_K)
            stats.append((name, float(got["lo"][m].min()), float(got["hi"][m].max()),
                          float(got["lo"][pos].min()) if pos.any() else None))
    else:
        f = _scoped(con, f)
        g = _group_sql(by)
        where, params = _served_where(f, f"{field} IS NOT NULL")
        stats = con.execute(f"SELECT {g} AS grp, min({field}), max({field}), min({field}) FILTER (WHERE {field} > 0) "
                            f"FROM requests WHERE {where} GROUP BY 1 ORDER BY 1", params).fetchall()
    if not stats:
        return pd.DataFrame({c: [] for c in cols})
    groups, los, norms, edge_lists, logs = [], [], [], [], []
    for grp, lo, hi, pos in stats:
        edges = histogram_edges(float(lo), float(hi), bins, scale, None if pos is None else float(pos))
        groups.append(grp)
        edge_lists.append(edges)
        if scale == "log" and len(edges) > 2:       # bin 0 holds [0, a); then ln-uniform bins from a
            logs.append(True)
            los.append(float(np.log(edges[1])))
            norms.append((len(edges) - 2) / float(np.log(edges[-1]) - np.log(edges[1])))
        else:
            logs.append(False)
            los.append(float(edges[0]))
            norms.append((len(edges) - 1) / float(edges[-1] - edges[0]))
    if sketched:
        rows = []
        est = bucket_estimates(np.asarray(got["k"], dtype=np.int64), np.asarray(got["lo"], dtype=float),
                               np.asarray(got["hi"], dtype=float))
        counts = np.asarray(got["n"], dtype=np.int64)
        for grp, edges in zip(groups, edge_lists, strict=True):
            m = names == grp
            b = np.clip(np.searchsorted(edges, est[m], side="right") - 1, 0, len(edges) - 2)
            c = np.bincount(b, weights=counts[m], minlength=len(edges) - 1).astype(np.int64)
            rows += [(grp, i, float(edges[i]), float(edges[i + 1]), int(c[i])) for i in range(len(edges) - 1)]
        out = pd.DataFrame(rows, columns=cols)
        out["count"] = out["count"].astype("int64")
        out.attrs["edge_tolerance"] = store.SKETCH_GAMMA
        return out
    # One pass: the bin of a value is floor(x) of its position x on the bin scale (numpy.histogram's
    # own formula for uniform bins). Float error moves x by ~1e-12 at most, so only a value within
    # 1e-6 of an edge could fall on the wrong side: those few are counted by their exact value and
    # placed against the edges themselves (numpy.searchsorted), so the counts equal numpy's exactly.
    x = "CASE WHEN c.lg THEN (CASE WHEN v > 0 THEN ln(v) END - c.lo) * c.nm + 1 ELSE (v - c.lo) * c.nm END"
    query = f"""
WITH c AS (SELECT unnest(?::VARCHAR[]) AS grp, unnest(?::BOOLEAN[]) AS lg, unnest(?::DOUBLE[]) AS lo,
                  unnest(?::DOUBLE[]) AS nm, unnest(range(1, ?)) AS k),
r AS (SELECT {g} AS grp, {field} AS v FROM requests WHERE {where}),
b AS (SELECT c.k, r.v, {x} AS x FROM r JOIN c ON c.grp = r.grp)
SELECT k, CAST(coalesce(floor(x), 0) AS BIGINT) AS bin,
       CASE WHEN x IS NULL OR abs(x - round(x)) < 1e-6 THEN v END AS exact, count(*) AS n
FROM b GROUP BY ALL"""
    counted = con.execute(query, [groups, logs, los, norms, len(groups) + 1] + params).fetchall()
    counts = [np.zeros(len(e) - 1, dtype=np.int64) for e in edge_lists]
    for k_, b_, exact, n in counted:
        c, edges = counts[k_ - 1], edge_lists[k_ - 1]
        if exact is not None:
            b_ = int(np.searchsorted(edges, exact, side="right")) - 1
        c[min(max(b_, 0), len(c) - 1)] += n           # the last bin is closed: its upper edge is in it
    rows = []
    for grp, edges, c in zip(groups, edge_lists, counts, strict=True):
        for b in range(len(edges) - 1):
            rows.append((grp, b, float(edges[b]), float(edges[b + 1]), int(c[b])))
    out = pd.DataFrame(rows, columns=cols)
    out["count"] = out["count"].astype("int64")
    out.attrs["edge_tolerance"] = 0.0
    return out


# ---------------------------------------------------------------- segments

SEGMENT_COLUMNS = ("grp", "requests", "percentile", "quantile", "requests_in_band", "total_ms", "segment", "ms")


def _long_segments(wide: pd.DataFrame) -> pd.DataFrame:
    """Band means, one row per group and quantile, in the long format of :func:`segments`."""
    names = [n for n, _ in SEGMENTS] + ["other"]
    if wide.empty:
        return pd.DataFrame({c: [] for c in SEGMENT_COLUMNS})
    long = wide.melt(id_vars=["grp", "requests", "quantile", "requests_in_band", "total_ms"], value_vars=names,
                     var_name="segment", value_name="ms").dropna(subset=["ms"])
    long["percentile"] = long["quantile"].map(lambda q: p_label(q).upper())
    long["order"] = long["segment"].map({n: i for i, n in enumerate(names)})
    long = long.sort_values(["grp", "quantile", "order"]).drop(columns="order").reset_index(drop=True)
    long["ms"] = long["ms"].astype("float64")
    return long[list(SEGMENT_COLUMNS)]


def _segments_from_daily(con: duckdb.DuckDBPyConnection, f: Filters, quantiles, band: float) -> pd.DataFrame:
    """:func:`segments` by model from ``store.segments_daily``: per model, the sketch buckets of total_ms with
    each one's sums of total_ms and of every segment. The band of ``q`` is the requests of rank
    ``ceil((n-1)(q-band))`` to ``floor((n-1)(q+band))``, as many as the exact band holds (ties at its
    edges apart); a bucket wholly inside counts with its exact sums, the two edge buckets with the share of
    their requests inside the band, at their mean. So only requests of the edge buckets (within a factor
    ``store.SKETCH_GAMMA`` of the band's edges) stand in for one another: the band's mean total_ms is within
    2 % of the exact one (``attrs['max_rel_error']``), and a segment's mean differs by no more than the edge
    buckets' share of the band times their mean total_ms. Models with fewer than ``2 / band + 1`` requests
    (a band of under two ranks) are read from their raw rows."""
    names = [n for n, _ in SEGMENTS]
    where, params = f.where(ts_col="day")
    aggs = ", ".join(f"sum({n}_sum) AS {n}_sum, sum({n}_n) AS {n}_n" for n in names)
    got = con.execute(f"SELECT model, k, sum(n) AS n, sum(total_sum) AS total_sum, {aggs} FROM segments_daily "
                      f"WHERE {where} GROUP BY 1, 2 ORDER BY 1, 2", params).fetchnumpy()
    labels = _model_names(got["model"])
    rows, small = [], []
    for grp in sorted(set(labels)):
        m = labels == grp
        n = np.asarray(got["n"][m], dtype=np.int64)      # ordered by k: the zero bucket's k is the lowest
        size = int(n.sum())
        if band <= 0 or size < 2 / band + 1:
            small.append(grp)
            continue
        end = np.cumsum(n)
        start = end - n
        for q in quantiles:
            i_lo = int(np.ceil((size - 1) * max(q - band, 0.0)))
            i_hi = int(np.floor((size - 1) * min(q + band, 1.0)))
            w = np.clip(np.minimum(i_hi + 1, end) - np.maximum(i_lo, start), 0, None) / n   # share of each bucket
            count = float((w * n).sum())
            mean = {x: float((w * got[f"{x}_sum"][m]).sum()) / count for x in ["total"] + names}
            seg = {x: (mean[x] if int(got[f"{x}_n"][m][w > 0].sum()) else None) for x in names}
            other = mean["total"] - sum(mean[x] for x in names)
            rows.append((grp, size, float(q), int(round(count)), mean["total"], *seg.values(), other))
    wide = pd.DataFrame(rows, columns=["grp", "requests", "quantile", "requests_in_band", "total_ms", *names, "other"])
    if small:
        raw = segments(con, replace(f, models=tuple(m for m in small if m != NONE_LABEL)), quantiles=quantiles,
                       band=band, exact=True) if any(m != NONE_LABEL for m in small) else pd.DataFrame()
        out = pd.concat([_long_segments(wide), raw[raw["grp"].isin(small)] if len(raw) else raw],
                        ignore_index=True)
        out = out.sort_values(["grp", "quantile"], kind="stable").reset_index(drop=True)
        out["requests"] = out["requests"].astype("int64")      # not float where one side was empty
    else:
        out = _long_segments(wide)
    out.attrs["max_rel_error"] = store.SKETCH_GAMMA - 1
    return out


def segments(con: duckdb.DuckDBPyConnection, f: Filters, by: str | None = "model", quantiles=QUANTILES,
             band: float = 0.005, exact: bool = False) -> pd.DataFrame:
    """Mean segments of the requests around each percentile of total_ms (see the module docstring).

    The band of percentile ``q`` is ``[Q(q - band), Q(q + band)]`` of total_ms (``quantile_cont``),
    widened to take in the order statistic at ``q`` (``quantile_disc``) so that even a group of a
    few requests has one. Long format: ``grp, requests, percentile ('P99'), quantile, requests_in_band,
    total_ms, segment, ms`` (``requests``: the group's requests with a total_ms, those its percentiles are of).
    Only segments the band's requests carry appear; ``other`` closes the sum to ``total_ms``. By model over
    whole days, unless ``exact``, from the daily table written at load time (:func:`_segments_from_daily`: the
    band's mean total_ms within 2 %; ``attrs['max_rel_error']``, 0 when exact).
    """
    if not exact and derived_usable(con, f, "segments_daily", by):
        return _segments_from_daily(con, f, quantiles, band)
    f = _scoped(con, f)
    g = _group_sql(by)
    where, params = _served_where(f, "total_ms IS NOT NULL")
    seg_exprs = ", ".join(f"{expr} AS {name}" for name, expr in SEGMENTS)
    known = " - ".join(f"coalesce({name}, 0)" for name, _ in SEGMENTS)
    seg_aggs = ", ".join(f"CASE WHEN count({name}) > 0 THEN avg(coalesce({name}, 0)) END AS {name}"
                         for name, _ in SEGMENTS)
    qs = _quantile_list(quantiles)
    bounds = [b for q in qs for b in (max(q - band, 0.0), min(q + band, 1.0))]
    # pass 1: each group's bands; pass 2: one scan keeping only the rows in some band (a few per cent),
    # joined to their group's bounds by hash, then the means per band over that small set
    found = con.execute(f"SELECT {g} AS grp, quantile_cont(total_ms, ?), count(*) "
                        f"FROM requests WHERE {where} GROUP BY 1 ORDER BY 1", [bounds] + params).fetchall()
    # With n >= 2 / band + 1 requests a band spans over two ranks, so it holds the order statistic at q
    # whatever its rounding: the widening below changes nothing and needs no second pass.
    small = [grp for grp, _, n in found if n < 2 / band + 1] if band > 0 else [grp for grp, _, _ in found]
    requests = {grp: n for grp, _, n in found}
    disc_of = {}
    if small:
        disc_of = dict(con.execute(
            f"SELECT {g} AS grp, quantile_disc(total_ms, ?) FROM requests WHERE {where} AND {g} IN "
            f"(SELECT unnest(?::VARCHAR[])) GROUP BY 1", [qs] + params + [small]).fetchall())
    found = [(grp, qc, disc_of.get(grp, [qc[2 * i] for i in range(len(qs))])) for grp, qc, _ in found]
    grps = [grp for grp, _, _ in found]
    lo = [[min(qc[2 * i], qd[i]) for grp, qc, qd in found] for i in range(len(qs))]
    hi = [[max(qc[2 * i + 1], qd[i]) for grp, qc, qd in found] for i in range(len(qs))]
    in_band = " OR ".join(f"r.total_ms BETWEEN c.lo{i} AND c.hi{i}" for i in range(len(qs)))
    per_band = " UNION ALL ".join(
        f"SELECT grp, CAST(? AS DOUBLE) AS quantile, count(*) AS requests_in_band, avg(total_ms) AS total_ms, "
        f"{seg_aggs}, avg(total_ms - {known}) AS other FROM near WHERE total_ms BETWEEN lo{i} AND hi{i} GROUP BY 1"
        for i in range(len(qs)))
    cols_c = ", ".join(f"unnest(?::DOUBLE[]) AS lo{i}, unnest(?::DOUBLE[]) AS hi{i}" for i in range(len(qs)))
    query = f"""
WITH c AS (SELECT unnest(?::VARCHAR[]) AS grp, {cols_c}),
r AS (SELECT {g} AS grp, total_ms, {seg_exprs} FROM requests WHERE {where} AND total_ms BETWEEN ? AND ?),
near AS MATERIALIZED (SELECT r.*, c.* EXCLUDE (grp) FROM r JOIN c ON c.grp = r.grp WHERE {in_band})
SELECT * FROM ({per_band}) ORDER BY 1, 2"""
    band_params = [grps] + [v for i in range(len(qs)) for v in (lo[i], hi[i])]
    span = [min(min(v) for v in lo), max(max(v) for v in hi)] if found else [0.0, 0.0]
    wide = con.execute(query, band_params + params + span + qs).df() if found else pd.DataFrame()
    if found:
        wide.insert(1, "requests", wide["grp"].map(requests).astype("int64"))
    out = _long_segments(wide)
    out.attrs["max_rel_error"] = 0.0
    return out


# ---------------------------------------------------------------- length buckets

def _bucket_labels(out: pd.DataFrame) -> pd.DataFrame:
    out["bucket_lo"] = out["bucket_lo"].astype("int64")
    out["bucket_hi"] = out["bucket_hi"].astype("int64")
    out["bucket"] = [f"{lo:,}–{hi - 1:,}" for lo, hi in zip(out["bucket_lo"], out["bucket_hi"], strict=True)]
    return out


def _length_buckets_from_daily(con: duckdb.DuckDBPyConnection, f: Filters, length: str, quantiles) -> pd.DataFrame:
    """:func:`length_buckets` by model from ``store.length_latency_daily`` (the total_ms sketch per day, model,
    length field and bucket): the same requests per bucket, percentiles within ``store.SKETCH_ALPHA``."""
    where, params = f.where(ts_col="day")
    got = con.execute(f"SELECT model, bucket_lo, k, sum(n) AS n, min(lo) AS lo, max(hi) AS hi "
                      f"FROM length_latency_daily WHERE {where} AND length = ? GROUP BY 1, 2, 3",
                      params + [length]).fetchnumpy()
    labels = _model_names(got["model"])
    names = sorted(set(labels))
    code = np.searchsorted(np.array(names, dtype=object), labels) if len(labels) else np.zeros(0, dtype=np.int64)
    bucket_lo = np.asarray(got["bucket_lo"], dtype=np.int64)
    edges = np.unique(bucket_lo)
    group = code * max(len(edges), 1) + np.searchsorted(edges, bucket_lo)
    keys, size, values = bucket_quantiles(group, got["k"], got["n"], got["lo"], got["hi"], quantiles)
    lo = edges[keys % max(len(edges), 1)] if len(keys) else np.zeros(0, dtype=np.int64)
    out = pd.DataFrame({"grp": np.array(names, dtype=object)[keys // max(len(edges), 1)] if len(keys) else [],
                        "bucket_lo": lo, "bucket_hi": np.where(lo == 0, 32, 2 * lo), "requests": size})
    for j, q in enumerate(quantiles):
        out[f"total_ms_{p_label(q)}"] = values[:, j].astype("float64")
    out = _bucket_labels(out.sort_values(["grp", "bucket_lo"]).reset_index(drop=True))
    out.attrs["segment"] = "prefill_ms (else ttft_ms)" if length != "output_tokens" else "decode_ms (else total − TTFT)"
    out.attrs["max_rel_error"] = store.SKETCH_ALPHA
    return out


def length_buckets(con: duckdb.DuckDBPyConnection, f: Filters, length: str = "input_tokens",
                   by: str | None = "model", quantiles=QUANTILES, with_segment: bool = False,
                   exact: bool = False) -> pd.DataFrame:
    """Latency by power-of-two bucket of a length (prompt: input_tokens / prompt_chars; output_tokens).

    Buckets: ``[0, 32)``, ``[32, 64)``, ``[64, 128)``, ... Per group and bucket: requests and the
    total_ms percentiles; with ``with_segment`` also ``segment_ms_p50``, the P50 of the segment the
    length drives (prefill_ms or TTFT for a prompt length, decode_ms for an output length; null where
    absent; it costs a second percentile pass, so only on request). A prefill-bound model's latency
    climbs with the prompt bucket; a decode-bound one with the output bucket.

    By model over whole days, without ``with_segment`` and unless ``exact``, read from the daily table
    written at load time (``store.length_latency_daily``): the same request counts, percentiles within
    ``store.SKETCH_ALPHA`` (``attrs['max_rel_error']``; 0 when exact).
    """
    length = sql.column(length, sql.LENGTH_COLUMNS, "length field")
    if not with_segment and not exact and derived_usable(con, f, "length_latency_daily", by):
        return _length_buckets_from_daily(con, f, length, quantiles)
    f = _scoped(con, f)
    g = _group_sql(by)
    where, params = _served_where(f, f"{length} IS NOT NULL AND total_ms IS NOT NULL")
    # the segment a prompt drives: prefill, else the time to the first token (queue included); not
    # sql.PREFILL_MS, which takes the wait out of TTFT: this chart shows what the client waited for
    seg = "coalesce(prefill_ms, ttft_ms)" if length != "output_tokens" else sql.DECODE_MS
    outer = _p_cols("total_ms_", "_q", quantiles)
    seg_inner, seg_outer = (f", quantile_cont({seg}, 0.5) AS segment_ms_p50", ", segment_ms_p50") if with_segment \
        else ("", "")
    query = f"""
SELECT grp, bucket_lo, CASE WHEN bucket_lo = 0 THEN 32 ELSE 2 * bucket_lo END AS bucket_hi, requests,
       {outer}{seg_outer} FROM (
  SELECT {g} AS grp, {store.length_bucket_sql(length)} AS bucket_lo,
         count(*) AS requests, quantile_cont(total_ms, ?) AS _q{seg_inner}
  FROM requests WHERE {where} GROUP BY 1, 2) ORDER BY grp, bucket_lo"""
    out = _bucket_labels(con.execute(query, [_quantile_list(quantiles)] + params).df())
    out.attrs["max_rel_error"] = 0.0
    for c in out.columns:
        if c.startswith(("total_ms_", "segment_ms")):
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
    part = {"model": "model", "replica": "model || chr(31) || coalesce(replica, '')"}[per]
    extra = f", {extra_cols}" if extra_cols else ""
    return f"""
WITH r AS (SELECT model AS grp, {part} AS _p,
                  epoch_us(ts) / 1e3 + coalesce(route_ms, 0) + coalesce(queue_ms, 0) AS start_ms,
                  epoch_us(ts) / 1e3 + total_ms - {sql.literal(float(tolerance_ms))} AS end_ms{extra}
           FROM requests WHERE {where} AND total_ms IS NOT NULL),
ev AS (SELECT *, start_ms AS _t, 1 AS _d FROM r
       UNION ALL BY NAME SELECT _p, end_ms AS _t, -1 AS _d FROM r),
c AS (SELECT *, sum(_d) OVER (PARTITION BY _p ORDER BY _t RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             AS concurrency FROM ev)
SELECT * EXCLUDE (_p, _t, _d) FROM c WHERE _d = 1"""


def concurrency_at_starts(start_ms: np.ndarray, end_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sweep of :func:`concurrency_sql` in numpy, for one partition (one model or replica).

    Returns ``(order, concurrency)``: ``order`` sorts the requests by start (stable) and
    ``concurrency[i]`` is the number in service at the start of request ``order[i]``:
    starts at or before that instant minus ends at or before it (events at the same
    instant apply together, so a hand-over at one instant is no overlap).

    >>> order, conc = concurrency_at_starts(np.array([0.0, 100.0, 1000.0]), np.array([1000.0, 1000.0, 2000.0]))
    >>> order.tolist(), conc.tolist()
    ([0, 1, 2], [1, 2, 1])
    """
    order = np.argsort(start_ms, kind="stable")          # logs are near time order: a cheap merge sort
    starts = start_ms[order]
    ends = np.sort(end_ms, kind="stable")
    n = len(starts)
    # starts at or before starts[i]: the end of the run of equal starts that holds i
    run_end = np.full(n, n, dtype=np.int64)
    brk = np.flatnonzero(starts[1:] != starts[:-1])
    run_end[brk] = brk + 1
    started = np.minimum.accumulate(run_end[::-1])[::-1]
    ended = np.searchsorted(ends, starts, side="right")
    return order, started - ended


DECODE_RATE_COLUMNS = ("grp", "concurrency", "requests", "tokens_per_s_p10", "tokens_per_s_p50", "tokens_per_s_p90")
DECODE_RATE_QUANTILES = (0.1, 0.5, 0.9)
#: the window whose mean number of requests in service is a request's concurrency level (store.inservice_minute)
CONCURRENCY_WINDOW_S = store.INSERVICE_WINDOW_US // 1_000_000


def _level_sql(expr: str) -> str:
    """The concurrency level of a window from its in-service microseconds: the mean number of requests in
    service over it, rounded (half away from zero), at least 1 (the request itself was in flight)."""
    return f"greatest(1, CAST(round(coalesce({expr}, 0) / {sql.literal(float(store.INSERVICE_WINDOW_US))}) AS BIGINT))"


def decode_vs_concurrency(con: duckdb.DuckDBPyConnection, f: Filters, exact: bool = False) -> pd.DataFrame:
    """Decode tokens/s against the mean number of the model's requests in service in the minute they arrived.

    Decode tokens/s of a request = ``output_tokens / (decode_ms / 1000)`` (decode_ms, else total_ms −
    ttft_ms: ``store.DECODE_RATE``). Its concurrency level: the time every served request of the same model
    (all tenants: the engine serves them all) spent in service (``[ts + route_ms + queue_ms, ts + total_ms]``)
    within the minute of the request's arrival, over one minute, rounded, at least 1: the mean batch the
    request joined (Little's law over the minute). Columns: ``grp, concurrency, requests, tokens_per_s_p10,
    tokens_per_s_p50, tokens_per_s_p90``. If decode speed falls as concurrency rises, the model is
    decode-bound (memory bandwidth / KV cache).

    By model over whole minutes without a tenant or tier filter, unless ``exact``, it is read from the tables
    written at load time (``store.inservice_minute`` and the decode-rate sketch ``store.decode_rate_minute``):
    the same levels and request counts as the raw rows give, percentiles within ``store.SKETCH_ALPHA``
    (``attrs['max_rel_error']``). Otherwise the requests of ``store.raw_scope`` are read (exact percentiles,
    ``quantile_cont``), their minutes' time in service from every request of their models in service then.
    """
    empty = pd.DataFrame({c: [] for c in DECODE_RATE_COLUMNS})
    qs = DECODE_RATE_QUANTILES
    if not exact and derived_usable(con, f, "decode_rate_minute", grain="minute") \
            and store.derived_ready(con, "inservice_minute"):
        where, params = f.where(ts_col="window_start", prefix="r.")
        mwhere, mparams = Filters(models=f.models).where()
        got = con.execute(f"""
WITH b AS (SELECT window_start, model, sum(busy_us) AS busy_us FROM inservice_minute WHERE {mwhere} GROUP BY 1, 2)
SELECT r.model, {_level_sql('b.busy_us')} AS concurrency, r.k, sum(r.n) AS n, min(r.lo) AS lo, max(r.hi) AS hi
FROM decode_rate_minute r LEFT JOIN b ON b.window_start = r.window_start AND b.model = r.model
WHERE {where} GROUP BY 1, 2, 3""", mparams + params).fetchnumpy()
        if len(got["k"]) == 0:
            return empty
        labels = _model_names(got["model"])
        names = np.array(sorted(set(labels)), dtype=object)
        level = np.asarray(got["concurrency"], dtype=np.int64)
        width = int(level.max()) + 1
        keys, size, values = bucket_quantiles(np.searchsorted(names, labels) * width + level, got["k"], got["n"],
                                              got["lo"], got["hi"], qs)
        out = pd.DataFrame({"grp": names[keys // width], "concurrency": keys % width, "requests": size})
        for j, q in enumerate(qs):
            out[f"tokens_per_s_{p_label(q)}"] = values[:, j]
        out = out.sort_values(["grp", "concurrency"], kind="stable").reset_index(drop=True)
        out.attrs["max_rel_error"] = store.SKETCH_ALPHA
        return out
    f = _scoped(con, f)
    where, params = _served_where(f, "total_ms IS NOT NULL")
    # the minutes of these requests: their time in service from every request of the same models in service
    # then, which arrived at most the longest total_ms before the first minute (the sketch's max, else the rows')
    span = con.execute(f"SELECT min({sql.time_bucket('minute')}), max({sql.time_bucket('minute')}) FROM requests "
                       f"WHERE {where}", params).fetchall()[0]
    if span[0] is None:
        return empty
    longest = con.execute("SELECT max(hi) FROM latency_hourly WHERE field = 'total_ms'").fetchall()[0][0] \
        if store.sketch_ready(con) else None
    if longest is None:
        longest = con.execute(f"SELECT max(total_ms) FROM requests WHERE {sql.SERVED}").fetchall()[0][0] or 0.0
    mwhere, mparams = Filters(models=f.models).where()
    busy_where = f"{mwhere} AND ts >= ? AND ts < ?"
    busy_params = mparams + [span[0] - pd.Timedelta(milliseconds=float(longest) + 1).to_pytimedelta(),
                             span[1] + pd.Timedelta(seconds=CONCURRENCY_WINDOW_S).to_pytimedelta()]
    rate = "CAST(" + store.DECODE_RATE + " AS DOUBLE)"
    query = f"""
WITH b AS (SELECT window_start, model, sum(busy_us) AS busy_us FROM ({store.inservice_select_sql(busy_where)})
           GROUP BY 1, 2),
r AS (SELECT {sql.time_bucket('minute')} AS window_start, coalesce(model, '') AS model, {rate} AS rate
      FROM requests WHERE {where})
SELECT r.model, {_level_sql('b.busy_us')} AS concurrency, count(*) AS requests, quantile_cont(rate, ?) AS q
FROM r LEFT JOIN b ON b.window_start = r.window_start AND b.model = r.model
WHERE r.rate > 0 AND NOT isnan(r.rate) GROUP BY 1, 2"""
    got = con.execute(query, busy_params + params + [_quantile_list(qs)]).fetchall()
    if not got:
        return empty
    out = pd.DataFrame([(NONE_LABEL if m == "" else m, int(c), int(n), *map(float, q)) for m, c, n, q in got],
                       columns=list(DECODE_RATE_COLUMNS))
    out = out.sort_values(["grp", "concurrency"], kind="stable").reset_index(drop=True)
    out.attrs["max_rel_error"] = 0.0
    return out


# ---------------------------------------------------------------- TTFT, TPOT, slowest

def ttft_tpot(con: duckdb.DuckDBPyConnection, f: Filters, by: str | None = "model",
              quantiles=QUANTILES, exact: bool = False) -> pd.DataFrame:
    """Per group: TTFT percentiles and time per output token (TPOT) percentiles, in ms.

    ``TPOT = (total_ms - ttft_ms) / (output_tokens - 1)`` (the vLLM benchmark definition;
    decode_ms replaces ``total_ms - ttft_ms`` where TTFT is absent), for requests with more
    than one output token. Null where the logs lack the fields. By model (or overall) over whole
    hours they come from the hourly sketch unless ``exact`` (see :func:`percentiles`).
    """
    keys = [by] if by else []
    if not exact and (by is None or by == "model") and sketch_usable(con, f, keys):
        out = _from_sketch(con, f, keys, ["ttft_ms", "tpot_ms"], quantiles,
                           counts={"ttft_ms": "with_ttft", "tpot_ms": "with_tpot"})
        out = out.rename(columns={by: "grp"}) if by else out.assign(grp="all")
        order = ["grp", "requests", "with_ttft", "with_tpot"] + [
            f"{fld}_{p_label(x)}" for x in quantiles for fld in ("ttft_ms", "tpot_ms")]
        out = out[order].reset_index(drop=True)
        out.attrs["max_rel_error"] = store.SKETCH_ALPHA
        return out
    f = _scoped(con, f)
    g = _group_sql(by)
    where, params = _served_where(f)
    outer = ", ".join(f"_t[{i + 1}] AS {sql.quote_ident('ttft_ms_' + p_label(q))}, "
                      f"_p[{i + 1}] AS {sql.quote_ident('tpot_ms_' + p_label(q))}" for i, q in enumerate(quantiles))
    query = (f"SELECT grp, requests, with_ttft, with_tpot, {outer} FROM ("
             f"SELECT {g} AS grp, count(*) AS requests, count(ttft_ms) AS with_ttft, "
             f"count({sql.TPOT_MS}) AS with_tpot, quantile_cont(ttft_ms, ?) AS _t, quantile_cont({sql.TPOT_MS}, ?) AS _p "
             f"FROM requests WHERE {where} GROUP BY 1) ORDER BY grp")
    qs = _quantile_list(quantiles)
    out = con.execute(query, [qs, qs] + params).df()
    for c in out.columns:
        if c.startswith(("ttft_ms_", "tpot_ms_")):
            out[c] = out[c].astype("float64")
    out.attrs["max_rel_error"] = 0.0
    return out


SLOWEST_COLUMNS = store.SLOWEST_COLUMNS
#: the segments a request's columns do not hold as they are, computed beside them, and the unlogged rest
_TRACE_SQL = ", ".join([*(f"{expr} AS {name}_ms" for name, expr in SEGMENTS if name in store.COMPUTED_SEGMENTS),
                        "total_ms - " + " - ".join(f"coalesce({expr}, 0)" for _, expr in SEGMENTS) + " AS other_ms"])


def requests_by_id(con: duckdb.DuckDBPyConnection, request_ids) -> pd.DataFrame:
    """The requests named by ``request_ids`` (an incident's), as :func:`slowest` gives them, slowest first."""
    query = (f"SELECT {', '.join(SLOWEST_COLUMNS)}, {_TRACE_SQL} FROM requests "
             f"WHERE request_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY total_ms DESC NULLS LAST, request_id")
    return con.execute(query, [[str(r) for r in request_ids]]).df()


def slowest(con: duckdb.DuckDBPyConnection, f: Filters, n: int = 20, exact: bool = False) -> pd.DataFrame:
    """The ``n`` slowest requests by total_ms, each with its segments and ``other_ms`` (the unlogged rest).

    Over whole hours without a tenant or tier filter, for ``n`` up to ``store.SLOWEST_KEPT`` and unless
    ``exact``, read from ``store.slowest_hourly`` (the slowest of every hour, model and load, written at load
    time: the same requests, over the whole period); else from the raw rows of ``store.raw_scope``. Besides
    the stored columns: ``first_token_ms`` and ``after_first_token_ms`` (:data:`finops.store.SEGMENT_EXPRS`) and
    ``other_ms``."""
    if (not exact and n <= store.SLOWEST_KEPT and not f.tenants and not f.sla_tiers and store.whole_hours(f)
            and store.derived_ready(con, "slowest_hourly")):
        where, params = f.where(ts_col="hour")
        return con.execute(f"SELECT {', '.join(SLOWEST_COLUMNS)}, {_TRACE_SQL} FROM slowest_hourly "
                           f"WHERE {where} ORDER BY total_ms DESC, request_id LIMIT ?", params + [int(n)]).df()
    f = _scoped(con, f)
    where, params = _served_where(f, "total_ms IS NOT NULL")
    query = (f"SELECT {', '.join(SLOWEST_COLUMNS)}, {_TRACE_SQL} "
             f"FROM requests WHERE {where} ORDER BY total_ms DESC, request_id LIMIT ?")
    return con.execute(query, params + [int(n)]).df()
