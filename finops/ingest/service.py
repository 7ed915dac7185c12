"""The ingester: one process-level service that keeps the store fed, whoever has a browser tab open.

It runs inside the process that holds the store (DuckDB lets one process write it): a background thread of
the dashboard's server, or ``python -m finops serve-ingest`` when no dashboard runs. Same code either way,
:class:`Ingester`, acting as :func:`finops.access.system`, on its own cursor of the process's connection.

Sources (``ingest_sources``) are configured by an admin only (:func:`add_source`, :func:`remove_source`
require ``edit_settings``): nothing else is followed, watched, pulled or scraped. An engineer may pause or
resume a configured source (:func:`set_enabled`, ``follow``). Kinds (:data:`KINDS`):

- ``follow``: a growing log, read from its persisted offset (stored once the batch committed: a restart
  resumes; a line still being written waits). A truncated log is read again from 0, a rotated one (a new
  file under the name) first has the rest of the old file read where it now lies in the same folder, then
  the new file from 0; loads are idempotent, so nothing is stored twice.
- ``watch``: a folder's files matching a glob, each loaded once it stopped changing (settled for
  :data:`SETTLE_S`); tracked by path, size and mtime (``ingest_files``) so a file is not hashed again, and
  the loader's own sha check keeps a copy under another name from loading twice.
- ``pull-litellm`` / ``pull-langfuse`` / ``scrape-vllm``: :mod:`finops.ingest.pulls` and
  :mod:`finops.ingest.engine` every ``every_s`` seconds. Credentials are never stored: a source keeps the
  NAME of an environment variable (or secrets key) and the ingester reads it when the pull runs.
- OTLP/HTTP traces: a receiver (:mod:`finops.ingest.otlp`) spools each acknowledged POST; each tick
  drains the spool into the store.

Each tick runs every enabled source; one source's error is recorded in ``ingest_status`` (state, last run,
last success, rows, last error in words) and never stops the others.

The ingester also serves the store it holds to every other process (:class:`ControlServer`): HTTP on
127.0.0.1, a random port and token written to ``<store>.ingester.json`` (mode 0600, removed on a clean
exit; one naming a dead process is ignored). Its SQL sessions (:class:`SqlSessions`, the protocol in
:mod:`finops.remote`) are what ``store.connect`` returns elsewhere while this process holds the file: a
second dashboard, ``report``, ``alerts``, any command. ``python -m finops ingest`` streams a file to it
and gets the same summary (:func:`control_for`, :class:`ControlClient`); ``/command`` runs ``report`` here.
"""
from __future__ import annotations

import contextlib
import glob as globlib
import hmac
import http.client
import http.server
import json
import logging
import os
import re
import secrets as pysecrets
import shutil
import socket
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pandas as pd

from finops import access, remote, store
from finops.errors import InputError
from finops.ingest.base import IngestOptions

log = logging.getLogger("finops")

#: kind -> what it is, in words
KINDS: dict[str, str] = {
    "follow": "a growing log file, followed line by line",
    "watch": "a folder whose new files are loaded",
    "pull-litellm": "LiteLLM's spend logs, pulled from its PostgreSQL database",
    "pull-langfuse": "Langfuse's observations, pulled from its API",
    "scrape-vllm": "vLLM's engine metrics, scraped from /metrics",
}
SCHEDULED = ("pull-litellm", "pull-langfuse", "scrape-vllm")
OTLP_ID = 0                     #: the status row of the OTLP receiver (sources count from 1)
OTLP_SETTING = "ingest.otlp_port"
TICK_S = 2.0                    #: seconds between ticks while a source is enabled
IDLE_TICK_S = 10.0              #: ... and while none is (a new source wakes the loop at once)
SETTLE_S = 2.0                  #: a watched file unchanged for this long is complete
DEFAULT_EVERY_S = {"pull-litellm": 300.0, "pull-langfuse": 300.0, "scrape-vllm": 15.0}
MIN_EVERY_S = 1.0
#: the longest interval a scheduled source takes: a week (inf was stored, and the source never ran again)
MAX_EVERY_S = 7 * 24 * 3600.0
CONTROL_MAX_BYTES = 200 * 1024 ** 2     #: a file the command line streams to the service (Streamlit's upload limit)
SQL_IDLE_S = float(os.environ.get("FINOPS_SQL_IDLE_S") or 600.0)   #: a served SQL session idle this long is closed
SQL_CLOSE_WAIT_S = 5.0
SQL_MAX_BYTES = 2 * 1024 ** 3           #: the largest statement or registered table another process may send

_TABLES = (
    """CREATE TABLE IF NOT EXISTS ingest_sources (id BIGINT, kind VARCHAR, target VARCHAR, format VARCHAR,
  pattern VARCHAR, credential VARCHAR, every_s DOUBLE, replica VARCHAR, enabled BOOLEAN, added_by VARCHAR,
  added_at TIMESTAMP)""",
    """CREATE TABLE IF NOT EXISTS ingest_status (source_id BIGINT, state VARCHAR, offset_bytes BIGINT,
  file_id VARCHAR, last_run TIMESTAMP, last_ok TIMESTAMP, last_error VARCHAR, last_error_at TIMESTAMP,
  rows_total BIGINT, last_rows BIGINT)""",
    """CREATE TABLE IF NOT EXISTS ingest_files (source_id BIGINT, path VARCHAR, size_bytes BIGINT, mtime DOUBLE,
  loaded_at TIMESTAMP, rows BIGINT, error VARCHAR)""",
)
_WAKE: set[threading.Event] = set()      # each running ingester's; a configuration change sets them all


def _wake_all() -> None:
    """A source was added, removed, started or stopped: every ingester of this process ticks at once."""
    for event in list(_WAKE):
        event.set()


def ensure_tables(con: duckdb.DuckDBPyConnection) -> None:
    """The ingester's three tables (sources, status, files seen), created if missing."""
    with store.WRITE_LOCK:
        for ddl in _TABLES:
            con.execute(ddl)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# ---------------------------------------------------------------- configuration (admin only)

@dataclass(frozen=True)
class LiveSource:
    id: int
    kind: str
    target: str                 # a path, a folder, a URL or host; "" for litellm (the DSN is a secret)
    format: str | None = None
    pattern: str | None = None  # a watched folder's glob
    credential: str | None = None   # the NAME of an env var / secrets key, never its value
    every_s: float | None = None
    replica: str | None = None
    enabled: bool = True

    def label(self, full_paths: bool = True) -> str:
        """What the source is, as a page or log may show it (no credentials); without ``full_paths`` a
        file or folder is named by its last part only (a server's paths are for admins)."""
        where = self.target if full_paths else Path(self.target).name
        if self.kind == "follow":
            return f"follow {where}" + (f" as {self.format}" if self.format else "")
        if self.kind == "watch":
            return f"watch {where}/{self.pattern or '*'}" + (f" as {self.format}" if self.format else "")
        if self.kind == "pull-litellm":
            return f"pull litellm (DSN from ${self.credential})"
        if self.kind == "pull-langfuse":
            return f"pull langfuse {mask_url(self.target)}"
        return f"scrape vllm {mask_url(self.target)}" + (f" as {self.replica}" if self.replica else "")


def mask_url(url: str) -> str:
    """A URL without its user, password and query (where tokens live).

    >>> mask_url("http://u:pw@gpu-a:8000/metrics?token=x"), mask_url("postgresql://lite:pw@db:5432/litellm")
    ('http://gpu-a:8000/metrics', 'postgresql://db:5432/litellm')
    """
    parts = urllib.parse.urlsplit(url or "")
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else "…"


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _env_name(name: str | None, what: str) -> str:
    name = (name or "").strip().lstrip("$")
    if not _ENV_NAME.match(name):
        raise InputError(f"{what} must be the NAME of an environment variable or secrets key (e.g. LITELLM_DSN), "
                         "never the secret itself")
    return name


def sources(con: duckdb.DuckDBPyConnection) -> list[LiveSource]:
    """The configured sources, oldest first."""
    try:
        rows = con.execute("SELECT id, kind, target, format, pattern, credential, every_s, replica, enabled "
                           "FROM ingest_sources ORDER BY id").fetchall()
    except duckdb.CatalogException:
        return []
    return [LiveSource(*r) for r in rows]


def source(con: duckdb.DuckDBPyConnection, source_id: int) -> LiveSource:
    for s in sources(con):
        if s.id == int(source_id):
            return s
    raise InputError(f"there is no ingester source {source_id} (python -m finops serve-ingest --list)")


def add_source(con: duckdb.DuckDBPyConnection, kind: str, target: str = "", *, format: str | None = None,
               pattern: str | None = None, credential: str | None = None, every_s: float | None = None,
               replica: str | None = None) -> LiveSource:
    """Configure a source (admin only). A path is stored absolute; a credential only by its NAME."""
    access.require("edit_settings")
    if kind not in KINDS:
        raise InputError(f"unknown source kind {kind!r}: one of {', '.join(KINDS)}")
    target = (target or "").strip()
    if format:
        from finops.ingest.base import adapter_named
        adapter_named(format)           # an unknown format is refused now, not at the first tick
    if kind in ("follow", "watch"):
        if not target:
            raise InputError(f"a {kind} source needs a {'file' if kind == 'follow' else 'folder'} path")
        target = str(Path(target).expanduser().resolve())
        if kind == "follow" and Path(target).is_dir():
            raise InputError("is a folder: watch it (a watch source), or follow one of its files", file=target)
        if kind == "watch":
            if Path(target).is_file():
                raise InputError("is a file: follow it (a follow source), or watch its folder", file=target)
            if not Path(target).is_dir():
                raise InputError("no such folder", file=target)
            pattern = (pattern or "*").strip()
            if "/" in pattern or ".." in pattern:
                raise InputError("the glob matches file names in the folder itself (e.g. *.jsonl), no / or ..")
    elif kind == "pull-litellm":
        credential, target = _env_name(credential or "FINOPS_LITELLM_DSN", "--dsn-env"), ""
    elif kind == "pull-langfuse":
        parts = urllib.parse.urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
            raise InputError("a langfuse source needs --host https://HOST (keys come from the environment)")
        names = (credential or "LANGFUSE_PUBLIC_KEY,LANGFUSE_SECRET_KEY").split(",")
        if len(names) != 2:
            raise InputError("--key-env names two variables: PUBLIC,SECRET")
        credential = ",".join(_env_name(n, "--key-env") for n in names)
    else:
        parts = urllib.parse.urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(f"a scrape source needs an http(s) URL, not {target!r}")
        if parts.username or parts.password:
            raise InputError("give the metrics URL without a user or password")
    if kind in SCHEDULED:
        every_s = float(every_s if every_s is not None else DEFAULT_EVERY_S[kind])
        if not MIN_EVERY_S <= every_s <= MAX_EVERY_S:
            raise InputError(f"a pull or scrape runs every {MIN_EVERY_S:g} to {MAX_EVERY_S:,.0f} seconds (a week), "
                             f"not {every_s:,g}", field="every_s")
    else:
        every_s = None
    ensure_tables(con)
    with store.transaction(con):
        if con.execute("SELECT count(*) FROM ingest_sources WHERE kind = ? AND target = ? AND "
                       "coalesce(pattern, '') = ? AND coalesce(credential, '') = ?",
                       [kind, target, pattern or "", credential or ""]).fetchall()[0][0]:
            raise InputError(f"that {kind} source is configured already (python -m finops serve-ingest --list)")
        new_id = con.execute("SELECT coalesce(max(id), 0) + 1 FROM ingest_sources").fetchall()[0][0]
        con.execute("INSERT INTO ingest_sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, TRUE, ?, ?)",
                    [new_id, kind, target, format or None, pattern, credential, every_s, replica or None,
                     access.current().user or "local", _now()])
        store.bump_data_version(con)
    _wake_all()
    return source(con, new_id)


def remove_source(con: duckdb.DuckDBPyConnection, source_id: int) -> LiveSource:
    """Remove a source and what the ingester kept of it (admin only); its loaded rows stay."""
    access.require("edit_settings")
    gone = source(con, source_id)
    with store.transaction(con):
        for table, key in (("ingest_sources", "id"), ("ingest_status", "source_id"), ("ingest_files", "source_id")):
            con.execute(f"DELETE FROM {table} WHERE {key} = ?", [gone.id])
        store.bump_data_version(con)
    _wake_all()
    return gone


def set_enabled(con: duckdb.DuckDBPyConnection, source_id: int, enabled: bool) -> LiveSource:
    """Start or stop following a configured source (engineer): only configured sources can be followed."""
    access.require("follow")
    s = source(con, source_id)
    with store.transaction(con):
        con.execute("UPDATE ingest_sources SET enabled = ? WHERE id = ?", [bool(enabled), s.id])
        store.bump_data_version(con)
    _wake_all()
    return source(con, s.id)


def follow_path(con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> LiveSource:
    """Follow a log: allowed only for a path an admin configured (then it is resumed); any other path is
    refused as an access decision, whoever asks (an admin adds it first with :func:`add_source`)."""
    access.require("follow")
    wanted = str(Path(path).expanduser().resolve())
    for s in sources(con):
        if s.kind == "follow" and s.target == wanted:
            return set_enabled(con, s.id, True)
    raise access.AccessDenied(f"{Path(wanted).name} is not a log an admin configured to follow; an admin adds it "
                              "on the Data page (or python -m finops serve-ingest --add-follow PATH).")


def configured_otlp_port(con: duckdb.DuckDBPyConnection) -> int | None:
    """The OTLP/HTTP port the dashboard's ingester listens on (127.0.0.1), None: off (the default)."""
    port = store.get_setting(con, OTLP_SETTING)
    return int(port) if port else None


def check_otlp_port(port: int | None) -> None:
    """Refuse an OTLP port that is no TCP port (InputError): 0 or None is off."""
    if port is not None and not 0 <= int(port) <= 65535:
        raise InputError("the OTLP port is a number from 1 to 65535 (0: off)")


def set_otlp_port(con: duckdb.DuckDBPyConnection, port: int | None) -> None:
    """Turn the dashboard's OTLP/HTTP receiver on (a port on 127.0.0.1) or off (None or 0); admin only."""
    access.require("edit_settings")
    check_otlp_port(port)
    store.set_setting(con, OTLP_SETTING, int(port) if port else None)
    _wake_all()


# ---------------------------------------------------------------- status

@dataclass
class Status:
    source_id: int
    state: str = "waiting"
    offset_bytes: int = 0
    file_id: str | None = None
    last_run: datetime | None = None
    last_ok: datetime | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    rows_total: int = 0
    last_rows: int = 0


def _status(con, source_id: int) -> Status:
    rows = con.execute("SELECT * FROM ingest_status WHERE source_id = ?", [source_id]).fetchall()
    return Status(*rows[0]) if rows else Status(source_id)


def _save_status(con, s: Status) -> None:
    values = [s.source_id, s.state, s.offset_bytes, s.file_id, s.last_run, s.last_ok, s.last_error,
              s.last_error_at, s.rows_total, s.last_rows]
    with store.transaction(con):
        con.execute("DELETE FROM ingest_status WHERE source_id = ?", [s.source_id])
        con.execute("INSERT INTO ingest_status VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)


def status_frame(con: duckdb.DuckDBPyConnection, full_paths: bool = True) -> pd.DataFrame:
    """One row per source (and the OTLP receiver when it ran): id, source, state, last load (UTC), rows
    loaded, last error in words. Read afresh (not cached): status writes do not bump the data version.
    ``full_paths=False`` names followed files and folders by their last part (see :meth:`LiveSource.label`)."""
    cols = ["id", "source", "state", "enabled", "last_run", "last_ok", "rows_total", "last_error"]
    try:
        rows = con.execute(
            "SELECT coalesce(s.id, st.source_id), s.kind, s.target, s.format, s.pattern, s.credential, s.every_s, "
            "s.replica, coalesce(s.enabled, TRUE), st.state, st.last_run, st.last_ok, coalesce(st.rows_total, 0), "
            "st.last_error FROM ingest_sources s FULL JOIN ingest_status st ON st.source_id = s.id "
            "WHERE s.id IS NOT NULL OR st.source_id = ? ORDER BY 1", [OTLP_ID]).fetchall()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=cols)
    out = []
    for sid, kind, target, fmt, pattern, cred, every, replica, enabled, state, last_run, last_ok, n, err in rows:
        label = "OTLP/HTTP receiver" if sid == OTLP_ID else \
            LiveSource(sid, kind, target, fmt, pattern, cred, every, replica, enabled).label(full_paths)
        shown_state = state or "waiting for the first run"
        if not enabled:
            shown_state = "stopped"
        out.append([sid, label, shown_state, bool(enabled), last_run, last_ok, int(n), err or ""])
    return pd.DataFrame(out, columns=cols)


# ---------------------------------------------------------------- the loop

def _secret_from_env(name: str) -> str | None:
    return os.environ.get(name) or None


@dataclass
class TickResult:
    """What one tick did: rows loaded per source id, and the sources whose run failed (id -> message)."""
    rows: dict[int, int] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)

    @property
    def rows_loaded(self) -> int:
        return sum(self.rows.values())


class Ingester:
    """The loop over the configured sources, with the OTLP receiver and the control server.

    ``con``: the process's connection (the ingester takes its own cursors). ``secret``: how a credential's
    NAME becomes its value (default: the environment; the dashboard and ``serve-ingest`` pass
    :func:`finops.ops.delivery.secret`, which also reads ``secrets.toml``). ``commands``: name ->
    ``fn(con, argv) -> (stdout, stderr)`` the control server runs for the command line (``report``).
    ``otlp_port``: None reads the store's setting (the dashboard); 0 off. ``otlp_tenant_field``: the span or
    resource attribute that is the tenant of a received span (e.g. ``tenant.id``).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, db_path: str | None = None, *, tick_s: float = TICK_S,
                 secret: Callable[[str], str | None] | None = None, otlp_port: int | None = 0,
                 spool_dir: str | os.PathLike | None = None, otlp_tenant_field: str | None = None,
                 commands: dict[str, Callable] | None = None, control: bool = True):
        if getattr(con, "remote", False):      # only the holder runs one: it serves the store to the others
            raise InputError(f"the store is held by process {con.holder_pid}, which runs its own ingester: "
                             "configure its sources here (--add-follow, --list ...) and they run there")
        self.con = con.cursor()
        self.db_path = db_path
        self.tick_s = tick_s
        self.secret = secret or _secret_from_env
        self.otlp_port = otlp_port
        self.otlp_options = IngestOptions(tenant_field=otlp_tenant_field) if otlp_tenant_field else None
        self.spool_dir = Path(spool_dir) if spool_dir else (
            Path(f"{db_path}.otlp-spool") if db_path and db_path != ":memory:" else None)
        self.commands = commands or {}
        self.control_enabled = control and bool(db_path) and db_path != ":memory:"
        self.control: ControlServer | None = None
        self.receiver = None
        self._receiver_port: int | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._workers: dict[int, threading.Thread] = {}
        self.wait_scheduled = False      # True: tick() returns once its pulls and scrapes ended (tests, bench)
        ensure_tables(self.con)

    # -- lifecycle
    def start(self) -> Ingester:
        if self.control_enabled:
            self.control = ControlServer(self, self.db_path).start()
        _WAKE.add(self._wake)
        self._thread = threading.Thread(target=self.run, name="finops-ingester", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        _WAKE.discard(self._wake)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        for worker in list(self._workers.values()):      # a pull or scrape in flight ends first
            worker.join(timeout)
        self._stop_receiver()
        if self.control is not None:
            self.control.stop()
            self.control = None

    def run(self) -> None:
        """Tick until stopped; a tick's own failure is logged and the next tick runs."""
        while not self._stop.is_set():
            busy = True
            try:
                with access.system():
                    self.tick()
                    busy = self._anything_enabled()
            except Exception:       # a bug of ours: logged, and the loop goes on (each source is isolated too)
                log.exception("the ingester's tick failed")
            self._wake.wait(self.tick_s if busy else IDLE_TICK_S)
            self._wake.clear()

    def _anything_enabled(self) -> bool:
        return self.receiver is not None or any(s.enabled for s in sources(self.con))

    # -- one pass
    def tick(self, now: datetime | None = None) -> TickResult:
        """Run every enabled source once (the scheduled ones when due) and drain the OTLP spool."""
        result = TickResult()
        self._sync_receiver()
        if self.receiver is not None:
            self._run(self.con, OTLP_ID, self._drain_otlp, result, now)
        for s in sources(self.con):
            if not s.enabled:
                continue
            if s.kind not in SCHEDULED:
                self._run(self.con, s.id, lambda con, st, s=s: RUNNERS[s.kind](self, con, s, st), result, now)
                continue
            st = _status(self.con, s.id)
            at = now or _now()
            busy = self._workers.get(s.id)
            if (busy is not None and busy.is_alive()) or (
                    st.last_run is not None and (at - st.last_run).total_seconds() < (s.every_s or 0)):
                continue
            # a pull or scrape runs on its own thread: a slow service never holds up the followed logs
            worker = threading.Thread(target=self._scheduled, args=(s, result, now), daemon=True,
                                      name=f"finops-ingester-{s.kind}-{s.id}")
            self._workers[s.id] = worker
            worker.start()
            if self.wait_scheduled:
                worker.join()
        return result

    def _scheduled(self, s: LiveSource, result: TickResult, now: datetime | None) -> None:
        con = self.con.cursor()
        try:
            with access.system():
                self._run(con, s.id, lambda con, st: RUNNERS[s.kind](self, con, s, st), result, now)
        except Exception:       # a status write that failed: logged, and the next run tries again
            log.exception("the ingester's run of source %s failed", s.id)
        finally:
            con.close()

    def _run(self, con, source_id: int, fn, result: TickResult, now: datetime | None) -> None:
        st = _status(con, source_id)
        st.last_run = now or _now()
        try:
            n, state = fn(con, st)
        except (InputError, OSError) as exc:     # the source's fault (an unreadable file is an OSError)
            text = str(exc) if isinstance(exc, InputError) else \
                f"cannot read {Path(exc.filename).name if exc.filename else 'it'}: {exc.strerror or exc}"
            st.last_error, st.last_error_at, st.state = text, st.last_run, "failing"
            result.errors[source_id] = text
            log.info("ingester source %s: %s", source_id, text)
        except Exception as exc:          # a bug of ours: in the log; the source says so and the others go on
            log.exception("ingester source %s failed", source_id)
            st.last_error = (f"stopped on an error of ours ({type(exc).__name__}), not of the source's; the details "
                             "are in the server log")
            st.last_error_at, st.state = st.last_run, "failing"
            result.errors[source_id] = st.last_error
        else:
            st.state, st.last_rows = state, n
            st.rows_total += n
            st.last_ok = st.last_run
            st.last_error = None
            result.rows[source_id] = n
        _save_status(con, st)

    # -- OTLP
    def _wanted_otlp_port(self) -> int | None:
        return configured_otlp_port(self.con) if self.otlp_port is None else (self.otlp_port or None)

    def _sync_receiver(self) -> str | None:
        """Start or stop the OTLP receiver as configured; a receiver that cannot start is the OTLP status's
        error (returned too), tried again when the port setting changes."""
        want = self._wanted_otlp_port()
        if want == self._receiver_port:
            return None
        self._stop_receiver()
        self._receiver_port = want
        if not want:
            return None
        otlp = _otlp_module()
        error = None
        if otlp is None:
            error = "this build has no OTLP receiver (finops.ingest.otlp)"
        elif self.spool_dir is None:
            error = "an in-memory store has no folder beside it for the OTLP spool"
        else:
            try:
                self.spool_dir.mkdir(parents=True, exist_ok=True)
                self.receiver = otlp.start_receiver(str(self.spool_dir), host="127.0.0.1", port=want)
            except OSError as exc:          # the port is taken, or not ours to bind
                error = f"the OTLP receiver could not listen on 127.0.0.1:{want}: {exc.strerror or exc}"
            except InputError as exc:       # e.g. another receiver holds the spool
                error = f"the OTLP receiver could not start: {exc}"
        st = _status(self.con, OTLP_ID)
        st.state = "failing" if error else f"listening on 127.0.0.1:{want}"
        st.last_error, st.last_error_at = error, (_now() if error else st.last_error_at)
        _save_status(self.con, st)
        return error

    def _stop_receiver(self) -> None:
        if self.receiver is not None:
            self.receiver.stop()
            self.receiver = None
        self._receiver_port = None

    def start_receiver_now(self) -> None:
        """Start the configured OTLP receiver at once (``serve-ingest --otlp-port``): a port that cannot be
        bound is an :class:`InputError` before the loop starts."""
        error = self._sync_receiver()
        if error:
            raise InputError(error)

    def _drain_otlp(self, con, st: Status) -> tuple[int, str]:
        otlp = _otlp_module()
        n = otlp.drain(con, str(self.spool_dir), self.otlp_options) if self.otlp_options else \
            otlp.drain(con, str(self.spool_dir))
        return int(n or 0), f"listening on 127.0.0.1:{self.receiver.port}"


def _otlp_module():
    """The OTLP/HTTP receiver module, None where this build lacks it."""
    try:
        from finops.ingest import otlp
    except ImportError:
        return None
    return otlp if hasattr(otlp, "start_receiver") and hasattr(otlp, "drain") else None


# ---------------------------------------------------------------- one run of each kind

def _file_id(st_: os.stat_result) -> str:
    return f"{st_.st_dev}:{st_.st_ino}"


def _options(s: LiveSource) -> IngestOptions:
    return IngestOptions(format=s.format or None)


def _follow_to_end(con, path: Path, offset: int, options: IngestOptions, on_step) -> tuple[int, int]:
    """Load ``path``'s complete lines from ``offset`` to its end; ``on_step(offset)`` after each batch
    committed (the offset is persisted there). Returns (offset, rows)."""
    from finops.ingest.follow import ingest_new_lines

    rows = 0
    while True:
        step = ingest_new_lines(con, path, offset, options)
        if step.offset == offset and not step.rotated:
            return offset, rows
        offset, rows = step.offset, rows + step.rows_ingested
        on_step(offset)
        if step.lines_read == 0:
            return offset, rows


def _run_follow(ing: Ingester, con, s: LiveSource, st: Status) -> tuple[int, str]:
    path = Path(s.target)
    try:
        now_stat = path.stat()
    except FileNotFoundError:
        return 0, "waiting for the file to appear"
    rows = 0

    def persist(offset: int, file_id: str) -> None:       # once the batch committed: a restart resumes here
        st.offset_bytes, st.file_id = offset, file_id
        _save_status(con, st)

    new_id = _file_id(now_stat)
    if st.file_id and st.file_id != new_id:        # rotated: another file under the name
        old = _find_by_id(path.parent, st.file_id, path)
        if old is not None:                        # the rest of the old file first, where it now lies
            _, n = _follow_to_end(con, old, st.offset_bytes, _options(s),
                                  lambda o: persist(o, st.file_id))
            rows += n
        persist(0, new_id)
    elif not st.file_id:
        st.file_id = new_id
    offset, n = _follow_to_end(con, path, st.offset_bytes, _options(s), lambda o: persist(o, new_id))
    return rows + n, f"following, at byte {offset:,}"


def _find_by_id(folder: Path, file_id: str, skip: Path) -> Path | None:
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            if p != skip and p.is_file() and _file_id(p.stat()) == file_id:
                return p
    return None


def _run_watch(ing: Ingester, con, s: LiveSource, st: Status) -> tuple[int, str]:
    from finops.ingest.loader import ingest_path

    folder = Path(s.target)
    if not folder.is_dir():
        raise InputError("the watched folder is gone", file=s.target)
    seen = {(p, size, mtime) for p, size, mtime in con.execute(
        "SELECT path, size_bytes, mtime FROM ingest_files WHERE source_id = ?", [s.id]).fetchall()}
    rows, errors, now = 0, [], time.time()
    for name in sorted(globlib.glob(globlib.escape(str(folder)) + "/" + (s.pattern or "*"))):
        p = Path(name)
        try:
            fs = p.stat()
        except FileNotFoundError:
            continue
        if not p.is_file() or (str(p), fs.st_size, fs.st_mtime) in seen or now - fs.st_mtime < SETTLE_S:
            continue
        n, err = 0, None
        try:
            n = sum(r.rows_ingested for r in ingest_path(con, p, _options(s)))
        except InputError as exc:
            err = str(exc)
            errors.append(err)
        with store.transaction(con):
            con.execute("DELETE FROM ingest_files WHERE source_id = ? AND path = ?", [s.id, str(p)])
            con.execute("INSERT INTO ingest_files VALUES (?, ?, ?, ?, ?, ?, ?)",
                            [s.id, str(p), fs.st_size, fs.st_mtime, _now(), n, err])
        rows += n
    if errors:
        raise InputError(f"{len(errors)} file(s) refused (each is tried again once it changes); the last: "
                         f"{errors[-1]}")
    files = con.execute("SELECT count(*) FROM ingest_files WHERE source_id = ?", [s.id]).fetchall()[0][0]
    return rows, f"watching, {files:,} file{'s' if files != 1 else ''} seen"


def _credential(ing: Ingester, name: str) -> str:
    value = ing.secret(name)
    if not value:
        raise InputError(f"the environment variable or secret {name} is not set in the ingester's process")
    return value


def _run_litellm(ing: Ingester, con, s: LiveSource, st: Status) -> tuple[int, str]:
    from finops.ingest import pulls

    r = pulls.pull_litellm(con, _credential(ing, s.credential))
    return r.rows_ingested, f"pulled {r.pages:,} page(s), every {s.every_s:g} s"


def _run_langfuse(ing: Ingester, con, s: LiveSource, st: Status) -> tuple[int, str]:
    from finops.ingest import pulls

    public, secret_ = s.credential.split(",")
    r = pulls.pull_langfuse(con, s.target, public_key=_credential(ing, public),
                            secret_key=_credential(ing, secret_), max_wait_s=min(60.0, s.every_s or 60.0))
    return r.rows_ingested, f"pulled {r.pages:,} page(s), every {s.every_s:g} s"


def _run_scrape(ing: Ingester, con, s: LiveSource, st: Status) -> tuple[int, str]:
    from finops.ingest import engine

    # stamped with the run's scheduled start, so the stored scrapes are spaced as the schedule says
    r = engine.scrape_vllm(con, s.target, s.replica, timeout_s=min(10.0, s.every_s or 10.0), now=st.last_run)
    return r.samples, f"scraped {r.samples:,} samples, every {s.every_s:g} s"


RUNNERS: dict[str, Callable[[Ingester, duckdb.DuckDBPyConnection, LiveSource, Status], tuple[int, str]]] = {
    "follow": _run_follow, "watch": _run_watch, "pull-litellm": _run_litellm, "pull-langfuse": _run_langfuse,
    "scrape-vllm": _run_scrape,
}


# ---------------------------------------------------------------- the control endpoint (the CLI's way in)

def sidecar_path(db_path: str | os.PathLike) -> Path:
    """``<store>.ingester.json``: the port and token of the ingester holding the store."""
    return remote.sidecar_path(db_path)



class SqlSessions:
    """The SQL sessions the control server serves to other processes (:mod:`finops.remote`): one
    ``con.cursor()`` each, its calls run one at a time. A session's ``BEGIN`` (but a read-only one's) takes the
    process's write lock (:data:`finops.store.WRITE_LOCK`) until its ``COMMIT`` or ``ROLLBACK``, so its
    loads take turns with the holder's own (one next batch id at a time); a session idle for longer than
    ``idle_s`` is closed, its open transaction rolled back."""

    def __init__(self, con: duckdb.DuckDBPyConnection, idle_s: float = SQL_IDLE_S):
        self.con, self.idle_s = con, float(idle_s)
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._sweep, name="finops-sql-sweep", daemon=True).start()

    def open(self) -> str:
        sid = pysecrets.token_urlsafe(12)
        cur = self.con.cursor()
        cur.execute("SET SESSION arrow_lossless_conversion = true")
        cur.execute("SET TimeZone = 'UTC'")
        with self._lock:
            self._sessions[sid] = _Session(cur)
        return sid

    def get(self, sid) -> _Session:
        with self._lock:
            s = self._sessions.get(sid)
        if s is None:
            raise _Gone("no such session: it was closed after idling, or the store's holder restarted")
        return s

    def close(self, sids) -> None:
        for sid in sids or ():
            with self._lock:
                s = self._sessions.pop(sid, None)
            if s is not None:
                s.close()

    def __len__(self) -> int:
        return len(self._sessions)

    def _sweep(self) -> None:
        while not self._stop.wait(min(5.0, max(self.idle_s / 4, 0.05))):
            now = time.monotonic()
            with self._lock:
                idle = [sid for sid, s in self._sessions.items() if not s.busy and now - s.last_used > self.idle_s]
            if idle:
                log.info("closing %d SQL session(s) idle for over %g s", len(idle), self.idle_s)
            self.close(idle)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            sids = list(self._sessions)
        self.close(sids)


class _Gone(Exception):
    """A session that is not (or no longer) open: HTTP 410."""


class _WriteTurn:
    """The holder's write lock (:data:`finops.store.WRITE_LOCK`, reentrant: released by the thread that took
    it) held for one session's transaction by a thread of its own, so the session's statements may run on
    whichever request thread serves them."""

    def __init__(self):
        self._taken, self._done = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._hold, name="finops-sql-write-turn", daemon=True)
        self._thread.start()
        self._taken.wait()

    def _hold(self) -> None:
        with store.WRITE_LOCK:          # the holder's loads and every session's take turns
            self._taken.set()
            self._done.wait()

    def release(self) -> None:
        self._done.set()
        self._thread.join()


class _Session:
    def __init__(self, cur: duckdb.DuckDBPyConnection):
        self.cur = cur
        self.mutex = threading.Lock()   # one statement of a session at a time
        self.turn: _WriteTurn | None = None      # an open transaction holds the write lock
        self.busy = 0
        self.last_used = time.monotonic()
        self.closed = False
        self.registered: dict[str, object] = {}

    def run(self, fn):
        """``fn(cursor)``, the session's calls one at a time."""
        self.busy += 1
        try:
            with self.mutex:
                if self.closed:
                    raise _Gone("the session was closed")
                return fn(self.cur)
        finally:
            self.busy -= 1
            self.last_used = time.monotonic()

    def execute(self, sql: str, params, many: bool):
        """Run ``sql`` (text another process's finops built, under the same vocabulary checks) with its bound
        ``params``; returns (description as [name, type] pairs or None, the rows as Arrow IPC bytes)."""
        def go(cur):
            starts, ends = remote._TX_START.match(sql), remote._TX_END.match(sql)
            # a read-only transaction (a page's snapshot) writes nothing: it waits for no load, and no load for it
            took = bool(starts) and not remote._TX_READ_ONLY.match(sql) and self.turn is None
            if took:
                self.turn = _WriteTurn()
            rel = None
            try:
                if many:
                    cur.executemany(sql, params)
                elif remote._READ_ONLY.match(sql) and not remote._TEMP.search(sql):
                    # a query as a relation: its rows go to Arrow as they are made, no copy of the result first
                    rel = cur.sql(sql, params=params)
                else:
                    cur.execute(sql, params)
            except BaseException:
                if took or ends:
                    self._release()
                raise
            if ends:
                self._release()
            if rel is not None:
                return [[n, str(t)] for n, t in zip(rel.columns, rel.types, strict=True)], \
                    remote.arrow_bytes(rel.to_arrow_table())
            if not many and remote._READ_ONLY.match(sql) and not remote._TEMP.search(sql):
                return None, b""            # a WITH ... that wrote: no rows
            desc = cur.description
            if desc is None:
                return None, b""
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")         # "an extra copy of the rows": the IPC writer needs them
                table = cur.to_arrow_table()
            return [[d[0], str(d[1])] for d in desc], remote.arrow_bytes(table)
        return self.run(go)

    def _release(self) -> None:
        if self.turn is not None:
            turn, self.turn = self.turn, None
            turn.release()

    def register(self, name: str, table) -> None:
        def go(cur):
            cur.register(name, table)
            self.registered[name] = table
        self.run(go)

    def unregister(self, name: str) -> None:
        def go(cur):
            cur.unregister(name)
            self.registered.pop(name, None)
        self.run(go)

    def close(self) -> None:
        if not self.mutex.acquire(timeout=SQL_CLOSE_WAIT_S):
            # a statement still running: it ends on its own; interrupted, its transaction rolls back
            log.warning("a SQL session was closed while a statement of it still ran")
            with contextlib.suppress(duckdb.Error):
                self.cur.interrupt()
            self.mutex.acquire()
        try:
            if self.turn is not None:
                with contextlib.suppress(duckdb.Error):
                    self.cur.execute("ROLLBACK")
                self._release()
            self.closed = True
            self.registered.clear()
            with contextlib.suppress(duckdb.Error):
                self.cur.close()
        finally:
            self.mutex.release()


class ControlServer:
    """HTTP on 127.0.0.1 (a random port), every request carrying the random token of the sidecar file."""

    def __init__(self, ingester: Ingester, db_path: str, sql_idle_s: float | None = None):
        self.ingester, self.sidecar = ingester, sidecar_path(db_path)
        self.token = pysecrets.token_urlsafe(32)
        self.httpd: http.server.ThreadingHTTPServer | None = None
        self.sessions = SqlSessions(ingester.con, SQL_IDLE_S if sql_idle_s is None else sql_idle_s)
        self.open_connections: dict[threading.Thread, object] = {}     # request thread -> its socket
        self.lock = threading.Lock()

    def start(self) -> ControlServer:
        handler = type("Handler", (_Handler,), {"server_ref": self})
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="finops-ingester-control", daemon=True).start()
        text = json.dumps({"pid": os.getpid(), "host": "127.0.0.1", "port": self.httpd.server_address[1],
                           "token": self.token})
        tmp = self.sidecar.with_name(self.sidecar.name + f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, self.sidecar)
        return self

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def stop(self) -> None:
        with contextlib.suppress(FileNotFoundError, ValueError, OSError):
            if json.loads(self.sidecar.read_text()).get("pid") == os.getpid():
                self.sidecar.unlink()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None
        # kept-alive connections of other processes: closed, so that their request threads end before the
        # process does (a thread left holding the store's connection at exit is a leak DuckDB reports)
        with self.lock:
            open_now = dict(self.open_connections)
        for sock in open_now.values():
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in open_now:
            thread.join(SQL_CLOSE_WAIT_S)
        self.sessions.stop()


class _Handler(http.server.BaseHTTPRequestHandler):
    server_ref: ControlServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True      # an answer's headers and body are two writes: no 40 ms wait between

    def setup(self):
        super().setup()
        with self.server_ref.lock:
            self.server_ref.open_connections[threading.current_thread()] = self.connection

    def finish(self):
        with self.server_ref.lock:
            self.server_ref.open_connections.pop(threading.current_thread(), None)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, fmt, *args):         # the finops log, never stderr (no token is in a request line)
        log.debug("ingester control: " + fmt, *args)

    def _answer(self, code: int, body: dict | bytes, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, default=str).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {self.server_ref.token}".encode()):
            return True
        self._answer(401, {"error": "not authorised"})
        return False

    def do_GET(self):  # noqa: N802 (http.server's name)
        if not self._authorised():
            return
        if self.path == "/sql/ping":
            self._answer(200, {"pid": os.getpid(), "sessions": len(self.server_ref.sessions)})
        elif self.path == "/status":
            frame = status_frame(self.server_ref.ingester.con.cursor())
            self._answer(200, {"pid": os.getpid(), "sources": json.loads(frame.to_json(orient="records",
                                                                                       date_format="iso"))})
        else:
            self._answer(404, {"error": "no such endpoint"})

    def do_POST(self):  # noqa: N802
        if not self._authorised():
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        try:
            if length < 0:
                raise InputError("the request has no valid Content-Length")
            if self.path.startswith("/sql/"):
                self._sql(length)
                return
            with access.acting(access.LOCAL):      # whoever holds the 0600 token may write the store file
                if self.path == "/ingest":
                    body = self._ingest(length)
                elif self.path == "/command":
                    body = self._command(length)
                else:
                    self._answer(404, {"error": "no such endpoint"})
                    return
        except InputError as exc:
            self.close_connection = True
            self._answer(400, {"error": str(exc)})
            return
        except Exception:                          # a bug of ours: the client says so; details in our log
            log.exception("ingester control %s failed", self.path)
            self.close_connection = True
            self._answer(500, {"error": "the ingester failed on an error of ours; the details are in its log"})
            return
        self._answer(200, body)

    def _sql(self, length: int) -> None:
        """The SQL session endpoints (:mod:`finops.remote`): a DuckDB error is HTTP 422 with its class."""
        sessions = self.server_ref.sessions
        if length > SQL_MAX_BYTES:
            raise InputError(f"the request is over {SQL_MAX_BYTES // 1024 ** 3} GiB")
        data = self._read_body(length)
        sid = None
        try:
            if self.path == "/sql/register":
                session = sessions.get(self.headers.get("X-Finops-Session"))
                session.register(self.headers.get("X-Finops-Relation") or "", remote.arrow_table(data))
                self._answer(200, {})
                return
            asked = json.loads(data or b"{}")
            sessions.close(asked.get("close"))
            if self.path == "/sql/open":
                self._answer(200, {"session": sessions.open()})
            elif self.path == "/sql/execute":
                sid = asked.get("session") or sessions.open()
                params = [remote.decode_params(p) for p in asked["params"]] if asked.get("many") else \
                    remote.decode_params(asked.get("params"))
                description, rows = _served_statement(sessions.get(sid), asked["sql"], params, bool(asked.get("many")))
                head = remote.frame_head({"session": sid, "description": description})
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.finops.result")
                self.send_header("Content-Length", str(len(head) + len(rows)))
                self.end_headers()
                self.wfile.write(head)
                self.wfile.write(rows)
            elif self.path == "/sql/unregister":
                sessions.get(asked.get("session")).unregister(str(asked.get("name")))
                self._answer(200, {})
            elif self.path == "/sql/close":
                sessions.close(asked.get("sessions"))
                self._answer(200, {})
            else:
                self._answer(404, {"error": "no such endpoint"})
        except _Gone as exc:
            self._answer(410, {"error": str(exc)})
        except duckdb.Error as exc:
            self._answer(422, {"error": str(exc), "duckdb": type(exc).__name__, "session": sid})

    def _read_body(self, length: int) -> bytes:
        chunks, remaining = [], length
        while remaining:
            chunk = self.rfile.read(min(remaining, 1 << 20))
            if not chunk:
                raise InputError("the request was cut off in transfer")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _ingest(self, length: int) -> dict:
        from finops.ingest import uploads
        from finops.ingest.loader import ingest_path

        name = Path(urllib.parse.unquote(self.headers.get("X-Finops-Name", "upload"))).name or "upload"
        if length > CONTROL_MAX_BYTES:
            raise InputError(f"the file is over the ingester's limit of {CONTROL_MAX_BYTES // 1024 ** 2:,} MiB: stop "
                             "the process holding the store and load it directly", file=name)
        options = _options_from_json(self.headers.get("X-Finops-Options", "{}"))
        uploads.make_room(length, name)
        folder = uploads.session_folder()
        try:
            target = folder / name
            remaining = length
            with open(target, "wb") as fh:
                while remaining:
                    chunk = self.rfile.read(min(remaining, 1 << 20))
                    if not chunk:
                        raise InputError("the file was cut off in transfer", file=name)
                    fh.write(chunk)
                    remaining -= len(chunk)
            from dataclasses import replace
            results = ingest_path(self.server_ref.ingester.con.cursor(), target,
                                  replace(options, file_label=options.file_label or name))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return {"results": [r.as_dict() for r in results]}

    def _command(self, length: int) -> dict:
        if length > 1 << 20:
            raise InputError("the command is too long")
        asked = json.loads(self.rfile.read(length) or b"{}")
        fn = self.server_ref.ingester.commands.get(asked.get("name"))
        if fn is None:
            raise InputError(f"the ingester does not run {asked.get('name')!r} for the command line")
        out, err = fn(self.server_ref.ingester.con.cursor(), [str(a) for a in asked.get("argv", [])])
        return {"stdout": out, "stderr": err}


def _served_statement(session: _Session, sql, params, many: bool):
    """A served session's statement: ``sql`` is the text the other process's finops built (its values bound,
    never in the text: the vocabulary's checks ran on the code that built it; tests/test_sql_vocabulary.py
    names this one call that takes the text from a request)."""
    if not isinstance(sql, str):
        raise InputError("the statement is not text")
    return session.execute(sql, params, many)


_OPTION_FIELDS = ("format", "mapping", "model", "tenant", "tenant_field", "start", "strict", "records_path",
                  "file_label")


def options_to_json(options: IngestOptions) -> str:
    """The options the command line sends with a file (plain JSON: a datetime as ISO text)."""
    d = {k: getattr(options, k) for k in _OPTION_FIELDS if hasattr(options, k)}
    if d.get("start") is not None:
        d["start"] = d["start"].isoformat()
    return json.dumps(d)


def _options_from_json(text: str) -> IngestOptions:
    try:
        d = json.loads(urllib.parse.unquote(text))
    except ValueError:
        raise InputError("the load options are not JSON") from None
    d = {k: v for k, v in d.items() if k in _OPTION_FIELDS}
    if d.get("start"):
        d["start"] = datetime.fromisoformat(d["start"])
    if not isinstance(d.get("mapping", {}), dict):
        raise InputError("the column mapping is not an object")
    return IngestOptions(**d)


class ControlClient:
    """The command line's side: ask the ingester that holds the store."""

    def __init__(self, host: str, port: int, token: str, pid: int):
        self.host, self.port, self.token, self.pid = host, port, token, pid

    def _request(self, method: str, path: str, body=None, headers: dict | None = None, length: int | None = None,
                 timeout: float = 3600.0) -> dict:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        hdrs = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        if length is not None:
            hdrs["Content-Length"] = str(length)
        try:
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
        except OSError as exc:
            raise InputError(f"the ingester holding the store (process {self.pid}) did not answer: {exc}") from None
        finally:
            conn.close()
        try:
            answer = json.loads(data or b"{}")
        except ValueError:
            answer = {"error": "the ingester's answer was not JSON"}
        if resp.status != 200:
            raise InputError(answer.get("error") or f"the ingester answered HTTP {resp.status}")
        return answer

    def ingest(self, path: str | os.PathLike, options: IngestOptions) -> list[dict]:
        """Stream one file to the ingester, which loads it as ``ingest_path`` does; its results' dicts."""
        path = Path(path)
        if not path.is_file():
            raise InputError("no such file", file=str(path))
        size = path.stat().st_size
        if size > CONTROL_MAX_BYTES:
            raise InputError(f"the file is over the ingester's limit of {CONTROL_MAX_BYTES // 1024 ** 2:,} MiB: stop "
                             "the process holding the store and load it directly", file=path.name)
        with open(path, "rb") as fh:
            answer = self._request("POST", "/ingest", body=fh, length=size, headers={
                "X-Finops-Name": urllib.parse.quote(path.name),
                "X-Finops-Options": urllib.parse.quote(options_to_json(options))})
        return answer["results"]

    def command(self, name: str, argv: list[str]) -> tuple[str, str]:
        data = json.dumps({"name": name, "argv": list(argv)}).encode()
        answer = self._request("POST", "/command", body=data, length=len(data),
                               headers={"Content-Type": "application/json"})
        return answer["stdout"], answer["stderr"]

    def status(self) -> dict:
        return self._request("GET", "/status", timeout=30.0)


def control_for(db_path: str | os.PathLike) -> ControlClient | None:
    """The ingester holding the store at ``db_path`` (its sidecar file), None when there is none or the
    file names a process that is gone (a stale file is ignored)."""
    info = remote.holder_info(db_path)
    if info is None:
        return None
    return ControlClient(info["host"], info["port"], info["token"], info["pid"])
