"""The Trio adapter: serves the sans-IO Engine.IO/Socket.IO sessions over ASGI (Hypercorn).

One :class:`EngineIOEndpoint` per Engine.IO path. It speaks raw ASGI rather than going
through Quart routes: a polling request or a WebSocket frame then costs a dict lookup and
the session's own parsing, not Quart's request/response objects, context variables and
hook chain, which matters at thousands of connections per core (issue 7 benchmarks the
CPU per delivery). :func:`mount` puts the product's two endpoints in front of the Quart
app; the conformance mode serves its own.

Tasks, and who owns them:
- each HTTP request and WebSocket runs in the task Hypercorn gives it;
- each session has one *driver* task (its timers: pings, ping/upgrade/connect timeouts,
  close linger) in the endpoint's nursery, which :meth:`EngineIOEndpoint.run` owns and a
  service of the app (or the conformance server) runs. The driver forgets the session
  when it is over.

Waking: output for a connection (fan-out, emits, pings) fires ``conn.output``, which the
WebSocket writer or a pending polling GET waits on; anything that may move the session's
next deadline or end it fires ``conn.control`` as well, which the driver waits on.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl

import orjson
import trio

from volthub.protocol.engineio.handshake import (
    POLLING,
    WEBSOCKET,
    ErrorCode,
    HttpError,
    RequestKind,
    http_error,
    validate_request,
)
from volthub.protocol.engineio.packets import Frame, ProtocolError
from volthub.protocol.engineio.session import EngineIOSession, Event, SessionClosed, Settings, UpgradeCancelled, new_sid
from volthub.protocol.socketio.session import Disconnected, SocketIOSession

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
SessionFactory = Callable[[str, Settings, str, float], EngineIOSession]
# Refuses a new session (e.g. a per-IP rate limit): None to let it in.
Admission = Callable[[Scope], "Refusal | None"]

# WebSocket close codes (RFC 6455 §7.4.1).
CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_PROTOCOL_ERROR: Final = 1002
CLOSE_TOO_BIG: Final = 1009
CLOSE_TRY_AGAIN_LATER: Final = 1013
# A polling POST body must arrive within this long, or the POST is dropped.
BODY_TIMEOUT_SECONDS: Final = 30.0
_TEXT: Final = [(b"content-type", b"text/plain; charset=UTF-8")]
_JSON: Final = [(b"content-type", b"application/json")]


class Refusal(Exception):
    """An HTTP refusal outside the Engine.IO error set (status, JSON body, headers)."""

    def __init__(self, status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        super().__init__(body.get("message", ""))
        self.status = status
        self.body = orjson.dumps(body)
        self.headers = dict(headers or {})


class Handler(Protocol):
    """The application on top of the sessions (the Events API, or the conformance apps)."""

    async def on_request(self, conn: Connection, event: Event) -> None:
        """ConnectRequest, EventReceived, AckReceived or MessageReceived; one at a time
        per connection, in order."""

    def on_leave(self, conn: Connection, event: Disconnected | SessionClosed) -> None:
        """A namespace was left, or the session ended (always last). Must not block."""


class Signal:
    """Wakes every task waiting on it; each re-checks its own condition."""

    __slots__ = ("_lot",)

    def __init__(self) -> None:
        self._lot = trio.lowlevel.ParkingLot()

    def fire(self) -> None:
        if self._lot:
            self._lot.unpark_all()

    async def wait(self) -> None:
        await self._lot.park()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._lot.park()


class Connection:
    """One Engine.IO session, whatever carries it, plus what the application hangs on it."""

    __slots__ = (
        "sid",
        "session",
        "endpoint",
        "query",
        "client",
        "output",
        "control",
        "lock",
        "detached",
        "close_code",
        "close_reason",
        "probe_scope",
        "app",
    )

    def __init__(
        self,
        sid: str,
        session: EngineIOSession,
        endpoint: EngineIOEndpoint,
        query: Mapping[str, str],
        client: tuple[str, int] | None,
    ) -> None:
        self.sid = sid
        self.session = session
        self.endpoint = endpoint
        self.query = query  # of the request that opened the session
        self.client = client
        self.output = Signal()
        self.control = Signal()
        self.lock = trio.Lock()  # application events are handled one at a time, in order
        self.detached = False  # its WebSocket is gone: nothing more can be delivered
        self.close_code = CLOSE_NORMAL
        self.close_reason = ""
        self.probe_scope: trio.CancelScope | None = None
        self.app: Any = None  # the handler's per-connection state

    @property
    def socketio(self) -> SocketIOSession:
        assert isinstance(self.session, SocketIOSession)
        return self.session

    def now(self) -> float:
        return self.endpoint.now()

    def flush(self) -> None:
        """New output is queued: wake the writer or the pending GET."""
        self.output.fire()

    def changed(self) -> None:
        """Deadlines or the session's state may have changed: wake everyone."""
        self.output.fire()
        self.control.fire()

    def close(self, reason: str, code: int = CLOSE_NORMAL) -> list[Event]:
        """Close from the server side; queued frames still go out. Returns closing events
        for the caller to pass to ``endpoint.dispatch_leave``."""
        if not self.session.closed:
            self.close_code, self.close_reason = code, reason
        events = self.session.close(self.now(), reason)
        self.changed()
        return events


class EngineIOEndpoint:
    def __init__(
        self,
        settings: Settings,
        handler: Handler,
        *,
        session_factory: SessionFactory | None = None,
        namespaces: Collection[str] | None = None,
        cors_origins: Iterable[str] = ("*",),
        admission: Admission | None = None,
    ) -> None:
        self.settings = settings
        self.handler = handler
        self.namespaces = frozenset(namespaces) if namespaces is not None else None
        self._factory = session_factory or self._socketio_session
        self._cors = frozenset(cors_origins)
        self._admission = admission
        self.sessions: dict[str, Connection] = {}
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()

    def now(self) -> float:
        return trio.current_time()

    def _socketio_session(self, sid: str, settings: Settings, transport: str, now: float) -> EngineIOSession:
        return SocketIOSession(sid, settings, transport, now, namespaces=self.namespaces)

    # ------------------------------------------------------------------ lifetime

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the session drivers until cancelled; then close every session."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._ready.set()
                task_status.started()
                try:
                    await trio.sleep_forever()
                finally:
                    # Before the drivers go: release pending GETs and close the WebSockets.
                    for conn in list(self.sessions.values()):
                        self.dispatch_leave(conn, conn.close("server shutting down", CLOSE_GOING_AWAY))
        finally:
            self._nursery = None
            self.sessions.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._nursery is None:
            with trio.move_on_after(5):
                await self._ready.wait()
            if self._nursery is None:
                await self._refuse(scope, receive, send, Refusal(503, {"code": 3, "message": "Not ready"}))
                return
        if scope["type"] == "websocket":
            await self._websocket(scope, receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    # ------------------------------------------------------------------ sessions

    def _open(self, scope: Scope, transport: str, query: Mapping[str, str]) -> Connection:
        assert self._nursery is not None
        sid = new_sid()
        while sid in self.sessions:
            sid = new_sid()
        session = self._factory(sid, self.settings, transport, self.now())
        conn = Connection(sid, session, self, query, scope.get("client"))
        self.sessions[sid] = conn
        self._nursery.start_soon(self._drive, conn, name=f"engine.io session {sid}")
        return conn

    async def _drive(self, conn: Connection) -> None:
        """Run the session's timers until it is over, then forget it."""
        session = conn.session
        try:
            while not (session.finished or (session.closed and conn.detached)):
                deadline = session.next_deadline()
                with trio.move_on_at(math.inf if deadline is None else deadline):
                    await conn.control.wait()
                before = session.buffered
                events = session.on_timer(self.now())
                if events or session.buffered != before:
                    conn.changed()
                await self.dispatch(conn, events)
        except Exception:  # a bug must cost this session, not every session of the endpoint
            log.exception("Engine.IO session %s failed", conn.sid)
            self.dispatch_leave(conn, conn.close("server error", 1011))
        finally:
            if self.sessions.get(conn.sid) is conn:
                del self.sessions[conn.sid]
            conn.changed()

    async def dispatch(self, conn: Connection, events: Iterable[Event]) -> None:
        """Hand the session's events to the application, never letting it kill us."""
        for event in events:
            if isinstance(event, UpgradeCancelled):
                if conn.probe_scope is not None:
                    conn.probe_scope.cancel()
            elif isinstance(event, (Disconnected, SessionClosed)):
                self.dispatch_leave(conn, [event])
            else:
                async with conn.lock:
                    try:
                        await self.handler.on_request(conn, event)
                    except Exception:
                        log.exception("Socket.IO handler failed on %s", type(event).__name__)
                conn.flush()

    def dispatch_leave(self, conn: Connection, events: Iterable[Event]) -> None:
        for event in events:
            if isinstance(event, (Disconnected, SessionClosed)):
                try:
                    self.handler.on_leave(conn, event)
                except Exception:
                    log.exception("Socket.IO handler failed on %s", type(event).__name__)
            elif isinstance(event, UpgradeCancelled) and conn.probe_scope is not None:
                conn.probe_scope.cancel()
        conn.changed()

    # ------------------------------------------------------------------ HTTP (polling)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        origin = _header(scope, b"origin")
        if method == "OPTIONS":
            await self._respond(send, 204, b"", [], origin, preflight=_header(scope, b"access-control-request-headers"))
            return
        query = _query(scope)
        found = validate_request(
            method, query, websocket=False, sessions=self.sessions, transports=self.settings.transports
        )
        if isinstance(found, HttpError):
            await self._respond_error(send, found, origin)
            return
        if found.kind is RequestKind.OPEN:
            refusal = self._admission(scope) if self._admission else None
            if refusal is not None:
                await self._respond(
                    send, refusal.status, refusal.body, _JSON + _encode_headers(refusal.headers), origin
                )
                return
            conn = self._open(scope, POLLING, query)
            await self._poll(conn, receive, send, origin)
        elif found.kind is RequestKind.POLL:
            await self._poll(self.sessions[found.sid], receive, send, origin)
        else:
            await self._post(self.sessions[found.sid], scope, receive, send, origin)

    async def _poll(self, conn: Connection, receive: Receive, send: Send, origin: str | None) -> None:
        session = conn.session
        try:
            refused = session.poll_begin(self.now())
        except ProtocolError as exc:
            # A second GET while one is pending: the session is over, the first GET gets CLOSE.
            self.dispatch_leave(conn, exc.events)
            await self._respond_error(send, http_error(ErrorCode.BAD_REQUEST), origin)
            return
        if refused is not None:
            await self._respond_error(send, refused, origin)
            return
        if not session.poll_ready:
            try:
                dropped = await _wait_unless_disconnected(receive, conn.output.wait_for(lambda: session.poll_ready))
            except BaseException:  # cancelled (server shutdown): the GET is no longer pending
                self.dispatch_leave(conn, session.poll_abort(self.now()))
                raise
            if dropped:
                self.dispatch_leave(conn, session.poll_abort(self.now()))
                return
        body = session.poll_take()
        conn.changed()  # may have drained a closed session: the driver forgets it
        await self._respond(send, 200, body.encode("utf-8"), _TEXT, origin)

    async def _post(self, conn: Connection, scope: Scope, receive: Receive, send: Send, origin: str | None) -> None:
        session = conn.session
        if (_header(scope, b"content-type") or "").lower().startswith("application/octet-stream"):
            # v4 clients send text payloads only; binary bodies are the v3 XHR2 format.
            await self._respond_error(send, http_error(ErrorCode.BAD_REQUEST), origin)
            return
        try:
            refused = session.post_begin(self.now())
        except ProtocolError as exc:
            self.dispatch_leave(conn, exc.events)
            await self._respond_error(send, http_error(ErrorCode.BAD_REQUEST), origin)
            return
        if refused is not None:
            await self._respond_error(send, refused, origin)
            return
        try:
            body = await _read_body(receive, self.settings.max_payload + 1)
        except BaseException:  # cancelled: the POST is over either way
            self.dispatch_leave(conn, session.post_abort(self.now()))
            raise
        if body is None:
            self.dispatch_leave(conn, session.post_abort(self.now()))
            return
        try:
            events = session.receive_payload(body, self.now())
        except ProtocolError as exc:
            self.dispatch_leave(conn, exc.events)
            await self._respond(
                send,
                exc.http_status,
                orjson.dumps({"code": int(ErrorCode.BAD_REQUEST), "message": exc.message}),
                _JSON,
                origin,
            )
            return
        conn.changed()
        # Handled before answering: the client sends its next POST only after "ok", so
        # events of one client are handled in the order it sent them.
        await self.dispatch(conn, events)
        await self._respond(send, 200, b"ok", _TEXT, origin)

    async def _respond_error(self, send: Send, error: HttpError, origin: str | None) -> None:
        await self._respond(send, error.status, error.body, _JSON, origin)

    async def _respond(
        self,
        send: Send,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        origin: str | None,
        preflight: str | None = None,
    ) -> None:
        headers = headers + self._cors_headers(origin, preflight)
        headers.append((b"content-length", str(len(body)).encode()))
        try:
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        except OSError:  # the client went away first
            pass

    def _cors_headers(self, origin: str | None, preflight: str | None) -> list[tuple[bytes, bytes]]:
        if origin is None:
            return []
        if "*" in self._cors:
            allowed = b"*"
        elif origin in self._cors:
            allowed = origin.encode("latin-1")
        else:
            return []
        headers = [(b"access-control-allow-origin", allowed)]
        if allowed != b"*":
            headers.append((b"vary", b"Origin"))
        if preflight is not None:
            headers.append((b"access-control-allow-methods", b"GET, POST, OPTIONS"))
            headers.append((b"access-control-allow-headers", preflight.encode("latin-1") or b"content-type"))
            headers.append((b"access-control-max-age", b"86400"))
        return headers

    # ------------------------------------------------------------------ WebSocket

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        query = _query(scope)
        found = validate_request(
            "GET", query, websocket=True, sessions=self.sessions, transports=self.settings.transports
        )
        if isinstance(found, HttpError):
            await self._refuse(scope, receive, send, Refusal(found.status, orjson.loads(found.body)))
            return
        if found.kind is RequestKind.OPEN:
            refusal = self._admission(scope) if self._admission else None
            if refusal is not None:
                await self._refuse(scope, receive, send, refusal)
                return
            await send({"type": "websocket.accept"})
            conn = self._open(scope, WEBSOCKET, query)
            await self._carry(conn, receive, send)
        else:
            await self._upgrade(self.sessions[found.sid], scope, receive, send)

    async def _upgrade(self, conn: Connection, scope: Scope, receive: Receive, send: Send) -> None:
        session = conn.session
        refused = session.upgrade_begin(self.now())
        if refused is not None:
            await self._refuse(scope, receive, send, Refusal(refused.status, orjson.loads(refused.body)))
            return
        conn.changed()  # the upgrade timeout is now a deadline
        await send({"type": "websocket.accept"})
        upgraded = False
        try:
            with trio.CancelScope() as probing:
                conn.probe_scope = probing
                upgraded = await self._probe(conn, receive, send)
        finally:
            conn.probe_scope = None
            if not upgraded:
                session.upgrade_abort(self.now())
                conn.changed()
        if upgraded:
            await self._carry(conn, receive, send)
            return
        await _close_websocket(send, CLOSE_NORMAL, "upgrade failed")

    async def _probe(self, conn: Connection, receive: Receive, send: Send) -> bool:
        """Answer the probe; True once the client sent UPGRADE on this socket."""
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return False
            data = _message_data(message)
            result = conn.session.receive_probe_frame(data, self.now())
            for frame in result.reply:
                await _send_frame(send, frame)
            conn.changed()  # after 3probe, the pending GET is released with a NOOP
            if result.upgraded:
                return True
            if result.rejected:
                return False

    async def _carry(self, conn: Connection, receive: Receive, send: Send) -> None:
        """The session's transport is this WebSocket: read and write until it is over."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write, conn, send, nursery.cancel_scope)
                await self._read(conn, receive)
                nursery.cancel_scope.cancel()
        finally:
            if not conn.session.closed:  # cancelled from outside (server shutdown)
                self.dispatch_leave(conn, conn.session.transport_closed(self.now()))
            conn.detached = True
            conn.changed()

    async def _read(self, conn: Connection, receive: Receive) -> None:
        session = conn.session
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                self.dispatch_leave(conn, session.transport_closed(self.now()))
                return
            if session.closed:
                continue  # the writer is draining what is left and will close
            try:
                events = session.receive_frame(_message_data(message), self.now())
            except ProtocolError as exc:
                conn.close_code = CLOSE_TOO_BIG if exc.http_status == 413 else CLOSE_PROTOCOL_ERROR
                conn.close_reason = exc.message[:120]
                self.dispatch_leave(conn, exc.events)
                continue
            conn.changed()
            await self.dispatch(conn, events)

    async def _write(self, conn: Connection, send: Send, done: trio.CancelScope) -> None:
        session = conn.session
        while True:
            await conn.output.wait_for(lambda: bool(session.buffered) or session.closed)
            frames = session.take_outgoing()
            for frame in frames:
                await _send_frame(send, frame)
            if frames:
                conn.control.fire()  # a closed session may now be finished
            if session.closed and not session.buffered:
                await _close_websocket(send, conn.close_code, conn.close_reason)
                done.cancel()
                return

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, refusal: Refusal) -> None:
        """Refuse a request before any session: HTTP status + JSON (WebSocket: the same,
        when the server supports the ASGI websocket.http.response extension)."""
        if scope["type"] == "http":
            await self._respond(
                send, refusal.status, refusal.body, _JSON + _encode_headers(refusal.headers), _header(scope, b"origin")
            )
            return
        if "websocket.http.response" in scope.get("extensions", {}):
            await send(
                {
                    "type": "websocket.http.response.start",
                    "status": refusal.status,
                    "headers": _JSON + _encode_headers(refusal.headers),
                }
            )
            await send({"type": "websocket.http.response.body", "body": refusal.body})
        else:
            await send({"type": "websocket.close", "code": 1008})


# ---------------------------------------------------------------------- helpers


def _query(scope: Scope) -> dict[str, str]:
    """First value of each query parameter (Engine.IO sends each once)."""
    raw = scope.get("query_string", b"").decode("latin-1")
    found: dict[str, str] = {}
    for key, value in parse_qsl(raw, keep_blank_values=True):
        found.setdefault(key, value)
    return found


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _encode_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in headers.items()]


def _message_data(message: Mapping[str, Any]) -> Frame:
    text = message.get("text")
    return text if text is not None else bytes(message.get("bytes") or b"")


async def _send_frame(send: Send, frame: Frame) -> None:
    if isinstance(frame, str):
        await send({"type": "websocket.send", "text": frame})
    else:
        await send({"type": "websocket.send", "bytes": frame})


async def _close_websocket(send: Send, code: int, reason: str) -> None:
    try:
        await send({"type": "websocket.close", "code": code, "reason": reason})
    except Exception:  # already closed by the peer: nothing to tell it
        pass


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, cut at ``limit`` bytes (enough to tell it is too big); None when
    the client went away or was too slow."""
    chunks: list[bytes] = []
    size = 0
    with trio.move_on_after(BODY_TIMEOUT_SECONDS):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            if size < limit:
                chunks.append(chunk[: limit - size])
            size += len(chunk)
            if size >= limit or not message.get("more_body", False):
                return b"".join(chunks)
    return None


async def _wait_unless_disconnected(receive: Receive, waiting: Awaitable[None]) -> bool:
    """Await ``waiting``; True if the client disconnected first (then it is abandoned)."""
    dropped = False

    async def watch(cancel: trio.CancelScope) -> None:
        nonlocal dropped
        while (await receive())["type"] != "http.disconnect":
            pass
        dropped = True
        cancel.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        await waiting
        nursery.cancel_scope.cancel()
    return dropped
