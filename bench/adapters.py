"""Request-level adapter benchmark (issues 7 and 15). Prints figures and ratios against a baseline measured in
the same run.

Targets, for each format of :data:`FORMATS`:
  * loading a 1M-row file through its adapter <= 3x a bare DuckDB ``CREATE TABLE AS SELECT * FROM read_csv``
    / ``read_json`` of the same file;
  * peak memory of the loading process flat as the file grows (1M vs 3M rows): the adapter streams.

Formats measured: litellm (a LiteLLM_SpendLogs CSV, all 32 columns, JSON metadata as text), openai-batch,
anthropic-batch, helicone (pages of 1,000 requests, one per line) and openrouter (one GET /api/v1/generation
response per line): every field the real files carry, generated here by DuckDB (never committed).

Usage: python bench/adapters.py [--rows 1000000] [--grow 3] [--repeat 2] [--formats litellm,openai-batch,...]
       [--workdir /tmp/finops-bench-adapters]
Each load runs in a fresh subprocess so that its peak RSS (ru_maxrss) can be read. Times are printed, never
asserted.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
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

# the OpenAI Batch output line (BatchRequestOutput with a ChatCompletion body, as tests/data/providers/)
OPENAI_BATCH_SQL = r"""
SELECT 'batch_req_' || i AS id, 'req-' || i AS custom_id,
  {'status_code': CASE WHEN hash(i) % 200 = 0 THEN 400 ELSE 200 END, 'request_id': 'req_' || i,
   'body': {'id': 'chatcmpl-' || i, 'object': 'chat.completion', 'created': 1741096800 + i // 20,
            'model': ['gpt-4o-mini-2024-07-18', 'gpt-4o-2024-08-06', 'o3-mini-2025-01-31'][1 + (hash(i * 3) % 3)::INT],
            'choices': [{'finish_reason': 'stop', 'index': 0,
                         'message': {'content': 'ok', 'refusal': NULL, 'role': 'assistant'}}],
            'service_tier': 'default', 'system_fingerprint': 'fp_batch',
            'usage': {'completion_tokens': 10 + hash(i * 11) % 600, 'prompt_tokens': 50 + hash(i * 5) % 3000,
                      'total_tokens': 60 + hash(i * 11) % 600 + hash(i * 5) % 3000,
                      'completion_tokens_details': {'accepted_prediction_tokens': 0, 'audio_tokens': 0,
                                                    'reasoning_tokens': hash(i * 13) % 8,
                                                    'rejected_prediction_tokens': 0},
                      'prompt_tokens_details': {'audio_tokens': 0, 'cached_tokens': (hash(i * 29) % 2) * 32}}}}
    AS response, NULL AS error
FROM range({n}) t(i)"""

# the Anthropic Message Batches result line (MessageBatchIndividualResponse, succeeded)
ANTHROPIC_BATCH_SQL = r"""
SELECT 'doc-' || i AS custom_id,
  {'type': 'succeeded',
   'message': {'id': 'msg_' || i, 'type': 'message', 'role': 'assistant',
               'model': ['claude-sonnet-4-20250514', 'claude-3-5-haiku-20241022'][1 + (hash(i * 3) % 2)::INT],
               'content': [{'type': 'text', 'text': 'ok'}], 'stop_reason': 'end_turn', 'stop_sequence': NULL,
               'usage': {'input_tokens': 10 + hash(i * 5) % 3000, 'cache_read_input_tokens': hash(i * 29) % 2048,
                         'cache_creation_input_tokens': hash(i * 31) % 512,
                         'cache_creation': {'ephemeral_5m_input_tokens': hash(i * 31) % 512,
                                            'ephemeral_1h_input_tokens': 0},
                         'output_tokens': 10 + hash(i * 11) % 600, 'service_tier': 'batch'}}} AS result
FROM range({n}) t(i)"""

# a page of Helicone's POST /v1/request/query per line: {"data": [1,000 HeliconeRequest rows], "error": null}
HELICONE_SQL = r"""
SELECT list({'response_id': 'resp-' || i, 'response_created_at': strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 900), '%Y-%m-%dT%H:%M:%S.%gZ'),
  'response_status': CASE WHEN hash(i) % 200 = 0 THEN 429 ELSE 200 END,
  'response_model': 'gpt-4o-mini-2024-07-18', 'request_id': 'req-' || i,
  'request_created_at': strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%dT%H:%M:%S.%gZ'),
  'request_path': '/v1/chat/completions', 'request_user_id': 'user-' || (hash(i) % 500),
  'request_properties': {'team': 'team-' || (hash(i) % 12)}, 'request_model': 'gpt-4o-mini-2024-07-18',
  'provider': 'OPENAI', 'delay_ms': 300 + hash(i * 19) % 6000, 'time_to_first_token': 100 + hash(i * 23) % 200,
  'total_tokens': 60 + hash(i * 5) % 3000 + hash(i * 11) % 600, 'prompt_tokens': 50 + hash(i * 5) % 3000,
  'prompt_cache_write_tokens': 0, 'prompt_cache_read_tokens': 0, 'completion_tokens': 10 + hash(i * 11) % 600,
  'country_code': 'US', 'costUSD': round((50 + hash(i * 5) % 3000) * 0.15e-6 + (10 + hash(i * 11) % 600) * 0.6e-6, 9),
  'properties': {'team': 'team-' || (hash(i) % 12)}, 'target_url': 'https://api.openai.com',
  'model': 'gpt-4o-mini-2024-07-18'} ORDER BY i) AS data, NULL AS error
FROM range({n}) t(i) GROUP BY i // 1000 ORDER BY i // 1000"""

# one GET /api/v1/generation response per line (GenerationResponse)
OPENROUTER_SQL = r"""
SELECT {'id': 'gen-' || i, 'api_type': 'completions', 'cancelled': false,
        'created_at': strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%dT%H:%M:%S.%gZ'),
        'external_user': 'team-' || (hash(i) % 12), 'finish_reason': 'stop',
        'generation_time': 200.0 + hash(i * 19) % 5000, 'latency': 300.0 + hash(i * 19) % 6000,
        'model': ['openai/gpt-4o', 'anthropic/claude-sonnet-4'][1 + (hash(i * 3) % 2)::INT],
        'native_tokens_prompt': 50 + hash(i * 5) % 3000, 'native_tokens_completion': 10 + hash(i * 11) % 600,
        'native_tokens_cached': (hash(i * 29) % 2) * 32, 'native_tokens_reasoning': 0,
        'tokens_prompt': 50 + hash(i * 5) % 3000, 'tokens_completion': 10 + hash(i * 11) % 600,
        'provider_name': ['OpenAI', 'Anthropic'][1 + (hash(i * 3) % 2)::INT], 'streamed': true,
        'total_cost': round((50 + hash(i * 5) % 3000) * 2.5e-6 + (10 + hash(i * 11) % 600) * 10e-6, 9),
        'upstream_id': 'up-' || i, 'usage': 0.0} AS data
FROM range({n}) t(i)"""


@dataclass(frozen=True)
class BenchFormat:
    name: str           # the adapter
    gen_sql: str        # DuckDB SQL of the file's rows, {n} rows
    kind: str           # csv | jsonl (how the file is written and the bare read)
    options: dict       # IngestOptions fields for the load
    rows_per_line: int = 1


FORMATS = [
    BenchFormat("litellm", GEN_SQL, "csv", {"format": "litellm"}),
    BenchFormat("openai-batch", OPENAI_BATCH_SQL, "jsonl", {"format": "openai-batch"}),
    BenchFormat("anthropic-batch", ANTHROPIC_BATCH_SQL, "jsonl",
                {"format": "anthropic-batch", "start": "2025-03-04T15:00:00"}),
    BenchFormat("helicone", HELICONE_SQL, "jsonl", {"format": "helicone"}),
    BenchFormat("openrouter", OPENROUTER_SQL, "jsonl", {"format": "openrouter"}),
]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import duckdb
mode, src, db = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter()
if mode in ("bare-csv", "bare-jsonl"):
    con = duckdb.connect(db); con.execute("SET memory_limit = '2GB'")
    reader = "read_csv(?)" if mode == "bare-csv" else "read_json(?, format = 'newline_delimited')"
    con.execute(f"CREATE TABLE t AS SELECT * FROM {{reader}}", [src])
    n = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
else:
    from datetime import datetime
    from finops import store
    from finops.ingest import IngestOptions, ingest_path
    opts = json.loads(mode)
    if "start" in opts:
        opts["start"] = datetime.fromisoformat(opts["start"])
    con = store.connect(db)
    r = ingest_path(con, src, IngestOptions(**opts))[0]
    n = r.rows_ingested
con.close()
print(json.dumps({{"s": time.perf_counter() - t, "rows": n,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


GEN_CHILD = r"""
import sys, duckdb
sql, path, how = sys.argv[1], sys.argv[2], sys.argv[3]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute(f"COPY ({sql}) TO '{path}' ({how})")
"""


def make_file(fmt: BenchFormat, work: Path, n: int) -> Path:
    """The file of ``n`` rows, written by DuckDB in a child process: Linux carries a process's peak RSS into the
    children it forks (their ru_maxrss starts at the parent's), so a generation in this process would raise
    every later child's reading."""
    import subprocess
    path = work / f"{fmt.name}_{n}.{fmt.kind}"
    if not path.exists():
        how = "FORMAT csv, HEADER" if fmt.kind == "csv" else "FORMAT json"
        subprocess.run([sys.executable, "-c", GEN_CHILD, fmt.gen_sql.replace("{n}", str(n)), str(path), how],
                       check=True)
    return path


def measure(fmt: BenchFormat, a, work: Path) -> dict:
    import json
    small = make_file(fmt, work, a.rows)
    mode = json.dumps(fmt.options)
    print(f"== {fmt.name}: {a.rows:,} rows ({small.stat().st_size / 1e6:,.0f} MB {fmt.kind})", flush=True)
    bare = best_of(a.repeat, CHILD, f"bare-{fmt.kind}", small, work / "bare.duckdb")
    ours = best_of(a.repeat, CHILD, mode, small, work / "finops.duckdb")
    print(f"bare CTAS read_{'csv' if fmt.kind == 'csv' else 'json'}:  {bare['s']:.2f} s, peak {bare['peak_mb']:,.0f} MB")
    print(f"finops ingest:            {ours['s']:.2f} s, peak {ours['peak_mb']:,.0f} MB, {ours['rows']:,} rows")
    print(f"ratio ingest / bare = {ours['s'] / bare['s']:.2f}x (target <= 3x)", flush=True)
    out = {"format": fmt.name, "bare_s": bare["s"], "ingest_s": ours["s"], "ratio": ours["s"] / bare["s"],
           "peak_mb": ours["peak_mb"], "rows": ours["rows"]}
    if a.grow > 1:
        big = make_file(fmt, work, a.rows * a.grow)
        ours_big = run_child(CHILD, mode, big, work / "finops_big.duckdb")
        print(f"finops ingest {a.rows * a.grow:,} rows: {ours_big['s']:.2f} s, peak {ours_big['peak_mb']:,.0f} MB; "
              f"peak {a.grow}x / 1x = {ours_big['peak_mb'] / ours['peak_mb']:.2f}x (flat ~1x), "
              f"time {ours_big['s'] / ours['s']:.2f}x (linear {a.grow}x)", flush=True)
        out.update(big_s=ours_big["s"], big_peak_mb=ours_big["peak_mb"],
                   peak_ratio=ours_big["peak_mb"] / ours["peak_mb"])
        big.unlink(missing_ok=True)
    for p in work.glob("*.duckdb*"):
        p.unlink(missing_ok=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--grow", type=int, default=3, help="the larger file has rows x grow rows (1: skip it)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--formats", default=",".join(f.name for f in FORMATS),
                    help="comma-separated, from: " + ", ".join(f.name for f in FORMATS))
    ap.add_argument("--workdir", default="/tmp/finops-bench-adapters")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    chosen = [f for f in FORMATS if f.name in a.formats.split(",")]
    results = [measure(f, a, work) for f in chosen]
    print(f"\n{'format':<16} {'bare s':>8} {'ingest s':>9} {'ratio':>6} {'peak MB':>8}"
          + (f" {'peak MB ' + str(a.grow) + 'x':>11} {'peak ratio':>10}" if a.grow > 1 else ""))
    for r in results:
        print(f"{r['format']:<16} {r['bare_s']:>8.2f} {r['ingest_s']:>9.2f} {r['ratio']:>5.2f}x {r['peak_mb']:>8,.0f}"
              + (f" {r['big_peak_mb']:>11,.0f} {r['peak_ratio']:>9.2f}x" if a.grow > 1 else ""))


if __name__ == "__main__":
    main()
