"""The gateway's HTTP face (FastAPI). All decisions live in :class:`~finops.gateway.pipeline.Gateway`.

Endpoints
---------
``POST /v1/chat/completions``
    A subset of the OpenAI chat-completions API. Request: ``messages`` (``role``
    and ``content``, a string or a list of ``{"type": "text", "text": ...}``
    parts), optional ``model`` (a backend or model name pins the call; absent
    or ``"auto"`` lets the router choose), ``max_tokens`` (or
    ``max_completion_tokens``), ``user``. Other OpenAI fields are accepted and
    ignored (no streaming, tools or sampling parameters). Extension:
    ``"slow_inject": true`` asks a mock backend for its slow path.
    Response: ``id``, ``object``, ``created``, ``model``, ``choices[0].message``,
    ``usage`` (``prompt_tokens``, ``completion_tokens``, ``total_tokens``) and a
    ``finops`` object with the route, timings and cost of the request.
``POST /route``
    The seed gateway's shape: ``{"prompt": ..., "slow_inject": false}`` ->
    ``{"routed_to", "model", "queue_ms", "service_ms", "total_ms", "cost", ...}``.
``GET /metrics``   Prometheus text (see :mod:`finops.gateway.metrics`), including
    ``finops_gateway_overhead_seconds``: the gateway's own time per request,
    timed by :class:`OverheadTimer`, the outermost layer of the app.
``GET /healthz``   ``{"status": "ok", "backends": {...}}``.

Headers: ``Authorization: Bearer KEY`` (required on every path, ``/metrics`` and
``/healthz`` included, when the config lists keys; checked before the body is
read), ``X-Tenant`` (names the tenant when it does not), ``Cache-Control:
no-cache`` (skip the semantic cache). Errors are JSON, ``{"error": {"type",
"message", "request_id"}}``: 400 bad request, 401 unknown key, 404 unknown model,
408 body too slow, 413 body too large, 500 request log not writable, 502 backend
error (an upstream's own error body is never passed on), 503 queue full or too
many connections, 504 backend timeout. The limits are ``[server]`` in the TOML
(see :mod:`finops.gateway.guard`).
"""
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from finops.gateway.config import ServerLimits
from finops.gateway.guard import TENANT, RequestGuard, connection_cap, error_response, guarded_protocol
from finops.gateway.metrics import Metrics
from finops.gateway.pipeline import BACKEND_S, Gateway, GatewayError, GatewayRequest, Outcome

OVERHEAD = "finops_gateway_overhead_seconds"
# The endpoint label of the overhead histogram: a fixed set, so unknown paths cannot grow the series.
ENDPOINTS = {"/v1/chat/completions": "chat", "/route": "route", "/metrics": "metrics", "/healthz": "healthz"}

Scope = MutableMapping[str, Any]
AsgiMessage = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[AsgiMessage]]
Send = Callable[[AsgiMessage], Awaitable[None]]


class OverheadTimer:
    """Pure ASGI middleware: the gateway's own time per HTTP request, into ``finops_gateway_overhead_seconds``.

    Wrap the whole FastAPI app with it (outermost), so every layer of the
    framework is inside the timing. For each HTTP request it takes
    ``time.perf_counter()`` when the app is called and again when the final
    ``http.response.body`` message has been handed to the server, and observes
    the difference minus the backend time the handler left in
    ``scope["state"][BACKEND_S]`` (queue + service, seconds; absent = 0), under
    the endpoint label of :data:`ENDPOINTS` (``other`` for any other path).
    A request that ends in an unhandled exception or is cancelled sends no final
    body and is not observed. Lifespan and websocket scopes pass straight through.
    """

    __slots__ = ("app", "_observe")

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], metrics: Metrics):
        self.app = app
        self._observe = metrics.observe

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        state = scope.get("state")
        if state is None:
            state = scope["state"] = {}
        t_sent = 0.0

        async def timed_send(message: AsgiMessage) -> None:
            nonlocal t_sent
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                t_sent = time.perf_counter()

        await self.app(scope, receive, timed_send)
        if t_sent:
            self._observe(OVERHEAD, max(0.0, t_sent - t0 - state.get(BACKEND_S, 0.0)),
                          ENDPOINTS.get(scope["path"], "other"))


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.get("text", "") for p in self.content
                           if p.get("type") == "text" and isinstance(p.get("text"), str))
        return self.content or ""


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    user: str | None = None
    slow_inject: bool = False


class RouteRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    prompt: str
    slow_inject: bool = False


def summary(out: Outcome) -> dict[str, Any]:
    """The ``finops`` block of a response: where the request went, how long, what it cost."""
    row = out.row
    return {
        "request_id": out.request_id, "route": row["route"], "model": row["model"],
        "cache_hit": row["cache_hit"], "escalations": out.escalations, "strategy": row["strategy"],
        "tenant": row["tenant"], "sla_tier": row["sla_tier"], "confidence": row["confidence"],
        "route_ms": row["route_ms"], "queue_ms": row["queue_ms"], "service_ms": row["service_ms"],
        "total_ms": row["total_ms"], "cost_usd": None if out.cost_usd is None else round(out.cost_usd, 9),
    }


def _no_cache(cache_control: str | None) -> bool:
    return bool(cache_control) and "no-cache" in cache_control.lower()


def create_app(gw: Gateway) -> OverheadTimer:
    """The ASGI app over ``gw``: :class:`OverheadTimer` over :class:`RequestGuard` over the FastAPI app.

    The guard authenticates and bounds the body (``gw.cfg.server``) before the
    FastAPI app sees the request. The FastAPI app's lifespan starts the backends
    and closes the log.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await gw.start()
        try:
            yield
        finally:
            await gw.close()

    app = FastAPI(title="finops reference gateway", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.gateway = gw

    @app.exception_handler(GatewayError)
    async def gateway_error(request: Request, exc: GatewayError) -> JSONResponse:
        return error_response(exc.http_status, exc.error_type, str(exc), exc.request_id,
                              close=getattr(exc, "close_connection", False))

    @app.exception_handler(ValidationError)
    async def bad_request(request: Request, exc: ValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                             for e in exc.errors())
        return error_response(400, "invalid_request_error", problems)

    # The handlers read headers and validate the body themselves (pydantic-core on the raw
    # bytes) rather than through FastAPI's dependency injection: a third of the per-request
    # CPU of this gateway at high rates was spent solving header and body dependencies.
    # gw.handle adds the request's backend time to the scope's state, for OverheadTimer; the
    # tenant is in the state already (RequestGuard authenticated the request from its head).
    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> JSONResponse:
        body = ChatRequest.model_validate_json(await request.body())
        headers = request.headers
        state = request.scope["state"]
        out = await gw.handle(GatewayRequest(
            messages=tuple((m.role, m.text()) for m in body.messages), tenant=state[TENANT], endpoint="chat",
            max_tokens=body.max_tokens or body.max_completion_tokens, user=body.user, model=body.model,
            slow_inject=body.slow_inject, no_cache=_no_cache(headers.get("cache-control"))), state)
        row = out.row
        return JSONResponse({
            "id": out.request_id, "object": "chat.completion", "created": int(time.time()),
            "model": row["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": out.text},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": row["input_tokens"], "completion_tokens": row["output_tokens"],
                      "total_tokens": (row["input_tokens"] or 0) + (row["output_tokens"] or 0)},
            "finops": summary(out),
        })

    @app.post("/route")
    async def route(request: Request) -> JSONResponse:
        body = RouteRequest.model_validate_json(await request.body())
        state = request.scope["state"]
        out = await gw.handle(GatewayRequest(
            messages=(("user", body.prompt),), tenant=state[TENANT], endpoint="route",
            slow_inject=body.slow_inject, no_cache=_no_cache(request.headers.get("cache-control"))), state)
        info = summary(out)
        return JSONResponse({"routed_to": info["route"], "cost": info["cost_usd"], **info})

    @app.get("/metrics")
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(gw.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/healthz")
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "backends": {
            b.name: {"model": b.model, "kind": b.cfg.kind, "queue_length": b.waiting,
                     "in_flight": b.in_flight, "slots": b.slots_total}
            for b in gw.backends.values()}})

    return OverheadTimer(RequestGuard(app, gw, gw.cfg.server), gw.metrics)


def server_config(app: Any, limits: ServerLimits, max_connections: int, host: str, port: int, *,
                  http: str = "auto", **kwargs: Any):
    """A ``uvicorn.Config`` serving ``app`` within ``limits``: head deadline, connection cap, keep-alive."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, http=guarded_protocol(http, limits.header_timeout_s,
                                                                           max_connections),
                          timeout_keep_alive=limits.keep_alive_s, limit_concurrency=max_connections, **kwargs)


def serve(gw: Gateway, host: str = "127.0.0.1", port: int = 8000, *, log_level: str = "warning",
          graceful_timeout_s: float = 10.0, loop: str = "auto", http: str = "auto") -> None:
    """Serve ``gw`` with uvicorn until SIGINT/SIGTERM, within ``gw.cfg.server``'s limits.

    On shutdown uvicorn stops accepting, lets running requests finish (up to
    ``graceful_timeout_s``; each writes its row), then the lifespan closes the log.
    SIGHUP reopens the request log (after ``logrotate``) and nothing else.
    ``loop`` and ``http`` are uvicorn's: "auto" takes uvloop and httptools when
    installed (requirements.txt pins both), else asyncio and h11.
    """
    import gc
    import signal

    import uvicorn

    reopen = getattr(gw.log, "reopen", None)
    if reopen is not None:
        # Only sets a flag: the next row reopens the file, never a write cut in half by the signal.
        signal.signal(signal.SIGHUP, lambda signum, frame: reopen())
    app = create_app(gw)
    config = server_config(app, gw.cfg.server, connection_cap(gw.cfg.server, gw), host, port, http=http,
                           log_level=log_level, access_log=False, timeout_graceful_shutdown=graceful_timeout_s,
                           loop=loop)
    gc.collect()
    gc.freeze()          # start-up objects never need scanning again: shorter GC pauses under load
    server = uvicorn.Server(config)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        raise SystemExit(3)          # uvicorn.run's exit code when the server could not start


class ServerThread:
    """Serve an ASGI app with uvicorn in a daemon thread (tests, benchmarks, in-process runs).

    ``port=0`` picks a free port; ``url`` is known once the context is entered.
    With ``limits`` (a gateway's ``cfg.server``) the server enforces them as
    :func:`serve` does, ``max_connections`` as given; without, uvicorn's defaults.
    ``http`` is uvicorn's parser: "auto" (httptools when installed), "httptools" or "h11".
    Leaving the context asks uvicorn to shut down gracefully and waits for it.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, *, graceful_timeout_s: float = 5.0,
                 limits: ServerLimits | None = None, http: str = "auto"):
        import socket
        import threading

        import uvicorn

        if port == 0:
            with socket.socket() as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}"
        # log_config=None: leave the process's logging alone (uvicorn's dictConfig closes handlers).
        options = dict(log_config=None, access_log=False, timeout_graceful_shutdown=graceful_timeout_s, http=http)
        config = (uvicorn.Config(app, host=host, port=port, **options) if limits is None
                  else server_config(app, limits, limits.max_connections, host, port, **options))
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name=f"uvicorn-{port}", daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=15)
