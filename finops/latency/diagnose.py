"""Automatic diagnosis: the slow-path playbook of section 2.5 of the routing text (000), as rules.

    layer     symptom                                   likely cause                         how to look
    routing   slow requests concentrate on one model    simple requests sent to the large    latency by model
                                                        model / the cache stopped hitting
    queue     high TTFT, fast per-token                 batch wait / queue build-up (rho->1) queue_ms, queue length
    prefill   long prompts slow, short ones fast        prefill-bound: long context          latency by prompt bucket
    decode    long outputs slow                         decode-bound: HBM bandwidth / KV     decode tokens/s vs batch
    tail      median normal, P99 spikes                 GC / preemption / one huge request   the P99 request's trace

"Layer first, then buckets, then traces; never the mean." It reads raw rows: a period holding more than
``store.RAW_ROW_BUDGET`` requests is judged over its latest hours (``store.raw_scope``). Each rule of :data:`RULES` is
evaluated **per model per window** (an hour by default) against that model's own behaviour over
the filtered period, so a finding is localised in time; adjacent flagged windows merge into one
finding that reports its span.

Two regimes
-----------
* **History** (the model has at least :data:`MIN_HISTORY` windows): a window is flagged when it
  stands out against the model's *typical window* (the median over its windows) by
  :data:`HISTORY_FACTOR` and the excess is too large to be chance (an exact binomial tail under
  :data:`SIGNIFICANCE`), so a few slow requests in a quiet hour do not count.
* **A short log** (one or two windows, such as the seed's experiment) has nothing to compare
  against: the baseline is the fastest tenth of the model's requests, and the slow ones are
  those over twice it (+200 ms).

Per request::

    svc        service time = service_ms, else prefill_ms + decode_ms, else total_ms - queue_ms - route_ms
    decode     decode_ms, else total_ms - ttft_ms          (per output token: tpot)
    expected   decode: output_tokens x the model's median tpot (short log: its fastest-tenth tpot)
               where the logs split decode out;
               else service time fitted on input and output tokens (least squares, per model);
               else the model's fastest-tenth svc (no tokens)
    slow       with history: decode - expected over the model's 95th percentile of that excess (>= 200 ms)
               short log:    over 2 x expected + 200 ms
    prefill    prefill_ms (else ttft_ms - queue - route) against a + b x input_tokens (fitted per model)

Per window: queue P95 and the share that waited over 10 ms; the share of slow decodes; the share
of slow prefills; P50/P99 of total_ms over successful requests; the cache hit rate. A queue
finding then measures the offered load per 5 minutes against the slots actually in service
(``rho``), the replicas that served, the minutes the queue stayed deep and the requests that gave
up (status timeout): a queue deep for :data:`SUSTAINED_MIN` minutes is critical, a shorter burst a
warning. A decode slowdown in a window whose queue is deep is reported with the queue (the batch
grew under the same load); one that falls on long generations is "decode-bound under load"
(warning), one that hits short and long alike is a delay per request: a decode long tail.

Each finding: layer, model, severity (critical / warning / info), evidence in numbers, the
recommended action, and a metrics dict (window_start, window_end, and the numbers quoted).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import duckdb
import numpy as np
import pandas as pd

from finops import sql, store
from finops.errors import InputError
from finops.filters import Filters
from finops.fmt import duration_ms
from finops.ingest import engine
from finops.jsonutil import jsonable
from finops.latency import stats as latency
from finops.latency.servicefit import nonneg_fit

LAYERS = ("routing", "queue", "prefill", "decode", "tail")
SEVERITIES = ("critical", "warning", "info")
WINDOWS = {"15min": pd.Timedelta(minutes=15), "hour": pd.Timedelta(hours=1), "day": pd.Timedelta(days=1)}
WAITED_MS = 10.0               # queue_ms above this counts as having waited ("queue_ms ≈ 0" below it)
QUEUE_MIN_MS = 100.0           # a queue finding needs a P95 wait of at least this ...
QUEUE_VS_SERVICE = 0.5         # ... and of at least half the model's median service time
TAIL_FACTOR = 2.0              # "slow decode": over 2x the baseline
TAIL_MIN_EXCESS_MS = 200.0
TAIL_MIN_SHARE = 0.05          # at least 5 % of a window's requests
HISTORY_FACTOR = 3.0           # and 3x the model's typical window, where there is history
MIN_HISTORY = 3                # windows needed before a window is compared with the others
MIN_REQUESTS = 3
LOAD_LENGTH_RATIO = 2.5        # slow decodes this much longer than the median: per-token slowdown under load
SIGNIFICANCE = 1e-6            # a window's share must be this unlikely under the model's typical share
TARGET_RHO = 0.7


@dataclass(frozen=True)
class Finding:
    layer: str
    model: str
    severity: str
    evidence: str
    action: str
    metrics: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- per model x window metrics

LEN_SQL = "coalesce(CAST(input_tokens AS DOUBLE), CAST(prompt_chars AS DOUBLE))"


def _served_sql(where: str, window: str, join: str = "") -> str:
    """The requests a model served (not a cache hit, total_ms known), one row each with the quantities of
    the module docstring; ``join`` restricts them (see :func:`_window_rows`)."""
    return f"""
SELECT model, {sql.time_bucket(window)} AS w, ts, total_ms, queue_ms, {sql.SERVICE_MS} AS svc,
       CASE WHEN output_tokens > 0 THEN {sql.DECODE_MS} END AS decode_time, {sql.PREFILL_MS} AS prefill_time,
       CAST(input_tokens AS DOUBLE) AS in_tok, CAST(output_tokens AS DOUBLE) AS out_tok, {LEN_SQL} AS len,
       input_tokens IS NOT NULL AS len_is_tokens, ({sql.OK}) AS ok
FROM requests{join} WHERE {where} AND total_ms IS NOT NULL AND {sql.SERVED} AND model IS NOT NULL"""


def service_fit(con: duckdb.DuckDBPyConnection, f: Filters, models: list[str] | None = None) -> pd.DataFrame:
    """Per model with token counts (of ``models`` when given): ``svc ≈ a + b x input_tokens + c x
    output_tokens`` (least squares, non-negative terms). The expected service time of a request for its
    tokens, where the logs do not split decode from prefill."""
    where, params = f.where()
    if models is not None:
        where, params = f"{where} AND model IN (SELECT unnest(?::VARCHAR[]))", params + [list(models)]
    sums = con.execute(f"""
SELECT model, count(*) AS n, sum(x1) AS s1, sum(x2) AS s2, sum(x1 * x1) AS s11, sum(x2 * x2) AS s22,
       sum(x1 * x2) AS s12, sum(y) AS sy, sum(x1 * y) AS s1y, sum(x2 * y) AS s2y
FROM (SELECT model, CAST(input_tokens AS DOUBLE) AS x1, CAST(output_tokens AS DOUBLE) AS x2, {sql.SERVICE_MS} AS y
      FROM requests WHERE {where} AND {sql.SERVED} AND total_ms IS NOT NULL
        AND input_tokens IS NOT NULL AND output_tokens IS NOT NULL)
GROUP BY 1 HAVING count(*) >= 10 ORDER BY 1""", params).df()
    rows = [(r.model, *nonneg_fit(r)) for r in sums.itertuples(index=False)]
    return pd.DataFrame(rows, columns=["model", "fit_a", "fit_b", "fit_c"])


# A model's baselines over the filtered period, handed to the per-request SQL as a table ``b`` of bound
# lists (so NULL stays NULL): (column, SQL type).
BASELINE_COLUMNS = (("model", "VARCHAR"), ("windows", "BIGINT"), ("base_svc_p10", "DOUBLE"), ("base_svc_p50", "DOUBLE"),
                    ("base_tpot", "DOUBLE"), ("base_tpot_n", "BIGINT"), ("pf_a", "DOUBLE"), ("pf_b", "DOUBLE"),
                    ("fit_a", "DOUBLE"), ("fit_b", "DOUBLE"), ("fit_c", "DOUBLE"), ("decode_mode", "VARCHAR"),
                    ("base_excess_p95", "DOUBLE"), ("base_pf_excess_p95", "DOUBLE"))


def _baseline_table(base: list[dict]) -> tuple[str, list]:
    """``SELECT`` of the per-model table ``b`` and its parameters (one list per column)."""
    table = "SELECT " + ", ".join(f"unnest(?::{t}[]) AS {c}" for c, t in BASELINE_COLUMNS)
    return table, [[row.get(c) for row in base] for c, _ in BASELINE_COLUMNS]


def _tagged_sql(where: str, window: str, join: str = "") -> str:
    """Per served request: ``actual`` against ``expected`` decode (or service) time, the prefill excess over
    the model's fit, and ``tail`` / ``pf_tail`` (the slow ones) once ``b`` carries the 95th percentiles."""
    return f"""
SELECT s.*,
       CASE WHEN b.base_tpot_n > 0 THEN s.decode_time
            WHEN b.fit_a IS NOT NULL THEN CASE WHEN s.in_tok IS NOT NULL AND s.out_tok IS NOT NULL THEN s.svc END
            ELSE s.svc END AS actual,
       CASE WHEN b.base_tpot_n > 0 THEN s.out_tok * b.base_tpot
            WHEN b.fit_a IS NOT NULL THEN b.fit_a + b.fit_b * s.in_tok + b.fit_c * s.out_tok
            ELSE b.base_svc_p10 END AS expected,
       s.prefill_time - greatest(b.pf_a + b.pf_b * s.in_tok, 0) AS pf_excess,
       CASE WHEN b.windows >= {MIN_HISTORY}
            THEN actual - expected > greatest(b.base_excess_p95, {TAIL_MIN_EXCESS_MS})
            ELSE actual > {TAIL_FACTOR} * expected + {TAIL_MIN_EXCESS_MS} END AS tail,
       b.windows >= {MIN_HISTORY} AND pf_excess > greatest(b.base_pf_excess_p95, {TAIL_MIN_EXCESS_MS}) AS pf_tail
FROM ({_served_sql(where, window, join)}) s JOIN b USING (model)"""


def _hits(con: duckdb.DuckDBPyConnection, f: Filters, window: str) -> pd.DataFrame:
    """Per model and window: cache_hits, all_requests (total_ms known) and served (not a cache hit)."""
    where, params = f.where()
    return con.sql(f"""
SELECT model, {sql.time_bucket(window)} AS window_start, count(*) FILTER (WHERE {sql.CACHE_HIT}) AS cache_hits,
       count(*) AS all_requests, count(*) FILTER (WHERE {sql.SERVED}) AS served
FROM requests WHERE {where} AND total_ms IS NOT NULL GROUP BY 1, 2""", params=params).df()


def _baselines(con: duckdb.DuckDBPyConnection, f: Filters, window: str, hits: pd.DataFrame) -> list[dict]:
    """Per model over the filtered period, one dict each (see :data:`BASELINE_COLUMNS`): the windows it
    served, its service P10 / P50, its tpot baseline (the median with history, else the fastest tenth),
    the prefill fit ``pf_a + pf_b x input_tokens``, the service fit on tokens where the logs carry no
    decode time (:func:`service_fit`), how decode is judged (``decode_mode``) and the 95th percentiles
    of the decode and prefill excess."""
    where, params = f.where()
    windows = hits[hits["served"] > 0].groupby("model")["window_start"].nunique()
    rel = con.sql(f"""
SELECT model, quantile_cont(svc, [0.1, 0.5]) AS svc_q, quantile_cont(decode_time / out_tok, [0.1, 0.5]) AS tpot_q,
       count(decode_time / out_tok) AS base_tpot_n, regr_intercept(prefill_time, in_tok) AS pf_a,
       regr_slope(prefill_time, in_tok) AS pf_b
FROM ({_served_sql(where, window)}) GROUP BY 1 ORDER BY 1""", params=params)
    base = [dict(zip(rel.columns, values, strict=True)) for values in rel.fetchall()]
    if not base:
        return base
    no_tpot = [row["model"] for row in base if not row["base_tpot_n"]]   # the fit is read where tpot is not
    fits = {r.model: (r.fit_a, r.fit_b, r.fit_c) for r in service_fit(con, f, no_tpot).itertuples()} if no_tpot else {}
    for row in base:
        row["windows"] = int(windows[row["model"]])
        svc_q, tpot_q = row.pop("svc_q"), row.pop("tpot_q")
        row["base_svc_p10"], row["base_svc_p50"] = svc_q
        row["base_tpot"] = None if tpot_q is None else tpot_q[1 if row["windows"] >= MIN_HISTORY else 0]
        row["fit_a"], row["fit_b"], row["fit_c"] = fits.get(row["model"], (None, None, None))
        row["decode_mode"] = "tpot" if row["base_tpot_n"] > 0 else "fit" if row["model"] in fits else "p10"
    table, table_params = _baseline_table(base)
    p95 = dict(con.sql(f"""
WITH b AS ({table})
SELECT model, [quantile_cont(actual - expected, 0.95), quantile_cont(pf_excess, 0.95)]
FROM ({_tagged_sql(where, window)}) GROUP BY 1""", params=table_params + params).fetchall())
    for row in base:
        row["base_excess_p95"], row["base_pf_excess_p95"] = p95[row["model"]]
    return base


# What a window reports, per model and window over its served requests: (column, aggregate). The
# numbers the rules read, for every window ...
WINDOW_AGGREGATES = (
    ("n", "count(*)"),
    ("total_p50", "quantile_cont(total_ms, 0.5)"),
    ("total_p99", "quantile_cont(total_ms, 0.99) FILTER (WHERE ok)"),
    ("queue_n", "count(queue_ms)"),
    ("queue_p95", "quantile_cont(queue_ms, 0.95)"),
    ("waited", f"count(*) FILTER (WHERE queue_ms > {WAITED_MS})"),
    ("tail_n", "count(*) FILTER (WHERE tail)"),
    ("pf_tail_n", "count(*) FILTER (WHERE pf_tail)"),
)
# ... and the evidence a finding quotes, only for the windows a rule flags (and those of models without
# history, whose rules read it): for every window they would nearly double the cost of the pass.
DETAIL_AGGREGATES = (
    ("queue_max", "max(queue_ms)"),
    ("queue_share", "sum(queue_ms) / nullif(sum(total_ms), 0)"),
    ("svc_p50", "quantile_cont(svc, 0.5)"),
    ("tail_actual_min", "min(actual) FILTER (WHERE tail)"),
    ("tail_actual_max", "max(actual) FILTER (WHERE tail)"),
    ("tail_actual_mean", "avg(actual) FILTER (WHERE tail)"),
    ("tail_expected_mean", "avg(expected) FILTER (WHERE tail)"),
    ("tail_excess_mean", "avg(actual - expected) FILTER (WHERE tail)"),
    ("tail_tpot_mean", "avg(actual / nullif(out_tok, 0)) FILTER (WHERE tail)"),
    ("tail_len_p50", "quantile_cont(len, 0.5) FILTER (WHERE tail)"),
    ("tail_out_p50", "quantile_cont(out_tok, 0.5) FILTER (WHERE tail)"),
    ("out_p50", "quantile_cont(out_tok, 0.5)"),
    ("fast_len_p90", "quantile_cont(len, 0.9) FILTER (WHERE NOT tail)"),
    ("tail_len_min", "min(len) FILTER (WHERE tail)"),
    ("tail_len_max", "max(len) FILTER (WHERE tail)"),
    ("fast_len_min", "min(len) FILTER (WHERE NOT tail)"),
    ("fast_len_max", "max(len) FILTER (WHERE NOT tail)"),
    ("len_in_tokens", "bool_or(len_is_tokens)"),
    ("pf_excess_mean", "avg(pf_excess) FILTER (WHERE pf_tail)"),
)
DETAIL_COLUMNS = tuple(name for name, _ in DETAIL_AGGREGATES)
BASELINE_IN_WINDOWS = ("windows", "decode_mode", "base_svc_p10", "base_svc_p50", "base_tpot", "base_excess_p95",
                       "base_pf_excess_p95", "pf_a", "pf_b")


def _window_rows(con: duckdb.DuckDBPyConnection, f: Filters, window: str, base: list[dict], detail: bool,
                 only: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per model and window (only ``only``'s model / window_start pairs, when given) with the
    model's baselines, and the evidence columns when ``detail``."""
    where, params = f.where()
    table, table_params = _baseline_table(base)
    o, join, o_params = "", "", []
    if only is not None:
        # the windows asked for: a semi join, and their overall span for the scan to skip the rest
        o = "o AS (SELECT unnest(?::VARCHAR[]) AS o_model, unnest(?::TIMESTAMP[]) AS o_w),"
        join = f" SEMI JOIN o ON model = o_model AND {sql.time_bucket(window)} = o_w"
        o_params = [only["model"].tolist(), only["window_start"].tolist()]
        where, params = (f"{where} AND ts >= ? AND ts < ?",
                         params + [only["window_start"].min(), only["window_start"].max() + WINDOWS[window]])
    aggregates = ",\n       ".join(f"{expr} AS {name}"
                                   for name, expr in WINDOW_AGGREGATES + (DETAIL_AGGREGATES if detail else ()))
    m = con.sql(f"""
WITH {o} b AS ({table})
SELECT model, w AS window_start,
       {aggregates}
FROM ({_tagged_sql(where, window, join)}) GROUP BY 1, 2 ORDER BY 1, 2""",
                params=o_params + table_params + params).df()
    per_model = pd.DataFrame(base, columns=["model", *BASELINE_IN_WINDOWS])
    per_model = per_model.astype({c: float for c, t in BASELINE_COLUMNS if t == "DOUBLE" and c in per_model})
    return m.merge(per_model, on="model", how="left")


def _check_window(window: str) -> None:
    if window not in WINDOWS:
        raise InputError(f"window must be one of {', '.join(WINDOWS)}")


def _window_metrics(con: duckdb.DuckDBPyConnection, f: Filters, window: str, hits: pd.DataFrame, base: list[dict],
                    detail: bool) -> pd.DataFrame:
    """One row per model and window with the numbers the rules read (see the module docstring),
    the model's baselines over the whole filtered period (``base_*``) and its typical window
    (``typ_*``: the median over its windows). ``detail=False`` leaves out the evidence columns
    (:data:`DETAIL_COLUMNS`): :func:`diagnose` reads them for the windows a rule flags only."""
    m = _window_rows(con, f, window, base, detail) if base else pd.DataFrame()
    if m.empty:
        return m
    m = m.merge(hits.drop(columns="served"), on=["model", "window_start"], how="left")
    m["tail_share"] = m["tail_n"] / m["n"]
    m["pf_share"] = m["pf_tail_n"] / m["n"]
    m["waited_share"] = m["waited"] / m["n"]
    m["hit_rate"] = m["cache_hits"] / m["all_requests"]
    for col in ("tail_share", "pf_share", "queue_p95", "total_p50", "total_p99", "hit_rate"):
        m[f"typ_{col}"] = m.groupby("model")[col].transform("median")
    return m


# ---------------------------------------------------------------- rules: which windows each flags

def _history(row) -> bool:
    return row.windows >= MIN_HISTORY


def _significant(k, n, typical, low: bool = False) -> bool:
    """``k`` of ``n`` is too many (or, ``low``, too few) to be the typical share by chance: an exact
    binomial tail under SIGNIFICANCE. A handful of slow requests in a quiet hour does not count, and
    with hundreds of windows judged, one in a million is the bar."""
    from scipy import stats  # here, not at the top: scipy.stats costs every CLI command 0.5 s to import

    p = min(max(0.0 if pd.isna(typical) else float(typical), 0.01), 0.99)
    tail = stats.binom.cdf(k, n, p) if low else stats.binom.sf(k - 1, n, p)
    return bool(tail < SIGNIFICANCE)


def _over_history(value, typical, floor) -> bool:
    """A window stands out: at least ``floor`` and HISTORY_FACTOR x the model's typical window."""
    return value >= max(floor, HISTORY_FACTOR * (0.0 if pd.isna(typical) else typical))


def _queue_flag(row) -> bool:
    if not row.queue_n or pd.isna(row.queue_p95) or row.n < MIN_REQUESTS:
        return False
    floor = max(QUEUE_MIN_MS, QUEUE_VS_SERVICE * (row.base_svc_p50 or 0.0))
    if row.queue_p95 < floor or row.waited_share < TAIL_MIN_SHARE:
        return False
    return not _history(row) or (_over_history(row.queue_p95, row.typ_queue_p95, WAITED_MS)
                                 and _significant(row.waited, row.n, 0.0))


def _prefill_explains(row) -> bool:
    """Short log without token counts: the slow requests are the long prompts (median at least
    2x the length of 90 % of the others)."""
    return (row.decode_mode == "p10" and not pd.isna(row.tail_len_p50) and not pd.isna(row.fast_len_p90)
            and row.tail_len_p50 >= 2 * max(row.fast_len_p90, 1.0))


def _decode_flag(row) -> bool:
    if row.n < MIN_REQUESTS or row.tail_n < 2 or row.tail_share < TAIL_MIN_SHARE:
        return False
    if not _history(row):
        return not _prefill_explains(row)
    # with history, a decode slowdown in a window whose queue is deep is the batch growing under the
    # same load: the queue finding reports it
    return (_over_history(row.tail_share, row.typ_tail_share, TAIL_MIN_SHARE)
            and _significant(row.tail_n, row.n, row.typ_tail_share) and not _queue_flag(row))


def _prefill_flag(row) -> bool:
    if row.n < MIN_REQUESTS:
        return False
    if not _history(row):
        return row.tail_n >= 2 and row.tail_share >= TAIL_MIN_SHARE and _prefill_explains(row)
    return (row.pf_tail_n >= 2 and _over_history(row.pf_share, row.typ_pf_share, TAIL_MIN_SHARE)
            and _significant(row.pf_tail_n, row.n, row.typ_pf_share) and not _queue_flag(row))


def _tail_flag(row) -> bool:
    if row.n < 100 or pd.isna(row.total_p99) or not row.total_p50 or not _history(row):
        return False
    spike = row.total_p99 >= 5 * row.total_p50 and row.total_p50 <= 1.5 * row.typ_total_p50
    return (spike and row.total_p99 >= HISTORY_FACTOR * row.typ_total_p99
            and not (_queue_flag(row) or _decode_flag(row) or _prefill_flag(row)))


def _routing_flag(row) -> bool:
    """The semantic cache stopped hitting: under half the model's usual hit rate, and too few hits
    for that rate to be hourly noise (:func:`_significant`)."""
    if not _history(row) or row.all_requests < 50 or row.typ_hit_rate < 0.05:
        return False
    return (row.hit_rate < 0.5 * row.typ_hit_rate
            and _significant(row.cache_hits, row.all_requests, row.typ_hit_rate, low=True))


# ---------------------------------------------------------------- evidence and actions

def _ms(v) -> str:
    """A duration for people: milliseconds under a second, seconds from 1,000 ms."""
    return duration_ms(v)


def _count_range(lo, hi) -> str:
    return f"{lo:,.0f}" if round(lo) == round(hi) else f"{lo:,.0f}–{hi:,.0f}"


def _range(lo, hi) -> str:
    """``lo–hi`` with one unit: milliseconds under a second, else seconds (one value where both read alike)."""
    if abs(hi) < 1000:
        a, b = f"{lo:,.0f}", f"{hi:,.0f}"
        return f"{a} ms" if a == b else f"{a}–{b} ms"
    a, b = _ms(lo), _ms(hi)
    if a == b:
        return a
    return f"{a.removesuffix(' s')}–{b}" if a.endswith(" s") else f"{a}–{b}"


def _capped(v, cap) -> str:
    """A queue wait, named as the timeout cap where it is the wait at which requests gave up."""
    if cap is not None and not pd.isna(cap) and not pd.isna(v) and abs(float(v) - float(cap)) <= 1.0:
        return f"{_ms(v)} (the timeout cap)"
    return _ms(v)


def fleet_filters(f: Filters) -> Filters:
    """``f`` without its tenant and tier choices: a model's replicas, load and queue are shared by every
    tenant, so capacity is read and sized on the whole fleet's traffic of the period and models
    (:meth:`Filters.fleet`: a login's tenant scope is kept)."""
    return f.fleet()


def _span(start, end) -> str:
    if start.date() == (end - pd.Timedelta(microseconds=1)).date():
        return f"{start:%Y-%m-%d %H:%M}–{end:%H:%M} UTC"
    return f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"


def _worst_site(con, f: Filters, model: str, start, end) -> str | None:
    """The site (a separate pool of replicas) where most of the model's waiting happened, if the logs
    name more than one."""
    where, params = f.where()
    rows = con.execute(
        f"SELECT site, count(*) FILTER (WHERE queue_ms > {WAITED_MS}) AS waited FROM requests WHERE {where} "
        f"AND model = ? AND ts >= ? AND ts < ? AND site IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1",
        params + [model, start, end]).fetchall()
    return rows[0][0] if len(rows) > 1 else None


def _capacity(con, f: Filters, model: str, site: str | None, start=None, end=None) -> int | None:
    """The most requests of a model (at a site) in service at once in these logs, over the filtered
    period or within [start, end): the slots that were there to serve."""
    where, params = f.where()
    cond, extra = f" AND model = ? AND {sql.SERVED}", [model]
    if site is not None:
        cond, extra = cond + " AND site = ?", extra + [site]
    if start is not None:
        cond, extra = cond + " AND ts >= ? AND ts < ?", extra + [start, end]
    # latency.concurrency_sql's sweep (tolerance 5 ms), counted in numpy: one model, one partition; over the
    # whole period of a 10M-row store 0.2-0.3 s instead of 0.9-1.2 s for the SQL window
    cols = con.sql(
        f"SELECT epoch_us(ts) / 1e3 + coalesce(route_ms, 0) + coalesce(queue_ms, 0) AS start_ms, "
        f"epoch_us(ts) / 1e3 + total_ms - 5.0 AS end_ms FROM requests WHERE {where}{cond} AND total_ms IS NOT NULL "
        f"AND ts IS NOT NULL",
        params=params + extra).fetchnumpy()
    if not len(cols["start_ms"]):
        return None
    _, concurrency = latency.concurrency_at_starts(np.asarray(cols["start_ms"], dtype=float),
                                                   np.asarray(cols["end_ms"], dtype=float))
    return int(concurrency.max())


def _missing_replicas(con, f: Filters, model: str, site: str | None, start, end) -> list[str]:
    """Replicas that served the model (at the site) in the period but began serving nothing in [start, end):
    judged by when service started (arrival + route + queue), so a request that arrived in the span and
    waited until the replica came back does not make it look alive."""
    where, params = f.where()
    cond, extra = ("", []) if site is None else (" AND site = ?", [site])
    rows = con.execute(
        f"SELECT replica FROM requests WHERE {where} AND model = ? AND replica IS NOT NULL{cond} GROUP BY 1 "
        f"HAVING count(*) FILTER (WHERE epoch_us(ts) / 1e3 + coalesce(route_ms, 0) + coalesce(queue_ms, 0) "
        f">= epoch_us(?::TIMESTAMP) / 1e3 AND epoch_us(ts) / 1e3 + coalesce(route_ms, 0) + coalesce(queue_ms, 0) "
        f"< epoch_us(?::TIMESTAMP) / 1e3) = 0 ORDER BY 1",
        params + [model] + extra + [start, end]).fetchall()
    return [r[0] for r in rows]


def _busy_period(con, f: Filters, model: str, start, end) -> dict | None:
    """The burst with the most queueing in [start, end): requests chained by overlapping
    [ts, ts + total_ms], in arrival order. None for windows too big to list."""
    where, params = f.where()
    rows = con.execute(
        f"SELECT ts, total_ms, coalesce(queue_ms, 0), {sql.SERVICE_MS} FROM requests WHERE {where} AND model = ? "
        f"AND ts >= ? AND ts < ? AND {sql.SERVED} AND total_ms IS NOT NULL "
        f"ORDER BY ts, request_id LIMIT 501", params + [model, start, end]).fetchall()
    if not rows or len(rows) > 500:
        return None
    periods, cur, cur_end = [], [], None
    for ts, total, queue, svc in rows:
        t0 = pd.Timestamp(ts)
        t1 = t0 + pd.Timedelta(milliseconds=float(total))
        if cur and t0 <= cur_end:
            cur.append((t0, total, queue, svc))
            cur_end = max(cur_end, t1)
        else:
            if cur:
                periods.append(cur)
            cur, cur_end = [(t0, total, queue, svc)], t1
    periods.append(cur)
    best = max(periods, key=lambda p: sum(q for _, _, q, _ in p))
    queues = [q for _, _, q, _ in best]
    waited = [q for q in queues if q > WAITED_MS]
    first_wait = next((i for i, q in enumerate(queues) if q > WAITED_MS), len(queues))
    return {"burst_requests": len(best), "burst_no_wait": len(queues) - len(waited),
            "burst_leading_no_wait": first_wait,
            "burst_wait_min_ms": min(waited) if waited else 0.0, "burst_wait_max_ms": max(waited) if waited else 0.0,
            "burst_wait_rising": bool(waited) and all(b >= a for a, b in zip(waited, waited[1:], strict=False)),
            "burst_arrival_span_s": (best[-1][0] - best[0][0]).total_seconds(),
            "burst_service_s": sum(s for *_, s in best if s is not None) / 1000, "burst_start": best[0][0]}


PEAK_S = 300.0
SUSTAINED_MIN = 30             # a queue deep for this many minutes is critical; a shorter burst, a warning
#: what a finding's severity rates, in words: its symptom, not the requests hit, which an incident's severity
#: weighs (finops.ops.incidents.severity); a critical finding may sit in a warning or info incident
SEVERITY_MEANS = ("A finding's severity rates how strongly its symptom stands out (a queue wait as long as the "
                  "service time or deep for 30 minutes, a decode a second over its baseline or slow on a fifth of the "
                  "requests), not how many requests it hit: an incident's severity (`python -m finops incidents`) "
                  "weighs that (the share of the model's requests hit and the minutes of SLA alerts), so a "
                  "critical finding may sit in a warning or info incident.")


def _load_profile(con, f: Filters, model: str, start, end, site: str | None) -> pd.DataFrame:
    """Per 5 minutes of [start, end): arrivals, seconds of service they brought (a request that left the
    queue unserved counts at the mean service time), the most requests in service at once (the slots
    that were there, when the queue is deep) and the replicas that served."""
    where, params = f.where()
    cond, extra = f" AND model = ? AND {sql.SERVED} AND ts >= ? AND ts < ?", [model, start, end]
    if site is not None:
        cond, extra = cond + " AND site = ?", extra + [site]
    inner = latency.concurrency_sql(where + cond, extra_cols=f"ts, replica, {sql.SERVICE_MS} AS svc", tolerance_ms=5.0)
    return con.execute(
        f"SELECT {sql.time_bucket('5min')} AS b, count(*) AS n, count(*) * avg(svc) / 1000 AS work_s, "
        f"max(concurrency) AS slots, count(DISTINCT replica) AS replicas FROM ({inner}) GROUP BY 1 ORDER BY 1",
        params + extra).df()


def _deep_queue(con, f: Filters, model: str, start, end, site: str | None,
                floor_ms: float) -> tuple[int, int, float | None]:
    """(minutes in 5-minute steps whose queue P95 was at least ``floor_ms``, requests that gave up
    waiting: status timeout, the longest wait of those that gave up: the timeout cap) within [start, end)."""
    where, params = f.where()
    cond, extra = ("", []) if site is None else (" AND site = ?", [site])
    deep, gave_up, cap = con.execute(
        f"SELECT count(*) FILTER (WHERE q95 >= ?) * 5, coalesce(sum(timeouts), 0), max(cap) FROM ("
        f"SELECT {sql.time_bucket('5min')} AS b, quantile_cont(queue_ms, 0.95) AS q95, "
        f"count(*) FILTER (WHERE status = 'timeout') AS timeouts, max(queue_ms) FILTER (WHERE status = 'timeout') "
        f"AS cap FROM requests WHERE {where} AND model = ? "
        f"AND ts >= ? AND ts < ? AND {sql.SERVED}{cond} GROUP BY 1)",
        [floor_ms] + params + [model, start, end] + extra).fetchall()[0]
    return int(deep), int(gave_up), (None if cap is None else float(cap))


def _engine_evidence(con, model: str, start, end, metrics: dict) -> str:
    """What the engine's own queue said over the span (vLLM's ``num_requests_waiting``, scraped into
    ``engine_metrics``), as a sentence for the evidence; "" where no scrape covers the span."""
    eq = engine.engine_queue(con, model, pd.Timestamp(start).to_pydatetime(), pd.Timestamp(end).to_pydatetime())
    if eq is None:
        return ""
    metrics.update({"engine_scrapes": eq.scrapes, "engine_replicas": eq.replicas,
                    "engine_waiting_mean": eq.waiting_mean, "engine_waiting_max": eq.waiting_max,
                    "engine_running_max": eq.running_max, "engine_kv_cache_usage_max": eq.kv_cache_max})
    where = ", ".join(eq.replicas)
    if eq.waiting_max <= 0:
        return (f" The engine's own queue (vllm:num_requests_waiting on {where}, {eq.scrapes} scrapes) stayed empty: "
                "the requests waited before reaching the engine (gateway or router).")
    running = f", with up to {eq.running_max:.0f} running" if eq.running_max is not None else ""
    kv = f" and KV-cache usage up to {eq.kv_cache_max:.0%}" if eq.kv_cache_max is not None else ""
    return (f" The engine's own queue agrees: vllm:num_requests_waiting on {where} held {eq.waiting_mean:.1f} "
            f"requests on average and {eq.waiting_max:.0f} at most over {eq.scrapes} scrapes{running}{kv}.")


def _queue_finding(con, f, model, ep: pd.DataFrame, worst, start, end) -> Finding:
    n = int(ep["n"].sum())
    fleet = fleet_filters(f)      # the queue is the fleet's: slots, load and replicas from every tenant
    metrics = {"requests": n, "queue_p95_ms": worst.queue_p95, "queue_max_ms": worst.queue_max,
               "waited_share": float(ep["waited"].sum() / n), "service_p50_ms": worst.svc_p50,
               "queue_share_of_total": worst.queue_share}
    burst = None if _history(worst) else _busy_period(con, fleet, model, start, end)
    if burst and burst["burst_requests"] > 1 and burst["burst_wait_max_ms"] > 0:
        b = burst
        slots = max(b["burst_leading_no_wait"], 1)
        span = b["burst_arrival_span_s"]
        rho = b["burst_service_s"] / (slots * span) if span > 0 else math.inf
        metrics.update({k: v for k, v in b.items() if k != "burst_start"}, slots=slots,
                       slots_basis="requests that started without waiting", rho=rho)
        rho_text = "utilisation (ρ) far above 1" if rho > 10 else f"utilisation (ρ) about {rho:.1f}"
        trend = "rising" if b["burst_wait_rising"] else "not monotonic"
        evidence = (f"{b['burst_requests']} concurrent requests to {model} (from {b['burst_start']:%H:%M:%S}): "
                    f"the first {b['burst_leading_no_wait']} started without waiting, the other "
                    f"{b['burst_requests'] - b['burst_no_wait']} waited {_ms(b['burst_wait_min_ms'])} → "
                    f"{_ms(b['burst_wait_max_ms'])} ({trend}), against a service time of about "
                    f"{_ms(worst.svc_p50)}. So {model} is queue-bound: about {slots} slot"
                    f"{'s' if slots != 1 else ''} (the requests that started without waiting) and work arrived "
                    f"faster than they serve it ({rho_text} over the burst: {b['burst_service_s']:,.1f} s of "
                    f"service arriving within {span:,.3f} s).")
        # to serve a burst of requests in flight together without waiting takes one slot each
        need = b["burst_requests"] if span <= 0 else min(math.ceil(b["burst_service_s"] / span / TARGET_RHO),
                                                          b["burst_requests"])
    else:
        site = _worst_site(con, fleet, model, start, end)
        c_all = _capacity(con, fleet, model, site)
        down = _missing_replicas(con, fleet, model, site, start, end)
        prof = _load_profile(con, fleet, model, start, end, site)
        prof = prof[prof["slots"] > 0]
        rho = rho_peak = peak_at = c = None
        if len(prof):
            rho = float(prof["work_s"].sum() / (PEAK_S * prof["slots"]).sum())
            rho_b = prof["work_s"] / (PEAK_S * prof["slots"])
            k = int(rho_b.to_numpy().argmax())
            rho_peak, peak_at = float(rho_b.iloc[k]), pd.Timestamp(prof["b"].iloc[k])
            c = int(prof["slots"].median())
        reps_all = con.execute("SELECT count(DISTINCT replica) FROM requests WHERE model = ? AND replica IS NOT NULL"
                               + ("" if site is None else " AND site = ?"),
                               [model] + ([] if site is None else [site])).fetchall()[0][0]
        reps = int(prof["replicas"].median()) if len(prof) else None
        metrics.update({"site": site, "slots": c, "slots_period_max": c_all, "replicas_serving": reps,
                        "replicas": reps_all, "replicas_idle": down, "rho": rho, "peak_rho_5min": rho_peak,
                        "peak_5min_start": peak_at})
        at = f" at {site} (where the waiting was)" if site else ""
        rho_text = ""
        if rho is not None:
            rho_text = (f" Offered load{at} ρ = service demanded / slot time in service = {rho:.2f} over the span, "
                        f"{rho_peak:.2f} in the busiest 5 minutes (from {peak_at:%H:%M}), with about {c} requests in "
                        "service at a time" + (f" (against {c_all} at most over the period)" if c_all and c_all > c
                                                else "") + ".")
            if reps and reps_all and reps < reps_all:
                rho_text += f" Only {reps} of its {reps_all} replicas served in a typical 5 minutes of the span."
        if down:
            rho_text += f" {', '.join(down)} served no request in this span."
        floor = max(QUEUE_MIN_MS, QUEUE_VS_SERVICE * (worst.base_svc_p50 or 0.0))
        deep_min, gave_up, cap = _deep_queue(con, fleet, model, start, end, site, floor)
        metrics.update({"deep_queue_minutes": deep_min, "queue_timeouts": gave_up, "queue_timeout_cap_ms": cap})
        rho_text += (f" The queue stayed deep (P95 over {_ms(floor)}) for {deep_min} minutes"
                     + (f" and {gave_up:,} requests gave up waiting (status timeout)." if gave_up else "."))
        slowed = (f" Decode slowed too ({worst.tail_share:.0%} of requests over their usual decode time) as the "
                  "batch grew." if _history(worst) and _over_history(worst.tail_share, worst.typ_tail_share,
                                                                      TAIL_MIN_SHARE) else "")
        evidence = (f"{_span(start, end)}: {metrics['waited_share']:.0%} of {n:,} requests to {model} waited over "
                    f"{WAITED_MS:.0f} ms; queue P95 {_capped(worst.queue_p95, cap)}"
                    + ("" if _capped(worst.queue_max, cap) == _capped(worst.queue_p95, cap)
                       else f", longest {_capped(worst.queue_max, cap)},")
                    + (f" against {_ms(worst.typ_queue_p95)} in a typical window" if _history(worst) else "")
                    + f", while its median service time is {_ms(worst.svc_p50)}: queue-bound.{rho_text}{slowed}")
        need = math.ceil(max(rho_peak or 0.0, rho or 0.0) * c / TARGET_RHO) if c else None
    if f.scoped:      # sized on the tenants' share of a fleet that serves others too: no sizing, and say so
        need = None
        evidence += (" These figures count your tenants' requests only; the fleet serves other tenants too, so its "
                     "owner sizes it on the whole load.")
    metrics["slots_needed_at_rho_0_7"] = need
    evidence += "" if f.scoped else _engine_evidence(con, model, start, end, metrics)
    if _history(worst):   # sustained: critical; a short burst: a warning
        severity = "critical" if metrics["deep_queue_minutes"] >= SUSTAINED_MIN else "warning"
    else:
        severity = "critical" if worst.queue_p95 >= worst.svc_p50 else "warning"
    more = f" (about {need} slots in all for a utilisation (ρ) of 0.7)" if need else ""
    fix = (f"Bring {', '.join(metrics['replicas_idle'])} back or add {model} replicas{more}"
           if metrics.get("replicas_idle") else f"Add {model} replicas{more}")
    action = (f"{fix}; rate-limit or shed long and low-tier requests while the queue is deep; check the batch "
              "scheduler's wait.")
    return Finding("queue", model, severity, evidence, action, metrics)


def _decode_finding(con, f, model, ep, worst, start, end) -> Finding:
    n, tail_n = int(ep["n"].sum()), int(ep["tail_n"].sum())
    share = tail_n / n
    excess = float(worst.tail_excess_mean)
    metrics = {"requests": n, "tail_requests": tail_n, "tail_share": share, "mode": worst.decode_mode,
               "excess_ms": excess, "tail_actual_mean_ms": worst.tail_actual_mean,
               "tail_expected_mean_ms": worst.tail_expected_mean}
    history = _history(worst)
    cut_ms = max(worst.base_excess_p95, TAIL_MIN_EXCESS_MS) if history else None
    if worst.decode_mode == "tpot":
        metrics.update({"tpot_baseline_ms": worst.base_tpot,
                        "decode_tokens_per_s_baseline": 1000 / worst.base_tpot if worst.base_tpot else None,
                        "tail_tpot_mean_ms": worst.tail_tpot_mean, "tail_cut_ms": cut_ms})
        over = (f"ran more than {_ms(cut_ms)} over the decode time their output tokens predict at its usual "
                f"{worst.base_tpot:,.1f} ms/token ({1000 / worst.base_tpot:,.1f} tokens/s), against "
                f"{worst.typ_tail_share:.0%} in a typical window" if history else
                f"took over {TAIL_FACTOR:g}× the decode time their output tokens predict at its fastest "
                f"{worst.base_tpot:,.1f} ms/token (the quickest tenth of its requests)")
        queue_note = ("its queue stayed short." if int(ep["waited"].sum()) < TAIL_MIN_SHARE * n else
                      "its queue was deep too, but this time is spent in decode, after the wait.")
        with_length = (not pd.isna(worst.tail_out_p50) and not pd.isna(worst.out_p50)
                       and worst.tail_out_p50 >= LOAD_LENGTH_RATIO * max(worst.out_p50, 1.0))
        metrics.update({"tail_output_tokens_p50": worst.tail_out_p50, "output_tokens_p50": worst.out_p50,
                        "grows_with_output_length": bool(with_length)})
        if with_length:
            why = (f"The slow ones are the long generations (median {worst.tail_out_p50:,.0f} output tokens vs "
                   f"{worst.out_p50:,.0f} for all): decode per token slowed as the batch grew, decode-bound under "
                   "load.")
        else:
            why = (f"It hits short and long generations alike (median {worst.tail_out_p50:,.0f} output tokens vs "
                   f"{worst.out_p50:,.0f} for all), so it is a delay per request, not per token: a decode long "
                   "tail (a stall, preemption or a slow node).")
        evidence = (f"{_span(start, end) + ': ' if history else ''}{tail_n:,} of {n:,} requests to {model} "
                    f"({share:.0%}) {over}. On average they took {_ms(excess)} extra ({_ms(worst.tail_actual_mean)} "
                    f"vs {_ms(worst.tail_expected_mean)}); {queue_note} {why}")
    elif worst.decode_mode == "fit":
        when = f"{_span(start, end)}: " if history else ""
        typical = f", against {worst.typ_tail_share:.0%} in a typical window" if history else ""
        evidence = (f"{when}{tail_n:,} of {n:,} requests to {model} ({share:.0%}{typical}) took "
                    f"{_ms(worst.tail_actual_mean)} of service on average against {_ms(worst.tail_expected_mean)} "
                    f"their tokens predict (+{_ms(excess)}; expected = least squares of service time on input and "
                    "output tokens over the period; the logs do not split prefill from decode). With the tokens "
                    "accounted for: a decode long tail.")
    else:
        metrics.update({"service_baseline_ms": worst.base_svc_p10, "service_excess_ms": excess,
                        "tail_service_min_ms": worst.tail_actual_min, "tail_service_max_ms": worst.tail_actual_max,
                        "tail_prompt_len_p50": worst.tail_len_p50, "other_prompt_len_max": worst.fast_len_max})
        lens = ""
        if not pd.isna(worst.tail_len_min) and not pd.isna(worst.fast_len_max):
            unit = "tokens" if worst.len_in_tokens else "characters"
            lens = (f" Their prompts are about as long as the others' ({_count_range(worst.tail_len_min, worst.tail_len_max)}"
                    f" vs {_count_range(worst.fast_len_min, worst.fast_len_max)} {unit}), so prefill does not explain it.")
        queue = (f" None of the {model} requests queued (queue_ms ≈ 0): capacity was not the problem."
                 if worst.queue_n and int(ep["waited"].sum()) == 0 else "")
        base = f"a baseline of {_ms(worst.base_svc_p10)} (its fastest tenth)"
        when = f"{_span(start, end)}: " if history else ""
        evidence = (f"{when}{tail_n} of {n} requests to {model} took "
                    f"{_range(worst.tail_actual_min, worst.tail_actual_max)} of service against {base}: "
                    f"service_ms is about {_ms(excess)} over its baseline.{lens}{queue} A decode long tail"
                    " (the logs have service_ms only, no prefill/decode split).")
    severity = "critical" if (excess >= 1000 or share >= 0.2) and not metrics.get("grows_with_output_length") \
        else "warning"
    action = (f"Find what lengthens {model}'s decode (long generations, KV-cache pressure, a slow node or "
              "replica): cap max output tokens or rate-limit long requests; watch decode tokens/s against "
              "concurrency.")
    return Finding("decode", model, severity, evidence, action, metrics)


def _prefill_finding(con, f, model, ep, worst, start, end) -> Finding:
    n = int(ep["n"].sum())
    if _history(worst):
        k = int(ep["pf_tail_n"].sum())
        metrics = {"requests": n, "slow_prefill_requests": k, "slow_prefill_share": k / n,
                   "prefill_excess_mean_ms": worst.pf_excess_mean, "prefill_ms_per_token": worst.pf_b,
                   "prefill_fixed_ms": worst.pf_a}
        evidence = (f"{_span(start, end)}: {k:,} of {n:,} requests to {model} ({k / n:.0%}) took "
                    f"{_ms(worst.pf_excess_mean)} more prefill than their prompt predicts ({worst.pf_a:,.0f} ms + "
                    f"{worst.pf_b:,.3f} ms per prompt token over the period); in a typical window "
                    f"{worst.typ_pf_share:.0%} do: prefill-bound.")
    else:
        metrics = {"requests": n, "slow_requests": int(ep["tail_n"].sum()), "slow_prompt_len_p50": worst.tail_len_p50,
                   "fast_prompt_len_p90": worst.fast_len_p90, "service_baseline_ms": worst.base_svc_p10}
        evidence = (f"{int(ep['tail_n'].sum())} of {n} requests to {model} were slow (service up to "
                    f"{_ms(worst.tail_actual_max)} vs {_ms(worst.base_svc_p10)} baseline) and they are the long "
                    f"prompts: median length {worst.tail_len_p50:,.0f} vs {worst.fast_len_p90:,.0f} for 90 % of "
                    "the fast ones: prefill-bound (long context).")
    action = (f"Route long prompts away from {model} or give them a separate pool; use prefix caching and "
              "chunked prefill; cap the context length.")
    return Finding("prefill", model, "warning", evidence, action, metrics)


def _tail_finding(con, f, model, ep, worst, start, end) -> Finding:
    where, params = f.where()
    trace = con.execute(
        f"SELECT ts, total_ms, replica, {', '.join(expr for _, expr in store.SEGMENT_EXPRS)} FROM requests "
        f"WHERE {where} AND model = ? AND ts >= ? AND ts < ? AND total_ms IS NOT NULL AND ({sql.OK}) "
        f"ORDER BY total_ms DESC LIMIT 1", params + [model, start, end]).fetchall()
    parts = ""
    if trace:
        t = trace[0]
        segs = [(store.SEGMENT_LABELS[name], v) for (name, _), v in zip(store.SEGMENT_EXPRS, t[3:], strict=True)
                if v is not None]
        segs.append(("unlogged (network, gateway, ...)", t[1] - sum(v for _, v in segs)))
        parts = (f" The slowest request ({t[0]:%H:%M:%S}{', replica ' + t[2] if t[2] else ''}) took {_ms(t[1])}: "
                 + ", ".join(f"{k} {_ms(v)}" for k, v in segs) + ".")
    metrics = {"requests": int(ep["n"].sum()), "total_p50_ms": worst.total_p50, "total_p99_ms": worst.total_p99,
               "typical_total_p50_ms": worst.typ_total_p50, "typical_total_p99_ms": worst.typ_total_p99}
    evidence = (f"{_span(start, end)}: {model}'s median is normal ({_ms(worst.total_p50)}) but the P99 of its "
                f"successful requests spikes to {_ms(worst.total_p99)} ({worst.total_p99 / worst.total_p50:,.0f}× the "
                f"median, {worst.total_p99 / worst.typ_total_p99:,.1f}× its usual P99), with no queue, prefill or "
                f"decode pattern behind it.{parts}")
    action = ("Pull the P99 requests' traces segment by segment: GC pauses, preemption, one oversized request or "
              "a bad node (compare replicas).")
    return Finding("tail", model, "warning", evidence, action, metrics)


def _routing_finding(con, f, model, ep, worst, start, end) -> Finding:
    metrics = {"requests": int(ep["all_requests"].sum()), "cache_hit_rate": worst.hit_rate,
               "typical_cache_hit_rate": worst.typ_hit_rate}
    evidence = (f"{_span(start, end)}: the semantic cache served {worst.hit_rate:.1%} of {model}'s "
                f"{int(worst.all_requests):,} requests against {worst.typ_hit_rate:.1%} in a typical window: the "
                "cache stopped hitting, so the model took the load.")
    action = "Check the semantic cache (eviction, a deploy that changed keys or embeddings, TTL) before adding capacity."
    return Finding("routing", model, "warning", evidence, action, metrics)


@dataclass(frozen=True)
class Rule:
    """One row of the playbook: which windows it flags, how a flagged span reads, what to do."""
    name: str
    layer: str
    symptom: str
    flag: Callable[[object], bool]
    worst: str                  # the window metric whose maximum picks the episode's worst window
    describe: Callable[..., Finding]


RULES: tuple[Rule, ...] = (
    Rule("cache_collapse", "routing", "slow requests concentrate on a model: the cache stopped hitting",
         _routing_flag, "all_requests", _routing_finding),
    Rule("queue_bound", "queue", "high TTFT, fast per token: batch wait / queue build-up (ρ → 1)",
         _queue_flag, "queue_p95", _queue_finding),
    Rule("prefill_bound", "prefill", "long prompts slow, short ones fast: prefill-bound",
         _prefill_flag, "pf_share", _prefill_finding),
    Rule("decode_tail", "decode", "long outputs slow: decode-bound / a decode long tail",
         _decode_flag, "tail_share", _decode_finding),
    Rule("tail_spike", "tail", "median normal, P99 spikes: GC / preemption / an outlier request / a bad node",
         _tail_flag, "total_p99", _tail_finding),
)


def _flags(m: pd.DataFrame, rows: np.ndarray) -> dict[str, np.ndarray]:
    """Per rule, whether it flags each window of ``m``; judged at ``rows`` only (False elsewhere)."""
    at = np.flatnonzero(rows)
    judged = list(m.iloc[at].itertuples(index=False))       # read once for every rule
    out = {}
    for rule in RULES:
        flagged = np.zeros(len(m), dtype=bool)
        flagged[at] = [bool(rule.flag(r)) for r in judged]
        out[rule.name] = flagged
    return out


#: what an empty diagnosis means where the logs carry no latency at all (a trace of tokens and times): nothing was
#: read, so its silence says nothing about health
NO_LATENCY = ("these logs carry no latency (total, queue, prefill, decode or first token), so there is nothing to "
              "read for a queue build-up, a decode tail or a P99 spike")


NO_REQUESTS = "no served request matches these filters (a tenant, model or period with no traffic)"


def silent_why(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> str | None:
    """Why a diagnosis of ``f`` that found nothing says nothing: :data:`NO_REQUESTS` when no served request
    matches (a tenant with no traffic, a mistyped one), :data:`NO_LATENCY` when those requests carry no latency,
    None when it read latencies and nothing stood out."""
    cov = latency.coverage(con, f or Filters())
    if not cov.get("request_id"):
        return NO_REQUESTS
    return None if any(cov.get(name) for name in sql.LATENCY_COLUMNS) else NO_LATENCY


def diagnose(con: duckdb.DuckDBPyConnection, f: Filters | None = None, window: str = "hour") -> list[Finding]:
    """Every rule over every model and window; adjacent flagged windows merge into one finding.

    Findings are ordered by severity, then layer (routing → tail), then time.
    """
    f = store.raw_scope(con, f or Filters()).filters     # a period too large to read at once: its latest hours
    _check_window(window)
    hits = _hits(con, f, window)
    base = _baselines(con, f, window, hits)
    m = _window_metrics(con, f, window, hits, base, detail=False)
    if m.empty:
        return []
    # with history the rules read no evidence column: judge those windows, then fetch the evidence for the
    # flagged ones and for every window of a model without history (whose rules read it), then judge those
    history = (m["windows"] >= MIN_HISTORY).to_numpy()
    flags = _flags(m, history)
    need = ~history | np.logical_or.reduce(list(flags.values()))
    if need.any():
        keys = ["model", "window_start"]
        d = _window_rows(con, f, window, base, detail=True, only=m.loc[need, keys])
        m = m.merge(d[keys + list(DETAIL_COLUMNS)], on=keys, how="left")
    if not history.all():
        for name, more in _flags(m, ~history).items():
            flags[name] |= more
    step = WINDOWS[window]
    found: list[tuple] = []
    for rule in RULES:
        hit = m[flags[rule.name]]
        for model, g in hit.groupby("model", sort=True):
            g = g.sort_values("window_start")
            starts = list(g["window_start"])
            group_id = np.cumsum([True] + [b - a != step for a, b in zip(starts, starts[1:], strict=False)])
            for _, ep in g.groupby(group_id):
                worst = ep.loc[ep[rule.worst].astype(float).idxmax()] if ep[rule.worst].notna().any() else ep.iloc[0]
                if rule.worst == "all_requests":
                    worst = ep.loc[ep["hit_rate"].astype(float).idxmin()]
                start, end = ep["window_start"].iloc[0], ep["window_start"].iloc[-1] + step
                finding = rule.describe(con, f, model, ep, worst, start, end)
                finding.metrics.update({"rule": rule.name, "window_start": start, "window_end": end,
                                        "windows": len(ep)})
                found.append((SEVERITIES.index(finding.severity), LAYERS.index(finding.layer), start, finding))
    found.sort(key=lambda t: t[:3])
    return [t[-1] for t in found]


def as_json(findings: list[Finding]) -> dict:
    """``{"findings": [{"layer", "model", "severity", "evidence", "action", "metrics"}]}``, JSON-ready."""
    return {"findings": [{**{k: v for k, v in fd.as_dict().items() if k != "metrics"},
                          "metrics": jsonable(fd.metrics)} for fd in findings]}
