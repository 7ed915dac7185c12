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
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
import pandas as pd

from finops import sql, store
from finops.errors import InputError
from finops.filters import Filters

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


# ---------------------------------------------------------------- the engine's series, read for alerts and pages

#: prefix-cache counters (the later and the older names; with ``_total`` as prometheus_client exposes a counter,
#: and without, as a server that names its counter so may), and preemptions
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries")
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits")
OLD_PREFIX_QUERIES = ("vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries")
OLD_PREFIX_HITS = ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits")
PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
COUNTERS = (*PREFIX_QUERIES, *PREFIX_HITS, *OLD_PREFIX_QUERIES, *OLD_PREFIX_HITS, *PREEMPTIONS)
#: how far before a period its counters are read, for the first delta of the period (one scrape before it)
COUNTER_LOOKBACK = timedelta(hours=1)
SATURATION_COLUMNS = ["model", "replica", "window_start", "scrapes", "held", "peak", "hits", "max_running"]
OVER_TIME_COLUMNS = ["ts", "model", "replicas", "scrapes", "running", "waiting", "kv_cache_pct_mean",
                     "kv_cache_pct_max", "prefix_queries", "prefix_hits", "prefix_hit_rate", "preemptions"]


def _engine_filters(f: Filters | None) -> Filters:
    """The period and models of ``f``: a replica's engine is shared by every tenant and tier, so those
    filters do not apply to its series."""
    f = f or Filters()
    return Filters(since=f.since, until=f.until, models=f.models)


def _gauges_sql(where: str) -> str:
    """Per scrape (ts, replica, model): running and waiting requests summed over the replica's engines (data
    parallel), KV-cache usage of its fullest engine (either name)."""
    return f"""
SELECT ts, replica, model, sum(value) FILTER (WHERE metric = ?) AS running,
       sum(value) FILTER (WHERE metric = ?) AS waiting, max(value) FILTER (WHERE metric IN (?, ?)) AS kv_cache
FROM engine_metrics WHERE {where} AND model IS NOT NULL AND metric IN (?, ?, ?, ?)
GROUP BY ts, replica, model"""


def _gauge_params(params: list) -> list:
    return [RUNNING, WAITING, *KV_CACHE, *params, RUNNING, WAITING, *KV_CACHE]


def _held_sql(expr: str) -> str:
    """The level ``expr`` held in at least half of a window's scrapes: its ceil(n / 2)-th largest value."""
    return (f"list_sort(list({expr}) FILTER (WHERE {expr} IS NOT NULL), 'DESC')"
            f"[CAST(ceil(count({expr}) / 2) AS BIGINT)]")


def kv_cache_windows(con: duckdb.DuckDBPyConnection, f: Filters | None, window: str,
                     threshold: float) -> pd.DataFrame:
    """Per model x replica x ``window``: the scrapes with a KV-cache usage, ``held`` (the usage at least half of
    them reached: ``held >= threshold`` exactly when half or more of the window's scrapes were at or above
    ``threshold``), ``peak`` and ``hits`` (scrapes at or above ``threshold``). Columns :data:`SATURATION_COLUMNS`
    (``max_running`` empty). Usage is a fraction, 1 = full."""
    where, params = _engine_filters(f).where()
    try:
        out = con.execute(f"""
WITH s AS ({_gauges_sql(where)})
SELECT model, replica, {sql.time_bucket(window)} AS window_start, count(kv_cache) AS scrapes,
       {_held_sql('kv_cache')} AS held, max(kv_cache) AS peak, count(*) FILTER (WHERE kv_cache >= ?) AS hits,
       CAST(NULL AS DOUBLE) AS max_running
FROM s WHERE kv_cache IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""", _gauge_params(params) + [threshold]).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=SATURATION_COLUMNS)
    return out[SATURATION_COLUMNS]


def queue_saturation_windows(con: duckdb.DuckDBPyConnection, f: Filters | None, window: str,
                             threshold: float) -> pd.DataFrame:
    """Per model x replica x ``window``: the scrapes with both gauges, ``held`` (the requests waiting while the
    running batch was at its largest observed size, held in at least half of those scrapes; a scrape whose
    batch was smaller counts 0), ``peak`` of the same, ``hits`` (scrapes with the batch full and more than
    ``threshold`` waiting) and ``max_running`` (the largest running batch scraped from the replica for the model,
    in the whole store: its batch limit as observed). Columns :data:`SATURATION_COLUMNS`."""
    where, params = _engine_filters(f).where()
    all_where, all_params = Filters(models=_engine_filters(f).models).where()
    try:
        out = con.execute(f"""
WITH s AS ({_gauges_sql(where)}),
m AS (SELECT replica, model, max(running) AS max_running FROM ({_gauges_sql(all_where)}) GROUP BY 1, 2),
q AS (SELECT s.*, m.max_running,
             CASE WHEN m.max_running > 0 AND s.running >= m.max_running THEN s.waiting ELSE 0 END AS full_waiting
      FROM s JOIN m USING (replica, model) WHERE s.running IS NOT NULL AND s.waiting IS NOT NULL)
SELECT model, replica, {sql.time_bucket(window)} AS window_start, count(*) AS scrapes,
       {_held_sql('full_waiting')} AS held, max(full_waiting) AS peak,
       count(*) FILTER (WHERE full_waiting > ?) AS hits, max(max_running) AS max_running
FROM q GROUP BY 1, 2, 3 ORDER BY 1, 2, 3""", _gauge_params(params) + _gauge_params(all_params) + [threshold]).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=SATURATION_COLUMNS)
    return out[SATURATION_COLUMNS]


def scraped_models(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The models some scrape of ``engine_metrics`` names (its vLLM-served models)."""
    try:
        return [r[0] for r in con.execute("SELECT DISTINCT model FROM engine_metrics WHERE model IS NOT NULL "
                                          "ORDER BY 1").fetchall()]
    except duckdb.CatalogException:
        return []


def scrapes_per_window(con: duckdb.DuckDBPyConnection, f: Filters | None, window: str) -> pd.DataFrame:
    """Per model x ``window``: the scrapes of its gauges (every replica's). Columns: model, window_start, scrapes."""
    where, params = _engine_filters(f).where()
    try:
        return con.execute(f"""
WITH s AS ({_gauges_sql(where)})
SELECT model, {sql.time_bucket(window)} AS window_start, count(*) AS scrapes FROM s GROUP BY 1, 2 ORDER BY 1, 2""",
                           _gauge_params(params)).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=["model", "window_start", "scrapes"])


def counter_increases(con: duckdb.DuckDBPyConnection, f: Filters | None, grain: str) -> pd.DataFrame:
    """Per model x ``grain`` bucket: what the prefix-cache and preemption counters rose by, summed over replicas
    and engines. Columns: ts, model, prefix_queries, prefix_hits, preemptions.

    A counter's rise between two scrapes of one series (replica, model, metric, labels) is counted in the bucket
    of the later scrape; a fall is a restart of the server, after which the counter counts from 0, so the rise
    is the new value (Prometheus' ``increase``). The first scrape of a series gives no rise; the scrapes of
    :data:`COUNTER_LOOKBACK` before the period give its first one. Where a replica exports both the later and
    the older prefix-cache names, the later are used (the older count blocks, the later tokens)."""
    ef = _engine_filters(f)
    read_from = ef.since - COUNTER_LOOKBACK if ef.since is not None else None
    where, params = replace(ef, since=read_from).where()
    cols = ["ts", "model", "prefix_queries", "prefix_hits", "preemptions"]
    try:
        rows = con.execute(f"""
WITH c AS (
  SELECT ts, replica, model, metric, value,
         value - lag(value) OVER (PARTITION BY replica, model, metric, labels ORDER BY ts) AS rise
  FROM engine_metrics WHERE {where} AND model IS NOT NULL AND list_contains(?, metric))
SELECT {sql.time_bucket(grain, 'c.ts')} AS bucket, model, replica, metric,
       sum(CASE WHEN rise < 0 THEN value ELSE rise END) AS increase
FROM c WHERE rise IS NOT NULL {'AND c.ts >= ?' if ef.since is not None else ''}
GROUP BY 1, 2, 3, 4""", params + [list(COUNTERS)] + ([ef.since] if ef.since is not None else [])).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=cols)
    if rows.empty:
        return pd.DataFrame(columns=cols)
    rows = rows.rename(columns={"bucket": "ts"})
    later = set(rows.loc[rows["metric"].isin(PREFIX_QUERIES + PREFIX_HITS), "replica"].astype(str)
                + "\x1f" + rows.loc[rows["metric"].isin(PREFIX_QUERIES + PREFIX_HITS), "model"].astype(str))
    key = rows["replica"].astype(str) + "\x1f" + rows["model"].astype(str)
    old = rows["metric"].isin(OLD_PREFIX_QUERIES + OLD_PREFIX_HITS)
    rows = rows[~(old & key.isin(later))]
    kind = rows["metric"].map(lambda m: "prefix_queries" if m in PREFIX_QUERIES + OLD_PREFIX_QUERIES
                              else "prefix_hits" if m in PREFIX_HITS + OLD_PREFIX_HITS else "preemptions")
    out = (rows.assign(kind=kind).pivot_table(index=["ts", "model"], columns="kind", values="increase",
                                              aggfunc="sum").reset_index())
    for c in cols:
        if c not in out:
            out[c] = np.nan
    return out[cols].sort_values(["model", "ts"]).reset_index(drop=True)


def engine_over_time(con: duckdb.DuckDBPyConnection, f: Filters | None, grain: str = "hour") -> pd.DataFrame:
    """Per model x ``grain`` bucket (``ts``): what its vLLM engines said. Columns :data:`OVER_TIME_COLUMNS`:

    - ``running``, ``waiting``: the mean requests in the running batches and waiting, summed over the replicas
      (each replica's mean over its scrapes in the bucket);
    - ``kv_cache_pct_mean``, ``kv_cache_pct_max``: KV-cache usage in % (the mean over the replicas' scrapes,
      and the fullest scrape);
    - ``prefix_queries``, ``prefix_hits``, ``prefix_hit_rate`` (hits / queries, empty without queries) and
      ``preemptions``: the counters' rises in the bucket (:func:`counter_increases`).

    Empty where nothing was scraped for the period and models of ``f`` (its tenants and tiers do not apply)."""
    where, params = _engine_filters(f).where()
    try:
        g = con.execute(f"""
WITH s AS ({_gauges_sql(where)}),
r AS (SELECT {sql.time_bucket(grain)} AS ts, model, replica, count(*) AS scrapes, avg(running) AS running,
             avg(waiting) AS waiting, avg(kv_cache) AS kv_mean, max(kv_cache) AS kv_max
      FROM s GROUP BY 1, 2, 3)
SELECT ts, model, count(*) AS replicas, sum(scrapes) AS scrapes, sum(running) AS running, sum(waiting) AS waiting,
       100 * sum(kv_mean * scrapes) FILTER (WHERE kv_mean IS NOT NULL)
           / sum(scrapes) FILTER (WHERE kv_mean IS NOT NULL) AS kv_cache_pct_mean,
       100 * max(kv_max) AS kv_cache_pct_max
FROM r GROUP BY 1, 2 ORDER BY 2, 1""", _gauge_params(params)).df()
    except duckdb.CatalogException:
        return pd.DataFrame(columns=OVER_TIME_COLUMNS)
    if g.empty:
        return pd.DataFrame(columns=OVER_TIME_COLUMNS)
    c = counter_increases(con, f, grain)
    out = g.merge(c, on=["ts", "model"], how="left")
    q = out["prefix_queries"].astype(float)
    out["prefix_hit_rate"] = (out["prefix_hits"].astype(float) / q).where(q > 0)
    for col in ("replicas", "scrapes"):
        out[col] = out[col].astype("int64")
    return out[OVER_TIME_COLUMNS].sort_values(["model", "ts"]).reset_index(drop=True)


def models_by_scrapes(frame: pd.DataFrame) -> list[str]:
    """The models of ``frame`` (rows of :func:`engine_over_time`), the most scraped first (then by name)."""
    if frame is None or frame.empty:
        return []
    totals = frame.groupby("model")["scrapes"].sum().reset_index()
    return totals.sort_values(["scrapes", "model"], ascending=[False, True], kind="stable")["model"].tolist()
