"""The gateway's log: one canonical row (:mod:`finops.schema`) per model call, as JSONL.

Each row is written as one complete line and flushed to the operating system
at once, so killing the gateway (even with SIGKILL) loses no completed row.
``ts`` is ISO-8601 UTC with a ``Z``; ``attrs`` is a nested JSON object; every
canonical column is present, null where the gateway does not know it.
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
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
    unknown = [k for k in fields if k not in _CANONICAL]
    if unknown:
        raise ValueError("not canonical columns: " + ", ".join(unknown))
    row = {name: fields.get(name) for name in NAMES}
    if row["attrs"] is None:
        row["attrs"] = {}
    return row


class JsonlLog:
    """Append canonical rows to ``path``, one flushed line each.

    ``fsync=True`` also asks the disk to persist each row (survives a power cut,
    costs a disk round trip per row); a flush is enough to survive a killed process.
    """

    def __init__(self, path: str | Path, *, fsync: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        self._fsync = fsync
        self.rows_written = 0

    def write(self, row: dict[str, Any]) -> None:
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        self._fh.write(line + "\n")
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())
        self.rows_written += 1

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            self._fh.close()


class MemoryLog:
    """Keeps rows in a list (tests, benchmarks without disk)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.closed = False

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def close(self) -> None:
        self.closed = True
