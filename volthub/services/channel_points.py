"""Channel-points rewards: what a channel offers, in its REST and socket shapes.

Every channel has the built-in rewards below (``builtInType`` set, not stored) besides the
custom ones it created. The REST shape has every field of a reward; the socket shape
(``channel:rewards``) leaves out the fields marked "REST only".
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, replace
from typing import Any

import trio

from volthub.hub.clock import Clock, iso8601, to_ms
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, Tx, ledger
from volthub.persistence import channel_points as repo
from volthub.persistence import chat as chat_repo
from volthub.persistence import streams as streams_repo
from volthub.persistence import users as users_repo
from volthub.persistence.channel_points import MAX_REWARDS_PER_CHANNEL, Redemption, Reward
from volthub.persistence.pagination import decode_position, encode_cursor
from volthub.protocol import catalogue
from volthub.services.channels import ChannelNotFound, channel_by_id, ranked
from volthub.services.chat import Presence, presence_snapshot

__all__ = [
    "BUILT_IN",
    "MAX_REWARDS_PER_CHANNEL",
    "ChannelNotFound",
    "ChannelNotLive",
    "ChannelPoints",
    "RedemptionLimitReached",
    "RedemptionNotFound",
    "NotChannelModerator",
    "RedemptionResolved",
    "Redemptions",
    "Reward",
    "RewardDisabled",
    "RewardNotFound",
    "StreamNotFound",
    "TooManyRewards",
    "WatchEarnings",
    "pay_follow_bonus",
    "redemption_shape",
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

    async def balance(self, channel_id: str, user_id: str) -> int:
        """The viewer's points held in the channel; ChannelNotFound when no user has that id."""

        def read(tx: Tx) -> int:
            channel_by_id(tx, channel_id)
            return ledger.balance(tx, points_account(channel_id, user_id))

        return await self._db.read(read)

    async def leaderboard(self, channel_id: str, limit: int) -> list[dict[str, Any]]:
        """Viewers of the channel by points held."""

        def read(tx: Tx) -> list[dict[str, Any]]:
            channel_by_id(tx, channel_id)
            return ranked(repo.points_leaderboard(tx, channel_id, limit), "points")

        return await self._db.read(read)


def points_account(channel_id: str, user_id: str) -> str:
    """The viewer's channel-points account in the ledger (the one prediction bets use)."""
    return ledger.user_account("points", user_id, channel_id)


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


# --- redemptions --------------------------------------------------------

# Where redeemed points go: the channel's own system account. A rejection refunds from it.
REDEMPTIONS_ACCOUNT = "redemptions"
STATUSES = ("unfulfilled", "fulfilled", "rejected")


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class RewardNotFound(Exception):
    reward_id: str


class RewardDisabled(Exception):
    """The channel switched this reward off."""


class ChannelNotLive(Exception):
    """Redemptions belong to a stream (their limits count per stream): none is live."""


class RedemptionLimitReached(Exception):
    def __init__(self, scope: str, limit: int) -> None:
        per = "this stream" if scope == "stream" else "you in this stream"
        super().__init__(f"this reward can be redeemed {limit} time(s) by {per}")
        self.scope = scope
        self.limit = limit


class StreamNotFound(Exception):
    """No stream of this channel has that id."""


class RedemptionNotFound(Exception):
    pass


class NotChannelModerator(Exception):
    """Only the channel's owner or one of its moderators may resolve its redemptions."""


class RedemptionResolved(Exception):
    """Fulfilled or rejected already: a redemption is resolved once."""

    def __init__(self, status: str) -> None:
        super().__init__(f"this redemption is {status} already")
        self.status = status


def redemption_shape(redemption: Redemption) -> dict[str, Any]:
    """A redemption over REST: the event's fields (one builder), its stream and
    when it was resolved."""
    data = catalogue.channel_channel_points_redemption(
        redemption_id=redemption.id,
        reward_id=redemption.reward_id,
        reward_title=redemption.reward_title,
        reward_cost=redemption.reward_cost,
        redeemer=catalogue.Person(redemption.user_id, redemption.username, redemption.display_name),
        user_input=redemption.user_input,
        status=redemption.status,
        redeemed_at=iso8601(redemption.redeemed_at),
    )
    resolved = None if redemption.resolved_at is None else iso8601(redemption.resolved_at)
    return {**data, "streamId": redemption.stream_id, "resolvedAt": resolved}


def _find_reward(tx: Tx, channel_id: str, reward_id: str) -> Reward:
    for reward in BUILT_IN:
        if reward.id == reward_id:
            return replace(reward, channel_id=channel_id)
    found = repo.get_reward(tx, channel_id, reward_id)
    if found is None:
        raise RewardNotFound(reward_id)
    return found


def _check_limits(tx: Tx, stream_id: str, reward: Reward, user_id: str) -> None:
    stream_limit, user_limit = reward.max_per_stream, reward.max_per_user_per_stream
    if stream_limit is not None and repo.count_redemptions(tx, stream_id, reward.id) >= stream_limit:
        raise RedemptionLimitReached("stream", stream_limit)
    if user_limit is not None and repo.count_redemptions(tx, stream_id, reward.id, user_id) >= user_limit:
        raise RedemptionLimitReached("user", user_limit)


class Redemptions:
    """Redeem, list per stream, fulfil and reject. Every change moves its points through the
    ledger in the transaction that writes the redemption (`EventPublisher.write`)."""

    def __init__(self, database: Database, publisher: EventPublisher) -> None:
        self._db = database
        self._publisher = publisher

    async def redeem(self, channel_id: str, reward_id: str, user_id: str, user_input: str | None) -> dict[str, Any]:
        def change(tx: Tx, emitter: Emitter) -> dict[str, Any]:
            channel_by_id(tx, channel_id)
            reward = _find_reward(tx, channel_id, reward_id)
            if not reward.enabled:
                raise RewardDisabled()
            stream = streams_repo.open_stream(tx, channel_id)
            if stream is None:
                raise ChannelNotLive()
            if tx.dialect == "postgresql":
                # One redeemer of this stream at a time, so two cannot both take a limit's
                # last slot (SQLite's BEGIN IMMEDIATE already serialises writers).
                tx.execute("SELECT id FROM streams WHERE id = ? FOR UPDATE", (stream.id,))
            _check_limits(tx, stream.id, reward, user_id)
            user = users_repo.get_by_id(tx, user_id)
            if user is None:
                raise ChannelNotFound(user_id)
            redemption = Redemption(
                id=str(uuid.uuid4()),
                channel_id=channel_id,
                stream_id=stream.id,
                reward_id=reward.id,
                reward_title=reward.name,
                reward_cost=reward.cost,
                user_id=user_id,
                user_input=user_input,
                # Only a reward that asks for approval waits for the owner or a moderator.
                status="unfulfilled" if reward.requires_moderator_approval else "fulfilled",
                redeemed_at=emitter.now_ms,
                resolved_at=None if reward.requires_moderator_approval else emitter.now_ms,
                username=user.username,
                display_name=user.display_name,
            )
            ledger.transfer(
                tx,
                currency="points",
                source=points_account(channel_id, user_id),
                destination=ledger.system_account("points", REDEMPTIONS_ACCOUNT, channel_id),
                amount=reward.cost,
                kind="redemption",
                reference=redemption.id,
                now_ms=emitter.now_ms,
            )
            repo.insert_redemption(tx, redemption)
            shape = redemption_shape(redemption)
            event = {key: value for key, value in shape.items() if key not in ("streamId", "resolvedAt")}
            emitter.emit(channel_id, "channel.channel_points_redemption", event)
            return {**shape, "balance": ledger.balance(tx, points_account(channel_id, user_id))}

        return await self._publisher.write(change)

    async def for_stream(
        self, channel_id: str, stream_id: str, status: str | None, limit: int, cursor: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        after = decode_position(cursor) if cursor else None

        def read(tx: Tx) -> list[Redemption]:
            channel_by_id(tx, channel_id)
            stream = streams_repo.get_stream(tx, stream_id)
            if stream is None or stream.channel_id != channel_id:
                raise StreamNotFound(stream_id)
            return repo.redemptions_page(tx, stream_id, status, after, limit + 1)

        rows = await self._db.read(read)
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1].redeemed_at, rows[-1].id) if more and rows else None
        return [redemption_shape(row) for row in rows], next_cursor

    async def resolve(self, channel_id: str, redemption_id: str, status: str, actor_id: str) -> dict[str, Any]:
        """Fulfil or reject (refunding the cost) an unfulfilled redemption, once; by the
        channel's owner or one of its moderators (NotChannelModerator otherwise)."""
        if status not in ("fulfilled", "rejected"):
            raise ValueError(status)

        def change(tx: Tx, emitter: Emitter) -> dict[str, Any]:
            channel_by_id(tx, channel_id)
            if actor_id != channel_id:
                standing = chat_repo.standing(tx, channel_id, actor_id, emitter.now_ms)
                if standing is None or not standing["is_moderator"]:
                    raise NotChannelModerator(channel_id)
            found = repo.get_redemption(tx, channel_id, redemption_id)
            if found is None:
                raise RedemptionNotFound(redemption_id)
            if not repo.resolve_redemption(tx, redemption_id, status, emitter.now_ms):
                current = repo.get_redemption(tx, channel_id, redemption_id)
                raise RedemptionResolved(current.status if current else found.status)
            if status == "rejected":
                ledger.transfer(
                    tx,
                    currency="points",
                    source=ledger.system_account("points", REDEMPTIONS_ACCOUNT, channel_id),
                    destination=points_account(channel_id, found.user_id),
                    amount=found.reward_cost,
                    kind="redemption_refund",
                    reference=redemption_id,
                    now_ms=emitter.now_ms,
                )
            return redemption_shape(replace(found, status=status, resolved_at=emitter.now_ms))

        return await self._publisher.write(change)


# --- earning: follow bonus, watching -----------------------------------


def pay_follow_bonus(tx: Tx, channel_id: str, user_id: str, amount: int, now_ms: int) -> bool:
    """Credit the channel's follow bonus in the follow's transaction, the first time this
    viewer ever follows this channel (an unfollow and refollow pays nothing more)."""
    if amount <= 0 or not repo.claim_follow_bonus(tx, channel_id, user_id, now_ms):
        return False
    ledger.transfer(
        tx,
        currency="points",
        source=ledger.system_account("points", ledger.MINT, channel_id),
        destination=points_account(channel_id, user_id),
        amount=amount,
        kind="follow_bonus",
        reference=user_id,
        now_ms=now_ms,
    )
    return True


class WatchEarnings:
    """Watching earns points: at the end of every `interval_seconds` (aligned to the clock, so
    every process agrees which interval it is), each signed-in viewer present on a live
    channel's Events API gets `points` from the channel's mint.

    Presence comes from the hub (across processes on PostgreSQL). One interval of one channel
    is credited once, by whichever process claims it first (`claim_watch_interval`, a guarded
    UPDATE in the crediting transaction). A process that was down credits no intervals it
    missed: nobody knows who watched then. The broadcaster earns nothing in their own channel.
    """

    def __init__(
        self,
        database: Database,
        clock: Clock,
        presence: Presence,
        *,
        points: int,
        interval_seconds: float,
    ) -> None:
        self._db = database
        self._clock = clock
        self._presence = presence
        self._points = points
        self._interval_ms = max(1, to_ms(interval_seconds))

    async def run(self) -> None:
        if self._points <= 0:
            await trio.sleep_forever()  # earning switched off ([channel_points] points_per_interval = 0)
        while True:
            now_ms = to_ms(self._clock.now())
            interval = now_ms // self._interval_ms
            await trio.sleep(((interval + 1) * self._interval_ms - now_ms) / 1000)
            await self.credit(interval)

    async def credit(self, interval: int) -> dict[str, list[str]]:
        """Credit `interval` to the viewers present now; returns who was credited, by channel."""
        channels = await self._db.read(repo.live_channels)
        credited: dict[str, list[str]] = {}
        for channel_id in channels:
            viewers, _ = await presence_snapshot(self._presence, channel_id)
            present = sorted({viewer for viewer in viewers if viewer != channel_id})
            paid = await self._db.write(
                functools.partial(self._credit_channel, channel_id=channel_id, viewers=present, interval=interval)
            )
            if paid:
                credited[channel_id] = paid
        return credited

    def _credit_channel(self, tx: Tx, *, channel_id: str, viewers: list[str], interval: int) -> list[str]:
        if not repo.claim_watch_interval(tx, channel_id, interval):
            return []  # another process (or an earlier run) credited it
        now = (interval + 1) * self._interval_ms
        paid = repo.existing_users(tx, viewers)
        for viewer in paid:
            ledger.transfer(
                tx,
                currency="points",
                source=ledger.system_account("points", ledger.MINT, channel_id),
                destination=points_account(channel_id, viewer),
                amount=self._points,
                kind="watch",
                reference=f"watch:{interval}",
                now_ms=now,
            )
        return paid
