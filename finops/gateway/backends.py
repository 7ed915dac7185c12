"""The models behind the gateway: built-in mocks and OpenAI-compatible upstreams.

Every backend has replicas with a fixed number of slots each (an
``asyncio.Semaphore``). A call first waits for a slot on the least busy replica
(that wait is ``queue_ms``), then is served (``service_ms``). The gateway bounds
the whole call with the backend's ``timeout_s``.

``mock``    the seed's model: prefill time grows with prompt tokens, decode time
            with output tokens, and a call can be injected with a slow decode
            (request flag ``slow_inject`` or config ``inject_rate``). Its answer
            carries a confidence drawn deterministically from the prompt's hash.
``openai``  any server speaking ``POST {base_url}/chat/completions`` (vLLM, TGI,
            llama.cpp, OpenAI, ...), through one ``httpx.AsyncClient``. Tokens come
            from the response's ``usage``; without streaming, time to first token
            is the whole service time. An answer is read up to ``max_response_bytes``
            (a larger one fails the call); an upstream's error body goes to the
            server log, never to the client.

A plugin backend is ``kind = "package.module:factory"``: ``factory(cfg)`` returns
a :class:`Backend` subclass instance implementing ``generate``.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import os
import random
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from finops.gateway.cache import normalise
from finops.gateway.classify import estimate_tokens
from finops.gateway.config import BackendConfig

logger = logging.getLogger("finops.gateway")


class BackendError(Exception):
    """A call that failed; ``status`` is the canonical status it is logged with."""

    status = "error"
    http_status = 502

    def __init__(self, error_type: str, message: str = ""):
        self.error_type = error_type
        super().__init__(message or error_type)


class BackendTimeout(BackendError):
    status = "timeout"
    http_status = 504


class QueueFull(BackendError):
    status = "rejected"
    http_status = 503


@dataclass
class CallTiming:
    """Filled in as a call progresses, so a call cut short still tells how far it got."""

    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    service_ms: float | None = None
    ttft_ms: float | None = None      # from the start of service to the first token
    replica: str | None = None


@dataclass(frozen=True)
class CallRequest:
    messages: tuple[tuple[str, str], ...]   # (role, text content)
    text: str                               # the contents joined: what is classified and hashed
    input_tokens_estimate: int              # estimate_tokens(text), computed once by the gateway
    max_tokens: int | None = None
    user: str | None = None
    slow_inject: bool = False


@dataclass(frozen=True)
class Reply:
    text: str
    input_tokens: int
    output_tokens: int
    confidence: float | None = None
    cached_input_tokens: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Replica:
    name: str
    slots: asyncio.Semaphore
    waiting: int = 0
    in_flight: int = 0


class Backend:
    """Slots, queue accounting and recent latencies, common to every kind."""

    def __init__(self, cfg: BackendConfig, latency_window: int = 200):
        self.cfg = cfg
        self.name, self.model = cfg.name, cfg.model
        self.replicas = [Replica(f"{cfg.name}-{i}", asyncio.Semaphore(cfg.capacity))
                         for i in range(cfg.replicas)]
        self._recent_ms: deque[float] = deque(maxlen=latency_window)

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot: the queue length."""
        return sum(r.waiting for r in self.replicas)

    @property
    def in_flight(self) -> int:
        return sum(r.in_flight for r in self.replicas)

    @property
    def slots_total(self) -> int:
        return self.cfg.capacity * self.cfg.replicas

    def observe(self, latency_ms: float) -> None:
        """Record a finished call's queue + service time."""
        self._recent_ms.append(latency_ms)

    def recent_p99_ms(self) -> float:
        """P99 of the recent calls' queue + service time (nearest rank); 0 before any call."""
        if not self._recent_ms:
            return 0.0
        ordered = sorted(self._recent_ms)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]

    @asynccontextmanager
    async def slot(self, timing: CallTiming) -> AsyncIterator[Replica]:
        """Wait for a slot on the least busy replica; ``timing.queue_ms`` is the wait."""
        if self.cfg.max_queue and self.waiting >= self.cfg.max_queue:
            timing.queue_ms = 0.0
            raise QueueFull("queue_full", f"{self.waiting} calls already wait for {self.name}")
        replica = min(self.replicas, key=lambda r: r.waiting + r.in_flight)
        timing.replica = replica.name
        t0 = time.perf_counter()
        replica.waiting += 1
        try:
            await replica.slots.acquire()
        finally:
            replica.waiting -= 1
            timing.queue_ms = (time.perf_counter() - t0) * 1000
        replica.in_flight += 1
        try:
            yield replica
        finally:
            replica.in_flight -= 1
            replica.slots.release()

    async def start(self) -> None:
        """Open connections; called once the event loop runs."""

    async def close(self) -> None:
        """Release connections at shutdown."""

    async def generate(self, req: CallRequest, timing: CallTiming) -> Reply:
        raise NotImplementedError


def _unit_hash(*parts: str) -> float:
    """A number in [0, 1) fixed by ``parts``.

    >>> _unit_hash("fast", "hello") == _unit_hash("fast", "hello")
    True
    >>> 0 <= _unit_hash("x") < 1
    True
    """
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class MockBackend(Backend):
    """The seed's mock model, timed by ``asyncio.sleep`` (no CPU work)."""

    def __init__(self, cfg: BackendConfig, latency_window: int = 200):
        super().__init__(cfg, latency_window)
        o = cfg.options
        self.prefill_ms_per_token = o["prefill_ms_per_token"]
        self.decode_ms_per_token = o["decode_ms_per_token"]
        self.output_tokens = o["output_tokens"]
        self.slow_inject_ms = o["slow_inject_ms"]
        self.inject_rate = o["inject_rate"]
        self.confidence_range = o["confidence"]
        self._rng = random.Random(o["seed"])

    def confidence(self, text: str) -> float:
        """The answer's confidence: fixed by the model and the normalised prompt."""
        lo, hi = self.confidence_range
        return round(lo + (hi - lo) * _unit_hash(self.model, "confidence", normalise(text)), 4)

    def planned_output_tokens(self, req: CallRequest) -> int:
        lo, hi = self.output_tokens
        n = lo + int(_unit_hash(self.model, "output", normalise(req.text)) * (hi - lo + 1))
        return min(n, req.max_tokens) if req.max_tokens else n

    async def generate(self, req: CallRequest, timing: CallTiming) -> Reply:
        input_tokens = req.input_tokens_estimate
        output_tokens = self.planned_output_tokens(req)
        injected = req.slow_inject or (self.inject_rate > 0 and self._rng.random() < self.inject_rate)
        prefill_s = input_tokens * self.prefill_ms_per_token / 1000
        step_s = self.decode_ms_per_token / 1000
        decode_s = output_tokens * step_s + (self.slow_inject_ms / 1000 if injected else 0.0)
        async with self.slot(timing):
            t0 = time.perf_counter()
            if prefill_s > 0:
                await asyncio.sleep(prefill_s)
            t1 = time.perf_counter()
            timing.prefill_ms = (t1 - t0) * 1000
            timing.ttft_ms = timing.prefill_ms + min(step_s, decode_s) * 1000
            if decode_s > 0:
                await asyncio.sleep(decode_s)
            t2 = time.perf_counter()
            timing.decode_ms = (t2 - t1) * 1000
            timing.service_ms = (t2 - t0) * 1000
        text = f"[{self.model} mock] {output_tokens}-token answer to a {input_tokens}-token prompt."
        return Reply(text, input_tokens, output_tokens, self.confidence(req.text),
                     attrs={"slow_inject": True} if injected else {})


class OpenAIBackend(Backend):
    """An OpenAI-compatible chat-completions server (non-streaming)."""

    def __init__(self, cfg: BackendConfig, latency_window: int = 200):
        super().__init__(cfg, latency_window)
        o = cfg.options
        self.base_url = o["base_url"].rstrip("/")
        self.upstream_model = o["upstream_model"]
        self.api_key_env = o["api_key_env"]
        self.request_logprobs = o["request_logprobs"]
        self.max_response_bytes = o["max_response_bytes"]
        self._client: httpx.AsyncClient | None = None

    async def start(self) -> None:
        headers = {}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=httpx.Timeout(self.cfg.timeout_s),
            limits=httpx.Limits(max_connections=self.slots_total,
                                max_keepalive_connections=self.slots_total))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def generate(self, req: CallRequest, timing: CallTiming) -> Reply:
        if self._client is None:
            await self.start()
        payload: dict[str, Any] = {
            "model": self.upstream_model,
            "messages": [{"role": role, "content": text} for role, text in req.messages],
        }
        if req.max_tokens:
            payload["max_tokens"] = req.max_tokens
        if req.user:
            payload["user"] = req.user
        if self.request_logprobs:
            payload["logprobs"] = True
        async with self.slot(timing):
            t0 = time.perf_counter()
            try:
                async with self._client.stream("POST", "/chat/completions", json=payload) as resp:
                    status = resp.status_code
                    body = await self._read_capped(resp)
            except httpx.TimeoutException as exc:
                raise BackendTimeout("upstream_timeout", f"{self.name}: {type(exc).__name__}") from None
            except httpx.HTTPError as exc:
                logger.warning("backend %s (%s): %s: %s", self.name, self.base_url, type(exc).__name__, exc)
                raise BackendError(type(exc).__name__, f"{self.name}: {type(exc).__name__}") from None
            finally:
                timing.service_ms = (time.perf_counter() - t0) * 1000
                timing.ttft_ms = timing.service_ms
        if status >= 400:
            # The upstream's words stay in the server log: they may carry its keys, URLs or other
            # tenants' data, and a client must not be able to make the gateway say anything.
            logger.warning("backend %s (%s) answered HTTP %d: %s", self.name, self.base_url, status,
                           _excerpt(body))
            raise BackendError(f"http_{status}", f"{self.name}: the upstream answered HTTP {status}")
        return self._parse(body, req)

    async def _read_capped(self, resp: httpx.Response) -> bytes:
        """The response body, refused past ``max_response_bytes`` (checked on Content-Length first)."""
        cap = self.max_response_bytes
        declared = resp.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            raise self._too_large(f"Content-Length {declared}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > cap:
                raise self._too_large(f"more than {size} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, what: str) -> BackendError:
        logger.warning("backend %s (%s): answer of %s, over max_response_bytes = %d", self.name,
                       self.base_url, what, self.max_response_bytes)
        return BackendError("upstream_response_too_large",
                            f"{self.name}: the upstream's answer is over {self.max_response_bytes} bytes")

    def _parse(self, body: bytes, req: CallRequest) -> Reply:
        try:
            data = json.loads(body)
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            logger.warning("backend %s (%s) sent no choices[0].message: %s", self.name, self.base_url,
                           _excerpt(body))
            raise BackendError("invalid_response", f"{self.name}: the upstream's answer has no "
                                                   "choices[0].message") from None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
        attrs: dict[str, Any] = {}
        if isinstance(data.get("id"), str):
            attrs["upstream_id"] = data["id"]
        if not isinstance(prompt_tokens, int) or not isinstance(completion_tokens, int):
            prompt_tokens, completion_tokens = req.input_tokens_estimate, estimate_tokens(text)
            attrs["tokens_estimated"] = True
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return Reply(text, prompt_tokens, completion_tokens, _logprob_confidence(choice),
                     cached if isinstance(cached, int) else None, attrs)


def _excerpt(body: bytes, limit: int = 2000) -> str:
    """The start of an upstream body for the server log, one line.

    >>> _excerpt(b'{"error": "boom"}\\n')
    '{"error": "boom"}'
    """
    return body[:limit].decode("utf-8", "replace").replace("\n", " ").strip()


def _logprob_confidence(choice: dict) -> float | None:
    """``exp(mean token logprob)`` of the answer, if the upstream sent logprobs.

    >>> _logprob_confidence({"logprobs": {"content": [{"logprob": 0.0}, {"logprob": -0.2}]}})
    0.9048
    >>> _logprob_confidence({}) is None
    True
    """
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    values = [t["logprob"] for t in content or () if isinstance(t, dict)
              and isinstance(t.get("logprob"), int | float)]
    if not values:
        return None
    return round(math.exp(sum(values) / len(values)), 4)


BACKENDS: dict[str, type[Backend]] = {
    "mock": MockBackend,
    "openai": OpenAIBackend,
}
