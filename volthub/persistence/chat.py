"""Chat state: settings, messages, bans and timeouts; channel roles and subscriptions as
chat reads them (badges, exemptions). Plain functions over a `Tx`, portable SQL."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from volthub.persistence.database import Row, Tx

ROLES = ("moderator", "vip")


@dataclass(frozen=True)
class ChatSettings:
    slow_mode: bool = False
    slow_mode_seconds: int = 0
    followers_only: bool = False
    subscribers_only: bool = False
    emote_only: bool = False

    def as_api(self) -> dict[str, Any]:
        return {
            "slowMode": self.slow_mode,
            "slowModeSeconds": self.slow_mode_seconds,
            "followersOnly": self.followers_only,
            "subscribersOnly": self.subscribers_only,
            "emoteOnly": self.emote_only,
        }


@dataclass(frozen=True)
class Standing:
    """One user in one channel, as of one moment."""

    user_id: str
    username: str
    display_name: str
    is_broadcaster: bool = False
    is_moderator: bool = False
    is_vip: bool = False
    is_follower: bool = False
    subscriber_months: int | None = None  # None: not an active subscriber
    banned: bool = False
    timeout_ends_at: int | None = None  # epoch ms of an active timeout's end

    @property
    def is_subscriber(self) -> bool:
        return self.subscriber_months is not None

    @property
    def exempt_from_modes(self) -> bool:
        return self.is_broadcaster or self.is_moderator


# --- settings and the per-channel lock -------------------------------------------------------


def _settings(row: Row) -> ChatSettings:
    return ChatSettings(
        slow_mode=bool(row["slow_mode"]),
        slow_mode_seconds=int(row["slow_mode_seconds"]),
        followers_only=bool(row["followers_only"]),
        subscribers_only=bool(row["subscribers_only"]),
        emote_only=bool(row["emote_only"]),
    )


_SETTINGS_COLUMNS = "slow_mode, slow_mode_seconds, followers_only, subscribers_only, emote_only, version"


def get_settings(tx: Tx, channel_id: str) -> tuple[ChatSettings, int]:
    """(settings, version); a channel that never chatted has the defaults at version 0."""
    row = tx.one(f"SELECT {_SETTINGS_COLUMNS} FROM chat_settings WHERE channel_id = ?", (channel_id,))
    return (_settings(row), int(row["version"])) if row else (ChatSettings(), 0)


def ensure_settings(tx: Tx, channel_id: str, now_ms: int) -> tuple[ChatSettings, int]:
    """Create the channel's row when missing (the channel's user must exist)."""
    tx.execute(
        "INSERT INTO chat_settings (channel_id, updated_at) VALUES (?, ?) ON CONFLICT (channel_id) DO NOTHING",
        (channel_id, now_ms),
    )
    return get_settings(tx, channel_id)


def lock_channel(tx: Tx, channel_id: str, now_ms: int, *, next_message: bool = False) -> tuple[int, int]:
    """Take the channel's write lock for this transaction; returns (version, message seq).

    The row update is the lock on PostgreSQL (row lock until commit), so writers in
    different processes take turns; SQLite transactions are already serial. The row is
    created on a channel's first chat write (its user must exist). With `next_message`
    the sequence moves on and the new value numbers the message.
    """
    sql = "UPDATE chat_settings SET message_seq = message_seq + ? WHERE channel_id = ? RETURNING version, message_seq"
    params = (1 if next_message else 0, channel_id)
    row = tx.one(sql, params)
    if row is None:
        ensure_settings(tx, channel_id, now_ms)
        row = tx.one(sql, params)
    assert row is not None
    return int(row["version"]), int(row["message_seq"])


def save_settings(tx: Tx, channel_id: str, settings: ChatSettings, now_ms: int) -> int:
    """Store the settings and move the version on; returns the new version."""
    row = tx.one(
        "UPDATE chat_settings SET slow_mode = ?, slow_mode_seconds = ?, followers_only = ?,"
        " subscribers_only = ?, emote_only = ?, version = version + 1, updated_at = ?"
        " WHERE channel_id = ? RETURNING version",
        (
            settings.slow_mode,
            settings.slow_mode_seconds,
            settings.followers_only,
            settings.subscribers_only,
            settings.emote_only,
            now_ms,
            channel_id,
        ),
    )
    if row is None:
        raise LookupError(f"chat_settings row missing for {channel_id}")
    return int(row["version"])


# --- standing: who someone is in a channel ---------------------------------------------------

_STANDING_SQL = """
SELECT u.id, u.username, u.display_name, u.avatar_url,
  EXISTS (SELECT 1 FROM channel_roles r WHERE r.channel_id = ? AND r.user_id = u.id
          AND r.role = 'moderator' AND (r.expires_at IS NULL OR r.expires_at > ?)) AS is_moderator,
  EXISTS (SELECT 1 FROM channel_roles r WHERE r.channel_id = ? AND r.user_id = u.id
          AND r.role = 'vip' AND (r.expires_at IS NULL OR r.expires_at > ?)) AS is_vip,
  EXISTS (SELECT 1 FROM follows f WHERE f.followed_id = ? AND f.follower_id = u.id) AS is_follower,
  (SELECT MAX(s.months) FROM subscriptions s WHERE s.channel_id = ? AND s.user_id = u.id
          AND s.ended_at IS NULL AND s.started_at <= ? AND s.expires_at > ?) AS subscriber_months,
  (SELECT COALESCE(b.expires_at, -1) FROM chat_bans b WHERE b.channel_id = ? AND b.user_id = u.id
          AND (b.expires_at IS NULL OR b.expires_at > ?)) AS ban
FROM users u WHERE u.id IN ({marks})
"""


@dataclass(frozen=True)
class Member:
    standing: Standing
    avatar_url: str | None


def standings(tx: Tx, channel_id: str, user_ids: Iterable[str], now_ms: int) -> dict[str, Member]:
    """Roles, follow, subscription and ban of each user in one query; unknown ids are absent."""
    ids = sorted(set(user_ids))
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    params = (channel_id, now_ms, channel_id, now_ms, channel_id, channel_id, now_ms, now_ms, channel_id, now_ms)
    rows = tx.execute(_STANDING_SQL.format(marks=marks), (*params, *ids))
    return {row["id"]: _member(channel_id, row) for row in rows}


def standing(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> Standing | None:
    found = standings(tx, channel_id, [user_id], now_ms).get(user_id)
    return found.standing if found else None


def _member(channel_id: str, row: Row) -> Member:
    ban = row["ban"]
    months = row["subscriber_months"]
    standing = Standing(
        user_id=row["id"],
        username=row["username"],
        display_name=row["display_name"],
        is_broadcaster=row["id"] == channel_id,
        is_moderator=bool(row["is_moderator"]),
        is_vip=bool(row["is_vip"]),
        is_follower=bool(row["is_follower"]),
        subscriber_months=None if months is None else int(months),
        banned=ban is not None and int(ban) == -1,
        timeout_ends_at=int(ban) if ban is not None and int(ban) != -1 else None,
    )
    return Member(standing, row["avatar_url"])


# --- messages --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredMessage:
    id: str
    channel_id: str
    user_id: str
    payload: dict[str, Any]
    created_at: int
    deleted_at: int | None


def insert_message(
    tx: Tx,
    *,
    message_id: str,
    channel_id: str,
    seq: int,
    user_id: str,
    is_system: bool,
    payload: dict[str, Any],
    now_ms: int,
) -> None:
    tx.execute(
        "INSERT INTO chat_messages (id, channel_id, seq, user_id, is_system, payload, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (message_id, channel_id, seq, user_id, is_system, orjson.dumps(payload).decode(), now_ms),
    )


def get_message(tx: Tx, channel_id: str, message_id: str) -> StoredMessage | None:
    row = tx.one(
        "SELECT id, channel_id, user_id, payload, created_at, deleted_at FROM chat_messages"
        " WHERE id = ? AND channel_id = ?",
        (message_id, channel_id),
    )
    if row is None:
        return None
    return StoredMessage(
        id=row["id"],
        channel_id=row["channel_id"],
        user_id=row["user_id"],
        payload=orjson.loads(row["payload"]),
        created_at=int(row["created_at"]),
        deleted_at=None if row["deleted_at"] is None else int(row["deleted_at"]),
    )


def delete_message(tx: Tx, channel_id: str, message_id: str, moderator_id: str, now_ms: int) -> bool:
    rows = tx.execute(
        "UPDATE chat_messages SET deleted_at = ?, deleted_by = ?"
        " WHERE id = ? AND channel_id = ? AND deleted_at IS NULL RETURNING id",
        (now_ms, moderator_id, message_id, channel_id),
    )
    return bool(rows)


def last_message_at(tx: Tx, channel_id: str, user_id: str) -> int | None:
    """When the user last chatted here (system/card messages do not count): the slow-mode clock."""
    value = tx.scalar(
        "SELECT MAX(created_at) AS at FROM chat_messages WHERE channel_id = ? AND user_id = ? AND is_system = ?",
        (channel_id, user_id, False),
    )
    return None if value is None else int(value)


def history(tx: Tx, channel_id: str, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` messages not deleted, oldest first."""
    rows = tx.execute(
        "SELECT payload FROM chat_messages WHERE channel_id = ? AND deleted_at IS NULL ORDER BY seq DESC LIMIT ?",
        (channel_id, limit),
    )
    return [orjson.loads(row["payload"]) for row in reversed(rows)]


def activity(tx: Tx, channel_id: str, since_ms: int) -> tuple[int, int]:
    """(messages, distinct chatters) since `since_ms`; card/system messages excluded."""
    row = tx.one(
        "SELECT COUNT(*) AS messages, COUNT(DISTINCT user_id) AS chatters FROM chat_messages"
        " WHERE channel_id = ? AND created_at > ? AND is_system = ?",
        (channel_id, since_ms, False),
    )
    assert row is not None
    return int(row["messages"]), int(row["chatters"])


# --- bans and timeouts -----------------------------------------------------------------------


@dataclass(frozen=True)
class Ban:
    channel_id: str
    user_id: str
    moderator_id: str | None
    reason: str | None
    created_at: int
    expires_at: int | None  # None: permanent

    @property
    def is_permanent(self) -> bool:
        return self.expires_at is None


def set_ban(
    tx: Tx,
    *,
    channel_id: str,
    user_id: str,
    moderator_id: str | None,
    reason: str | None,
    now_ms: int,
    expires_at: int | None,
) -> Ban:
    """Ban (expires_at None) or time out; replaces whatever was there."""
    tx.execute(
        "INSERT INTO chat_bans (channel_id, user_id, moderator_id, reason, created_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (channel_id, user_id) DO UPDATE SET"
        " moderator_id = excluded.moderator_id, reason = excluded.reason,"
        " created_at = excluded.created_at, expires_at = excluded.expires_at",
        (channel_id, user_id, moderator_id, reason, now_ms, expires_at),
    )
    return Ban(channel_id, user_id, moderator_id, reason, now_ms, expires_at)


def active_ban(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> Ban | None:
    row = tx.one(
        "SELECT channel_id, user_id, moderator_id, reason, created_at, expires_at FROM chat_bans"
        " WHERE channel_id = ? AND user_id = ? AND (expires_at IS NULL OR expires_at > ?)",
        (channel_id, user_id, now_ms),
    )
    if row is None:
        return None
    expires = row["expires_at"]
    return Ban(
        row["channel_id"],
        row["user_id"],
        row["moderator_id"],
        row["reason"],
        int(row["created_at"]),
        None if expires is None else int(expires),
    )


def remove_ban(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> Ban | None:
    """Lift a ban or timeout; returns it when one was in force (an expired row just goes)."""
    found = active_ban(tx, channel_id, user_id, now_ms)
    tx.execute("DELETE FROM chat_bans WHERE channel_id = ? AND user_id = ?", (channel_id, user_id))
    return found


# --- channel roles (spec §4.10; granted through routes of a later feature) ----------------------


def grant_role(tx: Tx, channel_id: str, user_id: str, role: str, now_ms: int, expires_at: int | None = None) -> None:
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    tx.execute(
        "INSERT INTO channel_roles (channel_id, user_id, role, granted_at, expires_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (channel_id, user_id, role) DO UPDATE SET granted_at = excluded.granted_at,"
        " expires_at = excluded.expires_at",
        (channel_id, user_id, role, now_ms, expires_at),
    )


def revoke_role(tx: Tx, channel_id: str, user_id: str, role: str) -> bool:
    rows = tx.execute(
        "DELETE FROM channel_roles WHERE channel_id = ? AND user_id = ? AND role = ? RETURNING role",
        (channel_id, user_id, role),
    )
    return bool(rows)


def roles_of(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> set[str]:
    rows = tx.execute(
        "SELECT role FROM channel_roles WHERE channel_id = ? AND user_id = ?"
        " AND (expires_at IS NULL OR expires_at > ?)",
        (channel_id, user_id, now_ms),
    )
    return {row["role"] for row in rows}


# --- subscriptions (spec §4.9; created through routes of a later feature) ----------------------


@dataclass(frozen=True)
class Subscription:
    id: str
    channel_id: str
    user_id: str
    tier: str
    is_gift: bool
    gifter_id: str | None
    started_at: int
    expires_at: int
    months: int


def add_subscription(
    tx: Tx,
    *,
    subscription_id: str,
    channel_id: str,
    user_id: str,
    tier: str,
    started_at: int,
    expires_at: int,
    months: int = 1,
    is_gift: bool = False,
    gifter_id: str | None = None,
) -> Subscription:
    tx.execute(
        "INSERT INTO subscriptions (id, channel_id, user_id, tier, is_gift, gifter_id, started_at,"
        " expires_at, months) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (subscription_id, channel_id, user_id, tier, is_gift, gifter_id, started_at, expires_at, months),
    )
    return Subscription(subscription_id, channel_id, user_id, tier, is_gift, gifter_id, started_at, expires_at, months)


def active_subscription(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> Subscription | None:
    row = tx.one(
        "SELECT id, channel_id, user_id, tier, is_gift, gifter_id, started_at, expires_at, months"
        " FROM subscriptions WHERE channel_id = ? AND user_id = ? AND ended_at IS NULL"
        " AND started_at <= ? AND expires_at > ? ORDER BY expires_at DESC LIMIT 1",
        (channel_id, user_id, now_ms, now_ms),
    )
    if row is None:
        return None
    return Subscription(
        row["id"],
        row["channel_id"],
        row["user_id"],
        row["tier"],
        bool(row["is_gift"]),
        row["gifter_id"],
        int(row["started_at"]),
        int(row["expires_at"]),
        int(row["months"]),
    )
