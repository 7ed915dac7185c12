"""``python -m finops scrape vllm --url http://HOST:8000/metrics``: store the engine's own series (queue,
KV cache, prefix cache, preemptions, TTFT/TPOT histograms) per replica per scrape (:mod:`finops.ingest.engine`)."""
from __future__ import annotations

import time

from finops import store
from finops.commands._common import add_db, check_range, db_path, print_json

NAME = "scrape"
HELP = ("Scrape an inference engine's Prometheus metrics (vLLM's /metrics) into the store: requests running and "
        "waiting, KV-cache usage, prefix-cache queries and hits, preemptions, TTFT/TPOT histograms.")


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="scrape_source", metavar="ENGINE", help="vllm")
    sub.required = True
    v = sub.add_parser("vllm", help="vLLM's /metrics (Prometheus text)",
                       description="Scrape vLLM's /metrics and store its engine series, one row per sample.")
    v.add_argument("--url", required=True, help="the metrics URL, e.g. http://HOST:8000/metrics")
    v.add_argument("--replica", default=None, help="the replica's name in the store (default: the URL's host:port)")
    v.add_argument("--every", type=float, default=None, metavar="S", help="scrape every S seconds")
    v.add_argument("--count", type=int, default=1, metavar="N",
                   help="how many scrapes (with --every; default 1, 0 = until stopped)")
    v.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the server's answer")
    add_db(v)
    v.add_argument("--json", action="store_true", help="print each scrape's result as JSON")


def run(args) -> int:
    from finops.errors import InputError
    from finops.ingest import engine
    from finops.ingest.service import MAX_EVERY_S
    # nan passed "<= 0" (scrapes back to back), inf slept for ever; a timeout of nan or -1 reached the HTTP client
    if args.every is not None:
        check_range(args.every, "every", 0, MAX_EVERY_S, "seconds", above=True, highest_words=" (a week)")
    if args.count < 0:
        raise InputError(f"--count is at least 0, not {args.count:,}", field="count")
    check_range(args.timeout, "timeout", 0, 3600, "seconds", above=True)
    done = 0
    next_at = time.monotonic()
    while True:
        # the store is held only while a scrape is written: between scrapes another process may write it
        con = store.connect(db_path(args))
        try:
            result = engine.scrape_vllm(con, args.url, args.replica, timeout_s=args.timeout)
        finally:
            con.close()
        done += 1
        if args.json:
            print_json(result.as_dict())
        else:
            print(f"{result.ts:%Y-%m-%d %H:%M:%S} {result.replica}: {result.samples:,} samples"
                  + (f" ({', '.join(result.models)})" if result.models else ""), flush=True)
        if args.every is None or (args.count and done >= args.count):
            return 0
        next_at += args.every
        time.sleep(max(0.0, next_at - time.monotonic()))
