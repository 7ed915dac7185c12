"""Spend analytics: the report by any dimensions, KPIs with period-over-period change, spend over time.

Everything reads the hourly rollups (fast at any row count). A filter whose
``since``/``until`` falls inside an hour is answered from raw rows rolled up on
the fly by the same code, so the two paths cannot disagree.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal

import duckdb
import pandas as pd

from finops import catalogue, sql, store
from finops.errors import InputError
from finops.filters import Filters
from finops.fmt import usd
from finops.latency import stats as latency
from finops.schema import IDLE_TENANT  # noqa: F401  (re-exported: spend reports name idle capacity so)
from finops.spend import pricing

TIME_GRAINS: tuple[str, ...] = ("hour", "day", "week", "month")     # buckets of sql.time_bucket over ``hour``
#: the model a logged name is priced as (``model_resolution.price_model``: ``gpt-4o-mini-2024-07-18`` and
#: ``openai/gpt-4o-mini`` are both ``gpt-4o-mini``), else the logged name: the logs' names of one model, grouped
PRICED_AS = "priced_as"
GROUPABLE = (*sql.ROLLUP_DIMS, PRICED_AS, *TIME_GRAINS)


def _hour_aligned(value) -> bool:
    return value is None or (value.minute == 0 and value.second == 0 and value.microsecond == 0)


def rollup_source(f: Filters) -> tuple[str, list]:
    """A filtered rollup-shaped relation for ``f`` and its parameters."""
    if _hour_aligned(f.since) and _hour_aligned(f.until):
        where, params = f.where(ts_col="hour")
        return f"SELECT * FROM rollup_hourly WHERE {where}", params
    where, params = f.where()
    return store.rollup_select_sql("requests", where, with_batch=False), params


def unpriced_models(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> pd.DataFrame:
    """The models nothing prices among the requests of ``f`` (every request when None), which its spend figures
    count at $0 (:func:`finops.spend.pricing.unpriced_models`): model, provider, requests, tokens and
    share_of_requests, each model's share of the requests of ``f``."""
    src, params = rollup_source(f or Filters())
    return pricing.unpriced_models(con, src, params)


def costed(con: duckdb.DuckDBPyConnection, f: Filters, include_idle: bool | None = None,
           idle_policy: pricing.IdlePolicy | None = None) -> tuple[str, list]:
    """SQL of costed rollup rows for the filters (see pricing.costed_rollup_sql) and its parameters.

    Idle GPU time follows ``idle_policy`` (the store's default, :func:`finops.spend.fleets.default_policy`,
    when None). Kept apart, it is a fleet line: included unless the filters pick tenants or tiers (or
    ``include_idle`` says otherwise). Charged out, each tenant's share is a row of that tenant, kept
    where the filters keep the tenant. ``include_idle=False`` leaves every kind of idle out: requests only.
    Inside :func:`shared_costing` the costed rows of one period and source are computed once.
    """
    from finops.spend import fleets
    policy = idle_policy or fleets.default_policy(con)
    # inside shared_costing, a period cut to tenants, models or tiers reads the period's costing, usage rows kept
    # to those: a request's cost and the idle rows never depend on the other requests of the filters
    # (costed_rollup_sql allocates on all of a model's traffic), so the rows are the same
    narrowed = (_shared_rows.get() is not None and isinstance(con, duckdb.DuckDBPyConnection)
                and bool(f.tenants or f.models or f.sla_tiers) and _hour_aligned(f.since) and _hour_aligned(f.until))
    src, params = rollup_source(Filters(since=f.since, until=f.until) if narrowed else f)
    hours, hparams = pricing.hours_sql(f.since, f.until)
    params = params + hparams
    apart = not f.tenants and not f.sla_tiers if include_idle is None else include_idle
    models = f"model IN ({', '.join('?' for _ in f.models)})" if f.models else "TRUE"
    if include_idle is False or not policy.spreads:
        rows_sql, params = _computed_once(con, pricing.costed_rollup_sql(src, hours), params)
        if narrowed:
            rows_sql, params = _usage_kept_sql(rows_sql, params, f)
        if not apart:
            return f"SELECT * FROM ({rows_sql}) WHERE NOT is_idle", params
        if f.models:
            return f"SELECT * FROM ({rows_sql}) WHERE NOT is_idle OR {models}", params + list(f.models)
        return rows_sql, params
    weights, wparams = policy.weights_sql()
    rows_sql, params = _computed_once(con, pricing.costed_rollup_sql(src, hours, weights), params + wparams)
    if narrowed:
        rows_sql, params = _usage_kept_sql(rows_sql, params, f)
    shares, sparams = Filters(tenants=f.tenants, models=f.models, sla_tiers=f.sla_tiers).where()
    kept = models if apart else "FALSE"
    return (f"SELECT * FROM ({rows_sql}) WHERE charge = 'usage' OR (charge = 'idle_share' AND {shares}) "
            f"OR (charge = 'idle' AND {kept})", params + sparams + (list(f.models) if apart else []))


def _usage_kept_sql(rows_sql: str, params: list, f: Filters) -> tuple[str, list]:
    """A period's costed rows with its usage rows kept to the tenants, models and tiers of ``f`` (idle rows all)."""
    dims, dparams = Filters(tenants=f.tenants, models=f.models, sla_tiers=f.sla_tiers).where()
    return f"SELECT * FROM ({rows_sql}) WHERE charge <> 'usage' OR ({dims})", params + dparams


# ---------------------------------------------------------------- one costing per page run

_shared_rows: ContextVar[dict | None] = ContextVar("finops_shared_costing", default=None)

#: the most costed rows :func:`shared_costing` keeps in all (rollup rows: 30,000 for 14 days of a 100M-request
#: fleet); a larger result is used by its own call only
SHARED_COSTING_MAX_ROWS = 250_000


@contextlib.contextmanager
def shared_costing() -> Iterator[None]:
    """Inside the block, :func:`costed` computes the costed rows of a period once: the first call runs the pricing
    query and keeps its rows (an Arrow table), and every later call with the same SQL and parameters on the same
    store at the same data version reads them again (:func:`frame_once` does the same for a frame). A page's
    spend figures (KPIs, trends, mixes, what-ifs) cost the same rows many times with other groupings, and the
    pricing query's planning alone takes about 35 ms. The dashboard wraps each page run in it; the rows are
    dropped when the block ends."""
    token = _shared_rows.set({})
    try:
        yield
    finally:
        _shared_rows.reset(token)


def _memo_key(con, kind: str, query_sql: str, params: list) -> tuple:
    """What a kept result is for: its kind, the store's file and data version, the SQL and its parameters."""
    where_from = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    return kind, where_from[0][0] if where_from else None, store.data_version(con), query_sql, repr(params)


def _keep(memo: dict, key: tuple, value, rows: int) -> None:
    """Keep ``value`` (of ``rows`` rows) unless the block would then hold over SHARED_COSTING_MAX_ROWS in all."""
    if sum(n for _, n in memo.values()) + rows <= SHARED_COSTING_MAX_ROWS:
        memo[key] = (value, rows)


def _computed_once(con, rows_sql: str, params: list) -> tuple[str, list]:
    """``rows_sql`` with ``params``, or, inside :func:`shared_costing` on a local connection, a relation of its
    rows registered on ``con`` (computed by the block's first call)."""
    memo = _shared_rows.get()
    if memo is None or not isinstance(con, duckdb.DuckDBPyConnection):
        return rows_sql, params
    key = _memo_key(con, "costed", rows_sql, params)
    if key in memo:
        rows = memo[key][0]
    else:
        rows = con.sql(rows_sql, params=params).to_arrow_table()
        _keep(memo, key, rows, rows.num_rows)
    name = f"_finops_costed_{abs(hash(key)):x}"
    con.register(name, rows)
    return f"SELECT * FROM {sql.quote_ident(name)}", []


def frame_once(con, query_sql: str, params: list) -> pd.DataFrame:
    """``query_sql``'s rows as a DataFrame; inside :func:`shared_costing` on a local connection read once and
    given as a copy to every call (the routing replay's basis, read by the what-if and the misrouting)."""
    memo = _shared_rows.get()
    if memo is None or not isinstance(con, duckdb.DuckDBPyConnection):
        return con.execute(query_sql, params).df()
    key = _memo_key(con, "frame", query_sql, params)
    if key not in memo:
        frame = con.execute(query_sql, params).df()
        _keep(memo, key, frame, len(frame))
        return frame.copy()
    return memo[key][0].copy()


#: the tokens of a costed usage row that no price applied to (no price book row, alias or catalogue entry in force on
#: its day) and whose cost nothing recorded: they are counted at $0, so a $ per 1M tokens leaves them out of its
#: denominator (a model all unpriced has none, rather than a free one; the pages' banner lists these models)
UNPRICED_TOKENS_SQL = ("CASE WHEN priced_by IS NULL AND NOT is_idle THEN priced_uncached_input_tokens "
                       "+ priced_cached_input_tokens + priced_cache_write_tokens + priced_cache_write_1h_tokens "
                       "+ priced_output_tokens ELSE 0 END")

#: the $ per 1M tokens' denominator: the tokens the models served (a cache hit reached none) less the unpriced ones
PRICED_TOKENS_SQL = ("(input_tokens + output_tokens - cache_uncached_input_tokens - cache_cached_input_tokens "
                     f"- cache_output_tokens - {UNPRICED_TOKENS_SQL})")

MEASURES_SQL = f"""
  sum(requests) FILTER (WHERE NOT is_idle) AS requests,
  sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
  sum(cached_input_tokens) AS cached_input_tokens, sum(cache_write_tokens) AS cache_write_tokens,
  sum(cache_write_1h_tokens) AS cache_write_1h_tokens, sum(reasoning_tokens) AS reasoning_tokens,
  sum(cost_usd) AS cost_usd,
  sum(input_tokens + output_tokens - cache_uncached_input_tokens - cache_cached_input_tokens - cache_output_tokens)
    AS served_tokens,
  sum({UNPRICED_TOKENS_SQL}) AS unpriced_tokens,
  sum({PRICED_TOKENS_SQL}) AS priced_tokens,
  sum(cost_usd) / nullif(sum({PRICED_TOKENS_SQL}), 0) * 1e6 AS cost_per_1m_tokens,
  sum(errors) AS errors,
  sum(requests) FILTER (WHERE NOT is_idle AND status <> '') AS status_requests,
  CASE WHEN sum(requests) FILTER (WHERE NOT is_idle AND status <> '') > 0
    THEN sum(errors) / nullif(sum(requests) FILTER (WHERE NOT is_idle), 0) END AS error_rate,
  sum(cache_hits) AS cache_hits, sum(cache_saved_usd) AS cache_saved_usd,
  sum(escalations) AS escalations, sum(cascade_requests) AS cascade_requests"""


#: the idle rows' own values: the fleet's model (and its price) and the idle tenant; the request fields they lack
#: (tier, route, status, provider, service tier) are '' there, a blank group the idle dollars shared with requests
#: that log no tier, so those read ``(idle capacity)`` on them (:func:`finops.sql.idle_labelled`)
_IDLE_HAS = ("model", "tenant", PRICED_AS)


def report(con: duckdb.DuckDBPyConnection, f: Filters, by: list[str] | tuple[str, ...] = ("model",),
           include_idle: bool | None = None, idle_policy: pricing.IdlePolicy | None = None) -> pd.DataFrame:
    """One row per group: requests, tokens, cost_usd, cost_per_1m_tokens, error_rate, ...

    ``error_rate`` is ``errors`` (status other than ok) per request, a request logged with no status counted as
    ok; where none of a group's requests carries a status (``status_requests`` 0: a trace of tokens and times)
    it is null, unknown rather than 0 %.

    ``by`` names dimensions (model, tenant, route, sla_tier, status) and/or a
    time grain (hour, day, week, month). Idle self-hosted capacity appears as
    tenant ``(idle capacity)``, or in the tenants' rows under an idle policy that
    charges it out (``idle_policy``, see :func:`costed`), so that the groups add up
    to the whole bill.
    """
    bad = [b for b in by if b not in GROUPABLE]
    if bad:
        raise InputError(f"cannot group by {', '.join(bad)}; choose from {', '.join(GROUPABLE)}")
    costed_sql, params = costed(con, f, include_idle, idle_policy)
    names = [sql.column(b, GROUPABLE) for b in by]
    keys = "".join(f"{sql.time_bucket(b, 'hour') if b in TIME_GRAINS else b if b in _IDLE_HAS else sql.idle_labelled(b)}"
                   f" AS {b}, " for b in names)
    grouping = f"GROUP BY {', '.join(str(i + 1) for i in range(len(by)))}" if by else ""
    order = ", ".join(str(i + 1) for i in range(len(by))) or "1"
    out = con.execute(f"SELECT {keys}{MEASURES_SQL} FROM ({costed_sql}) {grouping} ORDER BY {order}", params).df()
    for c in ("requests", "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
              "cache_write_1h_tokens", "reasoning_tokens", "served_tokens", "unpriced_tokens", "priced_tokens", "cache_hits",
              "escalations", "cascade_requests", "errors", "status_requests"):
        out[c] = out[c].fillna(0).astype("int64")
    return out


#: The unit costs the product defines, each with one name on every page and in the CLI. All are $ per 1M
#: *served* tokens (input + output of the requests a model served: a semantic-cache hit reached none).
UNIT_COSTS: dict[str, str] = {
    "billed": "API models: what the requests cost (recorded, else tokens × the price in force) per 1M tokens",
    "allocated": "self-hosted models: the busy share of the fleet's GPU cost per 1M tokens (idle left out)",
    "fully_loaded": "self-hosted models: the whole fleet's GPU cost, idle included, per 1M tokens the fleet served",
}
UNIT_COST_COLUMNS = ("model", "kind", "served_tokens", "request_cost_usd", "billed_usd_per_1m", "allocated_usd_per_1m",
                     "usd_per_1m", "fleet_served_tokens", "fleet_cost_usd", "fully_loaded_usd_per_1m")


def unit_costs(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """Each model's unit cost in the variants of :data:`UNIT_COSTS`, the one function every page and the CLI use.

    * ``billed_usd_per_1m`` (API models) and ``allocated_usd_per_1m`` (self-hosted): ``request_cost_usd`` (the
      spend on the filtered requests, idle left out: not :func:`report`'s ``cost_usd``, which holds a fleet's
      idle inside its model) / ``served_tokens`` × 1e6;
    * ``usd_per_1m``: the one of those two that applies to the model's kind;
    * ``fully_loaded_usd_per_1m`` (self-hosted): the fleet's whole cost in the period, idle included
      (``fleet_cost_usd``), / the tokens it served for every tenant (``fleet_served_tokens``) × 1e6 — a property
      of the fleet, so tenant and tier filters do not change it (the period and the model filter do). An API
      model has no idle capacity: its fully loaded unit cost is its billed one.

    Tokens counted at $0 because nothing prices them (no price book row, alias or catalogue entry in force, no
    recorded cost: ``unpriced_tokens``, :data:`UNPRICED_TOKENS_SQL`) are left out of the billed and allocated
    unit costs' denominator, so a model nothing prices has no unit cost (null) rather than "$0.000 per 1M tokens",
    which would read as free; the pages that show money list it as unpriced.
    """
    usage = report(con, f, by=["model"], include_idle=False)
    fleet = report(con, Filters(since=f.since, until=f.until, models=f.models), by=["model"], include_idle=True)
    kinds = dict(con.execute("SELECT model, kind FROM prices WHERE kind = 'self_hosted'").fetchall())
    fleet = fleet.set_index("model")
    rows = []
    for r in usage.itertuples(index=False):
        kind = kinds.get(r.model, "api")
        per_1m = None if pd.isna(r.cost_per_1m_tokens) else float(r.cost_per_1m_tokens)
        fleet_tokens = int(fleet.loc[r.model, "served_tokens"]) if r.model in fleet.index else 0
        fleet_cost = float(fleet.loc[r.model, "cost_usd"]) if r.model in fleet.index else 0.0
        if kind == "self_hosted":
            loaded = fleet_cost / fleet_tokens * 1e6 if fleet_tokens > 0 else None
        else:
            loaded = per_1m
        rows.append((r.model, kind, int(r.served_tokens), float(r.cost_usd),
                     per_1m if kind == "api" else None, per_1m if kind == "self_hosted" else None, per_1m,
                     fleet_tokens, fleet_cost, loaded))
    return pd.DataFrame(rows, columns=list(UNIT_COST_COLUMNS))


RECONCILE_COLUMNS = ("model", "provider", "priced_by", "recorded_requests", "recorded_cost_usd", "list_cost_usd",
                     "difference_usd", "difference_pct", "source_unpriced_requests", "priced_requests",
                     "priced_cost_usd", "billed_model", "logs_cost_usd", "billed_usd", "billed_difference_usd",
                     "billed_difference_pct", "billing")
#: the ``billing`` words of :func:`reconcile` (a row's billed comparison, or why there is none)
NO_BILLING = "no billing lines loaded"
NO_BILLING_IN_PERIOD = "no billing lines in this period"
BILLING_PER_ORGANISATION = "billing lines are per organisation: clear the tenant and tier filters to compare"


def billing_key(model: str | None, provider: str | None) -> tuple[str, str]:
    """The (provider, model) a logged name and a billed name are matched on: the catalogue's model where it
    knows the name (``gpt-4o-mini-2024-07-18`` and ``openai/gpt-4o-mini`` are both ``openai/gpt-4o-mini``),
    else the name itself under the provider as the catalogue spells it.

    >>> billing_key("gpt-4o-mini-2024-07-18", "openai"), billing_key("openai/gpt-4o-mini", None)
    (('openai', 'gpt-4o-mini'), ('openai', 'gpt-4o-mini'))
    >>> billing_key("acme-7b", "Acme"), billing_key(None, "openai")
    (('acme', 'acme-7b'), ('openai', ''))
    """
    found = catalogue.resolve(model, provider or None) if model else None
    if found:
        return found
    given = (provider or "").strip().lower()
    return catalogue.PROVIDER_ALIASES.get(given, given), model or ""


def _pct(diff: Decimal, base: Decimal) -> float | None:
    return None if base == 0 else float(diff / base * 100)


def reconcile(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """Recorded against computed cost, and the logs against the provider's bill, per model and provider.

    * ``recorded_cost_usd``: what the logs recorded for the ``recorded_requests`` that carry a cost (requests a
      model served; a cache hit's recorded cost, usually 0, is included in the figure but lists at 0);
    * ``list_cost_usd``: the same requests at the price row in force for each (book or catalogue);
    * ``difference_usd`` / ``difference_pct``: recorded less list, and that as a share of list (None
      where the list cost is 0);
    * ``source_unpriced_requests``: requests whose source wrote 0 though they had tokens: priced here
      from the book or catalogue instead, with ``priced_requests`` and their ``priced_cost_usd``;
    * ``priced_by``: how the model's price was found (price book, alias, catalogue, unpriced).

    A self-hosted model's recorded cost is shown but not counted (:mod:`finops.spend.pricing`): its ``priced_by``
    is :data:`~finops.spend.pricing.RECORDED_NOT_COUNTED`, it has no list cost nor difference (no token price), and
    ``priced_cost_usd`` is its requests' share of the fleet's GPU hours, all its cost.

    Against the bill (the stored billing lines, :mod:`finops.ingest.billing`), "your logs say $X, the provider
    billed $Y":

    * ``logs_cost_usd``: every request of the model in the period, as every page counts it (recorded where the
      source priced it, else tokens × the price in force);
    * ``billed_usd``: the provider's cost lines for the same provider and model over the period's days
      (a bound inside a day counts that whole day: billing lines are daily), ``billed_model`` the name the
      provider billed it under. Logged and billed names are matched by :func:`billing_key`; where several
      logged names are one billed model (a dated and an undated name), the row of the billed name (else the
      first) carries the comparison, ``logs_cost_usd`` summing them all; the others say whose row counts their
      cost and leave ``logs_cost_usd`` empty, so the column adds up to the logs' total;
    * ``billed_difference_usd`` = logs − billed, ``billed_difference_pct`` that as a share of billed (None
      where the provider billed 0);
    * ``billing``: ``billed``; ``not on the provider's bill`` (lines of the provider in the period, none for
      this model: billed $0); :data:`NO_BILLING` or :data:`NO_BILLING_IN_PERIOD`; or
      :data:`BILLING_PER_ORGANISATION` when tenants or tiers are filtered.

    A model the provider billed with no request in the logs (or a line that names no model: tool calls,
    storage) is a row of its own with no requests, ``logs_cost_usd`` 0, so ``billed_usd`` sums to the billing
    lines' own total for the period (with a model filter, only the billed models of the chosen names count).
    Money is summed as exact decimals; the frame holds it as floats.
    """
    from finops.ingest import billing
    costed_sql, params = costed(con, f, include_idle=False)
    out = con.execute(f"""
SELECT model, provider, CASE WHEN hosted AND any_recorded > 0 THEN ? ELSE priced_by END AS priced_by,
       recorded_requests, recorded_cost_usd,
       -- a self-hosted model has no token price to set its recorded cost against
       CASE WHEN NOT hosted THEN list_cost_usd END AS list_cost_usd,
       CASE WHEN NOT hosted THEN recorded_cost_usd - list_cost_usd END AS difference_usd,
       CASE WHEN NOT hosted THEN (recorded_cost_usd - list_cost_usd) / nullif(list_cost_usd, 0) * 100
            END AS difference_pct,
       source_unpriced_requests, priced_requests, priced_cost_usd
FROM (SELECT model, provider, coalesce(bool_or(price_kind = 'self_hosted'), false) AS hosted,
             any_value(priced_by) AS priced_by, sum(recorded_requests) AS any_recorded,
             sum(recorded_served_requests) AS recorded_requests, sum(recorded_cost_usd) AS recorded_cost_usd,
             sum(list_cost_of_recorded_usd) AS list_cost_usd,
             sum(source_unpriced_requests) AS source_unpriced_requests, sum(priced_requests) AS priced_requests,
             sum(cost_usd) - sum(recorded_counted_usd) AS priced_cost_usd
      FROM ({costed_sql}) GROUP BY 1, 2) ORDER BY 1, 2""", [pricing.RECORDED_NOT_COUNTED, *params]).df()
    logs_cost = {(m, p): Decimal(c or 0) for m, p, c in con.execute(
        f"SELECT model, provider, sum(cost_usd) FROM ({costed_sql}) GROUP BY 1, 2", params).fetchall()}
    for c in ("recorded_requests", "source_unpriced_requests", "priced_requests"):
        out[c] = out[c].fillna(0).astype("int64")
    out["priced_by"] = out["priced_by"].fillna("unpriced")
    logged = [(m, None if p != p else p) for m, p in zip(out["model"], out["provider"], strict=True)]
    cost = [logs_cost.get((m, p), Decimal(0)) for m, p in logged]
    billing_cols = {"billed_model": [None] * len(out), "logs_cost_usd": [float(c) for c in cost],
                    "billed_usd": [None] * len(out), "billed_difference_usd": [None] * len(out),
                    "billed_difference_pct": [None] * len(out), "billing": [None] * len(out)}
    extra: list[dict] = []
    if f.tenants or f.sla_tiers:
        billing_cols["billing"] = [BILLING_PER_ORGANISATION] * len(out)
    else:
        loaded = billing.billed_providers(con)
        lines_in_period = billing.billed_by_model(con, f.since, f.until)
        billed: dict[tuple[str, str], list[billing.Billed]] = {}
        for b in lines_in_period:
            billed.setdefault(billing_key(b.model, b.provider), []).append(b)
        in_period = {k[0] for k in billed}
        rows_of: dict[tuple[str, str], list[int]] = {}
        if loaded or lines_in_period:
            for i, (m, p) in enumerate(logged):
                rows_of.setdefault(billing_key(m, p), []).append(i)
        else:
            # no billing line at all: every row is NO_BILLING, as the matching below would say, without the
            # catalogue it matches names by (loading genai-prices' snapshot: 0.5 s of a cold Cost page)
            billing_cols["billing"] = [NO_BILLING] * len(out)
        for key, rows in rows_of.items():
            lines = billed.get(key)
            if lines is None:
                word = ("not on the provider's bill" if key[0] in in_period else
                        NO_BILLING_IN_PERIOD if key[0] in loaded else NO_BILLING)
                for i in rows:
                    billing_cols["billing"][i] = word
                if key[0] not in in_period:
                    continue
                lines = []
            billed_names = [b.model for b in lines if b.model]
            # the comparison sits in the row that logged the billed name, else the first
            first = next((i for i in rows if logged[i][0] in billed_names), rows[0])
            total = sum((cost[i] for i in rows), Decimal(0))
            amount = sum((b.amount_usd for b in lines), Decimal(0))
            names = ", ".join(dict.fromkeys(billed_names)) or None
            billing_cols["billed_model"][first] = names
            billing_cols["logs_cost_usd"][first] = float(total)
            billing_cols["billed_usd"][first] = float(amount)
            billing_cols["billed_difference_usd"][first] = float(total - amount)
            billing_cols["billed_difference_pct"][first] = _pct(total - amount, amount)
            if lines:
                billing_cols["billing"][first] = "billed"
            for i in (i for i in rows if i != first):
                # its cost is in the first row's total: listed here too, the column would count it twice
                billing_cols["billed_model"][i] = names
                billing_cols["logs_cost_usd"][i] = None
                billing_cols["billing"][i] = f"compared in {logged[first][0]}'s row, which counts its {usd(cost[i])}"
        for key, lines in billed.items():
            if key in rows_of or (f.models and not any(b.model in f.models for b in lines)):
                continue
            amount = sum((b.amount_usd for b in lines), Decimal(0))
            names = ", ".join(dict.fromkeys(b.model for b in lines if b.model)) or None
            extra.append({"model": names, "provider": key[0], "priced_by": None, "recorded_requests": 0,
                          "source_unpriced_requests": 0, "priced_requests": 0, "billed_model": names,
                          "logs_cost_usd": 0.0, "billed_usd": float(amount), "billed_difference_usd": float(-amount),
                          "billed_difference_pct": _pct(-amount, amount),
                          "billing": "billed, no request in the logs" if names else
                          "billed, names no model (tool calls, storage)"})
    for c, values in billing_cols.items():
        out[c] = pd.Series(values, index=out.index, dtype="object" if c in ("billed_model", "billing") else "float64")
    if extra:
        out = pd.concat([out, pd.DataFrame(extra)], ignore_index=True)
        for c in ("recorded_requests", "source_unpriced_requests", "priced_requests"):
            out[c] = out[c].astype("int64")
    return out[list(RECONCILE_COLUMNS)]


def billing_sentences(rec: pd.DataFrame) -> list[str]:
    """One line per row of :func:`reconcile` against the bill: "your logs say $X, the provider billed $Y"."""
    out = []
    for r in rec.itertuples(index=False):
        name = f"{r.provider or '?'} {r.model if isinstance(r.model, str) else '(no model)'}"
        if r.billed_usd == r.billed_usd and r.billed_usd is not None:
            pct = "" if r.billed_difference_pct != r.billed_difference_pct or r.billed_difference_pct is None \
                else f", {r.billed_difference_pct:+.1f} %"
            diff = r.billed_difference_usd
            out.append(f"{name}: your logs say {usd(r.logs_cost_usd)}, the provider billed {usd(r.billed_usd)} "
                       f"(difference {'+' if diff >= 0 else ''}{usd(diff)}{pct}; {r.billing})")
        elif r.logs_cost_usd != r.logs_cost_usd or r.logs_cost_usd is None:
            out.append(f"{name}: {r.billing}")
        else:
            out.append(f"{name}: your logs say {usd(r.logs_cost_usd)}; {r.billing}")
    return out


@dataclass(frozen=True)
class Kpis:
    spend_usd: float
    requests: int
    tokens: int
    cost_per_1m_tokens: float | None
    cache_saved_usd: float
    escalation_rate: float | None
    p99_total_ms: float | None
    error_rate: float | None
    errors: int = 0                 # requests whose status is not ok
    status_requests: int = 0        # requests that carry a status (the rest count as ok in error_rate)


def escalation_rate(escalations: float, cascade_rows: float) -> float | None:
    """Escalated attempts per cascade request. A cascade request writes one row, or two
    when it escalates (the attempt and the large model's answer), so requests = rows - escalations."""
    base = cascade_rows - escalations
    return escalations / base if base > 0 else None


def kpis(con: duckdb.DuckDBPyConnection, f: Filters, p99: bool = True) -> Kpis:
    """The headline figures of ``f``; ``p99=False`` leaves the fleet-wide P99 out (None, not read), for a page
    that shows latency per model instead."""
    tot = report(con, f, by=())
    row = tot.iloc[0] if len(tot) else None
    # the Latency page's figure: requests a model served (cache hits never reached one), read from the
    # hourly latency sketch where it applies (within 1%), else exact
    pct = latency.percentiles(con, f, by=(), fields=("total_ms",), quantiles=(0.99,)) if p99 else pd.DataFrame()
    p99_ms = pct["total_ms_p99"].iloc[0] if len(pct) else None

    def num(name, default=0.0):
        v = None if row is None else row[name]
        return default if v is None or pd.isna(v) else float(v)

    return Kpis(
        spend_usd=num("cost_usd"), requests=int(num("requests")),
        tokens=int(num("input_tokens") + num("output_tokens")),
        cost_per_1m_tokens=num("cost_per_1m_tokens", None), cache_saved_usd=num("cache_saved_usd"),
        escalation_rate=escalation_rate(num("escalations"), num("cascade_requests")),
        p99_total_ms=None if p99_ms is None or pd.isna(p99_ms) else float(p99_ms), error_rate=num("error_rate", None),
        errors=int(num("errors")), status_requests=int(num("status_requests")))
