"""Channel-points rewards (spec §2.8): the custom rewards of a channel."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from volthub.persistence.database import Row, Tx

_COLUMNS = (
    "id, channel_id, name, cost, description, icon_url, enabled, requires_moderator_approval,"
    " max_per_stream, max_per_user_per_stream, created_at, updated_at"
)
# A channel offers at most this many custom rewards; keeps every listing one small query.
MAX_REWARDS_PER_CHANNEL = 100


@dataclass(frozen=True)
class Reward:
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

    @classmethod
    def from_row(cls, row: Row) -> Reward:
        return cls(
            id=row["id"],
            channel_id=row["channel_id"],
            name=row["name"],
            cost=int(row["cost"]),
            description=row["description"],
            icon_url=row["icon_url"],
            enabled=bool(row["enabled"]),
            requires_moderator_approval=bool(row["requires_moderator_approval"]),
            max_per_stream=_opt_int(row["max_per_stream"]),
            max_per_user_per_stream=_opt_int(row["max_per_user_per_stream"]),
            created_at=int(row["created_at"]),
            updated_at=int(row["updated_at"]),
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


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
    tx.execute(
        f"INSERT INTO channel_point_rewards ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            reward.id,
            reward.channel_id,
            reward.name,
            reward.cost,
            reward.description,
            reward.icon_url,
            reward.enabled,
            reward.requires_moderator_approval,
            reward.max_per_stream,
            reward.max_per_user_per_stream,
            reward.created_at,
            reward.updated_at,
        ),
    )
    return reward
