"""Benchmark: the reference gateway's own overhead per request, at increasing open-loop rates.

    python bench/gateway.py [--rates 100,200,300,500,700,1000] [--duration 5] [--procs 1] [--client raw]

Prints figures measured in this run; asserts nothing about wall-clock time.

The gateway (``python -m finops gateway``) serves two mock backends with zero
service time (no prefill, no decode) and no cache, so every millisecond a
request spends is the gateway's: parsing, routing, logging one flushed JSONL
row, answering. At each rate the load generator (``finops.loadgen``, open-loop
Poisson, in ``--procs`` separate processes sharing the rate) sends POST
/v1/chat/completions for ``--duration`` seconds, with its light ``raw`` HTTP/1.1
client by default: httpx costs about 1.8 ms of client CPU per request here,
enough to make the client the bottleneck. Per rate it prints:

* overhead = client latency - queue_ms - service_ms, P50 and P99: route_ms plus
  framework time (HTTP parsing, validation, logging, serialising), plus the
  client's own HTTP cost and the loopback: an upper bound on the gateway's share;
* in-gateway time from the log: route_ms, and total_ms - queue_ms - service_ms;
* the gateway process's CPU time per request (Linux), which contention from
  other processes inflates far less than latency;
* the same overhead against a baseline measured in the same run: a bare
  FastAPI + uvicorn endpoint answering a fixed JSON (the framework's floor).

"Sustained" means every scheduled request was sent on time (send lag P99 < 10 ms,
else the client, not the gateway, was the limit) and answered 200, with P99
overhead < 5 ms. With several processes, P50 is their median and P99 their
maximum (conservative). The gateway and the load generator share this
machine's CPUs, so the figures are a floor for the gateway alone.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from finops.loadgen import percentile  # noqa: E402

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
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""

# The load command's own add_arguments/run, without importing every other subcommand.
LOAD = ("import argparse, sys; from finops.commands import load as m; p = argparse.ArgumentParser(); "
        "m.add_arguments(p); sys.exit(m.run(p.parse_args()))")


def server_stack() -> str:
    """Which event loop and HTTP parser uvicorn picks here ("auto" prefers uvloop and httptools)."""
    import importlib.util

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
        "lag_p99": max(r["send_lag_ms"]["p99"] or 0.0 for r in reports),
        "p50": statistics.median(r["overhead_ms"]["p50"] or 0.0 for r in reports),
        "p99": max(r["overhead_ms"]["p99"] or 0.0 for r in reports),
        "lat_p99": max(r["latency_ms"]["p99"] or 0.0 for r in reports),
    }


def log_figures(path: Path, offset: int) -> tuple[dict, int]:
    """route_ms and in-gateway time (total - queue - service) of the rows after byte ``offset``."""
    with path.open("rb") as fh:
        fh.seek(offset)
        data = fh.read()
    rows = [json.loads(line) for line in data.decode().splitlines() if line]
    route = sorted(r["route_ms"] for r in rows)
    inside = sorted(r["total_ms"] - r["queue_ms"] - r["service_ms"] for r in rows)
    return ({"rows": len(rows), "route_p50": percentile(route, 50), "route_p99": percentile(route, 99),
             "in_p50": percentile(inside, 50), "in_p99": percentile(inside, 99)}, offset + len(data))


def fmt(x: float | None, width: int = 7) -> str:
    return f"{x:{width}.2f}" if x is not None else " " * (width - 1) + "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,200,300,500,700,1000",
                        help="offered rates, requests/s, comma-separated")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per rate")
    parser.add_argument("--procs", type=int, default=1, help="load-generator processes sharing each rate")
    parser.add_argument("--client", default="raw", choices=["raw", "httpx"],
                        help="load-generator client: raw (light, default) or httpx (~5x the client CPU)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the bare-FastAPI baseline")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    (tmp / "gateway.toml").write_text(CONFIG, encoding="utf-8")
    log = tmp / "gateway.jsonl"
    gw_url = f"http://127.0.0.1:{free_port()}"
    bare_url = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    servers = [subprocess.Popen([sys.executable, "-m", "finops", "gateway", "--config", str(tmp / "gateway.toml"),
                                 "--port", gw_url.rsplit(":", 1)[1], "--log", str(log)],
                                cwd=ROOT, env=env, stderr=subprocess.DEVNULL)]
    if not args.no_baseline:
        servers.append(subprocess.Popen([sys.executable, "-c", BARE_APP, bare_url.rsplit(":", 1)[1]],
                                        cwd=ROOT, env=env, stderr=subprocess.DEVNULL))
    try:
        wait_healthy(servers[0], gw_url)
        if not args.no_baseline:
            wait_healthy(servers[1], bare_url)
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; server: "
              f"{server_stack()}; {args.duration:g} s per rate, {args.procs} load process(es), "
              f"{args.client} client; times in ms")
        run_load(gw_url, 50, 2, 1, 99, args.client)         # warm-up, not reported
        offset = log.stat().st_size
        print(f"{'rate/s':>7} {'achieved':>8} {'ok/sent':>11} {'lag p99':>7} | {'ovh p50':>7} {'ovh p99':>7} | "
              f"{'route50':>7} {'route99':>7} {'in-gw50':>7} {'in-gw99':>7} {'cpu/req':>7} | {'bare p50':>8} "
              f"{'bare p99':>8} {'p99 x bare':>10}")
        cpu_per_req: list[float] = []
        best = None
        for i, rate in enumerate(rates):
            cpu0 = cpu_s(servers[0].pid)
            gw = run_load(gw_url, rate, args.duration, args.procs, i, args.client)
            cpu1 = cpu_s(servers[0].pid)
            inside, offset = log_figures(log, offset)
            cpu_ms = (cpu1 - cpu0) * 1000 / gw["ok"] if cpu0 is not None and gw["ok"] else None
            if cpu_ms is not None:
                cpu_per_req.append(cpu_ms)
            bare = (None if args.no_baseline
                    else run_load(bare_url, rate, args.duration, args.procs, i, args.client))
            sustained = (gw["sent"] == gw["scheduled"] == gw["ok"] and gw["lag_p99"] < 10 and gw["p99"] < 5)
            if sustained:
                best = rate
            ratio = f"{gw['p99'] / bare['p99']:10.2f}" if bare and bare["p99"] else " " * 10
            print(f"{rate:7.0f} {gw['achieved']:8.1f} {gw['ok']:>5}/{gw['sent']:<5} {fmt(gw['lag_p99'])} | "
                  f"{fmt(gw['p50'])} {fmt(gw['p99'])} | {fmt(inside['route_p50'])} {fmt(inside['route_p99'])} "
                  f"{fmt(inside['in_p50'])} {fmt(inside['in_p99'])} {fmt(cpu_ms)} | "
                  f"{fmt(bare['p50'] if bare else None, 8)} {fmt(bare['p99'] if bare else None, 8)} {ratio}"
                  f"{'' if sustained else '   not sustained'}")
        print(f"highest rate sustained with P99 overhead < 5 ms: "
              f"{f'{best:.0f} req/s' if best else 'none of those tried'} (target >= 500 req/s)")
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
