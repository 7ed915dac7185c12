"""python -m finops attach-rollups DIR... [--dataset DATASET] --db PATH [--json]"""
from __future__ import annotations

from finops import store
from finops.commands._common import add_db, db_path, print_json
from finops.scale import attach_rollups

NAME = "attach-rollups"
HELP = ("Load the output of `python -m finops rollup` (the rollups, sketches and every table the loader writes at "
        "load time; no raw rows) into the store: the pages read it as if the requests were loaded.")


def add_arguments(p) -> None:
    p.add_argument("dirs", nargs="+", metavar="DIR", help="output folders of `python -m finops rollup`")
    p.add_argument("--dataset", metavar="DATASET",
                   help="the local folder (or mount) of the date=YYYY-MM-DD/ Parquet dataset the output was computed "
                        "from: recorded, so that sections needing raw rows can read a bounded slice of it")
    add_db(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    con = store.connect(db_path(args))
    results = [attach_rollups(con, d, args.dataset) for d in args.dirs]
    if args.json:
        print_json([r.as_dict() for r in results])
        return 0
    for r in results:
        how = f"already attached as batch {r.batch_id}" if r.already_attached else f"attached as batch {r.batch_id}"
        tables = ", ".join(f"{t} {n:,}" for t, n in r.table_rows.items())
        print(f"{r.output}: {r.requests:,} requests ({tables} rows); {how}"
              + (f"; raw rows read on demand from {r.dataset}" if r.dataset else ""))
    return 0
