"""The Trio adapter: serves the sans-IO Engine.IO/Socket.IO sessions over ASGI (Hypercorn).

One :class:`EngineIOEndpoint` per Engine.IO path. It speaks raw ASGI rather than going
through Quart routes: a polling request or a WebSocket frame then costs a dict lookup and
the session's own parsing, not Quart's request/response objects, context variables and
hook chain, which matters at thousands of connections per core (`volthub loadtest` measures the
CPU per delivery). :func:`volthub.http.events.listeners.mount` puts the product's two
endpoints in front of the Quart app; the conformance mode serves its own. The connection
and handler types are in :mod:`.connection`, the ASGI byte-level helpers in :mod:`.asgi`.

What a request comes to (refused, a new session with its OPEN packet queued, or a request
for a live session) is decided once, by :meth:`EngineIOEndpoint.decide`, for this mount and
for the gateway's endpoints (:mod:`.gateway`) alike; each listener only writes the answer.

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
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Final

import orjson
import trio

from volthub.http.cors import EVENTS, judged
from volthub.http.events.asgi import (
    CLOSE_GOING_AWAY,
    CLOSE_INTERNAL_ERROR,
    CLOSE_NORMAL,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    JSON_BODY,
    TEXT_PLAIN,
    Receive,
    Refusal,
    Scope,
    Send,
    close_websocket,
    header,
    message_data,
    query_params,
    raw_websocket_writer,
    read_body,
    refusal_headers,
    send_frame,
    wait_unless_disconnected,
    websocket_frame,
)
from volthub.http.events.connection import Connection, Handler
from volthub.http.observe import request_id, session_ended
from volthub.protocol.cors import ALLOW_ANY, CorsPolicy, Headers, Kind
from volthub.protocol.engineio.handshake import (
    WEBSOCKET,
    EngineIORequest,
    ErrorCode,
    HttpError,
    RequestKind,
    http_error,
    validate_request,
)
from volthub.protocol.engineio.packets import ProtocolError
from volthub.protocol.engineio.session import EngineIOSession, Event, SessionClosed, Settings, UpgradeCancelled, new_sid
from volthub.protocol.socketio.session import Disconnected, SocketIOSession

log = logging.getLogger(__name__)

# A new session from a browser origin that is not allowed ([events] cors_origins).
ORIGIN_REFUSED: Final = Refusal(403, {"code": int(ErrorCode.FORBIDDEN), "message": "Origin not allowed"})

# A polling GET that arrives while a WebSocket probes the same session is answered only
# once the probe has settled: the client may have sent "2probe" and "5" on the WebSocket
# before this GET (the official test-suites do), and those frames, in flight on another
# connection, must be applied first so that the GET is refused (400) on the upgraded
# session. The GET waits for "2probe" to be answered (it could only get a NOOP before
# that anyway), then this much longer for a "5" that may already be on its way. Real
# clients do not start a new GET while probing, so this costs them nothing; a GET already
# pending when the probe starts is released with a NOOP as before.
PROBE_SETTLE_SECONDS: Final = 0.1
# Why a stopping server ends its sessions. They get no access line each: the shutdown logs
# how many it ended, and a line per session was most of what a mass shutdown cost.
SHUTTING_DOWN: Final = "server shutting down"

SessionFactory = Callable[[str, Settings, str, float], EngineIOSession]
# Refuses a new session (e.g. a per-IP rate limit): None to let it in.
Admission = Callable[[Scope], Refusal | None]
# What the endpoint makes of an Engine.IO request (`EngineIOEndpoint.decide`).
Decision = Connection | EngineIORequest | HttpError | Refusal


class EngineIOEndpoint:
    # What carries a session here (the gateway's endpoints: their own).
    connection_type: type[Connection] = Connection
    # A session's requests may come from several tasks at once (a WebSocket's reader, polling
    # POSTs, the driver), so its application events are handled under its lock, in order.
    concurrent_requests = True

    def __init__(
        self,
        settings: Settings,
        handler: Handler,
        *,
        session_factory: SessionFactory | None = None,
        namespaces: Collection[str] | None = None,
        cors: CorsPolicy = ALLOW_ANY,
        admission: Admission | None = None,
        raw_writes: bool = True,
    ) -> None:
        self.settings = settings
        # Write pre-built frames straight to Hypercorn's connection (asgi.raw_websocket_writer).
        self.raw_writes = raw_writes
        self.handler = handler
        self.namespaces = frozenset(namespaces) if namespaces is not None else None
        self._factory = session_factory or self._socketio_session
        self.cors = cors
        # Every new session is admitted by `_admit`: its origin, then `admission`.
        self._more_admission = admission
        self.sessions: dict[str, Connection] = {}
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        # How operators see it (metrics labels, access lines); set by `describe`.
        self.route = ""
        self.listener = "mount"
        self.access_log = False

    def describe(self, route: str, listener: str, *, access_log: bool) -> None:
        """Name this endpoint for metrics and access lines: its route and listener
        (mount: the main port; gateway: the Events API's own)."""
        self.route, self.listener, self.access_log = route, listener, access_log

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
                    self.close_sessions(SHUTTING_DOWN)
        finally:
            self._nursery = None
            self.sessions.clear()

    def close_sessions(self, reason: str) -> int:
        """Release pending GETs and end every session still open as "going away" (clients
        reconnect): before the drivers go, and at shutdown through the connection registry
        (``ConnectionRegistry.close_all``); how many."""
        closed = 0
        for conn in list(self.sessions.values()):
            if not conn.session.closed:
                closed += 1
            self.dispatch_leave(conn, conn.close(reason, CLOSE_GOING_AWAY))
        return closed

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

    def decide(
        self, scope: Scope, method: str, query: Mapping[str, str], *, websocket: bool, origin_refused: bool = False
    ) -> Decision:
        """What to do with an Engine.IO request, before either listener answers it in its
        own I/O: refused (an HttpError of the protocol, or a Refusal of admission), a request
        for a live session (POLL, SEND, UPGRADE), or, for a request that opens a session, the
        new session: registered, its timers running, its OPEN packet queued as its first
        output. `origin_refused`: a polling request's origin was judged as it arrived."""
        found = validate_request(
            method, query, websocket=websocket, sessions=self.sessions, transports=self.settings.transports
        )
        if isinstance(found, HttpError) or found.kind is not RequestKind.OPEN:
            return found
        refusal = ORIGIN_REFUSED if origin_refused else self._admit(scope)
        if refusal is not None:
            return refusal
        return self._open(scope, found.transport, query)

    def _open(self, scope: Scope, transport: str, query: Mapping[str, str]) -> Connection:
        sid = new_sid()
        while sid in self.sessions:
            sid = new_sid()
        session = self._factory(sid, self.settings, transport, self.now())
        conn = self.connection_type(sid, session, self, query, scope.get("client"))
        conn.request_id = request_id(scope)
        self.sessions[sid] = conn
        self._start(conn)
        return conn

    def _start(self, conn: Connection) -> None:
        """Run a new session's timers: a driver task of its own."""
        assert self._nursery is not None
        self._nursery.start_soon(self._drive, conn, name=f"engine.io session {conn.sid}")

    def _session_of(self, request: EngineIORequest) -> Connection:
        """The live session a POLL, SEND or UPGRADE request names."""
        assert request.sid is not None, "validate_request names a live sid for every kind but OPEN"
        return self.sessions[request.sid]

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
            self.dispatch_leave(conn, conn.close("server error", CLOSE_INTERNAL_ERROR))
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
                lock = conn.lock if self.concurrent_requests else None
                if lock is not None:
                    await lock.acquire()
                try:
                    await self.handler.on_request(conn, event)
                except Exception:
                    log.exception("Socket.IO handler failed on %s", type(event).__name__)
                finally:
                    if lock is not None:
                        lock.release()
                conn.flush()

    def dispatch_leave(self, conn: Connection, events: Iterable[Event]) -> None:
        for event in events:
            if isinstance(event, SessionClosed) and conn.opened_at is not None and event.reason != SHUTTING_DOWN:
                session_ended(
                    self.route,
                    self.listener,
                    conn.session.transport,
                    time.monotonic() - conn.opened_at,
                    conn.request_id,
                    conn.client[0] if conn.client else "-",
                    event.reason,
                    self.access_log,
                )
                conn.opened_at = None  # one line per session
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
        verdict = judged(self.cors, method, scope.get("headers", ()), EVENTS)
        cors = verdict.headers  # what every answer below carries
        if verdict.kind is Kind.REFUSED_PREFLIGHT:
            await self._respond_error(send, http_error(ErrorCode.FORBIDDEN), cors)
            return
        if method == "OPTIONS":  # a preflight (then `cors` is its answer), or a bare OPTIONS
            await self._respond(send, 204, b"", [], cors)
            return
        found = self.decide(scope, method, query_params(scope), websocket=False, origin_refused=verdict.refused)
        if isinstance(found, Connection):  # opened: the first GET answers its OPEN packet
            await self._poll(found, receive, send, cors)
        elif isinstance(found, (HttpError, Refusal)):
            await self._respond(send, found.status, found.body, refusal_headers(found), cors)
        elif found.kind is RequestKind.POLL:
            await self._poll(self._session_of(found), receive, send, cors)
        else:
            await self._post(self._session_of(found), scope, receive, send, cors)

    async def _poll(self, conn: Connection, receive: Receive, send: Send, cors: Headers) -> None:
        session = conn.session
        await self._probe_settled(conn)
        if not await self._begun(conn, session.poll_begin, send, cors):
            return
        if not session.poll_ready:
            try:
                dropped = await wait_unless_disconnected(receive, conn.output.wait_for(lambda: session.poll_ready))
            except BaseException:  # cancelled (server shutdown): the GET is no longer pending
                self.dispatch_leave(conn, session.poll_abort(self.now()))
                raise
            if dropped:
                self.dispatch_leave(conn, session.poll_abort(self.now()))
                return
        body = session.poll_take()
        conn.changed()  # may have drained a closed session: the driver forgets it
        await self._respond(send, 200, body.encode("utf-8"), TEXT_PLAIN, cors)
        conn.wrote()

    async def _probe_settled(self, conn: Connection) -> None:
        """Before a polling GET or another WebSocket for a session that is upgrading or was
        upgraded a moment ago is answered: see PROBE_SETTLE_SECONDS."""
        session = conn.session
        if session.upgrading:
            with trio.move_on_after(self.settings.upgrade_timeout_ms / 1000):
                await conn.output.wait_for(lambda: not session.upgrading or session.probe_answered)
            with trio.move_on_after(PROBE_SETTLE_SECONDS):
                await conn.output.wait_for(lambda: not session.upgrading)
        if session.upgraded_at is not None and session.transport == WEBSOCKET:
            # About to be refused: the "3probe" sent on the WebSocket just before should
            # reach the client first, as it would from a server that saw the frames sooner.
            await trio.sleep_until(session.upgraded_at + PROBE_SETTLE_SECONDS)

    async def _post(self, conn: Connection, scope: Scope, receive: Receive, send: Send, cors: Headers) -> None:
        session = conn.session
        if (header(scope, b"content-type") or "").lower().startswith("application/octet-stream"):
            # v4 clients send text payloads only; binary bodies are the v3 XHR2 format.
            await self._respond_error(send, http_error(ErrorCode.BAD_REQUEST), cors)
            return
        if not await self._begun(conn, session.post_begin, send, cors):
            return
        try:
            body = await read_body(receive, self.settings.max_payload + 1)
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
                JSON_BODY,
                cors,
            )
            return
        conn.changed()
        # Handled before answering: the client sends its next POST only after "ok", so
        # events of one client are handled in the order it sent them.
        await self.dispatch(conn, events)
        await self._respond(send, 200, b"ok", TEXT_PLAIN, cors)

    async def _begun(
        self, conn: Connection, begin: Callable[[float], HttpError | None], send: Send, cors: Headers
    ) -> bool:
        """Start a polling GET or POST on the session (`begin`: its poll_begin or post_begin);
        False when the session refuses it, answered here."""
        try:
            refused = begin(self.now())
        except ProtocolError as exc:
            # A second GET (or POST) while one is pending: the session is over (a pending GET gets CLOSE).
            self.dispatch_leave(conn, exc.events)
            refused = http_error(ErrorCode.BAD_REQUEST)
        if refused is None:
            return True
        await self._respond_error(send, refused, cors)
        return False

    async def _respond_error(self, send: Send, error: HttpError, cors: Headers) -> None:
        await self._respond(send, error.status, error.body, JSON_BODY, cors)

    async def _respond(
        self,
        send: Send,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        cors: Headers,
    ) -> None:
        headers = headers + cors
        headers.append((b"content-length", str(len(body)).encode()))
        try:
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        except OSError:  # the client went away first
            pass

    def cors_headers(self, scope: Scope) -> Headers:
        """The CORS headers of an answer to `scope` (not a preflight: those are answered first)."""
        return self.cors.judge("GET", scope.get("headers", ())).headers

    def _admit(self, scope: Scope) -> Refusal | None:
        """A new session: refused for a browser origin that is not allowed (a WebSocket;
        polling requests are judged as they arrive: `decide`'s origin_refused), then by
        `admission`."""
        if scope["type"] == "websocket" and judged(self.cors, "GET", scope.get("headers", ()), EVENTS).refused:
            return ORIGIN_REFUSED
        return self._more_admission(scope) if self._more_admission else None

    # ------------------------------------------------------------------ WebSocket

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        found = self.decide(scope, "GET", query_params(scope), websocket=True)
        if isinstance(found, Connection):  # opened: its writer sends the OPEN packet first
            try:
                await send({"type": "websocket.accept"})
            except BaseException:
                self.dispatch_leave(found, found.session.transport_closed(self.now()))
                raise
            await self._carry(found, receive, send)
        elif isinstance(found, EngineIORequest):
            await self._upgrade(self._session_of(found), scope, receive, send)
        else:
            await self._refuse(scope, receive, send, found)

    async def _upgrade(self, conn: Connection, scope: Scope, receive: Receive, send: Send) -> None:
        session = conn.session
        await self._probe_settled(conn)  # the first WebSocket's frames go first
        refused = session.upgrade_begin(self.now())
        if refused is not None:
            if refused.code is ErrorCode.BAD_REQUEST:
                # Another WebSocket is probing or carrying this session: like the reference
                # server, accept this one and close it at once, leaving the session alone.
                await send({"type": "websocket.accept"})
                await close_websocket(send, CLOSE_NORMAL, "session already upgraded or upgrading")
                return
            await self._refuse(scope, receive, send, refused)
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
        await close_websocket(send, CLOSE_NORMAL, "upgrade failed")

    async def _probe(self, conn: Connection, receive: Receive, send: Send) -> bool:
        """Answer the probe; True once the client sent UPGRADE on this socket."""
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return False
            data = message_data(message)
            result = conn.session.receive_probe_frame(data, self.now())
            for frame in result.reply:
                await send_frame(send, frame)
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
                events = session.receive_frame(message_data(message), self.now())
            except ProtocolError as exc:
                conn.close_code = CLOSE_TOO_BIG if exc.http_status == 413 else CLOSE_PROTOCOL_ERROR
                conn.close_reason = exc.message[:120]
                self.dispatch_leave(conn, exc.events)
                continue
            conn.changed()
            await self.dispatch(conn, events)

    async def _write(self, conn: Connection, send: Send, done: trio.CancelScope) -> None:
        session = conn.session
        raw = raw_websocket_writer(send) if self.raw_writes else None
        while True:
            await conn.output.wait_for(lambda: bool(session.buffered) or session.closed)
            frames = session.take_outgoing()
            if raw is not None and frames:
                # Everything queued, as one write of pre-built frames (see asgi.websocket_frame).
                await raw(b"".join([websocket_frame(frame) for frame in frames]))
            else:
                for frame in frames:
                    await send_frame(send, frame)
            conn.wrote()
            if frames and session.closed:
                conn.control.fire()  # it may now be finished (an open session's deadlines did not move)
            if session.closed and not session.buffered:
                await close_websocket(send, conn.close_code, conn.close_reason)
                done.cancel()
                return

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, refusal: HttpError | Refusal) -> None:
        """Refuse a request before any session: HTTP status + JSON (WebSocket: the same,
        when the server supports the ASGI websocket.http.response extension)."""
        if scope["type"] == "http":
            await self._respond(send, refusal.status, refusal.body, refusal_headers(refusal), self.cors_headers(scope))
            return
        if "websocket.http.response" in scope.get("extensions", {}):
            await send(
                {"type": "websocket.http.response.start", "status": refusal.status, "headers": refusal_headers(refusal)}
            )
            await send({"type": "websocket.http.response.body", "body": refusal.body})
        else:
            await send({"type": "websocket.close", "code": 1008})
