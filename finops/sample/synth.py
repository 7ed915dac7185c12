"""The sample fleet: a deterministic, realistic request log of a two-week LLM fleet.

:func:`generate` returns canonical rows (:data:`finops.schema.NAMES`, in order) for a fleet
that follows the routing pipeline of section 2.1 of the routing text (seed 000)::

    semantic cache -> complexity classifier -> SLA tier -> fast / slow path -> cascade

* **Tenants** (:data:`TENANTS`) sit in three SLA tiers. ``premium`` is latency-first
  (``strategy = 'latency'``): simple prompts take the fast path (small model), complex
  ones the slow path (large model). ``standard`` is a cost-first cascade
  (``'cascade'``): every prompt goes to the small model and escalates to the large one
  when the small model's confidence is under :data:`TAU` (0.8). ``batch`` is cost-first
  (``'cost'``): the cheapest model that meets the quality floor.
* **Models** (:data:`SELF_HOSTED`, :data:`API_MODELS`): self-hosted ``llama-3.1-8b``
  (replicas r0-r2 in ``cloud-us-east``, r3 at the edge site ``edge-sh``) and
  ``llama-3.1-70b`` (r0-r2, ``cloud-us-east``); API ``gpt-4o-mini`` and ``gpt-4o``
  (``route = 'api'``, no queue).
* **Arrivals** are a non-homogeneous Poisson process: per tenant and minute a Poisson
  count whose mean follows a daily shape, a weekday/weekend level, a slow growth and
  :data:`BURSTS`; arrival times are uniform within the minute, to the millisecond.
* **Token lengths** come from lognormal mixtures fitted to the Azure LLM inference traces
  (:data:`TOKEN_MIXTURES`; the fit is recorded in ``tests/data/azure_fit.md``).
* **Queueing**: each self-hosted pool is simulated as a FIFO queue with
  ``c = replicas x slots_per_replica`` servers (:func:`fifo_servers`), so ``queue_ms`` rises
  as the load nears capacity. A request that waits longer than its tier's patience leaves
  the queue (``status = 'timeout'``, ``error_type = 'queue_timeout'``).
* **Incidents** (:data:`INCIDENTS`): a window where two of the three ``llama-3.1-70b`` replicas are
  down (the survivor saturates), a traffic surge of a premium tenant that fills the ``llama-3.1-70b``
  batches, and an injected decode long tail on ``llama-3.1-8b``.

Row conventions (those of :mod:`finops.schema`):

* One row per model call. A cascade that escalates writes the small model's attempt
  (``request_id = <id>#attempt``, ``escalated = true``, ``attrs.parent_id = <id>``) and the
  large model's answer (``request_id = <id>``, ``escalated = false``); the answer's ``ts``
  is when the gateway called the large model, i.e. the attempt's arrival plus its
  ``total_ms``. ``escalated`` is null outside the cascade strategy and on cache hits.
* A semantic-cache hit (``route = 'cache'``) names the model that would have served it
  (in a cascade, the large model where the small one's confidence is under TAU), has
  ``cost_usd = 0.0``, ``total_ms`` of 5-20 ms (routing plus the cache lookup) and no
  queue, prefill, decode or service time.
* Every other row has ``cost_usd`` null: the price book prices it.
* ``input_tokens`` includes ``cached_input_tokens`` (prefix-cache reuse).
* Model calls: ``total_ms = route_ms + queue_ms + service_ms`` (``queue_ms`` 0 where null),
  ``service_ms = prefill_ms + decode_ms``, ``ttft_ms = route_ms + queue_ms + prefill_ms``.
  ``route_ms`` is the gateway's decision (0.2-2 ms) plus, for an edge tenant's call to
  the cloud, the network hop.
* ``confidence`` is the small model's self-reported confidence (rows served by a small
  model); ``quality`` is a 0/1 shadow-evaluation grade on about 5 % of requests. For a
  sampled cascade request that did not escalate, the large model's shadow grade is kept
  in ``attrs.shadow_large_quality``, so a cascade curve can be swept over any threshold.

Speeds (a real H100 fleet). Both self-hosted models run vLLM on H100-80GB-SXM: ``llama-3.1-8b`` on one GPU
per replica, ``llama-3.1-70b`` on four (tensor parallel 4). The per-stream figures are Lambda's vLLM
benchmark (github.com/LambdaLabsML/vllm-benchmark, vLLM 0.6.0, ``num-scheduler-steps 10``, September 2024):

* light load, 10 ShareGPT prompts at once (``results/prompt_10/1xH100-80GB-SXM/Meta-Llama-3-8B-Instruct_tp1_len2048.json``
  and ``.../4xH100-80GB-SXM/Meta-Llama-3-70B-Instruct_tp4_len2048.json``): median TPOT 7.56 ms (8B, 132 tokens/s
  per stream) and 18.1 ms (70B, 55 tokens/s); median TTFT 62 ms and 141 ms for 1,369 prompt tokens in all
  (prefill at roughly 22k and 10k tokens/s: :attr:`SelfHosted.prefill_ms_per_token` 0.045 and 0.10 ms);
* full batch, 256 sequences (``benchmark_v0.md``, "vLLM v0.5.4 v.s. v0.6.0", step 10 rows): median TPOT
  25.57 ms (8B) and 61.10 ms (70B), 3.38 and 3.37 times the light-load TPOT: the
  :attr:`SelfHosted.decode_slowdown` of 2.38 and 2.37 at a full batch (:func:`batch_slowdown`).

Hosted APIs (``gpt-4o-mini``, ``gpt-4o``) keep a TTFT of 0.4 and 0.7 s at the median, about 1 and 2 s at
P99, and 80 and 55 tokens/s: the range of LLMPerf's hosted 70B runs (ray-project/llmperf-leaderboard,
``raw_data/individual/*_70b.json``: TTFT P50 0.2-0.6 s, P99 0.35-1.1 s).

Capacity. ``c = replicas x slots_per_replica`` FIFO servers per pool (8b: 3 slots per replica, 9 in the
cloud and 3 at the edge; 70b: 2, so 6), the price book's ``slots_per_replica`` too. About 36k requests a day
is little work for H100s at these speeds: the weekday peak offers the 70b about 1 erlang, the 8b cloud
pool under one. So the fleet keeps few slots (a vLLM engine would admit hundreds of sequences; here a slot
is a share of a replica's batch) and its GPUs idle most of the day (idle cost): the busiest hours outside
the incidents run the 70b at about 15 % of its slot time, the 8b at about 6 % (over-provisioned).
Fewer slots would queue at every peak and break the premium SLA daily; more, and the planted outage
would not saturate the surviving replica.

>>> frame = generate(days=1, requests_per_day=2_000)
>>> list(frame.columns) == list(schema.NAMES)
True
>>> bool(frame["request_id"].is_unique)
True
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import numpy as np
import pandas as pd

from finops import schema

__all__ = [
    "DEFAULT_START", "DEFAULT_DAYS", "DEFAULT_SEED", "DEFAULT_REQUESTS_PER_DAY", "TAU",
    "LognormalMixture", "TOKEN_MIXTURES", "TRACE_MEDIANS", "SelfHosted", "ApiModel",
    "SELF_HOSTED", "API_MODELS", "CLOUD", "EDGE", "Tenant", "TENANTS", "BURSTS", "INCIDENTS",
    "incident_windows", "FifoResult", "fifo_servers", "generate",
]

DEFAULT_START = datetime(2026, 11, 15)   # Sunday 00:00 UTC: 14 days end just before 2026-11-29
DEFAULT_DAYS = 14
DEFAULT_SEED = 7
DEFAULT_REQUESTS_PER_DAY = 36_000
TAU = 0.8                                 # cascade threshold: escalate when confidence < TAU
QUALITY_SAMPLE = 0.05                     # share of requests graded by shadow evaluation
MINUTE_MS = 60_000
BUCKET_MS = 300_000                       # the 5-minute buckets a pool's load is measured in
GROWTH_PER_DAY = 1.003                    # traffic grows 0.3 % a day (centred on the period's middle)
ROWS_PER_REQUEST = 1.09                   # escalations add a row: rows per gateway request, measured
CONF_KAPPA = 10.0                         # Beta concentration of the small model's confidence
DAY_MS = 86_400_000


# ---------------------------------------------------------------- token lengths

@dataclass(frozen=True)
class LognormalMixture:
    """Tokens ~ round(exp(N(mu_k, sigma_k))) with component k drawn with ``weights[k]``,
    clipped to ``[lo, hi]`` (the trace's observed range)."""

    weights: tuple[float, ...]
    mu: tuple[float, ...]
    sigma: tuple[float, ...]
    lo: int
    hi: int

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        w = np.asarray(self.weights, dtype=float)
        comp = rng.choice(w.size, size=n, p=w / w.sum())
        x = np.exp(rng.normal(np.asarray(self.mu)[comp], np.asarray(self.sigma)[comp]))
        return np.clip(np.rint(x), self.lo, self.hi).astype(np.int64)


# Fitted to the Azure LLM inference traces 2023 (Patel et al., "Splitwise", ISCA 2024;
# CC-BY-4.0) by EM on log tokens, K components per column: see tests/data/azure_fit.md
# for the method, the figures and the quantiles of trace vs fit.
TOKEN_MIXTURES: dict[tuple[str, str], LognormalMixture] = {
    ("conv", "input"): LognormalMixture(
        (0.0720, 0.0951, 0.2447, 0.3615, 0.1491, 0.0776),
        (5.2875, 5.3001, 5.9897, 6.9859, 7.4587, 8.3147),
        (1.5303, 0.0892, 0.0500, 0.0859, 0.4589, 0.0500), 2, 14_050),
    ("conv", "output"): LognormalMixture(
        (0.0197, 0.6479, 0.2769, 0.0555),
        (2.7295, 4.5616, 6.0039, 6.2573),
        (0.1850, 0.4680, 0.0500, 0.1923), 7, 1_000),
    ("code", "input"): LognormalMixture(
        (0.3192, 0.6026, 0.0235, 0.0548),
        (5.5397, 7.5318, 8.7059, 8.9029),
        (1.2776, 0.5921, 0.0515, 0.0500), 3, 7_437),
    ("code", "output"): LognormalMixture(
        (0.0716, 0.2233, 0.4243, 0.2808),
        (1.7942, 2.1363, 2.6433, 3.7790),
        (0.0500, 0.1699, 0.3420, 0.8680), 6, 1_899),
}
# The traces' own medians (ContextTokens, GeneratedTokens), for checking the fit.
TRACE_MEDIANS: dict[tuple[str, str], int] = {
    ("conv", "input"): 1_020, ("conv", "output"): 129,
    ("code", "input"): 1_469, ("code", "output"): 13,
}
CHARS_PER_TOKEN = {"conv": 4.0, "code": 3.5}


# ---------------------------------------------------------------- models

@dataclass(frozen=True)
class SelfHosted:
    """A self-hosted model: per-request service = prefill + decode, in ms.

    prefill_ms = prefill_base_ms + prefill_ms_per_token * uncached input tokens
    decode_ms  = output_tokens * 1000 / decode_tokens_per_s * batch_slowdown(load, decode_slowdown)

    ``decode_tokens_per_s`` is one stream's speed at light load; ``decode_slowdown`` the extra time per
    token at a full batch (full-batch TPOT / light-load TPOT - 1). Sources: the module's docstring.
    """

    name: str
    replicas: int
    slots_per_replica: int
    prefill_base_ms: float
    prefill_ms_per_token: float
    decode_tokens_per_s: float
    decode_slowdown: float            # a full batch's TPOT is (1 + this) x the light-load TPOT
    edge_replicas: tuple[int, ...] = ()
    edge_speedup: float = 1.0         # the edge build decodes this much faster than the cloud one (1: the same build)
    error_rate: float = 0.0035
    small: bool = True
    conf_mean: tuple[float, float] = (0.0, 0.0)   # confidence mean = a - b * complexity
    quality: tuple[float, float] = (0.0, 0.0)     # see _p_correct


@dataclass(frozen=True)
class ApiModel:
    """An API model: prefill_ms is the provider's time to first token (network, queue and
    prefill): lognormal around ttft_base_ms + ttft_ms_per_token * input; decode at a rate."""

    name: str
    site: str
    ttft_base_ms: float
    ttft_ms_per_token: float
    decode_tokens_per_s: float
    error_rate: float = 0.006
    small: bool = True
    conf_mean: tuple[float, float] = (0.0, 0.0)
    quality: tuple[float, float] = (0.0, 0.0)


CLOUD, EDGE = "cloud-us-east", "edge-sh"
SELF_HOSTED: dict[str, SelfHosted] = {
    m.name: m for m in (
        # 1x H100 per replica: r0-r2 in the cloud, r3 at the edge site
        SelfHosted("llama-3.1-8b", replicas=4, slots_per_replica=3, prefill_base_ms=25.0,
                   prefill_ms_per_token=0.045, decode_tokens_per_s=132.0, decode_slowdown=2.38,
                   edge_replicas=(3,), small=True, conf_mean=(1.0, 0.28), quality=(0.05, 0.90)),
        # 4x H100 per replica (tensor parallel 4)
        SelfHosted("llama-3.1-70b", replicas=3, slots_per_replica=2, prefill_base_ms=45.0,
                   prefill_ms_per_token=0.10, decode_tokens_per_s=55.0, decode_slowdown=2.37,
                   small=False, quality=(0.95, 0.12)),
    )
}
API_MODELS: dict[str, ApiModel] = {
    m.name: m for m in (
        ApiModel("gpt-4o-mini", "openai", ttft_base_ms=330.0, ttft_ms_per_token=0.05,
                 decode_tokens_per_s=80.0, small=True, conf_mean=(1.0, 0.22), quality=(0.10, 0.88)),
        ApiModel("gpt-4o", "openai", ttft_base_ms=480.0, ttft_ms_per_token=0.09,
                 decode_tokens_per_s=55.0, small=False, quality=(0.96, 0.10)),
    )
}
SELF_HOSTED_ERRORS = (("internal_server_error", 0.60), ("cuda_oom", 0.25), ("preempted", 0.15))
API_ERRORS = (("rate_limited", 0.55, "error"), ("server_error", 0.37, "error"),
              ("upstream_timeout", 0.08, "timeout"))
API_TIMEOUT_MS = 30_000.0


# ---------------------------------------------------------------- tenants

# Daily shapes over UTC hours: a floor plus circular Gaussian bumps (centre h, width h, height).
SHAPES: dict[str, tuple[float, tuple[tuple[float, float, float], ...]]] = {
    "us_business": (0.10, ((15.0, 1.7, 1.0), (19.5, 2.1, 0.95))),        # 10:00 and 14:30 ET
    "us_evening": (0.14, ((16.0, 2.5, 0.75), (21.5, 3.0, 1.0), (1.5, 1.5, 0.35))),
    "asia_consumer": (0.12, ((3.0, 2.0, 0.8), (12.5, 2.5, 1.0))),         # 11:00 and 20:30 CST
    "nightly": (0.05, ((4.0, 2.0, 1.0),)),                                # nightly jobs, 02-06 UTC
}


@dataclass(frozen=True)
class Tenant:
    name: str
    sla_tier: str
    strategy: str                 # latency | cascade | cost
    share: float                  # share of the requests of an average day
    code_share: float             # share of code (vs conversation) workload
    cache_rate: float             # semantic-cache hit rate
    shape: str                    # key of SHAPES
    weekend: float                # Saturday / Sunday level vs a weekday
    region: str
    clients: tuple[str, ...]
    small: str                    # model of the fast path / first cascade step
    large: str                    # model of the slow path / escalation
    edge: bool = False            # small-model calls go to the edge replicas
    complex_share: float = 0.5    # latency / cost: share sent to the large model


TENANTS: tuple[Tenant, ...] = (
    Tenant("acme-support", "premium", "latency", 0.24, 0.03, 0.21, "us_evening", 0.65, "us-east-1",
           ("web-widget", "mobile-app"), "llama-3.1-8b", "llama-3.1-70b", complex_share=0.75),
    Tenant("initech-code", "premium", "latency", 0.08, 0.97, 0.07, "us_business", 0.35, "us-east-2",
           ("vscode-plugin", "jetbrains-plugin"), "gpt-4o-mini", "gpt-4o", complex_share=0.45),
    Tenant("globex-search", "standard", "cascade", 0.24, 0.05, 0.19, "us_business", 0.45, "us-west-2",
           ("search-api",), "llama-3.1-8b", "llama-3.1-70b"),
    Tenant("hooli-chat", "standard", "cascade", 0.12, 0.02, 0.17, "asia_consumer", 1.05, "ap-east-1",
           ("ios", "android", "web"), "llama-3.1-8b", "llama-3.1-70b", edge=True),
    Tenant("soylent-docs", "standard", "cascade", 0.06, 0.10, 0.12, "us_business", 0.40, "us-central-1",
           ("docs-api", "web"), "gpt-4o-mini", "gpt-4o"),
    # cost-first: the cheapest model that meets the floor: the 8b, else gpt-4o-mini
    Tenant("umbrella-analytics", "batch", "cost", 0.12, 0.60, 0.08, "us_business", 0.35, "eu-west-1",
           ("airflow",), "llama-3.1-8b", "gpt-4o-mini", complex_share=0.45),
    Tenant("stark-batch", "batch", "cost", 0.14, 0.10, 0.11, "nightly", 1.0, "us-east-1",
           ("batch-runner",), "llama-3.1-8b", "llama-3.1-8b", complex_share=0.0),
)
PATIENCE_MS = {"premium": 20_000.0, "standard": 30_000.0, "batch": 120_000.0}
EDGE_TO_CLOUD_MS = (150.0, 230.0)         # network hop of an edge tenant's call to the cloud

# Short bursts: tenant, day offset from the start, time of day (UTC), minutes, rate factor.
# Each is absorbed by its pool (off its pool's peak, or on an API model): visible in the
# request rate, not an incident.
BURSTS: tuple[dict, ...] = (
    {"tenant": "globex-search", "day": 1, "at": "11:20", "minutes": 5, "factor": 4.0},
    {"tenant": "acme-support", "day": 3, "at": "03:10", "minutes": 4, "factor": 3.5},
    {"tenant": "hooli-chat", "day": 6, "at": "20:25", "minutes": 6, "factor": 3.0},
    {"tenant": "umbrella-analytics", "day": 8, "at": "08:00", "minutes": 5, "factor": 5.0},
    {"tenant": "initech-code", "day": 11, "at": "17:30", "minutes": 7, "factor": 4.0},
    {"tenant": "soylent-docs", "day": 12, "at": "19:05", "minutes": 3, "factor": 5.0},
)

# Incident specs relative to the start (day offset, UTC clock times); see incident_windows.
_INCIDENT_SPECS: tuple[dict, ...] = (
    {"kind": "saturation", "model": "llama-3.1-70b", "day": 8, "from": "13:00", "to": "15:00",
     "replicas_down": ("llama-3.1-70b-r1", "llama-3.1-70b-r2"),
     "what": "the node hosting llama-3.1-70b-r1 and -r2 is down as the weekday peak builds: a third of the "
             "capacity for the usual load, rho > 1, the queue climbs to tens of seconds and requests "
             "time out in it"},
    {"kind": "surge", "model": "llama-3.1-70b", "tenant": "acme-support", "day": 12, "from": "14:30", "to": "21:00",
     "factor": 2.4,
     "what": "acme-support's traffic runs at 2.4 times its usual rate from 14:30 to 21:00 (a launch): three quarters of "
             "it takes the slow path, the llama-3.1-70b batches fill, every stream decodes slower and the premium "
             "tier's time to first token breaks its SLA while the surge lasts; nothing is down"},
    {"kind": "decode_tail", "model": "llama-3.1-8b", "day": 4, "from": "13:00", "to": "14:30",
     "fraction": 0.25, "extra_decode_ms": 2000.0,
     "what": "a quarter of llama-3.1-8b requests get about +2000 ms of decode (the seed's slow_inject)"},
)


def _midnight(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def _clock(day_start: datetime, hhmm: str) -> datetime:
    h, m = hhmm.split(":")
    return day_start + timedelta(hours=int(h), minutes=int(m))


def incident_windows(start: datetime = DEFAULT_START, days: int = DEFAULT_DAYS) -> list[dict]:
    """The incidents of a run starting at ``start`` lasting ``days``: dicts with ``kind``,
    ``model``, ``start``, ``end`` (naive UTC datetimes) and the incident's parameters.
    Days count from the midnight of ``start``; incidents outside the run are left out."""
    out = []
    for spec in _INCIDENT_SPECS:
        day_start = _midnight(start) + timedelta(days=spec["day"])
        if _clock(day_start, spec["from"]) < start or _clock(day_start, spec["to"]) > start + timedelta(days=days):
            continue
        item = {k: v for k, v in spec.items() if k not in ("day", "from", "to")}
        item["start"], item["end"] = _clock(day_start, spec["from"]), _clock(day_start, spec["to"])
        out.append(item)
    return out


INCIDENTS: list[dict] = incident_windows(DEFAULT_START, DEFAULT_DAYS)


# ---------------------------------------------------------------- queueing

class FifoResult(NamedTuple):
    queue_ms: np.ndarray      # wait before service (the patience where the request left)
    server: np.ndarray        # index of the server that served it, -1 if it left
    served: np.ndarray        # False where the request left the queue at its patience


def fifo_servers(arrival_ms: np.ndarray, service_ms: np.ndarray, servers: int,
                 patience_ms: np.ndarray | None = None,
                 outages: Sequence[tuple[Sequence[int], float, float]] = ()) -> FifoResult:
    """First-come-first-served queue with ``servers`` identical servers.

    Requests (sorted by arrival) take the server that frees first::

        start_n = max(a_n, min_s free_s),  wait_n = start_n - a_n,  free_s <- start_n + S_n

    A request whose wait would exceed its patience leaves at the patience and frees nothing.
    An outage ``(server ids, from_ms, to_ms)`` starts nothing on those servers from ``from_ms``
    to ``to_ms`` (a service begun before goes on): a start that would fall in it moves the
    server's free time to ``to_ms`` and the request takes the next server.

    >>> r = fifo_servers(np.array([0., 0., 0.]), np.array([10., 10., 10.]), 2)
    >>> r.queue_ms.tolist(), r.server.tolist()
    ([0.0, 0.0, 10.0], [0, 1, 0])
    """
    n = len(arrival_ms)
    arr = np.asarray(arrival_ms, dtype=float).tolist()
    svc = np.asarray(service_ms, dtype=float).tolist()
    pat = (np.full(n, np.inf) if patience_ms is None else np.asarray(patience_ms, dtype=float)).tolist()
    heap = [(0.0, s) for s in range(servers)]
    down = [(set(ids), float(lo), float(hi)) for ids, lo, hi in outages]
    w_out, s_out = [0.0] * n, [-1] * n
    replace = heapq.heapreplace
    for i in range(n):
        a = arr[i]
        f, s = heap[0]
        while down:
            start = f if f > a else a
            hi = next((h for ids, lo, h in down if s in ids and lo <= start < h), None)
            if hi is None:
                break
            replace(heap, (hi, s))
            f, s = heap[0]
        w = f - a if f > a else 0.0
        if w > pat[i]:
            w_out[i] = pat[i]
            continue
        replace(heap, (a + w + svc[i], s))
        w_out[i] = w
        s_out[i] = s
    server = np.array(s_out, dtype=np.int64)
    return FifoResult(np.array(w_out, dtype=float), server, server >= 0)


# ---------------------------------------------------------------- helpers

def _rng(seed: int, stream: int) -> np.random.Generator:
    """An independent generator per stage, so changing one stage leaves the others' draws."""
    return np.random.default_rng([seed, stream])


def _shape(name: str, hour: np.ndarray) -> np.ndarray:
    floor, bumps = SHAPES[name]
    y = np.full(hour.shape, floor, dtype=float)
    for centre, width, height in bumps:
        d = (hour - centre + 12.0) % 24.0 - 12.0
        y += height * np.exp(-0.5 * (d / width) ** 2)
    return y


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _model_spec(name: str):
    return SELF_HOSTED.get(name) or API_MODELS[name]


def _p_correct(spec, conf: np.ndarray, complexity: np.ndarray) -> np.ndarray:
    """P(answer graded correct): a small model a + b * conf**2 (worse when unsure);
    a large model a - b * complexity."""
    a, b = spec.quality
    if spec.small:
        return np.clip(a + b * conf ** 2, 0.0, 1.0)
    return np.clip(a - b * complexity, 0.0, 1.0)


# ---------------------------------------------------------------- arrivals

def _arrivals(rng: np.random.Generator, start: datetime, days: int, requests_per_day: float,
              incidents: Sequence[dict] = ()) -> tuple[np.ndarray, np.ndarray]:
    """(ts_ms since start, tenant index), sorted by time; a ``surge`` incident multiplies its tenant's rate."""
    minutes = np.arange(days * 1440)
    day = minutes // 1440
    clock = start.hour * 60 + start.minute + minutes                  # minutes since start's midnight
    hour = (clock % 1440) / 60.0 + 1 / 120
    weekday = (start.weekday() + clock // 1440) % 7
    week_clock = np.arange(7 * 1440)
    week_hour = (week_clock % 1440) / 60.0 + 1 / 120
    week_wd = week_clock // 1440                                       # a whole week, Monday first
    growth = GROWTH_PER_DAY ** (day - (days - 1) / 2.0)
    ts_parts, tenant_parts = [], []
    for k, t in enumerate(TENANTS):
        level = np.where(weekday >= 5, t.weekend, 1.0)
        rate = _shape(t.shape, hour) * level
        ref = _shape(t.shape, week_hour) * np.where(week_wd >= 5, t.weekend, 1.0)
        rate = rate / ref.mean() * (requests_per_day / ROWS_PER_REQUEST * t.share / 1440.0)
        daily_noise = np.exp(rng.normal(0.0, 0.06, days))
        rate = rate * growth * daily_noise[day]
        for b in BURSTS:
            if b["tenant"] == t.name and b["day"] < days:
                m0 = int((_clock(_midnight(start) + timedelta(days=b["day"]), b["at"]) - start).total_seconds() // 60)
                if m0 < 0:
                    continue
                rate[m0:m0 + b["minutes"]] *= b["factor"]
        for inc in incidents:
            if inc["kind"] == "surge" and inc["tenant"] == t.name:
                m0, m1 = (max(int((inc[k] - start).total_seconds() // 60), 0) for k in ("start", "end"))
                rate[m0:m1] *= inc["factor"]
        counts = rng.poisson(rate)
        total = int(counts.sum())
        base = np.repeat(minutes * MINUTE_MS, counts)
        ts_parts.append(base + rng.integers(0, MINUTE_MS, total))
        tenant_parts.append(np.full(total, k, dtype=np.int64))
    ts = np.concatenate(ts_parts)
    tenant = np.concatenate(tenant_parts)
    order = np.lexsort((tenant, ts))
    return ts[order], tenant[order]


# ---------------------------------------------------------------- service times

def batch_slowdown(load: np.ndarray, slowdown: float) -> np.ndarray:
    """How much slower each stream decodes at a pool's ``load`` (offered light-load work over the servers up).

    The batch a replica runs grows with its load, and with it every stream's time per output token: from the
    light-load TPOT (factor 1) to the full-batch TPOT (factor ``1 + slowdown``). The slower streams stay in the
    batch longer, which adds load in turn: the factor solves ``f = 1 + slowdown * load * f``, so
    ``f = 1 / (1 - slowdown * load)``, held at ``1 + slowdown`` from ``load = 1 / (1 + slowdown)`` up (the
    batch is full; more load waits in the queue)::

    >>> batch_slowdown(np.array([0.0, 0.1, 0.5]), 2.4).round(3).tolist()
    [1.0, 1.316, 3.4]
    """
    load = np.asarray(load, dtype=float)
    full = 1.0 + slowdown
    return np.where(load < 1.0 / full, 1.0 / np.maximum(1.0 - slowdown * load, 1.0 / full), full)


def _self_hosted_service(rng, spec: SelfHosted, arrival_ms, input_tokens, cached_tokens, output_tokens,
                         servers: int, speedup: float = 1.0,
                         down: Sequence[tuple[int, float, float]] = ()) -> tuple[np.ndarray, np.ndarray]:
    """(prefill_ms, decode_ms) for calls to one pool. Decode runs at the light-load rate slowed by
    :func:`batch_slowdown` of the pool's load: light-load work per 5-minute bucket over the servers up in it
    (``down``: (servers, from_ms, to_ms) out of service)."""
    n = len(arrival_ms)
    uncached = np.maximum(input_tokens - cached_tokens, 0)
    prefill = (spec.prefill_base_ms + spec.prefill_ms_per_token * uncached) * np.exp(rng.normal(0, 0.08, n))
    decode0 = output_tokens * 1000.0 / (spec.decode_tokens_per_s * speedup) * np.exp(rng.normal(0, 0.03, n))
    if not n:
        return prefill, decode0
    bucket = (arrival_ms // BUCKET_MS).astype(np.int64)
    work = np.bincount(bucket, weights=prefill + decode0)
    up = np.full(len(work), float(servers))
    starts = np.arange(len(work)) * BUCKET_MS
    for k, lo, hi in down:
        overlap = np.clip(np.minimum(starts + BUCKET_MS, hi) - np.maximum(starts, lo), 0, BUCKET_MS) / BUCKET_MS
        up -= k * overlap
    load = work / (np.maximum(up, 1.0) * BUCKET_MS)
    return prefill, decode0 * batch_slowdown(load, spec.decode_slowdown)[bucket]


def _api_service(rng, spec: ApiModel, input_tokens, output_tokens) -> tuple[np.ndarray, np.ndarray]:
    n = len(input_tokens)
    prefill = (spec.ttft_base_ms + spec.ttft_ms_per_token * input_tokens) * np.exp(rng.normal(0, 0.35, n))
    decode = output_tokens * 1000.0 / spec.decode_tokens_per_s * np.exp(rng.normal(0, 0.15, n))
    return prefill, decode


# ---------------------------------------------------------------- the generator

class _Calls:
    """Column arrays of one set of model calls (first calls or escalations)."""

    def __init__(self, idx: np.ndarray, model: np.ndarray, ts_ms: np.ndarray, patience_ms: np.ndarray):
        n = len(idx)
        self.idx, self.model, self.ts_ms, self.patience = idx, model, ts_ms, patience_ms
        self.site = np.full(n, CLOUD, dtype=object)
        self.replica = np.full(n, None, dtype=object)
        self.route = np.full(n, None, dtype=object)
        self.route_ms = np.zeros(n)
        self.queue_ms = np.full(n, np.nan)
        self.prefill_ms = np.full(n, np.nan)
        self.decode_ms = np.full(n, np.nan)
        self.status = np.full(n, "ok", dtype=object)
        self.error_type = np.full(n, None, dtype=object)
        self.output_tokens = np.zeros(n, dtype=np.int64)
        self.cached_tokens = np.zeros(n, dtype=np.int64)

    @property
    def service_ms(self) -> np.ndarray:
        return self.prefill_ms + self.decode_ms

    @property
    def total_ms(self) -> np.ndarray:
        return self.route_ms + np.nan_to_num(self.queue_ms) + np.nan_to_num(self.service_ms)


def _route_ms(rng, n: int) -> np.ndarray:
    return np.clip(np.exp(rng.normal(math.log(0.6), 0.5, n)), 0.2, 2.0)


def _prefix_cache(rng, model: np.ndarray, code: np.ndarray, input_tokens: np.ndarray) -> np.ndarray:
    """Prompt tokens read from a prefix cache: multi-turn conversations and shared code context.
    vLLM caches 16-token blocks; OpenAI 128-token steps from 1,024 tokens up."""
    n = len(model)
    p = np.where(code, 0.35, 0.55)
    reuse = rng.random(n) < p
    frac = rng.uniform(0.3, 0.95, n)
    api = np.isin(model, list(API_MODELS))
    block = np.where(api, 128, 16)
    cached = (np.floor(input_tokens * frac / block) * block).astype(np.int64)
    cached = np.where(api & (cached < 1024), 0, cached)
    return np.where(reuse, np.minimum(cached, input_tokens), 0).astype(np.int64)


def _apply_service(rng, calls: _Calls, sel: np.ndarray, rq: _Requests, incidents: list[dict],
                   start_ms0: np.datetime64) -> None:
    """Fill service times, errors, pools and queueing for the calls selected by ``sel``
    (all to one model), simulating the self-hosted pools."""
    name = calls.model[sel][0] if sel.any() else None
    if name is None:
        return
    ids = np.flatnonzero(sel)
    inp = rq.input_tokens[calls.idx[ids]]
    out = rq.output_tokens[calls.idx[ids]].copy()
    n = len(ids)
    if name in API_MODELS:
        spec = API_MODELS[name]
        pre, dec = _api_service(rng, spec, inp, out)
        err = rng.random(n) < spec.error_rate
        kind = rng.choice(len(API_ERRORS), size=n, p=[e[1] for e in API_ERRORS])
        etype = np.array([e[0] for e in API_ERRORS], dtype=object)[kind]
        estatus = np.array([e[2] for e in API_ERRORS], dtype=object)[kind]
        timeout = err & (estatus == "timeout")
        pre = np.where(err, np.where(timeout, API_TIMEOUT_MS, np.minimum(pre, 400.0)), pre)
        dec = np.where(err, 0.0, dec)
        out = np.where(err, 0, out)
        calls.prefill_ms[ids], calls.decode_ms[ids] = pre, dec
        calls.site[ids], calls.route[ids] = spec.site, "api"
        calls.status[ids] = np.where(err, estatus, "ok")
        calls.error_type[ids] = np.where(err, etype, None)
        calls.output_tokens[ids] = out
        return
    spec = SELF_HOSTED[name]
    err = rng.random(n) < spec.error_rate
    kind = rng.choice(len(SELF_HOSTED_ERRORS), size=n, p=[e[1] for e in SELF_HOSTED_ERRORS])
    etype = np.array([e[0] for e in SELF_HOSTED_ERRORS], dtype=object)[kind]
    edge_call = calls.site[ids] == EDGE
    cloud_replicas = [r for r in range(spec.replicas) if r not in spec.edge_replicas]
    for site, replicas, mask in ((CLOUD, cloud_replicas, ~edge_call), (EDGE, list(spec.edge_replicas), edge_call)):
        if not mask.any():
            continue
        if not replicas:
            raise ValueError(f"{name} has no replicas at {site}")
        pid = ids[mask]
        servers = len(replicas) * spec.slots_per_replica
        arr = calls.ts_ms[pid] + calls.route_ms[pid]          # the call reaches the pool after routing
        outages = []
        for inc in incidents:
            for down in inc.get("replicas_down", ()) if inc["model"] == name else ():
                r = int(down.rsplit("-r", 1)[1])
                if r in replicas:
                    j = replicas.index(r)
                    lo = float((np.datetime64(inc["start"], "ms") - start_ms0).astype(np.int64))
                    hi = float((np.datetime64(inc["end"], "ms") - start_ms0).astype(np.int64))
                    outages.append((range(j * spec.slots_per_replica, (j + 1) * spec.slots_per_replica), lo, hi))
        pre, dec = _self_hosted_service(rng, spec, arr, inp[mask], calls.cached_tokens[pid], out[mask], servers,
                                        spec.edge_speedup if site == EDGE else 1.0,
                                        [(len(ids_), lo, hi) for ids_, lo, hi in outages])
        for inc in incidents:
            if inc["kind"] == "decode_tail" and inc["model"] == name:
                lo = (np.datetime64(inc["start"], "ms") - start_ms0).astype(np.int64)
                hi = (np.datetime64(inc["end"], "ms") - start_ms0).astype(np.int64)
                hit = (arr >= lo) & (arr < hi) & (rng.random(len(arr)) < inc["fraction"])
                dec = dec + np.where(hit, inc["extra_decode_ms"] * np.exp(rng.normal(0, 0.1, len(arr))), 0.0)
        e = err[mask]
        dec = np.where(e, 0.0, dec)            # a failed call fails at the start of decode
        order = np.argsort(arr, kind="stable")
        tier = calls.patience[pid]
        res = fifo_servers(arr[order], (pre + dec)[order], servers, tier[order], outages)
        q = np.empty(len(pid))
        q[order] = res.queue_ms
        srv = np.empty(len(pid), dtype=np.int64)
        srv[order] = res.server
        ok = srv >= 0
        rep_names = np.array([f"{name}-r{r}" for r in replicas], dtype=object)
        calls.queue_ms[pid] = q
        calls.prefill_ms[pid] = np.where(ok, pre, np.nan)
        calls.decode_ms[pid] = np.where(ok, dec, np.nan)
        calls.replica[pid] = np.where(ok, rep_names[np.maximum(srv, 0) // spec.slots_per_replica], None)
        calls.site[pid] = site
        calls.status[pid] = np.where(~ok, "timeout", np.where(e, "error", "ok"))
        calls.error_type[pid] = np.where(~ok, "queue_timeout", np.where(e, etype[mask], None))
        calls.output_tokens[pid] = np.where(ok & ~e, out[mask], 0)
        calls.route[pid] = "edge" if site == EDGE else ("fast" if spec.small else "slow")


def generate(days: int = DEFAULT_DAYS, seed: int = DEFAULT_SEED,
             requests_per_day: int = DEFAULT_REQUESTS_PER_DAY, start: datetime | None = None) -> pd.DataFrame:
    """A deterministic sample-fleet log: canonical rows sorted by ``ts`` (then request).

    ``requests_per_day`` is the mean number of rows per day over a week (weekends are
    quieter, so a weekday has more); a cascade escalation writes two rows, so gateway
    requests are about ``1 / ROWS_PER_REQUEST`` of the rows. The same arguments give
    identical frames. ``start`` (naive UTC, default :data:`DEFAULT_START`) is truncated to
    the minute; :func:`incident_windows` gives the incidents of the run.
    """
    if days < 1:
        raise ValueError("days must be at least 1")
    start = start or DEFAULT_START
    if start.tzinfo is not None:
        start = start.astimezone(UTC).replace(tzinfo=None)
    start = start.replace(second=0, microsecond=0)
    start_ms0 = np.datetime64(start, "ms")
    incidents = incident_windows(start, days)
    rq = _requests(seed, start, days, requests_per_day, incidents)
    first, esc, escalate = _calls(seed, rq, incidents, start_ms0)
    cache_idx = np.flatnonzero(rq.cache)
    parts = [_cache_rows(_rng(seed, 5), rq, cache_idx), _call_rows(rq, first, escalate, "first"),
             _call_rows(rq, esc, np.zeros(len(esc.idx), dtype=bool), "escalation")]
    return _assemble(parts, start_ms0)


class _Requests(NamedTuple):
    """Per gateway request (index i): who sent it, what it asks, where it is routed."""

    ts: np.ndarray            # ms since the start, sorted
    tk: np.ndarray            # tenant index into TENANTS
    code: np.ndarray          # code workload (else conversation)
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    prompt_chars: np.ndarray
    complexity: np.ndarray    # classifier score in (0, 1)
    cache: np.ndarray         # semantic-cache hit
    go_large: np.ndarray      # latency / cost strategy sent it to the large model
    first_model: np.ndarray   # model of the first call
    served_by: np.ndarray     # model whose answer the user would get (named by a cache hit)
    conf: np.ndarray          # small model's confidence (nan where the large model answers first)
    q_small: np.ndarray       # shadow grades (nan outside the sample)
    q_large: np.ndarray
    rid: np.ndarray           # request ids
    attrs_code: np.ndarray    # index into the attrs-head table

    def tenant_col(self, field: str, dtype=object) -> np.ndarray:
        return np.array([getattr(t, field) for t in TENANTS], dtype=dtype)[self.tk]


def _requests(seed: int, start: datetime, days: int, requests_per_day: float,
              incidents: Sequence[dict] = ()) -> _Requests:
    ts, tk = _arrivals(_rng(seed, 1), start, days, requests_per_day, incidents)
    n = len(ts)
    rng = _rng(seed, 2)
    tenants = TENANTS
    by_tenant = lambda field, dtype=float: np.array([getattr(t, field) for t in tenants], dtype=dtype)[tk]  # noqa: E731
    is_cascade = by_tenant("strategy", object) == "cascade"

    # workload and token lengths (fitted to the Azure traces)
    code = rng.random(n) < by_tenant("code_share")
    input_tokens = np.zeros(n, dtype=np.int64)
    output_tokens = np.zeros(n, dtype=np.int64)
    for w, m in (("conv", ~code), ("code", code)):
        input_tokens[m] = TOKEN_MIXTURES[(w, "input")].sample(rng, int(m.sum()))
        output_tokens[m] = TOKEN_MIXTURES[(w, "output")].sample(rng, int(m.sum()))
    cpt = np.where(code, CHARS_PER_TOKEN["code"], CHARS_PER_TOKEN["conv"])
    prompt_chars = np.maximum(np.rint(input_tokens * cpt * np.exp(rng.normal(0, 0.08, n))), 1).astype(np.int64)

    # complexity classifier: longer prompts and code are more often complex
    z = (np.log(input_tokens) - 6.6) / 1.1
    complexity = _sigmoid(z + 0.4 * code + rng.normal(0, 1.0, n))

    # semantic cache: short prompts repeat more often; each tenant keeps its rate on average
    boost = np.where(input_tokens < 400, 1.5, 0.85)
    counts = np.maximum(np.bincount(tk, minlength=len(tenants)), 1)
    norm = np.bincount(tk, weights=boost, minlength=len(tenants)) / counts
    cache = rng.random(n) < by_tenant("cache_rate") * boost / norm[tk]

    # SLA tier -> fast (small) or slow (large) path: the top complex_share of a tenant's
    # complexity scores goes large; a cascade always starts small
    rank = np.empty(n)
    for k in range(len(tenants)):
        m = np.flatnonzero(tk == k)
        rank[m[np.argsort(complexity[m], kind="stable")]] = (np.arange(m.size) + 0.5) / max(m.size, 1)
    go_large = ~is_cascade & (rank >= 1.0 - by_tenant("complex_share"))
    small, large = by_tenant("small", object), by_tenant("large", object)
    first_model = np.where(go_large, large, small)

    # the small model's confidence: Beta around a mean that falls with complexity
    conf = np.full(n, np.nan)
    for name in sorted(set(small.tolist())):
        spec = _model_spec(name)
        m = (small == name) & ~go_large
        a, b = spec.conf_mean
        mean = np.clip(a - b * complexity[m], 0.05, 0.995)
        conf[m] = np.round(rng.beta(mean * CONF_KAPPA, (1 - mean) * CONF_KAPPA), 3)   # as logged
    # a cache hit names the model that would have answered: in a cascade, the large one
    # where the small model's confidence was under TAU
    served_by = np.where(is_cascade & (conf < TAU), large, first_model)

    # shadow evaluation on a sample: 0/1 grades of the small and of the large model's answer
    graded = (rng.random(n) < QUALITY_SAMPLE) & ~cache
    u_small, u_large = rng.random(n), rng.random(n)
    q_small, q_large = np.full(n, np.nan), np.full(n, np.nan)
    for models, target, u in ((small, q_small, u_small), (large, q_large, u_large)):
        for name in sorted(set(models.tolist())):
            spec = _model_spec(name)
            m = (models == name) & graded
            c = conf[m]
            if spec.small:   # a small model in the large role (stark-batch) has no own draw where it went large
                c = np.where(np.isnan(c), spec.conf_mean[0] - spec.conf_mean[1] * complexity[m], c)
            target[m] = (u[m] < _p_correct(spec, c, complexity[m])).astype(float)

    # request ids r<day>-<n>, n counting arrivals within the day
    day = ts // DAY_MS
    seq = np.arange(n) - np.searchsorted(day, day, side="left")
    rid = _request_ids(day, seq, digits=max(2, len(str(days - 1))))

    # attrs: region and client of the tenant, workload
    n_clients = np.array([len(t.clients) for t in tenants])[tk]
    client = np.minimum((_rng(seed, 4).random(n) * n_clients).astype(np.int64), n_clients - 1)
    attrs_code = (tk * ATTRS_MAX_CLIENTS + client) * 2 + code
    return _Requests(ts, tk, code, input_tokens, output_tokens, prompt_chars, complexity, cache, go_large,
                     first_model, served_by, conf, q_small, q_large, rid, attrs_code)


def _request_ids(day: np.ndarray, seq: np.ndarray, digits: int = 2) -> np.ndarray:
    """``r<day>-<seq>`` with ``digits`` day digits and 7 sequence digits, built as bytes."""
    n = len(day)
    width = 2 + digits + 7
    buf = np.empty((n, width), dtype=np.uint8)
    buf[:, 0] = ord("r")
    for k in range(digits):
        buf[:, 1 + k] = 48 + (day // 10 ** (digits - 1 - k)) % 10
    buf[:, 1 + digits] = ord("-")
    for k in range(7):
        buf[:, 2 + digits + k] = 48 + (seq // 10 ** (6 - k)) % 10
    return buf.view(f"S{width}").ravel().astype(str).astype(object)


ATTRS_MAX_CLIENTS = max(len(t.clients) for t in TENANTS)


def _attrs_table() -> np.ndarray:
    """attrs-head strings (JSON without its closing brace) by (tenant, client, code) code.
    Values come from fixed tables, so they need no escaping."""
    out = np.full(len(TENANTS) * ATTRS_MAX_CLIENTS * 2, None, dtype=object)
    for k, t in enumerate(TENANTS):
        for j, client in enumerate(t.clients):
            for code, w in enumerate(("conv", "code")):
                out[(k * ATTRS_MAX_CLIENTS + j) * 2 + code] = (
                    f'{{"region": "{t.region}", "client": "{client}", "workload": "{w}"')
    return out


_ATTRS_HEAD = _attrs_table()
_ATTRS_CLOSED = np.array([None if h is None else h + "}" for h in _ATTRS_HEAD], dtype=object)


def _calls(seed: int, rq: _Requests, incidents: list[dict], start_ms0: np.datetime64):
    """First calls of every non-cache request and the cascade's escalations, with service
    times, errors and the queueing of each self-hosted pool."""
    rng = _rng(seed, 3)
    patience = np.array([PATIENCE_MS[t.sla_tier] for t in TENANTS])[rq.tk]
    edge_tenant = rq.tenant_col("edge", bool)
    is_cascade = rq.tenant_col("strategy") == "cascade"

    fi = np.flatnonzero(~rq.cache)
    first = _Calls(fi, rq.first_model[fi], rq.ts[fi].copy(), patience[fi])
    first.route_ms = _route_ms(rng, len(fi))
    first.site[:] = np.where(edge_tenant[fi] & ~rq.go_large[fi], EDGE, CLOUD)
    first.cached_tokens = _prefix_cache(rng, first.model, rq.code[fi], rq.input_tokens[fi])
    models = list(SELF_HOSTED) + list(API_MODELS)
    later = [m for m, spec in SELF_HOSTED.items() if not spec.small]   # pools that also serve escalations
    for name in models:
        if name not in later:
            _apply_service(rng, first, first.model == name, rq, incidents, start_ms0)

    # escalate: confidence under TAU, or the small model failed (fallback); not after a queue timeout
    escalate = is_cascade[fi] & ((rq.conf[fi] < TAU) | (first.status == "error")) & (first.status != "timeout")
    ei = fi[escalate]
    large = rq.tenant_col("large")
    esc_ts = first.ts_ms[escalate] + np.ceil(first.total_ms[escalate]).astype(np.int64) + rng.integers(0, 2, ei.size)
    esc = _Calls(ei, large[ei], esc_ts, patience[ei])
    hop = np.where(edge_tenant[ei], rng.uniform(*EDGE_TO_CLOUD_MS, ei.size), 0.0)
    esc.route_ms = _route_ms(rng, ei.size) + hop
    esc.cached_tokens = _prefix_cache(rng, esc.model, rq.code[ei], rq.input_tokens[ei])
    for name in models:
        if name not in later:
            _apply_service(rng, esc, esc.model == name, rq, incidents, start_ms0)

    # the large pools serve first calls and escalations together, in arrival order
    for name in later:
        both = _Calls(np.concatenate([first.idx, esc.idx]), np.concatenate([first.model, esc.model]),
                      np.concatenate([first.ts_ms, esc.ts_ms]), np.concatenate([first.patience, esc.patience]))
        both.route_ms = np.concatenate([first.route_ms, esc.route_ms])
        both.cached_tokens = np.concatenate([first.cached_tokens, esc.cached_tokens])
        sel = both.model == name
        _apply_service(rng, both, sel, rq, incidents, start_ms0)
        nf = len(first.idx)
        for part, lo, hi in ((first, 0, nf), (esc, nf, len(both.idx))):
            s = sel[lo:hi]
            for col in ("site", "replica", "route", "queue_ms", "prefill_ms", "decode_ms", "status",
                        "error_type", "output_tokens"):
                getattr(part, col)[s] = getattr(both, col)[lo:hi][s]
    return first, esc, escalate


def _cache_rows(rng, rq: _Requests, idx: np.ndarray) -> dict:
    n = len(idx)
    route_ms = np.round(_route_ms(rng, n), 3)
    lookup = np.round(np.clip(np.exp(rng.normal(math.log(8.0), 0.35, n)), 5.0, 18.0), 3)
    total = route_ms + lookup
    nan = np.full(n, np.nan)
    edge = rq.tenant_col("edge", bool)[idx]
    return {
        "request_id": rq.rid[idx], "ts_ms": rq.ts[idx], "order": idx, "kind": np.zeros(n, dtype=np.int64),
        "tenant": rq.tenant_col("name")[idx], "sla_tier": rq.tenant_col("sla_tier")[idx],
        "model": rq.served_by[idx], "route": np.full(n, "cache", dtype=object),
        "strategy": rq.tenant_col("strategy")[idx], "cache_hit": np.ones(n, dtype=bool),
        "escalated": np.full(n, None, dtype=object),
        "site": np.where(edge, EDGE, CLOUD).astype(object), "replica": np.full(n, None, dtype=object),
        "input_tokens": rq.input_tokens[idx], "output_tokens": rq.output_tokens[idx],
        "cached_input_tokens": np.zeros(n, dtype=np.int64), "prompt_chars": rq.prompt_chars[idx],
        "route_ms": route_ms, "queue_ms": nan, "prefill_ms": nan, "decode_ms": nan, "service_ms": nan,
        "ttft_ms": total, "total_ms": total, "status": np.full(n, "ok", dtype=object),
        "error_type": np.full(n, None, dtype=object), "cost_usd": np.zeros(n), "confidence": nan,
        "quality": nan, "attrs": _ATTRS_CLOSED[rq.attrs_code[idx]],
    }


def _call_rows(rq: _Requests, calls: _Calls, escalated_mask: np.ndarray, kind: str) -> dict:
    idx = calls.idx
    n = len(idx)
    cascade = rq.tenant_col("strategy")[idx] == "cascade"
    answered = calls.status == "ok"
    attrs = _ATTRS_CLOSED[rq.attrs_code[idx]]
    if kind == "first":
        request_id = rq.rid[idx].copy()
        request_id[escalated_mask] = request_id[escalated_mask] + "#attempt"
        escalated = np.where(cascade, escalated_mask, None)
        small_answer = ~rq.go_large[idx]
        confidence = np.where(small_answer, rq.conf[idx], np.nan)
        quality = np.where(small_answer, rq.q_small[idx], rq.q_large[idx])
        heads = _ATTRS_HEAD[rq.attrs_code[idx]]
        for i in np.flatnonzero(escalated_mask).tolist():
            attrs[i] = f'{heads[i]}, "parent_id": "{rq.rid[idx[i]]}"}}'
        shadow = cascade & ~escalated_mask & answered & ~np.isnan(rq.q_large[idx])
        for i in np.flatnonzero(shadow).tolist():
            attrs[i] = f'{heads[i]}, "shadow_large_quality": {rq.q_large[idx[i]]:.1f}}}'
    else:
        request_id = rq.rid[idx]
        escalated = np.where(cascade, False, None)
        confidence = np.full(n, np.nan)
        quality = rq.q_large[idx]
    quality = np.where(answered, quality, np.nan)
    # round the parts to the microsecond first, so the sums below hold as stored
    route_ms, queue, prefill, decode = (np.round(x, 3) for x in
                                        (calls.route_ms, calls.queue_ms, calls.prefill_ms, calls.decode_ms))
    service = prefill + decode
    return {
        "request_id": request_id, "ts_ms": calls.ts_ms, "order": idx,
        "kind": np.full(n, 1 if kind == "first" else 2, dtype=np.int64),
        "tenant": rq.tenant_col("name")[idx], "sla_tier": rq.tenant_col("sla_tier")[idx],
        "model": calls.model, "route": calls.route, "strategy": rq.tenant_col("strategy")[idx],
        "cache_hit": np.zeros(n, dtype=bool), "escalated": escalated, "site": calls.site,
        "replica": calls.replica, "input_tokens": rq.input_tokens[idx], "output_tokens": calls.output_tokens,
        "cached_input_tokens": calls.cached_tokens, "prompt_chars": rq.prompt_chars[idx],
        "route_ms": route_ms, "queue_ms": queue, "prefill_ms": prefill, "decode_ms": decode,
        "service_ms": service, "ttft_ms": route_ms + np.nan_to_num(queue) + prefill,
        "total_ms": route_ms + np.nan_to_num(queue) + np.nan_to_num(service),
        "status": calls.status, "error_type": calls.error_type, "cost_usd": np.full(n, np.nan),
        "confidence": confidence, "quality": quality, "attrs": attrs,
    }


_DTYPES = {**{c: "Int64" for c in schema.TOKEN_COLUMNS}, "prompt_chars": "Int32", "cache_hit": "bool",
           "escalated": "boolean", **{c: "float64" for c in (*schema.MS_COLUMNS, "cost_usd", "confidence",
                                                               "quality")}}


def _assemble(parts: list[dict], start_ms0: np.datetime64) -> pd.DataFrame:
    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order = np.lexsort((cols["kind"], cols["order"], cols["ts_ms"]))
    data = {}
    for name in schema.NAMES:
        if name == "ts":
            ms = start_ms0 + cols["ts_ms"][order].astype("timedelta64[ms]")
            data[name] = pd.Series(ms.astype("datetime64[us]"))
            continue
        dtype = _DTYPES.get(name, object)
        if name not in cols:               # a class the sample fleet does not have (cache writes, reasoning)
            data[name] = pd.Series(pd.NA, index=range(len(order)), dtype=dtype)
            continue
        v = cols[name][order]
        if dtype == "float64":
            v = np.round(v.astype(float), 3)
        data[name] = pd.Series(v, dtype=dtype)
    return pd.DataFrame(data)
