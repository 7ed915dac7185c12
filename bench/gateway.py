"""Benchmark: the reference gateway's own overhead per request, at increasing open-loop rates.

    python bench/gateway.py [--rates 100,200,300,500,700,1000,1500] [--duration 5] [--procs 1]
                            [--client raw] [--stack auto|asyncio]

Prints figures measured in this run; asserts nothing about wall-clock time.

The gateway (``Gateway`` + ``serve``, what ``python -m finops gateway`` runs)
serves two mock backends with zero service time (no prefill, no decode) and no
cache, so every millisecond a request spends is the gateway's: parsing,
routing, logging one flushed JSONL row, answering. At each rate the load
generator (``finops.gateway.loadgen``, open-loop Poisson, in ``--procs`` separate
processes sharing the rate) sends POST /v1/chat/completions for ``--duration``
seconds, with its light ``raw`` HTTP/1.1 client by default (httpx costs about
1.8 ms of client CPU per request here, enough to make the client the
bottleneck). Per rate it prints:

* **gw ovh p50 / p99**, the issue's figure (route_ms plus framework time),
  measured inside the gateway: the ``finops_gateway_overhead_seconds{endpoint="chat"}``
  histogram, read from /metrics before and after the rate and differenced. Each
  request is timed from the moment the ASGI app is called until its response
  body is sent, minus its backend queue + service time: routing, FastAPI,
  logging, serialising. The percentile is reported as the upper edge of the
  bucket it falls in: an upper bound at bucket resolution (buckets 0.1, 0.25,
  0.5, 0.75, 1, 1.5, 2, 3, 4, 5, 7.5, 10, 25 ... ms). **gw mean** is exact (sum / count);
* route p99, from the responses' ``finops.route_ms``;
* the gateway process's CPU time per request (Linux), which contention from
  other processes inflates far less than latency;
* context, **cli ovh p50 / p99** = client latency - queue_ms - service_ms: the
  gateway's overhead plus uvicorn's request parsing, the loopback and the load
  generator's own HTTP cost and scheduling delay (it shares this machine's
  CPUs): an upper bound on the gateway's share; and the same figure against a
  **bare** FastAPI + uvicorn endpoint answering a fixed JSON, measured in the
  same run (the framework's floor, seen by the same client).

A rate is **sustained** when every scheduled request was sent on time (send lag
P99 < 10 ms, else the client, not the gateway, was the limit), all were
answered 200, the achieved (sent) rate and the answered rate (``ok`` / time of
the last answer) are both at least 95 % of the offered one, and the in-gateway
P99 overhead is under 5 ms (its bucket's upper edge <= 5 ms), and no backlog
builds in front of the app: the client-observed **P50** overhead stays under
5 ms (at saturation, requests wait in the event loop before the app is called,
which the in-gateway figure cannot see; the median shows it while the client's
own tail noise on the shared CPUs does not decide the verdict). A second line
gives the highest rate whose client-observed P99 overhead was under 5 ms, so the
stricter, client-inclusive figure is not hidden: it also holds the time a
request waits in the gateway's event loop before the app is called (queueing
behind other requests' CPU work), which the in-gateway figure does not. With several load
processes, client P50 is their median and P99 their maximum (conservative).

``--stack asyncio`` serves the gateway and the bare endpoint with uvicorn's
pure-Python stack (asyncio loop, h11 parser) instead of uvloop + httptools, to
measure what those two libraries buy.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent

CONFIG = """
[cache]
kind = "none"

[backends.fast]
kind = "mock"
quality = 0.7
request_usd = 0.001
prefill_ms_per_token = 0.0
decode_ms_per_token = 0.0

[backends.slow]
kind = "mock"
quality = 0.9
capacity = 64
request_usd = 0.008
prefill_ms_per_token = 0.0
decode_ms_per_token = 0.0
"""

# What the gateway command's run() does, with uvicorn's loop and HTTP parser as arguments.
GATEWAY = ("import sys; from finops.gateway.app import serve; from finops.gateway.config import load_config; "
           "from finops.gateway.log import JsonlLog; from finops.gateway.pipeline import Gateway; "
           "cfg, log, port, loop, http = sys.argv[1:]; "
           "serve(Gateway(load_config(cfg), JsonlLog(log)), port=int(port), loop=loop, http=http)")

# The baseline: the same framework with nothing behind it.
BARE_APP = """
import sys, uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
app = FastAPI()
@app.post("/v1/chat/completions")
async def chat(request: Request):
    await request.json()
    return JSONResponse({"id": "x", "object": "chat.completion", "model": "bare",
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
                         "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                         "finops": {"route": "bare", "route_ms": 0.0, "queue_ms": 0.0, "service_ms": 0.0}})
@app.get("/healthz")
async def healthz():
    return {"status": "ok"}
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False,
            loop=sys.argv[2], http=sys.argv[3])
"""

# The load command's own add_arguments/run, without importing every other subcommand.
LOAD = ("import argparse, sys; from finops.commands import load as m; p = argparse.ArgumentParser(); "
        "m.add_arguments(p); sys.exit(m.run(p.parse_args()))")

# --stack -> uvicorn's (loop, http)
STACKS = {"auto": ("auto", "auto"), "asyncio": ("asyncio", "h11")}

OVERHEAD_BUCKET = re.compile(r'finops_gateway_overhead_seconds_bucket\{endpoint="chat",le="([^"]+)"\} (\S+)')
OVERHEAD_SUM = re.compile(r'finops_gateway_overhead_seconds_sum\{endpoint="chat"\} (\S+)')


def server_stack(stack: str) -> str:
    """Which event loop and HTTP parser uvicorn runs ("auto" prefers uvloop and httptools)."""
    import importlib.util

    if stack == "asyncio":
        return "uvicorn asyncio+h11 (forced)"
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    return f"uvicorn {loop}+{http}"


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process (Linux /proc), None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(proc: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server at {url} exited with {proc.returncode}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"server at {url} did not start")


def run_load(url: str, rate: float, duration: float, procs: int, seed: int, client: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [subprocess.Popen(
        [sys.executable, "-c", LOAD, "--url", url, "--rate", str(rate / procs), "--duration", str(duration),
         "--seed", str(seed + i), "--timeout", "10", "--client", client, "--json"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) for i in range(procs)]
    reports = [json.loads(c.communicate()[0]) for c in children]
    return {
        "scheduled": sum(r["scheduled"] for r in reports), "sent": sum(r["sent"] for r in reports),
        "ok": sum(r["ok"] for r in reports),
        "achieved": sum(r["achieved_rate_per_s"] for r in reports),
        "answered": sum(r["throughput_per_s"] for r in reports),
        "lag_p99": max(r["send_lag_ms"]["p99"] or 0.0 for r in reports),
        "p50": statistics.median(r["overhead_ms"]["p50"] or 0.0 for r in reports),
        "p99": max(r["overhead_ms"]["p99"] or 0.0 for r in reports),
        "route_p99": max(r["route_ms"]["p99"] or 0.0 for r in reports),
    }


def overhead_histogram(url: str) -> tuple[dict[float, float], float]:
    """The gateway's chat overhead histogram from /metrics: (le seconds -> cumulative count, sum seconds)."""
    text = httpx.get(url + "/metrics", timeout=10).text
    buckets = {float(le): float(n) for le, n in OVERHEAD_BUCKET.findall(text)}
    total = OVERHEAD_SUM.search(text)
    return buckets, float(total.group(1)) if total else 0.0


def bucket_quantile(cumulative: dict[float, float], q: float) -> float | None:
    """The upper edge (seconds) of the bucket holding the ``q`` quantile; None if no observations.

    >>> bucket_quantile({0.001: 90, 0.002: 99, 0.005: 100, float("inf"): 100}, 0.99)
    0.002
    >>> bucket_quantile({0.001: 0, float("inf"): 0}, 0.5) is None
    True
    """
    n = cumulative.get(float("inf"), 0)
    if not n:
        return None
    rank = math.ceil(q * n)
    return next(le for le, c in sorted(cumulative.items()) if c >= rank)


def fmt(x: float | None, width: int = 7) -> str:
    if x is None:
        return " " * (width - 1) + "-"
    return f"{x:{width}.2f}" if x != float("inf") else f"{'>1000':>{width}}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,200,300,500,700,1000,1500",
                        help="offered rates, requests/s, comma-separated")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per rate")
    parser.add_argument("--procs", type=int, default=1, help="load-generator processes sharing each rate")
    parser.add_argument("--client", default="raw", choices=["raw", "httpx"],
                        help="load-generator client: raw (light, default) or httpx (~5x the client CPU)")
    parser.add_argument("--stack", default="auto", choices=list(STACKS),
                        help="uvicorn's loop and parser for both servers: auto (uvloop + httptools when "
                             "installed, default) or asyncio (asyncio + h11)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the bare-FastAPI baseline")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    loop, http = STACKS[args.stack]

    tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    (tmp / "gateway.toml").write_text(CONFIG, encoding="utf-8")
    log = tmp / "gateway.jsonl"
    gw_url = f"http://127.0.0.1:{free_port()}"
    bare_url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    servers = [subprocess.Popen([sys.executable, "-c", GATEWAY, str(tmp / "gateway.toml"), str(log),
                                 gw_url.rsplit(":", 1)[1], loop, http],
                                cwd=ROOT, env=env, stderr=subprocess.DEVNULL)]
    if not args.no_baseline:
        servers.append(subprocess.Popen([sys.executable, "-c", BARE_APP, bare_url.rsplit(":", 1)[1], loop, http],
                                        cwd=ROOT, env=env, stderr=subprocess.DEVNULL))
    try:
        wait_healthy(servers[0], gw_url)
        if not args.no_baseline:
            wait_healthy(servers[1], bare_url)
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; server: "
              f"{server_stack(args.stack)}; {args.duration:g} s per rate, {args.procs} load process(es), "
              f"{args.client} client; times in ms; gw ovh = in-gateway overhead, percentiles as bucket "
              f"upper edges (upper bounds); cli ovh = client-observed (incl. client + loopback)")
        run_load(gw_url, 50, 2, 1, 99, args.client)         # warm-up, not reported
        print(f"{'rate/s':>7} {'achieved':>8} {'ok/sent':>11} {'lag p99':>7} | {'gw ovh50':>8} {'gw ovh99':>8} "
              f"{'gw mean':>7} {'route99':>7} {'cpu/req':>7} | {'cli ovh50':>9} {'cli ovh99':>9} | "
              f"{'bare p50':>8} {'bare p99':>8}")
        cpu_per_req: list[float] = []
        best = best_client = None
        not_sustained: list[float] = []
        for i, rate in enumerate(rates):
            hist0, sum0 = overhead_histogram(gw_url)
            cpu0 = cpu_s(servers[0].pid)
            gw = run_load(gw_url, rate, args.duration, args.procs, i, args.client)
            cpu1 = cpu_s(servers[0].pid)
            hist1, sum1 = overhead_histogram(gw_url)
            hist = {le: n - hist0.get(le, 0.0) for le, n in hist1.items()}
            n_obs = hist.get(float("inf"), 0.0)
            ovh50, ovh99 = (None if q is None else q * 1000
                            for q in (bucket_quantile(hist, 0.50), bucket_quantile(hist, 0.99)))
            mean_ms = (sum1 - sum0) * 1000 / n_obs if n_obs else None
            cpu_ms = (cpu1 - cpu0) * 1000 / gw["ok"] if cpu0 is not None and gw["ok"] else None
            if cpu_ms is not None:
                cpu_per_req.append(cpu_ms)
            bare = (None if args.no_baseline
                    else run_load(bare_url, rate, args.duration, args.procs, i, args.client))
            on_time = gw["sent"] == gw["scheduled"] == gw["ok"] and gw["lag_p99"] < 10
            kept_up = gw["achieved"] >= 0.95 * rate and gw["answered"] >= 0.95 * rate
            # no queue building up in front of the app: the median request, seen by the client, still waits
            # under 5 ms (its P99 also holds the load generator's own delays on the same two cores)
            no_backlog = gw["p50"] is not None and gw["p50"] < 5.0
            sustained = on_time and kept_up and no_backlog and ovh99 is not None and ovh99 <= 5.0
            if sustained:
                best = rate
            else:
                not_sustained.append(rate)
            if on_time and kept_up and gw["p99"] < 5:
                best_client = rate
            why = [] if sustained else [w for w, bad in (
                ("late sends", gw["lag_p99"] >= 10 or gw["sent"] != gw["scheduled"]),
                ("non-200", gw["ok"] != gw["sent"]), ("sent or answered < 95%", not kept_up),
                ("client P50 >= 5 ms: a backlog", not no_backlog),
                ("gw P99 > 5 ms", ovh99 is None or ovh99 > 5.0)) if bad]
            print(f"{rate:7.0f} {gw['achieved']:8.1f} {gw['ok']:>5}/{gw['sent']:<5} {fmt(gw['lag_p99'])} | "
                  f"{fmt(ovh50, 8)} {fmt(ovh99, 8)} {fmt(mean_ms)} {fmt(gw['route_p99'])} {fmt(cpu_ms)} | "
                  f"{fmt(gw['p50'], 9)} {fmt(gw['p99'], 9)} | "
                  f"{fmt(bare['p50'] if bare else None, 8)} {fmt(bare['p99'] if bare else None, 8)}"
                  f"{'' if sustained else '   not sustained: ' + ', '.join(why)}")
        below = ", ".join(f"{r:.0f}" for r in not_sustained if best and r < best)
        print(f"highest rate sustained (sent on time, all 200, >= 95% sent and answered, client-observed P50 "
              f"overhead < 5 ms, in-gateway P99 overhead < 5 ms): "
              f"{f'{best:.0f} req/s' if best else 'none of those tried'} (target >= 500 req/s)"
              f"{f'; lower rates not sustained in this run: {below} req/s' if below else ''}")
        print(f"highest rate with client-observed P99 overhead < 5 ms (incl. the load generator on the same "
              f"CPUs and the loopback): {f'{best_client:.0f} req/s' if best_client else 'none of those tried'}")
        if cpu_per_req:
            med = statistics.median(cpu_per_req)
            print(f"gateway CPU per request (median over rates): {med:.2f} ms, so one core saturates near "
                  f"{1000 / med:.0f} req/s (a ceiling, before any queueing delay)")
    finally:
        for proc in servers:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
