"""The SQL vocabulary: the one place where anything but a bound parameter enters SQL text.

Values always reach DuckDB as bound parameters (``con.execute(sql, params)``; a relation built as
text and run later carries its ``(sql, params)`` pair). What SQL text may hold besides keywords:

* identifiers: a fixed column name checked against one of the allow-lists below (:func:`column`),
  or a name read from a file, through :func:`quote_ident`;
* the few numbers DuckDB cannot take as a parameter (a ``CREATE VIEW`` body, ``TABLESAMPLE``),
  through :func:`literal`, which takes finite numbers only;
* the named fragments below, which every analysis shares so that "served", "service time" or
  "a day" mean one thing on every page.

``tests/test_sql_vocabulary.py`` walks every module of ``finops`` and fails when one outside this
module builds SQL text from a value.

Fragments
---------
:data:`CACHE_HIT`, :data:`SERVED`
    A semantic-cache hit never reached a model; a request a model really *served* is any other
    (``cache_hit`` null counts as served). Latency and busy time are measured over served requests.
:func:`served_requests`
    The same over the hourly rollups: ``requests - cache_hits`` of a rollup row.
:data:`OK`
    The request completed: status ``ok``, or no status logged (a log without a status column
    records the requests that came back).
:data:`AFTER_WAIT_MS`
    ``total_ms`` less the time spent waiting (queue and routing): the request's time from getting a
    slot to its answer at the gateway (model time plus network and gateway overhead).
:data:`SERVICE_MS`
    Time on the model: ``service_ms`` as logged, else ``prefill_ms + decode_ms``, else
    :data:`AFTER_WAIT_MS`; null where none of them is known. The busy-time weight of the GPU
    allocation is ``coalesce(SERVICE_MS, 0)`` (:data:`BUSY_MS`); a queueing fit that must not count an
    unknown as an instant service takes ``nullif(SERVICE_MS, 0)``. One definition, the variants only
    say what "unknown" becomes.
:data:`PREFILL_MS`
    ``prefill_ms``, else the time to the first token less the wait (TTFT includes queue and routing).
:data:`DECODE_MS`
    ``decode_ms``, else everything after the first token (``total_ms - ttft_ms``).
:data:`TTFT_SPLIT`, :data:`FIRST_TOKEN_MS`, :data:`AFTER_FIRST_TOKEN_MS`
    A request that logs its time to first token (within its total, after its logged routing and queue) but
    neither prefill nor decode time, split at its first token for the latency segments: the wait for it less
    the routing and queue logged (prefill, and the queue where that is not logged), and the rest (decode and
    streaming). Null for any other request.
:data:`PREFILL_SHARE`, :data:`PREFILL_SPLIT_MEASURED`
    The share of a request's time on the model spent on its prompt (prefill) rather than its answer
    (decode): ``PREFILL_MS / (PREFILL_MS + DECODE_MS)`` where both are known and not negative (the
    split is *measured*), else the documented estimate from token counts, an output token weighing
    :data:`DECODE_TOKEN_WEIGHT` input tokens: ``input / (input + 4 * output)`` (one half with no
    tokens either). A self-hosted fleet's busy cost is split into input and output by it.
:data:`TPOT_MS`
    Time per output token after the first, the vLLM benchmark definition:
    ``(total_ms - ttft_ms) / (output_tokens - 1)``, with ``decode_ms`` where TTFT is absent; null for
    one output token or none. It prefers the gateway's view (``total_ms - ttft_ms``) over a logged
    ``decode_ms`` where :data:`DECODE_MS` prefers the logged one: the hourly latency sketch stores TPOT
    this way, so the two orders stay (changing it would mean rebuilding every stored sketch).
:func:`time_bucket`
    The start of a ``minute``, ``5min``, ``15min``, ``hour``, ``day``, ``week`` (ISO, Monday) or
    ``month`` bucket of a timestamp column, UTC (the store's session time zone).
"""
from __future__ import annotations

import math
import re
from numbers import Real

from finops import schema
from finops.errors import InputError

# ---------------------------------------------------------------- identifiers and literals


def quote_ident(name: str) -> str:
    """Quote a column name (e.g. one read from a file's header) for SQL text.

    >>> quote_ident('a"b')
    '"a""b"'
    """
    return '"' + str(name).replace('"', '""') + '"'


def literal(value: Real) -> str:
    """A number as SQL text, for the few places DuckDB cannot bind a parameter (a view's body,
    ``TABLESAMPLE``). Finite ints and floats only: anything else is a bug, not an input.

    >>> literal(3), literal(0.25)
    ('3', '0.25')
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"an SQL literal must be a number, got {type(value).__name__}")
    if isinstance(value, int):
        return str(int(value))
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"an SQL literal must be finite, got {x}")
    return repr(x)


def view_body(con, text: str, params: list, prefix: str = "finops_view") -> str:
    """``text`` with each ``?`` placeholder read from a session variable set (as a bound parameter) to
    the matching value of ``params``: a view's body cannot take parameters, but it can read variables.
    Placeholders inside quoted strings and identifiers are left alone.

    The variables are ``<prefix>_1``, ``<prefix>_2``, ... of the connection; a view made from the
    text reads them when it is queried, so keep one prefix per view.
    """
    out, i, quote = [], 0, None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            i += 1
            if i > len(params):
                raise ValueError("more placeholders than parameters")
            name = f"{prefix}_{i}"
            con.execute(f"SET VARIABLE {name} = ?", [params[i - 1]])
            out.append(f"getvariable('{name}')")
            continue
        out.append(ch)
    if i != len(params):
        raise ValueError(f"{i} placeholders for {len(params)} parameters")
    return "".join(out)


_COLUMN_REF = re.compile(r"(?:[a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*")


def column(name: str, allowed: tuple[str, ...], what: str = "column") -> str:
    """``name`` if it is one of ``allowed`` (an allow-list below), else an InputError naming the
    choices. The way a user-chosen column (a group, a latency field) enters SQL text.

    >>> column("model", GROUP_COLUMNS)
    'model'
    """
    if name not in allowed:
        raise InputError(f"not a {what}: {name}; choose from {', '.join(allowed)}")
    return name


# ---------------------------------------------------------------- column allow-lists

# the dimensions of the hourly rollups (store.rollup_hourly): what spend groups and filters by
ROLLUP_DIMS: tuple[str, ...] = ("model", "tenant", "route", "sla_tier", "status", "provider", "service_tier")
# request columns latency can be grouped by
GROUP_COLUMNS: tuple[str, ...] = ("model", "tenant", "route", "sla_tier", "status", "replica", "site", "strategy")
# the latency fields reported by default, and every field a latency view may read
LATENCY_FIELDS: tuple[str, ...] = ("total_ms", "ttft_ms", "queue_ms", "service_ms")
LATENCY_COLUMNS: tuple[str, ...] = LATENCY_FIELDS + ("route_ms", "prefill_ms", "decode_ms")
# the latencies an SLA may be on (ops.alerts)
SLA_COLUMNS: tuple[str, ...] = ("ttft_ms", "total_ms")
# lengths of a request (prompt: input_tokens / prompt_chars; answer: output_tokens)
LENGTH_COLUMNS: tuple[str, ...] = ("input_tokens", "output_tokens", "prompt_chars")
PROMPT_LENGTH_COLUMNS: tuple[str, ...] = ("input_tokens", "prompt_chars")
# every canonical column (a --map target, a coverage count)
CANONICAL_COLUMNS: tuple[str, ...] = schema.NAMES

# ---------------------------------------------------------------- fragments (see the module docstring)

CACHE_HIT = "coalesce(cache_hit, false)"
SERVED = f"NOT {CACHE_HIT}"
OK = "coalesce(status, 'ok') = 'ok'"
AFTER_WAIT_MS = "(total_ms - coalesce(queue_ms, 0) - coalesce(route_ms, 0))"
SERVICE_MS = f"coalesce(service_ms, prefill_ms + decode_ms, {AFTER_WAIT_MS})"
BUSY_MS = f"coalesce({SERVICE_MS}, 0)"
PREFILL_MS = "coalesce(prefill_ms, ttft_ms - coalesce(queue_ms, 0) - coalesce(route_ms, 0))"
DECODE_MS = "coalesce(decode_ms, total_ms - ttft_ms)"
#: the estimate of the prefill/decode split where the logs time neither: an output token takes as long
#: as this many input tokens (the ratio of output to input list prices of most API models, e.g. gpt-4o's
#: $10 and $2.50 per 1M: what the providers' own costs suggest, not a measurement of this fleet)
DECODE_TOKEN_WEIGHT = 4
PREFILL_SPLIT_MEASURED = (f"coalesce({PREFILL_MS} >= 0 AND {DECODE_MS} >= 0 AND {PREFILL_MS} + {DECODE_MS} > 0, "
                          "false)")


def prefill_share_by_tokens(input_expr: str = "coalesce(input_tokens, 0)",
                            output_expr: str = "coalesce(output_tokens, 0)") -> str:
    """The estimated prefill share of time on the model from token counts (SQL expressions, never
    values): ``input / (input + DECODE_TOKEN_WEIGHT * output)``, one half with no tokens."""
    return f"coalesce({input_expr} / nullif({input_expr} + {DECODE_TOKEN_WEIGHT} * {output_expr}, 0), 0.5)"


PREFILL_SHARE = (f"(CASE WHEN {PREFILL_SPLIT_MEASURED} THEN {PREFILL_MS} / ({PREFILL_MS} + {DECODE_MS}) "
                 f"ELSE {prefill_share_by_tokens()} END)")
TPOT_MS = "(CASE WHEN output_tokens > 1 THEN coalesce(total_ms - ttft_ms, decode_ms) / (output_tokens - 1) END)"
TTFT_SPLIT = ("(prefill_ms IS NULL AND decode_ms IS NULL AND ttft_ms IS NOT NULL AND total_ms >= ttft_ms "
              "AND ttft_ms >= coalesce(route_ms, 0) + coalesce(queue_ms, 0))")
FIRST_TOKEN_MS = f"(CASE WHEN {TTFT_SPLIT} THEN ttft_ms - coalesce(route_ms, 0) - coalesce(queue_ms, 0) END)"
AFTER_FIRST_TOKEN_MS = f"(CASE WHEN {TTFT_SPLIT} THEN total_ms - ttft_ms END)"


def served(alias: str = "") -> str:
    """:data:`SERVED` over the columns of table alias ``alias`` (``served("r")``)."""
    return f"NOT coalesce({_qualified(alias, 'cache_hit')}, false)"


def served_requests(alias: str = "") -> str:
    """The served requests of a rollup row (``store.rollup_hourly``): its requests less its cache hits."""
    return f"({_qualified(alias, 'requests')} - {_qualified(alias, 'cache_hits')})"


def _qualified(alias: str, name: str) -> str:
    ref = f"{alias}.{name}" if alias else name
    if not _COLUMN_REF.fullmatch(ref):
        raise ValueError(f"not a column reference: {ref!r}")
    return ref


# ---------------------------------------------------------------- time buckets

TIME_BUCKETS: dict[str, str] = {
    "minute": "date_trunc('minute', {col})",
    "5min": "time_bucket(INTERVAL 5 MINUTE, {col})",
    "15min": "time_bucket(INTERVAL 15 MINUTE, {col})",
    "hour": "date_trunc('hour', {col})",
    "day": "date_trunc('day', {col})",
    "week": "date_trunc('week', {col})",
    "month": "date_trunc('month', {col})",
}


def time_bucket(grain: str, expr: str = "ts") -> str:
    """The start of the ``grain`` bucket (a key of :data:`TIME_BUCKETS`) of the timestamp ``expr``
    (a column or an SQL expression: never a value).

    >>> time_bucket("day", "hour")
    "date_trunc('day', hour)"
    """
    if grain not in TIME_BUCKETS:
        raise InputError(f"unknown time grain {grain}; choose from {', '.join(TIME_BUCKETS)}")
    return TIME_BUCKETS[grain].format(col=expr)


# (longest span in hours, grain) steps, and the grain for an unknown span: sums (spend) read well
# down to the hour; a percentile needs enough requests per bucket, so latency never goes finer than
# 5 minutes nor, over weeks, than a day
GRAIN_RULES: dict[str, tuple[tuple[tuple[float, str], ...], str]] = {
    "spend": (((2 * 24, "hour"), (60 * 24, "day"), (math.inf, "week")), "day"),
    "latency": (((6, "5min"), (2 * 24, "15min"), (21 * 24, "hour"), (math.inf, "day")), "hour"),
}


def grain_for(since, until, kind: str = "spend") -> str:
    """The time grain of a chart over ``[since, until)``: for ``kind="spend"`` (sums) hours up to
    2 days, days up to 60, weeks beyond; for ``kind="latency"`` (percentiles) 5 minutes up to 6 hours,
    15 minutes up to 2 days, hours up to 3 weeks, days beyond. An open span gives days (spend) or
    hours (latency).

    >>> from datetime import datetime
    >>> grain_for(datetime(2026, 1, 1), datetime(2026, 1, 15)), grain_for(None, None, "latency")
    ('day', 'hour')
    """
    steps, unknown = GRAIN_RULES[kind]
    if since is None or until is None:
        return unknown
    hours = (until - since).total_seconds() / 3600
    return next(grain for limit, grain in steps if hours <= limit)


# ---------------------------------------------------------------- pricing keys

#: the service tier as the price rows key it: '' for standard (the sources say standard, default, auto,
#: on_demand or nothing), else the source's word in lower case (batch, flex, priority, ...)
SERVICE_TIER = ("(CASE WHEN lower(trim(coalesce(service_tier, ''))) IN ('', 'standard', 'default', 'auto', "
                "'on_demand', 'on-demand') THEN '' ELSE lower(trim(service_tier)) END)")

#: Context-length tier boundaries: a request is priced at the tier of the largest boundary its input
#: tokens exceed (the whole request at that tier, as the providers bill). These are every tier start
#: of the catalogue (genai-prices 0.2.3); a price row's ``min_input_tokens`` must be one of them.
INPUT_BANDS: tuple[int, ...] = (0, 32_000, 100_000, 128_000, 199_999, 200_000, 256_000, 272_000, 512_000, 524_288)


#: the tenant of idle self-hosted capacity, as SQL text (schema.IDLE_TENANT)
IDLE_LABEL = "'" + schema.IDLE_TENANT.replace("'", "''") + "'"


def idle_labelled(column: str) -> str:
    """``column`` of costed rows (a checked identifier) reading :data:`IDLE_LABEL` on the idle rows, which leave
    the request fields they lack (tier, route, status, ...) blank.

    >>> idle_labelled("sla_tier")
    "CASE WHEN is_idle THEN '(idle capacity)' ELSE sla_tier END"
    """
    return f"CASE WHEN is_idle THEN {IDLE_LABEL} ELSE {column} END"


def input_band(expr: str = "input_tokens") -> str:
    """The largest of :data:`INPUT_BANDS` that the request's input tokens exceed (0 for none or null)."""
    cases = " ".join(f"WHEN {expr} > {b} THEN {b}" for b in sorted(INPUT_BANDS, reverse=True) if b)
    return f"(CASE {cases} ELSE 0 END)"


# ---------------------------------------------------------------- names written into SQL text

def string_literal(text: str) -> str:
    """A name the code itself holds (a JSON key, a field of a log format) as an SQL string literal, its
    quotes doubled. For names from the code's own tables; a value read from a file or a person is bound.

    >>> string_literal("usageDetails"), string_literal("o'brien")
    ("'usageDetails'", "'o''brien'")
    """
    if not isinstance(text, str):
        raise TypeError(f"an SQL string literal must be text, got {type(text).__name__}")
    return "'" + text.replace("'", "''") + "'"


def string_list(texts) -> str:
    """Names as a comma-separated list of SQL string literals (for ``IN (...)`` or a list value).

    >>> string_list(["GENERATION", "EMBEDDING"])
    "'GENERATION', 'EMBEDDING'"
    """
    return ", ".join(string_literal(t) for t in texts)
