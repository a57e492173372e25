"""Rate-limit budgets, where the broker keeps them: in this process, or shared by every
process of a deployment (PostgreSQL rows, or Redis keys with the Redis broker).

The arithmetic is `protocol.ratelimit` (GCRA); a store only keeps each budget's one number.
A shared budget's key names the limit and its rate too, so a changed limit starts afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Final, Protocol

import trio

from volthub.hub.clock import Clock
from volthub.hub.redis_client import RedisConnection, budget_key
from volthub.persistence import Database
from volthub.persistence import rate_limits as repo
from volthub.protocol.ratelimit import Decision, Gcra, decide, to_ns

log = logging.getLogger(__name__)

# How often a process deletes the stored budgets that are full again, once it spent some.
FORGET_EVERY_SECONDS: Final = 60.0


class Budgets(Protocol):
    async def spend(self, limiter: Gcra, key: Hashable, name: str, now_ns: int) -> Decision:
        """Count one request against `limiter`'s budget for `key` (`name`: its category, or
        "global")."""

    async def forget_full(self) -> None:
        """Background service: delete stored budgets that are full again (they mean the same
        as none), off the requests' path. Returns at once where nothing is stored."""


def shared_key(limiter: Gcra, key: Hashable, name: str) -> str:
    return f"{name}:{key!r}:{limiter.rate.limit}/{limiter.rate.period_ns}"


class LocalBudgets:
    """Counted in this process's memory (the limiter's own table): one process serves, or
    `[cluster] shared_rate_limits = false`, or a route that must answer without the database."""

    async def spend(self, limiter: Gcra, key: Hashable, name: str, now_ns: int) -> Decision:
        return limiter.hit(key, now_ns)

    async def forget_full(self) -> None:
        return None  # the limiter forgets on its own


class DatabaseBudgets:
    """One row per budget in PostgreSQL, shared by every process: a client gets each budget
    once, whichever process it reaches."""

    def __init__(self, database: Database, clock: Clock, acquire_timeout: float) -> None:
        self._database = database
        self._clock = clock
        # Requests in flight counted together, without a transaction's BEGIN and COMMIT.
        self._batched = repo.SharedBudgets(database, acquire_timeout)
        # Set by a spend: there may be rows to delete again.
        self._spent = trio.Event()

    async def spend(self, limiter: Gcra, key: Hashable, name: str, now_ns: int) -> Decision:
        stored_key, rate = shared_key(limiter, key, name), limiter.rate
        decision = await self._batched.spend(repo.Spend(stored_key, rate, now_ns))
        if decision is None:  # other writers kept changing the key first: the row lock
            decision = await self._database.write(lambda tx: repo.hit(tx, stored_key, rate, now_ns))
        self._spent.set()
        return decision

    async def forget_full(self) -> None:
        """`FORGET_EVERY_SECONDS` after budgets were spent, delete the rows of those full
        again. A process that spends none does not wake."""
        while True:
            await self._spent.wait()
            await trio.sleep(FORGET_EVERY_SECONDS)
            self._spent = trio.Event()  # spends from now on call for the next round
            now_ns = to_ns(self._clock.now())
            while await self._database.write(lambda tx: repo.forget_full(tx, now_ns)) >= repo.FORGET_BATCH:
                await trio.lowlevel.checkpoint()  # a full batch: there may be more


class RedisBudgets:
    """Rate-limit budgets shared by every process, kept in Redis (a hot path kept off
    PostgreSQL): one number per key, set only if no other process changed it meanwhile.
    While Redis does not answer, or is too contended, the database counts instead."""

    def __init__(self, broker: RedisConnection, in_database: DatabaseBudgets) -> None:
        self._broker = broker
        self._in_database = in_database

    async def spend(self, limiter: Gcra, key: Hashable, name: str, now_ns: int) -> Decision:
        decision = await self._spend_in_redis(shared_key(limiter, key, name), limiter, now_ns)
        if decision is not None:
            return decision
        return await self._in_database.spend(limiter, key, name, now_ns)

    async def forget_full(self) -> None:
        await self._in_database.forget_full()  # Redis keys expire on their own

    async def _spend_in_redis(self, key: str, limiter: Gcra, now_ns: int) -> Decision | None:
        """None while the broker is unreachable or too contended."""
        try:
            client = self._broker.client()
        except ConnectionError:
            return None
        rate, stored_key = limiter.rate, budget_key(key)
        try:
            for _ in range(8):
                stored = await client.get(stored_key)
                decision, new_tat = decide(rate, int(stored) if stored else None, now_ns)
                if not decision.allowed:
                    return decision
                ttl_ms = max(1, (decision.reset_ns - now_ns) // 1_000_000 + 1)
                swapped = await client.eval(_COMPARE_AND_SET, keys=[stored_key], args=[stored or b"", new_tat, ttl_ms])
                if swapped == 1:
                    return decision
        except Exception:  # the database counts instead
            log.warning("rate limit: the broker did not answer; counting in the database", exc_info=True)
        return None


# Set KEYS[1] to ARGV[2] (expiring in ARGV[3] ms) only if it still holds ARGV[1] ("" for
# no value): a budget's number changes only from the value its decision was made on.
_COMPARE_AND_SET = """
local current = redis.call('GET', KEYS[1]) or ''
if current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""
