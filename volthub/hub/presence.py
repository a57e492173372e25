"""Presence across the processes of a PostgreSQL deployment.

Each process knows who is connected through it (the fan-out's `snapshot`). `ClusterPresence`
writes that to the database every `interval` seconds and answers `snapshot(channel_id)`
with this process's live view plus the rows of the other processes heard from within three
intervals, so the viewers list and counts are the same whichever process serves them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, Protocol

import trio

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database
from volthub.persistence import presence as repo

log = logging.getLogger(__name__)


class LocalPresence(Protocol):
    presence_listeners: list[Callable[[], None]]  # called when the local viewers change

    def snapshot(self, channel_id: str) -> tuple[list[str], int]: ...

    def active_channels(self) -> list[str]: ...


class ClusterPresence:
    def __init__(self, database: Database, clock: Clock, local: LocalPresence, interval: float) -> None:
        self._database = database
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
        others, others_anonymous = await self._database.read(
            lambda tx: repo.others(tx, channel_id, self.process_id, fresh_after)
        )
        return [*users, *others], anonymous + others_anonymous

    async def publish_once(self) -> None:
        channels = [(channel, *self._local.snapshot(channel)) for channel in self._local.active_channels()]
        rows: list[Any] = [(channel, list(users), anonymous) for channel, users, anonymous in channels]
        if not rows and self._published_nothing:
            return  # nothing to say, and nothing of ours to keep fresh: no write
        self._published_nothing = not rows
        now = self._clock.now()
        await self._database.write(
            lambda tx: repo.replace_mine(tx, self.process_id, rows, to_ms(now), to_ms(now - 3 * self.interval))
        )

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
                await self._database.write(lambda tx: repo.delete_mine(tx, self.process_id))
