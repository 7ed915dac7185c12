"""``scrape vllm``: vLLM's /metrics, parsed with prometheus_client's text parser, stored per replica per scrape.

vLLM cannot run here (no GPU, no weights), so the server is prometheus_client's own HTTP exporter on 127.0.0.1
serving a registry that declares the metrics exactly as vLLM's ``PrometheusStatLogger`` does: names, types,
documentation, labels ``model_name`` and ``engine`` (``finished_reason`` on request_success) and the TTFT/TPOT
buckets, as in vllm-project/vllm ``vllm/v1/metrics/loggers.py`` at a6f0308cfe806b7731ad4979c9bea6e470c35efd
(``vllm:gpu_cache_usage_perc``, ``vllm:gpu_prefix_cache_queries`` / ``_hits``, ``vllm:num_preemptions_total``);
the later names are the second registry: ``vllm:kv_cache_usage_perc`` (gauge), ``vllm:prefix_cache_queries`` /
``_hits`` (counters), ``vllm:num_preemptions`` (a counter, exposed ``vllm:num_preemptions_total``),
``vllm:inter_token_latency_seconds`` (histogram), as vllm-project/vllm ``docs/design/metrics.md`` at
f7e3a0879e633f9924d477b85a3775cb1ae2a2e5 lists the v1 engine's ``/metrics`` (same labels and buckets).
"""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime

import pytest

from helpers import ROOT, free_port

prometheus_client = pytest.importorskip("prometheus_client")

LABELS = ["model_name", "engine"]
TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0]
TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0]
LATENCY_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
                   480.0, 960.0, 1920.0, 7680.0]


class VllmRegistry:
    """The metrics of one vLLM server (one engine, ``engine="0"``), in the older or the later naming."""

    def __init__(self, model: str, later_names: bool):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        r = self.registry = CollectorRegistry()
        lv = (model, "0")
        g = {"registry": r, "labelnames": LABELS}
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", **g
                             ).labels(*lv)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", **g
                             ).labels(*lv)
        if later_names:
            self.kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", **g).labels(*lv)
            self.queries = Counter("vllm:prefix_cache_queries",
                                   "Prefix cache queries, in terms of number of queried tokens.", **g).labels(*lv)
            self.hits = Counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                                **g).labels(*lv)
            self.preempted = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", **g
                                     ).labels(*lv)
            self.itl = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                                 buckets=TPOT_BUCKETS, **g).labels(*lv)
        else:
            self.kv = Gauge("vllm:gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage.", **g
                            ).labels(*lv)
            self.queries = Counter("vllm:gpu_prefix_cache_queries",
                                   "GPU prefix cache queries, in terms of number of queried blocks.", **g).labels(*lv)
            self.hits = Counter("vllm:gpu_prefix_cache_hits",
                                "GPU prefix cache hits, in terms of number of cached blocks.", **g).labels(*lv)
            self.preempted = Counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
                                     **g).labels(*lv)
            self.itl = None
        Counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", **g).labels(*lv).inc(5000)
        success = Counter("vllm:request_success_total", "Count of successfully processed requests.", registry=r,
                          labelnames=LABELS + ["finished_reason"])
        for reason in ("stop", "length", "abort"):
            success.labels(model, "0", reason).inc(3)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              buckets=TTFT_BUCKETS, **g).labels(*lv)
        self.tpot = Histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                              buckets=TPOT_BUCKETS, **g).labels(*lv)
        self.queue_time = Histogram("vllm:request_queue_time_seconds",
                                    "Histogram of time spent in WAITING phase for request.",
                                    buckets=LATENCY_BUCKETS, **g).labels(*lv)
        Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", registry=r,
              labelnames=["block_size", "enable_prefix_caching"]).labels("16", "True").set(1)

    def load(self, waiting: int, running: int, kv: float) -> None:
        self.waiting.set(waiting)
        self.running.set(running)
        self.kv.set(kv)
        self.queries.inc(1000)
        self.hits.inc(250)
        self.preempted.inc(1)
        for v in (0.05, 0.3, 2.0):
            self.ttft.observe(v)
            self.queue_time.observe(v)
        self.tpot.observe(0.03)
        if self.itl:
            self.itl.observe(0.03)


@pytest.fixture()
def vllm_server():
    from prometheus_client import start_http_server

    servers = []

    def start(model: str, later_names: bool) -> tuple[str, VllmRegistry]:
        reg = VllmRegistry(model, later_names)
        port = free_port()
        server, thread = start_http_server(port, addr="127.0.0.1", registry=reg.registry)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}/metrics", reg

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("later_names", [False, True], ids=["a6f0308-names", "later-names"])
def test_scrape_stores_the_engine_series(vllm_server, later_names):
    from finops import store
    from finops.ingest import engine

    url, reg = vllm_server("meta-llama/Llama-3.1-8B-Instruct", later_names)
    con = store.connect(":memory:")
    before = store.data_version(con)
    reg.load(waiting=7, running=32, kv=0.93)
    first = engine.scrape_vllm(con, url, "gpu-a", now=datetime(2026, 5, 4, 4, 0, 0))
    reg.load(waiting=11, running=32, kv=0.97)
    engine.scrape_vllm(con, url, "gpu-a", now=datetime(2026, 5, 4, 4, 0, 15))
    assert store.data_version(con) == before + 2
    assert first.models == ["meta-llama/Llama-3.1-8B-Instruct"] and first.replica == "gpu-a"
    kv = "vllm:kv_cache_usage_perc" if later_names else "vllm:gpu_cache_usage_perc"
    prefix = "vllm:prefix_cache" if later_names else "vllm:gpu_prefix_cache"
    rows = con.execute("SELECT ts, metric, labels, value FROM engine_metrics WHERE replica = 'gpu-a' "
                       "AND model = 'meta-llama/Llama-3.1-8B-Instruct' AND metric IN (?, ?, ?, ?, ?) ORDER BY ts, metric",
                       ["vllm:num_requests_waiting", kv, f"{prefix}_hits_total", f"{prefix}_queries_total",
                        "vllm:num_preemptions_total"]).fetchall()
    got = [(r[0].second, r[1], r[3]) for r in rows]
    assert got == sorted([(0, "vllm:num_requests_waiting", 7.0), (0, kv, 0.93), (0, f"{prefix}_hits_total", 250.0),
                          (0, f"{prefix}_queries_total", 1000.0), (0, "vllm:num_preemptions_total", 1.0),
                          (15, "vllm:num_requests_waiting", 11.0), (15, kv, 0.97),
                          (15, f"{prefix}_hits_total", 500.0), (15, f"{prefix}_queries_total", 2000.0),
                          (15, "vllm:num_preemptions_total", 2.0)])
    assert all(r[2] == '{"engine": "0"}' for r in rows)
    # the TTFT histogram: cumulative buckets with their le, sum and count, per scrape
    ttft = dict(con.execute("SELECT json_extract_string(labels, '$.le'), value FROM engine_metrics WHERE ts = ? "
                            "AND metric = 'vllm:time_to_first_token_seconds_bucket'",
                            [datetime(2026, 5, 4, 4, 0, 15)]).fetchall())
    assert ttft["0.06"] == 2 and ttft["0.5"] == 4 and ttft["2.5"] == 6 and ttft["+Inf"] == 6
    assert len(ttft) == len(TTFT_BUCKETS) + 1
    counts = con.execute("SELECT metric, value FROM engine_metrics WHERE ts = ? AND metric LIKE "
                         "'vllm:time_per_output_token_seconds_%' AND metric <> "
                         "'vllm:time_per_output_token_seconds_bucket'", [datetime(2026, 5, 4, 4, 0, 15)]).fetchall()
    assert dict(counts) == {"vllm:time_per_output_token_seconds_count": 2.0,
                            "vllm:time_per_output_token_seconds_sum": pytest.approx(0.06)}
    # what the store keeps is the engine's series: not the tokens counters nor the creation times
    kept = {r[0] for r in con.execute("SELECT DISTINCT metric FROM engine_metrics").fetchall()}
    assert not any(m.endswith("_created") for m in kept) and "vllm:prompt_tokens_total" not in kept
    q = engine.engine_queue(con, "meta-llama/Llama-3.1-8B-Instruct", datetime(2026, 5, 4, 4), datetime(2026, 5, 4, 5))
    assert (q.scrapes, q.waiting_max, q.waiting_mean, q.kv_cache_max, q.replicas) == (2, 11.0, 9.0, 0.97, ["gpu-a"])


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "finops", *args], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def test_cli_scrapes_every_s_count_n(vllm_server, tmp_path):
    url, reg = vllm_server("qwen", True)
    reg.load(waiting=3, running=8, kv=0.5)
    db = str(tmp_path / "s.duckdb")
    out = _cli("scrape", "vllm", "--url", url, "--every", "0.2", "--count", "3", "--db", db)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("samples (qwen)") == 3
    from finops import store
    con = store.connect(db, read_only=True)
    scrapes = con.execute("SELECT count(DISTINCT ts), min(replica) FROM engine_metrics").fetchall()[0]
    assert scrapes == (3, url.split("//")[1].split("/")[0])      # default replica: host:port


def test_cli_unreachable_or_not_vllm_is_one_line(vllm_server, tmp_path):
    db = str(tmp_path / "s.duckdb")
    port = free_port()
    down = _cli("scrape", "vllm", "--url", f"http://127.0.0.1:{port}/metrics", "--db", db)
    assert down.returncode == 1 and down.stderr.count("\n") == 1 and "could not reach" in down.stderr
    from prometheus_client import CollectorRegistry, Gauge, start_http_server
    reg = CollectorRegistry()
    Gauge("process_open_fds", "fds", registry=reg).set(3)
    other = free_port()
    server, thread = start_http_server(other, addr="127.0.0.1", registry=reg)
    try:
        res = _cli("scrape", "vllm", "--url", f"http://127.0.0.1:{other}/metrics", "--db", db)
    finally:
        server.shutdown()
        server.server_close()
    assert res.returncode == 1 and "no vLLM engine metrics" in res.stderr and res.stderr.count("\n") == 1
