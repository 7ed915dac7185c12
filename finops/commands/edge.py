"""``python -m finops edge``: should a low-confidence edge request escalate to the cloud?"""
from __future__ import annotations

import argparse
from dataclasses import asdict, fields

from finops.cascade import edge
from finops.commands._common import print_json
from finops.fmt import table
from finops.ingest import uploads

NAME = "edge"
HELP = ("Edge vs cloud escalation: V_q*dQ > dC_infer + C_net + V_lat*(RTT + T_cloud - T_edge), "
        "break-even RTT, net benefit vs RTT, policies under RTT jitter. Defaults: a common starting point "
        "(80 ms RTT, 300 ms in the cloud, $1 and $8 per 1,000 requests).")

# (flag, EdgeInputs field, help): one row per input, defaults read from EdgeInputs.
INPUT_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--delta-q", "quality_gain", "dQ: gain in the probability of a right answer, 0-1"),
    ("--value-usd", "value_usd", "V_q: USD value of turning one wrong answer into a right one "
                                 "(e.g. $0.5 a point: 0.5 x 0.15 = $0.075 a request)"),
    ("--infer-cost-diff-usd", "infer_cost_diff_usd", "dC_infer: cloud minus edge inference cost per request"),
    ("--network-cost-usd", "network_cost_usd", "C_net: traffic cost per escalated request"),
    ("--rtt-ms", "rtt_ms", "network round trip edge <-> cloud, ms (the mean with --rtt-dist)"),
    ("--cloud-ms", "cloud_ms", "T_cloud: cloud inference time, ms"),
    ("--edge-ms", "edge_ms", "T_edge: edge time saved by escalating, ms"),
    ("--latency-value-usd-per-s", "latency_value_usd_per_s", "V_lat: USD per second of extra latency"),
    ("--edge-quality", "edge_quality", "probability the edge answer is right, 0-1"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = edge.EdgeInputs()
    for flag, name, text in INPUT_FLAGS:
        names = [flag, "--value-per-point"] if name == "value_usd" else [flag]
        parser.add_argument(*names, dest=name, type=float, default=getattr(defaults, name),
                            help=f"{text} (default {getattr(defaults, name):.6g})")
    parser.add_argument("--rtt-dist", choices=("normal", "lognormal"),
                        help="RTT jitter model: --rtt-ms is the mean, --jitter-ms the standard deviation")
    parser.add_argument("--jitter-ms", type=float, default=20.0, help="RTT standard deviation, ms (default 20)")
    parser.add_argument("--rtt-samples", metavar="CSV", help="measured RTTs in ms (column rtt_ms or the only one)")
    parser.add_argument("--rtt-column", help="column of --rtt-samples to use")
    parser.add_argument("--samples", type=int, default=100_000, help="draws from --rtt-dist (default 100000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed for --rtt-dist (default 0)")
    parser.add_argument("--max-rtt-ms", type=float, default=3000.0, help="RTT range of the curve, ms (default 3000)")
    parser.add_argument("--step-ms", type=float, default=50.0, help="RTT step of the curve, ms (default 50)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON: inputs, decision, break_even, curve, policies")


def run(args) -> int:
    inputs = edge.EdgeInputs(**{f.name: getattr(args, f.name) for f in fields(edge.EdgeInputs)}).validate()
    decision = edge.decide(inputs)
    curve = edge.net_benefit_curve(inputs, max_rtt_ms=args.max_rtt_ms, step_ms=args.step_ms)
    samples = None
    if args.rtt_samples:
        samples = uploads.load_rtt_samples(args.rtt_samples, args.rtt_column, max_ms=edge.MAX_RTT_MS)
    elif args.rtt_dist:
        samples = edge.RttDistribution(args.rtt_dist, inputs.rtt_ms, args.jitter_ms).sample(args.samples, args.seed)
    policies = edge.compare_policies(inputs, samples) if samples is not None else None
    if args.json:
        d = asdict(decision)
        print_json({
            "inputs": asdict(inputs),
            "decision": {k: v for k, v in d.items() if k != "break_even"},
            "break_even": d["break_even"],
            "curve": curve.to_dict(orient="records"),
            "policies": None if policies is None else {
                "share_pays": policies.share_pays, "n_samples": policies.n_samples,
                **{p.policy.replace(" ", "_"): asdict(p) for p in (policies.never, policies.always,
                                                                   policies.when_pays)}},
        })
        return 0
    print(decision.verdict)
    print(f"break-even: {decision.break_even.note}")
    if policies is not None:
        print(f"\nescalation pays for {policies.share_pays:.1%} of {policies.n_samples:,} requests")
        print(table(policies.as_frame()))
    return 0
