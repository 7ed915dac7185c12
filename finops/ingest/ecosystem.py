"""Log formats of the ecosystem: LiteLLM, Langfuse, OpenTelemetry GenAI, vLLM and LLMPerf
benchmarks, and the public Azure and Mooncake traces.

Each is one :class:`~finops.ingest.base.Adapter` in the table, recognised from the
file's content by its sniff function. The Azure trace is read as SQL through
:func:`~finops.ingest.tabular.mapped_source`. Mooncake traces, LLMPerf responses and vllm bench results
are read in SQL too (each record parsed once by DuckDB; a vllm document streamed by ijson into a Parquet
file per series), with the Python reading kept for what that SQL would read another way (the SQL stops
with an error and the loader falls back, or the reader hands over before). The others (LiteLLM's JSON
columns too) are parsed in Python a record at a time and written to a temporary Parquet file in chunks
(:func:`~finops.ingest.tabular.rows_to_parquet`). Every source field without a canonical home is kept in
``attrs``.

Detection scores (higher wins; a tie is refused with the candidates):

=============  =====  ==========================================================
format         score  recognised by
=============  =====  ==========================================================
otel           0.99   a ``resourceSpans`` key and ``gen_ai.`` attributes (0.6 without)
vllm-bench     0.99   ``model_id``, ``num_prompts``, ``request_rate``/``duration`` and ``ttfts``/``input_lens`` (0.9 without)
llmperf        0.99   objects with ``ttft_s`` and ``end_to_end_latency_s`` (a summary: 0.9, refused with advice)
mooncake       0.99   JSON Lines with ``timestamp``, ``input_length``, ``output_length``, ``hash_ids`` (0.8 without hash_ids)
litellm        0.97   ``request_id``, ``startTime``, ``spend`` and one of ``call_type``/``prompt_tokens``/``api_key``
langfuse       0.97   ``traceId``, ``startTime`` and usage/model/level fields (a traces file: 0.6, refused with advice)
azure-trace    0.95   a CSV header of exactly ``TIMESTAMP, ContextTokens, GeneratedTokens`` (0.9 with more columns)
=============  =====  ==========================================================
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from finops import sql
from finops.errors import InputError
from finops.ingest import (
    benchruns,
    formats,  # noqa: F401  (the foundation's formats are listed first)
)
from finops.ingest.base import (
    BLANK_JSON_LINE,
    LITELLM_HASHES_SINCE,
    UNIX_EPOCH,
    Adapter,
    IngestOptions,
    Probe,
    Source,
    expect_object,
    expect_objects,
    iso_time,
    json_kind,
    missing_id,
    missing_id_sql,
    probe,
    register,
    time_after,
)
from finops.ingest.tabular import (
    first_json_record,
    iter_records,
    mapped_source,
    nested_source,
    open_text,
    rows_to_parquet,
    user_mapping,
)
from finops.sql import quote_ident

TABULAR = ("csv", "jsonl", "json", "parquet")
KEY = re.compile(r'"([^"\\]{1,100})"\s*:')

# the canonical columns a Python-parsed adapter writes (raw: the loader casts and validates)
# token counts as DOUBLE (whole numbers, exact to 2^53): a count past int64 (1e300 in a file) reaches the loader,
# which rejects it naming row and field, where an int64 column stopped the load with OverflowError
ROW_COLUMNS: dict[str, pa.DataType] = {
    "_row": pa.int64(), "_hash": pa.string(), "request_id": pa.string(), "ts": pa.string(),
    "tenant": pa.string(), "model": pa.string(), "cache_hit": pa.bool_(), "input_tokens": pa.float64(),
    "output_tokens": pa.float64(), "cached_input_tokens": pa.float64(), "queue_ms": pa.float64(),
    "ttft_ms": pa.float64(), "total_ms": pa.float64(), "status": pa.string(), "error_type": pa.string(),
    "cost_usd": pa.float64(), "attrs": pa.string(), "provider": pa.string(), "service_tier": pa.string(),
    "cache_write_tokens": pa.float64(), "cache_write_1h_tokens": pa.float64(), "reasoning_tokens": pa.float64(),
}
# the same columns as text, for a reader that passes the source's values on for the loader to check
# (so a bad value is rejected with its row and field rather than read as missing)
RAW_COLUMNS: dict[str, pa.DataType] = {k: (v if k == "_row" else pa.string()) for k, v in ROW_COLUMNS.items()}
# and the hash an earlier version gave a row without an id (LiteLLM's, :func:`_litellm_row`)
LEGACY_RAW_COLUMNS: dict[str, pa.DataType] = {**RAW_COLUMNS, "_legacy_hash": pa.string()}


# ---------------------------------------------------------------- shared helpers

def head_keys(p: Probe) -> set[str]:
    """Field names visible in the first bytes: the header (CSV) or every JSON key in the head."""
    keys = set(p.columns)
    if p.kind in ("json", "jsonl"):
        keys |= set(KEY.findall(p.head.decode("utf-8", errors="ignore")))
    return keys


_open_text = open_text


def _num(v) -> float | None:
    """A finite number, else None; text read as DuckDB's TRY_CAST reads it, so the SQL readings agree: Python's
    float() also takes other scripts' digits ('١' or '１' as 1), which DuckDB does not.

    A boolean is no number (Python's float(True) is 1.0: a count of ``true`` was stored as 1 token, where the
    canonical reading says "cannot read true as a whole number").

    >>> _num("12.5"), _num(" 1e3 "), _num("\u0661"), _num("nan"), _num(7), _num(True)
    (12.5, 1000.0, None, None, 7.0, None)
    """
    if isinstance(v, bool):
        return None
    if isinstance(v, str) and not v.isascii():
        v = v.strip()               # Python's spaces (the SQL readings trim them too), then ASCII only
        if not v.isascii():
            return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(v) -> int | float | None:
    """A whole number, else None: an int up to 2^53, past it the float itself (the same value; the readings' token
    columns are DOUBLE, which Arrow fills from ints only up to 2^53; the loader rejects a count that large)."""
    f = _num(v)
    if f is None or f != int(f):
        return None
    return int(f) if abs(f) <= 2 ** 53 else f


def _time(v) -> datetime | None:
    if v in (None, ""):
        return None
    try:
        t = iso_time(str(v).strip().replace("Z", "+00:00"))
    except (ValueError, OverflowError):
        return None
    return t


def _ms_between(a, b) -> float | None:
    ta, tb = _time(a), _time(b)
    if ta is None or tb is None or (ta.tzinfo is None) != (tb.tzinfo is None):
        return None
    # whole microseconds as a double, / 1e6 * 1000: the SQL reading's steps (_ms_between_sql). timedelta's own
    # total_seconds() divides exactly, which differs in the last digit past 2**53 µs (285 years: a bad end time)
    return float((tb - ta) // timedelta(microseconds=1)) / 1e6 * 1000.0


def _iso(t: datetime) -> str:
    return t.isoformat(sep=" ")


def _json(obj) -> str:
    return json.dumps(obj, default=str, separators=(",", ":"))


def _pick(field: str, *sources: dict | None):
    """The first value of ``field`` in the given dicts (top level, then each one's ``metadata``)."""
    for src in sources:
        if isinstance(src, dict) and src.get(field) not in (None, ""):
            return src[field]
    for src in sources:
        meta = src.get("metadata") if isinstance(src, dict) else None
        if isinstance(meta, dict) and meta.get(field) not in (None, ""):
            return meta[field]
    return None


def _with_hash(rows: Iterator[dict], unkeyed: list | None = None) -> Iterator[dict]:
    """Rows without an id (None, empty or spaces: :func:`~finops.ingest.base.missing_id`) get a content hash (the
    loader numbers identical ones); ``unkeyed`` gets a True for the first such row."""
    for row in rows:
        if missing_id(row.get("request_id")):
            if unkeyed is not None and not unkeyed:
                unkeyed.append(True)
            if row.get("_hash") is None:
                row["_hash"] = hashlib.md5(_json({k: v for k, v in row.items() if k != "_row"}).encode()).hexdigest()
        yield row


def _python_source(rows: Iterator[dict], after: Callable[[], None] | None = None,
                   columns: dict[str, pa.DataType] = ROW_COLUMNS) -> Source:
    """The rows written to a temporary Parquet file, read back as the Source. When every row has an id the
    loader stages the file as a view (its common load: the rows inserted in one reading of the file, no copy
    of them in memory); rows without one need the whole file's view first, as a staged table."""
    unkeyed: list = []
    path, cleanup = rows_to_parquet(_with_hash(rows, unkeyed), columns)

    def done() -> None:
        cleanup()
        if after:
            after()

    cols_sql = ", ".join(quote_ident(c) for c in columns)
    return Source(f"SELECT {cols_sql} FROM read_parquet(?)", [path], cleanup=done, stage_as_view=not unkeyed)


def _need_model(p: Probe, options: IngestOptions, what: str) -> None:
    if not options.model and "model" not in options.mapping:
        raise InputError(f"{what} names no model: give the model that served it with --model", file=p.name)


# ---------------------------------------------------------------- litellm

# LiteLLM's provider names as they prefix a model ("openai/gpt-4o-mini") or fill custom_llm_provider
LITELLM_PROVIDERS = frozenset({
    "openai", "text-completion-openai", "azure", "azure_ai", "anthropic", "bedrock", "bedrock_converse",
    "sagemaker", "vertex_ai", "vertex_ai_beta", "gemini", "groq", "mistral", "codestral", "cohere", "cohere_chat",
    "together_ai", "fireworks_ai", "deepseek", "xai", "openrouter", "ollama", "ollama_chat", "hosted_vllm", "vllm",
    "huggingface", "databricks", "perplexity", "watsonx", "cerebras", "deepinfra", "anyscale", "replicate",
    "nvidia_nim", "litellm_proxy", "dashscope", "moonshot", "sambanova", "nebius", "novita", "lm_studio",
})
# columns LiteLLM_SpendLogs stores as JSON (text in a psql CSV, objects in the API, JSON text in a payload)
LITELLM_JSON = ("metadata", "request_tags", "messages", "response", "proxy_server_request")
LITELLM_MAPPED = {"request_id", "startTime", "endTime", "completionStartTime", "request_duration_ms", "model",
                  "spend", "prompt_tokens", "completion_tokens", "cache_hit", "custom_llm_provider", "status"}
# what LiteLLM writes for "no value" in its text columns (str(None), str of an empty field)
LITELLM_NULLS = ("", "None", "null", "NULL")


def _sniff_litellm(p: Probe) -> float:
    if p.kind not in ("csv", "jsonl", "json"):
        return 0.0
    keys = head_keys(p)
    if {"request_id", "startTime", "spend"} <= keys and keys & {"call_type", "prompt_tokens", "api_key"}:
        return 0.97
    return 0.0


def _text(v) -> str | None:
    """A LiteLLM text value, with its spellings of null (``"None"``, ``""``) as None."""
    if v is None:
        return None
    s = str(v).strip()
    return None if s in LITELLM_NULLS else s


def _flag(v) -> str | None:
    """LiteLLM's ``cache_hit``: a bool, or ``str(bool)``; ``"None"`` (no cache lookup) is unknown.

    Returned as ``"true"`` / ``"false"``; any other text goes to the loader, which rejects it.
    """
    if isinstance(v, bool):
        return "true" if v else "false"
    s = _text(v)
    if s is None:
        return None
    return {"true": "true", "t": "true", "1": "true", "false": "false", "f": "false", "0": "false"}.get(s.lower(), s)


def _obj(v) -> dict:
    """A JSON column as a dict: already an object (API), or JSON text (CSV cell, payload string)."""
    if isinstance(v, str) and v.strip()[:1] in ("{", "["):
        try:
            v = json.loads(v)
        except json.JSONDecodeError:
            return {}
    return v if isinstance(v, dict) else {}


def _jsonish(v):
    """A JSON column for attrs: parsed where it is JSON text, else as it came."""
    if isinstance(v, str) and v.strip()[:1] in ("{", "["):
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v


def _number_text(v) -> str | None:
    """The source's text of a value read as a number, for the loader's reject: a boolean as JSON spells it
    ("cannot read true as a whole number", as the canonical reading says; Python's str() writes True)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return _text(v)


def _count(v):
    """A whole number, or the source's text where it is not one (the loader rejects it, naming the field)."""
    n = _int(v)
    return n if n is not None else _number_text(v)


def _utc(v):
    """An ISO time as naive UTC text; what cannot be read goes to the loader as it came (it rejects it)."""
    t = _time(v)
    if t is None:
        return _text(v)
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    return _iso(t)


def split_provider(model: str | None, provider: str | None, known: frozenset = LITELLM_PROVIDERS):
    """``(model, provider)``: a ``provider/`` prefix on the model names the provider and is dropped.

    The prefix is the given provider's, or a known provider's where none is given; nothing else of
    the name is changed (``finops.spend.catalogue.resolve`` maps names to prices).

    >>> split_provider("openai/gpt-4o-mini", None)
    ('gpt-4o-mini', 'openai')
    >>> split_provider("gpt-4o-mini", "openai")
    ('gpt-4o-mini', 'openai')
    >>> split_provider("accounts/fireworks/models/llama-v3", "fireworks_ai")
    ('accounts/fireworks/models/llama-v3', 'fireworks_ai')
    """
    if model and "/" in model:
        head, rest = model.split("/", 1)
        if rest and (head == provider or (provider is None and head in known)):
            return rest, head
    return model, provider


def _litellm_usage(rec: dict, meta: dict, response: dict) -> dict:
    """The usage object of one spend-log row: ``metadata.usage_object`` (LiteLLM >= 1.60), else the
    ``additional_usage_values`` the spend-log builder copies from it, else the stored response's."""
    usage = meta.get("usage_object")
    if not isinstance(usage, dict):
        usage = dict(meta.get("additional_usage_values") or {}) if isinstance(
            meta.get("additional_usage_values"), dict) else {}
        if not usage and isinstance(response.get("usage"), dict):
            usage = response["usage"]
    return usage


def _litellm_tokens(rec: dict, usage: dict) -> dict:
    """Token classes of one row, in the canonical convention.

    LiteLLM's ``prompt_tokens`` count cache reads (OpenAI's convention; for Anthropic its
    ``calculate_usage`` adds ``cache_read_input_tokens``) but not Anthropic's cache writes, which come
    as ``cache_creation_input_tokens`` beside them: those are added to ``input_tokens``.
    """
    prompt = _count(rec.get("prompt_tokens"))
    completion = _count(rec.get("completion_tokens"))
    pdet = usage.get("prompt_tokens_details") if isinstance(usage.get("prompt_tokens_details"), dict) else {}
    cdet = usage.get("completion_tokens_details") if isinstance(usage.get("completion_tokens_details"), dict) else {}
    cached = _int(pdet.get("cached_tokens"))
    if cached is None:
        cached = _int(usage.get("cache_read_input_tokens"))
    creation = _int(usage.get("cache_creation_input_tokens"))
    write = creation if creation is not None else _int(pdet.get("cache_write_tokens"))
    details = usage.get("cache_creation_token_details") or usage.get("cache_creation") or {}
    write_1h = _int(details.get("ephemeral_1h_input_tokens")) if isinstance(details, dict) else None
    if write is not None and write_1h is not None:
        write = max(write - write_1h, 0)
    if creation and isinstance(prompt, int):
        prompt += creation
    return {"input_tokens": prompt, "output_tokens": completion, "cached_input_tokens": cached,
            "cache_write_tokens": write, "cache_write_1h_tokens": write_1h,
            "reasoning_tokens": _int(cdet.get("reasoning_tokens"))}


def unpriced_zero(cost: float | None, tokens: int | None, free: bool = False) -> bool:
    """A recorded cost of 0 for a call with tokens is the source's "could not price it" (not free).

    ``free``: the source's 0 is a rule, not a price (a LiteLLM cache hit costs nothing).
    """
    return cost == 0 and bool(tokens) and not free


def _litellm_row(row: int, rec: dict, options: IngestOptions) -> dict:
    meta = _obj(rec.get("metadata"))
    response = _obj(rec.get("response"))
    request = _obj(rec.get("proxy_server_request"))
    usage = _litellm_usage(rec, meta, response)
    tokens = _litellm_tokens(rec, usage)
    error = meta.get("error_information") if isinstance(meta.get("error_information"), dict) else {}
    provider = _text(rec.get("custom_llm_provider")) or _text(error.get("llm_provider"))
    model, provider = split_provider(_text(rec.get("model")) or _text(rec.get("model_group")), provider)
    status = (_text(rec.get("status")) or _text(meta.get("status")) or "").lower()
    status = {"success": "ok", "failure": "error"}.get(status, status or ("error" if error else "ok"))
    hit = _flag(rec.get("cache_hit"))
    spend = _num(rec.get("spend"))
    attrs = {k: _jsonish(v) for k, v in rec.items() if k not in LITELLM_MAPPED}
    attrs["model_logged"] = _text(rec.get("model"))
    if _text(rec.get("request_id")) is None and rec.get("request_id") is not None:
        attrs["request_id_logged"] = rec.get("request_id")
    cost = spend
    used = sum(v for v in (tokens["input_tokens"], tokens["output_tokens"]) if isinstance(v, int))
    if unpriced_zero(spend, used, free=hit == "true"):
        cost, attrs["source_cost_usd"] = None, spend
    tenant = (_pick(options.tenant_field, rec, {"metadata": meta}) if options.tenant_field
              else _text(rec.get("team_id")))
    tier = _text(response.get("service_tier")) or _text(meta.get("service_tier")) or _text(
        (request.get("body") or {}).get("service_tier") if isinstance(request.get("body"), dict) else None)
    total = _num(rec.get("request_duration_ms"))
    if total is None:
        total = _ms_between(rec.get("startTime"), rec.get("endTime"))
    spend_text = None if spend is not None else _number_text(rec.get("spend"))
    out = {
        "request_id": _text(rec.get("request_id")), "ts": _utc(rec.get("startTime")),
        "tenant": str(tenant) if _text(tenant) is not None else options.tenant,
        "model": model or options.model, "provider": provider, "service_tier": tier, "cache_hit": hit,
        **tokens,
        # a failure has no first token: LiteLLM logs its completionStartTime as the failure's time (0 ms after
        # the start in its failure log), which read as a time to first token of 0 in the percentiles
        "ttft_ms": _ms_between(rec.get("startTime"), rec.get("completionStartTime")) if status == "ok" else None,
        "total_ms": total,
        "status": status, "error_type": (_text(error.get("error_class")) or None) if status != "ok" else None,
        "cost_usd": spend_text if spend_text is not None else cost, "attrs": _json(attrs),
    }
    got = {"_row": row, **{k: None if v is None else str(v) for k, v in out.items()}}
    if got["request_id"] is None:
        # the hash earlier versions gave the row: every field of it, attrs among them, which differ between
        # exports of the same row (a 1.65 and a 1.74 CSV, GET /spend/logs): a store they loaded is looked up by it
        got["_legacy_hash"] = hashlib.md5(_json({k: v for k, v in got.items() if k != "_row"}).encode()).hexdigest()
        got["_hash"] = _litellm_identity_hash(rec, meta, got)
    return got


def _litellm_identity_hash(rec: dict, meta: dict, got: dict) -> str:
    """The content hash of a spend-log row without a request_id (LiteLLM writes ``"None"`` for a failed call):
    of the fields that identify the request, which every export of LiteLLM_SpendLogs carries alike (a psql CSV
    of 1.65's or 1.74's columns, GET /spend/logs, GET /spend/logs/ui, a pull), times read as UTC and numbers
    as numbers. Not of attrs (the columns a version has, ``session_id`` or ``status`` missing from 1.65) nor of
    what the options decide (``--tenant-field``, ``--model``): the same row hashes the same from any export."""
    spend = _num(rec.get("spend"))
    ident = {"start": got["ts"], "end": _utc(rec.get("endTime")),
             "model": _text(rec.get("model")) or _text(rec.get("model_group")), "team_id": _text(rec.get("team_id")),
             "api_key": _text(rec.get("api_key")) or _text(meta.get("user_api_key")), "user": _text(rec.get("user")),
             "end_user": _text(rec.get("end_user")), "call_type": _text(rec.get("call_type")),
             "cache_key": _text(rec.get("cache_key")), "input_tokens": got["input_tokens"],
             "output_tokens": got["output_tokens"], "spend": spend if spend is not None else _number_text(rec.get("spend")),
             "status": got["status"], "error_type": got["error_type"]}
    return hashlib.md5(_json(ident).encode()).hexdigest()


# ---- the typed fast path of LiteLLM_SpendLogs (a psql \copy CSV, GET /spend/logs JSON): _litellm_row in SQL;
# its helpers serve the Langfuse fast path too

#: the characters Python's ``str.strip()`` takes off (``str.isspace()``: ASCII's, the separators 28 to 31 among
#: them, and Unicode's spaces), as SQL text for ``trim``: the Python readings strip them from every name
_WS = " || ".join(f"chr({c})" for c in (9, 10, 11, 12, 13, 28, 29, 30, 31, 32, 133, 160, 5760, *range(8192, 8203),
                                         8232, 8233, 8239, 8287, 12288))
#: the ISO 8601 times Python's fromisoformat and DuckDB's casts read alike (others: the Python path)
ISO_TIME = r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}:\d{2})?"


def _trim_sql(x: str) -> str:
    """``x.strip()`` in SQL: ``trim(x, _WS)``, the trim only run on a text whose first or last character may be
    white space (a code of 32 or less, or of 133 or more; trim copies every text it is given, the test does not)."""
    return (f"CASE WHEN ascii({x}) <= 32 OR ascii({x}) >= 133 OR right({x}, 1) <= ' ' OR right({x}, 1) >= chr(133) "
            f"THEN trim({x}, {_WS}) ELSE {x} END")


def _t(x: str) -> str:
    """``_text`` in SQL: trimmed, LiteLLM's spellings of no value as NULL."""
    return f"CASE WHEN {_trim_sql(x)} NOT IN ('', 'None', 'null', 'NULL') THEN {_trim_sql(x)} END"


def _whole(x: str) -> str:
    """``_int`` in SQL: a whole number (DOUBLE), else NULL."""
    d = f"TRY_CAST({_trim_sql(x)} AS DOUBLE)"
    return f"CASE WHEN isfinite({d}) AND {d} = floor({d}) THEN {d} END"


def _finite(x: str) -> str:
    """``_num`` in SQL: a finite number (DOUBLE), else NULL."""
    d = f"TRY_CAST({_trim_sql(x)} AS DOUBLE)"
    return f"CASE WHEN isfinite({d}) THEN {d} END"


def _opens_json_sql(x: str) -> str:
    """Whether a text's first character after spaces, tabs and line breaks opens a JSON object or array (its
    first character's code looked at, the text trimmed only where it starts with one of those)."""
    return (f"(ascii({x}) IN (123, 91) OR (ascii({x}) IN (32, 9, 10, 13) "
            f"AND left(ltrim({x}, {_WS}), 1) IN ('{{', '[')))")


def _json_quoted_sql(x: str) -> str:
    """Whether a text starts and ends with a double quote, two characters at least (a JSON-quoted text)."""
    return f"(ascii({x}) = 34 AND suffix({x}, '\"') AND strlen({x}) >= 2)"


def _cell_json_text_sql(x: str) -> str:
    """``cell`` then ``_jsonish`` of a CSV cell in SQL, as JSON text, parsed once: the cell's own text where it is
    a JSON object or array (the JSON reader checks it), else the cell as a JSON string, ``null`` for an empty
    cell."""
    return (f"CASE WHEN {x} IS NULL OR {x} = '' THEN 'null' "
            f"WHEN {_opens_json_sql(x)} "
            f"THEN coalesce(CAST(TRY_CAST({x} AS JSON) AS VARCHAR), CAST(to_json({x}) AS VARCHAR)) "
            f"ELSE CAST(to_json({x}) AS VARCHAR) END")


def _object_fields_sql(x: str, paths_sql: str) -> str:
    """The values (JSON) at ``paths_sql`` (SQL: a list of JSON paths) of a text holding a JSON object, the text
    parsed twice (checked, then read); NULL for a text that is no JSON object (``_obj``'s ``{}``)."""
    return (f"CASE WHEN (ascii({x}) = 123 OR (ascii({x}) IN (32, 9, 10, 13) AND left(ltrim({x}, {_WS}), 1) = '{{')) "
            f"AND json_valid({x}) "
            f"THEN json_extract({x}, [{paths_sql}]) END")


def _time_check_sql(x: str) -> str:
    """error() where a time is not plain ISO 8601 (:data:`ISO_TIME`): the Python path reads that file."""
    return (f"CASE WHEN {_t(x)} IS NOT NULL AND NOT regexp_full_match({_t(x)}, {sql.string_literal(ISO_TIME)}) "
            "THEN error('fast path: a time that is not plain ISO 8601') END")


def _read_time_check_sql(x: str) -> str:
    """:func:`_time_check_sql` of a time already read by ``_t`` (``_t`` of its result is itself): not trimmed and
    compared again (inside a CASE branch, as here, the two trims and the comparison cost about 1.9 s CPU per 1M rows
    for each time)."""
    return (f"CASE WHEN {x} IS NOT NULL AND NOT regexp_full_match({x}, {sql.string_literal(ISO_TIME)}) "
            "THEN error('fast path: a time that is not plain ISO 8601') END")


def _aware_sql(x: str) -> str:
    """Whether a time's text ends with its offset (``Z`` or ``+hh:mm``)."""
    return f"regexp_matches({x}, '(Z|[+-]\\d{{2}}:\\d{{2}})$')"


def _ms_between_sql(start_sql: str, end_sql: str) -> str:
    """``_ms_between`` in SQL, in the same floating-point steps (microseconds / 1e6 * 1000)."""
    ta, tb = _t(start_sql), _t(end_sql)
    return _ms_between_texts_sql(ta, tb, _aware_sql(ta), _aware_sql(tb))


def _ms_between_texts_sql(start_sql: str, end_sql: str, start_aware_sql: str, end_aware_sql: str) -> str:
    """:func:`_ms_between_sql` of two times already read by ``_t``, whether each is aware given."""
    us = (f"CASE WHEN {start_aware_sql} AND {end_aware_sql} THEN epoch_us(CAST({end_sql} AS TIMESTAMPTZ)) - "
          f"epoch_us(CAST({start_sql} AS TIMESTAMPTZ)) WHEN NOT {start_aware_sql} AND NOT {end_aware_sql} THEN "
          f"epoch_us(CAST({end_sql} AS TIMESTAMP)) - epoch_us(CAST({start_sql} AS TIMESTAMP)) END")
    return f"CAST({us} AS DOUBLE) / CAST(1000000 AS DOUBLE) * CAST(1000 AS DOUBLE)"


#: the fields _litellm_row reads as numbers
LITELLM_NUMBERS = ("spend", "prompt_tokens", "completion_tokens", "request_duration_ms")
#: the fields of a GET /spend/logs row that the rules read as text (the JSON path's columns)
LITELLM_JSON_TEXT_FIELDS = tuple(sorted(LITELLM_MAPPED | {"model_group", "metadata", "response",
                                                          "proxy_server_request", "team_id", "request_duration_ms"}))
#: the usage object's counts, in the order of :func:`litellm_fast_source`'s ``uv`` list
LITELLM_USAGE_PATHS = ("prompt_tokens_details.cached_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
                       "prompt_tokens_details.cache_write_tokens", "completion_tokens_details.reasoning_tokens")


def _plain_json_lines(p: Probe) -> bool:
    """Whether a JSON Lines file is uncompressed and has no blank line (the Python path numbers rows by line,
    DuckDB's reader by record: the two agree only then). Known from the load's scan of the file
    (:func:`~finops.ingest.base.scan_text`); else read at disk speed, no parsing."""
    if p.container != "text":
        return False
    if p.blank_json_lines is not None:
        return not p.blank_json_lines
    carry = b"\n"                       # a blank first line is a blank line too
    with open(p.path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 23), b""):
            text = carry + chunk
            if BLANK_JSON_LINE.search(text):
                return False
            cut = text.rfind(b"\n")
            carry = text[cut:] if cut >= 0 else text
    return True


def json_records_format(p: Probe) -> str | None:
    """The read_json format of a file the SQL fast paths read record by record as the Python path does
    (``newline_delimited``: uncompressed JSON Lines without blank lines; ``array``: an uncompressed JSON array),
    else None."""
    if p.container != "text":
        return None
    if p.kind == "jsonl":
        return "newline_delimited" if _plain_json_lines(p) else None
    if p.kind == "json" and p.head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")[:1] == "[":
        return "array"
    return None


#: the JSON objects of a spend-log row the rules read inside, each with the paths read there (``mv``, ``rv``, ``qv``)
LITELLM_OBJECT_PATHS = {
    "metadata": ("usage_object", "additional_usage_values", "error_information", "status", "service_tier"),
    "response": ("usage", "service_tier"),
    "proxy_server_request": ("body.service_tier",),
}


#: a field name a JSON path and the attrs text may hold as it is (no quote, backslash, slash or control character)
_PLAIN_FIELD = re.compile(r"[\x20-\x7e]+")


def plain_fields(rec) -> list[str] | None:
    """A record's field names, in their order, where each is plain (:data:`_PLAIN_FIELD`): a JSON path and the
    text of attrs hold it as it is (attrs can be joined from the record's values); else None."""
    if not isinstance(rec, dict) or not all(_PLAIN_FIELD.fullmatch(k) and not set(k) & set('"\\/') for k in rec):
        return None
    return list(rec)


def _litellm_known_fields(p: Probe, fmt: str) -> list[str] | None:
    """The fields of the file's first spend-log row, in their order, where attrs can be written from their JSON
    (:func:`plain_fields`, none ``model_logged``); else None."""
    rec = first_json_record(p, fmt)
    return None if isinstance(rec, dict) and "model_logged" in rec else plain_fields(rec)


def _litellm_extra_fields(known: list[str] | None) -> list[str]:
    """The fields attrs holds (``known`` less the mapped ones) that :data:`LITELLM_JSON_TEXT_FIELDS` does not read."""
    return [k for k in known or [] if k not in LITELLM_MAPPED and k not in LITELLM_JSON_TEXT_FIELDS]


def _litellm_known_attrs_sql(known: list[str]) -> str:
    """attrs of a row whose fields are ``known``, in that order (the row's keys compared): each unmapped field's
    JSON as the row's json_extract wrote it (its value as json_merge_patch writes it), ``model_logged`` last
    (``__LOGGED__``)."""
    extra = _litellm_extra_fields(known)
    at = {x: i + 1 for i, x in enumerate(LITELLM_JSON_TEXT_FIELDS)}
    base = len(LITELLM_JSON_TEXT_FIELDS) + 1 + sum(len(x) for x in LITELLM_OBJECT_PATHS.values())
    at.update({x: base + i + 1 for i, x in enumerate(extra)})
    pieces = "".join(f"{sql.string_literal(json.dumps(k) + ':')}, _v[{sql.literal(at[k])}], ',', "
                     for k in known if k not in LITELLM_MAPPED)
    return f"concat('{{', {pieces}'\"model_logged\":', __LOGGED__, '}}')"


def _litellm_json_rows_sql(numbered: bool, known: list[str] | None = None) -> str:
    """GET /spend/logs rows (a JSON array, or one per line), each parsed once (one json_extract of their paths;
    ``_v`` the values, ``model_logged`` after :data:`LITELLM_JSON_TEXT_FIELDS`) for the fields the rules read as
    text (text columns), for the values the rules read inside its JSON objects (``mv``, ``rv``, ``qv``:
    :data:`LITELLM_OBJECT_PATHS`, read from the row where the field is an object; a string holding JSON text is
    parsed as the CSV's cell is, :func:`_object_fields_sql`) and for its keys (a key twice, or two keys of one
    hash, calls error(): json.loads keeps the last value, json_extract the first). A row is an object where its
    text opens with ``{`` (the JSON reader hands over a value's own text, spaces before it dropped); a field's
    JSON as json_extract writes it opens with its first character (``{`` an object, ``"`` a string). ``known``
    (:func:`_litellm_known_fields`): the other fields that path reads too, after those (their JSON, for attrs).
    ``_row`` its position, or NULL (``numbered=False``: read on every thread, numbered once staged)."""
    nested = [(f, x) for f, xs in LITELLM_OBJECT_PATHS.items() for x in xs]
    paths = sql.string_list([f'$."{x}"' for x in (*LITELLM_JSON_TEXT_FIELDS, "model_logged")]
                            + ['$."' + f + '".' + ".".join(f'"{k}"' for k in x.split(".")) for f, x in nested]
                            + [f'$."{x}"' for x in _litellm_extra_fields(known)])
    at = {x: i + 1 for i, x in enumerate(LITELLM_JSON_TEXT_FIELDS)}
    texts = ", ".join(f"{_py_str_sql(f'_v[{sql.literal(at[x])}]', x in LITELLM_NUMBERS)} AS {quote_ident(x)}"
                      for x in LITELLM_JSON_TEXT_FIELDS if x not in LITELLM_OBJECT_PATHS)
    objects = []
    for name, short in (("metadata", "mv"), ("response", "rv"), ("proxy_server_request", "qv")):
        value = f"_v[{sql.literal(at[name])}]"
        inside = ", ".join(f"_v[{sql.literal(len(LITELLM_JSON_TEXT_FIELDS) + 2 + nested.index((name, x)))}]"
                           for x in LITELLM_OBJECT_PATHS[name])
        objects.append(f"CASE ascii({value}) WHEN 123 THEN [{inside}] WHEN 34 THEN "
                       + _object_fields_sql(_js(value), sql.string_list([f"$.{x}" for x in LITELLM_OBJECT_PATHS[name]]))
                       + f" END AS {short}")
    row, ordinality = ("ordinality", " WITH ORDINALITY") if numbered else ("CAST(NULL AS BIGINT)", "")
    return (f"SELECT {row} AS _row, json, _k, _v, {texts}, {', '.join(objects)} FROM (SELECT *, CASE WHEN ascii(json) "
            "IS DISTINCT FROM 123 THEN error('litellm fast path: a row that is not an object') "
            "WHEN list_unique(list_transform(_k, lambda x: hash(x))) <> len(_k) "
            "THEN error('litellm fast path: a key twice') ELSE _v0 END AS _v "
            f"FROM (SELECT *, json_keys(json) AS _k, json_extract(json, [{paths}]) AS _v0 "
            f"FROM read_json_objects(?, format = ?, compression = 'none'){ordinality}))")


#: a string that may be JSON text (``_jsonish`` parses it): a quote, then spaces or escapes, then ``{``, ``[`` or
#: an escape; a row holding none anywhere has no such value (a nested one or a false match: the exact reading)
JSONISH_STRING = r'"(\s|\\[tnr]|\\u[0-9a-fA-F]{4})*([{\[]|\\u[0-9a-fA-F]{4})'


def _one_line_check_sql(columns: list[str]) -> str:
    """error() where a CSV cell holds a line break: its record spans lines, which the Python path numbers by
    line and DuckDB's reader by record (the Python path reads that file)."""
    cells = ", ".join(f"coalesce({quote_ident(x)}, '')" for x in columns)
    joined = f"concat({cells})" if columns else "''"
    return (f"CASE WHEN contains({joined}, chr(10)) OR contains({joined}, chr(13)) "
            "THEN error('fast path: a CSV record over more than one line') END")


def litellm_fast_source(con, p: Probe, options: IngestOptions) -> Source | None:
    """The typed reading of LiteLLM_SpendLogs rows: :func:`_litellm_row` in SQL over DuckDB's CSV reader (a psql
    CSV) or its JSON reader (GET /spend/logs: an array, or a row per line), or None where it does not apply
    (``--tenant-field``, a compressed file, a byte-order mark, a CSV DuckDB must read on one thread, JSON Lines
    with blank lines, a JSON document that is not an array).

    Values go to the loader as the file's text, as the Python path's do (the loader casts and checks them, naming
    the row and field); attrs holds the same JSON values (a number or a non-ASCII character may be spelled
    differently). A row the SQL cannot be sure to read as the Python path does calls error(), and the Python path
    reads the file: no request_id (the Python path hashes the row), a time that is not plain ISO 8601, more fields
    than the header, a CSV record over more than one line. The CSV's own column names are bound parameters.
    """
    from finops.ingest.tabular import relation_sql
    if options.tenant_field or p.container != "text" or p.head[:3] == b"\xef\xbb\xbf":
        return None
    if p.kind == "csv":
        if p.serial_csv:
            return None
        numbered, params, cols = relation_sql(con, p)
        unnumbered, _, _ = relation_sql(con, p, numbered=False)
        attrs_cols = [x for x in cols if x not in LITELLM_MAPPED]
        # attrs as JSON text, each cell parsed once (its key a bound parameter, JSON-encoded here)
        # one concat of every piece: a chain of || copies the growing text once per piece (no piece is NULL)
        pairs = "".join(f"CAST(? AS VARCHAR), ':', {_cell_json_text_sql(quote_ident(x))}, ',', " for x in attrs_cols)
        model_logged = _t(quote_ident("model")) if "model" in cols else "CAST(NULL AS VARCHAR)"
        attrs = ("concat('{', " + pairs + "'\"model_logged\":', coalesce(CAST(to_json(" + model_logged
                 + ") AS VARCHAR), 'null'), '}')")
        attrs_params = [json.dumps(x) for x in attrs_cols]
        extra, first_row = "_extra", 2
        one_line = _one_line_check_sql(list(cols))
        attrs_from = "priced"
    else:
        fmt = json_records_format(p)
        if fmt is None:
            return None
        cols = [x for x in LITELLM_JSON_TEXT_FIELDS if x not in LITELLM_OBJECT_PATHS]
        first_fields = _litellm_known_fields(p, fmt)
        numbered = _litellm_json_rows_sql(True, first_fields)
        unnumbered = _litellm_json_rows_sql(False, first_fields)
        params = [str(p.path), fmt]
        # attrs: every other field, JSON text in a string parsed (as _jsonish does), model_logged last. A row
        # with no string that may be JSON text: the row less its mapped fields by a merge patch of nulls (one
        # pass, its fields in their order), model_logged written after them; else (or a model_logged field of
        # its own: the map stops the reading) its fields as a map, filtered and turned back into JSON
        jsonish = (f"CASE WHEN json_type(e.value) = 'VARCHAR' AND left(ltrim({_js('e.value')}, {_WS}), 1) IN ('{{', '[') "
                   f"AND json_valid({_js('e.value')}) THEN json({_js('e.value')}) ELSE e.value END")
        mapped = sql.string_list(sorted(LITELLM_MAPPED))
        logged = f"coalesce(CAST(to_json({_t(quote_ident('model'))}) AS VARCHAR), 'null')"
        as_map = ("CAST(to_json(map_from_entries(list_concat(list_transform(list_filter(map_entries("
                  "json_transform(json, '\"MAP(VARCHAR, JSON)\"')), lambda e: e.key NOT "
                  f"IN ({mapped})), lambda e: {{'key': e.key, 'value': {jsonish}}}), "
                  f"[{{'key': 'model_logged', 'value': to_json({_t(quote_ident('model'))})}}]))) AS VARCHAR)")
        at_logged = sql.literal(len(LITELLM_JSON_TEXT_FIELDS) + 1)
        # a row with the first row's fields in its order (the common case) has its attrs joined from the JSON its
        # json_extract wrote, the row not parsed again (_known)
        plain = f"_v[{at_logged}] IS NULL AND NOT regexp_matches(json, {sql.string_literal(JSONISH_STRING)})"
        known_sql = "_k = CAST(? AS VARCHAR[])" if first_fields else "false"
        attrs_from = (f"(SELECT *, CASE WHEN _known THEN NULL WHEN {plain} THEN CAST(json_merge_patch(json, "
                      f"CAST(? AS JSON)) AS VARCHAR) END AS _rest FROM (SELECT *, {plain} AND {known_sql} AS _known "
                      "FROM priced))")
        attrs = (f"CASE WHEN _known THEN {_litellm_known_attrs_sql(first_fields).replace('__LOGGED__', logged) if first_fields else 'NULL'}"
                 f" WHEN _rest IS NOT NULL THEN concat(left(_rest, length(_rest) - 1), "
                 f"CASE WHEN _rest = '{{}}' THEN '' ELSE ',' END, '\"model_logged\":', {logged}, '}}') "
                 f"ELSE {as_map} END")
        attrs_params = [json.dumps({k: None for k in sorted(LITELLM_MAPPED)}), *([first_fields] if first_fields else [])]
        extra, first_row = "CAST(NULL AS VARCHAR)", 1
        one_line = "CAST(NULL AS BIGINT)"

    def c(name: str) -> str:
        return quote_ident(name) if name in cols else "CAST(NULL AS VARCHAR)"

    # the values read inside the JSON objects (the JSON reading has them already)
    parsed = "SELECT * FROM src" if p.kind != "csv" else "SELECT *, " + ", ".join(
        _object_fields_sql(c(name), sql.string_list([f"$.{x}" for x in LITELLM_OBJECT_PATHS[name]])) + f" AS {short}"
        for name, short in (("metadata", "mv"), ("response", "rv"), ("proxy_server_request", "qv"))) + " FROM src"
    known = sql.string_list(sorted(LITELLM_PROVIDERS))
    u = {name: f"uv[{i + 1}]" for i, name in enumerate(LITELLM_USAGE_PATHS)}
    usage_paths = sql.string_list([f"$.{x}" for x in LITELLM_USAGE_PATHS])

    def truthy_sql(expr: str) -> str:
        return (f"({expr} IS NOT NULL AND CAST({expr} AS VARCHAR) NOT IN ('null', 'false', '0', '0.0', '\"\"', "
                "'{}', '[]'))")

    select = f"""
WITH src AS (__ROWS__),
parsed AS ({parsed}), used AS (
  SELECT *,
    CASE WHEN json_type(mv[1]) = 'OBJECT' THEN mv[1]
         WHEN json_type(mv[2]) = 'OBJECT' AND mv[2] <> CAST('{{}}' AS JSON) THEN mv[2]
         WHEN json_type(rv[1]) = 'OBJECT' THEN rv[1]
    END AS usage,
    CASE WHEN json_type(mv[3]) = 'OBJECT' THEN mv[3] END AS ei
  FROM parsed
), tok AS (
  SELECT *, list_transform(json_extract(usage, [{usage_paths}]), lambda j: {_js('j')}) AS uv,
    CASE WHEN {truthy_sql("json_extract(usage, '$.cache_creation_token_details')")}
           THEN json_extract(usage, '$.cache_creation_token_details')
         ELSE json_extract(usage, '$.cache_creation') END AS split,
    {_whole(_t(c('prompt_tokens')))} AS prompt_n, {_whole(_t(c('completion_tokens')))} AS completion_n,
    coalesce({_t(c('custom_llm_provider'))}, {_t(_py_str_sql("json_extract(ei, '$.llm_provider')"))}) AS provider0,
    coalesce({_t(c('model'))}, {_t(c('model_group'))}) AS model0,
    {_t(c('cache_hit'))} AS hit_text, {_finite(c('spend'))} AS spend_d,
    ei IS NOT NULL AND ei <> CAST('{{}}' AS JSON) AS has_error
  FROM used
), counts AS (
  SELECT *, {_whole(u['cache_creation_input_tokens'])} AS creation,
    CASE WHEN json_type(split) = 'OBJECT' THEN {_whole(_js("json_extract(split, '$.ephemeral_1h_input_tokens')"))}
    END AS write_1h,
    coalesce({_whole(u['prompt_tokens_details.cached_tokens'])}, {_whole(u['cache_read_input_tokens'])}) AS cached,
    CASE lower(hit_text) WHEN 'true' THEN 'true' WHEN 't' THEN 'true' WHEN '1' THEN 'true'
         WHEN 'false' THEN 'false' WHEN 'f' THEN 'false' WHEN '0' THEN 'false' ELSE hit_text END AS hit,
    lower(coalesce({_t(c('status'))}, {_t(_py_str_sql('mv[4]'))}, '')) AS status0,
    strpos(model0, '/') > 0 AND substr(model0, strpos(model0, '/') + 1) <> ''
      AND (split_part(model0, '/', 1) = provider0
           OR (provider0 IS NULL AND split_part(model0, '/', 1) IN ({known}))) AS prefixed
  FROM tok
), final AS (
  SELECT *,
    CASE WHEN prompt_n IS NOT NULL THEN prompt_n + CASE WHEN creation <> 0 THEN creation ELSE 0 END END AS input_n,
    CASE WHEN coalesce(creation, {_whole(u['prompt_tokens_details.cache_write_tokens'])}) IS NOT NULL
              AND write_1h IS NOT NULL
           THEN greatest(coalesce(creation, {_whole(u['prompt_tokens_details.cache_write_tokens'])}) - write_1h, 0)
         ELSE coalesce(creation, {_whole(u['prompt_tokens_details.cache_write_tokens'])}) END AS write_5m,
    CASE status0 WHEN 'success' THEN 'ok' WHEN 'failure' THEN 'error' WHEN '' THEN
      CASE WHEN has_error THEN 'error' ELSE 'ok' END ELSE status0 END AS status_c
  FROM counts
), priced AS (
  SELECT *, spend_d = 0 AND coalesce(input_n, 0) + coalesce(completion_n, 0) <> 0
            AND hit IS DISTINCT FROM 'true' AS unpriced
  FROM final
)
SELECT
  coalesce(CAST(CASE WHEN {_t(c('request_id'))} IS NULL THEN error('litellm fast path: a row without request_id')
                END AS BIGINT),
           CAST({_time_check_sql(c('startTime'))} AS BIGINT), CAST({_time_check_sql(c('endTime'))} AS BIGINT),
           CAST({_time_check_sql(c('completionStartTime'))} AS BIGINT),
           CAST(CASE WHEN {extra} IS NOT NULL THEN error('litellm fast path: more fields than the header') END
                AS BIGINT), CAST({one_line} AS BIGINT), _row) AS _row,
  CAST(NULL AS VARCHAR) AS _hash, {_t(c('request_id'))} AS request_id, {_t(c('startTime'))} AS ts,
  coalesce({_t(c('team_id'))}, CAST(? AS VARCHAR)) AS tenant,
  coalesce(CASE WHEN prefixed THEN substr(model0, strpos(model0, '/') + 1) ELSE model0 END, CAST(? AS VARCHAR))
    AS model,
  CASE WHEN prefixed THEN split_part(model0, '/', 1) ELSE provider0 END AS provider,
  coalesce({_t(_py_str_sql('rv[2]'))}, {_t(_py_str_sql('mv[5]'))},
           {_t(_py_str_sql('qv[1]'))}) AS service_tier,
  hit AS cache_hit,
  CASE WHEN input_n IS NOT NULL THEN CAST(CAST(input_n AS BIGINT) AS VARCHAR) ELSE {_t(c('prompt_tokens'))} END
    AS input_tokens,
  CASE WHEN completion_n IS NOT NULL THEN CAST(CAST(completion_n AS BIGINT) AS VARCHAR)
       ELSE {_t(c('completion_tokens'))} END AS output_tokens,
  CAST(CAST(cached AS BIGINT) AS VARCHAR) AS cached_input_tokens,
  CAST(CAST(write_5m AS BIGINT) AS VARCHAR) AS cache_write_tokens,
  CAST(CAST(write_1h AS BIGINT) AS VARCHAR) AS cache_write_1h_tokens,
  CAST(CAST({_whole(u['completion_tokens_details.reasoning_tokens'])} AS BIGINT) AS VARCHAR) AS reasoning_tokens,
  CAST(NULL AS VARCHAR) AS queue_ms,
  CASE WHEN status_c = 'ok' THEN CAST({_ms_between_sql(c('startTime'), c('completionStartTime'))} AS VARCHAR) END
    AS ttft_ms,
  CASE WHEN {_finite(c('request_duration_ms'))} IS NOT NULL THEN {_trim_sql(c('request_duration_ms'))}
       ELSE CAST({_ms_between_sql(c('startTime'), c('endTime'))} AS VARCHAR) END AS total_ms,
  status_c AS status,
  CASE WHEN status_c <> 'ok' THEN {_t(_py_str_sql("json_extract(ei, '$.error_class')"))} END AS error_type,
  CASE WHEN spend_d IS NULL THEN {_t(c('spend'))} WHEN unpriced THEN NULL ELSE {_trim_sql(c('spend'))} END
    AS cost_usd,
  CASE WHEN unpriced THEN CAST(json_merge_patch(CAST(_attrs AS JSON), json_object('source_cost_usd', spend_d))
                               AS VARCHAR)
       ELSE _attrs END AS attrs
FROM (SELECT *, {attrs} AS _attrs FROM {attrs_from})"""
    return Source(select.replace("__ROWS__", numbered), [*params, options.tenant, options.model, *attrs_params],
                  has_ids=True, unnumbered_sql=select.replace("__ROWS__", unnumbered), first_row=first_row)


def _read_litellm(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """LiteLLM_SpendLogs rows in any of its exports, a record at a time (CSV and JSON Lines stream); a psql CSV
    through the typed fast path (:func:`litellm_fast_source`) where it applies, this path behind it."""
    src = litellm_fast_source(con, p, options) if fast else None
    if src is not None:
        src.fallback = lambda: _read_litellm(con, p, options, fast=False)
        return src

    def rows():
        for row, rec in iter_records(p):
            if not isinstance(rec, dict):
                raise InputError("expected a spend-log row (an object)", file=p.name, row=row)
            yield _litellm_row(row, rec, options)
    src = _python_source(rows(), columns=LEGACY_RAW_COLUMNS)
    src.hashes_since = LITELLM_HASHES_SINCE
    return src


def litellm_source(records: Iterator[dict], options: IngestOptions) -> Source:
    """LiteLLM_SpendLogs rows already read as dicts (a pull from LiteLLM's database: JSON columns as
    objects, times as ISO text), through the same row reader as the file exports."""
    src = _python_source((_litellm_row(row, rec, options) for row, rec in enumerate(records, 1)),
                         columns=LEGACY_RAW_COLUMNS)
    src.hashes_since = LITELLM_HASHES_SINCE
    return src


register(Adapter(
    name="litellm", label="LiteLLM proxy spend logs (LiteLLM_SpendLogs)",
    source_tool="LiteLLM proxy",
    export_hint="the LiteLLM_SpendLogs table as CSV (psql \\copy ... CSV HEADER), the JSON of GET /spend/logs or "
                "of the UI's GET /spend/logs/ui page; tenant = team_id unless --tenant-field user|end_user|<column or "
                "metadata key>",
    sniff=_sniff_litellm, read=_read_litellm,
    example="tests/data/litellm/spendlogs_v1_74.csv",
))


# ---------------------------------------------------------------- langfuse

LANGFUSE_MODEL_CALLS = ("GENERATION", "EMBEDDING")
# what we read -> its name in each Langfuse shape, first present wins: the v1 API and the UI's
# export (camelCase, ``model``), the v2 API (``providedModelName``, ``totalCost``), the blob-storage
# export (ClickHouse's snake_case columns)
LANGFUSE_FIELDS: dict[str, tuple[str, ...]] = {
    "id": ("id",), "type": ("type",), "trace": ("traceId", "trace_id"),
    "start": ("startTime", "start_time"), "end": ("endTime", "end_time"),
    "completion_start": ("completionStartTime", "completion_start_time"),
    "model": ("providedModelName", "provided_model_name", "model"),
    "usage": ("usageDetails", "usage_details"), "cost": ("costDetails", "cost_details"),
    "total_cost": ("totalCost", "total_cost", "calculatedTotalCost"),
    "level": ("level",), "status_message": ("statusMessage", "status_message"),
    "ttft_s": ("timeToFirstToken", "time_to_first_token"), "latency_s": ("latency",),
    "user": ("userId", "user_id"),
}
LANGFUSE_MAPPED = {n for names in LANGFUSE_FIELDS.values() for n in names} - {"userId", "user_id"}
# trace fields joined onto each observation (camelCase API / snake_case blob export) -> attrs name
LANGFUSE_TRACE_FIELDS = {"userId": "userId", "user_id": "userId", "sessionId": "sessionId",
                         "session_id": "sessionId", "tags": "tags", "name": "traceName", "release": "release",
                         "metadata": "traceMetadata"}
# metadata keys naming who served the call (LangChain's ls_provider; OTel GenAI attributes as Langfuse keeps them)
LANGFUSE_PROVIDER_KEYS = ("ls_provider", "gen_ai.provider.name", "gen_ai.system", "provider")


def _sniff_langfuse(p: Probe) -> float:
    if p.kind not in TABULAR:
        return 0.0
    keys = head_keys(p)
    if {"traceId", "startTime"} <= keys and keys & {"usageDetails", "usage", "model", "providedModelName", "level"}:
        return 0.97
    if {"trace_id", "start_time"} <= keys and keys & {"usage_details", "provided_model_name", "cost_details"}:
        return 0.97     # the blob-storage export (ClickHouse columns)
    if _langfuse_traces_only(keys):
        return 0.6     # a traces export: refused with advice in the reader
    return 0.0


def _langfuse_traces_only(keys: set[str]) -> bool:
    observation = keys & {"traceId", "trace_id", "startTime", "start_time"}
    return not observation and "id" in keys and "timestamp" in keys and bool(
        keys & {"userId", "user_id"}) and bool(keys & {"sessionId", "session_id"})


def langfuse_traces_path(path: Path) -> Path | None:
    """The traces file beside an observations/generations export: the same name with
    ``observations`` (or ``generations``) replaced by ``traces``, as .json or .jsonl; or, in a
    blob-storage export (``<project>/observations/<time>.jsonl``), the same file under ``traces/``."""
    for word in ("observations", "generations"):
        if word in path.name:
            stem = path.name.split(word)[0] + "traces"
            for suffix in (".json", ".jsonl", ".json.gz", ".jsonl.gz", ".csv"):
                if (path.parent / (stem + suffix)).is_file():
                    return path.parent / (stem + suffix)
    if path.parent.name == "observations" and (path.parent.parent / "traces" / path.name).is_file():
        return path.parent.parent / "traces" / path.name
    return None


def _lf(obs: dict, what: str):
    return next((obs[n] for n in LANGFUSE_FIELDS[what] if obs.get(n) not in (None, "")), None)


def _unquote(v):
    """A value the UI's CSV export wrote as JSON text: a date (a ``Date`` through ``JSON.stringify``)
    arrives as ``"2025-03-04T14:00:00.000Z"`` with its own quotes."""
    if isinstance(v, str) and len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        try:
            return json.loads(v)
        except json.JSONDecodeError:
            return v
    return v


def langfuse_tokens(usage: dict) -> dict:
    """Token classes of one observation's usage details, in the canonical convention.

    Langfuse's ingestion subtracts every detail from the total it came with (its OpenAI usage schema
    turns ``prompt_tokens_details.cached_tokens`` into ``input_cached_tokens`` and lowers ``input`` by
    it; its OTel processor lowers ``input`` by cache reads and writes and ``output`` by reasoning), so
    the types are disjoint and Langfuse's own totals (``reduceUsageOrCostDetails``) add every type
    whose name contains ``input`` (or ``output``). We add them the same way: ``input_tokens`` counts
    cache reads and writes, ``output_tokens`` reasoning. Cache reads: ``input_cached_tokens``,
    ``input_cache_read``, ``cache_read_input_tokens``; writes: ``input_cache_creation`` /
    ``cache_creation_input_tokens`` / ``input_cache_write`` (``..._1h`` the 1-hour TTL); reasoning:
    ``output_reasoning_tokens`` / ``output_reasoning`` / ``reasoning_tokens`` (a name without
    ``output`` is not added: as in Langfuse's totals it is read as part of ``output``).

    >>> t = langfuse_tokens({"input": 1052, "input_cached_tokens": 2048, "input_cache_creation": 100,
    ...                      "output": 200, "output_reasoning_tokens": 60, "total": 3460})
    >>> t["input_tokens"], t["cached_input_tokens"], t["cache_write_tokens"], t["output_tokens"], t["reasoning_tokens"]
    (3200, 2048, 100, 260, 60)
    """
    vals = {k: _num(v) for k, v in usage.items() if _num(v) is not None}
    bad = {k: v for k, v in usage.items() if v is not None and _num(v) is None}

    def total(pred) -> int | str | None:
        wrong = next((f"{k}={_number_text(v)}" for k, v in bad.items() if pred(k)), None)
        if wrong is not None:
            return wrong        # not a number: the loader rejects the row, naming the column and value
        picked = [v for k, v in vals.items() if pred(k)]
        return int(sum(picked)) if picked else None

    def cache_write(k: str) -> bool:
        return "input" in k and ("cache_creation" in k or "cache_write" in k)
    return {
        "input_tokens": total(lambda k: "input" in k),
        "output_tokens": total(lambda k: "output" in k),
        "cached_input_tokens": total(lambda k: "input" in k and ("cache_read" in k or "cached" in k)),
        "cache_write_tokens": total(lambda k: cache_write(k) and not k.endswith("1h")),
        "cache_write_1h_tokens": total(lambda k: cache_write(k) and k.endswith("1h")),
        "reasoning_tokens": total(lambda k: "reasoning" in k),
    }


def _langfuse_usage(obs: dict) -> dict:
    usage = _obj(_lf(obs, "usage"))
    if not any(n in obs for n in LANGFUSE_FIELDS["usage"]):
        # only the deprecated ``usage`` (input/output already Langfuse's totals; 0 where it had none)
        old = _obj(obs.get("usage"))
        usage = {k: old[k] for k in ("input", "output") if old.get(k) is not None}
    return langfuse_tokens(usage)


def _amount(v) -> float | None:
    """A cost as a number, else None: ``false`` is no amount (Python's float(False) is 0.0, a recorded zero that
    set the row unpriced where the SQL reading, which cannot read 'false' as a number, took the next field)."""
    return None if isinstance(v, bool) else _num(v)


def _langfuse_cost(obs: dict) -> tuple[float | None, bool]:
    """``(cost, from_details)``: ``costDetails.total`` (else the sum of its types), else the total field."""
    cost = _obj(_lf(obs, "cost"))
    if cost:
        total = _amount(cost.get("total"))
        if total is not None:
            return total, True
        vals = [a for a in map(_amount, cost.values()) if a is not None]
        if vals:
            return sum(vals), True
    return _amount(_lf(obs, "total_cost")), False


def _langfuse_provider(obs: dict) -> str | None:
    meta = _obj(obs.get("metadata"))
    for src in (meta, _obj(meta.get("attributes"))):
        found = next((src[k] for k in LANGFUSE_PROVIDER_KEYS if isinstance(src.get(k), str) and src[k]), None)
        if found:
            return found
    return None


def _langfuse_row(row: int, obs: dict, trace: dict, options: IngestOptions) -> dict:
    tokens = _langfuse_usage(obs)
    start, end, first = _lf(obs, "start"), _lf(obs, "end"), _lf(obs, "completion_start")
    ttft = _ms_between(start, first)
    if ttft is None and _num(_lf(obs, "ttft_s")) is not None:
        ttft = _num(_lf(obs, "ttft_s")) * 1000.0
    total = _ms_between(start, end)
    if total is None and _num(_lf(obs, "latency_s")) is not None:
        total = _num(_lf(obs, "latency_s")) * 1000.0
    error = str(_lf(obs, "level") or "").upper() == "ERROR"
    tenant = (_pick(options.tenant_field, obs, trace) if options.tenant_field
              else _lf(obs, "user") or _lf(trace, "user"))
    attrs = {k: v for k, v in obs.items() if k not in LANGFUSE_MAPPED}
    attrs.update({name: trace[k] for k, name in LANGFUSE_TRACE_FIELDS.items() if trace.get(k) is not None})
    cost, from_details = _langfuse_cost(obs)
    used = sum(v for v in (tokens["input_tokens"], tokens["output_tokens"]) if isinstance(v, int))
    # Langfuse writes 0 for a call it could not price: the v1 API's calculatedTotalCost is 0 when
    # costDetails is empty; a 0 with tokens is the same
    if cost == 0 and (used or not from_details):
        cost, attrs["source_cost_usd"] = None, 0.0
    status_message = _lf(obs, "status_message")
    out = {
        "_row": row, "request_id": _lf(obs, "id"), "ts": _utc(start),
        "tenant": str(tenant) if tenant not in (None, "") else options.tenant,
        "model": _lf(obs, "model") or options.model, "provider": _langfuse_provider(obs), **tokens,
        "ttft_ms": ttft, "total_ms": total, "status": "error" if error else "ok",
        "error_type": str(status_message or "error")[:200] if error else None,
        "cost_usd": cost, "attrs": _json(attrs),
    }
    return {k: v if v is None or k == "_row" else str(v) for k, v in out.items()}


def _langfuse_traces(tpath: Path | None) -> dict[str, dict]:
    """Trace id -> the trace fields joined onto its observations (only those: memory per trace is small)."""
    traces: dict[str, dict] = {}
    if tpath is not None:
        wanted = set(LANGFUSE_TRACE_FIELDS)
        for _, t in iter_records(probe(tpath)):
            # an id of another JSON type (an object, a list) names no trace an observation can point to
            if isinstance(t, dict) and t.get("id") and _scalar(_unquote(t["id"])):
                traces[_unquote(t["id"])] = {k: _unquote(v) for k, v in t.items() if k in wanted}
    return traces


def _scalar(v) -> bool:
    return isinstance(v, str | int | float)


def _trace_of(traces: dict[str, dict], obs: dict) -> dict:
    """The trace fields joined onto an observation, by its trace id (none for an id that is an object or a list)."""
    tid = _lf(obs, "trace")
    return (traces.get(tid) if _scalar(tid) else None) or {}


# ---- the typed fast path of Langfuse observations (API pages per line, the UI's and the blob export's JSON Lines,
# a JSON array, the UI's CSV): _langfuse_row in SQL over each observation's fields, each read once

def _json_num_sql(x: str) -> str:
    """``_num`` of a JSON value in SQL: a finite number (a number, or text holding one) as DOUBLE, else NULL."""
    return (f"CASE WHEN isfinite(TRY_CAST(json_extract_string({x}, '$') AS DOUBLE)) "
            f"THEN TRY_CAST(json_extract_string({x}, '$') AS DOUBLE) END")


def _text_num_sql(x: str) -> str:
    """``_num`` of a text in SQL, untrimmed (as :func:`_json_num_sql` reads a JSON value's text)."""
    return f"CASE WHEN isfinite(TRY_CAST({x} AS DOUBLE)) THEN TRY_CAST({x} AS DOUBLE) END"


def _js(x: str) -> str:
    """A JSON value as text (a string unquoted, anything else its JSON)."""
    return f"json_extract_string({x}, '$')"


def _json_falsy_sql(x: str) -> str:
    """Whether a JSON value (``x``, JSON or its text) is one Python's ``or`` passes over: null, "", false, a zero,
    an empty object or array (SQL NULL too)."""
    v = f"CAST({x} AS VARCHAR)"
    return (f"({v} IS NULL OR {v} IN ('null', '\"\"', 'false', '[]', '{{}}') OR "
            f"(regexp_matches({v}, '^-?[0-9]') AND TRY_CAST({v} AS DOUBLE) = 0))")


def _py_str_sql(x: str, number: bool = False) -> str:
    """Python's ``str()`` of a JSON value (``x``: its JSON text as json_extract writes it, a number as the file
    spells it), as the Python readings' ``_text`` takes it: a string's text, an integer's digits, a fraction's
    float ``repr`` (DuckDB writes a DOUBLE as ``repr`` does), ``True`` / ``False``, NULL for null. An object, an
    array, NaN, Infinity or a number beyond a double calls error() (``str`` writes a dict's repr, ``inf``).
    ``number``: a field the Python path reads as a number, where true and false are no number, spelt as JSON
    spells them (``_num``, ``_number_text``)."""
    v = f"CAST({x} AS VARCHAR)"
    d = f"TRY_CAST({v} AS DOUBLE)"
    return (f"CASE WHEN {v} IS NULL OR {v} = 'null' THEN NULL WHEN ascii({v}) = 34 THEN json_extract_string({x}, '$') "
            + (f"WHEN {v} = 'true' THEN 'true' WHEN {v} = 'false' THEN 'false' " if number
               else f"WHEN {v} = 'true' THEN 'True' WHEN {v} = 'false' THEN 'False' ")
            + f"WHEN {v} = '-0' THEN '0' "
            f"WHEN NOT regexp_matches({v}, '^-?[0-9]') OR NOT isfinite({d}) "
            "THEN error('fast path: an object, an array or a number that is no double as a text field') "
            f"WHEN contains({v}, '.') OR contains({v}, 'e') OR contains({v}, 'E') THEN CAST({d} AS VARCHAR) "
            f"ELSE {v} END")


def _json_obj(x: str) -> str:
    """``_obj`` of a JSON value in SQL: an object, or JSON text holding one; else NULL. The value's type by its
    first character (``{`` an object, ``"`` a string: every JSON value here is json_extract's, to_json's or a
    trimmed cell's text, none opens with a space), not by parsing it."""
    return (f"CASE ascii({x}) WHEN 123 THEN {x} WHEN 34 THEN CASE WHEN json_valid({_js(x)}) "
            f"AND json_type({_js(x)}) = 'OBJECT' THEN CAST({_js(x)} AS JSON) END END")


def _langfuse_csv_cell_sql(x: str) -> str:
    """A cell of the UI's CSV export as the Python path reads it (``cell`` then ``_unquote``), as JSON: NULL for
    an empty cell, a JSON object or array as its value, a JSON-quoted text (a date) as that text, else the text."""
    return (f"CASE WHEN {x} IS NULL OR {x} = '' THEN CAST(NULL AS JSON) "
            f"WHEN {_opens_json_sql(x)} THEN coalesce(TRY_CAST({_trim_sql(x)} AS JSON), to_json({x})) "
            f"WHEN {_json_quoted_sql(x)} THEN coalesce(TRY_CAST({x} AS JSON), to_json({x})) "
            f"ELSE to_json({x}) END")


def _langfuse_csv_text_sql(x: str) -> str:
    """``_js`` of :func:`_langfuse_csv_cell_sql` without building the JSON of a plain cell: NULL for an empty
    cell, the text of a JSON object or array as its JSON, a JSON-quoted text as that text, else the cell."""
    return (f"CASE WHEN {x} IS NULL OR {x} = '' THEN CAST(NULL AS VARCHAR) "
            f"WHEN {_opens_json_sql(x)} THEN coalesce({_js(f'TRY_CAST({_trim_sql(x)} AS JSON)')}, {x}) "
            f"WHEN {_json_quoted_sql(x)} THEN coalesce({_js(f'TRY_CAST({x} AS JSON)')}, {x}) "
            f"ELSE {x} END")


def _langfuse_csv_records_sql(rows_sql: str, columns: list[str]) -> str:
    """The rows of the UI's CSV export as ``(_row, _c0, _c1...)``: each cell named by its column's position (no
    CSV column name can meet the reading's own names), a record over more than one line or with more fields than
    the header calling error() (the Python path numbers such files by line and drops the surplus)."""
    cells = "".join(f", {quote_ident(x)} AS {quote_ident(f'_c{i}')}" for i, x in enumerate(columns))
    one_line = _one_line_check_sql(columns)
    return (f"SELECT coalesce(CAST({one_line} AS BIGINT), CAST(CASE WHEN _extra IS NOT NULL THEN "
            "error('langfuse fast path: more fields than the header') END AS BIGINT), _row) AS _row"
            f"{cells} FROM ({rows_sql})")


def langfuse_fast_source(p: Probe, options: IngestOptions, con=None) -> Source | None:
    """The typed reading of Langfuse observations: :func:`_langfuse_row` in SQL, or None where it does not
    apply (a document that is not an array, a compressed file, blank lines in JSON Lines, a byte-order mark,
    ``--records-path``, ``--tenant-field``, a traces file beside it: the Python path joins it). JSON records are
    each parsed once for the fields the rules read (one json_extract) and their keys, attrs the record less its
    mapped fields (one merge patch); the UI's CSV export (given ``con``: its reader is described there) is read
    by its named columns, each cell the rules read taken as the Python path reads it
    (:func:`_langfuse_csv_cell_sql`), attrs the other cells' JSON joined in one text. One observation a record
    (not API pages) is also read on every thread (``unnumbered_sql``), those that are no model call marked
    ``_skip``.

    Values go to the loader as the file's text; attrs holds the same JSON values. An observation the SQL cannot
    be sure to read as the Python path does calls error() and the Python path reads the file: not an object, no
    id, a usage value that is not a number, a time that is not plain ISO 8601, a CSV record over two lines.
    """
    from finops.ingest.tabular import relation_sql
    if options.records_path or options.tenant_field or langfuse_traces_path(p.path) is not None:
        return None
    unnumbered_records = ""
    if p.kind == "csv":
        if con is None or p.container != "text" or p.serial_csv or p.head[:3] == b"\xef\xbb\xbf":
            return None
        rows_sql, params, cols = relation_sql(con, p)
        cols = list(cols)
        json_read = {*LANGFUSE_FIELDS["usage"], *LANGFUSE_FIELDS["cost"], "usage", "metadata"} & set(cols)

        def cell_sql(name: str) -> str:
            return quote_ident(f"_c{cols.index(name)}")

        def json_cell_sql(name: str) -> str:
            """A cell the rules read as JSON, read once (see ``cells_sql``)."""
            return quote_ident(f"_j{cols.index(name)}")

        def raw_sql(name: str) -> str:
            return (json_cell_sql(name) if name in json_read else
                    _langfuse_csv_cell_sql(cell_sql(name)) if name in cols else "CAST(NULL AS JSON)")

        def raw_text_sql(name: str) -> str:
            return _langfuse_csv_text_sql(cell_sql(name)) if name in cols else "CAST(NULL AS VARCHAR)"

        def lf_text_sql(what: str) -> str:
            return "coalesce(" + ", ".join(
                [f"nullif({raw_text_sql(n)}, '')" for n in LANGFUSE_FIELDS[what] if n in cols]
                + ["CAST(NULL AS VARCHAR)"]) + ")"

        def has_sql(name: str) -> str:
            return "true" if name in cols else "false"
        type_text = raw_text_sql("type")
        attrs_cols = [x for x in cols if x not in LANGFUSE_MAPPED]
        cells_sql = "".join(f", {_langfuse_csv_cell_sql(cell_sql(x))} AS {json_cell_sql(x)}" for x in cols
                            if x in json_read)
        records = f"SELECT *{cells_sql} FROM ({_langfuse_csv_records_sql(rows_sql, cols)})"
        # read on every thread too, numbered once staged (a record is one line: the check stops the reading else)
        unnumbered_rows, _, _ = relation_sql(con, p, numbered=False)
        unnumbered_records = f"SELECT *{cells_sql} FROM ({_langfuse_csv_records_sql(unnumbered_rows, cols)})"
        carried = "".join(f"{json_cell_sql(x) if x in json_read else cell_sql(x)}, " for x in attrs_cols)
        # attrs: the other cells' JSON in one concat (a chain of || copies the growing text once per piece), each
        # key spelt by DuckDB's to_json as the map of the cells spelt it
        keys = con.execute("SELECT list_transform(CAST(? AS VARCHAR[]), lambda k: CAST(to_json(k) AS VARCHAR))",
                           [attrs_cols]).fetchall()[0][0] if attrs_cols else []
        pieces = [f"{sql.string_literal(key + ':')}, coalesce(CAST("
                  f"{json_cell_sql(x) if x in json_read else _langfuse_csv_cell_sql(cell_sql(x))} AS VARCHAR), 'null')"
                  for x, key in zip(attrs_cols, keys, strict=True)]
        attrs_sql = "concat('{', " + ", ',', ".join(pieces) + ", '}')" if pieces else "'{}'"
        attrs_json, attrs_params = "CAST(attrs AS JSON)", []
    else:
        fmt = json_records_format(p)
        if fmt is None:
            return None
        unpage = ("CASE WHEN json_type(json, '$.data') = 'ARRAY' THEN json_extract(json, '$.data[*]') "
                  "WHEN json_type(json, '$.items') = 'ARRAY' THEN json_extract(json, '$.items[*]') ELSE [json] END"
                  if fmt == "newline_delimited" else "[json]")
        # each record parsed for the fields the rules read (one json_extract of their paths: a field absent is
        # NULL, a null one JSON null) and for its keys (a key twice, or two keys of one hash, hands the file to
        # Python: json.loads keeps the last value, json_extract the first), not turned into a map of every
        # field's JSON
        read = sorted({n for names in LANGFUSE_FIELDS.values() for n in names} | {"usage", "metadata"})
        first = p.first_record if isinstance(p.first_record, dict) else {}
        paged = any(isinstance(first.get(k), list) for k in ("data", "items"))
        # the first observation's fields where they are plain (none where the first line is a page): a record
        # with those fields in that order (the common case) has its attrs joined from the JSON its json_extract
        # wrote (``_known``), and no key twice (their names are a dict's)
        known = None if paged else plain_fields(first_json_record(p, fmt))
        attrs_fields = [n for n in known or [] if n not in LANGFUSE_MAPPED]
        at = {n: i + 1 for i, n in enumerate([*read, "data", "items", *[n for n in attrs_fields if n not in read]])}
        paths = sql.string_list([f'$."{n}"' for n in at])
        known_sql = "k = CAST(? AS VARCHAR[])" if known else "false"

        def records_sql(rec_sql: str, observation_sql: str) -> str:
            """``_row, v, rec, _known`` over rows of ``_row`` and ``rec_sql`` (a record's JSON): error() for a
            record that is not ``observation_sql`` (over ``v``) or has a key twice. A record is an object where its
            text opens with ``{`` (the JSON reader and json_extract hand over a value's own text)."""
            return (f"SELECT _row, CASE WHEN ascii(rec) IS DISTINCT FROM 123 OR NOT ({observation_sql}) "
                    "THEN error('langfuse fast path: a record that is not an observation') WHEN _known THEN v "
                    "WHEN list_unique(list_transform(k, lambda x: hash(x))) <> len(k) "
                    "THEN error('langfuse fast path: a key twice') "
                    f"ELSE v END AS v, rec, _known FROM (SELECT *, coalesce({known_sql}, false) AS _known FROM ("
                    f"SELECT *, json_keys(rec) AS k, json_extract(rec, [{paths}]) AS v FROM ({rec_sql})))")
        records = records_sql(f"SELECT ordinality AS _row, unnest({unpage}) AS rec "
                              "FROM read_json_objects(?, format = ?, compression = 'none') WITH ORDINALITY", "true")
        params = [*([known] if known else []), str(p.path), fmt]
        # attrs: the record less its mapped fields, joined from their JSON (``_known``), else by a merge patch of
        # nulls (one pass over its text, its other fields in their order), not the fields filtered and turned
        # back into JSON
        joined = ("concat('{', " + ", ',', ".join(f"{sql.string_literal(json.dumps(n) + ':')}, v[{sql.literal(at[n])}]"
                                                  for n in attrs_fields) + ", '}')") if attrs_fields else "'{}'"
        attrs_sql = (f"CASE WHEN _known THEN {joined} "
                     "ELSE CAST(json_merge_patch(rec, CAST(? AS JSON)) AS VARCHAR) END")
        attrs_json, carried = "CAST(attrs AS JSON)", "v, rec, _known, "
        attrs_params = [json.dumps({k: None for k in sorted(LANGFUSE_MAPPED)})]

        def raw_sql(name: str) -> str:
            """The field's JSON, NULL where it is absent or null (as a map of the record's fields read it)."""
            i = sql.literal(at[name])
            return f"CASE WHEN v[{i}] <> CAST('null' AS JSON) THEN v[{i}] END"

        def raw_text_sql(name: str) -> str:
            return _js(raw_sql(name))

        def lf_text_sql(what: str) -> str:
            return _py_str_sql(field_sql(what), number=what in ("ttft_s", "latency_s", "total_cost"))

        def has_sql(name: str) -> str:
            return f"v[{sql.literal(at[name])}] IS NOT NULL"
        type_text = _js(raw_sql("type"))
        if not paged:
            # one observation a record (the blob export, the UI's JSONL, an array): read on every thread and
            # numbered once staged; a page of observations met later stops this reading (the numbered one reads it)
            data, items = sql.literal(len(read) + 1), sql.literal(len(read) + 2)
            page = (f"coalesce(json_type(v[{data}]) = 'ARRAY' OR json_type(v[{items}]) = 'ARRAY', false)"
                    if fmt == "newline_delimited" else "false")
            unnumbered_records = records_sql(
                "SELECT CAST(NULL AS BIGINT) AS _row, json AS rec FROM read_json_objects(?, format = ?, "
                "compression = 'none')", f"NOT ({page})")

    def field_sql(what: str) -> str:
        """``_lf`` in SQL: the first of the fields (JSON) that is present, not null and not ``""``."""
        return "coalesce(" + ", ".join(
            f"CASE WHEN {raw_sql(n)} IS NOT NULL AND {raw_sql(n)} <> CAST('\"\"' AS JSON) THEN {raw_sql(n)} END"
            for n in LANGFUSE_FIELDS[what]) + ")"

    def lf_or_sql(what: str) -> str:
        """``_lf(obs, what) or default`` in SQL: NULL where the value is one Python's ``or`` passes over (a cell's
        JSON too: "0" is text, ``{}`` an empty object), else its text."""
        return f"CASE WHEN NOT {_json_falsy_sql(field_sql(what))} THEN {lf_text_sql(what)} END"

    # a value Python's ``or`` passes over takes the default: the type's GENERATION, --model, "error"
    type_falsy = _json_falsy_sql(raw_sql("type"))

    def total_sql(cond: str) -> str:
        """The sum of the numbers of the entries ``cond`` picks, as a whole number; NULL where none is a number
        (list_sum skips NULLs and gives NULL for none: one pass over the entries)."""
        return f"CAST(trunc(list_sum(list_transform(ue, lambda e: CASE WHEN {cond} THEN e.n END))) AS BIGINT)"

    def numbered_sql(entries_sql: str) -> str:
        """A map's entries (key, value as text: a string unquoted, NULL for JSON null, anything else its JSON, as
        json_extract_string reads it) with ``n``, the value's number (``_num``), read once."""
        return (f"list_transform({entries_sql}, lambda e: {{'key': e.key, 'value': e.value, "
                f"'n': {_text_num_sql('e.value')}}})")
    usage_entries_sql = numbered_sql("map_entries(json_transform(usage, '\"MAP(VARCHAR, VARCHAR)\"'))")
    cost_entries_sql = numbered_sql("map_entries(json_transform(cost_obj, '\"MAP(VARCHAR, VARCHAR)\"'))")

    write = "contains(e.key, 'input') AND (contains(e.key, 'cache_creation') OR contains(e.key, 'cache_write'))"
    paths = [sql.string_literal(f'$."{k}"') for k in LANGFUSE_PROVIDER_KEYS]
    meta_paths = ", ".join([*paths, sql.string_literal('$."attributes"')])     # the provider's keys, attributes
    attributes_sql = f"mp[{sql.literal(len(paths) + 1)}]"

    def provider_sql(values_sql: str) -> str:
        """The first of :data:`LANGFUSE_PROVIDER_KEYS` that is a text other than ``""``, over ``values_sql``: their
        JSON (one json_extract of an object; a string's JSON opens with a quote)."""
        def at_sql(i: int) -> str:
            return f"{values_sql}[{sql.literal(i)}]"
        return "CASE " + " ".join(
            f"WHEN ascii({at_sql(i)}) = 34 AND {at_sql(i)} <> CAST('\"\"' AS JSON) THEN {_js(at_sql(i))}"
            for i in range(1, len(paths) + 1)) + " END"
    calls = sql.string_list(LANGFUSE_MODEL_CALLS)
    model_call_sql = (f"upper(CASE WHEN {type_falsy} THEN 'GENERATION' "
                      f"ELSE {type_text} END) IN ({calls})")
    has_details = " OR ".join(has_sql(n) for n in LANGFUSE_FIELDS["usage"])

    def select_sql(records_sql: str, skip: bool) -> str:
        """The reading over ``records_sql``; ``skip``: every record kept, those that are no model call marked
        ``_skip`` (an unnumbered reading: numbered by place once staged, then dropped), their checks off."""
        calls_sql = (f"SELECT *, NOT coalesce({model_call_sql}, false) AS _skip FROM obs" if skip
                     else f"SELECT * FROM obs WHERE {model_call_sql}")
        live = "NOT _skip AND " if skip else ""
        return f"""
WITH obs AS ({records_sql}), calls AS ({calls_sql}), fields AS (
  SELECT _row, {carried}{"_skip, " if skip else ""}
    {lf_text_sql('id')} AS id, {lf_text_sql('start')} AS t_start, {lf_text_sql('end')} AS t_end,
    {lf_text_sql('completion_start')} AS t_first,
    CASE WHEN {has_details}
         THEN coalesce({_json_obj(field_sql('usage'))}, CAST('{{}}' AS JSON))
         ELSE json_merge_patch('{{}}', json_object('input', {_json_obj(raw_sql('usage'))} -> 'input',
                                                   'output', {_json_obj(raw_sql('usage'))} -> 'output')) END AS usage,
    {_json_obj(field_sql('cost'))} AS cost_obj, {lf_text_sql('total_cost')} AS total_cost,
    upper(coalesce({raw_text_sql('level')}, '')) = 'ERROR' AS failed,
    {lf_or_sql('status_message')} AS message0, {lf_text_sql('ttft_s')} AS ttft_s, {lf_text_sql('latency_s')} AS latency_s,
    {lf_or_sql('user')} AS tenant0, {lf_or_sql('model')} AS model0,
    {_json_obj(raw_sql('metadata'))} AS meta
  FROM calls
), usage_entries AS (
  SELECT *, {usage_entries_sql} AS ue, json_extract(meta, [{meta_paths}]) AS mp,
    CASE WHEN json_type(cost_obj) = 'OBJECT' AND cost_obj <> CAST('{{}}' AS JSON)
         THEN {cost_entries_sql} END AS ce
  FROM fields
), tokens AS (
  SELECT *,
    CASE WHEN {live}len(list_filter(ue, lambda e: e.value IS NOT NULL AND e.n IS NULL)) > 0
         THEN error('langfuse fast path: a usage value that is not a number') END AS _check_usage,
    {total_sql("contains(e.key, 'input')")} AS input_n, {total_sql("contains(e.key, 'output')")} AS output_n,
    {total_sql("contains(e.key, 'input') AND (contains(e.key, 'cache_read') OR contains(e.key, 'cached'))")} AS cached_n,
    {total_sql(write + " AND NOT suffix(e.key, '1h')")} AS write_n, {total_sql(write + " AND suffix(e.key, '1h')")} AS write_1h_n,
    {total_sql("contains(e.key, 'reasoning')")} AS reasoning_n,
    CASE WHEN ce IS NOT NULL AND ({_json_num_sql("cost_obj -> 'total'")}) IS NOT NULL THEN {_json_num_sql("cost_obj -> 'total'")}
         WHEN ce IS NOT NULL AND list_sum(list_transform(ce, lambda e: e.n)) IS NOT NULL
           THEN list_sum(list_transform(ce, lambda e: e.n))
         ELSE {_text_num_sql("total_cost")} END AS cost_d,
    ce IS NOT NULL AND (({_json_num_sql("cost_obj -> 'total'")}) IS NOT NULL
                        OR list_sum(list_transform(ce, lambda e: e.n)) IS NOT NULL) AS from_details,
    json_extract({_json_obj(attributes_sql)}, [{', '.join(paths)}]) AS ma
  FROM usage_entries
), priced AS (
  SELECT *, cost_d = 0 AND (coalesce(input_n, 0) + coalesce(output_n, 0) <> 0 OR NOT from_details) AS unpriced,
    coalesce({provider_sql("mp")}, {provider_sql("ma")}) AS provider
  FROM tokens
), clock AS (
  SELECT *, {_t('t_start')} AS start_t, {_t('t_end')} AS end_t, {_t('t_first')} AS first_t FROM priced
), zoned AS (
  SELECT *, {_aware_sql('start_t')} AS start_z, {_aware_sql('end_t')} AS end_z, {_aware_sql('first_t')} AS first_z
  FROM clock
)
SELECT CASE WHEN {"_skip" if skip else "false"} THEN _row ELSE coalesce(
    CAST(CASE WHEN {missing_id_sql('id')} THEN error('langfuse fast path: an observation without an id') END AS BIGINT),
    CAST(_check_usage AS BIGINT), CAST({_read_time_check_sql('start_t')} AS BIGINT),
    CAST({_read_time_check_sql('end_t')} AS BIGINT), CAST({_read_time_check_sql('first_t')} AS BIGINT), _row) END AS _row,
  {"_skip, " if skip else ""}
  CAST(NULL AS VARCHAR) AS _hash, id AS request_id, start_t AS ts,
  CASE WHEN tenant0 IS NOT NULL AND tenant0 <> '' THEN tenant0 ELSE CAST(? AS VARCHAR) END AS tenant,
  coalesce(model0, CAST(? AS VARCHAR)) AS model, provider, CAST(NULL AS VARCHAR) AS cache_hit,
  CAST(input_n AS VARCHAR) AS input_tokens, CAST(output_n AS VARCHAR) AS output_tokens,
  CAST(cached_n AS VARCHAR) AS cached_input_tokens, CAST(write_n AS VARCHAR) AS cache_write_tokens,
  CAST(write_1h_n AS VARCHAR) AS cache_write_1h_tokens, CAST(reasoning_n AS VARCHAR) AS reasoning_tokens,
  CAST(NULL AS VARCHAR) AS queue_ms,
  CAST(coalesce({_ms_between_texts_sql('start_t', 'first_t', 'start_z', 'first_z')},
                {_finite('ttft_s')} * CAST(1000 AS DOUBLE)) AS VARCHAR) AS ttft_ms,
  CAST(coalesce({_ms_between_texts_sql('start_t', 'end_t', 'start_z', 'end_z')},
                {_finite('latency_s')} * CAST(1000 AS DOUBLE)) AS VARCHAR) AS total_ms,
  CASE WHEN failed THEN 'error' ELSE 'ok' END AS status,
  CASE WHEN failed THEN left(coalesce(message0, 'error'), 200) END AS error_type,
  CASE WHEN unpriced THEN NULL ELSE CAST(cost_d AS VARCHAR) END AS cost_usd,
  CAST(CASE WHEN unpriced THEN json_merge_patch({attrs_json}, json_object('source_cost_usd', CAST(0 AS DOUBLE)))
       ELSE attrs END AS VARCHAR) AS attrs,
  CAST(NULL AS VARCHAR) AS service_tier
FROM (SELECT *, {attrs_sql} AS attrs FROM zoned)"""

    args = [*params, options.tenant, options.model, *attrs_params]
    return Source(select_sql(records, False), args, has_ids=True,
                  unnumbered_sql=select_sql(unnumbered_records, True) if unnumbered_records else None,
                  first_row=2 if p.kind == "csv" else 1)


def _read_langfuse(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """Observations of any Langfuse shape (v1/v2 API pages, the UI's CSV/JSON/JSONL export, the
    blob-storage export), a record at a time; only GENERATION and EMBEDDING ones are model calls."""
    if _langfuse_traces_only(head_keys(p)):
        raise InputError("this is a Langfuse traces export: load the observations export instead; a traces "
                         "file beside it (same name with 'traces' for 'observations', or traces/ beside "
                         "observations/ in a blob-storage export) is joined for userId, sessionId and tags",
                         file=p.name)
    src = langfuse_fast_source(p, options, con) if fast else None
    if src is not None:
        src.fallback = lambda: _read_langfuse(con, p, options, fast=False)
        if src.unnumbered_sql and p.kind != "csv":
            # the unnumbered reading stopped (a page of observations, or a record Python must read): the
            # numbered one, then Python (a CSV's numbered reading would stop on the same record: Python)
            numbered = dataclasses.replace(src, unnumbered_sql=None)
            src = dataclasses.replace(src, fallback=lambda: numbered)
        return src
    traces = _langfuse_traces(langfuse_traces_path(p.path))
    csv_quoted = p.kind == "csv"

    def rows():
        for row, obs in iter_records(p, options.records_path):
            if not isinstance(obs, dict):
                raise InputError("expected an observation (an object)", file=p.name, row=row)
            if csv_quoted:
                obs = {k: _unquote(v) for k, v in obs.items()}
            if str(obs.get("type") or "GENERATION").upper() not in LANGFUSE_MODEL_CALLS:
                continue        # spans, events, tools, agents: not model calls
            yield _langfuse_row(row, obs, _trace_of(traces, obs), options)
    return _python_source(rows(), columns=RAW_COLUMNS)


def langfuse_source(observations: Iterator[dict], traces: dict[str, dict], options: IngestOptions) -> Source:
    """Observations already read as dicts (a pull from Langfuse's public API, v1 or v2 shape), joined to
    ``traces`` (trace id -> the trace's fields); only GENERATION and EMBEDDING ones are model calls."""
    wanted = set(LANGFUSE_TRACE_FIELDS)

    def rows():
        for row, obs in enumerate(observations, 1):
            if str(obs.get("type") or "GENERATION").upper() not in LANGFUSE_MODEL_CALLS:
                continue
            trace = _trace_of(traces, obs)
            yield _langfuse_row(row, obs, {k: v for k, v in trace.items() if k in wanted}, options)
    return _python_source(rows(), columns=RAW_COLUMNS)


register(Adapter(
    name="langfuse", label="Langfuse observations (generations), joined to their traces",
    source_tool="Langfuse",
    export_hint="GET /api/public/observations or /api/public/v2/observations?fields=core,basic,time,model,usage "
                "(JSON pages, or one page per line), the UI's export (CSV, JSON or JSONL) or the blob-storage "
                "export (JSONL/CSV, snake_case); put the traces beside it as *traces.json (or traces/ beside "
                "observations/) to add userId (the tenant), sessionId and tags",
    sniff=_sniff_langfuse, read=_read_langfuse,
    example="tests/data/langfuse_observations.json",
))


# ---------------------------------------------------------------- otel

# operations that are model calls; agent and tool spans wrap them and would count usage twice
OTEL_MODEL_OPERATIONS = {"chat", "text_completion", "generate_content", "embeddings", "completion"}
OTEL_NOT_MODEL_CALLS = {"execute_tool", "invoke_agent", "create_agent"}
# OpenInference span kinds that are model calls (CHAIN, AGENT, TOOL, RETRIEVER... wrap or sit beside them)
OPENINFERENCE_MODEL_CALLS = {"LLM", "EMBEDDING"}
# canonical column <- span attributes, first present wins: GenAI semantic conventions 1.37 names, the
# older names (OpenLLMetry 0.33: prompt/completion tokens, gen_ai.system), OpenLIT's cost and
# OpenInference's (Arize Phoenix: llm.model_name, llm.token_count.*, llm.provider)
OTEL_FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "embedding.model_name"),
    "provider": ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"),
    "input_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
    "output_tokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
    "cached_input_tokens": ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
                            "llm.token_count.prompt_details.cache_read"),
    "cache_write_tokens": ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
                           "llm.token_count.prompt_details.cache_write"),
    "reasoning_tokens": ("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens",
                         "llm.token_count.completion_details.reasoning"),
    "service_tier": ("gen_ai.openai.response.service_tier", "openai.response.service_tier",
                     "gen_ai.openai.request.service_tier", "openai.request.service_tier"),
    "cost_usd": ("gen_ai.usage.cost",),
}
OTEL_MAPPED = {k for names in OTEL_FIELDS.values() for k in names} | {"error.type"}


def _invocation_model(a: dict) -> str | None:
    """The requested model in OpenInference's ``*.invocation_parameters`` JSON (a failed call has no
    ``llm.model_name``: there was no response to name it)."""
    for key in ("llm.invocation_parameters", "embedding.invocation_parameters"):
        params = _obj(a.get(key))
        if isinstance(params.get("model"), str) and params["model"]:
            return params["model"]
    return None


def _attr_text(v) -> str | None:
    """An attribute's value where a name is read (model, provider, operation): a text as it is, a number or a
    boolean as Python writes it, an array or a map as its JSON (shown as the file holds it; never a crash on a
    value no set or text column takes)."""
    if v is None or isinstance(v, str):
        return v
    return json.dumps(v, separators=(",", ":"), default=str) if isinstance(v, list | dict) else str(v)


def _first(a: dict, names: tuple[str, ...]):
    return next((a[n] for n in names if a.get(n) not in (None, "")), None)


def _sniff_otel(p: Probe) -> float:
    if p.kind not in ("json", "jsonl") or "resourceSpans" not in head_keys(p):
        return 0.0
    return 0.99 if b'"gen_ai.' in p.head or b'"llm.model_name"' in p.head else 0.6


def otlp_value(v: dict | None):
    """An OTLP JSON ``AnyValue`` as a Python value (int64 arrive as strings in OTLP JSON); ValueError for a value
    its type cannot hold (an ``intValue`` of ``"abc"``, an ``arrayValue`` that is no object)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        x = v["intValue"]
        try:
            return int(x) if isinstance(x, int | float) else int(str(x).strip())
        except (OverflowError, ValueError):
            raise ValueError(f"intValue {v['intValue']!r} is not an integer") from None
    if "doubleValue" in v:
        try:
            return float(v["doubleValue"])
        except (TypeError, ValueError):
            raise ValueError(f"doubleValue {v['doubleValue']!r} is not a number") from None
    if "boolValue" in v:
        return bool(v["boolValue"])
    for name in ("arrayValue", "kvlistValue"):
        if name in v and not isinstance(v[name] or {}, dict):
            raise ValueError(f"{name} is not an object")
    if "arrayValue" in v:
        return [otlp_value(x) for x in _value_list(v["arrayValue"])]
    if "kvlistValue" in v:
        return otlp_attrs(_value_list(v["kvlistValue"]))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _value_list(holder: dict | None) -> list:
    values = (holder or {}).get("values") or []
    if not isinstance(values, list):
        raise ValueError("values is not a list")
    return values


def otlp_attrs(kvs: list | None) -> dict:
    """OTLP JSON ``KeyValue`` objects as a dict; an element that is no object, or whose key is no text, is no
    attribute (left out). ValueError naming the key whose value its type cannot hold (:func:`otlp_value`)."""
    out = {}
    for kv in kvs or []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            try:
                out[kv["key"]] = otlp_value(kv.get("value"))
            except ValueError as exc:
                raise ValueError(f"attribute {kv['key']!r}: {exc}") from None
    return out


def _ns(v) -> int | None:
    """Nanoseconds since the epoch: an int64, as a JSON string or number (never through float)."""
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None




def _span_ms(start_ns: int, end_ns: int) -> float:
    """A span's length in ms; infinite (the loader rejects it) past any float, not Python's OverflowError."""
    d = end_ns - start_ns
    return d / 10 ** 6 if abs(d) < 10 ** 300 else math.copysign(math.inf, d)


def _read_otel(con, p: Probe, options: IngestOptions) -> Source:
    # a value of another JSON type than OTLP/JSON's (a line that is an array, spans that are no list) is refused
    # naming its row and field
    def objects(row: int, v, field: str, what: str) -> list[dict]:
        return expect_objects(v, what, file=p.name, row=row, field=field)

    def one(row: int, v, field: str, what: str) -> dict:
        return {} if v is None else expect_object(v, what, file=p.name, row=row, field=field)

    def key_values(row: int, v, field: str) -> dict:
        try:
            return otlp_attrs(objects(row, v, field, "KeyValues"))
        except ValueError as exc:
            raise InputError(str(exc), file=p.name, row=row, field=field) from None

    def rows():
        found = 0
        for row, doc in iter_records(p):
            doc = expect_object(doc, "an OTLP/JSON ExportTraceServiceRequest", file=p.name, row=row)
            for i, rs in enumerate(objects(row, doc.get("resourceSpans"), "resourceSpans", "ResourceSpans")):
                at = f"resourceSpans[{i}]"
                resource = key_values(row, one(row, rs.get("resource"), f"{at}.resource", "a Resource").get("attributes"),
                                      f"{at}.resource.attributes")
                # OTLP before 0.15 named them instrumentationLibrarySpans
                scoped = ("instrumentationLibrarySpans" if not rs.get("scopeSpans")
                          and rs.get("instrumentationLibrarySpans") is not None else "scopeSpans")
                for j, ss in enumerate(objects(row, rs.get(scoped), f"{at}.{scoped}", "ScopeSpans")):
                    scope = one(row, ss.get("scope") or ss.get("instrumentationLibrary"),
                                f"{at}.{scoped}[{j}].scope", "an InstrumentationScope")
                    for k, span in enumerate(objects(row, ss.get("spans"), f"{at}.{scoped}[{j}].spans", "Spans")):
                        a = key_values(row, span.get("attributes"), f"{at}.{scoped}[{j}].spans[{k}].attributes")
                        op = _attr_text(a.get("gen_ai.operation.name"))
                        kind = str(a.get("openinference.span.kind") or "").upper()
                        model = _attr_text(_first(a, OTEL_FIELDS["model"])) or _invocation_model(a)
                        if (op in OTEL_NOT_MODEL_CALLS or (kind and kind not in OPENINFERENCE_MODEL_CALLS)
                                or not (op in OTEL_MODEL_OPERATIONS or kind or model)):
                            continue
                        found += 1
                        status = one(row, span.get("status"), f"{at}.{scoped}[{j}].spans[{k}].status", "a Status")
                        code = status.get("code")
                        error = code in (2, "STATUS_CODE_ERROR") or bool(a.get("error.type"))
                        tenant = None
                        if options.tenant_field:
                            tenant = a.get(options.tenant_field, resource.get(options.tenant_field))
                        s_ns, e_ns = _ns(span.get("startTimeUnixNano")), _ns(span.get("endTimeUnixNano"))
                        tokens = {c: _int(_first(a, OTEL_FIELDS[c])) for c in
                                  ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
                                   "reasoning_tokens")}
                        provider = _attr_text(_first(a, OTEL_FIELDS["provider"]))
                        cost = _num(_first(a, OTEL_FIELDS["cost_usd"]))
                        extra = {}
                        if unpriced_zero(cost, (tokens["input_tokens"] or 0) + (tokens["output_tokens"] or 0)):
                            cost, extra["source_cost_usd"] = None, cost
                        attrs = {"span_name": span.get("name"), "trace_id": span.get("traceId"),
                                 "span_id": span.get("spanId"), "parent_span_id": span.get("parentSpanId") or None,
                                 "span_kind": span.get("kind"), "scope": scope.get("name"),
                                 "status_message": status.get("message") or None,
                                 **{k: v for k, v in a.items() if k not in OTEL_MAPPED},
                                 "resource": resource, **extra}
                        yield {
                            "_row": row, "request_id": f"{span.get('traceId')}:{span.get('spanId')}",
                            "ts": time_after(UNIX_EPOCH, microseconds=s_ns // 1000) if s_ns is not None else None,
                            "tenant": str(tenant) if tenant is not None else options.tenant,
                            "model": model or options.model, "provider": provider,
                            "service_tier": _attr_text(_first(a, OTEL_FIELDS["service_tier"])), **tokens,
                            "cost_usd": cost,
                            "total_ms": _span_ms(s_ns, e_ns) if s_ns is not None and e_ns is not None else None,
                            "status": "error" if error else "ok",
                            "error_type": str(a.get("error.type") or status.get("message") or "error")[:200]
                            if error else None,
                            "attrs": _json(attrs),
                        }
        if not found:
            raise InputError("no GenAI model-call spans (spans with gen_ai.request.model, gen_ai.operation.name "
                             "chat/text_completion/embeddings/generate_content, or OpenInference LLM spans with "
                             "llm.model_name)", file=p.name)
    return _python_source(rows())


register(Adapter(
    name="otel", label="OpenTelemetry GenAI spans (OTLP JSON)",
    source_tool="OpenTelemetry SDK / Collector with GenAI instrumentation",
    export_hint="the Collector's file exporter (format: json) or an SDK's OTLP file exporter: one JSON "
                "TracesData per line; name the tenant attribute with --tenant-field (span or resource)",
    sniff=_sniff_otel, read=_read_otel,
    example="tests/data/otel_genai_spans.jsonl",
))


# ---------------------------------------------------------------- benchmark runs: vllm-bench, llmperf

def _bench_source(con, p: Probe, options: IngestOptions, *runs: benchruns.BenchRun) -> Source:
    """Canonical rows of benchmark runs; each run is stored once its load has committed."""
    for run in runs:
        if run.started_at is None:
            raise InputError("the run's start time is unknown: give it with --start", file=run.file_name or p.name)
        if not (run.model or options.model):
            raise InputError("the run names no model: give it with --model", file=run.file_name or p.name)

    def rows():
        for run in runs:
            yield from run_rows(run)

    def run_rows(run):
        for r in run.requests.to_dict("records"):
            r = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            extra = {"run_id": run.run_id, "provider": run.provider, "mean_itl_ms": r["mean_itl_ms"],
                     "offset_s": r["offset_s"], **(r["attrs"] or {})}
            tenant = None
            if options.tenant_field:
                tenant = _pick(options.tenant_field, r["attrs"],
                               {"provider": run.provider, "model": run.model}, run.metadata)
            yield {
                "_row": r["index"] + 1, "request_id": f"{run.run_id}:{r['index']}",
                "ts": time_after(run.started_at, seconds=r["offset_s"]),
                "tenant": str(tenant) if tenant is not None else options.tenant,
                "model": run.model or options.model, "provider": run.provider,
                "input_tokens": _int(r["input_tokens"]), "output_tokens": _int(r["output_tokens"]),
                "queue_ms": r["queue_ms"], "ttft_ms": r["ttft_ms"], "total_ms": r["total_ms"],
                "status": "ok" if r["ok"] else "error", "error_type": r["error"],
                "attrs": _json(extra),
            }

    def store_run_if_loaded() -> None:
        for run in runs:
            loaded = con.execute("SELECT count(*) FROM batches WHERE sha256 = ? AND format = ?",
                                 [run.sha256, run.source_format]).fetchall()[0][0]
            if loaded:
                benchruns.record_run(con, run)
    return _python_source(rows(), after=store_run_if_loaded)


def _sniff_vllm(p: Probe) -> float:
    if p.kind not in ("json", "jsonl"):
        return 0.0
    keys = head_keys(p)
    if {"model_id", "num_prompts"} <= keys and keys & {"request_rate", "duration"}:
        return 0.99 if keys & {"ttfts", "input_lens"} else 0.9
    return 0.0


# the canonical rows of a vllm bench run read streamed (benchruns.read_vllm_streamed), as _bench_source writes
# them from read_vllm_bench_runs: each series' Parquet file joined by position ({series}: the joins of the
# series the file has, a missing one NULL)
VLLM_FAST_SQL = r"""
WITH r AS (
  SELECT s.file_row_number AS i, {ok} AS ok, s.input_lens, {output_lens} AS output_lens, t.ttfts AS ttft_s,
    {latencies} AS latency_s, st.start_times, {queue_times} AS queue_s, {err} AS err, {err_text} AS err_text,
    {itls} AS itls, {itl_mean_s} AS itl_mean_s, {generated} AS generated_text,
    st.start_times - ? AS offset_s
  FROM read_parquet(?, file_row_number = true) s POSITIONAL JOIN read_parquet(?) t POSITIONAL JOIN read_parquet(?) st
  {series}),
a AS (
  SELECT *, CAST(? AS TIMESTAMP) + to_microseconds(CAST(trunc(offset_s) AS BIGINT) * 1000000
                                                   + CAST(round_even((offset_s - trunc(offset_s)) * 1e6, 0) AS BIGINT)) AS arrived,
    CASE WHEN ok AND len(itls) > 0 THEN itl_mean_s * 1000 END AS mean_itl_ms
  FROM r)
SELECT i + 1 AS _row, CAST(NULL AS VARCHAR) AS _hash, ? || ':' || i AS request_id,
  strftime(arrived, '%Y-%m-%d %H:%M:%S') || CASE WHEN strftime(arrived, '%f') <> '000000' THEN '.' || strftime(arrived, '%f')
                                             ELSE '' END AS ts, ? AS tenant, ? AS model, CAST(NULL AS VARCHAR) AS provider,
  CASE WHEN ok THEN input_lens ELSE 0 END AS input_tokens, output_lens AS output_tokens, queue_s * 1000 AS queue_ms,
  CASE WHEN ok THEN ttft_s * 1000 END AS ttft_ms, CASE WHEN ok THEN latency_s * 1000 END AS total_ms,
  CASE WHEN ok THEN 'ok' ELSE 'error' END AS status, CASE WHEN NOT ok THEN coalesce(err_text, 'error') END AS error_type,
  {attrs} AS attrs
FROM (SELECT *, CAST(json_object('run_id', ?, 'provider', NULL, 'mean_itl_ms', mean_itl_ms, 'offset_s', offset_s,
                     'ttft_s', ttft_s, 'latency_s', latency_s, 'start_time_perf_s', start_times,
                     'prompt_len', input_lens, 'itls_s', itls, 'error', nullif(coalesce(err, ''), '')) AS VARCHAR) AS j
      FROM a)"""
# attrs: the object above, and generated_text last where the file has it (as _vllm_run adds it)
VLLM_ATTRS = ("j", "left(j, length(j) - 1) || ',\"generated_text\":' "
                   "|| coalesce(CAST(to_json(generated_text) AS VARCHAR), 'null') || '}'")
# the parts of VLLM_FAST_SQL for each series, by whether the file has it: (alias, column expressions)
VLLM_PARTS = {
    "output_lens": ("o", {"output_lens": ("o.output_lens", "CAST(NULL AS BIGINT)")}),
    "latencies": ("l", {"latencies": ("l.latencies", "CAST(NULL AS DOUBLE)")}),
    "queue_times": ("q", {"queue_times": ("q.queue_times", "CAST(NULL AS DOUBLE)")}),
    "errors": ("e", {"err": ("e.err", "CAST(NULL AS VARCHAR)"), "err_text": ("e.err_text", "CAST(NULL AS VARCHAR)")}),
    "itls": ("i", {"itls": ("i.itls", "CAST(NULL AS DOUBLE[])"), "itl_mean_s": ("i.itl_mean_s", "CAST(NULL AS DOUBLE)")}),
    "generated_texts": ("g", {"generated": ("g.generated_texts", "CAST(NULL AS VARCHAR)")}),
}
VLLM_JOIN = {alias: f"POSITIONAL JOIN read_parquet(?) {alias}" for alias in ("o", "l", "q", "e", "i", "g")}


def _vllm_fast_sql(series: dict[str, str]) -> tuple[str, list[str]]:
    """VLLM_FAST_SQL for the series a file has, and the Parquet paths its joins read, in order."""
    parts, joins, paths = {}, [], []
    for key, (alias, cols) in VLLM_PARTS.items():
        have = key in series
        for col, (present, absent) in cols.items():
            parts[col] = present if have else absent
        if have:
            joins.append(VLLM_JOIN[alias])
            paths.append(series[key])
    parts["ok"] = (benchruns.VLLM_OK_SQL if "errors" in series
                   else benchruns.VLLM_OK_LATENCY_SQL if "latencies" in series else "false")
    parts["series"] = " ".join(joins)
    parts["attrs"] = VLLM_ATTRS[1] if "generated_texts" in series else VLLM_ATTRS[0]
    body = VLLM_FAST_SQL
    for name, text in parts.items():
        body = body.replace("{" + name + "}", text)
    return body, paths


def _record_when_loaded(con, streamed, run) -> Callable[[], None]:
    """The ``on_done`` of a streamed benchmark reading: its temporary series files removed, and the run's
    summary recorded (``benchmark_runs``) once its batch is stored (a failed or refused load records none)."""
    def done() -> None:
        streamed.cleanup()
        loaded = con.execute("SELECT count(*) FROM batches WHERE sha256 = ? AND format = ?",
                             [run.sha256, run.source_format]).fetchall()[0][0]
        if loaded:
            benchruns.record_run(con, run)
    return done


def _read_vllm(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    streamed = None if options.tenant_field or not fast else benchruns.read_vllm_streamed(
        con, p.path, p.name, start=options.start)
    if streamed is not None:
        run = streamed.run
        if run.started_at is None:
            streamed.cleanup()
            raise InputError("the run's start time is unknown: give it with --start", file=p.name)
        if not (run.model or options.model):
            streamed.cleanup()
            raise InputError("the run names no model: give it with --model", file=p.name)

        done = _record_when_loaded(con, streamed, run)
        body, paths = _vllm_fast_sql(streamed.series)
        s = streamed.series
        params = [streamed.t0, s["input_lens"], s["ttfts"], s["start_times"], *paths, run.started_at, run.run_id,
                  options.tenant, run.model or options.model, run.run_id]
        return Source(body, params, has_ids=True, cleanup=done,
                      fallback=lambda: _read_vllm(con, p, options, fast=False))
    return _bench_source(con, p, options, *benchruns.read_vllm_bench_runs(p.path, p.name, start=options.start))


register(Adapter(
    name="vllm-bench", label="vllm bench serve result (per-request, --save-detailed)",
    source_tool="vLLM (vllm bench serve)",
    export_hint="vllm bench serve ... --save-result --save-detailed [--result-dir DIR]: the result JSON; "
                "the run is kept on the benchmark runs list",
    sniff=_sniff_vllm, read=_read_vllm,
    example="tests/data/vllm_bench_serve_detailed.json",
))


def _sniff_llmperf(p: Probe) -> float:
    if p.kind not in ("json", "jsonl"):
        return 0.0
    keys = head_keys(p)
    if {"ttft_s", "end_to_end_latency_s"} <= keys and keys & {"number_input_tokens", "error_code"}:
        return 0.99
    if "num_concurrent_requests" in keys and any(k.startswith("results_ttft_s") for k in keys):
        return 0.9      # a summary: refused with advice in the reader
    return 0.0


# the canonical rows of an LLMPerf run read in SQL (benchruns.read_llmperf_streamed): the rows _bench_source
# writes for it, attrs as its JSON text (the run's fields, then the record's own). The record's text is read
# again (read_json_objects) beside the values and times computed from it, by position; a record naming one of
# the run's fields anywhere stops the reading (its attrs would hold the key twice): the loader then reads
# the file through read_llmperf.
LLMPERF_FAST_SQL = r"""
WITH r AS (
  SELECT v.*, CAST(json(o.json) AS VARCHAR) AS rec, t.offset_s, CAST(? AS TIMESTAMP) + to_microseconds(t.us) AS at
  FROM read_json_objects(?, format = 'array', compression = 'auto') o
  POSITIONAL JOIN read_parquet(?) v POSITIONAL JOIN read_parquet(?) t)
SELECT r.i + 1 AS _row, CAST(NULL AS VARCHAR) AS _hash, ? || ':' || r.i AS request_id,
  CASE WHEN epoch_us(r.at) % 1000000 = 0 THEN strftime(r.at, '%Y-%m-%d %H:%M:%S')
       ELSE strftime(r.at, '%Y-%m-%d %H:%M:%S.%f') END AS ts, ? AS tenant,
  ? AS model, ? AS provider, r.input_tokens, r.output_tokens, CAST(NULL AS DOUBLE) AS queue_ms, r.ttft_ms,
  r.total_ms, CASE WHEN r.ok THEN 'ok' ELSE 'error' END AS status, r.error AS error_type,
  CASE WHEN contains(r.rec, '"run_id"') OR contains(r.rec, '"provider"') OR contains(r.rec, '"mean_itl_ms"')
            OR contains(r.rec, '"offset_s"') THEN error('llmperf fast path: a record names a field of the run')
  ELSE '{"run_id":' || to_json(CAST(? AS VARCHAR)) || ',"provider":' || coalesce(CAST(to_json(CAST(? AS VARCHAR)) AS VARCHAR), 'null')
    || ',"mean_itl_ms":' || coalesce(CAST(to_json(r.mean_itl_ms) AS VARCHAR), 'null')
    || ',"offset_s":' || CAST(to_json(r.offset_s) AS VARCHAR)
    || CASE WHEN r.rec = '{}' THEN '}' ELSE ',' || r.rec[2:] END END AS attrs
FROM r"""


def _read_llmperf(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    name = Path(p.name.split(":")[-1]).name
    streamed = None if options.tenant_field or not fast else benchruns.read_llmperf_streamed(
        con, p.path, name, start=options.start, model=options.model)
    if streamed is not None:
        run = streamed.run
        run.file_name = p.name
        if not (run.model or options.model):
            streamed.cleanup()
            raise InputError("the run names no model: give it with --model", file=p.name)

        done = _record_when_loaded(con, streamed, run)
        params = [run.started_at, str(p.path), streamed.values_path, streamed.times_path, run.run_id, options.tenant,
                  run.model or options.model, run.provider, run.run_id, run.provider]
        return Source(LLMPERF_FAST_SQL, params, has_ids=True, cleanup=done,
                      fallback=lambda: _read_llmperf(con, p, options, fast=False))
    run = benchruns.read_llmperf(p.path, Path(p.name.split(":")[-1]).name, start=options.start,
                                 model=options.model)
    run.file_name = p.name
    return _bench_source(con, p, options, run)


register(Adapter(
    name="llmperf", label="LLMPerf per-request results (with the run's summary beside them)",
    source_tool="LLMPerf (ray-project/llmperf token_benchmark_ray.py)",
    export_hint="--results-dir DIR writes <run>_individual_responses.json and <run>_summary.json: load the "
                "first, keep the second beside it (or use --start and --model)",
    sniff=_sniff_llmperf, read=_read_llmperf,
    example="tests/data/llmperf/individual/fireworks_70b.json",
))


# ---------------------------------------------------------------- azure-trace

AZURE_COLUMNS = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
AZURE_PRESET = {"ts": "TIMESTAMP", "input_tokens": "ContextTokens", "output_tokens": "GeneratedTokens"}


def _sniff_azure(p: Probe) -> float:
    if p.kind != "csv":
        return 0.0
    cols = set(p.columns)
    if cols == AZURE_COLUMNS:
        return 0.95
    return 0.9 if AZURE_COLUMNS <= cols else 0.0


def _read_azure(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """The columns mapped in SQL; ``fast=False`` reads the same mapping a record at a time (the tests' second
    reading)."""
    _need_model(p, options, "the Azure LLM inference trace")
    if fast:
        return mapped_source(con, p, options, preset=AZURE_PRESET)
    return nested_source(p, options, user_mapping(options, AZURE_PRESET))


register(Adapter(
    name="azure-trace", label="Azure LLM inference trace (a preset of generic)",
    source_tool="Azure Public Dataset (AzureLLMInferenceTrace_code/conv, 2023)",
    export_hint="download AzureLLMInferenceTrace_*.csv as is; give --model (the trace names none)",
    sniff=_sniff_azure, read=_read_azure,
    example="tests/data/azure_conv.csv",
))


# ---------------------------------------------------------------- mooncake

MOONCAKE_BLOCK_TOKENS = 512


def prefix_cached_tokens(input_length: int, hash_ids: list, seen: set) -> tuple[int, int]:
    """``(cached_input_tokens, k)`` for one Mooncake request, then records its blocks as seen.

    ``k`` is the length of the longest leading run of ``hash_ids`` that all appeared in
    earlier requests (a prefix cache can only reuse a prefix), and
    ``cached_input_tokens = min(input_length, 512 * k)`` (the last block may be partial).

    >>> seen = set()
    >>> prefix_cached_tokens(1000, [1, 2], seen), prefix_cached_tokens(1500, [1, 2, 3], seen)
    ((0, 0), (1024, 2))
    >>> prefix_cached_tokens(700, [1, 9, 2], seen)
    (512, 1)
    >>> prefix_cached_tokens(700, [1, 2], seen)
    (700, 2)
    """
    k = 0
    for h in hash_ids:
        if h not in seen:
            break
        k += 1
    seen.update(hash_ids)
    # a length past 2^53 stays the double _int gave (int() of it passed Arrow an integer no double holds, and one
    # below -2^63 no int64: the load stopped with pyarrow's error; the loader rejects such a count by name)
    cached = min(input_length, MOONCAKE_BLOCK_TOKENS * k)
    return (int(cached) if abs(cached) <= 2 ** 53 else cached), k


def _mooncake_time(start: datetime, raw, offset: float | None) -> str | None:
    """``start`` plus the trace's ``timestamp`` (``raw``, as JSON parsed it; ``offset``, its number) in ms. A whole
    number is added exactly, as the SQL reading adds its BIGINT: a float's ms past 2^53 lost the microseconds
    (9007199254740994 ms read .994048 by Python, .994 by SQL)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) < 2 ** 63 // 1000:
        return time_after(start, microseconds=raw * 1000)
    # past what a timestamp's microseconds hold: the sum named in milliseconds, as the file wrote them
    return time_after(start, offset) if offset is not None else None


def _sniff_mooncake(p: Probe) -> float:
    if p.kind != "jsonl":
        return 0.0
    cols = set(p.columns)
    if {"timestamp", "input_length", "output_length"} <= cols:
        return 0.99 if "hash_ids" in cols else 0.8
    return 0.0


# The Mooncake reading in SQL over DuckDB's line reader, each line parsed once, for a file of plain ASCII lines
# (formats._plain_text: Python's line ends and strip() see the same lines): the prefix-cache reuse of
# prefix_cached_tokens as two aggregates (a block is seen at a request when a qualifying request before it
# holds it: k = the position of the first block first held by this request, less one, else all its blocks;
# each block's first holder and position, packed as row * 2^32 + position, where a row past 2^31 overflows
# BIGINT and stops this reading, then the least such position per row: no join of every block with its
# first holder). A record
# this reading would not read as the Python one stops it with an error (the loader then reads the file in
# Python): a line that is no JSON object, a time that is no integer, a length of another type (or past 2^53,
# where float() rounds), block hashes that are not integers, a field named like one of attrs' own. A line is
# trimmed only where it starts or ends with white space (trim with a set of characters costs as much as the
# JSON parse); one strftime per time. A line that parsed as JSON is an object when it starts with '{' (no
# json_type); the rest of a record of the four fields in this order, hash_ids an array, is its hashes' text
# (r's check makes it the array's minified JSON, as json_merge_patch writes it), without a merge.
MOONCAKE_FAST_SQL = r"""
WITH l AS (
  SELECT ordinality AS _row, line
  FROM read_csv(?, columns = {'line': 'VARCHAR'}, header = false, delim = chr(1), quote = '', escape = '',
                auto_detect = false, strict_mode = false, compression = 'auto') WITH ORDINALITY
  WHERE line <> '' AND (ascii(line) NOT IN (32, 9) OR trim(line, ' ' || chr(9)) <> '')),
v AS (
  SELECT _row, line, s, j, CASE WHEN starts_with(s, '{') THEN 'OBJECT' ELSE 'OTHER' END AS jt,
    json_extract(j, ['$.timestamp', '$.input_length', '$.output_length', '$.hash_ids']) AS v
  FROM (SELECT _row, line, s, CAST(s AS JSON) AS j
        FROM (SELECT _row, line, CASE WHEN ascii(line) IN (32, 9) OR suffix(line, ' ') OR suffix(line, chr(9))
                                      THEN trim(line, ' ' || chr(9)) ELSE line END AS s FROM l))),
t AS (
  SELECT _row, line, s, j, jt, v[1] AS ts_j, coalesce(json_type(v[1]), 'NULL') AS ts_t,
    coalesce(json_type(v[2]), 'NULL') AS in_t, coalesce(json_type(v[3]), 'NULL') AS out_t,
    coalesce(json_type(v[4]), 'NULL') AS h_t, TRY_CAST(v[1] AS BIGINT) AS ts_ms,
    TRY_CAST(v[2] AS DOUBLE) AS n_in, TRY_CAST(v[3] AS DOUBLE) AS n_out,
    CASE WHEN json_type(v[4]) = 'ARRAY' THEN TRY_CAST(v[4] AS BIGINT[]) END AS hashes,
    CASE WHEN json_type(v[4]) = 'ARRAY' THEN CAST(v[4] AS VARCHAR) END AS hashes_text
  FROM v),
c AS (
  SELECT *, CASE WHEN n_in = floor(n_in) THEN CAST(n_in AS BIGINT) END AS input_length,
    CASE WHEN n_out = floor(n_out) THEN CAST(n_out AS BIGINT) END AS output_length
  FROM t),
q AS (SELECT _row, hashes FROM c WHERE hashes IS NOT NULL AND input_length IS NOT NULL),
h AS (SELECT _row, unnest(hashes) AS h, generate_subscripts(hashes, 1) AS pos FROM q),
f AS (SELECT min(_row * 4294967296 + pos) AS first FROM h GROUP BY h),
k AS (SELECT first // 4294967296 AS _row, min(first % 4294967296) AS stop FROM f GROUP BY 1),
r AS (
  SELECT c.*, CASE WHEN c.hashes IS NOT NULL AND c.input_length IS NOT NULL
                   THEN coalesce(k.stop - 1, len(c.hashes)) END AS reused,
    CASE WHEN jt <> 'OBJECT' OR ts_t NOT IN ('NULL', 'BIGINT', 'UBIGINT')
              OR in_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE') OR out_t NOT IN ('NULL', 'BIGINT', 'UBIGINT', 'DOUBLE')
              OR abs(n_in) > 9007199254740992 OR abs(n_out) > 9007199254740992
              OR (h_t = 'ARRAY' AND (hashes IS NULL OR hashes_text <> CAST(to_json(hashes) AS VARCHAR)))
              OR contains(line, '"timestamp_ms"') OR contains(line, '"prefix_blocks_reused"')
         THEN error('mooncake fast path: a record read another way') END AS odd,
    CAST(? AS TIMESTAMP) + to_microseconds(ts_ms * 1000) AS arrived
  FROM c LEFT JOIN k ON k._row = c._row)
SELECT _row, md5(s || ?) AS _hash,
  coalesce(odd, CASE WHEN epoch_us(arrived) % 1000000 = 0 THEN strftime(arrived, '%Y-%m-%d %H:%M:%S')
                     ELSE strftime(arrived, '%Y-%m-%d %H:%M:%S.%f') END) AS ts,
  ? AS tenant, ? AS model, input_length AS input_tokens, output_length AS output_tokens,
  CASE WHEN reused IS NOT NULL THEN least(input_length, 512 * reused) END AS cached_input_tokens,
  '{"timestamp_ms":' || coalesce(CAST(ts_j AS VARCHAR), 'null') || ',"prefix_blocks_reused":'
    || coalesce(CAST(reused AS VARCHAR), 'null')
    || CASE WHEN rest = '{}' THEN '}' ELSE ',' || rest[2:] END AS attrs
FROM (SELECT *, CASE WHEN h_t = 'ARRAY' AND json_keys(j) = ['timestamp', 'input_length', 'output_length', 'hash_ids']
                      THEN '{"hash_ids":' || hashes_text || '}'
                      ELSE CAST(json_merge_patch(j, '{"timestamp": null, "input_length": null, "output_length": null}')
                                AS VARCHAR) END AS rest FROM r)"""


def _read_mooncake(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    _need_model(p, options, "the Mooncake trace")
    if options.start is None:
        raise InputError("Mooncake timestamps are milliseconds from the trace's start: give the start "
                         "with --start ISO (e.g. --start 2025-01-01T00:00:00)", file=p.name)
    if options.tenant_field and options.tenant_field not in p.columns:
        raise InputError(f"--tenant-field {options.tenant_field}: the trace has no such field; its fields: "
                         f"{', '.join(p.columns)}", file=p.name, field=options.tenant_field)
    consts = f"|{options.model or ''}|{options.tenant or ''}".encode()
    if fast and not options.tenant_field and formats._plain_text(p):
        return Source(MOONCAKE_FAST_SQL, [str(p.path), options.start, consts.decode(), options.tenant, options.model],
                      fallback=lambda: _read_mooncake(con, p, options, fast=False))

    def rows():
        seen: set = set()
        with _open_text(p) as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON ({exc.msg})", file=p.name, row=lineno) from None
                # a line that is an array, a number, a string or null is no record
                rec = expect_object(rec, "a Mooncake request", file=p.name, row=lineno, field="timestamp")
                hashes = rec.get("hash_ids")
                if isinstance(hashes, list) and any(isinstance(h, (list, dict)) for h in hashes):
                    bad = next(h for h in hashes if isinstance(h, (list, dict)))
                    raise InputError(f"a block hash is a number, found {json_kind(bad)}", file=p.name, row=lineno,
                                     field="hash_ids")
                length = _int(rec.get("input_length"))
                cached, k = (prefix_cached_tokens(length, hashes, seen) if isinstance(hashes, list)
                             and length is not None else (None, None))
                offset = _num(rec.get("timestamp"))
                tenant = rec.get(options.tenant_field) if options.tenant_field else None
                attrs = {"timestamp_ms": rec.get("timestamp"), "prefix_blocks_reused": k,
                         **{f: v for f, v in rec.items() if f not in ("timestamp", "input_length", "output_length")}}
                yield {
                    "_row": lineno, "_hash": hashlib.md5(line.strip().encode() + consts).hexdigest(),
                    "ts": _mooncake_time(options.start, rec.get("timestamp"), offset),
                    "tenant": str(tenant) if tenant is not None else options.tenant, "model": options.model,
                    "input_tokens": length, "output_tokens": _int(rec.get("output_length")),
                    "cached_input_tokens": cached, "attrs": _json(attrs),
                }
    return _python_source(rows())


register(Adapter(
    name="mooncake", label="Mooncake trace (Kimi, FAST'25): relative times and prefix-block hashes",
    source_tool="Mooncake (kvcache-ai/Mooncake FAST25-release traces)",
    export_hint="the trace's JSON Lines as is, with --start ISO (times are ms from the start) and --model; "
                "cached_input_tokens = min(input_length, 512 x reused leading blocks)",
    sniff=_sniff_mooncake, read=_read_mooncake,
    example="tests/data/mooncake_conversation_head300.jsonl",
))

__all__ = ["head_keys", "iter_records", "langfuse_traces_path", "otlp_attrs", "otlp_value",
           "prefix_cached_tokens"]
