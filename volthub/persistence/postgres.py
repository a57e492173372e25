"""PostgreSQL backend: psycopg 3's sync API in Trio worker threads (DESIGN §3)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TypeVar

import psycopg
import trio
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from volthub.persistence.database import Database, IntegrityError, InvalidData, Params, Row, Tx

T = TypeVar("T")


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """Repositories write qmark placeholders; psycopg wants %s (and a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresTx(Tx):
    dialect = "postgresql"

    def __init__(self, connection: psycopg.Connection[Row]) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            if params:
                cursor = self._connection.execute(to_pyformat(sql), tuple(params))
            else:  # without parameters psycopg sends the text as is: no % doubling
                cursor = self._connection.execute(sql)
        except psycopg.errors.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc
        except psycopg.DataError as exc:
            raise InvalidData(str(exc)) from exc
        return cursor.fetchall() if cursor.description else []

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        try:
            with self._connection.cursor() as cursor:
                cursor.executemany(to_pyformat(sql), [tuple(r) for r in rows])
        except psycopg.errors.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc


class PostgresDatabase(Database):
    dialect = "postgresql"

    def __init__(self, url: str, pool_size: int = 8) -> None:
        self.url = url
        self._pool: ConnectionPool[psycopg.Connection[Row]] = ConnectionPool(
            url,
            connection_class=psycopg.Connection[Row],  # with dict_row: rows are dicts
            min_size=1,
            max_size=pool_size,
            open=False,
            kwargs={"row_factory": dict_row, "autocommit": True},
        )
        self._limiter = trio.CapacityLimiter(pool_size)

    async def open(self) -> None:
        await trio.to_thread.run_sync(functools.partial(self._pool.open, wait=True, timeout=15))

    async def close(self) -> None:
        await trio.to_thread.run_sync(self._pool.close)

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await trio.to_thread.run_sync(self._run, fn, limiter=self._limiter)

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await trio.to_thread.run_sync(self._run, fn, limiter=self._limiter)

    def run_sync(self, fn: Callable[[Tx], T], *, write: bool = True) -> T:
        return self._run(fn)

    def _run(self, fn: Callable[[Tx], T]) -> T:
        # autocommit connections: transaction() issues an explicit BEGIN / COMMIT.
        with self._pool.connection() as connection, connection.transaction():
            return fn(PostgresTx(connection))
