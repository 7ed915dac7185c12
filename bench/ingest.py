"""Ingestion and report benchmarks (issue 2). Prints ratios against baselines measured in the same run.

Targets:
  * loading a 10M-row canonical Parquet file <= 1.5x a bare CREATE TABLE AS SELECT * FROM read_parquet;
    peak memory of the loading process < 2 GB;
  * loading a 1M-row canonical JSONL <= 2x a bare read_json;
  * report --by model,tenant over 10M rows >= 10x faster than pandas on a DataFrame already in memory.

Usage: python bench/ingest.py [--rows 10000000] [--jsonl-rows 1000000] [--workdir /tmp/finops-bench]
                              [--parquet FILE] [--only-parquet]
Each load runs in a fresh subprocess so that its peak RSS can be read; the finops load prints the time of
each of its steps (the loader's progress messages: validating, removing duplicates, inserting, each
derived table, ...), the commit and the closing checkpoint.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path

from _runner import best_of, run_child  # noqa: E402  (bench/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GEN_SQL = """
SELECT 'r' || i AS request_id,
       TIMESTAMP '2026-11-01' + to_milliseconds(i * 120) AS ts,
       'tenant-' || (hash(i) % 12) AS tenant,
       ['premium', 'standard', 'batch'][1 + (hash(i * 7) % 3)::INT] AS sla_tier,
       ['llama-3.1-8b', 'llama-3.1-70b', 'gpt-4o-mini', 'gpt-4o'][1 + (hash(i * 3) % 4)::INT] AS model,
       'fast' AS route, 'cost' AS strategy, (hash(i) % 7 = 0) AS cache_hit, false AS escalated,
       'cloud' AS site, 'r' || (i % 4) AS replica,
       (50 + hash(i * 5) % 3000)::BIGINT AS input_tokens, (10 + hash(i * 11) % 600)::BIGINT AS output_tokens,
       0::BIGINT AS cached_input_tokens, NULL::INTEGER AS prompt_chars,
       0.5 AS route_ms, (hash(i * 13) % 1000) / 10.0 AS queue_ms, 120.0 AS prefill_ms,
       (hash(i * 17) % 5000)::DOUBLE AS decode_ms, NULL::DOUBLE AS service_ms, NULL::DOUBLE AS ttft_ms,
       (hash(i * 19) % 6000)::DOUBLE AS total_ms,
       CASE WHEN hash(i) % 200 = 0 THEN 'error' ELSE 'ok' END AS status, NULL::VARCHAR AS error_type,
       NULL::DOUBLE AS cost_usd, NULL::DOUBLE AS confidence, NULL::DOUBLE AS quality, NULL::JSON AS attrs
FROM range({n}) t(i)"""

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import duckdb
mode, src, db = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
if mode == "bare-parquet":
    con = duckdb.connect(db); con.execute("SET memory_limit = '1536MB'")
    con.execute("CREATE TABLE t AS SELECT * FROM read_parquet(?)", [src])
elif mode == "bare-json":
    con = duckdb.connect(db); con.execute("SET memory_limit = '1536MB'")
    con.execute("CREATE TABLE t AS SELECT * FROM read_json(?, format = 'newline_delimited')", [src])
else:
    from finops import store
    from finops.ingest import ingest_path
    con = store.connect(db)
    def cpu():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime
    marks = [("open the store", time.perf_counter(), cpu())]
    r = ingest_path(con, src, progress=lambda frac, what: marks.append((what.split(": ", 1)[-1], time.perf_counter(),
                                                                       cpu())))[0]
    assert r.rows_rejected == 0, r.rejects[:3]
    marks[-1] = ("commit", *marks[-1][1:])          # the last message ("N rows ingested") comes before the commit
    marks.append(("close (checkpoint)", time.perf_counter(), cpu()))
steps = {{}}
cpu_steps = {{}}
con.close()
if mode != "bare-parquet" and mode != "bare-json":
    marks.append(("end", time.perf_counter(), cpu()))
    for (what, a, ca), (_, b, cb) in zip(marks, marks[1:]):
        steps[what] = steps.get(what, 0.0) + b - a
        cpu_steps[what] = cpu_steps.get(what, 0.0) + cb - ca
u = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"s": time.perf_counter() - t, "steps": steps, "cpu_steps": cpu_steps, "cpu_s": u.ru_utime + u.ru_stime,
                  "peak_mb": u.ru_maxrss / 1024}}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--jsonl-rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp/finops-bench")
    ap.add_argument("--parquet", help="load this canonical Parquet file instead of generating one (e.g. "
                                      "bench/pages.py's fleet_<rows>.parquet)")
    ap.add_argument("--only-parquet", action="store_true", help="the Parquet load only: no JSON Lines, no report")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    import duckdb

    pq = Path(a.parquet) if a.parquet else work / f"canonical_{a.rows}.parquet"
    js = work / f"canonical_{a.jsonl_rows}.jsonl"
    gen = duckdb.connect()
    if not pq.exists():
        gen.execute(f"COPY ({GEN_SQL.format(n=a.rows)}) TO '{pq}' (FORMAT parquet)")
    if not js.exists() and not a.only_parquet:
        gen.execute(f"COPY ({GEN_SQL.format(n=a.jsonl_rows)}) TO '{js}' (FORMAT json)")
    rows = gen.execute("SELECT count(*) FROM read_parquet(?)", [str(pq)]).fetchall()[0][0]
    gen.close()

    print(f"== Parquet, {rows:,} canonical rows ({pq.stat().st_size / 1e6:,.0f} MB, {pq.name})")
    # alternating, so that both see the same load on a shared machine; each the best of its runs
    bares, ourss = [], []
    for _ in range(a.repeat):
        bares.append(run_child(CHILD, "bare-parquet", pq, work / "bare.duckdb"))
        ourss.append(run_child(CHILD, "finops", pq, work / "finops.duckdb"))
    (work / "bare.duckdb").unlink(missing_ok=True)
    bare, ours = min(bares, key=lambda r: r["s"]), min(ourss, key=lambda r: r["s"])
    print(f"load average (1, 5, 15 min) after the runs: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.repeat > 1:
        print("each pair's ratio (wall, CPU): " + ", ".join(f"{o['s'] / b['s']:.2f}x / {o['cpu_s'] / b['cpu_s']:.2f}x"
                                                            for b, o in zip(bares, ourss, strict=True)))
    print(f"bare CTAS read_parquet: {bare['s']:.2f} s, peak {bare['peak_mb']:,.0f} MB")
    print(f"finops ingest:          {ours['s']:.2f} s, peak {ours['peak_mb']:,.0f} MB")
    print(f"ratio ingest / bare = {ours['s'] / bare['s']:.2f}x (target <= 1.5x); peak memory "
          f"{ours['peak_mb']:,.0f} MB (target < 2,048 MB)")
    print(f"CPU time (user + system, all threads; less sensitive to other work on the machine): bare "
          f"{bare['cpu_s']:.1f} s, finops {ours['cpu_s']:.1f} s, ratio {ours['cpu_s'] / bare['cpu_s']:.2f}x")
    print("finops ingest, step by step (the best run's; wall, then CPU of all threads):")
    for what, sec in ours["steps"].items():
        c = ours["cpu_steps"][what]
        print(f"  {what:36s} {sec:8.2f} s  {sec / ours['s']:6.1%}   cpu {c:8.2f} s  {c / ours['cpu_s']:6.1%}")
    if a.only_parquet:
        return

    print(f"\n== JSON Lines, {a.jsonl_rows:,} canonical rows ({js.stat().st_size / 1e6:,.0f} MB)")
    bare = best_of(a.repeat, CHILD, "bare-json", js, work / "bare_json.duckdb")
    ours = best_of(a.repeat, CHILD, "finops", js, work / "finops_json.duckdb")
    print(f"bare CTAS read_json: {bare['s']:.2f} s;  finops ingest: {ours['s']:.2f} s")
    print(f"ratio ingest / bare = {ours['s'] / bare['s']:.2f}x (target <= 2x)")

    print(f"\n== report --by model,tenant over {a.rows:,} rows")
    from finops import store
    from finops.filters import Filters
    from finops.spend import report as spend
    con = store.connect(str(work / "finops.duckdb"))
    t = time.perf_counter()
    rep = spend.report(con, Filters(), ["model", "tenant"])
    ours_s = time.perf_counter() - t
    df = con.execute("SELECT model, tenant, input_tokens, output_tokens, cached_input_tokens, status, cost_usd "
                     "FROM requests").df()
    prices = con.execute("SELECT model, input_usd_per_1m, output_usd_per_1m FROM prices").df()
    t = time.perf_counter()
    # the same aggregation in pandas (token-priced part only: already less work than ours)
    m = df.merge(prices, on="model", how="left")
    m["cost"] = m["cost_usd"].fillna((m.input_tokens * m.input_usd_per_1m.fillna(0)
                                      + m.output_tokens * m.output_usd_per_1m.fillna(0)) / 1e6)
    m["err"] = m.status != "ok"
    g = m.groupby(["model", "tenant"]).agg(requests=("model", "size"), input_tokens=("input_tokens", "sum"),
                                           output_tokens=("output_tokens", "sum"), cost_usd=("cost", "sum"),
                                           errors=("err", "sum"))
    pandas_s = time.perf_counter() - t
    print(f"finops report (rollups): {ours_s * 1000:.1f} ms for {len(rep)} groups; pandas in memory: "
          f"{pandas_s * 1000:.1f} ms for {len(g)} groups")
    print(f"speed-up = {pandas_s / ours_s:.1f}x (target >= 10x)")
    con.close()
    if "--keep" not in sys.argv:
        shutil.rmtree(work / "unused", ignore_errors=True)
    print(f"\n(peak RSS of this driver process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB)")


if __name__ == "__main__":
    main()
