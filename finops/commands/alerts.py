"""python -m finops alerts --db PATH [filters] [--json]"""
from __future__ import annotations

from finops import store
from finops.commands._common import add_db, add_filters, db_path, filters_from, print_json
from finops.jsonutil import records
from finops.ops import alerts

NAME = "alerts"
HELP = ("Alerts of the deployment thresholds (error rate > 1%, P99 > 1.5 x SLA, GPU utilisation > 90% or "
        "< 20% sustained, queue length growing) per model and tenant per window.")


def add_arguments(p) -> None:
    add_db(p)
    add_filters(p)
    p.add_argument("--json", action="store_true",
                   help="a JSON list of objects: rule, model, tenant, window_start, window_end, value, "
                        "threshold, severity, message")


def run(args) -> int:
    con = store.connect(db_path(args))
    frame = alerts.open_alerts(con, filters_from(args))
    if args.json:
        print_json(records(frame))
    elif frame.empty:
        print("no alerts in this period")
    else:
        for row in frame.itertuples(index=False):
            print(f"[{row.severity}] {row.message}")
    return 0
