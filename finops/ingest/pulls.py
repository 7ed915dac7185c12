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

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import duckdb

from finops import store
from finops.errors import InputError
from finops.ingest.base import IngestOptions
from finops.ingest.ecosystem import litellm_source
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
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

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
    import psycopg
    from psycopg.rows import dict_row

    if page_size < 1:
        raise InputError("the page size must be at least 1")
    pg, where = _pg_connect(dsn)
    ident = f"litellm postgresql://{where}"
    key = _cursor_key("litellm", ident)
    result = PullResult(ident)
    options = IngestOptions(format="litellm", tenant_field=tenant_field)
    stored = store.get_setting(con, key)
    if stored:
        lower = (datetime.fromisoformat(stored["start_time"]) - overlap, "")
    else:
        lower = (since or datetime(1970, 1, 1), "")
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
