"""Percentiles, series and /proc parsing of the load generator."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.loadtest import metrics as m


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert m.percentile(values, 50) == 50
    assert m.percentile(values, 90) == 90
    assert m.percentile(values, 99) == 99
    assert m.percentile(values, 99.9) == 100
    assert m.percentile(values, 100) == 100
    assert m.percentile(values, 0) == 1
    assert math.isnan(m.percentile([], 50))
    with pytest.raises(ValueError):
        m.percentile(values, 101)


@given(
    st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), min_size=1, max_size=200),
    st.floats(min_value=0, max_value=100),
)
def test_a_percentile_is_always_one_of_the_samples_and_monotonic(samples: list[float], q: float) -> None:
    ordered = sorted(samples)
    value = m.percentile(ordered, q)
    assert value in ordered
    assert m.percentile(ordered, min(100.0, q + 1)) >= value


def test_latency_summary_in_milliseconds() -> None:
    summary = m.LatencySummary.of([0.001 * v for v in range(1, 1001)])  # 1 ms .. 1000 ms
    ms = summary.as_ms()
    assert ms["count"] == 1000
    assert ms["p50"] == 500.0 and ms["p90"] == 900.0 and ms["p99"] == 990.0
    assert ms["p99.9"] == 999.0 and ms["max"] == 1000.0
    assert ms["mean"] == pytest.approx(500.5)
    assert m.LatencySummary.of([]).as_ms()["p99"] is None


def test_log_histogram_counts_every_sample() -> None:
    samples = [0.000001, 0.001, 0.0011, 0.01, 0.2, 3.0]
    buckets = m.log_histogram(samples)
    assert sum(count for _, count in buckets) == len(samples)
    edges = [edge for edge, _ in buckets]
    assert edges == sorted(edges)
    for value in samples[1:]:  # each sample is at or below its bucket's upper edge
        assert any(value <= edge * 1.0000001 for edge in edges)


def test_series_buckets_by_whole_second() -> None:
    series = m.Series(start=100.0)
    series.add(100.2)
    series.add(100.9, 2)
    series.add(103.0)
    series.add(99.0)  # before the start: ignored
    assert series.values() == [3, 0, 0, 1]
    assert series.values(6) == [3, 0, 0, 1, 0, 0]
    assert series.values(2) == [3, 0]


def test_proc_stat_with_spaces_and_parentheses_in_the_name() -> None:
    fields = ["S", "1", "2", "3", "0", "-1", "4194560", "100", "0", "0", "0", "250", "50"] + ["0"] * 30
    text = f"4242 (python -m (volthub)) {' '.join(fields)}\n"
    assert m.parse_proc_stat(text) == pytest.approx(300 / m.CLOCK_TICKS)


def test_proc_statm_rss() -> None:
    assert m.parse_proc_statm("5000 1234 300 1 0 900 0\n") == 1234 * m.PAGE_SIZE


def test_reading_our_own_process() -> None:
    sample = m.read_proc(os.getpid(), 1.0)
    assert sample is not None and sample.rss_bytes > 0 and sample.cpu_seconds >= 0
    assert m.read_proc(2**22 + 17, 1.0) is None  # above pid_max: no such process


def test_activity_counts_our_sleeps_and_adds_up() -> None:
    before = m.read_activity(os.getpid())
    assert before is not None
    for _ in range(5):
        time.sleep(0.001)  # each sleep is a voluntary switch of this thread
    after = m.read_activity(os.getpid())
    assert after is not None
    spent = after.minus(before)
    assert spent.voluntary_switches >= 5 and spent.user_seconds >= 0 and spent.system_seconds >= 0
    assert spent.plus(before) == after
    assert m.read_activity(2**22 + 17) is None


def test_a_thread_that_ends_within_a_span_takes_nothing_off_it() -> None:
    """Its switches leave the process's total with it: counted thread by thread, the span
    keeps what the others did instead of going negative."""
    proceed = threading.Event()

    def sleeper() -> None:
        for _ in range(200):
            time.sleep(0.0005)  # switches of its own, before the span starts
        proceed.wait()

    thread = threading.Thread(target=sleeper)
    thread.start()
    while thread.is_alive() and not _slept_enough(thread):
        time.sleep(0.01)
    before = m.read_activity(os.getpid())
    proceed.set()
    thread.join()
    time.sleep(0.001)  # one switch of this thread within the span
    after = m.read_activity(os.getpid())
    assert before is not None and after is not None
    spent = after.minus(before)
    assert spent.voluntary_switches >= 1 and spent.involuntary_switches >= 0
    # Totals known without threads (a generator's report) still subtract as totals.
    assert m.Activity(1.0, 1.0, 10, 2).minus(m.Activity(0.5, 0.5, 4, 1)) == m.Activity(0.5, 0.5, 6, 1)


def _slept_enough(thread: threading.Thread) -> bool:
    status = Path(f"/proc/{os.getpid()}/task/{thread.native_id}/status").read_text()
    counts = m.parse_keyed_counts(status, ("voluntary_ctxt_switches",))
    return counts.get("voluntary_ctxt_switches", 0) >= 150


def test_switch_counts_are_read_from_status_lines() -> None:
    text = "Name:\tpython\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n"
    counts = m.parse_keyed_counts(text, ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
    assert counts == {"voluntary_ctxt_switches": 12, "nonvoluntary_ctxt_switches": 3}


def test_proc_trace_series() -> None:
    trace = m.ProcTrace()
    for at, cpu, rss in [(10.0, 1.0, 100), (10.5, 1.25, 200), (11.0, 1.5, 300), (12.5, 2.25, 50)]:
        trace.add(m.ProcSample(at, cpu, rss))
    trace.add(None)
    assert trace.peak_rss() == 300
    assert trace.at_or_before(10.7) == m.ProcSample(10.5, 1.25, 200)
    assert trace.cpu_percent_series(10.0, 3) == pytest.approx([50.0, 50.0, 50.0])
    assert trace.rss_series(10.0, 4) == [200, 300, 50, 50]


def test_machine_busy_time_counts_what_processes_took() -> None:
    text = "cpu  100 5 50 1000 40 3 2 7 0 0\ncpu0 50 2 25 500 20 1 1 0 0 0\n"
    assert m.parse_proc_stat_busy(text) == pytest.approx(162 / m.CLOCK_TICKS)  # user nice system steal
    with pytest.raises(ValueError):
        m.parse_proc_stat_busy("intr 1 2 3\n")
    assert m.machine_busy_seconds() is not None


def test_a_process_tree_is_read_whole() -> None:
    """A server started with workers is a parent and its children: their RSS and CPU add up."""
    assert sorted(m.descendants(1, {2: 1, 3: 1, 4: 2, 5: 9, 1: 0})) == [1, 2, 3, 4]
    assert m.parse_proc_ppid("4242 (a (b) c) S 17 4242 4242 0 -1") == 17
    child = subprocess.Popen([sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(30)"])
    try:
        for _ in range(200):  # until the child has its 64 MiB
            alone = m.read_proc(child.pid, 1.0)
            if alone is not None and alone.rss_bytes > 64 << 20:
                break
            time.sleep(0.05)
        # Our own RSS moves with whatever else this process does: read it right before the tree.
        own = m.parse_proc_statm(Path(f"/proc/{os.getpid()}/statm").read_text())
        tree = m.read_proc(os.getpid(), 1.0)
        assert tree is not None and alone is not None and tree.processes >= 2
        assert tree.rss_bytes >= own + (60 << 20), "the child's 64 MiB are in the tree's RSS"
    finally:
        child.kill()
        child.wait()


def test_percentiles_need_their_share_of_the_expected_samples() -> None:
    """Missing deliveries count as never arriving: p99 needs 99% of them, max all of them."""
    samples = [0.001 * i for i in range(1, 100)]  # 99 of 100 expected
    figures = m.latency_figures(samples, 100)
    assert figures["p50"] is not None and figures["p99"] is not None
    assert figures["p99.9"] is None and figures["max"] is None and figures["too_few_samples"] is True
    thin = m.latency_figures(samples[:7], 600)
    assert thin["p50"] is None and thin["p99"] is None and thin["count"] == 7
    whole = m.latency_figures(samples, 99)
    assert whole["too_few_samples"] is False and whole["max"] == 99.0
    nothing_due = m.latency_figures([], 0)
    assert nothing_due["p99"] is None and nothing_due["too_few_samples"] is False
