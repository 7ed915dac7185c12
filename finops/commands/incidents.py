"""python -m finops incidents --db PATH [filters] [--window hour] [--order worst|newest] [--json]"""
from __future__ import annotations

from finops import store
from finops.commands import _common
from finops.commands._common import add_db, add_filters, filters_from, print_json, stored_path
from finops.jsonutil import jsonable
from finops.latency import diagnose
from finops.ops import alerts, incidents

NAME = "incidents"
HELP = ("Group the alerts and the slow-path findings of each model whose hours overlap into incidents and print each "
        "one: its root cause, severity, the requests it hit, its evidence and the one thing to do.")


def add_arguments(p) -> None:
    add_db(p)
    add_filters(p)
    p.add_argument("--window", default="hour", choices=tuple(diagnose.WINDOWS),
                   help="window each model is judged in by the diagnosis (default hour)")
    p.add_argument("--order", default="worst", choices=("worst", "newest"),
                   help="worst first (severity, then requests hit; the default) or newest first")
    p.add_argument("--json", action="store_true",
                   help='{"incidents": [{"key", "model", "start", "end", "severity", "title", "evidence", "action", '
                        '"requests", "affected", "timeline", ...}]}')


def run(args) -> int:
    con = store.connect(stored_path(args))
    with store.snapshot(con):           # one state of the store, whatever is loaded meanwhile
        found = incidents.ordered(incidents.incidents(con, filters_from(args), window=args.window),
                                  f"{args.order} first")
    if args.json:
        print_json({"incidents": [jsonable(i.as_dict()) for i in found]})
    elif not found and _common.nothing_stored(con):
        print(_common.EMPTY_STORE)
    elif not found:
        f = filters_from(args)
        print("no incident: no alert fired and no slow-path finding stands out in this period")
        # what that silence does not cover, as the Incidents page says: the service rules not judged, a
        # diagnosis with no latency to read
        for row in alerts.unjudged(con, f).itertuples(index=False):
            if row.rule not in incidents.COST_RULES:
                print(f"not judged: {row.title}: {row.why}")
        if why := diagnose.silent_why(con, f):
            print(f"no slow-path diagnosis: {why}")
    else:
        for i in found:
            print(f"[{i.severity}] {i.title}\n  {incidents.span_text(i.start, i.end)} · {i.affected:,} of "
                  f"{i.requests:,} requests hit · {i.model}")
            for line in i.evidence:
                print(f"  - {line}")
            print(f"  → {i.action}\n")
    return 0
