"""What operators see of each request: request ids, access lines and HTTP metrics; and the
per-process gauges a scrape reads (`GET /metrics`, blueprints/health.py).

`middleware` wraps the whole ASGI app (the Engine.IO paths included): every response
carries `X-Request-Id` (the caller's when it sent a sane one, else a new one), every HTTP
request gets one access line (`volthub.access`) and is counted in
`volthub_http_requests_total` / `volthub_http_request_duration_seconds` by its route
template. WebSocket connections are Events API sessions: their line is written when the
session ends (`session_ended`), with the session's length.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from volthub import logs, metrics

if TYPE_CHECKING:
    from volthub.services.webhooks import Dispatcher

Scope = dict[str, Any]
Message = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

REQUEST_ID_HEADER: Final = "X-Request-Id"
REQUEST_ID_KEY: Final = "volthub.request_id"  # in the ASGI scope
ROUTE_KEY: Final = "volthub.route"  # in the ASGI scope, set once Quart has matched the route
UNMATCHED: Final = "unmatched"  # the route label of a path no route matches
_SANE_ID = re.compile(r"[A-Za-z0-9._:@/+=-]{1,128}")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Paths served ahead of Quart (the Engine.IO endpoints) name their route themselves.
FIXED_ROUTES: dict[str, str] = {}
# Sampled gauge children, made once.
_POOL_STATES = ("in_use", "idle", "waiting")


def new_request_id() -> str:
    return uuid.uuid4().hex


def request_id(scope: Scope) -> str:
    """The request's id: the caller's `X-Request-Id` when sane, else a new one (kept in the scope)."""
    found = scope.get(REQUEST_ID_KEY)
    if found is not None:
        return str(found)
    for name, value in scope.get("headers", ()):
        if name.lower() == b"x-request-id":
            text = value.decode("latin-1").strip()
            if _SANE_ID.fullmatch(text):
                found = text
            break
    found = found or new_request_id()
    scope[REQUEST_ID_KEY] = found
    return found


def client_of(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


def route_label(scope: Scope) -> str:
    route = scope.get(ROUTE_KEY)
    if route is not None:
        return str(route)
    path = scope.get("path", "")
    return FIXED_ROUTES.get(path.rstrip("/") or path, UNMATCHED)


def middleware(app: ASGIApp, access_log: bool) -> ASGIApp:
    async def asgi(
        scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id(scope)
        header = (b"x-request-id", rid.encode("latin-1"))
        status = 0
        streaming = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, streaming
            kind = message["type"]
            if kind in ("http.response.start", "websocket.http.response.start"):
                status = message["status"]
                headers = list(message.get("headers", ()))
                streaming = any(
                    n.lower() == b"content-type" and v.lower().startswith(b"text/event-stream") for n, v in headers
                )
                message = {**message, "headers": [*headers, header]}
            elif kind == "websocket.accept":
                status = 101
                message = {**message, "headers": [*message.get("headers", ()), header]}
            elif kind == "websocket.close" and not status:
                status = 403  # refused before it was accepted
            await send(message)

        # The Engine.IO adapter writes pre-built frames straight to Hypercorn's stream behind
        # `send` (asgi.raw_websocket_writer): let it find that stream through this wrapper.
        bound = getattr(send, "__self__", None)
        if bound is not None:
            send_with_id.__self__ = bound  # type: ignore[attr-defined]
        try:
            await app(scope, receive, send_with_id)
        finally:
            if kind == "http":
                finished(scope, status or 500, time.perf_counter() - started, streaming, rid, access_log)

    return asgi


def finished(scope: Scope, status: int, seconds: float, streaming: bool, rid: str, access_log: bool) -> None:
    """A request was answered: its metrics and access line (any listener)."""
    method = scope.get("method", "GET")
    route = route_label(scope)
    if metrics.enabled():
        counted, timed = _series(method, route, status)
        counted.inc()
        if not streaming:
            timed.observe(seconds)
    if access_log:
        _access_line(method, route, status, seconds, rid, client_of(scope))


# The request counter and duration histogram children of each (method, route, status),
# looked up once: `labels()` validates and locks on every call, which is a large part of a
# small request's bookkeeping. Bounded: methods fold into `_METHODS` or "other", routes are
# templates (or "unmatched"), statuses are the few this server answers with.
_SERIES: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def _series(method: str, route: str, status: int) -> tuple[Any, Any]:
    method_label = method if method in _METHODS else "other"
    key = (method_label, route, status)
    found = _SERIES.get(key)
    if found is None:
        found = _SERIES[key] = (
            metrics.HTTP_REQUESTS.labels(method_label, route, str(status)),
            metrics.HTTP_DURATION.labels(method_label, route),
        )
    return found


def _access_line(method: str, route: str, status: int, seconds: float, rid: str, client: str, **more: Any) -> None:
    duration_ms = round(seconds * 1000, 2)
    extra = "".join(f" {key}={value}" for key, value in more.items())
    logs.access(
        f"{method} {route} {status} {duration_ms} ms request_id={rid} client={client}{extra}",
        {
            "method": method,
            "path": route,
            "status": status,
            "duration_ms": duration_ms,
            "request_id": rid,
            "client": client,
            **more,
        },
    )


def session_ended(
    route: str, listener: str, transport: str, seconds: float, rid: str, client: str, reason: str, access_log: bool
) -> None:
    """An Events API session (Socket.IO over WebSocket or polling) ended: its access line."""
    if access_log:
        status = 101 if transport == "websocket" else 200
        _access_line("GET", route, status, seconds, rid, client, session=listener, transport=transport, reason=reason)


# ---------------------------------------------------------------------- sampled gauges


class SampledEndpoint(Protocol):
    """An Engine.IO endpoint, as the gauges count its sessions."""

    listener: str

    @property
    def sessions(self) -> Mapping[str, Any]: ...


class PooledDatabase(Protocol):
    def pool_stats(self) -> dict[str, int]: ...


def sample(endpoints: Iterable[SampledEndpoint], database: PooledDatabase) -> None:
    """Set this process's sampled gauges: Events API connections (Engine.IO sessions by
    transport and listener) and the database pool. SSE streams count themselves."""
    counts: dict[tuple[str, str], int] = {
        (transport, path): 0 for transport in ("websocket", "polling") for path in ("mount", "gateway")
    }
    for endpoint in endpoints:
        for conn in endpoint.sessions.values():
            session = conn.session
            if not session.closed:
                key = (session.transport, endpoint.listener)
                counts[key] = counts.get(key, 0) + 1
    for (transport, path), count in counts.items():
        metrics.EVENTS_CONNECTIONS.labels(transport, path).set(count)
    for state, value in database.pool_stats().items():
        metrics.DB_POOL_CONNECTIONS.labels(state).set(value)


SAMPLE_SECONDS: Final = 5.0


async def sampler_service(
    endpoints: Callable[[], Iterable[SampledEndpoint]], database: PooledDatabase, enabled: bool
) -> None:
    """Under `--workers`: keep this worker's sampled gauges fresh for scrapes another
    worker answers. One process samples at scrape time instead (no timer)."""
    if metrics.multiprocess_dir() is None or not enabled:
        return
    while True:
        sample(endpoints(), database)
        await trio.sleep(SAMPLE_SECONDS)


class MetricsScrape:
    """What a scrape reads besides the metric registry: the database pool it samples and
    the webhook outbox. Made once by the composition root; the Engine.IO endpoints, made
    after the services, are handed to each scrape."""

    def __init__(self, pool: PooledDatabase, webhooks: Dispatcher) -> None:
        self._pool = pool
        self._webhooks = webhooks

    async def exposition(self, endpoints: Iterable[SampledEndpoint]) -> bytes:
        """Every family, this process's gauges sampled now, and the webhook outbox read
        from the database (the same for every process)."""
        sample(endpoints, self._pool)
        pending, age = await self._webhooks.outbox_summary()
        return metrics.exposition(
            metrics.Sampled(
                {
                    "webhook_outbox_pending": ("Webhook deliveries waiting for their next attempt.", float(pending)),
                    "webhook_outbox_oldest_age_seconds": (
                        "How long the oldest delivery waiting for an attempt has waited (0: none waits).",
                        age,
                    ),
                }
            )
        )
