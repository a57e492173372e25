"""The outbox sink: delivery rows written in the same transaction as the change."""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
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

# Channels whose webhook subscribers a process keeps between events.
SUBSCRIBERS_KEPT = 10_000


def app_holds_scope(tx: Tx, user_id: str, client_id: str, scope: str) -> bool:
    """Whether `user_id` has an active OAuth grant giving `client_id` this scope."""
    return oauth_repo.grant_has_scope(tx, user_id, client_id, scope)


def event_time_ms(event: Event) -> int:
    """The emitting transaction's time, from the event's own ISO 8601 timestamp.

    The sink runs on a database worker thread, where the Trio-driven clock cannot be read.
    """
    return round(datetime.fromisoformat(event.timestamp).timestamp() * 1000)


class SubscribersCache:
    """The webhook subscribers of recently published channels, each kept with the version of
    its owner's webhook subscriptions it was read at. On PostgreSQL the event log hands every
    event the version its transaction saw, and any change to who is subscribed moves it, so a
    kept list is used while the version stands and read again in the publishing transaction
    once it moved. Events without a version (SQLite: one process, reads in process) are
    always read."""

    def __init__(self, kept: int = SUBSCRIBERS_KEPT) -> None:
        self._kept = kept
        self._lock = threading.Lock()  # publishing transactions run on several threads
        self._by_owner: OrderedDict[str, tuple[int, list[repo.Subscriber]]] = OrderedDict()
        self.reads = 0  # subscriber reads made (for tests)

    def of(self, tx: Tx, events: Iterable[Event]) -> dict[str, list[repo.Subscriber]]:
        """The subscribers of every channel of `events`, by channel (its owner's id)."""
        versions = {event.channel_id: event.webhooks_version for event in events}
        found: dict[str, list[repo.Subscriber]] = {}
        with self._lock:
            for owner, version in versions.items():
                kept = self._by_owner.get(owner)
                if version is not None and kept is not None and kept[0] == version:
                    found[owner] = kept[1]
                    self._by_owner.move_to_end(owner)
        missing = [owner for owner in versions if owner not in found]
        if not missing:
            return found
        read: dict[str, list[repo.Subscriber]] = {owner: [] for owner in missing}
        for subscriber in repo.subscribers(tx, missing):
            read[subscriber.owner_id].append(subscriber)
        with self._lock:
            self.reads += 1
            for owner, subscribers in read.items():
                version = versions[owner]
                if version is not None:
                    self._by_owner[owner] = (version, subscribers)
                    self._by_owner.move_to_end(owner)
            while len(self._by_owner) > self._kept:
                self._by_owner.popitem(last=False)
        return found | read


class OutboxSink:
    """`EventPublisher` transaction sink: writes one delivery row per (event, webhook) that
    wants it, in the same transaction as the change. Sandbox events never get here."""

    def __init__(self, first_delay: float, scope_check: ScopeCheck = app_holds_scope) -> None:
        self._first_delay_ms = to_ms(first_delay)
        self._scope_check = scope_check
        self.subscribers = SubscribersCache()
        self._lock = threading.Lock()
        # Ids of events that got rows, so the post-commit bus listener wakes the workers
        # only for them (a rolled-back id just lingers until the set is trimmed).
        self._enqueued: set[str] = set()

    def __call__(self, tx: Tx, events: list[Event]) -> None:
        relevant = [e for e in events if not e.is_test and subscribed_names(e.name)]
        if not relevant:
            return
        by_owner = self.subscribers.of(tx, relevant)
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
