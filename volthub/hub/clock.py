"""The one clock all code reads, so tests can drive time with trio.testing.MockClock."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

import trio


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch."""


class SystemClock:
    def now(self) -> float:
        return time.time()


class TrioClock:
    """Wall time that advances with Trio's clock: under MockClock, `now()` jumps with it.

    Must first be read inside `trio.run`; it pins the wall time at that moment and from
    then on adds Trio's elapsed time to it.
    """

    def __init__(self, start: float | None = None) -> None:
        self._start_wall = time.time() if start is None else start
        self._start_trio: float | None = None

    def now(self) -> float:
        current = trio.current_time()
        if self._start_trio is None:
            self._start_trio = current
        return self._start_wall + (current - self._start_trio)


def to_ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def iso8601(epoch_ms: int) -> str:
    """`2026-11-22T13:07:00.123Z`: millisecond precision, always UTC."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
