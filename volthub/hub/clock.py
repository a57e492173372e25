"""The one clock all code reads, so tests can drive time with trio.testing.MockClock."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
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


# The calendar `iso8601` can write: 0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z.
EPOCH_MS_MIN = int((datetime(1, 1, 1, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 1000
EPOCH_MS_MAX = (
    int((datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()) * 1000
    + 999
)


def to_ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def saturate(epoch_ms: int) -> int:
    """`epoch_ms` held within the writable calendar (a time sum never leaves it)."""
    return min(max(epoch_ms, EPOCH_MS_MIN), EPOCH_MS_MAX)


# The last second `iso8601` wrote, and its text up to the milliseconds: events of one
# second share it, and writing it through strftime costs five times the rest. A tuple, so
# the worker threads that also write times read a matching pair.
_last_second: tuple[int, str] = (0, "1970-01-01T00:00:00.")


def iso8601(epoch_ms: int) -> str:
    """`2026-11-22T13:07:00.123Z`: millisecond precision, always UTC. Times beyond the
    calendar's ends saturate to them rather than raise."""
    global _last_second
    second, millis = divmod(saturate(int(epoch_ms)), 1000)
    cached, prefix = _last_second
    if second != cached:
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=second)
        prefix = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S.")
        _last_second = (second, prefix)
    return f"{prefix}{millis:03d}Z"
