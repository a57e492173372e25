"""Conformance mode: the reference applications of the official protocol test-suites.

    volthub socketio-conformance --port 3000

(the command: volthub/tools/conformance_cli.py) serves, on the same adapter and protocol code as the product:

- ``/engine.io/``: Engine.IO v4, echoing every message back (socketio/engine.io-protocol,
  test-suite/);
- ``/socket.io/``: Socket.IO v5 with namespaces ``/`` and ``/custom`` (socketio/socket.io-protocol,
  test-suite/): on connect it emits ``auth`` with the handshake's auth payload; it answers
  ``message`` with ``message-back`` (same arguments) and acknowledges ``message-with-ack``
  with its arguments. Binary packets are accepted here (the suite sends them).

Both use pingInterval 300 ms, pingTimeout 200 ms, maxPayload 1,000,000 bytes,
connectTimeout 1000 ms, and answer CORS for any origin, as the suites expect.
"""

from __future__ import annotations

import logging
from typing import Final

import trio

from volthub.http.events.asgi import Receive, Scope, Send, answer_lifespan
from volthub.http.events.connection import Connection
from volthub.http.events.engineio import EngineIOEndpoint
from volthub.http.events.gateway import Gateway
from volthub.protocol.engineio.session import EngineIOSession, Event, MessageReceived, SessionClosed, Settings
from volthub.protocol.socketio.binary import BinarySocketIOSession
from volthub.protocol.socketio.session import ConnectRequest, Disconnected, EventReceived

log = logging.getLogger(__name__)

SETTINGS: Final = Settings(ping_interval_ms=300, ping_timeout_ms=200, max_payload=1_000_000, connect_timeout_ms=1000)
NAMESPACES: Final = frozenset({"/", "/custom"})


class EngineIOEcho:
    """Engine.IO reference app: every message goes back as it came (text or binary)."""

    async def on_request(self, conn: Connection, event: Event) -> None:
        if isinstance(event, MessageReceived):
            conn.session.send_message(event.data)

    def on_leave(self, conn: Connection, event: Disconnected | SessionClosed) -> None:
        pass


class SocketIOReference:
    """Socket.IO reference app of the socket.io-protocol test-suite."""

    async def on_request(self, conn: Connection, event: Event) -> None:
        session = conn.socketio
        if isinstance(event, ConnectRequest):
            if session.accept_connect(event.namespace) is not None:
                session.emit(event.namespace, "auth", event.auth)
        elif isinstance(event, EventReceived):
            if event.name == "message":
                session.emit(event.namespace, "message-back", *event.args)
            elif event.name == "message-with-ack" and event.ack_id is not None:
                session.ack(event.namespace, event.ack_id, event.args)

    def on_leave(self, conn: Connection, event: Disconnected | SessionClosed) -> None:
        pass


def _socketio_session(sid: str, settings: Settings, transport: str, now: float) -> EngineIOSession:
    return BinarySocketIOSession(sid, settings, transport, now, namespaces=NAMESPACES)


class ConformanceApp:
    """The ASGI app: the two endpoints, lifespan, and 404 elsewhere."""

    def __init__(self, settings: Settings = SETTINGS) -> None:
        # One WebSocket write per frame here: the official suites read a socket with one
        # `once("message")` listener at a time, so two frames arriving in one TCP segment
        # (the product's batched writes of pre-built frames) would lose the second to the
        # suite, though every real client reads them both.
        self.engineio = EngineIOEndpoint(settings, EngineIOEcho(), session_factory=EngineIOSession, raw_writes=False)
        self.socketio = EngineIOEndpoint(
            settings, SocketIOReference(), session_factory=_socketio_session, raw_writes=False
        )
        self._paths = {"/engine.io": self.engineio, "/socket.io": self.socketio}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own both endpoints' session drivers until cancelled."""
        async with trio.open_nursery() as nursery:
            await nursery.start(_run_endpoint, self.engineio)
            await nursery.start(_run_endpoint, self.socketio)
            task_status.started()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        path = scope.get("path", "")
        endpoint = self._paths.get(path[:-1] if path.endswith("/") else path)
        if endpoint is not None:
            await endpoint(scope, receive, send)
        elif scope["type"] == "http":
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
        else:
            await send({"type": "websocket.close", "code": 1008})


async def _run_endpoint(
    endpoint: EngineIOEndpoint, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    await endpoint.run(task_status=task_status)


async def serve(
    binds: list[str],
    *,
    shutdown: trio.Event | None = None,
    settings: Settings = SETTINGS,
    gateway: bool = False,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the conformance app on Hypercorn (or, with ``gateway``, on the Events API's own
    listener, http/events/gateway.py, at the first bind) until ``shutdown`` is set (or
    cancelled); reports the bound addresses (``http://host:port``) once listening."""
    if gateway:
        await _serve_gateway(binds[0], shutdown if shutdown is not None else trio.Event(), settings, task_status)
        return
    from hypercorn.config import Config
    from hypercorn.trio import serve as hypercorn_serve

    app = ConformanceApp(settings)
    config = Config()
    config.bind = binds
    config.accesslog = None
    config.graceful_timeout = 0.5
    stop = shutdown if shutdown is not None else trio.Event()
    async with trio.open_nursery() as nursery:

        async def listen(task_status: trio.TaskStatus[list[str]]) -> None:
            # Hypercorn types the app with its TypedDict scopes; ours reads the plain dicts ASGI passes.
            await hypercorn_serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)  # type: ignore[arg-type]
            nursery.cancel_scope.cancel()  # Hypercorn is done: stop the session drivers too

        await nursery.start(app.run)
        task_status.started(await nursery.start(listen))


async def _serve_gateway(
    bind: str, stop: trio.Event, settings: Settings, task_status: trio.TaskStatus[list[str]]
) -> None:
    host, _, port = bind.rpartition(":")
    listener = Gateway(host.strip("[]"), int(port))
    listener.add_endpoint("/engine.io", settings, EngineIOEcho(), session_factory=EngineIOSession)
    listener.add_endpoint("/socket.io", settings, SocketIOReference(), session_factory=_socketio_session)
    listener.bind()
    async with trio.open_nursery() as nursery:
        await nursery.start(listener.run)
        task_status.started([listener.url])
        await stop.wait()
        listener.stop_accepting()
        nursery.cancel_scope.cancel()
