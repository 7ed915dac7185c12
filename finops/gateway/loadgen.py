"""Open-loop load generator for the gateway (or any OpenAI-compatible endpoint).

Arrivals are a Poisson process whose rate follows a pattern; the schedule is
drawn up front from a seeded generator, and each request is sent at its time
as its own task: the sender never waits for a response, so a slow server does
not slow the offered load (no coordinated omission). A run is bounded in count
(the schedule) and in time (``duration_s`` plus a drain of at most
``timeout_s``), and stops by itself.

Patterns (the rate multiplier ``m(t)``; each averages 1 over the run, so every
pattern offers ``rate_per_s x duration_s`` requests on average)::

    steady   m(t) = 1
    burst    m(t) = 3 during the first 20 % of every period (10 s, or the run if shorter),
             0.5 otherwise
    ramp     m(t) = 2 t / duration   (from 0 up to twice the rate)

The time-varying process is drawn by thinning (Lewis and Shedler, 1979):
candidates at the peak rate ``r * max m``, each kept with probability
``m(t) / max m``.

``seed-3.3`` is the scenario of section 3.3 of ``000_b5db6f0ad1bec1d3.txt``, made
to show what it meant to: two uninjected long prompts one after the other (the
slow model's service baseline), then six concurrent injected long prompts and,
alongside them, one short uninjected prompt (to fast, which the slow queue does
not touch). Every long prompt is over 40 characters and over 32 estimated
tokens, so it crosses the routing threshold in either unit.
"""
from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from finops.errors import InputError

MAX_SCHEDULED = 2_000_000
#: the longest a load runs: a day (a rate of 1e-9 req/s for 1e9 s scheduled a request some years ahead)
MAX_DURATION_S = 86_400.0
#: the longest wait for one answer (and for the stragglers)
MAX_TIMEOUT_S = 3_600.0
BURST_PERIOD_S = 10.0
BURST_SHARE, BURST_HIGH, BURST_LOW = 0.2, 3.0, 0.5


def _steady(t: float, duration_s: float) -> float:
    return 1.0


def _burst(t: float, duration_s: float) -> float:
    period = min(BURST_PERIOD_S, duration_s)
    return BURST_HIGH if (t % period) < BURST_SHARE * period else BURST_LOW


def _ramp(t: float, duration_s: float) -> float:
    return 2.0 * t / duration_s


# name -> (multiplier m(t, duration), its maximum)
PATTERNS: dict[str, tuple[Callable[[float, float], float], float]] = {
    "steady": (_steady, 1.0),
    "burst": (_burst, BURST_HIGH),
    "ramp": (_ramp, 2.0),
}

DEFAULT_PROMPTS: tuple[str, ...] = (
    "What is the capital of France?",
    "今天天气如何",
    "Summarise the difference between prefill and decode in LLM inference.",
    "Translate 'good morning' into Spanish.",
    "请详细分析分布式训练中数据并行、张量并行和流水并行三者在通信开销与显存占用上的取舍，并给出选型建议",
    "Write a haiku about queues.",
    "Explain why the P99 latency of a service can rise while its mean stays flat, and how a "
    "segment-by-segment trace of route, queue and service time tells a queueing bottleneck "
    "from a decode long tail.",
    "给我三个提高团队效率的建议",
    "What does rho greater than one mean for an M/M/c queue?",
    "比较预填充阶段和解码阶段的瓶颈：哪一个受算力限制，哪一个受显存带宽限制，分别应该如何优化？请举例说明",
)

SEED_33_SHORT = "今天天气如何"
SEED_33_BASELINE = (
    "请详细分析分布式训练中数据并行、张量并行和流水并行三者在通信开销与显存占用上的取舍，并给出选型建议",
    "请比较大模型推理中预填充阶段和解码阶段的瓶颈差异，说明各自受算力还是显存带宽限制，以及对应的优化手段",
)
SEED_33_INJECTED = "超长复杂推理请求需要路由到大模型，并注入慢路径来观察排队耗时与服务耗时的拆分情况，请给出详细的分析步骤"
SEED_33_CONCURRENT = 6


def arrival_times(rate_per_s: float, duration_s: float, pattern: str = "steady",
                  seed: int = 0) -> list[float]:
    """Send times in seconds from the start, in ``[0, duration_s)``, of a Poisson process.

    Inter-arrival gaps at the peak rate ``lam = rate_per_s * max m`` are
    ``-ln(U) / lam``; a candidate at ``t`` is kept with probability ``m(t) / max m``.

    >>> ts = arrival_times(100, 10, "steady", seed=1)
    >>> 900 < len(ts) < 1100, ts == sorted(ts), 0 <= ts[0] and ts[-1] < 10
    (True, True, True)
    >>> ramp = arrival_times(100, 10, "ramp", seed=1)
    >>> sum(t < 5 for t in ramp) < sum(t >= 5 for t in ramp)
    True
    >>> arrival_times(0, 10)
    []
    """
    if pattern not in PATTERNS:
        raise InputError(f"unknown pattern {pattern!r} (expected one of {', '.join(PATTERNS)})")
    # nan passed "< 0" and the loop below never ended (t >= nan is never true)
    if not 0 <= rate_per_s <= MAX_SCHEDULED:
        raise InputError(f"the rate is a number of requests per second from 0 to {MAX_SCHEDULED:,}, not {rate_per_s:g}",
                         field="rate")
    if not 0 <= duration_s <= MAX_DURATION_S:
        raise InputError(f"the duration is a number of seconds from 0 to {MAX_DURATION_S:,.0f} (a day), not "
                         f"{duration_s:g}", field="duration")
    if rate_per_s * duration_s > MAX_SCHEDULED:
        raise InputError(f"rate x duration is over {MAX_SCHEDULED:,} requests")
    if rate_per_s == 0 or duration_s == 0:
        return []
    m, m_max = PATTERNS[pattern]
    peak = rate_per_s * m_max
    rng = random.Random(seed)
    out: list[float] = []
    t = 0.0
    while True:
        t += -math.log(1.0 - rng.random()) / peak
        if t >= duration_s:
            return out
        if rng.random() * m_max < m(t, duration_s):
            out.append(t)


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default) of already sorted values.

    >>> percentile([1, 2, 3, 4], 50), percentile([1, 2, 3, 4], 100), percentile([], 50)
    (2.5, 4.0, None)
    """
    if not sorted_values:
        return None
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _pcts(values: list[float], qs: Sequence[float] = (50, 90, 95, 99)) -> dict[str, float | None]:
    ordered = sorted(values)
    out = {f"p{q:g}": _round(percentile(ordered, q)) for q in qs}
    out["max"] = _round(ordered[-1]) if ordered else None
    out["mean"] = _round(sum(ordered) / len(ordered)) if ordered else None
    return out


def _round(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def load_prompts(path: str | Path) -> list[str]:
    """Prompts from a file: one per line, or JSONL objects with a ``prompt`` field."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read prompts: {exc}", file=str(path)) from None
    prompts: list[str] = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if path.suffix == ".jsonl":
            try:
                prompt = json.loads(line)["prompt"]
            except (ValueError, KeyError, TypeError):
                raise InputError("not a JSON object with a 'prompt' field", file=str(path), row=n) from None
            if not isinstance(prompt, str):
                raise InputError("'prompt' is not a string", file=str(path), row=n)
            prompts.append(prompt)
        else:
            prompts.append(line)
    if not prompts:
        raise InputError("no prompts in the file", file=str(path))
    return prompts


# ---------------------------------------------------------------- one request

@dataclass
class Result:
    """One request as the client saw it."""

    index: int
    scheduled_s: float
    sent_s: float | None = None
    latency_ms: float | None = None
    http_status: int | None = None
    error: str | None = None            # transport error class, or "unfinished" at the drain deadline
    tenant: str | None = None
    route: str | None = None
    cache_hit: bool | None = None
    route_ms: float | None = None
    queue_ms: float | None = None
    service_ms: float | None = None
    gateway_total_ms: float | None = None
    prompt_chars: int | None = None

    @property
    def ok(self) -> bool:
        return self.http_status == 200


def request_body(endpoint: str, prompt: str, *, slow_inject: bool = False, max_tokens: int | None = None,
                 model: str = "auto") -> tuple[str, dict[str, Any]]:
    """(path, JSON body) for ``endpoint`` ``chat`` or ``route``."""
    if endpoint == "route":
        body: dict[str, Any] = {"prompt": prompt}
    elif endpoint == "chat":
        body = {"model": model, "messages": [{"role": "user", "content": prompt}]}
        if max_tokens:
            body["max_tokens"] = max_tokens
    else:
        raise InputError(f"unknown endpoint {endpoint!r} (expected chat or route)")
    if slow_inject:
        body["slow_inject"] = True
    return ("/route" if endpoint == "route" else "/v1/chat/completions"), body


class HttpxClient:
    """The default client: one ``httpx.AsyncClient`` with no connection cap
    (a capped pool would make the sender wait for responses)."""

    errors: tuple[type[BaseException], ...] = (httpx.HTTPError,)

    def __init__(self, url: str, timeout_s: float):
        self._client = httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(timeout_s),
                                         limits=httpx.Limits(max_connections=None,
                                                             max_keepalive_connections=256))

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        resp = await self._client.post(path, json=body, headers=headers)
        return resp.status_code, resp.content

    async def aclose(self) -> None:
        await self._client.aclose()


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams, for benchmarks.

    It costs several times less CPU per request than httpx, so at hundreds of
    requests per second the measured latency is the server's, not the client's.
    Plain ``http://`` only; a response needs Content-Length or chunked encoding.
    """

    errors: tuple[type[BaseException], ...] = (OSError, asyncio.IncompleteReadError, ValueError,
                                               TimeoutError)

    def __init__(self, url: str, timeout_s: float):
        parsed = httpx.URL(url)
        if parsed.scheme != "http":
            raise InputError(f"the raw client speaks plain http only, not {parsed.scheme}://")
        self.host, self.port = parsed.host, parsed.port or 80
        self.timeout_s = timeout_s
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._all: set[asyncio.StreamWriter] = set()

    async def post(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, bytes]:
        payload = json.dumps(body, ensure_ascii=False).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                   f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n{head}\r\n"
                   ).encode() + payload
        async with asyncio.timeout(self.timeout_s):
            while True:
                reused = bool(self._idle)
                if reused:
                    reader, writer = self._idle.pop()
                else:
                    reader, writer = await asyncio.open_connection(self.host, self.port)
                    self._all.add(writer)
                try:
                    writer.write(request)
                    status, content, keep = await self._response(reader)
                    break
                except (asyncio.IncompleteReadError, ConnectionError) as exc:
                    self._drop(writer)
                    # the server closed an idle keep-alive connection before reading: retry fresh
                    if not (reused and getattr(exc, "partial", b"") == b""):
                        raise
                except BaseException:
                    self._drop(writer)
                    raise
        if keep:
            self._idle.append((reader, writer))
        else:
            self._drop(writer)
        return status, content

    @staticmethod
    async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        fields = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        if "content-length" in fields:
            content = await reader.readexactly(int(fields["content-length"]))
        elif fields.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                parts.append(await reader.readexactly(size))
                await reader.readexactly(2)
            await reader.readuntil(b"\r\n")
            content = b"".join(parts)
        else:
            raise ValueError("response has neither Content-Length nor chunked encoding")
        return status, content, fields.get("connection", "").lower() != "close"

    def _drop(self, writer: asyncio.StreamWriter) -> None:
        self._all.discard(writer)
        writer.close()

    async def aclose(self) -> None:
        for writer in list(self._all):
            self._drop(writer)
        self._idle.clear()


CLIENTS: dict[str, type] = {"httpx": HttpxClient, "raw": RawClient}


async def send(client: HttpxClient | RawClient, result: Result, path: str, body: dict[str, Any],
               headers: dict[str, str], t0: float) -> Result:
    """POST and fill ``result`` with the client latency and the gateway's own ``finops`` figures."""
    start = time.perf_counter()
    result.sent_s = start - t0
    try:
        status, content = await client.post(path, body, headers)
    except client.errors as exc:
        result.error = type(exc).__name__
        result.latency_ms = (time.perf_counter() - start) * 1000
        return result
    result.latency_ms = (time.perf_counter() - start) * 1000
    result.http_status = status
    try:
        data = json.loads(content)
    except ValueError:
        return result
    info = data.get("finops", data) if isinstance(data, dict) else {}
    if isinstance(info, dict):
        result.route = info.get("route")
        result.cache_hit = info.get("cache_hit")
        result.route_ms = info.get("route_ms")
        result.queue_ms = info.get("queue_ms")
        result.service_ms = info.get("service_ms")
        result.gateway_total_ms = info.get("total_ms")
    return result


@asynccontextmanager
async def _client(url: str, timeout_s: float, kind: str = "httpx") -> AsyncIterator[HttpxClient | RawClient]:
    if kind not in CLIENTS:
        raise InputError(f"unknown client {kind!r} (expected one of {', '.join(CLIENTS)})")
    client = CLIENTS[kind](url, timeout_s)
    try:
        yield client
    finally:
        await client.aclose()


def _headers(tenant: str | None, api_key: str | None, no_cache: bool = False) -> dict[str, str]:
    headers = {}
    if tenant:
        headers["X-Tenant"] = tenant
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if no_cache:
        headers["Cache-Control"] = "no-cache"
    return headers


# ---------------------------------------------------------------- open-loop runs

@dataclass(frozen=True)
class LoadSpec:
    url: str
    rate_per_s: float = 20.0
    duration_s: float = 60.0
    pattern: str = "steady"
    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    tenants: tuple[str, ...] = ()
    api_key: str | None = None
    endpoint: str = "chat"
    model: str = "auto"              # chat only: "auto" lets the gateway route; a name pins the backend
    max_tokens: int | None = None
    timeout_s: float = 30.0          # per request, and the longest drain after the last send
    seed: int = 0
    no_cache: bool = False
    client: str = "httpx"            # "raw": the lighter benchmark client


@dataclass
class LoadReport:
    url: str
    pattern: str
    requested_rate_per_s: float
    duration_s: float
    scheduled: int
    sent: int
    completed: int                   # got an HTTP response
    ok: int                          # HTTP 200
    unfinished: int                  # still waiting at the drain deadline
    achieved_rate_per_s: float       # sent / duration_s
    last_send_s: float               # when the last request left, seconds from the start
    throughput_per_s: float          # ok / (time of the last response)
    send_lag_ms: dict[str, float | None]         # actual send time - scheduled time
    latency_ms: dict[str, float | None]          # client-side, HTTP 200 only
    overhead_ms: dict[str, float | None]         # latency - queue_ms - service_ms (gateway + HTTP + client)
    route_ms: dict[str, float | None]            # the gateway's routing decision
    by_status: dict[str, int] = field(default_factory=dict)
    by_route: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(spec: LoadSpec, results: list[Result], wall_s: float) -> LoadReport:
    sent = [r for r in results if r.sent_s is not None]
    done = [r for r in results if r.http_status is not None]
    ok = [r for r in done if r.ok]
    last_done = max((r.sent_s + r.latency_ms / 1000 for r in ok), default=0.0)
    overhead = [r.latency_ms - r.queue_ms - r.service_ms for r in ok
                if r.queue_ms is not None and r.service_ms is not None]
    by_status = Counter(str(r.http_status) if r.http_status is not None else (r.error or "not_sent")
                        for r in results)
    return LoadReport(
        url=spec.url, pattern=spec.pattern, requested_rate_per_s=spec.rate_per_s, duration_s=spec.duration_s,
        scheduled=len(results), sent=len(sent), completed=len(done), ok=len(ok),
        unfinished=sum(1 for r in results if r.error == "unfinished"),
        achieved_rate_per_s=round(len(sent) / spec.duration_s, 3) if spec.duration_s else 0.0,
        last_send_s=round(max((r.sent_s for r in sent), default=0.0), 3),
        throughput_per_s=round(len(ok) / last_done, 3) if last_done else 0.0,
        send_lag_ms=_pcts([(r.sent_s - r.scheduled_s) * 1000 for r in sent]),
        latency_ms=_pcts([r.latency_ms for r in ok]),
        overhead_ms=_pcts(overhead),
        route_ms=_pcts([r.route_ms for r in ok if r.route_ms is not None]),
        by_status=dict(sorted(by_status.items())),
        by_route=dict(sorted(Counter(r.route for r in ok if r.route).items())),
        wall_s=round(wall_s, 3),
    )


def check_timeout(timeout_s: float) -> float:
    """``timeout_s`` when it is a number of seconds above 0 and at most :data:`MAX_TIMEOUT_S` (nan passed)."""
    if not 0 < timeout_s <= MAX_TIMEOUT_S:
        raise InputError(f"the timeout is a number of seconds above 0 and at most {MAX_TIMEOUT_S:,.0f}, not "
                         f"{timeout_s:g}", field="timeout")
    return timeout_s


async def run_load_async(spec: LoadSpec) -> LoadReport:
    """Send the schedule open-loop, wait at most ``timeout_s`` for stragglers, report."""
    if not spec.prompts:
        raise InputError("no prompts to send")
    check_timeout(spec.timeout_s)
    if spec.max_tokens is not None and spec.max_tokens < 1:
        raise InputError(f"max_tokens is a whole number from 1, not {spec.max_tokens:,}", field="max_tokens")
    parts = urlsplit(spec.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"the gateway's URL is http(s)://HOST[:PORT], not {spec.url!r}", field="url")
    schedule = arrival_times(spec.rate_per_s, spec.duration_s, spec.pattern, spec.seed)
    rng = random.Random(spec.seed + 1)
    results = [Result(i, t) for i, t in enumerate(schedule)]
    tasks: list[asyncio.Task] = []
    async with _client(spec.url, spec.timeout_s, spec.client) as client:
        t0 = time.perf_counter()
        for result in results:
            delay = result.scheduled_s - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            tenant = rng.choice(spec.tenants) if spec.tenants else None
            result.tenant = tenant
            prompt = rng.choice(spec.prompts)
            result.prompt_chars = len(prompt)
            path, body = request_body(spec.endpoint, prompt, max_tokens=spec.max_tokens, model=spec.model)
            tasks.append(asyncio.create_task(
                send(client, result, path, body, _headers(tenant, spec.api_key, spec.no_cache), t0)))
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=spec.timeout_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for r in results:
            if r.http_status is None and r.error is None:
                r.error = "unfinished"
        wall_s = time.perf_counter() - t0
    return summarise(spec, results, wall_s)


def run_load(spec: LoadSpec) -> LoadReport:
    return asyncio.run(run_load_async(spec))


# ---------------------------------------------------------------- preset: seed section 3.3

@dataclass
class PresetStep:
    phase: str                # short, baseline, injected
    prompt_chars: int
    slow_inject: bool
    result: Result


@dataclass
class PresetReport:
    url: str
    steps: list[PresetStep]

    def rows(self) -> list[dict[str, Any]]:
        return [{"phase": s.phase, "prompt_chars": s.prompt_chars, "slow_inject": s.slow_inject,
                 "http_status": s.result.http_status, "error": s.result.error, "route": s.result.route,
                 "queue_ms": s.result.queue_ms, "service_ms": s.result.service_ms,
                 "total_ms": s.result.gateway_total_ms, "latency_ms": _round(s.result.latency_ms)}
                for s in self.steps]

    def to_dict(self) -> dict[str, Any]:
        injected = [s.result for s in self.steps if s.phase == "injected" and s.result.ok]
        baseline = [s.result.service_ms for s in self.steps
                    if s.phase == "baseline" and s.result.ok and s.result.service_ms is not None]
        base_ms = sum(baseline) / len(baseline) if baseline else None
        inj_service = [r.service_ms for r in injected if r.service_ms is not None]
        return {
            "url": self.url, "preset": "dual-model", "requests": self.rows(),
            "summary": {
                "injected_routes": dict(Counter(r.route for r in injected)),
                "injected_queue_ms_sorted": sorted(r.queue_ms for r in injected if r.queue_ms is not None),
                "baseline_service_ms": _round(base_ms, 1),
                "injected_service_ms_mean": _round(sum(inj_service) / len(inj_service), 1) if inj_service
                else None,
                "service_over_baseline_ms": _round(sum(inj_service) / len(inj_service) - base_ms, 1)
                if inj_service and base_ms is not None else None,
            },
        }


async def run_seed_33_async(url: str, *, endpoint: str = "route", tenant: str | None = None,
                            api_key: str | None = None, timeout_s: float = 60.0) -> PresetReport:
    """The section 3.3 scenario; every request skips the semantic cache (``Cache-Control: no-cache``).

    Steps are listed in the order they were sent: baseline, baseline, six injected, short.
    """
    headers = _headers(tenant, api_key, no_cache=True)
    steps: list[PresetStep] = []
    async with _client(url, timeout_s) as client:
        t0 = time.perf_counter()

        async def one(phase: str, prompt: str, inject: bool) -> None:
            result = Result(len(steps), time.perf_counter() - t0, tenant=tenant, prompt_chars=len(prompt))
            steps.append(PresetStep(phase, len(prompt), inject, result))
            path, body = request_body(endpoint, prompt, slow_inject=inject)
            await send(client, result, path, body, headers, t0)

        for prompt in SEED_33_BASELINE:
            await one("baseline", prompt, False)
        await asyncio.gather(*(one("injected", SEED_33_INJECTED, True) for _ in range(SEED_33_CONCURRENT)),
                             one("short", SEED_33_SHORT, False))
    return PresetReport(url, steps)


def run_seed_33(url: str, **kwargs: Any) -> PresetReport:
    return asyncio.run(run_seed_33_async(url, **kwargs))


PRESETS: dict[str, Callable[..., PresetReport]] = {
    "dual-model": run_seed_33,
}
