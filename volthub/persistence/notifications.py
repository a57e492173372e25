"""User notifications: newest first, read or unread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from volthub.persistence.database import Tx
from volthub.persistence.pagination import encode_cursor, newest_first
from volthub.persistence.records import Record


@dataclass(frozen=True)
class Notification(Record):
    id: str
    user_id: str
    type: str
    title: str
    message: str
    data: dict[str, Any]
    read_at: int | None
    created_at: int


@dataclass(frozen=True)
class NotificationPage:
    items: list[Notification]
    next_cursor: str | None


def create(
    tx: Tx,
    *,
    notification_id: str,
    user_id: str,
    type: str,
    title: str,
    message: str,
    data: dict[str, Any],
    now_ms: int,
) -> Notification:
    tx.execute(
        "INSERT INTO notifications (id, user_id, type, title, message, data, read_at, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
        (notification_id, user_id, type, title, message, orjson.dumps(data).decode(), now_ms),
    )
    return Notification(notification_id, user_id, type, title, message, dict(data), None, now_ms)


def list_for_user(tx: Tx, user_id: str, limit: int, cursor: str | None, unread_only: bool = False) -> NotificationPage:
    unread = " AND read_at IS NULL" if unread_only else ""
    select = f"SELECT {Notification.columns()} FROM notifications WHERE user_id = ?{unread}"
    rows, more = newest_first(tx, select, [user_id], limit, cursor or None, at="created_at", key="id")
    next_cursor = encode_cursor(int(rows[-1]["created_at"]), rows[-1]["id"]) if more else None
    return NotificationPage([Notification.from_row(row) for row in rows], next_cursor)


def unread_count(tx: Tx, user_id: str) -> int:
    return int(
        tx.scalar(
            "SELECT COUNT(*) AS n FROM notifications WHERE user_id = ? AND read_at IS NULL",
            (user_id,),
        )
    )


def mark_read(tx: Tx, user_id: str, notification_id: str, now_ms: int) -> Notification | None:
    """Mark one read (idempotent: the first read time is kept); None if it is not theirs."""
    tx.execute(
        "UPDATE notifications SET read_at = ? WHERE id = ? AND user_id = ? AND read_at IS NULL",
        (now_ms, notification_id, user_id),
    )
    row = tx.one(
        f"SELECT {Notification.columns()} FROM notifications WHERE id = ? AND user_id = ?",
        (notification_id, user_id),
    )
    return Notification.from_row(row) if row else None


def mark_all_read(tx: Tx, user_id: str, now_ms: int) -> int:
    rows = tx.execute(
        "UPDATE notifications SET read_at = ? WHERE user_id = ? AND read_at IS NULL RETURNING id",
        (now_ms, user_id),
    )
    return len(rows)
