"""Autoscaling simulator: why a reactive HPA loses to a 30 s ramp when cold start takes 90 s.

A discrete-time simulation at 1 s steps of a fleet of identical replicas (each serving μ
requests/s) under a traffic curve λ(t), for a list of scaling policies given as data
(:class:`Policy`). It reproduces the table of worked problem 3 in the seed text: load
ramps to its peak within 30 s, a new replica needs 90 s to become ready, and a reactive
HPA's replicas arrive long after the queue has blown up; predictive scale-out, a warm
pool and shedding the lowest tier are the three layers of defence.

Model, per step t (dt = 1 s):

1. replicas whose start-up has finished join the ready set; warm-pool slots refill;
2. on the policy's sync period the controller picks a replica count (below);
3. shedding (if enabled): when the arrival rate would push ρ = λ/(ready·μ) above
   ``shed_above_utilization``, the lowest tier is dropped, at most ``sheddable_share``
   of the arrivals;
4. fluid queue: the admitted λ·dt requests join the backlog q, ready·μ·dt are served,
   the rest carry over: q ← max(0, q + λ_admitted·dt − ready·μ·dt);
5. the P99 wait of a request arriving at t is estimated as

       p99_wait_s = q / (ready·μ)  +  t99_MMc(min(λ_admitted, 0.99·ready·μ), μ, ready)

   the time to drain the fluid backlog ahead of it (FIFO), plus the stationary M/M/c
   99th-percentile wait at the step's admitted load and ready replicas. The stationary
   part is evaluated at ρ ≤ 0.99, where it is finite; above that the backlog, growing at
   λ − ready·μ per second, carries the wait. (Pointwise-stationary approximations
   overstate waits during short spikes below ρ = 1 and the fluid part ignores randomness
   in overload; the sum is a deliberately simple, documented estimate.) With no ready
   replica and work waiting, the wait is unbounded: inf.

Controller (Kubernetes HPA v2 defaults, ``scaler="reactive"``): every 15 s, metric =
arrival rate per ready replica (a Pods metric such as requests/s), target =
``target_utilization``·μ; recommendation ⌈λ/(μ·target)⌉ (pods not yet ready count as 0
for a scale-up, so this is what the HPA formula gives); no change within the 10 %
tolerance; scale-up limited to max(+4 pods, +100 %) per sync period (Kubernetes counts
these per 15 s policy period; at the defaults the two coincide); scale-down to the highest
recommendation of the last 300 s (stabilisation window). New replicas become ready after
``cold_start_s``, or ``warm_start_s`` when taken from a warm pool, whose slot then
refills over a cold start. ``scaler="predictive"`` adds a floor ⌈max λ̂(t..t+lead)/(μ·target)⌉
from a forecast λ̂ with lead = cold start + one sync period (0 past the forecast's end),
applied directly (as a controller setting the replica count would), the reactive HPA
still acting above it.

GPU time counts every replica that holds a GPU: ready, starting up, and the warm pool.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from finops.capacity.queueing import erlang_c, required_servers
from finops.errors import InputError

__all__ = ["Policy", "DEFAULT_POLICIES", "SimulationResult", "Comparison", "ramp_traffic",
           "traffic_from_hourly", "simulate", "compare_policies", "policy_from_dict"]

SCALERS = ("reactive", "predictive", "static")
STATIONARY_RHO_CAP = 0.99
P99 = 0.99


@dataclass(frozen=True)
class Policy:
    """A scaling policy, as data. Defaults are the Kubernetes HPA's."""

    name: str
    scaler: str = "reactive"               #: "reactive" (HPA), "predictive" (forecast floor + HPA), "static"
    warm_pool_replicas: int = 0            #: ready-to-join standby replicas
    warm_start_s: int = 5                  #: time for a warm-pool replica to join
    shed_lowest_tier: bool = False
    shed_above_utilization: float = 1.0    #: shed when λ/(ready·μ) would exceed this
    target_utilization: float = 0.7        #: HPA target, ρ per ready replica
    sync_period_s: int = 15
    tolerance: float = 0.1
    scale_up_pods: int = 4                 #: scale-up policy: +4 pods per period ...
    scale_up_percent: float = 100.0        #: ... or +100 %, whichever is more
    scale_down_stabilization_s: int = 300
    min_replicas: int = 1
    max_replicas: int = 100_000
    predictive_lead_s: int | None = None   #: default: cold start + one sync period


#: The seed's three layers, alone and together.
DEFAULT_POLICIES = (
    Policy("reactive HPA"),
    Policy("reactive + warm pool", warm_pool_replicas=10),
    Policy("reactive + shed", shed_lowest_tier=True),
    Policy("predictive", scaler="predictive"),
    Policy("predictive + warm pool", scaler="predictive", warm_pool_replicas=10),
    Policy("predictive + warm pool + shed", scaler="predictive", warm_pool_replicas=10,
           shed_lowest_tier=True),
)


@dataclass(frozen=True)
class SimulationResult:
    """One policy's run: a per-second ``timeline`` and a ``summary`` dict.

    timeline columns: t_s, arrival_rate_per_s, admitted_rate_per_s, shed_per_s,
    ready_replicas, provisioned_replicas (ready + starting), warm_pool_ready, queue_len
    (requests), p99_wait_s, sla_violated (False throughout without an SLA).
    summary keys: policy, sla_violation_s (None without an SLA: nothing judged), shed_requests,
    gpu_hours, cost_usd (None without a price), peak_queue_len, peak_p99_wait_s (None if
    unbounded), peak_replicas.
    """

    policy: Policy
    timeline: pd.DataFrame
    summary: dict


@dataclass(frozen=True)
class Comparison:
    """Several policies on the same traffic: ``timeline`` (long, with a ``policy`` column)
    and ``summary`` (one row per policy)."""

    timeline: pd.DataFrame
    summary: pd.DataFrame


def ramp_traffic(base_qps: float = 14.0, peak_qps: float = 28.0, *, start_s: int = 120,
                 ramp_s: int = 30, duration_s: int = 900) -> np.ndarray:
    """λ per second: ``base_qps`` until ``start_s``, a linear ramp to ``peak_qps`` over
    ``ramp_s`` seconds, then the peak until ``duration_s``.

    The defaults are the seed's worked problem: a fleet sized at ρ = 0.7 (14 req/s on ten
    replicas of 2 req/s) sees its load double within 30 s, so ρ passes 1 mid-ramp.

    >>> ramp_traffic(10, 20, start_s=2, ramp_s=4, duration_s=8).tolist()
    [10.0, 10.0, 10.0, 12.5, 15.0, 17.5, 20.0, 20.0]
    """
    if base_qps < 0 or peak_qps < 0:
        raise InputError("traffic rates must be >= 0", field="qps")
    if duration_s < 1 or start_s < 0 or ramp_s < 0:
        raise InputError("duration_s must be >= 1, start_s and ramp_s >= 0", field="duration_s")
    t = np.arange(int(duration_s), dtype=float)
    frac = np.clip((t - start_s) / ramp_s, 0.0, 1.0) if ramp_s > 0 else (t >= start_s).astype(float)
    return base_qps + (peak_qps - base_qps) * frac


def traffic_from_hourly(qps: pd.Series | np.ndarray) -> np.ndarray:
    """λ per second from hourly mean QPS (e.g. a forecast's ``qps`` column), by linear
    interpolation between hour midpoints (flat before the first and after the last).

    >>> traffic_from_hourly(np.array([10.0, 20.0]))[[0, 1800, 5400, 7199]].tolist()
    [10.0, 10.0, 20.0, 20.0]
    """
    hourly = np.asarray(qps, dtype=float)
    if hourly.ndim != 1 or hourly.size == 0:
        raise InputError("hourly QPS must be a non-empty 1-D series", field="qps")
    t = np.arange(hourly.size * 3600, dtype=float)
    mid = np.arange(hourly.size) * 3600 + 1800.0
    return np.interp(t, mid, hourly)


def _validate(lam: np.ndarray, service_rate: float, policy: Policy, cold_start_s: int) -> None:
    if lam.ndim != 1 or lam.size == 0:
        raise InputError("arrival rates must be a non-empty 1-D array (one per second)",
                         field="arrival_rate_per_s")
    if not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise InputError("arrival rates must be finite and >= 0", field="arrival_rate_per_s")
    if not (service_rate > 0 and math.isfinite(service_rate)):
        raise InputError(f"must be > 0, got {service_rate}", field="service_rate")
    if policy.scaler not in SCALERS:
        raise InputError(f"unknown scaler {policy.scaler!r}; expected one of {', '.join(SCALERS)}",
                         field="scaler")
    if cold_start_s < 0 or policy.warm_start_s < 0:
        raise InputError("start-up times must be >= 0", field="cold_start_s")
    if not 0 < policy.target_utilization <= 1:
        raise InputError("must be in (0, 1]", field="target_utilization")
    if policy.sync_period_s < 1 or policy.min_replicas < 0 or policy.max_replicas < policy.min_replicas:
        raise InputError("need sync_period_s >= 1 and 0 <= min_replicas <= max_replicas",
                         field="sync_period_s")


def _p99_wait_s(admitted: np.ndarray, queue_len: np.ndarray, ready: np.ndarray, mu: float) -> np.ndarray:
    """The documented estimate: backlog drain time + stationary M/M/c P99 at ρ ≤ 0.99."""
    cap = ready * mu
    out = np.full(admitted.shape, np.inf)
    has = ready > 0
    out[~has & (admitted == 0) & (queue_len == 0)] = 0.0
    lam = np.minimum(admitted[has], STATIONARY_RHO_CAP * cap[has])
    c = ready[has].astype(float)
    pw = np.asarray(erlang_c(lam / mu, c))
    with np.errstate(divide="ignore"):
        t99 = np.maximum(0.0, np.log(pw / (1 - P99)) / (cap[has] - lam))
    out[has] = queue_len[has] / cap[has] + t99
    return out


def simulate(arrival_rate_per_s, service_rate: float, policy: Policy = DEFAULT_POLICIES[0], *,
             cold_start_s: int = 90, wait_sla_s: float | None = 2.0, initial_replicas: int | None = None,
             forecast_per_s=None, sheddable_share: float = 0.3, usd_per_gpu_hour: float | None = None,
             gpus_per_replica: int = 1) -> SimulationResult:
    """Run one policy over λ per second (see the module docstring for the model).

    ``initial_replicas`` defaults to the steady-state fleet for λ at t = 0 at the policy's
    target utilisation; ``forecast_per_s`` (for ``scaler="predictive"``) defaults to the
    traffic itself, i.e. a perfect forecast. ``wait_sla_s`` is the P99 queue-wait SLA; ``None`` is no
    SLA, as in :func:`finops.capacity.calculator.calculate`: no second is judged (``sla_violation_s``
    None) and the policies size for their target utilisation alone, as they always do (0 is an SLA
    that no request may wait).

    >>> lam = ramp_traffic()
    >>> simulate(lam, 2.0).summary["sla_violation_s"] > 60
    True
    >>> simulate(lam, 2.0, Policy("p", scaler="predictive")).summary["sla_violation_s"]
    0
    """
    lam = np.asarray(arrival_rate_per_s, dtype=float)
    mu = float(service_rate)
    cold_start_s = int(cold_start_s)
    _validate(lam, mu, policy, cold_start_s)
    if not 0 <= sheddable_share <= 1:
        raise InputError(f"must be in [0, 1], got {sheddable_share}", field="sheddable_share")
    if wait_sla_s is not None and not wait_sla_s >= 0:
        raise InputError(f"must be >= 0, got {wait_sla_s}", field="wait_sla_s")
    n = lam.size
    forecast = lam if forecast_per_s is None else np.asarray(forecast_per_s, dtype=float)
    if forecast.ndim != 1 or not np.all(np.isfinite(forecast)) or np.any(forecast < 0):
        raise InputError("must be a 1-D array of rates >= 0", field="forecast_per_s")
    target_rate = mu * policy.target_utilization          # req/s one replica should carry
    if initial_replicas is None:
        initial_replicas = int(required_servers(float(lam[0]), mu,
                                                target_utilization=policy.target_utilization).servers)
    ready = min(max(int(initial_replicas), policy.min_replicas), policy.max_replicas)
    lead = policy.predictive_lead_s if policy.predictive_lead_s is not None \
        else cold_start_s + policy.sync_period_s
    warm = policy.warm_pool_replicas
    max_delay = max(cold_start_s, policy.warm_start_s) + 1
    joins = np.zeros(n + max_delay + 1, dtype=np.int64)       # replicas becoming ready at t
    pool_refills = np.zeros(n + max_delay + 1, dtype=np.int64)
    pending, pool_ready, queue = 0, warm, 0.0
    history: list[tuple[int, int]] = []                       # (t, recommendation)

    t_ready = np.empty(n, dtype=np.int64)
    t_prov = np.empty(n, dtype=np.int64)
    t_pool = np.empty(n, dtype=np.int64)
    t_queue = np.empty(n)
    t_shed = np.empty(n)
    gpu_replica_s = 0

    for t in range(n):
        if joins[t]:
            ready += int(joins[t])
            pending -= int(joins[t])
            joins[t] = 0
        pool_ready += int(pool_refills[t])
        spec = ready + pending
        if policy.scaler != "static" and t % policy.sync_period_s == 0:
            rate = lam[t]
            rec = math.ceil(rate / target_rate - 1e-9) if rate > 0 else 0
            if spec and abs(rate / (target_rate * spec) - 1.0) <= policy.tolerance:
                rec = spec
            floor = 0
            if policy.scaler == "predictive":
                window = forecast[t:t + lead + 1]
                if window.size:
                    floor = math.ceil(float(window.max()) / target_rate - 1e-9)
            rec = min(max(rec, floor, policy.min_replicas), policy.max_replicas)
            history.append((t, rec))
            while history and history[0][0] < t - policy.scale_down_stabilization_s:
                history.pop(0)
            if rec > spec:
                limit = max(spec + policy.scale_up_pods,
                            math.floor(spec * (1 + policy.scale_up_percent / 100.0)))
                new = max(min(rec, limit), min(floor, policy.max_replicas))
            else:
                new = max(r for _, r in history)                # stabilised scale-down
                new = min(max(new, floor, policy.min_replicas), spec)
            delta = new - spec
            if delta > 0:
                from_pool = min(delta, pool_ready)
                if from_pool:
                    pool_ready -= from_pool
                    joins[t + policy.warm_start_s] += from_pool
                    pool_refills[t + cold_start_s] += from_pool
                joins[t + cold_start_s] += delta - from_pool
                pending += delta
            elif delta < 0:
                drop = -delta
                j = t + max_delay                               # cancel the latest starts first
                while drop and pending and j > t:
                    k = min(drop, int(joins[j]))
                    joins[j] -= k
                    pending -= k
                    drop -= k
                    j -= 1
                ready -= drop
            if joins[t]:                                        # a start-up of 0 s joins at once
                ready += int(joins[t])
                pending -= int(joins[t])
                joins[t] = 0
        capacity = ready * mu
        rate = lam[t]
        shed = 0.0
        if policy.shed_lowest_tier and rate > policy.shed_above_utilization * capacity:
            shed = min(rate - policy.shed_above_utilization * capacity, sheddable_share * rate)
        work = queue + (rate - shed)
        queue = max(0.0, work - capacity)
        t_ready[t], t_prov[t], t_pool[t] = ready, ready + pending, pool_ready
        t_queue[t], t_shed[t] = queue, shed
        gpu_replica_s += ready + pending + warm

    admitted = lam - t_shed
    p99 = _p99_wait_s(admitted, t_queue, t_ready, mu)
    violated = p99 > wait_sla_s if wait_sla_s is not None else np.zeros(n, dtype=bool)
    timeline = pd.DataFrame({
        "t_s": np.arange(n), "arrival_rate_per_s": lam, "admitted_rate_per_s": admitted,
        "shed_per_s": t_shed, "ready_replicas": t_ready, "provisioned_replicas": t_prov,
        "warm_pool_ready": t_pool, "queue_len": t_queue, "p99_wait_s": p99, "sla_violated": violated,
    })
    gpu_hours = gpu_replica_s * gpus_per_replica / 3600.0
    peak_p99 = float(p99.max())
    summary = {
        "policy": policy.name,
        "sla_violation_s": int(violated.sum()) if wait_sla_s is not None else None,
        "shed_requests": float(t_shed.sum()),
        "gpu_hours": gpu_hours,
        "cost_usd": None if usd_per_gpu_hour is None else gpu_hours * usd_per_gpu_hour,
        "peak_queue_len": float(t_queue.max()),
        "peak_p99_wait_s": peak_p99 if math.isfinite(peak_p99) else None,
        "peak_replicas": int(t_prov.max()),
    }
    return SimulationResult(policy=policy, timeline=timeline, summary=summary)


def compare_policies(arrival_rate_per_s=None, service_rate: float = 2.0, policies=DEFAULT_POLICIES,
                     **kwargs) -> Comparison:
    """Run each policy on the same traffic (default: :func:`ramp_traffic`, the seed's ramp).

    ``kwargs`` go to :func:`simulate` (cold_start_s, wait_sla_s, forecast_per_s, ...).

    >>> c = compare_policies()
    >>> c.summary.set_index("policy").loc[["reactive HPA", "predictive + warm pool"], "sla_violation_s"].tolist()
    [157, 0]
    """
    lam = ramp_traffic() if arrival_rate_per_s is None else arrival_rate_per_s
    runs = [simulate(lam, service_rate, p, **kwargs) for p in policies]
    if len({r.policy.name for r in runs}) != len(runs):
        raise InputError("policy names must be unique", field="name")
    timeline = pd.concat([r.timeline.assign(policy=r.policy.name) for r in runs], ignore_index=True)
    summary = pd.DataFrame([r.summary for r in runs])
    return Comparison(timeline=timeline, summary=summary)


def policy_from_dict(spec: dict) -> Policy:
    """A :class:`Policy` from a plain dict (e.g. parsed JSON); unknown keys are an InputError.

    >>> policy_from_dict({"name": "pool", "warm_pool_replicas": 4}).warm_pool_replicas
    4
    """
    known = set(asdict(Policy("x")))
    unknown = set(spec) - known
    if unknown:
        raise InputError(f"unknown policy fields: {', '.join(sorted(unknown))}", field="policy")
    if "name" not in spec:
        raise InputError("a policy needs a name", field="name")
    return Policy(**spec)
