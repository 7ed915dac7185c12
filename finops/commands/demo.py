"""python -m finops demo --db PATH [--days N] [--seed N]"""
from __future__ import annotations

from finops import store
from finops.commands._common import add_db, db_path
from finops.sample.demo import DEMO_DAYS, DEMO_SEED, MAX_DEMO_DAYS, build_demo, check_demo

NAME = "demo"
HELP = "Build a store holding the deterministic sample fleet (about 500k requests over 14 days)."


def add_arguments(p) -> None:
    add_db(p)
    p.add_argument("--days", type=int, default=DEMO_DAYS, help=f"days of traffic, 1 to {MAX_DEMO_DAYS} (default 14)")
    p.add_argument("--seed", type=int, default=DEMO_SEED, help="random seed (default 7)")


def run(args) -> int:
    check_demo(args.days, args.seed)        # before the store is opened: a refused run leaves no file
    con = store.connect(db_path(args))
    n = build_demo(con, days=args.days, seed=args.seed,
                   progress=lambda f, what: print(f"[{f:4.0%}] {what}", flush=True))
    print(f"{n:,} requests ingested into {db_path(args)}")
    return 0
