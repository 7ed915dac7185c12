"""``python -m finops load``: open-loop load against a gateway (see :mod:`finops.gateway.loadgen`)."""
from __future__ import annotations

from finops.commands._common import _csv_list, print_json
from finops.errors import InputError
from finops.fmt import MISSING, duration_ms

NAME = "load"
HELP = "Send open-loop Poisson load to a gateway and report achieved rate and latency percentiles."


def add_arguments(parser) -> None:
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="gateway base URL (default %(default)s)")
    parser.add_argument("--rate", type=float, default=20.0, help="mean arrival rate, requests/s (default 20)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of sending (default 60)")
    parser.add_argument("--pattern", default="steady", choices=["steady", "burst", "ramp"],
                        help="rate over time: steady, burst (3x for 20%% of every 10 s, else 0.5x), "
                             "ramp (0 to 2x); each averages --rate")
    parser.add_argument("--prompts", metavar="FILE",
                        help="prompts, one per line (or .jsonl with a 'prompt' field); default: a built-in mix")
    parser.add_argument("--tenants", type=_csv_list, default=(),
                        help="tenants sent as X-Tenant, drawn at random, comma-separated (--preset: the first)")
    parser.add_argument("--api-key", help="sent as Authorization: Bearer KEY")
    parser.add_argument("--endpoint", choices=["chat", "route"],
                        help="POST /v1/chat/completions (chat) or the reference gateway's /route "
                             "(default: chat, and route for --preset)")
    parser.add_argument("--model", default="auto",
                        help="model of chat requests: auto (the gateway routes, default) or a backend to pin")
    parser.add_argument("--max-tokens", type=int, help="max_tokens of chat requests")
    parser.add_argument("--no-cache", action="store_true", help="send Cache-Control: no-cache")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds per request, and the longest wait for stragglers (default 30)")
    parser.add_argument("--client", default="httpx", choices=["httpx", "raw"],
                        help="httpx (default), or raw: a minimal HTTP/1.1 client costing several times "
                             "less CPU per request, for benchmarks at hundreds of requests/s")
    parser.add_argument("--seed", type=int, default=0, help="seed of the arrival schedule and prompt draws")
    parser.add_argument("--preset", choices=["dual-model"], type=lambda s: "dual-model" if s == "seed-3.3" else s,
                        help="dual-model: 2 uninjected slow requests, then 6 concurrent "
                             "injected slow requests beside one short request to fast "
                             "(rate, duration and pattern are ignored)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def _fmt(stats: dict) -> str:
    """Percentiles of milliseconds, each with its unit: seconds from 1,000 ms (:func:`finops.fmt.duration_ms`)."""
    return "  ".join(f"{k}={duration_ms(v, fine=True)}" for k, v in stats.items())


def _counts(counts: dict) -> str:
    """``{'200': 46, '503': 1}`` as ``46 × 200, 1 × 503``."""
    return ", ".join(f"{n:,} × {k}" for k, n in counts.items()) or MISSING


def _print_preset(report: dict) -> None:
    """The preset's requests and summary, each time with its unit (seconds from 1,000 ms)."""
    def t(v) -> str:
        return duration_ms(v, fine=True)
    print(f"{'phase':9} {'chars':>5} {'inject':>6} {'status':>6} {'route':>6} {'queue':>9} {'service':>9} {'total':>9}")
    for r in report["requests"]:
        cells = [t(r[k]) for k in ("queue_ms", "service_ms", "total_ms")]
        print(f"{r['phase']:9} {r['prompt_chars']:>5} {str(r['slow_inject']):>6} "
              f"{r['http_status'] or r['error']!s:>6} {r['route'] or '-':>6} {cells[0]:>9} {cells[1]:>9} "
              f"{cells[2]:>9}")
    s = report["summary"]
    routes = ", ".join(f"{n:,} {k}" for k, n in s["injected_routes"].items()) or MISSING
    waits = ", ".join(t(v) for v in s["injected_queue_ms_sorted"]) or MISSING
    print(f"injected: routes {routes}; queue waits sorted {waits}")
    print(f"service time: baseline {t(s['baseline_service_ms'])}, injected mean {t(s['injected_service_ms_mean'])}, "
          f"over baseline {t(s['service_over_baseline_ms'])}")


def run(args) -> int:
    from finops.gateway import loadgen
    loadgen.check_timeout(args.timeout)
    if args.preset:
        report = loadgen.PRESETS[args.preset](args.url, endpoint=args.endpoint or "route",
                                              tenant=args.tenants[0] if args.tenants else None,
                                              api_key=args.api_key, timeout_s=max(args.timeout, 60.0)).to_dict()
        if args.json:
            print_json(report)
        else:
            _print_preset(report)
        failed = [r for r in report["requests"] if r["http_status"] != 200]
        return 1 if failed else 0

    prompts = tuple(loadgen.load_prompts(args.prompts)) if args.prompts else loadgen.DEFAULT_PROMPTS
    spec = loadgen.LoadSpec(url=args.url, rate_per_s=args.rate, duration_s=args.duration, pattern=args.pattern,
                            prompts=prompts, tenants=tuple(args.tenants), api_key=args.api_key,
                            endpoint=args.endpoint or "chat", model=args.model, max_tokens=args.max_tokens, timeout_s=args.timeout,
                            seed=args.seed, no_cache=args.no_cache, client=args.client)
    report = loadgen.run_load(spec)
    if not report.scheduled:
        # Poisson arrivals: at 1 req/s for 1 s, none at all about one time in three
        raise InputError(f"no request fell in {args.duration:g} s at {args.rate:g} req/s (arrivals are random): "
                         "send for longer or at a higher --rate", field="duration")
    if report.sent and not report.completed:
        raise InputError(f"no answer to any of {report.sent} requests ({report.by_status}): "
                         f"is a gateway running at {args.url}?")
    if args.json:
        print_json(report.to_dict())
        return 0
    print(f"{report.sent}/{report.scheduled} sent in {report.duration_s:g} s ({report.pattern}): "
          f"achieved {report.achieved_rate_per_s:.1f} req/s of {report.requested_rate_per_s:g} requested; "
          f"{report.ok} ok, {report.completed - report.ok} HTTP errors, {report.unfinished} unfinished")
    routes = ", ".join(f"{n:,} {k}" for k, n in report.by_route.items()) or MISSING
    print(f"status: {_counts(report.by_status)}   routes: {routes}")
    print(f"latency   {_fmt(report.latency_ms)}")
    print(f"overhead  {_fmt(report.overhead_ms)}   (latency - queue - service)")
    print(f"send lag  {_fmt(report.send_lag_ms)}")
    return 0
