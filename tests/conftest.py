"""Shared fixtures: settings on a throw-away database, the app, users, a live server.

PostgreSQL tests use a fresh schema per test on the server named by VOLTHUB_TEST_POSTGRES
(default: the local trust-auth server). They fail, not skip, when CI=true and it is down.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import trio

from volthub.config import Settings, load_settings

POSTGRES = os.environ.get("VOLTHUB_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
# Cheap hashing keeps hundreds of registrations fast; production uses the defaults.
FAST_AUTH = {"argon2_time_cost": 1, "argon2_memory_kib": 1024}
_names = itertools.count(1)


def _postgres_available() -> str | None:
    import psycopg

    try:
        with psycopg.connect(POSTGRES, connect_timeout=3) as connection:
            connection.execute("SELECT 1")
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        return str(exc)


@pytest.fixture(scope="session")
def postgres_server() -> str:
    problem = _postgres_available()
    if problem is not None:
        if os.environ.get("CI") or os.environ.get("VOLTHUB_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL is required in CI but unreachable: {problem}")
        pytest.skip(f"PostgreSQL unreachable: {problem}")
    return POSTGRES


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose search_path is a brand-new schema, dropped afterwards."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in postgres_server else "?"
    yield f"{postgres_server}{separator}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'volthub.db'}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Runs the test once per backend."""
    return request.getfixturevalue(f"{request.param}_url")


def make_settings(database_url: str, **sections: dict[str, Any]) -> Settings:
    overrides: dict[str, dict[str, Any]] = {"database": {"url": database_url}, "auth": dict(FAST_AUTH)}
    for section, values in sections.items():
        overrides.setdefault(section, {}).update(values)
    return load_settings(None, environ={}, overrides=overrides)


@pytest.fixture
def settings(sqlite_url: str) -> Settings:
    return make_settings(sqlite_url)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    application = create_app(settings)
    async with application.test_app():
        yield application


@pytest.fixture
def client(app: Any) -> Any:
    return app.test_client()


@dataclass
class TestUser:
    id: str
    username: str
    token: str
    password: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def unique_name(prefix: str = "user") -> str:
    return f"{prefix}{next(_names)}_{secrets.token_hex(3)}"[:25]


async def register(client: Any, username: str | None = None, password: str = "correct horse battery") -> TestUser:
    username = username or unique_name()
    response = await client.post("/api/auth/register", json={"username": username, "password": password})
    assert response.status_code == 201, await response.get_data(as_text=True)
    body = await response.get_json()
    return TestUser(body["user"]["id"], body["user"]["username"], body["token"], password)


@pytest.fixture
def make_user(client: Any) -> Any:
    async def make(username: str | None = None) -> TestUser:
        return await register(client, username)

    return make


# --- servers ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LiveServer:
    url: str
    app: Any


@pytest.fixture
async def live_server(settings: Settings, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    """The app on a real Hypercorn (trio worker) on a free loopback port, in this test's nursery."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from volthub.http.app import create_app

    application = create_app(settings)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 1
    stop = trio.Event()
    binds = await nursery.start(lambda task_status: serve(application, config, shutdown_trigger=stop.wait, task_status=task_status))
    yield LiveServer(binds[0], application)
    stop.set()


class ServerProcess:
    """`volthub serve` as a child process: for restart and SIGKILL tests."""

    def __init__(self, database_url: str, tmp_path: Path, env: dict[str, str] | None = None) -> None:
        self.database_url = database_url
        self.tmp_path = tmp_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> "ServerProcess":
        env = {
            **os.environ,
            "VOLTHUB_AUTH__ARGON2_TIME_COST": str(FAST_AUTH["argon2_time_cost"]),
            "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": str(FAST_AUTH["argon2_memory_kib"]),
            **self.extra_env,
        }
        log = open(self.tmp_path / f"server-{self.port}.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "volthub", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--database", self.database_url],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.tmp_path,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server did not become healthy: {self.log()}")

    def log(self) -> str:
        path = self.tmp_path / f"server-{self.port}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def terminate(self) -> int:
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(30)


@pytest.fixture
def server_process(tmp_path: Path) -> Iterator[Any]:
    started: list[ServerProcess] = []

    def start(database_url: str, env: dict[str, str] | None = None) -> ServerProcess:
        server = ServerProcess(database_url, tmp_path, env).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()
