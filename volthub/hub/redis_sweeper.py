"""The Redis broker's sweeper: events a dead publisher logged but never handed to Redis.

A publisher logs each event in PostgreSQL and hands it to Redis after the commit, from an
in-memory queue; a process killed in between leaves logged events no stream or subject
ever carried. Followers notice the gap at the channel's next event, which may be long in
coming on a quiet channel. So every `interval` seconds each process compares, for the
channels it follows, the channel's position in the log with the last one delivered here,
and delivers what the log has beyond it that is older than `grace` (an event younger than
that is most likely still on its way through Redis). Duplicates are dropped by position,
so an event that arrives both ways is delivered once.

Cost: nothing at all while this process follows no channel; otherwise one indexed read of
the channels' positions per interval (in batches), and a read of the rows only for a
channel that is behind.
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio

from volthub import metrics
from volthub.hub.bus import event_of_row
from volthub.hub.clock import Clock, to_ms
from volthub.hub.publisher import Event
from volthub.persistence import Database, event_log

log = logging.getLogger(__name__)

BATCH = 500  # channels per positions read
PAGE = 1000  # rows per channel per sweep


class Follower(Protocol):
    """What the sweeper needs of the broker (hub.redis_bus.RedisBroker)."""

    def followed_positions(self) -> dict[str, int]:
        """Channel id -> position of the last event delivered here, per channel followed."""

    def deliver_swept(self, events: list[Event]) -> int:
        """Deliver events found in the log only; how many were new here."""


class Sweeper:
    def __init__(self, relay: Follower, database: Database, clock: Clock, interval: float, grace: float) -> None:
        self._relay = relay
        self._database = database
        self._clock = clock
        self.interval = interval
        self.grace = grace
        self.swept = 0  # events delivered by the sweeper (tests, metrics)

    async def run(self) -> None:
        """Sweep every interval, until cancelled (0: never)."""
        if self.interval <= 0:
            await trio.sleep_forever()
        while True:
            await trio.sleep(self.interval)
            try:
                await self.sweep_once()
            except Exception:
                log.warning("event relay: the sweep for undelivered events failed; next time", exc_info=True)

    async def sweep_once(self) -> int:
        """Deliver the logged events older than the grace period that never arrived here;
        how many."""
        followed = self._relay.followed_positions()
        if not followed:
            return 0
        before_ms = to_ms(self._clock.now() - self.grace)
        channels = list(followed)
        delivered = 0
        for start in range(0, len(channels), BATCH):
            chunk = channels[start : start + BATCH]
            positions = await self._database.read(lambda tx, c=chunk: event_log.channel_positions(tx, c))  # type: ignore[misc]
            behind = {c: followed[c] for c, seq in positions.items() if seq > followed[c]}
            for channel_id, after in behind.items():
                rows = await self._database.read(
                    lambda tx, c=channel_id, a=after: event_log.channel_after(tx, c, a, PAGE)  # type: ignore[misc]
                )
                due = []
                for row in rows:  # in order; stop at the first one still within its grace
                    if row.created_at > before_ms:
                        break
                    due.append(event_of_row(row))
                delivered += self._relay.deliver_swept(due)
        self.swept += delivered
        metrics.BUS_SWEPT.inc(delivered)
        return delivered
