"""Chat state: settings, messages, bans and timeouts; channel roles and subscriptions as
chat reads them (badges, exemptions; subscriptions are written by persistence.subscriptions). Plain functions over a `Tx`, portable SQL.

Returns plain values and rows: the records chat decides over (`ChatSettings`, `Standing`)
belong to the chat component (volthub.hub.components.chat_rules), which this layer may not import.
The channel's write lock is `persistence.channels.lock`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from volthub.persistence.database import Row, Tx
from volthub.persistence.records import Record

ROLES = ("moderator", "vip")


# --- settings and the message sequence ------------------------------------------------------

_SETTINGS_COLUMNS = ("slow_mode", "slow_mode_seconds", "followers_only", "subscribers_only", "emote_only")
_DEFAULT_SETTINGS: Row = {
    "slow_mode": False,
    "slow_mode_seconds": 0,
    "followers_only": False,
    "subscribers_only": False,
    "emote_only": False,
}


def get_settings(tx: Tx, channel_id: str) -> Row:
    """The chat modes' column values; a channel that never chatted has the defaults.

    Plain values: the chat component's `ChatSettings.from_row` makes the record.
    """
    row = tx.one(f"SELECT {', '.join(_SETTINGS_COLUMNS)} FROM chat_settings WHERE channel_id = ?", (channel_id,))
    if row is None:
        return dict(_DEFAULT_SETTINGS)
    return {name: bool(row[name]) if name != "slow_mode_seconds" else int(row[name]) for name in _SETTINGS_COLUMNS}


def _ensure_settings(tx: Tx, channel_id: str, now_ms: int) -> None:
    """Create the channel's row when missing (the channel's user must exist)."""
    tx.execute(
        "INSERT INTO chat_settings (channel_id, updated_at) VALUES (?, ?) ON CONFLICT (channel_id) DO NOTHING",
        (channel_id, now_ms),
    )


_NEXT_SEQ = "UPDATE chat_settings SET message_seq = message_seq + 1 WHERE channel_id = ? RETURNING message_seq"


def next_message_seq(tx: Tx, channel_id: str, now_ms: int) -> int:
    """Move the channel's message sequence on; the new value numbers the next message.

    Called with the channel's lock held (persistence.channels.lock), so numbers never
    repeat; timestamps can tie, the sequence orders messages within the channel.
    """
    row = tx.one(_NEXT_SEQ, (channel_id,))
    if row is None:
        _ensure_settings(tx, channel_id, now_ms)
        row = tx.one(_NEXT_SEQ, (channel_id,))
    assert row is not None
    return int(row["message_seq"])


def save_settings(tx: Tx, channel_id: str, values: Row, now_ms: int) -> None:
    """Store the chat modes (`values` keyed by column, as `get_settings` returns them)."""
    _ensure_settings(tx, channel_id, now_ms)
    tx.execute(
        "UPDATE chat_settings SET slow_mode = ?, slow_mode_seconds = ?, followers_only = ?,"
        " subscribers_only = ?, emote_only = ?, version = version + 1, updated_at = ? WHERE channel_id = ?",
        (*(values[name] for name in _SETTINGS_COLUMNS), now_ms, channel_id),
    )


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
FROM users u WHERE {where}
"""


def standings(tx: Tx, channel_id: str, user_ids: Iterable[str], now_ms: int) -> dict[str, Row]:
    """Roles, follow, subscription and ban of each user in one query; unknown ids are absent.

    Each value holds user_id, username, display_name, avatar_url, is_broadcaster,
    is_moderator, is_vip, is_follower, subscriber_months (None: not subscribed), banned and
    timeout_ends_at (epoch ms, None: no timeout): the chat component's `Standing.from_row`.
    """
    return standings_and_named(tx, channel_id, user_ids, [], now_ms)[0]


def standings_and_named(
    tx: Tx, channel_id: str, user_ids: Iterable[str], usernames: Iterable[str], now_ms: int
) -> tuple[dict[str, Row], dict[str, Row]]:
    """`standings` of `user_ids`, and those of the users named `usernames` (any case),
    keyed by lower-cased username, in one query: a chat message's sender and the people it
    mentions are one read."""
    ids = sorted(set(user_ids))
    names = sorted({name.lower() for name in usernames})
    where = [f"u.id IN ({', '.join('?' for _ in ids)})"] if ids else []
    where += [f"u.username_lower IN ({', '.join('?' for _ in names)})"] if names else []
    if not where:
        return {}, {}
    params = (channel_id, now_ms, channel_id, now_ms, channel_id, channel_id, now_ms, now_ms, channel_id, now_ms)
    rows = tx.execute(_STANDING_SQL.format(where=" OR ".join(where)), (*params, *ids, *names))
    found = [_standing(channel_id, row) for row in rows]
    wanted_ids, wanted_names = set(ids), set(names)
    return (
        {row["user_id"]: row for row in found if row["user_id"] in wanted_ids},
        {row["username"].lower(): row for row in found if row["username"].lower() in wanted_names},
    )


def standing(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> Row | None:
    return standings(tx, channel_id, [user_id], now_ms).get(user_id)


def _standing(channel_id: str, row: Row) -> Row:
    ban = None if row["ban"] is None else int(row["ban"])
    months = row["subscriber_months"]
    return {
        "user_id": row["id"],
        "username": row["username"],
        "display_name": row["display_name"],
        "avatar_url": row["avatar_url"],
        "is_broadcaster": row["id"] == channel_id,
        "is_moderator": bool(row["is_moderator"]),
        "is_vip": bool(row["is_vip"]),
        "is_follower": bool(row["is_follower"]),
        "subscriber_months": None if months is None else int(months),
        "banned": ban == -1,
        "timeout_ends_at": ban if ban is not None and ban != -1 else None,
    }


# --- messages --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoredMessage(Record):
    id: str
    channel_id: str
    user_id: str
    payload: dict[str, Any]
    created_at: int
    deleted_at: int | None


_INSERT_MESSAGE = "INSERT INTO chat_messages (id, channel_id, seq, user_id, is_system, payload, created_at)"


def insert_message(
    tx: Tx,
    *,
    message_id: str,
    channel_id: str,
    user_id: str,
    is_system: bool,
    payload: dict[str, Any],
    now_ms: int,
) -> int:
    """Store a message under the channel's next number (`next_message_seq`, so with the
    channel's lock held); returns the number.

    On PostgreSQL the number and the row are one statement, one round trip; SQLite (in
    the process, no round trips) has no data-modifying WITH, so it takes two.
    """
    row = (message_id, channel_id, user_id, is_system, orjson.dumps(payload).decode(), now_ms)
    if tx.dialect == "postgresql":
        numbered = tx.scalar(
            f"WITH numbered AS ({_NEXT_SEQ}) {_INSERT_MESSAGE}"
            " SELECT ?, ?, message_seq, ?, ?, ?, ? FROM numbered RETURNING seq",
            (channel_id, *row),
        )
        if numbered is not None:
            return int(numbered)
        _ensure_settings(tx, channel_id, now_ms)  # the channel's first message: no settings row yet
    seq = next_message_seq(tx, channel_id, now_ms)
    tx.execute(f"{_INSERT_MESSAGE} VALUES (?, ?, ?, ?, ?, ?, ?)", (*row[:2], seq, *row[2:]))
    return seq


def get_message(tx: Tx, channel_id: str, message_id: str) -> StoredMessage | None:
    return StoredMessage.fetch_one(
        tx,
        "SELECT id, channel_id, user_id, payload, created_at, deleted_at FROM chat_messages"
        " WHERE id = ? AND channel_id = ?",
        (message_id, channel_id),
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


def prune_messages(tx: Tx, channel_id: str, up_to_seq: int, before_ms: int) -> int:
    """Drop the channel's messages numbered `up_to_seq` or lower and created before
    `before_ms` (the bounded history); returns how many went."""
    rows = tx.execute(
        "DELETE FROM chat_messages WHERE channel_id = ? AND seq <= ? AND created_at < ? RETURNING id",
        (channel_id, up_to_seq, before_ms),
    )
    return len(rows)


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
class Ban(Record):
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
    return Ban.fetch_one(
        tx,
        "SELECT channel_id, user_id, moderator_id, reason, created_at, expires_at FROM chat_bans"
        " WHERE channel_id = ? AND user_id = ? AND (expires_at IS NULL OR expires_at > ?)",
        (channel_id, user_id, now_ms),
    )


def remove_ban(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> Ban | None:
    """Lift a ban or timeout; returns it when one was in force (an expired row just goes)."""
    found = active_ban(tx, channel_id, user_id, now_ms)
    tx.execute("DELETE FROM chat_bans WHERE channel_id = ? AND user_id = ?", (channel_id, user_id))
    return found


# --- channel roles (written by the channel actor's roles component) ----------------


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


def expire_roles(tx: Tx, channel_id: str, now_ms: int) -> list[Row]:
    """The guarded end of the channel's grants expired by `now_ms`: each row comes back to
    the one transaction that deleted it ({user_id, role, expires_at})."""
    return tx.execute(
        "DELETE FROM channel_roles WHERE channel_id = ? AND expires_at IS NOT NULL AND expires_at <= ?"
        " RETURNING user_id, role, expires_at",
        (channel_id, now_ms),
    )


def channels_with_due_roles(tx: Tx, now_ms: int, limit: int) -> list[str]:
    rows = tx.execute(
        "SELECT DISTINCT channel_id FROM channel_roles WHERE expires_at IS NOT NULL AND expires_at <= ?"
        " ORDER BY channel_id LIMIT ?",
        (now_ms, limit),
    )
    return [row["channel_id"] for row in rows]


def next_role_expiry(tx: Tx) -> int | None:
    """The earliest expiry of any grant (index channel_roles_by_expiry)."""
    row = tx.one("SELECT MIN(expires_at) AS due FROM channel_roles WHERE expires_at IS NOT NULL")
    return None if row is None or row["due"] is None else int(row["due"])


def roles_of(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> set[str]:
    rows = tx.execute(
        "SELECT role FROM channel_roles WHERE channel_id = ? AND user_id = ?"
        " AND (expires_at IS NULL OR expires_at > ?)",
        (channel_id, user_id, now_ms),
    )
    return {row["role"] for row in rows}
