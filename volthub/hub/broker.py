"""The broker: how an event published in one process reaches the listeners of every process,
and where the processes of a deployment keep what they share.

One interface, three implementations, chosen once from the settings (hub.brokers.open_broker):

- `hub.bus.InProcessBroker`: one process (SQLite). Publishing is a direct call; the stores
  live in this process's memory.
- `hub.bus.PostgresBroker`: several processes on one PostgreSQL database. Events are logged
  in their transaction and every process hears every one by LISTEN/NOTIFY; presence,
  recovery states and shared budgets are rows of the database.
- `hub.redis_bus.RedisBroker`: the same log, with Redis (or Valkey) between the processes,
  each subscribed only to the channels it serves; presence, recovery states and shared
  budgets are Redis keys (budgets fall back to the database while Redis does not answer).

`Broker` is a `typing.Protocol`, not an ABC: the three share no state or code path worth
inheriting, and a structural type lets test doubles stand in without subclassing. Each
implementation module asserts its class against it (``_: type[Broker] = RedisBroker``), so
mypy checks every one statically.

Listeners must not block: they hand the event to bounded queues with `send_nowait`, so one
slow consumer never delays another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from volthub.hub.broker_budgets import Budgets
from volthub.hub.presence import LocalPresence, Presence
from volthub.hub.publisher import Event, Listener
from volthub.hub.recovery_store import RecoveryStore
from volthub.persistence import Tx

# A channel's recent events, oldest first, as this process starts hearing the channel.
History = Callable[[str, list[Event]], None]

__all__ = ["Broker", "History", "Listener"]


class Broker(Protocol):
    # Why events from other processes may not arrive now (`/healthz` answers 503 with it);
    # None while they do.
    problem: str | None
    # The rate-limit budgets: in this process, or shared by every process.
    budgets: Budgets

    # ------------------------------------------------------------------ delivery

    def publish(self, event: Event) -> None:
        """After its commit: hand `event` to every listener of every process, once, in its
        channel's order."""

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener of every event delivered here; returns the function that removes it."""

    def add_history(self, listener: History) -> None:
        """`listener(channel_id, events)` gets a channel's recent events (oldest first) when
        this process starts hearing the channel: the fan-out's resume buffers, so a
        `Last-Event-ID` or a recovery offset handed out by one process resumes on any other.
        Register before `run`. Never called where one process serves."""

    def channel_interest(self, channel_id: str, wanted: bool) -> None:
        """The fan-out's first subscriber of a channel came (True), or its last left. A
        broker with per-channel interest subscribes only to what is served here; a no-op
        where every process hears everything."""

    def member_interest(self, user_id: str, wanted: bool) -> None:
        """A member's first Events API connection here (True), or their last: what follows
        the person rather than a channel (badge changes) is heard here meanwhile."""

    async def prepare(self, channel_ids: Iterable[str]) -> None:
        """Until this process hears `channel_ids` and has their recent events buffered: call
        it before subscribing a client that may resume. At once where every process hears
        every channel."""

    # ------------------------------------------------------------------ the publisher

    def append(self, tx: Tx, events: list[Event], now_ms: int) -> list[Event]:
        """The publisher's event log: `events` logged in `tx` and returned stamped with their
        channel positions (`seq`); the same list, unlogged, where one process serves."""

    # ------------------------------------------------------------------ health

    async def wait_connected(self) -> None:
        """Until this process hears the other processes and has caught up with what they
        published before (start-up, tests)."""

    async def caught_up(self) -> None:
        """Until every event published here so far has reached this process's listeners
        (delivery between processes is asynchronous)."""

    async def run(self) -> None:
        """Background service: connect, relay, reconnect; until cancelled. Returns at once
        where one process serves."""

    # ------------------------------------------------------------------ shared stores

    def presence(self, local: LocalPresence, interval: float) -> Presence:
        """Who is connected to a channel over every process: `local` (this process's
        fan-out) added up with what the other processes publish every `interval` seconds;
        `local` alone where one process serves."""

    def recovery_store(self, window_seconds: float) -> RecoveryStore:
        """Where dropped Socket.IO connections' states wait `window_seconds` for their
        clients, read by whichever process a client reconnects to."""
