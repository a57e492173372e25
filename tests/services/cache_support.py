"""Stand-ins for the services whose lookups are cached in process (OAuth grants, sessions):
a fixed clock, a database whose reads the test counts by patching the repository, and a
publisher whose bus is in process, where a revocation event travels."""

from __future__ import annotations

from typing import Any

from volthub.hub.bus import InProcessBroker

NOW = 1_800_000_000.0


class FakeClock:
    def now(self) -> float:
        return NOW


class CountingDatabase:
    """Runs a read against nothing: the repository call is patched to count lookups."""

    async def read(self, fn: Any) -> Any:
        return fn(None)


class Publisher:
    def __init__(self) -> None:
        self.bus = InProcessBroker()
