"""Rate-limit budgets kept in the database (PostgreSQL only: SQLite counts in memory): a
batch of compare-and-sets outside a transaction, or a hit that locks its key's row for its
transaction; either way a budget's last unit is spent once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import trio

from tests.conftest import opened_database
from volthub.persistence import rate_limits as repo
from volthub.persistence.database import DatabaseUnavailable
from volthub.protocol.ratelimit import Decision, Rate

NOW_NS = 1_000_000_000_000


async def test_concurrent_hits_of_a_key_spend_its_last_unit_once(postgres_url: str) -> None:
    async with opened_database(postgres_url, 4) as database:
        # A new key with a budget of one; a stored key with one unit of two left.
        for key, rate, stored in (
            ("chat_send:new", Rate.per(1, 60), False),
            ("chat_send:known", Rate.per(2, 60), True),
        ):
            if stored:
                await database.write(lambda tx, key=key, rate=rate: repo.hit(tx, key, rate, NOW_NS))
            both_open = threading.Barrier(2, timeout=5)
            decisions = []

            def hit(tx, key=key, rate=rate, both_open=both_open):
                both_open.wait()  # both transactions are open before either hits
                return repo.hit(tx, key, rate, NOW_NS)

            async def spend(hit=hit, decisions=decisions) -> None:
                decisions.append(await database.write(hit))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(spend)
                nursery.start_soon(spend)
            assert sorted(d.allowed for d in decisions) == [False, True], key


async def test_a_hit_on_a_known_key_continues_from_its_stored_value(postgres_url: str) -> None:
    async with opened_database(postgres_url, 2) as database:
        rate = Rate.per(2, 60)
        allowed = [(await database.write(lambda tx: repo.hit(tx, "ip:known", rate, NOW_NS))).allowed for _ in range(3)]
        assert allowed == [True, True, False]


class CountingTx:
    """A transaction that records the statements run through it."""

    def __init__(self, tx) -> None:
        self._tx = tx
        self.statements: list[str] = []

    def execute(self, sql, params=()):
        self.statements.append(sql.split()[0])
        return self._tx.execute(sql, params)

    def one(self, sql, params=()):
        rows = self.execute(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql, params=()):
        row = self.one(sql, params)
        return None if row is None else next(iter(row.values()))


def counted(spend: Callable[..., Decision | None], key: str, rate: Rate) -> Callable[[Any], tuple[bool, list[str]]]:
    """`spend` of one request against `key`, as (allowed, the statements it ran)."""

    def run(tx: Any) -> tuple[bool, list[str]]:
        counting = CountingTx(tx)
        decision = spend(counting, key, rate, NOW_NS)
        assert decision is not None
        return decision.allowed, counting.statements

    return run


async def test_a_key_in_use_is_locked_and_spent_in_two_statements(postgres_url: str) -> None:
    async with opened_database(postgres_url) as database:
        spend = counted(repo.hit, "ip:counted", Rate.per(2, 60))
        assert await database.write(spend) == (True, ["SELECT", "INSERT", "SELECT", "UPDATE"])  # a new key
        assert await database.write(spend) == (True, ["SELECT", "UPDATE"])
        assert await database.write(spend) == (False, ["SELECT"])  # refused: nothing spent, nothing written


def batch(*spends: tuple[str, Rate]) -> list[repo.Spend]:
    return [repo.Spend(key, rate, NOW_NS) for key, rate in spends]


def counted_batch(spends: list[repo.Spend]) -> Callable[[Any], tuple[list[bool | None], list[str]]]:
    """`compare_and_set_many` of `spends`, as (each allowed or None, the statements it ran)."""

    def run(tx: Any) -> tuple[list[bool | None], list[str]]:
        counting = CountingTx(tx)
        decisions = repo.compare_and_set_many(counting, spends)
        return [None if d is None else d.allowed for d in decisions], counting.statements

    return run


async def test_a_batch_spends_its_keys_in_two_statements_outside_a_transaction(postgres_url: str) -> None:
    async with opened_database(postgres_url) as database:
        rate = Rate.per(2, 60)
        spend = counted_batch(batch(("ip:swapped", rate)))
        assert await database.statements(spend) == ([True], ["SELECT", "INSERT"])  # a new key
        assert await database.statements(spend) == ([True], ["SELECT", "WITH"])
        assert await database.statements(spend) == ([False], ["SELECT"])  # refused: nothing written
        # The locking hit reads what the batches wrote: the budget is spent.
        assert not (await database.write(lambda tx: repo.hit(tx, "ip:swapped", rate, NOW_NS))).allowed
        # Keys known and new in one batch: one read, one update (WITH ...), one insert, however many.
        spends = batch(("ip:a", rate), ("ip:b", rate), ("ip:c", rate))
        await database.statements(lambda tx: repo.compare_and_set_many(tx, spends[:1]))
        assert await database.statements(counted_batch(spends)) == ([True] * 3, ["SELECT", "WITH", "INSERT"])


async def test_requests_of_one_key_in_a_batch_are_counted_in_their_order(postgres_url: str) -> None:
    async with opened_database(postgres_url) as database:
        rate, roomy = Rate.per(2, 60), Rate.per(100, 60)
        spends = batch(("ip:busy", rate), ("ip:roomy", roomy), ("ip:busy", rate), ("ip:busy", rate))
        assert await database.statements(counted_batch(spends)) == ([True, True, True, False], ["SELECT", "INSERT"])
        decisions = await database.statements(lambda tx: repo.compare_and_set_many(tx, batch(("ip:roomy", roomy))))
        assert decisions[0] is not None and decisions[0].remaining == 98  # the batch's one unit was stored


async def test_a_batch_writes_only_over_the_number_it_read(postgres_url: str) -> None:
    """Another process spends between the read and the write: the key's write misses, its
    requests are decided again on a fresh read, and a key that keeps changing is left to
    the row lock (None) while the batch's other keys are counted."""
    async with opened_database(postgres_url) as database:
        rate = Rate.per(10, 60)
        await database.write(lambda tx: repo.hit(tx, "ip:contended", rate, NOW_NS))
        await database.write(lambda tx: repo.hit(tx, "ip:calm", rate, NOW_NS))

        class Interfering(CountingTx):
            """Before each of this batch's writes, another request spends a unit of the
            contended key."""

            def __init__(self, tx, interfere: int) -> None:
                super().__init__(tx)
                self.interfere = interfere

            def execute(self, sql, params=()):
                if sql.startswith("WITH") and self.interfere:
                    self.interfere -= 1
                    self._tx.execute(
                        "UPDATE rate_limit_budgets SET tat = tat + ? WHERE key = ?", (rate.period_ns, "ip:contended")
                    )
                return super().execute(sql, params)

        def spend(interfere: int, spends: list[repo.Spend]):
            def run(tx):
                interfering = Interfering(tx, interfere)
                return repo.compare_and_set_many(interfering, spends), interfering.statements

            return run

        decisions, statements = await database.statements(spend(1, batch(("ip:contended", rate))))
        assert decisions[0] is not None and decisions[0].allowed
        assert statements == ["SELECT", "WITH", "SELECT", "WITH"]  # lost once, then won
        # One unit by the first hit, one by the interference, one by this spend: 7 left.
        assert decisions[0].remaining == 7
        decisions, statements = await database.statements(spend(100, batch(("ip:contended", rate), ("ip:calm", rate))))
        assert decisions[0] is None and statements == ["SELECT", "WITH"] * 4
        assert decisions[1] is not None and decisions[1].allowed and decisions[1].remaining == 8


async def test_concurrent_batches_of_a_key_spend_its_last_unit_once(postgres_url: str) -> None:
    # Two processes' batches, each read before either writes.
    async with opened_database(postgres_url, 4) as database, opened_database(postgres_url, 4) as other:
        for key, stored in (("chat_send:new-cas", False), ("chat_send:known-cas", True)):
            rate = Rate.per(2 if stored else 1, 60)
            if stored:  # one unit of two left
                await database.statements(
                    lambda tx, key=key, rate=rate: repo.compare_and_set_many(tx, batch((key, rate)))
                )
            both_read = threading.Barrier(2, timeout=5)

            class ReadTogether(CountingTx):
                """Both batches have read the budget before either writes."""

                def execute(self, sql, params=()):
                    if not sql.startswith("SELECT") and self.statements.count("SELECT") == 1:
                        both_read.wait()
                    return super().execute(sql, params)

            decisions = []

            async def spend(db, key=key, rate=rate, decisions=decisions) -> None:
                found = await db.statements(lambda tx: repo.compare_and_set_many(ReadTogether(tx), batch((key, rate))))
                decisions.extend(found)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(spend, database)
                nursery.start_soon(spend, other)
            assert sorted(d.allowed for d in decisions) == [False, True], key


async def test_shared_budgets_count_the_requests_in_flight_together(postgres_url: str) -> None:
    async with opened_database(postgres_url, 4) as database:
        runs = 0
        statements = database.statements

        async def counting_statements(fn):
            nonlocal runs
            runs += 1
            return await statements(fn)

        database.statements = counting_statements
        budgets = repo.SharedBudgets(database, acquire_timeout=5)
        rate = Rate.per(10, 60)
        decisions = []

        async def spend() -> None:
            decisions.append(await budgets.spend(repo.Spend("ip:crowd", rate, NOW_NS)))

        async with trio.open_nursery() as nursery:
            for _ in range(25):
                nursery.start_soon(spend)
        assert sorted(d.allowed for d in decisions) == [False] * 15 + [True] * 10
        assert runs < 25 / 2


async def test_forgetting_full_budgets_skips_a_row_in_use(postgres_url: str) -> None:
    async with opened_database(postgres_url, 4) as database:
        rate = Rate.per(1, 60)
        for key in ("ip:idle", "ip:in-use"):
            await database.write(lambda tx, key=key: repo.hit(tx, key, rate, NOW_NS))
        locked, forgotten = threading.Event(), threading.Event()

        def hold(tx):
            tx.execute("SELECT key FROM rate_limit_budgets WHERE key = 'ip:in-use' FOR UPDATE")
            locked.set()
            assert forgotten.wait(5)

        async def forget() -> None:
            await trio.to_thread.run_sync(locked.wait, 5)
            count = await database.write(lambda tx: repo.forget_full(tx, NOW_NS + 120 * 10**9))
            forgotten.set()
            assert count == 1  # without waiting for the row in use

        async with trio.open_nursery() as nursery:
            nursery.start_soon(database.write, hold)
            nursery.start_soon(forget)
        keys = await database.read(lambda tx: tx.execute("SELECT key FROM rate_limit_budgets WHERE key LIKE 'ip:%'"))
        assert [row["key"] for row in keys] == ["ip:in-use"]


async def test_every_spend_of_a_failed_batch_hears_the_failure_on_its_own() -> None:
    class Unreachable:
        async def statements(self, fn):
            await trio.sleep(0)
            raise DatabaseUnavailable("no database connection became free in time")

    budgets = repo.SharedBudgets(Unreachable(), acquire_timeout=5)  # type: ignore[arg-type]
    failures: list[BaseException] = []

    async def spend(key: str) -> None:
        try:
            await budgets.spend(repo.Spend(key, Rate.per(10, 60), NOW_NS))
        except DatabaseUnavailable as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        for key in ("ip:one", "ip:two", "ip:three"):
            nursery.start_soon(spend, key)
    assert len(failures) == 3 and len({id(failure) for failure in failures}) == 3


async def test_two_processes_batches_over_shared_keys_spend_each_budget_exactly(postgres_url: str) -> None:
    """Two processes' batches hold the same keys in different orders (the rows are
    written in key order, so neither waits on the other in a cycle): every key's budget
    is spent exactly, none twice, none lost."""
    rate = Rate.per(30, 60)
    keys = [f"ip:shared-{n}" for n in range(3)]
    async with opened_database(postgres_url, 4) as one, opened_database(postgres_url, 4) as two:
        allowed = dict.fromkeys(keys, 0)

        async def spend(budgets: repo.SharedBudgets, key: str) -> None:
            decision = await budgets.spend(repo.Spend(key, rate, NOW_NS))
            if decision is None:  # kept losing: the row lock decides, as in production
                decision = await one.write(lambda tx: repo.hit(tx, key, rate, NOW_NS))
            allowed[key] += decision.allowed

        async with trio.open_nursery() as nursery:
            for budgets, order in ((repo.SharedBudgets(one, 5), keys), (repo.SharedBudgets(two, 5), keys[::-1])):
                for n in range(60):
                    nursery.start_soon(spend, budgets, order[n % 3])
        assert allowed == dict.fromkeys(keys, 30)
