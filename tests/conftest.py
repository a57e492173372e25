"""What every area's tests use: the two database backends, settings, the app and its test
client, users, live servers (in-process Hypercorn and `volthub serve` subprocesses).

PostgreSQL tests use a database of their own on the server named by VOLTHUB_TEST_POSTGRES
(default: the local trust-auth server), in the state of a fresh copy of one migrated once per
session (recycled between tests: tests/postgres_databases.py). They fail, not skip, when
CI=true and it is down. SQLite tests likewise get a copy of a file migrated
once per session (`empty_sqlite_url` and `empty_postgres_url` are for tests of migrating).

Each area keeps its own fixtures in its conftest.py (e.g. tests/http/conftest.py: the chat
environment; tests/hub/conftest.py: a registry in the test's nursery) and its helpers in a
support module (e.g. tests/http/oauth/tokens.py: OAuth tokens without the consent flow).
tests/services/webhooks/support.py, the HTTPS webhook receiver, is loaded below as a plugin
because the service tests and the HTTP tests both use its fixtures; so is
tests/event_payloads.py, which holds every event payload the tests see to its schema.

Time: tests drive it with pytest-trio's `mock_clock` / `autojump_clock` (trio.testing.MockClock)
and give the app `volthub.hub.clock.TrioClock`, which follows it; there is no other fake clock.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import secrets
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import trio

from tests.ports import use_worker_ports
from tests.postgres_databases import RecycledDatabases, describe_template, scratch_databases
from volthub.config import Settings, load_settings
from volthub.persistence import apps as apps_repo

use_worker_ports()  # before any test module imports free_port (tests/ports.py)

from volthub.loadtest.servers import free_port  # noqa: E402

pytest_plugins = ["tests.event_payloads", "tests.services.webhooks.support"]


def _share_url_builders() -> None:
    """Werkzeug compiles two URL builders per route (ast + compile()) every time a rule is
    bound to a map, i.e. ~430 compilations for each `create_app`: about two thirds of the
    time it takes. The suite creates an app for most tests, so one process compiles each
    builder once here. Only rules without defaults are shared: the builder of such a rule is
    a function of the rule text and its parsed parts alone (converters are looked up on the
    rule when it runs). Production builds one app per process and never goes through this."""
    from werkzeug.routing.rules import Rule

    compile_builder = Rule._compile_builder
    if getattr(compile_builder, "shared", False):
        return
    builders: dict[tuple[Any, ...], Any] = {}

    def shared(self: Rule, append_unknown: bool = True) -> Any:
        if self.defaults:
            return compile_builder(self, append_unknown)
        key = (self.rule, tuple(self._trace), append_unknown)
        builder = builders.get(key)
        if builder is None:
            builder = builders[key] = compile_builder(self, append_unknown)
        return builder

    shared.shared = True  # type: ignore[attr-defined]
    Rule._compile_builder = shared  # type: ignore[method-assign]


_share_url_builders()


def _share_parsed_rules() -> None:
    """The other third of binding a rule: `Rule.compile` parses the rule text into its parts
    (regular expressions for the matcher, weights) with a converter per variable, ~30 ms of
    each `create_app`. The parse depends on the rule text, the map's slash, host and
    converter settings and the converters' arguments only, so it is done once per process;
    each rule still gets converters of its own, made for its own map as werkzeug makes them.
    The parts are only read afterwards (by the matcher and the shared builders)."""
    from werkzeug.routing.rules import Rule

    compile_rule = Rule.compile
    if getattr(compile_rule, "shared", False):
        return
    parsed: dict[tuple[Any, ...], tuple[list[Any], list[Any], list[tuple[str, str, Any, Any]]]] = {}

    def shared(self: Rule) -> None:
        rule_map = self.map
        assert rule_map is not None, "rule not bound"
        domain = self.host if rule_map.host_matching else self.subdomain
        key = (
            self.rule,
            domain or "",
            rule_map.host_matching,
            self.merge_slashes,
            tuple(rule_map.converters.items()),
        )
        found = parsed.get(key)
        if found is None:
            made: list[tuple[str, str, Any, Any]] = []
            get_converter = self.get_converter

            def recording(variable: str, converter: str, args: Any, kwargs: Any) -> Any:
                made.append((variable, converter, args, kwargs))
                return get_converter(variable, converter, args, kwargs)

            self.get_converter = recording  # type: ignore[method-assign]
            try:
                compile_rule(self)
            finally:
                del self.get_converter
            parsed[key] = (list(self._parts), list(self._trace), made)
            return
        parts, trace, made = found
        self._parts = list(parts)
        self._trace = list(trace)
        self._converters = {}
        for variable, converter, args, kwargs in made:
            self._converters[variable] = self.get_converter(variable, converter, args, kwargs)
            self.arguments.add(variable)
        self._build = self._compile_builder(False).__get__(self, None)
        self._build_unknown = self._compile_builder(True).__get__(self, None)

    shared.shared = True  # type: ignore[attr-defined]
    Rule.compile = shared  # type: ignore[method-assign]


_share_parsed_rules()


def _close_the_test_apps_nursery_whatever_happens() -> None:
    """Quart-Trio's test app leaves its nursery open when the lifespan shutdown fails (it
    timed out, say): the test then ends in Trio's "Nursery stack corrupted" and the real
    error is lost. Its exit here cancels and closes the nursery in any case, so the
    shutdown's own error is what the test reports."""
    from quart_trio.testing.app import TrioTestApp

    if getattr(TrioTestApp.__aexit__, "closes_nursery", False):
        return

    async def exit_closing(self: Any, exc_type: Any, exc_value: Any, tb: Any) -> None:
        try:
            await self.shutdown()
        except BaseException as failed:
            self._nursery.cancel_scope.cancel()
            await self._nursery_manager.__aexit__(type(failed), failed, failed.__traceback__)
            raise
        await self._nursery_manager.__aexit__(exc_type, exc_value, tb)

    exit_closing.closes_nursery = True  # type: ignore[attr-defined]
    TrioTestApp.__aexit__ = exit_closing  # type: ignore[method-assign]


_close_the_test_apps_nursery_whatever_happens()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with a `slow` test (server subprocesses, real-time waits) run first, each kept
    whole and in its place otherwise: the xdist workers of `make test` take whole modules in
    this order, and a long module taken last would leave the others idle at the end."""
    slow_modules = {getattr(item, "module", None) for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: getattr(item, "module", None) not in slow_modules)


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


def _with_database(server_url: str, name: str) -> str:
    """`server_url` (a PostgreSQL URL) naming database `name` instead, query kept."""
    parts = urlsplit(server_url)
    return urlunsplit(parts._replace(path=f"/{name}"))


async def _migrate_url(url: str) -> None:
    from volthub.persistence import migrate, open_database

    database = open_database(url, pool_size=1)
    await database.open()
    try:
        await migrate(database)
    finally:
        await database.close()


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> Iterator[str]:
    """A database migrated once per session, the template of every test's database: cloning
    it (CREATE DATABASE … TEMPLATE, ~40 ms) replaces ~0.3 s of migration DDL per test. No
    connection stays open to it (a template must be unused while it is copied)."""
    import psycopg

    name = f"volthub_template_{secrets.token_hex(5)}"
    with psycopg.connect(postgres_server, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    try:
        trio.run(_migrate_url, _with_database(postgres_server, name))
        yield name
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _scratch_database(server_url: str, template: str | None) -> Iterator[str]:
    """A new database (a copy of `template`, or empty), dropped afterwards whatever is
    still connected to it; yields its URL."""
    import psycopg

    name = f"t_{secrets.token_hex(6)}"
    copy = f" TEMPLATE {template} STRATEGY WAL_LOG" if template else ""
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}{copy}")
    yield _with_database(server_url, name)
    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def postgres_databases(postgres_server: str, postgres_template: str) -> Iterator[RecycledDatabases]:
    """The test databases of this process: each in the state of a fresh copy of the template,
    recycled rather than created and dropped for every test (tests/postgres_databases.py)."""
    databases = RecycledDatabases(postgres_server, describe_template(postgres_server, postgres_template))
    yield databases
    databases.drop_all()


@pytest.fixture
def postgres_url(postgres_databases: RecycledDatabases) -> Iterator[str]:
    """A URL of a database of its own, in the state of a brand-new copy of the session's
    migrated template."""
    yield from scratch_databases(postgres_databases)


@pytest.fixture
def another_postgres_url(postgres_databases: RecycledDatabases) -> Iterator[str]:
    """A second such database, for a test that runs two deployments side by side."""
    yield from scratch_databases(postgres_databases)


@pytest.fixture
def empty_postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL of a brand-new database with nothing in it: for tests of migrating itself."""
    yield from _scratch_database(postgres_server, None)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated once per session (per xdist worker), the template of every
    test's `sqlite_url`: copying it (~1 ms) replaces ~25 ms of migration DDL and fsyncs per
    test. Closed after migrating, so it is one file (no write-ahead log beside it)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "volthub.db"
    trio.run(_migrate_url, f"sqlite:///{path}")
    leftovers = sorted(p.name for p in path.parent.iterdir() if p != path)
    assert leftovers == [], f"the template is not one closed file: {leftovers}"
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path, sqlite_template: Path) -> str:
    """A URL of a new SQLite database, already migrated (a copy of the session's template), as
    `postgres_url` is; `empty_sqlite_url` is one with nothing in it."""
    path = tmp_path / "volthub.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def empty_sqlite_url(tmp_path: Path) -> str:
    """A URL of a SQLite database not created yet: for tests of migrating itself."""
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


@contextlib.asynccontextmanager
async def migrated_database(url: str, pool_size: int) -> AsyncIterator[Any]:
    """An open, migrated database of `pool_size` connections, closed after."""
    from volthub.persistence import migrate, open_database

    database = open_database(url, pool_size=pool_size)
    await database.open()
    await migrate(database)
    yield database
    await database.close()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Any]:
    """A migrated database, once per backend."""
    # Eight connections: the concurrency tests race that many transactions.
    async with migrated_database(database_url, pool_size=8) as database:
        yield database


@contextlib.asynccontextmanager
async def opened_database(url: str, pool_size: int = 2) -> AsyncIterator[Any]:
    """An open database of `pool_size` connections, closed after (no migration: a
    PostgreSQL test database is migrated already)."""
    from volthub.persistence import open_database

    database = open_database(url, pool_size, 5.0)
    await database.open()
    try:
        yield database
    finally:
        await database.close()


async def stored_user(db: Any, username: str | None = None) -> str:
    """A user written straight to the store (no HTTP, no password hashing); its id."""
    from volthub.persistence import users as users_repo

    user_id = str(uuid.uuid4())
    name = username or f"u{uuid.uuid4().hex[:12]}"
    await db.write(
        lambda tx: users_repo.create_user(
            tx, user_id=user_id, username=name, display_name=name, password_hash="h", now_ms=1
        )
    )
    return user_id


def insert_subscription(
    tx: Any,
    channel_id: str,
    user_id: str,
    *,
    started_at: int,
    expires_at: int,
    tier: str = "tier1",
    months: int = 1,
    gifter_id: str | None = None,
) -> None:
    """A subscription of `user_id` to `channel_id` written in `tx` (no Volts change hands)."""
    from volthub.persistence import subscriptions as subscriptions_repo

    subscriptions_repo.insert(
        tx,
        subscription_id=str(uuid.uuid4()),
        channel_id=channel_id,
        user_id=user_id,
        tier=tier,
        started_at=started_at,
        expires_at=expires_at,
        months=months,
        gifter_id=gifter_id,
    )


def insert_chat_message(tx: Any, channel_id: str, user_id: str, text: str, now_ms: int, is_system: bool = False) -> int:
    """A chat message written in `tx`; its number in the channel."""
    from volthub.persistence import chat as chat_repo

    return chat_repo.insert_message(
        tx,
        message_id=str(uuid.uuid4()),
        channel_id=channel_id,
        user_id=user_id,
        is_system=is_system,
        payload={"message": text},
        now_ms=now_ms,
    )


# Tests buy Volts from the sandbox payment provider, chosen explicitly (the default is none);
# tests of an unconfigured server pass volts={"payment_provider": ""}.
TEST_PAYMENTS = {"payment_provider": "sandbox"}
TEST_PAYMENTS_ENV = {"VOLTHUB_VOLTS__PAYMENT_PROVIDER": "sandbox"}


def make_settings(database_url: str, **sections: dict[str, Any]) -> Settings:
    """Test settings. The gateway is on, as by default, but on a free port of its own (never
    the default 8081), so parallel tests and servers never share one; pass
    `events={"gateway_port": 0}` for the mount alone."""
    overrides: dict[str, dict[str, Any]] = {
        "database": {"url": database_url},
        "auth": dict(FAST_AUTH),
        "events": {"gateway_port": free_port()},
        "volts": dict(TEST_PAYMENTS),
    }
    if "ratelimit" not in sections:
        overrides["ratelimit"] = dict(ROOMY_LIMITS)
    for section, values in sections.items():
        overrides.setdefault(section, {}).update(values)
    return load_settings(None, environ={}, overrides=overrides)


# The two ways the Events API's Socket.IO paths are served: the gateway (the default, a port
# of its own) and the single-port mount (the main port; `[events] gateway_port = 0`).
# Socket.IO tests run on the default; those parametrised over both keep the mount covered.
SOCKET_PATHS = ["gateway", "mount"]


def socket_path_events(path: str) -> dict[str, Any]:
    """The `[events]` settings that serve Socket.IO clients on `path` (one of SOCKET_PATHS)."""
    if path not in SOCKET_PATHS:
        raise ValueError(f"unknown Socket.IO path {path!r}")
    return {} if path == "gateway" else {"gateway_port": 0}


@pytest.fixture
def settings(sqlite_url: str) -> Settings:
    return make_settings(sqlite_url)


@contextlib.asynccontextmanager
async def running_app(settings: Settings, **options: Any) -> AsyncIterator[tuple[Any, Any]]:
    """An app built from `settings` (and `create_app`'s `options`), running; it and its test
    client."""
    from volthub.http.app import create_app

    application = create_app(settings, **options)
    async with application.test_app():
        yield application, application.test_client()


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[Any]:
    async with running_app(settings) as (application, _):
        yield application


@pytest.fixture
async def backend_app(database_url: str) -> AsyncIterator[Any]:
    """The app on each backend (SQLite, then PostgreSQL when it is available)."""
    async with running_app(make_settings(database_url)) as (application, _):
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


def create_test_app(
    tx: Any,
    client_id: str,
    owner_id: str,
    name: str = "Test app",
    *,
    bot_app: bool = False,
    redirect_uris: Sequence[str] = ("https://app.example/callback",),
    client_secret_hash: str | None = "unused",
    description: str = "",
    now_ms: int = 1,
) -> apps_repo.App:
    """An app of `owner_id` (confidential, one redirect URI, as registering one makes it,
    unless told otherwise), written in `tx`."""
    return apps_repo.create_app(
        tx,
        client_id=client_id,
        owner_id=owner_id,
        name=name,
        description=description,
        logo_url=None,
        redirect_uris=list(redirect_uris),
        client_secret_hash=client_secret_hash,
        bot_app=bot_app,
        now_ms=now_ms,
    )


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


# --- servers ---------------------------------------------------------------------------------


@dataclass
class LiveServer:
    url: str
    app: Any
    # Where Socket.IO clients connect: the gateway's own port (the default), or the main
    # port (the mount) when `[events] gateway_port` is 0.
    events_url: str = ""

    def __post_init__(self) -> None:
        self.events_url = self.events_url or self.url


async def serve_app(nursery: trio.Nursery, settings: Settings, stop: trio.Event, clock: Any = None) -> LiveServer:
    """The app's server (both listeners, as `volthub serve` runs them) with the main port on a
    free loopback port, served in `nursery` until `stop` is set, then stopped in its order. `live_server` is this with the default settings.
    The gateway, when on (the default), gets a free port of its own for each server, so that
    servers started with the same settings never share one."""
    from volthub.http.app import create_app
    from volthub.http.server import server_of

    own = {"shutdown_timeout": 0.5}  # a quick graceful stop: tests end their servers often
    if settings.events.gateway_port:
        settings = settings.model_copy(
            update={"events": settings.events.model_copy(update={"gateway_port": free_port()})}
        )
    settings = settings.model_copy(update={"server": settings.server.model_copy(update=own)})
    server = server_of(create_app(settings, clock=clock))
    binds = await nursery.start(functools.partial(server.serve, stop.wait, bind="127.0.0.1:0"))
    application = server.app
    gateway = server.runtime.gateway
    return LiveServer(binds[0], application, gateway.url if gateway is not None else "")


@contextlib.asynccontextmanager
async def served(nursery: trio.Nursery, settings: Settings) -> AsyncIterator[LiveServer]:
    """`serve_app` for the block: the server is stopped as the block ends."""
    stop = trio.Event()
    try:
        yield await serve_app(nursery, settings, stop)
    finally:
        stop.set()


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


@pytest.fixture
async def live_server(settings: Settings, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    """The app on a real Hypercorn (trio worker) on a free loopback port, in this test's nursery."""
    async with served(nursery, settings) as server:
        yield server


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Wait until the server process at `url` answers `/healthz` 200 (it must not exit first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server process exited"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)  # real time: a child process is starting
    raise AssertionError("not healthy")


class ServerProcess:
    """`volthub serve` as a child process: for restart and SIGKILL tests. The gateway is on
    (the default) on a free port of its own unless `args` or `env` choose one. `command`
    "hypercorn" serves the app with the `hypercorn` command instead (one worker process
    under Hypercorn's parent, configured by environment)."""

    def __init__(
        self,
        database_url: str,
        tmp_path: Path,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        command: str = "serve",
    ) -> None:
        self.command = command
        self.database_url = database_url
        self.extra_args = args or []
        self.tmp_path = tmp_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        chosen = _gateway_port_of(self.extra_args, env or {})
        self.gateway_port = free_port() if chosen is None else chosen
        if chosen is None:
            self.extra_args = [*self.extra_args, "--gateway-port", str(self.gateway_port)]
        # Where Socket.IO clients connect: the gateway, or the main port when it is off.
        self.events_url = f"http://127.0.0.1:{self.gateway_port}" if self.gateway_port else self.url
        self.extra_env = env or {}
        self.process: subprocess.Popen[bytes] | None = None

    # Generous: on a loaded machine (a whole suite beside other work) a start took over 60 s.
    def start(self, timeout: float = 240) -> ServerProcess:
        env = {
            **os.environ,
            "VOLTHUB_AUTH__ARGON2_TIME_COST": str(FAST_AUTH["argon2_time_cost"]),
            "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": str(FAST_AUTH["argon2_memory_kib"]),
            **TEST_PAYMENTS_ENV,
            **self.extra_env,
        }
        with open(self.tmp_path / f"server-{self.port}.log", "ab") as log:  # the child keeps its own fd
            self.process = subprocess.Popen(
                self._argv(env),
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
            time.sleep(0.1)  # real time: a child process is starting, no clock of ours drives it
        self.kill()  # no fixture knows of it yet: it would outlive the test
        raise RuntimeError(f"server did not become healthy within {timeout} s: {self.log()}")

    def _argv(self, env: dict[str, str]) -> list[str]:
        if self.command == "hypercorn":
            env["VOLTHUB_DATABASE__URL"] = self.database_url
            env["VOLTHUB_EVENTS__GATEWAY_PORT"] = str(self.gateway_port)
            hypercorn = str(Path(sys.executable).with_name("hypercorn"))
            bind = f"127.0.0.1:{self.port}"
            return [hypercorn, "--worker-class", "trio", "--bind", bind, "volthub.http.app:create_app()"]
        return [
            *(sys.executable, "-m", "volthub", "serve", "--host", "127.0.0.1", "--port", str(self.port)),
            *("--database", self.database_url, *self.extra_args),
        ]

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


def _gateway_port_of(args: list[str], env: dict[str, str]) -> int | None:
    if "--gateway-port" in args:
        return int(args[args.index("--gateway-port") + 1])
    if "VOLTHUB_EVENTS__GATEWAY_PORT" in env:
        return int(env["VOLTHUB_EVENTS__GATEWAY_PORT"])
    return None


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
