"""The shadow evaluation and quality floors of the cascade: per-query confidence, small and large
quality and costs read from the store, the sweep per tenant, each tenant's quality floor and the
cheapest threshold meeting it, and the curve's slider points, seed-form table and baselines.

Eval CSVs and RTT samples a person uploads are read by :mod:`finops.ingest.uploads`.

Shadow evaluation in the store (:func:`shadow_eval`)
----------------------------------------------------
A *query* is one small-model attempt: a row with a ``confidence`` that is not a cache hit.
Per query:

* ``confidence``: the row's ``confidence``.
* ``small_quality``: the row's ``quality``, the shadow grade of the small model's answer, whether
  production kept it or rejected it (``escalated``).
* ``large_quality``: the first of

  1. the ``quality`` of the **linked large answer** (production escalated the query, so the large
     model really answered). schema.py links the two rows of an escalation by ``attrs.parent_id``;
     the link is read both ways: the row this attempt's ``attrs.parent_id`` names (the sample
     fleet's way: the rejected attempt ``<id>#attempt`` points at the answer ``<id>``), else the
     row whose ``attrs.parent_id`` names this attempt. A linked answer has no confidence of its
     own; with several, the earliest counts.
  2. an ``attrs`` field of the small row written by a shadow evaluation that also asked the large
     model (:data:`LARGE_QUALITY_ATTRS`, e.g. ``attrs.large_quality``).

  A query with neither has **no large-model label** and is left out of the sweep; the counts say
  how many. When large labels come only from linked answers, only the queries production
  escalated have both labels: their confidences all sit under the production threshold, and the
  curve describes those queries only (``ShadowEval.only_escalated``).

Costs per query (USD), from the price book
-------------------------------------------
* small: the small row's recorded ``cost_usd``, else its tokens at the book's prices (the rule
  in :mod:`finops.spend.pricing`).
* large: the linked answer's recorded cost, else its tokens at the book's prices. A query that
  was not escalated has no large call: it is priced as the small row's tokens (prompt and
  output length) at the large model's prices, an estimate. The large model is the linked
  answer's model, else ``attrs.large_model``, else the large model that most often answers
  the same small model's escalations in the store.
* a self-hosted model has no token price: it costs an **effective $ per request** = its fleet's
  cost over the period (busy and idle GPU time) / the requests it served in the period, the same
  for every request of that model.

A query whose cost cannot be priced (a model missing from the book, no tokens) leaves the
per-query costs incomplete; the page then uses flat prices and says so.

Quality floors (:func:`quality_floors`, :func:`save_quality_floors`)
--------------------------------------------------------------------
One JSON object in the store's ``settings`` table under :data:`FLOORS_KEY`: tenant -> floor as a
share of answers correct (0-1). The page edits them in percent (:func:`floors_table`,
:func:`save_floors_table`).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta

import duckdb
import numpy as np
import pandas as pd

from finops import access, sql, store
from finops.cascade import sweep as cascade
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest.uploads import EvalData
from finops.spend import pricing
from finops.spend import report as spend

LARGE_QUALITY_ATTRS: tuple[str, ...] = ("large_quality", "shadow_large_quality")
"""attrs fields of a small-model row that carry a shadow grade of the large model's answer."""
LARGE_MODEL_ATTRS: tuple[str, ...] = ("large_model", "shadow_large_model")
"""attrs fields naming the large model a query would escalate to."""
FLOORS_KEY = "cascade.quality_floors"
PER_1K = 1000.0
"""Costs on the page are USD per 1,000 requests, as in the seed's table."""
MIN_TENANT_QUERIES = 200
"""A tenant gets a curve of its own from this many complete queries; fewer use all queries."""
LINKED = "linked large answers"
SHADOW_ATTR = "shadow grades on the small row"

QUERY_COLUMNS: tuple[str, ...] = (
    "request_id", "ts", "tenant", "sla_tier", "small_model", "large_model", "confidence", "small_quality",
    "large_quality", "large_quality_source", "escalated", "cost_small_usd", "cost_large_usd", "large_cost_basis")


# ----------------------------------------------------------------------------------------
# reading shadow evaluation
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShadowEval:
    """Small-model attempts with a confidence in the store, and how many carry what the sweep needs.

    ``queries`` has :data:`QUERY_COLUMNS`, one row per attempt (complete or not).
    ``status`` is ``"ok"`` when at least one query is complete, else one of
    ``"no_confidence"``, ``"no_small_labels"``, ``"no_large_labels"``; ``message`` says it plainly.
    """

    queries: pd.DataFrame
    n_attempts: int
    n_small_labelled: int
    n_large_labelled: int
    n_complete: int
    large_label_sources: dict[str, int]
    only_escalated: bool
    costs_complete: bool
    unpriced_models: tuple[str, ...]
    status: str
    message: str

    def complete(self, tenant: str | None = None, small_model: str | None = None) -> pd.DataFrame:
        """The queries that have confidence, small and large quality (optionally one tenant's,
        or one small model's)."""
        q = self.queries
        ok = q["small_quality"].notna() & q["large_quality"].notna()
        if tenant is not None:
            ok &= q["tenant"] == tenant
        if small_model is not None:
            ok &= q["small_model"] == small_model
        return q[ok].reset_index(drop=True)

    def pairs(self) -> pd.DataFrame:
        """The cascade pairs among the complete queries: small_model, large_model, queries."""
        done = self.complete()
        if done.empty:
            return pd.DataFrame({"small_model": [], "large_model": [], "queries": []})
        return (done.assign(large_model=done["large_model"].fillna("(unknown)"))
                .groupby(["small_model", "large_model"]).size().rename("queries").reset_index())

    def eval_data(self, tenant: str | None = None, small_model: str | None = None) -> EvalData | None:
        """Arrays for :func:`finops.cascade.sweep.sweep`; costs in **USD per 1,000 queries** (None when
        the per-query costs are incomplete). ``None`` when no query is complete."""
        q = self.complete(tenant, small_model)
        if q.empty:
            return None
        costs = bool(q[["cost_small_usd", "cost_large_usd"]].notna().all().all())
        return EvalData(
            q["confidence"].to_numpy(dtype=float), q["small_quality"].to_numpy(dtype=float),
            q["large_quality"].to_numpy(dtype=float),
            q["cost_small_usd"].to_numpy(dtype=float) * PER_1K if costs else None,
            q["cost_large_usd"].to_numpy(dtype=float) * PER_1K if costs else None,
            f"shadow evaluation in the store ({len(q):,} queries)")


CASTS = ("VARCHAR", "DOUBLE", "BIGINT")


def _first_attr(column_sql: str, keys: tuple[str, ...], cast: str) -> tuple[str, list[str]]:
    """The first of ``keys`` present in the JSON column ``column_sql``, cast to one of :data:`CASTS`."""
    cast = sql.column(cast, CASTS)
    exprs = [f"TRY_CAST(json_extract_string({column_sql}, ?) AS {cast})" for _ in keys]
    return (f"coalesce({', '.join(exprs)})" if len(exprs) > 1 else exprs[0]), [f"$.{k}" for k in keys]


TOKENS = ("input_tokens", "cached_input_tokens", "output_tokens")


def _attempts_sql(f: Filters, labelled_only: bool = True) -> tuple[str, list]:
    """``qm``: the small-model attempts (after the filters; only those with a small-model label
    when ``labelled_only``) with their linked large answer and large model (see the module
    docstring), as a CTE chain; the caller appends a SELECT."""
    where, params = replace(f, models=()).where(prefix="s.")
    if labelled_only:
        where += " AND s.quality IS NOT NULL"
    attr_m, m_params = _first_attr("s.attrs", LARGE_MODEL_ATTRS, "VARCHAR")
    answer_cols = ", ".join(f"a.{c} AS l_{c}" for c in ("quality", "cost_usd", *TOKENS))
    small_cols = ", ".join(f"s.{c} AS s_{c}" for c in ("cost_usd", *TOKENS))
    large_cols = ", ".join(f"a.l_{c}" for c in ("quality", "cost_usd", *TOKENS))
    ps = m_params + params
    model_cond = ""
    if f.models:
        marks = ", ".join("?" for _ in f.models)
        model_cond = f"  AND (s.model IN ({marks}) OR coalesce(a.l_model, {attr_m}, p.large_model) IN ({marks}))"
        ps += list(f.models) + m_params + list(f.models)
    query = f"""
WITH linked AS MATERIALIZED (
  SELECT * FROM (
    SELECT request_id, ts, confidence, json_extract_string(attrs, '$.parent_id') AS parent_id
    FROM requests WHERE contains(CAST(attrs AS VARCHAR), 'parent_id'))
  WHERE parent_id IS NOT NULL
),
links AS MATERIALIZED (
  SELECT attempt_id, answer_id FROM (
    SELECT k.request_id AS attempt_id, a.request_id AS answer_id, a.ts
    FROM linked k JOIN requests a ON a.request_id = k.parent_id
    WHERE k.confidence IS NOT NULL AND a.confidence IS NULL
    UNION ALL
    SELECT parent_id AS attempt_id, request_id AS answer_id, ts FROM linked WHERE confidence IS NULL)
  QUALIFY row_number() OVER (PARTITION BY attempt_id ORDER BY ts, answer_id) = 1
),
answers AS MATERIALIZED (
  SELECT l.attempt_id, s.model AS small_model, a.model AS l_model, {answer_cols}
  FROM links l JOIN requests a ON a.request_id = l.answer_id JOIN requests s ON s.request_id = l.attempt_id
),
pairs AS (
  SELECT small_model, arg_max(l_model, n) AS large_model FROM (
    SELECT small_model, l_model, count(*) AS n FROM answers GROUP BY 1, 2) GROUP BY 1
),
qm AS (
  SELECT s.request_id, s.ts, coalesce(s.tenant, 'default') AS tenant, s.sla_tier, s.model AS small_model,
         s.confidence, s.quality AS small_quality, s.escalated, {small_cols}, a.l_model,
         {large_cols}, s.attrs AS s_attrs,
         coalesce(a.l_model, {attr_m}, p.large_model) AS large_model
  FROM requests s
  LEFT JOIN answers a ON a.attempt_id = s.request_id
  LEFT JOIN pairs p ON p.small_model = s.model
  WHERE s.confidence IS NOT NULL AND {sql.served("s")} AND {where}
{model_cond}
)"""
    return query, ps


def effective_request_prices(con: duckdb.DuckDBPyConnection, f: Filters) -> dict[str, float]:
    """Self-hosted model -> fleet cost over the period of ``f`` (busy + idle) / requests served.

    All tenants count: the fleet is shared. Models that served nothing in the period are left out.
    """
    rep = spend.report(con, Filters(since=f.since, until=f.until), by=["model"], include_idle=True)
    hosted = set(pricing.book_row_per_model(con).query("kind == 'self_hosted'")["model"])
    out = {}
    for r in rep.itertuples(index=False):
        served = int(r.requests) - int(r.cache_hits)
        if r.model in hosted and served > 0 and r.cost_usd is not None and not pd.isna(r.cost_usd):
            out[r.model] = float(r.cost_usd) / served
    return out


def _priced(models: pd.Series, tokens: pd.DataFrame, recorded: pd.Series, book: pd.DataFrame,
            per_request: Mapping[str, float]) -> np.ndarray:
    """Vectorised cost of each row on ``models`` (pricing's rule); NaN where it cannot be priced."""
    p = book.set_index("model").reindex(models.to_numpy())

    def col(name):
        return pd.to_numeric(p[name], errors="coerce").to_numpy(dtype=float)

    inp = tokens["input_tokens"].to_numpy(dtype=float)
    cached = np.nan_to_num(tokens["cached_input_tokens"].to_numpy(dtype=float))
    out = tokens["output_tokens"].to_numpy(dtype=float)
    in_price = np.nan_to_num(col("input_usd_per_1m"))
    cached_price = np.where(np.isnan(col("cached_input_usd_per_1m")), in_price, col("cached_input_usd_per_1m"))
    api = (p["kind"] == "api").to_numpy()
    token_cost = (np.maximum(inp - cached, 0) * in_price + cached * cached_price
                  + out * np.nan_to_num(col("output_usd_per_1m"))) / 1e6 + np.nan_to_num(col("request_usd"))
    token_cost = np.where(api & ~np.isnan(inp) & ~np.isnan(out), token_cost, np.nan)
    hosted = models.map(lambda m: per_request.get(m, np.nan)).to_numpy(dtype=float)
    cost = np.where(api, token_cost, hosted)
    return np.where(recorded.notna().to_numpy(), recorded.to_numpy(dtype=float), cost)


def shadow_eval(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> ShadowEval:
    """Per-query confidence, small and large quality and costs from the store (module docstring).

    The sidebar's date, tenant and tier filters select the small-model attempts; its model
    filter keeps the queries whose small *or* large model is among the chosen ones. Only the
    attempts with a small-model label are read row by row; the others are counted.
    """
    f = f or Filters()
    attempts_sql, params = _attempts_sql(f)
    attr_q, q_params = _first_attr("s_attrs", LARGE_QUALITY_ATTRS, "DOUBLE")
    raw = con.execute(attempts_sql + f" SELECT * EXCLUDE (s_attrs), {attr_q} AS attr_large_quality FROM qm "
                            "ORDER BY ts, request_id", params + q_params).df()
    if f.models:
        count_sql, count_params = _attempts_sql(f, labelled_only=False)
        n_attempts = con.execute(count_sql + " SELECT count(*) FROM qm", count_params).fetchall()[0][0]
    else:     # the same attempts, without the joins
        where, where_params = f.where(prefix="s.")
        n_attempts = con.execute("SELECT count(*) FROM requests s WHERE s.confidence IS NOT NULL "
                                 f"AND {sql.served('s')} AND {where}", where_params).fetchall()[0][0]
    linked = raw["l_model"].notna()
    graded = raw["l_quality"].notna()
    large_quality = raw["l_quality"].where(graded, raw["attr_large_quality"])
    source = pd.Series(np.where(graded, LINKED, np.where(raw["attr_large_quality"].notna(), SHADOW_ATTR, None)),
                       dtype=object)
    # one price row a model: an API model with dated or tiered rows at its standard row in force on the last day
    last_day = (f.until - timedelta(microseconds=1)).date() if f.until is not None else None
    book = pricing.book_row_per_model(con, last_day)
    per_request = effective_request_prices(con, f) if len(raw) else {}

    def tokens(prefix: str) -> pd.DataFrame:
        return raw[[f"{prefix}_{c}" for c in TOKENS]].set_axis(list(TOKENS), axis=1).astype(float)

    cost_small = _priced(raw["small_model"], tokens("s"), raw["s_cost_usd"], book, per_request)
    large_tokens = tokens("l").where(np.repeat(linked.to_numpy()[:, None], len(TOKENS), axis=1), tokens("s"))
    cost_large = _priced(raw["large_model"].fillna(""), large_tokens, raw["l_cost_usd"], book, per_request)
    queries = pd.DataFrame({
        "request_id": raw["request_id"], "ts": raw["ts"], "tenant": raw["tenant"], "sla_tier": raw["sla_tier"],
        "small_model": raw["small_model"], "large_model": raw["large_model"],
        "confidence": raw["confidence"].astype(float), "small_quality": raw["small_quality"].astype(float),
        "large_quality": large_quality.astype(float), "large_quality_source": source, "escalated": raw["escalated"],
        "cost_small_usd": cost_small, "cost_large_usd": cost_large,
        "large_cost_basis": np.where(linked, "the large answer's cost", "estimate: this prompt on the large model")},
        columns=list(QUERY_COLUMNS))
    return _summarise(queries, int(n_attempts))


def _summarise(queries: pd.DataFrame, n: int) -> ShadowEval:
    small = int(queries["small_quality"].notna().sum())
    large = int(queries["large_quality"].notna().sum())
    ok = queries["small_quality"].notna() & queries["large_quality"].notna()
    complete = int(ok.sum())
    sources = {str(k): int(v) for k, v in queries.loc[ok, "large_quality_source"].value_counts().items()}
    only_escalated = complete > 0 and bool(queries.loc[ok, "escalated"].fillna(False).astype(bool).all())
    costs_ok = complete > 0 and bool(queries.loc[ok, ["cost_small_usd", "cost_large_usd"]].notna().all().all())
    unpriced = queries.loc[ok & queries["cost_small_usd"].isna(), "small_model"].tolist() + \
        queries.loc[ok & queries["cost_large_usd"].isna(), "large_model"].fillna("(unknown large model)").tolist()
    unpriced_models = tuple(sorted({str(m) for m in unpriced}))
    if n == 0:
        status, msg = "no_confidence", ("No small-model attempt in the store (with these filters) carries a "
                                        "confidence score, so there is no shadow evaluation to sweep.")
    elif small == 0:
        status, msg = "no_small_labels", (f"{n:,} small-model attempts carry a confidence, but none has a shadow "
                                          "quality label (the quality column is empty).")
    elif complete == 0:
        status, msg = "no_large_labels", (
            f"{small:,} small-model attempts have a quality label, but the store lacks large-model labels for them: "
            "no linked large answer (attrs.parent_id) is graded and no attrs."
            + "/".join(LARGE_QUALITY_ATTRS) + " field is set. The sweep needs both.")
    else:
        status = "ok"
        msg = (f"{complete:,} of {n:,} small-model attempts carry both shadow labels (small and large model)"
               + (f"; the other {n - complete:,} are ungraded ({n - small:,}) or lack a large-model label "
                  f"({small - complete:,}) and are left out" if n > complete else "") + ".")
        if only_escalated:
            msg += (" Every one of them was escalated in production (their large labels come from the linked "
                    "answers), so the curve describes only low-confidence queries: shadow-grade the large model "
                    "on kept answers too for a curve over all traffic.")
    return ShadowEval(queries, n, small, large, complete, sources, only_escalated, costs_ok, unpriced_models,
                      status, msg)


def tenant_curves(shadow: ShadowEval, cost_small: float | None = None, cost_large: float | None = None,
                  small_model: str | None = None, min_queries: int = MIN_TENANT_QUERIES) -> dict[str, pd.DataFrame]:
    """Tenant -> the sweep of its own complete queries (of ``small_model``'s pair, if given), for
    tenants with at least ``min_queries`` of them; at flat prices when both are given, else at
    the per-query price-book costs ($ per 1,000 queries)."""
    counts = shadow.complete(small_model=small_model)["tenant"].value_counts()
    out = {}
    for tenant in sorted(map(str, counts[counts >= min_queries].index)):
        d = shadow.eval_data(tenant, small_model)
        flat = cost_small is not None and cost_large is not None
        if not flat and d.cost_small is None:
            continue
        out[tenant] = cascade.sweep(d.confidence, d.small_quality, d.large_quality,
                                    cost_small if flat else d.cost_small, cost_large if flat else d.cost_large)
    return out


# ----------------------------------------------------------------------------------------
# quality floors per tenant
# ----------------------------------------------------------------------------------------
def _floor(tenant: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{value!r} is not a number", field=f"quality floor of {tenant}") from None
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise InputError(f"{v!r} is not a share of correct answers between 0 and 1",
                         field=f"quality floor of {tenant}")
    return v


def quality_floors(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    """Tenant -> quality floor (share of answers correct, 0-1), as stored."""
    stored = store.get_setting(con, FLOORS_KEY, {}) or {}
    return {str(t): float(v) for t, v in sorted(stored.items())}


def save_quality_floors(con: duckdb.DuckDBPyConnection, floors: Mapping[str, float]) -> dict[str, float]:
    """Replace every tenant's floor (0-1) with ``floors``; validated, then stored in one write."""
    access.require("edit_quality_floors")
    clean = {}
    for tenant, value in floors.items():
        name = str(tenant).strip()
        if not name:
            raise InputError("a quality floor needs a tenant name", field="tenant")
        if name in clean:
            raise InputError(f"tenant {name!r} has two floors", field="tenant")
        clean[name] = _floor(name, value)
    store.set_setting(con, FLOORS_KEY, clean)
    return quality_floors(con)


def set_quality_floor(con: duckdb.DuckDBPyConnection, tenant: str, floor: float | None) -> dict[str, float]:
    """Set (or with ``None`` remove) one tenant's floor, keeping the others."""
    floors = quality_floors(con)
    if floor is None:
        floors.pop(str(tenant), None)
    else:
        floors[str(tenant)] = floor
    return save_quality_floors(con, floors)


def floors_table(con: duckdb.DuckDBPyConnection, tenants=()) -> pd.DataFrame:
    """For the editor: one row per tenant (the store's ``tenants`` and every tenant with a floor),
    ``floor_pct`` in percent of answers correct, empty where none is set."""
    floors = quality_floors(con)
    names = sorted(set(map(str, tenants)) | set(floors))
    return pd.DataFrame({"tenant": pd.Series(names, dtype=object),
                         "floor_pct": pd.Series([floors[t] * 100 if t in floors else np.nan for t in names],
                                                dtype=float)})


def save_floors_table(con: duckdb.DuckDBPyConnection, table: pd.DataFrame) -> dict[str, float]:
    """Store the edited table (``tenant``, ``floor_pct`` 0-100; an empty floor clears it)."""
    floors: dict[str, float] = {}
    for i, row in enumerate(table.itertuples(index=False), start=1):
        tenant = "" if row.tenant is None or pd.isna(row.tenant) else str(row.tenant).strip()
        if row.floor_pct is None or pd.isna(row.floor_pct):
            continue
        if not tenant:
            raise InputError("this floor has no tenant name", row=i, field="tenant")
        try:
            pct = float(row.floor_pct)
        except (TypeError, ValueError):
            raise InputError(f"{row.floor_pct!r} is not a number", row=i, field="floor_pct") from None
        if not (math.isfinite(pct) and 0 <= pct <= 100):
            raise InputError(f"{pct:g} is not a percentage between 0 and 100", row=i, field="floor_pct")
        if tenant in floors:
            raise InputError(f"tenant {tenant!r} is listed twice", row=i, field="tenant")
        floors[tenant] = pct / 100.0
    return save_quality_floors(con, floors)


def floor_choices(curve: pd.DataFrame, floors: Mapping[str, float],
                  tenant_curves: Mapping[str, pd.DataFrame] | None = None) -> pd.DataFrame:
    """The cheapest threshold meeting each tenant's floor.

    A tenant with a curve of its own in ``tenant_curves`` is answered on it, the others on
    ``curve``. Columns: tenant, floor, curve (whose queries), threshold, escalation_rate,
    avg_cost, avg_quality (NaN when no threshold meets the floor), meets.

    >>> out = floor_choices(cascade.parametric_curve(cascade.example_table()), {"premium": 0.95, "std": 0.9})
    >>> print(out[["tenant", "threshold", "avg_cost", "meets"]].to_string(index=False))
     tenant  threshold  avg_cost  meets
    premium       0.95       5.8   True
        std       0.80       3.4   True
    """
    rows = []
    for tenant, floor in sorted(floors.items()):
        own = (tenant_curves or {}).get(tenant)
        point = cascade.cheapest_meeting(own if own is not None else curve, floor)
        values = point.as_dict() if point is not None else dict.fromkeys(cascade.CURVE_COLUMNS, np.nan)
        rows.append({"tenant": tenant, "floor": float(floor),
                     "curve": "this tenant's queries" if own is not None else "all queries",
                     **values, "meets": point is not None})
    return pd.DataFrame(rows, columns=["tenant", "floor", "curve", *cascade.CURVE_COLUMNS, "meets"])


# ----------------------------------------------------------------------------------------
# a curve as shown: slider points, the seed-form table, baselines for a hand-made table
# ----------------------------------------------------------------------------------------
def slider_points(curve: pd.DataFrame, max_points: int = 201, keep=()) -> pd.DataFrame:
    """At most ``max_points`` rows of the curve for a threshold slider: both ends, evenly spaced
    in escalation rate in between, plus the thresholds in ``keep`` (e.g. the chosen one).

    >>> slider_points(cascade.parametric_curve(cascade.example_table())).threshold.tolist()
    [0.65, 0.8, 0.95]
    """
    c = curve.reset_index(drop=True)
    if len(c) <= max_points:
        return c
    targets = np.linspace(c["escalation_rate"].iloc[0], c["escalation_rate"].iloc[-1], max_points)
    idx = np.searchsorted(c["escalation_rate"].to_numpy(), targets, side="left").clip(0, len(c) - 1)
    chosen = set(idx.tolist()) | {0, len(c) - 1}
    chosen |= set(np.flatnonzero(c["threshold"].isin(list(keep))).tolist())
    return c.iloc[sorted(chosen)].reset_index(drop=True)


MAX_SEED_TABLE_ROWS = 25


def example_form_table(report: cascade.CascadeReport) -> tuple[pd.DataFrame, str]:
    """The seed's table (tau, escalation, cost, quality, marginal cost per point) and which points
    it lists: the whole Pareto frontier, or its convex hull when the frontier is long."""
    if len(report.frontier) > MAX_SEED_TABLE_ROWS:
        return (cascade.marginal_table(report.hull),
                f"the {len(report.hull)} corners of the convex hull of the {len(report.frontier):,} frontier points")
    return cascade.marginal_table(report.curve), f"the {len(report.frontier)} Pareto-frontier points"


def parametric_baselines(cost_small: float, cost_large: float, quality_small: float | None,
                         quality_large: float | None) -> pd.DataFrame:
    """Small-only and straight-to-large for a hand-made table, when their qualities are given
    (the oracle needs per-query data). Same columns as ``Baselines.as_frame()``."""
    rows = []
    if quality_small is not None:
        rows.append(("small only", 0.0, float(cost_small), float(quality_small)))
    if quality_large is not None:
        rows.append(("direct to large", 1.0, float(cost_large), float(quality_large)))
    return pd.DataFrame(rows, columns=["name", "large_call_rate", "avg_cost", "avg_quality"])


def random_routing(cost_small: float, cost_large: float, quality_small: float, quality_large: float) -> pd.DataFrame:
    """The random-routing line between small-only and escalate-all (cascade pricing)."""
    rates = np.linspace(0.0, 1.0, 11)
    return pd.DataFrame({"escalation_rate": rates, "avg_cost": cost_small + rates * cost_large,
                         "avg_quality": quality_small + rates * (quality_large - quality_small)})
