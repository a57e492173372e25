"""services/channel_points.py on SQLite and PostgreSQL: listing, and the per-channel cap
held by the database under concurrent creates (migration 0008)."""

from __future__ import annotations

import contextlib
import functools
import uuid

import pytest
import trio
import trio.testing

from tests.conftest import stored_user as make_channel
from volthub.hub.clock import TrioClock
from volthub.persistence import Database, Tx
from volthub.persistence import channel_points as repo
from volthub.services.channel_points import (
    MAX_REWARDS_PER_CHANNEL,
    ChannelNotFound,
    ChannelPoints,
    Reward,
    TooManyRewards,
)

CONCURRENCY = 8
ROUNDS = 4


def fields(number: int) -> dict[str, object]:
    return {"name": f"reward {number}", "cost": 10 + number}


async def test_built_in_rewards_first_then_custom_oldest_first(
    db: Database, autojump_clock: trio.testing.MockClock
) -> None:
    points = ChannelPoints(db, TrioClock(1_800_000_000.0))
    channel = await make_channel(db)
    first = await points.create(channel, fields(1))
    await trio.sleep(0.01)  # created in one millisecond, two rewards would list in id order
    second = await points.create(channel, fields(2))
    assert [r.id for r in await points.rewards(channel, built_in=False)] == [first.id, second.id]
    listed = await points.rewards(channel)
    assert [r.built_in_type for r in listed] == ["first", None, None]
    assert {r.channel_id for r in listed} == {channel}


async def test_unknown_channel(db: Database) -> None:
    with pytest.raises(ChannelNotFound):
        await ChannelPoints(db, TrioClock()).rewards(str(uuid.uuid4()))


def fill(tx: Tx, channel: str, count: int) -> None:
    """`count` rewards in one transaction, each through the cap as the service does it."""
    for number in range(count):
        assert repo.claim_reward_slot(tx, channel)
        repo.insert_reward(tx, Reward(str(uuid.uuid4()), channel, f"r{number}", 1, "", None, True, False, None, None))


async def race(points: ChannelPoints, channel: str, contenders: int) -> int:
    """Start `contenders` creates at once; how many got a reward in."""
    created: list[str] = []

    async def create(number: int) -> None:
        with contextlib.suppress(TooManyRewards):
            created.append((await points.create(channel, fields(number))).id)

    async with trio.open_nursery() as nursery:
        for number in range(contenders):
            nursery.start_soon(create, 1000 + number)
    return len(created)


async def test_the_cap_holds_under_concurrent_creates(db: Database) -> None:
    """Creates racing for the last free places: exactly those places are filled.

    With a count-then-insert check, PostgreSQL lets several transactions see the same
    count and all insert; the guarded counter row lets one through per free place.
    Several channels: a race that is lost only sometimes still shows.
    """
    points = ChannelPoints(db, TrioClock())
    free = 3
    for _channel in range(ROUNDS):
        channel = await make_channel(db)
        await db.write(functools.partial(fill, channel=channel, count=MAX_REWARDS_PER_CHANNEL - free))
        assert await race(points, channel, CONCURRENCY * 2) == free
        stored = await db.read(functools.partial(repo.count_rewards, channel_id=channel))
        assert stored == MAX_REWARDS_PER_CHANNEL
