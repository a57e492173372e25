"""One load-test run against one server: provision, then the scenario's stages, drain, report.

1. provision — channels (and, for volthub, users and tokens) through the API, unless the
   tester gave tokens;
2. stages — each brings the client count to its own (at once, or evenly over the stage; a
   ramp down lets the newest clients go), may drop a share of the sockets to reconnect
   (a storm), and offers chat at its rate, each message carrying its own send time. The
   plain flags are the fan-out: everyone at once (then `settle`), then `rate` for `duration`;
3. drain — until every client has every accepted message due to it, or `drain` seconds;
then the figures, from what the run recorded (volthub.loadtest.figures).

Every task lives in a nursery; the run ends by itself after at most RunConfig.seconds plus
a few seconds of shutdown.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx
import trio

from volthub.loadtest import protocol as p
from volthub.loadtest.client import ClientSlot, RunState, SocketOptions, socketio_client, sse_client
from volthub.loadtest.figures import Moment, deliveries_due, summary
from volthub.loadtest.metrics import ProcTrace, percentile, read_proc
from volthub.loadtest.scenario import SOCKET_KINDS, RunConfig, Stage, next_kind
from volthub.loadtest.servers import profiler_command, stop_profiler, top_frames
from volthub.loadtest.targets import Channel, Target, check_url, new_run_tag, reachable

LATE_LIMIT = 1.0  # seconds: a send that cannot start this long after its due time is not sent


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
        channels: Sequence[Channel] | None = None,
    ) -> None:
        self.config = config
        self.plan = config.plan
        self.target = target
        self.pid = pid
        self.progress_stream = progress
        self.profile = profile
        self.profile_phase = profile_phase  # "ramp" (connects) or "send" (send + drain)
        self.profiler: trio.Process | None = None
        self.state = RunState(run_tag=new_run_tag(), start=time.monotonic())
        self.trace = ProcTrace()
        self.slots: list[ClientSlot] = []
        self.given = list(channels) if channels is not None else None  # --tokens: nothing is registered
        self.channels: list[Channel] = []  # the channels chat goes to
        self.quiet: Channel | None = None  # where idle holds listen (no chat is sent there)
        self.provisioned: list[Channel] = []  # accounts this run registered
        self.accepted_seqs: set[int] = set()
        self.statuses: list[Counter[str]] = [Counter() for _ in self.plan.stages]  # per stage
        self.send_latencies: array[float] = array("d")
        self.sent = 0
        self.stage_marks: list[dict[str, Any]] = []
        self.reconnects: list[dict[str, Any]] = []
        self.scopes: dict[int, trio.CancelScope] = {}
        self.phase = "provision"
        self.moments: dict[str, Moment] = {}
        self.peak_connected = 0
        self.profile_top: dict[str, Any] | None = None
        self.notes: list[str] = []
        self.load_at_start = os.getloadavg()
        self.connect_gate = trio.Semaphore(config.connect_concurrency)
        self.send_gate = trio.Semaphore(config.send_concurrency)
        self.options: dict[str, SocketOptions] = {}
        self.streams: httpx.AsyncClient | None = None
        self.clients: trio.Nursery | None = None
        self.progress_mark = (0.0, 0, 0)  # when, deliveries, latencies at the last progress line
        self.ramp_begin: float | None = None  # trio clock: when --connect-rate pacing began

    # --- the run --------------------------------------------------------------------------

    async def execute(self) -> dict[str, Any]:
        config, plan = self.config, self.plan
        check_url(self.target.base_url, config.allow_remote)
        host, port = check_url(self.target.socket_url, config.allow_remote)
        mount = check_url(self.target.base_url, config.allow_remote)
        if "sse" in plan.kinds and not self.target.supports_sse:
            raise ValueError(f"{self.target.name} has no SSE endpoint; use --sse 0 or a scenario without sse")
        if "gateway" in plan.kinds and self.target.socket_url == self.target.base_url:
            raise ValueError("the gateway client kind needs --target volthub-gateway (or --ws-url)")
        await reachable(self.target.base_url, self.target.socket_url)
        for kind in SOCKET_KINDS:
            where = mount if kind == "mount" else (host, port)
            self.options[kind] = SocketOptions(
                where[0], where[1], config.sio_path, config.namespace, config.ws_client, config.connect_timeout
            )
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
            self.streams = streams
            await self._channels(sender)
            async with trio.open_nursery() as outer:
                outer.start_soon(self._monitor)
                if self.profile_phase == "ramp":
                    await self._profile_start()
                self.moments["ramp_start"] = Moment.now(self.pid)
                self.state.measuring = True
                async with trio.open_nursery() as clients:
                    self.clients = clients
                    for index, stage in enumerate(plan.stages):
                        await self._stage(index, stage, sender)
                    self.moments["send_end"] = Moment.now(self.pid)
                    self.moments.setdefault("send_start", self.moments["send_end"])
                    self.moments.setdefault("ramp_end", self.moments["send_end"])
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
        return summary(self)

    async def _channels(self, http: httpx.AsyncClient) -> None:
        """The chat channels (and the idle holds' quiet one): the given tokens, or accounts
        registered now (which the caller removes afterwards unless told to keep them)."""
        wants_quiet = "idle" in self.plan.kinds
        if self.given is not None:
            found = [Channel(index, channel.id, channel.token) for index, channel in enumerate(self.given)]
            if wants_quiet and len(found) > 1:
                self.quiet = found.pop()
            elif wants_quiet:
                self.notes.append("one token only: the idle holds listen on the chat channel")
            self.channels = found
            return
        count = self.plan.channels + (1 if wants_quiet else 0)
        self.provisioned = await self.target.provision(http, count, self.state.run_tag)
        self.channels = list(self.provisioned[: self.plan.channels])
        if wants_quiet:
            self.quiet = self.provisioned[-1]

    async def _stage(self, index: int, stage: Stage, sender: httpx.AsyncClient) -> None:
        assert self.clients is not None
        self.phase = stage.name
        mark: dict[str, Any] = {"start": time.monotonic(), "disconnects_before": self.lost()}
        self.stage_marks.append(mark)
        if stage.rate > 0 and "send_start" not in self.moments:
            self.moments["send_start"] = Moment.now(self.pid)
            if self.profile_phase == "send":
                await self._profile_start()
        if stage.reconnect:
            self._storm(index, stage.reconnect)
        async with trio.open_nursery() as work:
            work.start_soon(self._adjust, index, stage)
            if stage.offered:
                work.start_soon(self._send_stage, index, stage, sender)
        connected = self._connected()
        if connected >= self.config.clients and "ramp_end" not in self.moments:
            self.moments["ramp_end"] = Moment.now(self.pid)
            if self.profile_phase == "ramp":
                await self._profile_stop()
        if stage.seconds == 0:
            await trio.sleep(self.config.settle)
        if connected > self.peak_connected:  # RSS per connection: read where the most are connected
            self.peak_connected = connected
            self.moments["peak"] = Moment.now(self.pid)
        mark.update(end=time.monotonic(), connected=self._connected(), disconnects_after=self.lost())

    async def _adjust(self, index: int, stage: Stage) -> None:
        """Bring the client count to the stage's: all at once (a stage of 0 seconds, then wait
        for the ramp), or evenly over the stage; a ramp down lets the newest clients go."""
        active = [slot for slot in self.slots if slot.left_at is None]
        change = stage.clients - len(active)
        joined: dict[str, int] = {}
        begin = trio.current_time()
        for step in range(abs(change)):
            if stage.seconds:
                await trio.sleep_until(begin + step * stage.seconds / abs(change))
            if change > 0:
                await self._join(next_kind(stage.mix, joined))
            else:
                self._leave(active[-1 - step])
        if stage.seconds == 0 and change > 0:
            await self._wait_for_ramp()
        elif stage.seconds:
            await trio.sleep_until(begin + stage.seconds)

    async def _join(self, kind: str) -> None:
        assert self.clients is not None
        index = len(self.slots)
        if kind == "idle" and self.quiet is not None:
            channel = self.quiet
        else:
            channel = self.channels[index % len(self.channels)]
        slot = ClientSlot(index, channel.index, kind)
        slot.recovery = kind in SOCKET_KINDS and any(stage.reconnect for stage in self.plan.stages)
        slot.read_delay = self.plan.slow_read_seconds if kind == "slow" else 0.0
        self.slots.append(slot)
        await self.connect_gate.acquire()
        if self.config.connect_rate > 0:
            if self.ramp_begin is None:
                self.ramp_begin = trio.current_time()
            await trio.sleep_until(self.ramp_begin + index / self.config.connect_rate)
        self.clients.start_soon(self._client, slot, channel)

    def _leave(self, slot: ClientSlot) -> None:
        slot.dropping = True
        slot.left_at = time.monotonic()
        scope = self.scopes.get(slot.index)
        if scope is not None:
            scope.cancel()

    async def _client(self, slot: ClientSlot, channel: Channel) -> None:
        """One client for as long as the run keeps it; a socket a storm dropped reconnects
        (asking to recover its session) and runs on."""
        while True:
            with trio.CancelScope() as scope:
                self.scopes[slot.index] = scope
                if slot.left_at is not None:
                    self.connect_gate.release()
                    return
                if slot.kind == "sse":
                    assert self.streams is not None
                    await sse_client(
                        slot,
                        channel,
                        self.target.base_url,
                        self.streams,
                        self.state,
                        self.connect_gate,
                        self.config.connect_timeout,
                    )
                else:
                    await socketio_client(slot, channel, self.options[slot.kind], self.state, self.connect_gate)
            if slot.left_at is not None or not slot.dropping or self.state.closing:
                return
            slot.dropping = False  # dropped by a storm: come back
            await self.connect_gate.acquire()

    def _storm(self, index: int, share: float) -> None:
        """Drop `share` of the connected sockets at once; each reconnects right away."""
        candidates = [
            slot
            for slot in self.slots
            if slot.kind in SOCKET_KINDS and slot.left_at is None and slot.connected_at and not slot.disconnected
        ]
        chosen = candidates[:: max(1, round(1 / share))] if share < 1 else candidates
        chosen = chosen[: round(share * len(candidates))]
        now = time.monotonic()
        for slot in chosen:
            record: dict[str, Any] = {
                "stage": index,
                "dropped_at": now,
                "connected_at": None,
                "recovered": None,
                "offset": slot.offset is not None,  # without one (no event yet) it cannot ask to resume
            }
            self.reconnects.append(record)
            slot.on_connect = _reconnected(record)
            slot.dropping = True
            scope = self.scopes.get(slot.index)
            if scope is not None:
                scope.cancel()

    async def _wait_for_ramp(self) -> None:
        with trio.move_on_after(self.config.ramp_timeout) as scope:
            while any(slot.connected_at is None and slot.error is None and slot.left_at is None for slot in self.slots):
                await trio.sleep(0.05)
        if scope.cancelled_caught:
            self.notes.append(f"ramp timed out after {self.config.ramp_timeout:.0f}s")

    async def _send_stage(self, index: int, stage: Stage, http: httpx.AsyncClient) -> None:
        """The stage's messages on schedule; one that cannot start within LATE_LIMIT of its due
        time (every send slot busy: the server answers slower than the rate asks) is not
        sent and counts as late, against the delivery ratio."""
        begin = trio.current_time()
        async with trio.open_nursery() as sends:
            for number in range(stage.offered):
                due = begin + number / stage.rate
                await trio.sleep_until(due)
                seq = len(self.state.offered_at)
                self.state.offered_at.append(time.monotonic())
                self.state.offered_stage.append(index)
                acquired = False
                with trio.move_on_at(due + LATE_LIMIT):
                    await self.send_gate.acquire()
                    acquired = True
                if acquired:
                    sends.start_soon(self._send_one, http, seq, index)
                else:
                    self.statuses[index]["late"] += 1

    async def _send_one(self, http: httpx.AsyncClient, seq: int, stage: int) -> None:
        channel = self.channels[seq % len(self.channels)]
        try:
            started_ns = time.monotonic_ns()
            text = p.make_message(self.state.run_tag, seq, started_ns, self.config.message_size)
            url, body, headers = self.target.publish(channel, text)
            self.sent += 1
            try:
                response = await http.post(url, json=body, headers=headers)
            except httpx.HTTPError as exc:
                self.statuses[stage][type(exc).__name__] += 1
                return
            now = time.monotonic()
            self.statuses[stage][str(response.status_code)] += 1
            if response.status_code == 200:
                self.accepted_seqs.add(seq)
                self.send_latencies.append(now - started_ns / 1e9)
                self.state.sends.add(now)
        finally:
            self.send_gate.release()

    async def _drain(self) -> None:
        with trio.move_on_after(self.config.drain):
            while self._outstanding() > 0:
                await trio.sleep(0.2)

    def _outstanding(self) -> int:
        """Deliveries of accepted messages still due; a Socket.IO client also awaits its
        by-name frames, which some servers send only after the `event` frames of every client."""
        due = deliveries_due(self, accepted_only=True)
        missing = 0
        for slot in self.slots:
            if slot.kind == "idle" or slot.joined_at is None or slot.disconnected:
                continue
            expected = sum(due.get(slot.index, {}).values())
            missing += max(0, expected - sum(slot.in_window.values()))
            if slot.kind in ("socketio", "mount", "gateway") and slot.left_at is None:
                missing += max(0, expected - slot.by_name)
        return missing

    def _connected(self) -> int:
        return sum(
            1 for slot in self.slots if slot.connected_at is not None and slot.left_at is None and not slot.disconnected
        )

    def lost(self) -> int:
        return sum(1 for slot in self.slots if slot.disconnected)

    async def _profile_start(self) -> None:
        """py-spy attached to the server until _profile_stop (SIGINT makes it write out)."""
        if self.profile is None or not self.pid or self.profiler is not None:
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
        await stop_profiler(process)
        if not self.profile.exists() or not self.profile.stat().st_size:
            problem = self._profile_log().read_text(errors="replace")[-300:]
            self.notes.append(f"profiler wrote nothing: {problem}")
            return
        self.profile_top = top_frames(self.profile.read_text())

    async def _monitor(self) -> None:
        """Server readings every sample_interval; the progress line every second on a
        terminal (rewritten in place), every five seconds otherwise (a line each)."""
        tty = self.progress_stream is not None and self.progress_stream.isatty()
        last_progress = time.monotonic()
        self.progress_mark = (last_progress, 0, 0)
        while True:
            now = time.monotonic()
            if self.pid:
                self.trace.add(read_proc(self.pid, now))
            if now - last_progress >= (1.0 if tty else 5.0):
                self._progress()
                last_progress = now
            await trio.sleep(self.config.sample_interval)

    # --- reporting --------------------------------------------------------------------------------

    def _progress(self, final: bool = False) -> None:
        stream = self.progress_stream
        if stream is None:
            return
        now = time.monotonic()
        since, delivered_before, latencies_before = self.progress_mark
        delivered = sum(slot.received for slot in self.slots)
        latencies = self.state.latencies
        recent = sorted(latencies[latencies_before:])
        self.progress_mark = (now, delivered, len(latencies))
        rate = (delivered - delivered_before) / max(1e-9, now - since)
        p99 = f"{1000 * percentile(recent, 99):.1f} ms" if recent else "–"
        statuses: Counter[str] = sum(self.statuses, Counter())
        refused = sum(count for status, count in statuses.items() if status[:1] in "45")
        failed = sum(count for status, count in statuses.items() if not status.isdigit() and status != "late")
        failures = sum(1 for slot in self.slots if slot.error)
        cpu = ""
        if len(self.trace.samples) >= 2:
            a, b = self.trace.samples[-2], self.trace.samples[-1]
            if b.at > a.at:
                cpu = f" | server cpu {100 * (b.cpu_seconds - a.cpu_seconds) / (b.at - a.at):3.0f}% rss {b.rss_bytes / 2**20:.0f} MiB"
        line = (
            f"[{self.target.name}] {self.phase:<9} {now - self.state.start:5.1f}s"
            f" | connected {self._connected()}/{self.config.clients}"
            f" | {rate:,.0f} deliveries/s | p99 {p99}"
            f" | sent {self.sent} ok {len(self.accepted_seqs)}"
            f" | errors: {refused} refused, {failed} failed, {statuses['late']} late,"
            f" {failures} connect failures, {self.lost()} lost{cpu}"
        )
        tty = stream.isatty()
        end = "\n" if final or not tty else ""
        stream.write(("\r\x1b[2K" if tty else "") + line + end)
        stream.flush()


def _reconnected(record: dict[str, Any]) -> Callable[[ClientSlot], None]:
    def seen(slot: ClientSlot) -> None:
        record["connected_at"] = slot.connected_at
        record["recovered"] = slot.recovered
        slot.on_connect = None

    return seen
