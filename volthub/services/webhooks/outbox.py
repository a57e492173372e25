"""The outbox sink: delivery rows written in the same transaction as the change."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime

from volthub.hub.clock import to_ms
from volthub.hub.publisher import Event
from volthub.persistence import Tx
from volthub.persistence import oauth as oauth_repo
from volthub.persistence import webhooks as repo
from volthub.protocol.catalogue import REQUIRED_SCOPE, delivery_name, subscribed_names
from volthub.protocol.webhooks import encode_delivery_body

# Events about one app (who authorised or revoked it): only that app's webhooks get them,
# not every app of the same owner.
APP_EVENTS = frozenset({"user.authorization.grant", "user.authorization.revoke"})

ScopeCheck = Callable[[Tx, str, str, str], bool]


def app_holds_scope(tx: Tx, user_id: str, client_id: str, scope: str) -> bool:
    """Whether `user_id` has an active OAuth grant giving `client_id` this scope."""
    return oauth_repo.grant_has_scope(tx, user_id, client_id, scope)


def event_time_ms(event: Event) -> int:
    """The emitting transaction's time, from the event's own ISO 8601 timestamp.

    The sink runs on a database worker thread, where the Trio-driven clock cannot be read.
    """
    return round(datetime.fromisoformat(event.timestamp).timestamp() * 1000)


class OutboxSink:
    """`EventPublisher` transaction sink: writes one delivery row per (event, webhook) that
    wants it, in the same transaction as the change. Sandbox events never get here."""

    def __init__(self, first_delay: float, scope_check: ScopeCheck = app_holds_scope) -> None:
        self._first_delay_ms = to_ms(first_delay)
        self._scope_check = scope_check
        self._lock = threading.Lock()
        # Ids of events that got rows, so the post-commit bus listener wakes the workers
        # only for them (a rolled-back id just lingers until the set is trimmed).
        self._enqueued: set[str] = set()

    def __call__(self, tx: Tx, events: list[Event]) -> None:
        relevant = [e for e in events if not e.is_test and subscribed_names(e.name)]
        if not relevant:
            return
        by_owner: dict[str, list[repo.Subscriber]] = {}
        for subscriber in repo.subscribers(tx, {e.channel_id for e in relevant}):
            by_owner.setdefault(subscriber.owner_id, []).append(subscriber)
        rows: list[repo.NewDelivery] = []
        for event in relevant:
            rows += self._deliveries(tx, event, by_owner.get(event.channel_id, []))
        if not rows:
            return
        repo.enqueue(tx, rows, event_time_ms(relevant[0]))
        with self._lock:
            if len(self._enqueued) > 100_000:
                self._enqueued.clear()
            self._enqueued.update(row.event_id for row in rows)

    def _deliveries(self, tx: Tx, event: Event, subscribers: list[repo.Subscriber]) -> list[repo.NewDelivery]:
        rows = []
        at = event_time_ms(event)
        for subscriber in subscribers:
            if event.name in APP_EVENTS and event.data.get("clientId") != subscriber.client_id:
                continue
            name = delivery_name(event.name, subscriber.events)
            if name is None:
                continue
            scope = REQUIRED_SCOPE.get(event.name)
            if scope and not self._scope_check(tx, subscriber.owner_id, subscriber.client_id, scope):
                continue
            body = encode_delivery_body(event.id, name, event.timestamp, event.data)
            rows.append(
                repo.NewDelivery(
                    str(uuid.uuid4()), subscriber.webhook_id, event.id, name, body, at + self._first_delay_ms
                )
            )
        return rows

    def take(self, event_id: str) -> bool:
        """True once for an event that got delivery rows (called after its commit)."""
        with self._lock:
            if event_id in self._enqueued:
                self._enqueued.discard(event_id)
                return True
            return False
