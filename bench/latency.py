"""The Latency page's queries on a 10M-row store, against the same computations in pandas.

    python bench/latency.py [--rows 10000000] [--workdir bench/out] [--skip-pandas] [--db STORE]
                            [--memory-limit 1536MB]

``--skip-pandas`` times the finops side only and loads no DataFrame (the way to run it at 100M rows);
``--memory-limit`` is DuckDB's, the dashboard's own by default (``store.connect``).

* The store is generated with DuckDB SQL by ``bench/fleet_store.py`` (canonical columns, 14 days,
  ingested through ``finops.ingest`` so rollups exist) and kept in the work directory for the next run.
* **finops** is each ``finops.latency.stats`` / ``finops.latency.diagnose`` / ``finops.ops.alerts`` call the page makes,
  on a fresh read-only connection (DuckDB, all cores).
* **pandas** is the same computation on a DataFrame of the needed columns *already in memory* (its load
  time is printed apart and not counted), written the usual pandas way (groupby + quantile,
  ``numpy.histogram`` per group, in-service time cut at minute edges with ``numpy.repeat`` for concurrency).
* What the page shows by default is read from tables written at load time (``store.DERIVED``): percentiles
  of whole hours by model from the hourly latency sketch (``store.latency_hourly``), within
  ``store.SKETCH_ALPHA`` = 0.99% (relative) of the exact value; the queue histogram from the same sketch
  (exact edges and totals, checked; a value within 2% of an edge may sit in the bin beside it); decode
  speed against the mean requests in service per minute (``inservice_minute``, ``decode_rate_minute``: the
  levels exact, the P50 checked to 0.99%); length buckets and band means from the daily tables (counts
  exact, percentiles to 0.99%, band means' total to 2%); coverage and the slowest requests exact.
  For reference the bench also times DuckDB's ``approx_quantile`` (a t-digest, which carries **no
  guaranteed error bound**) and prints its observed worst relative error against the exact P99.

Prints times and ratios (pandas / finops); asserts no time. Target: ratio >= 10.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from finops import store  # noqa: E402
from finops.filters import Filters  # noqa: E402
from finops.latency import diagnose  # noqa: E402
from finops.latency import stats as latency  # noqa: E402
from finops.ops import alerts  # noqa: E402

QS = (0.5, 0.95, 0.99)
FIELDS = ("total_ms", "ttft_ms", "queue_ms", "service_ms")
COLUMNS = ("request_id", "ts", "model", "tenant", "cache_hit", "total_ms", "ttft_ms", "queue_ms", "service_ms",
           "route_ms", "prefill_ms", "decode_ms", "input_tokens", "output_tokens")


def peak_rss_mb() -> float:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, repeat: int = 1):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


# ---------------------------------------------------------------- pandas baselines

def pd_served(df: pd.DataFrame) -> pd.DataFrame:
    return df[~df["cache_hit"].fillna(False).astype(bool)]


def pd_percentiles(df):
    s = pd_served(df)
    svc = s["service_ms"].fillna(s["prefill_ms"] + s["decode_ms"])
    s = s.assign(service_ms=svc)
    out = s.groupby("model")[list(FIELDS)].quantile(list(QS)).unstack()
    out.columns = [f"{c}_p{q * 100:g}" for c, q in out.columns]
    return out.assign(requests=s.groupby("model").size())


def pd_histogram(df, scale: str, bins: int = 40):
    s = pd_served(df)
    out = {}
    for model, g in s.groupby("model"):
        x = g["queue_ms"].dropna().to_numpy()
        if scale == "linear":
            counts, edges = np.histogram(x, bins=bins)
        else:
            pos = x[x > 0]
            edges = np.r_[0.0, np.geomspace(pos.min(), x.max(), bins + 1)]
            counts, edges = np.histogram(x, bins=edges)
        out[model] = (counts, edges)
    return out


def pd_segments(df, band: float = 0.005):
    s = pd_served(df).dropna(subset=["total_ms"])
    rows = []
    for model, g in s.groupby("model"):
        for q in QS:
            lo, hi = np.quantile(g["total_ms"], [q - band, q + band])
            b = g[(g["total_ms"] >= lo) & (g["total_ms"] <= hi)]
            rows.append((model, q, len(b), b["total_ms"].mean(), b["queue_ms"].fillna(0).mean(),
                         b["prefill_ms"].fillna(0).mean(), b["decode_ms"].fillna(0).mean()))
    return pd.DataFrame(rows, columns=["grp", "quantile", "n", "total_ms", "queue", "prefill", "decode"])


def pd_over_time(df):
    s = pd_served(df).dropna(subset=["total_ms"])
    return s.groupby([s["ts"].dt.floor("h"), "model"])["total_ms"].quantile(list(QS)).unstack()


def pd_buckets(df, length: str):
    s = pd_served(df).dropna(subset=[length, "total_ms"])
    x = s[length].to_numpy(dtype=float)
    lo = np.where(x < 32, 0, 2 ** np.floor(np.log2(np.maximum(x, 1))))
    return s.groupby(["model", lo])["total_ms"].quantile(list(QS)).unstack()


def pd_decode_vs_concurrency(df):
    """Decode tokens/s by the mean number of the model's requests in service over the minute of arrival
    (finops.latency.stats.decode_vs_concurrency): each request's in-service interval cut at minute edges."""
    s = pd_served(df).dropna(subset=["total_ms"])
    w = 60_000_000
    t0 = s["ts"].astype("datetime64[us]").astype("int64").to_numpy()
    start = t0 + np.round((s["route_ms"].fillna(0) + s["queue_ms"].fillna(0)).to_numpy() * 1000).astype(np.int64)
    end = t0 + np.round(s["total_ms"].to_numpy() * 1000).astype(np.int64)
    ok = end > start
    model, start, end = s["model"].to_numpy()[ok], start[ok], end[ok]
    m0, m1 = start // w, (end - 1) // w
    reps = (m1 - m0 + 1).astype(np.int64)
    idx = np.repeat(np.arange(len(start)), reps)
    minute = m0[idx] + (np.arange(len(idx)) - np.repeat(np.cumsum(reps) - reps, reps))
    part = np.minimum(end[idx], (minute + 1) * w) - np.maximum(start[idx], minute * w)
    busy = pd.DataFrame({"model": model[idx], "minute": minute, "us": part}).groupby(["model", "minute"])["us"].sum()
    rate = (s["output_tokens"] / s["decode_ms"].where(s["decode_ms"] > 0) * 1000).to_numpy()
    r = pd.DataFrame({"model": s["model"].to_numpy(), "minute": t0 // w, "rate": rate})
    r = r[r["rate"] > 0]
    level = busy.reindex(pd.MultiIndex.from_frame(r[["model", "minute"]])).fillna(0).to_numpy() / w
    r["conc"] = np.maximum(1, np.floor(level + 0.5)).astype(int)          # round half away from zero, as SQL
    return r.groupby(["model", "conc"])["rate"].quantile([0.1, 0.5, 0.9]).unstack()


def pd_ttft_tpot(df):
    s = pd_served(df)
    tpot = ((s["total_ms"] - s["ttft_ms"]).fillna(s["decode_ms"]) / (s["output_tokens"] - 1)).where(
        s["output_tokens"] > 1)
    s = s.assign(tpot=tpot)
    return s.groupby("model")[["ttft_ms", "tpot"]].quantile(list(QS)).unstack()


def pd_slowest(df, n: int = 15):
    return pd_served(df).nlargest(n, "total_ms")


# ---------------------------------------------------------------- agreement checks

ALPHA = store.SKETCH_ALPHA * (1 + 1e-9)


def close(a, b, rtol=1e-6) -> bool:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return bool(np.allclose(a, b, rtol=rtol, equal_nan=True))


def hist_agree(a, b) -> bool:
    """Per model the same edges and total; from the sketch (attrs['edge_tolerance']) a bin's count may differ by
    the values within that factor of its edges, which this check does not count: it compares totals only."""
    if not a.attrs.get("edge_tolerance"):
        return all(a[a.grp == m]["count"].tolist() == b[m][0].tolist() for m in b)
    return all(int(a[a.grp == m]["count"].sum()) == int(b[m][0].sum())
               and close(np.r_[a[a.grp == m]["lo"], a[a.grp == m]["hi"].iloc[-1]], b[m][1]) for m in b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--workdir", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--skip-pandas", action="store_true",
                    help="time the finops side only: no DataFrame of the table is loaded (the way to run 100M rows)")
    ap.add_argument("--memory-limit", default="1536MB", help="DuckDB's memory_limit (the dashboard's by default)")
    ap.add_argument("--db", help="an existing store to measure (default: latency_<rows>.duckdb in the work directory)")
    args = ap.parse_args()

    db = Path(args.db) if args.db else Path(args.workdir) / f"latency_{args.rows}.duckdb"
    if not db.exists():
        import fleet_store
        fleet_store.build(db, args.rows)
    rw = store.connect(db)                     # a store built before the sketch existed gets one here
    sketch_rows = rw.execute("SELECT count(*) FROM latency_hourly").fetchall()[0][0]
    rw.close()
    con = store.connect(db, read_only=True, memory_limit=args.memory_limit)
    f = Filters()
    n = store.row_count(con)
    print(f"store {db}: {n:,} rows; latency sketch {sketch_rows:,} rows "
          f"(percentiles from it within {store.SKETCH_ALPHA:.2%})")

    df = None
    if not args.skip_pandas:      # the whole table in memory: 100M rows would not fit
        t, df = timed(lambda: con.execute(f"SELECT {', '.join(COLUMNS)} FROM requests").df())
        print(f"pandas DataFrame of {len(COLUMNS)} columns loaded in {t:.1f} s "
              f"({df.memory_usage(deep=True).sum() / 1e9:.2f} GB) (not counted below)")

    cases = [
        ("percentiles by model (4 fields x P50/95/99)", lambda: latency.percentiles(con, f),
         lambda: pd_percentiles(df),
         lambda a, b: close(a.set_index("model")["total_ms_p99"], b["total_ms_p99"].loc[a["model"]], ALPHA)
         and close(a.set_index("model")["queue_ms_p95"], b["queue_ms_p95"].loc[a["model"]], ALPHA)),
        ("queue_ms histogram, 40 linear bins per model", lambda: latency.histogram(con, f, "queue_ms", 40, "linear"),
         lambda: pd_histogram(df, "linear"), hist_agree),
        ("queue_ms histogram, 40 log bins per model", lambda: latency.histogram(con, f, "queue_ms", 40, "log"),
         lambda: pd_histogram(df, "log"), hist_agree),
        ("segments at P50/P95/P99 (band means)", lambda: latency.segments(con, f), lambda: pd_segments(df),
         lambda a, b: close(a.drop_duplicates(["grp", "quantile"]).sort_values(["grp", "quantile"])["total_ms"],
                            b.sort_values(["grp", "quantile"])["total_ms"], a.attrs.get("max_rel_error") or 1e-6)),
        ("percentiles over time (hour x model)", lambda: latency.over_time(con, f, "total_ms", "hour"),
         lambda: pd_over_time(df),
         lambda a, b: len(a) == len(b) and close(a.set_index(["ts", "grp"])["p99"].sort_index(),
                                                 b[0.99].rename_axis(["ts", "grp"]).sort_index(), ALPHA)),
        ("latency by prompt-length bucket", lambda: latency.length_buckets(con, f, "input_tokens"),
         lambda: pd_buckets(df, "input_tokens"), lambda a, b: len(a) == len(b)),
        ("latency by output-length bucket", lambda: latency.length_buckets(con, f, "output_tokens"),
         lambda: pd_buckets(df, "output_tokens"), lambda a, b: len(a) == len(b)),
        ("decode tokens/s vs concurrency", lambda: latency.decode_vs_concurrency(con, f),
         lambda: pd_decode_vs_concurrency(df),
         lambda a, b: len(a) == len(b) and close(a.set_index(["grp", "concurrency"])["tokens_per_s_p50"].sort_index(),
                                                 b[0.5].rename_axis(["grp", "concurrency"]).sort_index(), ALPHA)),
        ("field coverage", lambda: latency.coverage(con, f),
         lambda: {c: int(df[c].notna().sum()) for c in COLUMNS},
         lambda a, b: all(a[c] == int(pd_served(df)[c].notna().sum()) for c in COLUMNS)),
        ("TTFT and TPOT percentiles", lambda: latency.ttft_tpot(con, f), lambda: pd_ttft_tpot(df),
         lambda a, b: close(a.set_index("grp")["ttft_ms_p99"], b[("ttft_ms", 0.99)].loc[a["grp"]], ALPHA)
         and close(a.set_index("grp")["tpot_ms_p50"], b[("tpot", 0.5)].loc[a["grp"]], ALPHA)),
        ("the 15 slowest requests", lambda: latency.slowest(con, f, 15), lambda: pd_slowest(df),
         lambda a, b: close(a["total_ms"], b["total_ms"])),
    ]
    print(f"\n{'query':48s} {'finops s':>9s} {'pandas s':>9s} {'ratio':>7s}  agree")
    total_f = total_p = 0.0
    for name, mine, theirs, agree in cases:
        tf, a = timed(mine, repeat=2)
        if args.skip_pandas:
            print(f"{name:48s} {tf:9.2f}")
            continue
        tp, b = timed(theirs)
        total_f, total_p = total_f + tf, total_p + tp
        print(f"{name:48s} {tf:9.2f} {tp:9.2f} {tp / tf:7.1f}x  {'yes' if agree(a, b) else 'NO'}")
    if not args.skip_pandas:
        print(f"{'all of the above':48s} {total_f:9.2f} {total_p:9.2f} {total_p / total_f:7.1f}x")

    print("\nwithout a pandas counterpart (finops only):")
    for name, fn in (("diagnose (playbook, per model x hour)", lambda: diagnose.diagnose(con, f)),
                     ("open alerts (4 rules)", lambda: alerts.open_alerts(con, f))):
        t, _ = timed(fn)
        print(f"  {name:46s} {t:9.2f} s")

    if args.skip_pandas:
        print(f"\n(peak RSS of this process: {peak_rss_mb():,.0f} MB)")
        return
    # approximate percentiles, for reference only (the page uses exact ones)
    where = "NOT coalesce(cache_hit, false)"
    te, exact = timed(lambda: con.execute(f"SELECT model, quantile_cont(total_ms, 0.99) FROM requests WHERE {where} "
                                          "GROUP BY 1 ORDER BY 1").fetchall())
    ta, approx = timed(lambda: con.execute(f"SELECT model, approx_quantile(total_ms, 0.99) FROM requests WHERE {where} "
                                           "GROUP BY 1 ORDER BY 1").fetchall())
    err = max(abs(a[1] - e[1]) / e[1] for a, e in zip(approx, exact, strict=True))
    print(f"\nP99 of total_ms by model: exact quantile_cont {te:.2f} s, approx_quantile (t-digest) {ta:.2f} s; "
          f"worst relative error of the approximation here {err:.2%} (t-digest has no guaranteed bound; the page "
          "uses the exact one)")


if __name__ == "__main__":
    main()
