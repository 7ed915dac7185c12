"""Load test → instances: the per-instance throughput under a P99 target, and the instances a target QPS needs.

The method of the deployment text (002, sections 3 and 5): measure P99 latency against load on
one instance, take the highest throughput whose P99 stays under the target, then
``instances = ⌈target QPS / per-instance QPS⌉``, plus 20–30 % redundancy (:func:`fit_loadtest`).
The load points come from :mod:`finops.ingest.loadtests` (files, or the benchmark runs in the store).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from finops.capacity.calculator import (
    MAX_ARRIVAL_RATE,
    MAX_INSTANCES,
    MAX_TARGET_S,
    check_positive,
    check_whole,
)
from finops.errors import InputError
from finops.fmt import number
from finops.ingest.loadtests import POINT_COLUMNS

__all__ = ["LoadTestFit", "fit_loadtest"]


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
    target_qps = check_positive("target_qps", target_qps, allow_zero=True, most=MAX_ARRIVAL_RATE)
    p99_target_s = check_positive("p99_target_s", p99_target_s, most=MAX_TARGET_S)
    tested = check_whole("instances_tested", instances_tested, 1, most=MAX_INSTANCES)
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
        return done("no_points", "No load points with both a QPS and a P99 latency")
    fails = np.flatnonzero(~pts["meets_target"].to_numpy())
    first_fail = int(fails[0]) if fails.size else None
    if first_fail == 0:
        lo = pts.iloc[0]
        return done("infeasible", f"Even the lightest load tested ({number(lo.qps, 3)} req/s per instance) has P99 "
                                  f"{number(lo.p99_s, 3)} s > {p99_target_s:g} s: no number of instances meets this target. "
                                  "Per-request latency is the limit: a smaller batch, shorter outputs or a faster "
                                  "model, not more replicas.")
    if first_fail is None:
        hi = pts.iloc[-1]
        return done("beyond_range", f"Every load tested met P99 ≤ {p99_target_s:g} s; the highest, "
                                    f"{number(hi.qps, 3)} req/s per instance, is used, so one instance can likely do more "
                                    "and the count errs high. Test heavier loads to find the limit.",
                    float(hi.qps), None if pd.isna(hi.concurrency) else float(hi.concurrency))
    a, b = pts.iloc[first_fail - 1], pts.iloc[first_fail]
    frac = 0.0 if b.p99_s == a.p99_s else (p99_target_s - a.p99_s) / (b.p99_s - a.p99_s)
    qps = float(a.qps + frac * (b.qps - a.qps))
    conc = None
    if not (pd.isna(a.concurrency) or pd.isna(b.concurrency)):
        conc = float(a.concurrency + frac * (b.concurrency - a.concurrency))
    return done("ok", f"P99 crosses {p99_target_s:g} s between {number(a.qps, 3)} and {number(b.qps, 3)} req/s per instance "
                      f"(P99 {number(a.p99_s, 3)} s and {number(b.p99_s, 3)} s): interpolated {number(qps, 3)} req/s.", qps, conc)
