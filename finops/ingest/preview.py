"""Look at a file before loading it: its detected format, its first rows as read, and its first rows
as they will be stored (typed, validated canonical rows), without writing anything.

Used by the Data page (upload preview and column-mapping form); the CLI's ``ingest`` loads directly.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from finops.errors import InputError
from finops.ingest import loader
from finops.ingest.base import IngestOptions, Probe, adapter_named, decimal_comma, probe, too_wide
from finops.ingest.tabular import relation_sql

TABULAR = ("csv", "jsonl", "json", "parquet")

# canonical column -> source names it is often called (compared lower-case, without _ - and spaces)
ALIASES: dict[str, tuple[str, ...]] = {
    "request_id": ("requestid", "id", "callid", "spanid", "generationid"),
    "ts": ("ts", "timestamp", "time", "when", "starttime", "createdat", "created", "datetime", "date", "arrivaltime"),
    "tenant": ("tenant", "team", "customer", "who", "user", "userid", "apikeyalias", "project", "org"),
    "sla_tier": ("slatier", "tier", "priority"),
    "model": ("model", "modelname", "engine", "deployment"),
    "route": ("route", "path", "target"),
    "input_tokens": ("inputtokens", "prompttokens", "contexttokens", "tokensin"),
    "output_tokens": ("outputtokens", "completiontokens", "generatedtokens", "tokensout"),
    "cached_input_tokens": ("cachedinputtokens", "cachedtokens", "cachereadinputtokens"),
    "total_ms": ("totalms", "latencyms", "durationms", "elapsedms"),
    "ttft_ms": ("ttftms", "timetofirsttokenms"),
    "queue_ms": ("queuems", "queuetimems", "waitms"),
    "status": ("status", "outcome"),
    "cost_usd": ("costusd", "cost", "spend", "priceusd"),
}


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]", "", str(name)).lower()


def suggest_mapping(columns: list[str]) -> dict[str, str]:
    """A first guess of canonical -> source column from the source's column names (each used once).

    >>> suggest_mapping(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
    {'ts': 'TIMESTAMP', 'input_tokens': 'ContextTokens', 'output_tokens': 'GeneratedTokens'}
    """
    by_norm = {}
    for c in columns:
        by_norm.setdefault(_norm(c), c)
    out, used = {}, set()
    for canon, names in ALIASES.items():
        for n in (_norm(canon), *names):
            src = by_norm.get(n)
            if src is not None and src not in used:
                out[canon] = src
                used.add(src)
                break
    return out


@dataclass
class Preview:
    file: str
    kind: str                       # what the file looks like: csv, jsonl, json, parquet, text
    container: str                  # text, gzip, parquet, zip
    format: str                     # the adapter that will read it ("generic" when a mapping is needed)
    format_label: str
    columns: list[str]              # source columns (tabular files)
    raw: pd.DataFrame               # first rows as read from the file
    rows: pd.DataFrame              # first rows as they will be stored, with _row and _reject
    needs_mapping: bool             # no known format: pick columns (at least ts, and model or a constant)
    members: list[str] = field(default_factory=list)    # a zip's files (the preview shows the first)
    message: str | None = None      # why there are no canonical rows yet (what the form must supply)

    @property
    def ready(self) -> bool:
        """True when the file can be loaded as it is set up (rows could be read)."""
        return not self.needs_mapping and self.message is None

    @property
    def shown(self) -> pd.DataFrame:
        """``rows`` without the columns that are empty in every previewed row."""
        if self.rows.empty:
            return self.rows
        keep = [c for c in self.rows.columns if self.rows[c].notna().any() or c in ("ts", "model")]
        return self.rows[keep]


def _raw(con: duckdb.DuckDBPyConnection, p: Probe, n: int) -> tuple[pd.DataFrame, list[str]]:
    if p.kind in TABULAR:
        sql, params, cols = relation_sql(con, p)
        try:
            frame = con.execute(f"SELECT * FROM ({sql}) LIMIT ?", [*params, n]).df()
        except duckdb.Error as exc:
            raise InputError(f"cannot read it as {p.kind}: {str(exc).splitlines()[0]}", file=p.name) from None
        return frame.drop(columns=[c for c in ("_extra",) if c in frame.columns]), cols
    return pd.DataFrame({"line": p.lines[:n]}), []


def _canonical_rows(con, adapter, p: Probe, options: IngestOptions, n: int) -> pd.DataFrame:
    """The first ``n`` rows as the load stores them, read as the load reads them: where the typed reading meets a
    value it cannot take (``0,0012`` in a column of numbers), the untyped one behind it, whose checks name the
    row and field (the preview stopped on DuckDB's "Conversion Error" and the file could not be loaded here)."""
    loader._install_macros(con)
    source = adapter.read(con, p, options)
    while True:
        try:
            sql = loader.validated_sql(con, source.sql, source.params, decimal_comma=decimal_comma(p))
            rows = con.execute(f"SELECT * EXCLUDE (_hash) FROM ({sql}) ORDER BY _row LIMIT ?",
                               [*source.params, n]).df()
            break
        except duckdb.Error as exc:
            if source.fallback is None:
                raise InputError(f"cannot read as {adapter.name}: {str(exc).splitlines()[0]}", file=p.name) from None
            fallback = source.fallback
        finally:
            if source.cleanup:
                source.cleanup()
        source = fallback()
    rows["_reject"] = rows["_reject"].replace("", None)
    return rows.drop(columns=[c for c in ("_legacy_hash",) if c in rows.columns])     # the loader's, not the file's


def preview_path(con: duckdb.DuckDBPyConnection, path: str | Path, name: str | None = None,
                 options: IngestOptions | None = None, n: int = 20) -> Preview:
    """Detect ``path``'s format and return its first ``n`` rows raw and as canonical rows (nothing written).

    A zip is previewed through its first file. Raises InputError for a file that cannot be read
    (empty, binary, truncated), naming the file.
    """
    options = options or IngestOptions()
    path = Path(path)
    name = name or path.name
    with tempfile.TemporaryDirectory(prefix="finops-preview-") as tmp:
        members = loader.expand(path, Path(tmp))
        member, member_name = members[0]
        zipped = len(members) > 1 or member != path
        shown_name = name if len(members) == 1 else f"{name}:{member_name.split(':', 1)[-1]}"
        p = probe(loader.utf8_text(member, Path(tmp), shown_name), shown_name)
        wide = too_wide(p)
        if wide is not None:
            raise wide
        mapped = bool(options.mapping or options.tenant_field)
        needs_mapping = False
        try:
            adapter = loader.detect(p, options.format, mapped)
        except InputError:
            if p.kind not in TABULAR or options.format:
                raise
            adapter, needs_mapping = adapter_named("generic"), True
        if adapter.name == "generic" and not mapped:
            needs_mapping = True
        raw, cols = _raw(con, p, n)
        rows = pd.DataFrame()
        message = None
        if needs_mapping:
            message = ("No known log format: map the file's columns onto the canonical ones "
                       "(at least ts, and model or a constant model).")
        else:
            try:
                rows = _canonical_rows(con, adapter, p, options, n)
            except InputError as exc:      # e.g. "names no model": the form asks for what is missing
                message = str(exc)
        container = "zip" if zipped else p.container
        return Preview(name, p.kind, container, adapter.name, adapter.label, cols, raw, rows, needs_mapping,
                       [m for _, m in members] if container == "zip" else [], message)


def rejected_rows(con: duckdb.DuckDBPyConnection, path: str | Path, name: str, rejects: list[dict]) -> pd.DataFrame:
    """The source rows a load rejected, as read from the file, with the reason in front (for a CSV
    the user can fix and load again). Files that are not tables, and zip archives, give the reject list
    (row, field, reason) alone."""
    listed = pd.DataFrame(rejects, columns=["row", "field", "reason"])
    path = Path(path)
    if listed.empty:
        return listed
    import zipfile
    if zipfile.is_zipfile(path):
        return listed
    p = probe(path, name)
    if p.kind not in TABULAR:
        return listed
    sql, params, _ = relation_sql(con, p)
    con.register("_rejected_rows", listed)
    try:
        src = con.execute(f"SELECT r.row, r.field, r.reason, s.* EXCLUDE (_row) FROM _rejected_rows r "
                          f"JOIN ({sql}) s ON s._row = r.row ORDER BY r.row", params).df()
    except duckdb.Error:
        return listed       # the file reads for the load but not row by row here: the list still says it all
    finally:
        con.unregister("_rejected_rows")
    return src.drop(columns=[c for c in ("_extra",) if c in src.columns])

