"""Large canonical stores for the page benchmarks, generated with DuckDB SQL (no Python loop per row).

    python bench/fleet_store.py --rows 1000000 --db /tmp/finops-bench/fleet_1m.duckdb

Rows are spread evenly over ``days`` days, with a daily cycle in the token counts, eight tenants over
three SLA tiers, five models (two self-hosted, three API), ~15% semantic-cache hits, cascade escalations
on the standard tier, lognormal token counts and ~1% errors. Every value comes from a hash of the row
number and the seed, so the same arguments give the same store. The rows are written to a Parquet file
and loaded through ``finops.ingest.ingest_path`` (so the rollups are built exactly as for real logs).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell")
TIERS = ("premium", "premium", "standard", "standard", "standard", "batch", "batch", "batch")

# u(k): a uniform draw in [0, 1) for row i, stream k
_U = "((hash((i * 64 + {k}) * 100003 + {seed}) >> 11) / 9007199254740992.0)"


def generator_sql(n: int, days: int, seed: int, start: str = "2026-11-01") -> str:
    def u(k: int) -> str:
        return _U.format(seed=seed, k=k)

    tenants = "[" + ", ".join(f"'{t}'" for t in TENANTS) + "]"
    tiers = "[" + ", ".join(f"'{t}'" for t in TIERS) + "]"
    normal1 = f"sqrt(-2 * ln(greatest({u(6)}, 1e-12))) * cos(2 * pi() * {u(7)})"
    normal2 = f"sqrt(-2 * ln(greatest({u(8)}, 1e-12))) * sin(2 * pi() * {u(7)})"
    return f"""
WITH base AS (
  SELECT i,
         TIMESTAMP '{start}' + to_microseconds(CAST(({days} * 86400e6) * (i + {u(1)}) / {n} AS BIGINT)) AS ts,
         1 + CAST(floor(pow({u(2)}, 1.6) * {len(TENANTS)}) AS INTEGER) AS t_idx,
         {u(3)} AS u_model, {u(4)} AS u_cache, {u(5)} AS u_esc, {normal1} AS z1, {normal2} AS z2,
         {u(9)} AS u_queue, {u(10)} AS u_err, {u(11)} AS u_cached
  FROM range({n}) r(i)),
shaped AS (
  SELECT *, {tenants}[t_idx] AS tenant, {tiers}[t_idx] AS sla_tier,
         -- a daily cycle: longer prompts in working hours
         0.3 * sin(2 * pi() * (hour(ts) - 8) / 24) AS cycle
  FROM base),
routed AS (
  SELECT *,
         CASE sla_tier
           WHEN 'premium' THEN CASE WHEN u_model < 0.45 THEN 'gpt-4o' WHEN u_model < 0.75 THEN 'claude-sonnet-4'
                                    ELSE 'llama-3.1-70b' END
           WHEN 'standard' THEN CASE WHEN u_model < 0.7 THEN 'llama-3.1-8b' WHEN u_model < 0.85 THEN 'llama-3.1-70b'
                                     ELSE 'gpt-4o-mini' END
           ELSE CASE WHEN u_model < 0.5 THEN 'gpt-4o-mini' ELSE 'llama-3.1-8b' END END AS model,
         CASE sla_tier WHEN 'premium' THEN 'latency' WHEN 'standard' THEN 'cascade' ELSE 'cost' END AS strategy,
         u_cache < 0.15 AS cache_hit,
         CAST(greatest(exp(6.3 + cycle + 1.0 * z1), 1) AS BIGINT) AS input_tokens,
         CAST(greatest(exp(5.0 + 0.8 * z2), 1) AS BIGINT) AS output_tokens
  FROM shaped)
SELECT 'b{seed}-' || i AS request_id, ts, tenant, sla_tier, model,
       CASE WHEN cache_hit THEN 'cache' WHEN model LIKE 'llama-3.1-8b' THEN 'fast' ELSE 'slow' END AS route,
       strategy, cache_hit,
       CASE WHEN strategy = 'cascade' AND model = 'llama-3.1-8b' AND NOT cache_hit THEN u_esc < 0.18 END AS escalated,
       CASE WHEN model LIKE 'llama%' THEN 'cloud-gpu' ELSE 'api' END AS site,
       'replica-' || (i % 4) AS replica,
       input_tokens, output_tokens,
       CASE WHEN u_cached < 0.3 THEN input_tokens // 2 ELSE 0 END AS cached_input_tokens,
       CAST(input_tokens * 4 AS INTEGER) AS prompt_chars,
       0.4 AS route_ms,
       round(-ln(greatest(u_queue, 1e-12)) * CASE WHEN model LIKE 'llama%' THEN 60 ELSE 20 END, 2) AS queue_ms,
       round(input_tokens * 0.05, 2) AS prefill_ms,
       round(output_tokens * CASE model WHEN 'llama-3.1-8b' THEN 9 WHEN 'llama-3.1-70b' THEN 28 ELSE 14 END, 2)
         AS decode_ms,
       CAST(NULL AS DOUBLE) AS service_ms,
       round(input_tokens * 0.05 + 40, 2) AS ttft_ms,
       CASE WHEN cache_hit THEN 30.0 ELSE
         round(0.4 + -ln(greatest(u_queue, 1e-12)) * CASE WHEN model LIKE 'llama%' THEN 60 ELSE 20 END
               + input_tokens * 0.05
               + output_tokens * CASE model WHEN 'llama-3.1-8b' THEN 9 WHEN 'llama-3.1-70b' THEN 28 ELSE 14 END, 2)
       END AS total_ms,
       CASE WHEN u_err < 0.01 THEN 'error' ELSE 'ok' END AS status,
       CASE WHEN u_err < 0.01 THEN 'upstream_5xx' END AS error_type,
       CAST(NULL AS DOUBLE) AS cost_usd, CAST(NULL AS DOUBLE) AS confidence, CAST(NULL AS DOUBLE) AS quality
FROM routed"""


def write_parquet(parquet: str | Path, rows: int, days: int = 14, seed: int = 1) -> Path:
    """The generated rows as one Parquet file at ``parquet``; an existing file is reused (delete it to rebuild)."""
    import duckdb

    parquet = Path(parquet)
    if not parquet.exists():
        parquet.parent.mkdir(parents=True, exist_ok=True)
        part = parquet.with_name(parquet.name + ".part")
        gen = duckdb.connect()
        gen.execute("SET preserve_insertion_order = false")
        gen.execute(f"COPY ({generator_sql(rows, days, seed)}) TO '{part}' (FORMAT parquet, ROW_GROUP_SIZE 122880)")
        gen.close()
        part.rename(parquet)
    return parquet


def build(db: str | Path, rows: int, days: int = 14, seed: int = 1, quiet: bool = False,
          parquet: str | Path | None = None) -> Path:
    """Generate ``rows`` canonical rows into a fresh store at ``db`` (replaced if present).

    ``parquet``: keep the generated file there and reuse it on the next build (by default it is written to
    a temporary folder and deleted)."""
    from finops import store
    from finops.ingest import IngestOptions, ingest_path

    db = Path(db)
    db.parent.mkdir(parents=True, exist_ok=True)
    for p in (db, Path(str(db) + ".wal")):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="finops-fleet-") as tmp:
        parquet = write_parquet(parquet or Path(tmp) / f"fleet_{rows}.parquet", rows, days, seed)
        t1 = time.perf_counter()
        con = store.connect(db)
        [result] = ingest_path(con, parquet, IngestOptions(file_label=f"bench fleet: {rows:,} rows, seed {seed}"))
        con.execute("CHECKPOINT")
        con.close()
    if not quiet:
        print(f"{db}: {result.rows_ingested:,} rows (generate {t1 - t0:.1f} s, load {time.perf_counter() - t1:.1f} s)")
    return db


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", required=True)
    ap.add_argument("--parquet", help="keep the generated Parquet file here and reuse it next time")
    args = ap.parse_args()
    build(args.db, args.rows, args.days, args.seed, parquet=args.parquet)


if __name__ == "__main__":
    main()
