"""Fan-out of platform events to Events API connections.

The bus hands every event to :meth:`Fanout.publish` (a bus listener: it never blocks).
For each subscription of the event's channel that may see it, the event is encoded once
per *wire format* (Socket.IO frames for one namespace, an SSE frame, ...) and the same
encoded object is offered to every subscriber of that format. A subscriber whose bounded
queue is full answers False; it is then unsubscribed and told to disconnect with a reason
(``overflow``), never waited on, so one slow client cannot delay anyone else.

Who sees what: a subscription is either the channel *owner*'s (a connection
authenticated as the channel's user) and gets every Events API event of the channel, or a
*public* one (anonymous, or someone else's channel) and gets only the catalogue's public
events. Sandbox events (``is_test``) go to owners only: synthetic alerts are for the
developer testing an integration, not for the channel's audience.

Also here:
- a bounded per-channel *resume buffer* of recent events, for SSE ``Last-Event-ID``;
- *presence*: who is connected to a channel (``snapshot``), for the chat viewers list.

Everything runs in the Trio thread; there is no locking and no awaiting.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from volthub import metrics
from volthub.hub.publisher import Event
from volthub.protocol import catalogue

log = logging.getLogger(__name__)

# Encodes an event for one wire format; called at most once per event and format.
Encoder = Callable[[Event], Any]


class Subscriber(Protocol):
    """One connection's delivery end; ``deliver`` and ``overflow`` must not block."""

    wire: str  # the wire format (a key of the encoders) this subscriber takes

    def deliver(self, payload: Any) -> str | None:
        """Queue an encoded event: the transport it went to (websocket, polling or sse, what
        the delivery is counted under); None when the queue is full. Answering the transport
        here spares the fan-out a second call per delivery to learn it."""

    def overflow(self, reason: str) -> None:
        """The queue overflowed: disconnect, telling the client ``reason``."""

    def note_lag(self, since: float) -> None:
        """Observe the time from ``since`` (an event's commit, epoch seconds) to the write
        of what was just delivered (``volthub_events_lag_seconds``)."""


@dataclass(eq=False, slots=True)
class Subscription:
    subscriber: Subscriber
    channel_id: str
    owner: bool  # the channel's own user: private events too
    names: frozenset[str] | None = None  # only these event names (SSE `events` filter)
    user_id: str | None = None  # for presence: None is an anonymous connection
    viewer: bool = True  # counted by presence (Socket.IO connections; not SSE streams)

    def wants(self, event: Event) -> bool:
        return self.admits(event.name, public_sees(event))

    def admits(self, name: str, public: bool) -> bool:
        """Whether it takes an event named ``name`` that the public sees (``public``) or not."""
        return (self.names is None or name in self.names) and (public or self.owner)


def public_sees(event: Event) -> bool:
    """A channel's public subscribers (anonymous, or someone else's) get ``event``: only the
    catalogue's public events, and never sandbox ones."""
    return not event.is_test and catalogue.is_public(event.name)


@dataclass(slots=True)
class _Channel:
    subscriptions: dict[Subscription, None] = field(default_factory=dict)  # ordered set
    viewers: Counter[str] = field(default_factory=Counter)  # user id -> connections
    anonymous: int = 0


@dataclass(frozen=True, slots=True)
class Resume:
    """What a reconnecting client missed: ``events`` after its last id, oldest first.

    ``found`` is False when that id is no longer (or never was) in the buffer; ``events``
    is then the whole buffer, and the client may have missed older events.
    """

    events: list[Event]
    found: bool


class Fanout:
    def __init__(
        self,
        *,
        resume_size: int = 500,
        resume_channels: int = 10_000,
        interest: Callable[[str, bool], None] | None = None,
    ) -> None:
        self._encoders: dict[str, Encoder] = {}
        self._channels: dict[str, _Channel] = {}
        self._by_subscriber: dict[Subscriber, list[Subscription]] = {}
        self._resume_size = resume_size
        self._resume_channels = resume_channels
        # channel id -> its recent events; least recently active channel first.
        self._recent: OrderedDict[str, deque[Event]] = OrderedDict()
        # Called when a channel's viewers change (presence across processes listens).
        self.presence_listeners: list[Callable[[], None]] = []
        # Told (channel id, True) when a channel gets its first subscription here and
        # (channel id, False) when its last one goes: a broker with per-channel interest
        # subscribes only to what is served here (Broker.channel_interest).
        self.interest = interest
        self.delivered = 0  # offers accepted, for tests and metrics
        self.overflowed = 0

    # ------------------------------------------------------------------ wiring

    def register_wire(self, wire: str, encoder: Encoder) -> None:
        self._encoders[wire] = encoder

    def has_wire(self, wire: str) -> bool:
        return wire in self._encoders

    # ------------------------------------------------------------------ subscriptions

    def subscribe(
        self,
        subscriber: Subscriber,
        channel_id: str,
        *,
        owner: bool,
        names: Iterable[str] | None = None,
        user_id: str | None = None,
        viewer: bool = True,
    ) -> Subscription:
        if subscriber.wire not in self._encoders:
            raise ValueError(f"no encoder for wire format {subscriber.wire!r}")
        subscription = Subscription(
            subscriber, channel_id, owner, None if names is None else frozenset(names), user_id, viewer
        )
        channel = self._channels.get(channel_id)
        if channel is None:
            channel = self._channels[channel_id] = _Channel()
            if self.interest is not None:
                self.interest(channel_id, True)
        channel.subscriptions[subscription] = None
        if viewer:
            if user_id is None:
                channel.anonymous += 1
            else:
                channel.viewers[user_id] += 1
            self._presence_changed()
        self._by_subscriber.setdefault(subscriber, []).append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        channel = self._channels.get(subscription.channel_id)
        if channel is None or subscription not in channel.subscriptions:
            return
        del channel.subscriptions[subscription]
        if subscription.viewer:
            if subscription.user_id is None:
                channel.anonymous -= 1
            else:
                channel.viewers[subscription.user_id] -= 1
                if channel.viewers[subscription.user_id] <= 0:
                    del channel.viewers[subscription.user_id]
            self._presence_changed()
        if not channel.subscriptions:
            del self._channels[subscription.channel_id]
            if self.interest is not None:
                self.interest(subscription.channel_id, False)
        mine = self._by_subscriber.get(subscription.subscriber)
        if mine is not None:
            if subscription in mine:
                mine.remove(subscription)
            if not mine:
                del self._by_subscriber[subscription.subscriber]

    def remove(self, subscriber: Subscriber) -> None:
        """Drop every subscription of ``subscriber`` (its connection closed)."""
        for subscription in list(self._by_subscriber.get(subscriber, ())):
            self.unsubscribe(subscription)

    def subscriptions_of(self, subscriber: Subscriber) -> list[Subscription]:
        return list(self._by_subscriber.get(subscriber, ()))

    def subscriber_count(self, channel_id: str | None = None) -> int:
        if channel_id is None:
            return len(self._by_subscriber)
        channel = self._channels.get(channel_id)
        return len(channel.subscriptions) if channel else 0

    # ------------------------------------------------------------------ presence

    def _presence_changed(self) -> None:
        for listener in self.presence_listeners:
            listener()

    def active_channels(self) -> list[str]:
        """Channels with at least one subscription here (presence across processes)."""
        return list(self._channels)

    def snapshot(self, channel_id: str) -> tuple[list[str], int]:
        """(ids of signed-in users connected to the channel, anonymous connections)."""
        channel = self._channels.get(channel_id)
        if channel is None:
            return [], 0
        return list(channel.viewers), channel.anonymous

    # ------------------------------------------------------------------ delivery

    def publish(self, event: Event) -> None:
        """The bus listener: buffer the event, then offer it to its channel's subscribers."""
        if not catalogue.delivered_over_events_api(event.name):
            return  # webhook-only events (user.*, channel.subscription.end, ...)
        self._remember(event)
        channel = self._channels.get(event.channel_id)
        if channel is None:
            return
        encoded: dict[str, Any] = {}
        full: list[Subscription] = []
        counted: dict[str, int] = {}  # deliveries by transport, counted once per event
        last: Subscriber | None = None
        # Who may see the event is decided once for the event, not once per subscription.
        name, public = event.name, public_sees(event)
        # A snapshot: nothing below unsubscribes, but a subscriber's deliver might.
        for subscription in tuple(channel.subscriptions):
            # `admits`, inlined: this loop runs once per delivery.
            names = subscription.names
            if (names is not None and name not in names) or not (public or subscription.owner):
                continue
            subscriber = subscription.subscriber
            wire = subscriber.wire
            payload = encoded.get(wire)
            if payload is None:
                payload = encoded[wire] = self._encoders[wire](event)
            transport = subscriber.deliver(payload)
            if transport is not None:
                counted[transport] = counted.get(transport, 0) + 1
                last = subscriber
            else:
                full.append(subscription)
        if last is not None:
            self.delivered += sum(counted.values())
            metrics.count_deliveries(counted)
            # One lag sample per event: the last connection offered it is written last.
            last.note_lag(event.committed_at)
        for subscription in full:
            self._overflow(subscription.subscriber)

    def _overflow(self, subscriber: Subscriber) -> None:
        if subscriber not in self._by_subscriber:
            return  # already dropped (it had two subscriptions on this channel)
        self.overflowed += 1
        metrics.EVENTS_SLOW_CONSUMERS.inc()
        self.remove(subscriber)
        try:
            subscriber.overflow("slow consumer: the connection's outbound queue is full")
        except Exception:  # one broken subscriber must not stop delivery to others
            log.exception("overflow handler failed")

    # ------------------------------------------------------------------ resume buffer

    def remember(self, event: Event) -> None:
        """Buffer an event for resume without delivering it."""
        if catalogue.delivered_over_events_api(event.name):
            self._remember(event)

    def _remember(self, event: Event) -> None:
        if self._resume_size <= 0:
            return
        recent = self._recent.get(event.channel_id)
        if recent is not None and event.seq is not None and recent:
            newest = recent[-1].seq
            if newest is not None and event.seq <= newest:
                return  # already buffered (positions of a channel only grow)
        if recent is None:
            recent = self._recent[event.channel_id] = deque(maxlen=self._resume_size)
            while len(self._recent) > self._resume_channels:
                self._recent.popitem(last=False)
        else:
            self._recent.move_to_end(event.channel_id)
        recent.append(event)

    def replace_recent(self, channel_id: str, events: list[Event]) -> None:
        """Make ``events`` (oldest first) the channel's resume buffer: the broker fills it
        when this process starts hearing the channel (Broker.add_history)."""
        if self._resume_size <= 0:
            return
        recent = deque((e for e in events if catalogue.delivered_over_events_api(e.name)), maxlen=self._resume_size)
        if not recent and channel_id not in self._recent:
            return  # nothing to buffer: no entry to count against `resume_channels`
        self._recent[channel_id] = recent
        self._recent.move_to_end(channel_id)
        while len(self._recent) > self._resume_channels:
            self._recent.popitem(last=False)

    def since(self, channel_id: str, last_event_id: str | None) -> Resume:
        """The buffered events of ``channel_id`` after ``last_event_id``.

        Call it in the same synchronous step as ``subscribe`` (no await between), so an
        event is either in the returned list or delivered live, never both or neither.

        On PostgreSQL every process buffers every channel's events in the same order (the
        bus relay delivers them by channel position and backfills a starting process from
        the event log), so an id handed out by one process resumes on any other.
        """
        recent = list(self._recent.get(channel_id, ()))
        if last_event_id is None:
            return Resume([], True)
        for index in range(len(recent) - 1, -1, -1):
            if recent[index].id == last_event_id:
                return Resume(recent[index + 1 :], True)
        return Resume(recent, False)
