"""Channel-points rewards: the custom rewards of a channel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from volthub.persistence.database import Row, Tx
from volthub.persistence.records import Record, insert

_COLUMNS = (
    "id, channel_id, name, cost, description, icon_url, enabled, requires_moderator_approval,"
    " max_per_stream, max_per_user_per_stream, created_at, updated_at"
)
# A channel offers at most this many custom rewards; keeps every listing one small query.
MAX_REWARDS_PER_CHANNEL = 100


@dataclass(frozen=True)
class Reward(Record):
    id: str
    channel_id: str
    name: str
    cost: int
    description: str
    icon_url: str | None
    enabled: bool
    requires_moderator_approval: bool
    max_per_stream: int | None
    max_per_user_per_stream: int | None
    built_in_type: str | None = None
    created_at: int = 0
    updated_at: int = 0


def list_rewards(tx: Tx, channel_id: str) -> list[Reward]:
    rows = tx.execute(
        f"SELECT {_COLUMNS} FROM channel_point_rewards WHERE channel_id = ? ORDER BY created_at, id LIMIT ?",
        (channel_id, MAX_REWARDS_PER_CHANNEL),
    )
    return [Reward.from_row(row) for row in rows]


def count_rewards(tx: Tx, channel_id: str) -> int:
    return int(tx.scalar("SELECT COUNT(*) FROM channel_point_rewards WHERE channel_id = ?", (channel_id,)))


def claim_reward_slot(tx: Tx, channel_id: str) -> bool:
    """Count one more reward for the channel, unless it has MAX_REWARDS_PER_CHANNEL already.

    Call it in the transaction that inserts the reward. The guarded UPDATE is the cap
    (migration 0008): on PostgreSQL a concurrent create waits on the counter row and then
    re-checks the cap against the count the first one committed.
    """
    tx.execute(
        "INSERT INTO channel_point_reward_counts (channel_id, reward_count) VALUES (?, 0)"
        " ON CONFLICT (channel_id) DO NOTHING",
        (channel_id,),
    )
    row = tx.one(
        "UPDATE channel_point_reward_counts SET reward_count = reward_count + 1"
        " WHERE channel_id = ? AND reward_count < ? RETURNING reward_count",
        (channel_id, MAX_REWARDS_PER_CHANNEL),
    )
    return row is not None


def insert_reward(tx: Tx, reward: Reward) -> Reward:
    insert(tx, "channel_point_rewards", reward, leave_out=("built_in_type",))
    return reward


def get_reward(tx: Tx, channel_id: str, reward_id: str) -> Reward | None:
    row = tx.one(
        f"SELECT {_COLUMNS} FROM channel_point_rewards WHERE channel_id = ? AND id = ?", (channel_id, reward_id)
    )
    return Reward.from_row(row) if row else None


# --- redemptions (migration 0012) ----------------------------------------------------------


@dataclass(frozen=True)
class Redemption(Record):
    id: str
    channel_id: str
    stream_id: str
    reward_id: str
    reward_title: str
    reward_cost: int
    user_id: str
    user_input: str | None
    status: str
    redeemed_at: int
    resolved_at: int | None
    username: str = ""
    display_name: str = ""


_REDEMPTION = (
    "r.id, r.channel_id, r.stream_id, r.reward_id, r.reward_title, r.reward_cost, r.user_id, r.user_input,"
    " r.status, r.redeemed_at, r.resolved_at, u.username, u.display_name"
)


def insert_redemption(tx: Tx, redemption: Redemption) -> None:
    tx.execute(
        "INSERT INTO channel_point_redemptions (id, channel_id, stream_id, reward_id, reward_title, reward_cost,"
        " user_id, user_input, status, redeemed_at, resolved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
        (
            redemption.id,
            redemption.channel_id,
            redemption.stream_id,
            redemption.reward_id,
            redemption.reward_title,
            redemption.reward_cost,
            redemption.user_id,
            redemption.user_input,
            redemption.status,
            redemption.redeemed_at,
        ),
    )


def count_redemptions(tx: Tx, stream_id: str, reward_id: str, user_id: str | None = None) -> int:
    """Redemptions of a reward in a stream (of one viewer when given); rejected ones (refunded)
    do not count."""
    sql = (
        "SELECT COUNT(*) FROM channel_point_redemptions WHERE stream_id = ? AND reward_id = ? AND status <> 'rejected'"
    )
    params: tuple[Any, ...] = (stream_id, reward_id)
    if user_id is not None:
        sql += " AND user_id = ?"
        params += (user_id,)
    return int(tx.scalar(sql, params))


def get_redemption(tx: Tx, channel_id: str, redemption_id: str) -> Redemption | None:
    row = tx.one(
        f"SELECT {_REDEMPTION} FROM channel_point_redemptions r JOIN users u ON u.id = r.user_id"
        " WHERE r.channel_id = ? AND r.id = ?",
        (channel_id, redemption_id),
    )
    return Redemption.from_row(row) if row else None


def resolve_redemption(tx: Tx, redemption_id: str, status: str, now_ms: int) -> bool:
    """Move an unfulfilled redemption to `status`; False when it was resolved already (the
    guard makes fulfil/reject happen once, even when two owners' requests race)."""
    row = tx.one(
        "UPDATE channel_point_redemptions SET status = ?, resolved_at = ?"
        " WHERE id = ? AND status = 'unfulfilled' RETURNING id",
        (status, now_ms, redemption_id),
    )
    return row is not None


def redemptions_page(
    tx: Tx, stream_id: str, status: str | None, after: tuple[int, str] | None, limit: int
) -> list[Redemption]:
    """A stream's redemptions, oldest first (the order a streamer works through them)."""
    sql = (
        f"SELECT {_REDEMPTION} FROM channel_point_redemptions r JOIN users u ON u.id = r.user_id WHERE r.stream_id = ?"
    )
    params: tuple[Any, ...] = (stream_id,)
    if status is not None:
        sql += " AND r.status = ?"
        params += (status,)
    if after is not None:
        sql += " AND (r.redeemed_at > ? OR (r.redeemed_at = ? AND r.id > ?))"
        params += (after[0], after[0], after[1])
    sql += " ORDER BY r.redeemed_at, r.id LIMIT ?"
    return [Redemption.from_row(row) for row in tx.execute(sql, params + (limit,))]


# --- earning (migration 0012) --------------------------------------------------------------


def claim_watch_interval(tx: Tx, channel_id: str, interval: int) -> bool:
    """Take the right to credit `interval` for the channel; False when some process (this one
    or another on the same database) credited it, or a later one, already."""
    tx.execute(
        "INSERT INTO channel_point_watch_intervals (channel_id, last_interval) VALUES (?, ?)"
        " ON CONFLICT (channel_id) DO NOTHING",
        (channel_id, interval - 1),
    )
    row = tx.one(
        "UPDATE channel_point_watch_intervals SET last_interval = ?"
        " WHERE channel_id = ? AND last_interval < ? RETURNING channel_id",
        (interval, channel_id, interval),
    )
    return row is not None


def claim_follow_bonus(tx: Tx, channel_id: str, user_id: str, now_ms: int) -> bool:
    """True the first time ever for this follower and channel."""
    row = tx.one(
        "INSERT INTO channel_point_follow_bonuses (channel_id, user_id, paid_at) VALUES (?, ?, ?)"
        " ON CONFLICT (channel_id, user_id) DO NOTHING RETURNING channel_id",
        (channel_id, user_id, now_ms),
    )
    return row is not None


def points_leaderboard(tx: Tx, channel_id: str, limit: int) -> list[Row]:
    """Viewers of a channel by points held (`user_id`, `username`, `display_name`, `points`)."""
    return tx.execute(
        "SELECT a.holder AS user_id, u.username, u.display_name, a.balance AS points FROM ledger_accounts a"
        " JOIN users u ON u.id = a.holder WHERE a.currency = 'points' AND a.channel_id = ?"
        " AND a.holder_kind = 'user' AND a.balance > 0 ORDER BY a.balance DESC, u.username LIMIT ?",
        (channel_id, limit),
    )


def live_channels(tx: Tx) -> list[str]:
    """Channels with an open stream (migration 0020's partial index streams_open)."""
    rows = tx.execute("SELECT channel_id FROM streams WHERE ended_at IS NULL ORDER BY started_at, id")
    return [row["channel_id"] for row in rows]


def existing_users(tx: Tx, user_ids: list[str]) -> list[str]:
    if not user_ids:
        return []
    marks = ", ".join("?" for _ in user_ids)
    return [row["id"] for row in tx.execute(f"SELECT id FROM users WHERE id IN ({marks}) ORDER BY id", tuple(user_ids))]
