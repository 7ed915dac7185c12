"""Benchmark: the OTLP/HTTP receiver's throughput and acknowledge time (issue 16 item 2).

    python bench/otlp.py [--clients 4] [--spans 50] [--duration 20] [--rate 2000] [--drain]

Target: at least 2,000 spans/s with a P99 acknowledge time under 50 ms. Prints figures measured in this
run; asserts nothing about wall-clock time.

The receiver (``finops.ingest.otlp.start_receiver``, spooling into a temporary folder with fsync) and the
**baseline**, a bare stdlib ``ThreadingHTTPServer`` (HTTP/1.1 keep-alive, as the receiver's) that only
reads the body and answers 200 with an empty ``ExportTraceServiceResponse``, each run in their own
process. ``--clients`` client processes each keep one connection (``http.client``) and post, closed-loop,
protobuf ``ExportTraceServiceRequest`` bodies of ``--spans`` GenAI chat spans (what the SDK's
BatchSpanProcessor sends; fresh trace and span ids per request). The acknowledge time is from the
request's first byte sent to the whole 200 read. Two phases per server, each run twice and alternated
(closed bare, closed receiver, paced bare, paced receiver, then again) so load from other processes on this
shared machine falls on both; percentiles are over both runs' requests:

* **closed loop**: as fast as the clients can go, ``--duration`` seconds per server in all: spans/s
  and ack P50/P99; the receiver's CPU time per 1,000 spans (Linux ``/proc``), which contention inflates
  far less than latency;
* **paced**: open-loop at ``--rate`` spans/s (requests scheduled on a fixed clock, spread over the
  clients), ``--duration`` seconds in all: the ack P50/P99 at the target rate and the rate achieved;
* the receiver's own spool commits (write + fdatasync P50/P99, requests per commit), which shows how much of
  the ack tail is the disk's.

Ratios receiver / bare show the receiver's own cost (parsing, OTLP/JSON conversion, the spool's fsync).
``--drain`` then loads the receiver's spool into a fresh store and prints spans/s of the drain.
``--drain-every S``: the receiver's process also drains its spool into a store every S seconds while it
serves (as an ingester service running both in one process would; the drain's CPU then shares the GIL).
"""
from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the receiver; each line on its stdin asks for the spool's commits since the last ask: (write + fsync ms,
# requests in the group)
# with a drain period (argv 2 > 0), a thread of the same process drains the spool into a store that often,
# as an ingester service running both would
RECEIVER = """
import json, sys, threading
from finops.ingest.otlp import drain, start_receiver
r = start_receiver(sys.argv[1], port=0)
every = float(sys.argv[2])
stop = threading.Event()
drained = [0]
def drains():
    from finops import store
    con = store.connect(sys.argv[1] + ".duckdb")
    while not stop.wait(every):
        drained[0] += drain(con, sys.argv[1])
    con.close()
t = threading.Thread(target=drains)
if every > 0:
    t.start()
print(r.port, flush=True)
for _ in sys.stdin:
    commits = list(r.spool.recent)
    r.spool.recent.clear()
    print(json.dumps(commits), flush=True)
stop.set()
if every > 0:
    t.join()
r.stop()
print(json.dumps({"drained": drained[0]}), flush=True)
"""

BARE = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
class S(ThreadingHTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
import threading
threading.Thread(target=s.serve_forever, daemon=True).start()
sys.stdin.read()
"""


def _template(spans: int):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(k, v):
        return KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=v))

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend([kv("service.name", "bench-bot"), kv("tenant.id", "acme"),
                                   kv("telemetry.sdk.name", "opentelemetry")])
    ss = rs.scope_spans.add()
    ss.scope.name, ss.scope.version = "opentelemetry.instrumentation.openai_v2", "2.1b0"
    t0 = 1_764_590_400_000_000_000
    for i in range(spans):
        s = ss.spans.add()
        s.name, s.kind = "chat gpt-4o-mini", 3
        s.start_time_unix_nano, s.end_time_unix_nano = t0 + i * 1_000_000, t0 + i * 1_000_000 + 420_000_000
        s.attributes.extend([kv("gen_ai.operation.name", "chat"), kv("gen_ai.provider.name", "openai"),
                             kv("gen_ai.request.model", "gpt-4o-mini"),
                             kv("gen_ai.response.model", "gpt-4o-mini-2024-07-18"),
                             kv("gen_ai.usage.input_tokens", 1200 + i), kv("gen_ai.usage.output_tokens", 150 + i),
                             kv("server.address", "api.openai.com")])
    return req


def _client(port: int, spans: int, k: int, seconds: float, interval_s: float, start_at: float, out) -> None:
    """One connection posting bodies until ``seconds`` after ``start_at``; closed-loop when
    ``interval_s`` is 0, else one request every ``interval_s`` on a fixed schedule."""
    req = _template(spans)
    span_list = req.resource_spans[0].scope_spans[0].spans
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    acks, failed, seq = [], 0, 0
    while time.time() < start_at:
        time.sleep(0.001)
    t_end = start_at + seconds
    next_at = start_at + interval_s * k / max(1, out["clients"])
    while True:
        if interval_s:
            now = time.time()
            if next_at >= t_end:
                break
            if next_at > now:
                time.sleep(next_at - now)
            next_at += interval_s
        elif time.time() >= t_end:
            break
        seq += 1
        trace = ((k + 1) << 96 | seq << 32 | os.getpid()).to_bytes(16, "big")
        for i, s in enumerate(span_list):
            s.trace_id, s.span_id = trace, (i + 1).to_bytes(8, "big")
        body = req.SerializeToString()
        t = time.perf_counter()
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        resp = conn.getresponse()
        resp.read()
        acks.append(time.perf_counter() - t)
        if resp.status != 200:
            failed += 1
    conn.close()
    out["q"].put({"acks": acks, "failed": failed})


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _commits(proc: subprocess.Popen | None) -> list:
    if proc is None:
        return []
    proc.stdin.write("stats\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def run_phase(port: int, pid: int, clients: int, spans: int, seconds: float, rate_spans_s: float = 0.0,
              proc: subprocess.Popen | None = None) -> dict:
    interval = clients * spans / rate_spans_s if rate_spans_s else 0.0
    q = mp.Queue()
    start_at = time.time() + 0.5
    _commits(proc)
    cpu0 = _cpu_s(pid)
    procs = [mp.Process(target=_client, args=(port, spans, k, seconds, interval, start_at,
                                              {"q": q, "clients": clients})) for k in range(clients)]
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    cpu = _cpu_s(pid) - cpu0
    commits = _commits(proc)
    acks = [a for r in results for a in r["acks"]]
    n_spans = len(acks) * spans
    return {"spans_per_s": n_spans / seconds, "p50_ms": _pct(acks, 0.50) * 1e3, "p99_ms": _pct(acks, 0.99) * 1e3,
            "requests": len(acks), "failed": sum(r["failed"] for r in results),
            "cpu_ms_per_1k_spans": cpu * 1e3 / max(1, n_spans) * 1000, "spans": n_spans, "acks": acks,
            "fsync_ms": [c[0] for c in commits], "per_commit": [c[1] for c in commits]}


def _start(argv: list[str]) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", *argv], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return proc, int(proc.stdout.readline())


def _stop(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--spans", type=int, default=50, help="spans per request (the SDK's batch: up to 512)")
    ap.add_argument("--duration", type=float, default=20.0, help="closed-loop seconds per server, in all")
    ap.add_argument("--rate", type=float, default=2000.0, help="spans/s of the paced phase")
    ap.add_argument("--drain", action="store_true", help="then drain the spool into a store and time it")
    ap.add_argument("--drain-every", type=float, default=0.0,
                    help="seconds: the receiver's process also drains its spool this often (as the ingester would)")
    args = ap.parse_args()

    load0 = os.getloadavg()
    spool = Path(tempfile.mkdtemp(prefix="finops-otlp-bench-")) / "spool"
    bare, bare_port = _start([BARE])
    recv, recv_port = _start([RECEIVER, str(spool), str(args.drain_every)])
    servers = {"bare": (bare_port, bare.pid, None), "receiver": (recv_port, recv.pid, recv)}
    phases: dict[tuple[str, str], list[dict]] = {}
    half = args.duration / 2
    try:
        for mode, seconds, rate in (("closed", half, 0.0), ("paced", half, args.rate)) * 2:
            for name in ("bare", "receiver"):
                port, pid, proc = servers[name]
                phases.setdefault((mode, name), []).append(
                    run_phase(port, pid, args.clients, args.spans, seconds, rate, proc))
    finally:
        _stop(bare)
        recv.stdin.close()
        drained_live = json.loads(recv.stdout.readline() or "{}").get("drained")
        recv.wait(timeout=120)
    load1 = os.getloadavg()

    def merged(rows: list[dict]) -> dict:
        return {"spans_per_s": sum(r["spans_per_s"] for r in rows) / len(rows),
                "p50_ms": _pct([a for r in rows for a in r["acks"]], 0.50) * 1e3,
                "p99_ms": _pct([a for r in rows for a in r["acks"]], 0.99) * 1e3,
                "failed": sum(r["failed"] for r in rows),
                "cpu_ms_per_1k_spans": sum(r["cpu_ms_per_1k_spans"] for r in rows) / len(rows),
                "spans": sum(r["spans"] for r in rows),
                "fsync_ms": [x for r in rows for x in r["fsync_ms"]],
                "per_commit": [x for r in rows for x in r["per_commit"]]}

    print(f"OTLP/HTTP receiver: {args.clients} client processes, {args.spans} spans per protobuf request; "
          f"{os.cpu_count()} CPUs; load average {load0[0]:.2f} before, {load1[0]:.2f} after"
          + (f"; the receiver's process drained every {args.drain_every:g} s ({drained_live:,} rows)"
             if args.drain_every else ""))
    print(f"{'phase':<22}{'server':<10}{'spans/s':>10}{'ack p50 ms':>12}{'ack p99 ms':>12}{'cpu ms/1k spans':>17}"
          f"{'non-200':>9}")
    out = {}
    for (mode, name), rows in phases.items():
        m = merged(rows)
        out[f"{mode}_{name}"] = m
        label = "closed loop" if mode == "closed" else f"paced {args.rate:,.0f} spans/s"
        print(f"{label:<22}{name:<10}{m['spans_per_s']:>10,.0f}{m['p50_ms']:>12.2f}{m['p99_ms']:>12.2f}"
              f"{m['cpu_ms_per_1k_spans']:>17.1f}{m['failed']:>9}")
    for mode in ("closed", "paced"):
        m = out[f"{mode}_receiver"]
        f, n = m.pop("fsync_ms"), m.pop("per_commit")
        out[f"{mode}_bare"].pop("fsync_ms"), out[f"{mode}_bare"].pop("per_commit")
        if f:
            m.update(commit_ms_p50=_pct(f, 0.5), commit_ms_p99=_pct(f, 0.99), requests_per_commit=sum(n) / len(n))
            print(f"receiver's spool, {mode}: {len(f):,} commits, write + fsync P50 {m['commit_ms_p50']:.2f} ms, "
                  f"P99 {m['commit_ms_p99']:.2f} ms, {m['requests_per_commit']:.2f} requests per commit")
    c_b, c_r = out["closed_bare"], out["closed_receiver"]
    p_r = out["paced_receiver"]
    print(f"ratio receiver / bare, closed loop: throughput {c_r['spans_per_s'] / c_b['spans_per_s']:.2f}x, "
          f"ack p99 {c_r['p99_ms'] / c_b['p99_ms']:.2f}x, CPU per span "
          f"{c_r['cpu_ms_per_1k_spans'] / max(1e-9, c_b['cpu_ms_per_1k_spans']):.2f}x")
    ok = c_r["spans_per_s"] >= 2000 and p_r["p99_ms"] < 50 and p_r["spans_per_s"] >= 0.95 * args.rate
    print(f"target (>= 2,000 spans/s; P99 ack < 50 ms at {args.rate:,.0f} spans/s): "
          f"{'met' if ok else 'NOT met'} (closed loop {c_r['spans_per_s']:,.0f} spans/s; paced P99 "
          f"{p_r['p99_ms']:.1f} ms at {p_r['spans_per_s']:,.0f} spans/s)")
    if args.drain:
        from finops import store
        from finops.ingest import IngestOptions, otlp
        con = store.connect(str(spool.parent / "bench.duckdb"))
        t = time.perf_counter()
        rows = otlp.drain(con, spool, IngestOptions(tenant_field="tenant.id"))
        s = time.perf_counter() - t
        spooled = c_r["spans"] + p_r["spans"]
        print(f"drain: {rows:,} rows of {spooled:,} spans acknowledged in {s:.1f} s ({rows / s:,.0f} spans/s)")
        con.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
