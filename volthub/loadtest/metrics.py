"""What a run counts: latency samples and percentiles, per-second series, /proc readings.

Everything here is plain data and arithmetic so it is tested without a server; the only
I/O is reading /proc files, which are read whole and parsed by small pure functions.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in 0..100); NaN when empty.

    Nearest rank never invents a value between two samples, so p100 is the max and a
    p99.9 of a thousand samples is the largest one, as a reader of the table expects."""
    if not ordered:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError("q must be within 0..100")
    # round() first: 99.9 / 100 * 1000 is 999.0000000000001 in binary floating point.
    rank = max(1, math.ceil(round(q / 100 * len(ordered), 9)))
    return ordered[rank - 1]


@dataclass
class LatencySummary:
    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    p999: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> LatencySummary:
        ordered = sorted(samples)
        mean = math.fsum(ordered) / len(ordered) if ordered else math.nan
        return cls(
            count=len(ordered),
            mean=mean,
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            p99=percentile(ordered, 99),
            p999=percentile(ordered, 99.9),
            max=ordered[-1] if ordered else math.nan,
        )

    def as_ms(self) -> dict[str, float | int | None]:
        def ms(value: float) -> float | None:
            return None if math.isnan(value) else round(value * 1000, 3)

        return {
            "count": self.count,
            "mean": ms(self.mean),
            "p50": ms(self.p50),
            "p90": ms(self.p90),
            "p99": ms(self.p99),
            "p99.9": ms(self.p999),
            "max": ms(self.max),
        }


# A percentile pQ is reported only when at least Q% of the expected samples arrived: the
# missing ones count as never arriving, so below that share the percentile is unknown (and
# `max` needs all of them). The run prints "too few samples" and a check on it fails.
PERCENTILE_SHARES: tuple[tuple[str, float], ...] = (
    ("p50", 0.5),
    ("p90", 0.9),
    ("p99", 0.99),
    ("p99.9", 0.999),
    ("max", 1.0),
)


def latency_figures(samples: Sequence[float], expected: int) -> dict[str, Any]:
    """Latency in ms over `expected` deliveries of which `samples` arrived: the percentiles
    the samples cover, None for the others, and `too_few_samples` when any is None."""
    figures: dict[str, Any] = LatencySummary.of(samples).as_ms()
    too_few = False
    for name, share in PERCENTILE_SHARES:
        if expected and (not samples or len(samples) < share * expected - 1e-9):
            figures[name] = None
            too_few = True
    figures["expected"] = expected
    figures["too_few_samples"] = too_few
    return figures


def log_histogram(samples: Sequence[float], per_decade: int = 20, low: float = 1e-5) -> list[tuple[float, int]]:
    """(upper edge in seconds, count) buckets spaced evenly on a log scale: a compact
    latency distribution for the JSON report and the plot (samples below `low` fall in
    the first bucket)."""
    counts: dict[int, int] = {}
    for value in samples:
        index = 0 if value <= low else math.ceil(math.log10(value / low) * per_decade)
        counts[index] = counts.get(index, 0) + 1
    return [(low * 10 ** (index / per_decade), counts[index]) for index in sorted(counts)]


class Series:
    """Counts per whole second since a start time (deliveries/s, sends/s, ...)."""

    __slots__ = ("start", "buckets")

    def __init__(self, start: float) -> None:
        self.start = start
        self.buckets: array[int] = array("q")

    def add(self, now: float, amount: int = 1) -> None:
        index = int(now - self.start)
        if index < 0:
            return
        buckets = self.buckets
        if index >= len(buckets):
            buckets.extend([0] * (index + 1 - len(buckets)))
        buckets[index] += amount

    def values(self, length: int | None = None) -> list[int]:
        values = list(self.buckets)
        if length is not None:
            values = (values + [0] * length)[:length]
        return values


# --- /proc --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcSample:
    at: float  # generator clock (trio.current_time / monotonic)
    cpu_seconds: float  # user + system of the process and its descendants, all threads
    rss_bytes: int  # summed over the process and its descendants
    processes: int = 1  # how many processes the reading covers


def parse_proc_stat(text: str) -> float:
    """utime + stime in seconds from /proc/<pid>/stat (the command may contain spaces)."""
    fields = text[text.rindex(")") + 2 :].split()
    # After "(comm) ": state is fields[0], so utime (field 14) is fields[11], stime fields[12].
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def parse_proc_statm(text: str) -> int:
    """Resident set size in bytes from /proc/<pid>/statm."""
    return int(text.split()[1]) * PAGE_SIZE


def parse_proc_ppid(text: str) -> int:
    """The parent pid from /proc/<pid>/stat."""
    return int(text[text.rindex(")") + 2 :].split()[1])


def descendants(pid: int, parents: dict[int, int]) -> list[int]:
    """`pid` and every process below it, from a pid -> parent pid map."""
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def _stat_texts() -> dict[int, str]:
    texts = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                texts[int(entry.name)] = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
    return texts


def _tree(pid: int, texts: dict[int, str]) -> list[int]:
    """`pid` and every process below it, from the machine's /proc stat texts."""
    parents = {}
    for other, text in texts.items():
        try:
            parents[other] = parse_proc_ppid(text)
        except (ValueError, IndexError):
            continue
    return descendants(pid, parents)


def read_proc(pid: int, now: float) -> ProcSample | None:
    """One reading of a process and its whole tree (a server started with workers is a parent
    and its children: CPU and RSS are summed over all of them), or None when it has gone away.
    Children that already exited count through the parent's cutime/cstime only once reaped."""
    try:
        Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    texts = _stat_texts()
    cpu, rss, count = 0.0, 0, 0
    for member in _tree(pid, texts):
        try:
            statm = Path(f"/proc/{member}/statm").read_text()
            cpu += parse_proc_stat(texts[member])
        except (FileNotFoundError, ProcessLookupError, PermissionError, KeyError):
            continue
        rss += parse_proc_statm(statm)
        count += 1
    if not count:
        return None
    return ProcSample(now, cpu, rss, count)


@dataclass(frozen=True)
class Activity:
    """What one process did so far, beyond CPU time: where the CPU went (user or kernel), how
    often it slept and woke, how often it was preempted. Counts do not inflate when the
    machine is busy the way CPU seconds do (a core shared with other processes runs each of
    them slower), so comparing them helps tell extra work from contention."""

    user_seconds: float
    system_seconds: float
    voluntary_switches: int  # the process went to sleep: a wake-up each, all threads
    involuntary_switches: int  # the process was preempted, all threads
    # The two counts of each thread, by thread id, when read from /proc: a span is taken
    # thread by thread, because a thread that ended within it (an idle worker thread does)
    # takes all its switches out of the process's total, which could make a span negative.
    threads: Mapping[int, tuple[int, int]] = field(default_factory=dict, compare=False)

    def _per_thread(self) -> Mapping[int, tuple[int, int]] | None:
        """The switches thread by thread; None when only the totals are known."""
        if self.threads or not (self.voluntary_switches or self.involuntary_switches):
            return self.threads
        return None

    def minus(self, before: Activity) -> Activity:
        after_threads, before_threads = self._per_thread(), before._per_thread()
        if after_threads is None or before_threads is None:
            return Activity(
                self.user_seconds - before.user_seconds,
                self.system_seconds - before.system_seconds,
                self.voluntary_switches - before.voluntary_switches,
                self.involuntary_switches - before.involuntary_switches,
            )
        # A thread that ended within the span counts nothing of it; one that started counts whole.
        spans = {
            tid: (voluntary - before_threads.get(tid, (0, 0))[0], involuntary - before_threads.get(tid, (0, 0))[1])
            for tid, (voluntary, involuntary) in after_threads.items()
        }
        return _with_threads(
            self.user_seconds - before.user_seconds, self.system_seconds - before.system_seconds, spans
        )

    def plus(self, other: Activity) -> Activity:
        user, system = self.user_seconds + other.user_seconds, self.system_seconds + other.system_seconds
        mine, theirs = self._per_thread(), other._per_thread()
        if mine is None or theirs is None:
            voluntary = self.voluntary_switches + other.voluntary_switches
            return Activity(user, system, voluntary, self.involuntary_switches + other.involuntary_switches)
        merged = dict(mine)
        for tid, (voluntary, involuntary) in theirs.items():
            known = merged.get(tid, (0, 0))
            merged[tid] = (known[0] + voluntary, known[1] + involuntary)
        return _with_threads(user, system, merged)


def _with_threads(user: float, system: float, threads: Mapping[int, tuple[int, int]]) -> Activity:
    voluntary = sum(counts[0] for counts in threads.values())
    return Activity(user, system, voluntary, sum(counts[1] for counts in threads.values()), threads)


def parse_proc_times(text: str) -> tuple[float, float]:
    """(utime, stime) in seconds from /proc/<pid>/stat."""
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def parse_keyed_counts(text: str, keys: Sequence[str]) -> dict[str, int]:
    """`key: number` lines (the switch counts of /proc/<pid>/status)."""
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in keys:
            found[name] = int(value.split()[0])
    return found


def read_activity(pid: int) -> Activity | None:
    """One process's :class:`Activity` (its threads included), or None when it has gone away
    or /proc does not show it to us."""
    switches = ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
    try:
        user, system = parse_proc_times(Path(f"/proc/{pid}/stat").read_text())
        threads: dict[int, tuple[int, int]] = {}
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                counts = parse_keyed_counts((task / "status").read_text(), switches)
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended while we looked
            threads[int(task.name)] = (counts.get(switches[0], 0), counts.get(switches[1], 0))
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        return None
    return _with_threads(user, system, threads)


def read_tree_activity(pid: int) -> Activity | None:
    """:class:`Activity` summed over `pid` and every process below it (a server with
    workers), or None when `pid` has gone away."""
    total = None
    for member in _tree(pid, _stat_texts()):
        found = read_activity(member)
        if found is not None:
            total = found if total is None else total.plus(found)
    return total


def activity_figures(activity: Activity, per: float, unit: str, scale: float) -> dict[str, float | None]:
    """An :class:`Activity` span per `unit` (a connect, a delivery): user and kernel CPU in
    ms (`scale` 1e3) or us (1e6), and wake-ups and preemptions per `unit`."""
    suffix = "ms" if scale == 1e3 else "us"

    def ratio(amount: float) -> float | None:
        return round(amount / per, 4) if per else None

    return {
        f"user_{suffix}_per_{unit}": ratio(activity.user_seconds * scale),
        f"system_{suffix}_per_{unit}": ratio(activity.system_seconds * scale),
        f"wakeups_per_{unit}": ratio(activity.voluntary_switches),
        f"preemptions_per_{unit}": ratio(activity.involuntary_switches),
    }


def split_figures(activity: dict[str, Activity | None], connected: int) -> dict[str, Any]:
    """The server's ramp split per connect into user and kernel CPU, wake-ups and
    preemptions, and the hold's totals of the same (upkeep and broadcasts together): whether
    a connect's cost is the process's own work or the kernel's, and how often it slept."""
    before, held, after = activity.get("before"), activity.get("held"), activity.get("after")
    found: dict[str, Any] = {}
    if before is not None and held is not None:
        found.update(activity_figures(held.minus(before), connected, "connect", 1e3))
    if held is not None and after is not None:
        found["hold_activity"] = activity_totals(after.minus(held))
    return found


def summed_activity(reports: list[dict[str, Any]]) -> Activity | None:
    """The generator processes' activity lists (user s, system s, sleeps, preemptions)
    summed; None when a report has none."""
    if not reports or any("activity" not in report for report in reports):
        return None
    user, system, voluntary, involuntary = (
        sum(values) for values in zip(*(r["activity"] for r in reports), strict=True)
    )
    return Activity(user, system, int(voluntary), int(involuntary))


def activity_totals(activity: Activity) -> dict[str, float | int]:
    """An :class:`Activity` span as totals for a report."""
    return {
        "user_seconds": round(activity.user_seconds, 2),
        "system_seconds": round(activity.system_seconds, 2),
        "wakeups": activity.voluntary_switches,
        "preemptions": activity.involuntary_switches,
    }


def parse_proc_stat_busy(text: str) -> float:
    """CPU seconds processes took on the whole machine (all cores) from /proc/stat's
    `cpu` line: user, nice, system and steal. Interrupt and softirq time is left out: the
    kernel's loopback networking for our own traffic lands there, not on any process."""
    line = text.split("\n", 1)[0].split()
    if not line or line[0] != "cpu":
        raise ValueError("no aggregate cpu line in /proc/stat")
    values = [int(value) for value in line[1:9]]  # user nice system idle iowait irq softirq steal
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = values
    return (user + nice + system + steal) / CLOCK_TICKS


def machine_busy_seconds() -> float | None:
    """So a report can tell how much CPU other processes took while it measured."""
    try:
        return parse_proc_stat_busy(Path("/proc/stat").read_text())
    except (OSError, ValueError):
        return None


def self_cpu_seconds() -> float:
    """CPU time of the generator itself (so a report shows when it was the bottleneck)."""
    times = os.times()
    return times.user + times.system


@dataclass
class ProcTrace:
    """Readings of the server process taken through a run."""

    samples: list[ProcSample] = field(default_factory=list)

    def add(self, sample: ProcSample | None) -> None:
        if sample is not None:
            self.samples.append(sample)

    def at_or_before(self, moment: float) -> ProcSample | None:
        chosen = None
        for sample in self.samples:
            if sample.at <= moment:
                chosen = sample
        return chosen

    def peak_rss(self) -> int:
        return max((sample.rss_bytes for sample in self.samples), default=0)

    def cpu_percent_series(self, start: float, length: int) -> list[float]:
        """Server CPU % per second since `start` (100 = one core), from the readings."""
        out = [0.0] * length
        for before, after in zip(self.samples, self.samples[1:], strict=False):  # consecutive pairs
            span = after.at - before.at
            if span <= 0:
                continue
            index = int(after.at - start)
            if 0 <= index < length:
                out[index] = max(out[index], 100.0 * (after.cpu_seconds - before.cpu_seconds) / span)
        return out

    def rss_series(self, start: float, length: int) -> list[int]:
        out = [0] * length
        for sample in self.samples:
            index = int(sample.at - start)
            if 0 <= index < length:
                out[index] = sample.rss_bytes
        for index in range(1, length):  # carry the last reading over gaps
            out[index] = out[index] or out[index - 1]
        return out
