"""python -m finops ingest PATH... --db PATH [--format F] [--map ...] [--records-path P] [--model M] [--tenant T]
[--strict] [--json]"""
from __future__ import annotations

import sys

from finops import store
from finops.commands._common import add_db, db_path, parse_time, print_json
from finops.errors import InputError
from finops.ingest import ADAPTERS, IngestOptions, ingest_path
from finops.ingest.uploads import mapping_pairs

NAME = "ingest"
HELP = "Load log files (CSV, JSON Lines, Parquet, log text; gzip or zip) into the store."


def parse_mapping(text: str | list[str] | None) -> dict[str, str]:
    """``ts=TIMESTAMP,input_tokens=ContextTokens`` -> {"ts": "TIMESTAMP", ...}; a list holds each ``--map`` given
    (the flag repeats: ``--map ts=TIMESTAMP --map model=Model``)."""
    return mapping_pairs(text, named="--map", malformed="--map entries look like canonical=SourceColumn, got {part!r}")


def add_arguments(p) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="files to load")
    add_db(p)
    p.add_argument("--format", choices=[a.name for a in ADAPTERS], help="skip detection and use this format")
    p.add_argument("--map", dest="mapping", action="append", metavar="CANONICAL=SOURCE,...",
                   help="column mapping canonical=source, comma-separated or the flag repeated (implies --format "
                        "generic)")
    p.add_argument("--model", help="model name for rows whose source has none")
    p.add_argument("--tenant", help="tenant for rows whose source has none")
    p.add_argument("--tenant-field", help="source field that counts as tenant")
    p.add_argument("--start", type=parse_time, help="start time for traces with relative timestamps (ISO, UTC)")
    p.add_argument("--records-path", help="dotted path to the records array of a JSON document "
                   "(e.g. response.data; default: the array itself, or its data/items)")
    p.add_argument("--strict", action="store_true", help="fail the whole file on any bad row")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    """Load each file in turn, one transaction each: a file refused is said on stderr and the others still load
    (each line printed as its file is done); the exit code is 1 where a file was refused or none of its rows
    loaded (every one rejected: a wrong format or mapping, nearly always)."""
    options = IngestOptions(format=args.format, mapping=parse_mapping(args.mapping), model=args.model,
                            tenant=args.tenant, tenant_field=args.tenant_field, start=args.start,
                            strict=args.strict, records_path=args.records_path)
    con = store.connect(db_path(args))
    results, errors = [], []
    try:
        if getattr(con, "remote", False):
            # held and served by another process: the files are streamed to its ingester, which loads them
            # where the store is (the same loader and summary; a relative path or a file only we can read works)
            from finops.ingest import service
            from finops.ingest.loader import IngestResult
            holder = service.control_for(db_path(args))
            if holder is None:
                raise store.StoreError(con.lost or "The process serving the store has stopped: run the command again.")

            def load(path):
                return [IngestResult(**r) for r in holder.ingest(path, options)]
        else:
            def load(path):
                return ingest_path(con, path, options)
        for path in args.paths:
            try:
                done = load(path)
            except store.StoreError:
                raise           # the store itself, not this file: the next file would meet it too
            except InputError as exc:
                errors.append({"file": str(path), "error": str(exc)})
                print(f"error: {exc}", file=sys.stderr)
                continue
            results.extend(done)
            if not args.json:
                _say(done)
    finally:
        con.close()
    total = {k: sum(getattr(r, k) for r in results)
             for k in ("rows_read", "rows_ingested", "rows_rejected", "duplicates_skipped")}
    rejects = [dict(r_, file=r.file) for r in results for r_ in r.rejects][:50]
    nothing = [r for r in results if r.every_row_rejected]
    if args.json:
        print_json(total | {"rejects": rejects, "files": [r.as_dict() | {"rejects": r.rejects[:20]}
                                                          for r in results], "errors": errors})
        return 1 if errors or nothing else 0
    for rej in rejects[:10]:
        print(f"  rejected {rej['file']} row {rej['row']}: {rej['reason']}", file=sys.stderr)
    if total["rows_rejected"] > 10:
        print(f"  ... {total['rows_rejected'] - 10:,} more rejected rows (use --json to see up to 50)",
              file=sys.stderr)
    for r in nothing:
        print(f"error: file {r.file}: every row was rejected, nothing loaded (read as {r.format}: see the reasons "
              "above; --format picks another reading, --map maps its columns)", file=sys.stderr)
    if len(args.paths) > 1 and errors:
        print(f"{len(errors)} of {len(args.paths)} files refused: the others are loaded", file=sys.stderr)
    return 1 if errors or nothing else 0


def _say(results) -> None:
    for r in results:
        print(f"{r.file} [{r.format}]: {r.rows_read:,} read, {r.rows_ingested:,} ingested, "
              f"{r.rows_rejected:,} rejected, {r.duplicates_skipped:,} duplicates skipped", flush=True)
