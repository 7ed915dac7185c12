"""The adapter table: one small object per log format.

An adapter knows how to recognise its format from a :class:`Probe` (the first
bytes of a file, decompressed) and how to read a file as a DuckDB SELECT that
yields, per source row:

``_row``      the 1-based row number in the source (for reject messages);
``_hash``     a content hash of the source row, used for ``request_id`` where the
              source has none (NULL when every row carries an id);
canonical columns, raw (any type: the loader casts and validates them);
``attrs``     JSON of every source field without a canonical home.

Adapters read files as streams through DuckDB wherever the format allows; the
few that must parse in Python (text logs, nested JSON) build an Arrow table in
chunks.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb

from finops.errors import InputError


@dataclass(frozen=True)
class IngestOptions:
    format: str | None = None                   # force an adapter by name
    mapping: dict[str, str] = field(default_factory=dict)  # canonical -> source column
    model: str | None = None                    # constant model where the source has none
    tenant: str | None = None                   # constant tenant
    tenant_field: str | None = None             # source field that counts as tenant
    start: datetime | None = None               # start time for traces with relative times
    strict: bool = False                        # any bad row fails the whole batch
    file_label: str | None = None               # the name users know the file by (uploads)
    records_path: str | None = None             # dotted path to the records array of a JSON document

    def as_json(self) -> str:
        d = {"format": self.format, "mapping": dict(sorted(self.mapping.items())), "model": self.model,
             "tenant": self.tenant, "tenant_field": self.tenant_field,
             "start": self.start.isoformat() if self.start else None}
        return json.dumps(d, sort_keys=True)


@dataclass
class Probe:
    """What detection sees of a file: its name, container, first bytes and shape."""
    path: Path
    name: str
    container: str              # parquet | gzip | text
    head: bytes                 # first bytes (decompressed)
    kind: str                   # parquet | jsonl | json | csv | text | empty | binary
    columns: list[str] = field(default_factory=list)    # header / first-object keys
    first_record: dict | None = None
    lines: list[str] = field(default_factory=list)
    delimiter: str = ","


@dataclass
class Source:
    """A file read as SQL: ``SELECT _row, _hash, <canonical...>, attrs FROM ...``."""
    sql: str
    params: list = field(default_factory=list)
    has_ids: bool = False       # every row carries request_id
    cleanup: Callable[[], None] | None = None
    # a slower, more forgiving reading to use when this one fails on a value (typed fast paths)
    fallback: Callable[[], Source] | None = None
    # re-reading is cheaper than a copy (Parquet: columnar, pruned): stage as a view, not a table
    stage_as_view: bool = False
    # the same rows with ``_row`` NULL, for a reader that numbers rows on one thread only (WITH
    # ORDINALITY): the loader stages these in parallel, in order, and numbers them by position
    # from ``first_row``
    unnumbered_sql: str | None = None
    first_row: int = 1


@dataclass(frozen=True)
class Adapter:
    name: str
    label: str
    source_tool: str
    export_hint: str
    sniff: Callable[[Probe], float]             # 0 = not this format; higher = surer
    read: Callable[[duckdb.DuckDBPyConnection, Probe, IngestOptions], Source]
    example: str | None = None                  # example file under tests/data/


ADAPTERS: list[Adapter] = []


def register(adapter: Adapter) -> Adapter:
    if any(a.name == adapter.name for a in ADAPTERS):
        raise ValueError(f"duplicate adapter {adapter.name}")
    ADAPTERS.append(adapter)
    return adapter


def adapter_named(name: str) -> Adapter:
    for a in ADAPTERS:
        if a.name == name:
            return a
    raise InputError(f"unknown format {name!r}; supported: {', '.join(a.name for a in ADAPTERS)}")


# ---------------------------------------------------------------- probing

HEAD_BYTES = 256 * 1024


def _looks_binary(head: bytes) -> bool:
    if not head:
        return False
    if b"\x00" in head[:4096]:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the end of the head is fine
        return exc.start < len(head) - 4
    return False


def probe(path: Path, name: str | None = None) -> Probe:
    """Read the first bytes of a (possibly gzip-compressed) file and classify its shape."""
    import gzip

    name = name or path.name
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic == b"PAR1":
        try:
            cols = [d[0] for d in duckdb.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()]
        except duckdb.Error as exc:
            raise InputError(f"the Parquet file is truncated or corrupt ({str(exc).splitlines()[0]})",
                             file=name) from None
        return Probe(path, name, "parquet", magic, "parquet", columns=cols)
    gz = magic[:2] == b"\x1f\x8b"
    container = "gzip" if gz else "text"
    opener = gzip.open if gz else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except (OSError, EOFError) as exc:
        raise InputError(f"the file is truncated or corrupt, cannot decompress it ({exc})", file=name) from None
    if not head.strip():
        return Probe(path, name, container, head, "empty")
    if _looks_binary(head):
        return Probe(path, name, container, head, "binary")
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff")
    lines = text.splitlines()
    if len(head) == HEAD_BYTES and lines:
        lines = lines[:-1]          # the last line may be cut by the head limit
    stripped = text.lstrip()
    if stripped.startswith("{"):
        first = next((ln for ln in lines if ln.strip()), "")
        try:
            rec = json.loads(first)
            if isinstance(rec, dict):
                return Probe(path, name, container, head, "jsonl", columns=list(rec), first_record=rec, lines=lines)
        except json.JSONDecodeError:
            pass
        return Probe(path, name, container, head, "json", lines=lines)
    if stripped.startswith("["):
        return Probe(path, name, container, head, "json", lines=lines)
    if lines:
        # the delimiter that splits the header into the most named fields
        best = max((len(next(csv.reader(io.StringIO(lines[0]), delimiter=d))), d) for d in ",\t;|")
        header = next(csv.reader(io.StringIO(lines[0]), delimiter=best[1]))
        if best[0] >= 2 and all(h.strip() for h in header) and "[" not in lines[0]:
            return Probe(path, name, container, head, "csv", columns=[h.strip() for h in header], lines=lines,
                         delimiter=best[1])
    return Probe(path, name, container, head, "text", lines=lines)
