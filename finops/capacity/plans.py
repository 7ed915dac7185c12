"""Plans over time: a QPS forecast turned into replicas hour by hour, and autoscaling policies compared.

* **Forecast → replica plan** (:func:`hourly_qps`, :func:`forecast_plan`): the store's hourly
  served QPS, forecast by :mod:`finops.capacity.forecast`, sized hour by hour at the target ρ.
* **Autoscaling** (:func:`policies_for`, :func:`simulate_policies`): the seed's ramp or the forecast's
  climb to its peak, policy by policy, by :mod:`finops.capacity.autoscale`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pandas as pd

from finops import sql
from finops.capacity import autoscale
from finops.capacity.calculator import check_positive, check_whole
from finops.capacity.observed import fleet_filters
from finops.errors import InputError
from finops.filters import Filters

if TYPE_CHECKING:                    # statsmodels takes seconds to import: only when forecasting
    from finops.capacity.forecast import ForecastResult

__all__ = [
    "POLICY_NAMES", "AutoscaleRun", "ForecastPlan", "forecast_plan", "forecast_window", "hourly_qps", "policies_for",
    "simulate_policies",
]


def hourly_qps(con: duckdb.DuckDBPyConnection, f: Filters | None = None, model: str | None = None) -> pd.Series:
    """Served requests per second, hour by hour (cache hits excluded), hours without traffic as 0.

    From the rollups; ``model`` None sums every model. Index ``ts`` (naive UTC hours) from the
    first to the last hour with traffic; empty when there is none.
    """
    f = fleet_filters(f)
    if model is not None:
        f = replace(f, models=(model,))
    where, params = f.where(ts_col="hour")
    df = con.execute(f"""
WITH h AS (SELECT hour, sum({sql.served_requests()}) AS served FROM rollup_hourly WHERE {where} GROUP BY hour),
span AS (SELECT unnest(generate_series(min(hour), max(hour), INTERVAL 1 HOUR)) AS hour FROM h
         WHERE (SELECT count(*) FROM h) > 0)
SELECT span.hour AS ts, coalesce(h.served, 0) / 3600.0 AS qps FROM span LEFT JOIN h USING (hour) ORDER BY ts""",
                     params).df()
    return pd.Series(df["qps"].to_numpy(dtype=float), index=pd.DatetimeIndex(df["ts"], name="ts"), name="qps")


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
    mean_s = check_positive("mean_service_s", mean_service_s)
    slots = check_whole("slots_per_replica", slots_per_replica, 1)
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


def simulate_policies(*, traffic: str = "ramp", policy_names: tuple[str, ...] = POLICY_NAMES,
                      base_qps: float = 14.0, peak_qps: float = 28.0, ramp_start_s: int = 120, ramp_s: int = 30,
                      duration_s: int = 900, forecast_qps_hourly: tuple[float, ...] = (),
                      service_rate_per_replica: float = 2.0, slots_per_replica: int = 1,
                      cold_start_s: int = 90, wait_sla_s: float = 2.0,
                      warm_pool_replicas: int = 10, target_utilization: float = 0.7, gpus_per_replica: int = 1,
                      gpu_hour_usd: float | None = None, max_points: int = 900) -> AutoscaleRun:
    """Run the policies on the seed's ramp (``traffic="ramp"``) or on forecast hours
    (``"forecast"``: the climb to the peak, :func:`forecast_window`, at 1 s steps by interpolation).

    The predictive policies see the traffic itself as their forecast (a perfect forecast).

    :mod:`finops.capacity.autoscale` treats a replica as one server. A replica of ``slots_per_replica``
    slots is simulated as that many servers of ``service_rate_per_replica / slots`` req/s each (so
    the waits are those of c = replicas × slots, not of one fast server); replica counts in the
    summary and timeline are slots ÷ slots per replica (fractional while a replica's slots start).
    """
    if traffic == "ramp":
        lam = autoscale.ramp_traffic(base_qps, peak_qps, start_s=ramp_start_s, ramp_s=ramp_s, duration_s=duration_s)
        label = (f"ramp: {base_qps:g} → {peak_qps:g} req/s in {ramp_s} s at t = {ramp_start_s} s, "
                 f"{duration_s} s in all")
    elif traffic == "forecast":
        window = forecast_window(forecast_qps_hourly)
        lam = autoscale.traffic_from_hourly(window)
        label = f"forecast: the {window.size} h climb to the forecast peak ({window.max():.3g} req/s), hourly means interpolated"
    else:
        raise InputError(f"traffic must be 'ramp' or 'forecast', got {traffic!r}", field="traffic")
    if not policy_names:
        raise InputError("pick at least one policy", field="policy")
    slots = check_whole("slots_per_replica", slots_per_replica, 1)
    mu_slot = check_positive("service_rate_per_replica", service_rate_per_replica) / slots
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
    if (summary["sla_violation_s"] > lam.size / 2).all():
        note = (f"Every policy misses the {wait_sla_s:g} s P99 wait SLA most of the time. The policies size for "
                f"ρ ≤ {target_utilization:.0%} alone, and at that ρ this fleet's steady-state P99 wait is already "
                "over the SLA (long requests on few slots): lower the target utilisation, or plan with the "
                "calculator's required replicas, which meet the SLA.")
    return AutoscaleRun(traffic_label=label, summary=summary, timeline=agg, step_s=step, note=note)
