"""The Events API's own listener: Engine.IO WebSocket and polling on a port of
their own (``[events] gateway_port``), without Hypercorn's per-connection machinery.

Same paths, sessions and application as the single-port mount (:mod:`.socketio`): each
path is a :class:`GatewayEndpoint`, an :class:`~.engineio.EngineIOEndpoint` whose polling
requests come from h11 instead of ASGI and whose WebSockets are read and written here.
The connections themselves (:class:`Link`, :class:`WireConnection`, :class:`Ticker`) are
in :mod:`.gateway_connections`; this module accepts them and routes them to the endpoints.

Tasks, and who owns them (all in the gateway's nursery, which the ``gateway`` service owns):
- one task per TCP connection: it parses HTTP (h11); a polling request is answered by the
  endpoint's polling code; a WebSocket becomes the connection's reader (client packets,
  the close) until it closes. Nothing else per connection;
- one carrier for the whole listener (:class:`Carrier`): while a WebSocket's task waits
  for input, the carrier reads its socket, answers pings and applies pongs itself, and
  wakes the task only for anything else;
- at most one writer task per connection, and only while the kernel's send buffer is full
  (:meth:`WireConnection._drain`);
- one ticker for the whole listener (:class:`Ticker`): Engine.IO timers (pings, pong,
  upgrade and connect timeouts) and the linger of closing sockets.

Writes: a WebSocket connection holds its stdlib socket (non-blocking). Output goes to the
kernel with ``socket.send`` in the task that produced it (the fan-out's bus listener, the
reader, the ticker): no wake-up, lock or channel per delivery. One event's two frames
are one pre-built bytes object (``SocketFrames.wire``) shared by every subscriber. Only
when the kernel takes less than all, the rest goes to a per-connection queue drained by
the writer task; a connection with more than ``[events] queue_size`` frames queued is
dropped as a slow consumer, as on the mount.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import h11
import trio

from volthub.http import observe
from volthub.http.events.asgi import (
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    JSON_BODY,
    Receive,
    Refusal,
    Scope,
    Send,
    header,
    query_params,
    refusal_headers,
    websocket_frame,
)
from volthub.http.events.connection import Connection, Handler
from volthub.http.events.engineio import SHUTTING_DOWN, EngineIOEndpoint
from volthub.http.events.gateway_connections import (
    BodyTimeout,
    Carrier,
    Link,
    Ticker,
    WireConnection,
    close_socket,
    has_body,
    recv,
    send_all,
)
from volthub.http.observe import request_id
from volthub.http.serving import AMBIGUOUS_LENGTH, ambiguous_length
from volthub.protocol.engineio.handshake import EngineIORequest, ErrorCode, HttpError
from volthub.protocol.engineio.packets import ProtocolError
from volthub.protocol.engineio.session import Settings
from volthub.protocol.websocket import (
    CLOSE_NORMAL,
    DEFAULT_MAX_FRAGMENTS,
    OP_PONG,
    Close,
    FrameReader,
    Ping,
    Received,
    WebSocketError,
    close_frame,
    server_frame,
    valid_client_key,
)

log = logging.getLogger(__name__)

# A plain HTTP route the gateway serves besides the Engine.IO paths (the chat-send fast
# path, volthub.http.chat_send): it reads the request's body from the link and answers on it.
HttpRoute = Callable[[Scope, Link], Awaitable[None]]


# ---------------------------------------------------------------------- endpoint


class GatewayEndpoint(EngineIOEndpoint):
    """One Engine.IO path on the gateway: the mount's polling logic, sessions without
    driver tasks (the gateway's ticker runs their timers), WebSockets read here."""

    connection_type = WireConnection
    # No lock per session: its requests come from one task at a time here (its WebSocket's
    # reader; polling POSTs one after another, post_begin refuses overlaps, and the official
    # clients upgrade only once no POST is in flight).
    concurrent_requests = False

    def __init__(self, gateway: Gateway, settings: Settings, handler: Handler, **options: Any) -> None:
        super().__init__(settings, handler, raw_writes=False, **options)
        self.gateway = gateway

    def _start(self, conn: Connection) -> None:
        """A new session's timers are the gateway ticker's."""
        assert isinstance(conn, WireConnection)
        self.gateway.ticker.reschedule(conn)

    def forget(self, conn: WireConnection) -> None:
        conn.gone = True
        if self.sessions.get(conn.sid) is conn:
            del self.sessions[conn.sid]

    def on_due(self, conn: WireConnection, now: float) -> None:
        """The ticker: a timer of ``conn`` is due."""
        try:
            if conn.close_by is not None and now >= conn.close_by:
                conn.close_by = None
                conn.abort()
            if conn.gone:
                return
            session = conn.session
            before = session.buffered
            events = session.on_timer(now)
            if events:
                self.dispatch_leave(conn, events)  # timers yield only leave events and UpgradeCancelled
            elif session.buffered != before:
                conn.changed()
        except Exception:  # a bug must cost this session, not every session of the gateway
            log.exception("Engine.IO session %s failed", conn.sid)
            self.dispatch_leave(conn, conn.close("server error", 1011))

    # ------------------------------------------------------------------ WebSocket

    async def open_websocket(
        self, link: Link, scope: Scope, query: dict[str, str]
    ) -> tuple[WireConnection, list[Received]] | None:
        """Answer a WebSocket request: refused (None), or the session it now carries and the
        client's frames already read. The caller then runs ``carry`` without holding the
        request (its headers would otherwise live as long as the connection)."""
        found = self.decide(scope, "GET", query, websocket=True)
        if isinstance(found, EngineIORequest):
            existing = self._session_of(found)
            assert isinstance(existing, WireConnection)
            return await self._upgrade_wire(existing, link)
        if isinstance(found, (HttpError, Refusal)):
            # A protocol error is answered with the request's CORS headers, as on polling.
            cors = self.cors_headers(scope) if isinstance(found, HttpError) else []
            await link.respond(found.status, found.body, refusal_headers(found), cors)
            return None
        assert isinstance(found, WireConnection)  # opened (the gateway's connection_type)
        try:  # the Engine.IO OPEN packet in the same write as the 101: one send less per connect
            await link.accept(b"".join([websocket_frame(frame) for frame in found.session.take_outgoing()]))
        except BaseException:
            self.dispatch_leave(found, found.session.transport_closed(self.now()))
            raise
        return found, link.reader.feed(link.take_leftover())

    async def _upgrade_wire(self, conn: WireConnection, link: Link) -> tuple[WireConnection, list[Received]] | None:
        session = conn.session
        await self._probe_settled(conn)  # the first WebSocket's frames go first
        refused = session.upgrade_begin(self.now())
        if refused is not None:
            if refused.code is ErrorCode.BAD_REQUEST:
                # Another WebSocket probes or carries this session: accept this one and close it.
                await link.accept()
                await link.send(close_frame(CLOSE_NORMAL, "session already upgraded or upgrading"))
                return None
            await link.respond(refused.status, refused.body, JSON_BODY, [])
            return None
        conn.changed()  # the upgrade timeout is now a deadline
        await link.accept()
        upgraded: list[Received] | None = None
        try:
            with trio.CancelScope() as probing:
                conn.probe_scope = probing
                upgraded = await self._probe_wire(conn, link)
        finally:
            conn.probe_scope = None
            if upgraded is None:
                session.upgrade_abort(self.now())
                conn.changed()
        if upgraded is not None:
            return conn, upgraded
        with contextlib.suppress(OSError):
            await link.send(close_frame(CLOSE_NORMAL, "upgrade failed"))
        return None

    async def _probe_wire(self, conn: WireConnection, link: Link) -> list[Received] | None:
        """Answer the probe; once the client sent UPGRADE, what followed it (for ``carry``)."""
        while True:
            try:
                received = await link.receive()
            except WebSocketError:
                return None
            if received is None:
                return None
            for index, item in enumerate(received):
                if isinstance(item, Ping):
                    await link.send(server_frame(OP_PONG, item.payload))
                    continue
                if isinstance(item, Close):
                    return None
                result = conn.session.receive_probe_frame(item, self.now())
                for frame in result.reply:
                    await link.send(websocket_frame(frame))
                conn.changed()  # after 3probe, the pending GET is released with a NOOP
                if result.upgraded:
                    return received[index + 1 :]
                if result.rejected:
                    return None

    async def carry(
        self, conn: WireConnection, sock: socket.socket, reader: FrameReader, backlog: list[Received]
    ) -> None:
        """This WebSocket carries the session: read until it is over (the connection's one
        task). Writes happen where output is produced (WireConnection.flush)."""
        session = conn.session
        conn.attach(sock)
        received: list[Received] | None = backlog
        del backlog
        answered = False  # the client sent its close frame
        read_to_end = False  # the client's end (or a reset) was read
        try:
            try:
                while received is not None:
                    answered = await self._apply(conn, received)
                    if answered or (session.closed and conn.closing):
                        break  # discard input until the client's end (or the linger's)
                    received = None  # not kept while idle
                    received = await self.gateway.carrier.next_frames(conn, sock, reader)
                    read_to_end = received is None
            except WebSocketError as exc:
                self.dispatch_leave(conn, conn.close(str(exc)[:120], exc.code))
            finally:
                conn.detached = True
                if not session.closed:  # the peer went away (or server shutdown)
                    self.dispatch_leave(conn, session.transport_closed(self.now()))
            # Nothing is left to wait for when the client's end was read already, or when
            # both close frames are exchanged and ours is with the kernel: the server then
            # closes the TCP connection first, as the WebSocket protocol asks. A shutdown ends
            # every socket one of these ways, as each client answers; waiting on each for
            # one more read would cost a wake-up apiece. Otherwise input is discarded until
            # the client's end (or the linger's).
            if not (read_to_end or (answered and conn.pending is None)):
                while await recv(sock):
                    pass
        finally:
            conn.release()
            conn.changed()

    async def _apply(self, conn: WireConnection, received: list[Received]) -> bool:
        """What the client sent; True once it sent its close (answered here)."""
        for item in received:
            if isinstance(item, Close):
                if not conn.closing:  # the client closes: answer with its code, then end
                    conn.close_code = CLOSE_NORMAL if item.code is None else item.code
                    conn.close_reason = ""
                    conn.close_wire()
                return True
            if isinstance(item, Ping):
                if not conn.closing:  # after our close frame nothing more may be sent
                    conn.write(server_frame(OP_PONG, item.payload))
            elif not conn.session.closed:
                await self._on_message(conn, item)
        return False

    async def _on_message(self, conn: WireConnection, message: str | bytes) -> None:
        try:
            events = conn.session.receive_frame(message, self.now())
        except ProtocolError as exc:
            conn.close_code = CLOSE_TOO_BIG if exc.http_status == 413 else CLOSE_PROTOCOL_ERROR
            conn.close_reason = exc.message[:120]
            self.dispatch_leave(conn, exc.events)
            return
        if events:
            await self.dispatch(conn, events)
        conn.changed()


# ---------------------------------------------------------------------- the listener


def _held_nothing() -> None:
    return None


class Gateway:
    """The listener: accepts, parses HTTP, routes to the endpoints; owns every task."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        keep_alive_timeout: float = 5.0,
        body_timeout: float = 30.0,
        access_log: bool = False,
        backlog: int = 2048,
        admit: Callable[[str], bool] | None = None,
        release: Callable[[str], None] | None = None,
        refusal: bytes = b"",
        reuse_port: bool = False,
        max_message_frames: int = DEFAULT_MAX_FRAGMENTS,
        claim_client: Callable[[Scope], Callable[[], None] | None] | None = None,
    ) -> None:
        self.host, self.port = host, port
        self._max_message_frames = max_message_frames
        self._reuse_port = reuse_port
        self.endpoints: dict[str, GatewayEndpoint] = {}
        self.routes: list[tuple[Callable[[str], bool], HttpRoute]] = []
        self.ticker = Ticker()
        self.carrier = Carrier()
        self._keep_alive = keep_alive_timeout
        self._body_timeout = body_timeout
        self._access_log = access_log
        self._backlog = backlog
        self._admit, self._release, self._refusal = admit, release, refusal
        # Each request's real client (behind a trusted proxy) and its hold on the cap; None: past it.
        self._claim_client = claim_client or (lambda scope: _held_nothing)
        self._listener: socket.socket | None = None
        self._nursery: trio.Nursery | None = None
        self.accepted = 0

    def add_endpoint(self, path: str, settings: Settings, handler: Handler, **options: Any) -> GatewayEndpoint:
        endpoint = self.endpoints[path] = GatewayEndpoint(self, settings, handler, **options)
        return endpoint

    def add_route(self, matches: Callable[[str], bool], serve: HttpRoute) -> None:
        """Serve the HTTP requests whose path `matches` with `serve` (not Engine.IO)."""
        self.routes.append((matches, serve))

    def _route(self, path: str) -> HttpRoute | None:
        return next((serve for matches, serve in self.routes if matches(path)), None)

    # ------------------------------------------------------------------ lifetime

    def bind(self) -> tuple[str, int]:
        """Open the listening socket (at start-up, so a taken port fails the start).
        With `reuse_port` (SO_REUSEPORT) the processes of `volthub serve --workers N` each
        bind the same gateway port and the kernel spreads new connections over them."""
        if self._listener is None:
            host = self.host.strip("[]")
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            listener = socket.socket(family, socket.SOCK_STREAM)
            try:
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if self._reuse_port and hasattr(socket, "SO_REUSEPORT"):
                    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                listener.bind((host, self.port))
                listener.listen(self._backlog)
                listener.setblocking(False)
            except OSError:
                listener.close()
                raise
            self._listener = listener
        return self.address

    @property
    def address(self) -> tuple[str, int]:
        assert self._listener is not None, "bind() first"
        name = self._listener.getsockname()
        return str(name[0]), int(name[1])

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    def spawn(self, task: Callable[[], Any]) -> bool:
        """Start ``task`` in the gateway's nursery; False when the gateway is not running."""
        if self._nursery is None:
            return False
        self._nursery.start_soon(task)
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; then end every session (their sockets close with their tasks)."""
        self.bind()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.ticker.run, self._on_due)
                nursery.start_soon(self.carrier.run)
                task_status.started()
                try:
                    await self._accept_loop(nursery)
                finally:
                    self.close_sessions(SHUTTING_DOWN)
        finally:
            self._nursery = None

    def _on_due(self, conn: WireConnection, now: float) -> None:
        endpoint = conn.endpoint
        assert isinstance(endpoint, GatewayEndpoint)
        endpoint.on_due(conn, now)

    def close_sessions(self, reason: str) -> int:
        return sum(endpoint.close_sessions(reason) for endpoint in self.endpoints.values())

    def stop_accepting(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            close_socket(listener)

    async def _accept_loop(self, nursery: trio.Nursery) -> None:
        while self._listener is not None:
            listener = self._listener
            try:
                await trio.lowlevel.wait_readable(listener)
            except trio.ClosedResourceError:
                return  # stop_accepting
            while True:
                try:
                    sock, client = listener.accept()
                except BlockingIOError:
                    break
                except OSError as exc:  # EMFILE and friends: let the others finish first
                    log.warning("gateway accept failed: %s", exc)
                    await trio.sleep(0.1)
                    break
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.accepted += 1
                nursery.start_soon(self._serve, sock, client)

    # ------------------------------------------------------------------ one connection

    async def _serve(self, sock: socket.socket, client: Any) -> None:
        peer = client[0] if isinstance(client, tuple) else "?"
        admitted = self._admit is None or self._admit(peer)
        release_claim = _held_nothing  # the claim of the request that became a WebSocket
        try:
            if not admitted:
                await send_all(sock, self._refusal)
                return
            address = (client[0], client[1]) if isinstance(client, tuple) else None
            link = Link(sock, address, self._max_message(), self._max_message_frames, self._body_timeout)
            opened = await self._requests(link)
            if opened is not None:
                conn, backlog, release_claim = opened
                del opened
                endpoint = conn.endpoint
                assert isinstance(endpoint, GatewayEndpoint)
                await endpoint.carry(conn, sock, link.reader, backlog)
        except (OSError, trio.ClosedResourceError):
            pass  # the peer went away
        except Exception:
            log.exception("gateway connection failed")
        finally:
            if admitted and self._release is not None:
                self._release(peer)
            release_claim()
            close_socket(sock)

    def _max_message(self) -> int:
        endpoint = next(iter(self.endpoints.values()), None)
        return endpoint.settings.max_payload + 16 if endpoint is not None else 1 << 20

    async def _requests(self, link: Link) -> tuple[WireConnection, list[Received], Callable[[], None]] | None:
        """HTTP requests on one connection until it closes (None) or becomes a WebSocket
        (the session it carries, what the client sent after the upgrade, and the release
        of its client's claim, which the WebSocket holds until it ends)."""
        while True:
            try:
                request = await link.next_request(self._keep_alive)
            except h11.RemoteProtocolError as exc:
                status = exc.error_status_hint
                await link.respond_error(
                    status,
                    "request_header_fields_too_large" if status == 431 else "bad_request",
                    "the request could not be parsed as HTTP/1.1",
                    close=True,
                )
                return None
            if request is None:
                return None
            target = request.target.decode("latin-1")
            path, _, query_string = target.partition("?")
            endpoint = self.endpoints.get(path[:-1] if path.endswith("/") else path)
            scope: Scope = {
                "type": "http",
                "method": request.method.decode("ascii", "replace"),
                "path": path,
                "query_string": query_string.encode("latin-1"),
                "headers": list(request.headers),
                "client": link.client,
            }
            release = self._claim_client(scope)
            if release is None:
                await link.respond_error(503, "server_busy", "too many open connections; retry shortly", close=True)
                return None
            answered: tuple[WireConnection, list[Received]] | bool = False
            try:
                answered = await self._answer(link, scope, endpoint, path)
            finally:
                if not isinstance(answered, tuple):
                    release()  # answered or refused: only a WebSocket keeps its claim
            if isinstance(answered, tuple):
                return (*answered, release)
            if not answered:
                return None

    async def _answer(
        self, link: Link, scope: Scope, endpoint: GatewayEndpoint | None, path: str
    ) -> tuple[WireConnection, list[Received]] | bool:
        """Answer one request: the session it became (a WebSocket), else whether the
        connection can take another request."""
        if ambiguous_length(scope["headers"]):
            await self._refuse(link, scope, 400, "bad_request", AMBIGUOUS_LENGTH)
            return False
        try:
            if not has_body(scope):
                await link.skip_body()  # its end, so the connection can be kept alive
            if endpoint is not None and "websocket" in (header(scope, b"upgrade") or "").lower():
                return await self._websocket(link, scope, endpoint) or False
            await self._request(link, scope, endpoint, path)
        except h11.RemoteProtocolError:  # the body's framing: chunk sizes, an early end
            await self._refuse(link, scope, 400, "bad_request", "the request body could not be read")
            return False
        except BodyTimeout:
            await self._refuse(link, scope, 408, "request_timeout", "the request body did not arrive in time")
            return False
        return link.reusable

    async def _websocket(
        self, link: Link, scope: Scope, endpoint: GatewayEndpoint
    ) -> tuple[WireConnection, list[Received]] | None:
        """A WebSocket request: the session it now carries, or None (refused: the
        connection ends)."""
        key = header(scope, b"sec-websocket-key")
        if scope["method"] != "GET" or not valid_client_key(key) or header(scope, b"sec-websocket-version") != "13":
            await link.respond_error(400, "bad_request", "not a valid WebSocket upgrade request", close=True)
            return None
        assert key is not None
        await link.start_websocket(key)
        scope["type"] = "websocket"
        return await endpoint.open_websocket(link, scope, query_params(scope))

    async def _request(self, link: Link, scope: Scope, endpoint: GatewayEndpoint | None, path: str) -> None:
        """Answer one plain HTTP request."""
        route = self._route(path) if endpoint is None else None
        if route is not None:
            await route(scope, link)
        elif endpoint is None:
            await link.skip_body()
            await link.respond_error(
                404, "not_found", "the gateway serves only the Events API's Engine.IO paths and its added routes"
            )
        else:
            await endpoint._http(scope, self._receive(link), self._send(link))

    async def _refuse(self, link: Link, scope: Scope, status: int, code: str, message: str) -> None:
        """Answer a request the connection cannot go on from, when nothing of its answer was
        written yet (one access line), then let the connection close."""
        if not link.answerable:
            return
        started = time.perf_counter()
        with contextlib.suppress(OSError):
            await link.respond_error(status, code, message, close=True)
        observe.finished(scope, status, time.perf_counter() - started, False, request_id(scope), self._access_log)

    @staticmethod
    def _receive(link: Link) -> Receive:
        done = False

        async def receive() -> dict[str, Any]:
            nonlocal done
            if not done:
                if link.reading_body:
                    event = await link.body_events()
                    if isinstance(event, h11.Data):
                        return {"type": "http.request", "body": bytes(event.data), "more_body": True}
                    if not isinstance(event, h11.EndOfMessage):
                        done = True
                        return {"type": "http.disconnect"}
                done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            # The body is read: the next thing to report is the client going away.
            while True:
                data = await recv(link.sock)
                if not data:
                    return {"type": "http.disconnect"}
                if link._http is not None:
                    link._http.receive_data(data)  # a pipelined request: kept for later

        return receive

    @staticmethod
    def _send(link: Link) -> Send:
        start: dict[str, Any] = {}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                headers = [(bytes(k), bytes(v)) for k, v in start.get("headers", ()) if bytes(k) != b"content-length"]
                await link.respond(int(start["status"]), bytes(message.get("body", b"")), headers, [])

        return send
