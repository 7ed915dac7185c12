"""``python -m finops fleet load FILE | show | infer | reserve | policy``: the self-hosted fleets' schedule,
reservations and idle policy (see :mod:`finops.spend.fleets`)."""
from __future__ import annotations

import sys

import pandas as pd

from finops import store
from finops.commands._common import add_db, db_path, print_json, stored_path
from finops.errors import InputError
from finops.fmt import table as text_table
from finops.jsonutil import records
from finops.spend import fleets, pricing

NAME = "fleet"
HELP = ("Self-hosted fleets: load a schedule of periods (from, to, replicas, GPUs, $ per GPU-hour, GPU type, "
        "site), show how each fleet is billed, infer periods from the logs' replica ids, record what a tenant "
        "reserved, set how idle GPU time is charged.")


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", help="load, show, infer, reserve or policy")
    sub.required = True
    load = sub.add_parser("load", help="load a schedule CSV: its periods replace those of the models it names",
                          description="Load a fleet schedule CSV with the columns model, from, to (empty: still "
                                      "running), replicas, gpus_per_replica, gpu_hour_usd (empty: the price book's), "
                                      "gpu_type, site. Loading the same file twice changes nothing.")
    load.add_argument("file", help="the schedule CSV")
    show = sub.add_parser("show", help="how each self-hosted fleet is billed, and its periods")
    show.add_argument("--json", action="store_true", help="a JSON object: basis, periods, reservations, policy")
    infer = sub.add_parser("infer", help="periods from the distinct replica ids each hour's requests name")
    infer.add_argument("--save", action="store_true",
                       help="store them for every model without a declared schedule (labelled inferred)")
    infer.add_argument("--json", action="store_true", help="a JSON list of the periods")
    reserve = sub.add_parser("reserve", help="record the replicas a tenant reserved of a fleet (the weights of "
                                             "the 'reservations' idle policy)")
    reserve.add_argument("model", help="the self-hosted model")
    reserve.add_argument("tenant", help="the tenant that reserved replicas")
    reserve.add_argument("replicas", nargs="?", type=float, help="replicas reserved (leave out with --remove)")
    reserve.add_argument("--remove", action="store_true", help="drop the tenant's reservation")
    policy = sub.add_parser("policy", help="show or set the default idle policy of reports and exports")
    policy.add_argument("policy", nargs="?",
                        help="apart (idle as its own row), usage (spread by busy time), reservations, or "
                             "centre:NAME (charged to one cost centre)")
    for action in (load, show, infer, reserve, policy):
        add_db(action)


def _policy_line(con) -> str:
    p = fleets.default_policy(con)
    return f"idle policy: {p.text}: {p.label}"


def run(args) -> int:
    reads = args.action == "show" or (args.action == "infer" and not args.save)
    con = store.connect(stored_path(args) if reads else db_path(args))    # a read makes no store
    if args.action == "load":
        n = fleets.load_schedule_csv(con, args.file)
        print(f"{n} period{'s' if n != 1 else ''} loaded from {args.file}")
        return 0
    if args.action == "infer":
        frame = fleets.infer_schedule(con)
        if args.save:
            n = fleets.apply_inferred(con)
            print(f"{n} inferred period{'s' if n != 1 else ''} stored (models with a declared schedule kept it)",
                  file=sys.stderr)
        if args.json:
            print_json(records(frame))
        elif frame.empty:
            print("no served request of a self-hosted model names its replica: nothing to infer")
        else:
            print(text_table(frame.drop(columns=["gpus_per_replica", "gpu_hour_usd", "gpu_type"])))
        return 0
    if args.action == "reserve":
        table = fleets.reservations(con)
        table = table[~((table["model"] == args.model) & (table["tenant"] == args.tenant))]
        if not args.remove:
            if args.replicas is None:
                raise InputError("give the replicas the tenant reserved (or --remove)", field="replicas")
            table = pd.concat([table, pd.DataFrame([{"model": args.model, "tenant": args.tenant,
                                                     "replicas": args.replicas}])], ignore_index=True)
        fleets.save_reservations(con, table)
        print(text_table(fleets.reservations(con)) if len(table) else "no reservations")
        return 0
    if args.action == "policy":
        if args.policy:
            fleets.set_default_policy(con, pricing.IdlePolicy.parse(args.policy))
        print(_policy_line(con))
        return 0
    basis, periods, reserved = fleets.billing_basis(con), fleets.schedule(con), fleets.reservations(con)
    if args.json:
        print_json({"basis": records(basis), "periods": records(periods), "reservations": records(reserved),
                    "idle_policy": fleets.default_policy(con).text})
        return 0
    if basis.empty:
        print("no self-hosted model in the price book")
    for r in basis.itertuples(index=False):
        print(f"{r.model}: {r.how}")
    if len(periods):
        print()
        print(text_table(periods, missing=""))
    if len(reserved):
        print()
        print(text_table(reserved))
    print()
    print(_policy_line(con))
    return 0
