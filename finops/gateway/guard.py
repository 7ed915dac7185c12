"""What one client may cost the gateway, enforced where it is cheapest: before the work.

Two layers, both configured by ``[server]`` (:class:`~finops.gateway.config.ServerLimits`):

:class:`RequestGuard`   pure ASGI middleware. From the request head alone it
    checks the API key (401) and a declared ``Content-Length`` against
    ``max_body_bytes`` (413), before a byte of the body is read: an
    unauthenticated or oversized upload costs the gateway its head, not its
    body. The body is then read through a counting ``receive`` that stops a
    chunked body at ``max_body_bytes`` (413) and one that is not in within
    ``body_timeout_s`` (408). These answers close the connection, so the rest
    of an unread body is never read.
:func:`guarded_protocol`  uvicorn's HTTP protocol with a deadline on the request
    head (``header_timeout_s``, from connecting or from the previous response:
    a socket that never finishes its head is closed) and a cap on open
    connections (``max_connections``; one more is answered 503 and closed at
    once, so idle sockets cannot use up the process's file descriptors).
    uvicorn's own ``limit_concurrency`` (503 when as many requests are running)
    and ``timeout_keep_alive`` are set from the same section.
"""
from __future__ import annotations

import asyncio
import json
import logging
import resource
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi.responses import JSONResponse

from finops.gateway.config import ServerLimits
from finops.gateway.pipeline import Gateway, GatewayError

logger = logging.getLogger("finops.gateway")

Scope = MutableMapping[str, Any]
AsgiMessage = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[AsgiMessage]]
Send = Callable[[AsgiMessage], Awaitable[None]]

TENANT = "finops_tenant"        # the key of the authenticated tenant in the ASGI scope's state
MAX_TENANT_CHARS = 128
# Descriptors kept free under the process's limit: the listening socket, the log, Python's own
# files; every backend slot is counted on top as a possible upstream connection.
RESERVED_FDS = 64


class BodyRejected(GatewayError):
    """A request body refused while it was being read (too large, too slow): the connection closes."""

    close_connection = True


def error_response(status: int, error_type: str, message: str, request_id: str | None = None, *,
                   close: bool = False) -> JSONResponse:
    """The gateway's JSON error: ``{"error": {"type", "message", "request_id"}}``."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if close:
        headers["Connection"] = "close"
    return JSONResponse({"error": {"type": error_type, "message": message, "request_id": request_id}},
                        status_code=status, headers=headers)


class RequestGuard:
    """Pure ASGI middleware: authentication and the body limits, decided before the body is read.

    On success the tenant is in ``scope["state"][TENANT]`` and the app reads
    the body through a ``receive`` bounded by ``max_body_bytes`` and
    ``body_timeout_s``; past either it raises :class:`BodyRejected` (413, 408),
    which the app answers. With API keys configured every path needs one,
    ``/metrics`` and ``/healthz`` included; without keys ``X-Tenant`` names
    the tenant.
    """

    __slots__ = ("app", "gw", "max_body_bytes", "body_timeout_s")

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], gw: Gateway,
                 limits: ServerLimits):
        self.app, self.gw = app, gw
        self.max_body_bytes, self.body_timeout_s = limits.max_body_bytes, limits.body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        authorization = x_tenant = length = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"x-tenant":
                x_tenant = value.decode("latin-1")
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        try:
            tenant = self._tenant(authorization, x_tenant)
            if length is not None and not length.isdigit():
                raise GatewayError(400, "invalid_request_error", "Content-Length is not a number")
            if length is not None and int(length) > self.max_body_bytes:
                raise GatewayError(413, "request_too_large", f"the body is {int(length)} bytes; this gateway "
                                   f"takes at most {self.max_body_bytes} (max_body_bytes)")
        except GatewayError as exc:
            unread = chunked or length not in (None, b"0")
            await error_response(exc.http_status, exc.error_type, str(exc), close=unread)(scope, receive, send)
            return
        state = scope.get("state")
        if state is None:
            state = scope["state"] = {}
        state[TENANT] = tenant
        await self.app(scope, self._bounded(receive), send)

    def _tenant(self, authorization: str | None, x_tenant: str | None) -> str:
        if x_tenant is not None and len(x_tenant) > MAX_TENANT_CHARS:
            raise GatewayError(400, "invalid_request_error", f"X-Tenant is longer than {MAX_TENANT_CHARS} characters")
        return self.gw.authenticate(authorization, x_tenant)

    def _bounded(self, receive: Receive) -> Receive:
        limit, timeout_s = self.max_body_bytes, self.body_timeout_s
        deadline = asyncio.get_running_loop().time() + timeout_s
        received = 0
        complete = False

        async def bounded_receive() -> AsgiMessage:
            nonlocal received, complete
            if complete:                        # after the body: disconnect notices, unbounded
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyRejected(408, "request_timeout", f"the request body was not in within {timeout_s:g} s "
                                   "(body_timeout_s)") from None
            if message["type"] != "http.request":
                complete = True
                return message
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyRejected(413, "request_too_large",
                                   f"the body is over {limit} bytes, the most this gateway takes (max_body_bytes)")
            complete = not message.get("more_body", False)
            return message

        return bounded_receive


# ---------------------------------------------------------------- the HTTP protocol

def connection_cap(limits: ServerLimits, gw: Gateway) -> int:
    """``max_connections``, lowered to fit the descriptor limit (``ulimit -n``).

    Room is kept for :data:`RESERVED_FDS` and one upstream connection per
    backend slot; whatever is left is the most connections the gateway accepts.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limits.max_connections
    room = soft - RESERVED_FDS - sum(b.slots_total for b in gw.backends.values())
    cap = max(1, min(limits.max_connections, room))
    if cap < limits.max_connections:
        logger.warning("max_connections lowered from %d to %d to fit the descriptor limit of %d (ulimit -n)",
                       limits.max_connections, cap, soft)
    return cap


def _overloaded_response() -> bytes:
    body = json.dumps({"error": {"type": "overloaded", "message": "too many open connections; retry later",
                                 "request_id": None}}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\nconnection: close\r\nretry-after: 1\r\n\r\n%s" % (len(body), body))


OVERLOADED = _overloaded_response()


class _HeadDeadline:
    """Mixed into a uvicorn HTTP protocol (httptools or h11): the head deadline and the connection cap.

    The deadline is armed when the connection is made and again when a response
    is complete; when it fires, a connection with no request being served is
    closed (a request being served has ``body_timeout_s`` for its body).
    """

    header_timeout_s: float
    max_connections: int
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            logger.warning("connection refused: %d connections are open (max_connections)",
                           len(self.connections) - 1)
            transport.write(OVERLOADED)
            transport.close()
            return
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_deadline_passed)

    def _head_deadline_passed(self) -> None:
        self._head_timer = None
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            return                               # its head arrived: a request is being served
        if not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(http: str, header_timeout_s: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol ``http`` ("auto", "httptools", "h11") with :class:`_HeadDeadline`."""
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    elif http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    elif http == "auto":
        from uvicorn.protocols.http.auto import AutoHTTPProtocol as base
    else:
        raise ValueError(f"http must be auto, httptools or h11, not {http!r}")
    return type(f"Guarded{base.__name__}", (_HeadDeadline, base),
                {"header_timeout_s": header_timeout_s, "max_connections": max_connections})
