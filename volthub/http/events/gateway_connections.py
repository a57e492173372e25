"""The gateway's connections on raw sockets: one accepted TCP connection (:class:`Link`:
HTTP through h11, then maybe a WebSocket), the Engine.IO session it carries
(:class:`WireConnection`, written to with ``socket.send`` from the producing task), the
one :class:`Ticker` that runs every connection's timers and the one :class:`Carrier` that
reads every carried WebSocket while its task waits. :mod:`.gateway` accepts the
connections and routes them to its endpoints.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import logging
import math
import select
import socket
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any, Final, Protocol

import h11
import orjson
import trio

from volthub.http.events.asgi import (
    JSON_BODY,
    Scope,
    header,
    websocket_frame,
)
from volthub.http.events.connection import Connection, Endpoint
from volthub.metrics import GATEWAY_SLOW_BODIES, observe_lag
from volthub.protocol.engineio.handshake import WEBSOCKET
from volthub.protocol.engineio.packets import PONG
from volthub.protocol.engineio.session import EngineIOSession
from volthub.protocol.websocket import (
    OP_PONG,
    FrameReader,
    Ping,
    Received,
    accept_key,
    close_frame,
    server_frame,
)

log = logging.getLogger(__name__)

READ_SIZE: Final = 65536

# Longest request line plus headers; longer is refused (431).
MAX_HEAD_BYTES: Final = 16384
# A closing WebSocket gets this long to take its last bytes and answer the close frame.
CLOSE_LINGER_SECONDS: Final = 5.0
# An HTTP response that cannot be written in this long is abandoned (the peer stopped reading).
SEND_TIMEOUT_SECONDS: Final = 30.0
# The ticker wakes at most once per this long; timers due in between run together at the
# next wake, so a timer is late by at most this much (the official suites time ping
# timeouts to the millisecond). With many connections the wait grows by TICK_PER_TIMER per
# scheduled timer, up to TICK_MAX_SECONDS: tens of thousands of sockets ping every
# pingInterval, and a wake per ping (each then answered by its own pong, in its own turn of
# the event loop) costs more than the ping itself; run together, their writes and pongs
# share the wakes. A ping 50 ms late is nothing against pingTimeout.
TICK_SECONDS: Final = 0.001
TICK_PER_TIMER: Final = 1e-6
TICK_MAX_SECONDS: Final = 0.05
# The writer task sends at most this many queued chunks per system call.
DRAIN_BATCH: Final = 64


# ---------------------------------------------------------------------- socket helpers


class BodyTimeout(Exception):
    """A request body stopped arriving: it was not complete within the body timeout."""


async def recv(sock: socket.socket) -> bytes:
    """What the peer sent next; b"" at its end (or a reset)."""
    while True:
        await trio.lowlevel.wait_readable(sock)
        try:
            return sock.recv(READ_SIZE)
        except BlockingIOError:
            continue
        except OSError:
            return b""


async def send_all(sock: socket.socket, data: bytes) -> None:
    """Write all of ``data`` (HTTP answers, probes: not the delivery path); OSError when the
    peer is gone or stops reading for SEND_TIMEOUT_SECONDS. When the kernel takes it all
    at once (nearly always) no timer is set up: a deadline costs more than the send."""
    try:
        sent = sock.send(data)
    except BlockingIOError:
        sent = 0
    if sent == len(data):
        return
    view = memoryview(data)[sent:]
    with trio.move_on_after(SEND_TIMEOUT_SECONDS):
        while view:
            try:
                view = view[sock.send(view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
        return
    raise OSError("the peer stopped reading")


def close_socket(sock: socket.socket) -> None:
    trio.lowlevel.notify_closing(sock)  # wakes a writer task waiting on it
    sock.close()


# ---------------------------------------------------------------------- connection


class Listener(Protocol):
    """The gateway (`gateway.Gateway`), as its connections use it."""

    @property
    def ticker(self) -> Ticker: ...

    def spawn(self, task: Callable[[], Any]) -> bool: ...


class GatewayPath(Endpoint, Protocol):
    """One Engine.IO path of the gateway (`gateway.GatewayEndpoint`), as its connections use it."""

    @property
    def gateway(self) -> Listener: ...

    def forget(self, conn: WireConnection) -> None: ...


class WireConnection(Connection):
    """An Engine.IO session served by the gateway. While a WebSocket carries it, ``sock``
    is that socket and output is written to it at once (``flush``)."""

    __slots__ = ("gateway", "sock", "pending", "pending_frames", "closing", "close_by", "scheduled", "gone")

    def __init__(
        self,
        sid: str,
        session: EngineIOSession,
        endpoint: GatewayPath,
        query: Mapping[str, str],
        client: tuple[str, int] | None,
    ) -> None:
        super().__init__(sid, session, endpoint, query, client)
        self.gateway = endpoint.gateway
        self.sock: socket.socket | None = None
        # Bytes the kernel did not take yet, with how many frames each chunk holds; None
        # while nothing waits (no writer task runs).
        self.pending: collections.deque[tuple[bytes | memoryview, int]] | None = None
        self.pending_frames = 0
        self.closing = False  # the WebSocket close frame is written or queued
        self.close_by: float | None = None  # a closing socket is cut at this time
        self.scheduled: int | None = None  # the ticker's entry for this connection (its millisecond)
        self.gone = False  # forgotten by its endpoint

    # ------------------------------------------------------------------ output

    def attach(self, sock: socket.socket) -> None:
        """The WebSocket ``sock`` carries the session from now on: send what is queued."""
        self.sock = sock
        self.flush()

    def flush(self) -> None:
        sock = self.sock
        if sock is None:
            super().flush()  # polling: wake the pending GET
            return
        session = self.session
        data, count = b"", 0
        if session.buffered:
            frames = session.take_outgoing()
            if frames:
                data, count = b"".join([websocket_frame(frame) for frame in frames]), len(frames)
        if session.closed and not self.closing:
            self.close_wire(data, count)  # the last frames and the close frame in one write
        elif data:
            self.write(data, count)

    def changed(self) -> None:
        self.flush()
        super().changed()
        session = self.session
        if not self.gone and session.closed and (session.finished or self.detached):
            self.endpoint.forget(self)  # type: ignore[attr-defined]
        if not self.gone or self.sock is not None:  # a forgotten session's socket may still linger
            self.gateway.ticker.reschedule(self)

    def pong(self, now: float) -> None:
        """The client answered our ping: its next timer is the next ping, later than the
        pong's deadline it is scheduled at (nothing else changes, nothing is queued)."""
        self.session.receive_pong(now)
        self.gateway.ticker.reschedule(self, moved_later=True)

    def note_lag(self, since: float) -> None:
        if self.sock is not None:  # a WebSocket here is written at once, in `deliver`
            observe_lag(since)
        else:
            super().note_lag(since)

    def deliver(self, frames: tuple[str, ...], wire: bytes, limit: int) -> str | None:
        session = self.session
        if self.sock is None or session.outbox or not wire:
            if session.buffered + self.pending_frames + len(frames) > limit:
                return None
            for frame in frames:
                session.send_frame(frame)
            self.flush()
            return session.transport
        # A socket here is the session's WebSocket.
        if self.pending is not None:  # the writer task is behind: queue, within the limit
            if self.pending_frames + len(frames) > limit:
                return None
            self.write(wire, len(frames))
            return WEBSOCKET
        # Nothing waits: `write`, inlined, as this runs once per delivery.
        try:
            sent = self.sock.send(wire)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.abort()
            return WEBSOCKET
        if sent < len(wire):
            self._keep(wire, sent, len(frames))
        return WEBSOCKET

    def write(self, data: bytes, frames: int = 0) -> None:
        """Send ``data`` now; what the kernel does not take waits for the writer task."""
        pending = self.pending
        if pending is not None:
            pending.append((data, frames))
            self.pending_frames += frames
            return
        sock = self.sock
        if sock is None:
            return
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.abort()
            return
        if sent < len(data):
            self._keep(data, sent, frames)

    def _keep(self, data: bytes, sent: int, frames: int) -> None:
        """The kernel took only ``sent`` bytes of ``data``: the writer task sends the rest."""
        self.pending = collections.deque(((memoryview(data)[sent:], frames),))
        self.pending_frames = frames
        if not self.gateway.spawn(self._drain):
            self.abort()  # the gateway is no longer running: nobody could drain it

    async def _drain(self) -> None:
        """The writer task: runs only while the kernel's buffer is full."""
        sock, pending = self.sock, self.pending
        if sock is None or pending is None:
            return
        try:
            while pending:
                await trio.lowlevel.wait_writable(sock)
                if len(pending) == 1:
                    data: bytes | memoryview = pending[0][0]
                else:
                    data = b"".join([chunk for chunk, _ in itertools.islice(pending, DRAIN_BATCH)])
                try:
                    sent = sock.send(data)
                except BlockingIOError:
                    continue
                while sent:
                    chunk, frames = pending[0]
                    if sent >= len(chunk):
                        pending.popleft()
                        self.pending_frames -= frames
                        sent -= len(chunk)
                    else:
                        pending[0] = (memoryview(chunk)[sent:], frames)
                        sent = 0
        except (OSError, trio.ClosedResourceError):
            self.abort()
            return
        finally:
            if self.pending is pending:
                self.pending = None
                self.pending_frames = 0
        if self.closing and self.sock is sock:
            self._shutdown_write()

    def close_wire(self, before: bytes = b"", frames: int = 0) -> None:
        """End the WebSocket with the close frame (``close_code``), after ``before`` (the
        session's last ``frames`` frames), then our side of the TCP connection; the reader
        waits for the client's end, CLOSE_LINGER_SECONDS at most."""
        self.closing = True
        self.write(before + close_frame(self.close_code, self.close_reason), frames)
        self.close_by = trio.current_time() + CLOSE_LINGER_SECONDS
        if self.pending is None:
            self._shutdown_write()
        self.gateway.ticker.reschedule(self)

    def _shutdown_write(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

    def abort(self) -> None:
        """Cut the connection (the peer is gone, or never took its last bytes): the reader
        sees the end and cleans up."""
        sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def release(self) -> None:
        """The reader is done with the socket (it closes it)."""
        self.sock = None
        self.pending = None
        self.pending_frames = 0

    def due(self) -> float | None:
        deadline = None if self.gone else self.session.next_deadline()
        if self.close_by is not None and (deadline is None or self.close_by < deadline):
            return self.close_by
        return deadline


# ---------------------------------------------------------------------- ticker


class Ticker:
    """Every gateway connection's timers, run by one task: a heap of the milliseconds that
    have timers due, each with its connections (a deadline is rounded up to its
    millisecond, never early). Plain integers keep the heap's comparisons cheap, and
    connections due in the same millisecond share one entry."""

    def __init__(self) -> None:
        self._slots: list[int] = []  # heap of milliseconds with connections due
        self._due: dict[int, list[WireConnection]] = {}
        self._count = 0  # entries, stale ones included
        self._wake: trio.CancelScope | None = None
        self._not_before = -math.inf

    def reschedule(self, conn: WireConnection, *, moved_later: bool = False) -> None:
        """Make sure ``conn``'s timers run at its next deadline. An entry at or before it
        re-checks then; but when the deadline was ``moved_later`` (a pong: every held socket,
        every ping interval) the connection gets a new entry and the early one is passed by
        when reached, rather than run for nothing."""
        due = conn.due()
        if due is None:
            return
        slot = math.ceil(due * 1000)
        scheduled = conn.scheduled
        if scheduled is not None and (scheduled == slot or (scheduled < slot and not moved_later)):
            return
        conn.scheduled = slot
        found = self._due.get(slot)
        if found is None:
            self._due[slot] = [conn]
            heapq.heappush(self._slots, slot)
        else:
            found.append(conn)
        self._count += 1
        wake = self._wake
        if wake is not None and slot / 1000 < wake.deadline:
            wake.deadline = max(slot / 1000, self._not_before)

    def __len__(self) -> int:
        return self._count

    async def run(self, on_due: Callable[[WireConnection, float], None]) -> None:
        slots, by_slot = self._slots, self._due
        while True:
            with trio.CancelScope(deadline=max(slots[0] / 1000, self._not_before) if slots else math.inf) as wake:
                self._wake = wake
                await trio.sleep_forever()
            self._wake = None
            now = trio.current_time()
            self._not_before = now + min(TICK_MAX_SECONDS, max(TICK_SECONDS, self._count * TICK_PER_TIMER))
            reached = now * 1000 + 1e-6  # a wake at a slot's own time runs it
            while slots and slots[0] <= reached:
                slot = heapq.heappop(slots)
                for conn in by_slot.pop(slot):
                    self._count -= 1
                    if conn.scheduled != slot:
                        continue  # superseded by an earlier entry
                    conn.scheduled = None
                    on_due(conn, now)
                    self.reschedule(conn)


# ---------------------------------------------------------------------- carrier

# Readiness events taken per look at the carrier's epoll set.
CARRIER_BATCH: Final = 1024


class _Carried:
    """A socket the carrier reads for its waiting task, and what it found for it."""

    __slots__ = ("conn", "sock", "reader", "task", "frames", "error")

    def __init__(
        self, conn: WireConnection, sock: socket.socket, reader: FrameReader, task: trio.lowlevel.Task
    ) -> None:
        self.conn, self.sock, self.reader, self.task = conn, sock, reader, task
        self.frames: list[Received] | None = None
        self.error: Exception | None = None


class Carrier:
    """Reads every carried WebSocket whose task waits for input, from one level-triggered
    epoll set, in one task.

    Held sockets mostly send pongs (one per ping interval each): read by the connection's
    own task, every pong costs a wake-up of that task, two epoll changes and a scheduler
    turn, which at tens of thousands of sockets is most of what holding them costs. Here a
    pong (and a WebSocket ping) is applied where it is read, with no task woken and no
    epoll change; anything else (a Socket.IO packet, a close, the end) wakes the waiting
    task with the frames, in order, and its socket leaves the set until it waits again.
    """

    def __init__(self) -> None:
        self._epoll: select.epoll | None = select.epoll()
        self._waiting: dict[int, _Carried] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    async def next_frames(
        self, conn: WireConnection, sock: socket.socket, reader: FrameReader
    ) -> list[Received] | None:
        """The client's next frames that need ``conn``'s task; None at its end (WebSocketError
        when it breaks the protocol)."""
        epoll = self._epoll
        if epoll is None:
            raise trio.ClosedResourceError("the gateway is not running")
        fd = sock.fileno()
        epoll.register(fd, select.EPOLLIN)
        carried = self._waiting[fd] = _Carried(conn, sock, reader, trio.lowlevel.current_task())

        def abort(_: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
            self._leave(fd)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)
        if carried.error is not None:
            raise carried.error
        return carried.frames

    def _leave(self, fd: int) -> None:
        self._waiting.pop(fd, None)
        if self._epoll is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)

    def _wake(self, fd: int, carried: _Carried) -> None:
        self._leave(fd)
        trio.lowlevel.reschedule(carried.task)

    async def run(self) -> None:
        epoll = self._epoll
        assert epoll is not None, "a carrier runs once"
        waiting = self._waiting
        try:
            while True:
                await trio.lowlevel.wait_readable(epoll.fileno())
                for fd, _ in epoll.poll(0, CARRIER_BATCH):
                    carried = waiting.get(fd)
                    if carried is not None:
                        self._read(fd, carried)
        finally:
            self._epoll = None
            epoll.close()

    def _read(self, fd: int, carried: _Carried) -> None:
        try:
            data = carried.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._wake(fd, carried)  # no frames: the end
            return
        conn = carried.conn
        try:
            received = carried.reader.feed(data)
            for index, item in enumerate(received):
                if item == PONG:  # a client's answer to our ping
                    conn.pong(trio.current_time())
                elif isinstance(item, Ping):
                    if not conn.closing:  # after our close frame nothing more may be sent
                        conn.write(server_frame(OP_PONG, item.payload))
                else:
                    carried.frames = received[index:]
                    self._wake(fd, carried)
                    return
        except Exception as exc:  # WebSocketError, or a bug: the task deals with it as with its own read
            carried.error = exc
            self._wake(fd, carried)


# ---------------------------------------------------------------------- one TCP connection


class Link:
    """One accepted TCP connection: HTTP requests (h11), then maybe a WebSocket."""

    __slots__ = ("sock", "client", "reader", "_http", "_key", "_leftover", "_body_timeout", "_body_deadline")

    def __init__(
        self,
        sock: socket.socket,
        client: tuple[str, int] | None,
        max_message: int,
        max_fragments: int,
        body_timeout: float,
    ) -> None:
        self.sock = sock
        self.client = client
        self.reader = FrameReader(max_message, max_fragments=max_fragments)
        self._http: h11.Connection | None = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._key = ""
        self._leftover = b""
        self._body_timeout = body_timeout
        self._body_deadline = math.inf  # armed at the body's first wait

    # ------------------------------------------------------------------ HTTP

    async def _event(self) -> Any:
        """The next HTTP event (h11.RemoteProtocolError when the client breaks HTTP/1.1;
        BodyTimeout when its request body stops arriving)."""
        http = self._http
        assert http is not None
        while True:
            event = http.next_event()
            if event is not h11.NEED_DATA:
                return event
            if http.their_state is h11.SEND_BODY:
                http.receive_data(await self._body_bytes())
            else:
                http.receive_data(await recv(self.sock))

    async def _body_bytes(self) -> bytes:
        """More of the request body, within the request's body deadline: every read of a
        body (the answer's or one skipped before it) shares it, so a client that stops
        sending cannot hold the connection and its [server] max_connections slot. The timer
        starts at the first wait: a body that came with its head needs none."""
        if self._body_deadline == math.inf:
            self._body_deadline = trio.current_time() + self._body_timeout
        with trio.move_on_at(self._body_deadline):
            return await recv(self.sock)
        GATEWAY_SLOW_BODIES.inc()
        raise BodyTimeout("the request body did not arrive in time")

    async def next_request(self, idle_timeout: float) -> h11.Request | None:
        """The next request's head; None when the client is done (or idle too long)."""
        http = self._http
        assert http is not None
        self._body_deadline = math.inf
        if http.our_state is h11.DONE and http.their_state is h11.DONE:
            http.start_next_cycle()
        elif http.our_state is not h11.IDLE:
            return None
        else:  # the connection's first request (later ones start with start_next_cycle)
            first = self._first_request(http)
            if first is not None:
                return first
        with trio.move_on_after(idle_timeout):
            event = await self._event()
            return event if isinstance(event, h11.Request) else None
        return None

    def _first_request(self, http: h11.Connection) -> h11.Request | None:
        """A new connection's first request when the client sent it before we accepted (the
        rule under load): read without waiting, so neither the epoll registrations of a wait
        nor the idle timer are paid for it. Only the first: the task has just started, so
        skipping its checkpoint here cannot starve the others."""
        try:
            data = self.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        http.receive_data(data)
        event = http.next_event()
        return event if isinstance(event, h11.Request) else None

    async def body_events(self) -> Any:
        return await self._event()

    def buffered_event(self) -> Any | None:
        """The next event when what was received already holds it, else None (without
        waiting)."""
        http = self._http
        assert http is not None
        event = http.next_event()
        return None if event is h11.NEED_DATA else event

    async def skip_body(self, limit: int = 65536) -> None:
        """Read the rest of a request we answer without its body (so the connection can
        be kept alive); beyond ``limit`` bytes it is left unread and the answer closes."""
        size = 0
        while self._http is not None and self._http.their_state is h11.SEND_BODY and size <= limit:
            event = await self._event()
            if isinstance(event, h11.Data):
                size += len(event.data)

    async def respond(
        self,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        extra: list[tuple[bytes, bytes]],
        *,
        close: bool = False,
    ) -> None:
        http = self._http
        assert http is not None
        headers = [*headers, *extra, (b"content-length", str(len(body)).encode())]
        if close or http.their_state is not h11.DONE:
            headers.append((b"connection", b"close"))  # the rest of the request is not read
        data = http.send(h11.Response(status_code=status, headers=headers, reason=reason_phrase(status)))
        data += http.send(h11.Data(data=body)) if body else b""
        data += http.send(h11.EndOfMessage())
        await send_all(self.sock, data)

    async def respond_error(self, status: int, code: str, message: str, *, close: bool = False) -> None:
        await self.respond(status, orjson.dumps({"error": code, "message": message}), JSON_BODY, [], close=close)

    @property
    def answerable(self) -> bool:
        """Nothing of the response is written yet: an error can still be answered."""
        return self._http is not None and self._http.our_state is h11.SEND_RESPONSE

    @property
    def reading_body(self) -> bool:
        return self._http is not None and self._http.their_state is h11.SEND_BODY

    @property
    def reusable(self) -> bool:
        http = self._http
        return http is not None and http.our_state is h11.DONE and http.their_state is h11.DONE

    async def start_websocket(self, key: str) -> None:
        """The upgrade request has been read: keep what followed it, drop h11."""
        http = self._http
        assert http is not None
        event = await self._event()  # EndOfMessage of the GET
        if isinstance(event, h11.EndOfMessage):
            self._leftover = http.trailing_data[0]
        self._key = key

    # ------------------------------------------------------------------ WebSocket

    async def accept(self, first: bytes = b"") -> None:
        """Switch to WebSocket; ``first``, the first frames, go in the same write."""
        self._http = None  # frees the HTTP state for the connection's lifetime
        await send_all(
            self.sock,
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
            b"sec-websocket-accept: " + accept_key(self._key).encode("ascii") + b"\r\n\r\n" + first,
        )

    async def send(self, data: bytes) -> None:
        await send_all(self.sock, data)

    async def receive(self) -> list[Received] | None:
        """The client's next frames (WebSocketError when it breaks the protocol); None at its end."""
        if self._leftover:
            data, self._leftover = self._leftover, b""
        else:
            data = await recv(self.sock)
            if not data:
                return None
        return self.reader.feed(data)

    def take_leftover(self) -> bytes:
        data, self._leftover = self._leftover, b""
        return data


def reason_phrase(status: int) -> bytes:
    """The standard reason phrase (h11 sends none unless told)."""
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


def has_body(scope: Scope) -> bool:
    length = header(scope, b"content-length")
    return header(scope, b"transfer-encoding") is not None or (length is not None and length.strip() not in ("", "0"))
