"""Routing analytics: the traffic mix, the semantic cache, the cascade, misrouting and what-if replay.

Spend figures come from the hourly rollups through :mod:`finops.spend.report` (the same numbers as
the Cost page). The what-if replay and misrouting read raw rows, aggregated to a *replay
basis* (tier x model x escalated x prompt length), and reprice it.

Effective prices (:func:`effective_prices`)
-------------------------------------------
An API model costs its price-book token prices. A self-hosted model has no token price: it
costs its fleet by the hour. For repricing it gets an **effective $ per 1M tokens = the
fleet's cost over the period (busy and idle) / the tokens it served in the period**, the same
price for input and output tokens. Moving traffic onto a self-hosted model at that price
assumes its fleet grows or shrinks in proportion to its tokens at today's utilisation.

What-if replay (:func:`whatif`)
-------------------------------
* Token counts are kept: a request moved to another model is assumed to read and write the
  same tokens (prompt-cached tokens stay cached).
* Semantic-cache hits are left out: they are served from the cache under any policy.
* A cascade escalation is two rows; under a policy that does not cascade, the rejected
  small-model attempt disappears and the request is one call to its target.
* A *cascade* strategy sends each request to the small model and escalates a share ``p`` of
  them to the large one (both are paid): expected cost ``small + p x large``; ``p`` is the
  escalation rate observed in the filtered logs (else 30 %, the seed's worked example).
* *latency-first* sends each request to whichever of small and large is estimated faster for
  its tokens.
* Latency is estimated from each target model's observed per-token rates
  (:func:`latency_rates`); the replay reports the mean, not a percentile.
* The baseline is the actual routing **priced as the bill prices it** (recorded costs, else the
  price row its model resolves to for the request's day and tiers: :mod:`finops.spend.pricing`),
  self-hosted traffic at its effective price, so the change is policy alone; the bill for the same
  filters (spend report, with idle GPU time unless tenants or tiers are picked) is reported beside
  it. Unfiltered, the two agree but for what the logs recorded for semantic-cache hits (on the bill,
  not replayed): the effective price spreads the fleet's cost, idle time included, over its tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

import duckdb
import numpy as np
import pandas as pd

from finops import sql, store
from finops.errors import InputError
from finops.filters import Filters
from finops.fmt import some_of
from finops.latency.servicefit import nonneg_fit
from finops.spend import pricing
from finops.spend import report as spend

LEN_THRESHOLD = 40            # the seed gateway's rule: "slow" if len(prompt) > LEN_THRESHOLD else "fast"
DEFAULT_ESCALATION_RATE = 0.3  # the seed's worked example (threshold 0.80: 30 % escalate)
MIX_DIMS = ("route", "model")
SPLITS = ("tenant", "sla_tier")


# ---------------------------------------------------------------- mix

def mix(con: duckdb.DuckDBPyConnection, f: Filters, dim: str = "route", grain: str | None = None,
        split: str | None = None) -> pd.DataFrame:
    """Share of requests, tokens and spend by ``dim`` (route or model), optionally per time bucket
    (``grain``: hour/day/week/month) and per ``split`` (tenant or sla_tier).

    Columns: [period], [split], ``series``, requests, tokens, cost_usd and ``request_share``,
    ``token_share``, ``spend_share`` within each period and split (fractions of 1). Spend here is
    the requests' spend: idle GPU capacity belongs to no route and is left out.
    """
    if dim not in MIX_DIMS:
        raise InputError(f"mix by {dim}? choose from {', '.join(MIX_DIMS)}")
    if split is not None and split not in SPLITS:
        raise InputError(f"split by {split}? choose from {', '.join(SPLITS)}")
    keys = ([grain] if grain else []) + ([split] if split else [])
    rep = spend.report(con, f, by=[*keys, dim], include_idle=False)
    out = pd.DataFrame({"period": rep[grain]} if grain else {})
    if split:
        out[split] = rep[split].replace("", "(none)")
    out["series"] = rep[dim].replace("", "(none)")
    out["requests"] = rep["requests"]
    out["tokens"] = rep["input_tokens"] + rep["output_tokens"]
    out["cost_usd"] = rep["cost_usd"].fillna(0.0)
    part = (["period"] if grain else []) + ([split] if split else [])
    for measure, share in (("requests", "request_share"), ("tokens", "token_share"), ("cost_usd", "spend_share")):
        total = out.groupby(part)[measure].transform("sum") if part else out[measure].sum()
        out[share] = out[measure] / total
        out[share] = out[share].where(out[share].notna() & (total != 0))
    return out.reset_index(drop=True)


# ---------------------------------------------------------------- prices

def _model_totals(con: duckdb.DuckDBPyConnection, f: Filters, include_idle: bool | None) -> pd.DataFrame:
    costed_sql, params = spend.costed(con, f, include_idle)
    return con.execute(f"""
SELECT model, coalesce(sum(requests), 0) AS requests, coalesce(sum(cache_hits), 0) AS cache_hits,
       coalesce(sum(input_tokens), 0) AS input_tokens, coalesce(sum(output_tokens), 0) AS output_tokens,
       coalesce(sum(cache_uncached_input_tokens + cache_cached_input_tokens), 0) AS cache_input_tokens,
       coalesce(sum(cache_output_tokens), 0) AS cache_output_tokens,
       coalesce(sum(cost_usd), 0) AS cost_usd, coalesce(sum(cache_saved_usd), 0) AS cache_saved_usd
FROM ({costed_sql}) GROUP BY 1 ORDER BY 1""", params).df()


def effective_prices(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """Per model of the price book: the prices a request is repriced at (see the module docstring).

    Columns: model, kind, size_class, input_usd_per_1m, cached_input_usd_per_1m,
    output_usd_per_1m, request_usd, basis. A self-hosted model's effective price uses the
    whole fleet's cost and tokens in the period of ``f`` (all tenants: it is a property of the
    fleet); null when it served no tokens in the period. An API model with several rows (dated, service or
    context tiers) is repriced at its standard, base-context row in force on the period's last day
    (:func:`finops.spend.pricing.book_row_per_model`; the row with no end date when the period has none).
    """
    day = (f.until - timedelta(microseconds=1)).date() if f.until is not None else None
    book = pricing.book_row_per_model(con, day)
    several = set(con.execute("SELECT model FROM prices GROUP BY model HAVING count(*) > 1").df()["model"])
    # the fully loaded unit cost (spend.report.UNIT_COSTS): the fleet's cost, idle included, per 1M served tokens
    loaded = spend.unit_costs(con, Filters(since=f.since, until=f.until)).set_index("model")["fully_loaded_usd_per_1m"]
    rows = []
    for p in book.itertuples(index=False):
        if p.kind == "self_hosted":
            eff = loaded.get(p.model)
            eff = None if eff is None or pd.isna(eff) else float(eff)
            rows.append((p.model, p.kind, p.size_class, eff, eff, eff, 0.0,
                         "fleet cost / served tokens in the period" if eff is not None
                         else "self-hosted: no tokens served in the period"))
        else:
            def num(v):
                return None if v is None or pd.isna(v) else float(v)
            cached = num(p.cached_input_usd_per_1m)
            rows.append((p.model, p.kind, p.size_class, num(p.input_usd_per_1m) or 0.0,
                         cached if cached is not None else (num(p.input_usd_per_1m) or 0.0),
                         num(p.output_usd_per_1m) or 0.0, num(p.request_usd) or 0.0,
                         _row_basis(p) if p.model in several else "price book"))
    return pd.DataFrame(rows, columns=["model", "kind", "size_class", "input_usd_per_1m", "cached_input_usd_per_1m",
                                       "output_usd_per_1m", "request_usd", "basis"])


def _row_basis(p) -> str:
    """Which of an API model's price-book rows the replay prices it at, in words."""
    since = f" from {p.effective_from:%Y-%m-%d}" if pd.notna(p.effective_from) else ""
    until = f" to {p.effective_to:%Y-%m-%d}" if pd.notna(p.effective_to) else ""
    return f"price book (its standard row{since}{until})"


# ---------------------------------------------------------------- cache

def cache_savings(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """Per model: requests, cache_hits, hit_rate and the spend the semantic cache saved.

    ``saved_usd`` prices each hit at its model's price-book token prices (the rollup measure
    ``cache_saved_usd``); a self-hosted model is paid by the hour whether or not the cache hits,
    so its hits save no dollars directly (0 here). ``saved_if_fleet_scaled_usd`` prices a
    self-hosted model's hits at its effective $ per 1M tokens: what they would save if the
    fleet shrank with its load. ``kind`` says which applies.
    """
    cols = ["model", "kind", "requests", "cache_hits", "hit_rate", "saved_usd", "saved_if_fleet_scaled_usd"]
    tot = _model_totals(con, f, include_idle=False)
    if tot.empty:
        return pd.DataFrame(columns=cols)
    prices = effective_prices(con, f).set_index("model")
    out = tot[["model", "requests", "cache_hits"]].astype({"requests": "int64", "cache_hits": "int64"})
    out["kind"] = [prices.loc[m, "kind"] if m in prices.index else "not in the price book" for m in out["model"]]
    out["hit_rate"] = (out["cache_hits"] / out["requests"]).where(out["requests"] > 0)
    out["saved_usd"] = tot["cache_saved_usd"].astype("float64")
    scaled = []
    for t in tot.itertuples(index=False):
        eff = prices.loc[t.model, "input_usd_per_1m"] if t.model in prices.index else None
        self_hosted = t.model in prices.index and prices.loc[t.model, "kind"] == "self_hosted"
        scaled.append((t.cache_input_tokens + t.cache_output_tokens) * eff / 1e6
                      if self_hosted and eff is not None and not pd.isna(eff) else float("nan"))
    out["saved_if_fleet_scaled_usd"] = scaled
    return out[cols]


# ---------------------------------------------------------------- cascade

@dataclass(frozen=True)
class CascadeSummary:
    cascade_rows: int
    escalations: int
    escalation_rate: float | None          # escalated attempts per cascade request
    rejected_attempts_usd: float           # what the rejected small-model attempts cost
    cascade_spend_usd: float               # spend of all cascade rows (attempts + answers)
    by_model: pd.DataFrame                 # model, escalations, rejected_attempts_usd
    quality: pd.DataFrame                  # model, escalated, labelled, mean_quality, graded_correct_share
    over_time: pd.DataFrame                # period, cascade_requests, escalations, escalation_rate

    @property
    def rejected_share(self) -> float | None:
        return self.rejected_attempts_usd / self.cascade_spend_usd if self.cascade_spend_usd > 0 else None


def _raw_cost_by_model(con: duckdb.DuckDBPyConnection, f: Filters, subset: str) -> pd.DataFrame:
    """Cost of the requests matching ``f`` of one subset (:data:`SUBSETS`: the escalated attempts or the
    cascade's requests), per model, by the rollup costing rule (recorded + book tokens + their share of their
    hour's busy GPU time; no idle). Over whole hours from the subsets' rollup written at load time
    (``store.rollup_cascade_hourly``), else the same rollup over the raw rows."""
    key = sql.column(subset, SUBSETS, "cascade subset")
    if store.whole_hours(f) and store.derived_ready(con, "rollup_cascade_hourly"):
        where, params = f.where(ts_col="hour")
        src = (f"SELECT * EXCLUDE (batch_id, is_escalated, in_cascade) FROM rollup_cascade_hourly "
               f"WHERE {key} AND {where}")
    else:
        where, params = f.where()
        cond = store.ESCALATED_WHERE if key == "is_escalated" else store.CASCADE_WHERE
        src = store.rollup_select_sql("requests", f"{where} AND ({cond})", with_batch=False)
    hours, hparams = pricing.hours_sql(f.since, f.until)
    costed_sql = pricing.costed_rollup_sql(src, hours)
    return con.execute(f"SELECT model, CAST(sum(requests) AS BIGINT) AS requests, coalesce(sum(cost_usd), 0) AS cost_usd "
                       f"FROM ({costed_sql}) WHERE NOT is_idle GROUP BY 1 ORDER BY 1", params + hparams).df()


#: the two subsets of store.rollup_cascade_hourly, by their key column
SUBSETS = ("is_escalated", "in_cascade")


def cascade_summary(con: duckdb.DuckDBPyConnection, f: Filters, grain: str = "day") -> CascadeSummary:
    """Escalation rate, the cost of rejected small-model attempts and quality where labelled."""
    rep = spend.report(con, f, by=["model"], include_idle=False)
    escalations = int(rep["escalations"].sum()) if len(rep) else 0
    cascade_rows = int(rep["cascade_requests"].sum()) if len(rep) else 0
    rejected = _raw_cost_by_model(con, f, "is_escalated")
    rejected = rejected.rename(columns={"requests": "escalations", "cost_usd": "rejected_attempts_usd"})
    cascade = _raw_cost_by_model(con, f, "in_cascade")
    where, params = f.where()
    quality = con.execute(f"""
SELECT model, escalated, count(*) AS labelled, avg(quality) AS mean_quality,
       avg(CASE WHEN quality >= 0.5 THEN 1.0 ELSE 0.0 END) AS graded_correct_share
FROM requests WHERE {where} AND quality IS NOT NULL AND escalated IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2""",
                          params).df()
    over = spend.report(con, f, by=[grain], include_idle=False) if cascade_rows else pd.DataFrame()
    if len(over):
        over = over[[grain, "cascade_requests", "escalations"]].rename(columns={grain: "period"})
        over["escalation_rate"] = [spend.escalation_rate(e, c) for e, c in
                                   zip(over["escalations"], over["cascade_requests"], strict=True)]
        over["escalation_rate"] = over["escalation_rate"].astype("float64")
    return CascadeSummary(
        cascade_rows=cascade_rows, escalations=escalations,
        escalation_rate=spend.escalation_rate(escalations, cascade_rows),
        rejected_attempts_usd=float(rejected["rejected_attempts_usd"].sum()) if len(rejected) else 0.0,
        cascade_spend_usd=float(cascade["cost_usd"].sum()) if len(cascade) else 0.0,
        by_model=rejected, quality=quality, over_time=over)


# ---------------------------------------------------------------- the replay basis

def length_field(con: duckdb.DuckDBPyConnection, f: Filters) -> str | None:
    """The prompt length the data carries: input_tokens, else prompt_chars (the seed counts characters)."""
    where, params = f.where()
    n_tok, n_chr = con.execute(f"SELECT count(input_tokens), count(prompt_chars) FROM requests WHERE {where}",
                               params).fetchall()[0]
    return "input_tokens" if n_tok else ("prompt_chars" if n_chr else None)


def default_threshold(con: duckdb.DuckDBPyConnection, f: Filters, field_name: str | None) -> int:
    """LEN_THRESHOLD (40) for characters, as the seed; for tokens, the median prompt (rounded)."""
    if field_name != "input_tokens":
        return LEN_THRESHOLD
    where, params = store.raw_scope(con, f).filters.where()
    med = con.execute(f"SELECT median(input_tokens) FROM requests WHERE {where} AND {sql.SERVED}",
                      params).fetchall()[0][0]
    if med is None:
        return LEN_THRESHOLD
    mag = 10 ** max(int(np.floor(np.log10(max(float(med), 1.0)))) - 1, 0)
    return int(round(float(med) / mag) * mag)


def length_range(con: duckdb.DuckDBPyConnection, f: Filters, length: str | None) -> tuple[int, int, int]:
    """(min, P99, max) of the prompt length of served requests: the range a threshold slider needs."""
    if length not in sql.PROMPT_LENGTH_COLUMNS:
        return 0, 0, 0
    length = sql.column(length, sql.PROMPT_LENGTH_COLUMNS, "prompt length field")
    where, params = store.raw_scope(con, f).filters.where()
    row = con.execute(f"SELECT min({length}), quantile_cont({length}, 0.99), max({length}) FROM requests "
                      f"WHERE {where} AND {sql.SERVED}", params).fetchall()[0]
    return tuple(int(round(v)) if v is not None else 0 for v in row)


def replay_basis(con: duckdb.DuckDBPyConnection, f: Filters, length: str | None = None) -> pd.DataFrame:
    """Served rows aggregated by sla_tier, model, escalated and prompt length, with the token and
    recorded-cost sums repricing needs and the observed latency sums.

    ``billed_usd`` is what the bill charges the rows for their tokens, by its own rule
    (:mod:`finops.spend.pricing`): recorded costs, else the price row the model resolves to (an alias, the
    price book, the catalogue under a dated or provider-prefixed name) for the request's day, service tier and
    context tier; no GPU time, and so nothing for a self-hosted model's rows (a cost recorded for them is not
    counted: its fleet's GPU hours are). ``unpriced_requests``: rows without a recorded cost that no price
    covers."""
    if length is not None and length not in sql.PROMPT_LENGTH_COLUMNS:
        raise InputError(f"prompt length field? choose from {', '.join(sql.PROMPT_LENGTH_COLUMNS)}")
    where, params = f.where()
    length_sql = sql.column(length, sql.PROMPT_LENGTH_COLUMNS, "prompt length field") if length else "CAST(NULL AS BIGINT)"
    uncached = "greatest(coalesce(input_tokens, 0) - coalesce(cached_input_tokens, 0), 0)"
    # rollup-shaped rows (the bill's keys and token classes) split by the replay's keys, priced as the bill prices
    measures = (*(m for m in store.ROLLUP_MEASURES if m[0] in ("requests", *_BILLED_MEASURES)),
                ("uncached_in", "BIGINT", f"sum({uncached})"),
                ("cached_in", "BIGINT", "sum(coalesce(cached_input_tokens, 0))"),
                ("out_tokens", "BIGINT", "sum(coalesce(output_tokens, 0))"),
                ("total_ms_sum", "DOUBLE", "coalesce(sum(total_ms), 0)"),
                ("total_ms_count", "BIGINT", "count(total_ms)"))
    rows = store.rollup_select_sql("requests", f"{where} AND {sql.SERVED}", with_batch=False, measures_sql=measures,
                                   extra_keys_sql=(("escalated", "coalesce(escalated, false)"),
                                                   ("length", f"CAST({length_sql} AS BIGINT)")))
    sums = ", ".join(f"CAST(sum(r.{c}) AS {t}) AS {c}" for c, t in (
        ("requests", "BIGINT"), ("uncached_in", "BIGINT"), ("cached_in", "BIGINT"), ("out_tokens", "BIGINT"),
        ("total_ms_sum", "DOUBLE"), ("total_ms_count", "BIGINT")))
    return spend.frame_once(con, f"""
WITH r AS ({rows}), p AS ({pricing.picked_prices_sql(pricing.PRICE_KEYS_SQL)})
SELECT coalesce(nullif(r.sla_tier, ''), '(none)') AS sla_tier, r.model, r.escalated, r.length, {sums},
       CAST(sum({pricing.COUNTED_RECORDED_SQL} + {pricing.TOKEN_COST_SQL}) AS DOUBLE) AS billed_usd,
       CAST(coalesce(sum(r.priced_requests) FILTER (WHERE p.kind IS NULL), 0) AS BIGINT) AS unpriced_requests
FROM r LEFT JOIN p ON {pricing.PRICE_JOIN_SQL} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4""", params)


#: the rollup measures the bill's token cost (pricing.TOKEN_COST_SQL) reads
_BILLED_MEASURES = ("recorded_cost_usd", "priced_requests", "priced_uncached_input_tokens",
                    "priced_cached_input_tokens", "priced_cache_write_tokens", "priced_cache_write_1h_tokens",
                    "priced_output_tokens")


def latency_rates(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """Each model's observed per-token latency: least squares of service time on tokens.

    ``service = total_ms - queue_ms - route_ms`` is fitted as ``a + b * input_tokens + c *
    output_tokens`` over the model's served rows; ``fixed_ms = a + mean(queue_ms + route_ms)``.
    A coefficient that comes out negative is dropped and the fit redone without it. Models
    without token counts or latency have no rates (null).
    """
    where, params = f.where()
    s = sql.AFTER_WAIT_MS
    sums = con.execute(f"""
SELECT model, count(*) AS n, sum(x1) AS s1, sum(x2) AS s2, sum(x1 * x1) AS s11, sum(x2 * x2) AS s22,
       sum(x1 * x2) AS s12, sum(y) AS sy, sum(x1 * y) AS s1y, sum(x2 * y) AS s2y, avg(w) AS wait_ms
FROM (SELECT model, CAST(input_tokens AS DOUBLE) AS x1, CAST(output_tokens AS DOUBLE) AS x2, {s} AS y,
             coalesce(queue_ms, 0) + coalesce(route_ms, 0) AS w
      FROM requests WHERE {where} AND {sql.SERVED} AND total_ms IS NOT NULL
        AND input_tokens IS NOT NULL AND output_tokens IS NOT NULL)
GROUP BY 1 ORDER BY 1""", params).df()
    rows = []
    for r in sums.itertuples(index=False):
        coef = nonneg_fit(r)
        rows.append((r.model, coef[0] + float(r.wait_ms), coef[1], coef[2], int(r.n)))
    return pd.DataFrame(rows, columns=["model", "fixed_ms", "ms_per_input_token", "ms_per_output_token", "requests"])


# ---------------------------------------------------------------- policies

TIER_STRATEGIES: dict[str, str] = {
    "actual": "as logged",
    "small": "everything to the small model (cost-first)",
    "large": "everything to the large model (quality-first)",
    "threshold": "prompt longer than the threshold to large, else small (a simple gateway's length rule)",
    "cascade": "small first, escalate the observed share to large (cost-first cascade)",
    "latency-first": "whichever of small and large is estimated faster for the request's tokens",
}
DEFAULT_TIER_STRATEGIES = {"premium": "latency-first", "standard": "cascade", "batch": "small"}
POLICIES: dict[str, str] = {
    "as-logged": "today's routing, as logged (the baseline)",
    "all-small": "every request to the small model",
    "all-large": "every request to the large model",
    "threshold": "prompt longer than the threshold to the large model, else the small one",
    "per-tier": "a strategy per SLA tier",
}


@dataclass(frozen=True)
class WhatIf:
    policy: str
    small_model: str
    large_model: str
    actual_usd: float                  # actual routing, priced as the bill prices it (self-hosted: effective)
    counterfactual_usd: float
    billed_usd: float                  # the bill for the filters (spend report; idle GPU time unless tenants/tiers)
    cache_hits_usd: float              # of the bill, what the logs recorded for semantic-cache hits (not replayed)
    cache_hits_recorded: int           # the cache hits with a recorded cost
    requests: int                      # requests replayed (escalated attempts folded into their request)
    unassigned: int                    # requests kept on their model (no prompt length for the threshold)
    escalation_rate: float
    actual_mean_ms: float | None       # mean total_ms per answer as logged (an escalation's two calls summed)
    counterfactual_mean_ms: float | None  # the same under the policy, estimated for moved requests
    by_model: pd.DataFrame             # model, actual_calls, counterfactual_calls, actual_usd, counterfactual_usd
    by_tier: pd.DataFrame              # sla_tier, strategy, actual_usd, counterfactual_usd
    assumptions: list[str] = field(default_factory=list)
    actual_quality: float | None = None          # share of answers graded correct, today's routing (estimate)
    counterfactual_quality: float | None = None  # the same under the policy; None = unknown
    quality_note: str = ""                       # where the quality figures come from, or why unknown

    @property
    def delta_usd(self) -> float:
        return self.counterfactual_usd - self.actual_usd

    @property
    def delta_pct(self) -> float | None:
        return self.delta_usd / self.actual_usd * 100 if self.actual_usd > 0 else None


def fleet_models(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """Models with served traffic in ``f`` with their kind and size class from the price book (from the
    hourly rollups over whole hours, else the raw rows)."""
    if store.whole_hours(f):
        where, params = f.where(ts_col="hour", prefix="r.")
        out = con.execute(f"""
SELECT r.model, p.kind, p.size_class, CAST(sum({sql.served_requests("r")}) AS BIGINT) AS requests
FROM rollup_hourly r LEFT JOIN ({pricing.BOOK_ROW_PER_MODEL_SQL}) p ON p.model = r.model
WHERE {where} GROUP BY 1, 2, 3 HAVING sum({sql.served_requests("r")}) > 0
ORDER BY requests DESC, 1""", [date.max, date.max, *params]).df()
        return out
    where, params = f.where(prefix="r.")
    return con.execute(f"""
SELECT r.model, p.kind, p.size_class, count(*) AS requests
FROM requests r LEFT JOIN ({pricing.BOOK_ROW_PER_MODEL_SQL}) p ON p.model = r.model
WHERE {where} AND {sql.served("r")} GROUP BY 1, 2, 3
ORDER BY requests DESC, 1""", [date.max, date.max, *params]).df()


def default_targets(con: duckdb.DuckDBPyConnection, f: Filters) -> tuple[str | None, str | None]:
    """(small, large): the busiest model of each size class, from the price book."""
    fm = fleet_models(con, f)
    small = fm[fm["size_class"] == "small"]["model"]
    large = fm[fm["size_class"] == "large"]["model"]
    return (small.iloc[0] if len(small) else None), (large.iloc[0] if len(large) else None)


def _cost_matrix(basis: pd.DataFrame, prices: pd.DataFrame, models: list[str], targets: set[str]) -> np.ndarray:
    """Cost of each basis row on each of ``models``: on its own model what the bill charges it (``billed_usd``:
    recorded costs and the prices the bill resolves, dated and tiered), a self-hosted model's tokens at its
    effective price (all of them: a cost recorded for one is not counted, its fleet's GPU hours are); moved, the
    model's book / effective prices.

    A model the book does not price is costed only where it stays as logged (at what the bill charges, $0 for
    requests no price covers, as on every page): a store holding one such model could replay no policy at all.
    Traffic moved onto one of the ``targets`` needs its price, and is refused without one."""
    p = prices.set_index("model")
    out = np.zeros((len(basis), len(models)))
    for j, m in enumerate(models):
        priced = m in p.index and not pd.isna(p.loc[m].input_usd_per_1m)
        if not priced and m in targets:
            raise InputError(f"model {m} is not in the price book: add it on the Data page to replay onto it"
                             if m not in p.index else
                             f"self-hosted model {m} served no tokens in the period: no effective price")
        if not priced:
            out[:, j] = np.where(basis["model"] == m, basis["billed_usd"], 0.0)
            continue
        pr = p.loc[m]
        moved = (basis["uncached_in"] * pr.input_usd_per_1m + basis["cached_in"] * pr.cached_input_usd_per_1m
                 + basis["out_tokens"] * pr.output_usd_per_1m) / 1e6 + basis["requests"] * pr.request_usd
        own = moved if pr.kind == "self_hosted" else basis["billed_usd"]
        out[:, j] = np.where(basis["model"] == m, own, moved)
    return out


def _latency_matrix(basis: pd.DataFrame, rates: pd.DataFrame, models: list[str]) -> np.ndarray:
    """Summed estimated total_ms of each basis row on each model (NaN where a model has no rates);
    the observed sum on the row's own model."""
    r = rates.set_index("model")
    out = np.full((len(basis), len(models)), np.nan)
    tokens_known = basis["total_ms_count"] > 0
    for j, m in enumerate(models):
        if m in r.index:
            k = r.loc[m]
            out[:, j] = (basis["requests"] * k.fixed_ms + (basis["uncached_in"] + basis["cached_in"])
                         * k.ms_per_input_token + basis["out_tokens"] * k.ms_per_output_token)
        own = (basis["model"] == m) & tokens_known
        out[own.to_numpy(), j] = (basis["total_ms_sum"] / basis["total_ms_count"] * basis["requests"])[own]
    return out


def quality_by_model(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """Per model: the graded rows (``quality`` set, cache hits left out) and the share graded correct
    (quality >= 0.5). Rejected cascade attempts count: they are the small model's answers on the hard
    queries, so leaving them out would flatter it."""
    where, params = f.where()
    return con.execute(f"""
SELECT model, count(*) AS labelled, avg(CASE WHEN quality >= 0.5 THEN 1.0 ELSE 0.0 END) AS correct_share
FROM requests WHERE {where} AND {sql.SERVED} AND quality IS NOT NULL GROUP BY 1 ORDER BY 1""", params).df()


def _quality(answers: pd.Series, shares: pd.DataFrame) -> tuple[float | None, list[str]]:
    """Answer-weighted share graded correct, and the models with answers but no label (then None)."""
    known = shares.set_index("model")["correct_share"]
    used = answers[answers > 0]
    missing = [m for m in used.index if m not in known.index]
    if missing or used.sum() <= 0:
        return None, missing
    return float((used * known.reindex(used.index)).sum() / used.sum()), []


def whatif(con: duckdb.DuckDBPyConnection, f: Filters, policy: str = "as-logged", *,
           small_model: str | None = None, large_model: str | None = None, threshold: float | None = None,
           length: str | None = None, tier_strategies: dict | tuple | None = None,
           escalation_rate: float | None = None) -> WhatIf | None:
    """Reprice the filtered logs under ``policy`` (see :data:`POLICIES`). None when nothing to replay.

    ``tier_strategies`` maps SLA tier -> a key of :data:`TIER_STRATEGIES` (as a dict or a
    tuple of pairs, so it can be a cache key); tiers not named stay as logged.
    """
    if policy not in POLICIES:
        raise InputError(f"unknown policy {policy}; choose from {', '.join(POLICIES)}")
    tiers = dict(tier_strategies or (DEFAULT_TIER_STRATEGIES if policy == "per-tier" else {}))
    bad = [s for s in tiers.values() if s not in TIER_STRATEGIES]
    if bad:
        raise InputError(f"unknown tier strategy {bad[0]}; choose from {', '.join(TIER_STRATEGIES)}")
    scope = store.raw_scope(con, f)            # the replay reads raw rows: at most RAW_ROW_BUDGET of them
    f = scope.filters
    d_small, d_large = default_targets(con, f)
    small, large = small_model or d_small, large_model or d_large
    if small is None or large is None:
        raise InputError("the replay needs a small and a large model: mark models small/large in the price book")
    if small == large and policy != "as-logged":
        # one model on both sides moves nothing: its "saving" was only the cascade attempts the replay drops
        raise InputError(f"the small and the large model are both {small}: a routing policy moves traffic between "
                         "two models. Widen the model filter, or mark another model small or large in the price book")
    length = length or length_field(con, f)
    if threshold is None:
        threshold = default_threshold(con, f, length)
    basis = replay_basis(con, f, length)
    if basis.empty:
        return None
    p_obs = spend.escalation_rate(*_escalation_counts(con, f))
    p = float(escalation_rate if escalation_rate is not None else (p_obs if p_obs is not None
                                                                      else DEFAULT_ESCALATION_RATE))
    prices = effective_prices(con, f)
    rates = latency_rates(con, f)
    models = sorted(set(basis["model"]) | {small, large})
    cost = _cost_matrix(basis, prices, models, {small, large})
    lat = _latency_matrix(basis, rates, models)
    j_small, j_large = models.index(small), models.index(large)
    own = pd.Index(models).get_indexer(basis["model"])
    n = len(basis)
    rows = np.arange(n)

    # strategy of each row
    if policy == "per-tier":
        strategy = basis["sla_tier"].astype(object).map(tiers).fillna("actual").to_numpy(dtype=object)
    else:
        strategy = np.full(n, {"as-logged": "actual", "all-small": "small", "all-large": "large",
                               "threshold": "threshold"}[policy], dtype=object)
    attempt = basis["escalated"].to_numpy(dtype=bool)
    length_v = basis["length"].to_numpy(dtype="float64", na_value=np.nan)
    weights = np.zeros((n, len(models)))
    keep = strategy == "actual"
    weights[rows[keep], own[keep]] = 1.0
    live = ~keep & ~attempt          # an escalated attempt vanishes under a non-actual strategy
    for name, j in (("small", j_small), ("large", j_large)):
        m = live & (strategy == name)
        weights[m, j] = 1.0
    thr = live & (strategy == "threshold")
    no_len = thr & np.isnan(length_v)
    weights[rows[no_len], own[no_len]] = 1.0
    long_ = thr & ~np.isnan(length_v) & (length_v > threshold)
    short = thr & ~np.isnan(length_v) & ~(length_v > threshold)
    weights[long_, j_large] = 1.0
    weights[short, j_small] = 1.0
    cas = live & (strategy == "cascade")
    weights[cas, j_small] = 1.0
    weights[cas, j_large] = p
    fast = live & (strategy == "latency-first")
    if fast.any():
        per_req = lat / basis["requests"].to_numpy()[:, None]
        small_faster = ~(per_req[:, j_small] > per_req[:, j_large])   # ties and unknowns to small
        weights[fast & small_faster, j_small] = 1.0
        weights[fast & ~small_faster, j_large] = 1.0

    actual_w = np.zeros((n, len(models)))
    actual_w[rows, own] = 1.0
    actual_cost = (actual_w * cost).sum(axis=1)
    cf_cost = (weights * cost).sum(axis=1)
    req = basis["requests"].to_numpy()
    answered = req * ~attempt
    # latency per answer: an escalated request waits for its small attempt and its large answer. A row staying on
    # its own model counts its logged latency (its model's rates where it logged none), a moved row its target's
    # rates. Today's mean is the same sum over the logged routing, so a policy that moves nothing has today's mean
    # (it was the mean per logged row: 2.51 s today against 2.79 s "as logged" on the sample fleet's cascades).
    cf_lat_rows = np.where(weights > 0, weights * lat, 0.0).sum(axis=1)
    lat_known = ~np.isnan(np.where(weights > 0, lat, 0.0)).any(axis=1)
    act_lat_rows = np.where(actual_w > 0, actual_w * lat, 0.0).sum(axis=1)
    act_known = ~np.isnan(np.where(actual_w > 0, lat, 0.0)).any(axis=1)
    requests_total = int(answered.sum())
    actual_mean = (float(act_lat_rows[act_known].sum() / answered[act_known].sum())
                   if answered[act_known].sum() > 0 else None)
    # over the same requests as today's mean (a model that logs no latency is left out of both); unknown when a
    # request today's mean counts cannot be estimated under the policy (moved to a model with no rates)
    cf_mean = (float(cf_lat_rows[act_known].sum() / answered[act_known].sum())
               if (lat_known | ~act_known).all() and answered[act_known].sum() > 0 else None)

    by_model = pd.DataFrame({
        "model": models,
        "actual_calls": (actual_w * req[:, None]).sum(axis=0),
        "counterfactual_calls": (weights * req[:, None]).sum(axis=0),
        "actual_usd": (actual_w * cost).sum(axis=0),
        "counterfactual_usd": (weights * cost).sum(axis=0),
    })
    by_model = by_model[(by_model.actual_calls > 0) | (by_model.counterfactual_calls > 0)].reset_index(drop=True)
    # answers served per model: a rejected attempt is no answer; a cascade answers on small (1 - p) or large (p)
    answer_w = weights.copy()
    answer_w[cas, j_small] = 1.0 - p
    actual_answers = pd.Series((actual_w * answered[:, None]).sum(axis=0), index=models)
    cf_answers = pd.Series((answer_w * answered[:, None]).sum(axis=0), index=models)
    shares = quality_by_model(con, f)
    q_actual, _ = _quality(actual_answers, shares)
    q_cf, q_missing = _quality(cf_answers, shares)
    if q_missing:
        quality_note = ("Quality under this policy is unknown: no answer of " + some_of(q_missing)
                        + " is graded in these logs (the quality column).")
    elif q_cf is None:
        quality_note = "Quality is unknown: no request in these filters is graded."
    else:
        labelled = shares[shares.model.isin(cf_answers[cf_answers > 0].index)]
        quality_note = ("Share of answers graded correct, estimated per model from its graded requests in these "
                        "logs (" + ", ".join(f"{r.model} {r.correct_share:.1%} of {int(r.labelled):,}"
                                             for r in labelled.itertuples())
                        + "), weighted by the answers each model gives. It assumes a moved request is like the "
                          "graded requests of the model it moves to.")
    by_tier = (pd.DataFrame({"sla_tier": basis["sla_tier"], "strategy": strategy, "actual_usd": actual_cost,
                             "counterfactual_usd": cf_cost})
               .groupby(["sla_tier", "strategy"], as_index=False)[["actual_usd", "counterfactual_usd"]].sum())
    billed = spend.report(con, f, by=())
    billed_usd = float(billed["cost_usd"].fillna(0).iloc[0]) if len(billed) else 0.0
    # the bill counts what the logs recorded for a cache hit (not of a self-hosted model: its GPU hours are its
    # cost); the replay leaves hits out
    where, params = f.where()
    hits_usd, hits_recorded = con.execute(
        f"SELECT coalesce(sum(cost_usd), 0), count(cost_usd) FROM requests WHERE {where} AND {sql.CACHE_HIT} "
        "AND model NOT IN (SELECT model FROM prices WHERE kind = 'self_hosted')", params).fetchall()[0]
    self_hosted = prices[(prices.kind == "self_hosted") & prices.model.isin(models)]
    assumptions = [
        "Token counts are kept: a moved request reads and writes the same tokens.",
        "As logged, a request costs what the bill charges it (its recorded cost, else the price its model resolves "
        "to as on the Cost page: an alias, the price book or the catalogue, in force on its day); moved to an API "
        "model, its price book row" + (
            "; self-hosted models, as logged or moved, at an effective $ per 1M tokens = fleet cost (busy + idle) "
            "/ tokens served in the period (a cost the logs recorded for one is not counted: its GPU hours are): "
            + ", ".join(f"{r.model} ${r.input_usd_per_1m:,.3f}" for r in self_hosted.itertuples()
                        if r.input_usd_per_1m is not None and not pd.isna(r.input_usd_per_1m))
            + " (the fleet is assumed to scale with its tokens)" if len(self_hosted) else "") + ".",
        "Semantic-cache hits are left out: they stay cache hits under any policy.",
        "A rejected cascade attempt disappears under a policy that does not cascade.",
        f"Cascade: every request pays the small model and {p:.0%} also pay the large one "
        + ("(the escalation rate observed in these logs)." if escalation_rate is None and p_obs is not None
           else "(a common starting point; these logs show no cascade)." if escalation_rate is None
           else "(set by hand)."),
        "Latency: the mean time a caller waits per answer (an escalated request waits for both calls); a request "
        "that stays on its model keeps its logged latency, a moved one is estimated from the target model's observed "
        "per-token rates (least squares of service time on input and output tokens, plus its mean wait).",
    ]
    unpriced = basis.groupby("model")["unpriced_requests"].sum()
    unpriced = unpriced[unpriced > 0]      # the models the bill cannot price either (the unpriced banner's)
    if len(unpriced):
        assumptions.append(
            f"No price for {some_of(unpriced.index)} ({int(unpriced.sum()):,} requests without a recorded cost): as "
            "logged they count at $0, as on every page; moved, they cost the target model's price, so a policy that "
            "moves them looks dearer than it is.")
    if scope.narrowed:
        assumptions.insert(0, f"Replayed over the latest part of the period, from {f.since:%Y-%m-%d %H:%M} UTC "
                              f"({scope.requests:,} of its {scope.period_requests:,} requests): the most a replay "
                              "reads at once. Narrow the dates to replay another part.")
    if policy in ("threshold", "per-tier"):
        words = {"input_tokens": "prompt tokens", "prompt_chars": "prompt characters"}.get(length, "no prompt length")
        assumptions.append(f"Threshold: {words} > {threshold:,g} to {large}, else {small}"
                           + (f"; {int((req * no_len).sum()):,} requests without a prompt length stay as logged."
                              if no_len.any() else "."))
    return WhatIf(policy=policy, small_model=small, large_model=large, actual_usd=float(actual_cost.sum()),
                  counterfactual_usd=float(cf_cost.sum()), billed_usd=billed_usd, cache_hits_usd=float(hits_usd),
                  cache_hits_recorded=int(hits_recorded), requests=requests_total,
                  unassigned=int((req * no_len).sum()), escalation_rate=p, actual_mean_ms=actual_mean,
                  counterfactual_mean_ms=cf_mean, by_model=by_model, by_tier=by_tier, assumptions=assumptions,
                  actual_quality=q_actual, counterfactual_quality=q_cf, quality_note=quality_note)


def _escalation_counts(con: duckdb.DuckDBPyConnection, f: Filters) -> tuple[float, float]:
    rep = spend.report(con, f, by=(), include_idle=False)
    if rep.empty:
        return 0.0, 0.0
    return float(rep["escalations"].iloc[0]), float(rep["cascade_requests"].iloc[0])


# ---------------------------------------------------------------- misrouting

@dataclass(frozen=True)
class Misrouting:
    length: str | None
    threshold: float
    summary: pd.DataFrame       # kind, model, requests, share_of_model, actual_usd, on_right_size_usd, right_size_model
    by_length: pd.DataFrame     # model, size_class, bucket_lo, requests (for the chart)

    @property
    def candidates(self) -> int:
        return int(self.summary["requests"].sum()) if len(self.summary) else 0


def misrouting(con: duckdb.DuckDBPyConnection, f: Filters, threshold: float | None = None,
               length: str | None = None, small_model: str | None = None,
               large_model: str | None = None) -> Misrouting:
    """Short prompts (length <= threshold) served by a large model and long prompts by a small one.

    Size classes come from the price book. ``on_right_size_usd`` reprices the candidates on the
    busiest model of the other size (or the one given). A period of more than ``store.RAW_ROW_BUDGET``
    requests is read over its latest hours (``store.raw_scope``).
    """
    f = store.raw_scope(con, f).filters
    length = length or length_field(con, f)
    if threshold is None:
        threshold = default_threshold(con, f, length)
    basis = replay_basis(con, f, length) if length else pd.DataFrame()
    empty = pd.DataFrame(columns=["kind", "model", "requests", "share_of_model", "actual_usd", "on_right_size_usd",
                                  "right_size_model"])
    if basis.empty:
        return Misrouting(length, float(threshold), empty, pd.DataFrame(columns=["model", "size_class", "bucket_lo",
                                                                                 "requests"]))
    basis = basis[~basis["escalated"]].reset_index(drop=True)
    d_small, d_large = default_targets(con, f)
    small, large = small_model or d_small, large_model or d_large
    prices = effective_prices(con, f)
    size = prices.set_index("model")["size_class"].to_dict()
    basis["size_class"] = basis["model"].map(size).fillna("unknown")
    has_len = basis["length"].notna()
    lv = basis["length"].astype("float64")
    kinds = (("short prompt on a large model", (basis["size_class"] == "large") & has_len & (lv <= threshold), small),
             ("long prompt on a small model", (basis["size_class"] == "small") & has_len & (lv > threshold), large))
    per_model = basis.groupby("model")["requests"].sum()
    rows = []
    for kind, mask, target in kinds:
        sub = basis[mask]
        if sub.empty:
            continue
        models = sorted(set(sub["model"]) | ({target} if target else set()))
        cost = _cost_matrix(sub.reset_index(drop=True), prices, models, {target} if target else set())
        own = pd.Index(models).get_indexer(sub["model"])
        actual = cost[np.arange(len(sub)), own]
        moved = cost[:, models.index(target)] if target else np.full(len(sub), np.nan)
        frame = pd.DataFrame({"model": sub["model"].to_numpy(), "requests": sub["requests"].to_numpy(),
                              "actual_usd": actual, "on_right_size_usd": moved})
        for model, g in frame.groupby("model"):
            rows.append((kind, model, int(g.requests.sum()), g.requests.sum() / per_model[model],
                         float(g.actual_usd.sum()), float(g.on_right_size_usd.sum()), target))
    summary = pd.DataFrame(rows, columns=empty.columns) if rows else empty
    b = basis[has_len].copy()
    b["bucket_lo"] = np.where(b["length"] < 8, 0, 2 ** np.floor(np.log2(b["length"].clip(lower=1))).astype(int))
    by_length = b.groupby(["model", "size_class", "bucket_lo"], as_index=False)["requests"].sum()
    return Misrouting(length, float(threshold), summary, by_length)
