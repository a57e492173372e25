"""Presence over several processes (hub/presence.py): each writes its own connections, each
answers with everyone's; a process that stops takes its connections with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from volthub.hub.clock import TrioClock
from volthub.hub.presence import ClusterPresence
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


async def test_each_process_answers_with_every_process_s_viewers(database: Database, autojump_clock: Any) -> None:
    clock = TrioClock(start=1_800_000_000)
    one = ClusterPresence(database, clock, Local({"c1": (["alice"], 2)}), interval=5)
    two = ClusterPresence(database, clock, Local({"c1": (["bob", "alice"], 1), "c2": (["carol"], 0)}), interval=5)
    await one.publish_once()
    await two.publish_once()
    users, anonymous = await one.snapshot("c1")
    assert sorted(users) == ["alice", "alice", "bob"] and anonymous == 3
    assert await one.snapshot("c2") == (["carol"], 0)
    assert await two.snapshot("c3") == ([], 0)

    # A process that stops writing (killed) stops counting after three intervals.
    await trio.sleep(16)
    assert await one.snapshot("c2") == ([], 0)


async def test_a_stopping_process_removes_its_rows(database: Database) -> None:
    clock = TrioClock(start=1_800_000_000)
    one = ClusterPresence(database, clock, Local({}), interval=5)
    two = ClusterPresence(database, clock, Local({"c1": (["bob"], 0)}), interval=5)
    await two.publish_once()
    assert await one.snapshot("c1") == (["bob"], 0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(two.run)
        nursery.cancel_scope.cancel()  # shutdown: the service's finally removes its rows
    assert await one.snapshot("c1") == ([], 0)
