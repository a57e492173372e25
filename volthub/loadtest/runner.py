"""One load-test run against one server: provision, ramp, send, drain, report figures.

Phases, each timed and each with its own /proc readings of the server:

1. provision — channels (and, for volthub, users and tokens) through the API;
2. ramp — open every client (at most `connect_concurrency` connecting at once, optionally
   paced to `connect_rate`), then `settle` seconds: RSS growth per connection is measured
   across this phase;
3. send — `rate` chat messages per second for `duration` seconds, round-robin over the
   channels, each carrying its own send time;
4. drain — until every connected client has every accepted message of its channel, or
   `drain` seconds. Server CPU per 1,000 deliveries is measured over send + drain.

Every task lives in a nursery; the run ends by itself after at most
ramp_timeout + settle + duration + drain + a few seconds of shutdown.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from array import array
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx
import trio

from volthub.loadtest import protocol as p
from volthub.loadtest.client import ClientSlot, RunState, SocketOptions, socketio_client, sse_client
from volthub.loadtest.metrics import (
    LatencySummary,
    ProcSample,
    ProcTrace,
    log_histogram,
    machine_busy_seconds,
    percentile,
    read_proc,
    self_cpu_seconds,
)
from volthub.loadtest.servers import profiler_command, top_frames
from volthub.loadtest.targets import Channel, Target, check_url, new_run_tag


@dataclass(frozen=True)
class RunConfig:
    target: str = "volthub"
    sockets: int = 100
    sse: int = 0
    channels: int = 10
    rate: float = 10.0  # chat messages per second, all channels together
    duration: float = 10.0  # seconds of sending
    message_size: int = 64  # characters of chat text (the send time needs about 40)
    connect_concurrency: int = 64
    connect_rate: float = 0.0  # connects per second; 0 = as fast as the gate allows
    connect_timeout: float = 30.0
    ramp_timeout: float = 120.0
    settle: float = 1.0
    drain: float = 5.0
    send_concurrency: int = 64
    ws_client: str = "raw"
    sio_path: str = "/ws/events"
    namespace: str = "/"
    sample_interval: float = 0.5
    allow_remote: bool = False

    @property
    def clients(self) -> int:
        return self.sockets + self.sse


@dataclass
class Moment:
    """Server and generator readings taken at a phase boundary."""

    at: float
    server: ProcSample | None
    generator_cpu: float
    machine_busy: float | None = None  # all processes, all cores

    @classmethod
    def now(cls, pid: int | None) -> Moment:
        at = time.monotonic()
        return cls(at, read_proc(pid, at) if pid else None, self_cpu_seconds(), machine_busy_seconds())


def _cpu_between(a: Moment, b: Moment) -> float | None:
    if a.server is None or b.server is None:
        return None
    return b.server.cpu_seconds - a.server.cpu_seconds


class Run:
    def __init__(
        self,
        config: RunConfig,
        target: Target,
        pid: int | None,
        *,
        progress: TextIO | None = sys.stderr,
        profile: Path | None = None,
        profile_phase: str = "send",
    ) -> None:
        self.config = config
        self.target = target
        self.pid = pid
        self.progress_stream = progress
        self.profile = profile
        self.profile_phase = profile_phase  # "ramp" (connects) or "send" (send + drain)
        self.profiler: trio.Process | None = None
        self.state = RunState(run_tag=new_run_tag(), start=time.monotonic())
        self.trace = ProcTrace()
        self.slots: list[ClientSlot] = []
        self.channels: list[Channel] = []
        self.accepted: Counter[int] = Counter()  # 200 answers per channel index
        self.accepted_seqs: set[int] = set()
        self.statuses: Counter[str] = Counter()
        self.send_latencies: array[float] = array("d")
        self.sent = 0
        self.late_sends = 0
        self.phase = "provision"
        self.moments: dict[str, Moment] = {}
        self.profile_top: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.load_at_start = os.getloadavg()

    # --- the run --------------------------------------------------------------------------

    async def execute(self) -> dict[str, Any]:
        config = self.config
        check_url(self.target.base_url, config.allow_remote)
        host, port = check_url(self.target.socket_url, config.allow_remote)
        if config.sse and not self.target.supports_sse:
            raise ValueError(f"{self.target.name} has no SSE endpoint; use --sse 0")
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with (
            httpx.AsyncClient(
                timeout=httpx.Timeout(30.0),
                limits=httpx.Limits(
                    max_connections=config.send_concurrency, max_keepalive_connections=config.send_concurrency
                ),
            ) as sender,
            httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None), limits=limits) as streams,
        ):
            self.channels = await self.target.provision(sender, config.channels, self.state.run_tag)
            options = SocketOptions(
                host, port, config.sio_path, config.namespace, config.ws_client, config.connect_timeout
            )
            async with trio.open_nursery() as outer:
                outer.start_soon(self._monitor)
                if self.profile_phase == "ramp":
                    await self._profile_start()
                self.moments["ramp_start"] = Moment.now(self.pid)
                self.phase = "ramp"
                async with trio.open_nursery() as clients:
                    clients.start_soon(self._launch, clients, options, streams)
                    await self._wait_for_ramp()
                    self.moments["ramp_end"] = Moment.now(self.pid)
                    if self.profile_phase == "ramp":
                        await self._profile_stop()
                    self.phase = "settle"
                    await trio.sleep(config.settle)
                    self.moments["send_start"] = Moment.now(self.pid)
                    self.phase = "send"
                    self.state.measuring = True
                    if self.profile_phase == "send":
                        await self._profile_start()
                    await self._send_phase(sender)
                    self.moments["send_end"] = Moment.now(self.pid)
                    self.phase = "drain"
                    await self._drain()
                    self.moments["drain_end"] = Moment.now(self.pid)
                    self.state.measuring = False
                    self.phase = "close"
                    await self._profile_stop()
                    self.state.closing = True
                    clients.cancel_scope.cancel()
                outer.cancel_scope.cancel()
        self._progress(final=True)
        return self.result()

    async def _launch(self, nursery: trio.Nursery, options: SocketOptions, streams: httpx.AsyncClient) -> None:
        """Start every client; the gate holds back all but `connect_concurrency` of them
        until the ones before have connected (or failed)."""
        config = self.config
        gate = trio.Semaphore(config.connect_concurrency)
        kinds = ["socketio"] * config.sockets + ["sse"] * config.sse
        begin = trio.current_time()
        for index, kind in enumerate(kinds):
            channel = self.channels[index % len(self.channels)]
            slot = ClientSlot(index, channel.index, kind)
            self.slots.append(slot)
            await gate.acquire()
            if config.connect_rate > 0:
                await trio.sleep_until(begin + index / config.connect_rate)
            if kind == "socketio":
                nursery.start_soon(socketio_client, slot, channel, options, self.state, gate)
            else:
                nursery.start_soon(
                    sse_client, slot, channel, self.target.base_url, streams, self.state, gate, config.connect_timeout
                )

    async def _wait_for_ramp(self) -> None:
        with trio.move_on_after(self.config.ramp_timeout) as scope:
            while sum(1 for slot in self.slots if slot.connected_at or slot.error) < self.config.clients:
                await trio.sleep(0.05)
        if scope.cancelled_caught:
            self.notes.append(f"ramp timed out after {self.config.ramp_timeout:.0f}s")

    async def _send_phase(self, http: httpx.AsyncClient) -> None:
        config = self.config
        total = int(config.rate * config.duration)
        gate = trio.Semaphore(config.send_concurrency)
        begin = trio.current_time()
        async with trio.open_nursery() as sends:
            for seq in range(total):
                due = begin + seq / config.rate
                await trio.sleep_until(due)
                await gate.acquire()
                if trio.current_time() - due > 0.1:
                    self.late_sends += 1  # the server answers slower than the rate asks
                sends.start_soon(self._send_one, http, seq, gate)

    async def _send_one(self, http: httpx.AsyncClient, seq: int, gate: trio.Semaphore) -> None:
        channel = self.channels[seq % len(self.channels)]
        try:
            started_ns = time.monotonic_ns()
            text = p.make_message(self.state.run_tag, seq, started_ns, self.config.message_size)
            url, body, headers = self.target.publish(channel, text)
            self.sent += 1
            try:
                response = await http.post(url, json=body, headers=headers)
            except httpx.HTTPError as exc:
                self.statuses[type(exc).__name__] += 1
                return
            now = time.monotonic()
            self.statuses[str(response.status_code)] += 1
            if response.status_code == 200:
                self.accepted[channel.index] += 1
                self.accepted_seqs.add(seq)
                self.send_latencies.append(now - started_ns / 1e9)
                self.state.sends.add(now)
        finally:
            gate.release()

    async def _drain(self) -> None:
        with trio.move_on_after(self.config.drain):
            while self._outstanding() > 0:
                await trio.sleep(0.05)

    def _outstanding(self) -> int:
        """Deliveries still due; a Socket.IO client also awaits its by-name frames, which
        some servers send only after the `event` frames of every client."""
        missing = 0
        due_by_channel = self._due()
        for slot in self._measured():
            due = due_by_channel[slot.channel]
            missing += max(0, due - slot.received)
            if slot.kind == "socketio":
                missing += max(0, due - slot.by_name)
        return missing

    def _due(self) -> Counter[int]:
        """Messages each channel's clients should all get: those the server accepted, and
        those whose answer was lost (a timeout) but that some client received, which shows
        the server published them."""
        channels = len(self.channels)
        return Counter(seq % channels for seq in self.accepted_seqs | self.state.seen)

    def _measured(self) -> list[ClientSlot]:
        """Clients connected when sending began: the ones whose deliveries are counted."""
        start = self.moments["send_start"].at if "send_start" in self.moments else math.inf
        return [slot for slot in self.slots if slot.connected_at is not None and slot.connected_at <= start]

    async def _profile_start(self) -> None:
        """py-spy attached to the server until _profile_stop (SIGINT makes it write out)."""
        if self.profile is None or not self.pid:
            return
        try:
            with open(self._profile_log(), "wb") as log:  # a file: py-spy's chatter never blocks it
                self.profiler = await trio.lowlevel.open_process(
                    profiler_command(self.pid, self.profile), stdout=log, stderr=subprocess.STDOUT
                )
        except OSError as exc:
            self.notes.append(f"profiler did not start: {exc}")

    def _profile_log(self) -> Path:
        assert self.profile is not None
        return self.profile.with_name(self.profile.name + ".log")

    async def _profile_stop(self) -> None:
        process, self.profiler = self.profiler, None
        if process is None or self.profile is None:
            return
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
            with trio.move_on_after(30):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        if not self.profile.exists() or not self.profile.stat().st_size:
            problem = self._profile_log().read_text(errors="replace")[-300:]
            self.notes.append(f"profiler wrote nothing: {problem}")
            return
        self.profile_top = top_frames(self.profile.read_text())

    async def _monitor(self) -> None:
        """Server readings every sample_interval, and the progress line every second."""
        last_progress = 0.0
        while True:
            now = time.monotonic()
            if self.pid:
                self.trace.add(read_proc(self.pid, now))
            if now - last_progress >= (1.0 if self.progress_stream and self.progress_stream.isatty() else 5.0):
                self._progress()
                last_progress = now
            await trio.sleep(self.config.sample_interval)

    # --- reporting --------------------------------------------------------------------------------

    def _progress(self, final: bool = False) -> None:
        stream = self.progress_stream
        if stream is None:
            return
        connected = sum(1 for slot in self.slots if slot.connected_at is not None)
        failed = sum(1 for slot in self.slots if slot.error)
        elapsed = time.monotonic() - self.state.start
        delivered = sum(slot.received for slot in self.slots)
        cpu = ""
        if len(self.trace.samples) >= 2:
            a, b = self.trace.samples[-2], self.trace.samples[-1]
            if b.at > a.at:
                cpu = f" | server cpu {100 * (b.cpu_seconds - a.cpu_seconds) / (b.at - a.at):3.0f}% rss {b.rss_bytes / 2**20:.0f} MiB"
        send = ""
        if "send_start" in self.moments:
            send_elapsed = (
                min(time.monotonic(), self.moments.get("send_end", Moment(math.inf, None, 0)).at)
                - self.moments["send_start"].at
            )
            send = (
                f" | sent {self.sent} ok {sum(self.accepted.values())} in {send_elapsed:4.1f}/{self.config.duration:g}s"
            )
        line = (
            f"[{self.target.name}] {self.phase:<6} {elapsed:5.1f}s | connected {connected}/{self.config.clients}"
            f"{f' failed {failed}' if failed else ''}{send} | delivered {delivered}{cpu}"
        )
        tty = stream.isatty()
        end = "\n" if final or not tty else ""
        stream.write(("\r\x1b[2K" if tty else "") + line + end)
        stream.flush()

    def result(self) -> dict[str, Any]:
        config, state, moments = self.config, self.state, self.moments
        measured = self._measured()
        due = self._due()
        expected = sum(due[slot.channel] for slot in measured)
        received = sum(min(slot.received, due[slot.channel]) for slot in measured)
        extra = sum(max(0, slot.received - due[slot.channel]) for slot in measured)
        connected = [slot for slot in self.slots if slot.connected_at is not None]
        connect_times = sorted(slot.connect_seconds or 0.0 for slot in connected)
        ramp_start, ramp_end = moments["ramp_start"], moments["ramp_end"]
        last_connect = max((slot.connected_at or 0.0 for slot in connected), default=ramp_start.at)
        ramp_seconds = max(1e-9, last_connect - ramp_start.at)
        send_start, send_end, drain_end = moments["send_start"], moments["send_end"], moments["drain_end"]
        deliveries = sum(slot.received for slot in measured)
        send_seconds = max(1e-9, send_end.at - send_start.at)
        work_seconds = max(1e-9, drain_end.at - send_start.at)
        latency = LatencySummary.of(state.latencies)
        server_cpu = _cpu_between(send_start, drain_end)
        connect_cpu = _cpu_between(ramp_start, ramp_end)
        # The generator's own cost per connect: it runs on one core, so it caps the rate too.
        generator_connect_cpu = ramp_end.generator_cpu - ramp_start.generator_cpu
        rss_before = ramp_start.server.rss_bytes if ramp_start.server else None
        rss_after = send_start.server.rss_bytes if send_start.server else None
        generator_cpu = drain_end.generator_cpu - send_start.generator_cpu
        others = None  # CPU that neither the server nor the generator used: other processes
        if drain_end.machine_busy is not None and send_start.machine_busy is not None and server_cpu is not None:
            others = max(0.0, drain_end.machine_busy - send_start.machine_busy - server_cpu - generator_cpu)
        length = int(time.monotonic() - state.start) + 1
        by_name = sum(slot.by_name for slot in measured if slot.kind == "socketio")
        socket_deliveries = sum(slot.received for slot in measured if slot.kind == "socketio")
        result: dict[str, Any] = {
            "target": self.target.name,
            "url": self.target.base_url,
            "socket_url": self.target.socket_url,
            "server_pid": self.pid,
            "config": asdict(config),
            "clients": {
                "requested": config.clients,
                "connected": len(connected),
                "sockets_connected": sum(1 for slot in connected if slot.kind == "socketio"),
                "sse_connected": sum(1 for slot in connected if slot.kind == "sse"),
                "greeted": sum(1 for slot in connected if slot.greeted),
                "connect_failures": sum(1 for slot in self.slots if slot.error),
                "connect_errors": dict(state.connect_errors),
                "disconnects": sum(1 for slot in self.slots if slot.disconnected),
                "disconnect_reasons": dict(state.disconnect_reasons),
            },
            "connect": {
                "seconds": round(ramp_seconds, 3),
                "per_second": round(len(connected) / ramp_seconds, 1) if connected else 0.0,
                "latency_ms": {
                    "p50": _ms(percentile(connect_times, 50)),
                    "p99": _ms(percentile(connect_times, 99)),
                    "max": _ms(connect_times[-1] if connect_times else math.nan),
                },
                "server_cpu_seconds": _round(connect_cpu, 3),
                "server_cpu_ms_per_connect": _round(1000 * connect_cpu / len(connected), 3)
                if connect_cpu is not None and connected
                else None,
                "generator_cpu_ms_per_connect": round(1000 * generator_connect_cpu / len(connected), 3)
                if connected
                else None,
            },
            "send": {
                "attempted": self.sent,
                "accepted": sum(self.accepted.values()),
                "per_second": round(sum(self.accepted.values()) / send_seconds, 1),
                "statuses": dict(self.statuses),
                "late": self.late_sends,
                "latency_ms": LatencySummary.of(self.send_latencies).as_ms(),
            },
            "delivery": {
                "expected": expected,
                "received": received,
                "duplicates": extra,
                "ratio": round(received / expected, 6) if expected else None,
                "drops": expected - received,
                "clients_with_drops": sum(1 for slot in measured if slot.received < due[slot.channel]),
                "published_without_answer": len(self.state.seen - self.accepted_seqs),
                "per_second": round(deliveries / work_seconds, 1),
                "by_name_ratio": round(by_name / socket_deliveries, 4) if socket_deliveries else None,
                "latency_ms": latency.as_ms(),
            },
            "server": {
                "cpu_seconds": _round(server_cpu, 3),
                "cpu_percent": _round(100 * server_cpu / work_seconds, 1) if server_cpu is not None else None,
                "cpu_seconds_per_1000_deliveries": _round(1000 * server_cpu / deliveries, 4)
                if server_cpu is not None and deliveries
                else None,
                "rss_before_connect_mib": _mib(rss_before),
                "rss_connected_mib": _mib(rss_after),
                "rss_peak_mib": _mib(self.trace.peak_rss() or None),
                "rss_growth_kib_per_connection": round((rss_after - rss_before) / 1024 / len(connected), 2)
                if rss_before is not None and rss_after is not None and connected
                else None,
            },
            "generator": {
                "cpu_seconds": round(generator_cpu, 3),
                "cpu_percent": round(100 * generator_cpu / work_seconds, 1),
            },
            "machine": {
                "cpus": os.cpu_count(),
                "other_processes_cpu_percent": _round(100 * others / work_seconds, 1) if others is not None else None,
                "load_average_at_start": [round(v, 2) for v in self.load_at_start],
            },
            "phases": {name: round(moment.at - state.start, 3) for name, moment in moments.items()},
            "series": {
                "seconds": list(range(length)),
                "deliveries_per_second": state.deliveries.values(length),
                "sends_per_second": state.sends.values(length),
                "connects_per_second": state.connects.values(length),
                "server_cpu_percent": [round(v, 1) for v in self.trace.cpu_percent_series(state.start, length)],
                "server_rss_mib": [round(v / 2**20, 1) for v in self.trace.rss_series(state.start, length)],
            },
            "latency_histogram": [[round(edge, 7), count] for edge, count in log_histogram(state.latencies)],
            "notes": list(self.notes),
        }
        if (result["machine"]["other_processes_cpu_percent"] or 0) > 15:
            result["notes"].append(
                f"other processes used {result['machine']['other_processes_cpu_percent']}% of a core while this "
                "measured: figures are disturbed; rerun on a quiet machine"
            )
        if result["generator"]["cpu_percent"] > 90:
            result["notes"].append("the generator used >90% of its core: figures may be generator-bound")
        if self.profile_top is not None:
            result["profile"] = self.profile_top
        return result


def _ms(value: float) -> float | None:
    return None if math.isnan(value) else round(value * 1000, 2)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _mib(value: int | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)
