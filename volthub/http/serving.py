"""How volthub is served on the main port: the one Hypercorn config builder, the descriptor
limit, the connection caps and the early body reads. What volthub changes in Hypercorn
itself, each change for a named upstream behaviour, is in `hypercorn_fixes.py`.

Connection caps: Hypercorn's TCP server (as `hypercorn_fixes` changes it) counts each
connection in `LIMITS`; past `[server] max_connections` in total or
`max_connections_per_address` from one address, a new connection gets
`OVER_CAPACITY_RESPONSE` (503) and is closed. The gateway counts its connections in the same
`LIMITS`, so the caps hold for the process.

Behind a trusted proxy (`[server] trusted_proxies`) the address is not known at accept time:
every connection comes from the proxy, and one kept-alive proxy connection may carry requests
of many clients in turn. So a trusted proxy's connections count only towards the total, and
`serving_middleware` counts each request it passes on, while it runs, as one connection of
the forwarded client (a 503 past the cap). A proxy opens or borrows one upstream connection
per request in flight, so this is the number of connections that client holds through it;
an SSE stream or a WebSocket is one request for its whole life.
"""

from __future__ import annotations

import collections
import logging
import resource
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio

from volthub.protocol.client_address import NOBODY, TrustedProxies, client_of_scope

log = logging.getLogger("volthub.serving")

# Descriptors kept free for the database, log files and outgoing webhook connections when
# the connection cap is derived from the descriptor limit.
RESERVED_DESCRIPTORS = 256


@dataclass
class ConnectionLimits:
    """Open connections, counted by the patched TCP server (one instance per process)."""

    total: int = 0  # 0: derived from the descriptor limit at start
    per_address: int = 0  # 0: no per-address cap
    open: int = 0
    by_address: collections.Counter[str] = field(default_factory=collections.Counter)
    refused: int = 0
    trusted: TrustedProxies = NOBODY  # their connections count per forwarded client, per request

    def admit(self, address: str) -> bool:
        """A new connection from `address` (its socket peer), or False past a cap."""
        if self.total and self.open >= self.total:
            return False
        if not self.trusted.trusts(address) and not self.hold(address):
            return False
        self.open += 1
        return True

    def release(self, address: str) -> None:
        self.open -= 1
        if not self.trusted.trusts(address):
            self.let_go(address)

    def hold(self, address: str) -> bool:
        """One more connection of `address` under the per-address cap, or False past it."""
        if self.per_address and self.by_address[address] >= self.per_address:
            return False
        self.by_address[address] += 1
        return True

    def let_go(self, address: str) -> None:
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]


LIMITS = ConnectionLimits()

_OVER_CAPACITY_BODY = orjson.dumps({"error": "server_busy", "message": "too many open connections; retry shortly"})
OVER_CAPACITY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: application/json\r\n"
    b"retry-after: 1\r\n"
    b"connection: close\r\n"
    b"content-length: " + str(len(_OVER_CAPACITY_BODY)).encode() + b"\r\n\r\n" + _OVER_CAPACITY_BODY
)


# Why a request with both framing headers is refused, on either listener.
AMBIGUOUS_LENGTH = "send Content-Length or Transfer-Encoding, not both: the request's length is ambiguous"


def ambiguous_length(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request says both how long its body is and how it is encoded (header
    names in lower case, as both listeners' HTTP parsers give them)."""
    names = {name for name, _ in headers}
    return b"content-length" in names and b"transfer-encoding" in names


def serving_middleware(app: Any, max_body_bytes: int, timeout: float = 30.0) -> Any:
    """ASGI middleware for early body reads, which Hypercorn leaves to the app: a request
    body of up to `max_body_bytes` is read before the app runs and handed to it as it came.
    A route that refuses early (401, 403, 404, 415, 429) then leaves the connection at a
    message boundary, so it is kept alive and the client's next request on it is answered,
    instead of a close with unread data (a reset)."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await app(scope, receive, send)
            return
        # First the real client and its cap: a refused request is not read any further.
        release = claim_client(scope)
        if release is None:
            await _over_capacity(scope, send)
            return
        try:
            if scope["type"] == "websocket":
                await app(scope, receive, send)
                return
            body = _RequestBody(scope, receive, timeout)
            if _has_small_body(scope, max_body_bytes):
                body.receive = await _read_ahead(body.receive, max_body_bytes, timeout)
            await app(scope, body.tracked, body.guarded(send))
        finally:
            release()

    return asgi


def _nothing_held() -> None:
    return None


def claim_client(scope: dict[str, Any]) -> Callable[[], None] | None:
    """Judge a request by its real client, on either listener. Behind a trusted proxy,
    `scope["client"]` becomes the forwarded client (in place, so every layer and the access
    log see the same address) and the request counts as one of its connections until the
    returned release is called; None when that client is at its cap (answer 503). A request
    straight from its client was counted when it connected: the release does nothing."""
    peer = scope.get("client")
    if not LIMITS.trusted.trusts(peer[0] if peer else None):
        return _nothing_held
    client = scope["client"] = client_of_scope(scope, LIMITS.trusted)
    if client is None:  # neither a peer address nor a forwarded one: nothing to count it under
        return _nothing_held
    address = client[0]
    if not LIMITS.hold(address):
        LIMITS.refused += 1
        return None
    return lambda: LIMITS.let_go(address)


async def _over_capacity(scope: dict[str, Any], send: Any) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1013})  # try again later
        return
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"1"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": _OVER_CAPACITY_BODY})


# A request answered before its body was read has the rest of its body read and dropped
# (before its response ends, so Hypercorn keeps the connection) when it declared at most
# this many bytes; a larger or chunked one is answered with `Connection: close` instead.
# Hypercorn closes a connection whose request body was not read to its end either way.
DISCARD_MAX_BYTES = 1 << 20


class _RequestBody:
    """Whether the request body was read to its end, and what happens to a response sent
    before it was: drop the rest first (declared at most DISCARD_MAX_BYTES), or say
    `Connection: close` (Hypercorn then closes) rather than close unannounced."""

    def __init__(self, scope: dict[str, Any], receive: Any, timeout: float) -> None:
        self.receive = receive
        self.timeout = timeout
        length = _declared_length(scope)
        self.finished = trio.Event()
        if length == 0:
            self.finished.set()
        self.drainable = length is not None and length <= DISCARD_MAX_BYTES

    async def tracked(self) -> Any:
        message = await self.receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.finished.set()
        return message

    def guarded(self, send: Any) -> Any:
        async def send_guarded(message: dict[str, Any]) -> None:
            if not self.finished.is_set():
                if message["type"] == "http.response.start" and not self.drainable:
                    headers = [(n, v) for n, v in message.get("headers", ()) if n.lower() != b"connection"]
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
                elif message["type"] == "http.response.body" and not message.get("more_body", False):
                    if self.drainable:
                        await self._drain()
            await send(message)

        return send_guarded

    async def _drain(self) -> None:
        """Read (and drop) the rest of the body; the app's own reader may be taking part of it."""

        async def pull() -> None:
            while True:
                await self.tracked()

        with trio.move_on_after(self.timeout):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pull)
                await self.finished.wait()
                nursery.cancel_scope.cancel()


async def _read_ahead(receive: Any, max_body_bytes: int, timeout: float) -> Any:
    early: collections.deque[dict[str, Any]] = collections.deque()
    size = 0
    with trio.move_on_after(timeout):
        while size <= max_body_bytes:
            message = await receive()
            early.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
            size += len(message.get("body", b""))

    async def replay() -> Any:
        return early.popleft() if early else await receive()

    return replay


def _declared_length(scope: dict[str, Any]) -> int | None:
    """The Content-Length; 0 without one and not chunked; None when chunked or unreadable."""
    for name, value in scope.get("headers", ()):
        lowered = name.lower()
        if lowered == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            return None
    return 0


def _has_small_body(scope: dict[str, Any], max_body_bytes: int) -> bool:
    for name, value in scope.get("headers", ()):
        lowered = name.lower()
        if lowered == b"content-length":
            try:
                return 0 < int(value) <= max_body_bytes
            except ValueError:
                return False
        if lowered == b"transfer-encoding" and b"chunked" in value.lower():
            return True
    return False


def raise_descriptor_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the descriptor limit from %s to %s: %s", soft, target, exc)
    return soft


def configure_limits(
    max_connections: int, max_connections_per_address: int, trusted: TrustedProxies = NOBODY
) -> ConnectionLimits:
    """Set the caps; `max_connections` 0 derives one from the (raised) descriptor limit."""
    LIMITS.trusted = trusted
    soft = raise_descriptor_limit()
    LIMITS.total = max_connections or max(16, soft - RESERVED_DESCRIPTORS)
    # 0: a third of the total, so two greedy clients cannot take every descriptor.
    LIMITS.per_address = max_connections_per_address or max(1, LIMITS.total // 3)
    return LIMITS


def trusted(settings: Any) -> TrustedProxies:
    """The proxies whose X-Forwarded-For names the client: `[server] trusted_proxies`, or every
    peer under `[ratelimit] trust_forwarded_for`."""
    return TrustedProxies.of(settings.server.trusted_proxies, every_peer=settings.ratelimit.trust_forwarded_for)


def hypercorn_config(settings: Any, bind: str | None = None) -> Any:
    """The Hypercorn config volthub is served with (`volthub serve` and the tests)."""
    from hypercorn.config import Config

    server = settings.server
    config = Config()
    config.bind = [bind or f"{_bracket(server.host)}:{server.port}"]
    config.graceful_timeout = server.shutdown_timeout
    config.keep_alive_timeout = server.keep_alive_timeout
    config.accesslog = None
    # Bursts of hundreds of concurrent socket connects overflow Hypercorn's default 100.
    config.backlog = server.listen_backlog
    # Events API: a WebSocket message over [events] max_payload is refused (1009) before it is buffered.
    config.websocket_max_message_size = settings.events.max_payload + 1
    return config


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def adapt(app: Any, settings: Any) -> None:
    """Everything serving needs of the app, wherever it is served from (`volthub serve`,
    `hypercorn ... "volthub.http.app:create_app()"`, the tests' in-process Hypercorn)."""
    if not settings.server.public_url:
        log.warning(
            "[server] public_url is not set: the OAuth issuer and absolute links use the bind address"
            " http://%s:%s; set it to the address clients use",
            settings.server.host,
            settings.server.port,
        )
    configure_limits(settings.server.max_connections, settings.server.max_connections_per_address, trusted(settings))
    app.asgi_app = serving_middleware(app.asgi_app, settings.server.max_body_bytes, settings.server.body_timeout)
