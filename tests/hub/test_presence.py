"""Presence over several processes (hub/presence.py): each writes its own connections, each
answers with everyone's; a process that stops takes its connections with it. Kept in
PostgreSQL, or in Redis (a real redis-server) when it is the broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from tests.redis_support import RedisServer
from volthub.hub.clock import TrioClock
from volthub.hub.presence import ClusterPresence, PresenceStore, RedisPresenceStore
from volthub.persistence import Database, migrate, open_database


class Local:
    def __init__(self, channels: dict[str, tuple[list[str], int]]) -> None:
        self.channels = channels
        self.presence_listeners: list[Any] = []

    def snapshot(self, channel_id: str) -> tuple[list[str], int]:
        return self.channels.get(channel_id, ([], 0))

    def active_channels(self) -> list[str]:
        return list(self.channels)


@pytest.fixture
async def database(postgres_url: str) -> AsyncIterator[Database]:
    db = open_database(postgres_url, pool_size=4)
    await db.open()
    await migrate(db)
    yield db
    await db.close()


class Broker:
    """What `RedisPresenceStore` needs of the Redis relay: its connected client."""

    connected = True

    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self) -> Any:
        return self._client


@pytest.fixture(params=["postgres", "redis"])
async def stores(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Any]:
    """Makes one process's store: None (PostgreSQL) or one on a fresh redis-server."""
    if request.param == "postgres":
        yield lambda: None
        return
    import coredis

    server = RedisServer(tmp_path).start()
    try:
        async with coredis.Redis.from_url(server.url) as client:
            yield lambda: RedisPresenceStore(Broker(client))  # type: ignore[arg-type]
    finally:
        server.stop()


async def test_each_process_answers_with_every_process_s_viewers(
    database: Database, stores: Any, autojump_clock: Any
) -> None:
    clock = TrioClock(start=1_800_000_000)
    store_one: PresenceStore | None = stores()
    one = ClusterPresence(database, clock, Local({"c1": (["alice"], 2)}), interval=5, store=store_one)
    local_two = Local({"c1": (["bob", "alice"], 1), "c2": (["carol"], 0)})
    two = ClusterPresence(database, clock, local_two, interval=5, store=stores())
    await one.publish_once()
    await two.publish_once()
    users, anonymous = await one.snapshot("c1")
    assert sorted(users) == ["alice", "alice", "bob"] and anonymous == 3
    assert await one.snapshot("c2") == (["carol"], 0)
    assert await two.snapshot("c3") == ([], 0)

    # A process that stops writing (killed) stops counting after three intervals.
    await trio.sleep(16)
    assert await one.snapshot("c2") == ([], 0)


async def test_a_stopping_process_removes_its_rows(database: Database, stores: Any) -> None:
    clock = TrioClock(start=1_800_000_000)
    one = ClusterPresence(database, clock, Local({}), interval=5, store=stores())
    two = ClusterPresence(database, clock, Local({"c1": (["bob"], 0)}), interval=5, store=stores())
    await two.publish_once()
    assert await one.snapshot("c1") == (["bob"], 0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(two.run)
        nursery.cancel_scope.cancel()  # shutdown: the service's finally removes its rows
    assert await one.snapshot("c1") == ([], 0)
