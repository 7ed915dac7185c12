"""Request-level adapter benchmark (issues 7 and 15). Prints figures and ratios against a baseline measured in
the same run.

Targets, for each format of :data:`FORMATS`:
  * loading a 1M-row file through its adapter <= 3x a bare DuckDB ``CREATE TABLE AS SELECT * FROM read_csv``
    / ``read_json`` of the same file;
  * peak memory of the loading process flat as the file grows (1M vs 3M rows): the adapter streams.

Formats measured: every request-level adapter of the README's formats table, each file generated here by DuckDB
(never committed) from the fields of the test fixtures in tests/data/ (one real record as a template, ids, times
and counts varied per row): litellm (a LiteLLM_SpendLogs CSV, all 32 columns; and GET /spend/logs, a JSON array),
langfuse (the v1 API page as one document, v2 cursor pages one per line, the UI's CSV, the blob export's JSON
Lines), otel (Collector file exporter, 100 spans per TracesData line), openai-batch, anthropic-batch, vllm-bench
(one --save-detailed document), llmperf (individual responses, a JSON array), helicone (pages of 1,000 per line),
openrouter (one GET /api/v1/generation response per line), mooncake, azure-trace, gateway-log, generic (a CSV with
--map) and canonical (CSV and JSON Lines). The bare baseline reads the same file: read_csv, read_json
(newline_delimited / array), one document as one row (format unstructured), a text log as one VARCHAR column.

Usage: python bench/adapters.py [--rows 1000000] [--grow 3] [--repeat 2] [--formats litellm,openai-batch,...]
       [--workdir /tmp/finops-bench-adapters] [--keep] [--adapter-only]
--adapter-only also times the adapter's part alone (probe, text checks, its Source materialised, no load pass),
paired with the same bare reads: ingest / bare less read / bare is what the load pass adds.
Each load runs in a fresh subprocess so that its peak RSS (ru_maxrss) can be read. Times are printed, never
asserted. Timed (wall and CPU) from a connected store to the load's end: the process's start (Python's imports,
0.4 s for finops; a new store's tables, 0.35 s) is a command's cost, not the reading's, and is printed apart
(before 2026-12-04 it was inside the ingest's time: on the 37 MB azure-trace file, 0.76 s of its 1.84 s).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from _runner import run_child  # noqa: E402  (bench/ is on sys.path when run as a script)

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
         || ((hash(i * 29) % 2) * 32) || '}, "cache_read_input_tokens": ' || ((hash(i * 29) % 2) * 32)
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


# ---------------------------------------------------------------- formats generated from a fixture's record
# The generators below take one real record of a fixture in tests/data/ (every field it carries) as a template
# and vary its ids, times and counts per row in SQL (json_merge_patch); each row is one ``line`` of text.

SPAN_NS = 1741096800000000000   # 2025-03-04T14:00:00Z in ns

# LiteLLM GET /spend/logs: a JSON array of spend-log rows (JSON columns as objects); tests/data/litellm/spend_logs.json
LITELLM_JSON_SQL = r"""
SELECT line FROM (
  SELECT -1 AS k, '[' AS line
  UNION ALL
  SELECT i, CASE WHEN i > 0 THEN ',' ELSE '' END || CAST(json_merge_patch(tpl.j, json_object(
    'request_id', 'chatcmpl-' || i,
    'startTime', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%dT%H:%M:%S.%fZ'),
    'endTime', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 300 + hash(i * 19) % 6000), '%Y-%m-%dT%H:%M:%S.%fZ'),
    'completionStartTime', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 100 + hash(i * 23) % 200), '%Y-%m-%dT%H:%M:%S.%fZ'),
    'prompt_tokens', 50 + hash(i * 5) % 3000, 'completion_tokens', 10 + hash(i * 11) % 600,
    'total_tokens', 60 + hash(i * 5) % 3000 + hash(i * 11) % 600,
    'spend', round((50 + hash(i * 5) % 3000) * 0.15e-6 + (10 + hash(i * 11) % 600) * 0.6e-6, 9),
    'team_id', 'team-' || (hash(i) % 12), 'user', 'user-' || (hash(i) % 500),
    'metadata', json_object('usage_object', json_object(
      'prompt_tokens', 50 + hash(i * 5) % 3000, 'completion_tokens', 10 + hash(i * 11) % 600,
      'total_tokens', 60 + hash(i * 5) % 3000 + hash(i * 11) % 600,
      'prompt_tokens_details', json_object('cached_tokens', (hash(i * 29) % 2) * 32))))) AS VARCHAR)
  FROM tpl, range({n}) t(i)
  UNION ALL
  SELECT {n}, ']'
) ORDER BY k"""

_LANGFUSE_TIMES = r"""
    'startTime', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%dT%H:%M:%S.%gZ'),
    'endTime', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 300 + hash(i * 19) % 6000), '%Y-%m-%dT%H:%M:%S.%gZ'),
    'completionStartTime', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 100 + hash(i * 23) % 200), '%Y-%m-%dT%H:%M:%S.%gZ'),
    'createdAt', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%dT%H:%M:%S.%gZ'),
    'updatedAt', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 300 + hash(i * 19) % 6000), '%Y-%m-%dT%H:%M:%S.%gZ'),
    'latency', (300 + hash(i * 19) % 6000) / 1000.0, 'timeToFirstToken', (100 + hash(i * 23) % 200) / 1000.0,
    'usageDetails', json_object('input', 50 + hash(i * 5) % 3000, 'output', 10 + hash(i * 11) % 600,
                                'input_cached_tokens', (hash(i * 29) % 2) * 1024, 'input_audio_tokens', 0,
                                'output_reasoning_tokens', 0, 'output_audio_tokens', 0,
                                'total', 60 + hash(i * 5) % 3000 + hash(i * 11) % 600 + (hash(i * 29) % 2) * 1024)"""

# Langfuse GET /api/public/observations (v1): one page {"data": [...], "meta": {...}} holding every observation
# (tests/data/langfuse/api_v1_observations.json, its first GENERATION)
LANGFUSE_V1_SQL = r"""
SELECT line FROM (
  SELECT -1 AS k, '{"data": [' AS line
  UNION ALL
  SELECT i, CASE WHEN i > 0 THEN ',' ELSE '' END || CAST(json_merge_patch(tpl.j, json_object(
    'id', 'obs-' || i, 'traceId', 'tr-' || (i // 3), """ + _LANGFUSE_TIMES + r""")) AS VARCHAR)
  FROM tpl, range({n}) t(i)
  UNION ALL
  SELECT {n}, '], "meta": {"page": 1, "limit": ' || {n} || ', "totalItems": ' || {n} || ', "totalPages": 1}}'
) ORDER BY k"""

# Langfuse GET /api/public/v2/observations: one cursor page of 1,000 observations per line
# (tests/data/langfuse/api_v2_observations.json, its first GENERATION)
LANGFUSE_V2_SQL = r"""
SELECT '{"data": [' || string_agg(CAST(json_merge_patch(tpl.j, json_object(
    'id', 'obs-' || i, 'traceId', 'tr-' || (i // 3), 'userId', 'user-' || (hash(i) % 500), """ + _LANGFUSE_TIMES + r""",
    'totalCost', round((50 + hash(i * 5) % 3000) * 0.15e-6 + (10 + hash(i * 11) % 600) * 0.6e-6, 9)))
    AS VARCHAR), ',' ORDER BY i) || '], "meta": {"cursor": "c' || (i // 1000) || '"}}' AS line
FROM tpl, range({n}) t(i) GROUP BY i // 1000 ORDER BY i // 1000"""

# Langfuse blob-storage export (ClickHouse's snake_case columns), one observation per line
# (tests/data/langfuse/blob/proj-1/observations/*.jsonl, its first GENERATION)
LANGFUSE_BLOB_SQL = r"""
SELECT CAST(json_merge_patch(tpl.j, json_object(
    'id', 'obs-' || i, 'trace_id', 'tr-' || (i // 3),
    'start_time', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%d %H:%M:%S.%g'),
    'end_time', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 300 + hash(i * 19) % 6000), '%Y-%m-%d %H:%M:%S.%g'),
    'completion_start_time', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 100 + hash(i * 23) % 200), '%Y-%m-%d %H:%M:%S.%g'),
    'created_at', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%d %H:%M:%S.%g'),
    'updated_at', strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 300 + hash(i * 19) % 6000), '%Y-%m-%d %H:%M:%S.%g'),
    'latency', (300 + hash(i * 19) % 6000) / 1000.0, 'time_to_first_token', (100 + hash(i * 23) % 200) / 1000.0,
    'usage_details', json_object('input', 50 + hash(i * 5) % 3000, 'output', 10 + hash(i * 11) % 600,
                                 'total', 60 + hash(i * 5) % 3000 + hash(i * 11) % 600))) AS VARCHAR) AS line
FROM tpl, range({n}) t(i)"""

# The Langfuse UI's CSV export: every cell written by JSON.stringify (a date keeps its quotes); the fixture
# row's columns in order (tests/data/langfuse/ui_export_observations.csv, its first GENERATION)
LANGFUSE_CSV_SQL = r"""
SELECT tpl.* REPLACE (
  'obs-' || i AS id, 'tr-' || (i // 3) AS "traceId",
  '"' || strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120), '%Y-%m-%dT%H:%M:%S.%gZ') || '"' AS "startTime",
  '"' || strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 300 + hash(i * 19) % 6000), '%Y-%m-%dT%H:%M:%S.%gZ') || '"' AS "endTime",
  '"' || strftime(TIMESTAMP '2025-03-04' + to_milliseconds(i * 120 + 100 + hash(i * 23) % 200), '%Y-%m-%dT%H:%M:%S.%gZ') || '"' AS "completionStartTime",
  CAST((300 + hash(i * 19) % 6000) / 1000.0 AS VARCHAR) AS latency,
  CAST(json_object('input', 50 + hash(i * 5) % 3000, 'output', 10 + hash(i * 11) % 600,
                   'total', 60 + hash(i * 5) % 3000 + hash(i * 11) % 600) AS VARCHAR) AS "usageDetails",
  'user-' || (hash(i) % 500) AS "userId")
FROM tpl, range({n}) t(i)"""

# The OpenTelemetry Collector's file exporter (format: json): one TracesData per line, a batch of 100 chat spans
# of the openai_v2 instrumentation under one resource (tests/data/otel_genai_spans.jsonl, its first chat span)
OTEL_SQL = r"""
SELECT CAST(json_object('resourceSpans', [json_object(
  'resource', json_extract(tpl.j, '$.resource'),
  'scopeSpans', [json_object('scope', json_extract(tpl.j, '$.scope'), 'spans', list(json_object(
    'traceId', md5('t' || (i // 2)), 'spanId', substr(md5('s' || i), 1, 16), 'parentSpanId', '', 'flags', 257,
    'name', 'chat gpt-4o-mini', 'kind', 3,
    'startTimeUnixNano', CAST(""" + str(SPAN_NS) + r""" + i * 120000000 AS VARCHAR),
    'endTimeUnixNano', CAST(""" + str(SPAN_NS) + r""" + i * 120000000 + (300 + hash(i * 19) % 6000) * 1000000 AS VARCHAR),
    'attributes', [
      json_object('key', 'gen_ai.operation.name', 'value', json_object('stringValue', 'chat')),
      json_object('key', 'gen_ai.provider.name', 'value', json_object('stringValue', 'openai')),
      json_object('key', 'gen_ai.request.model', 'value', json_object('stringValue', 'gpt-4o-mini')),
      json_object('key', 'gen_ai.response.model', 'value', json_object('stringValue', 'gpt-4o-mini-2024-07-18')),
      json_object('key', 'gen_ai.response.id', 'value', json_object('stringValue', 'chatcmpl-' || i)),
      json_object('key', 'gen_ai.response.finish_reasons', 'value',
                  json_object('arrayValue', json_object('values', [json_object('stringValue', 'stop')]))),
      json_object('key', 'gen_ai.usage.input_tokens', 'value', json_object('intValue', CAST(50 + hash(i * 5) % 3000 AS VARCHAR))),
      json_object('key', 'gen_ai.usage.output_tokens', 'value', json_object('intValue', CAST(10 + hash(i * 11) % 600 AS VARCHAR))),
      json_object('key', 'gen_ai.usage.cache_read.input_tokens', 'value', json_object('intValue', CAST((hash(i * 29) % 2) * 32 AS VARCHAR))),
      json_object('key', 'gen_ai.request.temperature', 'value', json_object('doubleValue', 0.2)),
      json_object('key', 'server.address', 'value', json_object('stringValue', 'api.openai.com')),
      json_object('key', 'server.port', 'value', json_object('intValue', '443'))],
    'status', json_object()) ORDER BY i))])]) AS VARCHAR) AS line
FROM tpl, range({n}) t(i) GROUP BY i // 100, tpl.j ORDER BY i // 100"""

# vllm bench serve --save-result --save-detailed: one JSON document, its per-request series as arrays of {n}
# (tests/data/vllm_bench_serve_detailed.json: every run-level field kept)
VLLM_SQL = r"""
SELECT CAST(json_merge_patch(any_value(tpl.j), json_object(
  'num_prompts', {n}, 'completed', {n} - count(*) FILTER (hash(i) % 200 = 0),
  'failed', count(*) FILTER (hash(i) % 200 = 0), 'duration', {n} * 0.12 + 6.0,
  'input_lens', list(50 + hash(i * 5) % 3000 ORDER BY i),
  'output_lens', list(CASE WHEN hash(i) % 200 = 0 THEN 0 ELSE 5 END ORDER BY i),
  'ttfts', list(CASE WHEN hash(i) % 200 = 0 THEN 0.0 ELSE (100 + hash(i * 23) % 200) / 1000.0 END ORDER BY i),
  'itls', list(CASE WHEN hash(i) % 200 = 0 THEN []
                    ELSE [0.009962, 0.01246 + (hash(i) % 7) / 1000.0, 0.010003, 0.010848] END ORDER BY i),
  'latencies', list(CASE WHEN hash(i) % 200 = 0 THEN 0.0 ELSE (300 + hash(i * 19) % 6000) / 1000.0 END ORDER BY i),
  'start_times', list(81234.5678 + i * 0.12 ORDER BY i),
  'queue_times', list((hash(i * 31) % 50) / 1000.0 ORDER BY i),
  'generated_texts', list(CASE WHEN hash(i) % 200 = 0 THEN '' ELSE 'lorem lorem lorem ' END ORDER BY i),
  'errors', list(CASE WHEN hash(i) % 200 = 0 THEN 'Traceback: aiohttp.ClientResponseError: 500' ELSE '' END ORDER BY i)
)) AS VARCHAR) AS line
FROM tpl, range({n}) t(i)"""

# LLMPerf token_benchmark_ray.py's <run>_individual_responses.json: a JSON array of one object per request
# (tests/data/llmperf/individual/fireworks_70b.json, its first request)
LLMPERF_SQL = r"""
SELECT line FROM (
  SELECT -1 AS k, '[' AS line
  UNION ALL
  SELECT i, CASE WHEN i > 0 THEN ',' ELSE '' END || CAST(json_merge_patch(tpl.j, json_object(
    'inter_token_latency_s', 0.02 + (hash(i * 7) % 100) / 10000.0, 'ttft_s', (100 + hash(i * 23) % 900) / 1000.0,
    'end_to_end_latency_s', (300 + hash(i * 19) % 6000) / 1000.0,
    'number_input_tokens', 50 + hash(i * 5) % 3000, 'number_output_tokens', 10 + hash(i * 11) % 600,
    'number_total_tokens', 60 + hash(i * 5) % 3000 + hash(i * 11) % 600)) AS VARCHAR)
  FROM tpl, range({n}) t(i)
  UNION ALL
  SELECT {n}, ']'
) ORDER BY k"""

# a Mooncake trace (FAST'25): ms from the start, lengths and the prompt's 512-token block hashes (conversations
# share a prefix of blocks), as tests/data/mooncake_conversation_head300.jsonl
MOONCAKE_SQL = r"""
SELECT i * 120 AS "timestamp", 50 + hash(i * 5) % 6000 AS input_length, 10 + hash(i * 11) % 600 AS output_length,
  list_concat(range((i % 500) * 4, (i % 500) * 4 + 4), range(2000 + i * 8, 2000 + i * 8 + CAST(hash(i * 5) % 10 AS BIGINT)))
    AS hash_ids
FROM range({n}) t(i)"""

# AzureLLMInferenceTrace_conv.csv: TIMESTAMP (7 decimals), ContextTokens, GeneratedTokens
AZURE_SQL = r"""
SELECT strftime(TIMESTAMP '2023-11-16 18:15:46' + to_microseconds(CAST(i * 120000 + hash(i) % 1000 AS BIGINT)), '%Y-%m-%d %H:%M:%S.%f') || '0'
         AS "TIMESTAMP",
       50 + hash(i * 5) % 3000 AS "ContextTokens", 10 + hash(i * 11) % 600 AS "GeneratedTokens"
FROM range({n}) t(i)"""

# the seed gateway's [ROUTE] lines (tests/data/seed_gateway_verbatim.log), with a start-up line now and then
GATEWAY_SQL = r"""
SELECT CASE WHEN i % 10000 = 0 THEN 'INFO:     Application startup complete.' ELSE
  strftime(TIMESTAMP '2026-11-29 10:00:00' + to_milliseconds(i * 120), '%Y-%m-%d %H:%M:%S') || ','
  || lpad(CAST((i * 120) % 1000 AS VARCHAR), 3, '0') || ' [ROUTE] target=' || CASE WHEN hash(i) % 4 = 0 THEN 'slow' ELSE 'fast' END
  || ' len=' || (5 + hash(i * 5) % 200) || ' route_ms=0.00 queue_ms=' || ((hash(i * 7) % 8000) / 10.0)
  || ' service_ms=' || ((600 + hash(i * 19) % 60000) / 10.0) || ' total_ms=' || ((600 + hash(i * 19) % 60000 + hash(i * 7) % 8000) / 10.0)
  || ' cost=' || CASE WHEN hash(i) % 4 = 0 THEN '8.0' ELSE '1.0' END || ' inject=False' END AS line
FROM range({n}) t(i)"""

# our canonical schema (tests/data/canonical_sample.csv's columns)
CANONICAL_SQL = r"""
SELECT 'c-' || i AS request_id,
  strftime(TIMESTAMP '2026-01-05 09:00:00' + to_milliseconds(i * 120), '%Y-%m-%d %H:%M:%S.%g') AS ts,
  ['acme', 'globex', 'initech'][1 + (hash(i) % 3)::INT] AS tenant, ['premium', 'standard'][1 + (hash(i) % 2)::INT] AS sla_tier,
  ['gpt-4o-mini', 'llama-3.1-70b'][1 + (hash(i * 3) % 2)::INT] AS model, ['fast', 'slow'][1 + (hash(i * 3) % 2)::INT] AS route,
  600 + hash(i * 5) % 3000 AS input_tokens, 10 + hash(i * 11) % 600 AS output_tokens, (hash(i * 29) % 2) * 512 AS cached_input_tokens,
  (hash(i * 7) % 8000) / 10.0 AS queue_ms, (600 + hash(i * 19) % 60000) / 10.0 AS service_ms,
  (100 + hash(i * 23) % 2000) / 10.0 AS ttft_ms, (600 + hash(i * 19) % 60000 + hash(i * 7) % 8000) / 10.0 AS total_ms,
  CASE WHEN hash(i) % 200 = 0 THEN 'error' ELSE 'ok' END AS status,
  round((50 + hash(i * 5) % 3000) * 0.15e-6 + (10 + hash(i * 11) % 600) * 0.6e-6, 9) AS cost_usd
FROM range({n}) t(i)"""

# a table of our own naming, mapped with --map (generic)
GENERIC_SQL = r"""
SELECT strftime(TIMESTAMP '2026-01-05 09:00:00' + to_milliseconds(i * 120), '%Y-%m-%dT%H:%M:%S.%gZ') AS "when",
  'gpt-4o-mini' AS engine, 'team-' || (hash(i) % 12) AS team, 50 + hash(i * 5) % 3000 AS prompt,
  10 + hash(i * 11) % 600 AS completion, (600 + hash(i * 19) % 60000) / 10.0 AS wall_ms, 'x' || i AS note
FROM range({n}) t(i)"""


def _fixture_record(rel: str, pick) -> str:
    """One record of a fixture in tests/data/, as JSON text: ``pick`` takes the parsed file."""
    import json
    path = ROOT / "tests" / "data" / rel
    if rel.endswith(".jsonl"):
        doc = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    else:
        doc = json.loads(path.read_text())
    return json.dumps(pick(doc))


def _first_generation(records) -> dict:
    return next(r for r in records if r.get("type") == "GENERATION")


def _litellm_row(doc) -> dict:
    row = dict(doc[0])
    # model_map_information (the proxy's model-cost-map entry, ~3 KB) left out: the file would be 3x larger
    row["metadata"] = {k: v for k, v in row["metadata"].items() if k != "model_map_information"}
    return row


def _otel_template(docs) -> dict:
    rs = docs[0]["resourceSpans"][0]
    return {"resource": rs["resource"], "scope": rs["scopeSpans"][1]["scope"]}


def _vllm_template(doc) -> dict:
    per_request = ("input_lens", "output_lens", "ttfts", "itls", "latencies", "start_times", "queue_times",
                   "generated_texts", "errors")
    return {k: v for k, v in doc.items() if k not in per_request}


@dataclass(frozen=True)
class BenchFormat:
    name: str           # the row's name in the table (the adapter, with its variant)
    gen_sql: str        # DuckDB SQL of the file's rows, {n} rows (a ``line`` column when ``write`` is lines)
    kind: str           # the bare read: csv | jsonl | array (a JSON array) | doc (one JSON document) | text
    options: dict       # IngestOptions fields for the load
    write: str = ""     # csv | json (COPY of the SQL's columns) | lines (its ``line`` column as is); default by kind
    template: tuple | None = None   # (fixture path, pick): the record the SQL reads as tpl.j
    suffix: str = ""    # the file's extension (default: kind)

    @property
    def how(self) -> str:
        return self.write or {"csv": "csv", "jsonl": "json"}.get(self.kind, "lines")

    @property
    def ext(self) -> str:
        return self.suffix or {"array": "json", "doc": "json", "text": "log"}.get(self.kind, self.kind)


START = "2025-03-04T15:00:00"
FORMATS = [
    BenchFormat("litellm", GEN_SQL, "csv", {"format": "litellm"}),
    BenchFormat("litellm-json", LITELLM_JSON_SQL, "array", {"format": "litellm"},
                template=("litellm/spend_logs.json", _litellm_row)),
    BenchFormat("langfuse-v1", LANGFUSE_V1_SQL, "doc", {"format": "langfuse"},
                template=("langfuse/api_v1_observations.json", lambda d: _first_generation(d["data"]))),
    BenchFormat("langfuse-v2", LANGFUSE_V2_SQL, "jsonl", {"format": "langfuse"}, write="lines",
                template=("langfuse/api_v2_observations.json", lambda d: _first_generation(d["data"]))),
    BenchFormat("langfuse-csv", LANGFUSE_CSV_SQL, "csv", {"format": "langfuse"}, template=(
        "langfuse/ui_export_observations.csv", None)),
    BenchFormat("langfuse-blob", LANGFUSE_BLOB_SQL, "jsonl", {"format": "langfuse"}, write="lines",
                template=("langfuse/blob/proj-1/observations/2025-03-04T15-00-00.jsonl", _first_generation)),
    BenchFormat("otel", OTEL_SQL, "jsonl", {"format": "otel"}, write="lines",
                template=("otel_genai_spans.jsonl", _otel_template)),
    BenchFormat("openai-batch", OPENAI_BATCH_SQL, "jsonl", {"format": "openai-batch"}),
    BenchFormat("anthropic-batch", ANTHROPIC_BATCH_SQL, "jsonl", {"format": "anthropic-batch", "start": START}),
    BenchFormat("vllm-bench", VLLM_SQL, "doc", {"format": "vllm-bench"},
                template=("vllm_bench_serve_detailed.json", _vllm_template)),
    BenchFormat("llmperf", LLMPERF_SQL, "array", {"format": "llmperf", "start": START,
                                                  "model": "llama-2-70b-chat"},
                template=("llmperf/individual/fireworks_70b.json", lambda d: d[0])),
    BenchFormat("helicone", HELICONE_SQL, "jsonl", {"format": "helicone"}),
    BenchFormat("openrouter", OPENROUTER_SQL, "jsonl", {"format": "openrouter"}),
    BenchFormat("mooncake", MOONCAKE_SQL, "jsonl", {"format": "mooncake", "start": START, "model": "kimi-k2"}),
    BenchFormat("azure-trace", AZURE_SQL, "csv", {"format": "azure-trace", "model": "gpt-4o"}),
    BenchFormat("gateway-log", GATEWAY_SQL, "text", {"format": "gateway-log"}),
    BenchFormat("generic", GENERIC_SQL, "csv", {"format": "generic", "mapping": {
        "ts": "when", "model": "engine", "tenant": "team", "input_tokens": "prompt", "output_tokens": "completion",
        "total_ms": "wall_ms"}}),
    BenchFormat("canonical", CANONICAL_SQL, "csv", {"format": "canonical"}),
    BenchFormat("canonical-jsonl", CANONICAL_SQL, "jsonl", {"format": "canonical"}),
]

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
t0 = time.perf_counter()
import duckdb
mode, src, db = sys.argv[1], sys.argv[2], sys.argv[3]
# the start of a process, not timed: imports and a new store (an empty one; ours with finops' tables)
if mode.startswith("bare-"):
    con = duckdb.connect(db)
else:
    from datetime import datetime
    from pathlib import Path
    from finops import store
    from finops.ingest import IngestOptions, ingest_path
    from finops.ingest.base import probe, scan_text
    from finops.ingest.loader import _install_macros, detect
    opts = json.loads(mode.removeprefix("read:"))
    if "start" in opts:
        opts["start"] = datetime.fromisoformat(opts["start"])
    o = IngestOptions(**opts)
    con = store.connect(db)     # a store: a reading's cleanup may look up the store's batches
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
t, c0 = time.perf_counter(), cpu()
startup = t - t0
if mode.startswith("bare-"):
    import os
    if mode != "bare-doc":      # a document's buffer is twice its largest object: the file
        con.execute("SET memory_limit = '2GB'")
    size = os.path.getsize(src) + 1
    reader = {{"bare-csv": "read_csv(?)", "bare-jsonl": "read_json(?, format = 'newline_delimited')",
              "bare-array": "read_json(?, format = 'array')",
              # one document is one row: DuckDB reads it whole (its largest object: the file)
              "bare-doc": f"read_json(?, format = 'unstructured', maximum_object_size = {{size}})",
              "bare-text": "read_csv(?, columns = {{'line': 'VARCHAR'}}, header = false, delim = chr(1), quote = '', "
                           "escape = '')"}}[mode]
    con.execute(f"CREATE TABLE t AS SELECT * FROM {{reader}}", [src])
    n = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
elif mode.startswith("read:"):
    # the adapter's own part: probe, checks of the text, its reading (Source) materialised, no load pass
    p = probe(Path(src))
    adapter = detect(p, o.format, bool(o.mapping))
    scan_text(p)
    _install_macros(con)
    source = adapter.read(con, p, o)
    try:
        con.execute(f"CREATE TABLE t AS {{source.sql}}", source.params)
    except duckdb.Error:
        source = source.fallback()
        con.execute(f"CREATE TABLE t AS {{source.sql}}", source.params)
    n = con.execute("SELECT count(*) FROM t").fetchall()[0][0]
    if source.cleanup:
        source.cleanup()
else:
    r = ingest_path(con, src, o)[0]
    n = r.rows_ingested
con.close()
s, cpu_s = time.perf_counter() - t, cpu() - c0
print(json.dumps({{"s": s, "rows": n, "cpu_s": cpu_s, "startup_s": startup,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


GEN_CHILD = r"""
import sys, duckdb
sql, path, how, template, tcsv = sys.argv[1:6]
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
if template:
    con.execute("CREATE TABLE tpl AS SELECT CAST(? AS JSON) AS j", [template])
elif tcsv:      # a CSV fixture's first GENERATION row, every column as text
    con.execute("CREATE TABLE tpl AS SELECT * FROM read_csv(?, all_varchar = true) WHERE type = 'GENERATION' LIMIT 1",
                [tcsv])
opts = {"csv": "FORMAT csv, HEADER", "json": "FORMAT json",
        "lines": "FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x01'"}[how]
con.execute(f"COPY ({sql}) TO '{path}' ({opts})")
"""


def make_file(fmt: BenchFormat, work: Path, n: int) -> Path:
    """The file of ``n`` rows, written by DuckDB in a child process: Linux carries a process's peak RSS into the
    children it forks (their ru_maxrss starts at the parent's), so a generation in this process would raise
    every later child's reading."""
    import subprocess
    path = work / f"{fmt.name}_{n}.{fmt.ext}"
    if not path.exists():
        template = tcsv = ""
        if fmt.template and fmt.template[1] is not None:
            template = _fixture_record(*fmt.template)
        elif fmt.template:
            tcsv = str(ROOT / "tests" / "data" / fmt.template[0])
        subprocess.run([sys.executable, "-c", GEN_CHILD, fmt.gen_sql.replace("{n}", str(n)), str(path), fmt.how,
                        template, tcsv], check=True)
    return path


def measure(fmt: BenchFormat, a, work: Path) -> dict:
    import json
    small = make_file(fmt, work, a.rows)
    mode = json.dumps(fmt.options)
    print(f"== {fmt.name}: {a.rows:,} rows ({small.stat().st_size / 1e6:,.0f} MB {fmt.kind})", flush=True)
    # paired: bare and ours alternate, so a burst of load on the shared machine hits both alike
    bares, ourss, reads = [], [], []
    for _ in range(a.repeat):
        bares.append(run_child(CHILD, f"bare-{fmt.kind}", small, work / "bare.duckdb"))
        ourss.append(run_child(CHILD, mode, small, work / "finops.duckdb"))
        if a.adapter_only:
            reads.append(run_child(CHILD, "read:" + mode, small, work / "read.duckdb"))
    bare, ours = min(bares, key=lambda r: r["s"]), min(ourss, key=lambda r: r["s"])
    reader = {"csv": "read_csv", "text": "read_csv (one column)"}.get(fmt.kind, f"read_json ({fmt.kind})")
    print(f"bare CTAS {reader}: {bare['s']:.2f} s ({bare['cpu_s']:.2f} s CPU), peak {bare['peak_mb']:,.0f} MB")
    print(f"finops ingest:            {ours['s']:.2f} s ({ours['cpu_s']:.2f} s CPU), peak {ours['peak_mb']:,.0f} MB, "
          f"{ours['rows']:,} rows (the process's start, not timed: {ours['startup_s']:.2f} s; the bare read's "
          f"{bare['startup_s']:.2f} s)")
    print(f"ratio ingest / bare = {ours['s'] / bare['s']:.2f}x wall, {ours['cpu_s'] / bare['cpu_s']:.2f}x CPU "
          "(target <= 3x)", flush=True)
    out = {"format": fmt.name, "bare_s": bare["s"], "ingest_s": ours["s"], "ratio": ours["s"] / bare["s"],
           "cpu_ratio": ours["cpu_s"] / bare["cpu_s"],
           "peak_mb": ours["peak_mb"], "bare_peak_mb": bare["peak_mb"], "rows": ours["rows"],
           "file_mb": small.stat().st_size / 1e6}
    if reads:
        read = min(reads, key=lambda r: r["s"])
        print(f"adapter's reading alone (probe, text checks, its SQL materialised; no load pass): {read['s']:.2f} s "
              f"({read['cpu_s']:.2f} s CPU), ratio {read['s'] / bare['s']:.2f}x wall, "
              f"{read['cpu_s'] / bare['cpu_s']:.2f}x CPU", flush=True)
        out["read_ratio"] = read["s"] / bare["s"]
    if a.grow > 1:
        big = make_file(fmt, work, a.rows * a.grow)
        ours_big = run_child(CHILD, mode, big, work / "finops_big.duckdb")
        print(f"finops ingest {a.rows * a.grow:,} rows: {ours_big['s']:.2f} s, peak {ours_big['peak_mb']:,.0f} MB; "
              f"peak {a.grow}x / 1x = {ours_big['peak_mb'] / ours['peak_mb']:.2f}x (flat ~1x), "
              f"time {ours_big['s'] / ours['s']:.2f}x (linear {a.grow}x)", flush=True)
        out.update(big_s=ours_big["s"], big_peak_mb=ours_big["peak_mb"],
                   peak_ratio=ours_big["peak_mb"] / ours["peak_mb"])
        big.unlink(missing_ok=True)
    if not a.keep:
        small.unlink(missing_ok=True)
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
    ap.add_argument("--keep", action="store_true", help="keep the 1x files in --workdir for the next run")
    ap.add_argument("--adapter-only", action="store_true",
                    help="also time the adapter's reading alone (its Source materialised, without the load pass: "
                         "checks, staging, dedup insert, derived tables), paired with the same bare read")
    a = ap.parse_args()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    chosen = [f for f in FORMATS if f.name in a.formats.split(",")]
    load = [f"{x:.2f}" for x in os.getloadavg()]
    print(f"load average at the start: {' '.join(load)} ({os.cpu_count()} cores)", flush=True)
    results = [measure(f, a, work) for f in chosen]
    print(f"\n{'format':<16} {'rows':>10} {'file MB':>8} {'ingest s':>9} {'bare s':>8} {'ratio':>6} {'CPU ratio':>9} {'bare MB':>8} "
          f"{'peak MB':>8}" + (f" {'peak MB ' + str(a.grow) + 'x':>11} {'peak ratio':>10}" if a.grow > 1 else "")
          + (f" {'read ratio':>10}" if a.adapter_only else ""))
    for r in results:
        print(f"{r['format']:<16} {r['rows']:>10,} {r['file_mb']:>8,.0f} {r['ingest_s']:>9.2f} {r['bare_s']:>8.2f} "
              f"{r['ratio']:>5.2f}x {r['cpu_ratio']:>8.2f}x {r['bare_peak_mb']:>8,.0f} {r['peak_mb']:>8,.0f}"
              + (f" {r['big_peak_mb']:>11,.0f} {r['peak_ratio']:>9.2f}x" if a.grow > 1 else "")
              + (f" {r['read_ratio']:>9.2f}x" if a.adapter_only else ""))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
