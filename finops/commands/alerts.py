"""python -m finops alerts --db PATH [filters] [--json | --send | --digest] [--dry-run]"""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from finops import store
from finops.commands._common import add_db, add_filters, filters_from, print_json, stored_path
from finops.errors import InputError
from finops.jsonutil import records
from finops.ops import alerts, delivery
from finops.spend import report as spend

NAME = "alerts"
HELP = ("Alerts per model and tenant per window (error rate > 1%, P99 > 1.5 x SLA, GPU utilisation > 90% or "
        "< 20% sustained, queue length growing, daily spend > 2 x its 7-day median, a tenant forecast over "
        "its budget, unpriced traffic > 5% of requests), with their state (open, acknowledged, snoozed). "
        "--send delivers the new ones to the targets set on the Alerts page (for cron: exit 0 when every "
        "target took its messages, 1 otherwise, one line per target); --digest sends the daily summary.")


def add_arguments(p) -> None:
    add_db(p)
    add_filters(p)
    p.add_argument("--json", action="store_true",
                   help="a JSON list of objects: rule, model, tenant, window_start, window_end, value, "
                        "threshold, severity, message, alert_id, state, state_by, state_at, state_until, state_note")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--send", action="store_true",
                      help="deliver the open alerts each target has not been sent yet; a failed delivery is "
                           "tried again on the next run")
    what.add_argument("--digest", action="store_true",
                      help="send the daily summary to the targets that take it (once a day each)")
    what.add_argument("--ack", nargs="+", metavar="ALERT_ID",
                      help="acknowledge these alerts (ids from --json) so they are not delivered; needs --by")
    what.add_argument("--snooze", nargs="+", metavar="ALERT_ID",
                      help="snooze these alerts for --hours (default 1); needs --by")
    what.add_argument("--reopen", nargs="+", metavar="ALERT_ID", help="clear an acknowledgement or a snooze")
    p.add_argument("--by", default="", help="with --ack, --snooze or --reopen: who you are")
    p.add_argument("--note", default="", help="with --ack or --snooze: a note kept with the state")
    p.add_argument("--hours", type=float, default=1.0, help="with --snooze: how long, in hours (default 1)")
    p.add_argument("--dry-run", action="store_true", help="with --send or --digest: print what would be sent, "
                                                          "send nothing and record nothing")
    p.add_argument("--lookback-hours", type=float, default=None,
                   help="with --send (default 48) or --digest (default 24) and no --since: judge the hours up to "
                        "the newest stored request")


def _filters(con, args, default_hours: float):
    f = filters_from(args)
    if f.since is not None:
        return f
    hours = args.lookback_hours if args.lookback_hours is not None else default_hours
    if not 0 < hours <= 24 * 366:
        # a year at most, as --hours: 1e9 hours reached back past year 1 (OverflowError's traceback)
        raise InputError("--lookback-hours must be a positive number of hours, at most a year (8,784)")
    last = store.time_span(con)[1]
    if last is None:
        return f
    end = f.until or last.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    return replace(f, since=end - timedelta(hours=hours), until=end)


def _report(results: list[delivery.TargetResult], previews: bool, con=None, what: str = "alerts") -> int:
    if not results:
        if con is not None and delivery.targets(con):
            print(f"no enabled delivery target takes the {what}: enable one on the Alerts page of the dashboard")
        else:
            print("no delivery target is set: add one on the Alerts page of the dashboard")
        return 1
    for r in results:
        print(r.line)
        if previews:
            for title in r.previews:
                print(f"  {title}")
    return 0 if all(r.ok for r in results) else 1


def run(args) -> int:
    con = store.connect(stored_path(args))
    if args.dry_run and not (args.send or args.digest):
        raise InputError("--dry-run goes with --send or --digest")
    if args.send:
        frame = alerts.open_alerts(con, _filters(con, args, 48))
        return _report(delivery.deliver(con, frame, dry_run=args.dry_run), args.dry_run, con)
    if args.digest:
        f = _filters(con, args, 24)
        frame = alerts.open_alerts(con, f)
        cost = float(spend.kpis(con, f).spend_usd) if f.since is not None else None
        d = delivery.digest(con, frame, cost)
        if args.dry_run:
            print(d.title)
            for line in d.lines:
                print(f"  {line}")
        return _report(delivery.deliver_digest(con, d, dry_run=args.dry_run), False, con, "digest")
    frame = alerts.open_alerts(con, filters_from(args))
    ids = args.ack or args.snooze or args.reopen
    if ids:
        chosen = frame[frame["alert_id"].isin(ids)]
        missing = sorted(set(ids) - set(chosen["alert_id"]))
        if missing:
            raise InputError(f"no alert {', '.join(missing)} in this period (ids: python -m finops alerts --json)")
        if args.ack:
            n, did = alerts.acknowledge(con, chosen, args.by, args.note), "acknowledged"
        elif args.snooze:
            if not 0 < args.hours <= 24 * 366:
                raise InputError("--hours must be more than 0 and at most a year")
            until = alerts.utc_now() + timedelta(hours=args.hours)
            n = alerts.snooze(con, chosen, until, args.by, args.note)
            did = f"snoozed until {until:%Y-%m-%d %H:%M} UTC"
        else:
            n, did = alerts.reopen(con, chosen, args.by), "reopened"
        print(f"{n} alert{'s' if n != 1 else ''} {did}")
        return 0
    if args.json:
        print_json(records(frame))
    elif frame.empty:
        print("no alerts in this period")
    else:
        for row in frame.itertuples(index=False):
            state = "" if row.state == "open" else f" ({alerts.state_label(row.state, row.state_until)})"
            print(f"[{row.severity}]{state} {row.message}")
    if not args.json:
        # what no alert is said of: windows too small to judge, rules a store of attached rollups cannot judge
        for row in alerts.unjudged(con, filters_from(args)).itertuples(index=False):
            print(f"not judged: {row.title}: {row.why}")
    return 0
