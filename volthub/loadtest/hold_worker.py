"""One generator process of a hold (`python -m volthub.loadtest.hold_worker`).

It talks to the parent (volthub.loadtest.hold) in JSON lines: the first stdin line is its
task (sockets, source addresses, the token); it opens its sockets, each bound to one of the
source addresses in turn, and prints one line when all are connected or failed. Then it
answers each later stdin line with one stdout line:

- ``{"cmd": "stop"}`` or ``{"cmd": "restart"}``: what the hold cost it, the sockets lost and
  the deliveries of each broadcast (its sequence number -> latencies in ms). After
  ``restart`` every socket that is lost reconnects with the back-off of the official
  Socket.IO client (exponential from 1 s to 5 s, each delay randomised by ±50 %), asking
  for connection state recovery;
- ``{"cmd": "back", "since": T, "timeout": S}``: waits until every socket connected again
  after monotonic time T (or S seconds passed) and says how many came back, when the last
  did and how many the server recovered.

End of stdin ends the process (its sockets close with it).
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import trio

from volthub.loadtest import protocol as p
from volthub.loadtest.client import ClientSlot, RunState, SocketOptions, socketio_client
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


@dataclass(eq=False)
class HoldState(RunState):
    """A hold's deliveries by broadcast (sequence number -> latencies in ms)."""

    by_seq: dict[int, list[float]] = field(default_factory=dict)
    reconnecting: bool = False

    def delivered(self, slot: ClientSlot, now_ns: int, text: str) -> None:
        parsed = p.parse_message(text, self.run_tag)
        if parsed is None:
            return
        seq, sent_ns = parsed
        slot.received += 1
        self.by_seq.setdefault(seq, []).append(round((now_ns - sent_ns) / 1e6, 2))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def held_socket(
    slot: ClientSlot, channel: Channel, options: SocketOptions, state: HoldState, gate: trio.Semaphore
) -> None:
    """One socket: connected once; after a restart was announced, reconnected whenever lost."""
    rng = random.Random()
    attempt = 0
    while True:
        connected_before = slot.connected_at
        await socketio_client(slot, channel, options, state, gate)
        if not state.reconnecting or state.closing:
            return
        # Lost (or a reconnect refused while the server is down): try again after the back-off,
        # which starts over once a connect succeeded.
        attempt = 0 if slot.connected_at != connected_before else attempt
        await trio.sleep(backoff(attempt, rng))
        attempt += 1
        slot.error, slot.disconnected = None, False
        await gate.acquire()


async def _worker() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(0))
    lines = read_lines(stdin)
    task = json.loads(await lines.__anext__())
    state = HoldState(run_tag=task["run_tag"], start=time.monotonic())
    sources: list[str | None] = task.get("sources") or [None]
    first = task.get("first", 0)
    channel = Channel(0, "hold", task["token"])
    slots = [ClientSlot(index, 0, "socketio", recovery=task.get("recovery", False)) for index in range(task["count"])]
    cpu_began, began = cpu_seconds(), time.monotonic()  # CLOCK_MONOTONIC: one clock for the machine
    async with trio.open_nursery() as nursery:
        gate = trio.Semaphore(task["concurrency"])
        for slot in slots:
            source = sources[(first + slot.index) % len(sources)]
            options = SocketOptions(task["host"], task["port"], task["path"], "/", "raw", task["timeout"], source)
            await gate.acquire()
            nursery.start_soon(held_socket, slot, channel, options, state, gate)
        while any(slot.connected_at is None and slot.error is None for slot in slots):
            await trio.sleep(0.05)
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
            }
        )
        cpu_held = cpu_seconds()
        resumable: set[int] = set()
        async for line in lines:
            order = json.loads(line)
            if order["cmd"] in ("stop", "restart"):
                _print(
                    {
                        "disconnects": sum(1 for slot in slots if slot.disconnected),
                        "reasons": state.disconnect_reasons,
                        "deliveries": {str(seq): found for seq, found in state.by_seq.items()},
                        "cpu": cpu_seconds() - cpu_held,
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
        state.closing = True
        nursery.cancel_scope.cancel()


async def _await_back(
    slots: list[ClientSlot], state: HoldState, since: float, timeout: float, resumable: set[int]
) -> dict[str, Any]:
    """Once every socket connected after `since` (or `timeout` passed): how many came back,
    when the last did, and how many of those that had an event to resume from recovered."""
    cpu_before = cpu_seconds()
    with trio.move_on_after(timeout):
        while any((slot.connected_at or 0) <= since for slot in slots):
            await trio.sleep(0.05)
    back = [slot for slot in slots if (slot.connected_at or 0) > since]
    return {
        "back": len(back),
        "last": max((slot.connected_at or since for slot in back), default=since),
        "recovered": sum(1 for slot in back if slot.index in resumable and slot.recovered),
        "resumable": len(resumable),
        "errors": state.connect_errors,
        "cpu": cpu_seconds() - cpu_before,
    }


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
    trio.run(_worker)


if __name__ == "__main__":
    main()
