"""``python -m finops serve-ingest``: run the ingester (:mod:`finops.ingest.service`) on a store no dashboard
holds, and configure its sources (``--add-follow``, ``--add-watch``, ``--add-pull``, ``--add-scrape``,
``--list``, ``--remove``)."""
from __future__ import annotations

import signal
import sys
import threading

from finops import access, store
from finops.commands._common import add_db, check_range, db_path, print_json
from finops.errors import InputError

NAME = "serve-ingest"
HELP = ("Run the ingester: follow the configured logs and folders, run the scheduled pulls and scrapes, receive "
        "OTLP/HTTP traces, and answer `ingest` and `report` while it holds the store; or configure its sources.")


def add_arguments(p) -> None:
    add_db(p)
    cfg = p.add_argument_group("configure the sources (then exit)")
    cfg.add_argument("--add-follow", metavar="PATH", help="follow a growing log file from its last offset")
    cfg.add_argument("--add-watch", metavar="DIR", help="load each new complete file of a folder once")
    cfg.add_argument("--glob", default="*", help="the watched folder's file names (default *), e.g. '*.jsonl'")
    cfg.add_argument("--format", default=None, help="read the followed or watched files as this format "
                     "(default: detected)")
    cfg.add_argument("--add-pull", choices=("litellm", "langfuse"), help="a scheduled pull")
    cfg.add_argument("--dsn-env", default=None, metavar="NAME",
                     help="litellm: the environment variable (or secrets key) holding the DSN "
                          "(default FINOPS_LITELLM_DSN); only the name is stored")
    cfg.add_argument("--host", default=None, help="langfuse: its base URL")
    cfg.add_argument("--key-env", default=None, metavar="PUBLIC,SECRET",
                     help="langfuse: the variables holding its keys (default LANGFUSE_PUBLIC_KEY,LANGFUSE_SECRET_KEY)")
    cfg.add_argument("--add-scrape", choices=("vllm",), help="a scheduled scrape of vLLM's /metrics")
    cfg.add_argument("--url", default=None, help="the metrics URL, e.g. http://HOST:8000/metrics")
    cfg.add_argument("--replica", default=None, help="the scraped replica's name (default: the URL's host:port)")
    cfg.add_argument("--every", type=float, default=None, metavar="S",
                     help="seconds between runs of a pull (300) or scrape (15)")
    cfg.add_argument("--list", action="store_true", help="list the sources and their status")
    cfg.add_argument("--remove", type=int, metavar="ID", help="remove a source (its loaded rows stay)")
    cfg.add_argument("--stop", type=int, metavar="ID", help="pause a source")
    cfg.add_argument("--start", type=int, metavar="ID", help="resume a paused source")
    run_ = p.add_argument_group("run")
    run_.add_argument("--otlp-port", type=int, default=0, metavar="PORT",
                      help="receive OTLP/HTTP traces (POST /v1/traces) on 127.0.0.1:PORT (default 0: off)")
    run_.add_argument("--otlp-tenant-field", default=None, metavar="ATTR",
                      help="the span or resource attribute that is a received span's tenant (e.g. tenant.id)")
    run_.add_argument("--tick", type=float, default=2.0, metavar="S", help="seconds between passes (2)")
    run_.add_argument("--json", action="store_true", help="--list as JSON")


def report_command(con, argv: list[str]) -> tuple[str, str]:
    """``report`` run for the command line inside the ingester's process (its store, its connection)."""
    from finops.commands import report
    return report.render(con, report.parse(argv))


COMMANDS = {"report": report_command}


def _configure(con, args) -> bool:
    from finops.ingest import service

    done = True
    if args.add_follow:
        s = service.add_source(con, "follow", args.add_follow, format=args.format)
    elif args.add_watch:
        s = service.add_source(con, "watch", args.add_watch, format=args.format, pattern=args.glob)
    elif args.add_pull == "litellm":
        s = service.add_source(con, "pull-litellm", credential=args.dsn_env, every_s=args.every)
    elif args.add_pull == "langfuse":
        if not args.host:
            raise InputError("--add-pull langfuse needs --host https://HOST")
        s = service.add_source(con, "pull-langfuse", args.host, credential=args.key_env, every_s=args.every)
    elif args.add_scrape:
        if not args.url:
            raise InputError("--add-scrape vllm needs --url http://HOST:8000/metrics")
        s = service.add_source(con, "scrape-vllm", args.url, every_s=args.every, replica=args.replica)
    elif args.remove is not None:
        s = service.remove_source(con, args.remove)
        print(f"removed source {s.id}: {s.label()}")
        return True
    elif args.stop is not None or args.start is not None:
        s = service.set_enabled(con, args.stop if args.stop is not None else args.start, args.start is not None)
        print(f"source {s.id} {'started' if s.enabled else 'stopped'}: {s.label()}")
        return True
    elif args.list:
        frame = service.status_frame(con)
        if args.json:
            print_json(frame.to_dict(orient="records"))
        elif frame.empty:
            print("no sources configured (add one with --add-follow, --add-watch, --add-pull or --add-scrape)")
        for r in ([] if args.json else frame.itertuples(index=False)):
            last = f"{r.last_ok:%Y-%m-%d %H:%M:%S} UTC" if r.last_ok is not None and r.last_ok == r.last_ok else "never"
            print(f"{r.id:>3}  {r.source}  [{r.state}]  last load {last}, {r.rows_total:,} rows"
                  + (f"  error: {r.last_error}" if r.last_error else ""))
        return True
    else:
        done = False
    if done:
        print(f"added source {s.id}: {s.label()}")
    return done


def run(args) -> int:
    from finops.ingest import service
    from finops.ops import delivery

    path = db_path(args)
    service.check_otlp_port(args.otlp_port)     # bind() stopped on 70000 with OverflowError's traceback
    con = store.connect(path)
    if _configure(con, args):
        return 0
    check_range(args.tick, "tick", 0, 3600, "seconds", above=True)   # nan passed "<= 0"; a tick of 1e308 never came
    ing = service.Ingester(con, path, tick_s=args.tick, secret=delivery.secret, otlp_port=args.otlp_port,
                           otlp_tenant_field=args.otlp_tenant_field, commands=COMMANDS)
    if args.otlp_port:
        with access.system():
            ing.start_receiver_now()
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    ing.start()
    n = len(service.sources(con))
    print(f"ingester on {path}: {n} source{'s' if n != 1 else ''}"
          + (f", OTLP/HTTP on 127.0.0.1:{args.otlp_port}" if args.otlp_port else "")
          + (f", control on 127.0.0.1:{ing.control.port}" if ing.control else ""), flush=True)
    try:
        while not stopped.wait(1.0):
            pass
    finally:
        ing.stop()
        con.close()
    print("ingester stopped", file=sys.stderr)
    return 0
