"""python -m finops latency --db PATH --by model[,tenant,...] [filters] [--json]"""
from __future__ import annotations

from finops import sql, store
from finops.commands._common import add_db, add_filters, filters_from, print_json, stored_path
from finops.fmt import table
from finops.jsonutil import records
from finops.latency import stats as latency

NAME = "latency"
HELP = ("Requests and exact P50/P95/P99 of total_ms, ttft_ms, queue_ms and service_ms per group, with the requests "
        "each is over (requests_with_<field>; null where the logs lack a field; cache hits excluded).")


def add_arguments(p) -> None:
    add_db(p)
    p.add_argument("--by", default="model",
                   help=f"comma-separated groups from: {', '.join(sql.GROUP_COLUMNS + latency.TIME_GRAINS)} "
                        "(default model)")
    add_filters(p)
    p.add_argument("--json", action="store_true", help="a JSON list of objects")
    p.add_argument("--sketch", action="store_true",
                   help="read whole hours by model from the hourly latency sketch (faster; within 0.99%%) "
                        "instead of exact percentiles over the raw rows")


def run(args) -> int:
    con = store.connect(stored_path(args))
    by = [b.strip() for b in args.by.split(",") if b.strip()]
    with store.snapshot(con):
        frame = latency.percentiles(con, filters_from(args), by=by, exact=not args.sketch)
    if args.json:
        print_json(records(frame))
    elif frame.empty:
        print("no requests match these filters")
    else:
        print(table(frame))
    return 0
