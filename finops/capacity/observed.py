"""Fill from my logs: each self-hosted model's busiest hour, measured, beside the calculator's prediction.

:func:`observed_load` reads the store: per model, the busiest hour's λ, the service time and its
CV, the replicas and slots, and the queue_ms observed in that hour beside the Allen–Cunneen
prediction at that load, so the fit is shown, good or bad. :func:`self_hosted_models` is the
price book's self-hosted rows; :func:`fleet_filters` the sidebar filters that apply to a fleet.
"""
from __future__ import annotations

import math
from datetime import date

import duckdb
import numpy as np
import pandas as pd

from finops import sql, store
from finops.capacity.queueing import ggc
from finops.filters import Filters
from finops.fmt import counted
from finops.latency import stats
from finops.spend import pricing

__all__ = ["FIT_MIN_REQUESTS", "OBSERVED_COLUMNS", "fleet_filters", "observed_load", "self_hosted_models"]


def self_hosted_models(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The price book's self-hosted rows: model, gpu_hour_usd, gpus_per_replica, replicas, slots_per_replica."""
    return con.execute("SELECT model, gpu_hour_usd, gpus_per_replica, replicas, slots_per_replica, source "
                       "FROM prices WHERE kind = 'self_hosted' ORDER BY model").df()


# a request's time on a slot; NULL (not 0) where the row has no timing at all
SERVICE_MS_SQL = f"nullif({sql.SERVICE_MS}, 0)"
SERVED_SQL = sql.SERVED
COMPLETED_SQL = sql.OK

#: below this many requests logging a queue wait in the busiest hour, the fit of the waits (the slots they imply and
#: the verdict on the slot count) says nothing: the mean wait rests on the few requests that waited, and the logged
#: P99 beside the prediction is the slowest request or next to it (the latency module's ``TAIL_REQUESTS``, which the
#: SLO's small-sample notes use too). One request read "the waits match about 1 slot" against the book's 6.
FIT_MIN_REQUESTS = stats.TAIL_REQUESTS

OBSERVED_COLUMNS = (
    "model", "peak_hour", "requests_peak_hour", "peak_hour_covered_s", "arrival_rate_per_s", "mean_service_s",
    "cv_service", "service_samples", "cv_arrival", "replicas", "replicas_source", "slots_per_replica", "slots_source",
    "fleet", "servers",
    "utilization", "predicted_wq_ms", "observed_queue_mean_ms", "predicted_wait_p99_ms",
    "observed_queue_p99_ms", "queue_samples", "implied_servers", "state", "note",
    "tokens_per_request", "gpus_per_replica", "gpu_hour_usd", "gpu_source",
)


def fleet_filters(f: Filters | None) -> Filters:
    """The sidebar's date range and models; tenants and tiers share a fleet, so they do not apply
    (:meth:`Filters.fleet`: a login's tenant scope is kept)."""
    return (f or Filters()).fleet()


def observed_load(con: duckdb.DuckDBPyConnection, f: Filters | None = None) -> pd.DataFrame:
    """Per self-hosted model (or any model whose logs name replicas), its busiest hour, measured.

    * ``arrival_rate_per_s``: requests the model served (cache hits excluded) in its busiest hour
      of the rollups, / ``peak_hour_covered_s``, the seconds of that hour the logs cover
      (:func:`covered_s`: 3,600 unless the logs start or end inside it);
    * ``mean_service_s``, ``cv_service``: mean and std/mean of the completed requests' time on a
      slot in that hour (``service_ms``, else prefill + decode, else total − queue − route), over
      ``service_samples`` requests; the CV of fewer than 2 is undefined: None, and the prediction takes it as 1;
    * ``cv_arrival``: std/mean of the gaps between those requests' arrivals (1 for Poisson; taken as 1 with
      fewer than 2 gaps);
    * ``replicas``: distinct ``replica`` values in that hour, else the fleet schedule's period (declared, else
      inferred) covering most of that hour, else the price book's;
      ``slots_per_replica`` from the price book, else 1 (``*_source`` says which); ``fleet`` reads
      "replicas × slots" and ``servers`` is their product c;
    * ``observed_queue_mean_ms``, ``observed_queue_p99_ms``: queue_ms in that hour (exact P99);
    * ``predicted_wq_ms``, ``predicted_wait_p99_ms``: Allen–Cunneen at that λ, μ, CVs and
      c = replicas × slots (None where the model is unstable or lacks timing: ``state``, ``note``);
    * ``implied_servers``: the c whose predicted mean wait is nearest the observed mean queue_ms,
      a check of the slot count (None when no request queued, or fewer than :data:`FIT_MIN_REQUESTS` of the
      hour's requests log a queue wait, ``queue_samples``: the note then says there are too few to judge);
    * ``tokens_per_request`` (input + output, served requests, whole period), and ``gpus_per_replica`` and
      ``gpu_hour_usd``: that schedule period's (as the Cost page bills the hour), else the price book's
      (``gpu_source`` says which).

    The sidebar's date range and models apply; tenants and tiers do not (a fleet is shared).
    """
    where, params = fleet_filters(f).where(ts_col="hour")
    peaks = con.execute(f"""
WITH h AS (SELECT model, hour, sum({sql.served_requests()}) AS served, sum(busy_ms) AS busy_ms FROM rollup_hourly
           WHERE {where} GROUP BY ALL HAVING sum({sql.served_requests()}) > 0),
pk AS (SELECT model, hour AS peak_hour, served, busy_ms FROM h
       QUALIFY row_number() OVER (PARTITION BY model ORDER BY served DESC, hour) = 1),
tok AS (SELECT model, sum(input_tokens + output_tokens - cache_uncached_input_tokens - cache_cached_input_tokens
                          - cache_output_tokens) / nullif(sum({sql.served_requests()}), 0) AS tokens_per_request
        FROM rollup_hourly WHERE {where} GROUP BY model),
-- the fleet period (declared, else inferred) covering most of the peak hour, as the Cost page bills it
sched AS (SELECT s.model, s.replicas AS sched_replicas, s.gpus_per_replica AS sched_gpus_per_replica,
                 s.gpu_hour_usd AS sched_gpu_hour_usd, s.billed_by AS sched_source
          FROM ({pricing.FLEET_PERIODS_SQL}) s JOIN pk ON pk.model = s.model
          WHERE s.billed_by <> 'traffic' AND s.starts_at < pk.peak_hour + INTERVAL 1 HOUR
            AND (s.ends_at IS NULL OR s.ends_at > pk.peak_hour)
          QUALIFY row_number() OVER (PARTITION BY s.model ORDER BY
              least(coalesce(s.ends_at, pk.peak_hour + INTERVAL 1 HOUR), pk.peak_hour + INTERVAL 1 HOUR)
              - greatest(s.starts_at, pk.peak_hour) DESC, s.starts_at DESC) = 1)
SELECT pk.model, pk.peak_hour, pk.served, pk.busy_ms, tok.tokens_per_request, p.kind, p.replicas, p.slots_per_replica,
       coalesce(sched.sched_gpus_per_replica, p.gpus_per_replica) AS gpus_per_replica,
       coalesce(sched.sched_gpu_hour_usd, p.gpu_hour_usd) AS gpu_hour_usd, sched.sched_replicas, sched.sched_source
FROM pk LEFT JOIN tok USING (model) LEFT JOIN ({pricing.BOOK_ROW_PER_MODEL_SQL}) p USING (model)
     LEFT JOIN sched USING (model) ORDER BY pk.model""",
                        params + params + [date.max, date.max]).df()
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
       stddev_pop(gap_ms) / nullif(avg(gap_ms), 0) AS cv_arrival, count(gap_ms) AS gap_samples,
       count(DISTINCT replica) AS replicas_seen,
       avg(queue_ms) AS observed_queue_mean_ms, quantile_cont(queue_ms, 0.99) AS observed_queue_p99_ms,
       count(queue_ms) AS queue_samples
FROM r GROUP BY model""", raw_params).df()
    frame = peaks.merge(raw, on="model", how="left")
    first, last = store.time_span(con)
    frame["covered_s"] = [covered_s(h, first, last) for h in frame["peak_hour"]]
    # no raw row in the peak hour (a store of attached rollups): the mean service time is the rollup's busy
    # time over the requests served, failed ones included, and the note says so
    from_rollups = frame["service_samples"].isna() & (frame["busy_ms"] > 0)
    frame.loc[from_rollups, "mean_service_s"] = frame["busy_ms"] / frame["served"] / 1000
    keep = (frame["kind"] == "self_hosted") | (frame["replicas_seen"].fillna(0) > 0)
    rows = []
    for r, rolled in zip(frame[keep].itertuples(index=False), from_rollups[keep], strict=True):
        row = _observed_row(r)
        if rolled:
            row["note"] = "; ".join(n for n in (ROLLUP_SERVICE_NOTE, row["note"]) if n)
        rows.append(row)
    return pd.DataFrame(rows, columns=list(OBSERVED_COLUMNS))


def covered_s(hour, first, last) -> float:
    """The seconds of the clock hour from ``hour`` that the logs cover: those between the store's first and last
    request (``first``, ``last``; None: all of it). A trace that runs from 18:15 to 19:15 covers 45 minutes of
    its 18:00 hour, whose requests arrived at their count over 2,700 s, not 3,600 (which read the Azure trace's
    5.882 arrivals per second, 15,606 over its 2,653 covered seconds, as 4.335). At least a minute: one request
    is no rate.

    >>> from datetime import datetime as t
    >>> covered_s(t(2023, 11, 16, 18), t(2023, 11, 16, 18, 15), t(2023, 11, 16, 19, 14, 59)), covered_s(t(2023, 11, 16, 19), None, None)
    (2700.0, 3600.0)
    """
    if first is None or last is None:
        return 3600.0
    hour = pd.Timestamp(hour)
    lo, hi = max(hour, pd.Timestamp(first)), min(hour + pd.Timedelta(hours=1), pd.Timestamp(last))
    return float(min(3600.0, max(60.0, (hi - lo).total_seconds())))


#: what a mean service time read from the rollups is (no raw row in the model's busiest hour)
ROLLUP_SERVICE_NOTE = ("mean service time from the hourly rollups: the busy time over the requests served in the "
                       "busiest hour, failed ones included (no raw rows here to measure the completed ones)")


#: where the replicas of a fleet's peak hour came from, when its schedule gave them (``fleet_schedule.source``)
SCHEDULE_WORDS = {"declared": "the declared fleet schedule", "inferred": "the schedule inferred from the logs' replicas"}


def _num(v) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _observed_row(r) -> dict:
    lam = float(r.served) / r.covered_s
    seen = int(r.replicas_seen) if not pd.isna(r.replicas_seen) else 0
    scheduled = None if pd.isna(r.sched_replicas) else SCHEDULE_WORDS.get(r.sched_source, "the fleet schedule")
    if seen:
        replicas, rep_src = seen, "logs (distinct replica in the peak hour)"
    elif scheduled:
        replicas, rep_src = int(r.sched_replicas), scheduled
    elif not pd.isna(r.replicas):
        replicas, rep_src = int(r.replicas), "price book"
    else:
        replicas, rep_src = None, "unknown"
    if not pd.isna(r.slots_per_replica):
        slots, slot_src = int(r.slots_per_replica), "price book"
    else:
        slots, slot_src = 1, "assumed 1 (not in the price book)"
    mean_s, cv_s, cv_a = _num(r.mean_service_s), _num(r.cv_service), _num(r.cv_arrival)
    # a std / mean over one request (or one gap) is 0 by arithmetic, not a measured variability: undefined
    service_n = 0 if pd.isna(r.service_samples) else int(r.service_samples)
    cv_shown = cv_s if service_n >= 2 else None
    cv_s = 1.0 if cv_shown is None else cv_s
    cv_a = 1.0 if cv_a is None or pd.isna(r.gap_samples) or r.gap_samples < 2 else cv_a
    out = {
        "model": r.model, "peak_hour": r.peak_hour, "requests_peak_hour": int(r.served),
        "peak_hour_covered_s": float(r.covered_s), "arrival_rate_per_s": lam,
        "mean_service_s": mean_s, "cv_service": cv_shown, "service_samples": service_n, "cv_arrival": cv_a,
        "replicas": replicas,
        "replicas_source": rep_src, "slots_per_replica": slots, "slots_source": slot_src,
        "fleet": None if replicas is None else f"{replicas} × {slots}",
        "servers": None if replicas is None else replicas * slots, "utilization": None,
        "predicted_wq_ms": None, "observed_queue_mean_ms": _num(r.observed_queue_mean_ms),
        "predicted_wait_p99_ms": None, "observed_queue_p99_ms": _num(r.observed_queue_p99_ms),
        "queue_samples": int(r.queue_samples) if not pd.isna(r.queue_samples) else 0,
        "implied_servers": None, "state": "ok", "note": "",
        "tokens_per_request": _num(r.tokens_per_request), "gpus_per_replica": _num(r.gpus_per_replica),
        "gpu_hour_usd": _num(r.gpu_hour_usd),
        "gpu_source": scheduled or "price book",
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
    notes = []
    if q.stable:
        out["predicted_wq_ms"] = float(q.wq_s) * 1000
        out["predicted_wait_p99_ms"] = float(q.wait_p99_s) * 1000
    else:
        notes.append(q.message)
    if cv_shown is None:
        notes.append(f"service variability taken as 1 in the prediction: {counted(service_n, 'completed request')} "
                     "with a service time, and a variability needs at least 2")
    observed = out["observed_queue_mean_ms"]
    if observed is None:
        notes.append("the logs carry no queue_ms: nothing to compare")
    elif out["queue_samples"] < FIT_MIN_REQUESTS:
        notes.append(f"too few requests to judge the slots: {counted(out['queue_samples'], 'request')} logged a "
                     f"queue wait in the busiest hour; at least {FIT_MIN_REQUESTS:,} needed")
    else:
        implied = _implied_servers(lam, mean_s, cv_a, cv_s, observed / 1000, replicas * slots)
        out["implied_servers"] = implied
        if implied is not None and q.stable:
            pred = out["predicted_wq_ms"]
            if observed > 2 * pred + 1 and implied < replicas * slots:
                notes.append(f"requests waited longer than {counted(replicas * slots, 'slot')} predict: the waits "
                             f"match about {counted(implied, 'slot')} ({implied / replicas:.1f} per replica). Check "
                             "the slots per replica in the price book, and "
                             "whether every replica serves one shared queue (M/M/c assumes so; replicas at another "
                             "site with their own queue wait longer)")
            elif pred > 2 * observed + 1 and implied > replicas * slots:
                notes.append(f"requests waited less than predicted: the waits match about {counted(implied, 'slot')} "
                             f"({implied / replicas:.1f} per replica)")
    out["note"] = "; ".join(notes)
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
