"""The channel actor: one task per active channel, driving its components.

The loop waits on the actor's bounded inbox until the earliest component deadline. What is
queued is drained into ONE transaction (through `EventPublisher.write`, the one publish
path): the channel's `channels` row is locked first, each command is dispatched to its
component, whose writes are applied and whose events are collected; after the commit every
caller gets its own answer and the events are published. A component that refuses a
command raises `Refused` before writing anything, so the rest of the batch goes on; if the
transaction itself fails, each command is retried alone so each caller gets its own answer.
The write is keyed by the channel: the database may commit it together with other
channels' batches (each in its own savepoint, the channels' locks taken in key order).

The store stays the truth. Components cache state (chat modes, a poll's status); a write
that changes such state moves the channel's version, and an actor whose copy is older (the
change came from another process sharing PostgreSQL) reloads its components under the lock
before deciding anything. An actor retires only when its inbox is empty and every
component is idle, with no checkpoint between that check and leaving the registry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio

from volthub import metrics
from volthub.hub.clock import Clock, to_ms
from volthub.hub.components.base import Outcome, Refused
from volthub.hub.kinds import ComponentKind
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, DatabaseUnavailable, StorageUnavailable, Tx
from volthub.persistence import channels as channels_repo

log = logging.getLogger(__name__)

# A refusal from any component; the name predates components other than chat.
ChatRefused = Refused


class ChannelBusy(Exception):
    """The channel's inbox is full: the caller should retry shortly (HTTP 503)."""


class UnknownChannel(LookupError):
    pass


class ChannelUnavailable(Exception):
    """The actor stopped (shutdown) before it handled the command."""


@dataclass(frozen=True)
class ActorRuntime:
    """What every actor of one registry shares."""

    database: Database
    publisher: EventPublisher
    clock: Clock
    kinds: tuple[ComponentKind, ...]
    dispatch: dict[type, str]  # command type -> kind name
    inbox_size: int
    idle_seconds: float
    max_batch: int = 64
    # After a failed deadline transaction, wait this long before trying again.
    retry_seconds: float = 1.0


class Call:
    """One command and the caller waiting for its answer."""

    __slots__ = ("command", "done", "_value", "_error")

    def __init__(self, command: Any) -> None:
        self.command = command
        self.done = trio.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def succeed(self, value: Any) -> None:
        if not self.done.is_set():
            self._value = value
            self.done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self._error = error
            self.done.set()

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


class ChannelActor:
    def __init__(self, runtime: ActorRuntime, channel_id: str, on_stop: Callable[[ChannelActor], None]) -> None:
        self.channel_id = channel_id
        self.stopped = trio.Event()
        self.components: dict[str, Any] = {kind.name: kind.create(channel_id) for kind in runtime.kinds}
        self._runtime = runtime
        self._on_stop = on_stop
        self._version: int | None = None  # of the store state the components hold; None: reload
        self._inbox, self._calls = trio.open_memory_channel[Call](runtime.inbox_size)
        self._current: list[Call] = []  # the batch being handled, answered on shutdown too

    def submit(self, call: Call) -> None:
        """Queue without waiting; raises trio.WouldBlock when the inbox is full."""
        self._inbox.send_nowait(call)

    def component(self, name: str) -> Any:
        return self.components[name]

    @property
    def queued(self) -> int:
        return self._inbox.statistics().current_buffer_used

    async def run(self) -> None:
        try:
            try:
                await self._load()
            except Exception as exc:  # unknown channel or store trouble: tell whoever waits
                self._stop_accepting()
                self._fail_all(exc)
                return
            await self._serve()
        finally:
            self._stop_accepting()
            self._fail_all(ChannelUnavailable(self.channel_id))
            self.stopped.set()

    # -- the loop --

    async def _serve(self) -> None:
        while True:
            deadline = self._next_deadline()
            wait = self._runtime.idle_seconds
            if deadline is not None:
                wait = min(wait, max(0.0, (deadline - self._now_ms()) / 1000))
            first: Call | None = None
            with trio.move_on_after(wait):
                first = await self._calls.receive()
            if first is not None:
                metrics.ACTOR_INBOX_DEPTH.observe(1 + self.queued)
                await self._handle_batch(self._drain(first))
            elif deadline is not None and self._now_ms() >= deadline:
                await self._fire_deadlines(deadline)
            elif self.queued == 0 and self._idle():
                # No checkpoint between this check and leaving the registry (in `run`'s
                # finally), so no command can slip into an inbox nobody reads.
                return

    def _drain(self, first: Call) -> list[Call]:
        calls = [first]
        while len(calls) < self._runtime.max_batch:
            try:
                calls.append(self._calls.receive_nowait())
            except trio.WouldBlock:
                break
        return calls

    def _next_deadline(self) -> int | None:
        deadlines = [d for c in self.components.values() if (d := c.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def _idle(self) -> bool:
        return all(component.is_idle() for component in self.components.values())

    def _now_ms(self) -> int:
        return to_ms(self._runtime.clock.now())

    # -- commands --

    async def _handle_batch(self, calls: list[Call]) -> None:
        self._current = calls
        try:
            await self._commit(calls)
        finally:
            self._current = []

    async def _commit(self, calls: list[Call]) -> None:
        try:
            version, answers = await self._runtime.publisher.write(
                lambda tx, em: self._transaction(tx, em, calls), order=self.channel_id
            )
        except Exception as exc:
            self._version = None  # components may hold state of the rolled-back transaction
            if len(calls) == 1 or isinstance(exc, DatabaseUnavailable | StorageUnavailable):
                # A database fault is the store's, not a command's: every caller gets it at
                # once (retrying one by one would make each wait out the acquire timeout),
                # and the HTTP layer logs it, rate-limited, instead of a traceback per command.
                if not isinstance(exc, UnknownChannel | DatabaseUnavailable | StorageUnavailable):
                    log.exception("channel %s: command failed", self.channel_id)
                for call in calls:
                    call.fail(exc)
                return
            for call in calls:  # one transaction each, so each caller gets its own answer
                await self._commit([call])
            return
        self._version = version
        for call, (ok, value) in zip(calls, answers, strict=True):
            if ok:
                call.succeed(value)
            else:
                call.fail(value)

    def _transaction(self, tx: Tx, emitter: Emitter, calls: list[Call]) -> tuple[int, list[tuple[bool, Any]]]:
        version = self._lock(tx, emitter.now_ms)
        stores: dict[str, Any] = {}
        answers: list[tuple[bool, Any]] = []
        changed = False
        for call in calls:
            kind = self._runtime.dispatch[type(call.command)]
            store = self._store(stores, kind, tx, emitter.now_ms)
            try:
                outcome = self.components[kind].handle(call.command, emitter.now_ms, store)
            except Refused as refused:
                answers.append((False, refused))
                continue
            changed = self._apply(outcome, store, emitter) or changed
            answers.append((True, outcome.reply))
        if changed:
            version = channels_repo.bump(tx, self.channel_id)
        return version, answers

    # -- deadlines --

    async def _fire_deadlines(self, deadline: int) -> None:
        try:
            self._version = await self._runtime.publisher.write(self._deadline_transaction, order=self.channel_id)
        except Exception:
            log.exception("channel %s: deadline step failed; retrying", self.channel_id)
            self._version = None
            await trio.sleep(self._runtime.retry_seconds)
            return
        if self._next_deadline() == deadline:
            # The component did not move its deadline on: do not spin on it.
            log.error("channel %s: a component kept deadline %s after handling it", self.channel_id, deadline)
            await trio.sleep(self._runtime.retry_seconds)

    def _deadline_transaction(self, tx: Tx, emitter: Emitter) -> int:
        version = self._lock(tx, emitter.now_ms)
        stores: dict[str, Any] = {}
        changed = False
        for kind, component in self.components.items():
            due = component.next_deadline()
            if due is not None and due <= emitter.now_ms:
                store = self._store(stores, kind, tx, emitter.now_ms)
                changed = self._apply(component.on_deadline(emitter.now_ms, store), store, emitter) or changed
        if changed:
            version = channels_repo.bump(tx, self.channel_id)
        return version

    # -- inside a transaction (a worker thread; the actor awaits it) --

    async def _load(self) -> None:
        now_ms = self._now_ms()  # the clock is read on the Trio thread, never in the worker

        def load(tx: Tx) -> int | None:
            version = channels_repo.version(tx, self.channel_id)
            if version is not None:
                self._load_components(tx, now_ms)
            return version

        # A read: asking about a channel that does not exist takes no write lock.
        version = await self._runtime.database.read(load)
        if version is None:
            raise UnknownChannel(self.channel_id)
        self._version = version

    def _lock(self, tx: Tx, now_ms: int) -> int:
        """The channel's write lock; reloads the components when their copy is stale. From
        here until the transaction's outcome is known, their copy matches no committed
        version: a run the database rolls back and runs again starts with a reload."""
        version = channels_repo.lock(tx, self.channel_id)
        if version is None:
            raise UnknownChannel(self.channel_id)
        if version != self._version:
            self._load_components(tx, now_ms)
        self._version = None
        return version

    def _load_components(self, tx: Tx, now_ms: int) -> None:
        for kind in self._runtime.kinds:
            self.components[kind.name].load(kind.store(tx, self.channel_id, now_ms))

    def _store(self, stores: dict[str, Any], kind_name: str, tx: Tx, now_ms: int) -> Any:
        if kind_name not in stores:
            kind = next(k for k in self._runtime.kinds if k.name == kind_name)
            stores[kind_name] = kind.store(tx, self.channel_id, now_ms)
        return stores[kind_name]

    def _apply(self, outcome: Outcome, store: Any, emitter: Emitter) -> bool:
        for write in outcome.writes:
            store.apply(write)
        for event in outcome.events:
            emitter.emit(self.channel_id, event.name, event.data)
        return outcome.shared_state_changed

    # -- stopping --

    def _stop_accepting(self) -> None:
        self._on_stop(self)

    def _fail_all(self, error: BaseException) -> None:
        for call in self._current:
            call.fail(error)
        self._current = []
        while True:
            try:
                self._calls.receive_nowait().fail(error)
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
