"""``python -m finops billing load FILE...`` / ``billing show``: the providers' billed amounts (usage and cost
API reports), kept apart from requests for reconciliation (see :mod:`finops.ingest.billing`)."""
from __future__ import annotations

from finops import store
from finops.commands._common import (
    add_db,
    check_period,
    db_path,
    parse_time,
    parse_until,
    print_json,
    stored_path,
)
from finops.fmt import usd
from finops.jsonutil import records

NAME = "billing"
HELP = ("Load the providers' usage and cost API reports (OpenAI Usage/Costs, Anthropic usage/cost report) "
        "as billing lines, or show what was billed per day and model.")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="billing_command", metavar="ACTION", help="load or show")
    sub.required = True
    load = sub.add_parser("load", help="load report files (JSON pages of the API, or one page per line)",
                          description="Load report files; each loads once, all or nothing.")
    load.add_argument("files", nargs="+", metavar="FILE", help="report files to load")
    add_db(load)
    load.add_argument("--json", action="store_true", help="print the result as JSON")
    show = sub.add_parser("show", help="what the providers billed, per day, provider and model",
                          description="What the providers billed, per day, provider and model.")
    add_db(show)
    show.add_argument("--since", type=parse_time, help="first day, inclusive (ISO, UTC)")
    show.add_argument("--until", type=parse_until, help="last day, included (ISO, UTC), as the dashboard's To")
    show.add_argument("--json", action="store_true", help="print the lines as JSON")


def run(args) -> int:
    from finops.ingest import billing

    if args.billing_command == "load":
        con = store.connect(db_path(args))
        results = [billing.load_billing_file(con, f) for f in args.files]
        if args.json:
            print_json([r.as_dict() for r in results])
            return 0
        for r in results:
            if r.already_loaded:
                print(f"{r.file}: already loaded, nothing added")
            else:
                print(f"{r.file} [{r.source or 'empty'}]: {r.lines_read:,} lines read, {r.lines_added:,} added, "
                      f"{r.lines_replaced:,} replaced")
        return 0
    check_period(args.since, args.until)
    con = store.connect(stored_path(args))        # show reads: a mistyped --db makes no store
    frame = billing.billed_by_day_model(con, args.since, args.until)
    if args.json:
        print_json(records(frame.assign(amount_usd=frame.amount_usd.astype(float))))
        return 0
    if frame.empty:
        print("no billing lines with an amount in this period (load a cost report with: billing load FILE)")
        return 0
    for r in frame.itertuples():
        model = r.model if isinstance(r.model, str) else "(no model: tools, storage)"
        print(f"{str(r.day)[:10]}  {r.provider:10} {model:40} {usd(r.amount_usd):>12}")
    print(f"total  {usd(frame.amount_usd.sum())}")
    return 0
