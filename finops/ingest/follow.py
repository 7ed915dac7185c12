"""Follow a growing log file (e.g. the gateway's JSONL): ingest the complete lines added since last time.

Each call reads from a byte offset to the last newline, loads those lines as one batch
(idempotently: rows already stored are skipped) and returns the new offset. A line still
being written (no newline yet) waits for the next call. A file that shrank (rotated or
truncated) is read again from the start; stored rows are not duplicated.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from finops import access
from finops.errors import InputError
from finops.ingest import IngestOptions, ingest_path


@dataclass(frozen=True)
class FollowStep:
    offset: int              # byte offset to resume from
    rows_ingested: int
    lines_read: int
    rotated: bool = False


def ingest_new_lines(con: duckdb.DuckDBPyConnection, path: str | Path, offset: int = 0,
                     options: IngestOptions | None = None, max_bytes: int = 64 << 20) -> FollowStep:
    """Load the complete lines of ``path`` after ``offset`` (at most ``max_bytes`` per call)."""
    access.require("follow")
    path = Path(path)
    if not path.exists():
        raise InputError("no such file (yet)", file=str(path))
    size = path.stat().st_size
    rotated = size < offset
    if rotated:
        offset = 0
    if size == offset:
        return FollowStep(offset, 0, 0, rotated)
    with open(path, "rb") as fh:
        fh.seek(offset)
        chunk = fh.read(min(size - offset, max_bytes))
    end = chunk.rfind(b"\n")
    if end < 0:
        return FollowStep(offset, 0, 0, rotated)     # a line still being written
    chunk = chunk[: end + 1]
    lines = chunk.count(b"\n")
    if not chunk.strip():
        return FollowStep(offset + len(chunk), 0, lines, rotated)
    suffix = "".join(path.suffixes[-1:]) or ".log"
    with tempfile.TemporaryDirectory(prefix="finops-follow-") as tmp:
        part = Path(tmp) / f"{path.stem}.{offset}{suffix}"
        part.write_bytes(chunk)
        opts = options or IngestOptions()
        label = f"{path.name} (followed, bytes {offset:,}-{offset + len(chunk):,})"
        results = ingest_path(con, part, IngestOptions(**{**opts.__dict__, "file_label": label}))
    return FollowStep(offset + len(chunk), sum(r.rows_ingested for r in results), lines, rotated)
