"""Where Socket.IO connection states wait for their clients to come back.

A connection that asked for connection state recovery has a private recovery id (``pid``);
its state (:class:`Lost`: socket id, user, channels, where each channel stands) is what a
reconnecting client gets back. The store keys it by a hash of the pid, the user and the
namespace, so a pid presented with another user's token (or none) finds nothing, and takes
it at most once.

- :class:`RecoveryStore` keeps states in this process (SQLite: one process serves).
- :class:`DatabaseRecoveryStore` (PostgreSQL broker) and :class:`RedisRecoveryStore`
  (Redis broker) keep them where every process of the deployment reads them, so a client
  recovers on whichever process it reconnects to.

The broker makes the one that fits (`Broker.recovery_store`).

The shared stores write a connection's state twice in its life, never per event: when it
joins or changes its channels (``track``: a *live* state, kept fresh while this process
runs, so that a SIGKILLed process leaves its connections' states behind for the window),
and when it drops (``keep``: the final state, with the last event sent per channel). A
live state knows where each channel stood when it was subscribed, not what was sent since:
the client's offset says where its channel resumes, and any other channel recovers only
if it had no event since (else the client is told it was not recovered). Writes go out from
a queue, in order, by :meth:`SharedRecoveryStore.run` (a supervised service).

A stopping process ends all its connections at once. For one that follows at most one
channel the live state is as good as a final one (the client's offset says where that
channel resumes), so it is left to ``stand`` and, once the queue is written, every live
state of the process becomes a dropped one in one step (``retire``): a restart then costs
the store one statement per process instead of a write per connection.
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
import trio

from volthub.hub.clock import Clock, to_ms
from volthub.hub.redis_client import RedisConnection, recovery_key
from volthub.persistence import Database
from volthub.persistence import recovery as repo

log = logging.getLogger(__name__)

# Kept states at most (in-process store); beyond it the oldest is forgotten first.
MAX_KEPT: Final = 100_000
# Writes per database transaction.
WRITE_BATCH: Final = 500
# How long a live state's write waits for others to share its transaction: a restart's
# reconnects come at hundreds a second per process, and a transaction (with its thread hop)
# per few rows cost the database and the process more than the rows. A live state matters
# only once its process is killed; a dropped connection's state is written at once.
LIVE_WRITE_GATHER_SECONDS: Final = 0.25
# How long a stopping process may spend writing the states of the connections it closed.
FINAL_FLUSH_SECONDS: Final = 2.0
# Keys per look-up of gathered takes (a restart's reconnect storm comes in bursts).
TAKE_BATCH: Final = 500
# A gathered look-up that takes longer fails its takes (their clients start afresh).
TAKE_TIMEOUT_SECONDS: Final = 5.0
# Gathered look-ups running at once (each holds a database connection while it runs). Two:
# a take need not wait for the look-up before its own, and each look-up still carries
# every take that came meanwhile (a statement, commit and thread hop per few takes cost
# the database and this process more than the rows did).
TAKE_LOOKUPS: Final = 2


@dataclass(slots=True)
class Lost:
    """A namespace connection's state, as a reconnecting client gets it back."""

    sid: str
    namespace: str
    user_id: str | None
    client_id: str | None
    channels: dict[str, bool]  # channel id -> owner subscription
    # Per channel, the last event id the connection was sent (or, before any, the channel's
    # newest buffered event when it was subscribed): where to resume that channel.
    last_sent: dict[str, str] = field(default_factory=dict)
    # Written at the drop (last_sent is exact), not while the connection lived.
    final: bool = True
    expires_at: float = 0.0

    def dumps(self) -> str:
        return orjson.dumps(self).decode()  # orjson writes a dataclass's fields as an object

    @classmethod
    def loads(cls, raw: str | bytes) -> Lost:
        return cls(**orjson.loads(raw))


def state_key(pid: str, user_id: str | None, namespace: str) -> str:
    """Where a state is kept: bound to its user and namespace, so only they find it."""
    return hashlib.sha256(f"{pid}\0{user_id or ''}\0{namespace}".encode()).hexdigest()


class RecoveryStore:
    """In this process (one process serves: SQLite)."""

    def __init__(self, window_seconds: float, max_kept: int = MAX_KEPT) -> None:
        self.window = window_seconds
        self._max = max_kept
        self._lost: OrderedDict[str, Lost] = OrderedDict()  # state key -> state; oldest first

    @property
    def enabled(self) -> bool:
        return self.window > 0

    def track(self, pid: str, state: Lost, now: float) -> None:
        """A live connection joined or changed its channels (kept only by shared stores)."""

    def forget(self, pid: str, state: Lost) -> None:
        """A connection ended for good (the client's own choice): nothing to keep."""

    def keep(self, pid: str, lost: Lost, now: float) -> None:
        """A connection dropped: keep its final state for the window."""
        self._expire(now)
        lost.expires_at = now + self.window
        self._lost[state_key(pid, lost.user_id, lost.namespace)] = lost
        while len(self._lost) > self._max:
            self._lost.popitem(last=False)

    def stand(self, pid: str, lost: Lost, now: float) -> None:
        """This process's shutdown ended a connection that follows at most one channel:
        its live state may stand for the final one (kept here: no live states in-process)."""
        self.keep(pid, lost, now)

    async def take(self, pid: str, user_id: str | None, namespace: str, now: float) -> Lost | None:
        """The state kept under ``pid`` for this user and namespace, once; None when unknown
        or expired."""
        self._expire(now)
        return self._lost.pop(state_key(pid, user_id, namespace), None)

    async def run(self) -> None:
        """Background service: nothing to write in-process."""
        await trio.sleep_forever()

    def __len__(self) -> int:
        return len(self._lost)

    def _expire(self, now: float) -> None:
        while self._lost:
            key, lost = next(iter(self._lost.items()))
            if lost.expires_at > now:
                return
            del self._lost[key]


class _Take:
    """One take waiting for a gathered look-up."""

    __slots__ = ("key", "wake", "in_look_up", "answered", "state", "error")

    def __init__(self, key: str) -> None:
        self.key = key
        self.wake = trio.Event()  # its answer is in, or a look-up may be started
        self.in_look_up = False  # a look-up that runs has it
        self.answered = False
        self.state: str | None = None
        self.error: Exception | None = None


class SharedRecoveryStore(RecoveryStore):
    """States every process reads; writes queued and sent by :meth:`run`. Live states are
    refreshed every quarter window, so a killed process's stay for the window at least."""

    def __init__(self, window_seconds: float, clock: Clock) -> None:
        super().__init__(window_seconds)
        self.owner = uuid.uuid4().hex  # this process
        self._clock = clock
        self._pending: OrderedDict[str, tuple[str | None, bool]] = OrderedDict()  # key -> (state, live)
        self._live: set[str] = set()  # keys of live states written by this process
        self._wake = trio.Event()
        self._due = trio.Event()  # a write that should not wait for others is queued
        self.refresh_seconds = window_seconds / 4
        self._gathering: list[_Take] = []  # takes waiting for a look-up
        self._lookups = 0  # look-ups running
        self._standing = False  # live states stand for dropped ones: retire them at the end

    @property
    def ttl_seconds(self) -> float:
        return self.window + self.refresh_seconds

    def track(self, pid: str, state: Lost, now: float) -> None:
        state.final = False
        self._queue(state_key(pid, state.user_id, state.namespace), state.dumps(), live=True)

    def forget(self, pid: str, state: Lost) -> None:
        self._queue(state_key(pid, state.user_id, state.namespace), None, live=False)

    def keep(self, pid: str, lost: Lost, now: float) -> None:
        lost.final = True
        lost.expires_at = now + self.window
        self._queue(state_key(pid, lost.user_id, lost.namespace), lost.dumps(), live=False)

    def stand(self, pid: str, lost: Lost, now: float) -> None:
        """Nothing is written now when this process wrote (or queued) the connection's live
        state: at the end of the shutdown ``retire`` turns it, with every other live state
        of the process, into a dropped state for the window. Else its final state is kept."""
        if state_key(pid, lost.user_id, lost.namespace) in self._live:
            self._standing = True
        else:
            self.keep(pid, lost, now)

    def _queue(self, key: str, state: str | None, *, live: bool) -> None:
        self._pending.pop(key, None)  # the newest write of a key is the one that counts
        self._pending[key] = (state, live)
        if live:
            self._live.add(key)
        else:
            self._live.discard(key)
            self._due.set()  # its client may come back to another process at once
        self._wake.set()

    async def take(self, pid: str, user_id: str | None, namespace: str, now: float) -> Lost | None:
        key = state_key(pid, user_id, namespace)
        pending = self._pending.pop(key, None)  # dropped here moments ago: still queued
        self._live.discard(key)
        raw = await self._gathered_take(key, now)
        if pending is not None and pending[0] is not None:
            raw = pending[0]
        return None if raw is None else Lost.loads(raw)

    async def _gathered_take(self, key: str, now: float) -> str | None:
        """Takes are looked up together: after a restart every client reconnects at once,
        and a round trip (a transaction) each would cost the store far more than one per
        burst. A take that finds fewer than TAKE_LOOKUPS look-ups running starts one for
        every take waiting by then, shielded (the others wait on it). Several run at once:
        a reconnecting client waits for the round trip of its own look-up, not for the one
        before it as well (on a busy process that wait was most of a recovered connect's).
        When all are busy a take waits; each look-up that ends wakes the first waiting take
        to start the next."""
        found = _Take(key)
        self._gathering.append(found)
        try:
            while not found.answered:
                if not found.in_look_up and self._lookups < TAKE_LOOKUPS:
                    await self._lead(now)
                else:  # its look-up runs (it waits for that), or every slot is busy
                    await found.wake.wait()
                    found.wake = trio.Event()
        except BaseException:
            if found in self._gathering:  # gone before its look-up
                self._gathering.remove(found)
            self._wake_next()  # it may have been woken to start a look-up: another will
            raise
        if found.error is not None:
            raise found.error
        return found.state

    async def _lead(self, now: float) -> None:
        self._lookups += 1
        try:
            with trio.CancelScope(shield=True):
                await trio.sleep(0)  # the takes of this same wake-up join
                batch, self._gathering = self._gathering[:TAKE_BATCH], self._gathering[TAKE_BATCH:]
                for take in batch:
                    take.in_look_up = True
                if batch:  # else look-ups that started meanwhile took them all
                    await self._look_up(batch, now)
        finally:
            self._lookups -= 1
            self._wake_next()

    def _wake_next(self) -> None:
        """A look-up may be started: the first waiting take starts it."""
        if self._gathering and self._lookups < TAKE_LOOKUPS:
            self._gathering[0].wake.set()

    async def _look_up(self, batch: list[_Take], now: float) -> None:
        try:
            with trio.fail_after(TAKE_TIMEOUT_SECONDS):
                states = await self._take_many([take.key for take in batch], now)
        except Exception as exc:
            for take in batch:
                take.error = exc
        else:
            for take in batch:
                take.state = states.get(take.key)
        for take in batch:
            take.answered = True
            take.wake.set()

    async def _take_many(self, keys: list[str], now: float) -> dict[str, str]:
        """The states under ``keys`` (each taken once); one look-up per key unless the store
        has a bulk one."""
        found: dict[str, str] = {}
        for key in keys:
            raw = await self._take(key, now)
            if raw is not None:
                found[key] = raw
        return found

    async def run(self) -> None:
        """Background service: send queued writes, keep live states fresh and let expired
        ones go. An idle process (no live states, nothing queued) only waits. On shutdown
        the states of the connections it just closed are written (or, left to stand,
        retired) before it ends."""
        try:
            await self._serve()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(FINAL_FLUSH_SECONDS):
                try:
                    await self.flush()
                    if self._standing:
                        await self.retire()
                except Exception:
                    log.warning("recovery: dropped connections' states not written at shutdown", exc_info=True)

    async def _serve(self) -> None:
        next_refresh = math.inf
        while True:
            with trio.move_on_at(next_refresh):
                await self._wake.wait()
            with trio.move_on_after(LIVE_WRITE_GATHER_SECONDS):
                await self._due.wait()
            self._wake, self._due = trio.Event(), trio.Event()
            try:
                await self.flush()
                if trio.current_time() >= next_refresh or next_refresh == math.inf:
                    await self.refresh()
                    next_refresh = trio.current_time() + self.refresh_seconds if self._live else math.inf
            except Exception:
                log.warning("recovery: the shared store did not answer; retrying", exc_info=True)
                await trio.sleep(1.0)
                self._wake.set()

    async def flush(self) -> None:
        """Send the queued writes, in order (what fails stays queued)."""
        while self._pending:
            batch = [self._pending.popitem(last=False) for _ in range(min(WRITE_BATCH, len(self._pending)))]
            try:
                await self._write([(key, state, live) for key, (state, live) in batch])
            except BaseException:
                for key, value in reversed(batch):  # back at the front, in order
                    if key not in self._pending:
                        self._pending[key] = value
                        self._pending.move_to_end(key, last=False)
                raise

    async def refresh(self) -> None:
        """This process's live states stay for another window; expired ones go."""
        await self._refresh()

    async def retire(self) -> None:
        """The process stops: its live states become dropped ones, kept for the window from
        now (their connections were ended by the shutdown)."""
        await self._retire()
        self._live.clear()
        self._standing = False

    async def _write(self, writes: list[repo.Write]) -> None:
        raise NotImplementedError

    async def _retire(self) -> None:
        raise NotImplementedError

    async def _refresh(self) -> None:
        raise NotImplementedError

    async def _take(self, key: str, now: float) -> str | None:
        raise NotImplementedError


class DatabaseRecoveryStore(SharedRecoveryStore):
    """In PostgreSQL (``recovery_states``), with the PostgreSQL broker."""

    def __init__(self, window_seconds: float, clock: Clock, database: Database) -> None:
        super().__init__(window_seconds, clock)
        self._database = database

    async def _write(self, writes: list[repo.Write]) -> None:
        expires = to_ms(self._clock.now() + self.ttl_seconds)
        await self._database.write(lambda tx: repo.write(tx, self.owner, writes, expires))

    async def _refresh(self) -> None:
        now = self._clock.now()
        expires, now_ms = to_ms(now + self.ttl_seconds), to_ms(now)
        await self._database.write(lambda tx: repo.refresh(tx, self.owner, expires, now_ms))

    async def _retire(self) -> None:
        expires = to_ms(self._clock.now() + self.ttl_seconds)
        await self._database.statements(lambda tx: repo.retire(tx, self.owner, expires))

    async def _take(self, key: str, now: float) -> str | None:
        return (await self._take_many([key], now)).get(key)

    async def _take_many(self, keys: list[str], now: float) -> dict[str, str]:
        """One statement, atomic by itself: without a transaction's BEGIN and COMMIT around it
        the look-up is one round trip instead of three, and a reconnecting client waits on it
        (its worker thread takes the interpreter back after each round trip, which on a busy
        process costs more than the round trip)."""
        now_ms = to_ms(self._clock.now())
        return await self._database.statements(lambda tx: repo.take_many(tx, keys, now_ms))


# KEYS[1]: the state's key. ARGV: owner, state ("" ends it), live ("1"/"0"), ttl ms. The
# value is "<owner>\n<state JSON>": a dropped or ended connection's write touches only a
# state this process owns (or, dropped, none), as in the database.
_WRITE = """
local current = redis.call('GET', KEYS[1])
local mine = current and string.sub(current, 1, string.len(ARGV[1]) + 1) == ARGV[1] .. '\\n'
if ARGV[2] == '' then
  if mine then redis.call('DEL', KEYS[1]) end
elseif ARGV[3] == '1' or mine or not current then
  redis.call('SET', KEYS[1], ARGV[1] .. '\\n' .. ARGV[2], 'PX', ARGV[4])
end
return 1
"""


class RedisRecoveryStore(SharedRecoveryStore):
    """In Redis, with the Redis broker: a key per state with a TTL, taken with GETDEL."""

    def __init__(self, window_seconds: float, clock: Clock, relay: RedisConnection) -> None:
        super().__init__(window_seconds, clock)
        self._relay = relay

    async def _write(self, writes: list[repo.Write]) -> None:
        ttl_ms = str(max(1, int(self.ttl_seconds * 1000)))
        keys = [recovery_key(key) for key, _, _ in writes]
        args = [[self.owner, state or "", "1" if live else "0", ttl_ms] for _, state, live in writes]
        await self._each(keys, lambda target, i: target.eval(_WRITE, keys=[keys[i]], args=args[i]))

    async def _refresh(self) -> None:
        keys = [recovery_key(key) for key in self._live]
        ttl_ms = max(1, int(self.ttl_seconds * 1000))
        await self._each(keys, lambda target, i: target.pexpire(keys[i], ttl_ms))

    async def _retire(self) -> None:
        """A key holds no live flag: the live states' keys get the window's TTL from now."""
        await self._refresh()

    async def _each(self, keys: list[str], command: Callable[[Any, int], Any]) -> None:
        """`command(pipe, i)` for each key, in one pipeline: on a Redis Cluster the client
        splits it by node (the keys live on many) and sends each node its share at once."""
        if not keys:
            return
        async with self._relay.client().pipeline(transaction=False) as pipe:
            for i in range(len(keys)):
                command(pipe, i)

    async def _take(self, key: str, now: float) -> str | None:
        return (await self._take_many([key], now)).get(key)

    async def _take_many(self, keys: list[str], now: float) -> dict[str, str]:
        """A GETDEL per key, all in one pipeline (split by node on a Redis Cluster): a
        restart's gathered reconnects wait for one round trip, not one per key."""
        try:
            async with self._relay.client().pipeline(transaction=False) as pipe:
                taken = [pipe.getdel(recovery_key(key)) for key in keys]
            raws = [await each for each in taken]
        except Exception:
            log.warning("recovery: the broker did not answer; not recovered", exc_info=True)
            return {}
        return {key: _state_of(raw) for key, raw in zip(keys, raws, strict=True) if raw is not None}


def _state_of(raw: str | bytes) -> str:
    """A stored value is "<owner>\n<state JSON>"."""
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    return text.partition("\n")[2]
