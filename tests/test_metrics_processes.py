"""The process figures of a server of several processes: one scrape describes them all."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import ProcessCollector

from volthub.metrics import WholeServerProcess


def _resident(pid: int) -> float:
    for family in ProcessCollector(pid=lambda: pid, registry=None).collect():
        for sample in family.samples:
            if sample.name == "process_resident_memory_bytes":
                return sample.value
    raise AssertionError(f"no resident memory for {pid}")


def _values(collector: WholeServerProcess) -> dict[str, float]:
    return {sample.name: sample.value for family in collector.collect() for sample in family.samples}


def test_process_figures_add_up_the_live_workers_and_the_parent(tmp_path: Path) -> None:
    # A worker with 64 MiB resident, so that leaving it out cannot hide in the noise.
    worker = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; b = b'x' * (64 << 20); print(flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )
    try:
        assert worker.stdout is not None
        worker.stdout.readline()
        (tmp_path / f"gauge_livesum_{worker.pid}.db").write_bytes(b"")
        (tmp_path / "counter_999999999.db").write_bytes(b"")  # a dead worker's counters: not a process
        collector = WholeServerProcess(str(tmp_path))
        assert collector.pids() == {os.getpid(), os.getppid(), worker.pid}
        values = _values(collector)
        expected = sum(_resident(pid) for pid in (os.getpid(), os.getppid(), worker.pid))
        # The figures are read a moment apart; memory moves a little in between.
        assert abs(values["process_resident_memory_bytes"] - expected) < 16 << 20
        assert values["process_cpu_seconds_total"] > 0
        assert values["process_open_fds"] >= 3
        assert values["process_start_time_seconds"] > 0
    finally:
        worker.kill()
        worker.wait()


def test_a_worker_gone_from_proc_is_left_out(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / f"gauge_livesum_{gone.pid}.db").write_bytes(b"")
    assert gone.pid not in WholeServerProcess(str(tmp_path)).pids()
