"""Benchmark: the cascade sweep (one sort + cumulative sums) against a naive per-threshold loop.

    python bench/cascade.py [--queries-large 10000000] [--queries 1000000] [--thresholds 200]

Prints times and ratios measured in this run; asserts nothing about wall-clock time.
The naive loop is ``finops.cascade.sweep.sweep_reference``: for each threshold it
recomputes the escalation mask, cost and quality over every query with numpy
(O(n * T)). Both compute the same thresholds (the distinct confidence values
plus escalate-all), and their results are checked to agree.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from finops.cascade.sweep import sweep, sweep_reference  # noqa: E402


def synthetic(n: int, levels: int | None, seed: int = 0):
    """Confidence in [0, 1] (rounded to ``levels`` distinct values, or continuous), small
    model right with probability = confidence, large model right 90% of the time."""
    rng = np.random.default_rng(seed)
    conf = rng.beta(5, 2, n)
    if levels:
        conf = np.round(conf * (levels - 1)) / (levels - 1)
    small = (rng.random(n) < conf).astype(float)
    large = (rng.random(n) < 0.9).astype(float)
    return conf, small, large


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries-large", type=int, default=10_000_000, help="queries for the big sweep timing")
    ap.add_argument("--queries", type=int, default=1_000_000, help="queries for the ratio against the naive loop")
    ap.add_argument("--thresholds", type=int, default=200, help="distinct confidence values for the ratio")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds for the ratio (default 3)")
    args = ap.parse_args(argv)

    print(f"sweep over {args.queries_large:,} queries (flat costs 1 and 8):")
    for label, levels in (("1,000 distinct confidences", 1000), ("continuous confidences", None)):
        conf, small, large = synthetic(args.queries_large, levels)
        secs = best_of(lambda c=conf, s=small, q=large: sweep(c, s, q, 1.0, 8.0), 2)
        print(f"  {label:<28} {secs:8.3f} s   ({np.unique(conf).size:,} thresholds)")
        del conf, small, large

    conf, small, large = synthetic(args.queries, args.thresholds)
    per_query_small = np.full(args.queries, 1.0)
    per_query_large = np.full(args.queries, 8.0)
    print(f"\n{args.queries:,} queries, {args.thresholds} distinct confidences "
          f"({args.thresholds + 1} thresholds incl. escalate-all), per-query cost arrays:")
    inputs = (conf, small, large, per_query_small, per_query_large)
    fast = sweep(*inputs)
    thresholds = fast.threshold.to_numpy()
    naive = sweep_reference(*inputs, thresholds=thresholds)
    worst = float(np.abs(fast.to_numpy() - naive.to_numpy()).max())
    # Interleave the runs so both sides see the same machine load; keep the best of each.
    methods = ("auto", "hash", "sort")
    naive_secs, secs = float("inf"), dict.fromkeys(methods, float("inf"))
    for _ in range(args.rounds):
        naive_secs = min(naive_secs, best_of(lambda: sweep_reference(*inputs, thresholds=thresholds), 1))
        for m in methods:
            secs[m] = min(secs[m], best_of(lambda m=m: sweep(*inputs, method=m), 5))
    print(f"  naive loop (recompute every threshold) {naive_secs:8.3f} s")
    for m in methods:
        print(f"  sweep method={m:<5} {secs[m]:8.4f} s   ratio naive/sweep = {naive_secs / secs[m]:6.1f}x")
    print(f"  largest difference between the two curves: {worst:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
