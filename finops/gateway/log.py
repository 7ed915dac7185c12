"""The gateway's log: one canonical row (:mod:`finops.schema`) per model call, as JSONL.

Each row is written as one complete line straight to the operating system, so
killing the gateway (even with SIGKILL) loses no completed row; a rotated file
is followed (see :class:`JsonlLog`).
``ts`` is ISO-8601 UTC with a ``Z``; ``attrs`` is a nested JSON object; every
canonical column is present, null where the gateway does not know it.

How the gateway fills the columns:

================  ==============================================================
request_id        ``gw-<32 hex>``; a rejected cascade attempt is ``<id>#attempt``
                  (``#attempt2``, ... for later ones) with ``attrs.parent_id = <id>``
ts                arrival at the gateway (every row of a request shares it)
tenant, sla_tier  from the API key or ``X-Tenant``, and the tenant's tier
model, route      the backend's model name and the backend's name; a cache hit has
                  ``route = "cache"`` and the model that served the cached answer
strategy          ``cost``, ``latency``, ``cascade``, a plugin's name, or ``pinned``
                  when the request named its model
replica           ``<backend>-<i>``; null for a cache hit
input/output      mock: estimated prompt tokens and the planned output; openai: the
_tokens           upstream's ``usage`` (``attrs.tokens_estimated`` if it sent none);
                  a cache hit repeats the cached answer's counts
cached_input_     the upstream's ``usage.prompt_tokens_details.cached_tokens``
_tokens
route_ms          decision time (for an escalated call: the escalation decision)
queue_ms          wait for a slot; prefill_ms, decode_ms (mock only), service_ms
ttft_ms           from arrival; openai without streaming: up to the whole answer
total_ms          from arrival until this call ended (the answer row: the client's wait)
status            ok, error, timeout, rejected (queue full); error_type says why
cost_usd          the config's prices for this call; 0 for a cache hit; null when
                  the backend has no price in the config or the call failed
confidence        the answer's confidence (mock: from the prompt's hash; openai:
                  exp(mean logprob) when requested), else null
attrs             endpoint, complexity, prompt_tokens_est, quality_floor, user,
                  slow_inject, cascade_threshold, parent_id, attempts,
                  cascade_cost_usd, cached_backend, upstream_id
================  ==============================================================
"""
from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from finops.schema import NAMES

_CANONICAL = frozenset(NAMES)


def utc_iso(dt: datetime) -> str:
    """``2026-11-29T10:00:00.123456Z``.

    >>> utc_iso(datetime(2026, 11, 29, 10, 0, 0, 123456, tzinfo=UTC))
    '2026-11-29T10:00:00.123456Z'
    """
    return dt.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def canonical_row(fields: dict[str, Any]) -> dict[str, Any]:
    """All canonical columns in schema order, null where ``fields`` has no value.

    >>> row = canonical_row({"request_id": "r1", "ts": "2026-11-29T10:00:00.000000Z", "model": "fast"})
    >>> list(row)[:5], row["attrs"]
    (['request_id', 'ts', 'tenant', 'sla_tier', 'model'], {})
    >>> canonical_row({"modle": "fast"})
    Traceback (most recent call last):
    ...
    ValueError: not canonical columns: modle
    """
    if not _CANONICAL.issuperset(fields):
        raise ValueError("not canonical columns: " + ", ".join(k for k in fields if k not in _CANONICAL))
    row = {name: fields.get(name) for name in NAMES}
    if row["attrs"] is None:
        row["attrs"] = {}
    return row


class JsonlLog:
    """Append canonical rows to ``path``, one line each, written with one ``write(2)``.

    Each row goes straight to the operating system (no buffer in the process),
    so a killed gateway loses no completed row. ``fsync=True`` also asks the
    disk to persist each row (survives a power cut, costs a disk round trip per
    row).

    Rotation: before each row the file at ``path`` is compared (device, inode)
    with the one open; if it was renamed or removed, ``path`` is opened anew, so
    ``logrotate`` without ``copytruncate`` needs no signal. :meth:`reopen` (the
    gateway calls it on SIGHUP) makes the next row reopen ``path`` in any case.

    A failed write raises ``OSError`` (a full disk: ``ENOSPC``). If part of a
    line reached the file, the next row starts on a new line, so one damaged
    line never swallows the next row.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._fd = -1
        self._reopen = False
        self._torn = False          # the last write left part of a line
        self.rows_written = 0
        self._open()

    def _open(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        st = os.fstat(fd)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd, self._ident = fd, (st.st_dev, st.st_ino)

    def _rotated(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return True
        return (st.st_dev, st.st_ino) != self._ident

    def reopen(self) -> None:
        """Open ``path`` again before the next row (safe to call from a signal handler)."""
        self._reopen = True

    def write(self, row: dict[str, Any]) -> None:
        line = (json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode()
        if self._reopen or self._rotated():
            self._reopen = False
            self._open()
            self._torn = False
        if self._torn:
            line = b"\n" + line
        data = memoryview(line)
        while data:
            try:
                n = os.write(self._fd, data)
            except OSError:
                if len(data) < len(line):      # part of this line is in the file
                    self._torn = True
                raise
            data = data[n:]
        self._torn = False
        if self._fsync:
            os.fsync(self._fd)
        self.rows_written += 1

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class MemoryLog:
    """Keeps rows in a list (tests, benchmarks without disk)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.closed = False

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def close(self) -> None:
        self.closed = True
