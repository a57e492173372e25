"""A user's notifications: newest first, read or unread.

Notifications are written by the services that raise them (a disabled webhook, ...) in
their own transactions; this service is the owner's side: list, count, mark read.
"""

from __future__ import annotations

import uuid
from typing import Any

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import notifications as repo
from volthub.persistence.notifications import Notification, NotificationPage

__all__ = ["Notification", "NotificationNotFound", "NotificationPage", "Notifications", "notify"]


class NotificationNotFound(LookupError):
    """No notification of this user has that id; `str(error)` is the id."""


class Notifications:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    async def page(
        self, user_id: str, limit: int, cursor: str | None, *, unread_only: bool = False
    ) -> NotificationPage:
        """Newest first; a cursor that does not decode raises InvalidCursor."""
        return await self._db.read(lambda tx: repo.list_for_user(tx, user_id, limit, cursor, unread_only))

    async def unread_count(self, user_id: str) -> int:
        return await self._db.read(lambda tx: repo.unread_count(tx, user_id))

    async def mark_read(self, user_id: str, notification_id: str) -> Notification:
        """Idempotent: the first read time stays. Another user's notification is not found."""
        now = self._now_ms()
        found = await self._db.write(lambda tx: repo.mark_read(tx, user_id, notification_id, now))
        if found is None:
            raise NotificationNotFound(notification_id)
        return found

    async def mark_all_read(self, user_id: str) -> int:
        """How many were unread."""
        now = self._now_ms()
        return await self._db.write(lambda tx: repo.mark_all_read(tx, user_id, now))

    def _now_ms(self) -> int:
        return to_ms(self._clock.now())


def notify(tx: Tx, user_id: str, type: str, title: str, message: str, data: dict[str, Any], now_ms: int) -> None:
    """Write one notification inside the caller's transaction (with the change it tells of)."""
    repo.create(
        tx,
        notification_id=str(uuid.uuid4()),
        user_id=user_id,
        type=type,
        title=title,
        message=message,
        data=data,
        now_ms=now_ms,
    )
