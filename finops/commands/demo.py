"""python -m finops demo --db PATH [--days N] [--seed N]"""
from __future__ import annotations

from finops import store
from finops.commands._common import add_db, db_path
from finops.sample.demo import DEMO_DAYS, DEMO_SEED, build_demo

NAME = "demo"
HELP = "Build a store holding the deterministic sample fleet (about 500k requests over 14 days)."


def add_arguments(p) -> None:
    add_db(p)
    p.add_argument("--days", type=int, default=DEMO_DAYS, help="days of traffic (default 14)")
    p.add_argument("--seed", type=int, default=DEMO_SEED, help="random seed (default 7)")


def run(args) -> int:
    con = store.connect(db_path(args))
    n = build_demo(con, days=args.days, seed=args.seed,
                   progress=lambda f, what: print(f"[{f:4.0%}] {what}", flush=True))
    print(f"{n:,} requests ingested into {db_path(args)}")
    return 0
