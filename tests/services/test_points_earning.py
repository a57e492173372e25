"""Watching earns channel points (services.channel_points.WatchEarnings) on SQLite and
PostgreSQL: present signed-in viewers of live channels, once per interval even with two
processes crediting, under MockClock."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterable

import trio
import trio.testing

from tests.conftest import stored_user
from volthub.hub.clock import TrioClock
from volthub.persistence import Database, ledger
from volthub.persistence import streams as streams_repo
from volthub.persistence.streams import Stream
from volthub.services.channel_points import WatchEarnings, points_account

INTERVAL = 300.0
POINTS = 10
START = 1_800_000_000.0  # a multiple of INTERVAL: the first boundary is one interval away


class Viewers:
    """Presence as the hub reports it: signed-in ids and an anonymous count per channel.
    `awaitable` answers like the cross-process (PostgreSQL) presence does."""

    def __init__(self, awaitable: bool = False) -> None:
        self.present: dict[str, list[str]] = {}
        self.awaitable = awaitable

    def snapshot(self, channel_id: str) -> tuple[Iterable[str], int] | Awaitable[tuple[Iterable[str], int]]:
        answer = (list(self.present.get(channel_id, [])), 3)
        if not self.awaitable:
            return answer

        async def later() -> tuple[Iterable[str], int]:
            return answer

        return later()


async def live(db: Database, channel_id: str) -> str:
    stream_id = str(uuid.uuid4())
    stream = Stream(
        id=stream_id,
        channel_id=channel_id,
        key_hash=uuid.uuid4().hex,
        source="hook",
        media_path=None,
        started_at=1,
        last_seen_at=1,
        ended_at=None,
        end_reason=None,
    )
    await db.write(lambda tx: streams_repo.insert_stream(tx, stream))
    return stream_id


async def points(db: Database, channel_id: str, user_id: str) -> int:
    return await db.read(lambda tx: ledger.balance(tx, points_account(channel_id, user_id)))


def earner(db: Database, viewers: Viewers, clock: TrioClock | None = None) -> WatchEarnings:
    return WatchEarnings(db, clock or TrioClock(START), viewers, points=POINTS, interval_seconds=INTERVAL)


async def test_present_viewers_of_live_channels_earn_once_per_interval(db: Database) -> None:
    channel, offline_channel = await stored_user(db), await stored_user(db)
    viewer, other = await stored_user(db), await stored_user(db)
    await live(db, channel)
    viewers = Viewers()
    # The broadcaster and an id with no account earn nothing; offline channels earn nothing.
    viewers.present = {channel: [viewer, channel, str(uuid.uuid4()), viewer], offline_channel: [other]}
    first, second = earner(db, viewers), earner(db, viewers)  # two processes, one database
    assert await first.credit(7) == {channel: [viewer]}
    assert await second.credit(7) == {}  # claimed already
    assert await first.credit(6) == {}  # an earlier interval is never credited late
    viewers.present[channel] = [viewer, other]
    assert await second.credit(8) == {channel: sorted([viewer, other])}
    assert await points(db, channel, viewer) == 2 * POINTS
    assert await points(db, channel, other) == POINTS
    assert await points(db, offline_channel, other) == 0
    assert await points(db, channel, channel) == 0
    assert await db.read(ledger.mismatched_accounts) == []
    assert (await db.read(ledger.totals))["points"] == (0, 0)


async def test_concurrent_processes_credit_an_interval_once(db: Database) -> None:
    channel, viewer = await stored_user(db), await stored_user(db)
    await live(db, channel)
    viewers = Viewers(awaitable=True)
    viewers.present = {channel: [viewer]}
    processes = [earner(db, viewers) for _ in range(6)]
    async with trio.open_nursery() as nursery:
        for process in processes:
            nursery.start_soon(process.credit, 42)
    assert await points(db, channel, viewer) == POINTS


async def test_the_service_credits_at_each_interval_under_mock_clock(
    db: Database, mock_clock: trio.testing.MockClock
) -> None:
    channel, viewer = await stored_user(db), await stored_user(db)
    await live(db, channel)
    viewers = Viewers()
    viewers.present = {channel: [viewer]}
    service = earner(db, viewers, TrioClock(START))
    # The clock may only move while the service sleeps on it: a task waiting on a database
    # thread counts as blocked too, and a jump then would carry the clock past the boundary
    # it has yet to schedule. A credit's return is followed by the next sleep with no
    # checkpoint between, so once it is counted the service sleeps.
    credited: list[int] = []
    credit = service.credit

    async def counted(interval: int) -> dict[str, list[str]]:
        result = await credit(interval)
        credited.append(interval)
        return result

    service.credit = counted  # type: ignore[method-assign]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service.run)
        await trio.testing.wait_all_tasks_blocked()
        for number, expected in enumerate((POINTS, 2 * POINTS, 3 * POINTS), start=1):
            mock_clock.jump(INTERVAL / 2)
            await trio.testing.wait_all_tasks_blocked()
            assert await points(db, channel, viewer) == expected - POINTS  # not yet: mid-interval
            mock_clock.jump(INTERVAL / 2)
            while len(credited) < number:
                await trio.sleep(0)  # the credit runs in a database thread
            assert await points(db, channel, viewer) == expected
        viewers.present = {}
        mock_clock.jump(INTERVAL)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert await points(db, channel, viewer) == 3 * POINTS


async def test_no_points_configured_means_no_earning(db: Database, mock_clock: trio.testing.MockClock) -> None:
    channel, viewer = await stored_user(db), await stored_user(db)
    await live(db, channel)
    viewers = Viewers()
    viewers.present = {channel: [viewer]}
    service = WatchEarnings(db, TrioClock(START), viewers, points=0, interval_seconds=INTERVAL)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(service.run)
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(INTERVAL * 3)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert await points(db, channel, viewer) == 0
