"""`Database.statements` on PostgreSQL: statements committed one by one, no transaction
around them, and a connection found dead at the first statement replaced, not failed."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import POSTGRES, opened_database
from volthub.persistence import DatabaseUnavailable, IntegrityError


def _terminate(pid: int) -> None:
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def _backend_pid(tx) -> int:
    return int(tx.scalar("SELECT pg_backend_pid() AS pid"))


async def test_each_statement_commits_on_its_own(postgres_url: str) -> None:
    async with opened_database(postgres_url, 2) as database:
        await database.write(lambda tx: tx.execute("CREATE TABLE kept (n INT PRIMARY KEY)"))

        def insert_then_fail(tx) -> None:
            assert tx.scalar("SELECT now() = statement_timestamp() AS outside") is True  # no transaction
            tx.execute("INSERT INTO kept VALUES (1)")
            tx.execute("INSERT INTO kept VALUES (1)")  # a duplicate: fails, the first stays

        with pytest.raises(IntegrityError):
            await database.statements(insert_then_fail)
        assert await database.read(lambda tx: tx.scalar("SELECT count(*) AS n FROM kept")) == 1


async def test_a_pooled_connection_found_dead_at_the_first_statement_is_replaced(postgres_url: str) -> None:
    async with opened_database(postgres_url, 1) as database:
        _terminate(await database.statements(_backend_pid))  # the pool's one connection dies idle
        runs = []

        def count(tx) -> int:
            runs.append(1)
            return _backend_pid(tx)

        assert await database.statements(count) > 0
        assert len(runs) == 2  # the first run met the dead connection before anything ran


async def test_a_connection_lost_after_a_statement_ran_is_not_run_again(postgres_url: str) -> None:
    async with opened_database(postgres_url, 1) as database:
        runs = []

        def lost_midway(tx) -> None:
            runs.append(1)
            _terminate(_backend_pid(tx))
            tx.scalar("SELECT 1 AS one")

        with pytest.raises(DatabaseUnavailable):
            await database.statements(lost_midway)
        assert len(runs) == 1
