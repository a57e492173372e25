"""Reads of the interactive features' current state, for the routes that show it.

Writes go to the channel's actor (hub/components); these reads go straight to the store,
one read transaction each, as the actor's own loads do.
"""

from __future__ import annotations

from volthub.hub import interactive_store as store
from volthub.hub.components import giveaways, goals, polls, predictions, timers
from volthub.persistence import Database


class InteractiveReads:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def active_poll(self, channel_id: str) -> polls.Poll | None:
        return await self._db.read(lambda tx: store.read_active_poll(tx, channel_id))

    async def active_prediction(self, channel_id: str) -> predictions.Prediction | None:
        return await self._db.read(lambda tx: store.read_active_prediction(tx, channel_id))

    async def active_giveaway(self, channel_id: str) -> giveaways.Giveaway | None:
        return await self._db.read(lambda tx: store.read_active_giveaway(tx, channel_id))

    async def goals(self, channel_id: str) -> list[goals.Goal]:
        return await self._db.read(lambda tx: store.read_goals(tx, channel_id))

    async def timers(self, channel_id: str) -> list[timers.Timer]:
        return await self._db.read(lambda tx: store.read_timers(tx, channel_id))
