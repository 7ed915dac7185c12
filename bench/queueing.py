"""Benchmark: vectorised Erlang C against pyworkforce, and required_servers' growth with c.

    python bench/queueing.py [--scenarios 100000] [--baseline-scenarios 2000] [--max-servers 1000]

Prints times and ratios measured in this run; asserts nothing about wall-clock time.

1. ``finops.capacity.queueing.mmc`` on N random (λ, μ, c) scenarios in one call (every field:
   Erlang C, mean and four percentile waits, Little's-law lengths, states), against
   pyworkforce's ``ErlangC(...).waiting_probability(c)`` (Erlang C only, a pure-Python
   Erlang B loop of c steps) called once per scenario. pyworkforce is slow, so it is timed
   on the first ``--baseline-scenarios`` scenarios and extrapolated per scenario to N;
   both are checked to agree on that subset. Each side is timed best-of-N in CPU time of
   this process (see ``best_of``). ρ is uniform in [0.05, 0.99]; c is drawn two ways, uniform
   and log-uniform in [1, --max-servers]. pyworkforce's loop costs O(c) per scenario and
   ours O(1), so the ratio grows with c: the log-uniform mix (mostly small c) is the harder
   one, and the subset with c <= 20, pyworkforce's best case, is printed too.
2. ``finops.capacity.queueing.required_servers`` with a P99-wait SLA at c ≈ 10^3, 10^4, 10^5:
   time and number of Erlang C evaluations, each as a ratio to c ≈ 10^3, beside the
   ratios of log c and of c.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from finops.capacity import queueing  # noqa: E402


def best_of(fn, repeat: int) -> float:
    """Fastest of ``repeat`` runs, in CPU seconds of this process (both sides are single-threaded,
    so on a shared machine this is fairer than wall time, which also counts waiting for a CPU)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def scenarios(n: int, max_servers: int, mix: str = "log-uniform", seed: int = 0):
    rng = np.random.default_rng(seed)
    if mix == "log-uniform":
        c = np.round(10 ** rng.uniform(0, math.log10(max_servers), n)).astype(int)
    else:
        c = rng.integers(1, max_servers + 1, n)
    mu = rng.lognormal(0.0, 1.0, n)
    rho = rng.uniform(0.05, 0.99, n)
    return rho * c * mu, mu, c


def bench_mmc(n: int, n_base: int, max_servers: int, mix: str) -> None:
    lam, mu, c = scenarios(n, max_servers, mix)
    t_ours = best_of(lambda: queueing.mmc(lam, mu, c), 7)
    print(f"mmc, {n:,} scenarios in one call (c {mix} in [1, {max_servers}], mean c {c.mean():.0f}, "
          "rho in [0.05, 0.99]):")
    print(f"  finops.capacity.queueing.mmc        {t_ours * 1e3:9.1f} ms   ({t_ours / n * 1e9:8.1f} ns per scenario)")
    try:
        from pyworkforce.queuing import ErlangC
    except ImportError:
        print("  pyworkforce not installed (a dev dependency): no baseline ratio")
        return

    def baseline(idx):
        np.seterr(over="ignore")          # pyworkforce's loop overflows to inf for c >> A; harmless
        out = np.empty(len(idx))
        for k, i in enumerate(idx):
            # intensity = transactions / interval * aht = lambda / mu
            out[k] = ErlangC(transactions=lam[i], aht=1.0 / mu[i], asa=1.0, interval=1).waiting_probability(int(c[i]))
        return out

    idx = np.arange(min(n_base, n))
    ref = baseline(idx)
    t_base = best_of(lambda: baseline(idx), 3)
    per = t_base / len(idx)
    ours_sub = np.asarray(queueing.mmc(lam[idx], mu[idx], c[idx]).p_wait)
    normal = (ref > 1e-250) & (ours_sub > 1e-250)       # pyworkforce underflows below ~1e-308
    err = np.max(np.abs(ours_sub[normal] - ref[normal]) / ref[normal])
    print(f"  pyworkforce ErlangC        {t_base * 1e3:9.1f} ms on {len(idx):,} scenarios "
          f"({per * 1e6:8.1f} us per scenario), extrapolated to {n:,}: {per * n:.2f} s")
    print(f"  ratio (pyworkforce extrapolated / mmc): {per * n / t_ours:,.0f}x   (target >= 100x)")
    print(f"  agreement on the subset: max relative difference in P(wait) {err:.1e} "
          f"(over the {normal.sum():,} scenarios with P(wait) > 1e-250)")
    small = idx[c[idx] <= 20]
    if small.size:
        per_small = best_of(lambda: baseline(small), 3) / small.size
        print(f"  c <= 20 only ({small.size} scenarios): pyworkforce {per_small * 1e6:.1f} us per scenario, "
              f"ratio {per_small * n / t_ours:,.0f}x")


def bench_required_servers() -> None:
    print("required_servers, P99 queue wait <= 0.05 s, rho ~ 0.97 before sizing, mu = 1 req/s:")
    calls = {"n": 0}
    real = queueing.erlang_c

    def counting(a, c):
        calls["n"] += 1
        return real(a, c)

    rows = []
    for c_target in (1_000, 10_000, 100_000):
        lam = 0.97 * c_target
        queueing.erlang_c = counting
        calls["n"] = 0
        r = queueing.required_servers(lam, 1.0, wait_sla_s=0.05, wait_percentile=0.99)
        evals = calls["n"]
        queueing.erlang_c = real
        t = best_of(lambda lam=lam: queueing.required_servers(lam, 1.0, wait_sla_s=0.05, wait_percentile=0.99), 20)
        rows.append((c_target, r.servers, evals, t))
    base_c, _, base_evals, base_t = rows[0]
    print(f"  {'c target':>9} {'servers':>8} {'Erlang C calls':>15} {'time':>10} {'time ratio':>11} "
          f"{'calls ratio':>12} {'log c ratio':>12} {'c ratio':>8}")
    for c_target, servers, evals, t in rows:
        print(f"  {c_target:>9,} {servers:>8,} {evals:>15} {t * 1e3:>8.2f}ms {t / base_t:>11.2f} "
              f"{evals / base_evals:>12.2f} {math.log(servers) / math.log(rows[0][1]):>12.2f} "
              f"{servers / rows[0][1]:>8.0f}")
    print("  (time should track log c, not c: the search doubles its step, then bisects)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=100_000, help="scenarios for mmc in one call")
    ap.add_argument("--baseline-scenarios", type=int, default=2_000,
                    help="scenarios timed with pyworkforce, extrapolated per scenario")
    ap.add_argument("--max-servers", type=int, default=1_000, help="largest c in the random scenarios")
    args = ap.parse_args(argv)
    for mix in ("uniform", "log-uniform"):
        bench_mmc(args.scenarios, args.baseline_scenarios, args.max_servers, mix)
        print()
    bench_required_servers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
