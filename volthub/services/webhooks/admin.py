"""Webhook administration by the app's owner: CRUD, secret rotation, delivery log, redelivery.

Every operation re-checks, in its own transaction, that the app belongs to the caller
(`apps.owned_app`: someone else's app is not shown to exist). The per-app cap is enforced
by the database (`persistence.webhooks.create_webhook(max_per_app=…)`), not by a count
read before the insert, so concurrent creates cannot exceed it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import webhooks as repo
from volthub.persistence.webhooks import Delivery, DeliveryPage, Webhook
from volthub.protocol.webhooks import generate_secret
from volthub.services.apps import owned_app
from volthub.services.webhooks.dispatcher import Dispatcher

__all__ = [
    "MAX_WEBHOOKS_PER_APP",
    "Delivery",
    "DeliveryNotFound",
    "DeliveryPage",
    "TooManyWebhooks",
    "Webhook",
    "WebhookAdmin",
    "WebhookDisabled",
    "WebhookNotFound",
]

MAX_WEBHOOKS_PER_APP = 25


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class WebhookNotFound(Exception):
    webhook_id: str


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class DeliveryNotFound(Exception):
    delivery_id: str


class TooManyWebhooks(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"an app can have at most {limit} webhooks")
        self.limit = limit


class WebhookDisabled(Exception):
    """A redelivery was asked while the webhook is disabled."""


@dataclass(frozen=True)
class WebhookChange:
    url: str | None = None
    events: list[str] | None = None
    enabled: bool | None = None


class WebhookAdmin:
    def __init__(self, database: Database, clock: Clock, dispatcher: Dispatcher) -> None:
        self._db = database
        self._clock = clock
        self._dispatcher = dispatcher
        self.max_per_app = MAX_WEBHOOKS_PER_APP

    def _now_ms(self) -> int:
        return to_ms(self._clock.now())

    async def check_target(self, url: str) -> str:
        """The URL as it will be called; `InvalidTarget` when the target policy refuses it."""
        return (await self._dispatcher.deliverer.check_target(url)).url

    async def check_app(self, owner_id: str, client_id: str) -> None:
        """`AppNotFound` unless the caller owns the app (cheap, before a DNS lookup)."""
        await self._db.read(lambda tx: owned_app(tx, owner_id, client_id))

    async def check_webhook(self, owner_id: str, client_id: str, webhook_id: str) -> Webhook:
        return await self._db.read(lambda tx: _owned_webhook(tx, owner_id, client_id, webhook_id))

    async def of_app(self, owner_id: str, client_id: str) -> list[Webhook]:
        def read(tx: Tx) -> list[Webhook]:
            owned_app(tx, owner_id, client_id)
            return repo.list_for_app(tx, client_id)

        return await self._db.read(read)

    async def create(self, owner_id: str, client_id: str, url: str, events: list[str]) -> Webhook:
        now, limit = self._now_ms(), self.max_per_app

        def create(tx: Tx) -> Webhook:
            owned_app(tx, owner_id, client_id)
            try:
                return repo.create_webhook(
                    tx,
                    webhook_id=str(uuid.uuid4()),
                    client_id=client_id,
                    url=url,
                    events=events,
                    secret=generate_secret(),
                    now_ms=now,
                    max_per_app=limit,
                )
            except repo.WebhookLimitReached:
                raise TooManyWebhooks(limit) from None

        return await self._db.write(create)

    async def change(self, owner_id: str, client_id: str, webhook_id: str, change: WebhookChange) -> Webhook:
        """Apply a patch; re-enabling resumes the parked deliveries (and wakes the workers)."""
        now = self._now_ms()

        def write(tx: Tx) -> tuple[Webhook, int]:
            current = _owned_webhook(tx, owner_id, client_id, webhook_id)
            repo.change_webhook(tx, webhook_id, now, url=change.url, events=change.events)
            resumed = 0
            if change.enabled is True and not current.enabled:
                resumed = repo.enable_webhook(tx, webhook_id, now)
            elif change.enabled is False and current.enabled:
                repo.disable_webhook(tx, webhook_id, repo.BY_OWNER, now)
            return _reread(tx, client_id, webhook_id), resumed

        webhook, resumed = await self._db.write(write)
        if resumed:
            self._dispatcher.wake()
        return webhook

    async def delete(self, owner_id: str, client_id: str, webhook_id: str) -> None:
        def delete(tx: Tx) -> None:
            _owned_webhook(tx, owner_id, client_id, webhook_id)
            repo.delete_webhook(tx, client_id, webhook_id)

        await self._db.write(delete)

    async def rotate_secret(self, owner_id: str, client_id: str, webhook_id: str) -> Webhook:
        now, secret = self._now_ms(), generate_secret()

        def rotate(tx: Tx) -> Webhook:
            _owned_webhook(tx, owner_id, client_id, webhook_id)
            repo.set_secret(tx, webhook_id, secret, now)
            return _reread(tx, client_id, webhook_id)

        return await self._db.write(rotate)

    async def deliveries(
        self, owner_id: str, client_id: str, webhook_id: str, limit: int, cursor: str | None
    ) -> DeliveryPage:
        """The delivery log, newest first; `InvalidCursor` for a cursor we did not issue."""

        def read(tx: Tx) -> DeliveryPage:
            _owned_webhook(tx, owner_id, client_id, webhook_id)
            return repo.list_deliveries(tx, webhook_id, limit, cursor)

        return await self._db.read(read)

    async def redeliver(self, owner_id: str, client_id: str, webhook_id: str, delivery_id: str) -> Delivery:
        """A new delivery of the same event (id, name, body), due now, on a fresh schedule."""
        now = self._now_ms()

        def enqueue(tx: Tx) -> Delivery:
            webhook = _owned_webhook(tx, owner_id, client_id, webhook_id)
            original = repo.get_delivery(tx, webhook_id, delivery_id)
            if original is None:
                raise DeliveryNotFound(delivery_id)
            if not webhook.enabled:
                raise WebhookDisabled(webhook_id)
            new_id = str(uuid.uuid4())
            row = repo.NewDelivery(
                new_id, webhook_id, original.event_id, original.event_name, original.body, now, delivery_id
            )
            repo.enqueue(tx, [row], now)
            created = repo.get_delivery(tx, webhook_id, new_id)
            assert created is not None
            return created

        created = await self._db.write(enqueue)
        self._dispatcher.wake()
        return created


def _owned_webhook(tx: Tx, owner_id: str, client_id: str, webhook_id: str) -> Webhook:
    owned_app(tx, owner_id, client_id)
    webhook = repo.get_webhook(tx, client_id, webhook_id)
    if webhook is None:
        raise WebhookNotFound(webhook_id)
    return webhook


def _reread(tx: Tx, client_id: str, webhook_id: str) -> Webhook:
    updated = repo.get_webhook(tx, client_id, webhook_id)
    assert updated is not None
    return updated
