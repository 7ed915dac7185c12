"""``python -m finops pull litellm --dsn ...`` / ``pull langfuse --host ...``: load the request logs a service
keeps, incrementally and resumably (see :mod:`finops.ingest.pulls`). Credentials come from the DSN or the
environment and are never printed."""
from __future__ import annotations

import os
import sys
from datetime import timedelta

from finops import store
from finops.commands._common import add_db, check_range, db_path, parse_time, print_json

NAME = "pull"
HELP = ("Pull request logs from where they live: LiteLLM's PostgreSQL database (LiteLLM_SpendLogs) or Langfuse's "
        "public API (observations), from where the last pull stopped; run it from cron.")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="pull_source", metavar="SOURCE", help="litellm or langfuse")
    sub.required = True
    lite = sub.add_parser("litellm", help="LiteLLM_SpendLogs from the proxy's PostgreSQL database",
                          description="Read LiteLLM_SpendLogs by (startTime, request_id) in pages, from the "
                                      "stored cursor; each page is committed before the cursor moves.")
    lite.add_argument("--dsn", default=None,
                      help="postgresql://USER[:PASSWORD]@HOST:PORT/DB (default: $FINOPS_LITELLM_DSN; the password "
                           "may instead come from PGPASSWORD or ~/.pgpass); never printed")
    lite.add_argument("--page-size", type=int, default=1000, help="rows per page (one transaction each)")
    lite.add_argument("--tenant-field", default=None,
                      help="the column or metadata key that is the tenant (default: team_id)")
    _common(lite)
    lf = sub.add_parser("langfuse", help="observations from Langfuse's public API",
                        description="Page through GET /api/public/observations (v1) or /api/public/v2/observations "
                                    "with fromStartTime from the stored cursor, joined to their traces; keys from "
                                    "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY (HTTP basic auth); a 429 waits "
                                    "for its Retry-After.")
    lf.add_argument("--host", default=None,
                    help="Langfuse's base URL, e.g. https://cloud.langfuse.com (default: $LANGFUSE_HOST)")
    lf.add_argument("--api", choices=("v1", "v2"), default="v2",
                    help="v1: /api/public/observations (page numbers); v2: /api/public/v2/observations (cursor)")
    lf.add_argument("--page-size", type=int, default=100, help="observations per page (Langfuse's limit)")
    lf.add_argument("--no-traces", action="store_true",
                    help="do not fetch the observations' traces (userId = tenant, sessionId, tags)")
    lf.add_argument("--window-hours", type=float, default=24.0,
                    help="read in slices of this many hours by startTime; the cursor moves after each whole slice")
    lf.add_argument("--max-wait", type=float, default=300.0,
                    help="give up when a 429's Retry-After asks to wait longer than this many seconds in all")
    _common(lf)


def _common(p) -> None:
    p.add_argument("--since", type=parse_time, default=None,
                   help="the first pull starts here (ISO, UTC); later pulls start from the stored cursor")
    p.add_argument("--overlap-minutes", type=float, default=15.0,
                   help="start this long before the cursor, for rows the source wrote late (read twice, loaded once)")
    add_db(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--verbose", action="store_true",
                   help="say on stderr each page committed (rows read, ingested, already stored)")


def run(args) -> int:
    from finops.errors import InputError
    from finops.ingest import pulls

    # nan or 1e308 minutes or hours stopped in timedelta() with a traceback; a negative window or wait went on
    check_range(args.overlap_minutes, "overlap_minutes", 0, 24 * 60, "minutes (a day)")
    if args.pull_source == "langfuse":
        check_range(args.window_hours, "window_hours", 1 / 60, 366 * 24, "hours (a minute to a year)")
        check_range(args.max_wait, "max_wait", 0, 86_400, "seconds (a day)")
    check_range(args.page_size, "page_size", 1, 100_000, "rows")
    overlap = timedelta(minutes=args.overlap_minutes)

    def said(page: int, r) -> None:
        print(f"page {page} committed: {r.rows_read:,} rows read, {r.rows_ingested:,} ingested, "
              f"{r.duplicates_skipped:,} already stored", file=sys.stderr, flush=True)
    on_page = said if args.verbose else None
    con = store.connect(db_path(args))
    if args.pull_source == "litellm":
        dsn = args.dsn or os.environ.get("FINOPS_LITELLM_DSN")
        if not dsn:
            raise InputError("give LiteLLM's database with --dsn postgresql://USER@HOST:PORT/DB (or FINOPS_LITELLM_DSN)")
        result = pulls.pull_litellm(con, dsn, page_size=args.page_size, overlap=overlap, since=args.since,
                                    tenant_field=args.tenant_field, on_page=on_page)
    else:
        host = args.host or os.environ.get("LANGFUSE_HOST")
        if not host:
            raise InputError("give Langfuse's URL with --host (or LANGFUSE_HOST)")
        result = pulls.pull_langfuse(con, host, api=args.api, page_size=args.page_size, overlap=overlap,
                                     since=args.since, traces=not args.no_traces, max_wait_s=args.max_wait,
                                     window=timedelta(hours=args.window_hours), on_page=on_page)
    if args.json:
        print_json(result.as_dict())
        return 0
    at = f"; cursor at {result.cursor['start_time']}" if result.cursor else ""
    print(f"{result.source}: {result.pages:,} pages, {result.rows_read:,} rows read, {result.rows_ingested:,} "
          f"ingested, {result.duplicates_skipped:,} already stored, {result.rows_rejected:,} rejected{at}")
    for r in result.rejects[:5]:
        print(f"  row {r['row']}: {r['reason']}")
    return 0
