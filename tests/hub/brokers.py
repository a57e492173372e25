"""One set-up for every broker test: `start_process(kind)` makes one process's broker
(in-process on SQLite, PostgreSQL's, or Redis's on a real redis-server) with its publisher,
fan-out and listeners, runs it in the test's nursery and waits until it is connected.
Several processes of a kind share one database (and one redis-server), as a deployment's do."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.redis_support import RedisServer
from volthub.hub.broker import Broker
from volthub.hub.broker_budgets import DatabaseBudgets
from volthub.hub.bus import InProcessBroker, PostgresBroker, RelaySettings
from volthub.hub.clock import Clock, SystemClock
from volthub.hub.fanout import Fanout
from volthub.hub.publisher import Emitter, Event, EventPublisher
from volthub.hub.redis_bus import RedisBroker, RedisSettings
from volthub.persistence import Database, migrate, open_database

WAIT = 10.0  # a bound on waiting for real threads, servers and PostgreSQL; never asserted on
KINDS = ("in-process", "postgres", "redis")
SHARED = ("postgres", "redis")  # the brokers of several processes


class Process:
    """One process's share: its database pool, its broker, what its listeners got (live,
    and as history per channel), and a fan-out wired as the app wires it."""

    def __init__(self, database: Database, broker: Broker, clock: Clock, *, resume_size: int = 50) -> None:
        self.database = database
        self.broker = broker
        self.clock = clock
        self.publisher = EventPublisher(database, broker, clock, event_log=broker)
        self.fanout = Fanout(resume_size=resume_size, interest=broker.channel_interest)
        self.redis: RedisServer | None = None  # the redis-server of a Redis broker's deployment
        self.heard: list[Event] = []
        self.history: dict[str, list[Event]] = {}
        self._changed = trio.Event()
        broker.add_history(self.fanout.replace_recent)
        broker.add_history(self._record_history)
        broker.subscribe(self.fanout.publish)
        broker.subscribe(self._hear)

    def _hear(self, event: Event) -> None:
        self.heard.append(event)
        self._changed.set()
        self._changed = trio.Event()

    def _record_history(self, channel_id: str, events: list[Event]) -> None:
        self.history[channel_id] = list(events)

    async def wait_for(self, predicate: Callable[[list[Event]], bool]) -> None:
        with trio.fail_after(WAIT):
            while not predicate(self.heard):
                await self._changed.wait()

    async def emit(self, channel_id: str, *texts: str, name: str = "chat.message", **extra: Any) -> None:
        def change(tx: Any, emitter: Emitter) -> None:
            for text in texts:
                emitter.emit(channel_id, name, {"text": text, **extra})

        await self.publisher.write(change)

    async def follow(self, *channel_ids: str) -> None:
        """What a client's subscription does: prepare, then hold while subscribed."""
        await self.broker.prepare(channel_ids)
        for channel_id in channel_ids:
            self.broker.channel_interest(channel_id, True)


def texts(events: list[Event], channel: str | None = None) -> list[str]:
    return [e.data["text"] for e in events if channel is None or e.channel_id == channel]


@pytest.fixture
def deployment_url(request: pytest.FixtureRequest) -> str:
    """The database of the test's deployment: SQLite for the in-process broker, else
    PostgreSQL (skipped without it). Resolved here, outside the test's Trio run."""
    chosen = "postgres"
    for name in ("kind", "shared_kind"):
        if name in request.fixturenames:
            chosen = request.getfixturevalue(name)
    return str(request.getfixturevalue("sqlite_url" if chosen == "in-process" else "postgres_url"))


@pytest.fixture
async def start_process(
    deployment_url: str, tmp_path: Path, nursery: trio.Nursery
) -> AsyncIterator[Callable[..., Any]]:
    """`await start_process(kind, run=True, clock=None, shared_budgets=False, **settings)`:
    a new process of the deployment (the same database, the same redis-server), its broker
    running and connected unless `run=False`. `settings`: the broker's own settings
    (RelaySettings or RedisSettings fields; `url`/`nodes` pick another Redis)."""
    databases: list[Database] = []
    servers: list[RedisServer] = []

    async def database_for(kind: str) -> Database:
        database = open_database(deployment_url, pool_size=4)
        await database.open()
        await migrate(database)
        databases.append(database)
        return database

    def redis_url() -> str:
        if not servers:
            servers.append(RedisServer(tmp_path / "redis").start())
        return servers[0].url

    async def start(
        kind: str, *, run: bool = True, clock: Clock | None = None, shared_budgets: bool = False, **settings: Any
    ) -> Process:
        clock = clock or SystemClock()
        database = await database_for(kind)
        budgets = DatabaseBudgets(database, clock, acquire_timeout=5.0) if shared_budgets else None
        broker: Broker
        if kind == "in-process":
            broker = InProcessBroker()
        elif kind == "postgres":
            broker = PostgresBroker(database, clock, RelaySettings(**settings), shared_budgets=budgets)
        else:
            nodes = tuple(settings.pop("nodes", ()))
            url = settings.pop("url", "" if nodes else None)
            defaults = {"history": 50, "ping_seconds": 0.5, "sweep_seconds": 0.0, "sweep_grace_seconds": 0.0}
            redis = RedisSettings(url=redis_url() if url is None else url, cluster_nodes=nodes, **defaults | settings)
            broker = RedisBroker(database, clock, redis, shared_budgets=budgets)
        process = Process(database, broker, clock, resume_size=settings.get("history", 50))
        process.redis = servers[0] if kind == "redis" and servers else None
        if run:
            nursery.start_soon(broker.run)
            with trio.fail_after(WAIT):
                await broker.wait_connected()
        return process

    try:
        yield start
    finally:
        nursery.cancel_scope.cancel()
        # Stopped before anything awaits: the teardown runs in the cancelled scope, where an
        # await raises, and a redis-server not stopped here would outlive the run.
        for server in servers:
            server.stop()
        with trio.CancelScope(shield=True):
            for database in databases:
                await database.close()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each broker in turn (the PostgreSQL and Redis ones skip without their servers)."""
    return str(request.param)


@pytest.fixture(params=SHARED)
def shared_kind(request: pytest.FixtureRequest) -> str:
    """Each broker of several processes in turn."""
    return str(request.param)
