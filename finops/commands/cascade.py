"""``python -m finops cascade``: cost-quality curve, frontier and cheapest tau of a cascade."""
from __future__ import annotations

import argparse

import numpy as np

from finops.cascade import sweep as cascade
from finops.commands._common import print_json
from finops.errors import InputError
from finops.fmt import MISSING, number, usd
from finops.ingest import uploads

NAME = "cascade"
MAX_TEXT_ROWS = 25
HELP = ("Sweep a small->large cascade's confidence threshold over an eval CSV (or a tau table): "
        "curve, Pareto frontier, cheapest tau meeting a quality floor, APGR/CPT.")
#: every cost this command prints or returns, as on the Cascade page (a file's cost columns are USD per query)
COST_UNIT = "USD per 1,000 queries"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="*", metavar="FILE",
                        help="eval CSV, one row per query; several with the same columns are read as one (RouteLLM's "
                             "MMLU eval is a file per subject); or a tau table with --parametric")
    parser.add_argument("--map", dest="mapping", metavar="KEY=COL,...", action="append",
                        help="columns for small_quality, large_quality and optional confidence (none: the "
                             "baselines only), per-query cost_small, cost_large (USD per query), comma-separated or "
                             "the flag repeated (default: columns with those names)")
    parser.add_argument("--cost-small", type=float,
                        help="flat cost of the small model in USD per 1,000 queries (the Cascade page's unit)")
    parser.add_argument("--cost-large", type=float,
                        help="flat cost of the large model in USD per 1,000 queries")
    parser.add_argument("--quality-floor", type=float,
                        help="minimum average quality (0-1 for correctness); picks the cheapest tau meeting it (an eval with "
                             "no confidence: the cheapest of either model alone and a random share to the large one)")
    parser.add_argument("--parametric", action="store_true",
                        help="FILE is a tau table with columns threshold, escalation_rate (0-1), avg_quality")
    parser.add_argument("--example-table", "--seed-table", dest="example_table", action="store_true",
                        help="use an illustrative threshold table (0.95/60%%/96%%, 0.80/30%%/93%%, "
                             "0.65/12%%/88%%); costs default to 1 and 8 USD per 1,000 queries")
    parser.add_argument("--json", action="store_true",
                        help="print JSON with keys curve, frontier, choice, metrics (an eval with no confidence: "
                             "baselines, random_routing, note, and choice with --quality-floor); costs as numbers "
                             "in USD per 1,000 queries")


def _flat_cost(value: float | None, column: object, name: str) -> float | object:
    if value is not None and column is not None:
        raise InputError(f"give either --{name.replace('_', '-')} or a {name} column in --map, not both",
                         field=name)
    if value is None and column is None:
        raise InputError(f"needs --{name.replace('_', '-')} (flat cost per call) or a per-query {name} "
                         "column in --map", field=name)
    return column if column is not None else value


def build_report(args) -> cascade.CascadeReport | cascade.Baselines:
    """The same library calls the cascade page makes: the baselines alone for an eval with no confidence."""
    if args.example_table or args.parametric:
        if args.example_table:
            table = cascade.example_table()
            cs = cascade.SEED_COST_SMALL_PER_1K_USD if args.cost_small is None else args.cost_small
            cl = cascade.SEED_COST_LARGE_PER_1K_USD if args.cost_large is None else args.cost_large
        else:
            if len(args.file) != 1:
                raise InputError("--parametric needs one FILE, a tau table CSV")
            table = uploads.load_parametric_csv(args.file[0])
            cs = _flat_cost(args.cost_small, None, "cost_small")
            cl = _flat_cost(args.cost_large, None, "cost_large")
        return cascade.analyse_curve(cascade.parametric_curve(table, cs, cl), quality_floor=args.quality_floor)
    if not args.file:
        raise InputError("needs FILE (an eval CSV), or --example-table")
    # a file's cost columns are USD per query; this command's unit is the page's, USD per 1,000 queries
    data = uploads.concat_evals([uploads.load_eval_csv(path, args.mapping) for path in args.file],
                                uploads.files_label(list(args.file))).per_1k_queries()
    cs = _flat_cost(args.cost_small, data.cost_small, "cost_small")
    cl = _flat_cost(args.cost_large, data.cost_large, "cost_large")
    if data.confidence is None:            # two models' grades alone: what any router could reach
        return cascade.baselines(data.small_quality, data.large_quality, cs, cl, router=True)
    return cascade.analyse(data.confidence, data.small_quality, data.large_quality, cs, cl,
                           quality_floor=args.quality_floor)


NO_CONFIDENCE = ("the eval has no confidence column (map one with --map confidence=COLUMN): no threshold to "
                 "sweep, only the policies any router is measured against")


def floor_sentence(base: cascade.Baselines, floor: float) -> str:
    """What meets ``floor`` with no confidence signal: the cheapest of the two models alone and a random share
    sent to the large model, or how far a router would have to beat random (the oracle's ceiling)."""
    pick, ceiling = base.cheapest_meeting(floor), base.oracle_router.avg_quality
    head = f"quality floor {figure(floor)}: "
    if pick is None:
        return head + (f"neither model alone reaches it; only a router better than random can (the oracle router "
                       f"reaches {ceiling:.4f})" if base.router_can_reach(floor) else
                       f"no router reaches it on these queries (the oracle router's ceiling is {ceiling:.4f})")
    if pick.name == "random routing":
        return head + (f"sending a random {pick.large_call_rate:.1%} of requests to the large model meets it, cost "
                       f"{money(pick.avg_cost)}; a router must beat that")
    return head + f"{pick.name} meets it, cost {money(pick.avg_cost)}, quality {pick.avg_quality:.4f}"


def _print_baselines(base: cascade.Baselines, floor: float | None, as_json: bool) -> None:
    pick = base.cheapest_meeting(floor) if floor is not None else None
    if as_json:
        out = {"baselines": base.as_frame().to_dict(orient="records"),
               "random_routing": base.random_routing.to_dict(orient="records"), "note": NO_CONFIDENCE}
        if floor is not None:
            out["choice"] = vars(pick) if pick is not None else None
        print_json(out)
        return
    print(NO_CONFIDENCE[0].upper() + NO_CONFIDENCE[1:] + "\n")
    print(f"(costs in {COST_UNIT})")
    print(f"{'policy':<16} {'large calls':>11} {'avg cost':>12} {'quality':>8}")
    for row in base.as_frame().itertuples(index=False):
        print(f"{row.name:<16} {row.large_call_rate:>11.1%} {usd(row.avg_cost):>12} {row.avg_quality:>8.4f}")
    if floor is not None:
        print(floor_sentence(base, floor))


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def money(cost: float) -> str:
    """A cost of this command as text: dollars with cents (fmt.usd) per 1,000 queries.

    >>> money(3.4), money(0.0815982)
    ('$3.40 per 1,000 queries', '$0.082 per 1,000 queries')
    """
    return f"{usd(cost)} per 1,000 queries"


def figure(x: float, digits: int = 4) -> str:
    """A threshold or floor as text, never an exponent: :func:`finops.fmt.number`, and under 0.0001 its significant
    digits written out (a confidence of 3.2e-05 is a threshold to set, not "< 0.0001").

    >>> figure(0.8428), figure(0), figure(1.01), figure(3.2e-05), figure(1e6)
    ('0.8428', '0', '1.01', '0.000032', '1,000,000')
    """
    if x != x:
        return MISSING
    if x == 0 or abs(x) >= 1e-4:
        return number(x, digits)
    return np.format_float_positional(x, precision=digits, unique=False, fractional=False, trim="-")


def _check_floor_scale(report, floor: float | None) -> None:
    """A floor above 1 over qualities that are shares (0-1) is a percent typed as such (80 for 0.80): refused with
    the share it likely means, not answered "no threshold meets it"."""
    if floor is None or floor <= 1:
        return
    if isinstance(report, cascade.Baselines):
        top = max(b.avg_quality for b in (report.small_only, report.direct_to_large, report.oracle_router))
    else:
        top = max([*report.curve["avg_quality"].dropna(), 0.0])
    if top <= 1:
        raise InputError(f"--quality-floor {figure(floor)} is above 1, but quality here is a share of answers correct "
                         f"(0-1, at most {top:.4f} in this data): for {figure(floor)} % give {figure(floor / 100)}")


def run(args) -> int:
    report = build_report(args)
    _check_floor_scale(report, args.quality_floor)
    if isinstance(report, cascade.Baselines):
        _print_baselines(report, args.quality_floor, args.json)
        return 0
    if args.json:
        print_json(report.to_json_dict())
        return 0
    m = report.metrics
    print(f"{len(report.curve)} thresholds, {len(report.frontier)} on the Pareto frontier, "
          f"{len(report.hull)} on its convex hull")
    print(f"APGR {_fmt(m.apgr, '.3f')}   CPT(50%) {_fmt(m.cpt50, '.1%')}   CPT(80%) {_fmt(m.cpt80, '.1%')}"
          + (f"   ({m.note})" if m.note else ""))
    if report.quality_floor is not None:
        c = report.choice
        print(f"quality floor {figure(report.quality_floor)}: " + (
            f"no threshold meets it; the best any threshold reaches is {report.curve['avg_quality'].max():.4f}"
            if c is None else
            f"tau {figure(c.threshold, 6)}, escalate {c.escalation_rate:.1%}, cost {money(c.avg_cost)}, "
            f"quality {c.avg_quality:.4f}"))
    long = len(report.frontier) > MAX_TEXT_ROWS
    table = cascade.marginal_table(report.hull if long else report.curve)
    print("\nconvex-hull points (the frontier is long; --json has all of it)" if long else "\nfrontier")
    print(f"(costs in {COST_UNIT}; $/point: the extra cost of one more quality point)")
    print(f"{'tau':>10} {'escalate':>9} {'avg cost':>12} {'quality':>8} {'$/point':>10}")
    for row in table.itertuples(index=False):
        print(f"{figure(row.threshold):>10} {row.escalation_rate:>9.1%} {usd(row.avg_cost):>12} "
              f"{row.avg_quality:>8.4f} {usd(row.marginal_cost_per_point):>10}")
    return 0
