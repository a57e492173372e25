"""services/notifications.py on SQLite and PostgreSQL: the owner's side of notifications."""

from __future__ import annotations

import uuid

import pytest
import trio

from tests.conftest import stored_user as make_user
from volthub.hub.clock import TrioClock, to_ms
from volthub.persistence import Database
from volthub.persistence import notifications as repo
from volthub.persistence.pagination import InvalidCursor
from volthub.services.notifications import NotificationNotFound, Notifications

START = 1_800_000_000.0


async def add(db: Database, user_id: str, created_at: int) -> str:
    notification_id = str(uuid.uuid4())
    await db.write(
        lambda tx: repo.create(
            tx,
            notification_id=notification_id,
            user_id=user_id,
            type="webhook.disabled",
            title="t",
            message="m",
            data={},
            now_ms=created_at,
        )
    )
    return notification_id


async def test_pages_newest_first_and_unread_only(db: Database, mock_clock: trio.testing.MockClock) -> None:
    me = await make_user(db)
    ids = [await add(db, me, 1_000 + n) for n in range(3)]
    service = Notifications(db, TrioClock(START))
    first = await service.page(me, 2, None)
    assert [n.id for n in first.items] == [ids[2], ids[1]]
    second = await service.page(me, 2, first.next_cursor)
    assert ([n.id for n in second.items], second.next_cursor) == ([ids[0]], None)
    await service.mark_read(me, ids[1])
    unread = await service.page(me, 10, None, unread_only=True)
    assert [n.id for n in unread.items] == [ids[2], ids[0]]
    with pytest.raises(InvalidCursor):
        await service.page(me, 2, "not a cursor")


async def test_mark_read_keeps_the_first_read_time(db: Database, mock_clock: trio.testing.MockClock) -> None:
    me = await make_user(db)
    notification = await add(db, me, 1_000)
    service = Notifications(db, TrioClock(START))
    first = await service.mark_read(me, notification)
    assert first.read_at == to_ms(START)
    mock_clock.jump(60)
    assert (await service.mark_read(me, notification)).read_at == to_ms(START)


async def test_someone_elses_or_unknown_notification_is_not_found(
    db: Database, mock_clock: trio.testing.MockClock
) -> None:
    me, other = await make_user(db), await make_user(db)
    theirs = await add(db, other, 1_000)
    service = Notifications(db, TrioClock(START))
    for notification in (theirs, str(uuid.uuid4())):
        with pytest.raises(NotificationNotFound) as raised:
            await service.mark_read(me, notification)
        assert str(raised.value) == notification
    assert await service.unread_count(other) == 1


async def test_counts_and_read_all(db: Database, mock_clock: trio.testing.MockClock) -> None:
    me, other = await make_user(db), await make_user(db)
    for n in range(3):
        await add(db, me, 1_000 + n)
    await add(db, other, 1_000)
    service = Notifications(db, TrioClock(START))
    assert await service.unread_count(me) == 3
    assert await service.mark_all_read(me) == 3
    assert await service.mark_all_read(me) == 0
    assert (await service.unread_count(me), await service.unread_count(other)) == (0, 1)
