"""Rate-limit budgets shared by processes on one PostgreSQL database: two apps
(two processes' worth of state) on one schema spend one budget; SQLite keeps counting per
process; `[cluster] shared_rate_limits = false` does too; with the Redis broker the budget
lives in Redis."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio
from trio.testing import wait_all_tasks_blocked

from tests.conftest import make_settings
from tests.redis_support import RedisServer, redis_server
from volthub.http.app import create_app
from volthub.hub.broker_budgets import FORGET_EVERY_SECONDS
from volthub.hub.clock import TrioClock

__all__ = ["redis_server"]  # fixture

START = 1_700_000_000


@asynccontextmanager
async def apps(database_url: str, count: int, **sections: Any) -> AsyncIterator[list[Any]]:
    async with AsyncExitStack() as stack:
        made = []
        clock = TrioClock(start=START)  # one wall clock, as processes on one machine share
        for _ in range(count):  # settings of its own each: a gateway port of its own
            settings = make_settings(database_url, ratelimit={"global_per_ip_per_minute": 3}, **sections)
            app = create_app(settings, clock=clock)
            await stack.enter_async_context(app.test_app())
            made.append(app)
        yield made


async def statuses(app: Any, n: int) -> list[int]:
    client = app.test_client()
    return [(await client.get("/api/events/types")).status_code for _ in range(n)]


async def test_processes_on_postgresql_spend_one_budget(postgres_url: str, mock_clock: Any) -> None:
    async with apps(postgres_url, 2) as (one, two):
        assert await statuses(one, 2) == [200, 200]
        client = two.test_client()
        assert (await client.get("/api/events/types")).status_code == 200
        refused = await client.get("/api/events/types")
        assert refused.status_code == 429
        assert refused.headers["X-RateLimit-Remaining"] == "0"
        assert await statuses(one, 1) == [429]
        mock_clock.jump(20)  # one request's worth of budget (3 per minute) comes back
        assert await statuses(two, 2) == [200, 429]
        await trio.sleep(0)


async def test_each_process_deletes_the_rows_of_full_budgets_in_the_background(
    postgres_url: str, mock_clock: Any
) -> None:
    async with apps(postgres_url, 1) as (one,):
        rt = one.extensions["volthub"]
        assert await statuses(one, 1) == [200]

        async def stored() -> int:
            return await rt.db.read(lambda tx: tx.scalar("SELECT count(*) FROM rate_limit_budgets"))

        assert await stored() >= 1
        await wait_all_tasks_blocked()
        mock_clock.jump(FORGET_EVERY_SECONDS)  # the budget (3 a minute) is full again by then
        for _ in range(500):  # the deletion runs in a database thread: up to 5 s of real time
            if not await stored():
                break
            await trio.to_thread.run_sync(time.sleep, 0.01)
        assert await stored() == 0
        assert await statuses(one, 3) == [200, 200, 200]  # a deleted row is a full budget


async def test_each_process_counts_alone_when_sharing_is_off(postgres_url: str, mock_clock: Any) -> None:
    async with apps(postgres_url, 2, cluster={"shared_rate_limits": False}) as (one, two):
        assert await statuses(one, 4) == [200, 200, 200, 429]
        assert await statuses(two, 3) == [200, 200, 200]


async def test_sqlite_counts_in_memory(sqlite_url: str, mock_clock: Any) -> None:
    async with apps(sqlite_url, 1) as (one,):
        assert await statuses(one, 4) == [200, 200, 200, 429]


async def test_processes_with_the_redis_broker_spend_one_budget_kept_in_redis(
    postgres_url: str, redis_server: RedisServer
) -> None:
    cluster = {"broker": "redis", "redis_url": redis_server.url}
    async with apps(postgres_url, 2, cluster=cluster) as (one, two):
        for app in (one, two):
            with trio.fail_after(10):
                await app.extensions["volthub"].bus.wait_connected()
        assert await statuses(one, 2) == [200, 200]
        assert await statuses(two, 2) == [200, 429]
        assert await statuses(one, 1) == [429]
        assert redis_server.cli("--scan", "--pattern", "volthub:rl:*")  # counted in Redis
    async with apps(postgres_url, 1) as (alone,):  # PostgreSQL's rows were not spent
        assert (await statuses(alone, 1)) == [200]
