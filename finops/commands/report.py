"""python -m finops report --db PATH --by model[,tenant,...] [filters] [--json|--csv]"""
from __future__ import annotations

import sys

import pandas as pd

from finops import store
from finops.commands import _common
from finops.commands._common import add_db, add_filters, filters_from, print_json, stored_path
from finops.fmt import counted, share, usd_column_format
from finops.jsonutil import records
from finops.spend import pricing
from finops.spend import report as spend
from finops.spend.pricing import IdlePolicy

NAME = "report"
HELP = "Spend, tokens, $ per 1M tokens and error rate per group."


def add_arguments(p) -> None:
    add_db(p)
    p.add_argument("--by", default="model",
                   help=f"comma-separated groups from: {', '.join(spend.GROUPABLE)} (default model)")
    add_filters(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="a JSON list of objects")
    out.add_argument("--csv", action="store_true", help="CSV on stdout")
    out.add_argument("--focus", action="store_true",
                     help="FOCUS 1.2 cost-and-usage rows as CSV on stdout (one per day, tenant, model, tier, meter)")
    p.add_argument("--no-idle", action="store_true", help="leave out idle self-hosted capacity")
    p.add_argument("--unit-costs", action="store_true",
                   help="per model, $ per 1M served tokens: billed (API models), allocated (self-hosted, busy GPU "
                        "time) and fully loaded (self-hosted, idle included)")
    p.add_argument("--idle-policy", metavar="POLICY",
                   help="how idle GPU time is charged: apart (its own row), usage (spread over tenants by busy "
                        "time), reservations (by the replicas they reserved) or centre:NAME (one cost centre); "
                        "default: the store's (python -m finops fleet policy)")
    p.add_argument("--reconcile", action="store_true",
                   help="per model and provider: the cost the logs recorded against the same requests at list "
                        "prices, the requests a source could not price (it wrote 0), and what the logs cost "
                        "against what the provider billed (python -m finops billing load)")


def run(args) -> int:
    """The report on the store; while another process holds and serves it, through that process's
    connection (:mod:`finops.remote`): the same output and exit code."""
    con = store.connect(stored_path(args))
    try:
        out, err = render(con, args)
    finally:
        con.close()
    sys.stderr.write(err)
    sys.stdout.write(out)
    return 0


def parse(argv: list[str]):
    """This command's arguments parsed from ``argv`` (what the ingester does with a forwarded report)."""
    import argparse
    p = argparse.ArgumentParser(prog=f"python -m finops {NAME}", exit_on_error=False)
    add_arguments(p)
    try:
        return p.parse_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:
        from finops.errors import InputError
        raise InputError(f"report arguments not understood: {exc}") from None


def render(con, args) -> tuple[str, str]:
    """(stdout, stderr) of the report ``args`` ask for, on the store ``con``."""
    import io

    out, err = io.StringIO(), io.StringIO()
    cur = con.cursor()
    with store.snapshot(cur):           # one state of the store, whatever is loaded meanwhile
        _render(cur, args, out, err)
    return out.getvalue(), err.getvalue()


def _text(frame) -> str:
    """``frame`` as the terminal shows it: dollars (``*_usd``) in cents (more decimals in a column where some amount
    is not zero but would read 0.00, :func:`finops.fmt.usd_column_format`), counts with separators, rates (``*_rate``)
    as shares (:func:`finops.fmt.share`), other numbers (unit costs per 1M tokens) to four decimals, a value the data
    does not give (None or NaN, such as the unit cost of a model nothing prices) as a dash."""
    def money_of(column):
        pattern = usd_column_format(frame[column]).lstrip("$").replace("%", "{:") + "}"
        return lambda v: "—" if pd.isna(v) else pattern.format(v)

    def whole(v) -> str:
        return "—" if pd.isna(v) else f"{int(v):,}"
    money = {c: money_of(c) for c in frame.columns if str(c).endswith("_usd")}
    # a rate of requests as a share (fmt.share): one failure in 20,001 is "< 0.1%", not "0.0000", as if none failed
    rates = {c: (lambda v: "—" if pd.isna(v) else share(v)) for c in frame.columns if str(c).endswith("_rate")}
    # counts (requests, tokens) with separators, as the pages show them: 22,363,372, not 22363372
    counts = {c: whole for c in frame.columns
              if c not in money and c not in rates and pd.api.types.is_integer_dtype(frame[c])}
    return frame.fillna(float("nan")).to_string(index=False, na_rep="—", float_format=lambda v: f"{v:,.4f}",
                                                formatters={**money, **rates, **counts})


def _render(con, args, stdout, stderr) -> None:
    policy = IdlePolicy.parse(args.idle_policy) if args.idle_policy else None
    unpriced = pricing.unpriced_models(con)
    if len(unpriced):
        names = ", ".join(f"{m} ({counted(n, 'request')})" for m, n in zip(unpriced["model"], unpriced["requests"],
                                                                       strict=True))
        print(f"warning: no price for {names}: {unpriced['share_of_requests'].sum():.1%} of requests are "
              "counted at $0. Add a price book row or an alias (Data page, or data/prices.csv).", file=stderr)
    if args.focus:
        from finops.spend import exports
        stdout.write(exports.focus_csv(exports.focus_frame(con, filters_from(args), idle_policy=policy)))
        return
    if args.reconcile:
        frame = spend.reconcile(con, filters_from(args))
    elif args.unit_costs:
        frame = spend.unit_costs(con, filters_from(args))
    else:
        by = [b.strip() for b in args.by.split(",") if b.strip()]
        frame = spend.report(con, filters_from(args), by, include_idle=False if args.no_idle else None,
                             idle_policy=policy)
        cols = [*by, "requests", "input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
                "reasoning_tokens", "served_tokens", "cost_usd", "cost_per_1m_tokens", "error_rate"]
        frame = frame[cols]
    if args.json:
        print_json(records(frame), file=stdout)
    elif args.csv:
        from finops.spend.exports import safe_csv
        stdout.write(safe_csv(frame))
    elif frame.empty:
        # a sentence, not pandas' "Empty DataFrame / Columns: [...]"
        print(_common.EMPTY_STORE if _common.nothing_stored(con) else "No requests match these filters.", file=stdout)
    elif args.reconcile:
        print(_text(frame[list(spend.RECONCILE_COLUMNS[:11])]), file=stdout)
        print(file=stdout)
        for line in spend.billing_sentences(frame):
            print(line, file=stdout)
    else:
        print(_text(frame), file=stdout)
