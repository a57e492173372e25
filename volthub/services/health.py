"""Whether this process can serve: its database answers and its event broker is reachable."""

from __future__ import annotations

from volthub.hub.broker import Broker
from volthub.persistence import Database


class Readiness:
    def __init__(self, database: Database, bus: Broker) -> None:
        self._db = database
        self._bus = bus

    async def problem(self) -> str | None:
        """Why the event broker cannot be used now (None: it can). Raises the database's
        own unavailability error when the database does not answer."""
        await self._db.read(lambda tx: tx.scalar("SELECT 1"))
        return self._bus.problem
