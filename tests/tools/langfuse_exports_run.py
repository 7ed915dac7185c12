"""Write the Langfuse test files (tests/data/langfuse/) from observations stored in real ClickHouse.

Langfuse itself (Next.js web, worker, PostgreSQL, Redis, ClickHouse) cannot run here. What can: its
storage engine. This script runs ClickHouse in-process (chDB, ``pip install chdb==4.4.0`` in a
throwaway venv: ClickHouse 26.9), creates the ``observations`` and ``traces`` tables with the column
types of Langfuse's ClickHouse migrations (packages/shared/clickhouse/migrations/unclustered/ at
langfuse/langfuse 62751446149b702b419a9292ddfc2280cdf74b8c), inserts seven observations whose
usage and cost details are what Langfuse's ingestion stores for the SDK payloads below, and runs
Langfuse's own export queries on them:

* ``blob/proj-1/observations/2025-03-04T15-00-00.jsonl``: the blob-storage export, written by
  ClickHouse itself (``FORMAT JSONEachRow``) from the SELECT of
  ``buildObservationsForBlobStorageExportQuery`` (packages/shared/src/server/repositories/observations.ts:
  the columns of ``LEGACY_OBSERVATION_EXPORT_FIELDS`` with its latency/ttft/model_id overrides,
  ``LIMIT 1 BY id, project_id, type``), one row a line as the raw-passthrough path uploads it; the
  path is ``{projectId}/{table}/{formatBlobExportTimestamp(maxTimestamp)}.jsonl``. Beside it
  ``blob/proj-1/traces/...`` holds the traces rows (id, timestamp, name, user_id, session_id, tags).
* ``ui_export_observations.csv`` / ``.jsonl``: the UI's batch export of the observations table.
  Rows are read from ClickHouse with the SELECT of ``getObservationStream``
  (worker/src/features/database-read-stream/observation-stream.ts; scores and comments left out:
  there are none), parsed as @clickhouse/client parses JSONEachRow, then mapped field for field as
  ``convertObservation`` (observations_converters.ts: dates through
  ``parseClickhouseUTCDateTimeFormat`` to ``Date``, usage/cost maps through ``convertNumericRecord``,
  ``reduceUsageOrCostDetails`` for inputUsage/outputUsage/totalUsage and the costs, latency and
  timeToFirstToken in seconds, the v1 defaults) and ``processObservationRow`` (traceName,
  traceTags, traceTimestamp, userId, toolDefinitionsCount, toolCallsCount, modelId/inputPrice/
  outputPrice/totalPrice from ``enrichObservationWithModelData``, scores, comments) do, and
  serialised as ``transformStreamToCsv`` (headers from the first row; every field quoted, ``"``
  doubled; ``stringifyForCsv``: strings as they are, anything else through ``JSON.stringify``, so a
  ``Date`` is written with its own quotes) and ``transformStreamToJsonl`` (``JSON.stringify`` a row a line).
* ``api_v1_observations.json``: one page of ``GET /api/public/observations``:
  ``transformDbToApiObservation`` (web/src/features/public-api/types/observations.ts) of the same
  ``convertObservation`` output, with ``meta`` as the v1 route pages it.
* ``api_v2_observations.json``: one page of ``GET /api/public/v2/observations?fields=core,basic,
  time,model,usage,metrics``: the fields of ``ObservationV2`` (fern/apis/server/definition/commons.yml)
  in those groups, the route's wire normalisation (web/src/pages/api/public/v2/observations/index.ts:
  prices as strings, ``meta: {}`` on the last page).

Usage stored per observation (Langfuse's ingestion, packages/shared/src/server/ingestion/types.ts):
an OpenAI ``usage`` object goes through ``OpenAICompletionUsageSchema`` (each ``*_tokens_details``
entry becomes ``input_<key>`` / ``output_<key>`` and is subtracted from ``input`` / ``output``);
usage details given as a map go through ``RawUsageDetails`` (kept as given).

    /tmp/lfvenv/bin/python tests/tools/langfuse_exports_run.py tests/data/langfuse
"""
from __future__ import annotations

import csv
import io
import json
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import chdb
from chdb import session as chs

PROJECT = "proj-1"

OBSERVATIONS_DDL = """
CREATE TABLE observations (
    id String, trace_id String, project_id String, environment LowCardinality(String) DEFAULT 'default',
    type LowCardinality(String), parent_observation_id Nullable(String), start_time DateTime64(3),
    end_time Nullable(DateTime64(3)), name String, metadata Map(LowCardinality(String), String),
    level LowCardinality(String), status_message Nullable(String), version Nullable(String),
    input Nullable(String), output Nullable(String), provided_model_name Nullable(String),
    internal_model_id Nullable(String), model_parameters Nullable(String),
    provided_usage_details Map(LowCardinality(String), UInt64), usage_details Map(LowCardinality(String), UInt64),
    provided_cost_details Map(LowCardinality(String), Decimal64(12)),
    cost_details Map(LowCardinality(String), Decimal64(12)), total_cost Nullable(Decimal64(12)),
    completion_start_time Nullable(DateTime64(3)), prompt_id Nullable(String), prompt_name Nullable(String),
    prompt_version Nullable(UInt16), created_at DateTime64(3) DEFAULT now(), updated_at DateTime64(3) DEFAULT now(),
    event_ts DateTime64(3), is_deleted UInt8 DEFAULT 0, tool_definitions Map(String, String) DEFAULT map(),
    tool_calls Array(String) DEFAULT [], tool_call_names Array(String) DEFAULT [],
    usage_pricing_tier_id Nullable(String), usage_pricing_tier_name Nullable(String)
) ENGINE = ReplacingMergeTree(event_ts, is_deleted) ORDER BY (project_id, type, toDate(start_time), id)
"""
TRACES_DDL = """
CREATE TABLE traces (
    id String, timestamp DateTime64(3), name String, user_id Nullable(String), metadata Map(LowCardinality(String), String),
    release Nullable(String), version Nullable(String), project_id String, environment LowCardinality(String) DEFAULT 'default',
    public Bool DEFAULT false, bookmarked Bool DEFAULT false, tags Array(String), input Nullable(String),
    output Nullable(String), session_id Nullable(String), created_at DateTime64(3), updated_at DateTime64(3),
    event_ts DateTime64(3), is_deleted UInt8 DEFAULT 0
) ENGINE = ReplacingMergeTree(event_ts, is_deleted) ORDER BY (project_id, toDate(timestamp), id)
"""

# USD per token, as a Langfuse model definition's prices (matched by internal_model_id)
PRICES = {
    "gpt-4o-mini": {"input": Decimal("0.00000015"), "input_cached_tokens": Decimal("0.000000075"),
                    "output": Decimal("0.0000006")},
    "o3-mini": {"input": Decimal("0.0000011"), "input_cached_tokens": Decimal("0.00000055"),
                "output": Decimal("0.0000044"), "output_reasoning_tokens": Decimal("0.0000044")},
    "claude-3-5-sonnet": {"input": Decimal("0.000003"), "cache_read_input_tokens": Decimal("0.0000003"),
                          "cache_creation_input_tokens": Decimal("0.00000375"), "output": Decimal("0.000015")},
    "text-embedding-3-small": {"input": Decimal("0.00000002")},
}


def openai_usage(usage: dict) -> dict:
    """OpenAICompletionUsageSchema's transform, restated: details become input_/output_ types and
    are subtracted from input/output."""
    out = {"input": usage["prompt_tokens"], "output": usage["completion_tokens"], "total": usage["total_tokens"]}
    for side, key in (("input", "prompt_tokens_details"), ("output", "completion_tokens_details")):
        for k, v in (usage.get(key) or {}).items():
            if v is not None:
                out[f"{side}_{k}"] = v
                out[side] = max(out[side] - v, 0)
    return out


def costs(model: str | None, usage: dict) -> dict:
    """Langfuse's calculated cost: units × the model's price per usage type, total their sum."""
    prices = PRICES.get(model or "")
    if not prices:
        return {}
    out = {k: prices[k] * v for k, v in usage.items() if k in prices}
    out["total"] = sum(out.values())
    return out


# (id, trace, type, name, start, end, completion start, model, usage as stored, level, status message, metadata)
OBSERVATIONS = [
    ("obs-001", "tr-001", "SPAN", "handle-request", "2025-03-04 14:00:00.000", "2025-03-04 14:00:05.200", None,
     None, {}, "DEFAULT", None, {"feature": "assistant"}),
    ("obs-002", "tr-001", "GENERATION", "chat", "2025-03-04 14:00:00.100", "2025-03-04 14:00:02.200",
     "2025-03-04 14:00:00.520", "gpt-4o-mini",
     openai_usage({"prompt_tokens": 1250, "completion_tokens": 180, "total_tokens": 1430,
                   "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
                   "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}),
     "DEFAULT", None, {"feature": "assistant", "ls_provider": "openai"}),
    ("obs-003", "tr-001", "GENERATION", "plan", "2025-03-04 14:00:02.300", "2025-03-04 14:00:09.100",
     "2025-03-04 14:00:07.910", "o3-mini",
     openai_usage({"prompt_tokens": 900, "completion_tokens": 700, "total_tokens": 1600,
                   "prompt_tokens_details": {"cached_tokens": 0},
                   "completion_tokens_details": {"reasoning_tokens": 512}}),
     "DEFAULT", None, {"feature": "assistant"}),
    ("obs-004", "tr-002", "GENERATION", "anthropic-chat", "2025-03-04 14:05:00.000", "2025-03-04 14:05:03.250",
     "2025-03-04 14:05:00.800", "claude-3-5-sonnet",
     {"input": 1052, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 300, "output": 260,
      "total": 3660},
     "DEFAULT", None, {"feature": "search"}),
    ("obs-005", "tr-002", "GENERATION", "chat", "2025-03-04 14:05:04.000", "2025-03-04 14:05:04.150", None,
     "gpt-4o-mini", {}, "ERROR", "RateLimitError: Rate limit reached for gpt-4o-mini", {"feature": "search"}),
    ("obs-006", "tr-002", "EMBEDDING", "embed", "2025-03-04 14:05:05.000", "2025-03-04 14:05:05.090", None,
     "text-embedding-3-small", {"input": 512, "total": 512}, "DEFAULT", None, {}),
    ("obs-007", "tr-002", "GENERATION", "local-model", "2025-03-04 14:05:06.000", "2025-03-04 14:05:08.000",
     "2025-03-04 14:05:06.400", "acme-llama-70b", {"input": 300, "output": 90, "total": 390}, "DEFAULT", None,
     {"feature": "search"}),
]
TRACES = [
    ("tr-001", "2025-03-04 14:00:00.000", "assistant", "user-17", "sess-a", ["prod", "assistant"]),
    ("tr-002", "2025-03-04 14:05:00.000", "search", "user-42", "sess-b", ["prod"]),
]

BLOB_FIELDS = [  # LEGACY_OBSERVATION_EXPORT_FIELDS, in order, with the SQL overrides
    "id", "trace_id", "project_id", "environment", "type", "parent_observation_id", "start_time", "end_time",
    "name", "metadata", "level", "status_message", "version", "input", "output", "provided_model_name",
    "model_parameters", "usage_details", "cost_details", "completion_start_time", "prompt_name",
    "prompt_version", "total_cost",
    "if(isNull(end_time), NULL, date_diff('millisecond', start_time, end_time) / 1000) as latency",
    "if(isNull(completion_start_time), NULL, date_diff('millisecond', start_time, completion_start_time) / 1000) "
    "as time_to_first_token",
    "internal_model_id as model_id", "created_at", "updated_at", "prompt_id", "tool_calls", "tool_call_names",
    "tool_definitions", "usage_pricing_tier_name",
]
UI_SELECT = """
SELECT o.id as id, o.type as type, o.project_id as project_id, o.name as name,
  o.model_parameters as model_parameters, o.start_time as start_time, o.end_time as end_time,
  o.trace_id as trace_id, o.completion_start_time as completion_start_time,
  o.provided_usage_details as provided_usage_details, o.usage_details as usage_details,
  o.provided_cost_details as provided_cost_details, o.cost_details as cost_details, o.level as level,
  o.environment as environment, o.status_message as status_message, o.version as version,
  o.parent_observation_id as parent_observation_id, o.created_at as created_at, o.updated_at as updated_at,
  o.provided_model_name as provided_model_name, o.total_cost as total_cost, o.prompt_id as prompt_id,
  o.prompt_name as prompt_name, o.prompt_version as prompt_version, internal_model_id as internal_model_id,
  if(isNull(end_time), NULL, date_diff('millisecond', start_time, end_time)) as latency,
  if(isNull(completion_start_time), NULL, date_diff('millisecond', start_time, completion_start_time))
    as time_to_first_token,
  o.input as input, o.output as output, o.metadata as metadata, t.name as traceName, t.tags as traceTags,
  t.timestamp as traceTimestamp, t.user_id as userId
FROM observations o LEFT JOIN traces t ON t.id = o.trace_id AND t.project_id = o.project_id
WHERE o.project_id = 'proj-1' LIMIT 1 BY o.id, o.project_id
"""


def sql_value(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, dict):
        return "map(" + ", ".join(f"{sql_value(k)}, {sql_value(x)}" for k, x in v.items()) + ")" if v else "map()"
    if isinstance(v, list):
        return "[" + ", ".join(sql_value(x) for x in v) + "]"
    if isinstance(v, (int, Decimal)):
        return str(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def load(sess) -> None:
    sess.query(OBSERVATIONS_DDL)
    sess.query(TRACES_DDL)
    for (oid, tid, typ, name, start, end, first, model, usage, level, msg, meta) in OBSERVATIONS:
        cost = costs(model, usage)
        cost_sql = "map(" + ", ".join(f"'{k}', toDecimal64('{v}', 12)" for k, v in cost.items()) + ")" \
            if cost else "map()"
        total = f"toDecimal64('{cost['total']}', 12)" if cost else "NULL"
        internal = sql_value(model if model in PRICES else None)
        usage_sql = "CAST(" + sql_value({k: int(v) for k, v in usage.items()}) + " AS Map(LowCardinality(String), UInt64))" \
            if usage else "map()"
        sess.query(
            "INSERT INTO observations (id, trace_id, project_id, type, parent_observation_id, start_time, end_time, "
            "name, metadata, level, status_message, provided_model_name, internal_model_id, model_parameters, "
            "provided_usage_details, usage_details, cost_details, total_cost, completion_start_time, created_at, "
            "updated_at, event_ts) VALUES ("
            + ", ".join([sql_value(oid), sql_value(tid), sql_value(PROJECT), sql_value(typ),
                         sql_value(None if oid == "obs-001" else "obs-001" if tid == "tr-001" else None),
                         sql_value(start), sql_value(end), sql_value(name),
                         sql_value(meta) if meta else "map()", sql_value(level), sql_value(msg), sql_value(model),
                         internal, sql_value('{"temperature":0.2}' if model else None), usage_sql, usage_sql,
                         cost_sql, total, sql_value(first), sql_value(start), sql_value(end), sql_value(end)])
            + ")")
    for tid, ts, name, user, session, tags in TRACES:
        sess.query("INSERT INTO traces (id, timestamp, name, user_id, metadata, project_id, tags, session_id, "
                   "created_at, updated_at, event_ts) VALUES ("
                   + ", ".join([sql_value(tid), sql_value(ts), sql_value(name), sql_value(user), "map()",
                                sql_value(PROJECT), sql_value(tags), sql_value(session), sql_value(ts),
                                sql_value(ts), sql_value(ts)]) + ")")


def ch_date(s: str | None):
    """parseClickhouseUTCDateTimeFormat: ClickHouse's "YYYY-MM-DD hh:mm:ss.sss" read as UTC."""
    return None if s is None else datetime.fromisoformat(s).replace(tzinfo=UTC)


def numeric(rec: dict | None) -> dict:
    return {k: float(v) if "." in str(v) else int(v) for k, v in (rec or {}).items()}


def reduce_details(d: dict) -> dict:
    """reduceUsageOrCostDetails: every type containing "input" (or "output") added; total as given (0)."""
    def part(word):
        vals = [v for k, v in d.items() if word in k]
        return sum(vals) if vals else None
    return {"input": part("input"), "output": part("output"), "total": d.get("total", 0)}


def convert_observation(r: dict) -> dict:
    """convertObservation (complete: the v1 defaults), field for field, in its key order."""
    usage, cost = numeric(r["usage_details"]), numeric(r["cost_details"])
    ru, rc = reduce_details(usage), reduce_details(cost)
    start, end, first = ch_date(r["start_time"]), ch_date(r["end_time"]), ch_date(r["completion_start_time"])
    return {
        "id": r["id"], "traceId": r["trace_id"], "startTime": start, "endTime": end, "projectId": r["project_id"],
        "parentObservationId": r["parent_observation_id"], "type": r["type"], "environment": r["environment"],
        "name": r["name"], "level": r["level"], "statusMessage": r["status_message"], "version": r["version"],
        "createdAt": ch_date(r["created_at"]), "updatedAt": ch_date(r["updated_at"]),
        "input": r["input"], "output": r["output"], "metadata": r["metadata"] or {},
        "model": r["provided_model_name"], "internalModelId": r["internal_model_id"],
        "modelParameters": json.loads(r["model_parameters"]) if r["model_parameters"] else None,
        "completionStartTime": first, "promptId": r["prompt_id"], "promptName": r["prompt_name"],
        "promptVersion": r["prompt_version"],
        "latency": (end - start).total_seconds() if end else None,
        "timeToFirstToken": (first - start).total_seconds() if first else None,
        "providedUsageDetails": numeric(r["provided_usage_details"]), "usageDetails": usage, "costDetails": cost,
        "providedCostDetails": numeric(r["provided_cost_details"]),
        "inputCost": rc["input"], "outputCost": rc["output"], "totalCost": rc["total"],
        "inputUsage": ru["input"] or 0, "outputUsage": ru["output"] or 0, "totalUsage": ru["total"] or 0,
        "usagePricingTierId": None, "usagePricingTierName": None, "toolDefinitions": None, "toolCalls": None,
        "toolCallNames": None,
    }


def model_data(model: str | None) -> dict:
    """enrichObservationWithModelData: the matched model's id and prices (Prisma Decimals)."""
    p = PRICES.get(model or "")
    return {"modelId": model if p else None, "inputPrice": p.get("input") if p else None,
            "outputPrice": p.get("output") if p else None, "totalPrice": None}


def js(v) -> str:
    """JSON.stringify: Date -> its toISOString in quotes, numbers as JavaScript prints them."""
    if isinstance(v, datetime):
        return '"' + v.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{v.microsecond // 1000:03d}Z" + '"'
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, (int, float, Decimal)):
        f = float(v)
        if f == int(f) and abs(f) < 1e21:
            return str(int(f))
        text = repr(f)
        if "e" in text and abs(f) >= 1e-6:
            text = format(Decimal(text), "f")
        return text.replace("e-0", "e-")
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(js(x) for x in v) + "]"
    return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{js(x)}" for k, x in v.items()) + "}"


def csv_field(v) -> str:
    """transformStreamToCsv: ``row[h] ?? ""``, stringifyForCsv, every field quoted."""
    text = "" if v is None else v if isinstance(v, str) else js(v)
    return '"' + text.replace('"', '""') + '"'


def main(out: Path) -> None:
    sess = chs.Session()
    load(sess)
    out.mkdir(parents=True, exist_ok=True)
    # blob-storage export: ClickHouse writes the file
    blob = out / "blob" / PROJECT
    (blob / "observations").mkdir(parents=True, exist_ok=True)
    (blob / "traces").mkdir(parents=True, exist_ok=True)
    stamp = "2025-03-04T15-00-00"
    rows = sess.query(f"SELECT {', '.join(BLOB_FIELDS)} FROM observations WHERE project_id = '{PROJECT}' "
                      "ORDER BY event_ts DESC LIMIT 1 BY id, project_id, type FORMAT JSONEachRow").bytes()
    (blob / "observations" / f"{stamp}.jsonl").write_bytes(rows)
    traces = sess.query("SELECT id, timestamp, name, user_id, metadata, release, version, project_id, environment, "
                        "public, bookmarked, tags, input, output, session_id, created_at, updated_at FROM traces "
                        "ORDER BY id FORMAT JSONEachRow").bytes()
    (blob / "traces" / f"{stamp}.jsonl").write_bytes(traces)
    # the UI's batch export, and the API pages
    ch_rows = [json.loads(line) for line in sess.query(UI_SELECT + " FORMAT JSONEachRow").bytes().splitlines()]
    ch_rows.sort(key=lambda r: r["id"])
    ui = []
    for r in ch_rows:
        ui.append({**convert_observation(r), "traceName": r["traceName"], "traceTags": r["traceTags"],
                   "traceTimestamp": ch_date(r["traceTimestamp"]), "userId": r["userId"],
                   "toolDefinitionsCount": None, "toolCallsCount": None, **model_data(r["internal_model_id"]),
                   "scores": {}, "comments": []})
    headers = list(ui[0])
    lines = [",".join(csv_field(h) for h in headers)] + [",".join(csv_field(r.get(h)) for h in headers) for r in ui]
    (out / "ui_export_observations.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "ui_export_observations.jsonl").write_text("".join(js(r) + "\n" for r in ui), encoding="utf-8")
    v1 = []
    for r in ch_rows:
        o = convert_observation(r)
        ru, rc = reduce_details(o["usageDetails"]), reduce_details(o["costDetails"])
        m = model_data(r["internal_model_id"])
        rest = {k: v for k, v in o.items() if k not in (
            "providedUsageDetails", "providedCostDetails", "internalModelId", "inputCost", "outputCost",
            "totalCost", "inputUsage", "outputUsage", "totalUsage", "toolDefinitions", "toolCalls", "toolCallNames")}
        v1.append({**rest, "calculatedInputCost": rc["input"], "calculatedOutputCost": rc["output"],
                   "calculatedTotalCost": rc["total"], "unit": "TOKENS", "inputPrice": m["inputPrice"],
                   "outputPrice": m["outputPrice"], "totalPrice": None, "promptTokens": ru["input"] or 0,
                   "completionTokens": ru["output"] or 0, "totalTokens": ru["total"] or 0,
                   "modelId": o["internalModelId"],
                   "usage": {"unit": "TOKENS", "input": ru["input"] or 0, "output": ru["output"] or 0,
                             "total": ru["total"] or 0}})
    page = {"data": v1, "meta": {"page": 1, "limit": 50, "totalItems": len(v1), "totalPages": 1}}
    (out / "api_v1_observations.json").write_text(js(page) + "\n", encoding="utf-8")
    v2 = []
    for r in ch_rows:
        o = convert_observation(r)
        m = model_data(r["internal_model_id"])
        v2.append({
            "id": o["id"], "traceId": o["traceId"], "startTime": o["startTime"], "endTime": o["endTime"],
            "projectId": o["projectId"], "parentObservationId": o["parentObservationId"], "type": o["type"],
            "isRootObservation": o["parentObservationId"] is None, "name": o["name"], "level": o["level"],
            "statusMessage": o["statusMessage"], "version": o["version"], "environment": o["environment"],
            "bookmarked": False, "public": False, "userId": r["userId"], "sessionId": None,
            "completionStartTime": o["completionStartTime"], "createdAt": o["createdAt"], "updatedAt": o["updatedAt"],
            "providedModelName": o["model"], "internalModelId": o["internalModelId"],
            "modelParameters": o["modelParameters"], "usageDetails": o["usageDetails"],
            "costDetails": o["costDetails"], "totalCost": o["costDetails"].get("total"),
            "usagePricingTierName": None, "latency": o["latency"], "timeToFirstToken": o["timeToFirstToken"],
            "modelId": m["modelId"],
            **{k: (str(m[k]) if m[k] is not None else None) for k in ("inputPrice", "outputPrice", "totalPrice")},
        })
    (out / "api_v2_observations.json").write_text(js({"data": v2, "meta": {}}) + "\n", encoding="utf-8")
    # the traces page of GET /api/public/traces, for the v1/v2 pages' tenant
    tr = [json.loads(line) for line in traces.splitlines()]
    tpage = {"data": [{"id": t["id"], "timestamp": ch_date(t["timestamp"]), "name": t["name"],
                       "userId": t["user_id"], "sessionId": t["session_id"], "tags": t["tags"],
                       "release": t["release"], "version": t["version"], "metadata": t["metadata"],
                       "environment": t["environment"], "public": t["public"]} for t in tr],
             "meta": {"page": 1, "limit": 50, "totalItems": len(tr), "totalPages": 1}}
    for name in ("api_v1_traces.json", "api_v2_traces.json"):
        (out / name).write_text(js(tpage) + "\n", encoding="utf-8")
    assert list(csv.reader(io.StringIO((out / "ui_export_observations.csv").read_text())))[0] == headers
    print(f"chDB {chdb.__version__}: wrote {len(ch_rows)} observations to {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/langfuse"))
