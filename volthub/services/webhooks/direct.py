"""Test deliveries: one signed POST of a test event to each matching webhook, stored nowhere;
or, for the developer dashboard, queued in the outbox like a real delivery (`enqueue_test`).

A test event (sandbox route, `volthub trigger --channel`, the developer dashboard) reaches
the channel owner's enabled webhooks subscribed to it (or to a legacy alias of it), signed
and shaped exactly as a real delivery (`encode_delivery_body`, `delivery_headers`), through
the same address-checked HTTPS adapter. Unlike a real event it writes no outbox row, no
attempt and no failure count: one attempt, whose outcome is returned to the caller.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import trio

from volthub.hub.clock import Clock, to_ms
from volthub.hub.publisher import Event
from volthub.persistence import Database, Tx
from volthub.persistence import webhooks as repo
from volthub.protocol.catalogue import delivery_name
from volthub.protocol.webhooks import delivery_headers, encode_delivery_body
from volthub.services.webhooks.client import Deliverer


@dataclass(frozen=True)
class TestDelivery:
    webhook_id: str
    client_id: str
    url: str
    event_name: str  # the name it was delivered under (a legacy alias when subscribed to one)
    status: int | None
    error: str | None
    latency_ms: int


@dataclass(frozen=True)
class _Target:
    webhook: repo.Webhook
    name: str


def _targets(tx: Tx, event: Event, client_id: str | None) -> list[_Target]:
    found = []
    for subscriber in repo.subscribers(tx, [event.channel_id]):
        if client_id is not None and subscriber.client_id != client_id:
            continue
        name = delivery_name(event.name, subscriber.events)
        webhook = repo.get_webhook_by_id(tx, subscriber.webhook_id) if name is not None else None
        if name is not None and webhook is not None:
            found.append(_Target(webhook, name))
    return found


async def deliver_test(
    database: Database, clock: Clock, deliverer: Deliverer, event: Event, client_id: str | None = None
) -> list[TestDelivery]:
    """POST `event` (a test event) once to each of its channel owner's webhooks that want it;
    only the webhooks of `client_id` when given. Returns each attempt's outcome."""
    assert event.is_test, "only test events bypass the outbox"
    targets = await database.read(lambda tx: _targets(tx, event, client_id))
    results: list[TestDelivery] = []

    async def one(target: _Target) -> None:
        body = encode_delivery_body(event.id, target.name, event.timestamp, event.data)
        headers = delivery_headers(target.webhook.secret, event.id, target.name, to_ms(clock.now()), body)
        result = await deliverer.attempt(target.webhook.url, headers, body)
        results.append(
            TestDelivery(
                target.webhook.id,
                target.webhook.client_id,
                target.webhook.url,
                target.name,
                result.status,
                result.error,
                result.latency_ms,
            )
        )

    async with trio.open_nursery() as nursery:
        for target in targets:
            nursery.start_soon(one, target)
    order = {target.webhook.id: n for n, target in enumerate(targets)}
    return sorted(results, key=lambda r: order[r.webhook_id])


def enqueue_test(tx: Tx, event: Event, client_id: str | None, now_ms: int) -> list[str]:
    """Queue `event` (a test event) for the matching webhooks as ordinary outbox deliveries:
    the dispatcher sends, retries and logs them, and they can be redelivered (the developer
    dashboard's test-event form, which shows them in the delivery log). The event itself is
    stored nowhere else. Returns the delivery ids."""
    assert event.is_test, "only test events are queued this way"
    rows = [
        repo.NewDelivery(
            str(uuid.uuid4()),
            target.webhook.id,
            event.id,
            target.name,
            encode_delivery_body(event.id, target.name, event.timestamp, event.data),
            now_ms,
        )
        for target in _targets(tx, event, client_id)
    ]
    repo.enqueue(tx, rows, now_ms)
    return [row.id for row in rows]
