"""Stored answers that every authenticated call asks for (is this session still standing,
what does this grant hold now), kept for a few seconds and shared by concurrent callers.

A thousand clients connecting with one token at once would otherwise each read the same
row when the entry expires: every caller that arrives while the read is under way waits
for that read instead of starting its own (one read per key at a time). A revocation
made while a read is under way wins: that read's answer is neither kept nor handed to
callers that arrived after the revocation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import trio

from volthub.hub.clock import Clock

V = TypeVar("V")

DEFAULT_LIMIT = 10_000


class _Read(Generic[V]):
    """One read under way, and what it found for the callers waiting on it."""

    __slots__ = ("generation", "done", "found", "value", "error")

    def __init__(self, generation: int) -> None:
        self.generation = generation
        self.done = trio.Event()
        self.found = False
        self.value: V | None = None
        self.error: Exception | None = None


class LookupCache(Generic[V]):
    """Answers by key for `seconds` (0: none kept; concurrent callers still share a read)."""

    def __init__(self, clock: Clock, seconds: float, limit: int = DEFAULT_LIMIT) -> None:
        self._clock = clock
        self._seconds = seconds
        self._limit = limit
        self._kept: dict[str, tuple[V, float]] = {}  # key -> (answer, valid until)
        self._reading: dict[str, _Read[V]] = {}
        self._generation = 0  # bumped by every forget or clear

    async def get(self, key: str, load: Callable[[], Awaitable[V]]) -> V:
        """The kept answer for `key`, else the one a read under way finds, else `load()`'s."""
        while True:
            now = self._clock.now()
            hit = self._kept.get(key)
            if hit is not None and hit[1] > now:
                return hit[0]
            read = self._reading.get(key)
            if read is None or read.generation != self._generation:
                return await self._load(key, load, now)
            await read.done.wait()
            if read.error is not None:
                raise read.error
            if read.found:
                return read.value  # type: ignore[return-value]  # found: the read's answer
            # The read was cancelled with its caller: look again (maybe read ourselves).

    async def _load(self, key: str, load: Callable[[], Awaitable[V]], now: float) -> V:
        read: _Read[V] = _Read(self._generation)
        self._reading[key] = read
        try:
            value = await load()
        except Exception as exc:
            read.error = exc
            raise
        else:
            read.found, read.value = True, value
            if self._seconds > 0 and read.generation == self._generation:
                if len(self._kept) >= self._limit:
                    self._kept.clear()
                self._kept[key] = (value, now + self._seconds)
            return value
        finally:
            if self._reading.get(key) is read:
                del self._reading[key]
            read.done.set()

    def forget(self, key: str) -> None:
        """`key`'s answer changed: neither the kept one nor a read under way serves again."""
        self._generation += 1
        self._kept.pop(key, None)

    def clear(self) -> None:
        self._generation += 1
        self._kept.clear()
