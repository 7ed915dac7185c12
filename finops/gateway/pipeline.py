"""The decision pipeline and the call loop: :class:`Gateway`, free of any web framework.

A request goes through four stages, each chosen in the TOML:

1. **semantic cache** (``[cache] kind``): a hit is answered at once, logged with
   ``route = "cache"``, ``cache_hit = true``, the model that served the answer
   originally, its token counts and ``cost_usd = 0``. Requests that ask for the
   slow path (``slow_inject``) or send ``Cache-Control: no-cache`` skip the cache.
2. **complexity classifier** (``[classifier] kind``): e.g. short / long; a long
   prompt raises the quality a backend needs (``long_min_quality``).
3. **SLA tier** of the tenant (``[tenants.X] tier``): a quality floor and a strategy.
4. **strategy** (``[tiers.X] strategy``), over the backends whose ``quality``
   reaches ``max(tier floor, complexity floor)`` (if none does, the best one):

   ``cost``      the cheapest call, priced at the estimated prompt tokens and
                 ``max_tokens`` (or 256) output tokens (a backend with no price in
                 the config counts as free: self-hosted capacity already paid for);
   ``latency``   the fewest calls waiting, then the lowest recent P99 of
                 queue + service time, then the cheapest;
   ``cascade``   the backends meeting the tier's floor, cheapest first (or
                 ``[routing] cascade_order``); the next one is called while the
                 answer's confidence is under tau (``cascade_threshold``). An answer
                 without a confidence is accepted.

   A plugin strategy ``package.module:function`` is called as
   ``function(backends, ctx) -> Plan`` with the same :class:`RouteContext`.

Each model call writes one canonical row. A cascade that escalates writes the
rejected attempt (``request_id = <id>#attempt``, ``escalated = true``,
``attrs.parent_id = <id>``) and then the answer (``request_id = <id>``). A
failed call writes a row with ``status`` error / timeout / rejected and its
``error_type``, and the request fails with :class:`GatewayError`.

``Gateway.handle(req, spent)`` adds the request's backend time, in seconds, to
``spent[BACKEND_S]`` as each call ends (also a failed one): the sum over its
calls of ``queue_ms + service_ms``, or the call's wall time when it was cut short
before its service time was known. The web face subtracts it from the request's
time to get the gateway's own overhead (``finops_gateway_overhead_seconds``).
"""
from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from finops.errors import InputError
from finops.gateway.backends import (
    BACKENDS,
    Backend,
    BackendError,
    BackendTimeout,
    CallRequest,
    CallTiming,
    Reply,
)
from finops.gateway.cache import CACHES, CachedAnswer
from finops.gateway.classify import CLASSIFIERS, Complexity, estimate_tokens
from finops.gateway.config import GatewayConfig, Stage, Tier
from finops.gateway.log import canonical_row, utc_iso
from finops.gateway.metrics import Metrics

logger = logging.getLogger("finops.gateway")

DEFAULT_EXPECTED_OUTPUT_TOKENS = 256
BACKEND_S = "finops_backend_s"      # the key of ``spent`` in Gateway.handle (the ASGI scope's state)


# ---------------------------------------------------------------- requests and plans

@dataclass(frozen=True)
class GatewayRequest:
    messages: tuple[tuple[str, str], ...]   # (role, text)
    tenant: str
    endpoint: str = "chat"                  # "chat" or "route"
    max_tokens: int | None = None
    user: str | None = None
    model: str | None = None                # a backend or model name pins the call; None routes
    slow_inject: bool = False
    no_cache: bool = False

    @property
    def text(self) -> str:
        return "\n".join(content for _, content in self.messages)


@dataclass(frozen=True)
class RouteContext:
    """What a strategy knows about the request."""

    tenant: str
    tier: Tier
    complexity: Complexity
    quality_floor: float          # max(tier floor, complexity floor)
    input_tokens: int             # estimated
    max_tokens: int | None
    cascade_threshold: float
    cascade_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """Backends to call in turn; the next one only while confidence < ``threshold``."""

    chain: tuple[Backend, ...]
    threshold: float | None = None


@dataclass
class Outcome:
    request_id: str
    text: str
    row: dict[str, Any]                                 # the answering row
    rows: list[dict[str, Any]] = field(default_factory=list)   # every row written, attempts first
    cost_usd: float | None = 0.0                        # all calls of the request; None if none was priced

    @property
    def escalations(self) -> int:
        return sum(1 for r in self.rows if r["escalated"])


class GatewayError(Exception):
    """A request that fails with a clean HTTP error."""

    def __init__(self, http_status: int, error_type: str, message: str, request_id: str | None = None):
        self.http_status, self.error_type, self.request_id = http_status, error_type, request_id
        super().__init__(message)


class Unauthorized(GatewayError):
    def __init__(self, message: str):
        super().__init__(401, "invalid_api_key", message)


# ---------------------------------------------------------------- strategies

def expected_cost_usd(backend: Backend, ctx: RouteContext) -> float:
    return backend.cfg.cost_usd(ctx.input_tokens, ctx.max_tokens or DEFAULT_EXPECTED_OUTPUT_TOKENS)


def eligible(backends: list[Backend], floor: float) -> list[Backend]:
    """Backends whose quality reaches ``floor``; if none does, the best ones."""
    ok = [b for b in backends if b.cfg.quality >= floor]
    if ok:
        return ok
    best = max(b.cfg.quality for b in backends)
    return [b for b in backends if b.cfg.quality == best]


def cost_first(backends: list[Backend], ctx: RouteContext) -> Plan:
    """The cheapest backend that meets the quality floor."""
    pick = min(eligible(backends, ctx.quality_floor),
               key=lambda b: (expected_cost_usd(b, ctx), -b.cfg.quality, b.name))
    return Plan((pick,))


def latency_first(backends: list[Backend], ctx: RouteContext) -> Plan:
    """The shortest queue, then the lowest recent P99, among those meeting the floor."""
    pick = min(eligible(backends, ctx.quality_floor),
               key=lambda b: (b.waiting, b.recent_p99_ms(), expected_cost_usd(b, ctx), b.name))
    return Plan((pick,))


def cascade(backends: list[Backend], ctx: RouteContext) -> Plan:
    """Small first: the tier's eligible backends by price (or ``cascade_order``), tau = threshold."""
    pool = eligible(backends, ctx.tier.quality_floor)
    if ctx.cascade_order:
        names = {b.name: b for b in pool}
        chain = [names[n] for n in ctx.cascade_order if n in names] or pool
    else:
        chain = sorted(pool, key=lambda b: (expected_cost_usd(b, ctx), b.cfg.quality, b.name))
    return Plan(tuple(chain), ctx.cascade_threshold)


STRATEGIES: dict[str, Callable[[list[Backend], RouteContext], Plan]] = {
    "cost": cost_first,
    "latency": latency_first,
    "cascade": cascade,
}


# ---------------------------------------------------------------- building the stages

def load_plugin(spec: str, where: str) -> Any:
    """``package.module:attr`` -> the object; an :class:`InputError` if it cannot be loaded."""
    module_name, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot load plugin {spec!r}: {exc}", field=where) from None


def _build_stage(stage: Stage, builtins: Mapping[str, Any], where: str) -> Any:
    """The stage object: ``factory(**options)``, the factory built in or a plugin."""
    factory = load_plugin(stage.kind, where) if stage.is_plugin else builtins[stage.kind]
    try:
        return factory(**stage.options)
    except TypeError as exc:
        raise InputError(f"{stage.kind} does not take these options: {exc}", field=where) from None


def _sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


# ---------------------------------------------------------------- the gateway

class Gateway:
    """Routes, calls and logs. ``log`` is anything with ``write(row)`` and ``close()``."""

    def __init__(self, cfg: GatewayConfig, log: Any):
        self.cfg, self.log = cfg, log
        self.backends: dict[str, Backend] = {}
        for name, bc in cfg.backends.items():
            factory = load_plugin(bc.kind, f"backends.{name}.kind") if ":" in bc.kind else BACKENDS[bc.kind]
            self.backends[name] = (factory(bc) if ":" in bc.kind
                                   else factory(bc, latency_window=cfg.routing.latency_window))
        self._by_model: dict[str, Backend] = {b.model: b for b in self.backends.values()}
        self._by_model.update(self.backends)          # a backend's own name wins
        self.cache = _build_stage(cfg.cache, CACHES, "cache.kind")
        self.classifier = _build_stage(cfg.classifier, CLASSIFIERS, "classifier.kind")
        self.strategies = {
            name: (load_plugin(t.strategy, f"tiers.{name}.strategy") if ":" in t.strategy
                   else STRATEGIES[t.strategy])
            for name, t in cfg.tiers.items()}
        self._key_hashes = {_sha(k): tenant for k, tenant in cfg.api_keys.items()}
        self.metrics = Metrics(self._gauges)

    # -- lifecycle
    async def start(self) -> None:
        for b in self.backends.values():
            await b.start()

    async def close(self) -> None:
        for b in self.backends.values():
            await b.close()
        self.log.close()

    def _gauges(self) -> dict[str, dict[tuple[str, ...], float]]:
        bs = self.backends.values()
        return {
            "finops_gateway_queue_length": {(b.name,): b.waiting for b in bs},
            "finops_gateway_in_flight": {(b.name,): b.in_flight for b in bs},
            "finops_gateway_slots": {(b.name,): b.slots_total for b in bs},
        }

    # -- tenants
    def authenticate(self, authorization: str | None, x_tenant: str | None) -> str:
        """The tenant of a request.

        With API keys configured, the ``Authorization: Bearer KEY`` header is
        required and names the tenant (``X-Tenant`` is ignored); a missing or
        unknown key raises :class:`Unauthorized`. Without keys, ``X-Tenant``
        names it, or ``[routing] default_tenant``.
        """
        if self._key_hashes:
            scheme, _, key = (authorization or "").partition(" ")
            tenant = self._key_hashes.get(_sha(key.strip())) if scheme.lower() == "bearer" else None
            if tenant is None:
                self.metrics.inc("finops_gateway_unauthorized_total")
                raise Unauthorized("missing or unknown API key" if authorization else
                                   "this gateway needs an API key: Authorization: Bearer KEY")
            return tenant
        return (x_tenant or "").strip() or self.cfg.routing.default_tenant

    def backend_for(self, model: str | None) -> Backend | None:
        """The backend a request's ``model`` pins, None to let the router choose."""
        if not model or model in ("auto", "router"):
            return None
        backend = self._by_model.get(model)
        if backend is None:
            raise GatewayError(404, "model_not_found",
                               f"unknown model {model!r}: use one of {', '.join(sorted(self._by_model))} "
                               "or 'auto'")
        return backend

    # -- the request
    async def handle(self, req: GatewayRequest, spent: dict[str, Any] | None = None) -> Outcome:
        """Route, call and log ``req``; its backend time is added to ``spent[BACKEND_S]``."""
        t_in = time.perf_counter()
        request_id = f"gw-{os.urandom(16).hex()}"
        text = req.text
        tier = self.cfg.tier_of(req.tenant)
        pinned = self.backend_for(req.model)
        strategy = "pinned" if pinned else tier.strategy
        base: dict[str, Any] = {
            "ts": utc_iso(datetime.now(UTC)), "tenant": req.tenant, "sla_tier": tier.name,
            "strategy": strategy, "prompt_chars": len(text),
        }
        attrs: dict[str, Any] = {"endpoint": req.endpoint}
        if req.user:
            attrs["user"] = req.user

        key = None
        if not (req.no_cache or req.slow_inject):
            key = self.cache.key(req.tenant, pinned.name if pinned else None, list(req.messages))
            hit = self.cache.get(key)
            if hit is not None:
                return self._cache_hit(request_id, hit, base, attrs, t_in)

        input_tokens = estimate_tokens(text)
        complexity = self.classifier.classify(text)
        floor = max(tier.quality_floor, complexity.min_quality)
        ctx = RouteContext(req.tenant, tier, complexity, floor, input_tokens, req.max_tokens,
                           tier.cascade_threshold if tier.cascade_threshold is not None
                           else self.cfg.routing.cascade_threshold,
                           self.cfg.routing.cascade_order)
        plan = Plan((pinned,)) if pinned else self.strategies[tier.name](list(self.backends.values()), ctx)
        attrs.update(complexity=complexity.label, prompt_tokens_est=input_tokens, quality_floor=floor)
        if plan.threshold is not None and len(plan.chain) > 1:
            attrs["cascade_threshold"] = plan.threshold
        call = CallRequest(req.messages, text, input_tokens, req.max_tokens, req.user, req.slow_inject)
        t_routed = time.perf_counter()
        self.metrics.observe("finops_gateway_route_seconds", t_routed - t_in)
        return await self._run(plan, call, request_id, base, attrs, t_in, t_routed, key, spent)

    def _cache_hit(self, request_id: str, hit: CachedAnswer, base: dict, attrs: dict,
                   t_in: float) -> Outcome:
        elapsed_ms = (time.perf_counter() - t_in) * 1000
        row = canonical_row({
            **base, "request_id": request_id, "model": hit.model, "route": "cache", "cache_hit": True,
            "escalated": False, "input_tokens": hit.input_tokens, "output_tokens": hit.output_tokens,
            "route_ms": _ms(elapsed_ms), "ttft_ms": _ms(elapsed_ms), "total_ms": _ms(elapsed_ms),
            "status": "ok", "cost_usd": 0.0, "confidence": hit.confidence,
            "attrs": {**attrs, "cached_backend": hit.backend},
        })
        self._write(row, request_id)
        self.metrics.observe("finops_gateway_route_seconds", elapsed_ms / 1000)
        self.metrics.observe("finops_gateway_request_duration_seconds", elapsed_ms / 1000, "cache")
        return Outcome(request_id, hit.text, row, [row], 0.0)

    async def _call(self, backend: Backend, call: CallRequest,
                    timing: CallTiming) -> tuple[Reply | None, BackendError | None]:
        try:
            async with asyncio.timeout(backend.cfg.timeout_s):
                return await backend.generate(call, timing), None
        except TimeoutError:
            return None, BackendTimeout("timeout", f"{backend.name} gave no answer within "
                                                   f"{backend.cfg.timeout_s:g} s")
        except BackendError as exc:
            return None, exc
        except Exception as exc:        # a plugin's bug still yields a logged row and a 502
            logger.exception("backend %s failed", backend.name)
            return None, BackendError(type(exc).__name__, f"{backend.name} failed: {exc}")

    async def _run(self, plan: Plan, call: CallRequest, request_id: str, base: dict, attrs: dict,
                   t_in: float, t_routed: float, cache_key: str | None,
                   spent: dict[str, Any] | None = None) -> Outcome:
        rows: list[dict[str, Any]] = []
        total_cost: float | None = None
        t_prev = t_routed
        route_ms = (t_routed - t_in) * 1000
        for i, backend in enumerate(plan.chain):
            timing = CallTiming()
            t_call = time.perf_counter()
            if i:
                route_ms = (t_call - t_prev) * 1000    # the escalation decision
            try:
                reply, error = await self._call(backend, call, timing)
            except asyncio.CancelledError:          # shutdown or client gone: still account for it
                self._record(self._row(request_id, base, attrs, backend, timing, route_ms, t_in, t_call,
                                      None, BackendError("cancelled")))
                raise
            t_prev = time.perf_counter()
            backend.observe((t_prev - t_call) * 1000)
            if spent is not None:
                backend_s = (t_prev - t_call if timing.service_ms is None
                             else ((timing.queue_ms or 0.0) + timing.service_ms) / 1000)
                spent[BACKEND_S] = spent.get(BACKEND_S, 0.0) + backend_s
            last = i == len(plan.chain) - 1
            escalate = (error is None and not last and plan.threshold is not None
                        and reply.confidence is not None and reply.confidence < plan.threshold)
            row_id = request_id
            row_attrs = dict(attrs)
            if escalate:
                row_id = f"{request_id}#attempt" + (str(i + 1) if i else "")
                row_attrs["parent_id"] = request_id
            elif i:
                row_attrs["attempts"] = i
            row = self._row(row_id, base, row_attrs, backend, timing, route_ms, t_in, t_call, reply, error,
                            escalated=escalate)
            if row["cost_usd"] is not None:
                total_cost = (total_cost or 0.0) + row["cost_usd"]
            if i and not escalate and total_cost is not None:
                row["attrs"]["cascade_cost_usd"] = round(total_cost, 9)
            self._write(row, request_id)
            rows.append(row)
            if error is not None:
                raise GatewayError(error.http_status, error.error_type, str(error), request_id)
            if not escalate:
                self.metrics.observe("finops_gateway_request_duration_seconds", row["total_ms"] / 1000,
                                     backend.name)
                if cache_key is not None:
                    self.cache.put(cache_key, CachedAnswer(reply.text, backend.name, backend.model,
                                                           reply.input_tokens, reply.output_tokens,
                                                           reply.confidence))
                return Outcome(request_id, reply.text, row, rows, total_cost)
        raise AssertionError("a plan's chain is never empty")

    def _row(self, row_id: str, base: dict, attrs: dict, backend: Backend, timing: CallTiming,
             route_ms: float, t_in: float, t_call: float, reply: Reply | None, error: BackendError | None,
             *, escalated: bool = False) -> dict[str, Any]:
        t_end = time.perf_counter()
        ttft = None
        if timing.ttft_ms is not None:
            ttft = (t_call - t_in) * 1000 + (timing.queue_ms or 0.0) + timing.ttft_ms
        fields: dict[str, Any] = {
            **base, "request_id": row_id, "model": backend.model, "route": backend.name,
            "cache_hit": False, "escalated": escalated, "replica": timing.replica,
            "route_ms": _ms(route_ms), "queue_ms": _ms(timing.queue_ms), "prefill_ms": _ms(timing.prefill_ms),
            "decode_ms": _ms(timing.decode_ms), "service_ms": _ms(timing.service_ms),
            "ttft_ms": _ms(ttft), "total_ms": _ms((t_end - t_in) * 1000), "attrs": attrs,
        }
        if reply is not None:
            fields.update(status="ok", input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                          cached_input_tokens=reply.cached_input_tokens, confidence=reply.confidence,
                          cost_usd=(round(backend.cfg.cost_usd(reply.input_tokens, reply.output_tokens), 9)
                                    if backend.cfg.priced else None))
            if reply.attrs:
                fields["attrs"] = {**attrs, **reply.attrs}
        else:
            fields.update(status=error.status, error_type=error.error_type)
        return canonical_row(fields)

    def _record(self, row: dict[str, Any]) -> bool:
        """Log ``row`` and count it; False if the log could not take it.

        A failed write (a full disk, a revoked file) is counted in
        ``finops_gateway_log_write_errors_total`` and the row goes to the server
        log (stderr) instead, so the request is still on record somewhere.
        """
        written = True
        if not getattr(self.log, "closed", False):
            try:
                self.log.write(row)
            except OSError as exc:
                written = False
                self.metrics.inc("finops_gateway_log_write_errors_total")
                logger.error("request log write failed (%s); the row: %s", exc,
                             json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        self.metrics.inc("finops_gateway_requests_total", row["route"], row["status"])
        if row["queue_ms"] is not None:
            self.metrics.observe("finops_gateway_queue_seconds", row["queue_ms"] / 1000, row["route"])
        if row["escalated"]:
            self.metrics.inc("finops_gateway_escalations_total", row["route"])
        return written

    def _write(self, row: dict[str, Any], request_id: str) -> None:
        """Log ``row``; a request whose row cannot be logged fails with HTTP 500."""
        if not self._record(row):
            raise GatewayError(500, "log_write_failed", "the gateway could not write its request log",
                               request_id)
