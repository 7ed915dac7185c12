"""The inference engine's own view: vLLM's Prometheus metrics (``/metrics``), scraped into ``engine_metrics``.

A request log cannot see the engine's queue, KV cache or preemptions; vLLM's ``PrometheusStatLogger``
(vllm-project/vllm ``vllm/v1/metrics/loggers.py`` at a6f0308c; the later names as ``docs/design/metrics.md``
at f7e3a087 lists them) exports them, per ``model_name`` and ``engine``. A scrape reads the text
with ``prometheus_client``'s own parser and stores one row per sample of :data:`ENGINE_FAMILIES`:
``ts`` (the scrape's time, UTC), ``replica`` (``--replica``, else the URL's host:port), ``model`` (the
``model_name`` label), ``metric`` (the sample's exposed name: ``vllm:num_requests_waiting``,
``vllm:prefix_cache_hits_total``, ``vllm:time_to_first_token_seconds_bucket``...), ``labels`` (the
other labels as JSON: ``engine``, ``le``, ...) and ``value``.

Names across vLLM versions (both kept, the older where a server still exports it): KV-cache usage
``vllm:kv_cache_usage_perc`` (older ``vllm:gpu_cache_usage_perc``), prefix cache
``vllm:prefix_cache_queries`` / ``_hits`` (older ``vllm:gpu_prefix_cache_queries`` / ``_hits``),
preemptions ``vllm:num_preemptions_total`` either way, time per output token
``vllm:time_per_output_token_seconds`` (later also ``vllm:inter_token_latency_seconds``).
"""
from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from finops import store
from finops.errors import InputError

log = logging.getLogger("finops")

#: the metric families kept (family names as ``prometheus_client``'s parser gives them: a counter's
#: without ``_total``), with what each tells
ENGINE_FAMILIES: dict[str, str] = {
    "vllm:num_requests_running": "requests in the engine's running batch (gauge)",
    "vllm:num_requests_waiting": "requests waiting to be scheduled: the engine's queue (gauge)",
    "vllm:kv_cache_usage_perc": "KV-cache usage, 1 = full (gauge)",
    "vllm:gpu_cache_usage_perc": "KV-cache usage, 1 = full (gauge; the older name)",
    "vllm:prefix_cache_queries": "prefix-cache queries, tokens (counter)",
    "vllm:prefix_cache_hits": "prefix-cache hits, tokens (counter)",
    "vllm:gpu_prefix_cache_queries": "prefix-cache queries (counter; the older name)",
    "vllm:gpu_prefix_cache_hits": "prefix-cache hits (counter; the older name)",
    "vllm:num_preemptions": "preempted requests (counter; registered as vllm:num_preemptions_total by older vLLM, "
                            "which prometheus_client exposes under the same name)",
    "vllm:time_to_first_token_seconds": "TTFT (histogram)",
    "vllm:time_per_output_token_seconds": "TPOT (histogram)",
    "vllm:inter_token_latency_seconds": "inter-token latency (histogram)",
    "vllm:request_queue_time_seconds": "time a request spent WAITING (histogram)",
    "vllm:e2e_request_latency_seconds": "end-to-end request latency (histogram)",
}
WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
MAX_BYTES = 32 * 1024 * 1024


@dataclass
class ScrapeResult:
    url: str
    replica: str
    ts: datetime
    samples: int
    models: list[str]

    def as_dict(self) -> dict:
        return {"url": self.url, "replica": self.replica, "ts": self.ts.isoformat(), "samples": self.samples,
                "models": self.models}


@dataclass(frozen=True)
class EngineSample:
    model: str | None
    metric: str
    labels: dict
    value: float


def parse_vllm_metrics(text: str) -> list[EngineSample]:
    """The samples of :data:`ENGINE_FAMILIES` in Prometheus text (``prometheus_client.parser``)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: list[EngineSample] = []
    try:
        for family in text_string_to_metric_families(text):
            if family.name not in ENGINE_FAMILIES:
                continue
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue        # the client's creation timestamps, not a measurement
                labels = dict(s.labels)
                model = labels.pop("model_name", None)
                out.append(EngineSample(model, s.name, labels, float(s.value)))
    except ValueError as exc:
        raise InputError(f"the metrics text is not Prometheus exposition format ({exc})") from None
    return out


def fetch_metrics(url: str, timeout_s: float = 10.0) -> str:
    """GET ``url`` (vLLM's ``/metrics``); a server that cannot be reached is one sentence."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"not an http(s) URL: {url}")
    req = urllib.request.Request(url, headers={"Accept": "text/plain"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:     # noqa: S310 (http(s) checked above)
            body = resp.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise InputError(f"{parts.hostname}:{parts.port or ''} answered HTTP {exc.code} for {parts.path or '/'}") \
            from None
    except (TimeoutError, urllib.error.URLError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(f"could not reach {parts.hostname}:{parts.port or ''}: {reason}") from None
    if len(body) > MAX_BYTES:
        raise InputError(f"{url} answered more than {MAX_BYTES // (1024 * 1024)} MiB of metrics")
    return body.decode("utf-8", errors="replace")


def default_replica(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def store_samples(con: duckdb.DuckDBPyConnection, samples: list[EngineSample], replica: str,
                  ts: datetime) -> int:
    """One scrape's samples into ``engine_metrics``, in one transaction."""
    rows = [(ts, replica, s.model, s.metric, json.dumps(s.labels, sort_keys=True), s.value) for s in samples]
    with store.transaction(con):
        if rows:
            con.executemany("INSERT INTO engine_metrics VALUES (?, ?, ?, ?, ?, ?)", rows)
        store.bump_data_version(con)
    return len(rows)


def scrape_vllm(con: duckdb.DuckDBPyConnection, url: str, replica: str | None = None, *,
                timeout_s: float = 10.0, now: datetime | None = None) -> ScrapeResult:
    """Scrape vLLM's ``/metrics`` once and store its engine series (see the module's docstring)."""
    text = fetch_metrics(url, timeout_s)
    ts = now or datetime.now(UTC)
    if ts.tzinfo is not None:
        ts = ts.astimezone(UTC).replace(tzinfo=None)
    samples = parse_vllm_metrics(text)
    if not samples:
        raise InputError(f"{url} exports no vLLM engine metrics (vllm:num_requests_waiting ...): is it vLLM's "
                         "/metrics?")
    replica = replica or default_replica(url)
    n = store_samples(con, samples, replica, ts)
    return ScrapeResult(url, replica, ts, n, sorted({s.model for s in samples if s.model}))


@dataclass(frozen=True)
class EngineQueue:
    """What the engine said of its queue for one model over a span, from the scraped gauges."""
    scrapes: int
    replicas: list[str]
    waiting_mean: float
    waiting_max: float
    running_max: float | None
    kv_cache_max: float | None


def engine_queue(con: duckdb.DuckDBPyConnection, model: str, start, end) -> EngineQueue | None:
    """vLLM's ``num_requests_waiting`` (summed over a replica's engines per scrape) for ``model`` in
    [start, end), with the running batch and KV-cache usage; ``None`` where nothing was scraped."""
    try:
        rows = _engine_rows(con, model, start, end)
    except duckdb.CatalogException:         # a store made before engine_metrics, opened read-only
        return None
    waiting = [(r, t, v) for r, t, m, v in rows if m == WAITING]
    if not waiting:
        return None
    running = [v for _, _, m, v in rows if m == RUNNING]
    kv = [v for _, _, m, v in rows if m in KV_CACHE]
    values = [v for _, _, v in waiting]
    return EngineQueue(scrapes=len(values), replicas=sorted({r for r, _, _ in waiting}),
                       waiting_mean=sum(values) / len(values), waiting_max=max(values),
                       running_max=max(running) if running else None, kv_cache_max=max(kv) if kv else None)


def _engine_rows(con: duckdb.DuckDBPyConnection, model: str, start, end) -> list[tuple]:
    return con.execute(
        # a replica's engines (data parallel) add up their queues; KV-cache usage is the fullest engine's
        "SELECT replica, ts, metric, CASE WHEN metric IN (?, ?) THEN max(value) ELSE sum(value) END AS v "
        "FROM engine_metrics WHERE model = ? AND ts >= ? AND ts < ? AND metric IN (?, ?, ?, ?) "
        "GROUP BY replica, ts, metric",
        [*KV_CACHE, model, start, end, WAITING, RUNNING, *KV_CACHE]).fetchall()
