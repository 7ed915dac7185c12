"""Automatic diagnosis: the slow-path playbook of section 2.5 of the routing text (000), as rules.

    layer     symptom                                   likely cause                         how to look
    routing   slow requests concentrate on one model    simple requests sent to the large    latency by model
                                                        model / the cache stopped hitting
    queue     high TTFT, fast per-token                 batch wait / queue build-up (rho->1) queue_ms, queue length
    prefill   long prompts slow, short ones fast        prefill-bound: long context          latency by prompt bucket
    decode    long outputs slow                         decode-bound: HBM bandwidth / KV     decode tokens/s vs batch
    tail      median normal, P99 spikes                 GC / preemption / one huge request   the P99 request's trace

"Layer first, then buckets, then traces; never the mean." Each rule of :data:`RULES` is
evaluated **per model per window** (an hour by default) against that model's own baseline
over the filtered period, so a finding is localised in time; adjacent flagged windows merge
into one finding that reports its span. A short log (a single window, such as the seed's
experiment) has no history to compare against: its baseline is the fastest tenth of the
model's requests.

Per model and window the metrics are::

    svc        service time = service_ms, else prefill_ms + decode_ms, else total_ms - queue_ms - route_ms
    waited     requests with queue_ms > 10 ms
    tpot       decode ms per output token: (total_ms - ttft_ms) / (output_tokens - 1), else decode_ms / output_tokens
    tail       a request whose decode is slow against the model's baseline:
               tpot > 2 x the model's median tpot where tokens are logged, else
               svc > 2 x the model's fastest-tenth svc + 200 ms
    rho        lambda x E[svc] / c  (c: replicas x slots from the price book, else the requests
               that started without waiting in the worst burst)

Each finding: layer, model, severity (critical / warning / info), evidence in numbers, the
recommended action, and a metrics dict (window_start, window_end, and the numbers quoted).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import duckdb
import numpy as np
import pandas as pd

from finops.errors import InputError
from finops.filters import Filters

LAYERS = ("routing", "queue", "prefill", "decode", "tail")
SEVERITIES = ("critical", "warning", "info")
WINDOWS = {"15min": pd.Timedelta(minutes=15), "hour": pd.Timedelta(hours=1), "day": pd.Timedelta(days=1)}
WAITED_MS = 10.0               # queue_ms above this counts as having waited ("queue_ms ≈ 0" below it)
QUEUE_MIN_MS = 100.0           # a queue finding needs a P95 wait of at least this ...
QUEUE_VS_SERVICE = 0.5         # ... and of at least half the model's median service time
TAIL_FACTOR = 2.0              # "slow decode": over 2x the baseline
TAIL_MIN_EXCESS_MS = 200.0
TAIL_MIN_SHARE = 0.05          # at least 5 % of a window's requests
HISTORY_FACTOR = 3.0           # and 3x the model's typical window, where there is history
MIN_HISTORY = 3                # windows needed before a window is compared with the others
MIN_REQUESTS = 3
TARGET_RHO = 0.7


@dataclass(frozen=True)
class Finding:
    layer: str
    model: str
    severity: str
    evidence: str
    action: str
    metrics: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- per model x window metrics

def _bucket(window: str) -> str:
    return {"15min": "time_bucket(INTERVAL 15 MINUTE, ts)", "hour": "date_trunc('hour', ts)",
            "day": "date_trunc('day', ts)"}[window]


SVC_SQL = ("coalesce(service_ms, prefill_ms + decode_ms, "
           "total_ms - coalesce(queue_ms, 0) - coalesce(route_ms, 0))")
TPOT_SQL = ("CASE WHEN output_tokens > 1 AND ttft_ms IS NOT NULL THEN (total_ms - ttft_ms) / (output_tokens - 1) "
            "WHEN output_tokens > 0 AND decode_ms IS NOT NULL THEN decode_ms / output_tokens END")
LEN_SQL = "coalesce(CAST(input_tokens AS DOUBLE), CAST(prompt_chars AS DOUBLE))"


def window_metrics(con: duckdb.DuckDBPyConnection, f: Filters, window: str = "hour") -> pd.DataFrame:
    """One row per model and window with the numbers the rules read (see the module docstring),
    and the model's baselines over the whole filtered period (columns ``base_*``)."""
    if window not in WINDOWS:
        raise InputError(f"window must be one of {', '.join(WINDOWS)}")
    where, params = f.where()
    sql = f"""
WITH r AS (
  SELECT model, {_bucket(window)} AS w, ts, total_ms, queue_ms, {SVC_SQL} AS svc, {TPOT_SQL} AS tpot,
         prefill_ms / nullif(input_tokens, 0) AS prefill_per_tok, {LEN_SQL} AS len, input_tokens IS NOT NULL AS input_tokens_known, ttft_ms,
         coalesce(cache_hit, false) AS hit
  FROM requests WHERE {where} AND total_ms IS NOT NULL),
served AS (SELECT * FROM r WHERE NOT hit),
base AS (
  SELECT model, count(*) AS base_n, quantile_cont(svc, 0.1) AS base_svc_p10, median(svc) AS base_svc_p50,
         median(tpot) AS base_tpot_p50, median(prefill_per_tok) AS base_prefill_per_tok,
         median(total_ms) AS base_total_p50, count(tpot) AS base_tpot_n, count(queue_ms) AS base_queue_n
  FROM served GROUP BY 1),
tagged AS (
  SELECT s.*, b.*,
         CASE WHEN b.base_tpot_n > 0 THEN s.tpot > {TAIL_FACTOR} * b.base_tpot_p50
              ELSE s.svc > {TAIL_FACTOR} * b.base_svc_p10 + {TAIL_MIN_EXCESS_MS} END AS tail
  FROM served s JOIN base b USING (model)),
hits AS (SELECT model, w, count(*) FILTER (WHERE hit) AS cache_hits, count(*) AS all_requests FROM r GROUP BY 1, 2)
SELECT t.model, t.w AS window_start, count(*) AS n, min(t.ts) AS first_ts,
       epoch(max(t.ts) - min(t.ts)) AS arrival_span_s,
       quantile_cont(t.total_ms, 0.5) AS total_p50, quantile_cont(t.total_ms, 0.99) AS total_p99,
       count(t.queue_ms) AS queue_n, quantile_cont(t.queue_ms, 0.95) AS queue_p95, max(t.queue_ms) AS queue_max,
       avg(t.queue_ms) AS queue_mean, count(*) FILTER (WHERE t.queue_ms > {WAITED_MS}) AS waited,
       sum(t.queue_ms) / nullif(sum(t.total_ms), 0) AS queue_share,
       avg(t.svc) AS svc_mean, quantile_cont(t.svc, 0.5) AS svc_p50, quantile_cont(t.svc, 0.95) AS svc_p95,
       quantile_cont(t.tpot, 0.5) AS tpot_p50, quantile_cont(t.tpot, 0.95) AS tpot_p95,
       quantile_cont(t.prefill_per_tok, 0.5) AS prefill_per_tok_p50,
       count(*) FILTER (WHERE t.tail) AS tail_n,
       min(t.svc) FILTER (WHERE t.tail) AS tail_svc_min, max(t.svc) FILTER (WHERE t.tail) AS tail_svc_max,
       avg(t.svc) FILTER (WHERE t.tail) AS tail_svc_mean, avg(t.tpot) FILTER (WHERE t.tail) AS tail_tpot_mean,
       quantile_cont(t.len, 0.5) FILTER (WHERE t.tail) AS tail_len_p50,
       quantile_cont(t.len, 0.9) FILTER (WHERE NOT t.tail) AS fast_len_p90,
       min(t.len) FILTER (WHERE t.tail) AS tail_len_min, max(t.len) FILTER (WHERE t.tail) AS tail_len_max,
       min(t.len) FILTER (WHERE NOT t.tail) AS fast_len_min, max(t.len) FILTER (WHERE NOT t.tail) AS fast_len_max,
       any_value(t.base_svc_p10) AS base_svc_p10, any_value(t.base_svc_p50) AS base_svc_p50,
       any_value(t.base_tpot_p50) AS base_tpot_p50, any_value(t.base_prefill_per_tok) AS base_prefill_per_tok,
       any_value(t.base_total_p50) AS base_total_p50, any_value(t.base_tpot_n) AS base_tpot_n,
       count(t.len) > 0 AND count(*) FILTER (WHERE t.input_tokens_known) > 0 AS len_in_tokens,
       any_value(h.cache_hits) AS cache_hits, any_value(h.all_requests) AS all_requests
FROM tagged t LEFT JOIN hits h ON h.model = t.model AND h.w = t.w
GROUP BY 1, 2 ORDER BY 1, 2"""
    m = con.execute(sql, params).df()
    if m.empty:
        return m
    m["tail_share"] = m["tail_n"] / m["n"]
    m["waited_share"] = m["waited"] / m["n"]
    m["hit_rate"] = m["cache_hits"] / m["all_requests"]
    # history: each model's typical window (median over its windows)
    for col in ("tail_share", "queue_p95", "waited_share", "prefill_per_tok_p50", "hit_rate", "total_p50",
                "total_p99"):
        m[f"typ_{col}"] = m.groupby("model")[col].transform("median")
    m["windows"] = m.groupby("model")["n"].transform("size")
    return m


# ---------------------------------------------------------------- rules: (row, context) -> flagged?

def _history(row) -> bool:
    return row.windows >= MIN_HISTORY


def _queue_flag(row) -> bool:
    if not row.queue_n or pd.isna(row.queue_p95) or row.n < MIN_REQUESTS:
        return False
    floor = max(QUEUE_MIN_MS, QUEUE_VS_SERVICE * (row.base_svc_p50 or 0.0))
    if row.queue_p95 < floor or row.waited_share < TAIL_MIN_SHARE:
        return False
    return not _history(row) or row.queue_p95 >= HISTORY_FACTOR * max(row.typ_queue_p95 or 0.0, WAITED_MS)


def _decode_flag(row) -> bool:
    if row.n < MIN_REQUESTS or row.tail_n < 2 or row.tail_share < TAIL_MIN_SHARE:
        return False
    if _prefill_explains(row):
        return False
    return not _history(row) or row.tail_share >= HISTORY_FACTOR * max(row.typ_tail_share, 0.01)


def _prefill_explains(row) -> bool:
    """The slow requests are the long prompts: every one longer than 90 % of the fast ones, by 2x."""
    return (not pd.isna(row.tail_len_p50) and not pd.isna(row.fast_len_p90)
            and row.base_tpot_n == 0 and row.tail_len_p50 >= 2 * max(row.fast_len_p90, 1.0))


def _prefill_flag(row) -> bool:
    if row.n < MIN_REQUESTS:
        return False
    if not pd.isna(row.prefill_per_tok_p50) and not pd.isna(row.base_prefill_per_tok) and _history(row):
        return row.prefill_per_tok_p50 >= TAIL_FACTOR * max(row.base_prefill_per_tok, 1e-9)
    return row.tail_n >= 2 and row.tail_share >= TAIL_MIN_SHARE and _prefill_explains(row) and (
        not _history(row) or row.tail_share >= HISTORY_FACTOR * max(row.typ_tail_share, 0.01))


def _tail_flag(row) -> bool:
    if row.n < 20 or pd.isna(row.total_p99) or not row.total_p50:
        return False
    spike = row.total_p99 >= 5 * row.total_p50 and row.total_p50 <= 1.5 * row.base_total_p50
    return spike and not (_queue_flag(row) or _decode_flag(row) or _prefill_flag(row)) and (
        not _history(row) or row.total_p99 >= HISTORY_FACTOR * row.typ_total_p99)


def _routing_flag(row) -> bool:
    """The semantic cache stopped hitting: hit rate under half the model's usual, with history."""
    return (_history(row) and row.all_requests >= 50 and row.typ_hit_rate >= 0.05
            and row.hit_rate < 0.5 * row.typ_hit_rate)


# ---------------------------------------------------------------- evidence and actions

def _ms(v) -> str:
    return f"{v:,.0f} ms"


def _range(lo, hi) -> str:
    return f"{lo:,.0f}" if round(lo) == round(hi) else f"{lo:,.0f}–{hi:,.0f}"


def _span(start, end, windows: int) -> str:
    return f"{start:%Y-%m-%d %H:%M}–{end:%H:%M} UTC" if end - start <= pd.Timedelta(days=1) and \
        start.date() == (end - pd.Timedelta(microseconds=1)).date() else f"{start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC"


def _capacity(con, model: str) -> tuple[int | None, str]:
    rows = con.execute("SELECT replicas, slots_per_replica FROM prices WHERE model = ? AND kind = 'self_hosted'",
                       [model]).fetchall()
    if rows and rows[0][0] and rows[0][1]:
        return int(rows[0][0]) * int(rows[0][1]), f"{rows[0][0]} replicas x {rows[0][1]} slots (price book)"
    return None, ""


def _busy_period(con, f: Filters, model: str, start, end) -> dict | None:
    """The burst with the most queueing in [start, end): requests chained by overlapping
    [ts, ts + total_ms], in arrival order. None for windows too big to list."""
    where, params = f.where()
    rows = con.execute(
        f"SELECT ts, total_ms, coalesce(queue_ms, 0), {SVC_SQL} FROM requests WHERE {where} AND model = ? "
        f"AND ts >= ? AND ts < ? AND NOT coalesce(cache_hit, false) AND total_ms IS NOT NULL "
        f"ORDER BY ts, request_id LIMIT 501", params + [model, start, end]).fetchall()
    if not rows or len(rows) > 500:
        return None
    periods, cur, cur_end = [], [], None
    for ts, total, queue, svc in rows:
        t0 = pd.Timestamp(ts)
        t1 = t0 + pd.Timedelta(milliseconds=float(total))
        if cur and t0 <= cur_end:
            cur.append((t0, total, queue, svc))
            cur_end = max(cur_end, t1)
        else:
            if cur:
                periods.append(cur)
            cur, cur_end = [(t0, total, queue, svc)], t1
    periods.append(cur)
    best = max(periods, key=lambda p: sum(q for _, _, q, _ in p))
    queues = [q for _, _, q, _ in best]
    waited = [q for q in queues if q > WAITED_MS]
    zero = len(queues) - len(waited)
    first_zero = next((i for i, q in enumerate(queues) if q > WAITED_MS), len(queues))
    span_s = (best[-1][0] - best[0][0]).total_seconds()
    svc_sum_s = sum(s for *_, s in best if s is not None) / 1000
    return {"burst_requests": len(best), "burst_no_wait": zero, "burst_leading_no_wait": first_zero,
            "burst_wait_min_ms": min(waited) if waited else 0.0, "burst_wait_max_ms": max(waited) if waited else 0.0,
            "burst_wait_rising": bool(waited) and all(b >= a for a, b in zip(waited, waited[1:], strict=False)),
            "burst_arrival_span_s": span_s, "burst_service_s": svc_sum_s, "burst_start": best[0][0]}


def _queue_finding(con, f, model, ep: pd.DataFrame, worst, start, end) -> Finding:
    n = int(ep["n"].sum())
    c, c_basis = _capacity(con, model)
    window_s = (end - start).total_seconds()
    lam = n / window_s
    svc_s = float((ep["svc_mean"] * ep["n"]).sum() / n) / 1000
    burst = _busy_period(con, f, model, start, end)
    metrics = {"requests": n, "queue_p95_ms": worst.queue_p95, "queue_max_ms": worst.queue_max,
               "waited_share": float(ep["waited"].sum() / n), "service_p50_ms": worst.svc_p50,
               "queue_share_of_total": worst.queue_share}
    if burst and burst["burst_requests"] > 1 and burst["burst_wait_max_ms"] > 0:
        b = burst
        slots = c or max(b["burst_leading_no_wait"], 1)
        span = b["burst_arrival_span_s"]
        rho = b["burst_service_s"] / (slots * span) if span > 0 else math.inf
        metrics.update({k: v for k, v in b.items() if k != "burst_start"}, slots=slots,
                       slots_basis=c_basis or "requests that started without waiting", rho=rho)
        rho_text = "ρ ≫ 1" if rho > 10 else f"ρ ≈ {rho:.1f}"
        trend = "rising" if b["burst_wait_rising"] else "not monotonic"
        evidence = (f"{b['burst_requests']} concurrent requests to {model} (from {b['burst_start']:%H:%M:%S}): "
                    f"the first {b['burst_leading_no_wait']} have queue_ms ≈ 0, the other "
                    f"{b['burst_requests'] - b['burst_no_wait']} waited {_ms(b['burst_wait_min_ms'])} → "
                    f"{_ms(b['burst_wait_max_ms'])} ({trend}), against a service time of about "
                    f"{_ms(worst.svc_p50)}. So {model} is queue-bound: about {slots} slot"
                    f"{'s' if slots != 1 else ''} ({metrics['slots_basis']}) and work arrived faster than "
                    f"they serve it ({rho_text} over the burst: {b['burst_service_s']:,.1f} s of service "
                    f"arriving within {span:,.3f} s).")
        need = math.ceil(b["burst_service_s"] / max(span, 1e-9) / TARGET_RHO) if span > 0 else None
    else:
        rho = lam * svc_s / c if c else None
        metrics.update({"arrival_rate_per_s": lam, "mean_service_s": svc_s, "slots": c,
                        "slots_basis": c_basis or None, "rho": rho})
        typ = worst.typ_queue_p95
        rho_text = (f"; ρ = λ·E[S]/c = {lam:,.2f}/s × {svc_s:,.2f} s / {c} = {rho:.2f}" if rho is not None else "")
        evidence = (f"{_span(start, end, len(ep))}: {metrics['waited_share']:.0%} of {n:,} requests to {model} "
                    f"waited over {WAITED_MS:.0f} ms; queue P95 {_ms(worst.queue_p95)} (max {_ms(worst.queue_max)})"
                    + (f" against {_ms(typ)} in a typical {('window')}" if worst.windows >= MIN_HISTORY else "")
                    + f", while its median service time is {_ms(worst.svc_p50)}: queue-bound{rho_text}.")
        need = math.ceil(lam * svc_s / TARGET_RHO) if c else None
    metrics["slots_needed_at_rho_0_7"] = need
    severity = "critical" if worst.queue_p95 >= worst.svc_p50 else "warning"
    more = f" (about {need} slots for ρ ≈ 0.7)" if need else ""
    action = (f"Add {model} replicas{more}; rate-limit or shed long and low-tier requests while the queue "
              "is deep; check the batch scheduler's wait.")
    return Finding("queue", model, severity, evidence, action, metrics)


def _decode_finding(con, f, model, ep, worst, start, end) -> Finding:
    per_token = worst.base_tpot_n > 0
    n, tail_n = int(ep["n"].sum()), int(ep["tail_n"].sum())
    metrics = {"requests": n, "tail_requests": tail_n, "tail_share": tail_n / n}
    if per_token:
        metrics.update({"tpot_p95_ms": worst.tpot_p95, "tpot_baseline_ms": worst.base_tpot_p50,
                        "tail_tpot_mean_ms": worst.tail_tpot_mean,
                        "decode_tokens_per_s_baseline": 1000 / worst.base_tpot_p50 if worst.base_tpot_p50 else None,
                        "decode_tokens_per_s_tail": 1000 / worst.tail_tpot_mean if worst.tail_tpot_mean else None})
        evidence = (f"{_span(start, end, len(ep))}: {tail_n:,} of {n:,} requests to {model} ({tail_n / n:.0%}) "
                    f"decoded at over {TAIL_FACTOR:g}× its usual time per output token: "
                    f"{worst.tail_tpot_mean:,.1f} ms/token on average vs a baseline of "
                    f"{worst.base_tpot_p50:,.1f} ms/token ({metrics['decode_tokens_per_s_tail']:,.0f} vs "
                    f"{metrics['decode_tokens_per_s_baseline']:,.0f} tokens/s); TPOT P95 {worst.tpot_p95:,.1f} ms"
                    + (f", in a typical window {worst.typ_tail_share:.1%} of requests are this slow"
                       if worst.windows >= MIN_HISTORY else "") + ": a decode long tail.")
        excess = (worst.tail_tpot_mean - worst.base_tpot_p50) if worst.tail_tpot_mean else 0.0
        severity = "critical" if worst.tail_tpot_mean >= 3 * worst.base_tpot_p50 or tail_n / n >= 0.2 else "warning"
        del excess
    else:
        excess = float(worst.tail_svc_mean - worst.base_svc_p10)
        metrics.update({"service_baseline_ms": worst.base_svc_p10, "tail_service_min_ms": worst.tail_svc_min,
                        "tail_service_max_ms": worst.tail_svc_max, "service_excess_ms": excess,
                        "tail_prompt_len_p50": worst.tail_len_p50, "other_prompt_len_max": worst.fast_len_max})
        lens = ""
        if not pd.isna(worst.tail_len_min) and not pd.isna(worst.fast_len_max):
            unit = "tokens" if worst.len_in_tokens else "characters"
            lens = (f" Their prompts are about as long as the others' ({_range(worst.tail_len_min, worst.tail_len_max)}"
                    f" vs {_range(worst.fast_len_min, worst.fast_len_max)} {unit}), so prefill does not explain it.")
        waited = int(ep["waited"].sum())
        queue = (f" None of the {model} requests queued (queue_ms ≈ 0): capacity was not the problem."
                 if worst.queue_n and waited == 0 else "")
        evidence = (f"{tail_n} of {n} requests to {model} took {_range(worst.tail_svc_min, worst.tail_svc_max)} ms "
                    f"of service against a baseline of {_ms(worst.base_svc_p10)} (its fastest tenth): "
                    f"service_ms is about {_ms(excess)} over its baseline.{lens}{queue} A decode long tail"
                    + (" (the logs have service_ms only, no prefill/decode split)." if pd.isna(worst.tpot_p50) else "."))
        severity = "critical" if excess >= 1000 or tail_n / n >= 0.2 else "warning"
    action = (f"Find what lengthens {model}'s decode (long generations, KV-cache pressure, a slow node): cap "
              "max output tokens or rate-limit long requests; watch decode tokens/s against concurrency.")
    return Finding("decode", model, severity, evidence, action, metrics)


def _prefill_finding(con, f, model, ep, worst, start, end) -> Finding:
    n = int(ep["n"].sum())
    if not pd.isna(worst.prefill_per_tok_p50):
        metrics = {"requests": n, "prefill_ms_per_token_p50": worst.prefill_per_tok_p50,
                   "prefill_ms_per_token_baseline": worst.base_prefill_per_tok}
        evidence = (f"{_span(start, end, len(ep))}: prefill of {model} took {worst.prefill_per_tok_p50:,.3f} ms per "
                    f"prompt token (median) vs {worst.base_prefill_per_tok:,.3f} ms usually: prefill-bound.")
    else:
        metrics = {"requests": n, "slow_requests": int(ep["tail_n"].sum()), "slow_prompt_len_p50": worst.tail_len_p50,
                   "fast_prompt_len_p90": worst.fast_len_p90, "service_baseline_ms": worst.base_svc_p10}
        evidence = (f"{int(ep['tail_n'].sum())} of {n} requests to {model} were slow (service up to "
                    f"{_ms(worst.tail_svc_max)} vs {_ms(worst.base_svc_p10)} baseline) and they are the long "
                    f"prompts: median length {worst.tail_len_p50:,.0f} vs {worst.fast_len_p90:,.0f} for 90 % of "
                    "the fast ones: prefill-bound (long context).")
    action = (f"Route long prompts away from {model} or give them a separate pool; use prefix caching and "
              "chunked prefill; cap the context length.")
    return Finding("prefill", model, "warning", evidence, action, metrics)


def _tail_finding(con, f, model, ep, worst, start, end) -> Finding:
    where, params = f.where()
    trace = con.execute(
        f"SELECT ts, total_ms, route_ms, queue_ms, prefill_ms, decode_ms, service_ms, replica FROM requests "
        f"WHERE {where} AND model = ? AND ts >= ? AND ts < ? AND total_ms IS NOT NULL "
        f"ORDER BY total_ms DESC LIMIT 1", params + [model, start, end]).fetchall()
    parts = ""
    if trace:
        t = trace[0]
        segs = [(name, v) for name, v in (("route", t[2]), ("queue", t[3]), ("prefill", t[4]), ("decode", t[5]),
                                          ("service", t[6] if t[4] is None and t[5] is None else None))
                if v is not None]
        segs.append(("unlogged (network, gateway, ...)", t[1] - sum(v for _, v in segs)))
        parts = (f" The slowest request ({t[0]:%H:%M:%S}{', replica ' + t[7] if t[7] else ''}) took {_ms(t[1])}: "
                 + ", ".join(f"{k} {_ms(v)}" for k, v in segs) + ".")
    metrics = {"requests": int(ep["n"].sum()), "total_p50_ms": worst.total_p50, "total_p99_ms": worst.total_p99,
               "typical_total_p50_ms": worst.typ_total_p50, "typical_total_p99_ms": worst.typ_total_p99}
    usual = f", {worst.total_p99 / worst.typ_total_p99:,.1f}× its usual P99" if worst.windows >= MIN_HISTORY else ""
    evidence = (f"{_span(start, end, len(ep))}: {model}'s median is normal ({_ms(worst.total_p50)}) but P99 spikes "
                f"to {_ms(worst.total_p99)} ({worst.total_p99 / worst.total_p50:,.0f}× the median{usual}), with no "
                f"queue or decode pattern behind it.{parts}")
    action = ("Pull the P99 requests' traces segment by segment: GC pauses, preemption, one oversized request or "
              "a bad node (compare replicas).")
    return Finding("tail", model, "warning", evidence, action, metrics)


def _routing_finding(con, f, model, ep, worst, start, end) -> Finding:
    metrics = {"requests": int(ep["all_requests"].sum()), "cache_hit_rate": worst.hit_rate,
               "typical_cache_hit_rate": worst.typ_hit_rate}
    evidence = (f"{_span(start, end, len(ep))}: the semantic cache served {worst.hit_rate:.1%} of {model}'s requests "
                f"against {worst.typ_hit_rate:.1%} in a typical window: the cache stopped hitting, so the model "
                "took the load.")
    action = "Check the semantic cache (eviction, a deploy that changed keys or embeddings, TTL) before adding capacity."
    return Finding("routing", model, "warning", evidence, action, metrics)


@dataclass(frozen=True)
class Rule:
    """One row of the playbook: which windows it flags, how a flagged span reads, what to do."""
    name: str
    layer: str
    symptom: str
    flag: Callable[[object], bool]
    worst: str                  # the window metric whose maximum picks the episode's worst window
    describe: Callable[..., Finding]


RULES: tuple[Rule, ...] = (
    Rule("cache_collapse", "routing", "slow requests concentrate on a model: the cache stopped hitting",
         _routing_flag, "all_requests", _routing_finding),
    Rule("queue_bound", "queue", "high TTFT, fast per token: batch wait / queue build-up (ρ → 1)",
         _queue_flag, "queue_p95", _queue_finding),
    Rule("prefill_bound", "prefill", "long prompts slow, short ones fast: prefill-bound",
         _prefill_flag, "tail_share", _prefill_finding),
    Rule("decode_tail", "decode", "long outputs slow: decode-bound / a decode long tail",
         _decode_flag, "tail_share", _decode_finding),
    Rule("tail_spike", "tail", "median normal, P99 spikes: GC / preemption / an outlier request / a bad node",
         _tail_flag, "total_p99", _tail_finding),
)


def diagnose(con: duckdb.DuckDBPyConnection, f: Filters | None = None, window: str = "hour") -> list[Finding]:
    """Every rule over every model and window; adjacent flagged windows merge into one finding.

    Findings are ordered by severity, then layer (routing → tail), then time.
    """
    f = f or Filters()
    m = window_metrics(con, f, window)
    if m.empty:
        return []
    step = WINDOWS[window]
    found: list[tuple] = []
    for rule in RULES:
        flags = np.array([bool(rule.flag(r)) for r in m.itertuples(index=False)], dtype=bool)
        hit = m[flags]
        for model, g in hit.groupby("model", sort=True):
            g = g.sort_values("window_start")
            starts = list(g["window_start"])
            group_id = np.cumsum([True] + [b - a != step for a, b in zip(starts, starts[1:], strict=False)])
            for _, ep in g.groupby(group_id):
                worst = ep.loc[ep[rule.worst].astype(float).idxmax()] if ep[rule.worst].notna().any() else ep.iloc[0]
                start, end = ep["window_start"].iloc[0], ep["window_start"].iloc[-1] + step
                finding = rule.describe(con, f, model, ep, worst, start, end)
                finding.metrics.update({"rule": rule.name, "window_start": start, "window_end": end,
                                        "windows": len(ep)})
                found.append((SEVERITIES.index(finding.severity), LAYERS.index(finding.layer), start, finding))
    found.sort(key=lambda t: t[:3])
    return [t[-1] for t in found]


def _plain(v):
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, pd.Timestamp):
        return v.isoformat()
    return v


def as_json(findings: list[Finding]) -> dict:
    """``{"findings": [{"layer", "model", "severity", "evidence", "action", "metrics"}]}``, JSON-ready."""
    return {"findings": [{**{k: v for k, v in fd.as_dict().items() if k != "metrics"},
                          "metrics": {k: _plain(v) for k, v in fd.metrics.items()}} for fd in findings]}


def findings_frame(con: duckdb.DuckDBPyConnection, f: Filters | None = None, window: str = "hour") -> pd.DataFrame:
    """The findings as a table (for pages): severity, layer, model, window_start, window_end, evidence, action."""
    rows = [{"severity": fd.severity, "layer": fd.layer, "model": fd.model,
             "window_start": fd.metrics.get("window_start"), "window_end": fd.metrics.get("window_end"),
             "evidence": fd.evidence, "action": fd.action} for fd in diagnose(con, f, window)]
    return pd.DataFrame(rows, columns=["severity", "layer", "model", "window_start", "window_end", "evidence",
                                       "action"])
