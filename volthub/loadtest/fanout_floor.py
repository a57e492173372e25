"""The gateway fan-out's own CPU per delivery, against the floor of a bare `send` loop.

    .venv/bin/python -m volthub.loadtest.fanout_floor
    .venv/bin/python -m volthub.loadtest.fanout_floor --sockets 2000 --events 300 --json
    .venv/bin/python -m volthub.loadtest.fanout_floor --no-syscall

Opens N loopback TCP connections to a reader process that only drains them, and builds the
gateway's delivery path over the accepted sockets: the fan-out (`Fanout.publish`), and per
socket a Socket.IO subscriber and a gateway connection carrying an open WebSocket session.
Then, event by event, it alternates two rounds: the fan-out delivering one chat message to
every socket, and a bare loop that `send`s the same pre-built bytes to every socket. Each
round's CPU is read with `time.process_time` (the process's CPU clock, exact; the user and
system split of `getrusage` is sampled per clock tick and too coarse for this). Alternating
round by round puts both under the same machine: a whole-server run moves with the machine
from one minute to the next by more than most changes to this path.

It reports the median and the quartiles of each round's CPU per socket, and the fan-out's
own cost (fan-out less floor). With `--no-syscall` every socket is replaced by an object
whose `send` is a built-in: the Python code of the path alone, without the kernel's work.
On two or more cores this process runs on core 0 and the reader on core 1.

What it leaves out: everything around the fan-out in a server (HTTP, the actor, the
database, timers and pings) and the gateway's writer task. A socket whose kernel buffer
fills would need that task; the run counts such writes and fails when there are any, as its
figures would then not be of the direct path. `volthub loadtest` measures the whole server.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from volthub.http.events.gateway_connections import WireConnection
from volthub.http.events.socketio import SocketSubscriber, socket_encoder, socket_wire
from volthub.hub.fanout import Fanout
from volthub.hub.publisher import Event
from volthub.loadtest.metrics import percentile
from volthub.protocol.engineio.handshake import WEBSOCKET
from volthub.protocol.engineio.session import EngineIOSession, Settings

NAMESPACE = "/"
CHANNEL = "fanout-floor"
# The fan-out's bound per connection (`[events] queue_size`'s default): never reached here.
QUEUE_SIZE = 1000
# Descriptors this process needs beside the sockets (the listener, the interpreter's own).
RESERVED_FILES = 64
# Between rounds: time for the reader to drain what the last round wrote.
DRAIN_PAUSE_SECONDS = 0.003


@dataclass(frozen=True)
class Quartiles:
    """Microseconds of CPU per socket over the rounds of one kind."""

    p25: float
    median: float
    p75: float

    @classmethod
    def of(cls, samples: list[float]) -> Quartiles:
        ordered = sorted(samples)
        p25, median, p75 = (round(percentile(ordered, q), 3) for q in (25, 50, 75))
        return cls(p25, median, p75)


@dataclass(frozen=True)
class Result:
    sockets: int
    events: int
    system_calls: bool
    floor_us: Quartiles  # the bare send loop
    fanout_us: Quartiles  # Fanout.publish
    overhead_us: float  # median of (fan-out less floor), round pair by round pair
    deliveries: int  # counted by the fan-out
    partial_writes: int  # writes the kernel did not take whole, either kind (the run is then invalid)


class _NoWriter:
    """Stands in for the gateway: counts the partial writes that would start its writer task."""

    def __init__(self) -> None:
        self.partial_writes = 0

    def spawn(self, task: Callable[[], Any]) -> bool:
        self.partial_writes += 1
        return False  # the connection is cut: the run fails on this count anyway


class _Endpoint:
    def __init__(self, gateway: _NoWriter) -> None:
        self.gateway = gateway


class _NoSyscall:
    """A socket whose `send` takes everything without a system call."""

    __slots__ = ()
    send = staticmethod(len)


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {core})


def _read_all(port: int, sockets: int) -> None:
    """The reader process: connect, then drain every socket until the other side closes."""
    _pin(1)
    connections = [socket.create_connection(("127.0.0.1", port)) for _ in range(sockets)]
    poller = select.epoll()
    by_fd = {}
    for conn in connections:
        conn.setblocking(False)
        poller.register(conn.fileno(), select.EPOLLIN)
        by_fd[conn.fileno()] = conn
    while by_fd:
        for fd, _ in poller.poll():
            try:
                if not by_fd[fd].recv(65536):
                    poller.unregister(fd)
                    by_fd.pop(fd).close()
            except BlockingIOError:
                pass


def _chat_event(index: int) -> Event:
    return Event(
        id=f"floor-{index:08d}",
        name="chat.message",
        channel_id=CHANNEL,
        data={"message_id": f"m{index}", "text": "a chat message of ordinary length", "user": {"id": "u1"}},
        timestamp="2026-01-01T00:00:00.000Z",
    )


def _subscribe(fanout: Fanout, sockets: list[Any], gateway: _NoWriter) -> None:
    settings = Settings(ping_interval_ms=25_000, ping_timeout_ms=20_000)
    for index, sock in enumerate(sockets):
        sid = f"s{index}"
        session = EngineIOSession(sid, settings, WEBSOCKET, 0.0)
        session.take_outgoing()  # the open packet, which the upgrade has long sent
        conn = WireConnection(sid, session, _Endpoint(gateway), {}, None)  # type: ignore[arg-type]
        conn.sock = sock
        fanout.subscribe(SocketSubscriber(conn, NAMESPACE, QUEUE_SIZE), CHANNEL, owner=False, user_id=sid)


def _cpu_per_socket(round_: Callable[[], None], sockets: int) -> float:
    time.sleep(DRAIN_PAUSE_SECONDS)
    started = time.process_time()
    round_()
    return (time.process_time() - started) / sockets * 1e6


def measure(sockets: int = 2000, events: int = 300, system_calls: bool = True) -> Result:
    """Alternate `events` fan-out rounds with as many bare send loops over `sockets` sockets
    (pinning is the caller's choice: `main` runs on core 0)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(sockets)
    reader = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "volthub.loadtest.fanout_floor",
            "--reader",
            str(listener.getsockname()[1]),
            str(sockets),
        ]
    )
    accepted: list[socket.socket] = []
    try:
        for _ in range(sockets):
            conn, _ = listener.accept()
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            accepted.append(conn)
        targets: list[Any] = accepted if system_calls else [_NoSyscall() for _ in accepted]
        gateway = _NoWriter()
        fanout = Fanout()
        fanout.register_wire(socket_wire(NAMESPACE), socket_encoder(NAMESPACE))
        _subscribe(fanout, targets, gateway)
        wire = socket_encoder(NAMESPACE)(_chat_event(0)).wire

        def bare() -> None:
            for target in targets:
                try:
                    target.send(wire)
                except BlockingIOError:
                    gateway.partial_writes += 1

        floor: list[float] = []
        fanned: list[float] = []
        for index in range(events):
            event = _chat_event(index)
            fanned.append(_cpu_per_socket(lambda: fanout.publish(event), sockets))
            floor.append(_cpu_per_socket(bare, sockets))
        return Result(
            sockets,
            events,
            system_calls,
            Quartiles.of(floor),
            Quartiles.of(fanned),
            round(percentile(sorted(f - b for f, b in zip(fanned, floor, strict=True)), 50), 3),
            fanout.delivered,
            gateway.partial_writes,
        )
    finally:
        for conn in accepted:
            conn.close()
        listener.close()
        reader.wait()


def _report(result: Result) -> str:
    kind = "sockets" if result.system_calls else "sockets without system calls"
    lines = [
        f"fan-out floor: {result.sockets:,} {kind}, {result.events:,} events, CPU per socket (p25 / median / p75)",
        f"  bare send loop   {result.floor_us.p25:7.3f} / {result.floor_us.median:7.3f} / {result.floor_us.p75:7.3f} us",
        f"  Fanout.publish   {result.fanout_us.p25:7.3f} / {result.fanout_us.median:7.3f} / {result.fanout_us.p75:7.3f} us",
        f"  the fan-out's own cost (median of fan-out less floor per event): {result.overhead_us:.3f} us",
        f"  deliveries {result.deliveries:,}; partial writes {result.partial_writes}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m volthub.loadtest.fanout_floor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sockets", type=int, default=2000, help="sockets to deliver to (default 2000)")
    parser.add_argument("--events", type=int, default=300, help="events, each a fan-out and a bare round (default 300)")
    parser.add_argument("--no-syscall", action="store_true", help="replace the sockets: the Python code alone")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--reader", nargs=2, type=int, metavar=("PORT", "SOCKETS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reader:
        _read_all(*args.reader)
        return 0
    if args.sockets < 1 or args.events < 2:
        parser.error("--sockets must be at least 1 and --events at least 2")
    open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if args.sockets + RESERVED_FILES > open_files:
        parser.error(f"--sockets {args.sockets} needs more than this process's {open_files} open files")
    _pin(0)
    result = measure(args.sockets, args.events, system_calls=not args.no_syscall)
    print(json.dumps(asdict(result)) if args.json else _report(result))
    expected = result.sockets * result.events
    if result.partial_writes or result.deliveries != expected:
        print(
            f"invalid run: {result.partial_writes} partial writes, {result.deliveries:,} of {expected:,} deliveries",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
