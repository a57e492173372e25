"""How volthub is served by Hypercorn's trio worker: the one config builder, the descriptor
limit, a connection cap, and a narrow adaptation of Hypercorn's TCP server.

Why the adaptation: in Hypercorn 0.17/0.18 the connection close runs inside the
task that finished the response. Quart-Trio cancels that task's nursery as soon as the
request is over (it sees `http.disconnect`), so the close (`send_eof` / `aclose`) and the
restart of the keep-alive idle timer hit a cancelled scope and never happen. The effects:
`Connection: close` and HTTP/1.0 connections are never closed, idle keep-alive connections
never time out, a response sent before its request body was read leaves the connection in
limbo (the next request on it is never answered), and SIGTERM waits out its whole graceful
timeout. Upstream: Hypercorn issue "Connection:close ignored?".

The fix: `TCPServer.protocol_send` handles `Closed` and `Updated` (the close and the idle
timer) under a shielded cancel scope with a short deadline, so they complete even when the
caller's scope is cancelled and can never block shutdown. It is applied by
`install_hypercorn_fixes()`, which `create_app` calls, so it holds under `volthub serve` and
under `hypercorn --worker-class trio "volthub.http.app:create_app()"` alike. It is pinned to
the Hypercorn versions it was written against; on any other version it is not applied and a
warning says so (tests/http/test_connections.py fails then, showing whether the upstream
code still needs it).

More narrow changes ride along: when the peer closes, the idle timer is stopped at once
(upstream keeps the descriptor until keep_alive_timeout runs out); the 400/431 answers
Hypercorn writes itself for unparsable requests carry a JSON error body; and a WebSocket
message is refused (1009) past `[events] max_message_frames` frames, where upstream
(`WebsocketBuffer`) bounds only its bytes, so endless empty continuation frames were read;
and a client frame wsproto cannot accept (a close code nobody may send, say) is answered with
a close frame carrying wsproto's code (1002) before the connection closes, where upstream
dropped the TCP connection without one (wsproto reports the failure as a `CloseConnection`
while the connection is still open, which Hypercorn takes for nothing to answer).

Requests with both `Content-Length` and `Transfer-Encoding`: h11 (and so Hypercorn) goes by
`Transfer-Encoding` and keeps the connection open, so the next request on it is served.
RFC 9112 §6.1 lets a server either refuse such a request or serve it by its
`Transfer-Encoding`, and requires the connection to be closed after the answer either way.
Refusing is the safer choice: an intermediary that framed the message by its
`Content-Length` disagrees with us about where the next request starts (request smuggling),
and no well-behaved client sends both. `_create_stream` is wrapped so that such a request
is answered 400 with `Connection: close` before it reaches the app; the gateway applies the
same rule (`ambiguous_length`).

The patched `run` counts connections: past `[server] max_connections` in total or
`max_connections_per_address` from one address, a new connection gets a 503 and is closed at
once, instead of the process running out of file descriptors (`accept returned EMFILE`),
after which nobody gets in.

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
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import orjson
import trio

from volthub.protocol.client_address import NOBODY, TrustedProxies, client_of_scope

log = logging.getLogger("volthub.serving")

# Hypercorn releases whose trio TCPServer has the cancelled-close bug this module fixes.
PATCHED_HYPERCORN_VERSIONS = ("0.17.3", "0.18.0")
# The shielded close gets this long (a TLS close_notify to a peer that never reads could
# otherwise hold it open).
CLOSE_DEADLINE_SECONDS = 2.0
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

_installed = False


def hypercorn_version() -> str:
    try:
        return version("hypercorn")
    except PackageNotFoundError:  # pragma: no cover - hypercorn is a dependency
        return "unknown"


def install_hypercorn_fixes() -> bool:
    """Patch Hypercorn's trio TCPServer once per process; False (and a warning) when the
    installed Hypercorn is not one this adaptation was written for."""
    global _installed
    if _installed:
        return True
    found = hypercorn_version()
    if found not in PATCHED_HYPERCORN_VERSIONS:
        warnings.warn(
            f"volthub's connection-close fix was written for Hypercorn {', '.join(PATCHED_HYPERCORN_VERSIONS)}"
            f" and is NOT applied to {found}: check tests/http/test_connections.py",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    from hypercorn.protocol import ws_stream
    from hypercorn.protocol.h11 import H11Protocol
    from hypercorn.protocol.ws_stream import WebsocketBuffer
    from hypercorn.trio.tcp_server import TCPServer

    TCPServer.protocol_send = _shielded(TCPServer.protocol_send)  # type: ignore[method-assign, assignment]
    TCPServer.run = _capped(TCPServer.run)  # type: ignore[method-assign, assignment]
    TCPServer._read_data = _then_stop_idle_timer(TCPServer._read_data)  # type: ignore[method-assign, assignment]
    H11Protocol._send_error_response = _json_error_response  # type: ignore[method-assign]
    H11Protocol._create_stream = _unambiguous_only(H11Protocol._create_stream)  # type: ignore[method-assign, assignment]
    WebsocketBuffer.extend = _frame_counted(WebsocketBuffer.extend)  # type: ignore[method-assign, assignment]
    ws_stream.Connection = _connection_answering_failures(ws_stream.Connection)  # type: ignore[attr-defined]
    _installed = True
    return True


def _shielded(
    protocol_send: Callable[[Any, Any], Coroutine[Any, Any, None]],
) -> Callable[[Any, Any], Coroutine[Any, Any, None]]:
    from hypercorn.events import Closed, Updated

    async def protocol_send_shielded(self: Any, event: Any) -> None:
        if isinstance(event, Closed | Updated):
            # The close and the idle timer must happen even when the task that finished the
            # response is being cancelled; bounded, so shutdown never waits on a dead peer.
            with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_DEADLINE_SECONDS):
                await protocol_send(self, event)
            return
        await protocol_send(self, event)

    protocol_send_shielded.__wrapped__ = protocol_send  # type: ignore[attr-defined]
    return protocol_send_shielded


def _then_stop_idle_timer(
    read_data: Callable[[Any], Coroutine[Any, Any, None]],
) -> Callable[[Any], Coroutine[Any, Any, None]]:
    async def read_data_then_stop_idle_timer(self: Any) -> None:
        await read_data(self)
        # The peer has gone (EOF or error): nothing is left to wait for. Without this the
        # connection's task group waits out the keep-alive idle timer, holding the
        # descriptor for keep_alive_timeout after every client close.
        with trio.CancelScope(shield=True):
            await self.idle_task.stop()

    read_data_then_stop_idle_timer.__wrapped__ = read_data  # type: ignore[attr-defined]
    return read_data_then_stop_idle_timer


@dataclass
class WebSocketLimits:
    """What the patched WebSocket buffer allows (set from `[events]` by `adapt`)."""

    max_message_frames: int = 128


WEBSOCKET_LIMITS = WebSocketLimits()


@dataclass
class ProtocolErrorLines:
    """Whether the answers Hypercorn writes itself (unparsable or ambiguous requests) get an
    access line, as every other answer does (`[logging] access_log`, set by `adapt`)."""

    enabled: bool = True


PROTOCOL_ERROR_LINES = ProtocolErrorLines()


def _frame_counted(extend: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    def extend_counting_frames(self: Any, event: Any) -> None:
        from hypercorn.protocol.ws_stream import FrameTooLargeError

        if self.value is None:  # a new message
            self.volthub_frames = 0
        if event.frame_finished:  # wsproto may hand over one frame in several events
            if self.volthub_frames >= WEBSOCKET_LIMITS.max_message_frames:
                raise FrameTooLargeError()
            self.volthub_frames += 1
        extend(self, event)

    extend_counting_frames.__wrapped__ = extend  # type: ignore[attr-defined]
    return extend_counting_frames


def _connection_answering_failures(connection: type[Any]) -> type[Any]:
    from wsproto.connection import ConnectionState
    from wsproto.events import CloseConnection

    class ConnectionAnsweringFailures(connection):  # type: ignore[misc]
        """wsproto's server connection whose parse failures are answered with their close code."""

        def events(self) -> Any:
            for event in super().events():
                if isinstance(event, CloseConnection) and self.state is ConnectionState.OPEN:
                    # A frame wsproto refused (a real close frame moves the state on first):
                    # as the peer closing, so Hypercorn answers with this event's code.
                    self._state = ConnectionState.REMOTE_CLOSING
                yield event

    return ConnectionAnsweringFailures


def _capped(run: Callable[[Any], Coroutine[Any, Any, None]]) -> Callable[[Any], Coroutine[Any, Any, None]]:
    async def run_capped(self: Any) -> None:
        address = _peer_address(self.stream)
        if not LIMITS.admit(address):
            LIMITS.refused += 1
            await _refuse(self.stream)
            return
        try:
            await run(self)
        finally:
            LIMITS.release(address)

    run_capped.__wrapped__ = run  # type: ignore[attr-defined]
    return run_capped


# Hypercorn answers requests h11 cannot parse (400, 431 for an oversized head) with an empty
# body; give them the `{error, message}` body like every other error.
_PROTOCOL_ERRORS = {
    400: ("bad_request", "the request could not be parsed as HTTP/1.1"),
    413: ("payload_too_large", "the request is too large"),
    431: ("request_header_fields_too_large", "the request line or headers are too large"),
}


# Why a request with both framing headers is refused, on either listener.
AMBIGUOUS_LENGTH = "send Content-Length or Transfer-Encoding, not both: the request's length is ambiguous"


def ambiguous_length(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether a request says both how long its body is and how it is encoded."""
    names = {name.lower() for name, _ in headers}
    return b"content-length" in names and b"transfer-encoding" in names


def _unambiguous_only(
    create_stream: Callable[[Any, Any], Coroutine[Any, Any, None]],
) -> Callable[[Any, Any], Coroutine[Any, Any, None]]:
    async def create_stream_unless_ambiguous(self: Any, request: Any) -> None:
        if ambiguous_length(request.headers):
            from hypercorn.events import Closed

            # No stream: the app never sees it, and the loop reading this connection ends.
            await _send_json_error(self, 400, "bad_request", AMBIGUOUS_LENGTH, request.method.decode("latin-1"))
            await self.send(Closed())
            return
        await create_stream(self, request)

    create_stream_unless_ambiguous.__wrapped__ = create_stream  # type: ignore[attr-defined]
    return create_stream_unless_ambiguous


async def _json_error_response(self: Any, status_code: int) -> None:
    code, message = _PROTOCOL_ERRORS.get(status_code, ("bad_request", "the request could not be handled"))
    await _send_json_error(self, status_code, code, message)


async def _send_json_error(self: Any, status_code: int, code: str, message: str, method: str = "-") -> None:
    """The answer, then its metrics and one access line (the app never saw the request)."""
    import h11

    from volthub.http import observe

    body = orjson.dumps({"error": code, "message": message})
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *self.config.response_headers("h11"),
    ]
    await self._send_h11_event(h11.Response(status_code=status_code, headers=headers))
    await self._send_h11_event(h11.Data(data=body))
    await self._send_h11_event(h11.EndOfMessage())
    scope = {"method": method, "client": self.client}
    observe.finished(scope, status_code, 0.0, False, observe.new_request_id(), PROTOCOL_ERROR_LINES.enabled)


def _peer_address(stream: Any) -> str:
    sock = getattr(stream, "socket", None) or getattr(getattr(stream, "transport_stream", None), "socket", None)
    try:
        peer = sock.getpeername() if sock is not None else None
    except OSError:
        return "?"
    return str(peer[0]) if isinstance(peer, tuple) else str(peer)


async def _refuse(stream: Any) -> None:
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_DEADLINE_SECONDS):
        try:
            if hasattr(stream, "transport_stream"):  # TLS: no handshake for a refused peer
                await stream.transport_stream.aclose()
                return
            await stream.send_all(OVER_CAPACITY_RESPONSE)
            await stream.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await stream.aclose()


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
    install_hypercorn_fixes()
    if not settings.server.public_url:
        log.warning(
            "[server] public_url is not set: the OAuth issuer and absolute links use the bind address"
            " http://%s:%s; set it to the address clients use",
            settings.server.host,
            settings.server.port,
        )
    configure_limits(settings.server.max_connections, settings.server.max_connections_per_address, trusted(settings))
    WEBSOCKET_LIMITS.max_message_frames = settings.events.max_message_frames
    PROTOCOL_ERROR_LINES.enabled = settings.logging.access_log
    app.asgi_app = serving_middleware(app.asgi_app, settings.server.max_body_bytes, settings.server.body_timeout)


def stop_first_under_the_hypercorn_command(stop_trigger: Callable[[Callable[..., Awaitable[object]]], Any]) -> None:
    """Under the `hypercorn` command the parent process takes SIGTERM and tells its worker
    through a shared event, which the worker's trio runner polls with
    `check_multiprocess_shutdown_event` (looked up when the runner starts, after it has
    loaded the app). Wrapped by the app's `Server.stop_trigger`, so the server's stop runs
    in its order there too; nothing else calls it."""
    import hypercorn.trio.run as trio_runner
    from hypercorn.utils import check_multiprocess_shutdown_event

    trio_runner.check_multiprocess_shutdown_event = stop_trigger(check_multiprocess_shutdown_event)  # type: ignore[attr-defined]
