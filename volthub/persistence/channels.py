"""The `channels` row: the per-channel write lock and the version of what actors cache.

Every write to a channel's live state starts with `lock`: on PostgreSQL the
row update holds the row lock until commit, so actors of one channel in different
processes take turns; SQLite transactions are already serial (BEGIN IMMEDIATE). The row
is created with the user (`users.create_user`).
"""

from __future__ import annotations

from volthub.persistence.database import Tx


def version(tx: Tx, channel_id: str) -> int | None:
    """The channel's version; None when no such channel exists."""
    value = tx.scalar("SELECT version FROM channels WHERE id = ?", (channel_id,))
    return None if value is None else int(value)


def lock(tx: Tx, channel_id: str) -> int | None:
    """Take the channel's write lock for this transaction; returns its version (None:
    no such channel). A no-op update: portable, where `SELECT ... FOR UPDATE` is not."""
    value = tx.scalar("UPDATE channels SET version = version WHERE id = ? RETURNING version", (channel_id,))
    return None if value is None else int(value)


def bump(tx: Tx, channel_id: str) -> int:
    """Move the version on (cached state changed); returns the new one. Lock first."""
    value = tx.scalar("UPDATE channels SET version = version + 1 WHERE id = ? RETURNING version", (channel_id,))
    if value is None:
        raise LookupError(f"channel {channel_id} has no channels row")
    return int(value)
