"""The production readiness checklist of section 4 of the deployment text (002), as data.

Each item is checked from the store where the data allows it and is otherwise left for a
person to tick. Ticks live in the ``settings`` table (key ``readiness.ticks``), so they
survive restarts and travel with the store. An item is *done* when the store shows it
(``status == "pass"``) or a person ticked it.

From the store
--------------
* load test done: a benchmark run is recorded (``benchmark_runs``) or a ``vllm-bench`` /
  ``llmperf`` batch was loaded;
* instance plan with 20–30 % redundancy: for each self-hosted model whose fleet the price book sizes
  (``replicas``), that a load test measured (a benchmark run of the model) and that served traffic
  (load-test batches left out), the instances its busiest hour needs at the measured per-instance
  throughput, ``⌈peak QPS / run QPS⌉`` (the fastest run, one instance tested), and the redundancy
  ``replicas / instances − 1``, which must be in [0.2, 0.3] for every such model;
* metrics ready: the logs carry requests, status (error rate), total_ms (P99), service time on a
  self-hosted model (GPU utilisation) and queue_ms (queue length). GPU memory is never in request
  logs, so the item stays "partial" until a person ticks it;
* alert rules configured: SLA targets or rule overrides saved for this store (finops.ops.alerts).

For a person: the cold-start buffer, the canary and rollback plans, auth and rate limits.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb
import pandas as pd

from finops import access, sql, store
from finops.filters import Filters
from finops.fmt import number
from finops.ingest import loadtests
from finops.latency import stats as latency
from finops.ops import alerts

TICKS_KEY = "readiness.ticks"
LOAD_TEST_FORMATS = ("vllm-bench", "llmperf")
REDUNDANCY_BAND = (0.20, 0.30)


@dataclass(frozen=True)
class Check:
    status: str        # pass, fail, partial, manual
    evidence: str


@dataclass(frozen=True)
class Item:
    id: str
    category: str
    item: str
    requirement: str
    check: Callable[[duckdb.DuckDBPyConnection], Check] | None = None   # None: a person decides


def _table_exists(con, name: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchall()[0][0])


def _load_test(con) -> Check:
    runs = 0
    if _table_exists(con, "benchmark_runs"):
        runs = con.execute("SELECT count(*) FROM benchmark_runs").fetchall()[0][0]
    placeholders = ", ".join("?" for _ in LOAD_TEST_FORMATS)
    batches = con.execute(f"SELECT count(*) FROM batches WHERE format IN ({placeholders})",
                          list(LOAD_TEST_FORMATS)).fetchall()[0][0]
    if runs or batches:
        return Check("pass", f"{runs:,} benchmark run(s) and {batches:,} load-test file(s) in the store")
    return Check("fail", "no load test in the store: load a `vllm bench serve` or LLMPerf result on the Data page")


def _plan(con) -> Check:
    fleets = con.execute("SELECT model, replicas FROM prices WHERE kind = 'self_hosted' AND replicas > 0 "
                         "ORDER BY model").fetchall()
    marks = ", ".join("?" for _ in LOAD_TEST_FORMATS)
    peaks = dict(con.execute(f"""
SELECT model, max(served) / 3600.0 FROM (
  SELECT model, hour, sum({sql.served_requests('r')}) AS served FROM rollup_hourly r
  WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.batch_id = r.batch_id AND b.format IN ({marks}))
  GROUP BY ALL)
GROUP BY model""", list(LOAD_TEST_FORMATS)).fetchall())
    points = loadtests.benchmark_points(con)
    plans, lacking = [], []
    for model, replicas in fleets:
        runs = points[(points["model"] == model) & (points["qps"] > 0)]
        if runs.empty or not peaks.get(model):
            lacking.append(f"{model}: no " + ", no ".join(
                what for what, missing in (("load test", runs.empty), ("traffic in this store", not peaks.get(model)))
                if missing))
            continue
        best = runs.loc[runs["qps"].idxmax()]
        instances = math.ceil(peaks[model] / best.qps - 1e-9)
        plans.append((model, int(replicas), instances, int(replicas) / instances - 1, float(best.qps)))
    if not plans:
        # what each fleet lacks, so the person knows what to load (a list of the three needs read as a puzzle)
        why = ("; ".join(lacking[:3]) + (f"; {len(lacking) - 3:,} more" if len(lacking) > 3 else "") if lacking
               else "no self-hosted model has replicas in the price book")
        return Check("manual", f"no plan from this store: {why} (a plan needs replicas in the price book, a load "
                               "test and traffic); tick when the plan exists elsewhere")
    lo, hi = REDUNDANCY_BAND
    what = "; ".join(f"{m}: {r:,} replicas for the {n:,} instances its busiest hour needs at {number(q, 3)} req/s per "
                     f"instance, {red:.0%} redundancy" for m, r, n, red, q in plans)
    if all(lo - 1e-9 <= red <= hi + 1e-9 for _, _, _, red, _ in plans):
        return Check("pass", what)
    return Check("fail", f"{what}; the checklist asks for {lo:.0%}–{hi:.0%}")


METRIC_FIELDS = (  # metric -> (fields any one of which derives it, how)
    ("requests", ("ts",), "one row per request"),
    ("error rate", ("status",), "status"),
    ("P99 latency", ("total_ms",), "total latency"),
    ("GPU utilisation", ("service_ms", "prefill_ms", "decode_ms"), "service time on a self-hosted model"),
    ("queue length", ("queue_ms",), "queue wait, by Little's law"),
)


def _metrics(con) -> Check:
    # counted in what the load writes (the rollups, the served requests' field counts), not over every raw row:
    # the same on a store of attached rollups, and no scan of 100M rows
    if not store.rollup_requests(con):
        return Check("fail", "the store holds no requests")
    cov = latency.coverage(con, Filters())
    have, lack = [], []
    for metric, fields, how in METRIC_FIELDS:
        (have if any(cov.get(x) for x in fields) else lack).append(f"{metric} ({how})")
    self_hosted = con.execute("SELECT count(*) FROM prices WHERE kind = 'self_hosted' AND model IN "
                              "(SELECT DISTINCT model FROM rollup_hourly)").fetchall()[0][0]
    if not self_hosted and "GPU utilisation (service time on a self-hosted model)" in have:
        have.remove("GPU utilisation (service time on a self-hosted model)")
        lack.append("GPU utilisation (no self-hosted model in the logs)")
    text = "from the logs: " + ", ".join(have) + (f"; missing: {', '.join(lack)}" if lack else "") \
        + "; GPU memory is never in request logs: tick once your monitoring shows it"
    return Check("partial", text) if have else Check("fail", text)


def _alerting(con) -> Check:
    active = [r.name for r in alerts.rules(con) if r.enabled]
    if alerts.configured(con):
        sla = alerts.sla_targets(con)
        return Check("pass", f"{len(active)} rules on; P99 SLA per tier saved: "
                             + ", ".join(f"{t} {v:,.0f} ms" for t, v in sla.items()))
    return Check("partial", f"the {len(active)} default rules are evaluated here (error rate > 1%, P99 > 1.5 x SLA, "
                            "GPU > 90% / < 20%, queue growing); save the SLA per tier on the Incidents page to confirm")


CHECKLIST: tuple[Item, ...] = (
    Item("load_test", "Capacity", "Load test done",
         "P50/P99 latency and throughput recorded for different batch sizes and input/output lengths", _load_test),
    Item("instance_plan", "Capacity", "Instance plan",
         "Instances derived from the target QPS and P99, with 20–30% redundancy", _plan),
    Item("cold_start", "Capacity", "Cold-start buffer",
         "Scaling allows for model load time, or standing instances are kept warm"),
    Item("metrics", "Monitoring", "Metrics ready",
         "Requests, error rate, P99 latency, GPU utilisation, GPU memory, queue length", _metrics),
    Item("alerts", "Monitoring", "Alerts configured",
         "Error rate > 1%, P99 above SLA, GPU anomalies trigger alerts", _alerting),
    Item("canary", "Release", "Canary plan", "Shift 5–10% of traffic first; watch 1–2 h before going to 100%"),
    Item("rollback", "Release", "Rollback plan", "The old version is kept and traffic can switch back quickly"),
    Item("auth_rate_limit", "Security", "Auth and rate limits",
         "The API gateway has authentication, an IP allow-list and QPS limits"),
)


def ticks(con: duckdb.DuckDBPyConnection) -> dict[str, dict]:
    return store.get_setting(con, TICKS_KEY, {}) or {}


def tick(con: duckdb.DuckDBPyConnection, item_id: str, ticked: bool = True, note: str = "") -> None:
    """Record a person's tick (or untick) of a checklist item."""
    access.require("edit_settings")
    from finops.errors import InputError

    if item_id not in {i.id for i in CHECKLIST}:
        raise InputError(f"unknown checklist item {item_id}")
    current = ticks(con)
    current[item_id] = {"ticked": bool(ticked), "note": note,
                        "at": datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")}
    store.set_setting(con, TICKS_KEY, current)


def checklist(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """One row per item: id, category, item, requirement, source (store / person), status, evidence,
    ticked, ticked_at, note, done."""
    t = ticks(con)
    rows = []
    for it in CHECKLIST:
        c = it.check(con) if it.check else Check("manual", "a person confirms this")
        mark = t.get(it.id, {})
        ticked = bool(mark.get("ticked"))
        rows.append({"id": it.id, "category": it.category, "item": it.item, "requirement": it.requirement,
                     "source": "store" if it.check else "person", "status": c.status, "evidence": c.evidence,
                     "ticked": ticked, "ticked_at": mark.get("at") if ticked else None,
                     "note": mark.get("note", ""), "done": c.status == "pass" or ticked})
    return pd.DataFrame(rows)
