"""The spend views of the Overview and Cost pages, as DataFrames and small dataclasses.

Every figure comes from :mod:`finops.spend.report` / :mod:`finops.spend.pricing` (the hourly rollups priced with the
price book), so a page, an export and ``python -m finops report`` cannot disagree. The one view that
needs request-level costs (the cost-per-request distribution) applies the same pricing rules to raw
rows in :func:`request_costs_sql`.

Idle self-hosted capacity is the tenant :data:`finops.spend.report.IDLE_TENANT`; it belongs to the fleet, so
views that rank or budget tenants leave it out and say so, and views of the whole bill keep it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta

import duckdb
import pandas as pd

from finops import fmt as fmt_
from finops import sql, store
from finops.filters import Filters
from finops.latency import stats as latency
from finops.spend import pricing
from finops.spend import report as spend

IDLE = spend.IDLE_TENANT


# ---------------------------------------------------------------- model names

#: how the spend views name models: as the logs name them, or as the resolution step prices them (the names one
#: price applies to are one row: ``gpt-4o-mini-2024-07-18`` and ``openai/gpt-4o-mini`` are ``gpt-4o-mini``)
MODEL_NAMES = {"model": "as logged", spend.PRICED_AS: "as priced"}


def model_key_sql(models: str) -> str:
    """The costed rows' column a view groups models by, checked against :data:`MODEL_NAMES` (an InputError
    naming the choices otherwise)."""
    return sql.column(models, tuple(MODEL_NAMES), "model names")


# ---------------------------------------------------------------- periods

def period_of(con: duckdb.DuckDBPyConnection, f: Filters) -> Filters:
    """``f`` with ``since``/``until`` filled from the store's span where open (whole hours; the traffic's and
    the declared fleet periods', :func:`finops.spend.pricing.store_span`)."""
    if f.since is not None and f.until is not None:
        return f
    lo, hi = pricing.store_span(con)
    if lo is None:
        return f
    return replace(f, since=f.since or lo, until=f.until or hi + timedelta(hours=1))


def grain(con: duckdb.DuckDBPyConnection, f: Filters) -> str:
    """The time grain of charts for these filters (:func:`finops.sql.grain_for`, spend)."""
    p = period_of(con, f)
    return sql.grain_for(p.since, p.until, "spend")


def partly_covered(con: duckdb.DuckDBPyConnection, f: Filters, grain_name: str) -> str:
    """A sentence when the store's logs start inside the first ``grain_name`` bucket of ``f``'s period or end inside
    its last (a trace that starts at 18:15, a live feed's current hour): that bucket's spend reads low beside whole
    ones, which a chart does not say. "" otherwise, for one bucket, or for grains above a day. The times are the
    first and last request of the store's batches (:func:`finops.store.time_span`).
    """
    step = {"hour": timedelta(hours=1), "day": timedelta(days=1)}.get(grain_name)
    first, last = store.time_span(con)
    if step is None or first is None:
        return ""
    p = period_of(con, f)
    lo = first if p.since is None or first >= p.since else None      # the logs' own start is in the period
    hi = last if p.until is None or last < p.until else None
    begin = max(first, p.since) if p.since is not None else first
    end = min(last, p.until) if p.until is not None else last

    def bucket(t):
        t = t.replace(minute=0, second=0, microsecond=0)
        return t.replace(hour=0) if grain_name == "day" else t

    if end <= begin or bucket(begin) == bucket(end - timedelta(microseconds=1)):
        return ""
    slack = step / 20                     # 3 minutes of an hour, 72 of a day
    late = lo is not None and lo - bucket(lo) > slack
    early = hi is not None and bucket(hi) + step - hi > slack
    if not late and not early:
        return ""
    when = "%Y-%m-%d %H:%M"
    if late and early:
        same_day = lo.date() == hi.date()
        return (f"The logs start at {lo:{when}} and end at {hi:{'%H:%M' if same_day else when}} UTC, inside the first "
                f"and the last {grain_name} shown: those {grain_name}s are partly covered, so their spend reads low "
                "beside whole ones.")
    edge, at = ("start", lo) if late else ("end", hi)
    return (f"The logs {edge} at {at:{when}} UTC, inside the {'first' if late else 'last'} {grain_name} shown: it is "
            "partly covered, so its spend reads low beside whole ones.")


# ---------------------------------------------------------------- KPIs with change

@dataclass(frozen=True)
class KpiSpec:
    """One headline number: the :class:`finops.spend.report.Kpis` field, its label (with unit), its format and
    which direction is bad for the business (``worse`` = up is bad, ``better`` = up is good, ``neutral``)."""
    field: str
    label: str
    fmt: str            # usd | usd3 | count | tokens | pct | ms
    up_is: str
    help: str


KPI_SPECS: tuple[KpiSpec, ...] = (
    KpiSpec("spend_usd", "Spend (USD)", "usd", "worse",
            "Recorded costs, token-priced requests and self-hosted GPU hours, idle capacity included."),
    KpiSpec("requests", "Requests", "count", "neutral", "Model calls served (a cascade escalation is two)."),
    KpiSpec("tokens", "Tokens (input + output)", "tokens", "neutral", "Prompt tokens (cached included) plus generated tokens."),
    KpiSpec("cost_per_1m_tokens", "$ per 1M tokens", "usd3", "worse",
            "Spend, idle GPU time included, per 1M tokens the models served (cache hits reached none): the "
            "fleet's fully loaded unit cost. Tokens of a model nothing prices are left out (counted at $0 they "
            "would lower it as if they were free). Per model: billed (API), allocated and fully loaded "
            "(self-hosted) on the Cost page."),
    KpiSpec("cache_saved_usd", "Cache savings (USD)", "usd", "better",
            "What semantic-cache hits would have cost on their model at book prices."),
    KpiSpec("escalation_rate", "Cascade escalation rate (%)", "pct", "worse",
            "Cascade requests whose small-model answer was rejected and sent to a larger model."),
    KpiSpec("p99_total_ms", "P99 total latency (ms)", "ms", "worse",
            "99th percentile of end-to-end latency of the requests a model served (cache hits excluded), as on "
            "the Percentiles page: within 1% (hourly sketch) unless a tenant or tier filter makes it exact."),
    KpiSpec("error_rate", "Error rate (%)", "pct", "worse",
            "Requests whose status is not ok (error, timeout, rejected); a request logged with no status counts as "
            "ok. — where no request in these filters carries a status (a trace of tokens and times): the error "
            "rate is unknown."),
)


def format_value(fmt: str, value) -> str:
    """A KPI value as text, with its unit.

    Money and durations go through :mod:`finops.fmt`, as everywhere else.

    >>> format_value("usd", 1234.5), format_value("pct", 0.0123), format_value("tokens", 2.5e9)
    ('$1,234.50', '1.23 %', '2.50 B')
    >>> format_value("usd3", 0.1534), format_value("ms", 2345.6), format_value("ms", None)
    ('$0.15', '2.35 s', '—')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return fmt_.MISSING
    if fmt in ("usd", "usd3"):
        return fmt_.usd(value)
    if fmt == "count":
        return f"{int(value):,}"
    if fmt == "tokens":
        for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= div:
                return f"{value / div:,.2f} {suffix}"
        return f"{int(value):,}"
    if fmt == "pct":
        return f"{100 * value:.2f} %"
    if fmt == "ms":
        return fmt_.duration_ms(value)
    raise ValueError(f"unknown format {fmt}")


@dataclass(frozen=True)
class KpiChange:
    spec: KpiSpec
    value: float | None
    previous: float | None
    change: float | None        # relative change (0.1 = +10 %), or percentage points for rates
    change_text: str | None     # "+10.0 %" / "-0.20 pp" / None when there is nothing to compare with

    @property
    def text(self) -> str:
        return format_value(self.spec.fmt, self.value)


@dataclass(frozen=True)
class PeriodKpis:
    current: spend.Kpis
    previous: spend.Kpis | None
    period: Filters             # the period shown (since/until filled in)
    previous_period: Filters | None
    items: tuple[KpiChange, ...]
    previous_coverage: float | None     # share of the previous period inside the store's time span
    idle_usd: float                     # idle self-hosted capacity in the period (part of spend_usd)

    @property
    def idle_share(self) -> float | None:
        return self.idle_usd / self.current.spend_usd if self.current.spend_usd > 0 else None


def _change(spec: KpiSpec, cur, prev) -> tuple[float | None, str | None]:
    if cur is None or prev is None:
        return None, None
    if spec.fmt == "pct":           # rates change in percentage points
        d = 100 * (cur - prev)
        return d, f"{d:+.2f} pp"
    if prev == 0:
        return None, None
    d = (cur - prev) / abs(prev)
    return d, f"{100 * d:+.1f} %"


def kpis_with_change(con: duckdb.DuckDBPyConnection, f: Filters, p99: bool = True) -> PeriodKpis:
    """The headline KPIs for ``f`` and for the previous period of equal length (``Filters.shifted_back``).

    A KPI's change is relative (``(now - before) / before``) except for rates, whose change is in
    percentage points; it is None when the previous period has no data for it. ``p99=False``: the fleet-wide
    P99 is not read (None), for a page that shows latency per model (:func:`finops.spend.report.kpis`).
    """
    period = period_of(con, f)
    cur = spend.kpis(con, period, p99=p99)
    prev_period = period.shifted_back() if period.since is not None else None
    prev = spend.kpis(con, prev_period, p99=p99) if prev_period is not None else None
    if prev is not None and prev.requests == 0:
        # no traffic before: nothing to compare with (a self-hosted fleet would still show its idle cost)
        prev = None
    items = []
    for spec in KPI_SPECS:
        v = getattr(cur, spec.field)
        p = getattr(prev, spec.field) if prev is not None else None
        change, text = _change(spec, v, p)
        items.append(KpiChange(spec, v, p, change, text))
    idle = 0.0
    if not f.tenants and not f.sla_tiers:       # idle GPU time as such, whatever policy charges it out
        by_tenant = spend.report(con, period, by=["tenant"], idle_policy=pricing.KEEP_APART)
        idle = float(by_tenant.loc[by_tenant["tenant"] == IDLE, "cost_usd"].sum())
    return PeriodKpis(cur, prev, period, prev_period, tuple(items), _coverage(con, prev_period), idle)


def _coverage(con: duckdb.DuckDBPyConnection, p: Filters | None) -> float | None:
    """Share of ``p``'s time range that lies inside the store's span (1.0 = wholly covered)."""
    if p is None or p.since is None or p.until is None:
        return None
    lo, hi = con.execute("SELECT min(hour), max(hour) FROM rollup_hourly").fetchall()[0]
    if lo is None:
        return 0.0
    hi = hi + timedelta(hours=1)
    overlap = (min(hi, p.until) - max(lo, p.since)) / timedelta(seconds=1)
    return max(0.0, min(1.0, overlap / ((p.until - p.since) / timedelta(seconds=1))))


def kpi_trends(con: duckdb.DuckDBPyConnection, f: Filters, p99: bool = True) -> pd.DataFrame:
    """Per time bucket (the chart grain): the KPIs the rollups can give, for sparklines.

    Columns: period, spend_usd, requests, tokens, cost_per_1m_tokens, cache_saved_usd, escalation_rate,
    error_rate, and p99_total_ms where the hourly latency sketch can answer for these filters (whole
    hours, no tenant or tier filter, hour/day/week grain); otherwise P99 has no trend here, since it would
    need the raw rows. ``p99=False`` never reads it.
    """
    g = grain(con, f)
    period = period_of(con, f)
    rep = spend.report(con, period, by=[g])
    out = pd.DataFrame({
        "period": rep[g], "spend_usd": rep["cost_usd"], "requests": rep["requests"],
        "tokens": rep["input_tokens"] + rep["output_tokens"], "cost_per_1m_tokens": rep["cost_per_1m_tokens"],
        "cache_saved_usd": rep["cache_saved_usd"],
        "escalation_rate": [spend.escalation_rate(e, c) for e, c in zip(rep["escalations"], rep["cascade_requests"],
                                                                          strict=True)],
        "error_rate": rep["error_rate"]})
    if p99 and g in latency.SKETCH_KEYS and latency.sketch_usable(con, period, [g]):
        pct = latency.over_time(con, period, "total_ms", grain=g, by=None, quantiles=(0.99,))
        out = out.merge(pct[["ts", "p99"]].rename(columns={"ts": "period", "p99": "p99_total_ms"}),
                        on="period", how="left")
    return out


# ---------------------------------------------------------------- spend over time

def spend_over_time(con: duckdb.DuckDBPyConnection, f: Filters, grain_name: str | None = None,
                    include_idle: bool = True, models: str = "model") -> pd.DataFrame:
    """Spend per time bucket and model (named as :data:`MODEL_NAMES` ``models`` says); idle self-hosted capacity
    is its own series ``(idle capacity)`` (unless ``include_idle`` is False, or the filters pick tenants or
    tiers), or, under an idle policy that charges it out, part of its model's series.

    Columns: period (bucket start), series, cost_usd, requests. The grain follows the range
    (:func:`finops.sql.grain_for`) unless given.
    """
    g = grain_name or grain(con, f)
    key = model_key_sql(models)
    costed_sql, params = spend.costed(con, period_of(con, f), include_idle=None if include_idle else False)
    rows = con.execute(
        f"SELECT {sql.time_bucket(g, 'hour')} AS period, CASE WHEN is_idle THEN ? ELSE {key} END AS series, "
        f"sum(cost_usd) AS cost_usd, coalesce(sum(requests) FILTER (WHERE NOT is_idle), 0) AS requests "
        f"FROM ({costed_sql}) GROUP BY 1, 2 ORDER BY 1, 2", [IDLE, *params]).df()
    rows["requests"] = rows["requests"].astype("int64")
    return rows


# ---------------------------------------------------------------- tenants

@dataclass(frozen=True)
class TopTenants:
    table: pd.DataFrame     # tenant, cost_usd, share, previous_cost_usd, change
    trend: pd.DataFrame     # period, tenant, cost_usd (the top tenants only)
    grain: str
    others: int             # tenants not in the top n
    idle_usd: float         # idle capacity in the period kept apart (in no tenant's total)


def top_tenants(con: duckdb.DuckDBPyConnection, f: Filters, n: int = 8) -> TopTenants:
    """The ``n`` tenants with the highest spend, their share of tenant spend, change against the previous
    period of equal length, and their spend per time bucket (for trend lines). A tenant's spend includes
    its share of idle GPU time where the store's idle policy charges it out; idle kept apart is
    ``idle_usd``, in no tenant's total."""
    period = period_of(con, f)
    g = grain(con, f)
    whole = spend.report(con, period, by=["tenant"])
    idle = float(whole.loc[whole["tenant"] == IDLE, "cost_usd"].sum())
    by_tenant = whole[whole["tenant"] != IDLE]
    by_tenant = by_tenant.sort_values("cost_usd", ascending=False, kind="stable")
    total = float(by_tenant["cost_usd"].sum())
    top = by_tenant.head(n)
    table = pd.DataFrame({"tenant": top["tenant"], "cost_usd": top["cost_usd"],
                          "share": top["cost_usd"] / total if total > 0 else 0.0,
                          "requests": top["requests"]})
    prev = pd.DataFrame(columns=["tenant", "cost_usd"])
    if period.since is not None:
        prev = spend.report(con, period.shifted_back(), by=["tenant"])[["tenant", "cost_usd"]]
        prev = prev[prev["tenant"] != IDLE]
    table = table.merge(prev.rename(columns={"cost_usd": "previous_cost_usd"}), on="tenant", how="left")
    pc = table["previous_cost_usd"].astype("float64")
    table["change"] = ((table["cost_usd"] - pc) / pc).where(pc > 0)
    trend = spend.report(con, Filters(since=period.since, until=period.until, tenants=tuple(top["tenant"]),
                                      models=f.models, sla_tiers=f.sla_tiers), by=[g, "tenant"])
    trend = trend.rename(columns={g: "period"})[["period", "tenant", "cost_usd"]]
    return TopTenants(table.reset_index(drop=True), trend, g, max(len(by_tenant) - n, 0), idle)


# ---------------------------------------------------------------- $ per 1M tokens, model x tenant

def cost_matrix(con: duckdb.DuckDBPyConnection, f: Filters, models: str = "model") -> pd.DataFrame:
    """$ per 1M tokens for every model x tenant pair with traffic: the *billed* unit cost of API models and the
    *allocated* one of self-hosted models (``spend.report.UNIT_COSTS``: idle capacity left out, per 1M served
    tokens). Columns: model (named as :data:`MODEL_NAMES` ``models`` says), tenant, requests, tokens (served),
    priced_tokens (served less those nothing prices: the denominator), cost_usd, cost_per_1m_tokens (none where no
    token has a price).
    """
    key = model_key_sql(models)
    rep = spend.report(con, period_of(con, f), by=[key, "tenant"], include_idle=False)
    out = pd.DataFrame({"model": rep[key], "tenant": rep["tenant"], "requests": rep["requests"],
                        "tokens": rep["served_tokens"], "priced_tokens": rep["priced_tokens"],
                        "cost_usd": rep["cost_usd"], "cost_per_1m_tokens": rep["cost_per_1m_tokens"]})
    return out


def cost_matrix_wide(matrix: pd.DataFrame) -> pd.DataFrame:
    """``cost_matrix`` as a table: one row per model, one column per tenant, $ per 1M tokens in the cells,
    plus the model's own $ per 1M tokens over all tenants (``all tenants``)."""
    if matrix.empty:
        return pd.DataFrame(columns=["model"])
    wide = matrix.pivot_table(index="model", columns="tenant", values="cost_per_1m_tokens", aggfunc="first")
    sums = matrix.groupby("model")[["cost_usd", "priced_tokens"]].sum()
    wide.insert(0, "all tenants", (sums["cost_usd"] / sums["priced_tokens"].where(sums["priced_tokens"] > 0)) * 1e6)
    wide.columns.name = None
    return wide.reset_index()


# ---------------------------------------------------------------- token mix

def token_mix(con: duckdb.DuckDBPyConnection, f: Filters, models: str = "model") -> pd.DataFrame:
    """Per model (named as :data:`MODEL_NAMES` ``models`` says): tokens by class and the cost each class carries.

    Token columns count every request (cache hits included): ``uncached_input_tokens``,
    ``cached_input_tokens`` (read from the prompt cache), ``cache_write_tokens`` (written to it, 5-minute and
    1-hour), ``output_tokens``. Cost columns split ``cost_usd`` (idle left out) into ``input_cost_usd``,
    ``cached_input_cost_usd``, ``cache_write_cost_usd``, ``output_cost_usd`` and ``request_fee_usd``
    (token-priced requests of API models, at the price row each hour's requests were priced by: book or
    catalogue, its dates and tiers), ``recorded_cost_usd`` (costs the logs carry, as the bill counts them: none
    of a self-hosted model's) and ``gpu_time_usd`` (self-hosted GPU hours allocated by busy time); they add up
    to ``cost_usd``.
    ``prompt_cache_saving_usd`` is what the cached prompt tokens would have cost more at the uncached
    input price.
    """
    costed_sql, params = spend.costed(con, period_of(con, f), include_idle=False)
    api = "coalesce(c.price_kind, 'api') = 'api'"
    # each costed row carries the price row it was priced by (list_*): one row a (model, provider, tier, band, day)
    price = pricing.class_prices_sql("c.list_")
    inp, cached = price["uncached_input"], price["cached_input"]
    key = model_key_sql(models)
    mix = con.execute(f"""
SELECT c.{key} AS model, coalesce(any_value(c.price_kind) FILTER (WHERE c.price_kind IS NOT NULL), 'api') AS kind,
  sum(greatest(c.input_tokens - c.cached_input_tokens - c.cache_write_tokens - c.cache_write_1h_tokens, 0))
    AS uncached_input_tokens,
  sum(c.cached_input_tokens) AS cached_input_tokens, sum(c.cache_write_tokens + c.cache_write_1h_tokens)
    AS cache_write_tokens, sum(c.output_tokens) AS output_tokens,
  sum(CASE WHEN {api} THEN c.priced_uncached_input_tokens * {inp} / 1e6 ELSE 0 END) AS input_cost_usd,
  sum(CASE WHEN {api} THEN c.priced_cached_input_tokens * {cached} / 1e6 ELSE 0 END) AS cached_input_cost_usd,
  sum(CASE WHEN {api} THEN (c.priced_cache_write_tokens * {price["cache_write"]}
      + c.priced_cache_write_1h_tokens * {price["cache_write_1h"]}) / 1e6 ELSE 0 END) AS cache_write_cost_usd,
  sum(CASE WHEN {api} THEN c.priced_output_tokens * {price["output"]} / 1e6 ELSE 0 END) AS output_cost_usd,
  sum(CASE WHEN {api} THEN c.priced_requests * {price["request"]} ELSE 0 END) AS request_fee_usd,
  sum(c.recorded_counted_usd) AS recorded_cost_usd,
  sum(CASE WHEN {api} THEN c.priced_cached_input_tokens * greatest({inp} - {cached}, 0) / 1e6 ELSE 0 END)
    AS prompt_cache_saving_usd,
  sum(c.cost_usd) AS cost_usd
FROM ({costed_sql}) c
GROUP BY 1 ORDER BY sum(c.cost_usd) DESC, 1""", params).df()
    priced = mix[["input_cost_usd", "cached_input_cost_usd", "cache_write_cost_usd", "output_cost_usd",
                  "request_fee_usd", "recorded_cost_usd"]].sum(axis=1)
    # what is left of the cost is allocated GPU time; clip float dust on API-only models
    gpu = mix["cost_usd"] - priced
    mix.insert(len(mix.columns) - 2, "gpu_time_usd", gpu.where(gpu.abs() > 1e-9, 0.0))
    return mix


TOKEN_CLASSES = (("uncached_input_tokens", "input (uncached)"), ("cached_input_tokens", "input (prompt-cached)"),
                 ("cache_write_tokens", "input (written to the prompt cache)"), ("output_tokens", "output"))
COST_PARTS = (("input_cost_usd", "input tokens"), ("cached_input_cost_usd", "cached input tokens"),
              ("cache_write_cost_usd", "cache write tokens"), ("output_cost_usd", "output tokens"),
              ("request_fee_usd", "per-request fees"), ("recorded_cost_usd", "recorded by the logs"),
              ("gpu_time_usd", "GPU time (self-hosted)"))
#: the labels alone, in drawing order: the Cost page's charts colour exactly these
TOKEN_CLASS_LABELS = tuple(label for _, label in TOKEN_CLASSES)
COST_PART_LABELS = tuple(label for _, label in COST_PARTS)


def token_mix_long(mix: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``token_mix`` reshaped for charts: (model, token_class, tokens, share) and (model, part, cost_usd)."""
    t = mix[["model", *[c for c, _ in TOKEN_CLASSES]]].melt(id_vars=["model"], var_name="token_class",
                                                             value_name="tokens")
    t["token_class"] = t["token_class"].map(dict(TOKEN_CLASSES))
    totals = t.groupby("model")["tokens"].transform("sum")
    t["share"] = (t["tokens"] / totals).where(totals > 0, 0.0)
    c = mix[["model", *[c for c, _ in COST_PARTS]]].melt(id_vars=["model"], var_name="part", value_name="cost_usd")
    c["part"] = c["part"].map(dict(COST_PARTS))
    c = c[c["cost_usd"].abs() > 1e-12].reset_index(drop=True)
    return t, c


@dataclass(frozen=True)
class TokenEffect:
    output_token_share: float | None      # output tokens / all tokens (token-priced API traffic)
    output_cost_share: float | None       # output-token cost / token cost
    prompt_cache_saving_usd: float
    token_cost_usd: float


def token_effect(mix: pd.DataFrame) -> TokenEffect:
    """One-line summary of the mix: output tokens' share of tokens vs of token cost (API models)."""
    api = mix[mix["kind"] == "api"]
    tokens = float(api[["uncached_input_tokens", "cached_input_tokens", "output_tokens"]].to_numpy().sum())
    cost = float(api[["input_cost_usd", "cached_input_cost_usd", "output_cost_usd"]].to_numpy().sum())
    return TokenEffect(float(api["output_tokens"].sum()) / tokens if tokens else None,
                       float(api["output_cost_usd"].sum()) / cost if cost else None,
                       float(mix["prompt_cache_saving_usd"].sum()), cost)


# ---------------------------------------------------------------- $ per 1M input and output tokens

TOKEN_CLASS_COLUMNS = ("model", "kind", "input_tokens", "output_tokens", "input_usd_per_1m", "output_usd_per_1m",
                       "input_usd_per_1m_with_idle", "output_usd_per_1m_with_idle", "split_measured_share", "basis")


def token_class_prices(con: duckdb.DuckDBPyConnection, f: Filters) -> pd.DataFrame:
    """$ per 1M input and per 1M output tokens of every model with traffic, self-hosted beside API.

    * API models: the cost of the tokens priced at the rows in force (book or catalogue; tiers, dates and
      prompt-cache prices as billed) per 1M priced input tokens and per 1M output tokens. Requests whose
      cost the logs recorded are left out (their split is unknown).
    * Self-hosted models: the GPU time allocated to requests (their busy share of the fleet) split into
      input and output by prefill against decode time (:data:`finops.sql.PREFILL_SHARE`; measured where the
      logs time both, else the documented estimate from tokens), per 1M served input and output tokens.
      ``*_with_idle`` adds the model's idle GPU time in the period, split the same way: what a token costs
      when the whole fleet is paid for by its traffic. ``split_measured_share`` is the share of busy time
      whose split was measured.

    The fleet is shared: tenant and tier filters do not apply; the period and models do.
    Columns: TOKEN_CLASS_COLUMNS.
    """
    period = period_of(con, f)
    fleet_f = Filters(since=period.since, until=period.until, models=f.models)
    src, params = spend.rollup_source(fleet_f)
    hours, hparams = pricing.hours_sql(period.since, period.until)
    served_in = "(r.input_tokens - r.cache_uncached_input_tokens - r.cache_cached_input_tokens)"
    served_out = "(r.output_tokens - r.cache_output_tokens)"
    by_tokens = sql.prefill_share_by_tokens(served_in, served_out)
    served = sql.served_requests("r")
    api = con.execute(f"""
WITH r AS ({src}), p AS ({pricing.picked_prices_sql(pricing.PRICE_KEYS_SQL)})
SELECT r.model, sum(r.priced_uncached_input_tokens + r.priced_cached_input_tokens + r.priced_cache_write_tokens
                    + r.priced_cache_write_1h_tokens) AS input_tokens, sum(r.priced_output_tokens) AS output_tokens,
       sum({pricing.PRICED_INPUT_COST_SQL}) AS input_usd, sum({pricing.PRICED_OUTPUT_COST_SQL}) AS output_usd
FROM r JOIN p ON {pricing.PRICE_JOIN_SQL}
WHERE coalesce(p.kind, 'api') = 'api' GROUP BY 1 HAVING sum(r.priced_requests) > 0 ORDER BY 1""", params).df()
    gpu = con.execute(f"""
WITH r AS ({src}), alloc AS MATERIALIZED ({pricing.alloc_sql(hours)}),
idle AS (SELECT model, sum(fleet_cost_usd - allocated_usd) AS idle_usd FROM alloc GROUP BY 1)
SELECT r.model, sum({served_in}) AS input_tokens, sum({served_out}) AS output_tokens,
       sum({pricing.allocated_sql('r.busy_prefill_ms', f'{served} * {by_tokens}')}) AS input_usd,
       sum({pricing.allocated_sql('r.busy_ms', served)}) AS gpu_usd,
       sum(r.busy_ms) AS busy_ms, sum(r.busy_split_estimated_ms) AS estimated_ms, any_value(i.idle_usd) AS idle_usd
FROM r JOIN alloc a ON a.model = r.model AND a.hour = r.hour LEFT JOIN idle i ON i.model = r.model
GROUP BY 1 ORDER BY 1""", params + hparams).df()

    def per_1m(usd, tokens):
        return float(usd) / float(tokens) * 1e6 if tokens and tokens > 0 and pd.notna(usd) else None

    rows = []
    for r in api.itertuples(index=False):
        i, o = per_1m(r.input_usd, r.input_tokens), per_1m(r.output_usd, r.output_tokens)
        rows.append((r.model, "api", int(r.input_tokens), int(r.output_tokens), i, o, i, o, None,
                     "list prices in force (price book or catalogue)"))
    for r in gpu.itertuples(index=False):
        gpu_usd = float(r.gpu_usd) if pd.notna(r.gpu_usd) else 0.0
        input_usd = float(r.input_usd) if pd.notna(r.input_usd) else 0.0
        output_usd = gpu_usd - input_usd
        extra = float(r.idle_usd) if pd.notna(r.idle_usd) else 0.0
        in_share = input_usd / gpu_usd if gpu_usd > 0 else 0.5
        measured = 1 - float(r.estimated_ms) / float(r.busy_ms) if r.busy_ms and r.busy_ms > 0 else 0.0
        basis = ("GPU time split by measured prefill and decode time" if measured >= 0.9995 else
                 f"GPU time split by prefill and decode time, {measured:.0%} measured; the rest estimated from "
                 f"tokens (an output token as {sql.DECODE_TOKEN_WEIGHT} input tokens)")
        rows.append((r.model, "self_hosted", int(r.input_tokens), int(r.output_tokens),
                     per_1m(input_usd, r.input_tokens), per_1m(output_usd, r.output_tokens),
                     per_1m(input_usd + extra * in_share, r.input_tokens),
                     per_1m(output_usd + extra * (1 - in_share), r.output_tokens), measured, basis))
    out = pd.DataFrame(rows, columns=list(TOKEN_CLASS_COLUMNS))
    return out.sort_values(["kind", "model"], ascending=[False, True], kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------- cost per request (raw rows)

def request_costs_sql(where: str, hours_sql: str, sample_pct: float | None = None) -> str:
    """SELECT model, tenant, cost_usd per request for raw rows matching ``where``.

    Each request is costed as a rollup row of its own, by the same SQL as :func:`spend.report`
    (:func:`finops.spend.pricing.costed_rollup_sql`): a recorded ``cost_usd`` counts as is; a row without one
    that is not a cache hit is priced at the price row in force for its model, provider, tier, input size and
    day (book or catalogue); a self-hosted model's hourly allocated cost is shared by the hour's served
    requests in proportion to their busy time (by count in an hour with no timing). Summed over all rows
    these equal ``spend.report`` without the idle line. ``hours_sql`` yields the paid hours
    (pricing.hours_sql). ``sample_pct`` reads a random share of the table (DuckDB system sampling, fixed
    seed) instead of every row. Parameters: ``where``'s, then ``hours_sql``'s.
    """
    # a sample clause takes constants only: the share as a checked number, to the millionth of a per cent
    sample = f" TABLESAMPLE {sql.literal(round(sample_pct, 6))}% (system, 42)" if sample_pct is not None else ""
    rows = f"(SELECT *, rowid AS _request FROM requests{sample} WHERE {where})"
    one_each = store.rollup_select_sql(rows, with_batch=False, extra_keys_sql=(("_request", "_request"),))
    return (f"SELECT model, tenant, cost_usd FROM ({pricing.costed_rollup_sql(one_each, hours_sql)}) "
            "WHERE charge = 'usage'")


@dataclass(frozen=True)
class CostDistribution:
    summary: pd.DataFrame       # model, requests, mean_usd, p50_usd, p90_usd, p99_usd, max_usd, free_share
    histogram: pd.DataFrame     # model, bin_lo_usd, bin_hi_usd, requests, share (of the model's priced requests)
    rows_read: int
    sampled: bool


BINS_PER_DECADE = 4
LOW_TAIL = 0.005


COST_SAMPLE_ROWS = 300_000      # above this many requests, the distribution of one request's cost is sampled


def cost_per_request(con: duckdb.DuckDBPyConnection, f: Filters, max_rows: int = COST_SAMPLE_ROWS) -> CostDistribution:
    """Distribution of the cost of one request, per model (see :func:`request_costs_sql`).

    Above ``max_rows`` matching requests the distribution is estimated from a seeded random sample of
    about ``max_rows`` of them (``sampled`` says so); the rest of the spend views are exact. Costs
    above zero are binned on a log scale ({BINS_PER_DECADE} bins per decade); zero-cost requests (cache
    hits, unpriced models) are counted in ``free_share``. The cheapest 0.5 % of paid requests (all models
    together) are counted in the lowest bin, so that a few near-zero costs do not stretch the axis.
    """
    period = period_of(con, f)
    where, params = period.where()
    matching = int(spend.report(con, period, by=[], include_idle=False)["requests"].sum())
    total = store.row_count(con)
    pct = None
    if matching > max_rows and total > 0:
        pct = min(100.0, 100.0 * max_rows / matching)
    hours, hparams = pricing.hours_sql(period.since, period.until)
    costs = request_costs_sql(where, hours, pct)
    args = params + hparams
    con.execute(f"CREATE OR REPLACE TEMP TABLE _req_cost AS {costs}", args)
    try:
        summary = con.execute("""
SELECT model, count(*) AS requests, avg(cost_usd) AS mean_usd,
       quantile_cont(cost_usd, 0.5) AS p50_usd, quantile_cont(cost_usd, 0.9) AS p90_usd,
       quantile_cont(cost_usd, 0.99) AS p99_usd, max(cost_usd) AS max_usd,
       count(*) FILTER (WHERE cost_usd <= 0) / count(*) AS free_share
FROM _req_cost GROUP BY model ORDER BY avg(cost_usd) DESC""").df()
        # the cheapest 0.5 % of paid requests share the lowest bin (self-hosted requests with next to no
        # busy time can cost 1e-20 $, which would stretch the axis over twenty decades)
        hist = con.execute(f"""
WITH lo AS (SELECT floor(log10(quantile_cont(cost_usd, {LOW_TAIL})) * {BINS_PER_DECADE}) AS k0
            FROM _req_cost WHERE cost_usd > 0),
b AS (SELECT model, greatest(floor(log10(cost_usd) * {BINS_PER_DECADE}), (SELECT k0 FROM lo)) AS k
      FROM _req_cost WHERE cost_usd > 0)
SELECT model, pow(10, k / {BINS_PER_DECADE}) AS bin_lo_usd, pow(10, (k + 1) / {BINS_PER_DECADE}) AS bin_hi_usd,
       count(*) AS requests, count(*) / sum(count(*)) OVER (PARTITION BY model) AS share
FROM b GROUP BY model, k ORDER BY model, k""").df()
        n = con.execute("SELECT count(*) FROM _req_cost").fetchall()[0][0]
    finally:
        con.execute("DROP TABLE IF EXISTS _req_cost")
    return CostDistribution(summary, hist, int(n), pct is not None)


# ---------------------------------------------------------------- self-hosted fleet

@dataclass(frozen=True)
class GpuFleet:
    series: pd.DataFrame    # period, model, fleet_cost_usd, allocated_usd, idle_usd, utilization
    summary: pd.DataFrame   # model, fleet_cost_usd, allocated_usd, idle_usd, idle_share, utilization, gpu_hours,
                            # hours_billed, untimed_hours, untimed_fleet_usd, billed_by, how, unbilled_requests
    grain: str


def gpu_fleet(con: duckdb.DuckDBPyConnection, f: Filters) -> GpuFleet:
    """Allocated vs idle GPU cost and utilisation of each self-hosted model (``pricing.fleet_utilization``).

    Hourly up to 31 days, daily beyond. Utilisation of a bucket is allocated / fleet cost (the busy
    share of paid GPU time) over its hours whose busy time is known: an hour with requests but no timing at all
    (logs without service or latency times) allocates its whole cost by request count and has no utilisation, so
    it is left out of the utilisation (unknown, NaN, where every hour is such, and where the only timed hours
    served nothing: their 0 % would stand for the fleet's work) and counted in ``untimed_hours``
    and ``untimed_fleet_usd``. The fleet is shared, so tenant and tier filters do not apply here; model
    filters do. The summary says how each fleet is billed (``billed_by``: declared, inferred or traffic;
    ``how`` in words, :data:`finops.spend.fleets.TRAFFIC_NOTE` where no schedule is declared), its GPU-hours
    and hours billed, and ``unbilled_requests``: served requests in hours its declared schedule leaves out.
    """
    from finops.spend import fleets
    period = period_of(con, f)
    util = pricing.fleet_utilization(con, period.since, period.until)
    if f.models:
        util = util[util["model"].isin(f.models)]
    days = (period.until - period.since).total_seconds() / 86400 if period.since is not None else 0
    g = "hour" if days <= 31 else "day"
    timed = util["utilization"].notna()         # busy time known (an hour that served nothing is 0 % busy)
    util = util.assign(period=util["hour"] if g == "hour" else util["hour"].dt.floor("D"),
                       timed_fleet_usd=util["fleet_cost_usd"].where(timed, 0.0),
                       timed_allocated_usd=util["allocated_usd"].where(timed, 0.0),
                       untimed_fleet_usd=util["fleet_cost_usd"].where(~timed, 0.0), untimed=(~timed).astype("int64"),
                       timed_served=util["served"].where(timed, 0))

    def busy_share(frame: pd.DataFrame) -> pd.Series:
        # where hours of traffic are untimed and every timed hour served nothing, the share would be that of the
        # idle hours alone (0 %): unknown, not a fleet that did no work
        known = (frame["timed_fleet_usd"] > 0) & ((frame["untimed"] == 0) | (frame["timed_served"] > 0))
        return (frame["timed_allocated_usd"] / frame["timed_fleet_usd"]).where(known)

    sums = ["fleet_cost_usd", "allocated_usd", "idle_usd", "timed_fleet_usd", "timed_allocated_usd", "untimed",
            "timed_served"]
    series = util.groupby(["period", "model"], as_index=False)[sums].sum()
    series["utilization"] = busy_share(series)
    series = series.drop(columns=["timed_fleet_usd", "timed_allocated_usd", "untimed", "timed_served"])
    summary = util.groupby("model", as_index=False).agg(
        **{c: (c, "sum") for c in sums}, gpu_hours=("gpu_hours", "sum"), hours_billed=("hour", "nunique"),
        untimed_fleet_usd=("untimed_fleet_usd", "sum"))
    summary["idle_share"] = (summary["idle_usd"] / summary["fleet_cost_usd"]).where(summary["fleet_cost_usd"] > 0)
    summary["utilization"] = busy_share(summary)
    summary = summary.rename(columns={"untimed": "untimed_hours"}).drop(
        columns=["timed_fleet_usd", "timed_allocated_usd", "timed_served"])
    basis = fleets.billing_basis(con)
    unbilled = pd.DataFrame({"model": pd.Series(dtype=object), "unbilled_requests": pd.Series(dtype="int64")})
    if (basis["billed_by"] != "traffic").any():      # billed while serving traffic, no served hour goes unbilled
        unbilled = fleets.unbilled_requests(con, period.since, period.until).rename(
            columns={"requests": "unbilled_requests"})
    if f.models:
        unbilled = unbilled[unbilled["model"].isin(f.models)]
    # a model whose schedule leaves the whole period out still shows, with its unbilled requests
    summary = summary.merge(unbilled, on="model", how="outer")
    money = ["fleet_cost_usd", "allocated_usd", "idle_usd", "gpu_hours", "hours_billed", "unbilled_requests",
             "untimed_hours", "untimed_fleet_usd"]
    summary[money] = summary[money].fillna(0)
    counts = ["hours_billed", "unbilled_requests", "untimed_hours"]
    summary[counts] = summary[counts].astype("int64")
    summary = summary.merge(basis[["model", "billed_by", "how"]], on="model", how="left")
    return GpuFleet(series, summary, g)


# ---------------------------------------------------------------- showback

SHOWBACK_COLUMNS = ("tenant", "model", "requests", "input_tokens", "output_tokens", "cached_input_tokens",
                    "tokens", "priced_tokens", "cost_usd", "cost_per_1m_tokens", "share")


def showback(con: duckdb.DuckDBPyConnection, f: Filters, idle_policy: pricing.IdlePolicy | None = None,
             models: str = "model") -> pd.DataFrame:
    """Showback / chargeback: spend per tenant x model. Idle self-hosted capacity follows ``idle_policy``
    (the store's default when None): kept apart it is the tenant ``(idle capacity)`` (kept unless the
    filters pick tenants or tiers); charged out it is in the tenants' rows. Either way the rows add up to
    the bill.

    Columns: SHOWBACK_COLUMNS; ``share`` is the row's share of the table's total. ``tokens`` is input + output;
    ``priced_tokens`` the $ per 1M tokens' denominator: the tokens a model served (a cache hit reached none) less
    those nothing prices (counted at $0, :data:`finops.spend.report.UNPRICED_TOKENS_SQL`), so a row of an
    unpriced model has no $ per 1M rather than a free one. ``models="priced_as"`` names each row's model as it is
    priced (:data:`finops.spend.report.PRICED_AS`: a dated snapshot and a provider-prefixed name are one row).
    """
    key = model_key_sql(models)
    rep = spend.report(con, period_of(con, f), by=["tenant", key], idle_policy=idle_policy)
    rep = rep.rename(columns={key: "model"})
    out = rep.assign(tokens=rep["input_tokens"] + rep["output_tokens"])
    total = float(out["cost_usd"].sum())
    out["share"] = out["cost_usd"] / total if total > 0 else 0.0
    out["_idle"] = out["tenant"] == IDLE
    out = out.sort_values(["_idle", "cost_usd"], ascending=[True, False], kind="stable")
    return out[list(SHOWBACK_COLUMNS)].reset_index(drop=True)


def showback_by_tenant(sb: pd.DataFrame) -> pd.DataFrame:
    """A :func:`showback` table summed per tenant (the chargeback line per team), largest first,
    idle capacity last. Columns: tenant, models, requests, tokens, priced_tokens, cost_usd, cost_per_1m_tokens,
    share; the $ per 1M divides by ``priced_tokens`` as the pairs' does, so a tenant's is its pairs' blend."""
    columns = ["tenant", "models", "requests", "tokens", "priced_tokens", "cost_usd", "cost_per_1m_tokens", "share"]
    if sb.empty:
        return pd.DataFrame(columns=columns)
    g = sb.groupby("tenant", as_index=False).agg(models=("model", "nunique"), requests=("requests", "sum"),
                                                 tokens=("tokens", "sum"), priced_tokens=("priced_tokens", "sum"),
                                                 cost_usd=("cost_usd", "sum"), share=("share", "sum"))
    g["cost_per_1m_tokens"] = (g["cost_usd"] / g["priced_tokens"].where(g["priced_tokens"] > 0)) * 1e6
    g["_idle"] = g["tenant"] == IDLE
    g = g.sort_values(["_idle", "cost_usd"], ascending=[True, False], kind="stable")
    return g[columns].reset_index(drop=True)


def period_label(f: Filters) -> str:
    """``2026-11-01 to 2026-11-14`` (the inclusive last day) for captions and file names (:func:`finops.fmt.period`)."""
    return fmt_.period(f.since, f.until)
