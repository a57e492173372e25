"""Subscriptions (migrations 0003 and 0011): rows, rosters, guarded ends.

A subscription is active while `ended_at IS NULL AND started_at <= now < expires_at`.
Ending one is a guarded transition (`UPDATE ... WHERE ended_at IS NULL ... RETURNING`), so
of two processes (or a subscribe and the expiry service) exactly one ends it and emits.
"""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import Row, Tx
from volthub.persistence.records import Record

_COLUMNS = (
    "s.id, s.channel_id, s.user_id, s.tier, s.is_gift, s.gifter_id, s.started_at, s.expires_at, s.months,"
    " s.ended_at, s.end_reason"
)
_PEOPLE = (
    ", u.username AS username, u.display_name AS display_name,"
    " g.username AS gifter_username, g.display_name AS gifter_display_name,"
    " c.username AS channel_username, c.display_name AS channel_display_name"
)
_JOINS = (
    " FROM subscriptions s JOIN users u ON u.id = s.user_id JOIN users c ON c.id = s.channel_id"
    " LEFT JOIN users g ON g.id = s.gifter_id"
)
TIERS = ("tier1", "tier2", "tier3")


@dataclass(frozen=True)
class Subscription(Record):
    id: str
    channel_id: str
    user_id: str
    tier: str
    is_gift: bool
    gifter_id: str | None
    started_at: int
    expires_at: int
    months: int
    ended_at: int | None
    end_reason: str | None
    username: str = ""
    display_name: str = ""
    gifter_username: str | None = None
    gifter_display_name: str | None = None
    channel_username: str = ""
    channel_display_name: str = ""


def insert(
    tx: Tx,
    *,
    subscription_id: str,
    channel_id: str,
    user_id: str,
    tier: str,
    started_at: int,
    expires_at: int,
    months: int,
    gifter_id: str | None = None,
) -> None:
    """Raises IntegrityError when the member already has an open subscription here."""
    tx.execute(
        "INSERT INTO subscriptions (id, channel_id, user_id, tier, is_gift, gifter_id, started_at, expires_at, months)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (subscription_id, channel_id, user_id, tier, gifter_id is not None, gifter_id, started_at, expires_at, months),
    )


def get(tx: Tx, subscription_id: str) -> Subscription | None:
    return Subscription.fetch_one(tx, f"SELECT {_COLUMNS}{_PEOPLE}{_JOINS} WHERE s.id = ?", (subscription_id,))


def open_of(tx: Tx, channel_id: str, user_id: str) -> Subscription | None:
    """The member's not-ended subscription here (it may be past its expiry, not yet ended)."""
    row = tx.one(
        f"SELECT {_COLUMNS}{_PEOPLE}{_JOINS} WHERE s.channel_id = ? AND s.user_id = ? AND s.ended_at IS NULL",
        (channel_id, user_id),
    )
    return None if row is None else Subscription.from_row(row)


def tenure_months(tx: Tx, channel_id: str, user_id: str) -> int:
    """Months subscribed so far (0: never)."""
    value = tx.scalar(
        "SELECT MAX(months) FROM subscriptions WHERE channel_id = ? AND user_id = ?", (channel_id, user_id)
    )
    return 0 if value is None else int(value)


def end(tx: Tx, subscription_id: str, reason: str, ended_at: int, *, due_by: int | None = None) -> Subscription | None:
    """The guarded end: the subscription if this call ended it, None if it had ended already
    (or, with `due_by`, is not yet expired at that time)."""
    sql = "UPDATE subscriptions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL"
    params: tuple[object, ...] = (ended_at, reason, subscription_id)
    if due_by is not None:
        sql += " AND expires_at <= ?"
        params += (due_by,)
    if not tx.execute(sql + " RETURNING id", params):
        return None
    return get(tx, subscription_id)


def due(tx: Tx, now_ms: int, limit: int) -> list[str]:
    """Open subscriptions whose expiry has come, earliest first."""
    rows = tx.execute(
        "SELECT id FROM subscriptions WHERE ended_at IS NULL AND expires_at <= ? ORDER BY expires_at, id LIMIT ?",
        (now_ms, limit),
    )
    return [row["id"] for row in rows]


def next_expiry(tx: Tx) -> int | None:
    value = tx.scalar("SELECT MIN(expires_at) FROM subscriptions WHERE ended_at IS NULL")
    return None if value is None else int(value)


def set_tier(tx: Tx, subscription_id: str, tier: str) -> bool:
    return bool(
        tx.execute(
            "UPDATE subscriptions SET tier = ? WHERE id = ? AND ended_at IS NULL RETURNING id", (tier, subscription_id)
        )
    )


_ACTIVE = "s.ended_at IS NULL AND s.started_at <= ? AND s.expires_at > ?"


def count_active(tx: Tx, channel_id: str, now_ms: int) -> int:
    return int(
        tx.scalar(
            f"SELECT COUNT(*) FROM subscriptions s WHERE s.channel_id = ? AND {_ACTIVE}", (channel_id, now_ms, now_ms)
        )
    )


def roster(tx: Tx, channel_id: str, now_ms: int, offset: int, limit: int) -> list[Subscription]:
    rows = tx.execute(
        f"SELECT {_COLUMNS}{_PEOPLE}{_JOINS} WHERE s.channel_id = ? AND {_ACTIVE}"
        " ORDER BY s.started_at, s.id LIMIT ? OFFSET ?",
        (channel_id, now_ms, now_ms, limit, offset),
    )
    return [Subscription.from_row(row) for row in rows]


def of_user(tx: Tx, user_id: str, now_ms: int, limit: int = 100) -> list[Subscription]:
    rows = tx.execute(
        f"SELECT {_COLUMNS}{_PEOPLE}{_JOINS} WHERE s.user_id = ? AND {_ACTIVE} ORDER BY s.started_at DESC, s.id LIMIT ?",
        (user_id, now_ms, now_ms, limit),
    )
    return [Subscription.from_row(row) for row in rows]


def gift_leaderboard(tx: Tx, channel_id: str, limit: int) -> list[Row]:
    """Gifters of a channel by subscriptions gifted, all time."""
    return tx.execute(
        "SELECT s.gifter_id AS user_id, g.username, g.display_name, COUNT(*) AS gifts FROM subscriptions s"
        " JOIN users g ON g.id = s.gifter_id WHERE s.channel_id = ? AND s.gifter_id IS NOT NULL"
        " GROUP BY s.gifter_id, g.username, g.display_name ORDER BY gifts DESC, g.username LIMIT ?",
        (channel_id, limit),
    )


def gift_candidates(tx: Tx, channel_id: str, gifter_id: str, now_ms: int, limit: int) -> list[str]:
    """Followers of the channel who could receive a gift: not the gifter, not the channel,
    not subscribed (an open subscription, even one about to be ended, counts)."""
    rows = tx.execute(
        "SELECT f.follower_id FROM follows f WHERE f.followed_id = ? AND f.follower_id <> ? AND f.follower_id <> ?"
        " AND NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.channel_id = f.followed_id"
        " AND s.user_id = f.follower_id AND s.ended_at IS NULL AND s.expires_at > ?)"
        " ORDER BY f.follower_id LIMIT ?",
        (channel_id, gifter_id, channel_id, now_ms, limit),
    )
    return [row["follower_id"] for row in rows]
