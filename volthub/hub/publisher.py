"""Platform events: the envelope, and the one way to publish them.

A state change and the events it causes are written in one transaction
(`EventPublisher.write`): transaction sinks (the webhook outbox) see the events inside that
transaction, and only after the commit are they handed to the bus. So an acknowledged
change always has its events, and no event describes a change that was rolled back.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any, Protocol, TypeVar

import orjson

from volthub import metrics
from volthub.hub.clock import Clock, iso8601, to_ms
from volthub.persistence import Database, Tx

T = TypeVar("T")


@dataclass(frozen=True)
class Event:
    id: str
    name: str
    channel_id: str
    data: dict[str, Any]
    timestamp: str
    is_test: bool = False
    # Position in its channel's event log (PostgreSQL): commit order, the same in every
    # process. None on SQLite (one process: publish order is the order) and before stamping.
    seq: int | None = None
    # The version of the channel owner's webhook subscriptions in the transaction that logged
    # the event (PostgreSQL; None elsewhere): the webhook outbox reads the subscribers again
    # only when it moved.
    webhooks_version: int | None = None

    def envelope(self) -> dict[str, Any]:
        """The Events API envelope: the event's name, its data and its timestamp."""
        return {"event": self.name, "data": self.data, "timestamp": self.timestamp}

    @cached_property
    def envelope_json(self) -> bytes:
        """Encoded once per event; every subscriber gets the same bytes."""
        return orjson.dumps(self.envelope())

    @cached_property
    def data_json(self) -> bytes:
        return orjson.dumps(self.data)

    @cached_property
    def committed_at(self) -> float:
        """Its `timestamp` (taken as its transaction began) in epoch seconds: where the
        fan-out lag is measured from."""
        return datetime.fromisoformat(self.timestamp).timestamp()


@dataclass
class Emitter:
    """Collects the events a transaction causes, stamped with the transaction's time."""

    now_ms: int
    events: list[Event] = field(default_factory=list)

    def emit(self, channel_id: str, name: str, data: dict[str, Any], *, is_test: bool = False) -> Event:
        event = Event(
            id=str(uuid.uuid4()),
            name=name,
            channel_id=channel_id,
            data=data,
            timestamp=iso8601(self.now_ms),
            is_test=is_test,
        )
        self.events.append(event)
        return event


TransactionSink = Callable[[Tx, list[Event]], None]
Listener = Callable[[Event], None]


class Bus(Protocol):
    """Where the publisher hands events after the commit, and its services listen: the
    part of the broker (hub.broker.Broker) that the publisher's users need."""

    def publish(self, event: Event) -> None: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns the function that removes it."""


class EventLog(Protocol):
    """Where events are logged in their transaction, for other processes (the broker's
    `append`)."""

    def append(self, tx: Tx, events: list[Event], now_ms: int) -> list[Event]:
        """Log `events`; return them stamped with their channel positions (`seq`), or the
        same list where nothing is logged (one process)."""


class EventPublisher:
    def __init__(self, database: Database, bus: Bus, clock: Clock, event_log: EventLog | None = None) -> None:
        self._database = database
        self._bus = bus
        self._clock = clock
        self._log = event_log
        self._sinks: list[TransactionSink] = []

    @property
    def bus(self) -> Bus:
        return self._bus

    def add_transaction_sink(self, sink: TransactionSink) -> None:
        """Run `sink` inside every publishing transaction (the webhook outbox uses it)."""
        self._sinks.append(sink)

    async def write(self, change: Callable[[Tx, Emitter], T], *, order: str | None = None) -> T:
        """Apply `change` and its events atomically, then publish the events. `order`: as
        for `Database.write` (a channel actor passes its channel)."""
        emitter = Emitter(now_ms=to_ms(self._clock.now()))

        def transaction(tx: Tx) -> T:
            emitter.events.clear()  # a keyed write may run again: only the last run's events count
            result = change(tx, emitter)
            if emitter.events:
                if self._log is not None:  # stamped first: sinks and the bus see `seq`
                    emitter.events = self._log.append(tx, emitter.events, emitter.now_ms)
                for sink in self._sinks:
                    sink(tx, emitter.events)
            return result

        result = await self._database.write(transaction, order=order)
        for event in emitter.events:
            published(event.name)
            self._bus.publish(event)
        return result

    def publish_ephemeral(self, channel_id: str, name: str, data: dict[str, Any], *, publish: bool = True) -> Event:
        """Test events (sandbox, `volthub trigger`): the same delivery pipeline, never stored.
        On PostgreSQL the bus relays them by NOTIFY alone, without an event log row.
        `publish=False` only makes the event (for a test sent to webhooks alone)."""
        emitter = Emitter(now_ms=to_ms(self._clock.now()))
        event = emitter.emit(channel_id, name, data, is_test=True)
        published(event.name)
        if publish:
            self._bus.publish(event)
        return event


_PUBLISHED: dict[str, Any] = {}


def published(name: str) -> None:
    """Count one published event (`volthub_events_published_total{event}`)."""
    child = _PUBLISHED.get(name)
    if child is None:
        child = _PUBLISHED[name] = metrics.EVENTS_PUBLISHED.labels(name)
    child.inc()
