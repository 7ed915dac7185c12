"""Capacity planning with your own numbers: how many replicas, what they cost, whether they keep up.

The Capacity page and the CLI share these functions; the maths lives in :mod:`finops.capacity.queueing`,
:mod:`finops.capacity.forecast` and :mod:`finops.capacity.autoscale`, and this module ties it to the store, the
price book and load-test files.

* **Calculator** (:func:`calculate`, :func:`p99_wait_by_replicas`, :func:`wait_by_utilization`):
  a fleet of ``replicas × slots_per_replica`` servers (a slot is one concurrent request on a
  replica) as a G/G/c queue by Allen–Cunneen, M/M/c when both CVs are 1:

      μ = 1 / mean service time;  c = replicas × slots;  ρ = λ / (c μ)
      Wq ≈ Wq(M/M/c) · (ca² + cs²) / 2;  P99 wait from P(Wq > t) = C · e^{−(cμ−λ)t / k}

  and the fewest replicas meeting the target ρ and the P99 wait SLA, ``⌈servers / slots⌉``,
  then ``⌈replicas · (1 + redundancy)⌉``.
* **Fill from my logs** (:func:`observed_load`): per model, the busiest hour's λ, the service
  time and its CV, the replicas and slots, and the queue_ms observed in that hour beside the
  prediction at that load, so the fit is shown, good or bad.
* **Load test → instances** (:func:`read_loadtest`, :func:`fit_loadtest`): the method of the
  deployment text (002, sections 3 and 5): measure P99 latency against load on one instance,
  take the highest throughput whose P99 stays under the target, then
  ``instances = ⌈target QPS / per-instance QPS⌉``, plus 20–30 % redundancy.
* **Forecast → replica plan** (:func:`hourly_qps`, :func:`forecast_plan`).
* **Autoscaling** (:func:`simulate_policies`): the seed's ramp or the forecast, policy by policy.
* **Cost** (:func:`fleet_cost`): replicas × GPUs × $ per GPU-hour, and per 1M tokens.
"""
from __future__ import annotations

import io
import math
import tempfile
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pandas as pd

from finops import store
from finops.capacity import autoscale
from finops.capacity.queueing import MMCResult, ggc, required_servers
from finops.errors import InputError
from finops.filters import Filters
from finops.ingest import benchruns

if TYPE_CHECKING:                    # statsmodels takes seconds to import: only when forecasting
    from finops.capacity.forecast import ForecastResult

__all__ = [
    "BINDING_LABELS", "CapacityResult", "calculate", "p99_wait_by_replicas", "wait_by_utilization",
    "format_seconds", "observed_load", "self_hosted_models", "FleetCost", "fleet_cost",
    "LOADTEST_EXAMPLE", "read_loadtest", "read_loadtest_bytes", "benchmark_points", "LoadTestFit", "fit_loadtest",
    "hourly_qps", "ForecastPlan", "forecast_plan", "policies_for", "AutoscaleRun", "simulate_policies",
]

SWEET_SPOT = (0.6, 0.75)          #: the utilisation band the seed recommends (section 2.4)
WAIT_PERCENTILE = 0.99
LOADTEST_EXAMPLE = store.ROOT / "data" / "loadtest_example.csv"

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
    microsecond reads "< 0.001 ms".

    >>> [format_seconds(x) for x in (0.0, 1e-40, 0.0123, 1.5, 300, float("inf"), None)]
    ['0 ms', '< 0.001 ms', '12.3 ms', '1.50 s', '5.0 min', 'unbounded', 'n/a']
    """
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "n/a"
    if math.isinf(seconds):
        return "unbounded"
    if seconds == 0:
        return "0 ms"
    if seconds < 1e-6:
        return "< 0.001 ms"
    if seconds < 1:
        ms = seconds * 1000
        return f"{ms:.3g} ms" if ms < 100 else f"{ms:.0f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


# ---------------------------------------------------------------- calculator

def _check_positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"must be a number, got {value!r}", field=name) from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        raise InputError(f"must be {'>= 0' if allow_zero else '> 0'} and finite, got {value!r}", field=name)
    return v


def _check_whole(name: str, value, minimum: int) -> int:
    if value is None or int(value) != value or value < minimum:
        raise InputError(f"must be a whole number >= {minimum}, got {value!r}", field=name)
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
    lam = _check_positive("arrival_rate_per_s", arrival_rate_per_s, allow_zero=True)
    mean_s = _check_positive("mean_service_s", mean_service_s)
    reps = _check_whole("replicas", replicas, 0)
    slots = _check_whole("slots_per_replica", slots_per_replica, 1)
    if not 0 < target_utilization <= 1:
        raise InputError(f"must be in (0, 1], got {target_utilization}", field="target_utilization")
    if wait_sla_s is not None:
        _check_positive("wait_sla_s", wait_sla_s, allow_zero=True)
    mu = 1.0 / mean_s
    servers = reps * slots
    queue = ggc(lam, mu, servers, cv_arrival=cv_arrival, cv_service=cv_service)
    sizing = required_servers(lam, mu, target_utilization=target_utilization, wait_sla_s=wait_sla_s,
                              wait_percentile=wait_percentile if wait_sla_s is not None else None,
                              cv_arrival=cv_arrival, cv_service=cv_service)
    need = math.ceil(sizing.servers / slots)
    with_red = math.ceil(need * (1.0 + redundancy) - 1e-9)
    met = None
    if wait_sla_s is not None:
        p = _wait_quantile(queue, wait_percentile)
        met = bool(queue.stable) and p <= wait_sla_s
    return CapacityResult(servers=servers, capacity_per_s=servers * mu, queue=queue, required_replicas=need,
                          required_replicas_with_redundancy=with_red,
                          binding_constraint=str(sizing.binding_constraint), wait_sla_met=met)


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
    servers = _check_whole("servers", servers, 1)
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
    reps = _check_whole("replicas", replicas, 0)
    gpus = reps * _check_whole("gpus_per_replica", gpus_per_replica, 1)
    per_hour = None if gpu_hour_usd is None else gpus * _check_positive("gpu_hour_usd", gpu_hour_usd, allow_zero=True)
    lam = _check_positive("arrival_rate_per_s", arrival_rate_per_s, allow_zero=True)
    served = lam if capacity_per_s is None else min(lam, _check_positive("capacity_per_s", capacity_per_s,
                                                                           allow_zero=True))
    tokens = None if tokens_per_request is None else served * 3600.0 * _check_positive(
        "tokens_per_request", tokens_per_request, allow_zero=True)
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
            note = (f"{reps:,} replicas serve at most {served:.4g} req/s of the {lam:.4g} offered: $ per 1M tokens "
                    "is on what they can serve")
    return FleetCost(replicas=reps, gpus=gpus, cost_per_hour_usd=per_hour, tokens_per_hour=tokens,
                     cost_per_1m_tokens=per_1m, note=note)


def self_hosted_models(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The price book's self-hosted rows: model, gpu_hour_usd, gpus_per_replica, replicas, slots_per_replica."""
    return con.execute("SELECT model, gpu_hour_usd, gpus_per_replica, replicas, slots_per_replica, source "
                       "FROM prices WHERE kind = 'self_hosted' ORDER BY model").df()


# ---------------------------------------------------------------- fill from my logs

# a request's time on a slot; NULL (not 0) where the row has no timing at all
SERVICE_MS_SQL = f"NULLIF({store.BUSY_MS_SQL}, 0)"
SERVED_SQL = "NOT coalesce(cache_hit, false)"
COMPLETED_SQL = "coalesce(status, 'ok') = 'ok'"

OBSERVED_COLUMNS = (
    "model", "peak_hour", "requests_peak_hour", "arrival_rate_per_s", "mean_service_s", "cv_service",
    "cv_arrival", "replicas", "replicas_source", "slots_per_replica", "slots_source", "fleet", "servers",
    "utilization", "predicted_wq_ms", "observed_queue_mean_ms", "predicted_wait_p99_ms",
    "observed_queue_p99_ms", "queue_samples", "implied_servers", "state", "note",
    "tokens_per_request", "gpus_per_replica", "gpu_hour_usd",
)


def _fleet_filters(f: Filters | None) -> Filters:
    """The sidebar's date range and models; tenants and tiers share a fleet, so they do not apply."""
    f = f or Filters()
    return replace(f, tenants=(), sla_tiers=())


def observed_load(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> pd.DataFrame:
    """Per self-hosted model (or any model whose logs name replicas), its busiest hour, measured.

    * ``arrival_rate_per_s``: requests the model served (cache hits excluded) in its busiest hour
      of the rollups, / 3600;
    * ``mean_service_s``, ``cv_service``: mean and std/mean of the completed requests' time on a
      slot in that hour (``service_ms``, else prefill + decode, else total − queue − route);
    * ``cv_arrival``: std/mean of the gaps between those requests' arrivals (1 for Poisson);
    * ``replicas``: distinct ``replica`` values in that hour, else the price book's;
      ``slots_per_replica`` from the price book, else 1 (``*_source`` says which); ``fleet`` reads
      "replicas × slots" and ``servers`` is their product c;
    * ``observed_queue_mean_ms``, ``observed_queue_p99_ms``: queue_ms in that hour (exact P99);
    * ``predicted_wq_ms``, ``predicted_wait_p99_ms``: Allen–Cunneen at that λ, μ, CVs and
      c = replicas × slots (None where the model is unstable or lacks timing: ``state``, ``note``);
    * ``implied_servers``: the c whose predicted mean wait is nearest the observed mean queue_ms,
      a check of the slot count (None when no request queued);
    * ``tokens_per_request`` (input + output, served requests, whole period), and the price book's
      ``gpus_per_replica`` and ``gpu_hour_usd``.

    The sidebar's date range and models apply; tenants and tiers do not (a fleet is shared).
    """
    where, params = _fleet_filters(f).where(ts_col="hour")
    peaks = con.execute(f"""
WITH h AS (SELECT model, hour, sum(requests - cache_hits) AS served FROM rollup_hourly
           WHERE {where} GROUP BY ALL HAVING sum(requests - cache_hits) > 0),
pk AS (SELECT model, hour AS peak_hour, served FROM h
       QUALIFY row_number() OVER (PARTITION BY model ORDER BY served DESC, hour) = 1),
tok AS (SELECT model, sum(input_tokens + output_tokens - cache_uncached_input_tokens - cache_cached_input_tokens
                          - cache_output_tokens) / nullif(sum(requests - cache_hits), 0) AS tokens_per_request
        FROM rollup_hourly WHERE {where} GROUP BY model)
SELECT pk.model, pk.peak_hour, pk.served, tok.tokens_per_request, p.kind, p.replicas, p.slots_per_replica,
       p.gpus_per_replica, p.gpu_hour_usd
FROM pk LEFT JOIN tok USING (model) LEFT JOIN prices p USING (model) ORDER BY pk.model""",
                        params + params).df()
    if peaks.empty:
        return pd.DataFrame(columns=list(OBSERVED_COLUMNS))
    cond = " OR ".join("(model = ? AND ts >= ? AND ts < ? + INTERVAL 1 HOUR)" for _ in range(len(peaks)))
    raw_params = [v for m, h in zip(peaks["model"], peaks["peak_hour"], strict=True)
                  for v in (m, h.to_pydatetime(), h.to_pydatetime())]
    raw = con.execute(f"""
WITH r AS (
  SELECT model, replica, queue_ms, {COMPLETED_SQL} AS completed, {SERVICE_MS_SQL} AS svc_ms,
         epoch_ms(ts) - lag(epoch_ms(ts)) OVER (PARTITION BY model ORDER BY ts) AS gap_ms
  FROM requests WHERE ({cond}) AND {SERVED_SQL})
SELECT model,
       avg(svc_ms) FILTER (WHERE completed) / 1000 AS mean_service_s,
       stddev_pop(svc_ms) FILTER (WHERE completed) / nullif(avg(svc_ms) FILTER (WHERE completed), 0) AS cv_service,
       count(svc_ms) FILTER (WHERE completed) AS service_samples,
       stddev_pop(gap_ms) / nullif(avg(gap_ms), 0) AS cv_arrival,
       count(DISTINCT replica) AS replicas_seen,
       avg(queue_ms) AS observed_queue_mean_ms, quantile_cont(queue_ms, 0.99) AS observed_queue_p99_ms,
       count(queue_ms) AS queue_samples
FROM r GROUP BY model""", raw_params).df()
    frame = peaks.merge(raw, on="model", how="left")
    keep = (frame["kind"] == "self_hosted") | (frame["replicas_seen"].fillna(0) > 0)
    rows = [_observed_row(r) for r in frame[keep].itertuples(index=False)]
    return pd.DataFrame(rows, columns=list(OBSERVED_COLUMNS))


def _num(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _observed_row(r) -> dict:
    lam = float(r.served) / 3600.0
    seen = int(r.replicas_seen) if not pd.isna(r.replicas_seen) else 0
    if seen:
        replicas, rep_src = seen, "logs (distinct replica in the peak hour)"
    elif not pd.isna(r.replicas):
        replicas, rep_src = int(r.replicas), "price book"
    else:
        replicas, rep_src = None, "unknown"
    if not pd.isna(r.slots_per_replica):
        slots, slot_src = int(r.slots_per_replica), "price book"
    else:
        slots, slot_src = 1, "assumed 1 (not in the price book)"
    mean_s, cv_s, cv_a = _num(r.mean_service_s), _num(r.cv_service), _num(r.cv_arrival)
    cv_s = 1.0 if cv_s is None else cv_s
    cv_a = 1.0 if cv_a is None else cv_a
    out = {
        "model": r.model, "peak_hour": r.peak_hour, "requests_peak_hour": int(r.served), "arrival_rate_per_s": lam,
        "mean_service_s": mean_s, "cv_service": cv_s, "cv_arrival": cv_a, "replicas": replicas,
        "replicas_source": rep_src, "slots_per_replica": slots, "slots_source": slot_src,
        "fleet": None if replicas is None else f"{replicas} × {slots}",
        "servers": None if replicas is None else replicas * slots, "utilization": None,
        "predicted_wq_ms": None, "observed_queue_mean_ms": _num(r.observed_queue_mean_ms),
        "predicted_wait_p99_ms": None, "observed_queue_p99_ms": _num(r.observed_queue_p99_ms),
        "queue_samples": int(r.queue_samples) if not pd.isna(r.queue_samples) else 0,
        "implied_servers": None, "state": "ok", "note": "",
        "tokens_per_request": _num(r.tokens_per_request), "gpus_per_replica": _num(r.gpus_per_replica),
        "gpu_hour_usd": _num(r.gpu_hour_usd),
    }
    if mean_s is None:
        out.update(state="no_timing", note="the logs carry no service time for this model: no prediction")
        return out
    if replicas is None:
        out.update(state="no_replicas", note="no replica column in the logs and no replicas in the price book")
        return out
    q = ggc(lam, 1.0 / mean_s, replicas * slots, cv_arrival=cv_a, cv_service=cv_s)
    out["utilization"] = float(q.utilization)
    out["state"] = str(q.state)
    if q.stable:
        out["predicted_wq_ms"] = float(q.wq_s) * 1000
        out["predicted_wait_p99_ms"] = float(q.wait_p99_s) * 1000
    else:
        out["note"] = q.message
    observed = out["observed_queue_mean_ms"]
    if observed is None:
        out["note"] = (out["note"] + "; " if out["note"] else "") + "the logs carry no queue_ms: nothing to compare"
        return out
    implied = _implied_servers(lam, mean_s, cv_a, cv_s, observed / 1000, replicas * slots)
    out["implied_servers"] = implied
    if implied is not None and q.stable:
        pred = out["predicted_wq_ms"]
        if observed > 2 * pred + 1 and implied < replicas * slots:
            out["note"] = (f"requests waited longer than {replicas * slots} slots predict: the waits match about "
                           f"{implied} slots ({implied / replicas:.1f} per replica). Check slots_per_replica, and "
                           "whether every replica serves one shared queue (M/M/c assumes so; replicas at another "
                           "site with their own queue wait longer)")
        elif pred > 2 * observed + 1 and implied > replicas * slots:
            out["note"] = (f"requests waited less than predicted: the waits match about {implied} slots "
                           f"({implied / replicas:.1f} per replica)")
    return out


def _implied_servers(lam: float, mean_s: float, cv_a: float, cv_s: float, observed_wq_s: float,
                     servers: int) -> int | None:
    """The c ≥ ⌊A⌋ + 1 whose Allen–Cunneen mean wait is nearest ``observed_wq_s`` (None if nothing queued)."""
    if observed_wq_s <= 0 or lam <= 0:
        return None
    a = lam * mean_s
    cs = np.arange(math.floor(a) + 1, max(servers, math.floor(a) + 1) * 4 + 2)
    wq = np.asarray(ggc(lam, 1.0 / mean_s, cs, cv_arrival=cv_a, cv_service=cv_s).wq_s, dtype=float)
    return int(cs[np.argmin(np.abs(np.log(np.maximum(wq, 1e-12)) - math.log(observed_wq_s)))])


# ---------------------------------------------------------------- load test -> instances

POINT_COLUMNS = ("source", "model", "concurrency", "qps", "p50_s", "p99_s", "mean_s", "qps_basis")
# CSV column -> accepted names (case-insensitive); latencies take an _s or _ms suffix
CSV_ALIASES: dict[str, tuple[str, ...]] = {
    "concurrency": ("concurrency", "max_concurrency", "num_concurrent_requests", "clients", "batch"),
    "qps": ("qps", "throughput_qps", "request_throughput", "requests_per_s", "req_per_s", "rps"),
    "p50": ("p50", "p50_latency", "median", "median_latency", "latency_p50"),
    "p99": ("p99", "p99_latency", "latency_p99"),
    "mean": ("mean", "mean_latency", "avg_latency", "latency_mean"),
}
UNIT_SUFFIXES = (("_s", 1.0), ("_ms", 0.001), ("_sec", 1.0), ("_seconds", 1.0))


def _csv_column(columns: dict[str, str], names: tuple[str, ...], latency: bool) -> tuple[str, float] | None:
    """(actual column, factor to seconds) of the first alias present."""
    for n in names:
        if latency:
            for suffix, factor in UNIT_SUFFIXES:
                if n + suffix in columns:
                    return columns[n + suffix], factor
        elif n in columns:
            return columns[n], 1.0
    return None


def _read_loadtest_csv(text: str, name: str) -> pd.DataFrame:
    try:
        raw = pd.read_csv(io.StringIO(text), comment="#", skipinitialspace=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"not a readable CSV: {exc}", file=name) from None
    cols = {str(c).strip().lower(): c for c in raw.columns}
    found = {k: _csv_column(cols, v, latency=k in ("p50", "p99", "mean")) for k, v in CSV_ALIASES.items()}
    if found["p99"] is None:
        raise InputError("a load-test CSV needs a P99 latency column (p99_s or p99_ms), with qps and/or "
                         "concurrency beside it", file=name)
    if found["qps"] is None and found["concurrency"] is None:
        raise InputError("a load-test CSV needs a qps column or a concurrency column", file=name)

    def col(key):
        if found[key] is None:
            return pd.Series(np.nan, index=raw.index)
        c, factor = found[key]
        values = pd.to_numeric(raw[c], errors="coerce")
        bad = values.isna() & raw[c].notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
            raise InputError(f"not a number: {raw[c][bad].iloc[0]!r}", file=name, row=row, field=str(c))
        return values * factor

    out = pd.DataFrame({"source": name, "model": None, "concurrency": col("concurrency"), "qps": col("qps"),
                        "p50_s": col("p50"), "p99_s": col("p99"), "mean_s": col("mean"),
                        "qps_basis": "measured"})
    return _with_littles_law(out)


def _with_littles_law(points: pd.DataFrame) -> pd.DataFrame:
    """Fill QPS from concurrency (λ = L / W, Little's law) or concurrency from QPS (L = λ W).

    W is the mean latency where known, else the P50 (said in ``qps_basis``).
    """
    p = points.copy()
    w = p["mean_s"].where(p["mean_s"].notna(), p["p50_s"])
    w_name = np.where(p["mean_s"].notna(), "mean", "P50")
    need_qps = p["qps"].isna() & p["concurrency"].notna() & (w > 0)
    p.loc[need_qps, "qps"] = p.loc[need_qps, "concurrency"] / w[need_qps]
    p.loc[need_qps, "qps_basis"] = [f"Little's law: concurrency / {n} latency" for n in w_name[need_qps.to_numpy()]]
    need_conc = p["concurrency"].isna() & p["qps"].notna() & w.notna()
    p.loc[need_conc, "concurrency"] = p.loc[need_conc, "qps"] * w[need_conc]
    missing = p["qps"].isna()
    if missing.any():
        row = int(np.flatnonzero(missing.to_numpy())[0]) + 1
        raise InputError("this row has concurrency but no latency to turn it into QPS (Little's law needs "
                         "the mean or P50 latency)", file=str(p["source"].iloc[0]), row=row, field="qps")
    return p[list(POINT_COLUMNS)]


def _point(source: str, model, concurrency, qps, p50_s, p99_s, mean_s, basis="measured") -> dict:
    return {"source": source, "model": model, "concurrency": _num(concurrency), "qps": _num(qps),
            "p50_s": _num(p50_s), "p99_s": _num(p99_s), "mean_s": _num(mean_s), "qps_basis": basis}


def _run_point(run: benchruns.BenchRun, concurrency: int | None) -> dict:
    """One load point from a run's requests: throughput = completed / duration."""
    s = run.summary()
    conc = run.max_concurrency or concurrency
    ms = {k: (s[k] / 1000 if s[k] is not None else None) for k in ("total_ms_p50", "total_ms_p99", "total_ms_mean")}
    if run.source_format == "llmperf":
        # a closed loop of N clients: λ = N / W exactly (Little's law); LLMPerf gives no wall clock
        if not conc:
            raise InputError("an LLMPerf run without its summary needs the concurrency it ran at",
                             file=run.file_name, field="concurrency")
        qps = conc / ms["total_ms_mean"] if ms["total_ms_mean"] else None
        basis = "Little's law: concurrency / mean latency (closed loop)"
    else:
        qps = s["completed"] / run.duration_s if run.duration_s else None
        basis = "measured: completed / duration"
    return _point(run.file_name, run.model, conc, qps, ms["total_ms_p50"], ms["total_ms_p99"],
                  ms["total_ms_mean"], basis)


def _summary_point(doc: dict, name: str) -> dict | None:
    """A load point from a summary-only JSON: LLMPerf ``*_summary.json`` or vLLM without --save-detailed."""
    if any(k.startswith("results_end_to_end_latency_s") for k in doc):
        per_min = _num(doc.get("results_num_completed_requests_per_min"))
        return _point(name, doc.get("model"), doc.get("num_concurrent_requests"),
                      per_min / 60 if per_min is not None else None,
                      doc.get("results_end_to_end_latency_s_quantiles_p50"),
                      doc.get("results_end_to_end_latency_s_quantiles_p99"),
                      doc.get("results_end_to_end_latency_s_mean"), "measured: completed per minute / 60")
    if "model_id" in doc and "p99_e2el_ms" in doc:
        ms = {k: (_num(doc.get(k)) / 1000 if _num(doc.get(k)) is not None else None)
              for k in ("median_e2el_ms", "p99_e2el_ms", "mean_e2el_ms")}
        return _point(name, doc.get("model_id"), doc.get("max_concurrency"), doc.get("request_throughput"),
                      ms["median_e2el_ms"], ms["p99_e2el_ms"], ms["mean_e2el_ms"], "measured: request_throughput")
    return None


def read_loadtest(path: str | Path, name: str | None = None, *, concurrency: int | None = None) -> pd.DataFrame:
    """Load points (one per run or CSV row) from a load-test file.

    Accepted: a ``vllm bench serve`` result JSON (detailed or summary only), an LLMPerf
    individual-responses or summary JSON, or a CSV with a P99 latency column (``p99_s`` or
    ``p99_ms``) and ``qps`` and/or ``concurrency`` (``p50_*``, ``mean_*`` optional; ``#`` lines are
    comments). Missing QPS or concurrency comes from Little's law (L = λ W). ``concurrency``
    gives the clients of an LLMPerf run whose summary is not beside it.

    Columns: ``source``, ``model``, ``concurrency``, ``qps`` (req/s through the tested endpoint),
    ``p50_s``, ``p99_s``, ``mean_s`` (end-to-end latency), ``qps_basis``.
    """
    path = Path(path)
    name = name or path.name
    head = path.read_bytes()[:4096].lstrip()
    if not head:
        raise InputError("empty file", file=name)
    if head[:1] not in (b"{", b"[") and head[:2] != b"\x1f\x8b":
        text = path.read_text(encoding="utf-8", errors="replace")
        return _read_loadtest_csv(text, name)
    doc = benchruns._load_json(path, name)
    if isinstance(doc, dict):
        if "model_id" in doc and "input_lens" in doc:
            return pd.DataFrame([_run_point(benchruns.read_vllm_bench(path, name, start=datetime(1970, 1, 1)),
                                            concurrency)], columns=list(POINT_COLUMNS))
        point = _summary_point(doc, name)
        if point is not None:
            return pd.DataFrame([point], columns=list(POINT_COLUMNS))
    if isinstance(doc, list):
        run = benchruns.read_llmperf(path, name, start=datetime(1970, 1, 1))
        return pd.DataFrame([_run_point(run, concurrency)], columns=list(POINT_COLUMNS))
    raise InputError("not a load test this planner reads: expected a vllm bench serve result, an LLMPerf "
                     "individual-responses or summary JSON, or a CSV of qps/concurrency against P99 latency",
                     file=name)


def read_loadtest_bytes(data: bytes, name: str, *, concurrency: int | None = None) -> pd.DataFrame:
    """:func:`read_loadtest` of an upload's bytes (the benchmark readers work on files)."""
    with tempfile.TemporaryDirectory(prefix="finops-loadtest-") as tmp:
        path = Path(tmp) / Path(name).name
        path.write_bytes(data)
        return read_loadtest(path, name, concurrency=concurrency)


def benchmark_points(con: duckdb.DuckDBPyConnection, model: str | None = None) -> pd.DataFrame:
    """Load points of the benchmark runs in the store (one per run; newest first), optionally one model's."""
    runs = benchruns.benchmark_runs(con)
    if model is not None:
        runs = runs[runs["model"] == model]
    rows = []
    for r in runs.itertuples(index=False):
        ms = {k: (float(getattr(r, k)) / 1000 if not pd.isna(getattr(r, k)) else None)
              for k in ("total_ms_p50", "total_ms_p99", "total_ms_mean")}
        conc = None if pd.isna(r.max_concurrency) else int(r.max_concurrency)
        if r.source_format == "llmperf" and conc and ms["total_ms_mean"]:
            qps, basis = conc / ms["total_ms_mean"], "Little's law: concurrency / mean latency (closed loop)"
        else:
            qps = r.completed / r.duration_s if r.duration_s else None
            basis = "measured: completed / duration"
        rows.append(_point(f"{r.file_name} ({r.run_id})", r.model, conc, qps, ms["total_ms_p50"],
                           ms["total_ms_p99"], ms["total_ms_mean"], basis))
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS))


@dataclass(frozen=True)
class LoadTestFit:
    """Per-instance throughput under a P99 target, and the instances a target QPS needs.

    ``state``: ``ok`` (the target is crossed between two measured loads: interpolated),
    ``beyond_range`` (every measured load met the target: the highest is used, a lower bound on
    what one instance can do, so the count errs high), ``infeasible`` (even the lightest load
    missed the target: more instances cannot fix per-request latency), ``no_points``.
    """

    state: str
    message: str
    per_instance_qps: float | None          #: req/s one instance sustains with P99 ≤ target
    concurrency_at_target: float | None     #: in-flight requests per instance at that load
    instances: int | None                   #: ⌈target_qps / per_instance_qps⌉
    instances_with_redundancy: int | None   #: ⌈instances · (1 + redundancy)⌉
    points: pd.DataFrame                    #: per-instance points by load, with ``meets_target``
    target_qps: float
    p99_target_s: float
    redundancy: float


def fit_loadtest(points: pd.DataFrame, *, target_qps: float, p99_target_s: float, redundancy: float = 0.25,
                 instances_tested: int = 1) -> LoadTestFit:
    """Highest per-instance QPS with P99 ≤ target, then instances = ⌈target QPS / it⌉ × (1 + redundancy).

    Points are per-instance (QPS ÷ ``instances_tested``), sorted by QPS; the usable range ends at
    the first point whose P99 exceeds the target, and the crossing is interpolated linearly
    between that point and the one before:

        q* = q₁ + (target − p₁) · (q₂ − q₁) / (p₂ − p₁)

    >>> pts = pd.DataFrame({"qps": [10.0, 20.0, 30.0], "p99_s": [1.0, 1.5, 2.5]})
    >>> fit = fit_loadtest(pts, target_qps=50, p99_target_s=2.0, redundancy=0.25)
    >>> fit.state, fit.per_instance_qps, fit.instances, fit.instances_with_redundancy
    ('ok', 25.0, 2, 3)
    """
    target_qps = _check_positive("target_qps", target_qps, allow_zero=True)
    p99_target_s = _check_positive("p99_target_s", p99_target_s)
    tested = _check_whole("instances_tested", instances_tested, 1)
    if redundancy < 0:
        raise InputError(f"must be >= 0, got {redundancy}", field="redundancy")
    pts = points.copy()
    for c in POINT_COLUMNS:
        if c not in pts:
            pts[c] = None
    pts = pts[pd.to_numeric(pts["qps"], errors="coerce").notna() & pd.to_numeric(pts["p99_s"], errors="coerce").notna()]
    pts = pts.assign(qps=pts["qps"].astype(float) / tested,
                     concurrency=pd.to_numeric(pts["concurrency"], errors="coerce") / tested,
                     p99_s=pts["p99_s"].astype(float)).sort_values(["qps", "p99_s"]).reset_index(drop=True)
    pts["meets_target"] = pts["p99_s"] <= p99_target_s

    def done(state, message, qps=None, conc=None):
        n = None if qps is None else (0 if target_qps == 0 else math.ceil(target_qps / qps - 1e-9))
        nr = None if n is None else math.ceil(n * (1 + redundancy) - 1e-9)
        return LoadTestFit(state=state, message=message, per_instance_qps=qps, concurrency_at_target=conc,
                           instances=n, instances_with_redundancy=nr, points=pts, target_qps=target_qps,
                           p99_target_s=p99_target_s, redundancy=redundancy)

    if pts.empty:
        return done("no_points", "no load points with both a QPS and a P99 latency")
    fails = np.flatnonzero(~pts["meets_target"].to_numpy())
    first_fail = int(fails[0]) if fails.size else None
    if first_fail == 0:
        lo = pts.iloc[0]
        return done("infeasible", f"even the lightest load tested ({lo.qps:.3g} req/s per instance) has P99 "
                                  f"{lo.p99_s:.3g} s > {p99_target_s:g} s: no number of instances meets this target. "
                                  "Per-request latency is the limit: a smaller batch, shorter outputs or a faster "
                                  "model, not more replicas.")
    if first_fail is None:
        hi = pts.iloc[-1]
        return done("beyond_range", f"every load tested met P99 ≤ {p99_target_s:g} s; the highest, "
                                    f"{hi.qps:.3g} req/s per instance, is used, so one instance can likely do more "
                                    "and the count errs high. Test heavier loads to find the limit.",
                    float(hi.qps), _num(hi.concurrency))
    a, b = pts.iloc[first_fail - 1], pts.iloc[first_fail]
    frac = 0.0 if b.p99_s == a.p99_s else (p99_target_s - a.p99_s) / (b.p99_s - a.p99_s)
    qps = float(a.qps + frac * (b.qps - a.qps))
    conc = None
    if not (pd.isna(a.concurrency) or pd.isna(b.concurrency)):
        conc = float(a.concurrency + frac * (b.concurrency - a.concurrency))
    return done("ok", f"P99 crosses {p99_target_s:g} s between {a.qps:.3g} and {b.qps:.3g} req/s per instance "
                      f"(P99 {a.p99_s:.3g} s and {b.p99_s:.3g} s): interpolated {qps:.3g} req/s.", qps, conc)


# ---------------------------------------------------------------- forecast -> replica plan

def hourly_qps(con: duckdb.DuckDBPyConnection, f: Filters | None = None, model: str | None = None) -> pd.Series:
    """Served requests per second, hour by hour (cache hits excluded), hours without traffic as 0.

    From the rollups; ``model`` None sums every model. Index ``ts`` (naive UTC hours) from the
    first to the last hour with traffic; empty when there is none.
    """
    f = _fleet_filters(f)
    if model is not None:
        f = replace(f, models=(model,))
    where, params = f.where(ts_col="hour")
    df = con.execute(f"""
WITH h AS (SELECT hour, sum(requests - cache_hits) AS served FROM rollup_hourly WHERE {where} GROUP BY hour),
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
    mean_s = _check_positive("mean_service_s", mean_service_s)
    slots = _check_whole("slots_per_replica", slots_per_replica, 1)
    try:
        fc = forecast_qps(history, days=days, interval=interval)
    except InputError as exc:
        return ForecastPlan("too_short", str(exc), history, None, None, None, None, None)
    plan = replica_plan(fc, service_rate=slots / mean_s, target_utilization=target_utilization,
                        redundancy=redundancy).rename(columns={"servers": "replicas_needed"})
    floor = _check_whole("min_replicas", min_replicas, 0)
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
    k = _check_whole("slots_per_replica", slots_per_replica, 1)
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
    slots = _check_whole("slots_per_replica", slots_per_replica, 1)
    mu_slot = _check_positive("service_rate_per_replica", service_rate_per_replica) / slots
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
