"""Plans over time: a QPS forecast turned into replicas hour by hour, and autoscaling policies compared.

* **Forecast → replica plan** (:func:`hourly_qps`, :func:`forecast_plan`): the store's hourly
  served QPS, forecast by :mod:`finops.capacity.forecast`, sized hour by hour at the target ρ.
* **Autoscaling** (:func:`policies_for`, :func:`simulate_policies`): the seed's ramp or the forecast's
  climb to its peak, policy by policy, by :mod:`finops.capacity.autoscale`.
* **Capacity meets cost** (:func:`compare_plan`, :func:`fleet_against_plan`): the replicas the fleet was
  billed for (its schedule, :mod:`finops.spend.fleets`) hour by hour against the replicas the calculator's
  sizing rule (:func:`finops.capacity.calculator.required_replicas`: target ρ and the P99 wait SLA) gives
  for each hour's traffic, in replica-hours and dollars, with the hours the fleet was short; and, from a
  forecast, the same ahead against the schedule still in force.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pandas as pd

from finops import sql, store
from finops.capacity import autoscale
from finops.capacity.calculator import (
    MAX_ARRIVAL_RATE,
    MAX_INSTANCES,
    MAX_SLOTS_PER_REPLICA,
    MAX_TARGET_S,
    check_positive,
    check_whole,
)
from finops.capacity.calculator import required_replicas as calculator_required
from finops.capacity.observed import covered_s, fleet_filters, observed_load
from finops.errors import InputError
from finops.filters import Filters
from finops.fmt import number, whole_or_places

if TYPE_CHECKING:                    # statsmodels takes seconds to import: only when forecasting
    from finops.capacity.forecast import ForecastResult

__all__ = [
    "POLICY_NAMES", "AutoscaleRun", "FleetPlan", "ForecastPlan", "PlanComparison", "compare_plan", "fleet_against_plan",
    "forecast_plan", "forecast_window", "hourly_qps", "policies_for", "simulate_policies",
]


def hourly_qps(con: duckdb.DuckDBPyConnection, f: Filters | None = None, model: str | None = None) -> pd.Series:
    """Served requests per second, hour by hour (cache hits excluded), hours without traffic as 0.

    From the rollups; ``model`` None sums every model. Index ``ts`` (naive UTC hours) from the
    first to the last hour with traffic; empty when there is none. An hour the logs start or end inside (a
    live feed's current hour) is rated over the part of it they cover (:func:`covered_s`), not all 3,600 s.
    """
    f = fleet_filters(f)
    if model is not None:
        f = replace(f, models=(model,))
    where, params = f.where(ts_col="hour")
    df = con.execute(f"""
WITH h AS (SELECT hour, sum({sql.served_requests()}) AS served FROM rollup_hourly WHERE {where} GROUP BY hour),
span AS (SELECT unnest(generate_series(min(hour), max(hour), INTERVAL 1 HOUR)) AS hour FROM h
         WHERE (SELECT count(*) FROM h) > 0)
SELECT span.hour AS ts, coalesce(h.served, 0) AS served FROM span LEFT JOIN h USING (hour) ORDER BY ts""",
                     params).df()
    first, last = store.time_span(con)
    seconds = np.array([covered_s(h, first, last) for h in df["ts"]], dtype=float)
    return pd.Series(df["served"].to_numpy(dtype=float) / seconds, index=pd.DatetimeIndex(df["ts"], name="ts"),
                     name="qps")


@dataclass(frozen=True)
class ForecastPlan:
    """A QPS forecast from the store and the replicas (and dollars) it calls for, hour by hour.

    ``plan`` (index ``ts``): ``qps``, ``qps_lo``, ``qps_hi`` (req/s), ``replicas_needed`` (at target
    ρ, before redundancy), ``replicas`` (with redundancy, at least the minimum), ``replicas_at_qps_hi`` and
    ``cost_usd`` (replicas × GPUs × $ per GPU-hour; None without a price).
    ``state`` is ``ok``, ``no_history`` or ``too_short`` (``message`` says why).
    """

    state: str
    message: str | None
    history: pd.Series
    forecast: ForecastResult | None
    plan: pd.DataFrame | None
    peak_qps: float | None
    peak_replicas: int | None
    cost_usd_total: float | None


def forecast_plan(con: duckdb.DuckDBPyConnection, f: Filters | None, model: str | None, days: int = 7, *,
                  mean_service_s: float, slots_per_replica: int = 1, target_utilization: float = 0.7,
                  redundancy: float = 0.25, gpus_per_replica: int = 1, gpu_hour_usd: float | None = None,
                  interval: float = 0.9, min_replicas: int = 1) -> ForecastPlan:
    """Forecast ``model``'s hourly QPS ``days`` ahead and size the fleet hour by hour.

    One replica serves ``slots_per_replica / mean_service_s`` req/s, so the plan is
    :func:`finops.capacity.forecast.replica_plan` at that rate and ``target_utilization``
    (⌈λ / (rate · ρ)⌉ replicas, plus redundancy), never under ``min_replicas`` (a fleet scaled
    to 0 makes the next request wait for a cold start). A history under 24 hours is an answer
    (``state = "too_short"``), not an error.
    """
    from finops.capacity.forecast import forecast_qps, replica_plan

    history = hourly_qps(con, f, model)
    if history.empty:
        return ForecastPlan("no_history", "no served requests in these filters: nothing to forecast",
                            history, None, None, None, None, None)
    # a service time of 1e12 s planned 155 billion replicas; 1e300 s overflowed to a rate of 0 and planned 1
    mean_s = check_positive("mean_service_s", mean_service_s, most=MAX_TARGET_S)
    slots = check_whole("slots_per_replica", slots_per_replica, 1, MAX_SLOTS_PER_REPLICA)
    try:
        fc = forecast_qps(history, days=days, interval=interval)
    except InputError as exc:
        return ForecastPlan("too_short", str(exc), history, None, None, None, None, None)
    plan = replica_plan(fc, service_rate=slots / mean_s, target_utilization=target_utilization,
                        redundancy=redundancy).rename(columns={"servers": "replicas_needed"})
    floor = check_whole("min_replicas", min_replicas, 0)
    plan[["replicas", "replicas_at_qps_hi"]] = plan[["replicas", "replicas_at_qps_hi"]].clip(lower=floor)
    plan.insert(1, "qps_lo", fc.frame["qps_lo"])
    plan["cost_usd"] = (plan["replicas"] * gpus_per_replica * gpu_hour_usd) if gpu_hour_usd is not None else None
    total = float(plan["cost_usd"].sum()) if gpu_hour_usd is not None else None
    return ForecastPlan("ok", fc.warning, history, fc, plan, float(plan["qps"].max()),
                        int(plan["replicas"].max()), total)


# ---------------------------------------------------------------- autoscaling

POLICY_NAMES = tuple(p.name for p in autoscale.DEFAULT_POLICIES)


def policies_for(names: tuple[str, ...] = POLICY_NAMES, *, warm_pool_replicas: int = 10,
                 target_utilization: float = 0.7, slots_per_replica: int = 1) -> tuple[autoscale.Policy, ...]:
    """The default policies named, with the warm pool (where a policy has one) and target ρ set.

    With ``slots_per_replica`` > 1 the policies count slots (the simulator's servers): the warm
    pool, the minimum and maximum, and the HPA's +4 pods scale-up step are multiplied by it.

    >>> [p.warm_pool_replicas for p in policies_for(("reactive HPA", "reactive + warm pool"), warm_pool_replicas=3)]
    [0, 3]
    >>> policies_for(("reactive HPA",), slots_per_replica=8)[0].scale_up_pods
    32
    """
    by_name = {p.name: p for p in autoscale.DEFAULT_POLICIES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise InputError(f"unknown policies: {', '.join(unknown)}; known: {', '.join(by_name)}", field="policy")
    k = check_whole("slots_per_replica", slots_per_replica, 1)
    out = []
    for n in names:
        p = by_name[n]
        pool = warm_pool_replicas if p.warm_pool_replicas else 0
        out.append(replace(p, warm_pool_replicas=pool * k, target_utilization=target_utilization,
                           scale_up_pods=p.scale_up_pods * k, min_replicas=p.min_replicas * k,
                           max_replicas=p.max_replicas * k))
    return tuple(out)


@dataclass(frozen=True)
class AutoscaleRun:
    """Policies compared on one traffic curve: ``summary`` per policy, ``timeline`` for the chart
    (downsampled to at most ``max_points`` per policy, ``ready_capacity_per_s`` = ready × μ)."""

    traffic_label: str
    summary: pd.DataFrame
    timeline: pd.DataFrame
    step_s: int
    note: str               #: a warning worth showing (every policy misses the SLA most of the time), else ""


def forecast_window(hourly_qps_values, hours: int = 6) -> np.ndarray:
    """The ``hours`` forecast hours ending one hour after the peak (the climb to it), as hourly QPS.

    >>> forecast_window([1, 2, 3, 9, 4, 2], hours=3).tolist()
    [3.0, 9.0, 4.0]
    """
    q = np.asarray(hourly_qps_values, dtype=float)
    if q.size == 0:
        raise InputError("the forecast is empty", field="qps")
    peak = int(np.argmax(q))
    end = min(q.size, peak + 2)
    start = max(0, end - hours)
    return q[start:end]


#: the longest cold start the autoscaling what-if takes (an hour): the simulation runs past it
MAX_COLD_START_S = 3_600
#: the ramp run's length and when its ramp starts (s): a ramp ends within the run, so it is at most their difference
RAMP_RUN_S, RAMP_START_S = 900, 120


def simulate_policies(*, traffic: str = "ramp", policy_names: tuple[str, ...] = POLICY_NAMES,
                      base_qps: float = 14.0, peak_qps: float = 28.0, ramp_start_s: int = RAMP_START_S, ramp_s: int = 30,
                      duration_s: int = RAMP_RUN_S, forecast_qps_hourly: tuple[float, ...] = (),
                      service_rate_per_replica: float = 2.0, slots_per_replica: int = 1,
                      cold_start_s: int = 90, wait_sla_s: float | None = 2.0,
                      warm_pool_replicas: int = 10, target_utilization: float = 0.7, gpus_per_replica: int = 1,
                      gpu_hour_usd: float | None = None, max_points: int = 900) -> AutoscaleRun:
    """Run the policies on the seed's ramp (``traffic="ramp"``) or on forecast hours
    (``"forecast"``: the climb to the peak, :func:`forecast_window`, at 1 s steps by interpolation).

    The predictive policies see the traffic itself as their forecast (a perfect forecast). ``wait_sla_s``
    None is no P99 wait SLA, as in the calculator: the summary's ``sla_violation_s`` is None (no second
    judged) and there is no note about missing it.

    :mod:`finops.capacity.autoscale` treats a replica as one server. A replica of ``slots_per_replica``
    slots is simulated as that many servers of ``service_rate_per_replica / slots`` req/s each (so
    the waits are those of c = replicas × slots, not of one fast server); replica counts in the
    summary and timeline are slots ÷ slots per replica (fractional while a replica's slots start).
    """
    # each input within what a what-if can mean: a cold start of 1e12 s asked numpy for 7.28 TiB
    check_whole("cold_start_s", cold_start_s, 0, MAX_COLD_START_S)
    check_whole("warm_pool_replicas", warm_pool_replicas, 0, MAX_INSTANCES)
    if wait_sla_s is not None:
        check_positive("wait_sla_s", wait_sla_s, allow_zero=True, most=MAX_TARGET_S)
    if traffic == "ramp":
        for name, value in (("base_qps", base_qps), ("peak_qps", peak_qps)):
            check_positive(name, value, allow_zero=True, most=MAX_ARRIVAL_RATE)
        check_whole("ramp_s", ramp_s, 0, max(duration_s - ramp_start_s, 0))     # the ramp ends within the run
        lam = autoscale.ramp_traffic(base_qps, peak_qps, start_s=ramp_start_s, ramp_s=ramp_s, duration_s=duration_s)
        label = (f"ramp: {number(base_qps)} → {number(peak_qps)} req/s in {ramp_s} s at t = {ramp_start_s} s, "
                 f"{duration_s} s in all")
    elif traffic == "forecast":
        window = forecast_window(forecast_qps_hourly)
        lam = autoscale.traffic_from_hourly(window)
        label = f"forecast: the {window.size} h climb to the forecast peak ({number(window.max(), 3)} req/s), hourly means interpolated"
    else:
        raise InputError(f"traffic must be 'ramp' or 'forecast', got {traffic!r}", field="traffic")
    if not policy_names:
        raise InputError("pick at least one policy", field="policy")
    slots = check_whole("slots_per_replica", slots_per_replica, 1)
    mu_slot = check_positive("service_rate_per_replica", service_rate_per_replica, most=MAX_ARRIVAL_RATE) / slots
    comp = autoscale.compare_policies(
        lam, mu_slot, policies_for(policy_names, warm_pool_replicas=warm_pool_replicas,
                                   target_utilization=target_utilization, slots_per_replica=slots),
        cold_start_s=cold_start_s, wait_sla_s=wait_sla_s, usd_per_gpu_hour=gpu_hour_usd,
        gpus_per_replica=gpus_per_replica / slots)
    summary = comp.summary.assign(peak_replicas=comp.summary["peak_replicas"] / slots)
    step = max(1, math.ceil(lam.size / max_points))
    t = comp.timeline.assign(ready_capacity_per_s=comp.timeline["ready_replicas"] * mu_slot,
                             ready_replicas=comp.timeline["ready_replicas"] / slots,
                             bucket=comp.timeline["t_s"] // step * step)
    agg = t.groupby(["policy", "bucket"], sort=False).agg(
        arrival_rate_per_s=("arrival_rate_per_s", "mean"), ready_capacity_per_s=("ready_capacity_per_s", "min"),
        queue_len=("queue_len", "max"), p99_wait_s=("p99_wait_s", "max"), shed_per_s=("shed_per_s", "mean"),
        ready_replicas=("ready_replicas", "min")).reset_index().rename(columns={"bucket": "t_s"})
    note = ""
    if wait_sla_s is not None and (summary["sla_violation_s"] > lam.size / 2).all():
        note = (f"Every policy misses the {wait_sla_s:g} s P99 wait SLA most of the time. The policies size for "
                f"ρ ≤ {target_utilization:.0%} alone, and at that ρ this fleet's steady-state P99 wait is already "
                "over the SLA (long requests on few slots): lower the target utilisation, or plan with the "
                "calculator's required replicas, which meet the SLA.")
    return AutoscaleRun(traffic_label=label, summary=summary, timeline=agg, step_s=step, note=note)


# ---------------------------------------------------------------- capacity meets cost

@dataclass(frozen=True)
class PlanComparison:
    """The replicas a fleet was billed for against a replica plan, hour by hour.

    ``hours`` (index ``ts``): ``qps``, ``replicas_billed`` (replica-hours in the hour), ``replicas_planned``,
    ``usd_per_replica_hour``, ``cost_billed_usd``, ``cost_planned_usd`` and ``short`` (the plan needs more
    than was billed). Totals in replica-hours and dollars; ``saving_usd`` = billed − planned (what scaling
    to the plan saves; negative: the plan costs more, to cover the hours the fleet was short);
    ``surplus_usd`` what trimming the surplus hours alone saves.
    """

    hours: pd.DataFrame
    replica_hours_billed: float
    replica_hours_planned: float
    surplus_replica_hours: float
    short_replica_hours: float
    short_hours: int
    cost_billed_usd: float
    cost_planned_usd: float
    surplus_usd: float
    saving_usd: float

    def sentence(self, span: str = "over the period") -> str:
        """The result in one line, e.g. "scaling to the plan would have saved $64.00 over the period at the
        same SLA (32 replica-hours of 96)"."""
        short = (f"; the fleet was short in {self.short_hours:,} hour{'s' if self.short_hours != 1 else ''} "
                 f"({whole_or_places(self.short_replica_hours)} replica-hours under the plan)") if self.short_hours else ""
        if self.saving_usd >= 0.005:
            head = (f"scaling to the plan would have saved ${self.saving_usd:,.2f} {span} at the same SLA "
                    f"({whole_or_places(self.replica_hours_billed - self.replica_hours_planned)} of "
                    f"{whole_or_places(self.replica_hours_billed)} replica-hours)")
        elif self.saving_usd <= -0.005:
            head = (f"meeting the SLA in every hour would have cost ${-self.saving_usd:,.2f} more {span} "
                    f"({whole_or_places(self.replica_hours_planned - self.replica_hours_billed)} replica-hours)")
        else:
            head = f"the fleet matched the plan {span}"
        return head + short


def compare_plan(replicas_billed, replicas_planned, usd_per_replica_hour, qps=None) -> PlanComparison:
    """Billed replicas ``b_h`` against planned ``p_h``, each hour ``h`` at ``usd_h`` a replica-hour
    (pandas Series on one hourly index, or arrays)::

        saving = Σ (b_h − p_h) · usd_h;   surplus = Σ max(b_h − p_h, 0);   short = Σ max(p_h − b_h, 0)

    >>> r = compare_plan([4] * 24, [2] * 16 + [4] * 8, [2.0] * 24)     # flat 4 against 2 off-peak, 4 at peak
    >>> r.surplus_replica_hours, r.saving_usd, r.short_hours
    (32.0, 64.0, 0)
    """
    idx = replicas_billed.index if isinstance(replicas_billed, pd.Series) else None
    b = np.asarray(replicas_billed, dtype=float)
    p = np.asarray(replicas_planned, dtype=float)
    usd = np.asarray(usd_per_replica_hour, dtype=float)
    if not (b.shape == p.shape == usd.shape):
        raise InputError("billed replicas, planned replicas and their prices must cover the same hours")
    if (b < 0).any() or (p < 0).any() or (usd < 0).any() or not np.isfinite(np.concatenate([b, p, usd])).all():
        raise InputError("replicas and prices must be finite and not negative")
    q = np.full(b.shape, np.nan) if qps is None else np.asarray(qps, dtype=float)
    hours = pd.DataFrame({"qps": q, "replicas_billed": b, "replicas_planned": p, "usd_per_replica_hour": usd,
                          "cost_billed_usd": b * usd, "cost_planned_usd": p * usd, "short": p > b + 1e-9},
                         index=idx if idx is not None else pd.RangeIndex(b.size, name="hour"))
    surplus = np.maximum(b - p, 0.0)
    return PlanComparison(
        hours=hours, replica_hours_billed=float(b.sum()), replica_hours_planned=float(p.sum()),
        surplus_replica_hours=float(surplus.sum()), short_replica_hours=float(np.maximum(p - b, 0.0).sum()),
        short_hours=int(hours["short"].sum()), cost_billed_usd=float((b * usd).sum()),
        cost_planned_usd=float((p * usd).sum()), surplus_usd=float((surplus * usd).sum()),
        saving_usd=float(((b - p) * usd).sum()))


@dataclass(frozen=True)
class FleetPlan:
    """A self-hosted fleet's billed replicas against the sizing rule's plan (:func:`fleet_against_plan`).

    ``state`` is ``ok``, ``not_self_hosted`` (no self-hosted row in the price book), ``no_timing`` (no
    service time to size with) or ``no_hours`` (nothing billed and no traffic in the filters);
    ``message`` says why. ``past`` compares the period's hours sized on their own traffic; ``ahead``
    the forecast's hours against the schedule in force then (None unless asked, or when the
    forecast cannot be made: ``ahead_message``); ``ahead_warning`` says what that forecast cannot know
    (a history too short for a daily or weekly pattern, no held-out week to backtest on), None when
    nothing. ``billed_by`` says how the fleet is billed.
    """

    state: str
    message: str | None
    model: str
    past: PlanComparison | None
    ahead: PlanComparison | None
    ahead_message: str | None
    billed_by: str
    mean_service_s: float | None
    slots_per_replica: int | None
    gpus_per_replica: int | None
    gpu_hour_usd: float | None
    ahead_warning: str | None = None


def _size(qps: np.ndarray, need_kwargs: dict, min_replicas: int) -> np.ndarray:
    need = calculator_required(qps, **need_kwargs)
    return np.maximum(need.replicas_with_redundancy, min_replicas).astype(float)


def fleet_against_plan(con: duckdb.DuckDBPyConnection, f: Filters | None, model: str, *,
                       mean_service_s: float | None = None, slots_per_replica: int | None = None,
                       target_utilization: float = 0.7, wait_sla_s: float | None = 2.0, redundancy: float = 0.25,
                       cv_service: float | None = None, cv_arrival: float | None = None, min_replicas: int = 1,
                       days_ahead: int = 0) -> FleetPlan:
    """``model``'s billed replicas in the period of ``f`` hour by hour (:func:`finops.spend.pricing.fleet_utilization`)
    against the replicas the calculator's sizing rule gives each hour's served traffic
    (:func:`finops.capacity.calculator.required_replicas`, at least ``min_replicas``), priced at the hour's
    $ per replica-hour (its schedule's GPUs × rate; the book's where nothing was billed).

    Service time, CVs and slots default to what the logs measured in the model's busiest hour and the
    price book (:func:`finops.capacity.observed.observed_load`). With ``days_ahead``, the forecast's hours
    (:func:`finops.capacity.forecast.forecast_qps`) are sized the same way and set against the schedule
    in force then (the book's fleet for a model billed while it serves traffic).
    """
    from finops.spend import costviews, fleets, pricing

    # the Capacity page's ranges: a redundancy of nan printed "+nan% redundancy", 1e13 replicas planned a cost of
    # $8.4e15, a wait SLA of 1e308 s was "under 1e+308 s"
    check_positive("target_utilization", target_utilization, most=1.0)
    if wait_sla_s is not None:
        check_positive("wait_sla_s", wait_sla_s, allow_zero=True, most=MAX_TARGET_S)
    check_positive("redundancy", redundancy, allow_zero=True, most=1.0)
    check_whole("min_replicas", min_replicas, 0, most=MAX_INSTANCES)
    if mean_service_s is not None:
        check_positive("mean_service_s", mean_service_s, most=MAX_TARGET_S)
    if slots_per_replica is not None:
        check_whole("slots_per_replica", slots_per_replica, 1, most=10_000)
    book = con.execute("SELECT gpus_per_replica, gpu_hour_usd, slots_per_replica FROM prices "
                       "WHERE model = ? AND kind = 'self_hosted'", [model]).fetchall()
    basis = fleets.billing_basis(con).set_index("model")
    billed_by = basis.loc[model, "how"] if model in basis.index else ""
    empty = dict(model=model, past=None, ahead=None, ahead_message=None, billed_by=billed_by)
    if not book:
        return FleetPlan("not_self_hosted", f"{model} is not a self-hosted model of the price book: nothing is "
                         "billed per GPU-hour to compare", mean_service_s=None, slots_per_replica=None,
                         gpus_per_replica=None, gpu_hour_usd=None, **empty)
    gpus, rate, book_slots = book[0]
    f = fleet_filters(f)
    measured = observed_load(con, replace(f, models=(model,)))
    row = measured.iloc[0] if len(measured) else None
    mean_s = mean_service_s if mean_service_s is not None else (
        row["mean_service_s"] if row is not None and pd.notna(row["mean_service_s"]) else None)
    slots = int(slots_per_replica or (book_slots if book_slots is not None and pd.notna(book_slots) else 1))
    out = dict(mean_service_s=mean_s, slots_per_replica=slots, gpus_per_replica=None if gpus is None else int(gpus),
               gpu_hour_usd=None if rate is None else float(rate))
    if mean_s is None:
        return FleetPlan("no_timing", f"the logs carry no service time for {model}: there is nothing to size a "
                         "plan with (give a mean service time)", **empty, **out)
    need_kwargs = dict(mean_service_s=float(mean_s), slots_per_replica=slots, wait_sla_s=wait_sla_s,
                       target_utilization=target_utilization, redundancy=redundancy,
                       cv_service=cv_service if cv_service is not None else (
                           float(row["cv_service"]) if row is not None and pd.notna(row["cv_service"]) else 1.0),
                       cv_arrival=cv_arrival if cv_arrival is not None else (
                           float(row["cv_arrival"]) if row is not None else 1.0))
    floor = check_whole("min_replicas", min_replicas, 0)
    book_usd = float(gpus or 0) * float(rate or 0)
    period = costviews.period_of(con, f)
    util = pricing.fleet_utilization(con, period.since, period.until)
    util = util[util["model"] == model].set_index("hour")
    qps = hourly_qps(con, period, model)
    index = util.index.union(qps.index).rename("ts")
    if index.empty:
        return FleetPlan("no_hours", f"{model} was neither billed nor served traffic in these filters", **empty, **out)
    billed = util["replicas"].reindex(index).fillna(0.0)
    lam = qps.reindex(index).fillna(0.0)
    # a silence of more than TRAFFIC_GAP_HOURS hours in which nothing was billed and nothing served (logs of two
    # months loaded side by side) is left out: no fleet ran and nobody waited, so no hour of it was short
    quiet = (billed == 0) & (lam == 0)
    run = (quiet != quiet.shift()).cumsum()
    index = index[~(quiet & (quiet.groupby(run).transform("size") > pricing.TRAFFIC_GAP_HOURS)).to_numpy()]
    billed, lam = billed.reindex(index), lam.reindex(index)
    usd = (util["fleet_cost_usd"] / util["replicas"].where(util["replicas"] > 0)).reindex(index).fillna(book_usd)
    past = compare_plan(billed, _size(lam.to_numpy(), need_kwargs, floor), usd, lam.to_numpy())
    ahead, ahead_message, ahead_warning = None, None, None
    if days_ahead:
        from finops.capacity.forecast import forecast_qps
        try:
            fc = forecast_qps(hourly_qps(con, f, model), days=days_ahead)
        except InputError as exc:
            ahead_message = str(exc)
        else:
            # a plan ahead on a day of history is a damped trend no backtest checked: said beside it
            caveats = [fc.warning] if fc.warning else []
            if fc.backtest_mape_pct is None:
                caveats.append(fc.backtest_note)
            ahead_warning = "; ".join(caveats) or None
            hours = fc.frame.index
            if hours.tz is not None:                        # the forecast's hours are UTC; the store's naive UTC
                hours = hours.tz_convert("UTC").tz_localize(None)
            start, end = hours.min().to_pydatetime(), (hours.max() + pd.Timedelta(hours=1)).to_pydatetime()
            later = pricing.fleet_utilization(con, start, end)
            later = later[later["model"] == model].set_index("hour")
            if basis.loc[model, "billed_by"] == "traffic":     # billed while serving: the book's fleet runs on
                book_replicas = con.execute("SELECT replicas FROM prices WHERE model = ? AND kind = 'self_hosted'",
                                            [model]).fetchall()[0][0] or 0
                b_ahead = pd.Series(float(book_replicas), index=hours)
                u_ahead = pd.Series(book_usd, index=hours)
            else:
                b_ahead = later["replicas"].reindex(hours).fillna(0.0)
                u_ahead = (later["fleet_cost_usd"] / later["replicas"].where(later["replicas"] > 0)).reindex(
                    hours).fillna(book_usd)
            q_ahead = fc.frame["qps"].to_numpy(dtype=float)
            b_ahead.index = u_ahead.index = hours.rename("ts")
            ahead = compare_plan(b_ahead, _size(q_ahead, need_kwargs, floor), u_ahead, q_ahead)
    return FleetPlan("ok", None, model, past, ahead, ahead_message, billed_by, **out, ahead_warning=ahead_warning)
