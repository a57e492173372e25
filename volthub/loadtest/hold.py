"""The hold measurement: N authenticated Socket.IO sockets held open, broadcasts to all of
them, and (optionally) a server restart they must come back from.

    volthub loadtest --spawn --target volthub-gateway --database postgresql://... \\
        --server-workers 8 --clients 0 --hold 100000 --hold-seconds 60 --hold-restart
    volthub loadtest --url http://127.0.0.1:8080 --ws-url http://127.0.0.1:8081 \\
        --server-pid PID --tokens tokens.txt --clients 0 --hold 250000

Every socket connects with one token (one channel's owner, so all of them are in that
channel). The hold then lasts S seconds; every K of them the harness posts a chat message in
the channel and each generator records when each socket got it. The figures: connects/s,
server and generator CPU per connect over the ramp and per held socket per second over the
hold (the server's whole process tree, from /proc), server RSS per connection, sockets lost,
per broadcast the sockets reached and the time until the last delivery, and p50/p99 over
every delivery. With a restart: the time from SIGTERM until every socket is back, and how
many the server recovered (connection state recovery).

What caps a hold on one machine, planned from N before anything starts:
- file descriptors: a process holds at most its open-file limit of them (`ulimit -Hn`), so
  the sockets are spread over generator processes, each with `FD_RESERVE` to spare; the
  server's processes have the same bound (with `serve --workers N`, each worker its own);
- ephemeral ports: connections from one local address to one server port can use at most
  the range in net.ipv4.ip_local_port_range (28,232 by default), and connect() slows down
  as the range fills, so against a loopback server each socket is bound to one of the
  source addresses 127.0.0.2, 127.0.0.3, ... in turn, enough that each uses at most a
  quarter of its range (Linux routes all of 127.0.0.0/8 to the loopback device).

The generator processes are volthub.loadtest.hold_worker.
"""

from __future__ import annotations

import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import trio

from volthub.loadtest import protocol as p
from volthub.loadtest.metrics import (
    Activity,
    LatencySummary,
    ProcSample,
    ProcTrace,
    activity_figures,
    activity_totals,
    descendants,
    parse_proc_ppid,
    read_proc,
    read_tree_activity,
    split_figures,
    summed_activity,
)
from volthub.loadtest.targets import Channel, VolthubTarget, check_url, new_run_tag

# Descriptors a generator process keeps for itself besides its sockets (stdio, epoll,
# wake-up pipes): it is planned with this much headroom.
FD_RESERVE = 100
# volthub serves at most (open-file limit - 256) connections ([server] max_connections 0;
# volthub.http.serving.RESERVED_DESCRIPTORS keeps the rest for the database, logs and
# listeners); a few more stay free for the REST calls of the run.
SERVER_RESERVE = 256 + 16
# Ports of the ephemeral range left unused per source address (other traffic of the machine).
PORT_MARGIN = 500
# A source address is planned for at most this share of its ephemeral range: connect()
# searches the range for a free port, and past about half full each search cost the
# generator more than the rest of its connect (measured: at 60,000 sockets over 3
# addresses the ramp fell from 3,000 to 550 connects/s, the generator's CPU per connect
# quadrupled and the server's upkeep while it waited was charged to every connect; over 12
# addresses it stayed at 3,000/s to the end).
PORT_SHARE = 0.25
# A broadcast's deliveries still arriving this long after it was sent make the server busy:
# CPU samples that close to one are left out of the upkeep figure.
BROADCAST_BUSY_SECONDS = 5.0


@dataclass(frozen=True)
class HoldPlan:
    requested: int
    sockets: int  # what the server's fd limit allows, at most `requested`
    processes: int  # generator processes
    addresses: int  # source addresses (127.0.0.2 on), 0: the socket's own (not a loopback server)
    server_fd_limit: int | None
    server_processes: int  # processes of the server that hold sockets (its workers)
    note: str | None


def plan_hold(
    requested: int,
    processes: int,
    server_fd_limit: int | None,
    server_fds_open: int,
    own_limit: int,
    *,
    server_processes: int = 1,
    per_address: int | None = None,
    addresses: int = 0,
) -> HoldPlan:
    """How many sockets to hold, over how many generator processes (0 = as few as fit) and
    source addresses (0 = as few as the ephemeral range allows; `per_address` None: the
    server is not on a loopback address, no source addresses)."""
    sockets, notes = requested, []
    if server_fd_limit is not None:
        each = max(0, server_fd_limit - max(server_fds_open, SERVER_RESERVE))
        capacity = each * server_processes
        if capacity < requested:
            sockets = capacity
            across = f"{server_processes} processes" if server_processes > 1 else "one process"
            notes.append(
                f"the server's open-file limit is {server_fd_limit:,} per process (ulimit -n, raised to "
                f"the hard limit) and each keeps {SERVER_RESERVE} descriptors for itself: {across} can "
                f"hold at most {capacity:,} sockets, so {sockets:,} of {requested:,} were attempted"
            )
    per_process = max(1, own_limit - FD_RESERVE)
    needed = max(1, math.ceil(sockets / per_process))
    if per_address is None:
        addresses = 0
    else:
        addresses = max(addresses, math.ceil(sockets / max(1, per_address)), 1)
        if addresses > 253:
            raise ValueError(f"{sockets:,} sockets need {addresses} source addresses; 127.0.0.2-254 are 253")
    return HoldPlan(
        requested,
        sockets,
        max(processes, needed),
        addresses,
        server_fd_limit,
        server_processes,
        "; ".join(notes) or None,
    )


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


def serving_processes(pid: int) -> list[int]:
    """The processes of a server that hold its sockets: the children of a parent that runs
    workers (`serve --workers N`), else the process itself."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = parse_proc_ppid((entry / "stat").read_text())
            except (OSError, ValueError, IndexError):
                continue
    below = [member for member in descendants(pid, parents) if parents.get(member) == pid]
    return below or [pid]


def ephemeral_ports(text: str | None = None) -> int:
    """How many local ports one source address has for connections to one server port."""
    try:
        text = text if text is not None else Path("/proc/sys/net/ipv4/ip_local_port_range").read_text()
        low, high = (int(value) for value in text.split())
        return high - low + 1
    except (OSError, ValueError):
        return 28_232  # Linux's default range, 32768-60999


def ports_per_address(ephemeral: int) -> int:
    """How many sockets one source address is planned for (see PORT_SHARE)."""
    return max(1, int((ephemeral - PORT_MARGIN) * PORT_SHARE))


def source_addresses(count: int) -> list[str]:
    return [f"127.0.0.{2 + index}" for index in range(count)]


def split(total: int, parts: int) -> list[int]:
    """`total` sockets over `parts` workers, as evenly as possible."""
    base, extra = divmod(total, parts)
    return [base + (1 if index < extra else 0) for index in range(parts)]


# --- the parent ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Restarted:
    """A server stopped and started again: its new pid (None: unknown) and when (monotonic
    time) the old one was gone, which splits the time it was down into stopping and starting."""

    pid: int | None
    gone: float


# Stops the server and has it started again.
Restarter = Callable[[], Awaitable[Restarted]]


@dataclass(frozen=True)
class HoldConfig:
    sockets: int
    seconds: float
    broadcast_every: float = 10.0  # 0: no broadcasts
    processes: int = 0
    addresses: int = 0
    connect_concurrency: int = 64
    connect_timeout: float = 30.0
    ramp_timeout: float = 300.0
    restart_timeout: float = 180.0
    sio_path: str = "/ws/events"
    server_workers: int = 1  # a spawned `serve --workers N`: wait for all N before planning


async def hold(
    name: str,
    base_url: str,
    socket_url: str,
    pid: int | None,
    config: HoldConfig,
    *,
    channel: Channel | None = None,
    restart: Restarter | None = None,
    progress: Any = sys.stderr,
) -> dict[str, Any]:
    """Open the sockets to a running volthub, hold them, broadcast, maybe restart the server."""
    host, port = check_url(socket_url)
    fd_limit, fds_open, serving = None, 0, 1
    if pid is not None:
        members = serving_processes(pid)
        with trio.move_on_after(60):  # /healthz answers once one worker is up, not all
            while config.server_workers > 1 and len(members) < config.server_workers:
                await trio.sleep(0.2)
                members = serving_processes(pid)
        fd_limit, fds_open = server_fds(members[0])
        serving = len(members)
    own_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    own_limit = own_limit if own_limit != resource.RLIM_INFINITY else 1 << 20
    loopback_v4 = host.startswith("127.")
    plan = plan_hold(
        config.sockets,
        config.processes,
        fd_limit,
        fds_open,
        own_limit,
        server_processes=serving,
        per_address=ports_per_address(ephemeral_ports()) if loopback_v4 else None,
        addresses=config.addresses,
    )
    run_tag = new_run_tag()
    result: dict[str, Any] = {"target": name, "kind": "hold", **asdict(plan), "seconds": config.seconds}
    target = VolthubTarget(base_url, socket_url, name)
    async with httpx.AsyncClient(timeout=30) as http:
        if channel is None:
            channel = (await target.provision(http, 1, run_tag))[0]
            result["accounts"] = [channel.id]  # what the hold registered (removed afterwards unless --keep)
        else:
            result["accounts"] = []
        instructions = {
            "host": host,
            "port": port,
            "path": config.sio_path,
            "token": channel.token,
            "run_tag": run_tag,
            "sources": source_addresses(plan.addresses),
            "concurrency": max(1, config.connect_concurrency // plan.processes),
            "timeout": config.connect_timeout,
            "recovery": restart is not None,
        }
        session = _Session(pid, plan, progress, name)
        try:
            first = 0
            for count in split(plan.sockets, plan.processes):
                await session.start_worker({**instructions, "count": count, "first": first})
                first += count
            await session.ramp(config.ramp_timeout)
            await session.hold_phase(config, http, target, channel, run_tag)
            if restart is not None:
                await session.restart_phase(restart, config.restart_timeout)
            else:
                await session.stop_workers("stop")
        finally:
            await session.close()
    result.update(session.figures())
    restart_back = result.get("restart", {}).get("not_back", 0) == 0
    result["ok"] = (
        result["disconnects"] == 0
        and result["connected"] == plan.sockets
        and result["broadcasts"]["missed"] == 0
        and result["broadcasts"]["duplicates"] == 0
        and result["server_alive"] is not False
        and restart_back
    )
    return result


class _Session:
    """The generator processes of one hold and what they reported."""

    def __init__(self, pid: int | None, plan: HoldPlan, progress: Any, name: str) -> None:
        self.pid, self.plan, self.progress, self.name = pid, plan, progress, name
        self.workers: list[trio.Process] = []
        self.trace = ProcTrace()
        self.generator_trace = ProcTrace()  # the generator processes' CPU, read as the server's
        self.figures_: dict[str, Any] = {}
        self.broadcasts: list[tuple[int, float]] = []  # (seq, monotonic seconds sent)
        self.broadcast_errors: list[str] = []
        # The server tree's user/kernel CPU and switches: before the ramp, at its end, at the hold's.
        self.activity: dict[str, Activity | None] = {}

    async def start_worker(self, task: dict[str, Any]) -> None:
        argv = [sys.executable, "-m", "volthub.loadtest.hold_worker"]
        self.workers.append(await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        await _send_line(self.workers[-1], task)

    def _read(self) -> Any:
        return read_proc(self.pid, time.monotonic()) if self.pid is not None else None

    def _note_activity(self, moment: str) -> None:
        self.activity[moment] = read_tree_activity(self.pid) if self.pid is not None else None

    def _read_generators(self) -> ProcSample | None:
        """The generator processes' CPU summed into one reading (None once one is gone)."""
        now = time.monotonic()
        found = [read_proc(worker.pid, now) for worker in self.workers]
        if not found or any(sample is None for sample in found):
            return None
        cpu = sum(sample.cpu_seconds for sample in found if sample is not None)
        return ProcSample(now, cpu, sum(sample.rss_bytes for sample in found if sample is not None), len(found))

    async def ramp(self, timeout: float) -> None:
        self.load_before = list(os.getloadavg())
        self.before = self._read()
        self._note_activity("before")
        self.ramps = await _read_all(self.workers, timeout)
        self.ramp_end = time.monotonic()
        self.held = self._read()
        self._note_activity("held")
        self.connected = sum(r["connected"] for r in self.ramps)
        _say(self.progress, f"[{self.name}] hold: {self.connected:,} of {self.plan.sockets:,} connected")

    async def hold_phase(
        self, config: HoldConfig, http: httpx.AsyncClient, target: VolthubTarget, channel: Channel, run_tag: str
    ) -> None:
        self.hold_start = time.monotonic()
        self.trace.add(self.held)
        self.generator_trace.add(self._read_generators())

        margin = min(BROADCAST_BUSY_SECONDS, config.broadcast_every)
        stop_sending = time.monotonic() + max(0.0, config.seconds - margin)

        async def broadcast() -> None:
            seq = 0
            # The last one is sent early enough for its deliveries to fit in the hold.
            while time.monotonic() + config.broadcast_every <= stop_sending:
                await trio.sleep(config.broadcast_every)
                sent = time.monotonic()
                url, body, headers = target.publish(channel, p.make_message(run_tag, seq, time.monotonic_ns()))
                try:
                    response = await http.post(url, json=body, headers=headers)
                    if response.status_code >= 300:
                        self.broadcast_errors.append(f"HTTP {response.status_code}")
                    else:
                        self.broadcasts.append((seq, sent))
                except httpx.HTTPError as exc:
                    self.broadcast_errors.append(type(exc).__name__)
                seq += 1

        async with trio.open_nursery() as nursery:
            if config.broadcast_every > 0:
                nursery.start_soon(broadcast)
            with trio.move_on_after(config.seconds):
                while True:
                    await trio.sleep(1.0)
                    self.trace.add(self._read())
                    self.generator_trace.add(self._read_generators())
            nursery.cancel_scope.cancel()

    async def stop_workers(self, cmd: str) -> None:
        for worker in self.workers:
            await _send_line(worker, {"cmd": cmd})
        self.ends = await _read_all(self.workers, 120)
        self.hold_end = time.monotonic()
        self.hold_cpu = self._read()
        self._note_activity("after")

    async def restart_phase(self, restart: Restarter, timeout: float) -> None:
        await self.stop_workers("restart")
        _say(self.progress, f"[{self.name}] restarting the server")
        stopped = time.monotonic()
        restarted = await restart()
        serving = time.monotonic()
        self.pid = restarted.pid
        started = self._read()  # the new server's start-up is not the reconnects' cost
        for worker in self.workers:
            await _send_line(worker, {"cmd": "back", "since": stopped, "timeout": timeout - (serving - stopped)})
        backs = await _read_all(self.workers, timeout + 60)
        reconnected = self._read()
        back = sum(r["back"] for r in backs)
        server_cpu = reconnected.cpu_seconds - started.cpu_seconds if started and reconnected else None
        generator_cpu = sum(r["cpu"] for r in backs)
        last = max((r["last"] for r in backs), default=stopped)
        errors: dict[str, int] = {}
        for report in backs:
            for reason, count in report["errors"].items():
                errors[reason] = errors.get(reason, 0) + count
        self.figures_["restart"] = {
            "server_down_seconds": round(serving - stopped, 2),
            # The old server's exit (its connections closed, its state saved), then the new one's start.
            "server_stopping_seconds": round(restarted.gone - stopped, 2),
            "server_starting_seconds": round(serving - restarted.gone, 2),
            "back": back,
            "not_back": self.connected - back,
            "seconds_until_all_back": round(last - stopped, 2) if back == self.connected else None,
            "seconds_until_last_back": round(last - stopped, 2),
            "recovered": sum(r["recovered"] for r in backs),
            "resumable": sum(r["resumable"] for r in backs),
            "reconnect_errors": errors,
            "generator_cpu_seconds": round(generator_cpu, 2),
            # From the new server answering until the last socket was back (unknown without its pid).
            "server_cpu_seconds": round(server_cpu, 2) if server_cpu is not None else None,
            "server_cpu_ms_per_reconnect": _ratio(server_cpu * 1e3, back) if server_cpu is not None else None,
            "generator_cpu_ms_per_reconnect": _ratio(generator_cpu * 1e3, back),
        }
        await self.stop_workers_quietly()

    async def stop_workers_quietly(self) -> None:
        for worker in self.workers:
            await _send_line(worker, {"cmd": "stop"})
        await _read_all(self.workers, 60)

    async def close(self) -> None:
        """Each generator ends once its stdin does (killed after 10 s); one that fails is
        counted (`generator_failures`) and its error is on this process's stderr."""
        with trio.CancelScope(shield=True):
            for worker in self.workers:
                if worker.stdin is not None:
                    await worker.stdin.aclose()
            with trio.move_on_after(10):
                for worker in self.workers:
                    await worker.wait()
            for worker in self.workers:
                if worker.returncode is None:
                    worker.kill()
                await worker.wait()
        self.figures_["generator_failures"] = sum(1 for worker in self.workers if worker.returncode != 0)

    def figures(self) -> dict[str, Any]:
        return hold_figures(self)


def hold_figures(session: _Session) -> dict[str, Any]:
    """The report of a finished hold from what its session gathered."""
    ramps, ends, connected = session.ramps, session.ends, session.connected
    ramp_seconds = max(r["last"] for r in ramps) - min(r["began"] for r in ramps)
    held_seconds = session.hold_end - session.ramp_end
    reasons: dict[str, int] = {}
    errors: dict[str, int] = {}
    for report in ends:
        for reason, count in report["reasons"].items():
            reasons[reason] = reasons.get(reason, 0) + count
    for report in ramps:
        for reason, count in report["errors"].items():
            errors[reason] = errors.get(reason, 0) + count
    disconnects = sum(r["disconnects"] for r in ends)
    figures: dict[str, Any] = {
        "connected": connected,
        "connect_failures": sum(r["failed"] for r in ramps),
        "connect_errors": errors,
        "connects_per_second": round(connected / max(1e-9, ramp_seconds), 1),
        "ramp_seconds": round(ramp_seconds, 1),
        "held_seconds": round(held_seconds, 1),
        "disconnects": disconnects,
        "disconnect_reasons": reasons,
        "generator": generator_figures(
            ramps,
            ends,
            connected,
            held_seconds,
            session.generator_trace.samples,
            [sent for _, sent in session.broadcasts],
        ),
        "broadcasts": broadcast_figures(session.broadcasts, ends, connected - disconnects),
        **session.figures_,
    }
    figures["broadcasts"]["errors"] = session.broadcast_errors
    figures["broadcasts"]["failed"] = len(session.broadcast_errors)
    before, held, after = session.before, session.held, session.hold_cpu
    if before is not None and held is not None:
        rss_growth = held.rss_bytes - before.rss_bytes
        quiet_cpu, quiet_seconds = quiet_upkeep(session.trace.samples, [sent for _, sent in session.broadcasts])
        delivered = sum(row["reached"] for row in figures["broadcasts"]["each"])
        hold_cpu = after.cpu_seconds - held.cpu_seconds if after is not None else None
        # What broadcasting cost: the hold's CPU beyond the upkeep's rate.
        busy = hold_cpu - quiet_cpu / quiet_seconds * held_seconds if hold_cpu is not None and quiet_seconds else None
        ramp_cpu = held.cpu_seconds - before.cpu_seconds
        # The ramp's CPU also kept the sockets already connected (about half of them on
        # average over a steady ramp) at the hold's upkeep rate: what the connects cost themselves.
        upkeep_rate = quiet_cpu / quiet_seconds / connected if quiet_seconds and connected else None
        itself = ramp_cpu - upkeep_rate * connected / 2 * ramp_seconds if upkeep_rate is not None else None
        figures["server"] = {
            "cpu_ms_per_connect_itself": _ratio(itself * 1e3, connected) if itself is not None else None,
            # None when the broadcasts' CPU is within the upkeep's noise (too few deliveries).
            "cpu_us_per_delivery": _ratio(busy * 1e6, delivered) if busy is not None and busy > 0 else None,
            "cpu_ms_per_connect": _ratio(ramp_cpu * 1e3, connected),
            "cpu_us_per_socket_second": _ratio(hold_cpu * 1e6, connected * held_seconds)
            if hold_cpu is not None
            else None,
            "quiet_cpu_us_per_socket_second": _ratio(quiet_cpu * 1e6, connected * quiet_seconds),
            "rss_connected_mib": round(held.rss_bytes / 2**20, 1),
            "rss_peak_mib": round(session.trace.peak_rss() / 2**20, 1),
            "rss_growth_kib_per_connection": _ratio(rss_growth / 1024, connected),
        }
    server_split = split_figures(session.activity, connected)
    if server_split and "server" in figures:
        figures["server"].update(server_split)
    figures["load_average"] = {"before": session.load_before, "after": list(os.getloadavg())}
    refused = machine_refusals(errors)
    if refused:
        figures["machine_note"] = f"the machine refused connections after {connected:,} were open: " + "; ".join(
            f"{reason} x{count:,}" for reason, count in refused.items()
        )
    alive = session.pid is not None and read_proc(session.pid, time.monotonic()) is not None
    figures["server_alive"] = alive if session.pid is not None else None
    return figures


def generator_figures(
    ramps: list[dict[str, Any]],
    ends: list[dict[str, Any]],
    connected: int,
    held_seconds: float,
    samples: list[ProcSample],
    broadcasts: list[float],
) -> dict[str, Any]:
    """The generator's own cost: CPU per connect over the ramp, per held socket-second, and
    per delivery: the hold's CPU beyond its upkeep (the rate between the /proc `samples`
    away from the `broadcasts`, as for the server)."""
    hold_cpu = sum(r["cpu"] for r in ends)
    delivered = sum(len(found) for r in ends for found in r["deliveries"].values())
    quiet_cpu, quiet_seconds = quiet_upkeep(samples, broadcasts)
    busy = hold_cpu - quiet_cpu / quiet_seconds * held_seconds if quiet_seconds else None
    ramp_activity = summed_activity(ramps)
    hold_activity = summed_activity(ends)
    split = {
        **(activity_figures(ramp_activity, connected, "connect", 1e3) if ramp_activity else {}),
        **({"hold_activity": activity_totals(hold_activity)} if hold_activity else {}),
    }
    return {
        **split,
        "cpu_ms_per_connect": _ratio(sum(r["cpu"] for r in ramps) * 1e3, connected),
        "cpu_us_per_socket_second": _ratio(hold_cpu * 1e6, connected * held_seconds),
        # None when the broadcasts' CPU is within the upkeep's noise (too few deliveries).
        "cpu_us_per_delivery": _ratio(busy * 1e6, delivered) if busy is not None and busy > 0 else None,
        # Deliveries recorded by comparing a read with a broadcast's bytes already parsed whole.
        "recognised_reads": sum(r.get("recognised", 0) for r in ends),
        # Generator processes that ran as batch jobs (SCHED_BATCH: their wake-ups do not
        # preempt the server), of all of them: the report says what the harness set.
        "batch_processes": sum(1 for r in ramps if r.get("batch")),
        "processes": len(ramps),
    }


# Errors that are the machine's limits, not the server's answers: no free local port for the
# address (EADDRNOTAVAIL), no descriptor left (EMFILE, ENFILE), no buffer space (ENOBUFS).
MACHINE_LIMITS = {"Errno 99": "no free local port", "Errno 24": "open-file limit", "Errno 23": "system file table"}
MACHINE_LIMITS["Errno 105"] = "no buffer space"


def machine_refusals(errors: dict[str, int]) -> dict[str, int]:
    """The connect errors that are a limit of this machine, by what the limit is."""
    found: dict[str, int] = {}
    for reason, count in errors.items():
        for code, limit in MACHINE_LIMITS.items():
            if code in reason:
                found[limit] = found.get(limit, 0) + count
    return found


def quiet_upkeep(samples: list[Any], broadcasts: list[float]) -> tuple[float, float]:
    """Server CPU seconds and wall seconds between consecutive /proc samples that no
    broadcast was busy in (from its send to BROADCAST_BUSY_SECONDS later): what held sockets
    cost by themselves (pings, timers)."""
    cpu = seconds = 0.0
    for a, b in zip(samples, samples[1:], strict=False):
        if any(sent - 0.5 <= b.at and a.at <= sent + BROADCAST_BUSY_SECONDS for sent in broadcasts):
            continue
        cpu += b.cpu_seconds - a.cpu_seconds
        seconds += b.at - a.at
    return cpu, seconds


def broadcast_figures(sent: list[tuple[int, float]], ends: list[dict[str, Any]], held: int) -> dict[str, Any]:
    """Per broadcast: sockets reached and the time until the last delivery; percentiles over
    every delivery of every broadcast."""
    by_seq: dict[int, list[float]] = {}
    for report in ends:
        for seq, found in report["deliveries"].items():
            by_seq.setdefault(int(seq), []).extend(found)
    each: list[dict[str, Any]] = []
    every: list[float] = []
    missed = 0
    duplicates = sum(report.get("duplicates", 0) for report in ends)
    for seq, _ in sent:
        found = sorted(by_seq.get(seq, ()))
        every.extend(found)
        missed += max(0, held - len(found))
        each.append({"seq": seq, "reached": len(found), "last_ms": found[-1] if found else None})
    summary = LatencySummary.of([ms / 1e3 for ms in every]).as_ms() if every else {}
    return {
        "sent": len(sent),
        "sockets": held,
        "missed": missed,
        "duplicates": duplicates,  # a broadcast read again by a socket that had it (counted once)
        "each": each,
        "latency_ms": summary,
        "last_ms_max": max((row["last_ms"] for row in each if row["last_ms"] is not None), default=None),
    }


def _ratio(amount: float, per: float) -> float | None:
    return round(amount / per, 3) if per else None


async def _send_line(worker: trio.Process, payload: dict[str, Any]) -> None:
    assert worker.stdin is not None
    await worker.stdin.send_all(json.dumps(payload).encode() + b"\n")


async def _read_all(workers: list[trio.Process], timeout: float) -> list[dict[str, Any]]:
    """One JSON line from every worker (all read at once: they work in parallel)."""
    found: list[dict[str, Any]] = [{}] * len(workers)

    async def read(index: int) -> None:
        stream = workers[index].stdout
        assert stream is not None
        chunks: list[bytes | bytearray] = []
        while not chunks or b"\n" not in chunks[-1]:
            chunk = await stream.receive_some(1 << 20)
            if not chunk:
                raise RuntimeError(f"hold worker {index} exited early (code {workers[index].returncode})")
            chunks.append(chunk)
        found[index] = json.loads(b"".join(chunks).split(b"\n", 1)[0])

    with trio.fail_after(timeout):
        async with trio.open_nursery() as nursery:
            for index in range(len(workers)):
                nursery.start_soon(read, index)
    return found


def _say(stream: Any, text: str) -> None:
    if stream is not None:
        print(text, file=stream, flush=True)


# --- restarting the server ------------------------------------------------------------------------


async def restart_by_signal(pid: int, base_url: str, timeout: float) -> Restarted:
    """A server the harness did not start: SIGTERM its pid, then wait until it answers
    /healthz again (its supervisor starts it again). The new pid is not known."""
    os.kill(pid, signal.SIGTERM)
    async with httpx.AsyncClient(timeout=2) as http:
        with trio.fail_after(timeout):
            while read_proc(pid, time.monotonic()) is not None:  # gone first
                await trio.sleep(0.1)
            gone = time.monotonic()
            while True:
                try:
                    if (await http.get(f"{base_url}/healthz")).status_code == 200:
                        return Restarted(None, gone)
                except httpx.HTTPError:
                    pass
                await trio.sleep(0.1)
