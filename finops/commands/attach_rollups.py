"""python -m finops attach-rollups DIR... --db PATH [--json]"""
from __future__ import annotations

from finops import store
from finops.commands._common import add_db, db_path, print_json
from finops.scale import attach_rollups

NAME = "attach-rollups"
HELP = ("Load the output of `python -m finops rollup` (hourly rollups and latency sketch, no raw rows) into the "
        "store: the spend pages read it as if the requests were loaded.")


def add_arguments(p) -> None:
    p.add_argument("dirs", nargs="+", metavar="DIR", help="output folders of `python -m finops rollup`")
    add_db(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    con = store.connect(db_path(args))
    results = [attach_rollups(con, d) for d in args.dirs]
    if args.json:
        print_json([r.as_dict() for r in results])
        return 0
    for r in results:
        how = f"already attached as batch {r.batch_id}" if r.already_attached else f"attached as batch {r.batch_id}"
        print(f"{r.output}: {r.requests:,} requests in {r.rollup_rows:,} rollup rows, {r.sketch_rows:,} sketch rows; "
              f"{how}")
    return 0
