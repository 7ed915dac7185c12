"""The engine rules and the Latency page's engine view on a store of scraped vLLM series, against pandas.

    python bench/engine.py [--replicas 4] [--days 7] [--every-s 15] [--repeat 3]

* The store's ``engine_metrics`` is generated with DuckDB SQL: per replica (2 models) one scrape every
  ``--every-s`` seconds with vLLM's three gauges, its five counters (prefix-cache queries and hits in both
  namings, preemptions) and 40 histogram rows (the TTFT/TPOT buckets a real scrape carries and the rules never
  read), so a scan reads what a real store holds. KV-cache usage and the batch follow a daily wave.
* **finops** is ``engine.kv_cache_windows``, ``engine.queue_saturation_windows`` and ``engine.engine_over_time``
  (DuckDB, all cores) on a fresh read-only connection; **pandas** is the same computation on a DataFrame of the
  needed rows *already in memory* (its load time is printed apart, not counted), the usual pandas way
  (pivot, groupby, sort and take the ceil(n/2)-th largest, groupby diff for counters). The two are checked
  to agree.
* ``open_alerts``: every rule, with the engine rules on and off, alternated ``--repeat`` times: the ratio is
  what the two engine rules add to an alert evaluation.

Prints times and ratios, and the load average; asserts no time.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from finops import store  # noqa: E402
from finops.filters import Filters  # noqa: E402
from finops.ingest import engine  # noqa: E402
from finops.ops import alerts  # noqa: E402

T0 = datetime(2026, 5, 1)


def build(path: str, replicas: int, days: int, every_s: int) -> int:
    con = store.connect(path)
    n = int(days * 86400 / every_s)
    con.execute("""
CREATE TEMP TABLE s AS
SELECT r AS rep, 'model-' || (r % 2) AS model, 'gpu-' || r AS replica, i,
       ?::TIMESTAMP + to_seconds(i * ?) AS ts,
       0.55 + 0.45 * sin(2 * pi() * i * ? / 86400 + r) AS wave
FROM range(?) t(r), range(?) u(i)""", [T0, every_s, every_s, replicas, n])
    gauges = """
SELECT ts, replica, model, 'vllm:num_requests_running', '{"engine": "0"}', least(32, round(40 * wave)) FROM s
UNION ALL SELECT ts, replica, model, 'vllm:num_requests_waiting', '{"engine": "0"}', greatest(0, round(60 * (wave - 0.8))) FROM s
UNION ALL SELECT ts, replica, model, CASE WHEN rep % 2 = 0 THEN 'vllm:kv_cache_usage_perc' ELSE 'vllm:gpu_cache_usage_perc' END,
          '{"engine": "0"}', least(1.0, wave) FROM s
UNION ALL SELECT ts, replica, model, 'vllm:prefix_cache_queries_total', '{"engine": "0"}', 1000.0 * (i % 20000) FROM s
UNION ALL SELECT ts, replica, model, 'vllm:prefix_cache_hits_total', '{"engine": "0"}', 300.0 * (i % 20000) FROM s
UNION ALL SELECT ts, replica, model, 'vllm:gpu_prefix_cache_queries_total', '{"engine": "0"}', 60.0 * (i % 20000) FROM s
UNION ALL SELECT ts, replica, model, 'vllm:gpu_prefix_cache_hits_total', '{"engine": "0"}', 20.0 * (i % 20000) FROM s
UNION ALL SELECT ts, replica, model, 'vllm:num_preemptions_total', '{"engine": "0"}', floor(i / 50) FROM s
UNION ALL SELECT ts, replica, model, 'vllm:time_to_first_token_seconds_bucket', '{"engine": "0", "le": "' || b || '"}',
          i * b FROM s, range(40) h(b)"""
    with store.transaction(con):
        con.execute("INSERT INTO engine_metrics " + gauges)
        store.bump_data_version(con)
    rows = con.execute("SELECT count(*) FROM engine_metrics").fetchall()[0][0]
    con.close()
    return rows


def pd_gauges(df: pd.DataFrame) -> pd.DataFrame:
    g = df[df["metric"].isin([engine.RUNNING, engine.WAITING, *engine.KV_CACHE])]
    g = g.assign(kind=g["metric"].map({engine.RUNNING: "running", engine.WAITING: "waiting",
                                       **{k: "kv_cache" for k in engine.KV_CACHE}}))
    return g.pivot_table(index=["ts", "replica", "model"], columns="kind", values="value", aggfunc="max").reset_index()


def pd_held(values: pd.Series) -> float:
    v = np.sort(values.dropna().to_numpy())[::-1]
    return float(v[int(np.ceil(len(v) / 2)) - 1])


def pd_kv(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    g = pd_gauges(df)
    g["window_start"] = g["ts"].dt.floor("15min")
    return g.groupby(["model", "replica", "window_start"]).agg(
        scrapes=("kv_cache", "count"), held=("kv_cache", pd_held), peak=("kv_cache", "max"),
        hits=("kv_cache", lambda s: int((s >= threshold).sum()))).reset_index()


def pd_queue(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    g = pd_gauges(df)
    g["max_running"] = g.groupby(["replica", "model"])["running"].transform("max")
    g["full_waiting"] = np.where((g["max_running"] > 0) & (g["running"] >= g["max_running"]), g["waiting"], 0.0)
    g["window_start"] = g["ts"].dt.floor("15min")
    return g.groupby(["model", "replica", "window_start"]).agg(
        scrapes=("full_waiting", "count"), held=("full_waiting", pd_held), peak=("full_waiting", "max"),
        hits=("full_waiting", lambda s: int((s > threshold).sum())), max_running=("max_running", "max")).reset_index()


def pd_over_time(df: pd.DataFrame) -> pd.DataFrame:
    g = pd_gauges(df)
    g["bucket"] = g["ts"].dt.floor("h")
    r = g.groupby(["bucket", "model", "replica"]).agg(n=("ts", "count"), running=("running", "mean"),
                                                       waiting=("waiting", "mean")).reset_index()
    out = r.groupby(["bucket", "model"]).agg(running=("running", "sum"), waiting=("waiting", "sum")).reset_index()
    c = df[df["metric"].isin(engine.COUNTERS)].sort_values("ts")
    c = c.assign(rise=c.groupby(["replica", "model", "metric", "labels"])["value"].diff())
    c["rise"] = np.where(c["rise"] < 0, c["value"], c["rise"])
    c = c.dropna(subset=["rise"])
    c["bucket"] = c["ts"].dt.floor("h")
    later = c[c["metric"].isin(engine.PREFIX_QUERIES + engine.PREFIX_HITS)][["replica", "model"]].drop_duplicates()
    old = c["metric"].isin(engine.OLD_PREFIX_QUERIES + engine.OLD_PREFIX_HITS)
    drop = old & c.set_index(["replica", "model"]).index.isin(later.set_index(["replica", "model"]).index)
    c = c[~drop]
    q = c[c["metric"].isin(engine.PREFIX_QUERIES + engine.OLD_PREFIX_QUERIES)].groupby(["bucket", "model"])["rise"].sum()
    h = c[c["metric"].isin(engine.PREFIX_HITS + engine.OLD_PREFIX_HITS)].groupby(["bucket", "model"])["rise"].sum()
    out = out.set_index(["bucket", "model"]).assign(prefix_hit_rate=h / q).reset_index()
    return out


def timed(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--every-s", type=int, default=15)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir", default=str(ROOT / "bench" / "out"))
    a = ap.parse_args()
    Path(a.workdir).mkdir(parents=True, exist_ok=True)
    path = str(Path(a.workdir) / f"engine_{a.replicas}r_{a.days}d_{a.every_s}s.duckdb")
    if not Path(path).exists():
        t = time.perf_counter()
        rows = build(path, a.replicas, a.days, a.every_s)
        print(f"built {rows:,} engine_metrics rows in {time.perf_counter() - t:.1f} s: {path}")
    con = store.connect(path, read_only=True)
    rows = con.execute("SELECT count(*) FROM engine_metrics").fetchall()[0][0]
    f = Filters(since=T0, until=T0 + timedelta(days=a.days))
    t = time.perf_counter()
    df = con.execute("SELECT ts, replica, model, metric, labels, value FROM engine_metrics WHERE NOT "
                     "starts_with(metric, 'vllm:time_to_first')").df()
    print(f"{rows:,} rows ({len(df):,} of them gauges and counters loaded into pandas in "
          f"{time.perf_counter() - t:.1f} s, not counted); load average {os.getloadavg()[0]:.2f}")
    cases = [
        ("kv_cache_windows (15 min)", lambda: engine.kv_cache_windows(con, f, "15min", 0.95), lambda: pd_kv(df, 0.95)),
        ("queue_saturation_windows (15 min)", lambda: engine.queue_saturation_windows(con, f, "15min", 0.0),
         lambda: pd_queue(df, 0.0)),
        ("engine_over_time (hour)", lambda: engine.engine_over_time(con, f, "hour"), lambda: pd_over_time(df)),
    ]
    print(f"\n{'query':36s} {'finops s':>9s} {'pandas s':>9s} {'ratio':>7s}  agree")
    for name, ours, theirs in cases:
        # alternated: finops, pandas, finops, ... so that both see the same load
        tf, tp, a_out, b_out = float("inf"), float("inf"), None, None
        for _ in range(a.repeat):
            x, a_out = timed(ours, 1)
            y, b_out = timed(theirs, 1)
            tf, tp = min(tf, x), min(tp, y)
        if name.startswith("engine_over_time"):
            m = a_out.merge(b_out, left_on=["ts", "model"], right_on=["bucket", "model"], suffixes=("", "_pd"))
            agree = len(m) == len(a_out) == len(b_out) and all(
                np.allclose(m[c].astype(float), m[f"{c}_pd"].astype(float), equal_nan=True)
                for c in ("running", "waiting", "prefix_hit_rate"))
        else:
            keys = ["model", "replica", "window_start"]
            m = a_out.merge(b_out, on=keys, suffixes=("", "_pd"))
            agree = len(m) == len(a_out) == len(b_out) and all(
                np.allclose(m[c].astype(float), m[f"{c}_pd"].astype(float), equal_nan=True)
                for c in ("scrapes", "held", "peak", "hits"))
        print(f"{name:36s} {tf:9.3f} {tp:9.3f} {tp / tf:7.1f}  {'yes' if agree else 'NO'}")

    rules = alerts.rules(con)
    off = [replace(r, enabled=False) if r.name in alerts.ENGINE_RULES else r for r in rules]
    orig = alerts.rules
    t_on, t_off = float("inf"), float("inf")
    for _ in range(a.repeat):
        x, n_on = timed(lambda: alerts.open_alerts(con, f), 1)
        alerts.rules = lambda _con: off                      # the same evaluation without the engine rules
        try:
            y, _ = timed(lambda: alerts.open_alerts(con, f), 1)
        finally:
            alerts.rules = orig
        t_on, t_off = min(t_on, x), min(t_off, y)
    engine_alerts = int(n_on["rule"].isin(alerts.ENGINE_RULES).sum())
    print(f"\nopen_alerts with the engine rules {t_on:.3f} s ({engine_alerts:,} engine alerts), without {t_off:.3f} s: "
          f"ratio {t_on / t_off:.2f}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
