"""One scheduler for durable expiries (subscriptions, channel-role grants).

A source keeps its expiries in the database and offers three things: `expire_due()` ends
what is due with a guarded write (only the transaction that won emits), `next_expiry()`
reads the earliest open expiry (one indexed query; nothing is held in memory per row), and
`changed`, an event it sets when this process wrote an earlier one. `ExpiryService` sleeps
until that exact moment (or `poll_seconds`, for expiries another process wrote) and ends
what is due; a restarted process (SIGKILL included) ends the ones it missed at start. So an
expiry fires once, at its time, however many processes share the database.
"""

from __future__ import annotations

from typing import Protocol

import trio

from volthub.hub.clock import Clock, to_ms


class Expiring(Protocol):
    @property
    def changed(self) -> trio.Event:
        """Set (and replaced) when this process wrote an expiry that may be the earliest."""

    async def expire_due(self) -> int:
        """End everything due now; how many this process ended."""

    async def next_expiry(self) -> int | None:
        """Epoch ms of the earliest open expiry; None when there is none."""


class Wakeup:
    """The `changed` half of a source: `wake()` after writing an expiry."""

    def __init__(self) -> None:
        self.changed = trio.Event()

    def wake(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


class ExpiryService:
    """Ends a source's expiries at their time (see the module docstring); run under the supervisor."""

    def __init__(self, source: Expiring, clock: Clock, poll_seconds: float) -> None:
        self._source = source
        self._clock = clock
        self._poll_seconds = poll_seconds

    async def run(self) -> None:
        already_due = False
        while True:
            await self._source.expire_due()
            changed = self._source.changed
            due = await self._source.next_expiry()
            wait = self._poll_seconds
            if due is not None:
                left = (due - to_ms(self._clock.now())) / 1000
                if left <= 0 and not already_due:
                    already_due = True  # came due while we looked: end it now
                    continue
                wait = min(wait, max(left, 0.05))
            already_due = False
            with trio.move_on_after(wait):
                await changed.wait()
