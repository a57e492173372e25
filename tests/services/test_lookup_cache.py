"""The look-up cache behind token verification: answers kept for a while, one read per key
at a time however many callers miss together, and a revocation that wins over a read
under way."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from volthub.services.lookup_cache import LookupCache


class Clock:
    def __init__(self) -> None:
        self.at = 1_000.0

    def now(self) -> float:
        return self.at


class Store:
    """Reads that take until `release` is set, counted."""

    def __init__(self) -> None:
        self.value = "first"
        self.reads = 0
        self.release = trio.Event()
        self.fail: Exception | None = None

    async def read(self) -> str:
        self.reads += 1
        value = self.value  # the row as it was when the read began
        await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return value


async def test_callers_that_miss_together_share_one_read() -> None:
    cache: LookupCache[str] = LookupCache(Clock(), 2.0)
    store = Store()
    answers: list[str] = []

    async def ask() -> None:
        answers.append(await cache.get("k", store.read))

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        store.release.set()
    assert store.reads == 1
    assert answers == ["first"] * 50


async def test_a_kept_answer_costs_no_read_until_it_expires() -> None:
    clock = Clock()
    cache: LookupCache[str] = LookupCache(clock, 2.0)
    store = Store()
    store.release.set()
    assert await cache.get("k", store.read) == "first"
    clock.at += 1.9
    assert await cache.get("k", store.read) == "first"
    assert store.reads == 1
    clock.at += 0.2
    store.value = "second"
    assert await cache.get("k", store.read) == "second"
    assert store.reads == 2


async def test_a_caller_after_a_revocation_does_not_get_the_read_that_began_before_it() -> None:
    cache: LookupCache[str] = LookupCache(Clock(), 2.0)
    store = Store()
    answers: dict[str, str] = {}

    async def ask(name: str) -> None:
        answers[name] = await cache.get("k", store.read)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "before")
        await trio.testing.wait_all_tasks_blocked()
        store.value = "revoked"
        cache.forget("k")
        nursery.start_soon(ask, "after")
        await trio.testing.wait_all_tasks_blocked()
        store.release.set()
    assert store.reads == 2, "the caller after the revocation read again"
    assert answers == {"before": "first", "after": "revoked"}
    store.value = "third"
    assert await cache.get("k", store.read) == "revoked", "the read that began after the revocation is kept"
    assert store.reads == 2


async def test_the_answer_of_a_read_overlapping_a_clear_is_not_kept() -> None:
    cache: LookupCache[str] = LookupCache(Clock(), 2.0)
    store = Store()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(cache.get, "k", store.read)
        await trio.testing.wait_all_tasks_blocked()
        cache.clear()
        store.release.set()
    await cache.get("k", store.read)
    assert store.reads == 2


async def test_a_failed_read_fails_its_waiters_and_is_not_kept() -> None:
    cache: LookupCache[str] = LookupCache(Clock(), 2.0)
    store = Store()
    store.fail = RuntimeError("database down")
    failures: list[str] = []

    async def ask() -> None:
        with pytest.raises(RuntimeError):
            await cache.get("k", store.read)
        failures.append("failed")

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        store.release.set()
    assert failures == ["failed"] * 3 and store.reads == 1
    store.fail = None
    assert await cache.get("k", store.read) == "first"
    assert store.reads == 2


async def test_waiters_of_a_cancelled_read_read_again() -> None:
    cache: LookupCache[str] = LookupCache(Clock(), 2.0)
    store = Store()
    answers: list[str] = []
    leader = trio.CancelScope()

    async def lead() -> None:
        with leader:
            await cache.get("k", store.read)

    async def wait() -> None:
        answers.append(await cache.get("k", store.read))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(lead)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert store.reads == 1
        leader.cancel()  # e.g. its client left while the read was under way
        await trio.testing.wait_all_tasks_blocked()
        assert store.reads == 2, "the waiter read itself"
        store.release.set()
    assert answers == ["first"]


async def test_a_zero_lifetime_keeps_nothing() -> None:
    cache: LookupCache[str] = LookupCache(Clock(), 0.0)
    store = Store()
    store.release.set()
    await cache.get("k", store.read)
    await cache.get("k", store.read)
    assert store.reads == 2
