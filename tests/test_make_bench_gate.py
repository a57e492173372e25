"""`make bench` gates one server, the gateway (or the single-port mount when the gateway does
not run): the reference servers run to be compared with, and a figure of theirs (Node's own
RSS per socket is above the gateway's limit) must not fail the bench."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def bench_checks(*variables: str) -> list[str]:
    """The --check expressions of the loadtest command `make bench` would run."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    printed = subprocess.run(
        ["make", "-n", "--no-print-directory", "bench", *variables],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    command = next(line for line in printed.replace("\\\n", " ").splitlines() if "loadtest --spawn" in line)
    words = shlex.split(command.split("|| status=1")[0])
    return [words[index + 1] for index, word in enumerate(words) if word == "--check"]


def test_the_bench_checks_gate_the_gateway_alone() -> None:
    checks = bench_checks()
    assert checks and all(check.startswith("volthub-gateway:") for check in checks), checks
    assert "volthub-gateway:server.rss_growth_kib_per_connection<=25" in checks
    assert "volthub-gateway:vs.node.server.cpu_seconds_per_1000_deliveries<=0.4" in checks


def test_without_the_gateway_the_bench_gates_the_mount() -> None:
    checks = bench_checks("BENCH_TARGETS=volthub,node")
    assert checks and all(re.match(r"volthub:", check) for check in checks), checks
