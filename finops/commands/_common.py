"""Arguments shared by several subcommands."""
from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timedelta

from finops.errors import InputError
from finops.filters import Filters, utc_time
from finops.jsonutil import jsonable


def add_db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default=None,
                        help="DuckDB store (default: $FINOPS_DB or data/finops.duckdb)")


def check_range(value: float, field: str, lowest: float, highest: float, unit: str, *, above: bool = False,
                highest_words: str = "") -> float:
    """``value`` of the flag ``--field`` (underscores as dashes) when it lies from ``lowest`` (``above``: past it) to
    ``highest``; else an InputError naming the flag in words. nan lies nowhere: a check of ``<= 0`` alone let it by.

    >>> check_range(2.0, "tick", 0, 3600, "seconds", above=True)
    2.0
    """
    if not ((lowest < value) if above else (lowest <= value)) or not value <= highest:
        given = f"{int(value):,}" if abs(value) < 1e15 and value == int(value) else f"{value:g}"
        span = (f"above {lowest:,g} and at most {highest:,g}{highest_words}" if above
                else f"from {lowest:,.4g} to {highest:,g}{highest_words}")
        raise InputError(f"--{field.replace('_', '-')} is a number of {unit} {span}, not {given}", field=field)
    return value


def db_path(args) -> str:
    """``--db``, else ``$FINOPS_DB``, else the project's data/finops.duckdb (the dashboard's rule)."""
    from finops.store import resolve_path

    return resolve_path(args.db)


def stored_path(args) -> str:
    """:func:`db_path` for a command that only reads the store: a store file that does not exist is refused
    (opening it made an empty store there, so a mistyped ``--db`` read as "no requests yet" and left a file)."""
    path = db_path(args)
    if path != ":memory:" and not os.path.exists(path):
        raise InputError("no store at this path: load requests into it with python -m finops ingest FILE "
                         f"--db {path}, or the sample fleet with python -m finops demo --db {path}", file=path)
    return path


def parse_time(text: str) -> datetime:
    """ISO date or datetime; naive values are taken as UTC; returned naive UTC."""
    try:
        return utc_time(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def parse_until(text: str) -> datetime:
    """The end of a period, as the dashboard's "To": a bare date includes that whole day (``2026-11-30``
    ends at 2026-12-01 00:00); a date with a time of day is that exact instant, excluded.

    >>> parse_until("2026-11-30"), parse_until("2026-11-30T12:00")
    (datetime.datetime(2026, 12, 1, 0, 0), datetime.datetime(2026, 11, 30, 12, 0))
    """
    value = parse_time(text)
    return value + timedelta(days=1) if len(text.strip()) == 10 else value


def _csv_list(text: str) -> tuple[str, ...]:
    return tuple(v for v in (s.strip() for s in text.split(",")) if v)


def add_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", type=parse_time, help="first day (or instant), included (ISO, UTC)")
    parser.add_argument("--until", type=parse_until,
                        help="last day, included, as the dashboard's To (ISO date, UTC); a date with a time "
                             "of day ends just before that instant")
    # each repeats and adds to the list (``--tenant a --tenant b`` is a and b, as ``--tenant a,b``): a repeated
    # flag that kept only its last value would report one tenant's spend as the two asked for
    parser.add_argument("--tenant", type=_csv_list, action="extend", default=[],
                        help="tenants, comma-separated or the flag repeated")
    parser.add_argument("--model", dest="models", type=_csv_list, action="extend", default=[],
                        help="models, comma-separated or the flag repeated")
    parser.add_argument("--sla-tier", type=_csv_list, action="extend", default=[],
                        help="SLA tiers, comma-separated or the flag repeated")


def check_period(since: datetime | None, until: datetime | None) -> None:
    """An InputError naming ``--since`` when it is not before ``--until``'s end: every command that takes the two
    refuses such a period, rather than reading it as "no requests match" (the period asked for is empty, not the
    logs)."""
    if since is not None and until is not None and since >= until:
        raise InputError(f"--since {since:%Y-%m-%d %H:%M} is not before --until's end "
                         f"{until:%Y-%m-%d %H:%M}: the period holds no time", field="since")


def filters_from(args) -> Filters:
    check_period(args.since, args.until)
    return Filters(since=args.since, until=args.until, tenants=tuple(args.tenant),
                   models=tuple(args.models), sla_tiers=tuple(args.sla_tier))


def print_json(obj, file=None) -> None:
    out = file or sys.stdout
    json.dump(jsonable(obj), out, indent=2, default=str, allow_nan=False)
    out.write("\n")


EMPTY_STORE = "The store holds no requests yet: load some with python -m finops ingest FILE."


def nothing_stored(con) -> bool:
    """True when the store holds no requests (nor attached rollups): a command says so rather than "no finding"."""
    return not con.execute("SELECT EXISTS (SELECT 1 FROM rollup_hourly)").fetchall()[0][0]
