"""Channel-points rewards: what a channel offers (spec §2.8), in its REST and socket shapes.

Every channel has the built-in rewards below (``builtInType`` set, not stored) besides the
custom ones it created. The REST shape has every field of §2.8; the socket shape
(``channel:rewards``) leaves out the fields marked "REST only".
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx, ledger
from volthub.persistence import channel_points as repo
from volthub.persistence.channel_points import MAX_REWARDS_PER_CHANNEL, Reward
from volthub.services.channels import ChannelNotFound, channel_by_id

__all__ = [
    "BUILT_IN",
    "MAX_REWARDS_PER_CHANNEL",
    "ChannelNotFound",
    "ChannelPoints",
    "Reward",
    "TooManyRewards",
    "rest_shape",
    "socket_shape",
]

BUILT_IN: tuple[Reward, ...] = (
    Reward(
        id="builtin-first",
        channel_id="",
        name="First",
        cost=100,
        description="Be the first viewer to redeem this during a stream.",
        icon_url=None,
        enabled=True,
        requires_moderator_approval=False,
        max_per_stream=1,
        max_per_user_per_stream=1,
        built_in_type="first",
    ),
)


class TooManyRewards(Exception):
    """The channel has MAX_REWARDS_PER_CHANNEL custom rewards already."""

    def __init__(self) -> None:
        super().__init__(f"a channel has at most {MAX_REWARDS_PER_CHANNEL} rewards")


class ChannelPoints:
    def __init__(self, database: Database, clock: Clock) -> None:
        self._db = database
        self._clock = clock

    async def rewards(self, channel_id: str, *, built_in: bool = True) -> list[Reward]:
        """The channel's rewards: built-in ones first (when asked for), then its own.

        ChannelNotFound when no user has that id.
        """

        def read(tx: Tx) -> list[Reward]:
            channel_by_id(tx, channel_id)
            return repo.list_rewards(tx, channel_id)

        custom = await self._db.read(read)
        fixed = [replace(reward, channel_id=channel_id) for reward in BUILT_IN] if built_in else []
        return fixed + custom

    async def create(self, channel_id: str, fields: dict[str, Any]) -> Reward:
        now = to_ms(self._clock.now())
        reward = Reward(
            id=str(uuid.uuid4()),
            channel_id=channel_id,
            name=fields["name"],
            cost=fields["cost"],
            description=fields.get("description") or "",
            icon_url=fields.get("iconUrl"),
            enabled=fields.get("enabled", True),
            requires_moderator_approval=fields.get("requiresModeratorApproval", False),
            max_per_stream=fields.get("maxPerStream"),
            max_per_user_per_stream=fields.get("maxPerUserPerStream"),
            created_at=now,
            updated_at=now,
        )

        def insert(tx: Tx) -> Reward:
            if not repo.claim_reward_slot(tx, channel_id):
                raise TooManyRewards()
            return repo.insert_reward(tx, reward)

        return await self._db.write(insert)


def points_account(channel_id: str, user_id: str) -> str:
    """The viewer's channel-points account in the ledger (the one prediction bets use)."""
    return ledger.user_account("points", user_id, channel_id)


async def balance(database: Database, channel_id: str, user_id: str) -> int:
    def read(tx: Tx) -> int:
        channel_by_id(tx, channel_id)
        return ledger.balance(tx, points_account(channel_id, user_id))

    return await database.read(read)


async def leaderboard(database: Database, channel_id: str, limit: int) -> list[dict[str, Any]]:
    """Viewers of the channel by points held."""

    def read(tx: Tx) -> list[dict[str, Any]]:
        channel_by_id(tx, channel_id)
        rows = tx.execute(
            "SELECT a.holder, a.balance, u.username, u.display_name FROM ledger_accounts a"
            " JOIN users u ON u.id = a.holder WHERE a.currency = 'points' AND a.channel_id = ?"
            " AND a.holder_kind = 'user' AND a.balance > 0 ORDER BY a.balance DESC, u.username LIMIT ?",
            (channel_id, limit),
        )
        return [
            {
                "rank": rank,
                "userId": row["holder"],
                "username": row["username"],
                "displayName": row["display_name"],
                "points": int(row["balance"]),
            }
            for rank, row in enumerate(rows, start=1)
        ]

    return await database.read(read)


def socket_shape(reward: Reward) -> dict[str, Any]:
    return {
        "id": reward.id,
        "name": reward.name,
        "cost": reward.cost,
        "description": reward.description,
        "iconUrl": reward.icon_url,
        "enabled": reward.enabled,
        "builtInType": reward.built_in_type,
    }


def rest_shape(reward: Reward) -> dict[str, Any]:
    return {
        **socket_shape(reward),
        "requiresModeratorApproval": reward.requires_moderator_approval,
        "maxPerStream": reward.max_per_stream,
        "maxPerUserPerStream": reward.max_per_user_per_stream,
    }
