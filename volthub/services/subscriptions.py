"""Subscriptions.

Paid in Volts at `[subscriptions]` tier prices: the payment (a ledger transfer), the
subscription row, its events and notifications are one transaction. A subscription is
prepaid for one period and ends by itself at `expiresAt` (reason `expired`) or at once when
canceled (reason `canceled`); nothing renews by itself, gifts included. Subscribing again
later continues the tenure months.

Durable expiry: `Subscriptions` is a source of `services.expiry.ExpiryService`, one
supervised background service per process. It reads the earliest open expiry (one indexed
query; nothing is held in memory per subscription), sleeps until that exact moment (or
until this process creates an earlier one, or `poll_seconds` for ones another process
wrote), and ends what is due with the guarded
`UPDATE ... WHERE ended_at IS NULL AND expires_at <= now RETURNING`, emitting
`channel.subscription.end` only where it won. So an expiry fires once even with several
processes, and a restarted process (SIGKILL included) fires the ones it missed at start.
A channel-actor deadline was the other choice; it was not taken because a month-long
deadline would keep one actor (and its task) alive per subscribed channel, and a restart
would start them all.
"""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass
from typing import Any

import trio

from volthub.config import ChannelPointsSettings, SubscriptionSettings, VoltsSettings
from volthub.hub.clock import Clock, iso8601, to_ms
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, IntegrityError, Tx, ledger
from volthub.persistence import subscriptions as repo
from volthub.persistence import users as users_repo
from volthub.persistence.subscriptions import TIERS, Subscription
from volthub.protocol import catalogue
from volthub.protocol.catalogue import Person
from volthub.services import volts as volts_service
from volthub.services.channels import ChannelNotFound, channel_by_id, channel_by_username, ranked
from volthub.services.expiry import ExpiryService, Wakeup
from volthub.services.notifications import notify

__all__ = [
    "TIERS",
    "AlreadySubscribed",
    "ExpiryService",
    "NoEligibleRecipients",
    "NotSubscribed",
    "Subscription",
    "Subscriptions",
    "roster_item",
    "subscription_shape",
]

log = logging.getLogger(__name__)
DAY_MS = 86_400_000
# Ends handled per transaction by the expiry service.
EXPIRY_BATCH = 100


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class AlreadySubscribed(Exception):
    user_id: str


class NotSubscribed(Exception):
    """The caller has no active subscription to that channel."""


class NoEligibleRecipients(Exception):
    """No follower of the channel can receive a gift (all subscribed, or none follow)."""


class InvalidRecipient(Exception):
    """A gift to oneself or to the channel itself."""


def _person(user_id: str, username: str, display_name: str) -> Person:
    return Person(user_id, username, display_name)


def _gifter(sub: Subscription) -> dict[str, str] | None:
    if sub.gifter_id is None:
        return None
    return _person(sub.gifter_id, sub.gifter_username or "", sub.gifter_display_name or "").fields()


def roster_item(sub: Subscription) -> dict[str, Any]:
    """Id, names, tier, gift information and expiry, and nothing beyond them."""
    return {
        "userId": sub.user_id,
        "username": sub.username,
        "displayName": sub.display_name,
        "tier": sub.tier,
        "isGift": sub.is_gift,
        "gifter": _gifter(sub),
        "expiresAt": iso8601(sub.expires_at),
    }


def subscription_shape(sub: Subscription) -> dict[str, Any]:
    """A subscription as its subscriber sees it."""
    return {
        "id": sub.id,
        "creatorId": sub.channel_id,
        "creator": _person(sub.channel_id, sub.channel_username, sub.channel_display_name).fields(),
        "userId": sub.user_id,
        "tier": sub.tier,
        "isGift": sub.is_gift,
        "gifter": _gifter(sub),
        "months": sub.months,
        "startedAt": iso8601(sub.started_at),
        "expiresAt": iso8601(sub.expires_at),
        "status": "active" if sub.ended_at is None else "ended",
        "endReason": sub.end_reason,
        "endedAt": None if sub.ended_at is None else iso8601(sub.ended_at),
    }


def emit_end(emitter: Emitter, sub: Subscription) -> None:
    gifter = None
    if sub.gifter_id is not None:
        gifter = _person(sub.gifter_id, sub.gifter_username or "", sub.gifter_display_name or "")
    assert sub.ended_at is not None and sub.end_reason is not None
    emitter.emit(
        sub.channel_id,
        "channel.subscription.end",
        catalogue.channel_subscription_end(
            subscriber=_person(sub.user_id, sub.username, sub.display_name),
            tier=sub.tier,
            gifter=gifter,
            reason=sub.end_reason,
            ended_at=iso8601(sub.ended_at),
            expires_at=iso8601(sub.expires_at),
        ),
    )


def end_if_due(tx: Tx, emitter: Emitter, channel_id: str, user_id: str, now_ms: int) -> None:
    """End the member's open subscription here if its expiry has passed (once, guarded)."""
    found = repo.open_of(tx, channel_id, user_id)
    if found is not None and found.expires_at <= now_ms:
        ended = repo.end(tx, found.id, "expired", found.expires_at, due_by=now_ms)
        if ended is not None:
            emit_end(emitter, ended)


@dataclass(frozen=True)
class Plan:
    price: int
    period_ms: int


class Subscriptions:
    def __init__(
        self,
        database: Database,
        publisher: EventPublisher,
        clock: Clock,
        settings: SubscriptionSettings,
        volts: VoltsSettings,
        points: ChannelPointsSettings,
    ) -> None:
        self._db = database
        self._publisher = publisher
        self._clock = clock
        self._settings = settings
        self._volts = volts
        self._points = points
        # Woken when this process makes a subscription: the expiry service re-reads its deadline.
        self._wakeup = Wakeup()

    def _plan(self, tier: str) -> Plan:
        return Plan(self._settings.price(tier), self._settings.period_days * DAY_MS)

    @property
    def changed(self) -> trio.Event:
        return self._wakeup.changed

    def _woken(self) -> None:
        self._wakeup.wake()

    # -- buying --

    async def subscribe(self, user_id: str, creator_id: str, tier: str) -> Subscription:
        if user_id == creator_id:
            raise InvalidRecipient()

        def change(tx: Tx, emitter: Emitter) -> Subscription:
            channel_by_id(tx, creator_id)
            sub = self._start(tx, emitter, creator_id, user_id, tier, gifter_id=None)
            self._pay(tx, emitter.now_ms, user_id, creator_id, self._plan(tier).price, "subscription", sub.id)
            return sub

        sub = await self._publisher.write(change)
        self._woken()
        return sub

    async def gift(
        self,
        gifter_id: str,
        creator_id: str,
        tier: str,
        *,
        recipient_id: str | None = None,
        recipient_username: str | None = None,
    ) -> list[Subscription]:
        """A direct gift to one member."""

        def change(tx: Tx, emitter: Emitter) -> list[Subscription]:
            channel_by_id(tx, creator_id)
            if recipient_id is not None:
                recipient = users_repo.get_by_id(tx, recipient_id)
                if recipient is None:
                    raise ChannelNotFound(recipient_id)
            else:
                assert recipient_username is not None
                recipient = channel_by_username(tx, recipient_username)
            if recipient.id in (gifter_id, creator_id):
                raise InvalidRecipient()
            return self._gift_to(tx, emitter, gifter_id, creator_id, tier, [recipient.id])

        subs = await self._publisher.write(change)
        self._woken()
        return subs

    async def gift_random(self, gifter_id: str, creator_id: str, tier: str, quantity: int) -> list[Subscription]:
        """Gifts to up to `quantity` followers of the channel chosen at random (never the
        gifter, never someone subscribed); pays only for those who received one."""

        def change(tx: Tx, emitter: Emitter) -> list[Subscription]:
            channel_by_id(tx, creator_id)
            candidates = repo.gift_candidates(tx, creator_id, gifter_id, emitter.now_ms, 10_000)
            if not candidates:
                raise NoEligibleRecipients()
            chosen = random.sample(candidates, min(quantity, len(candidates)))
            return self._gift_to(tx, emitter, gifter_id, creator_id, tier, chosen)

        subs = await self._publisher.write(change)
        self._woken()
        return subs

    def _gift_to(
        self, tx: Tx, emitter: Emitter, gifter_id: str, creator_id: str, tier: str, recipients: list[str]
    ) -> list[Subscription]:
        gifter = users_repo.get_by_id(tx, gifter_id)
        if gifter is None:
            raise ChannelNotFound(gifter_id)
        batch = str(uuid.uuid4())
        subs = [self._start(tx, emitter, creator_id, rid, tier, gifter_id=gifter_id) for rid in recipients]
        amount = self._plan(tier).price * len(subs)
        self._pay(tx, emitter.now_ms, gifter_id, creator_id, amount, "gift_subscription", batch)
        at = iso8601(emitter.now_ms)
        emitter.emit(
            creator_id,
            "channel.subscription.gift",
            catalogue.channel_subscription_gift(
                gifter=Person.of(gifter),
                tier=tier,
                quantity=len(subs),
                gifted_at=at,
                amount=amount,
                recipients=[_person(s.user_id, s.username, s.display_name) for s in subs],
            ),
        )
        for sub in subs:
            notify(
                tx,
                sub.user_id,
                "subscription.gifted",
                "You received a gift subscription",
                f"{gifter.display_name} gifted you a {tier} subscription to {sub.channel_display_name}",
                {"subscriptionId": sub.id, "creatorId": creator_id, "gifterId": gifter_id, "tier": tier},
                emitter.now_ms,
            )
        notify(
            tx,
            creator_id,
            "subscription.gift",
            "Gift subscriptions",
            f"{gifter.display_name} gifted {len(subs)} {tier} subscription(s)",
            {"gifterId": gifter_id, "quantity": len(subs), "tier": tier, "amount": amount},
            emitter.now_ms,
        )
        return subs

    def _start(
        self, tx: Tx, emitter: Emitter, creator_id: str, user_id: str, tier: str, *, gifter_id: str | None
    ) -> Subscription:
        now = emitter.now_ms
        end_if_due(tx, emitter, creator_id, user_id, now)
        if repo.open_of(tx, creator_id, user_id) is not None:
            raise AlreadySubscribed(user_id)
        subscription_id = str(uuid.uuid4())
        months = repo.tenure_months(tx, creator_id, user_id) + 1
        try:
            with tx.savepoint():
                repo.insert(
                    tx,
                    subscription_id=subscription_id,
                    channel_id=creator_id,
                    user_id=user_id,
                    tier=tier,
                    started_at=now,
                    expires_at=now + self._plan(tier).period_ms,
                    months=months,
                    gifter_id=gifter_id,
                )
        except IntegrityError:
            raise AlreadySubscribed(user_id) from None
        sub = repo.get(tx, subscription_id)
        assert sub is not None
        emitter.emit(
            creator_id,
            "channel.subscribe",
            catalogue.channel_subscribe(
                subscriber=_person(user_id, sub.username, sub.display_name),
                tier=tier,
                months=months,
                message=None,
                subscribed_at=iso8601(now),
                is_gift=gifter_id is not None,
            ),
        )
        if gifter_id is None:
            notify(
                tx,
                creator_id,
                "subscription.new",
                "New subscriber",
                f"{sub.display_name} subscribed ({tier}, {months} months)",
                {"userId": user_id, "tier": tier, "months": months},
                now,
            )
        self._bonus(tx, now, creator_id, user_id, sub.id)
        return sub

    def _pay(self, tx: Tx, now: int, payer: str, creator_id: str, amount: int, kind: str, reference: str) -> None:
        volts_service.open_wallet(tx, payer, self._volts.starting_balance, now)
        ledger.transfer(
            tx,
            currency="volts",
            source=volts_service.wallet(payer),
            destination=volts_service.wallet(creator_id),
            amount=amount,
            kind=kind,
            reference=reference,
            now_ms=now,
        )

    def _bonus(self, tx: Tx, now: int, channel_id: str, user_id: str, reference: str) -> None:
        if self._points.subscription_bonus > 0:
            ledger.transfer(
                tx,
                currency="points",
                source=ledger.system_account("points", "mint", channel_id),
                destination=ledger.user_account("points", user_id, channel_id),
                amount=self._points.subscription_bonus,
                kind="subscription_bonus",
                reference=reference,
                now_ms=now,
            )

    # -- managing --

    async def cancel(self, user_id: str, creator_id: str) -> Subscription:
        def change(tx: Tx, emitter: Emitter) -> Subscription:
            end_if_due(tx, emitter, creator_id, user_id, emitter.now_ms)
            found = repo.open_of(tx, creator_id, user_id)
            if found is None:
                raise NotSubscribed()
            ended = repo.end(tx, found.id, "canceled", emitter.now_ms)
            if ended is None:
                raise NotSubscribed()
            emit_end(emitter, ended)
            return ended

        return await self._publisher.write(change)

    async def change_tier(self, user_id: str, creator_id: str, tier: str) -> Subscription:
        """Takes effect now; an upgrade pays the price difference of a period."""

        def change(tx: Tx, emitter: Emitter) -> Subscription:
            end_if_due(tx, emitter, creator_id, user_id, emitter.now_ms)
            found = repo.open_of(tx, creator_id, user_id)
            if found is None:
                raise NotSubscribed()
            difference = self._plan(tier).price - self._plan(found.tier).price
            if difference > 0:
                self._pay(tx, emitter.now_ms, user_id, creator_id, difference, "subscription_upgrade", found.id)
            repo.set_tier(tx, found.id, tier)
            updated = repo.get(tx, found.id)
            assert updated is not None
            return updated

        return await self._publisher.write(change)

    # -- reading --

    def _now(self) -> int:
        return to_ms(self._clock.now())

    async def mine(self, user_id: str) -> list[Subscription]:
        now = self._now()
        return await self._db.read(lambda tx: repo.of_user(tx, user_id, now))

    async def count(self, creator_id: str) -> int:
        now = self._now()
        return await self._db.read(lambda tx: repo.count_active(tx, creator_id, now))

    async def roster(self, creator_id: str, page: int, per_page: int) -> tuple[list[Subscription], int]:
        now = self._now()

        def read(tx: Tx) -> tuple[list[Subscription], int]:
            channel_by_id(tx, creator_id)
            return repo.roster(tx, creator_id, now, (page - 1) * per_page, per_page), repo.count_active(
                tx, creator_id, now
            )

        return await self._db.read(read)

    async def gift_leaderboard(self, creator_id: str, limit: int) -> list[dict[str, Any]]:
        def read(tx: Tx) -> list[dict[str, Any]]:
            channel_by_id(tx, creator_id)
            return ranked(repo.gift_leaderboard(tx, creator_id, limit), "gifts")

        return await self._db.read(read)

    # -- expiry --

    async def expire_due(self) -> int:
        """End every subscription whose expiry has come; how many this process ended."""
        ended = 0
        while True:
            now = self._now()

            def change(tx: Tx, emitter: Emitter) -> tuple[int, int]:
                ids = repo.due(tx, now, EXPIRY_BATCH)
                won = 0
                for subscription_id in ids:
                    sub = repo.get(tx, subscription_id)
                    assert sub is not None
                    done = repo.end(tx, subscription_id, "expired", sub.expires_at, due_by=now)
                    if done is not None:
                        emit_end(emitter, done)
                        won += 1
                return len(ids), won

            seen, won = await self._publisher.write(change)
            ended += won
            if seen < EXPIRY_BATCH:
                return ended

    async def next_expiry(self) -> int | None:
        return await self._db.read(repo.next_expiry)
