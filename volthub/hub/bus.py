"""Two of the brokers (hub.broker.Broker): in one process, and between the processes of a
PostgreSQL deployment by LISTEN/NOTIFY. The third, with Redis between the processes, is
hub.redis_bus.RedisBroker; hub.brokers.open_broker chooses.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import trio

from volthub import metrics
from volthub.hub.broker import Broker, History
from volthub.hub.broker_budgets import Budgets, DatabaseBudgets, LocalBudgets
from volthub.hub.clock import Clock, to_ms
from volthub.hub.presence import ClusterPresence, DatabasePresenceStore, LocalPresence, Presence, ThisProcessOnly
from volthub.hub.publisher import Event, Listener
from volthub.hub.recovery_store import DatabaseRecoveryStore, RecoveryStore
from volthub.persistence import Database, Tx, event_log

log = logging.getLogger(__name__)


class InProcessBroker:
    """One process serves (SQLite): publishing is a direct call to the listeners, and
    everything shared lives in this process's memory."""

    problem: str | None = None

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self.budgets: Budgets = LocalBudgets()

    def publish(self, event: Event) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # one broken listener must not starve the others
                log.exception("event listener failed for %s", event.name)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return _add(self._listeners, listener)

    def add_history(self, listener: History) -> None:
        return None  # nothing was published before this process

    def channel_interest(self, channel_id: str, wanted: bool) -> None:
        return None  # this process hears everything

    def member_interest(self, user_id: str, wanted: bool) -> None:
        return None

    async def prepare(self, channel_ids: Iterable[str]) -> None:
        return None

    def append(self, tx: Tx, events: list[Event], now_ms: int) -> list[Event]:
        return events  # one process: publish order is the order, nothing to log

    async def wait_connected(self) -> None:
        return None

    async def caught_up(self) -> None:
        return None  # delivery is the publishing call itself

    async def run(self) -> None:
        return None

    def presence(self, local: LocalPresence, interval: float) -> Presence:
        return ThisProcessOnly(local)

    def recovery_store(self, window_seconds: float) -> RecoveryStore:
        return RecoveryStore(window_seconds)


def _add(listeners: list[Listener], listener: Listener) -> Callable[[], None]:
    listeners.append(listener)

    def unsubscribe() -> None:
        if listener in listeners:
            listeners.remove(listener)

    return unsubscribe


# --- PostgreSQL: LISTEN/NOTIFY between processes ------------------------------------------------


class ConnectionLost(Exception):
    """The LISTEN connection ended without being asked to."""


@dataclass(frozen=True)
class RelaySettings:
    # Rows older than this are pruned from the event log.
    retention_seconds: float = 600.0
    # A process that starts loads at most this many of the newest rows into the resume buffers.
    warm_rows: int = 50_000
    # On reconnect, rows written this long before the newest one seen are read again too:
    # a row becomes visible at commit, not in the order its position was taken.
    replay_margin_seconds: float = 10.0
    # Channels whose last position is remembered (for dropping duplicates).
    channels: int = 100_000
    reconnect_initial: float = 0.2
    reconnect_max: float = 5.0
    prune_every_seconds: float = 60.0


class PostgresBroker:
    """The broker of a PostgreSQL deployment: every process hears every event once, in order.

    - The publisher stamps events through :meth:`append` inside its transaction: each gets
      the next position (``seq``) of its channel, a row in ``event_log`` and a NOTIFY sent
      at commit. Unstamped events are logged by a task of :meth:`run`, so they cross
      processes the same way; test events (sandbox, `volthub trigger`) are only NOTIFYed,
      never written to the log: nothing of a test is stored, and they are not replayed.
    - Delivery, local events included, comes only from the notifications: each process
      LISTENs on one connection in one thread (``persistence.event_log.listen``) that hands
      payloads to Trio through the run's token. So a process never delivers an event twice
      (no local shortcut plus its own notification), and a channel's events reach every
      listener in commit order.
    - An event whose ``seq`` is not above the last one delivered for its channel is a
      duplicate and dropped; one above it by more than one means events were missed and
      the gap is read back from the log first.
    - A lost connection reconnects with back-off and replays the log past the last row
      seen; a process that starts loads the log's tail into the history listeners (the
      resume buffers) without delivering it.
    - Presence and recovery states are rows of the database; so are the rate-limit budgets
      when `shared_budgets` is given (else each process counts its own).
    """

    problem: str | None = None

    def __init__(
        self,
        database: Database,
        clock: Clock,
        settings: RelaySettings | None = None,
        *,
        shared_budgets: DatabaseBudgets | None = None,
    ) -> None:
        self._database = database
        self._clock = clock
        self.settings = settings or RelaySettings()
        self.budgets: Budgets = shared_budgets or LocalBudgets()
        self._listeners: list[Listener] = []
        self._history: list[History] = []
        self._last_seq: OrderedDict[str, int] = OrderedDict()
        self._last_pos = 0
        self._last_seen_ms = 0
        self._warm = False
        self._prune_due = trio.Event()
        self._pruned_at_ms = 0
        self._outgoing_send, self._outgoing = trio.open_memory_channel["Event"](10_000)
        self.connected = False
        self._connected_event = trio.Event()
        self.backend_pid: int | None = None  # of the LISTEN connection
        self.relayed = 0  # events handed to listeners, for tests and metrics
        # Highest position per channel this process published, and events still waiting to be
        # logged: what `caught_up` waits for.
        self._published_seq: dict[str, int] = {}
        self._unlogged = 0
        self._progress = trio.Event()
        self.duplicates = 0
        self.reconnects = 0

    # ------------------------------------------------------------------ delivery

    def publish(self, event: Event) -> None:
        if event.seq is not None:  # logged and NOTIFYed by its transaction: delivered when heard
            self._await_delivery(event.channel_id, event.seq)
            return
        try:
            self._outgoing_send.send_nowait(event)
            self._unlogged += 1
        except trio.WouldBlock:
            log.error("relay outbox full: dropped unlogged event %s (%s)", event.id, event.name)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return _add(self._listeners, listener)

    def add_history(self, listener: History) -> None:
        """`listener` gets the log's tail at start, per channel (events older than this
        process), not as deliveries."""
        self._history.append(listener)

    def channel_interest(self, channel_id: str, wanted: bool) -> None:
        return None  # every process hears every channel

    def member_interest(self, user_id: str, wanted: bool) -> None:
        return None

    async def prepare(self, channel_ids: Iterable[str]) -> None:
        return None  # every process hears every channel

    async def caught_up(self) -> None:
        """Wait until every event this process has published so far has reached this
        process's listeners (delivery is asynchronous: it comes back through NOTIFY)."""
        while self._unlogged or any(
            self._last_seq.get(channel, 0) < seq for channel, seq in self._published_seq.items()
        ):
            await self._progress.wait()
        self._published_seq.clear()

    def _await_delivery(self, channel_id: str, seq: int) -> None:
        self._published_seq[channel_id] = max(seq, self._published_seq.get(channel_id, 0))

    def _made_progress(self) -> None:
        self._progress.set()
        self._progress = trio.Event()

    # ------------------------------------------------------------------ the publisher

    def append(self, tx: Tx, events: list[Event], now_ms: int) -> list[Event]:
        logged = event_log.append(
            tx, [event_log.NewEntry(e.channel_id, e.id, e.name, event_body(e)) for e in events], now_ms
        )
        return [stamped(event, entry) for event, entry in zip(events, logged, strict=True)]

    # ------------------------------------------------------------------ the service

    async def run(self) -> None:
        """Listen, relay, reconnect; log unstamped events; prune the log. Until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._log_unstamped)
            nursery.start_soon(self._prune)
            await self._keep_listening()

    async def _keep_listening(self) -> None:
        failures = 0
        while True:
            started = trio.current_time()
            try:
                await self._session()
            except Exception as exc:
                self.connected = False
                if trio.current_time() - started > 30:
                    failures = 0
                failures += 1
                delay = min(self.settings.reconnect_max, self.settings.reconnect_initial * 2 ** (failures - 1))
                log.warning("event relay connection lost (%s); reconnecting in %.1f s", exc, delay)
                await trio.sleep(delay)
                self.reconnects += 1
                metrics.BUS_RECONNECTS.inc()

    async def _session(self) -> None:
        token = trio.lowlevel.current_trio_token()
        send, receive = trio.open_memory_channel[str](math.inf)  # the thread never waits
        stop = threading.Event()
        listening = trio.Event()

        # Payloads queue here; the Trio thread is woken once per batch, not per event.
        pending: deque[str] = deque()
        scheduled = threading.Event()

        def drain() -> None:  # in the Trio thread
            scheduled.clear()  # first: a payload queued after this schedules another drain
            while pending:
                send.send_nowait(pending.popleft())

        def from_thread(payload: str) -> None:
            pending.append(payload)
            if not scheduled.is_set():
                scheduled.set()
                try:
                    token.run_sync_soon(drain)
                except trio.RunFinishedError:
                    stop.set()

        def on_listening(backend_pid: int) -> None:
            self.backend_pid = backend_pid
            token.run_sync_soon(listening.set)

        async def listen() -> None:
            try:
                await trio.to_thread.run_sync(
                    event_log.listen, self._database.url, from_thread, on_listening, stop, abandon_on_cancel=True
                )
            finally:
                stop.set()
            raise ConnectionLost("the LISTEN connection returned")

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(listen)
                await listening.wait()
                # Heard from now on; what committed before is read from the log.
                if self._warm:
                    await self._replay()
                else:
                    await self._warm_start()
                self.connected = True
                self._connected_event.set()
                self._made_progress()  # the start's read may have caught up a `caught_up` waiter
                async for payload in receive:
                    await self._heard(payload)
        finally:
            stop.set()
            self.connected = False
            if self._connected_event.is_set():
                self._connected_event = trio.Event()

    async def wait_connected(self) -> None:
        """Until LISTEN is in effect and the log has been caught up with (tests, health)."""
        await self._connected_event.wait()

    async def _warm_start(self) -> None:
        since = to_ms(self._clock.now() - self.settings.retention_seconds)
        rows = await self._database.read(lambda tx: event_log.tail(tx, since, self.settings.warm_rows))
        last = await self._database.read(event_log.last_position)
        by_channel: dict[str, list[Event]] = {}
        for row in rows:
            event = self._note(row)
            if event is not None:
                # Re-inserted: the channels go out in the order of their newest event.
                events = by_channel.pop(row.channel_id, None) or []
                events.append(event)
                by_channel[row.channel_id] = events
        for channel_id, events in by_channel.items():
            for listener in self._history:
                call_history(listener, channel_id, events)
        self._last_pos = max(self._last_pos, last)
        self._last_seen_ms = max(self._last_seen_ms, to_ms(self._clock.now()))
        self._warm = True

    async def _replay(self) -> None:
        margin = to_ms(self.settings.replay_margin_seconds)
        pos, since = self._last_pos, self._last_seen_ms - margin
        batch = 10_000
        while True:
            rows = await self._database.read(lambda tx: event_log.after(tx, pos, since, batch))
            for row in rows:
                await self._deliver(row)
            if len(rows) < batch:
                return
            pos, since = rows[-1].pos, to_ms(self._clock.now()) + margin  # page on by position only

    async def _heard(self, payload: str) -> None:
        try:
            parsed = event_log.parse_notification(payload)
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed relay notification: %.200s", payload)
            return
        if isinstance(parsed, event_log.TransientEvent):
            self._hand_over_transient(parsed)
            return
        if isinstance(parsed, int):  # too large for NOTIFY: read its row
            pos = parsed
            row = await self._database.read(lambda tx: event_log.by_position(tx, pos))
            if row is None:
                log.warning("relay: event log row %d is gone (pruned?)", pos)
                return
            parsed = row
        await self._deliver(parsed)

    async def _deliver(self, row: event_log.LoggedEvent) -> None:
        last = self._last_seq.get(row.channel_id)
        if last is not None and row.seq > last + 1:
            missed = await self._database.read(lambda tx: event_log.channel_range(tx, row.channel_id, last, row.seq))
            for earlier in missed:
                self._hand_over(earlier)
        self._hand_over(row)

    def _hand_over(self, row: event_log.LoggedEvent) -> None:
        event = self._note(row)
        if event is None:
            self.duplicates += 1
            return
        self.relayed += 1
        observe_bus_lag(row.created_at / 1000)
        if row.created_at - self._pruned_at_ms >= to_ms(self.settings.prune_every_seconds):
            self._pruned_at_ms = row.created_at
            self._prune_due.set()
        for listener in list(self._listeners):
            call_listener(listener, event)
        self._made_progress()

    def _hand_over_transient(self, item: event_log.TransientEvent) -> None:
        event = _from_body(item.event_id, item.name, item.channel_id, item.body, None)
        self.relayed += 1
        for listener in list(self._listeners):
            call_listener(listener, event)
        self._made_progress()

    def _note(self, row: event_log.LoggedEvent) -> Event | None:
        """Record `row` as seen; its Event, or None when it is a duplicate."""
        self._last_pos = max(self._last_pos, row.pos)
        self._last_seen_ms = max(self._last_seen_ms, row.created_at)
        last = self._last_seq.get(row.channel_id)
        if last is not None and row.seq <= last:
            return None
        self._last_seq[row.channel_id] = row.seq
        self._last_seq.move_to_end(row.channel_id)
        while len(self._last_seq) > self.settings.channels:
            self._last_seq.popitem(last=False)
        return event_of_row(row)

    async def _log_unstamped(self) -> None:
        async for event in self._outgoing:
            now_ms = to_ms(self._clock.now())
            try:
                if event.is_test:
                    entry = event_log.NewEntry(event.channel_id, event.id, event.name, event_body(event))
                    if not await self._database.write(lambda tx, e=entry: event_log.notify_transient(tx, e)):  # type: ignore[misc]
                        log.warning("relay: test event %s (%s) is too large to relay; dropped", event.id, event.name)
                    continue
                [logged] = await self._database.write(lambda tx, e=event: self.append(tx, [e], now_ms))  # type: ignore[misc]
                if logged.seq is not None:
                    self._await_delivery(logged.channel_id, logged.seq)
            except Exception:
                log.exception("relay: could not log event %s (%s); it is not delivered", event.id, event.name)
            finally:
                self._unlogged -= 1
                self._made_progress()

    async def _prune(self) -> None:
        # Woken by traffic (`_hand_over`), not by a timer: an idle log does not grow, and a
        # periodic deadline would make MockClock tests hop through time in small steps.
        while True:
            await self._prune_due.wait()
            self._prune_due = trio.Event()
            before = to_ms(self._clock.now() - self.settings.retention_seconds)
            try:
                while await self._database.write(lambda tx: event_log.prune(tx, before)) >= 10_000:
                    await trio.sleep(0)
            except Exception:
                log.exception("relay: pruning the event log failed; trying again later")

    # ------------------------------------------------------------------ shared stores

    def presence(self, local: LocalPresence, interval: float) -> Presence:
        return ClusterPresence(DatabasePresenceStore(self._database), self._clock, local, interval)

    def recovery_store(self, window_seconds: float) -> RecoveryStore:
        return DatabaseRecoveryStore(window_seconds, self._clock, self._database)


# mypy holds each class to the interface here.
_: type[Broker] = InProcessBroker
_ = PostgresBroker


def observe_bus_lag(committed_at: float) -> None:
    """An event arrived from the broker: how long after its commit (epoch seconds).
    Every relay between processes (PostgreSQL's, a Redis broker's) reports here."""
    metrics.BUS_LAG.observe(max(0.0, time.time() - committed_at))


def event_body(event: Event) -> dict[str, Any]:
    return {"d": event.data, "t": event.timestamp, "x": event.is_test}


def stamped(event: Event, entry: event_log.LoggedEvent) -> Event:
    """`event` as its transaction logged it: its channel position and the channel owner's
    webhook subscriptions version."""
    return replace(event, seq=entry.seq, webhooks_version=entry.webhooks_version)


def event_of_row(row: event_log.LoggedEvent) -> Event:
    return _from_body(row.event_id, row.name, row.channel_id, row.body, row.seq)


def _from_body(event_id: str, name: str, channel_id: str, body: dict[str, Any], seq: int | None) -> Event:
    return Event(event_id, name, channel_id, body["d"], body["t"], bool(body.get("x")), seq)


def call_listener(listener: Listener, event: Event) -> None:
    try:
        listener(event)
    except Exception:  # one broken listener must not starve the others
        log.exception("event listener failed for %s", event.name)


def call_history(listener: History, channel_id: str, events: list[Event]) -> None:
    try:
        listener(channel_id, events)
    except Exception:  # one broken listener must not starve the others
        log.exception("resume backfill failed for channel %s", channel_id)
