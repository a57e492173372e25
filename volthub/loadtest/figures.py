"""What a run measured, from what it recorded: the deliveries due to each client and the
summary (every figure, overall and per stage) that report, checks and --json read.

A client is due every message offered on its channel from its first connect until it is
let go (LEAVE_GRACE before): a send refused, failed or not sent in time counts as a drop
for every client that should have had it, so the delivery ratio is over what was offered.
Server CPU per 1,000 deliveries covers sending and the drain; RSS growth per connection
runs from before the first connect to the moment the most clients were connected.
"""

from __future__ import annotations

import math
import os
import time
from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from volthub.loadtest.client import ClientSlot, RunState
from volthub.loadtest.metrics import (
    LatencySummary,
    ProcSample,
    ProcTrace,
    latency_figures,
    log_histogram,
    machine_busy_seconds,
    percentile,
    read_proc,
    self_cpu_seconds,
)
from volthub.loadtest.scenario import RunConfig, Scenario
from volthub.loadtest.targets import Channel, Target

LEAVE_GRACE = 1.0  # seconds: a client let go is due what was offered this long before it left


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


class Recorded(Protocol):
    """What a run recorded, as the figures read it (`volthub.loadtest.runner.Run`)."""

    config: RunConfig
    plan: Scenario
    target: Target
    pid: int | None
    state: RunState
    trace: ProcTrace
    slots: list[ClientSlot]
    channels: list[Channel]
    given: list[Channel] | None
    provisioned: list[Channel]
    accepted_seqs: set[int]
    statuses: list[Counter[str]]
    send_latencies: array[float]
    sent: int
    stage_marks: list[dict[str, Any]]
    reconnects: list[dict[str, Any]]
    moments: dict[str, Moment]
    peak_connected: int
    profile_top: dict[str, Any] | None
    notes: list[str]
    load_at_start: tuple[float, float, float]

    def lost(self) -> int: ...


def _cpu_between(a: Moment, b: Moment) -> float | None:
    if a.server is None or b.server is None:
        return None
    return b.server.cpu_seconds - a.server.cpu_seconds


def deliveries_due(run: Recorded, accepted_only: bool = False) -> dict[int, dict[int, int]]:
    """Per client, per stage: the messages offered on its channel while it was in (from
    its first connect until LEAVE_GRACE before the run let it go). With `accepted_only`
    only those the server accepted (or some client received)."""
    count = len(run.channels)
    stages = len(run.plan.stages)
    times: list[list[float]] = [[] for _ in range(count)]
    marks: list[list[int]] = [[] for _ in range(count)]
    delivered = run.accepted_seqs | run.state.seen
    for seq, offered_at in enumerate(run.state.offered_at):
        if accepted_only and seq not in delivered:
            continue
        times[seq % count].append(offered_at)
        marks[seq % count].append(run.state.offered_stage[seq])
    due: dict[int, dict[int, int]] = {}
    for slot in run.slots:
        if slot.kind == "idle" or slot.joined_at is None or slot.channel >= count:
            continue
        end = math.inf if slot.left_at is None else slot.left_at - LEAVE_GRACE
        offered, stage_of = times[slot.channel], marks[slot.channel]
        low, high = bisect_left(offered, slot.joined_at), bisect_right(offered, end)
        if high <= low:
            continue
        due[slot.index] = {
            stage: bisect_right(stage_of, stage, low, high) - bisect_left(stage_of, stage, low, high)
            for stage in range(stages)
        }
    return due


def summary(run: Recorded) -> dict[str, Any]:
    """Every figure of the run, overall, per client kind and per stage, with notes on what may
    have disturbed them."""
    config, state, moments, plan = run.config, run.state, run.moments, run.plan
    due = deliveries_due(run)
    counted = [slot for slot in run.slots if slot.index in due]
    stage_count = len(plan.stages)

    def delivery(slots: Sequence[ClientSlot], stages: Sequence[int]) -> dict[str, Any]:
        expected = sum(due[slot.index].get(stage, 0) for slot in slots for stage in stages)
        received = sum(
            min(slot.in_window.get(stage, 0), due[slot.index].get(stage, 0)) for slot in slots for stage in stages
        )
        return {
            "expected": expected,
            "received": received,
            "ratio": round(received / expected, 6) if expected else None,
            "drops": expected - received,
        }

    timed = [slot for slot in counted if slot.kind != "slow"]
    everything = range(stage_count)
    overall = delivery(counted, everything)
    kinds = sorted({slot.kind for slot in counted})
    connected = [slot for slot in run.slots if slot.connected_at is not None]
    connect_times = sorted(slot.connect_seconds or 0.0 for slot in connected)
    ramp_start, ramp_end = moments["ramp_start"], moments["ramp_end"]
    last_connect = max((slot.joined_at or 0.0 for slot in connected), default=ramp_start.at)
    ramp_seconds = max(1e-9, min(last_connect, ramp_end.at) - ramp_start.at)
    send_start, send_end, drain_end = moments["send_start"], moments["send_end"], moments["drain_end"]
    peak = moments.get("peak", send_start)
    deliveries = sum(slot.received for slot in run.slots)
    send_seconds = max(1e-9, send_end.at - send_start.at)
    work_seconds = max(1e-9, drain_end.at - send_start.at)
    server_cpu = _cpu_between(send_start, drain_end)
    connect_cpu = _cpu_between(ramp_start, ramp_end)
    generator_connect_cpu = ramp_end.generator_cpu - ramp_start.generator_cpu
    rss_before = ramp_start.server.rss_bytes if ramp_start.server else None
    rss_after = peak.server.rss_bytes if peak.server else None
    generator_cpu = drain_end.generator_cpu - send_start.generator_cpu
    others = None  # CPU that neither the server nor the generator used: other processes
    if drain_end.machine_busy is not None and send_start.machine_busy is not None and server_cpu is not None:
        others = max(0.0, drain_end.machine_busy - send_start.machine_busy - server_cpu - generator_cpu)
    length = int(time.monotonic() - state.start) + 1
    by_name = sum(slot.by_name for slot in counted if slot.kind in ("socketio", "mount", "gateway"))
    socket_deliveries = sum(slot.received for slot in counted if slot.kind in ("socketio", "mount", "gateway"))
    statuses: Counter[str] = sum(run.statuses, Counter())
    processes = max((sample.processes for sample in run.trace.samples), default=1)
    result: dict[str, Any] = {
        "target": run.target.name,
        "url": run.target.base_url,
        "socket_url": run.target.socket_url,
        "server_pid": run.pid,
        "scenario": {"name": plan.name, "description": plan.description},
        "config": _config_dict(config),
        "provisioned": {"accounts": len(run.provisioned), "tokens_given": len(run.given or [])},
        "clients": {
            "requested": config.clients,
            "connected": len(connected),
            "sockets_connected": sum(1 for slot in connected if slot.kind != "sse"),
            "sse_connected": sum(1 for slot in connected if slot.kind == "sse"),
            "greeted": sum(1 for slot in connected if slot.greeted),
            "connect_failures": sum(1 for slot in run.slots if slot.error and slot.connected_at is None),
            "connect_errors": dict(state.connect_errors),
            "disconnects": run.lost(),
            "disconnect_reasons": dict(state.disconnect_reasons),
            "by_kind": dict(Counter(slot.kind for slot in run.slots)),
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
            **_sends(statuses, len(state.offered_at)),
            "attempted": run.sent,
            "per_second": round(statuses["200"] / send_seconds, 1),
            "latency_ms": LatencySummary.of(run.send_latencies).as_ms(),
        },
        "delivery": {
            **overall,
            "clients_with_drops": sum(
                1 for slot in counted if sum(slot.in_window.values()) < sum(due[slot.index].values())
            ),
            "published_without_answer": len(run.state.seen - run.accepted_seqs),
            "per_second": round(deliveries / work_seconds, 1),
            "by_name_ratio": round(by_name / socket_deliveries, 4) if socket_deliveries else None,
            "latency_ms": latency_figures(state.latencies, delivery(timed, everything)["expected"]),
            "by_kind": {kind: delivery([s for s in counted if s.kind == kind], everything) for kind in kinds},
        },
        "reconnect": _reconnect_figures(run.reconnects),
        "stages": {},
        "server": {
            "processes": processes,
            "cpu_seconds": _round(server_cpu, 3),
            "cpu_percent": _round(100 * server_cpu / work_seconds, 1) if server_cpu is not None else None,
            "cpu_seconds_per_1000_deliveries": _round(1000 * server_cpu / deliveries, 4)
            if server_cpu is not None and deliveries
            else None,
            "rss_before_connect_mib": _mib(rss_before),
            "rss_connected_mib": _mib(rss_after),
            "rss_peak_mib": _mib(run.trace.peak_rss() or None),
            "rss_growth_kib_per_connection": round((rss_after - rss_before) / 1024 / run.peak_connected, 2)
            if rss_before is not None and rss_after is not None and run.peak_connected
            else None,
        },
        "generator": {
            "cpu_seconds": round(generator_cpu, 3),
            "cpu_percent": round(100 * generator_cpu / work_seconds, 1),
        },
        "machine": {
            "cpus": os.cpu_count(),
            "other_processes_cpu_percent": _round(100 * others / work_seconds, 1) if others is not None else None,
            "load_average_at_start": [round(v, 2) for v in run.load_at_start],
        },
        "phases": {name: round(moment.at - state.start, 3) for name, moment in moments.items()},
        "series": {
            "seconds": list(range(length)),
            "deliveries_per_second": state.deliveries.values(length),
            "sends_per_second": state.sends.values(length),
            "connects_per_second": state.connects.values(length),
            "server_cpu_percent": [round(v, 1) for v in run.trace.cpu_percent_series(state.start, length)],
            "server_rss_mib": [round(v / 2**20, 1) for v in run.trace.rss_series(state.start, length)],
        },
        "latency_histogram": [[round(edge, 7), count] for edge, count in log_histogram(state.latencies)],
        "notes": list(run.notes),
    }
    for index, (stage, mark) in enumerate(zip(plan.stages, run.stage_marks, strict=False)):
        figures = delivery(counted, [index])
        figures["latency_ms"] = latency_figures(
            state.stage_latencies.get(index, array("d")), delivery(timed, [index])["expected"]
        )
        result["stages"][stage.name] = {
            "seconds": round(mark.get("end", mark["start"]) - mark["start"], 3),
            "rate": stage.rate,
            "clients": {
                "target": stage.clients,
                "connected": mark.get("connected"),
                "disconnects": mark.get("disconnects_after", 0) - mark["disconnects_before"],
            },
            "send": _sends(run.statuses[index], stage.offered),
            "delivery": figures,
            "reconnect": _reconnect_figures([r for r in run.reconnects if r["stage"] == index]),
        }
    if processes > 1:
        result["notes"].append(
            f"server CPU and RSS are summed over the process tree of pid {run.pid} ({processes} processes)"
        )
    if (result["machine"]["other_processes_cpu_percent"] or 0) > 15:
        result["notes"].append(
            f"other processes used {result['machine']['other_processes_cpu_percent']}% of a core while this "
            "measured: figures are disturbed; rerun on a quiet machine"
        )
    if result["generator"]["cpu_percent"] > 90:
        result["notes"].append("the generator used >90% of its core: figures may be generator-bound")
    if run.profile_top is not None:
        result["profile"] = run.profile_top
    return result


def _reconnect_figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    back = [r for r in records if r["connected_at"] is not None]
    times = sorted(r["connected_at"] - r["dropped_at"] for r in back)
    recovered = sum(1 for r in back if r["recovered"])
    # A socket dropped before any event reached it has no offset to resume from, so it cannot
    # ask to recover (as with the official clients): the ratio is over those that could; the
    # others' missed events still count against the delivery ratio.
    could = sum(1 for r in records if r["offset"])
    return {
        "dropped": len(records),
        "reconnected": len(back),
        "recovered": recovered,
        "without_offset": len(records) - could,
        "recovered_ratio": round(recovered / could, 6) if could else None,
        "latency_ms": {
            "p50": _ms(percentile(times, 50)),
            "p99": _ms(percentile(times, 99)),
            "max": _ms(times[-1] if times else math.nan),
        },
    }


def _sends(statuses: Counter[str], offered: int) -> dict[str, Any]:
    """Send outcomes: accepted (200), refused (an HTTP 4xx/5xx), failed (no answer: the
    exception's name), late (not sent: no send slot within LATE_LIMIT of its due time)."""
    refused = sum(count for status, count in statuses.items() if status[:1] in ("4", "5"))
    late = statuses.get("late", 0)
    failed = sum(count for status, count in statuses.items() if not status.isdigit() and status != "late")
    return {
        "offered": offered,
        "accepted": statuses.get("200", 0),
        "refused": refused,
        "failed": failed,
        "late": late,
        "errors": refused + failed + late,
        "statuses": dict(sorted(statuses.items())),
    }


def _config_dict(config: RunConfig) -> dict[str, Any]:
    found = asdict(config)
    found.pop("scenario", None)
    return found


def _ms(value: float) -> float | None:
    return None if math.isnan(value) else round(value * 1000, 2)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _mib(value: int | None) -> float | None:
    return None if value is None else round(value / 2**20, 1)
