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
from volthub.loadtest.servers import free_port

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
    except Exception as exc:
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


# Tests share one client IP and send bursts: generous budgets keep the limiter (and its
# headers) running everywhere without refusing. Rate-limit tests pass their own section.
ROOMY_LIMITS = {
    key: 1_000_000
    for key in (
        "global_per_ip_per_minute",
        "chat_send_per_minute",
        "moderation_per_minute",
        "token_per_minute",
        "app_create_per_hour",
        "subscriptions_per_minute",
        "roles_write_per_minute",
        "interactive_per_minute",
    )
}


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Any]:
    """A migrated database, once per backend."""
    from volthub.persistence import migrate, open_database

    database = open_database(database_url, pool_size=4)
    await database.open()
    await migrate(database)
    yield database
    await database.close()


def make_settings(database_url: str, **sections: dict[str, Any]) -> Settings:
    overrides: dict[str, dict[str, Any]] = {"database": {"url": database_url}, "auth": dict(FAST_AUTH)}
    if "ratelimit" not in sections:
        overrides["ratelimit"] = dict(ROOMY_LIMITS)
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
class RegisteredUser:
    id: str
    username: str
    token: str
    password: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def unique_name(prefix: str = "user") -> str:
    return f"{prefix}{next(_names)}_{secrets.token_hex(3)}"[:25]


async def register(client: Any, username: str | None = None, password: str = "correct horse battery") -> RegisteredUser:
    username = username or unique_name()
    response = await client.post("/api/auth/register", json={"username": username, "password": password})
    assert response.status_code == 201, await response.get_data(as_text=True)
    body = await response.get_json()
    return RegisteredUser(body["user"]["id"], body["user"]["username"], body["token"], password)


@pytest.fixture
def make_user(client: Any) -> Any:
    async def make(username: str | None = None) -> RegisteredUser:
        return await register(client, username)

    return make


# --- servers ---------------------------------------------------------------------------------


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
    binds = await nursery.start(
        lambda task_status: serve(application, config, shutdown_trigger=stop.wait, task_status=task_status)
    )
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

    def start(self, timeout: float = 30) -> ServerProcess:
        env = {
            **os.environ,
            "VOLTHUB_AUTH__ARGON2_TIME_COST": str(FAST_AUTH["argon2_time_cost"]),
            "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": str(FAST_AUTH["argon2_memory_kib"]),
            **self.extra_env,
        }
        log = open(self.tmp_path / f"server-{self.port}.log", "ab")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "volthub",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--database",
                self.database_url,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.tmp_path,
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


# --- webhooks: an HTTPS receiver and apps to hang webhooks on ---------------------------------


@dataclass
class ReceivedDelivery:
    at: float  # receiver clock, epoch seconds
    headers: dict[str, str]  # lower-cased names
    body: bytes
    verified: bool
    problem: str | None


class WebhookReceiver:
    """A TLS endpoint (trustme certificate for localhost and 127.0.0.1, on Hypercorn) that
    verifies every delivery with `volthub.protocol.webhooks.verify` against `secret` and answers
    with `respond(delivery) -> (status, headers)` (which may sleep, to hang)."""

    def __init__(self, ca_file: Path, port: int, now: Any) -> None:
        self.ca_file = ca_file
        self.port = port
        self.now = now
        self.secret: str | list[str] | None = None
        self.received: list[ReceivedDelivery] = []
        self._changed = trio.Event()
        self.respond: Any = lambda delivery: (204, {})

    def url(self, host: str = "127.0.0.1", path: str = "/hooks") -> str:
        return f"https://{host}:{self.port}{path}"

    async def wait_for(self, count: int) -> list[ReceivedDelivery]:
        while len(self.received) < count:
            await self._changed.wait()
        return self.received

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        delivery = ReceivedDelivery(self.now(), headers, body, False, None)
        from volthub.protocol.webhooks import WebhookVerificationError, verify

        try:
            verify(self.secret or "unset", headers, body, now=delivery.at)
            delivery.verified = True
        except WebhookVerificationError as exc:
            delivery.problem = str(exc)
        self.received.append(delivery)
        self._changed.set()
        self._changed = trio.Event()
        status, extra = await _maybe_await(self.respond(delivery))
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode(), str(v).encode()) for k, v in extra.items()],
            }
        )
        await send({"type": "http.response.body", "body": b""})


async def _maybe_await(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


@pytest.fixture
def receiver_tls(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(CA file, certificate chain, key) for a receiver on localhost and 127.0.0.1."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("localhost", "127.0.0.1")
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    leaf.cert_chain_pems[0].write_to_path(str(cert_file))
    for extra in leaf.cert_chain_pems[1:]:
        extra.write_to_path(str(cert_file), append=True)
    leaf.private_key_pem.write_to_path(str(key_file))
    return ca_file, cert_file, key_file


async def start_receiver(
    nursery: trio.Nursery, tls: tuple[Path, Path, Path], now: Any = time.time, port: int = 0
) -> tuple[WebhookReceiver, trio.Event]:
    """Serve a WebhookReceiver in `nursery`; set the returned event to stop it."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    ca_file, cert_file, key_file = tls
    receiver = WebhookReceiver(ca_file, port, now)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile, config.keyfile = str(cert_file), str(key_file)
    config.accesslog = None
    config.graceful_timeout = 0.5
    stop = trio.Event()
    binds = await nursery.start(
        lambda task_status: serve(receiver, config, shutdown_trigger=stop.wait, task_status=task_status)
    )
    receiver.port = int(binds[0].rsplit(":", 1)[1])
    return receiver, stop


@pytest.fixture
async def webhook_receiver(
    nursery: trio.Nursery, receiver_tls: tuple[Path, Path, Path]
) -> AsyncIterator[WebhookReceiver]:
    receiver, stop = await start_receiver(nursery, receiver_tls)
    yield receiver
    stop.set()


async def insert_app(database: Any, owner_id: str, name: str = "hooks app") -> str:
    """An app row for `owner_id` (tests need apps whatever the app routes look like)."""
    client_id = f"app_{secrets.token_hex(8)}"
    now = int(time.time() * 1000)
    await database.write(
        lambda tx: tx.execute(
            "INSERT INTO apps (client_id, owner_id, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (client_id, owner_id, name, now, now),
        )
    )
    return client_id


class FakeResolver:
    """getaddrinfo stand-in: name -> addresses, so tests never touch real DNS."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        self.asked.append(host)
        if host not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
            for ip in self.table[host]
        ]


# --- chat (issue 4): an app with a hand-driven clock, rate limits off, and event capture -----


class ManualClock:
    """Wall time the test moves by hand (`advance`); the app reads it through `now()`."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.value = start

    def now(self) -> float:
        return self.value

    def advance(self, seconds: float) -> None:
        self.value += seconds


def chat_test_settings(database_url: str, **sections: dict[str, Any]) -> Settings:
    """Rate limits off (when the key exists), so chat tests can send freely."""
    if "ratelimit" in Settings.model_fields and "enabled" in Settings.model_fields["ratelimit"].annotation.model_fields:
        sections = {"ratelimit": {"enabled": False}, **sections}
    return make_settings(database_url, **sections)


class ChatEnv:
    def __init__(self, app: Any, clock: ManualClock) -> None:
        self.app = app
        self.client = app.test_client()
        self.clock = clock
        self.events: list[Any] = []
        self.rt.bus.subscribe(self.events.append)

    @property
    def rt(self) -> Any:
        return self.app.extensions["volthub"]

    def named(self, name: str) -> list[Any]:
        return [event for event in self.events if event.name == name]

    async def user(self, username: str | None = None) -> RegisteredUser:
        return await register(self.client, username)

    async def send(self, user: RegisteredUser, channel_id: str, message: str = "hello", **body: Any) -> Any:
        return await self.client.post(
            f"/api/integrations/oauth/chat/channels/{channel_id}/messages",
            json={"message": message, **body},
            headers=user.headers,
        )

    async def moderate(self, user: RegisteredUser, channel_id: str, **body: Any) -> Any:
        return await self.client.post(
            f"/api/integrations/oauth/chat/channels/{channel_id}/moderate", json=body, headers=user.headers
        )

    async def patch_settings(self, user: RegisteredUser, **body: Any) -> Any:
        return await self.client.patch("/api/integrations/oauth/chat/settings", json=body, headers=user.headers)

    async def follow(self, user: RegisteredUser, channel_id: str) -> None:
        response = await self.client.post(f"/api/users/follow/{channel_id}", headers=user.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)

    def now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    async def grant(self, channel_id: str, user_id: str, role: str, expires_at: int | None = None) -> None:
        from volthub.persistence import chat as chat_repo

        now = self.now_ms()
        await self.rt.db.write(lambda tx: chat_repo.grant_role(tx, channel_id, user_id, role, now, expires_at))

    async def subscribe(self, channel_id: str, user_id: str, months: int = 1, days: int = 30) -> None:
        import uuid as _uuid

        from volthub.persistence import chat as chat_repo

        now = self.now_ms()
        await self.rt.db.write(
            lambda tx: chat_repo.add_subscription(
                tx,
                subscription_id=str(_uuid.uuid4()),
                channel_id=channel_id,
                user_id=user_id,
                tier="tier1",
                started_at=now,
                expires_at=now + days * 86_400_000,
                months=months,
            )
        )


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def chat_env(sqlite_url: str, manual_clock: ManualClock) -> AsyncIterator[ChatEnv]:
    from volthub.http.app import create_app

    application = create_app(chat_test_settings(sqlite_url), clock=manual_clock)
    async with application.test_app():
        yield ChatEnv(application, manual_clock)


# --- Events API (issue 5): a live server with chosen settings -------------------------------


async def serve_app(nursery: trio.Nursery, settings: Settings, stop: trio.Event, clock: Any = None) -> LiveServer:
    """The app on Hypercorn (trio worker) on a free loopback port, served in `nursery` until
    `stop` is set (shut down gracefully, like `live_server`). For tests with their own settings."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from volthub.http.app import create_app

    application = create_app(settings, clock=clock)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    binds = await nursery.start(
        lambda task_status: serve(application, config, shutdown_trigger=stop.wait, task_status=task_status)
    )
    return LiveServer(binds[0], application)


async def register_live(base_url: str, username: str | None = None) -> RegisteredUser:
    """Register through a live server's HTTP API."""
    username = username or unique_name()
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/api/auth/register", json={"username": username, "password": "correct horse battery"}
        )
    assert response.status_code == 201, response.text
    body = response.json()
    return RegisteredUser(body["user"]["id"], body["user"]["username"], body["token"], "correct horse battery")


# --- OAuth: an access token backed by a real grant, without the consent flow -----------------


async def issue_oauth_token(app: Any, user_id: str, scopes: str | list[str], client_id: str | None = None) -> str:
    """An OAuth access token for `user_id` holding `scopes` (real or legacy names), backed by
    a real grant, so `runtime().services["grant_lookup"]` accepts it and revoking the grant
    ends it. Without `client_id`, a fresh app owned by the user is created; sensitive scopes
    are granted to the app as an operator would (`volthub apps grant`)."""
    import uuid

    from volthub.persistence import apps as apps_repo
    from volthub.persistence import oauth as oauth_repo
    from volthub.protocol.oauth.scopes import (
        SENSITIVE_SCOPES,
        effective_scopes,
        format_scope,
    )

    rt = app.extensions["volthub"]
    scope = format_scope(scopes)
    held = effective_scopes(scope)

    def create(tx: Any) -> tuple[str, str]:
        cid = client_id or str(uuid.uuid4())
        if client_id is None:
            apps_repo.create_app(
                tx,
                client_id=cid,
                owner_id=user_id,
                name="Test app",
                description="",
                logo_url=None,
                redirect_uris=["https://app.example/callback"],
                client_secret_hash="unused",
                bot_app=False,
                now_ms=1,
            )
        for name in held & SENSITIVE_SCOPES:
            oauth_repo.grant_app_scope(tx, cid, name, 1)
        grant = oauth_repo.create_grant(
            tx, grant_id=str(uuid.uuid4()), user_id=user_id, client_id=cid, consented_scope=scope, held=held, now_ms=1
        )
        return cid, grant.id

    cid, grant_id = await rt.db.write(create)
    token, _ = rt.tokens.issue_access(user_id, cid, scope, grant_id, 3600)
    return token
