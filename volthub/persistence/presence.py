"""Presence rows of the processes of a PostgreSQL deployment."""

from __future__ import annotations

from collections.abc import Iterable

import orjson

from volthub.persistence.database import Tx


def replace_mine(
    tx: Tx, process_id: str, channels: Iterable[tuple[str, list[str], int]], now_ms: int, stale_before_ms: int
) -> None:
    """This process's rows become `channels` ((channel, user ids, anonymous) each); rows of
    processes silent since `stale_before_ms` go."""
    tx.execute("DELETE FROM presence WHERE process_id = ? OR updated_at < ?", (process_id, stale_before_ms))
    rows = [
        (process_id, channel, orjson.dumps(users).decode(), anonymous, now_ms) for channel, users, anonymous in channels
    ]
    if rows:
        tx.execute_many(
            "INSERT INTO presence (process_id, channel_id, user_ids, anonymous, updated_at) VALUES (?, ?, ?, ?, ?)",
            rows,
        )


def delete_mine(tx: Tx, process_id: str) -> None:
    tx.execute("DELETE FROM presence WHERE process_id = ?", (process_id,))


def others(tx: Tx, channel_id: str, process_id: str, fresh_after_ms: int) -> tuple[list[str], int]:
    """(user ids, anonymous count) connected to `channel_id` through the other live processes."""
    users: list[str] = []
    anonymous = 0
    for row in tx.execute(
        "SELECT user_ids, anonymous FROM presence WHERE channel_id = ? AND process_id <> ? AND updated_at >= ?",
        (channel_id, process_id, fresh_after_ms),
    ):
        users.extend(orjson.loads(row["user_ids"]))
        anonymous += int(row["anonymous"])
    return users, anonymous
