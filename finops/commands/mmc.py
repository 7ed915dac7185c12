"""``python -m finops mmc``: M/M/c (or Allen–Cunneen G/G/c) queue figures for one scenario."""
from __future__ import annotations

import argparse
import math

from finops.capacity import queueing
from finops.commands._common import print_json
from finops.errors import InputError
from finops.fmt import counted
from finops.fmt import number as figure

NAME = "mmc"
HELP = ("Queue figures for lambda arrivals/s, mu services/s per server and c servers: utilisation, "
        "P(wait) (Erlang C), mean and percentile waits, Little's-law queue lengths.")

# (label, field, unit) rows of the text table; waits in seconds, lengths in requests.
ROWS = (
    ("utilisation rho", "utilization", ""),
    ("P(wait) (Erlang C)", "p_wait", ""),
    ("mean queue wait Wq", "wq_s", "s"),
    ("mean time in system W", "w_s", "s"),
    ("queue wait p50", "wait_p50_s", "s"),
    ("queue wait p90", "wait_p90_s", "s"),
    ("queue wait p95", "wait_p95_s", "s"),
    ("queue wait p99", "wait_p99_s", "s"),
    ("mean queue length Lq", "lq", "requests"),
    ("mean in system L", "l", "requests"),
)


def add_rate_arguments(parser: argparse.ArgumentParser) -> None:
    """--arrival-rate, --service-rate | --mean-service-s, --cv-arrival, --cv-service, --json."""
    parser.add_argument("--arrival-rate", type=float, required=True, metavar="REQ_PER_S",
                        help="arrival rate lambda, requests per second")
    rate = parser.add_mutually_exclusive_group(required=True)
    rate.add_argument("--service-rate", type=float, metavar="REQ_PER_S",
                      help="service rate mu of one server (replica or slot), requests per second")
    rate.add_argument("--mean-service-s", type=float, metavar="S",
                      help="mean service time of one request in seconds (mu = 1 / this)")
    parser.add_argument("--cv-arrival", type=float, default=1.0,
                        help="coefficient of variation of inter-arrival times (1 = Poisson, the default)")
    parser.add_argument("--cv-service", type=float, default=1.0,
                        help="coefficient of variation of service times (1 = exponential, the default); "
                             "other values use the Allen-Cunneen G/G/c approximation")
    parser.add_argument("--json", action="store_true", help="print JSON (inf as null, with state)")


def service_rate_from(args) -> float:
    """mu from --service-rate or --mean-service-s."""
    if args.service_rate is not None:
        return args.service_rate
    if not (args.mean_service_s > 0 and math.isfinite(args.mean_service_s)):
        raise InputError(f"must be > 0, got {args.mean_service_s:g}", field="mean_service_s")
    return 1.0 / args.mean_service_s


def model_name(args) -> str:
    if args.cv_arrival == 1.0 and args.cv_service == 1.0:
        return "M/M/c"
    return "M/G/c (Allen-Cunneen)" if args.cv_arrival == 1.0 else "G/G/c (Allen-Cunneen)"


def fmt(value, unit: str = "") -> str:
    """A figure for the text table (:func:`finops.fmt.number`), 'unbounded' for inf."""
    if isinstance(value, float) and math.isinf(value):
        return "unbounded"
    return figure(value) + (f" {unit}" if unit else "")


def print_queue_table(result: queueing.MMCResult) -> None:
    print(f"{'state':<24} {result.message}")
    for label, field, unit in ROWS:
        print(f"{label:<24} {fmt(getattr(result, field), unit)}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rate_arguments(parser)
    parser.add_argument("--servers", type=int, required=True, metavar="C",
                        help="number of servers c (replicas, or replicas x concurrent slots)")


def run(args) -> int:
    mu = service_rate_from(args)
    result = queueing.ggc(args.arrival_rate, mu, args.servers, args.cv_arrival, args.cv_service)
    if args.json:
        out = result.to_dict()
        out["model"] = model_name(args)
        print_json(out)
        return 0
    print(f"{model_name(args)}: lambda = {figure(args.arrival_rate)} req/s, mu = {figure(mu)} req/s per server, "
          f"c = {counted(args.servers, 'server')}, offered load A = {fmt(args.arrival_rate / mu if mu else math.inf)} erlangs")
    print_queue_table(result)
    return 0
