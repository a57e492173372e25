"""`volthub serve --workers N` (volthub/cli_workers.py): N processes on one port (and on one
Events API gateway port), one migration run, a rolling restart on SIGHUP that refuses no
request, SIGTERM stops all."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import FAST_AUTH, wait_healthy
from volthub.loadtest.servers import free_port


def children(pid: int) -> set[int]:
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return {int(child) for child in found}


def kill_group(parent: subprocess.Popen[bytes]) -> None:
    """SIGKILL the parent and its workers (its own session, started so): a failed test leaves
    no worker behind, whose parent would be gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(parent.pid, signal.SIGKILL)
    parent.wait()


@pytest.mark.slow
def test_workers_share_one_port_and_restart_one_by_one(empty_postgres_url: str, tmp_path: Path) -> None:
    postgres_url = empty_postgres_url  # the parent migrates it, once
    port, gateway_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "VOLTHUB_AUTH__ARGON2_TIME_COST": str(FAST_AUTH["argon2_time_cost"]),
        "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": str(FAST_AUTH["argon2_memory_kib"]),
    }
    log = open(tmp_path / "workers.log", "wb")  # noqa: SIM115 - the child writes to it
    argv = [sys.executable, "-m", "volthub", "serve", "--workers", "2", "--port", str(port)]
    argv += ["--gateway-port", str(gateway_port)]
    parent = subprocess.Popen(
        [*argv, "--database", postgres_url], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        wait_healthy(url, parent)
        deadline = time.monotonic() + 30
        while len(children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        before = children(parent.pid)
        assert len(before) == 2
        text = (tmp_path / "workers.log").read_text()
        assert text.count("applied 0001_") == 1  # one migration run, by the parent
        assert f"clients connect to ws://127.0.0.1:{gateway_port}/ws/events" in text
        # Engine.IO sessions open on the gateway port of the workers.
        for _ in range(4):
            opened = httpx.get(
                f"http://127.0.0.1:{gateway_port}/ws/events/", params={"EIO": "4", "transport": "polling"}
            )
            assert opened.status_code == 200 and opened.text.startswith("0{"), opened.text
        # Both workers bound the gateway port (SO_REUSEPORT); the second may still be starting.
        deadline = time.monotonic() + 30
        told = f"clients connect to ws://127.0.0.1:{gateway_port}/ws/events"  # the parent, then each worker
        while text.count(told) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)  # real time: a child process is starting
            text = (tmp_path / "workers.log").read_text()
        assert text.count(told) == 3, text

        parent.send_signal(signal.SIGHUP)
        statuses = []
        dropped = 0
        # A roll is a migrate run, then per worker a start and a graceful stop: on a busy
        # machine (the suite's other workers) that can take more than a minute.
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            try:
                statuses.append(httpx.get(f"{url}/healthz", timeout=5).status_code)
            except httpx.RemoteProtocolError:
                # A connection the old worker accepted just as it stopped can close unanswered
                # (a known gap of the roll); an idempotent client retries, and so do we, once.
                dropped += 1
                statuses.append(httpx.get(f"{url}/healthz", timeout=5).status_code)
            if "rolling restart done" in (tmp_path / "workers.log").read_text():
                break
            time.sleep(0.1)
        assert "rolling restart done" in (tmp_path / "workers.log").read_text()
        assert set(statuses) == {200}
        assert dropped <= 1, dropped
        after = children(parent.pid)
        assert len(after) == 2 and not (after & before)

        parent.send_signal(signal.SIGTERM)
        assert parent.wait(60) == 0
        for pid in after:
            assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    finally:
        kill_group(parent)
        log.close()


def test_workers_refuse_sqlite(sqlite_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "volthub", "serve", "--workers", "2", "--database", sqlite_url],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert b"needs PostgreSQL" in result.stderr


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.mark.slow
def test_one_scrape_shows_every_workers_requests(empty_postgres_url: str, tmp_path: Path) -> None:
    """The workers share their metrics: whichever answers the scrape counts the requests of
    both (their JSON access lines name the worker), and a worker killed and replaced keeps
    its requests in the totals."""
    import orjson
    from prometheus_client.parser import text_string_to_metric_families

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "VOLTHUB_AUTH__ARGON2_TIME_COST": str(FAST_AUTH["argon2_time_cost"]),
        "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": str(FAST_AUTH["argon2_memory_kib"]),
        "VOLTHUB_LOGGING__FORMAT": "json",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = open(tmp_path / "workers.log", "wb")  # noqa: SIM115 - the child writes to it
    argv = [sys.executable, "-m", "volthub", "serve", "--workers", "2", "--port", str(port)]
    parent = subprocess.Popen(
        [*argv, "--database", empty_postgres_url], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )

    def livez_count() -> float:
        text = httpx.get(f"{url}/metrics", timeout=5).text
        return sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "volthub_http_requests_total" and sample.labels["route"] == "/livez"
        )

    try:
        wait_healthy(url, parent)
        deadline = time.monotonic() + 30
        while len(children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(children(parent.pid)) == 2
        requests = 60
        for _ in range(requests):  # a new connection each: the kernel deals them out to both workers
            assert httpx.get(f"{url}/livez", timeout=5).status_code == 200
        assert livez_count() == requests
        lines = [orjson.loads(line) for line in (tmp_path / "workers.log").read_text().splitlines() if line.strip()]
        served_by = {line.get("worker") for line in lines if line.get("path") == "/livez"}
        assert served_by == {"1", "2"}, served_by

        # The process figures describe the whole server: the parent and both workers.
        scraped = {
            sample.name: sample.value
            for family in text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=5).text)
            for sample in family.samples
        }
        server_rss = sum(resident_bytes(pid) for pid in [parent.pid, *children(parent.pid)])
        assert abs(scraped["process_resident_memory_bytes"] - server_rss) < 0.2 * server_rss
        assert scraped["process_cpu_seconds_total"] > 0

        victim = sorted(children(parent.pid))[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = children(parent.pid)
            if len(now) == 2 and victim not in now:
                try:
                    if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)  # real time: the parent starts a new worker
        assert livez_count() >= requests  # the dead worker's requests still count
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(60) == 0
        last = orjson.loads((tmp_path / "workers.log").read_text().splitlines()[-1])
        assert last["message"].startswith("volthub stopped") and "worker" not in last
    finally:
        kill_group(parent)
        log.close()
