"""Monthly budgets per tenant: stored in the store's ``budgets`` table, burn so far, forecast to month end.

Forecast
--------
Let ``x_1 .. x_n`` be a tenant's spend on the *complete* days observed this month (a day with no
traffic counts as 0), ``m`` their mean and ``s`` their sample standard deviation, ``S`` the spend so far
(the complete days plus the current partial day) and ``d`` the days left until the month ends
(fractional, from the end of the last observed hour). Treating daily spend as independent draws, the
month-end spend is forecast as::

    forecast = S + m * d
    interval = forecast ± t(1 - α/2, n - 1) * s * sqrt(d + d² / n)

the prediction interval for a sum of ``d`` future days (``d·s²`` for the days themselves, ``d²·s²/n``
for the uncertainty of ``m``), with ``α = 1 - confidence`` (90 % by default). The lower bound is never
below ``S``. With fewer than two complete days there is no spread to measure: with one, the forecast is
that day's spend a day, and with none, the run rate over the time the logs cover (the month's first request
to its last, at least an hour), the interval unknown (NaN). A month that has ended has ``d = 0``. A first day
the logs began part way through (later than the complete days after it have traffic) is in ``S`` but not
among the ``x_i``: as a whole day it would pull the mean down.

A tenant is **over budget** when it has already spent more than its budget, **forecast over budget** when
the forecast exceeds it (the spend so far does not yet), **at risk** when only the upper end of the interval
does, and **on track** otherwise. Idle self-hosted capacity kept apart is a fleet cost, in no
tenant's budget; where the store's idle policy charges it out (:func:`finops.spend.fleets.default_policy`),
each tenant's share counts in its spend, as on its chargeback.

>>> r = forecast_month_end([10.0, 12.0, 8.0, 10.0], spent_usd=40.0, days_left=10.0)
>>> round(r.forecast_usd, 2), round(r.low_usd, 2), round(r.high_usd, 2)
(140.0, 117.26, 162.74)
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import duckdb
import numpy as np
import pandas as pd

from finops import access, sql, store
from finops.errors import InputError
from finops.filters import Filters
from finops.spend import report as spend

DEFAULT_CONFIDENCE = 0.9
STATUSES = ("over budget", "forecast over budget", "at risk", "on track", "no budget")
#: the statuses whose forecast is above the budget (the Budgets page counts them together)
FORECAST_OVER = STATUSES[:2]


def month_start(value) -> date:
    """The first day of the month of a date/datetime, or of a ``YYYY-MM`` string."""
    if isinstance(value, str):
        try:
            y, m = value.split("-")[:2]
            return date(int(y), int(m), 1)
        except ValueError:
            raise InputError(f"not a month (YYYY-MM): {value!r}", field="month") from None
    return date(value.year, value.month, 1)


def next_month(m: date) -> date:
    """The first day of the month after ``m``; the last day the calendar has for December 9999 (a stored
    row dated 9999 must not crash a page).

    >>> next_month(date(2026, 12, 5)), next_month(date(9999, 12, 1))
    (datetime.date(2027, 1, 1), datetime.date(9999, 12, 31))
    """
    if m.year == date.max.year and m.month == 12:
        return date.max
    return date(m.year + (m.month == 12), m.month % 12 + 1, 1)


def month_filters(month, f: Filters | None = None) -> Filters:
    """The requests a month's budgets read (:func:`status`): the month, ``f``'s tenants (and its scope); its
    dates, models and tiers do not apply.

    >>> month_filters("2026-02", Filters(tenants=("acme",), models=("gpt-4o",))).since
    datetime.datetime(2026, 2, 1, 0, 0)
    """
    f = f or Filters()
    m = month_start(month)
    return Filters(since=datetime.combine(m, datetime.min.time()),
                   until=datetime.combine(next_month(m), datetime.min.time()), tenants=f.tenants, scoped=f.scoped)


def months(con: duckdb.DuckDBPyConnection) -> list[date]:
    """Months with traffic in the store, newest first."""
    rows = con.execute(f"SELECT DISTINCT CAST({sql.time_bucket('month', 'hour')} AS DATE) FROM rollup_hourly "
                       "ORDER BY 1 DESC").fetchall()
    return [r[0] for r in rows]


def tenants(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Tenants with traffic, or with a budget in any month."""
    rows = con.execute("SELECT tenant FROM rollup_hourly WHERE tenant <> '' UNION "
                       "SELECT tenant FROM budgets ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def budget_table(con: duckdb.DuckDBPyConnection, month) -> pd.DataFrame:
    """The tenants with traffic in ``month`` or a budget for it, by name, each with its budget (NaN where
    none is set). Columns: tenant, budget_usd."""
    m = month_start(month)
    start, end = datetime.combine(m, datetime.min.time()), datetime.combine(next_month(m), datetime.min.time())
    known = con.execute("SELECT DISTINCT tenant FROM rollup_hourly WHERE tenant <> '' AND hour >= ? AND hour < ? "
                        "UNION SELECT tenant FROM budgets WHERE month = ? ORDER BY 1", [start, end, m]).df()
    set_ = con.execute("SELECT tenant, budget_usd FROM budgets WHERE month = ?", [m]).df()
    out = known.astype({"tenant": object}).merge(set_, on="tenant", how="left")
    out["budget_usd"] = out["budget_usd"].astype("float64")
    return out


def editor_key(table: pd.DataFrame, month) -> str:
    """A widget key that changes whenever the editor's rows would: an edit made on one list of tenants is
    never applied to another (a load that adds a tenant mid-edit resets the editor instead of shifting it)."""
    import hashlib
    digest = hashlib.sha1("\n".join(map(str, table["tenant"])).encode()).hexdigest()[:12]
    return f"budget_editor_{month_start(month):%Y-%m}_{digest}"


SAMPLE_KEY = "budgets.sample_months"   # months whose budgets are the sample store's examples


def sample_months(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Months (YYYY-MM) whose budgets are still the examples the sample store was built with."""
    return list(store.get_setting(con, SAMPLE_KEY, []) or [])


#: the largest monthly budget taken: a trillion dollars (1e300 was stored and shown as 300 digits)
MAX_BUDGET_USD = 1e12


def save_budgets(con: duckdb.DuckDBPyConnection, month, frame: pd.DataFrame, sample: bool = False) -> int:
    """Replace ``month``'s budgets with ``frame`` (tenant, budget_usd). A blank budget removes it.

    Raises InputError (naming the row and field) for a blank tenant, a tenant listed twice, or a budget
    that is not a non-negative number. Returns the number of budgets stored.
    """
    access.require("edit_budgets")
    m = month_start(month)
    if "tenant" not in frame.columns or "budget_usd" not in frame.columns:
        raise InputError("budgets need the columns tenant and budget_usd")
    rows: list[tuple[str, float]] = []
    seen: set[str] = set()
    for i, (tenant, raw) in enumerate(zip(frame["tenant"], frame["budget_usd"], strict=True), start=1):
        if raw is None or (isinstance(raw, float) and math.isnan(raw)) or (isinstance(raw, str) and not raw.strip()):
            continue
        name = "" if tenant is None or (isinstance(tenant, float) and math.isnan(tenant)) else str(tenant).strip()
        if not name:
            raise InputError("a budget needs a tenant", row=i, field="tenant")
        if name in seen:
            raise InputError(f"tenant {name!r} is listed twice", row=i, field="tenant")
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise InputError(f"budget {raw!r} is not a number", row=i, field="budget_usd") from None
        if not math.isfinite(value) or value < 0 or value > MAX_BUDGET_USD:
            raise InputError(f"budget {raw!r} must be an amount in USD from 0 to {MAX_BUDGET_USD:,.0f}", row=i,
                             field="budget_usd")
        seen.add(name)
        rows.append((name, value))
    key = m.strftime("%Y-%m")
    marked = [x for x in sample_months(con) if x != key] + ([key] if sample else [])
    with store.transaction(con):
        con.execute("DELETE FROM budgets WHERE month = ?", [m])
        if rows:
            con.executemany("INSERT INTO budgets VALUES (?, ?, ?)", [(t, m, v) for t, v in rows])
        con.execute("DELETE FROM settings WHERE key = ?", [SAMPLE_KEY])
        con.execute("INSERT INTO settings VALUES (?, ?)", [SAMPLE_KEY, json.dumps(marked)])
        store.bump_data_version(con)
    return len(rows)


def set_budget(con: duckdb.DuckDBPyConnection, tenant: str, month, budget_usd: float) -> None:
    """Set one tenant's budget for a month (other tenants' budgets are kept)."""
    table = budget_table(con, month)
    table = table[table["tenant"] != tenant]
    table = pd.concat([table, pd.DataFrame({"tenant": [tenant], "budget_usd": [budget_usd]})], ignore_index=True)
    save_budgets(con, month, table)


def t_quantile(confidence: float, dof: int) -> float:
    """The two-sided Student-t quantile t(1 - α/2, dof) for ``confidence`` = 1 - α.

    >>> round(t_quantile(0.9, 3), 4)
    2.3534
    """
    from scipy import stats  # imported here: scipy.stats takes seconds to import, only budgets need it

    return float(stats.t.ppf(0.5 + confidence / 2, dof))


def forecast_caveat(complete_days: int) -> str:
    """What a month-end forecast from fewer than two complete days cannot tell, in the words the Budgets page and the
    budget alert both use (one string, so they cannot drift); "" from two complete days on, which have a spread and
    an interval. The caller says what the forecast ran on (the hours the logs cover, the one day) before it.

    >>> forecast_caveat(0)
    'a rough guide with no interval until a day has passed'
    >>> forecast_caveat(1), forecast_caveat(2)
    ('with no interval: one day has no spread to measure', '')
    """
    if complete_days <= 0:
        return "a rough guide with no interval until a day has passed"
    if complete_days == 1:
        return "with no interval: one day has no spread to measure"
    return ""


@dataclass(frozen=True)
class Forecast:
    forecast_usd: float
    low_usd: float
    high_usd: float
    mean_daily_usd: float
    sd_daily_usd: float


def forecast_month_end(daily_usd, spent_usd: float, days_left: float, confidence: float = DEFAULT_CONFIDENCE,
                       elapsed_days: float | None = None) -> Forecast:
    """Month-end spend from complete days' spend ``daily_usd`` (see the module docstring).

    With no complete day, the run rate is ``spent_usd / elapsed_days``.
    """
    x = np.asarray(daily_usd, dtype=float)
    n = len(x)
    d = max(float(days_left), 0.0)
    if n == 0:
        rate = spent_usd / elapsed_days if elapsed_days else 0.0
        f = spent_usd + rate * d
        return Forecast(f, math.nan, math.nan, rate, math.nan)
    m = float(x.mean())
    f = spent_usd + m * d
    if n < 2:
        return Forecast(f, math.nan, math.nan, m, math.nan)
    s = float(x.std(ddof=1))
    half = t_quantile(confidence, n - 1) * s * math.sqrt(d + d * d / n)
    return Forecast(f, max(f - half, spent_usd), f + half, m, s)


@dataclass(frozen=True)
class BudgetReport:
    month: date
    as_of: datetime | None          # end of the last observed hour (None: no traffic this month)
    first_day: date | None          # first day with traffic this month
    days_left: float
    complete_days: int
    confidence: float
    table: pd.DataFrame             # one row per tenant (see status())
    daily: pd.DataFrame             # tenant, day, spent_usd (complete and partial days)
    idle_usd: float                 # idle capacity this month kept apart (no tenant's budget)
    # the time the run rate of a month with no complete day is measured over: from the first observed day's
    # midnight, or the store's first request where the logs begin later that day, to the last request
    # (``as_of`` where one was given); None with no traffic
    observed_from: datetime | None = None
    observed_to: datetime | None = None
    # the first observed day began part way through (the logs switched on that day, :func:`_begins_late`): in the
    # spend so far, but not among the complete days
    first_day_partial: bool = False

    @property
    def observed_hours(self) -> float:
        """Hours from ``observed_from`` to ``observed_to`` (0 with no traffic)."""
        if self.observed_from is None or self.observed_to is None:
            return 0.0
        return (self.observed_to - self.observed_from) / timedelta(hours=1)


def status(con: duckdb.DuckDBPyConnection, month, f: Filters | None = None, as_of: datetime | None = None,
           confidence: float = DEFAULT_CONFIDENCE) -> BudgetReport:
    """Budget, burn so far and month-end forecast of every tenant (``f.tenants`` narrows the list;
    dates, models and tiers of ``f`` do not apply: a budget covers all of a tenant's spend in the month).

    Table columns: tenant, budget_usd, spent_usd, mean_daily_usd, sd_daily_usd, forecast_usd,
    forecast_low_usd, forecast_high_usd, used_share (spent / budget), forecast_share (forecast / budget),
    status (over budget / at risk / on track / no budget).
    """
    f = f or Filters()
    m = month_start(month)
    end = next_month(m)
    start_dt, end_dt = datetime.combine(m, datetime.min.time()), datetime.combine(end, datetime.min.time())
    span = con.execute("SELECT min(hour), max(hour) FROM rollup_hourly WHERE hour >= ? AND hour < ?",
                       [start_dt, end_dt]).fetchall()[0]
    budgets = budget_table(con, m)
    if f.tenants:
        budgets = budgets[budgets["tenant"].isin(f.tenants)]
    if span[0] is None:
        table = _table(budgets, pd.DataFrame(columns=["tenant", "spent_usd"]), {}, 0.0, 0, confidence, None)
        return BudgetReport(m, None, None, 0.0, 0, confidence, table,
                            pd.DataFrame(columns=["tenant", "day", "spent_usd"]), 0.0)
    last = span[1] + timedelta(hours=1)
    if as_of is not None:
        last = min(max(as_of, start_dt), end_dt)
    first_day = span[0].date()
    # from the first observed day: a self-hosted fleet is not charged for days before the store begins
    period = Filters(since=datetime.combine(first_day, datetime.min.time()), until=last, tenants=f.tenants)
    rep = spend.report(con, period, by=["day", "tenant"])
    idle = float(rep.loc[rep["tenant"] == spend.IDLE_TENANT, "cost_usd"].sum())
    rep = rep[rep["tenant"] != spend.IDLE_TENANT]
    daily = pd.DataFrame({"tenant": rep["tenant"], "day": pd.to_datetime(rep["day"]).dt.date,
                          "spent_usd": rep["cost_usd"].astype(float)})
    last_day = last.date()
    complete = [first_day + timedelta(days=i) for i in range((last_day - first_day).days)]
    days_left = (end_dt - last) / timedelta(days=1)
    seen_from, seen_to = _observed(con, first_day, last, as_of)
    first_partial = bool(complete) and _begins_late(con, seen_from, last)
    if first_partial:
        complete = complete[1:]         # in the spend so far, not a day's spend to average
    # at least an hour: one request alone is no rate per minute
    elapsed = max(seen_to - seen_from, timedelta(hours=1)) / timedelta(days=1)
    spent = daily.groupby("tenant", as_index=False)["spent_usd"].sum()
    series = {}
    for tenant, grp in daily.groupby("tenant"):
        per_day = dict(zip(grp["day"], grp["spent_usd"], strict=True))
        series[tenant] = [per_day.get(d, 0.0) for d in complete]
    table = _table(budgets, spent, series, days_left, len(complete), confidence, elapsed)
    return BudgetReport(m, last, first_day, days_left, len(complete), confidence, table,
                        daily.reset_index(drop=True), idle, seen_from, seen_to, first_partial)


def _begins_late(con: duckdb.DuckDBPyConnection, seen_from: datetime, last: datetime) -> bool:
    """Whether the logs begin part way through their first day (:func:`_observed`'s ``seen_from`` after 01:00)
    while the complete days after it have traffic earlier in the day: a feed switched on at 18:15 logged a quarter
    of that day, and averaging it as a whole one pulls the daily mean down. A store whose every day starts late
    (one request at noon a day) keeps its first day. With no complete day after the first, the part of the
    current day logged so far is the evidence."""
    midnight = datetime.combine(seen_from.date(), datetime.min.time())
    if seen_from - midnight <= timedelta(hours=1):
        return False
    after = midnight + timedelta(days=1)
    until = datetime.combine(last.date(), datetime.min.time())
    return bool(con.execute(
        "SELECT EXISTS (SELECT 1 FROM rollup_hourly WHERE hour >= ? AND hour < ? AND hour(hour) < ?)",
        [after, until if until > after else last, seen_from.hour]).fetchall()[0][0])


def _observed(con: duckdb.DuckDBPyConnection, first_day: date, last: datetime,
              as_of: datetime | None) -> tuple[datetime, datetime]:
    """The time the month's spend so far was logged over (:attr:`BudgetReport.observed_from` and ``observed_to``):
    a trace that begins at 18:15 and ends at 19:14 spent its dollars in that hour, not over the 20 hours since
    midnight to the end of its last hour (a run rate 20 times too low). The month's first and last request come
    from the loaded batches' spans (a batch that runs past the month's edge counts from or to that edge), used
    where they fall on the first observed day and before ``last``."""
    midnight = datetime.combine(first_day, datetime.min.time())
    start = datetime.combine(month_start(first_day), datetime.min.time())
    end = datetime.combine(next_month(month_start(first_day)), datetime.min.time())
    first_ts, last_ts = con.execute(
        "SELECT min(greatest(min_ts, ?)), max(least(max_ts, ?)) FROM batches WHERE max_ts >= ? AND min_ts < ?",
        [start, end, start, end]).fetchall()[0]
    seen_from = first_ts if first_ts is not None and first_ts.date() == first_day and first_ts < last else midnight
    seen_to = last
    if as_of is None and last_ts is not None and seen_from <= last_ts <= last:
        seen_to = last_ts
    return seen_from, seen_to


def _table(budgets: pd.DataFrame, spent: pd.DataFrame, series: dict, days_left: float, n_complete: int,
           confidence: float, elapsed: float | None) -> pd.DataFrame:
    names = sorted(set(budgets["tenant"]) | set(spent["tenant"]))
    budget_of = dict(zip(budgets["tenant"], budgets["budget_usd"], strict=True))
    spent_of = dict(zip(spent["tenant"], spent["spent_usd"], strict=True))
    rows = []
    for t in names:
        s = float(spent_of.get(t, 0.0))
        fc = forecast_month_end(series.get(t, [0.0] * n_complete), s, days_left, confidence, elapsed)
        b = budget_of.get(t)
        b = None if b is None or (isinstance(b, float) and math.isnan(b)) else float(b)
        if b is None:
            st = "no budget"
        elif s > b:
            st = "over budget"
        elif fc.forecast_usd > b:
            st = "forecast over budget"
        elif not math.isnan(fc.high_usd) and fc.high_usd > b:
            st = "at risk"
        else:
            st = "on track"
        rows.append({"tenant": t, "budget_usd": b if b is not None else math.nan, "spent_usd": s,
                     "mean_daily_usd": fc.mean_daily_usd, "sd_daily_usd": fc.sd_daily_usd,
                     "forecast_usd": fc.forecast_usd, "forecast_low_usd": fc.low_usd, "forecast_high_usd": fc.high_usd,
                     "used_share": s / b if b else math.nan, "forecast_share": fc.forecast_usd / b if b else math.nan,
                     "status": st})
    cols = ["tenant", "budget_usd", "spent_usd", "mean_daily_usd", "sd_daily_usd", "forecast_usd", "forecast_low_usd",
            "forecast_high_usd", "used_share", "forecast_share", "status"]
    out = pd.DataFrame(rows, columns=cols)
    order = {s: i for i, s in enumerate(STATUSES)}
    out = out.sort_values(["status", "forecast_usd"], key=lambda c: c.map(order) if c.name == "status" else -c,
                          kind="stable")
    return out.reset_index(drop=True)


def burn_curve(report: BudgetReport, tenant: str) -> pd.DataFrame:
    """Cumulative spend of one tenant through the month: the observed days ('actual'), then the
    forecast from the last observation to the month end with its interval ('forecast').

    Columns: day (datetime), kind, cumulative_usd, low_usd, high_usd, budget_usd.
    """
    row = report.table[report.table["tenant"] == tenant]
    budget = float(row["budget_usd"].iloc[0]) if len(row) else math.nan
    cols = ["day", "kind", "cumulative_usd", "low_usd", "high_usd", "budget_usd"]
    if report.as_of is None or not len(row):
        return pd.DataFrame(columns=cols)
    d = report.daily[report.daily["tenant"] == tenant].sort_values("day")
    first = report.first_day
    days = [first + timedelta(days=i) for i in range((report.as_of.date() - first).days + 1)
            if first + timedelta(days=i) < next_month(report.month)]
    per_day = dict(zip(d["day"], d["spent_usd"], strict=True))
    out, cum = [], 0.0
    for day in days:
        cum += per_day.get(day, 0.0)
        # plotted at the end of the day (or at the last observation for the partial day)
        at = min(datetime.combine(day + timedelta(days=1), datetime.min.time()), report.as_of)
        out.append((at, "actual", cum, math.nan, math.nan, budget))
    r = row.iloc[0]
    mean, sd, n = float(r["mean_daily_usd"]), float(r["sd_daily_usd"]), report.complete_days
    end = datetime.combine(next_month(report.month), datetime.min.time())
    points = [report.as_of]
    nxt = datetime.combine(report.as_of.date() + timedelta(days=1), datetime.min.time())
    while nxt <= end:
        if nxt > report.as_of:
            points.append(nxt)
        nxt += timedelta(days=1)
    t = t_quantile(report.confidence, n - 1) if n >= 2 else math.nan
    for p in points:
        k = (p - report.as_of) / timedelta(days=1)
        mid = cum + mean * k
        half = t * sd * math.sqrt(k + k * k / n) if n >= 2 and not math.isnan(sd) else math.nan
        out.append((p, "forecast", mid, max(mid - half, cum) if not math.isnan(half) else math.nan,
                    mid + half if not math.isnan(half) else math.nan, budget))
    return pd.DataFrame(out, columns=cols)
