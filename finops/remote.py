"""A store held by another process, used through that process: the client side of its SQL sessions.

DuckDB lets one process open a store file read-write. The process that holds it (the dashboard, or
``python -m finops serve-ingest``) runs an ingester whose control server (:mod:`finops.ingest.service`)
serves the store to the others: on 127.0.0.1, with the random token of the 0600 sidecar file
``<store>.ingester.json`` (:func:`sidecar_path`). :func:`finops.store.connect` returns a
:class:`RemoteConnection` when the file is locked and such a holder is alive, so every command and a
second dashboard work on a held store as on a free one.

Protocol (HTTP/1.1, keep-alive, ``Authorization: Bearer <token>``):

- ``POST /sql/open`` -> ``{"session": id}``: the server makes ``con.cursor()`` for it, its own DuckDB
  connection to the same database (transactions, temp tables, registered relations are per session);
  one session's calls run one at a time, on the session's own thread.
- ``POST /sql/execute`` ``{"session", "sql", "params", "many"}``: the parameters JSON-encoded by
  :func:`encode` (ints, floats, strings, None, bools, dates, datetimes, times, Decimals, bytes, lists,
  dicts, faithfully); the answer is framed: 4 bytes of header length, a JSON header (the column
  description, or null for a statement without a result) and the rows as an Arrow IPC stream. The
  server exports with ``arrow_lossless_conversion`` (HUGEINT, UUID, JSON keep DuckDB's types) and the
  client reads the rows back through an in-memory DuckDB, so ``fetchall``/``df``/``fetchnumpy`` give
  what the holder's own connection gives. ``"session": null`` opens one first (a round trip fewer).
- ``POST /sql/register`` (headers ``X-Finops-Session``, ``X-Finops-Relation``; an Arrow IPC body):
  ``con.register(name, table)`` in the session. ``POST /sql/unregister`` ``{"session", "name"}``.
- ``POST /sql/close`` ``{"sessions": [ids]}``; a session idle for longer than the server's timeout is
  closed by the server (its open transaction rolled back).
- ``GET /sql/ping`` -> ``{"pid"}``.

A DuckDB error raised on the server comes back as the same class (``duckdb.ConstraintException``,
``duckdb.CatalogException`` ...), with DuckDB's message. The holder gone (refused, reset, another
token) is the store's error class (``finops.store.StoreError``) with a sentence, and the connection is
:attr:`RemoteConnection.lost` from then on: the dashboard drops it and opens the store again.
"""
from __future__ import annotations

import atexit
import base64
import contextlib
import datetime as dt
import decimal
import http.client
import json
import logging
import os
import re
import socket
import struct
import threading
import time
import uuid
import warnings
import weakref
from pathlib import Path

import duckdb
import pyarrow as pa

from finops.errors import InputError

log = logging.getLogger("finops")

SQL_TIMEOUT_S = 3600.0           #: the longest one statement may take (a 200 MiB load)
_TX_START = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION)\b", re.I)
_TX_END = re.compile(r"^\s*(COMMIT|END|ROLLBACK|ABORT)\b", re.I)
# a read-only transaction (finops.store.snapshot): it writes nothing, so it takes no turn at the holder's write lock
_TX_READ_ONLY = re.compile(r"^\s*(BEGIN|START)\s+TRANSACTION\s+READ\s+ONLY\s*;?\s*$", re.I)
# a statement after which a session holds nothing of its own (no setting, temporary object or transaction):
# the session may serve the next cursor
_READ_ONLY = re.compile(r"^\s*\(*\s*(SELECT|WITH|FROM|VALUES|DESCRIBE|SUMMARIZE|EXPLAIN|SHOW)\b", re.I)
_TEMP = re.compile(r"\bTEMP(ORARY)?\b|\bSET\b|\bsetvariable\b", re.I)
POOL_MAX = 16                    #: clean sessions a process keeps for its next cursors


# ---------------------------------------------------------------- the holder (its sidecar file)

def sidecar_path(db_path: str | os.PathLike) -> Path:
    """``<store>.ingester.json``: the pid, port and token of the process serving the store."""
    return Path(f"{Path(db_path).resolve()}.ingester.json")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder_info(db_path: str | os.PathLike) -> dict | None:
    """``{"pid", "host", "port", "token"}`` of the live process serving the store at ``db_path``; None when
    there is no sidecar, it is unreadable, or it names a process that is gone (a stale file is ignored)."""
    if not db_path or str(db_path) == ":memory:":
        return None
    try:
        info = json.loads(sidecar_path(db_path).read_text())
        info = {"pid": int(info["pid"]), "host": str(info.get("host") or "127.0.0.1"), "port": int(info["port"]),
                "token": str(info["token"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if alive(info["pid"]) else None


# ---------------------------------------------------------------- values as JSON (the parameters)

def encode(value):
    """A parameter as JSON: plain JSON for None, bools, ints, floats and strings (NaN and infinities
    tagged), ``{"$": tag, "v": ...}`` for the rest, lists and dicts recursively.

    >>> encode([1, dt.date(2026, 11, 30), decimal.Decimal("0.10")])
    [1, {'$': 'date', 'v': '2026-11-30'}, {'$': 'dec', 'v': '0.10'}]
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else {"$": "float", "v": repr(float(value))}
    if isinstance(value, dt.datetime):
        off = value.utcoffset()
        return {"$": "ts", "v": [value.year, value.month, value.day, value.hour, value.minute, value.second,
                                 value.microsecond, None if off is None else off.total_seconds()]}
    if isinstance(value, dt.date):
        return {"$": "date", "v": value.isoformat()}
    if isinstance(value, dt.time):
        return {"$": "time", "v": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$": "td", "v": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, decimal.Decimal):
        return {"$": "dec", "v": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$": "bytes", "v": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, uuid.UUID):
        return {"$": "uuid", "v": str(value)}
    if isinstance(value, dict):
        return {"$": "dict", "v": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if hasattr(value, "item") and hasattr(value, "dtype"):          # a numpy scalar
        return encode(value.item())
    if hasattr(value, "tolist"):                                     # a numpy array
        return encode(value.tolist())
    raise InputError(f"a value of type {type(value).__name__} cannot be a parameter of the store's SQL")


_DECODERS = {
    "float": lambda v: float(v),
    "date": lambda v: dt.date.fromisoformat(v),
    "time": lambda v: dt.time.fromisoformat(v),
    "td": lambda v: dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2]),
    "dec": lambda v: decimal.Decimal(v),
    "bytes": lambda v: base64.b64decode(v),
    "uuid": lambda v: uuid.UUID(v),
}


def _ts(v) -> dt.datetime:
    *parts, off = v
    tz = None if off is None else dt.timezone(dt.timedelta(seconds=off))
    return dt.datetime(*parts, tzinfo=tz)


def decode(value):
    """The inverse of :func:`encode`."""
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        tag, v = value.get("$"), value.get("v")
        if tag == "ts":
            return _ts(v)
        if tag == "dict":
            return {decode(k): decode(x) for k, x in v}
        if tag in _DECODERS:
            return _DECODERS[tag](v)
        raise ValueError(f"unknown parameter tag {tag!r}")
    return value


def encode_params(params) -> object:
    """Positional parameters (a list) or named ones (a dict: ``$name``), as JSON."""
    if params is None:
        return None
    if isinstance(params, dict):
        return {"named": {str(k): encode(v) for k, v in params.items()}}
    return [encode(v) for v in params]


def decode_params(obj):
    if obj is None:
        return None
    if isinstance(obj, dict):
        return {k: decode(v) for k, v in obj["named"].items()}
    return [decode(v) for v in obj]


# ---------------------------------------------------------------- frames and Arrow

def frame_head(header: dict) -> bytes:
    """A result on the wire: 4 bytes of header length and the JSON header, then the body (Arrow IPC)."""
    head = json.dumps(header).encode()
    return struct.pack(">I", len(head)) + head


def frame(header: dict, body: bytes = b"") -> bytes:
    return frame_head(header) + body


def unframe(data: bytes) -> tuple[dict, memoryview]:
    (n,) = struct.unpack(">I", data[:4])
    return json.loads(data[4:4 + n]), memoryview(data)[4 + n:]


def arrow_bytes(table: pa.Table):
    """The table as an Arrow IPC stream (a buffer, not copied again)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def arrow_table(data) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


_LOCAL = threading.local()


def _local() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB, which reads the rows back as the holder's connection gives them."""
    con = getattr(_LOCAL, "con", None)
    if con is None:
        con = _LOCAL.con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET SESSION arrow_lossless_conversion = true")
    return con


def to_arrow(obj) -> pa.Table:
    """What ``con.register`` takes (a pandas DataFrame, an Arrow table or reader, a polars frame) as the
    Arrow table DuckDB itself reads from it (its own type inference, as a local ``register`` would do)."""
    if isinstance(obj, pa.Table):
        return obj
    con = _local()
    con.register("_finops_remote_in", obj)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return con.execute("SELECT * FROM _finops_remote_in").to_arrow_table()
    finally:
        con.unregister("_finops_remote_in")


# ---------------------------------------------------------------- the transport

_TRANSPORTS: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """At exit, this process's sessions are closed on the holder (not left to its idle timeout)."""
    for t in list(_TRANSPORTS):
        with t._lock:
            sessions, t.pool, t.to_close = t.pool + t.to_close, [], []
        if sessions and not t.lost:
            with contextlib.suppress(Exception):
                t.request("POST", "/sql/close", json.dumps({"sessions": sessions}).encode(),
                          {"Content-Type": "application/json"}, timeout=2.0)


class _Transport:
    """HTTP/1.1 keep-alive connections to the holder, pooled across threads; closes of sessions whose
    cursor was dropped wait here and ride on the next request."""

    def __init__(self, info: dict, db_path: str, error_class: type[Exception]):
        self.host, self.port, self.token, self.pid = info["host"], info["port"], info["token"], info["pid"]
        self.db_path, self.db_name = db_path, os.path.basename(db_path)
        self.error_class = error_class
        self.lost: str | None = None
        self.last_answer = time.monotonic()
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self.to_close: list[str] = []
        self.pool: list[str] = []
        self.writes = 0                  # statements this process sent that may have changed the store
        _TRANSPORTS.add(self)

    def take(self) -> str | None:
        """A clean session a dropped cursor left, None when there is none."""
        with self._lock:
            return self.pool.pop() if self.pool else None

    def give_back(self, session: str) -> None:
        with self._lock:
            if len(self.pool) < POOL_MAX:
                self.pool.append(session)
                return
            self.to_close.append(session)

    def gone(self, why: str):
        self.lost = self.lost or (
            f"The process {self.pid} that served the store {self.db_name} has stopped ({why}): run the command "
            "again (it opens the store itself when it is free), or reload the page.")
        with self._lock:
            for c in self._idle:
                c.close()
            self._idle.clear()
        return self.error_class(self.lost)

    def request(self, method: str, path: str, body: bytes = b"", headers: dict | None = None,
                timeout: float = SQL_TIMEOUT_S) -> tuple[int, bytes]:
        if self.lost:
            raise self.error_class(self.lost)
        hdrs = {"Authorization": f"Bearer {self.token}", "Content-Length": str(len(body)), **(headers or {})}
        for attempt in (0, 1):
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            fresh = conn is None
            try:
                if fresh:
                    conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
                    conn.connect()
                    # small requests and answers: no Nagle wait for the delayed ACK (40 ms a round trip)
                    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.sock.settimeout(timeout)
                conn.request(method, path, body=body, headers=hdrs)
                resp = conn.getresponse()
                data = resp.read()
            except (ConnectionRefusedError, FileNotFoundError) as exc:
                conn.close()
                raise self.gone(f"it refused the connection: {exc.strerror or exc}") from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                if not fresh and attempt == 0:        # a kept-alive connection the server had closed: once more
                    continue
                if not alive(self.pid):
                    raise self.gone("it is no longer running") from None
                raise self.gone(f"it closed the connection: {exc}") from None
            except TimeoutError:
                conn.close()
                raise self.error_class(f"The process {self.pid} that serves the store {self.db_name} did not answer "
                                       f"within {timeout:g} s.") from None
            except OSError as exc:
                conn.close()
                raise self.gone(f"{exc.strerror or exc}") from None
            if resp.status == 401:
                conn.close()
                raise self.gone("it no longer knows this connection's token")
            self.last_answer = time.monotonic()
            if resp.will_close:
                conn.close()
            else:
                with self._lock:
                    self._idle.append(conn)
            return resp.status, data
        raise AssertionError("unreachable")

    def json(self, path: str, body: dict, timeout: float = 60.0) -> dict:
        status, data = self.request("POST", path, json.dumps(body).encode(),
                                    {"Content-Type": "application/json"}, timeout)
        return _answer(self, status, data)

    def pending_closes(self) -> list[str]:
        with self._lock:
            out, self.to_close = self.to_close, []
        return out

    def close_later(self, session: str) -> None:
        with self._lock:
            self.to_close.append(session)


class SessionGone(Exception):
    """The server no longer has the session (closed after its idle timeout, or the server restarted)."""


def _error(kind: str | None, message: str) -> Exception:
    cls = getattr(duckdb, kind, None) if kind else None
    if isinstance(cls, type) and issubclass(cls, duckdb.Error):
        return cls(message)
    return duckdb.Error(message)


def _answer(t: _Transport, status: int, data: bytes) -> dict:
    if status == 200:
        return json.loads(data or b"{}")
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        body = {"error": f"the holder answered HTTP {status}"}
    if status == 410:
        raise SessionGone(body.get("error", "the session is gone"))
    if status == 422:
        raise _error(body.get("duckdb"), body.get("error", ""))
    if status == 400:
        raise InputError(body.get("error") or "the holder refused the request")
    raise t.error_class(f"The process {t.pid} that serves the store {t.db_name} failed on a request "
                        f"({body.get('error') or status}).")


# ---------------------------------------------------------------- the connection

def _numpy(col: pa.ChunkedArray):
    import numpy as np
    if col.null_count:
        values = col.fill_null(0).to_numpy()
        return np.ma.masked_array(values, mask=col.is_null().to_numpy(zero_copy_only=False))
    return col.to_numpy()


def _plain(t: pa.DataType) -> bool:
    """An Arrow type whose ``to_pylist`` values are those DuckDB's ``fetchall`` gives for the column (ints,
    floats, text, booleans, dates, decimals, timestamps without a zone in microseconds, NULL)."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_null(t)
            or t in (pa.string(), pa.large_string(), pa.string_view(), pa.date32())
            or pa.types.is_decimal(t) or (pa.types.is_timestamp(t) and t.tz is None and t.unit == "us"))


class _Result:
    """One statement's result on the client: the description and the rows (Arrow), read the DuckDB way."""

    def __init__(self, description: list | None, table: pa.Table | None):
        self._description = description           # [[name, type as text]], None: no result set
        self.table = table
        self._rows: list | None = None
        self._pos = 0

    @property
    def description(self):
        """DuckDB's description: (name, type, None x 5) per column."""
        if self._description is None:
            return None
        return [(n, duckdb.sqltype(t), None, None, None, None, None) for n, t in self._description]

    @property
    def columns(self) -> list[str]:
        """The column names (a relation's ``columns``)."""
        return [n for n, _ in self._description or ()]

    @property
    def types(self) -> list:
        return [d[1] for d in self.description or ()]

    dtypes = types

    def _relation(self):
        return _local().from_arrow(self.table)

    def rows(self) -> list:
        if self._rows is None:
            if self.table is None:
                self._rows = []
            elif all(_plain(f.type) for f in self.table.schema):
                # types whose Python values Arrow and DuckDB make alike: no in-memory DuckDB needed
                self._rows = list(zip(*(c.to_pylist() for c in self.table.columns), strict=True)) \
                    if self.table.num_columns else []
            else:
                self._rows = self._relation().fetchall()
        return self._rows

    def fetchall(self) -> list:
        rows = self.rows()[self._pos:]
        self._pos = len(self.rows())
        return rows

    def fetchone(self):
        rows = self.rows()
        if self._pos >= len(rows):
            return None
        self._pos += 1
        return rows[self._pos - 1]

    def fetchmany(self, size: int = 1) -> list:
        rows = self.rows()[self._pos:self._pos + size]
        self._pos += len(rows)
        return rows

    def df(self):
        if self.table is None:
            raise duckdb.InvalidInputException("Invalid Input Error: No open result set")
        return self._relation().df()

    def fetchnumpy(self):
        if self.table is None:
            raise duckdb.InvalidInputException("Invalid Input Error: No open result set")
        if all(pa.types.is_integer(f.type) or pa.types.is_floating(f.type) for f in self.table.schema):
            # numbers: numpy arrays straight from Arrow's buffers, a masked array where a column has NULLs
            # (as DuckDB's own fetchnumpy gives them)
            return {name: _numpy(col) for name, col in zip(self.table.column_names, self.table.columns, strict=True)}
        return self._relation().fetchnumpy()

    def to_arrow_table(self) -> pa.Table:
        """The rows as the holder's own ``to_arrow_table`` gives them (DuckDB's default Arrow types)."""
        if self.table is None:
            raise duckdb.InvalidInputException("Invalid Input Error: No open result set")
        rel = duckdb.connect().from_arrow(self.table)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return rel.to_arrow_table()

    def pl(self):
        import polars
        return polars.from_arrow(self.to_arrow_table())


class RemoteConnection:
    """The subset of ``duckdb.DuckDBPyConnection`` this code base uses, on a store served by the process
    holding it: ``execute``/``executemany`` (returning the connection, as DuckDB does), ``fetchall``,
    ``fetchone``, ``fetchmany``, ``df``/``fetchdf``/``fetch_df``, ``fetchnumpy``, ``to_arrow_table``,
    ``pl``, ``description``, ``register``/``unregister``, ``cursor()`` (a session of its own),
    ``sql()`` (run at once), ``begin``/``commit``/``rollback``, ``close()`` and the context manager.

    Each connection object is one server session, opened at its first statement and closed with
    :meth:`close` (or when the object is dropped)."""

    remote = True

    def __init__(self, transport: _Transport):
        self._t = transport
        # [session id, clean]: shared with the finalizer; a clean session (reads only) serves the next cursor
        self._session: list = [transport.take(), True]
        self._result: _Result | None = None
        self._registered: set[str] = set()
        self._in_tx = False
        self._read_tx, self._clean_before_tx = False, True      # an open read-only transaction; the session before it
        self._closed = False
        weakref.finalize(self, _drop_session, transport, self._session)

    # -- about the holder
    @property
    def holder_pid(self) -> int:
        return self._t.pid

    @property
    def lost(self) -> str | None:
        """The sentence saying the holder went away, None while it serves."""
        return self._t.lost

    @property
    def writes(self) -> int:
        """How many statements this process (any cursor) sent that were not plain reads: a change of it says
        this process may have written the store since."""
        return self._t.writes

    def idle_s(self) -> float:
        """Seconds since the holder last answered this connection (or any cursor of it)."""
        return time.monotonic() - self._t.last_answer

    def ping(self) -> bool:
        """Whether the holder still answers (a lost holder marks the connection :attr:`lost`)."""
        try:
            status, _ = self._t.request("GET", "/sql/ping", timeout=10.0)
        except InputError:
            return False
        return status == 200

    # -- sessions
    def _open(self) -> str:
        answer = self._t.json("/sql/open", {"close": self._t.pending_closes()})
        self._session[0] = answer["session"]
        return answer["session"]

    def _call(self, fn, inline_open: bool = False):
        """``fn(session)``; a session the server closed for idleness is opened again when nothing of it
        could be lost (no transaction, no registered relation), else the sentence says so. ``inline_open``:
        ``fn`` takes None for "open one" (an execute: the server opens it in the same round trip)."""
        if self._closed:
            raise duckdb.ConnectionException("Connection Error: Connection already closed!")
        session = self._session[0] or (None if inline_open else self._open())
        try:
            return fn(session)
        except SessionGone as exc:
            self._session[0] = None
            if self._in_tx or self._registered:
                self._in_tx = self._read_tx = False
                self._registered.clear()
                raise self._t.error_class(
                    f"This connection's session on the process {self._t.pid} serving the store was closed ({exc}); "
                    "its open transaction was rolled back: run the command again.") from None
            return fn(None if inline_open else self._open())

    def execute(self, sql: str, parameters=None) -> RemoteConnection:
        self._execute(sql, parameters, many=False)
        return self

    def executemany(self, sql: str, parameters=None) -> RemoteConnection:
        self._execute(sql, list(parameters or []), many=True)
        return self

    def _execute(self, query: str, parameters, many: bool) -> None:
        if not isinstance(query, str):
            raise duckdb.InvalidInputException("Invalid Input Error: the remote store takes SQL as text")
        if many:
            params = [encode_params(p) for p in parameters]
        else:
            params = encode_params(parameters)
        self._result = None

        def run(session):
            body = json.dumps({"session": session, "sql": query, "params": params, "many": many,
                               "close": self._t.pending_closes()}).encode()
            status, data = self._t.request("POST", "/sql/execute", body, {"Content-Type": "application/json"})
            if status != 200:
                if status == 422:           # the statement failed in the session (opened for it, maybe)
                    with contextlib.suppress(ValueError, TypeError):
                        self._session[0] = json.loads(data).get("session") or self._session[0]
                _answer(self._t, status, data)
            header, rows = unframe(data)
            self._session[0] = header["session"]
            return header, rows

        header, body = self._call(run, inline_open=True)
        if _TX_READ_ONLY.match(query):
            # a read-only transaction (finops.store.snapshot) writes nothing; while it is open the session serves
            # no other cursor, and once it ends the session is as clean as it was (unless something was kept in it)
            self._clean_before_tx, self._session[1] = self._session[1], False
        elif self._read_tx and _TX_END.match(query):
            self._session[1] = self._clean_before_tx
        elif not _READ_ONLY.match(query) or _TEMP.search(query):
            self._session[1] = self._clean_before_tx = False
            self._t.writes += 1
        if _TX_START.match(query):
            self._in_tx, self._read_tx = True, bool(_TX_READ_ONLY.match(query))
        elif _TX_END.match(query):
            self._in_tx = self._read_tx = False
        self._result = _Result(header.get("description"), arrow_table(body) if body else None)

    def _current(self) -> _Result:
        if self._result is None:
            raise duckdb.InvalidInputException("Invalid Input Error: No open result set")
        return self._result

    @property
    def description(self):
        return None if self._result is None else self._result.description

    @property
    def rowcount(self) -> int:
        return -1

    def fetchall(self) -> list:
        return self._current().fetchall()

    def fetchone(self):
        return self._current().fetchone()

    def fetchmany(self, size: int = 1) -> list:
        return self._current().fetchmany(size)

    def df(self, **_):
        return self._current().df()

    fetchdf = fetch_df = df

    def fetchnumpy(self):
        return self._current().fetchnumpy()

    def to_arrow_table(self, *_):
        return self._current().to_arrow_table()

    def pl(self, *_):
        return self._current().pl()

    def sql(self, sql: str, params=None) -> _Result:
        """The statement run at once (DuckDB's ``sql`` builds a lazy relation; its fetch methods are here)."""
        self.execute(sql, params)
        return self._current()

    query = sql

    def begin(self) -> RemoteConnection:
        return self.execute("BEGIN")

    def commit(self) -> RemoteConnection:
        return self.execute("COMMIT")

    def rollback(self) -> RemoteConnection:
        return self.execute("ROLLBACK")

    def register(self, view_name: str, python_object) -> RemoteConnection:
        data = arrow_bytes(to_arrow(python_object))

        def run(session):
            status, answer = self._t.request("POST", "/sql/register", data, {
                "Content-Type": "application/vnd.apache.arrow.stream", "X-Finops-Session": session,
                "X-Finops-Relation": view_name})
            return _answer(self._t, status, answer)

        self._call(run)
        self._registered.add(view_name)
        self._session[1] = self._clean_before_tx = False
        return self

    def unregister(self, view_name: str) -> RemoteConnection:
        self._call(lambda session: self._t.json("/sql/unregister", {"session": session, "name": view_name}))
        self._registered.discard(view_name)
        return self

    def cursor(self) -> RemoteConnection:
        """A connection of its own (its own session on the server), as DuckDB's ``cursor()``."""
        return RemoteConnection(self._t)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        session, self._session[0] = self._session[0], None
        if session and self._session[1] and not self._t.lost:
            self._t.give_back(session)
            return
        if session and not self._t.lost:
            try:
                self._t.json("/sql/close", {"sessions": [session, *self._t.pending_closes()]}, timeout=10.0)
            except (InputError, SessionGone):      # the holder is gone: its sessions went with it
                pass

    def __enter__(self) -> RemoteConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RemoteConnection to process {self._t.pid} on {self._t.host}:{self._t.port}>"


def _drop_session(transport: _Transport, session: list) -> None:
    """A dropped connection's session serves the next cursor when it holds nothing of its own, else it is
    closed with the next request (or by the server's idle timeout)."""
    if session[0]:
        (transport.give_back if session[1] else transport.close_later)(session[0])


def connect(db_path: str, error_class: type[Exception] = InputError, wait_s: float = 2.0) -> RemoteConnection | None:
    """A connection through the process serving the store at ``db_path``, None when no live process does
    (its sidecar is missing or stale after ``wait_s``: a holder just starting writes it within moments).
    ``error_class``: what a vanished holder raises (:class:`finops.store.StoreError`)."""
    deadline = time.monotonic() + wait_s
    while True:
        info = holder_info(db_path)
        if info is not None and info["pid"] != os.getpid():
            con = RemoteConnection(_Transport(info, db_path, error_class))
            if con.ping():
                return con
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)
