"""One generator process of a hold (`python -m volthub.loadtest.hold_worker`).

It talks to the parent (volthub.loadtest.hold) in JSON lines: the first stdin line is its
task (sockets, source addresses, the token); it opens its sockets, each bound to one of the
source addresses in turn, and prints one line when all are connected or failed. Then it
answers each later stdin line with one stdout line:

- ``{"cmd": "stop"}`` or ``{"cmd": "restart"}``: what the hold cost it, the sockets lost,
  the deliveries of each broadcast (its sequence number -> latencies in ms), the
  broadcasts read twice on one socket and the reads recognised by their bytes. After
  ``restart`` every socket that is lost reconnects with the back-off of the official
  Socket.IO client (exponential from 1 s to 5 s, each delay randomised by ±50 %), asking
  for connection state recovery;
- ``{"cmd": "back", "since": T, "timeout": S}``: waits until every socket connected again
  after monotonic time T (or S seconds passed) and says how many came back, when the last
  did and how many the server recovered.

End of stdin ends the process (its sockets close with it).
"""

from __future__ import annotations

import errno
import heapq
import json
import math
import os
import random
import resource
import socket
import sys
import time
from typing import Any

import trio

from volthub.collector import GENERATOR_GEN0_THRESHOLD, tune_garbage_collector
from volthub.loadtest import protocol as p
from volthub.loadtest.client import (
    IP_BIND_ADDRESS_NO_PORT,
    ClientSlot,
    RawWebSocket,
    SocketOptions,
    auth_for,
    handshake,
    note_recovery,
    reason_of,
)
from volthub.loadtest.hold_reader import Held, HoldState, Reader
from volthub.loadtest.pipes import lines as read_lines
from volthub.loadtest.targets import Channel

# The official client's reconnection defaults: reconnectionDelay, reconnectionDelayMax,
# randomizationFactor.
BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_JITTER = 1.0, 5.0, 0.5


def backoff(attempt: int, rng: random.Random) -> float:
    """Seconds before reconnect attempt `attempt` (0 first): doubling from 1 s up to 5 s,
    each moved by up to half of itself, up or down, at random."""
    delay: float = min(BACKOFF_MAX, BACKOFF_FIRST * 2.0 ** min(attempt, 16))
    deviation = rng.random() * BACKOFF_JITTER * delay
    return delay - deviation if rng.random() < 0.5 else delay + deviation


def yield_to_server() -> bool:
    """Run this process as a batch job (SCHED_BATCH; any user may choose it): on Linux a
    waking normal process may preempt the one running, a waking batch one never does, it
    waits for the running one to sleep or for the next tick. Against a server on the same
    cores every generator wake-up (a few sockets readable) would otherwise cut into the
    server's fan-out or accept loop, and each side then does a little work per wake:
    measured at 60,000 sockets over 6 server and 6 generator processes, the server was
    preempted ten times less often during the hold, both sides spent 15-20 % less CPU per
    connect and the generator woke four times less often. A client on other machines
    would not take the server's cores at all. False where the policy is unknown."""
    if not hasattr(os, "sched_setscheduler") or not hasattr(os, "SCHED_BATCH"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError:
        return False
    return True


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def activity() -> list[float]:
    """User and kernel CPU seconds, sleeps (wake-ups) and preemptions so far, as the
    parent's :class:`~volthub.loadtest.metrics.Activity` fields: where a connect's or a
    delivery's cost goes when many processes share the cores."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return [usage.ru_utime, usage.ru_stime, usage.ru_nvcsw, usage.ru_nivcsw]


def since(before: list[float]) -> list[float]:
    return [round(now - then, 6) for now, then in zip(activity(), before, strict=True)]


class PlainStream(trio.abc.Stream):
    """A connect's stream over a plain non-blocking socket: each call tries the socket
    first and waits for it only when it would block. Trio's socket wrapper and
    SocketStream check conflicts, cancellation and the address around every call, a good
    part of the generator's CPU per connect; a connect here is one task's short exchange.
    The socket itself is not closed with the stream: the reader takes it over."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.wait_writable(self.sock)

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while True:
            try:
                return self.sock.recv(max_bytes or 65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(self.sock)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def open_plain(sock: socket.socket, options: SocketOptions) -> PlainStream:
    """Start connecting `sock` (non-blocking, from the options' source address if any).

    It does not wait for the connection: the first send does (a send on a socket still
    connecting would block; one that failed raises its error), and against a loopback
    server the handshake is usually done before that send, which saves a wait per connect."""
    if options.source is not None:
        sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        sock.bind((options.source, 0))
    error = sock.connect_ex((options.host, options.port))
    if error and error != errno.EINPROGRESS:
        raise OSError(error, os.strerror(error))
    return PlainStream(sock)


async def connect(
    slot: ClientSlot, channel: Channel, options: SocketOptions, state: HoldState, reader: Reader, gate: trio.Semaphore
) -> bool:
    """Open one socket (holding `gate` until its CONNECT is answered) and hand it to the
    reader; False when it failed (recorded on the slot)."""
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)  # no ioctl to make it so
    started = time.monotonic()
    try:
        with trio.move_on_after(options.connect_timeout) as deadline:
            try:
                stream = open_plain(sock, options)
                target = p.engineio_target(options.path)
                websocket = await RawWebSocket.upgrade(stream, options.host, options.port, target)
                texts, answer = await handshake(websocket, options.namespace, auth_for(slot, channel))
            finally:
                gate.release()
    except Exception as exc:  # refused, reset, a bad answer: this socket's failure only
        sock.close()
        state.failed(slot, reason_of(exc))
        return False
    if deadline.cancelled_caught:
        sock.close()
        state.failed(slot, "connect timeout")
        return False
    now = time.monotonic()
    note_recovery(slot, answer)
    slot.connect_seconds, slot.connected_at = now - started, now
    slot.error, slot.disconnected = None, False
    reader.add(Held(slot, sock, websocket.parser), texts)
    return True


class Reconnects:
    """The reconnect attempts of a process's lost sockets, each due after its back-off, on
    one timer: a `trio.sleep` per socket (a cancel scope each, and a Cancelled raised and
    caught) cost the generator about a third of its CPU per reconnect, CPU the server's
    reconnects compete for on a shared machine. Attempts start in the order they fall due,
    each once a connect slot (`gate`) is free."""

    def __init__(self, state: HoldState, reader: Reader, channel: Channel, gate: trio.Semaphore) -> None:
        self.state, self.reader, self.channel, self.gate = state, reader, channel, gate
        self.rng = random.Random()
        self._due: list[tuple[float, int, ClientSlot, SocketOptions, int]] = []  # a heap
        self._added = 0  # tie-breaker: equal times start in the order they were added
        self._earlier = trio.Event()  # set when an attempt falls due before the heap's first

    def add(self, slot: ClientSlot, options: SocketOptions, attempt: int = 0) -> None:
        when = trio.current_time() + backoff(attempt, self.rng)
        if not self._due or when < self._due[0][0]:
            self._earlier.set()
        self._added += 1
        heapq.heappush(self._due, (when, self._added, slot, options, attempt))

    async def run(self, nursery: trio.Nursery) -> None:
        while not self.state.closing:
            if self._due and self._due[0][0] <= trio.current_time():
                _, _, slot, options, attempt = heapq.heappop(self._due)
                await self.gate.acquire()  # `connect` gives it back once its CONNECT is answered
                nursery.start_soon(self._attempt, slot, options, attempt)
                continue
            self._earlier = trio.Event()
            with trio.move_on_at(self._due[0][0] if self._due else math.inf):
                await self._earlier.wait()

    async def _attempt(self, slot: ClientSlot, options: SocketOptions, attempt: int) -> None:
        connected = await connect(slot, self.channel, options, self.state, self.reader, self.gate)
        if not connected and not self.state.closing:
            self.add(slot, options, attempt + 1)


async def _worker(batch: bool) -> None:
    stdin = trio.lowlevel.FdStream(os.dup(0))
    lines = read_lines(stdin)
    task = json.loads(await lines.__anext__())
    state = HoldState(run_tag=task["run_tag"], start=time.monotonic())
    sources: list[str | None] = task.get("sources") or [None]
    first = task.get("first", 0)
    channel = Channel(0, "hold", task["token"])
    slots = [ClientSlot(index, 0, "socketio", recovery=task.get("recovery", False)) for index in range(task["count"])]
    options = [
        SocketOptions(task["host"], task["port"], task["path"], "/", "raw", task["timeout"], source)
        for source in sources
    ]
    cpu_began, activity_began, began = (
        cpu_seconds(),
        activity(),
        time.monotonic(),
    )  # CLOCK_MONOTONIC: one clock for the machine
    gate = trio.Semaphore(task["concurrency"])
    async with trio.open_nursery() as nursery:

        def lost(slot: ClientSlot) -> None:
            if state.reconnecting and not state.closing:
                reconnects.add(slot, options[(first + slot.index) % len(options)])

        reader = Reader(state, task["run_tag"], lost)
        reconnects = Reconnects(state, reader, channel, gate)
        nursery.start_soon(reader.run)
        nursery.start_soon(reconnects.run, nursery)
        try:
            async with trio.open_nursery() as ramp:
                for slot in slots:
                    await gate.acquire()
                    where = options[(first + slot.index) % len(options)]
                    ramp.start_soon(connect, slot, channel, where, state, reader, gate)
            connected = sum(1 for slot in slots if slot.connected_at is not None)
            last = max((slot.connected_at or began for slot in slots), default=began)
            _print(
                {
                    "connected": connected,
                    "failed": len(slots) - connected,
                    "errors": state.connect_errors,
                    "began": began,
                    "last": last,
                    "cpu": cpu_seconds() - cpu_began,
                    "activity": since(activity_began),
                    "batch": batch,
                }
            )
            cpu_held, activity_held = cpu_seconds(), activity()
            resumable: set[int] = set()
            async for line in lines:
                order = json.loads(line)
                if order["cmd"] in ("stop", "restart"):
                    cpu = cpu_seconds() - cpu_held  # the hold's, not the report's
                    _print(
                        {
                            "disconnects": sum(1 for slot in slots if slot.disconnected),
                            "reasons": state.disconnect_reasons,
                            "deliveries": state.deliveries_ms(),
                            "duplicates": state.duplicates,
                            "recognised": reader.fast,
                            "cpu": cpu,
                            "activity": since(activity_held),
                        }
                    )
                    if order["cmd"] == "stop":
                        break
                    state.reconnecting = True
                    resumable = {slot.index for slot in slots if slot.offset is not None}
                    state.disconnect_reasons, state.connect_errors = {}, {}
                    # The restart's own connects need not queue behind the ramp's narrow gate.
                    for _ in range(max(0, 64 - task["concurrency"])):
                        gate.release()
                elif order["cmd"] == "back":
                    _print(await _await_back(slots, state, order["since"], order["timeout"], resumable))
        finally:
            state.closing = True
            nursery.cancel_scope.cancel()
    reader.close()  # once its task is over: it may not wait on a closed epoll set


async def _await_back(
    slots: list[ClientSlot], state: HoldState, since: float, timeout: float, resumable: set[int]
) -> dict[str, Any]:
    """Once every socket connected after `since` (or `timeout` passed): how many came back,
    when the last did, and how many of those that had an event to resume from recovered."""
    cpu_before = cpu_seconds()
    with trio.move_on_after(timeout):
        await _until_all_connected_after(slots, since)
    back = [slot for slot in slots if (slot.connected_at or 0) > since]
    return {
        "back": len(back),
        "last": max((slot.connected_at or since for slot in back), default=since),
        "recovered": sum(1 for slot in back if slot.index in resumable and slot.recovered),
        "resumable": len(resumable),
        "errors": state.connect_errors,
        "cpu": cpu_seconds() - cpu_before,
    }


async def _until_all_connected_after(slots: list[ClientSlot], since: float) -> None:
    """Wait until every slot connected after `since`. A slot once back stays back, so each
    look resumes at the first slot not back yet: rescanning every slot each time cost the
    generator CPU the server's reconnects were competing for."""
    waiting = 0
    while True:
        while waiting < len(slots) and (slots[waiting].connected_at or 0) > since:
            waiting += 1
        if waiting == len(slots):
            return
        await trio.sleep(0.05)


def _print(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def main() -> None:
    if sys.argv[1:]:
        print("run through `volthub loadtest --hold N` (this module is its generator process)", file=sys.stderr)
        raise SystemExit(2)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    tune_garbage_collector(GENERATOR_GEN0_THRESHOLD)
    trio.run(_worker, yield_to_server())


if __name__ == "__main__":
    main()
