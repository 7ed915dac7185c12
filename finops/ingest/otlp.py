"""An OTLP/HTTP trace receiver that spools spans durably, and the drain that loads the spool into the store.

``start_receiver(spool_dir)`` serves ``POST /v1/traces`` on 127.0.0.1:4318 (OpenTelemetry's OTLP/HTTP,
as an SDK's ``OTLPSpanExporter`` or the Collector's ``otlphttp`` exporter sends it): an
``ExportTraceServiceRequest`` as protobuf (``application/x-protobuf``) or as OTLP/JSON
(``application/json``: hex trace and span ids, int64 as strings), optionally gzip- or deflate-compressed.
Each request is written to the spool as the OTLP/JSON the Collector's ``file`` exporter writes (one
``ExportTraceServiceRequest`` per line, the ``otel`` adapter's input) and answered 200 only once its lines
are written and fsync'd; requests arriving together share one fsync (group commit). A malformed body is
400 (with a ``google.rpc.Status`` saying why, in the request's encoding), a body over ``max_body_bytes``
(before or after decompression) 413, another content type or encoding 415, another path 404, another
method 405, a spool that cannot be written 503 (the exporter retries).

``drain(con, spool_dir)`` loads every complete segment of the spool through the ``otel`` adapter and the
normal loader (``ingest_path``), then deletes it. A load is idempotent (the loader skips a file whose
bytes it stored before and any span whose ``traceId:spanId`` is stored), so a crash between the load and
the delete loads nothing twice. The segment being appended to is renamed first, under the spool's lock,
so the receiver starts a new one and no span is written into a segment after it was read. A partial last
line (a receiver killed mid-write) was never acknowledged and is dropped. A segment the adapter refuses (or
fails on) is moved to ``spool_dir/rejected/`` beside a ``.reason.txt`` and logged, never retried by itself:
its spans stay there, and moving it back into the spool folder loads it at the next drain.

Security: the receiver binds 127.0.0.1 unless told otherwise and has no authentication beyond that and
an optional bearer token (``token=``: requests without ``Authorization: Bearer <token>`` get 401); put it
behind a TLS proxy (or the Collector) before exposing it to another machine. One receiver per spool
folder (a second one is refused).

Spool layout: ``active.jsonl`` (being written), ``seg-<ns>-<pid>.jsonl`` (closed, to load),
``spare.zeros`` (the next segment, zeros written ahead: see :class:`_Spool`), ``spool.lock`` (held while
writing or rotating), ``receiver.lock`` (held by the live receiver), ``rejected/``. A segment's text ends
at its first NUL byte or at the end of the file.
"""
from __future__ import annotations

import base64
import collections
import contextlib
import fcntl
import hmac
import json
import logging
import math
import os
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import duckdb
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from finops import access
from finops.errors import InputError
from finops.ingest.base import MAX_JSON_LINE_BYTES, IngestOptions
from finops.ingest.loader import ingest_path

log = logging.getLogger("finops")

TRACES_PATH = "/v1/traces"
PROTOBUF, JSON = "application/x-protobuf", "application/json"
ACTIVE = "active.jsonl"
SPARE, SPARE_TMP = "spare.zeros", "spare.zeros.tmp"
SEGMENT_GLOB = "seg-*.jsonl"
REJECTED = "rejected"
# a spooled line stays well under the loader's JSON Lines limit: a larger request is split by spans
MAX_SPOOL_LINE_BYTES = min(8 << 20, MAX_JSON_LINE_BYTES // 2)
# a segment's size (written as zeros ahead, then overwritten); drain closes the active one sooner
SEGMENT_MAX_BYTES = 16 << 20
SPARE_MIN_BYTES = 1 << 20
# the otel adapter's refusal of a file without one model-call span: such a segment has nothing to load
_NO_GENAI = "no GenAI model-call spans"
MAX_REQUESTS_IN_PROGRESS = 8
# google.rpc.Code values for the Status body of an error response
_RPC_CODE = {400: 3, 401: 16, 404: 5, 405: 12, 411: 3, 413: 8, 415: 3, 500: 13, 503: 14}


class _BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------- OTLP -> the file exporter's JSON

_ID_KEYS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _walk_ids(doc: dict, convert) -> None:
    """Apply ``convert(value, key)`` to every span's and link's trace/span/parent ids in place."""
    for rs in _list(doc.get("resourceSpans", doc.get("resource_spans"))):
        for ss in _list(rs.get("scopeSpans", rs.get("scope_spans"))) if isinstance(rs, dict) else ():
            for span in _list(ss.get("spans")) if isinstance(ss, dict) else ():
                if not isinstance(span, dict):
                    continue
                for obj in (span, *(x for x in _list(span.get("links")) if isinstance(x, dict))):
                    for key in _ID_KEYS:
                        if isinstance(obj.get(key), str) and obj[key]:
                            obj[key] = convert(obj[key], key)


def _list(v) -> list:
    return v if isinstance(v, list) else []


def _hex_to_b64(v: str, key: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(v)).decode("ascii")
    except ValueError:
        raise _BadRequest(400, f"{key} {v[:40]!r} is not hex (OTLP/JSON writes ids as hex)") from None


# OTLP/JSON writes these bytes fields as hex; every other bytes field as base64
_HEX_BYTES = {"trace_id", "span_id", "parent_span_id"}
_INT64 = {FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64,
          FieldDescriptor.TYPE_SFIXED64, FieldDescriptor.TYPE_SINT64}
_NON_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
_KEY_VALUE, _ANY_VALUE = KeyValue.DESCRIPTOR, AnyValue.DESCRIPTOR


def _b64(v: bytes) -> str:
    return base64.b64encode(v).decode("ascii")


# ---- protobuf -> OTLP/JSON text, written directly from the message (no dict, no json.dumps pass)

_enc = json.encoder.encode_basestring_ascii     # a JSON string literal, ASCII only (C)


def _json_double(v: float) -> str:
    return repr(v) if math.isfinite(v) else f'"{_NON_FINITE[str(v)]}"'


def _text_scalar(f: FieldDescriptor):
    if f.type == FieldDescriptor.TYPE_BYTES:
        return (lambda v: f'"{v.hex()}"') if f.name in _HEX_BYTES else (lambda v: f'"{_b64(v)}"')
    if f.type in _INT64:
        return lambda v: f'"{v}"'
    if f.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return _json_double
    if f.type == FieldDescriptor.TYPE_STRING:
        return _enc
    if f.type == FieldDescriptor.TYPE_BOOL:
        return lambda v: "true" if v else "false"
    return str                                   # 32-bit ints, enums as integers


_TEXT_FIELDS: dict[FieldDescriptor, tuple] = {}


def _text_field(f: FieldDescriptor) -> tuple:
    """(``"jsonName":``, repeated, how to write one value) of a field, worked out once."""
    got = _TEXT_FIELDS.get(f)
    if got is None:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            raise TypeError(f"{f.full_name}: map fields are not converted")     # OTLP traces have none
        if f.type != FieldDescriptor.TYPE_MESSAGE:
            write = _text_scalar(f)
        elif f.message_type is _KEY_VALUE:
            write = _text_key_value
        elif f.message_type is _ANY_VALUE:
            write = _text_any_value
        else:
            write = _text_message
        got = _TEXT_FIELDS[f] = (f'"{f.json_name}":', f.is_repeated, write)
    return got


def _text_any_value(v) -> str:
    which = v.WhichOneof("value")
    if which == "string_value":
        return '{"stringValue":' + _enc(v.string_value) + "}"
    if which == "int_value":
        return '{"intValue":"' + str(v.int_value) + '"}'
    if which == "bool_value":
        return '{"boolValue":true}' if v.bool_value else '{"boolValue":false}'
    if which == "double_value":
        return '{"doubleValue":' + _json_double(v.double_value) + "}"
    return _text_message(v)


def _text_key_value(kv) -> str:
    # the common attribute (a key, a string or int value) in one go; anything else field by field (an unset
    # value has no "value" at all, which only the general path tells apart from an empty one)
    key = kv.key
    if key and not kv.key_strindex:
        v = kv.value
        which = v.WhichOneof("value")
        if which == "string_value":
            return '{"key":' + _enc(key) + ',"value":{"stringValue":' + _enc(v.string_value) + "}}"
        if which == "int_value":
            return '{"key":' + _enc(key) + ',"value":{"intValue":"' + str(v.int_value) + '"}}'
        if which is not None:
            return '{"key":' + _enc(key) + ',"value":' + _text_any_value(v) + "}"
    return _text_message(kv)


def _text_message(m) -> str:
    parts = []
    for f, v in m.ListFields():
        name, repeated, write = _TEXT_FIELDS.get(f) or _text_field(f)
        parts.append(name + ("[" + ",".join(map(write, v)) + "]" if repeated else write(v)))
    return "{" + ",".join(parts) + "}"


def request_to_line(req: ExportTraceServiceRequest) -> bytes:
    """The request as one line of OTLP/JSON: lowerCamelCase names, enums as integers, int64 as strings,
    trace and span ids as hex (protobuf's own JSON mapping writes bytes as base64), fields left at their
    default omitted, compact and ASCII only (no byte a text check could refuse: a NUL or a stray surrogate
    arrives escaped). It is what ``json.dumps(json_format.MessageToDict(req, use_integers_for_enums=True))``
    writes with hex ids, at a fraction of its cost (``tests/test_otlp_receiver.py`` checks byte for byte)."""
    return _text_message(req).encode("ascii") + b"\n"


def request_to_otlp_json(req: ExportTraceServiceRequest) -> dict:
    """:func:`request_to_line` as a dict."""
    return json.loads(request_to_line(req))


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    try:
        return ExportTraceServiceRequest.FromString(body)
    except (DecodeError, ValueError) as exc:
        raise _BadRequest(400, f"the body is not an ExportTraceServiceRequest in protobuf ({exc})") from None


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    """An OTLP/JSON body, checked against the protobuf schema (unknown fields ignored, as the spec asks)."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _BadRequest(400, f"the body is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise _BadRequest(400, "the body is not an ExportTraceServiceRequest: a JSON object with resourceSpans")
    _walk_ids(doc, _hex_to_b64)
    try:
        return json_format.ParseDict(doc, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except (json_format.ParseError, RecursionError) as exc:
        raise _BadRequest(400, f"the body is not an OTLP/JSON ExportTraceServiceRequest ({exc})") from None


def count_spans(req: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)


def _part(rs, ss, spans) -> bytes:
    """One line holding ``spans`` of resource ``rs`` and scope ``ss``."""
    part = ExportTraceServiceRequest()
    prs = part.resource_spans.add()
    if rs.HasField("resource"):
        prs.resource.CopyFrom(rs.resource)
    prs.schema_url = rs.schema_url
    pss = prs.scope_spans.add()
    if ss.HasField("scope"):
        pss.scope.CopyFrom(ss.scope)
    pss.schema_url = ss.schema_url
    pss.spans.extend(spans)
    return request_to_line(part)


def spool_lines(req: ExportTraceServiceRequest, max_line_bytes: int = MAX_SPOOL_LINE_BYTES) -> bytes:
    """The request as spool lines: one line, or (when that line would be over ``max_line_bytes``) one line
    per run of spans of a resource and scope that fits. A single span too large for a line is refused:
    the loader could not read it, so it is never acknowledged."""
    line = request_to_line(req)
    if len(line) <= max_line_bytes:
        return line
    out: list[bytes] = []
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            base = len(_part(rs, ss, []))
            run: list = []
            size = base
            for span in ss.spans:
                n = len(_text_message(span)) + 1        # its text and the comma before the next
                if base + n > max_line_bytes:
                    raise _BadRequest(413, f"span {span.name!r} is {n - 1:,} bytes as OTLP/JSON, over the "
                                           f"{max_line_bytes:,} a spooled line may hold")
                if run and size + n > max_line_bytes:
                    out.append(_part(rs, ss, run))
                    run, size = [], base
                run.append(span)
                size += n
            if run:
                out.append(_part(rs, ss, run))
    return b"".join(out)


# ---------------------------------------------------------------- the spool

def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _spool_lock(spool: Path):
    """The spool's lock: held by the writer around each group commit and by drain around its rotation
    (flock, so it holds between processes and between two opens in one process)."""
    fd = os.open(spool / "spool.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)        # closing releases the lock


def _segment_name() -> str:
    return f"seg-{time.time_ns():020d}-{os.getpid()}.jsonl"


def _rotate_active(spool: Path) -> Path | None:
    """Under the spool's lock: close the active segment (rename it to a ``seg-`` name). The writer sees
    the rename before its next write and starts a new segment. The rename is not fsync'd here: after a
    crash the file is under one name or the other, and :func:`_recover` finds it under either."""
    active = spool / ACTIVE
    try:
        size = active.stat().st_size
    except FileNotFoundError:
        return None
    if size == 0:
        return None
    target = spool / _segment_name()
    os.rename(active, target)
    return target


def _recover(spool: Path) -> None:
    """Under the spool's lock, when no writer is mid-commit: close the active segment, and a spare that holds
    lines (the writer took it and wrote into it, and a crash lost the un-fsync'd rename to ``active.jsonl``;
    a spare is only ever renamed into place complete, all zeros, so a first byte that is not zero is a line)."""
    _rotate_active(spool)
    # the spare's maker fsyncs the folder after naming it spare.zeros; a writer that took it before then
    # may, after a crash, find its lines under the maker's temporary name
    for name in (SPARE, SPARE_TMP):
        try:
            with open(spool / name, "rb") as fh:
                used = fh.read(1) not in (b"", b"\0")
        except FileNotFoundError:
            continue
        if used:
            os.rename(spool / name, spool / _segment_name())


@dataclass
class _Pending:
    data: bytes
    done: threading.Event = field(default_factory=threading.Event)
    error: str | None = None


def _zeroed_file(path: Path, size: int, stop: threading.Event | None = None) -> bool:
    """Write ``size`` zero bytes to ``path`` and fsync it (False if stopped first)."""
    block = bytes(1 << 20)
    with open(path, "wb") as fh:
        left = size
        while left > 0:
            if stop is not None and stop.is_set():
                return False
            left -= fh.write(block[: min(left, len(block))])
        fh.flush()
        os.fsync(fh.fileno())
    return True


class _Spool:
    """The writer: the request threads take turns as the one that writes every waiting request's lines into
    the active segment and fsyncs once, then releases them all (group commit; a lone request writes its
    own, with no hand-off to another thread and back).

    A segment is a file of zeros written ahead (by a second thread, as ``spare.zeros``) that the lines
    overwrite: the fdatasync after a write that does not grow the file has no size to journal, so it does
    not wait for a journal commit carrying other processes' writes (on ext4 here, a P99 of 15 ms against
    24-60 ms for appends to a growing file under the same load). The spool's text is ASCII JSON with no NUL
    byte, so its end is the first NUL (drain cuts there). A segment whose zeros are used up is closed; with
    no spare ready the next one grows by its writes (up to ``segment_max_bytes``). A spare is twice the size
    the last segment reached (at least 1 MiB, at most ``segment_max_bytes``), so frequent drains do not
    make the spool write many more zeros than lines.
    """

    def __init__(self, spool: Path, segment_max_bytes: int = SEGMENT_MAX_BYTES):
        self.dir = spool
        self.segment_max_bytes = segment_max_bytes
        self.fd: int | None = None
        self.ino: int | None = None
        self.offset = 0              # where the next line goes in the active segment
        self.allocated = 0           # the bytes of zeros it was made of (0: it grows by its writes)
        self.spare_bytes = min(SPARE_MIN_BYTES * 4, segment_max_bytes)
        self.commits = 0
        # (write + fsync ms, requests) of the latest commits, for the benchmark's breakdown
        self.recent: collections.deque[tuple[float, int]] = collections.deque(maxlen=100_000)
        self.closed = False
        self._turn = threading.Condition()
        self._waiting: list[_Pending] = []      # appended, not yet taken by a writing thread
        self._writing = False                   # a thread is writing a group
        (spool / SPARE_TMP).unlink(missing_ok=True)
        spare = spool / SPARE
        if spare.exists() and spare.stat().st_size > segment_max_bytes:
            spare.unlink()
        self._stop_spare = threading.Event()
        self._want_spare = threading.Event()
        self._want_spare.set()
        self.spare_thread = threading.Thread(target=self._make_spares, name="otlp-spool-spare", daemon=True)
        self.spare_thread.start()

    def append(self, data: bytes, timeout_s: float = 30.0) -> str | None:
        """Write ``data`` durably; None once it is on disk, else why not. The caller writes the waiting
        group itself when no other thread is writing one."""
        item = _Pending(data)
        deadline = time.monotonic() + timeout_s
        with self._turn:
            if self.closed:
                return "the receiver is stopping"
            self._waiting.append(item)
            while not item.done.is_set():
                if not self._writing:
                    self._writing = True
                    group, self._waiting = self._waiting, []
                    self._turn.release()
                    try:
                        self._commit(group)
                    finally:
                        self._turn.acquire()
                        self._writing = False
                        self._turn.notify_all()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:       # not acknowledged (it may still be written: the client retries)
                    return f"the spool did not write within {timeout_s:.0f} s"
                self._turn.wait(left)
        return item.error

    def close(self) -> None:
        """Let the groups being written finish, then stop; later appends are refused."""
        with self._turn:
            self.closed = True
            while self._writing:
                self._turn.wait()
            # what is still waiting (a request that gave up waiting leaves its lines here) is written now;
            # no thread writes after this one
            group, self._waiting, self._writing = self._waiting, [], True
        if group:
            self._commit(group)
            with self._turn:
                self._turn.notify_all()
        self._stop_spare.set()
        self._want_spare.set()
        self.spare_thread.join()
        (self.dir / SPARE_TMP).unlink(missing_ok=True)
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _make_spares(self) -> None:
        while True:
            self._want_spare.wait()
            if self._stop_spare.is_set():
                return
            self._want_spare.clear()
            if (self.dir / SPARE).exists():
                continue
            tmp = self.dir / SPARE_TMP
            try:
                if _zeroed_file(tmp, self.spare_bytes, self._stop_spare):
                    os.rename(tmp, self.dir / SPARE)
                    _fsync_dir(self.dir)
            except OSError as exc:      # no spare: the writer grows its segment instead
                log.warning("OTLP spool %s: cannot write a spare segment (%s)", self.dir, exc.strerror)

    def _open_active(self) -> None:
        """Under the lock: the active segment this writer writes into; a new one if drain renamed it."""
        path = self.dir / ACTIVE
        try:
            ino = os.stat(path).st_ino
        except FileNotFoundError:
            ino = None
        if self.fd is not None and ino == self.ino:
            return
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            # the next spare: twice what this segment held, so a drain every second writes few zeros
            self.spare_bytes = max(min(SPARE_MIN_BYTES, self.segment_max_bytes),
                                   min(self.segment_max_bytes, 2 * self.offset))
        if ino is not None:
            _rotate_active(self.dir)         # not this writer's: closed, never written into
        try:
            # no fsync of the folder: the spare's name is durable (its maker fsync'd it) and _recover reads
            # lines under either name, so taking a segment forces no journal commit on the ack path
            os.rename(self.dir / SPARE, path)
            took = True
        except FileNotFoundError:
            took = False
        self._want_spare.set()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        st = os.fstat(self.fd)
        self.ino, self.allocated, self.offset = st.st_ino, st.st_size, 0
        if not took:
            _fsync_dir(self.dir)      # a new file's name is durable before any line in it is acknowledged

    def _commit(self, group: list[_Pending]) -> None:
        data = b"".join(p.data for p in group)
        error = None
        with _spool_lock(self.dir):
            try:
                self._open_active()
            except OSError as exc:
                error = f"the spool cannot be opened ({exc.strerror})"
            if error is None:
                start = self.offset
                try:
                    t0 = time.perf_counter()
                    view = memoryview(data)
                    at = start
                    while view:
                        n = os.pwrite(self.fd, view, at)
                        view, at = view[n:], at + n
                    os.fdatasync(self.fd)
                    self.offset = at
                    self.commits += 1
                    self.recent.append(((time.perf_counter() - t0) * 1e3, len(group)))
                    if (self.offset >= self.segment_max_bytes - 4096
                            or self.offset >= self.allocated - 4096 > 0 and (self.dir / SPARE).exists()):
                        _rotate_active(self.dir)          # full, or its zeros used up and a spare ready
                except OSError as exc:
                    error = f"the spool cannot be written ({exc.strerror})"
                    log.error("OTLP spool %s: %s", self.dir, error)
                    # no half-written request stays behind: the segment ends at the last acknowledged line
                    # and is closed, the next request starts a new one
                    with contextlib.suppress(OSError):
                        os.ftruncate(self.fd, start)
                        os.fsync(self.fd)
                        _rotate_active(self.dir)
        for p in group:
            p.error = error
            p.done.set()


# ---------------------------------------------------------------- the HTTP face

def _status_body(content_type: str, code: int, message: str) -> bytes:
    """A ``google.rpc.Status`` (code, message) in the request's encoding, as OTLP/HTTP asks of errors."""
    rpc = _RPC_CODE.get(code, 2)
    if content_type == PROTOBUF:
        text = message.encode("utf-8")
        return b"\x08" + _varint(rpc) + b"\x12" + _varint(len(text)) + text
    return json.dumps({"code": rpc, "message": message}).encode("utf-8")


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _decompress(body: bytes, encoding: str, limit: int) -> bytes:
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}.get(encoding)
    if wbits is None:
        raise _BadRequest(415, f"Content-Encoding {encoding!r} is not supported (gzip, deflate or none)")
    d = zlib.decompressobj(wbits)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise _BadRequest(400, f"the {encoding} body is corrupt ({exc})") from None
    if len(out) > limit:
        raise _BadRequest(413, f"the body expands past {limit:,} bytes")
    if not d.eof:
        raise _BadRequest(400, f"the {encoding} body is truncated")
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "finops-otlp"
    timeout = 120           # an idle keep-alive connection is closed after this many seconds (the client reconnects)
    receiver: Receiver     # set on the subclass made per receiver

    def log_message(self, format, *args):    # noqa: A002 (the stdlib's name)
        log.debug("otlp %s: " + format, self.client_address[0], *args)

    def _reply(self, code: int, body: bytes = b"", content_type: str = JSON, close: bool = False,
               headers: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, message: str, content_type: str = JSON, close: bool = False, headers=None):
        kind = PROTOBUF if content_type == PROTOBUF else JSON
        self._reply(code, _status_body(kind, code, message), kind, close, headers)

    def _not_post(self):
        if self.path.split("?", 1)[0] != TRACES_PATH:
            self._error(404, f"no such path; OTLP/HTTP traces go to POST {TRACES_PATH}", close=True)
        else:
            self._error(405, f"{self.command} is not allowed; POST an ExportTraceServiceRequest",
                        close=True, headers={"Allow": "POST"})

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_post

    def do_POST(self):
        r = self.receiver
        if self.path.split("?", 1)[0] != TRACES_PATH:
            return self._error(404, f"no such path; OTLP/HTTP traces go to POST {TRACES_PATH}", close=True)
        ctype = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        if r.token is not None:
            given = self.headers.get("Authorization") or ""
            if not hmac.compare_digest(given.encode(), f"Bearer {r.token}".encode()):
                return self._error(401, "a bearer token is required (Authorization: Bearer ...)", ctype,
                                   close=True, headers={"WWW-Authenticate": "Bearer"})
        if ctype not in (PROTOBUF, JSON):
            return self._error(415, f"Content-Type {ctype or 'none'!r} is not supported; send {PROTOBUF} or {JSON}",
                               close=True)
        try:
            with r._working:
                body = self._read_body(r.max_body_bytes)
                if body is None:
                    return
                encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
                if encoding not in ("", "identity"):
                    body = _decompress(body, encoding, r.max_body_bytes)
                req = parse_protobuf(body) if ctype == PROTOBUF else parse_json(body)
                del body
                spans = count_spans(req)
                data = spool_lines(req) if spans else b""
                del req
        except _BadRequest as exc:
            r._count("rejected_requests")
            # the body may be unread (411, 413, a bad chunk): the connection cannot carry another request
            return self._error(exc.status, str(exc), ctype, close=True)
        except Exception:       # a bug here: the request is answered and logged, never spooled
            log.exception("OTLP receiver: converting a request failed")
            return self._error(500, "the receiver failed on this request (its log says why); nothing was stored",
                               ctype, close=True)
        if data:
            error = r.spool.append(data)
            if error is not None:
                return self._error(503, error, ctype, headers={"Retry-After": "1"})
        r._count("requests", spans=spans)
        if ctype == PROTOBUF:
            self._reply(200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF)
        else:
            self._reply(200, b"{}", JSON)

    def _read_body(self, limit: int) -> bytes | None:
        length = self.headers.get("Content-Length")
        if length is None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                return self._read_chunked(limit)
            raise _BadRequest(411, "Content-Length is required")
        try:
            n = int(length)
        except ValueError:
            raise _BadRequest(400, f"Content-Length {length!r} is not a number") from None
        if n > limit:
            raise _BadRequest(413, f"the body is {n:,} bytes, over the {limit:,} allowed")
        body = self.rfile.read(n)
        if len(body) < n:           # the client went away mid-body: nothing to answer
            self.close_connection = True
            return None
        return body

    def _read_chunked(self, limit: int) -> bytes | None:
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadRequest(400, "a chunk size is not hex") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            total += size
            if total > limit:
                raise _BadRequest(413, f"the body is over the {limit:,} bytes allowed")
            chunk = self.rfile.read(size)
            self.rfile.readline(16)
            if len(chunk) < size:
                self.close_connection = True
                return None
            parts.append(chunk)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


@dataclass
class ReceiverStats:
    requests: int = 0              # requests answered 200
    spans: int = 0                 # spans in them
    rejected_requests: int = 0     # 400/413/415 for the body


class Receiver:
    """A running OTLP/HTTP receiver (see :func:`start_receiver`)."""

    def __init__(self, spool_dir: Path, host: str, port: int, max_body_bytes: int, token: str | None,
                 segment_max_bytes: int = SEGMENT_MAX_BYTES):
        self.spool_dir = spool_dir
        self.max_body_bytes = max_body_bytes
        self.token = token
        self.stats = ReceiverStats()
        self._stopped = False
        # requests read and converted at once: bounds memory at about this many times 3 x max_body_bytes
        self._working = threading.BoundedSemaphore(MAX_REQUESTS_IN_PROGRESS)
        self._stats_lock = threading.Lock()
        spool_dir.mkdir(parents=True, exist_ok=True)
        self._life = os.open(spool_dir / "receiver.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._life, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._life)
            raise InputError("another OTLP receiver is spooling into this folder", file=str(spool_dir)) from None
        with _spool_lock(spool_dir):
            _recover(spool_dir)              # a segment a killed receiver left open is closed, never appended to
        _fsync_dir(spool_dir)
        self.spool = _Spool(spool_dir, segment_max_bytes)
        handler = type("OTLPHandler", (_Handler,), {"receiver": self})
        try:
            self._server = _Server((host, port), handler)
        except OSError:
            self.spool.close()
            os.close(self._life)
            raise
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"otlp-receiver-{self.port}", daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}{TRACES_PATH}"

    def _count(self, what: str, spans: int = 0) -> None:
        with self._stats_lock:
            setattr(self.stats, what, getattr(self.stats, what) + 1)
            self.stats.spans += spans

    def stop(self) -> None:
        """Stop serving; every request answered so far is on disk. A second call does nothing."""
        if self._stopped:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self.spool.close()
        os.close(self._life)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_receiver(spool_dir: str | os.PathLike, host: str = "127.0.0.1", port: int = 4318,
                   max_body_bytes: int = 16 << 20, token: str | None = None) -> Receiver:
    """Serve OTLP/HTTP traces on ``host:port`` (``port=0``: a free one, read ``Receiver.port``) in
    background threads, spooling into ``spool_dir``; ``Receiver.stop()`` ends it.

    No authentication beyond the bind address (127.0.0.1 by default) and, when ``token`` is given, a
    bearer token every request must carry. Answers 200 only once the request's spans are fsync'd.

    It also shortens the process's thread switch interval to :data:`SWITCH_INTERVAL_S`: a request's handling
    takes the GIL several times, and a drain (or a page) computing in another thread of the process holds it
    up to the interval each time. Measured with ``bench/otlp.py --rate 2000 --drain --drain-every 2`` (load
    3–4): ack P99 58–412 ms at Python's default 5 ms, 23–32 ms at 0.5 ms."""
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)
    return Receiver(Path(spool_dir), host, port, max_body_bytes, token)


#: the thread switch interval of a process that receives OTLP (:func:`start_receiver`), seconds
SWITCH_INTERVAL_S = 0.0005


# ---------------------------------------------------------------- drain

def _complete_part(seg: Path) -> bool:
    """Cut a segment to its complete lines: its text ends at the first NUL byte (the zeros written ahead)
    and a partial last line (a writer killed mid-write) was never acknowledged. False if nothing is left."""
    size = seg.stat().st_size
    with open(seg, "rb+") as fh:
        end, pos = size, 0
        while pos < size:                      # the first NUL: the spool's text holds none
            block = fh.read(1 << 20)
            if not block:
                break
            nul = block.find(b"\0")
            if nul >= 0:
                end = pos + nul
                break
            pos += len(block)
        keep = end
        while keep > 0:                        # back to the last newline before it
            start = max(0, keep - (1 << 20))
            fh.seek(start)
            nl = fh.read(keep - start).rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            keep = start
        if keep < end:
            log.warning("OTLP spool %s: dropped a partial last line (%s bytes, never acknowledged)",
                        seg.name, f"{end - keep:,}")
        if keep < size:
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())
    return keep > 0


def _reject(spool: Path, seg: Path, reason: str) -> None:
    aside = spool / REJECTED
    aside.mkdir(exist_ok=True)
    (aside / f"{seg.name}.reason.txt").write_text(reason + "\n", encoding="utf-8")
    os.replace(seg, aside / seg.name)
    _fsync_dir(spool)
    log.error("OTLP spool %s: the otel adapter refused it (%s); moved to %s", seg.name, reason, aside)


def drain(con: duckdb.DuckDBPyConnection, spool_dir: str | os.PathLike, options: IngestOptions | None = None) -> int:
    """Load every complete spooled segment into the store with the ``otel`` adapter, then delete it;
    returns the rows ingested. Idempotent: a segment loaded before (a crash before its delete) adds
    nothing. ``options`` (e.g. ``tenant_field``) are passed to the loader; the format is always otel."""
    access.require("upload")            # before anything moves: a refusal is not the segment's fault
    spool = Path(spool_dir)
    if not spool.is_dir():
        return 0
    with _spool_lock(spool):
        _recover(spool)
    _fsync_dir(spool)                   # outside the lock: the writer is not held up by it
    opts = options or IngestOptions()
    total = 0
    for seg in sorted(spool.glob(SEGMENT_GLOB)):
        try:
            if not _complete_part(seg):
                seg.unlink()
                continue
        except FileNotFoundError:          # another drain took it
            continue
        run = IngestOptions(**{**opts.__dict__, "format": "otel", "file_label": f"OTLP spool {seg.name}"})
        try:
            results = ingest_path(con, seg, run)
        except access.AccessDenied:
            raise
        except InputError as exc:
            if _NO_GENAI in str(exc):
                log.info("OTLP spool %s: no GenAI model-call spans; nothing to load", seg.name)
                seg.unlink()
                continue
            _reject(spool, seg, str(exc))
            continue
        except duckdb.Error:
            raise                               # the store's trouble, not the segment's: kept for the next drain
        except Exception as exc:                # a bug in a reader: this segment aside, the others still load
            log.exception("OTLP spool %s: the loader failed on it", seg.name)
            _reject(spool, seg, f"the loader failed on it ({type(exc).__name__}: {exc}); a bug to report")
            continue
        total += sum(r.rows_ingested for r in results)
        seg.unlink(missing_ok=True)
    _fsync_dir(spool)
    return total
