"""One Engine.IO session as the Trio adapter holds it, and the application's interface.

A :class:`Connection` pairs a sans-IO session with the signals its tasks wait on; the
:class:`Handler` is what sits on top (the Events API, or the conformance apps).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import trio

from volthub.http.events.asgi import CLOSE_NORMAL
from volthub.metrics import observe_lag
from volthub.protocol.engineio.session import EngineIOSession, Event, SessionClosed
from volthub.protocol.socketio.session import Disconnected, SocketIOSession


class Endpoint(Protocol):
    """The endpoint that owns a connection (`engineio.EngineIOEndpoint`), as the connection
    and the application use it."""

    def now(self) -> float: ...

    def dispatch_leave(self, conn: Connection, events: Iterable[Event]) -> None: ...


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
        "_output",
        "_control",
        "_lock",
        "detached",
        "close_code",
        "close_reason",
        "probe_scope",
        "app",
        "lag_since",
        "opened_at",
        "request_id",
    )

    def __init__(
        self,
        sid: str,
        session: EngineIOSession,
        endpoint: Endpoint,
        query: Mapping[str, str],
        client: tuple[str, int] | None,
    ) -> None:
        self.sid = sid
        self.session = session
        self.endpoint = endpoint
        self.query = query  # of the request that opened the session
        self.client = client
        # Made when first waited on: a gateway connection (http/events/gateway.py) never needs them.
        self._output: Signal | None = None
        self._control: Signal | None = None
        self._lock: trio.Lock | None = None
        self.detached = False  # its WebSocket is gone: nothing more can be delivered
        self.close_code = CLOSE_NORMAL
        self.close_reason = ""
        self.probe_scope: trio.CancelScope | None = None
        self.app: Any = None  # the handler's per-connection state
        # The commit time of a fan-out event whose write is to be timed (one sample per event).
        self.lag_since: float | None = None
        self.opened_at: float | None = time.monotonic()  # None once its end is logged
        self.request_id = ""  # of the request that opened it

    @property
    def output(self) -> Signal:
        """Fired when output is queued (the writer or a pending polling GET waits on it)."""
        if self._output is None:
            self._output = Signal()
        return self._output

    @property
    def control(self) -> Signal:
        """Fired when deadlines or the session's state may have changed (the driver waits on it)."""
        if self._control is None:
            self._control = Signal()
        return self._control

    @property
    def lock(self) -> trio.Lock:
        """Application events are handled one at a time, in order."""
        if self._lock is None:
            self._lock = trio.Lock()
        return self._lock

    @property
    def socketio(self) -> SocketIOSession:
        assert isinstance(self.session, SocketIOSession)
        return self.session

    def now(self) -> float:
        return self.endpoint.now()

    def flush(self) -> None:
        """New output is queued: wake the writer or the pending GET."""
        if self._output is not None:
            self._output.fire()

    def changed(self) -> None:
        """Deadlines or the session's state may have changed: wake everyone."""
        if self._output is not None:
            self._output.fire()
        if self._control is not None:
            self._control.fire()

    def deliver(self, frames: tuple[str, ...], wire: bytes, limit: int) -> str | None:
        """Queue one fan-out delivery (``frames``; ``wire`` is the same as pre-built
        WebSocket bytes, which a transport that writes bytes may use instead): the
        session's transport, or None when that would put more than ``limit`` frames in the
        queue."""
        session = self.session
        if session.buffered + len(frames) > limit:
            return None
        for frame in frames:
            session.send_frame(frame)
        self.flush()
        return session.transport

    def note_lag(self, since: float) -> None:
        """Time the next write of queued output from ``since`` (``volthub_events_lag_seconds``)."""
        if self.lag_since is None:
            self.lag_since = since

    def wrote(self) -> None:
        """Queued output went to the socket: record the lag sample waiting for it, if any."""
        since = self.lag_since
        if since is not None:
            self.lag_since = None
            observe_lag(since)

    def close(self, reason: str, code: int = CLOSE_NORMAL) -> list[Event]:
        """Close from the server side; queued frames still go out. Returns closing events
        for the caller to pass to ``endpoint.dispatch_leave``."""
        if not self.session.closed:
            self.close_code, self.close_reason = code, reason
        events = self.session.close(self.now(), reason)
        self.changed()
        return events
