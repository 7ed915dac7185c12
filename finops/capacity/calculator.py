"""The capacity calculator: how many replicas a load needs, how long requests wait, what the fleet costs.

A fleet of ``replicas × slots_per_replica`` servers (a slot is one concurrent request on a
replica) is a G/G/c queue by Allen–Cunneen, M/M/c when both CVs are 1
(:mod:`finops.capacity.queueing` holds the maths):

    μ = 1 / mean service time;  c = replicas × slots;  ρ = λ / (c μ)
    Wq ≈ Wq(M/M/c) · (ca² + cs²) / 2;  P99 wait from P(Wq > t) = C · e^{−(cμ−λ)t / k}

:func:`calculate` gives the queue figures at the chosen fleet and the fewest replicas meeting
the target ρ and the P99 wait SLA, ``⌈servers / slots⌉``, then ``⌈replicas · (1 + redundancy)⌉``;
:func:`p99_wait_by_replicas` and :func:`wait_by_utilization` are the page's two curves;
:func:`fleet_cost` is replicas × GPUs × $ per GPU-hour, and per 1M tokens. :func:`check_positive`
and :func:`check_whole` validate the inputs of every capacity function.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from finops.capacity.queueing import MMCResult, ggc, required_servers
from finops.errors import InputError
from finops.fmt import number
from finops.spend.pricing import PRICE_LIMITS

__all__ = [
    "BINDING_LABELS", "SWEET_SPOT", "WAIT_PERCENTILE", "CapacityResult", "FleetCost", "ReplicaNeed", "calculate",
    "check_positive", "check_whole", "fleet_cost", "format_seconds", "p99_wait_by_replicas", "required_replicas",
    "wait_by_utilization",
]

SWEET_SPOT = (0.6, 0.75)          #: the utilisation band the seed recommends (section 2.4)
WAIT_PERCENTILE = 0.99

#: what held the fleet size back, in words (``required_servers``' binding_constraint)
BINDING_LABELS = {
    "stability": "stability (ρ < 1)",
    "utilization": "the target utilisation",
    "wait_sla": "the P99 wait SLA",
    "p_wait": "the P(wait) limit",
    "no_traffic": "no traffic",
}



# ---------------------------------------------------------------- formatting

def format_seconds(seconds: float | None) -> str:
    """A duration for people: ms under a second, s under two minutes, then min or h.

    ``inf`` (a wait with no steady state) reads "unbounded"; ``None`` reads "n/a"; under a
    microsecond reads "< 1 µs" (short enough for a metric box: "< 0.001 ms" was cut to "< 0.001…").

    >>> [format_seconds(x) for x in (0.0, 1e-40, 0.0123, 1.5, 300, float("inf"), None)]
    ['0 ms', '< 1 µs', '12.3 ms', '1.50 s', '5.0 min', 'unbounded', 'n/a']
    """
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "n/a"
    if math.isinf(seconds):
        return "unbounded"
    if seconds == 0:
        return "0 ms"
    if seconds < 1e-6:
        return "< 1 µs"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# ---------------------------------------------------------------- calculator

#: the most each what-if input takes (the Capacity page's fields stop there too): past them a figure is no
#: plan but digits (1e300 req/s asked for 7e298 instances, $1e300 per GPU-hour a cost of 300 digits)
MAX_ARRIVAL_RATE = 1_000_000.0      # req/s
MAX_TARGET_S = 3_600.0              # a latency target or wait SLA, s
MAX_INSTANCES = 100_000             # replicas, or instances behind a tested endpoint
MAX_GPU_HOUR_USD = float(PRICE_LIMITS["gpu_hour_usd"][1])      # the price book's bound ($1,000)
MAX_GPUS_PER_REPLICA = int(PRICE_LIMITS["gpus_per_replica"][1])  # the price book's bound (64)
MAX_SLOTS_PER_REPLICA = int(PRICE_LIMITS["slots_per_replica"][1])  # the price book's bound (10,000)
MAX_TOKENS_PER_REQUEST = 10_000_000.0   # the longest context windows offered


def check_positive(name: str, value: float, *, allow_zero: bool = False, most: float | None = None) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"must be a number, got {value!r}", field=name) from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise InputError(f"must be {'>= 0' if allow_zero else '> 0'} and finite, got {value!r}", field=name)
    if most is not None and v > most:
        # separators, never an exponent for the bound ("1,000,000", not "1e+06"); one for an absurd value only
        raise InputError(f"must be at most {most:,.12g}, got {v:,.12g}" if v < 1e12 else
                         f"must be at most {most:,.12g}, got {v:.3g}", field=name)
    return v


def check_whole(name: str, value, minimum: int, most: int | None = None) -> int:
    if value is None or int(value) != value or value < minimum:
        raise InputError(f"must be a whole number >= {minimum}, got {value!r}", field=name)
    if most is not None and value > most:
        raise InputError(f"must be at most {most:,}, got {int(value):,}", field=name)
    return int(value)


@dataclass(frozen=True)
class CapacityResult:
    """The calculator's answer for one scenario.

    ``queue`` holds the G/G/c figures at ``servers`` (waits in seconds, ``inf`` where there is no
    steady state, with ``queue.state`` saying why); the sizing fields answer "how many replicas".
    """

    servers: int                            #: c = replicas × slots per replica
    capacity_per_s: float                   #: c · μ, the most the fleet completes per second
    queue: MMCResult                        #: Allen–Cunneen figures at c (M/M/c when both CVs are 1)
    required_replicas: int                  #: fewest replicas meeting target ρ and the wait SLA
    required_replicas_with_redundancy: int  #: ⌈required_replicas · (1 + redundancy)⌉
    binding_constraint: str                 #: key of :data:`BINDING_LABELS`
    wait_sla_met: bool | None               #: P99 wait ≤ SLA at the chosen c (None without an SLA)

    @property
    def state(self) -> str:
        return self.queue.state

    @property
    def message(self) -> str:
        return self.queue.message

    @property
    def stable(self) -> bool:
        return bool(self.queue.stable)


@dataclass(frozen=True)
class ReplicaNeed:
    """The fewest replicas meeting the targets, per arrival rate (arrays, or ints for a scalar rate)."""
    replicas: np.ndarray                    #: ⌈servers / slots⌉ meeting target ρ and the wait SLA
    replicas_with_redundancy: np.ndarray    #: ⌈replicas · (1 + redundancy)⌉
    binding_constraint: np.ndarray          #: key of :data:`BINDING_LABELS`


def required_replicas(arrival_rate_per_s, mean_service_s: float, slots_per_replica: int = 1, *,
                      wait_sla_s: float | None = 2.0, target_utilization: float = 0.7, redundancy: float = 0.25,
                      cv_service: float = 1.0, cv_arrival: float = 1.0,
                      wait_percentile: float = WAIT_PERCENTILE) -> ReplicaNeed:
    """The calculator's sizing rule, for one arrival rate or an array of them (an hourly plan): the fewest
    servers ``c`` with ρ ≤ target and the P99 wait within the SLA (Allen–Cunneen, slots of μ = 1 / mean
    service time each), ``⌈c / slots⌉`` replicas, then ``⌈replicas · (1 + redundancy)⌉``.

    >>> need = required_replicas([0.0, 50.0], 0.5, wait_sla_s=None)
    >>> need.replicas.tolist(), need.replicas_with_redundancy.tolist()
    ([0, 36], [0, 45])
    """
    mean_s = check_positive("mean_service_s", mean_service_s)
    slots = check_whole("slots_per_replica", slots_per_replica, 1, MAX_SLOTS_PER_REPLICA)
    if not 0 < target_utilization <= 1:
        raise InputError(f"must be in (0, 1], got {target_utilization}", field="target_utilization")
    if wait_sla_s is not None:
        check_positive("wait_sla_s", wait_sla_s, allow_zero=True)
    sizing = required_servers(arrival_rate_per_s, 1.0 / mean_s, target_utilization=target_utilization,
                              wait_sla_s=wait_sla_s, wait_percentile=wait_percentile if wait_sla_s is not None else None,
                              cv_arrival=cv_arrival, cv_service=cv_service)
    need = np.ceil(np.asarray(sizing.servers, dtype=float) / slots).astype(int)
    with_red = np.ceil(need * (1.0 + redundancy) - 1e-9).astype(int)
    return ReplicaNeed(need, with_red, np.asarray(sizing.binding_constraint))


def calculate(arrival_rate_per_s: float, mean_service_s: float, replicas: int, slots_per_replica: int = 1, *,
              wait_sla_s: float | None = 2.0, target_utilization: float = 0.7, redundancy: float = 0.25,
              cv_service: float = 1.0, cv_arrival: float = 1.0,
              wait_percentile: float = WAIT_PERCENTILE) -> CapacityResult:
    """Queue figures of ``replicas × slots_per_replica`` servers and the fleet the targets need.

    >>> r = calculate(50, 0.5, 36)                     # the issue's sizing example, one slot each
    >>> r.state, round(r.queue.utilization, 3), r.required_replicas, r.required_replicas_with_redundancy
    ('ok', 0.694, 36, 45)
    >>> calculate(50, 0.5, 20).message
    'unstable: the queue grows without bound (utilisation >= 1)'
    >>> calculate(10, 2.0, 2, 8, cv_service=0.5).required_replicas     # 16 slots per 2 replicas
    4
    """
    lam = check_positive("arrival_rate_per_s", arrival_rate_per_s, allow_zero=True)
    mean_s = check_positive("mean_service_s", mean_service_s)
    reps = check_whole("replicas", replicas, 0)
    slots = check_whole("slots_per_replica", slots_per_replica, 1, MAX_SLOTS_PER_REPLICA)
    sizing = required_replicas(lam, mean_s, slots, wait_sla_s=wait_sla_s, target_utilization=target_utilization,
                               redundancy=redundancy, cv_service=cv_service, cv_arrival=cv_arrival,
                               wait_percentile=wait_percentile)
    mu = 1.0 / mean_s
    servers = reps * slots
    queue = ggc(lam, mu, servers, cv_arrival=cv_arrival, cv_service=cv_service)
    need, with_red = int(sizing.replicas), int(sizing.replicas_with_redundancy)
    met = None
    if wait_sla_s is not None:
        p = _wait_quantile(queue, wait_percentile)
        met = bool(queue.stable) and p <= wait_sla_s
    return CapacityResult(servers=servers, capacity_per_s=servers * mu, queue=queue, required_replicas=need,
                          required_replicas_with_redundancy=with_red,
                          binding_constraint=str(sizing.binding_constraint.item()), wait_sla_met=met)


def _wait_quantile(queue: MMCResult, p: float) -> float:
    """The reported wait percentile nearest ``p`` (mmc reports P50, P90, P95, P99)."""
    return float({0.5: queue.wait_p50_s, 0.9: queue.wait_p90_s, 0.95: queue.wait_p95_s}.get(p, queue.wait_p99_s))


def _replica_axis(*anchors: int, points: int = 120) -> np.ndarray:
    """Whole replica counts from 1 to 1.5 × the largest anchor (+2), at most ``points`` of them."""
    hi = max(4, math.ceil(1.5 * max(anchors)) + 2)
    step = max(1, math.ceil(hi / points))
    return np.unique(np.concatenate([np.arange(1, hi + 1, step), [a for a in anchors if a >= 1]])).astype(int)


def p99_wait_by_replicas(arrival_rate_per_s: float, mean_service_s: float, slots_per_replica: int,
                         anchors: tuple[int, ...] = (1,), *, cv_service: float = 1.0,
                         cv_arrival: float = 1.0) -> pd.DataFrame:
    """The P99 queue wait against the replica count, for the first curve of the page.

    Columns: ``replicas``, ``servers`` (× slots), ``utilization``, ``wait_p99_s`` and ``wq_s``
    (``inf`` where the fleet is unstable), ``stable``. Replicas run from 1 to 1.5 × the largest
    of ``anchors`` (e.g. the chosen and the required counts).

    >>> p99_wait_by_replicas(10, 2, 8, (3,))[["replicas", "stable"]].head(3).values.tolist()   # A = 20 erlangs
    [[1, False], [2, False], [3, True]]
    """
    reps = _replica_axis(*anchors)
    q = ggc(arrival_rate_per_s, 1.0 / mean_service_s, reps * slots_per_replica, cv_arrival=cv_arrival,
            cv_service=cv_service)
    return pd.DataFrame({"replicas": reps, "servers": reps * slots_per_replica,
                         "utilization": np.asarray(q.utilization, dtype=float),
                         "wait_p99_s": np.asarray(q.wait_p99_s, dtype=float),
                         "wq_s": np.asarray(q.wq_s, dtype=float), "stable": np.asarray(q.stable, dtype=bool)})


def wait_by_utilization(mean_service_s: float, servers: int, *, cv_service: float = 1.0,
                        cv_arrival: float = 1.0) -> pd.DataFrame:
    """Mean queue wait against ρ at a fixed fleet of ``servers``: the blow-up as ρ → 1.

    ρ runs 0.01 … 0.99 (and 0.995); λ = ρ · c · μ. Columns ``utilization``,
    ``arrival_rate_per_s``, ``wq_s``, ``wait_p99_s``, ``in_sweet_spot`` (0.6 ≤ ρ ≤ 0.75).

    >>> w = wait_by_utilization(1.0, 1)                 # M/M/1: Wq = ρ / (μ (1 − ρ))
    >>> round(float(w.loc[w["utilization"].round(2) == 0.5, "wq_s"].iloc[0]), 6)
    1.0
    """
    servers = check_whole("servers", servers, 1)
    rho = np.append(np.round(np.arange(1, 100) / 100, 2), 0.995)
    lam = rho * servers / mean_service_s
    q = ggc(lam, 1.0 / mean_service_s, servers, cv_arrival=cv_arrival, cv_service=cv_service)
    return pd.DataFrame({"utilization": rho, "arrival_rate_per_s": lam,
                         "wq_s": np.asarray(q.wq_s, dtype=float), "wait_p99_s": np.asarray(q.wait_p99_s, dtype=float),
                         "in_sweet_spot": (rho >= SWEET_SPOT[0]) & (rho <= SWEET_SPOT[1])})


# ---------------------------------------------------------------- cost

@dataclass(frozen=True)
class FleetCost:
    """What a self-hosted fleet costs: every replica is paid every hour, busy or not."""

    replicas: int
    gpus: int                               #: replicas × GPUs per replica
    cost_per_hour_usd: float | None         #: None without a $ per GPU-hour
    tokens_per_hour: float | None           #: λ · 3600 · tokens per request (None when unknown)
    cost_per_1m_tokens: float | None        #: None without traffic or tokens
    note: str                               #: why a figure is missing, else ""


def fleet_cost(replicas: int, gpus_per_replica: int, gpu_hour_usd: float | None, arrival_rate_per_s: float,
               tokens_per_request: float | None, capacity_per_s: float | None = None) -> FleetCost:
    """Cost per hour = replicas × GPUs per replica × $ per GPU-hour; per 1M tokens = that / tokens per hour × 1e6.

    Tokens per hour = min(λ, ``capacity_per_s``) × 3600 × tokens per request: a fleet too small
    for λ serves at most its capacity (c μ), and is priced on what it serves.

    >>> c = fleet_cost(4, 1, 0.80, 0.5, 1000)           # 4 L4s, 0.5 req/s of 1,000 tokens
    >>> c.cost_per_hour_usd, c.tokens_per_hour, round(c.cost_per_1m_tokens, 4)
    (3.2, 1800000.0, 1.7778)
    >>> fleet_cost(4, 1, 0.80, 0.0, 1000).note
    'no traffic: the fleet costs its hourly price whatever it serves, so there is no $ per 1M tokens'
    >>> fleet_cost(4, 1, 0.80, 9.0, 1000, capacity_per_s=0.5).tokens_per_hour     # capped at what it can serve
    1800000.0
    """
    reps = check_whole("replicas", replicas, 0)
    gpus = reps * check_whole("gpus_per_replica", gpus_per_replica, 1)
    per_hour = None if gpu_hour_usd is None else gpus * check_positive("gpu_hour_usd", gpu_hour_usd, allow_zero=True,
                                                                         most=MAX_GPU_HOUR_USD)
    lam = check_positive("arrival_rate_per_s", arrival_rate_per_s, allow_zero=True)
    served = lam if capacity_per_s is None else min(lam, check_positive("capacity_per_s", capacity_per_s,
                                                                           allow_zero=True))
    tokens = None if tokens_per_request is None else served * 3600.0 * check_positive(
        "tokens_per_request", tokens_per_request, allow_zero=True, most=MAX_TOKENS_PER_REQUEST)
    note = ""
    per_1m = None
    if per_hour is None:
        note = "no $ per GPU-hour: set one (or add the model to the price book)"
    elif reps == 0:
        note = "no replicas: nothing is served, so there is no $ per 1M tokens"
    elif tokens is None:
        note = "no tokens per request: give one to see $ per 1M tokens"
    elif tokens == 0:
        note = "no traffic: the fleet costs its hourly price whatever it serves, so there is no $ per 1M tokens"
    else:
        per_1m = per_hour / tokens * 1e6
        if served < lam:
            note = (f"{reps:,} replicas serve at most {number(served)} req/s of the {number(lam)} offered: $ per 1M tokens "
                    "is on what they can serve")
    return FleetCost(replicas=reps, gpus=gpus, cost_per_hour_usd=per_hour, tokens_per_hour=tokens,
                     cost_per_1m_tokens=per_1m, note=note)
