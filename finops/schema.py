"""The canonical request schema: one row per model call.

Every adapter maps its source onto these columns; every analysis reads them.
Only ``ts`` and ``model`` are required. Any other column may be null, and an
analysis that needs a missing field says so (see :func:`missing_fields`)
instead of showing zeros.

Conventions
-----------
* ``input_tokens`` counts *every* prompt token: cache reads (``cached_input_tokens``) and cache writes
  (``cache_write_tokens``, ``cache_write_1h_tokens``) included (the OpenAI usage convention, and
  genai-prices'). The uncached part is ``input_tokens - cached_input_tokens - cache_write_tokens -
  cache_write_1h_tokens``. Sources that count otherwise are normalised by their adapter: Anthropic's
  ``input_tokens`` excludes ``cache_read_input_tokens`` and ``cache_creation_input_tokens``, so the
  adapter adds them.
* ``output_tokens`` counts every generated token, ``reasoning_tokens`` (thinking) included: they are
  billed as output.
* A cascade that escalates writes two rows, one per model call: the small
  model's attempt (``escalated = true``: its answer was rejected) and the large
  model's answer (``escalated = false``), linked by ``attrs.parent_id``.
* A semantic-cache hit (``cache_hit = true``) names the model that would have
  served it; it costs nothing unless the source recorded a cost.
* ``attrs`` keeps every source column that has no canonical home.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    description: str
    required: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("request_id", "VARCHAR", "unique id; a stable content hash where the source has none", True),
    Column("ts", "TIMESTAMP", "arrival at the gateway, UTC", True),
    Column("tenant", "VARCHAR", "who sent it (default 'default')"),
    Column("sla_tier", "VARCHAR", "premium, standard, batch, ..."),
    Column("model", "VARCHAR", "the model that served the request", True),
    Column("route", "VARCHAR", "path taken: fast, slow, cache, edge, cloud, cascade, ..."),
    Column("strategy", "VARCHAR", "routing strategy: cost, latency, cascade, ..."),
    Column("cache_hit", "BOOLEAN", "served from the semantic cache"),
    Column("escalated", "BOOLEAN", "cascade attempt whose answer was rejected, so a larger model was called"),
    Column("site", "VARCHAR", "edge, cloud or a region"),
    Column("replica", "VARCHAR", "replica / instance that served it"),
    Column("input_tokens", "BIGINT", "prompt tokens, cached ones included"),
    Column("output_tokens", "BIGINT", "generated tokens"),
    Column("cached_input_tokens", "BIGINT", "prompt tokens read from a prefix/prompt cache"),
    Column("cache_write_tokens", "BIGINT", "prompt tokens written to the provider's prompt cache (5-minute "
           "TTL, or its only one); part of input_tokens"),
    Column("cache_write_1h_tokens", "BIGINT", "prompt tokens written to the cache with a 1-hour TTL; part of "
           "input_tokens"),
    Column("reasoning_tokens", "BIGINT", "reasoning (thinking) tokens; part of output_tokens"),
    Column("prompt_chars", "INTEGER", "prompt length in characters"),
    Column("route_ms", "DOUBLE", "routing decision time, ms"),
    Column("queue_ms", "DOUBLE", "time waiting for a free slot, ms"),
    Column("prefill_ms", "DOUBLE", "prefill time, ms"),
    Column("decode_ms", "DOUBLE", "decode time, ms"),
    Column("service_ms", "DOUBLE", "time on the model (prefill + decode), ms"),
    Column("ttft_ms", "DOUBLE", "time to first token, ms"),
    Column("total_ms", "DOUBLE", "end-to-end latency at the gateway, ms"),
    Column("status", "VARCHAR", "ok, error, timeout, rejected"),
    Column("error_type", "VARCHAR", "error class where status is not ok"),
    Column("cost_usd", "DOUBLE", "cost recorded by the source, USD"),
    Column("confidence", "DOUBLE", "router's / small model's confidence in [0, 1]"),
    Column("quality", "DOUBLE", "graded correctness from shadow evaluation in [0, 1]"),
    Column("attrs", "JSON", "every other source column"),
    Column("provider", "VARCHAR", "who served it: openai, anthropic, google, aws, azure, a self-hosted fleet's "
           "site... (the source's word)"),
    Column("service_tier", "VARCHAR", "the provider's service tier: standard, batch, flex, priority (the "
           "source's word; empty is standard)"),
)

NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
TYPES: dict[str, str] = {c.name: c.sql_type for c in COLUMNS}
REQUIRED: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.required)
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "rejected")
MS_COLUMNS: tuple[str, ...] = tuple(n for n in NAMES if n.endswith("_ms"))
TOKEN_COLUMNS: tuple[str, ...] = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
                                  "cache_write_1h_tokens", "reasoning_tokens")
#: the parts of input_tokens a cache read or wrote, and of output_tokens that were reasoning
INPUT_PARTS: tuple[str, ...] = ("cached_input_tokens", "cache_write_tokens", "cache_write_1h_tokens")
OUTPUT_PARTS: tuple[str, ...] = ("reasoning_tokens",)
UNIT_INTERVAL_COLUMNS: tuple[str, ...] = ("confidence", "quality")
IDLE_TENANT = "(idle capacity)"
"""The tenant of a self-hosted fleet's idle GPU time in spend reports and charts (no request pays for it)."""

#: The range a number must lie in to be loaded (inclusive), per column; a row outside it is rejected
#: with its file, row, field and reason. Every DOUBLE must also be finite (no NaN, no infinity);
#: UNIT_INTERVAL_COLUMNS lie in [0, 1].
#: Bounds are generous: a week for a latency, a billion tokens, $100,000 for one request.
WEEK_MS = 7 * 24 * 3600 * 1000.0
RANGES: dict[str, tuple[float, float]] = {
    **{n: (0.0, WEEK_MS) for n in MS_COLUMNS},
    **{n: (0, 1_000_000_000) for n in TOKEN_COLUMNS},
    "prompt_chars": (0, 2_000_000_000),
    "cost_usd": (0.0, 100_000.0),
}
#: The longest model name a load keeps, in characters (a row with a longer one is rejected naming the field): a chosen
#: limit, no source's own. Real names are under 100 (``accounts/fireworks/models/llama-v3p1-405b-instruct``); a 100 kB
#: "name" is a column mapped wrongly, and would be stored, grouped and shown whole.
MAX_MODEL_CHARS = 256
#: Timestamps outside [TS_MIN, now + TS_MAX_AHEAD_DAYS] are rejected (a row dated 9999 would stretch every
#: period to millennia); FINOPS_TS_MIN / FINOPS_TS_MAX (ISO dates) override the window.
TS_MIN = "2015-01-01"
TS_MAX_AHEAD_DAYS = 366


def create_table_sql(table: str = "requests", extra: str = "") -> str:
    """DDL for a table with the canonical columns (no key index: see store.py)."""
    cols = ",\n  ".join(f"{c.name} {c.sql_type}" for c in COLUMNS)
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {cols}{extra}\n)"


def missing_fields(present: dict[str, int], needed: list[str] | tuple[str, ...]) -> list[str]:
    """Fields in ``needed`` whose non-null count in ``present`` is zero.

    ``present`` maps column name to its count of non-null values, as returned by
    ``store.field_coverage``. Used to print "these logs carry no queue_ms".
    """
    return [n for n in needed if not present.get(n)]
