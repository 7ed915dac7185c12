"""Ecosystem adapter benchmark (issue 7). Prints figures and ratios against a baseline measured in the same run.

Targets:
  * loading a 1M-row LiteLLM_SpendLogs CSV (all 32 columns, JSON metadata as text) through the
    ``litellm`` adapter <= 3x a bare DuckDB ``CREATE TABLE AS SELECT * FROM read_csv`` of the same file;
  * peak memory of the loading process flat as the file grows (1M vs 3M rows): the adapter streams.

Usage: python bench/adapters.py [--rows 1000000] [--grow 3] [--repeat 2] [--workdir /tmp/finops-bench-adapters]
The CSV files are generated here (never committed). Each load runs in a fresh subprocess so that its
peak RSS (ru_maxrss) can be read. Times are printed, never asserted.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _runner import best_of, run_child  # noqa: E402  (bench/ is on sys.path when run as a script)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# LiteLLM_SpendLogs columns in schema order (BerriAI/litellm schema.prisma), as psql \copy writes them
GEN_SQL = r"""
SELECT 'chatcmpl-' || i AS request_id, 'acompletion' AS call_type,
       md5('key' || (i % 40)) AS api_key,
       round((50 + hash(i * 5) % 3000) * 0.15e-6 + (10 + hash(i * 11) % 600) * 0.6e-6, 9) AS spend,
       (50 + hash(i * 5) % 3000) + (10 + hash(i * 11) % 600) AS total_tokens,
       50 + hash(i * 5) % 3000 AS prompt_tokens, 10 + hash(i * 11) % 600 AS completion_tokens,
       strftime(TIMESTAMP '2026-11-01' + to_milliseconds(i * 120), '%Y-%m-%d %H:%M:%S.%g') AS "startTime",
       strftime(TIMESTAMP '2026-11-01' + to_milliseconds(i * 120 + 300 + hash(i * 19) % 6000),
                '%Y-%m-%d %H:%M:%S.%g') AS "endTime",
       300 + hash(i * 19) % 6000 AS request_duration_ms,
       strftime(TIMESTAMP '2026-11-01' + to_milliseconds(i * 120 + 100 + hash(i * 23) % 200),
                '%Y-%m-%d %H:%M:%S.%g') AS "completionStartTime",
       ['gpt-4o-mini-2024-07-18', 'gpt-4o-2024-08-06', 'claude-3-5-sonnet-20241022'][1 + (hash(i * 3) % 3)::INT] AS model,
       'mid-' || (hash(i * 3) % 3) AS model_id,
       ['gpt-4o-mini', 'gpt-4o', 'claude-sonnet'][1 + (hash(i * 3) % 3)::INT] AS model_group,
       CASE WHEN hash(i * 3) % 3 = 2 THEN 'anthropic' ELSE 'openai' END AS custom_llm_provider,
       'https://api.openai.com/v1' AS api_base, 'user-' || (hash(i) % 500) AS "user",
       '{"user_api_key": "' || md5('key' || (i % 40)) || '", "user_api_key_alias": "svc", '
         || '"user_api_key_team_id": "team-' || (hash(i) % 12) || '", "user_api_key_org_id": null, '
         || '"spend_logs_metadata": null, "requester_ip_address": "", "applied_guardrails": [], '
         || '"status": "success", "additional_usage_values": {"prompt_tokens_details": {"cached_tokens": '
         || (hash(i * 29) % 1024) || '}, "cache_read_input_tokens": ' || (hash(i * 29) % 1024)
         || '}, "error_information": null}' AS metadata,
       CASE WHEN hash(i) % 7 = 0 THEN 'True' ELSE 'False' END AS cache_hit, '' AS cache_key,
       '["prod"]' AS request_tags, 'team-' || (hash(i) % 12) AS team_id, '' AS organization_id,
       'cust-' || (hash(i * 31) % 2000) AS end_user, '' AS requester_ip_address, '{}' AS messages,
       '{}' AS response, '' AS session_id,
       CASE WHEN hash(i) % 200 = 0 THEN 'failure' ELSE 'success' END AS status,
       '' AS mcp_namespaced_tool_name, '' AS agent_id, '{}' AS proxy_server_request
FROM range({n}) t(i)"""

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import duckdb
mode, src, db = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
if mode == "bare-csv":
    con = duckdb.connect(db); con.execute("SET memory_limit = '2GB'")
    con.execute("CREATE TABLE t AS SELECT * FROM read_csv(?)", [src])
    n = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
else:
    from finops import store
    from finops.ingest import IngestOptions, ingest_path
    con = store.connect(db)
    r = ingest_path(con, src, IngestOptions(format="litellm"))[0]
    assert r.rows_rejected == 0, r.rejects[:3]
    n = r.rows_ingested
con.close()
print(json.dumps({{"s": time.perf_counter() - t, "rows": n,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def make_csv(path: Path, n: int) -> Path:
    import duckdb
    if not path.exists():
        gen = duckdb.connect()
        gen.execute(f"COPY ({GEN_SQL.replace('{n}', str(n))}) TO '{path}' (FORMAT csv, HEADER)")
        gen.close()
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--grow", type=int, default=3, help="the larger file has rows x grow rows")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workdir", default="/tmp/finops-bench-adapters")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)

    small = make_csv(work / f"litellm_{a.rows}.csv", a.rows)
    print(f"== LiteLLM_SpendLogs CSV, {a.rows:,} rows ({small.stat().st_size / 1e6:,.0f} MB)")
    bare = best_of(a.repeat, CHILD, "bare-csv", small, work / "bare.duckdb")
    ours = best_of(a.repeat, CHILD, "finops", small, work / "finops.duckdb")
    print(f"bare CTAS read_csv:       {bare['s']:.2f} s, peak {bare['peak_mb']:,.0f} MB")
    print(f"finops ingest (litellm):  {ours['s']:.2f} s, peak {ours['peak_mb']:,.0f} MB, {ours['rows']:,} rows")
    print(f"ratio ingest / bare = {ours['s'] / bare['s']:.2f}x (target <= 3x)")

    big_n = a.rows * a.grow
    big = make_csv(work / f"litellm_{big_n}.csv", big_n)
    print(f"\n== memory as the file grows: {a.rows:,} vs {big_n:,} rows ({big.stat().st_size / 1e6:,.0f} MB)")
    ours_big = run_child(CHILD, "finops", big, work / "finops_big.duckdb")
    print(f"finops ingest {big_n:,} rows: {ours_big['s']:.2f} s, peak {ours_big['peak_mb']:,.0f} MB")
    print(f"peak memory {a.grow}x rows / 1x rows = {ours_big['peak_mb'] / ours['peak_mb']:.2f}x "
          f"(flat is ~1x; the store's DuckDB memory_limit is 1.5 GB)")
    print(f"time {a.grow}x rows / 1x rows = {ours_big['s'] / ours['s']:.2f}x (linear is {a.grow}x)")
    for p in work.glob("*.duckdb*"):
        p.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
