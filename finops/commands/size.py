"""``python -m finops size``: the fewest servers meeting utilisation, P(wait) and wait-SLA targets."""
from __future__ import annotations

import argparse

from finops.capacity import queueing
from finops.commands._common import print_json
from finops.commands.mmc import (
    add_rate_arguments,
    fmt,
    model_name,
    print_queue_table,
    service_rate_from,
)
from finops.fmt import number as figure

NAME = "size"
HELP = ("Smallest number of servers (replicas) for an arrival rate and service rate that meets a target "
        "utilisation, a maximum P(wait) and/or a wait SLA at a percentile, plus redundancy and a "
        "cold-start buffer; square-root staffing as a cross-check.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rate_arguments(parser)
    parser.add_argument("--target-utilization", type=float, metavar="RHO",
                        help="keep utilisation rho = lambda / (c mu) at or below this (e.g. 0.7)")
    parser.add_argument("--wait-sla-s", type=float, metavar="S",
                        help="queue wait, in seconds, that --wait-percentile of requests must stay under")
    parser.add_argument("--wait-percentile", type=float, metavar="P",
                        help="percentile for --wait-sla-s as a fraction (default 0.99)")
    parser.add_argument("--max-p-wait", type=float, metavar="P",
                        help="maximum probability that a request waits at all (Erlang C)")
    parser.add_argument("--redundancy", type=float, default=0.0, metavar="FRACTION",
                        help="headroom on top, as a fraction (0.25 = +25%%; 0.2-0.3 is usual)")
    parser.add_argument("--cold-start-buffer", type=int, default=0, metavar="N",
                        help="extra replicas kept ready to cover cold starts")


def run(args) -> int:
    mu = service_rate_from(args)
    result = queueing.required_servers(
        args.arrival_rate, mu, target_utilization=args.target_utilization,
        wait_percentile=args.wait_percentile, wait_sla_s=args.wait_sla_s, max_p_wait=args.max_p_wait,
        redundancy=args.redundancy, cold_start_buffer=args.cold_start_buffer,
        cv_arrival=args.cv_arrival, cv_service=args.cv_service)
    if args.json:
        out = result.to_dict()
        out["model"] = model_name(args)
        print_json(out)
        return 0
    print(f"{model_name(args)} sizing: lambda = {figure(args.arrival_rate)} req/s, mu = {figure(mu)} req/s per "
          f"server, offered load A = {fmt(result.offered_load_erlangs)} erlangs")
    print(f"{'servers':<24} {result.servers:,} (binding: {result.binding_constraint})")
    print(f"{'with redundancy':<24} {result.servers_with_redundancy:,} "
          f"(+{args.redundancy:.0%} redundancy, +{args.cold_start_buffer:,} cold-start buffer)")
    print(f"{'square-root staffing':<24} {result.sqrt_staffing_servers:,} "
          f"(beta = {fmt(result.sqrt_staffing_beta)}, cross-check)")
    print(f"at {result.servers:,} servers:")
    print_queue_table(result.mmc)
    return 0
