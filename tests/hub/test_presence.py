"""Presence over several processes (hub/presence.py): each writes its own connections, each
answers with everyone's, and a process that stops writing (killed) stops counting. Kept in
PostgreSQL, or in Redis (a real redis-server) when it is the broker. What every broker's
presence does is in test_broker_conformance.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from tests.conftest import migrated_database
from tests.redis_support import RedisServer
from volthub.hub.clock import TrioClock
from volthub.hub.presence import ClusterPresence, DatabasePresenceStore, PresenceStore, RedisPresenceStore
from volthub.persistence import Database


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
    async with migrated_database(postgres_url, pool_size=4) as db:
        yield db


class Connected:
    """What `RedisPresenceStore` needs of the Redis broker: its connected client."""

    connected = True

    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self) -> Any:
        return self._client


@pytest.fixture(params=["postgres", "redis"])
async def stores(request: pytest.FixtureRequest, database: Database, tmp_path: Any) -> AsyncIterator[Any]:
    """Makes one process's store: in PostgreSQL, or on a fresh redis-server."""
    if request.param == "postgres":
        yield lambda: DatabasePresenceStore(database)
        return
    import coredis

    server = RedisServer(tmp_path).start()
    try:
        async with coredis.Redis.from_url(server.url) as client:
            yield lambda: RedisPresenceStore(Connected(client))
    finally:
        server.stop()


async def test_each_process_answers_with_every_process_s_viewers(stores: Any, autojump_clock: Any) -> None:
    clock = TrioClock(start=1_800_000_000)
    store_one: PresenceStore = stores()
    one = ClusterPresence(store_one, clock, Local({"c1": (["alice"], 2)}), interval=5)
    local_two = Local({"c1": (["bob", "alice"], 1), "c2": (["carol"], 0)})
    two = ClusterPresence(stores(), clock, local_two, interval=5)
    await one.publish_once()
    await two.publish_once()
    users, anonymous = await one.snapshot("c1")
    assert sorted(users) == ["alice", "alice", "bob"] and anonymous == 3
    assert await one.snapshot("c2") == (["carol"], 0)
    assert await two.snapshot("c3") == ([], 0)

    # A process that stops writing (killed) stops counting after three intervals.
    await trio.sleep(16)
    assert await one.snapshot("c2") == ([], 0)


class StallsOnSecondExpiry:
    """A Redis client that never finishes setting the expiry of the second channel it
    writes: a shutdown then comes in the middle of a round of writes."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._expiries = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def pexpire(self, key: str, milliseconds: int) -> Any:
        self._expiries += 1
        if self._expiries == 2:
            await trio.sleep_forever()
        return await self._client.pexpire(key, milliseconds)


async def test_a_shutdown_in_the_middle_of_a_write_removes_every_channel_written(tmp_path: Any) -> None:
    import coredis

    server = RedisServer(tmp_path).start()
    try:
        async with coredis.Redis.from_url(server.url) as client:
            leaving = RedisPresenceStore(Connected(StallsOnSecondExpiry(client)))
            rows = [("c1", ["alice"], 0), ("c2", ["bob"], 1)]
            with trio.move_on_after(1):
                await leaving.replace_mine("leaving", rows, now_ms=10_000, stale_before_ms=0)
            staying = RedisPresenceStore(Connected(client))
            assert await staying.others("c2", "staying", fresh_after_ms=0) == (["bob"], 1)
            await leaving.delete_mine("leaving")
            for channel_id in ("c1", "c2"):
                assert await staying.others(channel_id, "staying", fresh_after_ms=0) == ([], 0)
    finally:
        server.stop()
