"""The simulated clients: Socket.IO over WebSocket, and SSE.

Each client is one Trio task holding one connection. The hot path (a server frame in, a
latency sample out) is kept short: one read may carry many frames, they share one
timestamp, only `event` frames are JSON-decoded, and by-name frames are only counted.

Two WebSocket implementations sit behind the same small interface: `raw` (default; the
protocol package's WebSocket codec in the client role over a Trio TCP stream, cheap enough
for thousands of clients on one core) and `trio-websocket` (the library, for cross-checking
the raw one). Engine.IO, Socket.IO and SSE are read and written by the protocol package's
codecs too, the same ones the server runs in the other role.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import orjson
import trio

from volthub.loadtest import protocol as p
from volthub.loadtest.metrics import Series
from volthub.loadtest.targets import Channel
from volthub.protocol import sse, websocket
from volthub.protocol.engineio import packets as engineio
from volthub.protocol.socketio import packets as socketio

# The largest message a simulated client accepts (far above any event the server sends).
MAX_MESSAGE = 16 * 1024 * 1024


class StreamRefused(Exception):
    """The server answered the event stream's request with something other than 200."""


@dataclass(eq=False)
class ClientSlot:
    index: int
    channel: int
    kind: str  # "socketio", "sse", or a scenario's kind (see scenario.KINDS)
    connect_seconds: float | None = None  # TCP open .. CONNECT acknowledged
    connected_at: float | None = None  # monotonic seconds
    received: int = 0  # this run's chat.message deliveries (`event` frames / SSE events)
    by_name: int = 0  # `chat.message` by-name frames (Socket.IO only)
    greeted: bool = False  # the server's `connected` message arrived
    disconnected: bool = False  # lost before the run ended
    error: str | None = None
    # Deliveries of messages offered while this client was in (after it first connected),
    # per stage index; only these count towards its expected deliveries.
    in_window: dict[int, int] = field(default_factory=dict)
    joined_at: float | None = None  # first connected (monotonic seconds)
    left_at: float | None = None  # the run let it go (a ramp down)
    dropping: bool = False  # the run is dropping it on purpose (a reconnect storm, a ramp down)
    recovery: bool = False  # ask for connection state recovery (pid and offsets)
    pid: str | None = None  # the recovery id the server gave
    offset: str | None = None  # the last event id received (where a recovery resumes)
    recovered: bool | None = None  # after a reconnect: did the server restore the session
    read_delay: float = 0.0  # a slow consumer: pause this long after each read
    on_connect: Callable[[ClientSlot], None] | None = None  # told once connected (a storm's record)


@dataclass(eq=False)
class RunState:
    """Shared by every task of one run (one Trio thread, so no locks)."""

    run_tag: str
    start: float  # monotonic seconds; series are indexed from here
    closing: bool = False
    measuring: bool = False  # only deliveries inside the send phase (and drain) count
    latencies: array[float] = field(default_factory=lambda: array("d"))
    seen: set[int] = field(default_factory=set)  # sequence numbers some client received
    # Per offered message (by sequence number): when it was offered and in which stage.
    offered_at: array[float] = field(default_factory=lambda: array("d"))
    offered_stage: array[int] = field(default_factory=lambda: array("i"))
    # End-to-end latencies per stage index (slow consumers and idle holds are left out).
    stage_latencies: dict[int, array[float]] = field(default_factory=dict)
    disconnect_reasons: dict[str, int] = field(default_factory=dict)
    connect_errors: dict[str, int] = field(default_factory=dict)
    deliveries: Series = field(init=False)
    sends: Series = field(init=False)
    connects: Series = field(init=False)

    def __post_init__(self) -> None:
        self.deliveries = Series(self.start)
        self.sends = Series(self.start)
        self.connects = Series(self.start)

    def delivered(self, slot: ClientSlot, now_ns: int, text: str) -> None:
        parsed = p.parse_message(text, self.run_tag)
        if parsed is None or not self.measuring or slot.kind == "idle":
            return
        seq, sent_ns = parsed
        slot.received += 1
        self.seen.add(seq)
        self.deliveries.add(now_ns / 1e9)
        if seq < len(self.offered_at) and slot.joined_at is not None and self.offered_at[seq] >= slot.joined_at:
            stage = self.offered_stage[seq]
            slot.in_window[stage] = slot.in_window.get(stage, 0) + 1
            if slot.kind != "slow":
                latency = (now_ns - sent_ns) / 1e9
                self.latencies.append(latency)
                self.stage_latencies.setdefault(stage, array("d")).append(latency)
        elif not self.offered_at:  # no stages (a hold): every delivery counts
            self.latencies.append((now_ns - sent_ns) / 1e9)

    def lost(self, slot: ClientSlot, reason: str) -> None:
        if self.closing or slot.disconnected or slot.dropping:
            return
        slot.disconnected = True
        self.disconnect_reasons[reason] = self.disconnect_reasons.get(reason, 0) + 1

    def failed(self, slot: ClientSlot, reason: str) -> None:
        slot.error = reason
        self.connect_errors[reason] = self.connect_errors.get(reason, 0) + 1


@dataclass(frozen=True)
class SocketOptions:
    host: str
    port: int
    path: str = "/ws/events"
    namespace: str = "/"
    implementation: str = "raw"  # or "trio-websocket"
    connect_timeout: float = 30.0
    source: str | None = None  # the local address to connect from (127.0.0.x): its own ephemeral ports


# --- transports ----------------------------------------------------------------------------------


class Transport(Protocol):
    async def receive(self) -> list[str]: ...  # text messages; [] means closed
    async def send(self, text: str) -> None: ...
    async def aclose(self) -> None: ...


# Linux: bind() to an address leaves the port to connect(), which may then reuse a port that
# other connections from the address use to other destinations.
IP_BIND_ADDRESS_NO_PORT = getattr(trio.socket, "IP_BIND_ADDRESS_NO_PORT", 24)


async def _open_tcp(host: str, port: int, source: str | None = None) -> trio.SocketStream:
    """A TCP connection to a literal address without trio.open_tcp_stream's resolver and
    happy-eyeballs nursery (a third of the generator's CPU per connect); names go through it.
    With `source`, from that local address (each has its own ~28,000 ephemeral ports)."""
    try:
        family = trio.socket.AF_INET6 if ":" in host else trio.socket.AF_INET
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if source is not None:
            raise ValueError(f"a source address needs a literal server address, not {host!r}") from None
        return await trio.open_tcp_stream(host, port)
    sock = trio.socket.socket(family, trio.socket.SOCK_STREAM)
    try:
        if source is not None:
            if family == trio.socket.AF_INET:
                sock.setsockopt(trio.socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            await sock.bind((source, 0))
        await sock.connect((str(address), port))
    except BaseException:
        sock.close()
        raise
    return trio.SocketStream(sock)


class RawWebSocket:
    """Minimal RFC 6455 client over a Trio TCP stream (text messages only)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.parser = websocket.FrameReader(MAX_MESSAGE, websocket.Role.CLIENT)
        self.pending: list[str] = []
        # A TCP stream is read from its descriptor (`_read`); another stream through its API.
        self._fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) else None

    @classmethod
    async def connect(cls, host: str, port: int, target: str, source: str | None = None) -> RawWebSocket:
        return await cls.upgrade(await _open_tcp(host, port, source), host, port, target)

    @classmethod
    async def upgrade(cls, stream: trio.abc.Stream, host: str, port: int, target: str) -> RawWebSocket:
        """The WebSocket upgrade over an open TCP stream (closed when it fails)."""
        try:
            key = p.new_key()
            await stream.send_all(websocket.upgrade_request(f"{host}:{port}", target, key))
            buffer = bytearray()
            while (head := websocket.upgrade_answer_length(buffer, key)) is None:
                chunk = await stream.receive_some(16384)
                if not chunk:
                    raise websocket.HandshakeRefused("connection closed during the upgrade")
                buffer += chunk
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        socket = cls(stream)
        if len(buffer) > head:  # the server may have sent frames right behind its 101
            socket.pending = await socket._texts(socket.parser.feed(bytes(buffer[head:])))
        return socket

    async def receive(self) -> list[str]:
        if self.pending:
            texts, self.pending = self.pending, []
            return texts
        while True:
            try:
                chunk = await (self.stream.receive_some(65536) if self._fd is None else self._read(self._fd))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return []
            if not chunk:
                return []
            texts = await self._texts(self.parser.feed(bytes(chunk)))
            if texts:  # a read may hold only part of a frame, or only control frames
                return texts

    @staticmethod
    async def _read(fd: int) -> bytes:
        """Wait until the socket is readable, then read once. The read before has nearly
        always taken the whole frame, so waiting first spares the read that would find
        nothing; and the stream's own receive costs several layers of Python per frame,
        which with thousands of clients was a large part of the generator's CPU and so of
        the latency it measured. The descriptor stays open while this object uses it (it is
        closed by `aclose`, after the last read)."""
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                return os.read(fd, 65536)
            except BlockingIOError:  # readable, then taken by nothing but a spurious wake-up
                continue

    async def _texts(self, received: list[websocket.Received]) -> list[str]:
        texts: list[str] = []
        for item in received:
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, websocket.Ping):
                await self.stream.send_all(p.client_frame(websocket.OP_PONG, item.payload))
            elif isinstance(item, websocket.Close):
                raise websocket.WebSocketError(item.code or websocket.CLOSE_NORMAL, "closed by server")
        return texts

    async def send(self, text: str) -> None:
        await self.stream.send_all(p.client_frame(websocket.OP_TEXT, text.encode()))

    async def aclose(self) -> None:
        with trio.move_on_after(1) as scope:
            scope.shield = True
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self.stream.send_all(
                    p.client_frame(websocket.OP_CLOSE, websocket.CLOSE_NORMAL.to_bytes(2, "big"))
                )
        await trio.aclose_forcefully(self.stream)


class LibraryWebSocket:
    """The same interface over trio-websocket."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    async def receive(self) -> list[str]:
        from trio_websocket import ConnectionClosed

        try:
            message = await self.connection.get_message()
        except ConnectionClosed:
            return []
        return [message if isinstance(message, str) else message.decode()]

    async def send(self, text: str) -> None:
        await self.connection.send_message(text)

    async def aclose(self) -> None:
        with trio.move_on_after(1) as scope:
            scope.shield = True
            await self.connection.aclose()


async def open_transport(options: SocketOptions, target: str, nursery: trio.Nursery) -> Transport:
    if options.implementation == "raw":
        return await RawWebSocket.connect(options.host, options.port, target, options.source)
    from trio_websocket import connect_websocket

    # The library's reader task lives in `nursery`, which the client owns for its lifetime.
    connection = await connect_websocket(nursery, options.host, options.port, target, use_ssl=False)
    return LibraryWebSocket(connection)


# --- Socket.IO client ------------------------------------------------------------------------------


async def socketio_client(
    slot: ClientSlot,
    channel: Channel,
    options: SocketOptions,
    state: RunState,
    connect_gate: trio.Semaphore,
) -> None:
    """Connect (holding `connect_gate` until the CONNECT is acknowledged), then listen
    until cancelled. Failures are recorded on the slot, never raised: one bad client
    must not end the run."""
    ns = options.namespace
    event_prefix = p.event_prefix(ns, "event")
    by_name_prefix = p.event_prefix(ns, "chat.message")
    greeting_prefix = p.event_prefix(ns, "connected")
    array_start = len(event_prefix) - len('["event",')  # where the JSON array begins
    async with trio.open_nursery() as nursery:  # trio-websocket's reader lives here
        transport: Transport | None = None
        try:
            started = time.monotonic()
            with trio.fail_after(options.connect_timeout):
                try:
                    transport = await open_transport(options, p.engineio_target(options.path), nursery)
                    texts, answer = await handshake(transport, ns, auth_for(slot, channel))
                finally:
                    connect_gate.release()
            now = time.monotonic()
            note_recovery(slot, answer)
            slot.connect_seconds, slot.connected_at = now - started, now
            if slot.joined_at is None:
                slot.joined_at = now
            state.connects.add(now)
            if slot.on_connect is not None:
                slot.on_connect(slot)
            while True:
                if not texts:
                    if slot.read_delay:
                        await trio.sleep(slot.read_delay)
                    texts = await transport.receive()
                if not texts:
                    state.lost(slot, "closed by server")
                    return
                now_ns = time.monotonic_ns()
                for text in texts:
                    if text.startswith(event_prefix):
                        frame = orjson.loads(text[array_start:])
                        if len(frame) > 2 and isinstance(frame[-1], str):
                            slot.offset = frame[-1]  # recovery: the event id comes last
                        try:
                            message = frame[1]["data"]["message"]
                        except (KeyError, TypeError, IndexError):
                            continue
                        state.delivered(slot, now_ns, message)
                    elif text.startswith(by_name_prefix):
                        if state.measuring:
                            slot.by_name += 1
                    elif text == engineio.PING:
                        await transport.send(engineio.PONG)
                    elif text.startswith(greeting_prefix):
                        slot.greeted = True
                    elif text.startswith(("41", engineio.CLOSE)):
                        state.lost(slot, "disconnected by server")
                        return
                texts = []
        except trio.TooSlowError:
            if slot.connected_at is None:
                state.failed(slot, "connect timeout")
            else:
                state.lost(slot, "timeout")
        except (
            OSError,
            websocket.WebSocketError,
            engineio.ProtocolError,
            trio.BrokenResourceError,
            ConnectionError,
        ) as exc:
            reason = reason_of(exc)
            if slot.connected_at is None:
                state.failed(slot, reason)
            else:
                state.lost(slot, reason)
        except Exception as exc:
            if slot.connected_at is None:
                state.failed(slot, reason_of(exc))
            else:
                state.lost(slot, reason_of(exc))
        finally:
            if transport is not None:
                await transport.aclose()
            nursery.cancel_scope.cancel()


def note_recovery(slot: ClientSlot, answer: Any) -> None:
    """With recovery, from the CONNECT answer: whether the server restored the session it
    was asked to (the same pid back), and the pid to ask for next time."""
    if slot.recovery and isinstance(answer, dict):
        pid = answer.get("pid")
        if slot.pid is not None:
            slot.recovered = pid == slot.pid
        slot.pid = pid if isinstance(pid, str) else None


def auth_for(slot: ClientSlot, channel: Channel) -> dict[str, Any]:
    """CONNECT auth: the token, and with recovery the request for it or what to resume."""
    auth: dict[str, Any] = {"token": channel.token}
    if slot.recovery:
        auth["recovery"] = True
        if slot.pid is not None and slot.offset is not None:
            auth.update(pid=slot.pid, offset=slot.offset)
    return auth


async def handshake(transport: Transport, namespace: str, auth: dict[str, Any]) -> tuple[list[str], Any]:
    """Open packet, CONNECT with `auth`, and wait for the server's CONNECT answer.

    Returns every other message that arrived meanwhile, for the caller to handle (servers
    may send the greeting just before their CONNECT answer, as python-socketio does, or in
    the same read just behind it), and the answer's data."""
    texts = await transport.receive()
    if not texts:
        raise websocket.WebSocketError(websocket.CLOSE_NORMAL, "closed before the open packet")
    engineio.decode_open(texts[0])
    await transport.send(socketio.encode_frame(socketio.Packet(socketio.PacketType.CONNECT, namespace, auth)))
    backlog, kept = texts[1:], []
    while True:
        for position, text in enumerate(backlog):
            if text == engineio.PING:
                await transport.send(engineio.PONG)
                continue
            # A CONNECT answer or refusal (`40…`, `44…`) is parsed; anything else waits.
            packet = socketio.decode_packet(text[1:]) if text.startswith(("40", "44")) else None
            if packet is None or packet.namespace != namespace:
                kept.append(text)
            elif packet.type == socketio.PacketType.CONNECT:
                return kept + backlog[position + 1 :], packet.data
            else:
                raise socketio.SocketIOProtocolError(f"connect refused: {packet.data}")
        backlog = await transport.receive()
        if not backlog:
            raise websocket.WebSocketError(websocket.CLOSE_NORMAL, "closed before CONNECT was answered")


def reason_of(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:120]


# --- SSE client ---------------------------------------------------------------------------------------


async def sse_client(
    slot: ClientSlot,
    channel: Channel,
    base_url: str,
    http: httpx.AsyncClient,
    state: RunState,
    connect_gate: trio.Semaphore,
    connect_timeout: float = 30.0,
) -> None:
    """GET /api/events/stream with the channel owner's token; `connected` first, then one
    SSE event per platform event whose data is the envelope."""
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            connect_gate.release()

    started = time.monotonic()
    try:
        headers = {"Authorization": f"Bearer {channel.token}", "Accept": "text/event-stream"}
        with trio.fail_after(connect_timeout) as deadline:
            async with http.stream("GET", f"{base_url}/api/events/stream", headers=headers) as response:
                if response.status_code != 200:
                    raise StreamRefused(f"HTTP {response.status_code}")
                parser = sse.EventStreamParser()
                async for chunk in response.aiter_raw():
                    now_ns = time.monotonic_ns()
                    for event in parser.feed(chunk):
                        if event.event == "chat.message":
                            try:
                                message = orjson.loads(event.data)["data"]["message"]
                            except (orjson.JSONDecodeError, KeyError, TypeError):
                                continue
                            state.delivered(slot, now_ns, message)
                        elif event.event == "connected" and slot.connected_at is None:
                            now = now_ns / 1e9
                            slot.greeted = True
                            slot.connect_seconds, slot.connected_at = now - started, now
                            if slot.joined_at is None:
                                slot.joined_at = now
                            state.connects.add(now)
                            deadline.deadline = float("inf")  # connected: no more deadline
                            release()
                state.lost(slot, "stream ended")
    except trio.TooSlowError:
        state.failed(slot, "connect timeout")
    except (httpx.HTTPError, OSError, StreamRefused) as exc:
        if slot.connected_at is None:
            state.failed(slot, reason_of(exc))
        else:
            state.lost(slot, reason_of(exc))
    finally:
        release()
