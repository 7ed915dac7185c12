"""Request-level exports of the providers and gateways themselves: OpenAI Batch output, Anthropic Message
Batches results, Helicone's request export and OpenRouter's generation stats.

Each is one :class:`~finops.ingest.base.Adapter`, recognised from the file's content. Each has a Python reading:
records stream a line (or a page) at a time into the canonical columns as text, so the loader checks every
value and names the row and field of a bad one (:data:`~finops.ingest.ecosystem.RAW_COLUMNS`). Uncompressed JSON
Lines and JSON arrays are read in SQL instead (a typed fast path for each format, ``*_fast_source``), which gives
the loader the same rows and hands the file to the Python reading wherever it cannot be sure to.

Detection scores (higher wins; a tie is refused with the candidates):

=================  =====  ==============================================================================
format             score  recognised by
=================  =====  ==============================================================================
openai-batch       0.99   JSON Lines with ``custom_id`` and ``response`` (``status_code``/``body``) or ``error``
                          (a Batch *input* file, ``custom_id`` + ``method`` + ``url``: 0.6, refused with advice)
anthropic-batch    0.99   JSON Lines with ``custom_id`` and ``result`` (``succeeded``/``errored``/...)
helicone           0.97   ``request_id``, ``request_created_at`` and ``response_status`` or ``delay_ms``
openrouter         0.97   ``total_cost`` with ``native_tokens_prompt`` or ``generation_time``
=================  =====  ==============================================================================

Token classes follow :mod:`finops.schema`: ``input_tokens`` counts cache reads and writes (Anthropic's
``input_tokens`` does not, so they are added), ``output_tokens`` counts reasoning.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime

from finops import sql
from finops.errors import InputError
from finops.ingest.base import (
    MAX_JSON_LINE_BYTES,
    Adapter,
    IngestOptions,
    Probe,
    Source,
    missing_id,
    register,
)
from finops.ingest.ecosystem import (
    ISO_TIME,
    RAW_COLUMNS,
    _count,
    _iso,
    _json,
    _num,
    _pick,
    _plain_json_lines,
    _python_source,
    _t,
    _text,
    _trim_sql,
    _utc,
    _whole,
    first_json_record,
    head_keys,
    iter_records,
    json_records_format,
    unpriced_zero,
)
from finops.ingest.tabular import _unpage

__all__ = ["anthropic_batch_row", "helicone_row", "openai_batch_row", "openrouter_row"]


def _d(v) -> dict:
    return v if isinstance(v, dict) else {}


def _out(row: int, fields: dict) -> dict:
    """A row for :data:`RAW_COLUMNS`: every value as text (the loader casts and checks it)."""
    return {"_row": row, **{k: None if v is None else str(v) for k, v in fields.items()}}


def _epoch_iso(v) -> str | None:
    """Unix seconds (OpenAI's ``created``) as naive UTC text; anything else as it came, for the loader."""
    n = _num(v)
    if n is None:
        return _text(v)
    return _iso(datetime.fromtimestamp(n, UTC).replace(tzinfo=None)) if 0 <= n < 1e11 else str(v)


def _sum_ints(*vals) -> int:
    return sum(v for v in vals if isinstance(v, int))


def _tenant(options: IngestOptions, default, *sources: dict):
    value = _pick(options.tenant_field, *sources) if options.tenant_field else default
    return str(value) if _text(value) is not None else options.tenant


def _cost(raw, tokens: int, attrs: dict, free: bool = False):
    """The source's recorded cost; 0 on a call with tokens is "unpriced by the source" (NULL, kept in attrs)."""
    cost = _num(raw)
    if cost is None:
        return _text(raw)           # not a number: the loader rejects it, naming cost_usd
    if unpriced_zero(cost, tokens, free):
        attrs["source_cost_usd"] = cost
        return None
    return cost


def _start_utc(options: IngestOptions) -> datetime | None:
    """--start as the loader reads the Python path's text of it (an offset converted to UTC, no zone kept),
    bound as a TIMESTAMP for a typed fast path's ``ts``."""
    t = options.start
    return t.astimezone(UTC).replace(tzinfo=None) if t is not None and t.tzinfo is not None else t


# ---------------------------------------------------------------- openai-batch

OPENAI_BATCH_MAPPED = {"id", "custom_id", "response", "error"}


def _sniff_openai_batch(p: Probe) -> float:
    if p.kind != "jsonl":
        return 0.0
    cols = set(p.columns)
    if "custom_id" in cols and ("response" in cols or "error" in cols) and "result" not in cols:
        return 0.99
    if {"custom_id", "method", "url", "body"} <= cols:
        return 0.6          # the Batch input file: refused with advice in the reader
    return 0.0


def _openai_usage(usage: dict) -> dict:
    """Token classes of an OpenAI usage object: Chat Completions (``prompt_tokens``...) or Responses
    (``input_tokens``...), by which of the two has a value (a chat usage may carry ``"input_tokens": null``).
    Both count cached tokens in the prompt and reasoning in the output."""
    if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
        pdet, cdet = _d(usage.get("input_tokens_details")), _d(usage.get("output_tokens_details"))
        prompt, completion = usage.get("input_tokens"), usage.get("output_tokens")
    else:
        pdet, cdet = _d(usage.get("prompt_tokens_details")), _d(usage.get("completion_tokens_details"))
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if completion is None and prompt is not None:
            completion = 0          # an embedding's usage: prompt and total only
    return {"input_tokens": _count(prompt), "output_tokens": _count(completion),
            "cached_input_tokens": _count(pdet.get("cached_tokens")),
            "reasoning_tokens": _count(cdet.get("reasoning_tokens"))}


def _status_code(v):
    """An HTTP status as :func:`_count` reads it, a whole number past 2**53 in its digits (``_count`` gives that
    as a float: the error type read 'http_-9.223372036854776e+18' where the SQL reading writes the digits)."""
    code = _count(v)
    return int(code) if isinstance(code, float) and code.is_integer() else code


def openai_batch_row(row: int, rec: dict, options: IngestOptions, name: str = "") -> dict:
    """One line of an OpenAI Batch output file as canonical fields (text)."""
    if not isinstance(rec, dict) or "custom_id" not in rec or not ("response" in rec or "error" in rec):
        raise InputError("expected a Batch output line (custom_id with response or error)", file=name, row=row,
                         field="response")
    response = rec.get("response")
    if response is not None and not isinstance(response, dict):
        raise InputError("response is not an object", file=name, row=row, field="response")
    response = _d(response)
    body = response.get("body")
    if body is not None and not isinstance(body, dict):
        raise InputError("response.body is not an object", file=name, row=row, field="response.body")
    body = _d(body)
    code = _status_code(response.get("status_code"))
    failure = _d(rec.get("error")) or _d(body.get("error"))
    ok = not failure and (code is None or (isinstance(code, int) and 200 <= code < 300))
    tokens = _openai_usage(_d(body.get("usage"))) if ok else {}
    created = body.get("created", body.get("created_at"))
    attrs = {"custom_id": rec.get("custom_id"), "status_code": code,
             "upstream_request_id": response.get("request_id"), "object": body.get("object"),
             "body_id": body.get("id"), "body_service_tier": body.get("service_tier"),
             "finish_reason": _d((body.get("choices") or [{}])[0]).get("finish_reason")
             if isinstance(body.get("choices"), list) and body["choices"] else None,
             "error_message": failure.get("message") if failure else None}
    return _out(row, {
        "request_id": _text(rec.get("id")),
        "ts": _epoch_iso(created) if created is not None else (_iso(options.start) if options.start else None),
        "tenant": _tenant(options, None, rec, body),
        "model": _text(body.get("model")) or options.model, "provider": "openai", "service_tier": "batch",
        **tokens,
        "status": "ok" if ok else "error",
        "error_type": None if ok else (_text(failure.get("code")) or _text(failure.get("type"))
                                       or (f"http_{code}" if code is not None else "error")),
        "attrs": _json({k: v for k, v in attrs.items() if v is not None}),
    })


def _one_row_per_record(to_row: Callable[[int, dict, IngestOptions, str], dict]):
    """An adapter's ``read`` that turns each record of the file into one canonical row with ``to_row``."""
    def read(con, p: Probe, options: IngestOptions) -> Source:
        rows = (to_row(row, rec, options, p.name) for row, rec in iter_records(p))
        return _python_source(rows, columns=RAW_COLUMNS)
    return read


def _sql_object(exprs: dict[str, str]) -> str:
    """A JSON object of the ``{key: SQL expression}`` pairs whose value is not NULL, in their order, as text: what
    ``json_merge_patch('{}', json_object(key, value, ...))`` writes for values that are text, numbers or objects
    without nulls, written by one concat (each value by ``to_json``) instead of an object built, written, parsed
    and written again. The keys are names of ours (:func:`finops.sql.string_literal`), never a file's."""
    pieces = [f"CASE WHEN ({expr}) IS NOT NULL THEN concat({sql.string_literal(json.dumps(key) + ':')}, "
              f"CAST(to_json({expr}) AS VARCHAR)) END" for key, expr in exprs.items()]
    return f"concat('{{', concat_ws(',', {', '.join(pieces)}), '}}')"


def _json_text_sql(x: str, kind: str) -> str:
    """A field's JSON text (``x``, NULL for JSON null) as the Python path's ``str`` of its value, or error() where
    the SQL cannot be sure to give it: ``name``, a string's text only; ``text``, a string's text or a number's;
    ``number``, a number's or a string's of printable ASCII (``float()`` reads digits beyond ASCII, DuckDB does
    not). A number is spelt as Python spells it: an integer's digits as the file has them, a fraction's ``repr``
    of its float (DuckDB writes a DOUBLE as Python's ``repr`` does; its JSON writer spells a fraction its own
    way). True, false, an object or an array calls error() (``str`` writes ``True`` or a dict's repr)."""
    string = f"ascii({x}) = 34"
    if kind == "number":
        string += f" AND NOT regexp_matches({x}, '[^\\x20-\\x7e]')"
    if kind == "name":
        return (f"CASE WHEN {x} IS NULL THEN NULL WHEN {string} THEN json_extract_string({x}, '$') "
                "ELSE error('fast path: a name that is not text') END")
    # a JSON number opens with a digit, or a minus and a digit (DuckDB's reader also takes -Infinity and NaN,
    # which Python writes -inf and nan); a fraction or an exponent has a point or an e
    return (f"CASE WHEN {x} IS NULL THEN NULL WHEN {string} THEN json_extract_string({x}, '$') "
            f"WHEN NOT regexp_matches({x}, '^-?[0-9]') "
            "THEN error('fast path: a value that is not a number or plain text') "
            f"WHEN contains({x}, '.') OR contains({x}, 'e') OR contains({x}, 'E') "
            f"THEN CAST(TRY_CAST({x} AS DOUBLE) AS VARCHAR) "
            f"ELSE CAST({x} AS VARCHAR) END")


def _count_sql(x: str) -> str:
    """A count read as text (``x``: DuckDB's typed JSON reader writes a number as the file spells it, true as
    'true') as the DOUBLE the Python path's ``_count`` reads, NULL for null; error() for anything else (true or
    false, which a DOUBLE column read as 1 or 0 where the Python path rejects the row; text that is no number;
    NaN), and the Python path reads the file."""
    d = f"TRY_CAST({x} AS DOUBLE)"     # NULL for any text with a character past ASCII, as _num reads it
    return f"CASE WHEN {x} IS NULL THEN NULL WHEN isfinite({d}) THEN {d} ELSE error('batch fast path: a count that is not a number') END"


# The typed fast path of openai-batch: every field it reads, with its type, so DuckDB parses each line in C++
# straight into the canonical columns (no per-line Python). The counts are read as text (a DOUBLE column reads
# true as 1), then as numbers by _count_sql and checked whole, as the Python path's _count does.
_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens")
_USAGE_DETAILS = {"prompt_tokens_details": "cached_tokens", "completion_tokens_details": "reasoning_tokens",
                  "input_tokens_details": "cached_tokens", "output_tokens_details": "reasoning_tokens"}
_USAGE_TYPE = ("STRUCT(" + ", ".join([f"{n} VARCHAR" for n in _USAGE_COUNTS]
                                     + [f"{n} STRUCT({c} VARCHAR)" for n, c in _USAGE_DETAILS.items()]) + ")")


def _usage_sql(x: str) -> str:
    """The usage struct ``x`` (its counts text) with its counts as numbers (:func:`_count_sql`)."""
    return ("struct_pack(" + ", ".join([f"{n} := {_count_sql(f'{x}.{n}')}" for n in _USAGE_COUNTS]
                                       + [f"{n} := struct_pack({c} := {_count_sql(f'{x}.{n}.{c}')})"
                                          for n, c in _USAGE_DETAILS.items()]) + ")")


# The names and the values attrs keeps are read as JSON: attrs keeps a value of any type as the Python path does
# (a custom_id of 0.0 stays a number), and a name is Python's str() of a text or a number (_json_text_sql)
_ERROR_TYPE = "STRUCT(code JSON, type JSON, message JSON)"
OPENAI_BATCH_TYPES = {
    "id": "JSON", "custom_id": "JSON", "error": _ERROR_TYPE,
    "response": ("STRUCT(status_code DOUBLE, request_id JSON, body STRUCT(id JSON, object JSON, "
                 "created DOUBLE, created_at DOUBLE, model JSON, service_tier JSON, "
                 f"choices STRUCT(finish_reason JSON)[], usage {_USAGE_TYPE}, error {_ERROR_TYPE}))"),
}
# The rules of openai_batch_row and _read_openai_batch's neighbouring-line time, in SQL. A line the SQL cannot
# be sure to read as the Python path does calls error(), and the loader falls back to the Python path: no
# custom_id, or neither response nor error; no id (the Python path hashes such a row); an error object whose
# code, type and message are all empty (an empty object is no failure, any other is one); a count or status
# that is not a whole number; a created time outside Unix seconds. Parameters: the path, the types, --start
# (a naive UTC TIMESTAMP or NULL: _start_utc), --tenant, --model.
# The time and the counts leave it typed (TIMESTAMP, BIGINT): the values the loader reads from the Python path's
# text, without writing and parsing text twice. Every output column is computed before the neighbouring-line
# window (``rows``), so the window carries those narrow columns instead of each line's parsed structs; the
# ``ts_from`` note (the last key of attrs) is added after it.
OPENAI_BATCH_FAST_SQL = r"""
WITH texts AS (
  SELECT ordinality AS _row, id, custom_id, response, error AS line_error, response.body AS body,
         __USAGE__ AS u, response.status_code AS code, __ID_TEXT__ AS id_x, __MODEL_TEXT__ AS model_x
  FROM read_json(?, format = 'newline_delimited', compression = 'none', columns = ?) WITH ORDINALITY
), lines AS (
  SELECT *, __ID__ AS id_t, __MODEL__ AS model_t
  FROM texts
), checked AS (
  SELECT *,
    CASE WHEN custom_id IS NULL OR (response IS NULL AND line_error IS NULL)
           THEN error('openai-batch fast path: a line without custom_id, response or error')
         WHEN nullif(id_t, '') IS NULL OR id_t IN ('None', 'null', 'NULL')
           THEN error('openai-batch fast path: a line without an id')
         WHEN (line_error IS NOT NULL AND line_error.code IS NULL AND line_error.type IS NULL
               AND line_error.message IS NULL)
              OR (body.error IS NOT NULL AND body.error.code IS NULL AND body.error.type IS NULL
                  AND body.error.message IS NULL)
           THEN error('openai-batch fast path: an error object with no code, type or message')
         WHEN code <> floor(code) OR u.prompt_tokens <> floor(u.prompt_tokens)
              OR u.completion_tokens <> floor(u.completion_tokens) OR u.input_tokens <> floor(u.input_tokens)
              OR u.output_tokens <> floor(u.output_tokens)
              OR u.prompt_tokens_details.cached_tokens <> floor(u.prompt_tokens_details.cached_tokens)
              OR u.input_tokens_details.cached_tokens <> floor(u.input_tokens_details.cached_tokens)
              OR u.completion_tokens_details.reasoning_tokens <> floor(u.completion_tokens_details.reasoning_tokens)
              OR u.output_tokens_details.reasoning_tokens <> floor(u.output_tokens_details.reasoning_tokens)
           THEN error('openai-batch fast path: a count that is not a whole number')
         WHEN coalesce(body.created, body.created_at) < 0 OR coalesce(body.created, body.created_at) >= 1e11
           THEN error('openai-batch fast path: a created time that is not Unix seconds')
    END AS _check,
    CASE WHEN line_error IS NOT NULL THEN line_error ELSE body.error END AS failure,
    u.input_tokens IS NOT NULL OR u.output_tokens IS NOT NULL AS responses_api
  FROM lines
), classed AS (
  SELECT *, failure IS NULL AND (code IS NULL OR (code >= 200 AND code < 300)) AS ok,
    CASE WHEN coalesce(body.created, body.created_at) IS NOT NULL
           THEN make_timestamp(CAST(round(coalesce(body.created, body.created_at) * 1e6) AS BIGINT))
         ELSE CAST(? AS TIMESTAMP) END AS own_ts
  FROM checked
), rows AS (
  SELECT coalesce(CAST(_check AS BIGINT), _row) AS _row, own_ts, id_t AS request_id, CAST(? AS VARCHAR) AS tenant,
  coalesce(CASE WHEN model_t NOT IN ('', 'None', 'null', 'NULL') THEN model_t END, CAST(? AS VARCHAR)) AS model,
  CASE WHEN ok THEN CAST(CASE WHEN responses_api THEN u.input_tokens ELSE u.prompt_tokens END AS BIGINT)
       END AS input_tokens,
  CASE WHEN ok THEN CAST(CASE WHEN responses_api THEN u.output_tokens
                              ELSE coalesce(u.completion_tokens, CASE WHEN u.prompt_tokens IS NOT NULL THEN 0 END)
                         END AS BIGINT) END AS output_tokens,
  CASE WHEN ok THEN CAST(CASE WHEN responses_api THEN u.input_tokens_details.cached_tokens
                              ELSE u.prompt_tokens_details.cached_tokens END AS BIGINT)
       END AS cached_input_tokens,
  CASE WHEN ok THEN 'ok' ELSE 'error' END AS status,
  CASE WHEN NOT ok THEN coalesce(
    __FAILURE_CODE__, __FAILURE_TYPE__,
    'http_' || CAST(CAST(code AS BIGINT) AS VARCHAR), 'error') END AS error_type,
  __ATTRS__ AS attrs,
  CASE WHEN ok THEN CAST(CASE WHEN responses_api THEN u.output_tokens_details.reasoning_tokens
                              ELSE u.completion_tokens_details.reasoning_tokens END AS BIGINT)
       END AS reasoning_tokens
  FROM classed
), timed AS (
  SELECT *, coalesce(own_ts,
                     last_value(own_ts IGNORE NULLS) OVER (ORDER BY _row ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                     first_value(own_ts IGNORE NULLS) OVER ()) AS ts_any
  FROM rows
)
SELECT _row, CAST(NULL AS VARCHAR) AS _hash, request_id, ts_any AS ts, tenant, model,
  CAST(NULL AS VARCHAR) AS cache_hit, input_tokens, output_tokens, cached_input_tokens,
  CAST(NULL AS VARCHAR) AS queue_ms, CAST(NULL AS VARCHAR) AS ttft_ms, CAST(NULL AS VARCHAR) AS total_ms,
  status, error_type, CAST(NULL AS VARCHAR) AS cost_usd,
  CASE WHEN own_ts IS NULL AND ts_any IS NOT NULL
       THEN CASE WHEN attrs = '{}' THEN '{' || substr(__TS_FROM__, 2) ELSE substr(attrs, 1, length(attrs) - 1) || __TS_FROM__ END
       ELSE attrs END AS attrs,
  'openai' AS provider, 'batch' AS service_tier,
  CAST(NULL AS VARCHAR) AS cache_write_tokens, CAST(NULL AS VARCHAR) AS cache_write_1h_tokens, reasoning_tokens
FROM timed""".replace("__USAGE__", _usage_sql("response.body.usage")).replace(
    "__ID_TEXT__", _json_text_sql("id", "text")).replace("__ID__", _trim_sql("id_x")).replace(
    "__MODEL_TEXT__", _json_text_sql("response.body.model", "text")).replace("__MODEL__", _trim_sql("model_x")).replace(
    "__FAILURE_CODE__", _t(_json_text_sql("failure.code", "text"))).replace(
    "__FAILURE_TYPE__", _t(_json_text_sql("failure.type", "text"))).replace(
    "__ATTRS__", _sql_object({
    "custom_id": "custom_id", "status_code": "CAST(code AS BIGINT)", "upstream_request_id": "response.request_id",
    "object": "body.object", "body_id": "body.id", "body_service_tier": "body.service_tier",
    "finish_reason": "body.choices[1].finish_reason", "error_message": "failure.message"})).replace(
    # attrs' last pair where the time is a neighbouring line's (as _timed writes it), with the closing brace
    "__TS_FROM__", sql.string_literal(
        ',' + json.dumps("ts_from") + ':' + json.dumps("a neighbouring line (the request's own line carries no time)")
        + '}'))
_plain_lines = _plain_json_lines      # one reading of the rule for every JSON Lines fast path (finops.ingest.ecosystem)


_NEIGHBOURS = OPENAI_BATCH_FAST_SQL[OPENAI_BATCH_FAST_SQL.index("), timed AS ("):
                                   OPENAI_BATCH_FAST_SQL.index("\nSELECT _row, CAST(NULL")]
# every line with a time of its own (or --start): no window over the lines in their order, so the file is read on
# every thread and numbered once staged (Source.unnumbered_sql); a line without one calls error(), and the file
# is read again with the window (OPENAI_BATCH_FAST_SQL). A batch's output file has a time on every line (its
# failed requests go to the error file, whose lines have none: a small file, read twice)
_OWN_TIMES = ("), timed AS (\n  SELECT *, CASE WHEN own_ts IS NULL THEN error('openai-batch fast path: a line "
              "without a time of its own') ELSE own_ts END AS ts_any\n  FROM rows\n)")
OPENAI_BATCH_OWN_TIMES_SQL = OPENAI_BATCH_FAST_SQL.replace(_NEIGHBOURS, _OWN_TIMES)
OPENAI_BATCH_UNNUMBERED_SQL = OPENAI_BATCH_OWN_TIMES_SQL.replace("SELECT ordinality AS _row,", "SELECT CAST(NULL AS BIGINT) AS _row,").replace(
    ") WITH ORDINALITY\n), lines AS", ")\n), lines AS")


def openai_batch_fast_source(p: Probe, options: IngestOptions,
                             then: Callable[[], Source] | None = None) -> Source | None:
    """The typed reading of an OpenAI Batch output file (:data:`OPENAI_BATCH_FAST_SQL`), or None where it does
    not apply (``--tenant-field``, a compressed file or one with blank lines: the Python path reads those).
    First without the neighbouring lines' times (:data:`OPENAI_BATCH_OWN_TIMES_SQL`), then with them, then
    ``then`` (the Python path)."""
    if p.kind != "jsonl" or options.tenant_field or not _plain_lines(p):
        return None
    params = [str(p.path), OPENAI_BATCH_TYPES, _start_utc(options), options.tenant, options.model]
    return Source(OPENAI_BATCH_OWN_TIMES_SQL, params, has_ids=True, unnumbered_sql=OPENAI_BATCH_UNNUMBERED_SQL,
                  fallback=lambda: Source(OPENAI_BATCH_FAST_SQL, params, has_ids=True, fallback=then))


def _read_openai_batch(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """The typed fast path where it applies (:func:`openai_batch_fast_source`), the Python path behind it as
    the fallback for a line it cannot take; ``fast=False``: the Python path only."""
    if {"method", "url", "body"} <= set(p.columns) and "response" not in p.columns:
        raise InputError("this is an OpenAI Batch input file (the requests): load the batch's output file "
                         "(output_file_id, and error_file_id for failed requests) instead", file=p.name)
    src = openai_batch_fast_source(p, options, then=lambda: _read_openai_batch(con, p, options, fast=False)) \
        if fast else None
    if src is not None:
        return src

    def rows():
        # a failed request's line and an embedding's body carry no time: such a line takes --start, else
        # the time of the nearest line before it that has one (the first ones: the first timed line's),
        # noted in attrs.ts_from; all lines of a batch ran within its 24-hour window
        waiting: list[dict] = []
        last = None
        for row, rec in iter_records(p):
            out = openai_batch_row(row, rec, options, p.name)
            if out["ts"] is None:
                if last is None:
                    waiting.append(out)
                    continue
                out = _timed(out, last)
            else:
                last = out["ts"]
                for early in waiting:
                    yield _timed(early, last)
                waiting = []
            yield out
        yield from waiting
    return _python_source(rows(), columns=RAW_COLUMNS)


def _timed(out: dict, ts: str) -> dict:
    attrs = json.loads(out["attrs"])
    attrs["ts_from"] = "a neighbouring line (the request's own line carries no time)"
    return {**out, "ts": ts, "attrs": _json(attrs)}


register(Adapter(
    name="openai-batch", label="OpenAI Batch API output (and error) file",
    source_tool="OpenAI Batch API",
    export_hint="download the batch's output_file_id (and error_file_id) with GET /v1/files/{id}/content: one "
                "JSON line per request (custom_id, response.status_code, response.body with its usage); "
                "service tier batch; a failed request has no time or model: give --start and --model to keep it",
    sniff=_sniff_openai_batch, read=_read_openai_batch,
    example="tests/data/providers/openai_batch_output.jsonl",
))


# ---------------------------------------------------------------- anthropic-batch

# a result that was never run, by its type: the canonical status and error type
ANTHROPIC_NOT_RUN = {"canceled": ("rejected", "canceled"), "expired": ("timeout", "expired")}


def _sniff_anthropic_batch(p: Probe) -> float:
    if p.kind != "jsonl":
        return 0.0
    return 0.99 if {"custom_id", "result"} <= set(p.columns) else 0.0


def anthropic_tokens(usage: dict) -> dict:
    """Canonical token classes of an Anthropic ``usage`` object.

    Anthropic's ``input_tokens`` excludes cache reads and writes, so ``input_tokens = input_tokens +
    cache_read_input_tokens + cache_creation_input_tokens``; the writes split into 5-minute and 1-hour
    by ``cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens`` (all 5-minute
    without that split).

    >>> t = anthropic_tokens({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100,
    ...                       "cache_creation_input_tokens": 30, "cache_creation": {
    ...                           "ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 10}})
    >>> t["input_tokens"], t["cached_input_tokens"], t["cache_write_tokens"], t["cache_write_1h_tokens"]
    (140, 100, 20, 10)
    """
    base = _count(usage.get("input_tokens"))
    read, creation = _count(usage.get("cache_read_input_tokens")), _count(usage.get("cache_creation_input_tokens"))
    split = _d(usage.get("cache_creation"))
    w5, w1h = _count(split.get("ephemeral_5m_input_tokens")), _count(split.get("ephemeral_1h_input_tokens"))
    if creation is None and (isinstance(w5, int) or isinstance(w1h, int)):
        creation = _sum_ints(w5, w1h)
    if isinstance(creation, int):
        # the count of writes is the total; the split says how much of it has the 1-hour TTL
        w5 = max(creation - (w1h if isinstance(w1h, int) else 0), 0)
    total = base + _sum_ints(read, creation) if isinstance(base, int) else base
    return {"input_tokens": total, "output_tokens": _count(usage.get("output_tokens")),
            "cached_input_tokens": read, "cache_write_tokens": w5, "cache_write_1h_tokens": w1h}


def anthropic_batch_row(row: int, rec: dict, options: IngestOptions, name: str = "") -> dict:
    """One line of a Message Batches results file as canonical fields (text)."""
    result = rec.get("result") if isinstance(rec, dict) else None
    if not isinstance(result, dict) or not result.get("type"):
        raise InputError("expected a Message Batches result line (custom_id, result.type)", file=name, row=row,
                         field="result")
    kind = str(result["type"])
    message = _d(result.get("message"))
    usage = _d(message.get("usage"))
    attrs = {"custom_id": rec.get("custom_id"), "result_type": kind, "stop_reason": message.get("stop_reason"),
             "usage_service_tier": usage.get("service_tier")}
    status, error_type = "ok", None
    if kind == "errored":
        inner = _d(_d(result.get("error")).get("error")) or _d(result.get("error"))
        status, error_type = "error", _text(inner.get("type")) or "error"
        attrs["error_message"] = inner.get("message")
    elif kind in ANTHROPIC_NOT_RUN:
        status, error_type = ANTHROPIC_NOT_RUN[kind]
    elif kind != "succeeded":
        raise InputError(f"result.type {kind!r} is not succeeded, errored, canceled or expired", file=name,
                         row=row, field="result.type")
    server = _d(usage.get("server_tool_use"))
    if server:
        attrs["server_tool_use"] = server
    return _out(row, {
        "request_id": _text(message.get("id")),
        "ts": _iso(options.start) if options.start else None,
        "tenant": _tenant(options, None, rec, message),
        "model": _text(message.get("model")) or options.model, "provider": "anthropic", "service_tier": "batch",
        **(anthropic_tokens(usage) if kind == "succeeded" else {}),
        "status": status, "error_type": error_type,
        "attrs": _json({k: v for k, v in attrs.items() if v is not None}),
    })


# The typed fast path of anthropic-batch, for a file whose every result succeeded (a result that did not run
# has no message id, and the Python path hashes its line): anthropic_batch_row and anthropic_tokens in SQL.
# A line it cannot be sure to read the same way calls error() and the Python path reads the file: a result
# that is not ``succeeded``, no message id, a count that is not a whole number. Parameters: the path, the
# types, --start (a naive UTC TIMESTAMP: _start_utc), --tenant, --model. The time and the counts leave it typed
# (TIMESTAMP, BIGINT), the values the loader reads from the Python path's text.
ANTHROPIC_BATCH_TYPES = {       # names and the values attrs keeps as JSON, as OPENAI_BATCH_TYPES
    "custom_id": "JSON",
    "result": ("STRUCT(type VARCHAR, message STRUCT(id JSON, model JSON, stop_reason JSON, "
               "usage STRUCT(input_tokens VARCHAR, output_tokens VARCHAR, cache_read_input_tokens VARCHAR, "
               "cache_creation_input_tokens VARCHAR, cache_creation STRUCT(ephemeral_5m_input_tokens VARCHAR, "
               "ephemeral_1h_input_tokens VARCHAR), service_tier JSON, server_tool_use JSON)))"),
}
#: the counts as numbers (_count_sql), the rest of the usage as it came
_ANTHROPIC_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
_ANTHROPIC_SPLIT = ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
_ANTHROPIC_USAGE = ("struct_pack(" + ", ".join([f"{n} := {_count_sql(f'result.message.usage.{n}')}"
                                               for n in _ANTHROPIC_COUNTS])
                    + ", cache_creation := struct_pack(" + ", ".join(
                        [f"{n} := {_count_sql(f'result.message.usage.cache_creation.{n}')}" for n in _ANTHROPIC_SPLIT])
                    + "), service_tier := result.message.usage.service_tier, "
                      "server_tool_use := result.message.usage.server_tool_use)")
ANTHROPIC_BATCH_FAST_SQL = r"""
WITH lines AS (
  SELECT ordinality AS _row, custom_id, result.type AS kind, result.message AS m, __USAGE__ AS u,
         __ID__ AS id_t, __MODEL__ AS model_t
  FROM read_json(?, format = 'newline_delimited', compression = 'none', columns = ?) WITH ORDINALITY
), counted AS (
  SELECT *, u.cache_creation AS split FROM lines
), checked AS (
  SELECT *,
    CASE WHEN kind IS DISTINCT FROM 'succeeded'
           THEN error('anthropic-batch fast path: a result that did not succeed')
         WHEN nullif(id_t, '') IS NULL OR id_t IN ('None', 'null', 'NULL')
           THEN error('anthropic-batch fast path: a message without an id')
         WHEN u.input_tokens <> floor(u.input_tokens) OR u.output_tokens <> floor(u.output_tokens)
              OR u.cache_read_input_tokens <> floor(u.cache_read_input_tokens)
              OR u.cache_creation_input_tokens <> floor(u.cache_creation_input_tokens)
              OR split.ephemeral_5m_input_tokens <> floor(split.ephemeral_5m_input_tokens)
              OR split.ephemeral_1h_input_tokens <> floor(split.ephemeral_1h_input_tokens)
           THEN error('anthropic-batch fast path: a count that is not a whole number')
    END AS _check,
    coalesce(u.cache_creation_input_tokens,
             CASE WHEN split.ephemeral_5m_input_tokens IS NOT NULL OR split.ephemeral_1h_input_tokens IS NOT NULL
                  THEN coalesce(split.ephemeral_5m_input_tokens, 0) + coalesce(split.ephemeral_1h_input_tokens, 0)
             END) AS creation
  FROM counted
)
SELECT coalesce(CAST(_check AS BIGINT), _row) AS _row, CAST(NULL AS VARCHAR) AS _hash,
  id_t AS request_id, CAST(? AS TIMESTAMP) AS ts, CAST(? AS VARCHAR) AS tenant,
  coalesce(CASE WHEN model_t NOT IN ('', 'None', 'null', 'NULL') THEN model_t END, CAST(? AS VARCHAR)) AS model,
  CAST(NULL AS VARCHAR) AS cache_hit,
  CAST(u.input_tokens + coalesce(u.cache_read_input_tokens, 0) + coalesce(creation, 0) AS BIGINT) AS input_tokens,
  CAST(u.output_tokens AS BIGINT) AS output_tokens, CAST(u.cache_read_input_tokens AS BIGINT) AS cached_input_tokens,
  CAST(NULL AS VARCHAR) AS queue_ms, CAST(NULL AS VARCHAR) AS ttft_ms, CAST(NULL AS VARCHAR) AS total_ms,
  'ok' AS status, CAST(NULL AS VARCHAR) AS error_type, CAST(NULL AS VARCHAR) AS cost_usd,
  __ATTRS__ AS attrs,
  'anthropic' AS provider, 'batch' AS service_tier,
  CAST(CASE WHEN creation IS NOT NULL
            THEN greatest(creation - coalesce(split.ephemeral_1h_input_tokens, 0), 0)
            ELSE split.ephemeral_5m_input_tokens END AS BIGINT) AS cache_write_tokens,
  CAST(split.ephemeral_1h_input_tokens AS BIGINT) AS cache_write_1h_tokens,
  CAST(NULL AS VARCHAR) AS reasoning_tokens
FROM checked""".replace("__USAGE__", _ANTHROPIC_USAGE).replace(
    "__ID__", _trim_sql(_json_text_sql("result.message.id", "text"))).replace(
    "__MODEL__", _trim_sql(_json_text_sql("result.message.model", "text"))).replace("__ATTRS__", _sql_object({
    "custom_id": "custom_id", "result_type": "kind", "stop_reason": "m.stop_reason",
    "usage_service_tier": "u.service_tier",
    # kept as the file has it, nulls inside included, as the Python reading keeps it (json_merge_patch dropped
    # them: {"web_search_requests": null} was {} by SQL and itself by Python); an empty object is left out
    "server_tool_use": "CASE WHEN u.server_tool_use IS NOT NULL AND json_type(u.server_tool_use) = 'OBJECT' "
                       "AND json(u.server_tool_use) <> '{}' THEN json(u.server_tool_use) END"}))


def anthropic_batch_fast_source(p: Probe, options: IngestOptions) -> Source | None:
    """The typed reading of a Message Batches results file (:data:`ANTHROPIC_BATCH_FAST_SQL`), or None where it
    does not apply (``--tenant-field``, a compressed file or one with blank lines)."""
    if p.kind != "jsonl" or options.tenant_field or options.start is None or not _plain_lines(p):
        return None
    return Source(ANTHROPIC_BATCH_FAST_SQL, [str(p.path), ANTHROPIC_BATCH_TYPES, _start_utc(options), options.tenant,
                                            options.model], has_ids=True)


def _read_anthropic_batch(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """The typed fast path where it applies (:func:`anthropic_batch_fast_source`), the Python path behind it."""
    if options.start is None:
        raise InputError("Message Batches results carry no times: give the batch's ended_at (or created_at) "
                         "with --start ISO (GET /v1/messages/batches/{id} shows both)", file=p.name)
    src = anthropic_batch_fast_source(p, options) if fast else None
    if src is not None:
        src.fallback = lambda: _read_anthropic_batch(con, p, options, fast=False)
        return src
    consts = f"|{options.start.isoformat()}|{options.model or ''}|{options.tenant or ''}"

    def rows():
        for row, rec in iter_records(p):
            out = anthropic_batch_row(row, rec, options, p.name)
            if missing_id(out["request_id"]):
                # a result that was not served has no message id: the batch's custom_id, with the start
                out["_hash"] = hashlib.md5((_json(rec) + consts).encode()).hexdigest()
            yield out
    return _python_source(rows(), columns=RAW_COLUMNS)


register(Adapter(
    name="anthropic-batch", label="Anthropic Message Batches results (JSON Lines)",
    source_tool="Anthropic Message Batches API",
    export_hint="GET /v1/messages/batches/{id}/results (the results_url): one JSON line per request; give "
                "the batch's ended_at with --start (results carry no times); service tier batch",
    sniff=_sniff_anthropic_batch, read=_read_anthropic_batch,
    example="tests/data/providers/anthropic_batch_results.jsonl",
))


# ---------------------------------------------------------------- helicone

HELICONE_MAPPED = {"request_id", "request_created_at", "delay_ms", "time_to_first_token", "model", "provider",
                   "prompt_tokens", "completion_tokens", "prompt_cache_read_tokens", "prompt_cache_write_tokens",
                   "costUSD", "cost", "response_status", "request_user_id", "request_body", "response_body",
                   "signed_body_url"}
HELICONE_NO_CACHE = ("", "00000000-0000-0000-0000-000000000000")


def _sniff_helicone(p: Probe) -> float:
    if p.kind not in ("json", "jsonl"):
        return 0.0
    keys = head_keys(p)
    if {"request_id", "request_created_at"} <= keys and keys & {"response_status", "delay_ms"}:
        return 0.97
    return 0.0


def helicone_row(row: int, rec: dict, options: IngestOptions, name: str = "") -> dict:
    """One ``HeliconeRequest`` (an element of ``POST /v1/request/query``'s ``data``) as canonical fields.

    Helicone's ``prompt_tokens`` excludes the cache reads and writes for every provider, so they are added:
    Anthropic's ``input_tokens`` never count them (``AnthropicBodyProcessor``), and for OpenAI Helicone
    subtracts ``cached_tokens`` (and audio tokens, which it does not export) from ``prompt_tokens``, keeping them
    as ``prompt_cache_read_tokens`` (``OpenAIBodyProcessor.getUsage``, Helicone/helicone
    valhalla/jawn/src/lib/shared/bodyProcessors/openaiBodyProcessor.ts at 8f8667da). Older versions
    (``GenericBodyProcessor``) kept OpenAI's ``prompt_tokens`` whole and wrote no cache reads: the sum is
    the same rule for both.
    """
    if not isinstance(rec, dict) or "request_id" not in rec:
        raise InputError("expected a Helicone request (an object with request_id)", file=name, row=row,
                         field="request_id")
    provider = _text(rec.get("provider"))
    prompt, completion = _count(rec.get("prompt_tokens")), _count(rec.get("completion_tokens"))
    read, write = _count(rec.get("prompt_cache_read_tokens")), _count(rec.get("prompt_cache_write_tokens"))
    if isinstance(prompt, int):
        prompt += _sum_ints(read, write)
    code = _status_code(rec.get("response_status"))
    ok = code is None or (isinstance(code, int) and 200 <= code < 300)
    cache_ref = _text(rec.get("cache_reference_id"))
    hit = cache_ref is not None and cache_ref not in HELICONE_NO_CACHE
    attrs = {k: v for k, v in rec.items() if k not in HELICONE_MAPPED}
    raw_cost = rec.get("costUSD", rec.get("cost"))
    cost = _cost(raw_cost, _sum_ints(prompt, completion), attrs, free=hit) if raw_cost is not None else None
    properties = _d(rec.get("properties")) or _d(rec.get("request_properties"))
    return _out(row, {
        "request_id": _text(rec.get("request_id")), "ts": _utc(rec.get("request_created_at")),
        "tenant": _tenant(options, rec.get("request_user_id"), rec, properties),
        "model": _text(rec.get("model")) or _text(rec.get("response_model")) or _text(rec.get("request_model"))
        or options.model,
        "provider": provider.lower() if provider else None, "cache_hit": "true" if hit else "false",
        "input_tokens": prompt, "output_tokens": completion, "cached_input_tokens": read,
        "cache_write_tokens": write,
        "ttft_ms": rec.get("time_to_first_token"),
        "total_ms": rec.get("delay_ms"),
        "status": "ok" if ok else "error", "error_type": None if ok else f"http_{code}",
        "cost_usd": cost, "attrs": _json(attrs),
    })


# The typed fast path of helicone: helicone_row in SQL, each line (a page {"data": [...]}, an array of requests or
# one request) or each element of a JSON array parsed once into a STRUCT of every field of the file's first request,
# so no record passes through Python. Every request must have exactly those fields in that order (an export's rows
# all do: they are one table's columns); attrs is then joined from the STRUCT, the unmapped fields in their order,
# nulls kept, as the Python path writes them (each value as DuckDB's JSON writer spells it: a number or a character
# beyond ASCII may be spelled differently, the same JSON value). Anything the SQL cannot be sure to read as the
# Python path does calls error(), and the Python path reads the file: a request with other fields, a line that is
# no request or page, a value of a field helicone_row reads that is true, false, an object or an array, text where
# a name is read that is not a string, a number given as text beyond ASCII, a time that is not plain ISO 8601, a
# count beyond 2**53, no id (the Python path hashes such a row). Values go to the loader as text, as the Python
# path's do (it casts and checks them, naming the row and field of a bad one).
HELICONE_FIELDS = ("request_id", "request_created_at", "request_user_id", "model", "response_model", "request_model",
                   "provider", "prompt_tokens", "completion_tokens", "prompt_cache_read_tokens",
                   "prompt_cache_write_tokens", "response_status", "cache_reference_id", "costUSD", "cost",
                   "time_to_first_token", "delay_ms")
_HELICONE_NAMES = ("request_id", "request_created_at", "request_user_id", "model", "response_model", "request_model",
                   "provider", "cache_reference_id")        # read as text: a value that is not a string is left to Python


def _first_helicone_request(p: Probe, fmt: str) -> tuple[list[str], bool] | None:
    """The field names of the file's first request, in their order, and whether it is a line of its own (not one
    of a page's or an array's: only then may the lines be numbered by position); a JSON Lines file's first line is
    unpaged as the Python path unpages it, a JSON array's first element read from the probe's head. None where
    there is none, it has no ``request_id``, a name is empty, two differ only in case (a STRUCT's names are not
    cased), one differs only in case from a field we read, or one is the name of ours in attrs (``source_cost_usd``)."""
    whole = True
    if fmt == "newline_delimited":
        with open(p.path, "rb") as fh:
            line = fh.readline(MAX_JSON_LINE_BYTES + 1)
        try:
            doc = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
        recs = _unpage(doc)
        rec, whole = (recs[0] if recs else None), recs == [doc]
    else:
        rec = first_json_record(p, fmt)
    if (not isinstance(rec, dict) or "request_id" not in rec or "" in rec or "source_cost_usd" in rec
            or len({k.lower() for k in rec}) < len(rec)):
        return None
    ours = {f.lower(): f for f in HELICONE_FIELDS}
    if any(k.lower() in ours and ours[k.lower()] != k for k in rec):
        return None
    return list(rec), whole


# each line of a JSON Lines file or element of an array, numbered (__ROW__, __ORDINALITY__: ordinality, or NULL
# for a reading on every thread), with the JSON types of itself, its data and its items (a page's arrays)
_JSON_LINES = """WITH lines AS (
  SELECT __ROW__ AS _row, json AS line, json_type(json, ['$', '$.data', '$.items']) AS lt
  FROM read_json_objects(?, format = ?, compression = 'none')__ORDINALITY__
)"""
HELICONE_FAST_SQL = _JSON_LINES + rf""", pages AS (
  SELECT _row, __RECORDS__ AS recs, __KEYS__ AS keys
  FROM lines
), checked AS (
  -- once a line, not once a request (a page's keys are a list a request long)
  SELECT _row, recs, CASE WHEN recs IS NULL OR list_distinct(keys) NOT IN ([CAST(? AS VARCHAR[])], [])
                          THEN error('helicone fast path: a request whose fields are not the first one''s') END AS _check
  FROM pages
), requests AS (
  SELECT _row, _check, unnest(recs) AS r
  FROM checked
), fields AS (
  SELECT _row, _check, r, __VALUES__
  FROM requests
), counted AS (
  SELECT *,
    {_whole('prompt_tokens')} AS pw, {_whole('completion_tokens')} AS cw, {_whole('prompt_cache_read_tokens')} AS rw,
    {_whole('prompt_cache_write_tokens')} AS ww, {_whole('response_status')} AS code_w,
    {_t('response_status')} AS code_t, {_t('cache_reference_id')} AS cache_ref
  FROM fields
), summed AS (
  SELECT *,
    CASE WHEN greatest(abs(pw), abs(cw), abs(rw), abs(ww)) >= 9007199254740992
         THEN error('helicone fast path: a count beyond 2**53') END AS _check_big,
    pw + coalesce(rw, 0) + coalesce(ww, 0) AS prompt_w,
    cache_ref IS NOT NULL AND cache_ref <> '00000000-0000-0000-0000-000000000000' AS hit,
    code_t IS NULL OR (code_w IS NOT NULL AND code_w >= 200 AND code_w < 300) AS ok
  FROM counted
), priced AS (
  SELECT *, TRY_CAST(__COST__ AS DOUBLE) AS cost_d, coalesce(prompt_w, 0) + coalesce(cw, 0) AS tokens
  FROM summed
)
SELECT coalesce(CAST(_check AS BIGINT), CAST(_check_big AS BIGINT),
                CASE WHEN request_created_at IS NOT NULL AND NOT regexp_full_match(trim(request_created_at), '{ISO_TIME}')
                     THEN CAST(error('helicone fast path: a time that is not plain ISO 8601') AS BIGINT) END,
                CASE WHEN {_t('request_id')} IS NULL THEN CAST(error('helicone fast path: a request without an id') AS BIGINT) END,
                CASE WHEN regexp_matches(provider, '[^\x00-\x7f]') THEN CAST(error('helicone fast path: a provider beyond ASCII') AS BIGINT) END,
                _row) AS _row,
  CAST(NULL AS VARCHAR) AS _hash,
  {_t('request_id')} AS request_id, {_t('request_created_at')} AS ts,
  CASE WHEN {_t('request_user_id')} IS NOT NULL THEN request_user_id ELSE CAST(? AS VARCHAR) END AS tenant,
  coalesce({_t('model')}, {_t('response_model')}, {_t('request_model')}, CAST(? AS VARCHAR)) AS model,
  lower({_t('provider')}) AS provider, CASE WHEN hit THEN 'true' ELSE 'false' END AS cache_hit,
  CASE WHEN pw IS NOT NULL THEN CAST(CAST(prompt_w AS BIGINT) AS VARCHAR) ELSE {_t('prompt_tokens')} END AS input_tokens,
  CASE WHEN cw IS NOT NULL THEN CAST(CAST(cw AS BIGINT) AS VARCHAR) ELSE {_t('completion_tokens')} END AS output_tokens,
  CASE WHEN rw IS NOT NULL THEN CAST(CAST(rw AS BIGINT) AS VARCHAR) ELSE {_t('prompt_cache_read_tokens')} END
    AS cached_input_tokens,
  CASE WHEN ww IS NOT NULL THEN CAST(CAST(ww AS BIGINT) AS VARCHAR) ELSE {_t('prompt_cache_write_tokens')} END
    AS cache_write_tokens,
  -- the token parts the Python path's rows have, none known (the loader's checks name the parts they sum)
  CAST(NULL AS VARCHAR) AS cache_write_1h_tokens, CAST(NULL AS VARCHAR) AS reasoning_tokens,
  CAST(NULL AS VARCHAR) AS queue_ms, time_to_first_token AS ttft_ms, delay_ms AS total_ms,
  CASE WHEN ok THEN 'ok' ELSE 'error' END AS status,
  CASE WHEN ok THEN NULL WHEN code_w IS NOT NULL THEN 'http_' || CAST(CAST(code_w AS BIGINT) AS VARCHAR)
       ELSE 'http_' || code_t END AS error_type,
  CASE WHEN __COST__ IS NULL THEN NULL
       WHEN cost_d IS NULL OR NOT isfinite(cost_d) THEN {_t('__COST__')}
       WHEN cost_d = 0 AND tokens <> 0 AND NOT hit THEN NULL
       ELSE CAST(cost_d AS VARCHAR) END AS cost_usd,
  __ATTRS__ AS attrs
FROM priced, (SELECT CAST(? AS VARCHAR[]) AS _names)"""


def _helicone_fast_sql(keys: list[str], fmt: str, paged: bool, numbered: bool = True) -> str:
    """:data:`HELICONE_FAST_SQL` for a file whose first request has the fields ``keys`` (:func:`_first_helicone_request`),
    read as ``fmt`` (``newline_delimited``: a line is one request, or where ``paged`` a page, an array of requests
    or one request; ``array``: an element is one request). The field names are bound parameters (the list of
    names, and each as ``"name":`` as Python's ``json.dumps`` spells it): only their positions are in the SQL
    (parameters: :func:`_helicone_params`). ``numbered=False``: ``_row`` NULL, read on
    every thread (:attr:`Source.unnumbered_sql`), for a file that is not ``paged``."""
    text = HELICONE_FAST_SQL.replace("__ROW__", "ordinality" if numbered else "CAST(NULL AS BIGINT)")
    text = text.replace("__ORDINALITY__", " WITH ORDINALITY" if numbered else "")
    if paged:
        records = ("CASE WHEN lt[1] = 'ARRAY' THEN json_transform(line, ?) "
                   "WHEN lt[2] = 'ARRAY' THEN json_transform(line, ?).data "
                   "WHEN lt[3] = 'ARRAY' THEN json_transform(line, ?).items "
                   "WHEN lt[1] = 'OBJECT' THEN [json_transform(line, ?)] END")
        keys_sql = ("CASE WHEN lt[1] = 'ARRAY' THEN json_keys(line, '$[*]') "
                    "WHEN lt[2] = 'ARRAY' THEN json_keys(line, '$.data[*]') "
                    "WHEN lt[3] = 'ARRAY' THEN json_keys(line, '$.items[*]') "
                    "WHEN lt[1] = 'OBJECT' THEN [json_keys(line)] END")
    else:       # one request per line or element
        records = "CASE WHEN lt[1] = 'OBJECT' AND lt[2] IS DISTINCT FROM 'ARRAY' AND lt[3] IS DISTINCT FROM 'ARRAY' " \
                  "THEN [json_transform(line, ?)] END"
        keys_sql = "[json_keys(line)]"
        if fmt == "array":
            records = "CASE WHEN lt[1] = 'OBJECT' THEN [json_transform(line, ?)] END"
    at = {k: i + 1 for i, k in enumerate([*keys, *(f for f in HELICONE_FIELDS if f not in keys)])}
    values = ", ".join(
        f"{_json_text_sql(f'struct_extract_at(r, {sql.literal(at[f])})', 'name' if f in _HELICONE_NAMES else 'number')} "
        f"AS {sql.quote_ident(f)}"
        for f in HELICONE_FIELDS)
    cost = "\"costUSD\"" if "costUSD" in keys else "cost"
    pieces = [f"concat(_names[{sql.literal(i + 1)}], coalesce(struct_extract_at(r, {sql.literal(i + 1)}), 'null'))"
              for i, k in enumerate(keys) if k not in HELICONE_MAPPED]
    pieces.append("CASE WHEN cost_d = 0 AND tokens <> 0 AND NOT hit AND isfinite(cost_d) "
                  f"THEN concat({sql.string_literal(json.dumps('source_cost_usd') + ':')}, "
                  "CAST(to_json(cost_d) AS VARCHAR)) END")
    attrs = f"concat('{{', concat_ws(',', {', '.join(pieces)}), '}}')"
    return (text.replace("__RECORDS__", records).replace("__KEYS__", keys_sql).replace("__VALUES__", values)
            .replace("__COST__", cost).replace("__ATTRS__", attrs))


def _helicone_params(p: Probe, fmt: str, options: IngestOptions, keys: list[str], paged: bool) -> list:
    """The parameters of :func:`_helicone_fast_sql`, in the order of its placeholders."""
    struct = {k: "JSON" for k in [*keys, *(f for f in HELICONE_FIELDS if f not in keys)]}
    shapes = ([json.dumps([struct]), json.dumps({"data": [struct]}), json.dumps({"items": [struct]})] if paged
              else []) + [json.dumps(struct)]
    return [str(p.path), fmt, *shapes, keys, options.tenant, options.model, [json.dumps(k) + ":" for k in keys]]


def helicone_fast_source(p: Probe, options: IngestOptions, then: Callable[[], Source] | None = None) -> Source | None:
    """The typed reading of a Helicone export (:func:`_helicone_fast_sql`), or None where it does not apply
    (``--tenant-field``, a compressed file, blank lines, a document that is not an array, a first request that is
    not readable so: :func:`_first_helicone_request`). Read on every thread where the first line is one request
    (numbered once staged), on one thread, numbered by line, where it is a page; ``then``: the Python path."""
    fmt = json_records_format(p)
    first = _first_helicone_request(p, fmt) if fmt is not None and not options.tenant_field else None
    if first is None:
        return None
    keys, whole = first
    params = _helicone_params(p, fmt, options, keys, paged=not whole)
    numbered = _helicone_fast_sql(keys, fmt, paged=not whole)
    # the same placeholders in the same order (only the numbering differs): one list of parameters serves both
    unnumbered = _helicone_fast_sql(keys, fmt, paged=False, numbered=False) if whole else None
    return Source(numbered, params, has_ids=True, fallback=then, unnumbered_sql=unnumbered)


def _read_helicone(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """The typed fast path where it applies (:func:`helicone_fast_source`), the Python path behind it."""
    src = helicone_fast_source(p, options, then=lambda: _read_helicone(con, p, options, fast=False)) \
        if fast else None
    return src if src is not None else _read_helicone_python(con, p, options)


_read_helicone_python = _one_row_per_record(helicone_row)


register(Adapter(
    name="helicone", label="Helicone request export (POST /v1/request/query)",
    source_tool="Helicone",
    export_hint="POST /v1/request/query (or query-clickhouse): the JSON {\"data\": [...], \"error\": null}, one "
                "page per file or per line; tenant = request_user_id (Helicone-User-Id) unless --tenant-field "
                "names a property",
    sniff=_sniff_helicone, read=_read_helicone,
    example="tests/data/providers/helicone_requests.json",
))


# ---------------------------------------------------------------- openrouter

OPENROUTER_MAPPED = {"id", "created_at", "model", "provider_name", "total_cost", "native_tokens_prompt",
                     "native_tokens_completion", "native_tokens_cached", "native_tokens_reasoning", "latency",
                     "external_user", "service_tier"}


def _sniff_openrouter(p: Probe) -> float:
    if p.kind not in ("json", "jsonl"):
        return 0.0
    keys = head_keys(p)
    if "total_cost" in keys and keys & {"native_tokens_prompt", "generation_time"}:
        return 0.97
    return 0.0


def openrouter_row(row: int, rec: dict, options: IngestOptions, name: str = "") -> dict:
    """One generation (``GET /api/v1/generation``'s ``data``) as canonical fields.

    Tokens are the provider's own (``native_tokens_*``: what is billed; ``tokens_*`` are OpenRouter's
    normalised count, kept in attrs); the cached and reasoning ones are parts of prompt and completion.
    ``latency`` is the total latency (ms); ``total_cost`` the recorded cost.
    """
    if isinstance(rec, dict) and isinstance(rec.get("data"), dict):
        rec = rec["data"]
    if not isinstance(rec, dict) or "id" not in rec:
        raise InputError("expected an OpenRouter generation (an object with id)", file=name, row=row, field="id")
    prompt, completion = _count(rec.get("native_tokens_prompt")), _count(rec.get("native_tokens_completion"))
    if prompt is None:
        prompt = _count(rec.get("tokens_prompt"))
    if completion is None:
        completion = _count(rec.get("tokens_completion"))
    attrs = {k: v for k, v in rec.items() if k not in OPENROUTER_MAPPED and v is not None}
    cost = _cost(rec.get("total_cost"), _sum_ints(prompt, completion), attrs) \
        if rec.get("total_cost") is not None else None
    cancelled = rec.get("cancelled") is True
    return _out(row, {
        "request_id": _text(rec.get("id")), "ts": _utc(rec.get("created_at")),
        "tenant": _tenant(options, rec.get("external_user"), rec),
        "model": _text(rec.get("model")) or options.model, "provider": _text(rec.get("provider_name")),
        "service_tier": _text(rec.get("service_tier")),
        "input_tokens": prompt, "output_tokens": completion,
        "cached_input_tokens": _count(rec.get("native_tokens_cached")),
        "reasoning_tokens": _count(rec.get("native_tokens_reasoning")),
        "total_ms": rec.get("latency"),
        "status": "error" if cancelled else "ok", "error_type": "cancelled" if cancelled else None,
        "cost_usd": cost, "attrs": _json(attrs),
    })


# The typed fast path of openrouter: openrouter_row in SQL over each record as JSON (read_json_objects), so no
# record passes through Python. Values go to the loader as the source's text, as the Python path's do (the loader
# casts and checks them, naming the row and field of a bad one); attrs keeps every other non-null field as
# the record has it (the same JSON value; a number or a non-ASCII character may be spelled differently). A record
# the SQL cannot be sure to read as the Python path does calls error(), and the Python path reads the file: not
# an object, no id (the Python path refuses it or hashes the row), a line that is a page of records, a time that
# is not plain ISO 8601. Parameters: the path, the JSON format, --tenant, --model (then, where the first
# generation's fields are known, their STRUCT's structure and their names: _openrouter_fast_sql).
def _sql_text(x: str) -> str:
    """``_text`` in SQL: the value trimmed, LiteLLM's spellings of no value as NULL."""
    t = _trim_sql(x)
    return f"CASE WHEN {t} NOT IN ('', 'None', 'null', 'NULL') THEN {t} END"


def _sql_whole(x: str) -> str:
    """``_int`` in SQL: the value as a whole number, NULL when it is not one."""
    d = f"TRY_CAST({x} AS DOUBLE)"
    return f"CASE WHEN isfinite({d}) AND {d} = floor({d}) THEN {d} END"


OPENROUTER_FIELDS = ("id", "created_at", "external_user", "model", "provider_name", "service_tier",
                     "native_tokens_prompt", "tokens_prompt", "native_tokens_completion", "tokens_completion",
                     "native_tokens_cached", "native_tokens_reasoning", "latency", "total_cost")
_OR = {name: f"v.{name}" for name in OPENROUTER_FIELDS}
# the fields openrouter_row reads, parsed once: each as json_extract_string gives it (text, a nested value as its
# JSON), ``cancelled`` as its JSON (true only for the JSON true)
_OPENROUTER_FIELDS_TYPE = json.dumps({name: "JSON" for name in (*OPENROUTER_FIELDS, "cancelled")})
# how each is read (_json_text_sql): names and times as str() writes any value, counts, latency and cost as numbers
_OPENROUTER_KIND = {name: "number" if name.startswith(("native_tokens", "tokens")) or name in ("latency", "total_cost")
                    else "text" for name in OPENROUTER_FIELDS}


def _openrouter_v(at: dict[str, int] | None = None) -> str:
    """The STRUCT ``v`` of our fields, each the Python path's text of it (``cancelled`` its JSON), from their JSON:
    members of ``_raw`` (the map path), or where ``at`` gives their positions, of the STRUCT ``_s``."""
    def raw(name: str) -> str:
        return f"_raw.{sql.quote_ident(name)}" if at is None else f"struct_extract_at(_s, {sql.literal(at[name])})"
    members = [f"{sql.quote_ident(name)} := {_json_text_sql(raw(name), _OPENROUTER_KIND[name])}"
               for name in OPENROUTER_FIELDS]
    return "struct_pack(" + ", ".join(members) + f", cancelled := {raw('cancelled')})"


# attrs through a MAP of every field: exact for any record, but building a MAP is the dearest step of the reading
# (1M generations of 20 fields: ~9 of 19 CPU seconds)
_OPENROUTER_MAPPED_LIST = ", ".join(f"'{k}'" for k in sorted(OPENROUTER_MAPPED))
_OPENROUTER_MAP_ATTRS = (
    "CAST(to_json(map_from_entries(list_filter(map_entries(json_transform(rec, '\"MAP(VARCHAR, JSON)\"')), "
    f"lambda e: e.value IS NOT NULL AND e.key NOT IN ({_OPENROUTER_MAPPED_LIST})))) AS VARCHAR)")
OPENROUTER_FAST_SQL = _JSON_LINES + rf""", recs AS (
  SELECT _row, lt, __REC__ AS rec
  FROM lines
), parsed AS (
  __PARSED__
), fields AS (
  SELECT _row, lt, rec, v__CARRY__,
    CASE WHEN (lt[2] IS DISTINCT FROM 'OBJECT' AND lt[1] IS DISTINCT FROM 'OBJECT') OR lt[2] = 'ARRAY'
              OR lt[3] = 'ARRAY'
           THEN error('openrouter fast path: a line that is not one generation')
         WHEN {_sql_text(_OR['id'])} IS NULL
           THEN error('openrouter fast path: a generation without an id')
    END AS _check,
    CAST(v.cancelled AS VARCHAR) = 'true' AS cancelled
  FROM parsed
), counted AS (
  SELECT *,
    coalesce({_sql_text(_OR['native_tokens_prompt'])}, {_sql_text(_OR['tokens_prompt'])}) AS prompt,
    coalesce({_sql_text(_OR['native_tokens_completion'])}, {_sql_text(_OR['tokens_completion'])}) AS completion,
    CASE WHEN {_OR['created_at']} IS NOT NULL AND NOT regexp_full_match(trim({_OR['created_at']}),
              '\d{{4}}-\d{{2}}-\d{{2}}[T ]\d{{2}}:\d{{2}}(:\d{{2}}(\.\d{{1,6}})?)?(Z|[+-]\d{{2}}:\d{{2}})?')
           THEN error('openrouter fast path: a time that is not plain ISO 8601') END AS _check_ts
  FROM fields
), priced AS (
  SELECT *, TRY_CAST({_OR['total_cost']} AS DOUBLE) AS cost_d,
    coalesce({_sql_whole('prompt')}, 0) + coalesce({_sql_whole('completion')}, 0) AS tokens,
    -- a whole count beyond 2**53: Python writes all its digits (in a reject's reason), DuckDB a DOUBLE's text
    CASE WHEN greatest(abs({_sql_whole('prompt')}), abs({_sql_whole('completion')}),
                       abs({_sql_whole(_OR['native_tokens_cached'])}), abs({_sql_whole(_OR['native_tokens_reasoning'])}))
              >= 9007199254740992 THEN error('openrouter fast path: a count beyond 2**53') END AS _check_big
  FROM counted
)
SELECT coalesce(CAST(_check AS BIGINT), CAST(_check_ts AS BIGINT), CAST(_check_big AS BIGINT), _row) AS _row,
  CAST(NULL AS VARCHAR) AS _hash,
  {_sql_text(_OR['id'])} AS request_id, {_sql_text(_OR['created_at'])} AS ts,
  coalesce({_sql_text(_OR['external_user'])}, CAST(? AS VARCHAR)) AS tenant,
  coalesce({_sql_text(_OR['model'])}, CAST(? AS VARCHAR)) AS model,
  CAST(NULL AS VARCHAR) AS cache_hit, prompt AS input_tokens, completion AS output_tokens,
  {_sql_text(_OR['native_tokens_cached'])} AS cached_input_tokens,
  CAST(NULL AS VARCHAR) AS queue_ms, CAST(NULL AS VARCHAR) AS ttft_ms, {_OR['latency']} AS total_ms,
  CASE WHEN cancelled THEN 'error' ELSE 'ok' END AS status,
  CASE WHEN cancelled THEN 'cancelled' END AS error_type,
  CASE WHEN {_OR['total_cost']} IS NULL THEN NULL
       WHEN cost_d IS NULL OR NOT isfinite(cost_d) THEN {_sql_text(_OR['total_cost'])}
       WHEN cost_d = 0 AND tokens > 0 THEN NULL
       ELSE {_OR['total_cost']} END AS cost_usd,
  CAST(CASE WHEN cost_d = 0 AND isfinite(cost_d) AND tokens > 0
            THEN json_merge_patch(attrs, json_object('source_cost_usd', cost_d)) ELSE attrs END AS VARCHAR) AS attrs,
  {_sql_text(_OR['provider_name'])} AS provider, {_sql_text(_OR['service_tier'])} AS service_tier,
  CAST(NULL AS VARCHAR) AS cache_write_tokens, CAST(NULL AS VARCHAR) AS cache_write_1h_tokens,
  {_sql_text(_OR['native_tokens_reasoning'])} AS reasoning_tokens
FROM (SELECT *, __ATTRS__ AS attrs FROM __PRICED__)"""


def _fast_records(p: Probe) -> str | None:
    """The read_json format of a file the typed fast paths can read record by record as the Python path does
    (``newline_delimited``: uncompressed JSON Lines without blank lines; ``array``: an uncompressed JSON array),
    else None."""
    if p.container != "text":
        return None
    if p.kind == "jsonl":
        return "newline_delimited" if _plain_lines(p) else None
    if p.kind == "json" and p.head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")[:1] == "[":
        return "array"
    return None


def _first_generation_keys(p: Probe, fmt: str) -> list[str] | None:
    """The field names of the file's first generation (inside ``data`` where the line wraps it), in their order,
    from the probe's head; None where the head does not hold the whole record, or a name is empty or two differ only in case."""
    rec = first_json_record(p, fmt)
    if isinstance(rec, dict) and isinstance(rec.get("data"), dict):
        rec = rec["data"]
    if not isinstance(rec, dict) or not rec or "" in rec or len({k.lower() for k in rec}) < len(rec):
        return None         # a STRUCT's field names are not empty and not equal but for case (DuckDB's are not cased)
    return list(rec)


# the record of a line: the line, or its ``data`` object
_OPENROUTER_REC = "CASE WHEN lt[2] = 'OBJECT' THEN json_extract(line, '$.data') ELSE line END"
_OPENROUTER_PARSED = (f"SELECT *, {_openrouter_v()} AS v "
                      f"FROM (SELECT *, json_transform(rec, '{_OPENROUTER_FIELDS_TYPE}') AS _raw FROM recs)")


def _openrouter_struct(keys: list[str] | None) -> list[tuple[str, str]] | None:
    """The fields one ``json_transform`` of each record reads where its first generation's fields ``keys`` are
    known: those fields in their order, then the ones :data:`OPENROUTER_FIELDS` and ``cancelled`` add, each as
    its JSON (attrs joins the others', :func:`_openrouter_v` reads ours); None where a name differs from one of
    ours only in case (a STRUCT's names are not cased)."""
    if not keys:
        return None
    ours = [*OPENROUTER_FIELDS, "cancelled"]
    lower = {k.lower(): k for k in keys}
    if any(f.lower() in lower and lower[f.lower()] != f for f in ours):
        return None
    return [(k, "JSON") for k in [*keys, *(f for f in ours if f not in keys)]]


def _openrouter_fast_sql(keys: list[str] | None, numbered: bool = True) -> str:
    """:data:`OPENROUTER_FAST_SQL` for a file whose first generation has the fields ``keys`` (None: unknown).

    Where they are known (:func:`_openrouter_struct`), each line is parsed once for every field: one
    ``json_transform`` of the line (inside ``data`` where it wraps the record) to a STRUCT of the generation's
    fields and ours, each of ours a text (a field that attrs may also hold: its JSON, read as text by
    ``json_extract_string``, the same text); the record itself is not extracted. A generation with exactly those
    fields, in that order (the common case: every record of an export has the same fields), has its attrs
    written from that STRUCT (the non-null unmapped values joined as ``"key":value``), about five times cheaper
    than the MAP that any other record goes through; both write each value as DuckDB's JSON writer does, so attrs
    are the same text. The field names are bound parameters (the STRUCT's structure, the list of names); only
    their positions are in the SQL. ``numbered=False``: ``_row`` NULL, read on every thread
    (:attr:`Source.unnumbered_sql`).
    """
    text = OPENROUTER_FAST_SQL.replace("__ROW__", "ordinality" if numbered else "CAST(NULL AS BIGINT)")
    text = text.replace("__ORDINALITY__", " WITH ORDINALITY" if numbered else "")
    fields = _openrouter_struct(keys)
    if not fields:
        return (text.replace("__REC__", _OPENROUTER_REC).replace("__PARSED__", _OPENROUTER_PARSED)
                .replace("__CARRY__", "").replace("__ATTRS__", _OPENROUTER_MAP_ATTRS).replace("__PRICED__", "priced"))
    at = {name: i + 1 for i, (name, _) in enumerate(fields)}
    v = _openrouter_v(at)
    # the record's STRUCT: the line's, or its data object's (two structures: the same fields, one inside data)
    parsed = (f"SELECT *, {v} AS v FROM (SELECT *, CASE WHEN lt[2] = 'OBJECT' THEN json_transform(rec, ?).data "
              "ELSE json_transform(rec, ?) END AS _s FROM recs)")
    pieces = [f"CASE WHEN struct_extract_at(_s, {i + 1}) IS NOT NULL "
              f"THEN concat(_kj[{i + 1}], ':', struct_extract_at(_s, {i + 1})) END"
              for i, k in enumerate(keys) if k not in OPENROUTER_MAPPED]
    joined = f"concat('{{', concat_ws(',', {', '.join(pieces)}), '}}')" if pieces else "'{}'"
    map_attrs = _OPENROUTER_MAP_ATTRS.replace("json_transform(rec,", "json_transform(" + _OPENROUTER_REC.replace(
        "line", "rec") + ",")
    attrs = (f"CASE WHEN (CASE WHEN lt[2] = 'OBJECT' THEN json_keys(rec, '$.data') ELSE json_keys(rec) END) = _k "
             f"THEN {joined} ELSE {map_attrs} END")
    priced = ("(SELECT * FROM priced, (SELECT _k, list_transform(_k, lambda k: CAST(to_json(k) AS VARCHAR)) AS _kj "
              "FROM (SELECT CAST(? AS VARCHAR[]) AS _k)))")
    return (text.replace("__REC__", "line").replace("__PARSED__", parsed).replace("__CARRY__", ", _s")
            .replace("__ATTRS__", attrs).replace("__PRICED__", priced))


def _openrouter_params(p: Probe, fmt: str, options: IngestOptions, keys: list[str] | None) -> list:
    """The parameters of :func:`_openrouter_fast_sql`, in the order of its placeholders."""
    fields = _openrouter_struct(keys)
    if not fields:
        return [str(p.path), fmt, options.tenant, options.model]
    struct = json.dumps(dict(fields))
    return [str(p.path), fmt, json.dumps({"data": dict(fields)}), struct, options.tenant, options.model, keys]


def openrouter_fast_source(p: Probe, options: IngestOptions) -> Source | None:
    """The typed reading of OpenRouter generations (:func:`_openrouter_fast_sql`), or None where it does not apply
    (``--tenant-field``, a compressed file, blank lines, a document that is not an array)."""
    fmt = _fast_records(p)
    if fmt is None or options.tenant_field:
        return None
    keys = _first_generation_keys(p, fmt)
    params = _openrouter_params(p, fmt, options, keys)
    return Source(_openrouter_fast_sql(keys), params, has_ids=True,
                  unnumbered_sql=_openrouter_fast_sql(keys, numbered=False))


_read_openrouter_python = _one_row_per_record(openrouter_row)


def _read_openrouter(con, p: Probe, options: IngestOptions, fast: bool = True) -> Source:
    """The typed fast path where it applies (:func:`openrouter_fast_source`), the Python path behind it."""
    src = openrouter_fast_source(p, options) if fast else None
    if src is not None:
        src.fallback = lambda: _read_openrouter(con, p, options, fast=False)
        return src
    return _read_openrouter_python(con, p, options)


register(Adapter(
    name="openrouter", label="OpenRouter generation stats (GET /api/v1/generation)",
    source_tool="OpenRouter",
    export_hint="GET /api/v1/generation?id=ID for each generation id: one response per line (or a JSON array "
                "of their data); tenant = external_user (the request's user) unless --tenant-field",
    sniff=_sniff_openrouter, read=_read_openrouter,
    example="tests/data/providers/openrouter_generations.jsonl",
))
