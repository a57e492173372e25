"""`volthub loadtest` as a CI gate, end to end against servers on loopback: exit codes, honest
figures, JUnit, no side effects on the target, every bundled scenario at a small scale."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import httpx
import orjson
import pytest
import trio

from volthub import cli
from volthub.loadtest.servers import free_port, plan_server
from volthub.loadtest.targets import PASSWORD
from volthub.persistence import open_database

pytestmark = pytest.mark.slow

SMALL = [
    "--clients",
    "10",
    "--channels",
    "1",
    "--rate",
    "10",
    "--duration",
    "1",
    "--drain",
    "3",
    "--settle",
    "0",
    "--quiet",
]


def loadtest(tmp_path: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    out = tmp_path / "summary.json"
    out.unlink(missing_ok=True)
    code = cli.main(["loadtest", "--workdir", str(tmp_path / "servers"), "--json", str(out), *argv])
    return code, orjson.loads(out.read_bytes()) if out.exists() else {}


def verdicts(summary: dict[str, Any]) -> dict[str, str]:
    return {check["key"]: check["verdict"] for check in summary["checks"]}


def test_a_run_that_loses_deliveries_fails_its_check(tmp_path: Path) -> None:
    """A tiny per-socket queue and sends offered faster than one process commits them: the
    channel's actor commits them in batches, each batch puts more events at once in every
    socket's queue than its 8 places hold, and the server drops those sockets. The delivery
    check fails with exit 1 and the p99 from what little arrived is not met. (At 300 sends/s
    the server now keeps up, so that rate no longer loses anything.) It needs batches that
    large: on a machine too busy to offer the sends fast enough, the batches stay small and
    no socket is dropped, so such a run is tried again, three times at most (the last one
    is judged whatever it did)."""
    for _ in range(3):
        code, summary = loadtest(
            tmp_path,
            "--spawn",
            *SMALL,
            "--rate",
            "2000",
            "--server-env",
            "VOLTHUB_EVENTS__QUEUE_SIZE=8",
            "--check",
            "delivery.ratio>=0.999",
            "--check",
            "delivery.latency_ms.p99<200",
        )
        [run] = summary["runs"]
        if run["clients"]["disconnects"] > 0:
            break
    assert code == 1
    assert run["delivery"]["ratio"] < 0.5 and run["clients"]["disconnects"] > 0
    assert verdicts(summary) == {"delivery.ratio": "fail", "delivery.latency_ms.p99": "too few samples"}
    assert run["delivery"]["latency_ms"]["p99"] is None and summary["passed"] is False


def test_a_healthy_run_with_the_same_check_passes_and_writes_junit(
    tmp_path: Path, server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "checks.xml"
    code, summary = loadtest(
        tmp_path,
        "--url",
        server.url,
        "--server-pid",
        str(server.pid),
        "--keep",
        *[arg for arg in SMALL if arg != "--quiet"],
        "--check",
        "delivery.ratio>=0.999",
        "--check",
        "send.errors==0",
        "--check",
        "stages.send.send.offered==10",
        "--junit",
        str(junit),
    )
    assert code == 0, summary.get("checks")
    assert verdicts(summary) == {"delivery.ratio": "pass", "send.errors": "pass", "stages.send.send.offered": "pass"}
    [check] = [c for c in summary["checks"] if c["key"] == "delivery.ratio"]
    assert check["figure"] == 1.0 and check["limit"] == 0.999 and check["op"] == ">="
    assert summary["runs"][0]["server"]["cpu_seconds"] is not None, "--server-pid: the server is measured"
    progress = capsys.readouterr().err.splitlines()[-1]  # not a terminal: whole lines
    for part in ("connected 10/10", "deliveries/s", "p99 ", "errors: 0 refused, 0 failed, 0 late"):
        assert part in progress, progress
    root = ElementTree.parse(junit).getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 3 and not root.findall(".//failure")
    assert {case.get("classname") for case in cases} == {"loadtest.volthub"}


def test_an_unreachable_url_is_a_usage_error_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("some-token some-channel\n")
    code = cli.main(["loadtest", "--url", url, "--tokens", str(tokens), *SMALL])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: cannot reach {url}")


def test_refused_sends_are_reported_and_fail_the_delivery_check(tmp_path: Path) -> None:
    """Rate limits on, five sends a minute per token: the rest are answered 429."""
    code, summary = loadtest(
        tmp_path,
        "--spawn",
        *SMALL,
        "--server-env",
        "VOLTHUB_RATELIMIT__ENABLED=true",
        "--server-env",
        "VOLTHUB_RATELIMIT__CHAT_SEND_PER_MINUTE=5",
        "--check",
        "delivery.ratio>=0.999",
    )
    assert code == 1
    [run] = summary["runs"]
    send = run["send"]
    assert send["offered"] == 10 and send["statuses"].get("429", 0) >= 4 and send["refused"] == send["statuses"]["429"]
    assert send["accepted"] + send["refused"] == 10
    assert run["delivery"]["ratio"] == pytest.approx(send["accepted"] / 10)
    assert verdicts(summary) == {"delivery.ratio": "fail"}


@dataclass
class Server:
    url: str
    pid: int
    database: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One volthub on a free loopback port for the runs that need no server of their own, as
    a tester's running server would be (the bench settings: no rate limits)."""
    workdir = tmp_path_factory.mktemp("server")
    plan = plan_server("volthub", workdir)
    process = subprocess.Popen(
        plan.argv, env=plan.env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{plan.url}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield Server(plan.url, process.pid, workdir / "loadtest.db")
    finally:
        process.terminate()
        process.wait(30)


def _usernames(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        return sorted(row[0] for row in connection.execute("SELECT username FROM users"))


def test_tokens_register_nothing(tmp_path: Path, server: Server) -> None:
    """Against a running server with the tester's own token: the run registers no account."""
    body = httpx.post(f"{server.url}/api/auth/register", json={"username": "tester", "password": PASSWORD}).json()
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"# token channel\n{body['token']} {body['user']['id']}\n")
    before = _usernames(server.database)
    code, summary = loadtest(
        tmp_path, "--url", server.url, "--tokens", str(tokens), *SMALL, "--check", "delivery.ratio>=0.999"
    )
    assert code == 0, summary.get("checks")
    [run] = summary["runs"]
    assert run["provisioned"] == {"accounts": 0, "tokens_given": 1}
    assert run["delivery"]["expected"] == 100
    assert "tester" in before and _usernames(server.database) == before


def test_a_url_without_tokens_needs_keep(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["loadtest", "--url", f"http://127.0.0.1:{free_port()}", *SMALL]) == 2
    assert "--tokens" in capsys.readouterr().err


async def _accounts(database_url: str) -> list[str]:
    database = open_database(database_url, 1)
    await database.open()
    try:
        rows = await database.read(lambda tx: tx.execute("SELECT username FROM users ORDER BY username"))
    finally:
        await database.close()
    return [row["username"] for row in rows]


def provisioning_run(tmp_path: Path, database_url: str, *argv: str) -> dict[str, Any]:
    code, summary = loadtest(
        tmp_path, "--spawn", "--database", database_url, *SMALL, "--channels", "3", "--check", "send.errors==0", *argv
    )
    assert code == 0, summary.get("checks")
    [run] = summary["runs"]
    assert run["provisioned"]["accounts"] == 3
    return run


def test_provisioned_accounts_are_gone_after_the_run(tmp_path: Path, database_url: str) -> None:
    run = provisioning_run(tmp_path, database_url)
    assert run["provisioned"]["removed"] is True
    assert trio.run(_accounts, database_url) == []


def test_keep_leaves_them(tmp_path: Path, sqlite_url: str) -> None:
    run = provisioning_run(tmp_path, sqlite_url, "--keep")
    assert run["provisioned"]["removed"] is False
    left = trio.run(_accounts, sqlite_url)
    assert len(left) == 3 and all(name.startswith("lt_") for name in left)


SCENARIO_FIGURES = {
    "fan-out": lambda run: run["delivery"]["ratio"] == 1.0,
    "chat-heavy": lambda run: (
        run["stages"]["ramp-down"]["clients"]["connected"] == 0 and run["clients"]["by_kind"].get("sse", 0) > 0
    ),
    "reconnect-storm": lambda run: (
        run["reconnect"]["dropped"] > 0 and run["reconnect"]["reconnected"] == run["reconnect"]["dropped"]
    ),
    "slow-consumer": lambda run: (
        run["delivery"]["by_kind"]["slow"]["expected"] > 0 and run["delivery"]["by_kind"]["socketio"]["ratio"] == 1.0
    ),
    "hold": lambda run: run["clients"]["by_kind"]["idle"] > 0 and run["delivery"]["ratio"] == 1.0,
}


@pytest.mark.parametrize("name", list(SCENARIO_FIGURES))
def test_each_bundled_scenario_runs_end_to_end(tmp_path: Path, server: Server, name: str) -> None:
    code, summary = loadtest(
        tmp_path,
        "--url",
        server.url,
        "--keep",
        "--scenario",
        name,
        "--clients",
        "20",
        "--channels",
        "2",
        "--rate",
        "10",
        "--duration",
        "3",
        "--drain",
        "2",
        "--quiet",
        "--check",
        "clients.connect_failures==0",
        "--check",
        "send.errors==0",
    )
    assert code == 0, summary.get("checks")
    [run] = summary["runs"]
    assert run["scenario"]["name"] == name
    assert list(run["stages"]) == [stage for stage in run["stages"]] and len(run["stages"]) >= 2
    assert SCENARIO_FIGURES[name](run), run["stages"]
