"""The Redis (or Valkey) broker: events between processes with per-channel interest.

PostgreSQL stays the system of record. The publisher logs each event in its own transaction
(`append`: the channel's next position ``seq`` and a row in ``event_log``, no NOTIFY); after
the commit :meth:`RedisBroker.publish` hands it to this process's listeners at once and queues
it for Redis, where a sender task appends it to the channel's stream (trimmed to the resume
buffer's length and to the log's retention) and publishes it on the channel's subject.
While Redis is unreachable the queue waits and goes out in order when it returns; writes
and webhooks never wait for the broker.

A process subscribes to a channel's subject only while something here needs the channel:
the fan-out reports its first and last subscriber of a channel (:meth:`channel_interest`),
and a subject nobody holds is unsubscribed from
``unsubscribe_after_seconds`` later. Before a client subscribes, :meth:`prepare` waits until
the subscription is in effect and the channel's recent history is in the resume buffer
(read from the channel's stream, or from the PostgreSQL log when the stream does not reach
the channel's current position). So a ``Last-Event-ID`` or a recovery offset handed out by
one process resumes on any other, exactly, and a history read is bounded by the buffer.

Delivery order and duplicates: a channel this process follows has a baseline (its position
when the subscription began); an event at or below it is a duplicate and dropped, one more
than one above it means events were missed, and the gap is read back from the log first
(a position is taken under the channel's row lock, so every smaller one has committed).
Every delivered id is remembered a while too, so an event published here and heard back is
delivered once.
An event logged by a publisher that died before handing it to Redis is found in the log
by every follower's sweeper (:mod:`volthub.hub.redis_sweeper`) without waiting for the
channel's next event.

Subjects: a channel's events go to its channel subject; what follows a person rather than a
channel goes to that person's subject too (badge changes, held while the member has Events
API connections here); a revoked grant goes to the broadcast subject every process holds
(every process may have the grant cached). With ``redis_cluster_nodes`` the subjects are
sharded pub/sub channels (SSUBSCRIBE/SPUBLISH): a channel's traffic stays on the shard that
owns its slot, and its stream shares that slot (a hash tag on the channel id).

After a lost connection every held subject is subscribed again in batches (one command per
batch, not a round trip per channel) and each followed channel is caught up from the log.
While subscriptions are lost, :attr:`problem` says so (``/healthz`` answers 503 with it).

Presence and recovery states are Redis keys too, and so are the shared rate-limit budgets,
which are counted in the database while Redis does not answer.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
import trio

from volthub import metrics
from volthub.hub.broker import Broker, History
from volthub.hub.broker_budgets import Budgets, DatabaseBudgets, LocalBudgets, RedisBudgets
from volthub.hub.bus import call_history, call_listener, event_body, event_of_row, observe_bus_lag, stamped
from volthub.hub.clock import Clock, to_ms
from volthub.hub.presence import ClusterPresence, LocalPresence, Presence, RedisPresenceStore
from volthub.hub.publisher import Event, Listener
from volthub.hub.recovery_store import RecoveryStore, RedisRecoveryStore
from volthub.hub.redis_client import BROADCAST, PREFIX, channel_subject, make_client, stream_key, user_subject
from volthub.hub.redis_sweeper import Sweeper
from volthub.persistence import Database, Tx, event_log

log = logging.getLogger(__name__)
# Events every process must hear (each keeps a cache of grants).
_BROADCAST_NAMES = frozenset({"user.authorization.revoke"})
# Events that follow a person: delivered to the member's subject too (data.userId).
_PERSONAL_NAMES = frozenset({"internal.member.badges"})


def _channel_of(subject: str) -> str | None:
    if subject.endswith("}:ev") and subject != BROADCAST:
        return subject[len(PREFIX) + 1 : -4]
    return None


def encode(event: Event) -> bytes:
    return orjson.dumps([event.id, event.name, event.channel_id, event.seq, event.timestamp, event.is_test, event.data])


def decode(raw: bytes | str) -> Event:
    event_id, name, channel_id, seq, timestamp, is_test, data = orjson.loads(raw)
    return Event(event_id, name, channel_id, data, timestamp, bool(is_test), seq)


@dataclass(frozen=True)
class RedisSettings:
    url: str = ""
    cluster_nodes: tuple[str, ...] = ()
    # A CA certificate file (PEM) the server's TLS certificate is verified with (rediss://,
    # or TLS to cluster nodes); empty: the system's trusted CAs.
    ca_file: str = ""
    # A subject nobody here holds is unsubscribed from this long after the last release.
    unsubscribe_after_seconds: float = 5.0
    # Events kept per channel stream, and the most a resume reads back (the resume buffer).
    history: int = 500
    # A channel's stream expires this long after its last event (the log's retention).
    retention_seconds: float = 600.0
    # Subjects per SUBSCRIBE command, events per pipeline.
    batch: int = 500
    # Local events waiting for the broker; past this the oldest are left to the log (a
    # follower reads them back when the channel's next event shows the gap).
    outbox_limit: int = 200_000
    # How long `prepare` waits for a subscription before letting the client in regardless.
    prepare_timeout: float = 5.0
    # Idle connections are checked this often, so a broker that went away is noticed.
    ping_seconds: float = 2.0
    reconnect_initial: float = 0.2
    # Logged events that never reached Redis (a publisher killed after its commit) are
    # looked for this often, once older than the grace period (hub/redis_sweeper.py). 0: off.
    sweep_seconds: float = 5.0
    sweep_grace_seconds: float = 2.0
    reconnect_max: float = 5.0


class RedisBroker:
    """The broker of a PostgreSQL deployment with Redis between the processes (see the
    module doc). Rate-limit budgets are kept in Redis when `shared_budgets` is given (the
    database's, counted in while Redis does not answer); else each process counts its own."""

    def __init__(
        self,
        database: Database,
        clock: Clock,
        settings: RedisSettings,
        *,
        shared_budgets: DatabaseBudgets | None = None,
    ) -> None:
        if not (settings.url or settings.cluster_nodes):
            raise ValueError("the Redis broker needs a URL or cluster nodes")
        self._database = database
        self._clock = clock
        self.settings = settings
        self.cluster = bool(settings.cluster_nodes)
        self.budgets: Budgets = RedisBudgets(self, shared_budgets) if shared_budgets else LocalBudgets()
        self._listeners: list[Listener] = []
        self._history: list[History] = []
        # Events waiting for Redis, in publish order.
        self._outbox: deque[Event] = deque()
        self._outbox_wake = trio.Event()
        self._unlogged_send, self._unlogged = trio.open_memory_channel["Event"](10_000)
        self._unlogged_count = 0
        # Everything delivered here goes through one queue, one task: events (local or
        # heard) and subscriptions that took effect, in the order they happened.
        self._inbound_send, self._inbound = trio.open_memory_channel[tuple[str, Any]](math.inf)
        self._local_pending = 0
        self._progress = trio.Event()
        # Interest: subject -> holders; a subject whose holders went to 0 -> when (trio time).
        self._holds: dict[str, int] = {}
        self._idle_since: dict[str, float] = {}
        self._subscribed: set[str] = set()
        self._ready: dict[str, trio.Event] = {}
        self._changed = trio.Event()
        # Channel -> position of the last event delivered (channels followed here).
        self._followed: dict[str, int] = {}
        self._delivered_ids: OrderedDict[str, None] = OrderedDict()
        self._client: Any = None  # the session's client (streams), None while disconnected
        self.problem: str | None = "the event broker is not connected yet"
        self.connected = False
        self._connected_event = trio.Event()
        self.relayed = 0
        self.duplicates = 0
        self.reconnects = 0
        self.sent = 0
        self.gaps_read = 0
        self.sweeper = Sweeper(self, database, clock, settings.sweep_seconds, settings.sweep_grace_seconds)

    # ------------------------------------------------------------------ delivery

    def publish(self, event: Event) -> None:
        # A test event is stored nowhere: no log row, no stream entry; other processes hear it
        # by pub/sub alone, and it takes no place in the channel's sequence.
        if event.seq is None and not event.is_test:  # unstamped: logged first, by `_log_unstamped`
            try:
                self._unlogged_send.send_nowait(event)
                self._unlogged_count += 1
            except trio.WouldBlock:
                log.error("broker outbox full: dropped unlogged event %s (%s)", event.id, event.name)
            return
        self._outbox.append(event)
        if len(self._outbox) > self.settings.outbox_limit:
            dropped = self._outbox.popleft()
            log.warning("broker outbox full: %s left to the event log", dropped.id)
        self._outbox_wake.set()
        self._local_pending += 1
        self._inbound_send.send_nowait(("local", event))

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def add_history(self, listener: History) -> None:
        """`listener(channel_id, events)` gets a channel's recent events when this process
        starts following it, and `(channel_id, [])` when it stops (its buffer would no
        longer be complete)."""
        self._history.append(listener)

    def append(self, tx: Tx, events: list[Event], now_ms: int) -> list[Event]:
        """The publisher's event log: stamped and written in the transaction, no NOTIFY."""
        logged = event_log.append(
            tx,
            [event_log.NewEntry(e.channel_id, e.id, e.name, event_body(e)) for e in events],
            now_ms,
            notify=False,
        )
        return [stamped(event, entry) for event, entry in zip(events, logged, strict=True)]

    async def caught_up(self) -> None:
        """Until every event published here so far has reached this process's listeners."""
        while self._local_pending or self._unlogged_count:
            await self._progress.wait()

    async def wait_connected(self) -> None:
        await self._connected_event.wait()

    async def sent_all(self) -> None:
        """Until the broker has taken every event published here (tests)."""
        while self._outbox or self._unlogged_count:
            await self._progress.wait()

    # ------------------------------------------------------------------ interest

    def hold(self, subject: str) -> None:
        count = self._holds.get(subject, 0) + 1
        self._holds[subject] = count
        if count == 1:
            self._idle_since.pop(subject, None)
            self._changed.set()  # even when subscribed: it may be on its way out

    def release(self, subject: str) -> None:
        count = self._holds.get(subject, 0) - 1
        if count > 0:
            self._holds[subject] = count
            return
        self._holds.pop(subject, None)
        self._idle_since[subject] = trio.current_time()
        self._changed.set()

    def channel_interest(self, channel_id: str, wanted: bool) -> None:
        """The fan-out's hook: its first subscriber of a channel came, or its last left."""
        (self.hold if wanted else self.release)(channel_subject(channel_id))

    def member_interest(self, user_id: str, wanted: bool) -> None:
        """The connection registry's hook: a member's first connection here, or last."""
        (self.hold if wanted else self.release)(user_subject(user_id))

    async def prepare(self, channel_ids: Iterable[str]) -> None:
        """Until this process hears `channel_ids` and their recent history is buffered (call
        before subscribing a client that resumes). Gives up after `prepare_timeout` (the
        broker is down: the client is let in, `/healthz` tells)."""
        subjects = [channel_subject(channel_id) for channel_id in channel_ids]
        for subject in subjects:
            self.hold(subject)
        try:
            with trio.move_on_after(self.settings.prepare_timeout):
                for subject in subjects:
                    await self._ready_event(subject).wait()
        finally:
            for subject in subjects:
                self.release(subject)

    def _ready_event(self, subject: str) -> trio.Event:
        ready = self._ready.get(subject)
        if ready is None:
            ready = self._ready[subject] = trio.Event()
        return ready

    def subscribed(self) -> set[str]:
        return set(self._subscribed)

    def client(self) -> Any:
        """The session's client, for other users of the broker (presence); raises while the
        broker is unreachable."""
        if self._client is None:
            raise ConnectionError("the event broker is not connected")
        return self._client

    # ------------------------------------------------------------------ shared stores

    def presence(self, local: LocalPresence, interval: float) -> Presence:
        return ClusterPresence(RedisPresenceStore(self), self._clock, local, interval)

    def recovery_store(self, window_seconds: float) -> RecoveryStore:
        return RedisRecoveryStore(window_seconds, self._clock, self)

    # ------------------------------------------------------------------ the service

    async def run(self) -> None:
        """Deliver, log sandbox events, keep the broker session; until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._deliver_inbound)
            nursery.start_soon(self._log_unstamped)
            nursery.start_soon(self.sweeper.run)
            await self._keep_session()

    async def _keep_session(self) -> None:
        failures = 0
        while True:
            started = trio.current_time()
            delay = self.settings.reconnect_initial
            try:
                await self._session()
            except BaseException as exc:
                # Cancelled (shutting down): the client's clean-up may add errors of its
                # own (a connection already closed); end here regardless.
                await trio.lowlevel.checkpoint_if_cancelled()
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                reason = _describe(exc)
                self.problem = f"the event broker is unreachable ({reason}); live events are held back"
                if trio.current_time() - started > 30:
                    failures = 0
                failures += 1
                delay = min(self.settings.reconnect_max, self.settings.reconnect_initial * 2 ** (failures - 1))
                log.warning("event broker connection lost (%s); reconnecting in %.1f s", reason, delay)
            finally:
                self._disconnected()
            await trio.sleep(delay)
            self.reconnects += 1
            metrics.BUS_RECONNECTS.inc()

    def _disconnected(self) -> None:
        self._client = None
        self.connected = False
        self._subscribed.clear()
        for subject, ready in list(self._ready.items()):
            if ready.is_set():
                self._ready[subject] = trio.Event()
        if self._connected_event.is_set():
            self._connected_event = trio.Event()

    def _make_client(self) -> Any:
        return make_client(self.settings.url, self.settings.cluster_nodes, self.settings.ca_file)

    async def _session(self) -> None:
        client = self._make_client()
        timeout = max(10.0, self.settings.batch / 50)
        async with client:
            if self.cluster:
                pubsub = client.sharded_pubsub(
                    retry_policy=None, subscription_timeout=timeout, max_idle_seconds=self.settings.ping_seconds
                )
            else:
                pubsub = client.pubsub(
                    retry_policy=None, subscription_timeout=timeout, max_idle_seconds=self.settings.ping_seconds
                )
            async with pubsub, trio.open_nursery() as nursery:
                await client.ping()
                self._client = client
                nursery.start_soon(self._read, pubsub)
                nursery.start_soon(self._send, client)
                nursery.start_soon(self._watch, client)
                await self._sync(pubsub)
                self.problem = None
                self.connected = True
                self._connected_event.set()
                while True:
                    await self._wait_for_change()
                    await self._sync(pubsub)

    async def _wait_for_change(self) -> None:
        linger = self.settings.unsubscribe_after_seconds
        due = min(self._idle_since.values(), default=math.inf) + linger
        with trio.move_on_at(due):
            await self._changed.wait()
        self._changed = trio.Event()

    def _wanted(self) -> set[str]:
        now = trio.current_time()
        linger = self.settings.unsubscribe_after_seconds
        for subject, since in list(self._idle_since.items()):
            if now - since >= linger:
                del self._idle_since[subject]
        return {BROADCAST, *self._holds, *self._idle_since}

    async def _sync(self, pubsub: Any) -> None:
        """Subscribe to what is wanted and not subscribed, unsubscribe from the rest, a
        batch per command."""
        wanted = self._wanted()
        add = [subject for subject in wanted if subject not in self._subscribed]
        drop = [subject for subject in self._subscribed if subject not in wanted]
        size = self.settings.batch
        for start in range(0, len(add), size):
            batch = add[start : start + size]
            await pubsub.subscribe(*batch)
            self._subscribed.update(batch)
            self._inbound_send.send_nowait(("subscribed", batch))
        for start in range(0, len(drop), size):
            batch = drop[start : start + size]
            await pubsub.unsubscribe(*batch)
            self._subscribed.difference_update(batch)
            for subject in batch:
                if subject in self._holds or subject in self._idle_since:
                    # Wanted again meanwhile: the next round subscribes and catches up.
                    self._ready[subject] = trio.Event()
                    self._changed.set()
                    continue
                self._ready.pop(subject, None)
                channel_id = _channel_of(subject)
                if channel_id is not None:  # its resume buffer stops being complete here
                    self._followed.pop(channel_id, None)
                    for listener in self._history:
                        call_history(listener, channel_id, [])

    async def _read(self, pubsub: Any) -> None:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True)
            if message is None:
                continue
            if message["type"] in ("message", "smessage"):
                self._inbound_send.send_nowait(("heard", message["data"]))

    async def _watch(self, client: Any) -> None:
        # The pub/sub connection only notices a dead server when it writes; a PING on the
        # command connection every `ping_seconds` makes a lost broker fail the session soon.
        while True:
            await trio.sleep(self.settings.ping_seconds)
            with trio.fail_after(max(2.0, self.settings.ping_seconds * 2)):
                await client.ping()

    async def _send(self, client: Any) -> None:
        while True:
            if not self._outbox:
                await self._outbox_wake.wait()
                self._outbox_wake = trio.Event()
                continue
            batch = [self._outbox[index] for index in range(min(len(self._outbox), self.settings.batch))]
            await self._push(client, batch)
            for _ in batch:
                if self._outbox:
                    self._outbox.popleft()
            self.sent += len(batch)
            self._made_progress()

    async def _push(self, client: Any, batch: list[Event]) -> None:
        from coredis.tokens import PureToken

        history, expire_ms = self.settings.history, to_ms(self.settings.retention_seconds)
        extra: list[tuple[str, bytes]] = []

        def queue(pipe: Any, events: list[Event]) -> None:
            for event in events:
                raw = encode(event)
                key = stream_key(event.channel_id)
                if event.seq is not None:
                    pipe.xadd(
                        key,
                        {"e": raw},
                        trim_strategy=PureToken.MAXLEN,
                        threshold=history,
                        trim_operator=PureToken.APPROXIMATELY,
                    )
                    pipe.pexpire(key, expire_ms)
                for subject in _subjects(event):
                    if subject == channel_subject(event.channel_id):
                        (pipe.spublish if self.cluster else pipe.publish)(subject, raw)
                    else:
                        extra.append((subject, raw))

        if self.cluster:  # a pipeline reaches one node: one per channel (its slot), together
            by_channel: dict[str, list[Event]] = {}
            for event in batch:
                by_channel.setdefault(event.channel_id, []).append(event)

            async def one(events: list[Event]) -> None:
                async with client.pipeline(transaction=False) as pipe:
                    queue(pipe, events)

            async with trio.open_nursery() as nursery:
                for events in by_channel.values():
                    nursery.start_soon(one, events)
        else:
            async with client.pipeline(transaction=False) as pipe:
                queue(pipe, batch)
        for subject, raw in extra:
            await (client.spublish if self.cluster else client.publish)(subject, raw)

    # ------------------------------------------------------------------ delivery

    async def _deliver_inbound(self) -> None:
        async for kind, item in self._inbound:
            try:
                if kind == "local":
                    self._local_pending -= 1
                    await self._accept(item)
                elif kind == "heard":
                    event = decode(item)
                    observe_bus_lag(event.committed_at)
                    await self._accept(event)
                else:
                    await self._subscriptions_in_effect(item)
            except Exception:
                log.exception("event relay: handling %s failed", kind)
            self._made_progress()

    async def _accept(self, event: Event) -> None:
        if event.id in self._delivered_ids:
            self.duplicates += 1
            return
        last = self._followed.get(event.channel_id)
        if last is not None and event.seq is not None:
            if event.seq <= last:
                self.duplicates += 1
                return
            if event.seq > last + 1:
                missed = await self._database.read(
                    lambda tx: event_log.channel_range(tx, event.channel_id, last, event.seq)  # type: ignore[arg-type]
                )
                self.gaps_read += 1
                for row in missed:
                    self._hand_over(event_of_row(row))
        self._hand_over(event)

    def followed_positions(self) -> dict[str, int]:
        return dict(self._followed)

    def deliver_swept(self, events: list[Event]) -> int:
        """Events the sweeper found in the log only; how many were new here."""
        before = self.relayed
        for event in events:
            self._hand_over(event)
        return self.relayed - before

    def _hand_over(self, event: Event) -> None:
        if event.id in self._delivered_ids:
            return
        if event.seq is not None and event.channel_id in self._followed:
            if event.seq <= self._followed[event.channel_id]:
                return
            self._followed[event.channel_id] = event.seq
        self._delivered_ids[event.id] = None
        while len(self._delivered_ids) > 50_000:
            self._delivered_ids.popitem(last=False)
        self.relayed += 1
        for listener in list(self._listeners):
            call_listener(listener, event)

    async def _subscriptions_in_effect(self, subjects: list[str]) -> None:
        """Subjects just subscribed: a channel new here gets its recent history and its
        baseline; a channel followed before a lost connection is caught up from the log."""
        channels = [channel for channel in map(_channel_of, subjects) if channel is not None]
        size = 200
        for start in range(0, len(channels), size):
            batch = channels[start : start + size]
            fresh = [channel for channel in batch if channel not in self._followed]
            known = {channel: self._followed[channel] for channel in batch if channel in self._followed}
            if known:
                await self._catch_up(known)
            for channel in fresh:
                await self._start_following(channel)
        for subject in subjects:
            if subject in self._subscribed:
                self._ready_event(subject).set()

    async def _catch_up(self, known: dict[str, int]) -> None:
        page = 1000

        def read(tx: Tx) -> dict[str, list[event_log.LoggedEvent]]:
            return {channel: event_log.channel_after(tx, channel, seq, page) for channel, seq in known.items()}

        while known:
            missed = await self._database.read(read)
            for rows in missed.values():
                for row in rows:
                    self._hand_over(event_of_row(row))
            known = {channel: rows[-1].seq for channel, rows in missed.items() if len(rows) == page}

    async def _start_following(self, channel_id: str) -> None:
        position = await self._database.read(lambda tx: event_log.channel_position(tx, channel_id))
        events = await self._stream_history(channel_id, position)
        if events is None:
            rows = await self._database.read(
                lambda tx: event_log.channel_range(
                    tx, channel_id, max(0, position - self.settings.history), position + 1
                )
            )
            events = [event_of_row(row) for row in rows]
        self._followed[channel_id] = max(position, self._followed.get(channel_id, 0))
        for listener in self._history:
            call_history(listener, channel_id, events)

    async def _stream_history(self, channel_id: str, position: int) -> list[Event] | None:
        """The channel's recent events from its stream, up to `position`, oldest first; None
        when the stream cannot tell (unreachable, lost, or not caught up with the log)."""
        if position == 0:
            return []
        client = self._client
        if client is None:
            return None
        try:
            entries = await client.xrevrange(stream_key(channel_id), count=self.settings.history)
        except Exception:  # the log answers instead
            return None
        events = [decode(entry.field_values[b"e"]) for entry in reversed(entries)]
        events = [event for event in events if event.seq is not None and event.seq <= position]
        if not events or events[-1].seq != position:
            return None
        for earlier, later in zip(events, events[1:], strict=False):
            if later.seq != (earlier.seq or 0) + 1:
                return None
        return events

    def _made_progress(self) -> None:
        self._progress.set()
        self._progress = trio.Event()

    async def _log_unstamped(self) -> None:
        async for event in self._unlogged:
            now_ms = to_ms(self._clock.now())
            try:
                [logged] = await self._database.write(lambda tx, e=event: self.append(tx, [e], now_ms))  # type: ignore[misc]
                self.publish(logged)
            except Exception:
                log.exception("event relay: could not log event %s (%s); it is not delivered", event.id, event.name)
            finally:
                self._unlogged_count -= 1
                self._made_progress()


# mypy holds the class to the interface here.
_: type[Broker] = RedisBroker


def _subjects(event: Event) -> list[str]:
    subjects = [channel_subject(event.channel_id)]
    if event.name in _BROADCAST_NAMES and not event.is_test:
        subjects.append(BROADCAST)
    if event.name in _PERSONAL_NAMES:
        user_id = event.data.get("userId")
        if isinstance(user_id, str):
            subjects.append(user_subject(user_id))
    return subjects


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions[:3])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
