"""Rate-limit budgets kept in the database (PostgreSQL only: SQLite counts in memory): a
compare-and-set outside a transaction, or a hit that locks its key's row for its
transaction; either way a budget's last unit is spent once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import trio

from tests.conftest import opened_database
from volthub.persistence import rate_limits as repo
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


async def test_compare_and_set_spends_a_key_in_two_statements_outside_a_transaction(postgres_url: str) -> None:
    async with opened_database(postgres_url) as database:
        rate = Rate.per(2, 60)
        spend = counted(repo.compare_and_set, "ip:swapped", rate)
        assert await database.statements(spend) == (True, ["SELECT", "INSERT"])  # a new key
        assert await database.statements(spend) == (True, ["SELECT", "UPDATE"])
        assert await database.statements(spend) == (False, ["SELECT"])  # refused: nothing written
        # The locking hit reads what the compare-and-sets wrote: the budget is spent.
        assert not (await database.write(lambda tx: repo.hit(tx, "ip:swapped", rate, NOW_NS))).allowed


async def test_compare_and_set_writes_only_over_the_number_it_read(postgres_url: str) -> None:
    """Another process spends between the read and the write: the write misses, the
    budget is read again, and a key that keeps changing is left to the row lock (None)."""
    async with opened_database(postgres_url) as database:
        rate = Rate.per(10, 60)
        await database.write(lambda tx: repo.hit(tx, "ip:contended", rate, NOW_NS))

        class Interfering(CountingTx):
            """Before each of this transaction's writes, another request spends a unit."""

            def __init__(self, tx, interfere: int) -> None:
                super().__init__(tx)
                self.interfere = interfere

            def execute(self, sql, params=()):
                if sql.startswith("UPDATE") and self.interfere:
                    self.interfere -= 1
                    self._tx.execute(
                        "UPDATE rate_limit_budgets SET tat = tat + ? WHERE key = ?", (rate.period_ns, "ip:contended")
                    )
                return super().execute(sql, params)

        def spend(interfere: int):
            def run(tx):
                interfering = Interfering(tx, interfere)
                return repo.compare_and_set(interfering, "ip:contended", rate, NOW_NS), interfering.statements

            return run

        decision, statements = await database.statements(spend(1))
        assert decision is not None and decision.allowed
        assert statements == ["SELECT", "UPDATE", "SELECT", "UPDATE"]  # lost once, then won
        # One unit by the first hit, one by the interference, one by this spend: 7 left.
        assert decision.remaining == 7
        decision, statements = await database.statements(spend(100))
        assert decision is None and statements == ["SELECT", "UPDATE"] * 4


async def test_concurrent_compare_and_sets_of_a_key_spend_its_last_unit_once(postgres_url: str) -> None:
    # Two processes' requests (one process runs its queued compare-and-sets one after another).
    async with opened_database(postgres_url, 4) as database, opened_database(postgres_url, 4) as other:
        for key, stored in (("chat_send:new-cas", False), ("chat_send:known-cas", True)):
            rate = Rate.per(2 if stored else 1, 60)
            if stored:  # one unit of two left
                await database.statements(lambda tx, key=key, rate=rate: repo.compare_and_set(tx, key, rate, NOW_NS))
            both_read = threading.Barrier(2, timeout=5)

            class ReadTogether(CountingTx):
                """Both requests have read the budget before either writes."""

                def execute(self, sql, params=()):
                    if not sql.startswith("SELECT") and self.statements.count("SELECT") == 1:
                        both_read.wait()
                    return super().execute(sql, params)

            decisions = []

            async def spend(db, key=key, rate=rate, decisions=decisions) -> None:
                decision = await db.statements(lambda tx: repo.compare_and_set(ReadTogether(tx), key, rate, NOW_NS))
                decisions.append(decision)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(spend, database)
                nursery.start_soon(spend, other)
            assert sorted(d.allowed for d in decisions) == [False, True], key
