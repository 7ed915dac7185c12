"""``python -m finops gateway``: serve the reference gateway (see :mod:`finops.gateway`)."""
from __future__ import annotations

import sys

from finops.errors import InputError

NAME = "gateway"
HELP = "Serve the reference LLM gateway: routes to mock or OpenAI-compatible backends, logs canonical JSONL."


def add_arguments(parser) -> None:
    parser.add_argument("--config", required=True,
                        help="gateway TOML (see examples/gateway.toml)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument("--log", default="logs/gateway.jsonl",
                        help="JSONL request log, appended to (default logs/gateway.jsonl)")
    parser.add_argument("--fsync", action="store_true",
                        help="fsync each log row (survives a power cut; a killed process loses nothing anyway)")
    parser.add_argument("--graceful-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="on shutdown, how long running requests may take to finish (default 10)")
    parser.add_argument("--log-level", default="warning",
                        choices=["critical", "error", "warning", "info", "debug"],
                        help="server log level on stderr (default warning)")


def run(args) -> int:
    from finops.gateway.app import serve
    from finops.gateway.config import load_config
    from finops.gateway.log import JsonlLog
    from finops.gateway.pipeline import Gateway

    if not 0 <= args.port <= 65535:
        # uvicorn hung on 70000 after the line below had said where the gateway listened
        raise InputError(f"--port is a number from 0 to 65535, got {args.port}", field="port")
    cfg = load_config(args.config)
    gw = Gateway(cfg, JsonlLog(args.log, fsync=args.fsync))
    names = ", ".join(f"{b.name} ({b.cfg.kind}, {b.slots_total} slots)" for b in gw.backends.values())
    print(f"gateway on http://{args.host}:{args.port}  backends: {names}  log: {args.log}",
          file=sys.stderr, flush=True)
    serve(gw, args.host, args.port, log_level=args.log_level, graceful_timeout_s=args.graceful_timeout)
    return 0
