"""persistence/channel_points.py on SQLite and PostgreSQL: the reward counter of migration 0008."""

from __future__ import annotations

import uuid

from tests.conftest import stored_user as make_channel
from volthub.persistence import Database, Tx, migrate
from volthub.persistence import channel_points as repo
from volthub.persistence.channel_points import MAX_REWARDS_PER_CHANNEL, Reward


def reward(channel_id: str, number: int) -> Reward:
    return Reward(
        id=str(uuid.uuid4()),
        channel_id=channel_id,
        name=f"r{number}",
        cost=1,
        description="",
        icon_url=None,
        enabled=True,
        requires_moderator_approval=False,
        max_per_stream=None,
        max_per_user_per_stream=None,
        created_at=number,
        updated_at=number,
    )


async def test_the_counter_stops_at_the_cap_per_channel(db: Database) -> None:
    full, other = await make_channel(db), await make_channel(db)
    for _ in range(MAX_REWARDS_PER_CHANNEL):
        assert await db.write(lambda tx: repo.claim_reward_slot(tx, full))
    assert not await db.write(lambda tx: repo.claim_reward_slot(tx, full))
    assert await db.write(lambda tx: repo.claim_reward_slot(tx, other))


async def test_the_migration_counts_the_rewards_already_there(db: Database) -> None:
    """Rewards made before 0008 count: undo 0008, insert rows, migrate again."""
    channel = await make_channel(db)

    def undo_0008(tx: Tx) -> None:
        tx.execute("DROP TABLE channel_point_reward_counts")
        tx.execute("DELETE FROM schema_migrations WHERE version = 8")
        for number in range(MAX_REWARDS_PER_CHANNEL - 1):
            repo.insert_reward(tx, reward(channel, number))

    await db.write(undo_0008)
    assert await migrate(db) == ["0008_reward_cap"]
    assert await db.write(lambda tx: repo.claim_reward_slot(tx, channel))
    assert not await db.write(lambda tx: repo.claim_reward_slot(tx, channel))
