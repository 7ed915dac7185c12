"""Pull request logs from where they live: LiteLLM's database and Langfuse's public API.

Each pull reads the source in pages ordered by a key that only grows (LiteLLM: ``startTime`` then
``request_id``; Langfuse: the observation's ``startTime``), loads each page through the source's
adapter (:func:`finops.ingest.ecosystem.litellm_source`, ``langfuse_source``) in one transaction, and
only then stores the page's last key in the store's ``settings`` as the source's cursor. A pull
killed at any point and run again starts from the last committed page: the page in flight is read
again and its rows, already stored or not, load once (loads are idempotent by ``request_id``).

Rows can reach a source after rows that started later (LiteLLM writes spend logs in batches, a long
request's row lands when it ends; Langfuse ingests asynchronously), so each pull starts ``overlap``
before its cursor; what it reads twice is skipped by ``request_id``.

Credentials come from the DSN / environment only and are never logged or shown: messages name the
host, port, database and user at most.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import duckdb

from finops import store
from finops.errors import InputError
from finops.ingest.base import UNIX_EPOCH, IngestOptions
from finops.ingest.ecosystem import langfuse_source, litellm_source
from finops.ingest.loader import IngestResult, ingest_source

log = logging.getLogger("finops")

DEFAULT_OVERLAP = timedelta(minutes=15)


@dataclass
class PullResult:
    source: str                 # what was pulled, without credentials ("litellm postgresql://u@host:5432/db")
    pages: int = 0
    rows_read: int = 0
    rows_ingested: int = 0
    duplicates_skipped: int = 0
    rows_rejected: int = 0
    cursor: dict | None = None  # the stored cursor after the pull
    rejects: list[dict] = field(default_factory=list)

    def add(self, r: IngestResult) -> None:
        self.pages += 1
        self.rows_read += r.rows_read
        self.rows_ingested += r.rows_ingested
        self.duplicates_skipped += r.duplicates_skipped
        self.rows_rejected += r.rows_rejected
        self.rejects.extend(r.rejects[:10])

    def as_dict(self) -> dict:
        return {"source": self.source, "pages": self.pages, "rows_read": self.rows_read,
                "rows_ingested": self.rows_ingested, "duplicates_skipped": self.duplicates_skipped,
                "rows_rejected": self.rows_rejected, "cursor": self.cursor, "rejects": self.rejects}


PageHook = Callable[[int, IngestResult], None]


def _cursor_key(kind: str, ident: str) -> str:
    """The settings key of one source's cursor: its kind and a digest of where it is (no credentials)."""
    return f"pull.{kind}.{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def cursor(con: duckdb.DuckDBPyConnection, kind: str, ident: str) -> dict | None:
    """The stored cursor of a source (``None``: never pulled)."""
    return store.get_setting(con, _cursor_key(kind, ident))


def _naive_utc(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo is not None else t


# ---------------------------------------------------------------- LiteLLM (PostgreSQL)

# keyset pages over LiteLLM_SpendLogs (its columns as LiteLLM's migrations made them, whatever the
# version: SELECT *); the first page of a pull includes its lower bound, the next ones follow the last key
LITELLM_FIRST_PAGE = ('SELECT * FROM "LiteLLM_SpendLogs" WHERE ("startTime", request_id) >= (%s, %s) '
                      'ORDER BY "startTime", request_id LIMIT %s')
LITELLM_NEXT_PAGE = ('SELECT * FROM "LiteLLM_SpendLogs" WHERE ("startTime", request_id) > (%s, %s) '
                     'ORDER BY "startTime", request_id LIMIT %s')


def _jsonable(v):
    if isinstance(v, datetime):
        return _naive_utc(v).isoformat(sep=" ")
    return v


def _pg_connect(dsn: str):
    """A read-only connection to LiteLLM's database; a refusal is one sentence without the DSN."""
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise InputError("pulling from PostgreSQL needs psycopg: pip install -r requirements.txt") from None

    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        raise InputError("the --dsn is not a PostgreSQL connection string (postgresql://USER@HOST:PORT/DB)") \
            from None
    where = (f"{info.get('user') or '(default user)'}@{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
             f"/{info.get('dbname') or '(default database)'}")
    try:
        con = psycopg.connect(dsn, connect_timeout=10)
    except psycopg.OperationalError as exc:
        text = str(exc)
        log.warning("connecting to PostgreSQL %s failed", where)      # the DSN is never logged
        if "password authentication failed" in text or "no password supplied" in text:
            raise InputError(f"PostgreSQL refused the password for {where} (give it in the DSN or PGPASSWORD)") \
                from None
        reason = text.strip().splitlines()[-1] if text.strip() else "no answer"
        reason = reason.split("failed:", 1)[-1].strip()
        raise InputError(f"could not connect to PostgreSQL at {where}: {reason}") from None
    con.read_only = True        # every page is read in its own READ ONLY transaction, ended at once
    return con, where


def pull_litellm(con: duckdb.DuckDBPyConnection, dsn: str, *, page_size: int = 1000,
                 overlap: timedelta = DEFAULT_OVERLAP, since: datetime | None = None,
                 tenant_field: str | None = None, on_page: PageHook | None = None) -> PullResult:
    """Load the rows of LiteLLM's ``LiteLLM_SpendLogs`` not stored yet, page by page.

    Reads by (``startTime``, ``request_id``) from ``overlap`` before the stored cursor (or ``since``, or
    the first row); each page is loaded and committed, ``on_page(page_number, result)`` is called, and
    only then is the page's last key stored as the cursor."""
    if page_size < 1:
        raise InputError("the page size must be at least 1")
    pg, where = _pg_connect(dsn)            # says so in a sentence when psycopg is missing
    import psycopg
    from psycopg.rows import dict_row

    ident = f"litellm postgresql://{where}"
    key = _cursor_key("litellm", ident)
    result = PullResult(ident)
    options = IngestOptions(format="litellm", tenant_field=tenant_field)
    stored = store.get_setting(con, key)
    if stored:
        lower = (datetime.fromisoformat(stored["start_time"]) - overlap, "")
    else:
        lower = (since or UNIX_EPOCH, "")
    try:
        with pg.cursor(row_factory=dict_row) as cur:
            query, params = LITELLM_FIRST_PAGE, lower
            while True:
                try:
                    rows = cur.execute(query, [*params, page_size]).fetchall()
                    pg.rollback()       # end the read-only transaction: no snapshot held across pages
                except psycopg.errors.UndefinedTable:
                    raise InputError(f"there is no LiteLLM_SpendLogs table in {where}: is it LiteLLM's "
                                     "database (DATABASE_URL of the proxy)?") from None
                except psycopg.errors.InsufficientPrivilege:
                    raise InputError(f"the user of {where} may not read LiteLLM_SpendLogs: grant it read "
                                     "access to that table") from None
                if not rows:
                    break
                records = [{k: _jsonable(v) for k, v in r.items()} for r in rows]
                page = ingest_source(con, litellm_source(iter(records), options),
                                     f"{ident} LiteLLM_SpendLogs", "litellm")
                result.add(page)
                if on_page:
                    on_page(result.pages, page)
                last = rows[-1]
                last_ts = _naive_utc(last["startTime"])
                old = store.get_setting(con, key)
                # never move the cursor back (a page of the overlap, read again)
                if not old or datetime.fromisoformat(old["start_time"]) <= last_ts:
                    store.set_setting(con, key, {"start_time": last_ts.isoformat(sep=" "),
                                                 "request_id": last["request_id"]})
                if len(rows) < page_size:
                    break
                query, params = LITELLM_NEXT_PAGE, (last["startTime"], last["request_id"])
    except psycopg.OperationalError as exc:
        log.warning("reading LiteLLM_SpendLogs from %s failed: %s", where, exc)
        raise InputError(f"the connection to PostgreSQL at {where} was lost; what was committed is kept, "
                         "run the pull again to go on") from None
    finally:
        pg.close()
    result.cursor = store.get_setting(con, key)
    return result


# ---------------------------------------------------------------- Langfuse (public API)

LANGFUSE_V2_FIELDS = "core,basic,time,model,usage,metrics"
TRACE_LEAD = timedelta(hours=1)         # a trace starts at most this long before its observations (for the join)
RETRYABLE = (500, 502, 503, 504)


class LangfuseClient:
    """GET on Langfuse's public API with HTTP basic auth (public key : secret key); a 429 waits for its
    Retry-After (seconds or an HTTP date; else X-RateLimit-Reset; else a doubling back-off) within
    ``max_wait_s`` in all; 5xx answers are tried again the same way."""

    def __init__(self, host: str, public_key: str, secret_key: str, *, max_wait_s: float = 300.0,
                 timeout_s: float = 30.0, sleep: Callable[[float], None] = time.sleep):
        parts = urllib.parse.urlsplit(host.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"--host is not an http(s) URL: {host}")
        self.base = host.rstrip("/")
        token = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode()
        self._auth = f"Basic {token}"
        self.max_wait_s, self.timeout_s, self.sleep = max_wait_s, timeout_s, sleep
        self.waited_s = 0.0
        self.rate_limited = 0

    def get(self, path: str, params: dict) -> dict:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        url = f"{self.base}{path}?{query}"
        backoff = 1.0
        while True:
            req = urllib.request.Request(url, headers={"Authorization": self._auth, "Accept": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:     # noqa: S310 (checked)
                    return json.loads(resp.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                code = exc.code
                if code in (401, 403):
                    raise InputError(f"Langfuse at {self.base} refused the keys (HTTP {code}): check "
                                     "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY") from None
                if code == 404:
                    raise InputError(f"{self.base} has no {path} (HTTP 404): is it Langfuse's base URL?") from None
                if code != 429 and code not in RETRYABLE:
                    raise InputError(f"Langfuse at {self.base} answered HTTP {code} for {path}") from None
                wait = _retry_after(exc.headers, backoff) if code == 429 else backoff
                self.rate_limited += code == 429
                if self.waited_s + wait > self.max_wait_s:
                    raise InputError(f"Langfuse at {self.base} kept answering HTTP {code} (waited "
                                     f"{self.waited_s:.0f} s); what was committed is kept, run the pull later") from None
                log.info("Langfuse answered %s for %s: waiting %.1f s", code, path, wait)
                self.sleep(wait)
                self.waited_s += wait
                backoff = min(backoff * 2, 60.0)
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                raise InputError(f"could not reach Langfuse at {self.base}: {getattr(exc, 'reason', exc)}") from None
            except json.JSONDecodeError:
                raise InputError(f"Langfuse at {self.base} answered {path} with something that is not JSON") from None


def _retry_after(headers, default: float) -> float:
    """Seconds to wait from a 429's headers: Retry-After (seconds or an HTTP date), else X-RateLimit-Reset."""
    from email.utils import parsedate_to_datetime

    for name in ("Retry-After", "X-RateLimit-Reset"):
        value = (headers.get(name) or "").strip() if headers else ""
        if not value:
            continue
        try:
            return max(float(value), 0.0)
        except ValueError:
            pass
        try:
            at = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            try:
                at = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        return max((at - datetime.now(UTC)).total_seconds(), 0.0)
    return default


def _iso_z(t: datetime) -> str:
    return _naive_utc(t).isoformat(timespec="milliseconds") + "Z"


def _observations(client: LangfuseClient, api: str, start: datetime, end: datetime, page_size: int):
    """Every observation with startTime in [start, end), a page (list of dicts) at a time."""
    params = {"fromStartTime": _iso_z(start), "toStartTime": _iso_z(end), "limit": page_size}
    if api == "v2":
        params["fields"] = LANGFUSE_V2_FIELDS
        while True:
            doc = client.get("/api/public/v2/observations", params)
            yield list(doc.get("data") or [])
            nxt = (doc.get("meta") or {}).get("cursor")
            if not nxt:
                return
            params = {**params, "cursor": nxt}
    page = 1
    while True:
        doc = client.get("/api/public/observations", {**params, "page": page})
        data = list(doc.get("data") or [])
        yield data
        total = (doc.get("meta") or {}).get("totalPages")
        if not data or (total is not None and page >= int(total)):
            return
        page += 1


def _traces(client: LangfuseClient, start: datetime, end: datetime, page_size: int) -> dict[str, dict]:
    """Traces with a timestamp in [start - TRACE_LEAD, end): id -> trace (userId, sessionId, tags...)."""
    out: dict[str, dict] = {}
    page = 1
    while True:
        doc = client.get("/api/public/traces", {"fromTimestamp": _iso_z(start - TRACE_LEAD),
                                                "toTimestamp": _iso_z(end), "page": page, "limit": page_size})
        data = list(doc.get("data") or [])
        out.update({t["id"]: t for t in data if isinstance(t, dict) and t.get("id")})
        total = (doc.get("meta") or {}).get("totalPages")
        if not data or (total is not None and page >= int(total)):
            return out
        page += 1


def pull_langfuse(con: duckdb.DuckDBPyConnection, host: str, *, api: str = "v2", page_size: int = 100,
                  overlap: timedelta = DEFAULT_OVERLAP, since: datetime | None = None, traces: bool = True,
                  window: timedelta = timedelta(hours=24), max_wait_s: float = 300.0,
                  public_key: str | None = None, secret_key: str | None = None, now: datetime | None = None,
                  sleep: Callable[[float], None] = time.sleep, on_page: PageHook | None = None) -> PullResult:
    """Load the observations Langfuse holds that are not stored yet.

    The span from ``overlap`` before the stored cursor (or ``since``; or everything, the first time) to now
    is read in slices of ``window`` by ``fromStartTime`` / ``toStartTime`` (whatever order Langfuse pages
    in); every page of a slice is loaded and committed, and the slice's end becomes the cursor only once
    the whole slice is. Keys: ``public_key`` / ``secret_key``, else ``LANGFUSE_PUBLIC_KEY`` /
    ``LANGFUSE_SECRET_KEY``."""
    import os

    if api not in ("v1", "v2"):
        raise InputError("the Langfuse API is v1 or v2")
    if page_size < 1:
        raise InputError("the page size must be at least 1")
    public_key = public_key or os.environ.get("LANGFUSE_PUBLIC_KEY")
    secret_key = secret_key or os.environ.get("LANGFUSE_SECRET_KEY")
    if not public_key or not secret_key:
        raise InputError("set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY (the project's API keys) in the environment")
    client = LangfuseClient(host, public_key, secret_key, max_wait_s=max_wait_s, sleep=sleep)
    parts = urllib.parse.urlsplit(client.base)
    ident = f"langfuse {parts.scheme}://{parts.netloc}{parts.path} {public_key}"
    result = PullResult(f"langfuse {client.base}")
    key = _cursor_key("langfuse", ident)
    options = IngestOptions(format="langfuse")
    stored = store.get_setting(con, key)
    end_all = _naive_utc(now or datetime.now(UTC))
    if stored:
        start = datetime.fromisoformat(stored["start_time"]) - overlap
    else:
        start = since or UNIX_EPOCH
    slice_span = window if (stored or since) else end_all - start      # the first full pull: one slice
    while start < end_all:
        end = min(start + slice_span, end_all)
        joined = _traces(client, start, end, page_size) if traces else {}
        for obs in _observations(client, api, start, end, page_size):
            calls = [o for o in obs if isinstance(o, dict)]
            if not any(str(o.get("type") or "GENERATION").upper() in ("GENERATION", "EMBEDDING") for o in calls):
                continue        # a page of spans and events only: no model call to load
            page = ingest_source(con, langfuse_source(iter(calls), joined, options),
                                 f"{result.source} observations", "langfuse")
            result.add(page)
            if on_page:
                on_page(result.pages, page)
        old = store.get_setting(con, key)
        if not old or datetime.fromisoformat(old["start_time"]) <= end:
            store.set_setting(con, key, {"start_time": end.isoformat(sep=" ")})
        start = end
    result.cursor = store.get_setting(con, key)
    return result
