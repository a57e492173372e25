"""The shared stores of Socket.IO connection states (hub/recovery_store.py): PostgreSQL's
`recovery_states` and Redis keys, each store standing for one process of a deployment."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio
import trio.testing

from tests.hub.brokers import Process
from tests.redis_support import RedisServer, redis_cluster
from volthub.hub.recovery_store import (
    LIVE_WRITE_GATHER_SECONDS,
    DatabaseRecoveryStore,
    Lost,
    SharedRecoveryStore,
    state_key,
)
from volthub.persistence import Database, open_database

__all__ = ["redis_cluster"]  # fixture

WINDOW = 120.0


class SetClock:
    def __init__(self) -> None:
        self.at = 1_800_000_000.0

    def now(self) -> float:
        return self.at


def state(channels: dict[str, bool] | None = None, user: str | None = "u1") -> Lost:
    return Lost("sid-1", "/", user, None, channels if channels is not None else {"c1": True}, {"c1": "e1"})


async def kept_by_one(make: Callable[[], SharedRecoveryStore], count: int) -> tuple[Any, Any]:
    """Two processes' stores, the first having kept `count` states (pid-n, of user un)."""
    a, b = make(), make()
    for n in range(count):
        a.keep(f"pid-{n}", state(user=f"u{n}"), now=0.0)
    await a.flush()
    return a, b


class Taker:
    """Takes pid-n as user un through `store`; `found[n]` is what each take got."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.found: dict[int, Any] = {}

    async def __call__(self, n: int) -> None:
        self.found[n] = await self.store.take(f"pid-{n}", f"u{n}", "/", now=0.0)


@pytest.fixture
async def stores(
    shared_kind: str, start_process: Any
) -> tuple[Callable[[], SharedRecoveryStore], SetClock, list[RedisServer]]:
    """A maker of stores of one broker's kind (each store one process), their clock, and the
    Redis servers (none: PostgreSQL)."""
    clock = SetClock()
    process: Process = await start_process(shared_kind, clock=clock)

    def make() -> SharedRecoveryStore:
        return cast(SharedRecoveryStore, process.broker.recovery_store(WINDOW))

    return make, clock, [process.redis] if process.redis is not None else []


async def test_a_state_is_taken_once_by_any_process_and_only_by_its_user(stores: Any) -> None:
    make, _, _ = stores
    a, b = make(), make()
    a.keep("pid-1", state(), now=0.0)
    await a.flush()
    assert await b.take("pid-1", "u2", "/", now=0.0) is None  # another user
    assert await b.take("pid-1", None, "/", now=0.0) is None  # no user
    assert await b.take("pid-1", "u1", "/ws/events", now=0.0) is None  # another namespace
    taken = await b.take("pid-1", "u1", "/", now=0.0)
    assert taken is not None and taken.final and taken.last_sent == {"c1": "e1"} and taken.sid == "sid-1"
    assert await a.take("pid-1", "u1", "/", now=0.0) is None  # once, whoever asks


async def test_a_burst_of_takes_is_looked_up_together_each_once(stores: Any) -> None:
    """A restart's reconnects arrive at once: their takes share look-ups (one at a time),
    and each gets its own state, once; a cancelled take does not hold up the others."""
    make, _, _ = stores
    a, b = await kept_by_one(make, 40)
    looked_up: list[int] = []
    bulk = b._take_many

    async def counted(keys: list[str], now: float) -> dict[str, str]:
        looked_up.append(len(keys))
        return await bulk(keys, now)

    b._take_many = counted
    take = Taker(b)
    found = take.found

    async def leaver() -> None:
        with trio.move_on_after(0.001):  # cancelled while it waits, or as it leads
            await b.take("pid-99", "u99", "/", now=0.0)

    async with trio.open_nursery() as nursery:
        for n in range(45):  # the last five were never kept
            nursery.start_soon(take, n)
            if n == 20:
                nursery.start_soon(leaver)
    assert [n for n in range(45) if found[n] is not None] == list(range(40))
    assert all(found[n].user_id == f"u{n}" for n in range(40))
    assert 45 <= sum(looked_up) <= 46 and len(looked_up) < 10
    assert not any([await a.take(f"pid-{n}", f"u{n}", "/", now=0.0) for n in range(40)])


async def test_a_gathered_look_up_asks_redis_in_one_pipeline_not_key_by_key(stores: Any) -> None:
    make, _, servers = stores
    if not servers:
        pytest.skip("PostgreSQL's look-up is one statement by construction")
    a, b = await kept_by_one(make, 30)
    client, asked = b._relay.client(), []

    class Watched:
        def __getattr__(self, name: str) -> Any:
            asked.append(name)
            return getattr(client, name)

    b._relay = SimpleNamespace(client=Watched)
    take = Taker(b)
    found = take.found

    async with trio.open_nursery() as nursery:
        for n in range(30):
            nursery.start_soon(take, n)
    assert all(found[n] is not None and found[n].user_id == f"u{n}" for n in range(30))
    assert "getdel" not in asked and 1 <= asked.count("pipeline") <= 3, asked


async def test_a_take_does_not_wait_for_the_look_up_before_its_own(stores: Any) -> None:
    """While one gathered look-up is in flight, a take that arrives starts another one."""
    make, _, _ = stores
    a, b = await kept_by_one(make, 2)
    started: list[list[str]] = []
    slow = trio.Event()
    bulk = b._take_many

    async def gated(keys: list[str], now: float) -> dict[str, str]:
        started.append(keys)
        if len(started) == 1:
            await slow.wait()  # the first look-up is slow to answer
        return await bulk(keys, now)

    b._take_many = gated
    take = Taker(b)
    found = take.found

    async with trio.open_nursery() as nursery:
        try:
            nursery.start_soon(take, 0)
            with trio.fail_after(10):
                while not started:
                    await trio.sleep(0)
                nursery.start_soon(take, 1)
                while len(started) < 2:
                    await trio.sleep(0)
        finally:
            slow.set()
    assert len(started) == 2 and found[0] is not None and found[1] is not None


async def test_a_take_whose_look_up_runs_waits_for_it_without_starting_others(stores: Any) -> None:
    make, _, _ = stores
    a, b = await kept_by_one(make, 2)
    slow = trio.Event()
    bulk = b._take_many
    lead = b._lead
    leads: list[int] = []

    async def gated(keys: list[str], now: float) -> dict[str, str]:
        await slow.wait()
        return await bulk(keys, now)

    async def counted(now: float) -> None:
        leads.append(len(b._gathering))
        await lead(now)

    b._take_many = gated
    b._lead = counted
    take = Taker(b)
    found = take.found

    async with trio.open_nursery() as nursery:
        try:
            for n in range(2):  # in the same turn: one look-up has both
                nursery.start_soon(take, n)
            for _ in range(50):  # turns of the scheduler while that look-up runs
                await trio.sleep(0)
        finally:
            slow.set()
    assert len(leads) <= 2 and found[0] is not None and found[1] is not None


async def test_a_live_state_outlives_a_killed_process_for_the_window_only(stores: Any) -> None:
    make, clock, redis = stores
    killed, survivor = make(), make()
    killed.track("pid-1", state(), now=0.0)
    killed.track("pid-2", state(user="u2"), now=0.0)
    await killed.flush()
    await killed.refresh()
    if redis:  # Redis expires keys by its own clock: each has the window's TTL
        ttls = [
            int(node.cli("PTTL", key))
            for node in redis
            for key in node.cli("--scan", "--pattern", "volthub:recovery:*").split()
        ]
        assert len(ttls) == 2 and all(WINDOW * 1000 <= ttl <= killed.ttl_seconds * 1000 for ttl in ttls), ttls
    clock.at += WINDOW - 1  # the process died right after; nothing refreshes its states
    live = await survivor.take("pid-1", "u1", "/", now=0.0)
    assert live is not None and not live.final  # written while the connection lived
    if not redis:
        clock.at += 2 * WINDOW
        await survivor.refresh()  # lets expired rows go
        assert await survivor.take("pid-2", "u2", "/", now=0.0) is None


async def test_a_live_state_is_kept_fresh_while_its_process_runs(stores: Any) -> None:
    make, clock, _ = stores
    running, other = make(), make()
    running.track("pid-1", state(), now=0.0)
    await running.flush()
    for _ in range(8):  # twice the window, refreshed every quarter of it
        clock.at += running.refresh_seconds
        await running.refresh()
    assert await other.take("pid-1", "u1", "/", now=0.0) is not None


async def test_a_late_drop_does_not_overwrite_a_state_another_process_took_over(stores: Any) -> None:
    make, _, _ = stores
    a, b = make(), make()
    a.track("pid-1", state({"c1": True}), now=0.0)
    await a.flush()
    # The client reconnected to b before a noticed the drop: b takes the state and owns it.
    assert await b.take("pid-1", "u1", "/", now=0.0) is not None
    b.track("pid-1", state({"c1": True, "c2": False}), now=0.0)
    await b.flush()
    a.keep("pid-1", state({"c1": True}), now=0.0)  # a notices its drop only now
    await a.flush()
    a.forget("pid-1", state())  # nor may a remove what b owns
    await a.flush()
    kept = await make().take("pid-1", "u1", "/", now=0.0)
    assert kept is not None and set(kept.channels) == {"c1", "c2"}


async def test_a_shutdown_lets_live_states_stand_and_retires_them_in_one_step(stores: Any) -> None:
    """A stopping process writes nothing per connection whose live state is in the store:
    its last step turns every live state it wrote into a dropped one for the window."""
    make, clock, _ = stores
    stopping, other = make(), make()
    stopping.track("pid-1", state(), now=0.0)
    await stopping.flush()
    writes: list[int] = []
    write = stopping._write

    async def counted(batch: list[Any]) -> None:
        writes.append(len(batch))
        await write(batch)

    stopping._write = counted
    stopping.stand("pid-1", state(), now=0.0)  # written live: it stands
    stopping.stand("pid-2", state(user="u2"), now=0.0)  # never written live: its final state is kept
    with trio.CancelScope() as service:
        service.cancel()
        await stopping.run()  # the shutdown: the queue, then the retirement
    assert writes == [1]
    clock.at += WINDOW - 1
    standing = await other.take("pid-1", "u1", "/", now=0.0)
    assert standing is not None and not standing.final and standing.last_sent == {"c1": "e1"}
    kept = await other.take("pid-2", "u2", "/", now=0.0)
    assert kept is not None and kept.final


async def test_a_connection_that_ends_for_good_leaves_nothing(stores: Any) -> None:
    make, _, _ = stores
    a = make()
    a.track("pid-1", state(), now=0.0)
    await a.flush()
    a.forget("pid-1", state())
    await a.flush()
    assert await make().take("pid-1", "u1", "/", now=0.0) is None


async def test_the_service_writes_refreshes_and_writes_the_last_drops_on_shutdown(
    postgres_url: str, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.autojump_threshold = 0.05  # real seconds idle: database calls run in threads
    clock = SetClock()
    database: Database = open_database(postgres_url, pool_size=2)
    await database.open()
    store = DatabaseRecoveryStore(WINDOW, clock, database)

    async def expiries() -> dict[str, int]:
        rows = await database.read(lambda tx: tx.execute("SELECT state, expires_at FROM recovery_states"))
        return {Lost.loads(row["state"]).sid: int(row["expires_at"]) for row in rows}

    async def until(predicate: Callable[[dict[str, int]], bool]) -> dict[str, int]:
        with trio.fail_after(60):
            while not predicate(found := await expiries()):
                await trio.sleep(0.1)
        return found

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.run)
            store.track("pid-1", Lost("live", "/", "u1", None, {"c1": True}), now=0.0)
            first = (await until(lambda rows: "live" in rows))["live"]
            clock.at += WINDOW
            await trio.sleep(store.refresh_seconds)  # the next refresh is due
            await until(lambda rows: rows.get("live", 0) > first)
            store.keep("pid-2", Lost("dropped", "/", "u1", None, {"c1": True}), now=0.0)
            nursery.cancel_scope.cancel()  # shutdown, with that drop still queued
        assert "dropped" in await expiries()
    finally:
        await database.close()


async def test_on_a_redis_cluster_states_are_written_kept_fresh_and_taken_once(
    start_process: Any, redis_cluster: list[RedisServer]
) -> None:
    """The keys of many states live on many nodes: one pipeline writes and refreshes them
    all, split by node."""
    process: Process = await start_process("redis", clock=SetClock(), nodes=tuple(node.node for node in redis_cluster))
    a = cast(SharedRecoveryStore, process.broker.recovery_store(WINDOW))
    b = cast(SharedRecoveryStore, process.broker.recovery_store(WINDOW))
    for n in range(6):
        a.track(f"pid-{n}", state(user=f"u{n}"), now=0.0)
    await a.flush()
    await a.refresh()
    held = [node.cli("--scan", "--pattern", "volthub:recovery:*").split() for node in redis_cluster]
    assert sum(len(keys) for keys in held) == 6
    assert sum(1 for keys in held if keys) > 1, "the states live on more than one node"
    assert all([await b.take(f"pid-{n}", f"u{n}", "/", now=0.0) for n in range(6)])
    assert not any([await a.take(f"pid-{n}", f"u{n}", "/", now=0.0) for n in range(6)])


class RecordingStore(SharedRecoveryStore):
    """A shared store that records each transaction's keys instead of writing them."""

    def __init__(self) -> None:
        super().__init__(WINDOW, SetClock())
        self.transactions: list[list[str]] = []

    async def _write(self, writes: list[Any]) -> None:
        self.transactions.append([key for key, _, _ in writes])

    async def _refresh(self) -> None:
        pass

    async def _retire(self) -> None:
        pass


def key_of(pid: str) -> str:
    return state_key(pid, "u1", "/")


@pytest.fixture
async def tracking(nursery: trio.Nursery) -> RecordingStore:
    """A store whose writer runs, having queued pid-1's live state (and waiting to write it)."""
    store = RecordingStore()
    nursery.start_soon(store.run)
    store.track("pid-1", state(), now=0.0)
    await trio.testing.wait_all_tasks_blocked()
    return store


async def test_live_states_tracked_moments_apart_share_one_transaction(
    tracking: RecordingStore, mock_clock: trio.testing.MockClock
) -> None:
    store = tracking
    mock_clock.jump(LIVE_WRITE_GATHER_SECONDS / 2)
    store.track("pid-2", state(), now=0.0)
    mock_clock.jump(LIVE_WRITE_GATHER_SECONDS)
    await trio.testing.wait_all_tasks_blocked()
    assert store.transactions == [[key_of("pid-1"), key_of("pid-2")]]


async def test_a_dropped_state_is_written_at_once_with_the_live_ones_queued(
    tracking: RecordingStore, mock_clock: trio.testing.MockClock
) -> None:
    store = tracking
    store.keep("pid-2", state(), now=0.0)
    await trio.testing.wait_all_tasks_blocked()  # no time passes
    assert store.transactions == [[key_of("pid-1"), key_of("pid-2")]]


async def test_two_look_ups_run_at_once_and_the_next_carries_every_take_that_came_meanwhile() -> None:
    store = RecordingStore()
    answer = trio.Event()
    looked_up: list[int] = []

    async def slow(keys: list[str], now: float) -> dict[str, str]:
        looked_up.append(len(keys))
        await answer.wait()
        return {}

    store._take_many = slow  # type: ignore[method-assign]
    async with trio.open_nursery() as takers:
        for n in range(6):  # one after another, each in a turn of its own
            takers.start_soon(store.take, f"pid-{n}", "u1", "/", 0.0)
            await trio.testing.wait_all_tasks_blocked()
        assert looked_up == [1, 1]
        answer.set()
    assert looked_up == [1, 1, 4]
