"""Billing lines: what the provider says it billed, per day, from its usage and cost APIs.

These are daily (or hourly) aggregates per model / project / API key, not requests, so they are stored
apart from ``requests`` in ``billing_lines`` (finops/store.py) and read by the reconciliation view: "your
logs say $X, the provider billed $Y" (:func:`billed_by_day_model`).

Sources, recognised from the file's content (a page of the API's JSON, or one page per line):

==================  ===========================================================================  ==========
source              response                                                                     amount
==================  ===========================================================================  ==========
openai-costs        ``GET /v1/organization/costs``: buckets of ``organization.costs.result``      ``amount.value`` (USD)
openai-usage        ``GET /v1/organization/usage/completions`` (and the other usage endpoints)    none: tokens, requests
anthropic-cost      Anthropic's cost report (``/v1/organizations/cost_report``, the analytics     ``amount``: cents as a
                    ``cost_report``): buckets of results with ``amount`` and ``currency``          decimal string
anthropic-usage     Anthropic's usage report (``usage_report/messages``, the analytics            none: tokens, requests
                    ``usage_report``): ``uncached_input_tokens``, ``cache_creation``, ...
==================  ===========================================================================  ==========

Tokens follow :mod:`finops.schema`: ``input_tokens`` counts cache reads and writes (Anthropic reports the
uncached part, the reads and the writes apart: they are added). OpenAI's cost lines name no model; their
``line_item`` does (``"gpt-4o-mini-2024-07-18, input"``): the part before the last comma is the model.

A file loads once (its sha256); a file that cannot be read is refused whole, naming the file, the bucket
(``row``) and the field; a line whose key (source, bucket, model, project, API key, tier, line item) is
already stored from another file is replaced by the newer file's (a report re-downloaded after the day
closed has the final numbers).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path

import duckdb
import pandas as pd

from finops import store
from finops.errors import InputError
from finops.ingest.base import json_kind

#: the stored columns, in table order (the CREATE TABLE is in finops/store.py)
LINE_COLUMNS = ("source", "provider", "day", "bucket_start", "bucket_end", "model", "project", "api_key_id",
                "service_tier", "line_item", "input_tokens", "cached_input_tokens", "cache_write_tokens",
                "cache_write_1h_tokens", "output_tokens", "requests", "amount_usd", "currency", "file_name",
                "file_sha256", "loaded_at")
#: the columns that say which line a line is (a newer file's line with the same key replaces it)
KEY_COLUMNS = ("source", "bucket_start", "model", "project", "api_key_id", "service_tier", "line_item")
PROVIDER = {"openai-costs": "openai", "openai-usage": "openai", "anthropic-cost": "anthropic",
            "anthropic-usage": "anthropic"}


@dataclass(frozen=True)
class BillingLoad:
    file: str
    source: str | None
    lines_read: int
    lines_added: int
    lines_replaced: int
    already_loaded: bool = False

    def as_dict(self) -> dict:
        return {"file": self.file, "source": self.source, "lines_read": self.lines_read,
                "lines_added": self.lines_added, "lines_replaced": self.lines_replaced,
                "already_loaded": self.already_loaded}


# ---------------------------------------------------------------- reading a file

#: the largest usage or cost report taken: daily buckets are small (a year of one per model and project is a few
#: MB); a file past this is no report, and it would be held in memory whole
MAX_BILLING_BYTES = 256 * 1024 * 1024


def _pages(path: Path, name: str) -> list[dict]:
    if path.stat().st_size > MAX_BILLING_BYTES:
        raise InputError(f"is {path.stat().st_size / 1024 ** 2:,.0f} MiB, over the {MAX_BILLING_BYTES // 1024 ** 2} MiB "
                         "a usage or cost report is read to: load it a month at a time", file=name)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"not a text file (a usage or cost report is JSON): the byte at offset {exc.start:,} is not UTF-8",
                         file=name) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror}", file=name) from None
    if not text.strip():
        raise InputError("the file is empty", file=name)
    try:
        doc = json.loads(text)
        docs = doc if isinstance(doc, list) else [doc]
    except json.JSONDecodeError:
        docs = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg})", file=name, row=lineno) from None
    for i, d in enumerate(docs, start=1):
        if not isinstance(d, dict) or not isinstance(d.get("data"), list):
            raise InputError("expected a usage or cost API page: an object with a \"data\" list of time buckets",
                             file=name, row=i, field="data")
    return docs


def _source_of(result: dict) -> str | None:
    kind = result.get("object")
    if kind == "organization.costs.result":
        return "openai-costs"
    if isinstance(kind, str) and kind.startswith("organization.usage."):
        return "openai-usage"
    if "amount" in result and "currency" in result:
        return "anthropic-cost"
    if "uncached_input_tokens" in result or "cache_read_input_tokens" in result:
        return "anthropic-usage"
    return None


def _int(v, where: str, name: str, row: int):
    if v is None:
        return None
    # a whole number from 0 up to what the store's BIGINT holds (NaN, infinity and 2^63 stopped the load with
    # Python's or DuckDB's own error)
    if (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v != int(v) or v < 0
            or v >= 2 ** 63):
        raise InputError(f"{v!r} is not a count of tokens or requests", file=name, row=row, field=where)
    return int(v)


def _decimal(v, where: str, name: str, row: int) -> Decimal:
    try:
        d = Decimal(str(v))
    except InvalidOperation:
        raise InputError(f"{v!r} is not an amount", file=name, row=row, field=where) from None
    if not d.is_finite():
        raise InputError(f"{v!r} is not a finite amount", file=name, row=row, field=where)
    return d


def _time(v, where: str, name: str, row: int) -> datetime:
    try:
        if isinstance(v, int | float) and not isinstance(v, bool):
            return datetime.fromtimestamp(v, UTC).replace(tzinfo=None)
        t = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):       # NaN, or a number past year 9999 (1e300)
        raise InputError(f"{v!r} is not a time (Unix seconds or RFC 3339)", file=name, row=row,
                         field=where) from None
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def _sum(*vals):
    have = [v for v in vals if v is not None]
    return sum(have) if have else None


def _text(r: dict, key: str, where: str, name: str, row: int) -> str | None:
    """A result's text field: a text, a number as Python writes it, or None; an object, a list or a boolean
    refuses the file naming the field (a report's names and ids are never those)."""
    v = r.get(key)
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):
        return str(v)
    raise InputError(f"{key} is a text, found {json_kind(v)}", file=name, row=row, field=f"{where}.{key}")


def _openai_model(line_item: str | None) -> str | None:
    """``"gpt-4o-mini-2024-07-18, cached input"`` -> ``"gpt-4o-mini-2024-07-18"``; a line item with no comma
    (a tool's calls, storage) names no model."""
    if line_item and ", " in line_item:
        return line_item.rsplit(", ", 1)[0].strip() or None
    return None


def _line(source: str, r: dict, where: str, name: str, row: int) -> dict:
    """One result of a bucket as a billing line (without its bucket)."""
    def n(key: str):
        return _int(r.get(key), f"{where}.{key}", name, row)

    def t(key: str):
        return _text(r, key, where, name, row)

    line = {k: None for k in LINE_COLUMNS}
    line.update(source=source, provider=PROVIDER[source], api_key_id=t("api_key_id"),
                project=t("project_id") or t("workspace_id"), model=t("model"), service_tier=t("service_tier"))
    if source == "openai-costs":
        amount = r.get("amount") if isinstance(r.get("amount"), dict) else {}
        if amount.get("value") is None:
            raise InputError("a cost result without amount.value", file=name, row=row, field=f"{where}.amount")
        line.update(line_item=t("line_item"), model=_openai_model(t("line_item")),
                    amount_usd=_decimal(amount["value"], f"{where}.amount.value", name, row),
                    currency=(_text(amount, "currency", f"{where}.amount", name, row) or "usd").upper())
    elif source == "openai-usage":
        writes = n("input_cache_write_tokens")
        line.update(line_item=(t("object") or "").removeprefix("organization.usage.").removesuffix(".result"),
                    input_tokens=n("input_tokens"), cached_input_tokens=n("input_cached_tokens"),
                    cache_write_tokens=writes, output_tokens=n("output_tokens"), requests=n("num_model_requests"))
        if r.get("batch") is True:
            line["service_tier"] = "batch"
    elif source == "anthropic-cost":
        if r.get("amount") is None:
            raise InputError("a cost result without amount", file=name, row=row, field=f"{where}.amount")
        cents = _decimal(r["amount"], f"{where}.amount", name, row)
        parts = [p for p in (t("description"), t("cost_type"), t("token_type")) if p]
        line.update(line_item=" / ".join(dict.fromkeys(parts)) or None, amount_usd=cents / 100,
                    currency=(t("currency") or "USD").upper(), requests=n("requests"))
    else:   # anthropic-usage
        cache = r.get("cache_creation") if isinstance(r.get("cache_creation"), dict) else {}
        uncached, read = n("uncached_input_tokens"), n("cache_read_input_tokens")
        w5 = _int(cache.get("ephemeral_5m_input_tokens"), f"{where}.cache_creation.ephemeral_5m_input_tokens",
                  name, row)
        w1h = _int(cache.get("ephemeral_1h_input_tokens"), f"{where}.cache_creation.ephemeral_1h_input_tokens",
                   name, row)
        line.update(line_item="messages", input_tokens=_sum(uncached, read, w5, w1h), cached_input_tokens=read,
                    cache_write_tokens=w5, cache_write_1h_tokens=w1h, output_tokens=n("output_tokens"),
                    requests=n("requests"))
    if line["currency"] not in (None, "USD"):
        raise InputError(f"currency {line['currency']}: only USD amounts are kept", file=name, row=row,
                         field=f"{where}.currency")
    return line


def read_billing_file(path: str | Path, name: str | None = None) -> tuple[str | None, list[dict]]:
    """``(source, lines)`` of one usage or cost API file; raises :class:`InputError` on anything unreadable."""
    path = Path(path)
    name = name or path.name
    source, lines, bucket_no = None, [], 0
    for page in _pages(path, name):
        for bucket in page["data"]:
            bucket_no += 1
            if not isinstance(bucket, dict) or not isinstance(bucket.get("results"), list):
                raise InputError("expected a time bucket with a results list", file=name, row=bucket_no,
                                 field="results")
            start_key = "start_time" if "start_time" in bucket else "starting_at"
            end_key = "end_time" if "end_time" in bucket else "ending_at"
            start = _time(bucket.get(start_key), start_key, name, bucket_no)
            end = _time(bucket.get(end_key), end_key, name, bucket_no) if bucket.get(end_key) is not None else None
            for j, r in enumerate(bucket["results"]):
                where = f"results[{j}]"
                kind = _source_of(r) if isinstance(r, dict) else None
                if kind is None:
                    raise InputError("not a result of the OpenAI Usage/Costs APIs or Anthropic's usage/cost "
                                     "report", file=name, row=bucket_no, field=where)
                if source is not None and kind != source:
                    raise InputError(f"mixes {source} and {kind} results: load each report as its own file",
                                     file=name, row=bucket_no, field=where)
                source = kind
                line = _line(kind, r, where, name, bucket_no)
                line.update(day=start.date(), bucket_start=start, bucket_end=end)
                lines.append(line)
    return source, lines


# ---------------------------------------------------------------- the store

def load_billing_file(con: duckdb.DuckDBPyConnection, path: str | Path, name: str | None = None) -> BillingLoad:
    """Load one usage or cost API file into ``billing_lines``: once per file (its sha256), all or nothing."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"is a folder: give the report files in it (e.g. {path / '*.json'})", file=str(path))
    if not path.is_file():
        raise InputError("no such file", file=str(path))
    name = name or path.name
    source, lines = read_billing_file(path, name)       # first: it refuses a file too large to hash in memory
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    if con.execute("SELECT count(*) FROM billing_lines WHERE file_sha256 = ?", [sha]).fetchall()[0][0]:
        return BillingLoad(name, None, 0, 0, 0, already_loaded=True)
    if not lines:
        return BillingLoad(name, source, 0, 0, 0)
    now = datetime.now(UTC).replace(tzinfo=None)
    for line in lines:
        line.update(file_name=name, file_sha256=sha, loaded_at=now)
    frame = pd.DataFrame([[line[c] for c in LINE_COLUMNS] for line in lines], columns=list(LINE_COLUMNS))
    frame["amount_usd"] = frame["amount_usd"].map(lambda d: None if d is None else str(d))
    same = " AND ".join(f"b.{c} IS NOT DISTINCT FROM n.{c}" for c in KEY_COLUMNS)
    cols = ", ".join(LINE_COLUMNS)
    casts = ", ".join("CAST(amount_usd AS DECIMAL(38,12))" if c == "amount_usd" else c for c in LINE_COLUMNS)
    con.register("_billing_in", frame)
    try:
        with store.transaction(con):
            replaced = con.execute(f"SELECT count(*) FROM billing_lines b WHERE EXISTS "
                                   f"(SELECT 1 FROM _billing_in n WHERE {same})").fetchall()[0][0]
            con.execute(f"DELETE FROM billing_lines b WHERE EXISTS (SELECT 1 FROM _billing_in n WHERE {same})")
            con.execute(f"INSERT INTO billing_lines ({cols}) SELECT {casts} FROM _billing_in")
            store.bump_data_version(con)
    finally:
        con.unregister("_billing_in")
    return BillingLoad(name, source, len(lines), len(lines) - replaced, replaced)


def _period_where(since: date | datetime | None, until: date | datetime | None) -> tuple[str, list]:
    """The cost lines of the days in ``[since, until)``: a datetime bound inside a day counts that whole day
    (billing lines are daily)."""
    where, params = ["amount_usd IS NOT NULL"], []
    if since is not None:
        where.append("day >= CAST(? AS DATE)")
        params.append(since.date() if isinstance(since, datetime) else since)
    if until is not None:
        # a datetime bound that is not midnight still counts its own day's lines
        where.append("day < CAST(? AS DATE)" if not isinstance(until, datetime) or until.time() == datetime.min.time()
                     else "day <= CAST(? AS DATE)")
        params.append(until.date() if isinstance(until, datetime) else until)
    return " AND ".join(where), params


def billed_by_day_model(con: duckdb.DuckDBPyConnection, since: date | datetime | None = None,
                        until: date | datetime | None = None) -> pd.DataFrame:
    """What the providers billed: ``provider, day, model, amount_usd`` summed over the cost lines of the
    days in ``[since, until)`` (either may be None), ordered by day, provider and model.

    Usage lines carry no amount and are not counted; a cost line that names no model (a tool's calls)
    has model NULL.
    """
    where, params = _period_where(since, until)
    return con.execute(
        "SELECT provider, day, model, sum(amount_usd) AS amount_usd FROM billing_lines "
        f"WHERE {where} GROUP BY provider, day, model ORDER BY day, provider, model NULLS LAST",
        params).df()


@dataclass(frozen=True)
class Billed:
    """What one provider billed for one model (None: a line that names no model) over a period, exactly."""
    provider: str
    model: str | None
    amount_usd: Decimal
    first_day: date
    last_day: date


def billed_by_model(con: duckdb.DuckDBPyConnection, since: date | datetime | None = None,
                    until: date | datetime | None = None) -> list[Billed]:
    """The cost lines of :func:`billed_by_day_model`'s period summed per provider and model as exact
    decimals (the reconciliation's "the provider billed $Y"), ordered by provider and model."""
    where, params = _period_where(since, until)
    rows = con.execute(
        "SELECT provider, model, sum(amount_usd), min(day), max(day) FROM billing_lines "
        f"WHERE {where} GROUP BY provider, model ORDER BY provider, model NULLS LAST", params).fetchall()
    return [Billed(p, m, Decimal(a), d0, d1) for p, m, a, d0, d1 in rows]


def billed_providers(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The providers with any cost line stored (in any period)."""
    return {r[0] for r in con.execute(
        "SELECT DISTINCT provider FROM billing_lines WHERE amount_usd IS NOT NULL").fetchall()}


def billing_lines(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every stored billing line, newest bucket first."""
    return con.execute("SELECT * FROM billing_lines ORDER BY bucket_start DESC, source, model NULLS LAST").df()


__all__ = ["KEY_COLUMNS", "LINE_COLUMNS", "Billed", "BillingLoad", "billed_by_day_model", "billed_by_model",
           "billed_providers", "billing_lines",
           "load_billing_file", "read_billing_file"]
