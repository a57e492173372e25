"""The read side of a hold's generator process: every held socket in one epoll set.

A broadcast is one frame on every socket at once, so what the generator spends per socket
read bounds how late the last socket reads its copy, whatever the server does. A task per
socket would cost a wake-up, two epoll changes and a scheduler turn per frame; here one
Trio task reads every ready socket per wake with plain non-blocking calls.

A broadcast's frame is the same bytes on every socket of the channel. The first copy read
whole goes through the full parse (WebSocket framing, Engine.IO, the event, the benchmark
message in it); every later read that is exactly those bytes is that same event, so it is
recorded without parsing again: a comparison, the receive time and one integer appended.
An Engine.IO ping alone in a read is answered with a pong built once. Anything else (a
frame split over reads, several broadcasts in one read, another event, a close) takes the
full parse.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from volthub.loadtest import protocol as p
from volthub.loadtest.client import ClientSlot, RunState, reason_of
from volthub.protocol import websocket
from volthub.protocol.engineio import packets as engineio

EVENT_PREFIX = p.event_prefix("/", "event")
# The Engine.IO ping as a server frame, and the pong we answer it with: built once (one
# mask for every pong; the server only unmasks it).
PING_FRAME = websocket.server_frame(websocket.OP_TEXT, engineio.PING.encode())
PONG_FRAME = p.client_frame(websocket.OP_TEXT, engineio.PONG.encode())
# One read's size: more than a hold's server sends a socket at once; a read that fills it is
# followed by another at once (the edge-triggered epoll set would not wake for the rest).
READ_SIZE = 65536


@dataclass(eq=False)
class HoldState(RunState):
    """A hold's deliveries by broadcast: sequence number -> each socket's latency (ns)."""

    by_seq: dict[int, array[int]] = field(default_factory=dict)
    duplicates: int = 0  # a broadcast read twice on one socket (counted once)
    reconnecting: bool = False

    def deliveries_ms(self) -> dict[str, list[float]]:
        """The latencies in ms (two decimals), by sequence number, as the report wants them."""
        return {str(seq): [round(ns / 1e6, 2) for ns in found] for seq, found in self.by_seq.items()}


class Held:
    """One connected socket; read by the process's one Reader, not by a task of its own."""

    __slots__ = ("slot", "sock", "parser", "seq")

    def __init__(self, slot: ClientSlot, sock: socket.socket, parser: websocket.FrameReader) -> None:
        self.slot, self.sock, self.parser = slot, sock, parser
        self.seq = -1  # the last broadcast this socket received


class Broadcast:
    """A broadcast's frame as read, with what the full parse found in it."""

    __slots__ = ("frame", "seq", "sent_ns", "offset", "latencies")

    def __init__(self, frame: bytes | None, seq: int, sent_ns: int, offset: str | None, latencies: array[int]) -> None:
        self.frame, self.seq, self.sent_ns, self.offset, self.latencies = frame, seq, sent_ns, offset, latencies


def parse_broadcast(payload: str, marker: str) -> tuple[int, int, str | None] | None:
    """(sequence number, send time in ns, the event id last in the frame or None) of one of
    this run's broadcasts in an Engine.IO packet; None for any other packet."""
    if not payload.startswith(EVENT_PREFIX):
        return None
    start = payload.find(marker)
    if start < 0:
        return None
    start += len(marker)
    seq, sent_ns = payload[start : payload.index('"', start)].split(" ")[:2]
    offset = payload[payload.rindex(',"') + 2 : -2] if payload.endswith('"]') else None
    return int(seq), int(sent_ns), offset


class Reader:
    """Every held socket of the process in one epoll set, read by one Trio task."""

    def __init__(self, state: HoldState, run_tag: str, on_lost: Callable[[ClientSlot], None]) -> None:
        self.state = state
        self.epoll = select.epoll()
        self.held: dict[int, Held] = {}
        self.marker = f'"{p.MESSAGE_MARK} {run_tag} '
        self.on_lost = on_lost
        self.known = Broadcast(None, -1, 0, None, array("q"))  # the last broadcast read alone
        self.fast, self.parsed = 0, 0  # reads recorded by comparison / packets parsed whole
        # What the full parse did besides delivering: sends, losses, other events' ids.
        self.acts = 0
        self.delivered_now: list[Broadcast] = []  # the broadcasts of the read being parsed

    def add(self, held: Held, texts: list[str]) -> None:
        fd = held.sock.fileno()
        self.held[fd] = held
        # Edge-triggered: a socket read once is not polled again until more arrives (a read
        # shorter than READ_SIZE emptied it).
        self.epoll.register(fd, select.EPOLLIN | select.EPOLLET)
        now_ns = time.monotonic_ns()
        for text in texts:
            if not self._text(held, text, now_ns):
                return

    async def run(self) -> None:
        epoll, held = self.epoll, self.held
        while True:
            await trio.lowlevel.wait_readable(epoll.fileno())
            for fd, _ in epoll.poll(0, 4096):
                found = held.get(fd)
                if found is not None:
                    self._read(found)

    def _read(self, held: Held) -> None:
        try:
            data = held.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:
            self._lose(held, reason_of(exc))
            return
        known = self.known
        if data == known.frame and held.parser.idle():
            now_ns = time.monotonic_ns()
            self.fast += 1
            self._delivered(held, known, now_ns)
            return
        if data == PING_FRAME and held.parser.idle():
            self._send(held, PONG_FRAME)
            return
        if not data:
            self._lose(held, "closed by server")
            return
        self._read_slowly(held, data)
        if len(data) == READ_SIZE and self.held.get(held.sock.fileno()) is held:
            self._read(held)  # a full read may have left more (edge-triggered: no new wake)

    def _read_slowly(self, held: Held, data: bytes) -> None:
        """The full parse of what one read brought. A read of whole frames whose only effect
        was one broadcast's delivery is remembered: the same bytes on another socket are
        that broadcast again (the server's `chat.message` frame may share the read)."""
        whole = held.parser.idle()
        try:
            received = held.parser.feed(data)
        except websocket.WebSocketError as exc:
            self._lose(held, reason_of(exc))
            return
        now_ns = time.monotonic_ns()
        acts, self.delivered_now = self.acts, []
        for item in received:
            if isinstance(item, str):
                if not self._text(held, item, now_ns):
                    return
            elif isinstance(item, websocket.Ping):
                self._send(held, p.client_frame(websocket.OP_PONG, item.payload))
            elif isinstance(item, websocket.Close):
                # As the official clients do: answer the server's close (its code echoed)
                # before going, which lets the server close at once instead of lingering.
                code = item.code.to_bytes(2, "big") if item.code is not None else b""
                self._send(held, p.client_frame(websocket.OP_CLOSE, code))
                self._lose(held, "closed by server")
                return
        if whole and held.parser.idle() and self.acts == acts and len(self.delivered_now) == 1:
            self.known = self.delivered_now[0]
            self.known.frame = data

    def _text(self, held: Held, payload: str, now_ns: int) -> bool:
        """One Engine.IO packet; False once it ended the socket."""
        self.parsed += 1
        if payload == engineio.PING:
            self._send(held, PONG_FRAME)
        elif payload.startswith(EVENT_PREFIX):
            found = parse_broadcast(payload, self.marker)
            if found is None:
                self.acts += 1
                if held.slot.recovery and payload.endswith('"]'):  # recovery: the event id comes last
                    held.slot.offset = payload[payload.rindex(',"') + 2 : -2]
                return True
            seq, sent_ns, offset = found
            broadcast = Broadcast(None, seq, sent_ns, offset, self.state.by_seq.setdefault(seq, array("q")))
            self.delivered_now.append(broadcast)
            self._delivered(held, broadcast, now_ns)
        elif payload.startswith("41") or payload == engineio.CLOSE:
            self._lose(held, "disconnected by server")
            return False
        return True

    def _delivered(self, held: Held, broadcast: Broadcast, now_ns: int) -> None:
        if held.seq == broadcast.seq:
            self.state.duplicates += 1
        else:
            held.seq = broadcast.seq
            broadcast.latencies.append(now_ns - broadcast.sent_ns)
            held.slot.received += 1
        if held.slot.recovery and broadcast.offset is not None:
            held.slot.offset = broadcast.offset

    def _send(self, held: Held, frame: bytes) -> None:
        self.acts += 1
        try:
            held.sock.send(frame)  # a few bytes: the kernel's buffer has room for them
        except OSError as exc:
            self._lose(held, reason_of(exc))

    def _lose(self, held: Held, reason: str) -> None:
        self.acts += 1
        fd = held.sock.fileno()
        if self.held.get(fd) is held:
            del self.held[fd]
            with contextlib.suppress(OSError):
                self.epoll.unregister(fd)
        held.sock.close()
        self.state.lost(held.slot, reason)
        self.on_lost(held.slot)

    def close(self) -> None:
        for held in self.held.values():
            held.sock.close()
        self.held.clear()
        self.epoll.close()
