"""Cascade thresholds: the cost-quality curve, its Pareto frontier and the cheapest safe tau.

A cascade sends every query to the small model first and escalates it to the
large model when the small model's confidence is under the threshold tau.
For n queries with confidence ``conf_i``, small-model quality ``qs_i``,
large-model quality ``ql_i`` (0/1 correctness or any score) and costs
``cs_i``, ``cl_i`` (per query, or one flat price per model):

* escalation_rate(tau) = (1/n) * #{i : conf_i < tau}
* avg_cost(tau)        = mean(cs) + (1/n) * sum_{conf_i < tau} cl_i
  (flat prices: ``c_small + escalation_rate * c_large``: the cascade always
  pays the small attempt, as in the seed's ``1 + 0.6 * 8 = 5.8``)
* avg_quality(tau)     = (1/n) * (sum_{conf_i >= tau} qs_i + sum_{conf_i < tau} ql_i)

:func:`sweep` evaluates every distinct confidence value as tau, plus one tau
just above the largest value (escalate everything). The lowest distinct value
is the "never escalate" end (nothing is below it), so tau = -inf needs no
row of its own and every threshold stays a finite number.

Everything else works on the resulting curve (a DataFrame with columns
``threshold, escalation_rate, avg_cost, avg_quality``), whether it came from
eval data or from the seed's parametric table (:func:`parametric_curve`):
:func:`pareto_frontier`, :func:`upper_hull`, :func:`cheapest_meeting`,
:func:`marginal_table` and the RouteLLM metrics in :func:`routing_metrics`.
:func:`analyse` and :func:`analyse_curve` bundle them into one
:class:`CascadeReport`, which both the page and the CLI use.

Costs are in whatever unit the caller gives (USD per query, or USD per 1,000
queries as in the seed); every cost output is in that same unit.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from finops.errors import InputError
from finops.ingest import uploads

CURVE_COLUMNS: tuple[str, ...] = ("threshold", "escalation_rate", "avg_cost", "avg_quality")
QUALITY_TOLERANCE = 1e-12
"""Absolute slack when comparing a quality with a floor (0.93 must meet a 0.93 floor)."""


# ----------------------------------------------------------------------------------------
# typed results
# ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CascadePoint:
    """One operating point of the cascade (one row of the curve)."""

    threshold: float
    escalation_rate: float
    avg_cost: float
    avg_quality: float

    def as_dict(self) -> dict[str, float]:
        return {name: float(getattr(self, name)) for name in CURVE_COLUMNS}


@dataclass(frozen=True)
class RoutingMetrics:
    """RouteLLM-style summary of a curve (Ong et al., "RouteLLM", 2024).

    ``cpt50``/``cpt80`` are shares of queries sent to the large model (0-1,
    like ``escalation_rate``), not percentages. A metric is ``None`` when it
    cannot be computed; ``note`` says why.
    """

    apgr: float | None
    cpt50: float | None
    cpt80: float | None
    quality_small: float | None
    quality_large: float | None
    note: str = ""

    def as_dict(self) -> dict[str, float | None]:
        return {"apgr": self.apgr, "cpt50": self.cpt50, "cpt80": self.cpt80}


@dataclass(frozen=True)
class Baseline:
    """A reference policy: share of queries that call the large model, its mean cost and quality."""

    name: str
    large_call_rate: float
    avg_cost: float
    avg_quality: float


@dataclass(frozen=True)
class Baselines:
    """Reference policies to draw next to the cascade curve.

    * ``small_only``: never escalate.
    * ``direct_to_large``: send everything to the large model, no small attempt
      (cost ``mean(cl)``).
    * ``oracle_cascade``: the perfect confidence signal: escalate exactly the
      queries where the large model is better (``ql > qs``, i.e. small wrong and
      large right for 0/1 data); priced like the cascade (small always paid).
    * ``oracle_router``: the same choice made *before* calling the small model
      (RouteLLM's "optimal" router): routed queries pay only the large price.
    * ``random_routing``: escalate a random share r of queries: quality
      ``q_small + r (q_large - q_small)`` and cost ``mean(cs) + r mean(cl)``, a
      straight line (the PGR of random routing is r, so its APGR is 0.5). With
      ``router`` (an eval with no confidence, so no cascade: the small attempt is
      not made for the share sent on) the cost is ``(1 - r) mean(cs) + r mean(cl)``,
      the segment from small only to direct to large (RouteLLM's random router).
    """

    small_only: Baseline
    direct_to_large: Baseline
    oracle_cascade: Baseline
    oracle_router: Baseline
    random_routing: pd.DataFrame
    router: bool = False

    def random_at(self, rate: float) -> Baseline:
        """The random policy sending share ``rate`` (0-1) of requests to the large model, exactly."""
        lo, hi = self.small_only, self.direct_to_large
        small_paid = lo.avg_cost * (1 - rate if self.router else 1)
        return Baseline("random routing", rate, small_paid + rate * hi.avg_cost,
                        lo.avg_quality + rate * (hi.avg_quality - lo.avg_quality))

    def cheapest_meeting(self, floor: float) -> Baseline | None:
        """The cheapest policy needing no signal (the small model alone, a random share to the large model, the
        large model alone) whose quality is at least ``floor``; ``None`` when neither model reaches it.

        >>> b = baselines([1, 0, 1, 0], [1, 1, 0, 1], 1.0, 8.0, router=True)     # small 50 %, large 75 %
        >>> p = b.cheapest_meeting(0.6)
        >>> (p.name, round(p.large_call_rate, 6), round(p.avg_cost, 6))
        ('random routing', 0.4, 3.8)
        >>> b.cheapest_meeting(0.5).name, b.cheapest_meeting(0.8)
        ('small only', None)
        """
        q_lo, q_hi = self.small_only.avg_quality, self.direct_to_large.avg_quality
        options = [b for b in (self.small_only, self.direct_to_large) if b.avg_quality >= floor - QUALITY_TOLERANCE]
        if q_lo < floor <= q_hi:
            options.append(self.random_at((floor - q_lo) / (q_hi - q_lo)))
        return min(options, key=lambda b: b.avg_cost, default=None)

    def router_can_reach(self, floor: float) -> bool:
        """Whether any router could meet ``floor`` on these queries: the oracle router's quality is the ceiling."""
        return floor <= self.oracle_router.avg_quality + QUALITY_TOLERANCE

    def as_frame(self) -> pd.DataFrame:
        rows = [self.small_only, self.direct_to_large, self.oracle_cascade, self.oracle_router]
        return pd.DataFrame([vars(b) for b in rows])


@dataclass(frozen=True)
class CascadeReport:
    """Everything the cascade page and CLI show for one data set."""

    curve: pd.DataFrame
    frontier: pd.DataFrame
    hull: pd.DataFrame
    choice: CascadePoint | None
    quality_floor: float | None
    metrics: RoutingMetrics
    baselines: Baselines | None = None

    def to_json_dict(self) -> dict:
        """The CLI's JSON: exactly ``curve``, ``frontier``, ``choice`` and ``metrics``."""
        return {
            "curve": _records(self.curve),
            "frontier": _records(self.frontier),
            "choice": self.choice.as_dict() if self.choice is not None else None,
            "metrics": self.metrics.as_dict(),
        }


# ----------------------------------------------------------------------------------------
# input validation
# ----------------------------------------------------------------------------------------
#: the largest magnitude of a confidence, quality or cost of one query: the curve's sums over millions of
#: queries stay finite (a cost of 1e308 per call averaged to inf); an eval file's reading names the row
MAX_ABS_VALUE = uploads.MAX_ABS_VALUE


def _vector(name: str, values, n: int | None = None) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError("values must be numbers", field=name) from None
    if arr.ndim != 1:
        raise InputError(f"expected one value per query, got an array of shape {arr.shape}", field=name)
    if n is not None and arr.size != n:
        raise InputError(f"has {arr.size} values but confidence has {n}", field=name)
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InputError(f"value {arr[bad]!r} at position {bad} is not a finite number", field=name)
    if (np.abs(arr) > MAX_ABS_VALUE).any():
        bad = int(np.flatnonzero(np.abs(arr) > MAX_ABS_VALUE)[0])
        raise InputError(f"value {arr[bad]:,.6g} at position {bad} is past {MAX_ABS_VALUE:,.0f}", field=name)
    return arr


def _cost(name: str, cost, n: int) -> float | np.ndarray:
    if np.ndim(cost) == 0:
        try:
            value = float(cost)
        except (TypeError, ValueError):
            raise InputError(f"{cost!r} is not a number", field=name) from None
        if not np.isfinite(value) or value < 0:
            raise InputError(f"must be a finite cost >= 0, got {value!r}", field=name)
        if value > MAX_ABS_VALUE:
            raise InputError(f"must be a cost of at most {MAX_ABS_VALUE:,.0f} a call, got {value:,.6g}", field=name)
        return value
    arr = _vector(name, cost, n)
    if (arr < 0).any():
        neg = int(np.flatnonzero(arr < 0)[0])
        raise InputError(f"cost {arr[neg]!r} at position {neg} is negative", field=name)
    return arr


def _validate(confidence, small_quality, large_quality, cost_small, cost_large):
    conf = _vector("confidence", confidence) + 0.0  # a copy, with -0.0 turned into 0.0 (they group together)
    n = conf.size
    if n == 0:
        raise InputError("no queries: the sweep needs at least one row", field="confidence")
    if np.nextafter(conf.max(), np.inf) == np.inf:
        raise InputError("confidence values must be below the largest float", field="confidence")
    qs = _vector("small_quality", small_quality, n)
    ql = _vector("large_quality", large_quality, n)
    return conf, qs, ql, _cost("cost_small", cost_small, n), _cost("cost_large", cost_large, n)


def _records(frame: pd.DataFrame) -> list[dict[str, float]]:
    cols = [frame[c].to_numpy(dtype=float) for c in CURVE_COLUMNS]
    return [dict(zip(CURVE_COLUMNS, map(float, row), strict=True)) for row in zip(*cols, strict=True)]


def _point(row) -> CascadePoint:
    return CascadePoint(*(float(row[c]) for c in CURVE_COLUMNS))


# ----------------------------------------------------------------------------------------
# the sweep
# ----------------------------------------------------------------------------------------
def _group_by_confidence(conf: np.ndarray, weights: list[np.ndarray], method: str):
    """Distinct confidences in ascending order, their counts and per-value weight sums.

    ``sort``: one argsort, then ``np.add.reduceat`` over runs of equal values.
    ``hash``: ``pd.factorize`` (O(n)) and ``np.bincount``; only the m distinct
    values are sorted (O(m log m)). Both are exact; ``auto`` picks ``hash``
    when a strided sample shows many repeated values (rounded or discrete
    confidences), where it is several times faster.
    """
    n = conf.size
    if method == "auto":
        sample = conf[:: max(1, n // 4096)]
        method = "hash" if n > 4096 and np.unique(sample).size <= sample.size // 4 else "sort"
    if method == "hash":
        codes, uniques = pd.factorize(conf, sort=False)
        order = np.argsort(uniques, kind="stable")
        m = uniques.size
        counts = np.bincount(codes, minlength=m)[order]
        sums = [np.bincount(codes, weights=w, minlength=m)[order] for w in weights]
        return np.asarray(uniques)[order], counts, sums
    if method != "sort":
        raise ValueError(f"unknown method {method!r}: use 'auto', 'sort' or 'hash'")
    order = np.argsort(conf)  # stability is not needed: equal values are summed together
    c = conf[order]
    starts = np.flatnonzero(np.concatenate(([True], c[1:] != c[:-1])))
    counts = np.diff(np.append(starts, n))
    sums = [np.add.reduceat(w[order], starts) for w in weights]
    return c[starts], counts, sums


def sweep(confidence, small_quality, large_quality, cost_small, cost_large, *,
          method: Literal["auto", "sort", "hash"] = "auto") -> pd.DataFrame:
    """The cascade's cost-quality curve at every distinct confidence value.

    For the distinct confidences ``u_1 < ... < u_m`` the thresholds are
    ``u_1, ..., u_m`` and ``nextafter(u_m, +inf)``. With ``k_j`` the number of
    queries whose confidence is below ``tau_j`` (so ``k_1 = 0``, the
    never-escalate end, and the last ``k = n``, escalate all)::

        escalation_rate_j = k_j / n
        avg_cost_j        = (sum(cs) + S_cl(j)) / n          S_cl(j) = sum of cl over the k_j
        avg_quality_j     = (sum(qs) + S_gain(j)) / n        S_gain(j) = sum of (ql - qs) over them

    With flat prices ``avg_cost_j = c_small + escalation_rate_j * c_large``.
    The S's are cumulative sums over the queries grouped by confidence, so
    the whole curve costs one sort: O(n log n) (O(n + m log m) by hashing when
    there are few distinct values).

    Parameters are one value per query; ``cost_small`` and ``cost_large`` may
    be scalars (flat price per query) or arrays (per-query cost). Costs must
    be >= 0 and everything finite, else :class:`~finops.errors.InputError`.

    Returns a DataFrame with columns ``threshold, escalation_rate, avg_cost,
    avg_quality``, ascending in threshold (so escalation rate and cost never
    fall from one row to the next).

    >>> curve = sweep([0.9, 0.7, 0.5, 0.3], [1, 0, 1, 0], [1, 1, 0, 1], 1.0, 8.0)
    >>> print(curve.round(4).to_string(index=False))
     threshold  escalation_rate  avg_cost  avg_quality
           0.3             0.00       1.0         0.50
           0.5             0.25       3.0         0.75
           0.7             0.50       5.0         0.50
           0.9             0.75       7.0         0.75
           0.9             1.00       9.0         0.75
    >>> float(curve.threshold.iloc[-1]) > 0.9   # just above the max: escalate all
    True
    """
    conf, qs, ql, cs, cl = _validate(confidence, small_quality, large_quality, cost_small, cost_large)
    n = conf.size
    flat_large = np.ndim(cl) == 0
    weights = [ql - qs] if flat_large else [ql - qs, cl]
    uniq, counts, sums = _group_by_confidence(conf, weights, method)
    escalated = np.concatenate(([0], np.cumsum(counts)))
    gain = np.concatenate(([0.0], np.cumsum(sums[0])))
    thresholds = np.append(uniq, np.nextafter(uniq[-1], np.inf))
    rate = escalated / n
    small_total = float(cs) * n if np.ndim(cs) == 0 else float(cs.sum())
    if flat_large:
        avg_cost = small_total / n + rate * cl
    else:
        avg_cost = (small_total + np.concatenate(([0.0], np.cumsum(sums[1])))) / n
    avg_quality = (qs.sum() + gain) / n
    # copy=False: the arrays are fresh, so keep them as they are (no 2-D block copy at 10M rows)
    return pd.DataFrame({"threshold": thresholds, "escalation_rate": rate,
                         "avg_cost": avg_cost, "avg_quality": avg_quality}, copy=False)


def sweep_reference(confidence, small_quality, large_quality, cost_small, cost_large,
                    thresholds=None) -> pd.DataFrame:
    """Brute force, O(n * T): recompute every metric from scratch at each threshold.

    The definition in code, for tests and the benchmark. ``thresholds``
    defaults to the same ones :func:`sweep` uses.

    >>> sweep_reference([0.9, 0.3], [1, 0], [1, 1], 1.0, 8.0, thresholds=[0.5]).avg_cost.tolist()
    [5.0]
    """
    conf, qs, ql, cs, cl = _validate(confidence, small_quality, large_quality, cost_small, cost_large)
    if thresholds is None:
        uniq = np.unique(conf)
        thresholds = np.append(uniq, np.nextafter(uniq[-1], np.inf))
    cs = np.broadcast_to(cs, conf.shape)
    cl = np.broadcast_to(cl, conf.shape)
    rows = []
    for tau in np.asarray(thresholds, dtype=float):
        up = conf < tau
        rows.append((tau, up.mean(), (cs + np.where(up, cl, 0.0)).mean(), np.where(up, ql, qs).mean()))
    return pd.DataFrame(rows, columns=list(CURVE_COLUMNS))


# ----------------------------------------------------------------------------------------
# parametric mode (no data): the seed's table
# ----------------------------------------------------------------------------------------
SEED_COST_SMALL_PER_1K_USD = 1.0
SEED_COST_LARGE_PER_1K_USD = 8.0


def example_table() -> pd.DataFrame:
    """The seed's worked table (000_b5db6f0ad1bec1d3.txt, problem 1): tau -> escalation share, quality.

    Editable: the page hands a copy to the user and passes it to
    :func:`parametric_curve`. With $1 and $8 per 1,000 queries the seed gets
    5.8, 3.4 and 1.96 $ per 1,000. (The seed's prose then calls the tau = 0.80
    point "3.1 美元"; its own formula and table say 1 + 0.3 * 8 = 3.4, a typo in
    the prose. We reproduce 3.4.)
    """
    return pd.DataFrame({"threshold": [0.95, 0.80, 0.65],
                         "escalation_rate": [0.60, 0.30, 0.12],
                         "avg_quality": [0.96, 0.93, 0.88]})


def parametric_curve(table: pd.DataFrame, cost_small: float = SEED_COST_SMALL_PER_1K_USD,
                     cost_large: float = SEED_COST_LARGE_PER_1K_USD) -> pd.DataFrame:
    """A curve from a hand-made table of ``threshold, escalation_rate, avg_quality``.

    ``avg_cost = cost_small + escalation_rate * cost_large`` (flat prices), so the
    result has the same columns and order as :func:`sweep` and every other
    function here applies to it.

    >>> parametric_curve(example_table()).round(2).avg_cost.tolist()
    [1.96, 3.4, 5.8]
    """
    missing = [c for c in ("threshold", "escalation_rate", "avg_quality") if c not in table.columns]
    if missing:
        raise InputError(f"the table needs columns threshold, escalation_rate, avg_quality; missing {missing}")
    if len(table) == 0:
        raise InputError("the table has no rows")
    values = {}
    for col in ("threshold", "escalation_rate", "avg_quality"):
        arr = pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise InputError(f"{table[col].iloc[bad[0]]!r} is not a number", row=int(bad[0]) + 1, field=col)
        values[col] = arr
    rate = values["escalation_rate"]
    bad = np.flatnonzero((rate < 0) | (rate > 1))
    if bad.size:
        raise InputError(f"escalation rate {rate[bad[0]]} is outside 0..1 (a share, not a percentage)",
                         row=int(bad[0]) + 1, field="escalation_rate")
    cs = _cost("cost_small", cost_small, 1)
    cl = _cost("cost_large", cost_large, 1)
    curve = pd.DataFrame({"threshold": values["threshold"], "escalation_rate": rate,
                          "avg_cost": cs + rate * cl, "avg_quality": values["avg_quality"]})
    curve = curve.sort_values(["threshold", "escalation_rate"], kind="mergesort").reset_index(drop=True)
    falls = np.flatnonzero(np.diff(curve.escalation_rate.to_numpy()) < 0)
    if falls.size:
        lo, hi = curve.threshold.iloc[falls[0]], curve.threshold.iloc[falls[0] + 1]
        raise InputError(f"escalation rate falls as tau rises from {lo} to {hi}; a higher tau "
                         "escalates at least as many queries", field="escalation_rate")
    return curve


# ----------------------------------------------------------------------------------------
# frontier, hull, choice, marginal cost
# ----------------------------------------------------------------------------------------
def pareto_frontier(curve: pd.DataFrame) -> pd.DataFrame:
    """The non-dominated points, ascending in cost (and so strictly ascending in quality).

    A point is dominated when another has ``avg_cost <=`` and ``avg_quality >=``
    with at least one strict. Sort by cost ascending, quality descending; a
    point survives iff its quality beats every cheaper-or-equal point before it.
    Exact duplicates collapse to the one with the lowest escalation rate.

    >>> pareto_frontier(sweep([0.9, 0.7, 0.5, 0.3], [1, 0, 1, 0], [1, 1, 0, 1], 1.0, 8.0)).avg_cost.tolist()
    [1.0, 3.0]
    """
    ordered = curve.sort_values(["avg_cost", "avg_quality", "escalation_rate"],
                                ascending=[True, False, True], kind="mergesort")
    q = ordered["avg_quality"].to_numpy(dtype=float)
    best_before = np.maximum.accumulate(np.concatenate(([-np.inf], q[:-1])))
    return ordered.loc[q > best_before, list(CURVE_COLUMNS)].reset_index(drop=True)


def upper_hull(curve: pd.DataFrame) -> pd.DataFrame:
    """Vertices of the upper convex hull of the frontier (quality as a concave function of cost).

    Points between two hull vertices can be beaten by mixing those two
    thresholds at random. Monotone chain over the frontier: drop the middle of
    three points when it lies on or below the chord of its neighbours, i.e.
    when ``(x2-x1)(y3-y1) - (y2-y1)(x3-x1) >= 0``.

    >>> upper_hull(pd.DataFrame({"threshold": [1, 2, 3], "escalation_rate": [0, .5, 1],
    ...                          "avg_cost": [1., 2., 3.], "avg_quality": [.5, .55, .9]})).avg_cost.tolist()
    [1.0, 3.0]
    """
    front = pareto_frontier(curve)
    x = front["avg_cost"].to_numpy(dtype=float)
    y = front["avg_quality"].to_numpy(dtype=float)
    keep: list[int] = []
    for i in range(len(front)):
        while len(keep) >= 2:
            a, b = keep[-2], keep[-1]
            if (x[b] - x[a]) * (y[i] - y[a]) - (y[b] - y[a]) * (x[i] - x[a]) >= 0:
                keep.pop()
            else:
                break
        keep.append(i)
    return front.iloc[keep].reset_index(drop=True)


def cheapest_meeting(curve: pd.DataFrame, quality_floor: float) -> CascadePoint | None:
    """The cheapest point whose ``avg_quality >= quality_floor`` (ties: higher quality,
    then lower escalation rate); ``None`` when no threshold meets the floor.

    >>> curve = parametric_curve(example_table())
    >>> cheapest_meeting(curve, 0.90)
    CascadePoint(threshold=0.8, escalation_rate=0.3, avg_cost=3.4, avg_quality=0.93)
    >>> cheapest_meeting(curve, 0.99) is None
    True
    """
    floor = float(quality_floor)
    if not np.isfinite(floor):
        raise InputError(f"quality floor must be a finite number, got {quality_floor!r}", field="quality_floor")
    ok = curve[curve["avg_quality"] >= floor - QUALITY_TOLERANCE]
    if ok.empty:
        return None
    best = ok.sort_values(["avg_cost", "avg_quality", "escalation_rate"],
                          ascending=[True, False, True], kind="mergesort").iloc[0]
    return _point(best)


def default_floor(curve: pd.DataFrame, step: float = 0.005) -> tuple[float, str]:
    """A quality floor that the data can meet, and how it was chosen: halfway between the lowest and the
    highest quality any threshold reaches on ``curve``, rounded down to ``step`` (0.5 %), so the cheapest
    threshold meeting it sits inside the curve rather than at either end.

    >>> default_floor(parametric_curve(example_table()))[0]
    0.92
    """
    q = pd.to_numeric(curve["avg_quality"], errors="coerce").dropna() if len(curve) else pd.Series(dtype=float)
    if q.empty:
        return 0.9, "no curve to choose from: 90 %, a common starting point"
    lo, hi = float(q.min()), float(q.max())
    floor = min(math.floor(((lo + hi) / 2 + 1e-12) / step) * step, hi)
    return round(floor, 6), (f"halfway between the lowest ({lo:.1%}) and the highest ({hi:.1%}) quality any "
                             f"threshold reaches on this data, rounded down to {step:.1%}")


def marginal_table(curve: pd.DataFrame, *, points_per_quality_unit: float = 100.0) -> pd.DataFrame:
    """The seed's table: frontier points from the highest tau down, with the marginal
    cost of quality between each point and the one above it::

        marginal_cost_per_point_j = (avg_cost_{j-1} - avg_cost_j)
                                    / ((avg_quality_{j-1} - avg_quality_j) * points_per_quality_unit)

    in cost units per quality point (a percentage point when quality is 0-1,
    hence the default 100). The first row has no predecessor: NaN, shown as
    "-". On the frontier both differences are > 0, so no value is infinite.

    >>> marginal_table(parametric_curve(example_table())).marginal_cost_per_point.round(3).tolist()
    [nan, 0.8, 0.288]
    """
    front = pareto_frontier(curve).iloc[::-1].reset_index(drop=True)
    d_cost = -front["avg_cost"].diff()
    d_quality = -front["avg_quality"].diff() * float(points_per_quality_unit)
    front["marginal_cost_per_point"] = d_cost / d_quality
    return front


# ----------------------------------------------------------------------------------------
# RouteLLM metrics and baselines
# ----------------------------------------------------------------------------------------
def pgr(avg_quality, quality_small: float, quality_large: float) -> np.ndarray:
    """Performance gap recovered: ``(q - q_small) / (q_large - q_small)``; NaN where the gap is 0.

    >>> pgr([0.5, 0.6, 0.75], 0.5, 0.75).round(6).tolist()
    [0.0, 0.4, 1.0]
    """
    gap = float(quality_large) - float(quality_small)
    q = np.asarray(avg_quality, dtype=float)
    if gap == 0:
        return np.full(q.shape, np.nan)
    return (q - float(quality_small)) / gap


def pgr_at_cost(curve: pd.DataFrame, cost: float, quality_small: float, quality_large: float) -> float | None:
    """PGR of the best threshold whose average cost is within ``cost``; ``None`` when none is.

    >>> round(pgr_at_cost(parametric_curve(example_table()), 4.0, 0.80, 0.96), 6)   # (0.93-0.80)/(0.96-0.80)
    0.8125
    """
    ok = curve[curve["avg_cost"] <= float(cost)]
    if ok.empty:
        return None
    value = pgr([ok["avg_quality"].max()], quality_small, quality_large)[0]
    return None if np.isnan(value) else float(value)


def call_performance_threshold(rates, pgr_values, target: float) -> float | None:
    """CPT(target): the smallest large-call share at which PGR reaches ``target``.

    Between adjacent points the curve is linear (mixing two thresholds at
    random), so the answer is the first crossing, interpolated::

        r = r_{j-1} + (target - p_{j-1}) / (p_j - p_{j-1}) * (r_j - r_{j-1})

    for the first j with ``p_j >= target``. RouteLLM's ``np.interp`` gives the
    same on a monotone curve. ``None`` if the curve never reaches the target.
    A PGR within 1e-12 of the target counts as reaching it: qualities like
    986/1319 hit a 50% target exactly, and rounding must not skip that point.

    >>> call_performance_threshold([0, .25, .5], [0, 1, 0], 0.5)
    0.125
    """
    r = np.asarray(rates, dtype=float)
    p = np.asarray(pgr_values, dtype=float)
    hit = np.flatnonzero(p >= target - QUALITY_TOLERANCE)
    if hit.size == 0:
        return None
    j = int(hit[0])
    if j == 0:
        return float(r[0])
    frac = min(1.0, max(0.0, (target - p[j - 1]) / (p[j] - p[j - 1])))
    return float(r[j - 1] + frac * (r[j] - r[j - 1]))


def routing_metrics(curve: pd.DataFrame, *, quality_small: float | None = None,
                    quality_large: float | None = None) -> RoutingMetrics:
    """APGR, CPT(50%) and CPT(80%) of a curve, with the large-call share as the x axis.

    * ``PGR_j = (q_j - q_small) / (q_large - q_small)``
    * ``APGR = sum_j (PGR_j + PGR_{j-1}) / 2 * (r_j - r_{j-1})`` (trapezoids over the
      escalation rate r from 0 to 1; RouteLLM's definition, random routing scores 0.5)
    * ``CPT(x)``: :func:`call_performance_threshold`.

    ``q_small``/``q_large`` default to the curve's own ends (rate 0 and rate 1,
    which a :func:`sweep` always has). When given, they are added as those end
    points if the curve lacks them (a parametric table). Metrics are ``None``
    when an end is unknown or the large model is not better than the small one.

    >>> m = routing_metrics(sweep([0.9, 0.7, 0.5, 0.3], [1, 0, 1, 0], [1, 1, 0, 1], 1.0, 8.0))
    >>> (m.apgr, m.cpt50, m.cpt80)
    (0.625, 0.125, 0.2)
    """
    c = curve.sort_values(["escalation_rate", "threshold"], kind="mergesort")
    r = c["escalation_rate"].to_numpy(dtype=float)
    q = c["avg_quality"].to_numpy(dtype=float)
    if quality_small is None:
        quality_small = float(q[0]) if r.size and r[0] == 0 else None
    elif not (r.size and r[0] == 0):
        r, q = np.concatenate(([0.0], r)), np.concatenate(([float(quality_small)], q))
    if quality_large is None:
        quality_large = float(q[-1]) if r.size and r[-1] == 1 else None
    elif not (r.size and r[-1] == 1):
        r, q = np.append(r, 1.0), np.append(q, float(quality_large))
    if quality_small is None or quality_large is None:
        return RoutingMetrics(None, None, None, quality_small, quality_large,
                              "the curve needs its ends (escalation rate 0 and 1) or explicit "
                              "small-only and large-only qualities")
    if quality_large <= quality_small:
        return RoutingMetrics(None, None, None, quality_small, quality_large,
                              "the large model is not better than the small one: no gap to recover")
    p = pgr(q, quality_small, quality_large)
    apgr = float(np.sum((p[1:] + p[:-1]) / 2 * np.diff(r)))
    return RoutingMetrics(apgr, call_performance_threshold(r, p, 0.5),
                          call_performance_threshold(r, p, 0.8), float(quality_small), float(quality_large))


def baselines(small_quality, large_quality, cost_small, cost_large, *, router: bool = False) -> Baselines:
    """Reference policies for the same queries (see :class:`Baselines`; ``router``: random routing sends its
    share straight to the large model, for an eval with no confidence to run a cascade on).

    >>> b = baselines([1, 0, 1, 0], [1, 1, 0, 1], 1.0, 8.0)
    >>> (b.oracle_cascade.large_call_rate, b.oracle_cascade.avg_cost, b.oracle_cascade.avg_quality)
    (0.5, 5.0, 1.0)
    >>> (b.oracle_router.avg_cost, b.direct_to_large.avg_cost)
    (4.5, 8.0)
    """
    qs = _vector("small_quality", small_quality)
    n = qs.size
    if n == 0:
        raise InputError("no queries", field="small_quality")
    ql = _vector("large_quality", large_quality, n)
    cs = np.broadcast_to(_cost("cost_small", cost_small, n), (n,))
    cl = np.broadcast_to(_cost("cost_large", cost_large, n), (n,))
    better = ql > qs
    q_small, q_large = float(qs.mean()), float(ql.mean())
    rate = float(better.mean())
    oracle_quality = float(np.maximum(qs, ql).mean())
    rates = np.linspace(0.0, 1.0, 11)
    return Baselines(
        small_only=Baseline("small only", 0.0, float(cs.mean()), q_small),
        direct_to_large=Baseline("direct to large", 1.0, float(cl.mean()), q_large),
        oracle_cascade=Baseline("oracle cascade", rate, float(cs.mean() + np.where(better, cl, 0).mean()),
                                oracle_quality),
        oracle_router=Baseline("oracle router", rate, float(np.where(better, cl, cs).mean()), oracle_quality),
        random_routing=pd.DataFrame({"escalation_rate": rates,
                                     "avg_cost": cs.mean() * (1 - rates if router else 1) + rates * cl.mean(),
                                     "avg_quality": q_small + rates * (q_large - q_small)}),
        router=router,
    )


# ----------------------------------------------------------------------------------------
# one call for the page and the CLI
# ----------------------------------------------------------------------------------------
def analyse_curve(curve: pd.DataFrame, *, quality_floor: float | None = None,
                  quality_small: float | None = None, quality_large: float | None = None,
                  base: Baselines | None = None) -> CascadeReport:
    """Frontier, hull, cheapest point meeting ``quality_floor`` and metrics of any curve.

    >>> rep = analyse_curve(parametric_curve(example_table()), quality_floor=0.9)
    >>> rep.choice.avg_cost, len(rep.frontier), rep.metrics.apgr is None
    (3.4, 3, True)
    """
    choice = cheapest_meeting(curve, quality_floor) if quality_floor is not None else None
    return CascadeReport(
        curve=curve[list(CURVE_COLUMNS)].reset_index(drop=True),
        frontier=pareto_frontier(curve),
        hull=upper_hull(curve),
        choice=choice,
        quality_floor=None if quality_floor is None else float(quality_floor),
        metrics=routing_metrics(curve, quality_small=quality_small, quality_large=quality_large),
        baselines=base,
    )


def analyse(confidence, small_quality, large_quality, cost_small, cost_large, *,
            quality_floor: float | None = None) -> CascadeReport:
    """:func:`sweep` the data, then :func:`analyse_curve` it, with :func:`baselines`.

    >>> rep = analyse([0.9, 0.7, 0.5, 0.3], [1, 0, 1, 0], [1, 1, 0, 1], 1.0, 8.0, quality_floor=0.7)
    >>> rep.choice
    CascadePoint(threshold=0.5, escalation_rate=0.25, avg_cost=3.0, avg_quality=0.75)
    >>> sorted(rep.to_json_dict())
    ['choice', 'curve', 'frontier', 'metrics']
    """
    curve = sweep(confidence, small_quality, large_quality, cost_small, cost_large)
    return analyse_curve(curve, quality_floor=quality_floor,
                         base=baselines(small_quality, large_quality, cost_small, cost_large))


# ----------------------------------------------------------------------------------------
# a confidence for RouteLLM's GSM8K responses (the eval CSVs themselves are read by finops.ingest.uploads)
# ----------------------------------------------------------------------------------------
_FINAL_ANSWER = re.compile(r"####\s*[-$]?\$?-?[\d,]*\.?\d+\s*")
_HEDGES = re.compile(r"\b(?:however|actually|but|assum\w*|approximately|round\w*|not possible|can't|cannot|"
                     r"wait|mistake|incorrect|sorry|unclear|not enough|doesn't make sense)\b")
CONFIDENCE_LENGTH_CAP_CHARS = 1000


def confidence_features(responses: Iterable[str]) -> pd.DataFrame:
    """The three visible signals behind :func:`routellm_confidence`, one row per response.

    * ``final_answer``: the last non-empty line is GSM8K's answer format,
      ``#### <number>`` (the response finished and committed to one number);
    * ``hedged``: any hedging or self-correction word ("however", "actually",
      "assume", "approximately", "round", "mistake", ...);
    * ``chars``: response length in characters.
    """
    text = pd.Series(list(responses), dtype=object).fillna("").astype(str)
    last_line = text.str.strip().str.split("\n").str[-1].fillna("")
    return pd.DataFrame({
        "final_answer": last_line.str.fullmatch(_FINAL_ANSWER).fillna(False).astype(bool),
        "hedged": text.str.lower().str.contains(_HEDGES).astype(bool),
        "chars": text.str.len().astype(int),
    })


def routellm_confidence(responses: Iterable[str]) -> np.ndarray:
    """A transparent confidence proxy for a small model's GSM8K answer, from its text alone.

    RouteLLM's files carry correctness but no confidence, so we derive one::

        confidence = 0.5 * final_answer + 0.2 * (not hedged)
                     + 0.3 * (1 - min(chars, 1000) / 1000)

    (see :func:`confidence_features`), rounded to 4 decimals so a CSV round
    trip is exact. The weights are round numbers, not fitted: a finished
    ``#### n`` answer matters most, hedging and long rambling answers lower
    it (other round weights, 0.4-0.6 on the final answer, move the AUC below
    by less than 0.002). No self-consistency sampling, no logprobs. It
    is deterministic and honest rather than good: on the 1,319 GSM8K answers
    of Mixtral-8x7B its AUC for predicting Mixtral's correctness is about 0.68
    (0.5 = useless, 1 = perfect); truncated answers without ``####`` are
    right only about 23% of the time against 70% for finished ones.

    >>> routellm_confidence(["2 + 2 = 4\\n#### 4", "But wait, maybe 5?"]).tolist()
    [0.9952, 0.2946]
    """
    f = confidence_features(responses)
    brevity = 1.0 - np.minimum(f["chars"].to_numpy(), CONFIDENCE_LENGTH_CAP_CHARS) / CONFIDENCE_LENGTH_CAP_CHARS
    score = 0.5 * f["final_answer"].to_numpy() + 0.2 * (~f["hedged"].to_numpy()) + 0.3 * brevity
    return np.round(score.astype(float), 4)
