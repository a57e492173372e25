"""Presence across the processes of a deployment.

Each process knows who is connected through it (the fan-out's `snapshot`). Where one
process serves that is the whole answer (`ThisProcessOnly`). With several, `ClusterPresence`
writes it to the broker's store every `interval` seconds and answers `snapshot(channel_id)`
with this process's live view plus the rows of the other processes heard from within three
intervals, so the viewers list and counts are the same whichever process serves them. The
rows live in PostgreSQL (`DatabasePresenceStore`), or in Redis when it is the broker
(`RedisPresenceStore`). The broker makes the one that fits (`Broker.presence`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson
import trio

from volthub.hub.clock import Clock, to_ms
from volthub.hub.redis_client import RedisConnection, presence_key
from volthub.persistence import Database
from volthub.persistence import presence as repo

log = logging.getLogger(__name__)


class LocalPresence(Protocol):
    presence_listeners: list[Callable[[], None]]  # called when the local viewers change

    def snapshot(self, channel_id: str) -> tuple[list[str], int]: ...

    def active_channels(self) -> list[str]: ...


Rows = list[tuple[str, list[str], int]]  # (channel id, user ids, anonymous connections)
Snapshot = tuple[list[str], int]  # (signed-in user ids, anonymous connections)


class Presence(Protocol):
    """Who is connected to a channel, over every process of the deployment."""

    def snapshot(self, channel_id: str) -> Snapshot | Awaitable[Snapshot]: ...

    async def run(self) -> None:
        """Background service: keep this process's share where the others read it."""


class ThisProcessOnly:
    """One process serves: its own connections are everyone's."""

    def __init__(self, local: LocalPresence) -> None:
        self.snapshot = local.snapshot  # the fan-out's own method: no call in between

    async def run(self) -> None:
        return None  # nothing to publish


class PresenceStore(Protocol):
    """Where the processes keep their connections per channel."""

    async def replace_mine(self, process_id: str, rows: Rows, now_ms: int, stale_before_ms: int) -> None: ...

    async def delete_mine(self, process_id: str) -> None: ...

    async def others(self, channel_id: str, process_id: str, fresh_after_ms: int) -> tuple[list[str], int]: ...


class DatabasePresenceStore:
    """One row per process and channel in PostgreSQL (`persistence.presence`)."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def replace_mine(self, process_id: str, rows: Rows, now_ms: int, stale_before_ms: int) -> None:
        await self._database.write(lambda tx: repo.replace_mine(tx, process_id, rows, now_ms, stale_before_ms))

    async def delete_mine(self, process_id: str) -> None:
        await self._database.write(lambda tx: repo.delete_mine(tx, process_id))

    async def others(self, channel_id: str, process_id: str, fresh_after_ms: int) -> tuple[list[str], int]:
        return await self._database.read(lambda tx: repo.others(tx, channel_id, process_id, fresh_after_ms))


class RedisPresenceStore:
    """With the Redis broker: one hash per channel (a field per process, expiring with the
    freshness window), so the viewers list is read from Redis, not PostgreSQL. While Redis
    does not answer, a process counts only its own connections."""

    def __init__(self, relay: RedisConnection) -> None:
        self._relay = relay
        self._written: set[str] = set()  # channels this process has a field in

    async def replace_mine(self, process_id: str, rows: Rows, now_ms: int, stale_before_ms: int) -> None:
        if not self._relay.connected:
            return  # not yet (or no longer): the next round writes, every interval
        client = self._relay.client()
        ttl_ms = max(1, now_ms - stale_before_ms)
        current = set()
        for channel_id, users, anonymous in rows:
            key = presence_key(channel_id)
            # Noted before it is written: a shutdown in the middle of this round removes it too.
            self._written.add(channel_id)
            await client.hset(key, {process_id: orjson.dumps([users, anonymous, now_ms])})
            await client.pexpire(key, ttl_ms)
            current.add(channel_id)
        for channel_id in self._written - current:
            await client.hdel(presence_key(channel_id), [process_id])
        self._written = current

    async def delete_mine(self, process_id: str) -> None:
        client = self._relay.client()
        for channel_id in self._written:
            await client.hdel(presence_key(channel_id), [process_id])
        self._written = set()

    async def others(self, channel_id: str, process_id: str, fresh_after_ms: int) -> tuple[list[str], int]:
        try:
            fields = await self._relay.client().hgetall(presence_key(channel_id))
        except Exception:
            log.warning("presence: the broker did not answer; counting this process only")
            return [], 0
        users: list[str] = []
        anonymous = 0
        for field, raw in fields.items():
            if (field.decode() if isinstance(field, bytes) else field) == process_id:
                continue
            their_users, their_anonymous, updated = orjson.loads(raw)
            if updated >= fresh_after_ms:
                users.extend(their_users)
                anonymous += int(their_anonymous)
        return users, anonymous


class ClusterPresence:
    def __init__(self, store: PresenceStore, clock: Clock, local: LocalPresence, interval: float) -> None:
        self._store = store
        self._clock = clock
        self._local = local
        self.interval = interval
        self.process_id = str(uuid.uuid4())
        self._published_nothing = False
        self._changed = trio.Event()
        local.presence_listeners.append(self._on_change)

    def _on_change(self) -> None:
        self._changed.set()

    async def snapshot(self, channel_id: str) -> tuple[list[str], int]:
        users, anonymous = self._local.snapshot(channel_id)
        fresh_after = to_ms(self._clock.now() - 3 * self.interval)
        others, others_anonymous = await self._store.others(channel_id, self.process_id, fresh_after)
        return [*users, *others], anonymous + others_anonymous

    async def publish_once(self) -> None:
        channels = [(channel, *self._local.snapshot(channel)) for channel in self._local.active_channels()]
        rows: list[Any] = [(channel, list(users), anonymous) for channel, users, anonymous in channels]
        if not rows and self._published_nothing:
            return  # nothing to say, and nothing of ours to keep fresh: no write
        self._published_nothing = not rows
        now = self._clock.now()
        await self._store.replace_mine(self.process_id, rows, to_ms(now), to_ms(now - 3 * self.interval))

    async def run(self) -> None:
        """Background service: write this process's presence when it changes (at most
        twice a second) and every interval while it has connections, so others see it is
        alive; on shutdown remove it, so the others stop counting its connections at once.

        With no connections it waits for one without a deadline: an idle process (and a
        MockClock test) has no timer ticking here."""
        try:
            while True:
                self._changed = trio.Event()
                try:
                    await self.publish_once()
                except Exception:
                    log.exception("presence: writing this process's connections failed")
                if self._local.active_channels():
                    with trio.move_on_after(self.interval):
                        await self._changed.wait()
                    await trio.sleep(min(0.5, self.interval))  # bursts of connects: one write
                else:
                    await self._changed.wait()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await self._store.delete_mine(self.process_id)
