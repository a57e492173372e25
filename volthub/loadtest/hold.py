"""The hold measurement: N Socket.IO sockets held open for S seconds, no disconnects.

    volthub loadtest --spawn --target volthub,volthub-gateway --hold 20000 --hold-seconds 60 ...

A spawned server gets N authenticated sockets (one registered user; the token in
`auth.token`), opened from several generator processes, then is left alone for S seconds
while its RSS and CPU are read; the clients answer the server's pings. At the end each
generator reports how many of its sockets were lost (closed by the server, a timeout, a
reset) during the hold.

Why several generator processes: every socket is a file descriptor at both ends, and a
process may hold at most `ulimit -Hn` of them. The server has the same bound, so the hold
is capped to what the server's fd limit leaves after its own descriptors (database,
listeners, epoll, logs), and the report says so. Loopback connections to one port can use
the whole ephemeral range (net.ipv4.ip_local_port_range, 32768–60999 by default), which is
not the bound below ~28,000 sockets.

A worker is this module run as `python -m volthub.loadtest.hold --worker ...`: it reads a
JSON line of instructions on stdin, opens its sockets, prints one JSON line when they are
all connected (or failed), and on the next stdin line prints its losses and exits.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from volthub.loadtest.client import ClientSlot, RunState, SocketOptions, socketio_client
from volthub.loadtest.metrics import ProcTrace, read_proc
from volthub.loadtest.pipes import lines as read_lines
from volthub.loadtest.targets import Channel, VolthubTarget, check_url, new_run_tag

# Descriptors a generator process keeps for itself besides its sockets (stdio, epoll,
# wake-up pipes): it is planned with this much headroom.
FD_RESERVE = 100
# volthub serves at most (open-file limit - 256) connections ([server] max_connections 0;
# volthub.http.serving.RESERVED_DESCRIPTORS keeps the rest for the database, logs and
# listeners); a few more stay free for the REST calls of the run.
SERVER_RESERVE = 256 + 16


@dataclass(frozen=True)
class HoldPlan:
    requested: int
    sockets: int  # what the server's fd limit allows, at most `requested`
    processes: int  # generator processes
    server_fd_limit: int | None
    note: str | None


def plan_hold(
    requested: int, processes: int, server_fd_limit: int | None, server_fds_open: int, own_limit: int
) -> HoldPlan:
    """How many sockets to hold and over how many generator processes (0 = as few as fit)."""
    sockets, note = requested, None
    if server_fd_limit is not None:
        capacity = max(0, server_fd_limit - max(server_fds_open, SERVER_RESERVE))
        if capacity < requested:
            sockets = capacity
            note = (
                f"the server's open-file limit is {server_fd_limit:,} (ulimit -n, raised to the hard "
                f"limit, which is not raisable here) and it keeps {SERVER_RESERVE} descriptors for "
                f"itself: one process can hold at most {capacity:,} sockets, so {sockets:,} of "
                f"{requested:,} were attempted"
            )
    per_process = max(1, own_limit - FD_RESERVE)
    needed = max(1, math.ceil(sockets / per_process))
    return HoldPlan(requested, sockets, max(processes, needed), server_fd_limit, note)


def open_files_limit(limits_text: str) -> int | None:
    """The soft `Max open files` of a /proc/<pid>/limits text (None: unlimited or absent)."""
    for line in limits_text.splitlines():
        if line.startswith("Max open files"):
            soft = line[len("Max open files") :].split()[0]
            return int(soft) if soft.isdigit() else None
    return None


def server_fds(pid: int) -> tuple[int | None, int]:
    """(open-file limit, descriptors open now) of a process, from /proc."""
    try:
        limit = open_files_limit(Path(f"/proc/{pid}/limits").read_text())
        return limit, len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None, 0


def split(total: int, parts: int) -> list[int]:
    """`total` sockets over `parts` workers, as evenly as possible."""
    base, extra = divmod(total, parts)
    return [base + (1 if index < extra else 0) for index in range(parts)]


# --- the parent ----------------------------------------------------------------------------------


async def hold(
    name: str,
    base_url: str,
    socket_url: str,
    pid: int,
    *,
    sockets: int,
    seconds: float,
    processes: int = 0,
    connect_concurrency: int = 64,
    connect_timeout: float = 30.0,
    ramp_timeout: float = 300.0,
    sio_path: str = "/ws/events",
    cpus: str | None = None,
    progress: Any = sys.stderr,
) -> dict[str, Any]:
    """Open `sockets` sockets to a running volthub, hold them `seconds`, count the losses."""
    host, port = check_url(socket_url)
    fd_limit, fds_open = server_fds(pid)
    own_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    own_limit = own_limit if own_limit != resource.RLIM_INFINITY else 1 << 20
    plan = plan_hold(sockets, processes, fd_limit, fds_open, own_limit)
    async with httpx.AsyncClient(timeout=30) as http:
        channel = (await VolthubTarget(base_url, socket_url, name).provision(http, 1, new_run_tag()))[0]
    instructions = {
        "host": host,
        "port": port,
        "path": sio_path,
        "token": channel.token,
        "concurrency": max(1, connect_concurrency // plan.processes),
        "timeout": connect_timeout,
    }
    trace = ProcTrace()
    workers: list[trio.Process] = []
    result: dict[str, Any] = {
        "target": name,
        "kind": "hold",
        **asdict(plan),
        "seconds": seconds,
        "accounts": [channel.id],  # what the hold registered (removed afterwards unless --keep)
    }
    argv = [sys.executable, "-m", "volthub.loadtest.hold", "--worker"]
    if cpus:
        argv = ["taskset", "-c", cpus, *argv]
    try:
        for count in split(plan.sockets, plan.processes):
            workers.append(await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE))
            await _send_line(workers[-1], {**instructions, "count": count})
        before = read_proc(pid, time.monotonic())
        ramps = await _read_all(workers, ramp_timeout)
        ramp_end = time.monotonic()
        # From the first worker's first connect to the last socket connected (worker start-up
        # is not the server's connect rate).
        ramp_seconds = max(r["last"] for r in ramps) - min(r["began"] for r in ramps)
        connected = sum(r["connected"] for r in ramps)
        _say(progress, f"[{name}] hold: {connected:,} of {plan.sockets:,} connected; holding {seconds:g}s")
        held = read_proc(pid, ramp_end)
        with trio.move_on_after(seconds):
            while True:
                trace.add(read_proc(pid, time.monotonic()))
                await trio.sleep(1.0)
        for worker in workers:
            await _send_line(worker, {"stop": True})
        ends = await _read_all(workers, 60)
        hold_end = time.monotonic()
    finally:
        with trio.CancelScope(shield=True):
            for worker in workers:
                if worker.returncode is None:
                    worker.kill()
                await worker.wait()
    reasons: dict[str, int] = {}
    errors: dict[str, int] = {}
    for report in ends:
        for reason, count in report["reasons"].items():
            reasons[reason] = reasons.get(reason, 0) + count
    for report in ramps:
        for reason, count in report["errors"].items():
            errors[reason] = errors.get(reason, 0) + count
    rss_growth = held.rss_bytes - before.rss_bytes if held and before else None
    result.update(
        connected=connected,
        connect_failures=sum(r["failed"] for r in ramps),
        connect_errors=errors,
        connects_per_second=round(connected / max(1e-9, ramp_seconds), 1),
        held_seconds=round(hold_end - ramp_end, 1),
        disconnects=sum(r["disconnects"] for r in ends),
        disconnect_reasons=reasons,
        rss_connected_mib=round(held.rss_bytes / 2**20, 1) if held else None,
        rss_peak_mib=round(trace.peak_rss() / 2**20, 1) if trace.samples else None,
        rss_growth_kib_per_connection=round(rss_growth / 1024 / connected, 2) if rss_growth and connected else None,
        server_alive=read_proc(pid, time.monotonic()) is not None,
    )
    result["ok"] = result["disconnects"] == 0 and connected == plan.sockets and result["server_alive"]
    return result


async def _send_line(worker: trio.Process, payload: dict[str, Any]) -> None:
    assert worker.stdin is not None
    await worker.stdin.send_all(json.dumps(payload).encode() + b"\n")


async def _read_all(workers: list[trio.Process], timeout: float) -> list[dict[str, Any]]:
    """One JSON line from every worker (all read at once: they work in parallel)."""
    found: list[dict[str, Any]] = [{}] * len(workers)

    async def read(index: int) -> None:
        stream = workers[index].stdout
        assert stream is not None
        buffer = b""
        while b"\n" not in buffer:
            chunk = await stream.receive_some(65536)
            if not chunk:
                raise RuntimeError(f"hold worker {index} exited early (code {workers[index].returncode})")
            buffer += chunk
        found[index] = json.loads(buffer.split(b"\n", 1)[0])

    with trio.fail_after(timeout):
        async with trio.open_nursery() as nursery:
            for index in range(len(workers)):
                nursery.start_soon(read, index)
    return found


def _say(stream: Any, text: str) -> None:
    if stream is not None:
        print(text, file=stream, flush=True)


# --- a worker --------------------------------------------------------------------------------------


async def _worker() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(0))
    lines = read_lines(stdin)
    task = json.loads(await lines.__anext__())
    state = RunState(run_tag="hold", start=time.monotonic())
    options = SocketOptions(task["host"], task["port"], task["path"], "/", "raw", task["timeout"])
    channel = Channel(0, "hold", task["token"])
    slots = [ClientSlot(index, 0, "socketio") for index in range(task["count"])]
    began = time.monotonic()  # CLOCK_MONOTONIC: the same clock in every process of the machine
    async with trio.open_nursery() as nursery:
        gate = trio.Semaphore(task["concurrency"])
        for slot in slots:
            await gate.acquire()
            nursery.start_soon(socketio_client, slot, channel, options, state, gate)
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
            }
        )
        with trio.CancelScope() as scope:
            async for _ in lines:
                scope.cancel()  # the parent says the hold is over
        lost = sum(1 for slot in slots if slot.disconnected)
        _print({"disconnects": lost, "reasons": state.disconnect_reasons})
        state.closing = True
        nursery.cancel_scope.cancel()


def _print(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def main() -> None:
    if sys.argv[1:] != ["--worker"]:
        print("run through `volthub loadtest --hold N` (this module's own entry is its worker)", file=sys.stderr)
        raise SystemExit(2)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    trio.run(_worker)


if __name__ == "__main__":
    main()
