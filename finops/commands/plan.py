"""``python -m finops plan --model M``: a self-hosted fleet's billed replicas, hour by hour, against the replica
plan the sizing rule gives its traffic (and, with ``--days``, the forecast's), in replica-hours and dollars."""
from __future__ import annotations

from finops import store
from finops.capacity.forecast import MAX_FORECAST_DAYS
from finops.commands._common import add_db, check_period, parse_time, print_json, stored_path
from finops.errors import InputError
from finops.filters import Filters
from finops.fmt import counted, number, whole_or_places
from finops.jsonutil import records

NAME = "plan"
HELP = ("Capacity meets cost: the replicas a self-hosted fleet was billed for, hour by hour, against the "
        "replicas its traffic needed at the target utilisation and P99 wait SLA: what scaling to the plan "
        "would have saved, and the hours the fleet was short.")


def add_arguments(p) -> None:
    add_db(p)
    p.add_argument("--model", required=True, help="the self-hosted model to plan")
    p.add_argument("--since", type=parse_time, help="start, inclusive (ISO, UTC; default: the store's first hour)")
    p.add_argument("--until", type=parse_time, help="end, exclusive (ISO, UTC; default: after its last hour)")
    p.add_argument("--target-utilization", type=float, default=0.7, metavar="RHO",
                   help="size each hour for utilisation rho <= this (default 0.7)")
    p.add_argument("--wait-sla-s", type=float, default=2.0, metavar="S",
                   help="P99 queue wait each hour must stay under, seconds (default 2; 0 for none)")
    p.add_argument("--redundancy", type=float, default=0.25, metavar="FRACTION",
                   help="headroom on top of the sizing (default 0.25 = +25%%)")
    p.add_argument("--min-replicas", type=int, default=1, metavar="N", help="never plan fewer (default 1)")
    p.add_argument("--mean-service-s", type=float, metavar="S",
                   help="mean time a request holds a slot (default: measured in the busiest hour)")
    p.add_argument("--slots", type=int, metavar="N", help="concurrent slots per replica (default: the price book's)")
    p.add_argument("--days", type=int, default=0, metavar="N",
                   help=f"also forecast N days ahead (at most {MAX_FORECAST_DAYS}) and set the plan against the "
                        "schedule in force then")
    p.add_argument("--hours", action="store_true", help="print every hour, not only the short ones")
    p.add_argument("--json", action="store_true", help="a JSON object with the totals and the hours")


def _summary(c) -> dict:
    return {k: getattr(c, k) for k in ("replica_hours_billed", "replica_hours_planned", "surplus_replica_hours",
                                       "short_replica_hours", "short_hours", "cost_billed_usd", "cost_planned_usd",
                                       "surplus_usd", "saving_usd")}




def run(args) -> int:
    from finops.capacity import plans

    if not 0 <= args.days <= MAX_FORECAST_DAYS:
        raise InputError(f"must be a whole number from 0 to {MAX_FORECAST_DAYS}, got {args.days}", field="days")
    check_period(args.since, args.until)
    con = store.connect(stored_path(args))
    fp = plans.fleet_against_plan(
        con, Filters(since=args.since, until=args.until), args.model, mean_service_s=args.mean_service_s, slots_per_replica=args.slots,
        target_utilization=args.target_utilization, wait_sla_s=args.wait_sla_s or None, redundancy=args.redundancy,
        min_replicas=args.min_replicas, days_ahead=args.days)
    if args.json:
        out = {"model": fp.model, "state": fp.state, "message": fp.message, "billed_by": fp.billed_by,
               "mean_service_s": fp.mean_service_s, "slots_per_replica": fp.slots_per_replica}
        for name in ("past", "ahead"):
            c = getattr(fp, name)
            out[name] = None if c is None else {**_summary(c), "sentence": c.sentence(
                "over the period" if name == "past" else f"over the next {counted(args.days, 'day')}"),
                "hours": records(c.hours.reset_index())}
        out["ahead_message"] = fp.ahead_message
        out["ahead_warning"] = fp.ahead_warning
        print_json(out)
        return 0 if fp.state == "ok" else 1
    if fp.state != "ok":
        print(f"no plan: {fp.message}")
        return 1
    print(f"{fp.model}: {fp.billed_by}; one replica = {counted(fp.slots_per_replica, 'slot')} of {number(fp.mean_service_s)} s, "
          f"sized for rho <= {args.target_utilization:g}"
          + (f" and a P99 wait under {args.wait_sla_s:g} s" if args.wait_sla_s else "")
          + f", +{args.redundancy:.0%} redundancy")
    for name, span in (("past", "over the period"), ("ahead", f"over the next {counted(args.days, 'day')}")):
        c = getattr(fp, name)
        if c is None:
            continue
        if name == "ahead" and fp.ahead_warning:
            print(f"ahead: what the forecast cannot know: {fp.ahead_warning}")
        print(f"{name}: {whole_or_places(c.replica_hours_billed)} replica-hours billed (${c.cost_billed_usd:,.2f}), "
              f"{whole_or_places(c.replica_hours_planned)} planned (${c.cost_planned_usd:,.2f}): {c.sentence(span)}")
        shown = c.hours if args.hours else c.hours[c.hours["short"]]
        if len(shown):
            # separators and cents, never an exponent (``,.4g`` read a fleet of 10,000 replicas "1e+04")
            hours = whole_or_places
            print(shown.drop(columns=["cost_billed_usd", "cost_planned_usd"]).to_string(formatters={
                "qps": number, "replicas_billed": hours, "replicas_planned": hours,
                "usd_per_replica_hour": lambda v: f"${v:,.2f}"}))
    if fp.ahead_message:
        print(f"ahead: no forecast ({fp.ahead_message})")
    return 0
