"""What an operator meets first: a port in use or a database out of reach is one line on
stderr naming the fix, exit status 1, no traceback (`serve`, `serve --workers`, and the
commands that open the database); `make demo` moves with PORT and GATEWAY_PORT; `volthub
trigger` and `volthub token` print their result and nothing else."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import trio

from tests.conftest import make_settings, register_live, serve_app
from volthub.cli_startup import failure_line
from volthub.loadtest.servers import free_port

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
TIMEOUT = 120  # generous: each run starts an interpreter, on a machine that may be busy


def _environment() -> dict[str, str]:
    """The caller's environment without volthub settings of the machine running the tests."""
    return {k: v for k, v in os.environ.items() if not (k.startswith("VOLTHUB_") and "__" in k)}


def volthub(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "volthub", *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_environment(),
        cwd=REPO,
        check=False,
    )


def one_error_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another program listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield holder.getsockname()[1]


MAIN_MOVERS = ("--port", "[server] port", "VOLTHUB_SERVER__PORT")
GATEWAY_MOVERS = ("--gateway-port", "[events] gateway_port", "VOLTHUB_EVENTS__GATEWAY_PORT")


def test_main_port_in_use_is_one_line_naming_the_port_and_what_moves_it(taken_port: int, sqlite_url: str) -> None:
    run = volthub(
        "serve", "--host", "127.0.0.1", "--port", str(taken_port), "--gateway-port", "0", "--database", sqlite_url
    )
    line = one_error_line(run)
    assert f"127.0.0.1:{taken_port} is already in use" in line
    assert all(mover in line for mover in MAIN_MOVERS), line


def test_gateway_port_in_use_is_one_line_naming_the_port_and_what_moves_it(taken_port: int, sqlite_url: str) -> None:
    run = volthub(
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(free_port()),
        "--gateway-port",
        str(taken_port),
        "--database",
        sqlite_url,
    )
    line = one_error_line(run)
    assert f"gateway port 127.0.0.1:{taken_port} is already in use" in line
    assert all(mover in line for mover in GATEWAY_MOVERS), line


def test_gateway_port_equal_to_the_main_port_is_named(sqlite_url: str) -> None:
    port = str(free_port())
    line = one_error_line(
        volthub("serve", "--host", "127.0.0.1", "--port", port, "--gateway-port", port, "--database", sqlite_url)
    )
    assert f"gateway port 127.0.0.1:{port} is already in use" in line


@pytest.mark.parametrize("taken", ["main", "gateway"])
def test_port_in_use_with_workers_is_one_line(taken: str, taken_port: int, postgres_url: str) -> None:
    ports = {"main": str(free_port()), "gateway": str(free_port()), taken: str(taken_port)}
    run = volthub(
        "serve", "--workers", "2", "--host", "127.0.0.1", "--port", ports["main"],
        "--gateway-port", ports["gateway"], "--database", postgres_url,
    )  # fmt: skip
    line = one_error_line(run)
    assert f"127.0.0.1:{taken_port} is already in use" in line
    assert all(mover in line for mover in (MAIN_MOVERS if taken == "main" else GATEWAY_MOVERS)), line


UNREACHABLE = "postgresql://volthub:hunter2@127.0.0.1:{port}/volthub"


@pytest.mark.parametrize(
    "command",
    [
        ["serve", "--host", "127.0.0.1", "--gateway-port", "0"],
        ["serve", "--workers", "2", "--host", "127.0.0.1", "--gateway-port", "0"],
        ["migrate"],
        ["users", "list"],
        ["apps", "list"],
        ["token", "--user", "someone", "--first-party"],
        ["restore", "--from", "pyproject.toml"],
    ],
    ids=lambda argv: " ".join(argv[:2]).replace("--", ""),
)
def test_unreachable_database_is_one_line_with_the_url_masked_and_the_cause(command: list[str]) -> None:
    url = UNREACHABLE.format(port=free_port())  # nothing listens there
    if command[0] == "serve":
        command = [*command, "--port", str(free_port())]
    line = one_error_line(volthub(*command, "--database", url))
    assert url.replace("hunter2", "***") in line, line
    assert "hunter2" not in line
    assert "Connection refused" in line, line


def test_sqlite_database_that_cannot_be_created_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    url = f"sqlite:///{blocker}/volthub.db"
    line = one_error_line(volthub("migrate", "--database", url))
    assert url in line and "[database] url" in line, line


def test_a_start_that_fails_after_the_checks_is_still_one_line() -> None:
    """Another process may take a port between the check and the bind: Hypercorn's own bind
    of the main port fails as OSError, the gateway's inside the app's start."""
    from hypercorn.utils import LifespanFailureError

    settings = make_settings("sqlite:///var/volthub.db", server={"port": 8123}, events={"gateway_port": 8124})
    main = ExceptionGroup("serving", [OSError(errno.EADDRINUSE, "Address already in use")])
    assert failure_line(main, settings) == (
        "the main port 127.0.0.1:8123 is already in use: choose another with --port, [server] port or VOLTHUB_SERVER__PORT"
    )
    gateway = ExceptionGroup("serving", [LifespanFailureError("startup", "[Errno 98] Address already in use")])
    line = failure_line(gateway, settings)
    assert line is not None and line.startswith("the Events API gateway port 127.0.0.1:8124 is already in use")
    assert failure_line(ExceptionGroup("serving", [KeyError("a bug")]), settings) is None  # keeps its traceback


def test_make_demo_moves_with_port_and_gateway_port() -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    for target in ("serve", "demo"):
        printed = subprocess.run(
            ["make", "-n", "--no-print-directory", target, "PORT=9123", "GATEWAY_PORT=9124"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        command = next(line for line in printed.splitlines() if "volthub serve" in line)
        assert "--port 9123" in command and "--gateway-port 9124" in command, (target, command)


async def test_trigger_and_token_print_their_result_and_nothing_else(database_url: str, nursery: trio.Nursery) -> None:
    stop = trio.Event()
    server = await serve_app(nursery, make_settings(database_url, events={"gateway_port": 0}), stop)
    owner = await register_live(server.url)
    minted = await trio.to_thread.run_sync(
        volthub, "token", "--user", owner.username, "--first-party", "--database", database_url
    )
    assert minted.returncode == 0, minted.stderr
    assert minted.stderr == ""
    (line,) = minted.stdout.splitlines()
    token = orjson.loads(line)["access_token"]
    sent = await trio.to_thread.run_sync(
        volthub, "trigger", "channel.follow", "--channel", owner.username, "--server", server.url, "--token", token
    )
    assert sent.returncode == 0, sent.stderr
    assert sent.stderr == "", sent.stderr  # httpx logged "INFO HTTP Request: …" here
    assert orjson.loads(sent.stdout)["eventId"]
    stop.set()
