"""PostgreSQL backend: psycopg 3's sync API in Trio worker threads.

Faults: the pool checks a connection before handing it out, so one the server
terminated is replaced instead of failing the request; waiting for a connection (the
limiter and the pool together) is bounded by `acquire_timeout`, then `DatabaseUnavailable`;
after an outage the pool retries connecting every second (psycopg_pool's default backoff
doubles up to minutes), so service resumes within about a second of the database's
return. Errors leave this module as our own exceptions carrying the SQLSTATE and primary
message only, never DETAIL (which holds row data) or statement parameters.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import psycopg
import trio
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from volthub import metrics
from volthub.persistence.database import (
    QUERY_ERRORS,
    Database,
    DatabaseError,
    DatabaseUnavailable,
    IntegrityError,
    InvalidData,
    Params,
    Row,
    Tx,
    count_query_error,
)

T = TypeVar("T")


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """Repositories write qmark placeholders; psycopg wants %s (and a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _summary(exc: psycopg.Error) -> str:
    primary = exc.diag.message_primary if exc.diag is not None else None
    return f"{exc.sqlstate or type(exc).__name__}: {primary or type(exc).__name__}"


def _translate(exc: psycopg.Error) -> NoReturn:
    """Our exception for a driver error, without its chain (whose message has DETAIL)."""
    if isinstance(exc, psycopg.errors.IntegrityError):
        raise IntegrityError(_summary(exc)) from None
    if isinstance(exc, psycopg.DataError):
        raise InvalidData(_summary(exc)) from None
    if isinstance(exc, psycopg.OperationalError):
        raise DatabaseUnavailable(_summary(exc)) from None
    raise DatabaseError(_summary(exc)) from None


class PostgresTx(Tx):
    dialect = "postgresql"

    def __init__(self, connection: psycopg.Connection[Row]) -> None:
        self._connection = connection
        # One cursor for the transaction's statements (each result is read before the next
        # runs): a cursor per statement, as `Connection.execute` makes, costs a third more CPU.
        self._cursor = connection.cursor()
        self.answered = 0  # statements the server answered

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        cursor = self._cursor
        try:
            if params:
                cursor.execute(to_pyformat(sql), tuple(params))
            else:  # without parameters psycopg sends the text as is: no % doubling
                cursor.execute(sql)
            rows = cursor.fetchall() if cursor.description else []
        except psycopg.Error as exc:
            _translate(exc)
        self.answered += 1
        return rows

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        try:
            with self._connection.cursor() as cursor:
                cursor.executemany(to_pyformat(sql), [tuple(r) for r in rows])
        except psycopg.Error as exc:
            _translate(exc)


class _SteadyRetry(AttemptWithBackoff):
    """Reconnect attempts every second (±10%) instead of doubling: a database back from an
    outage is used again within about a second."""

    DELAY_BACKOFF = 1.0


class _Pool(ConnectionPool[Any]):
    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or _SteadyRetry(timeout=self.reconnect_timeout), growing)


class PostgresDatabase(Database):
    dialect = "postgresql"

    def __init__(self, url: str, pool_size: int = 8, acquire_timeout: float = 5.0) -> None:
        self.url = url
        self.acquire_timeout = acquire_timeout
        self._pool: ConnectionPool[psycopg.Connection[Row]] = _Pool(
            url,
            connection_class=psycopg.Connection[Row],  # with dict_row: rows are dicts
            min_size=1,
            max_size=pool_size,
            open=False,
            kwargs={"row_factory": dict_row, "autocommit": True, "connect_timeout": max(1, round(acquire_timeout))},
            timeout=acquire_timeout,
            # Never give up reconnecting for good: the database may come back after hours.
            reconnect_timeout=365 * 86400,
        )
        self._limiter = trio.CapacityLimiter(pool_size)
        self._threads = trio.CapacityLimiter(pool_size)

    async def open(self) -> None:
        metrics.start_db_errors(self.dialect)
        await trio.to_thread.run_sync(functools.partial(self._pool.open, wait=True, timeout=15))

    async def close(self) -> None:
        await trio.to_thread.run_sync(self._pool.close)

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await self._call(fn)

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await self._call(fn)

    async def statements(self, fn: Callable[[Tx], T]) -> T:
        return await self._call(fn, transaction=False)

    def run_sync(self, fn: Callable[[Tx], T], *, write: bool = True) -> T:
        try:
            return self._run(fn, self.acquire_timeout)
        except QUERY_ERRORS as exc:
            count_query_error(self.dialect, exc)
            raise

    def pool_stats(self) -> dict[str, int]:
        slots = self._limiter.statistics()
        return {
            "in_use": slots.borrowed_tokens,
            "idle": max(0, int(slots.total_tokens) - slots.borrowed_tokens),
            "waiting": slots.tasks_waiting,
        }

    async def _call(self, fn: Callable[[Tx], T], *, transaction: bool = True) -> T:
        try:
            return await self._transaction(fn, transaction)
        except QUERY_ERRORS as exc:  # once per transaction, whichever statement failed
            count_query_error(self.dialect, exc)
            raise

    async def _transaction(self, fn: Callable[[Tx], T], transaction: bool = True) -> T:
        """Waiting for a slot and then for a pooled connection share one acquire_timeout."""
        deadline = trio.current_time() + self.acquire_timeout
        with trio.move_on_at(deadline) as waited:
            await self._limiter.acquire()
        if waited.cancelled_caught:
            raise DatabaseUnavailable("no database connection became free in time")
        try:
            remaining = max(0.05, deadline - trio.current_time())
            run = self._run if transaction else self._run_statements
            return await trio.to_thread.run_sync(run, fn, remaining, limiter=self._threads)
        finally:
            self._limiter.release()

    def _run_statements(self, fn: Callable[[Tx], T], timeout: float) -> T:
        """`fn` on a connection in autocommit. Without a BEGIN to check the connection, a
        dead one shows at `fn`'s first statement, which then ran nothing: `fn` runs again
        on a connection that answered a round trip just now."""
        deadline = time.monotonic() + timeout
        try:
            connection = self._pool.getconn(timeout=timeout)
        except PoolTimeout:
            raise DatabaseUnavailable("no database connection within the acquire timeout") from None
        tx = PostgresTx(connection)
        try:
            return fn(tx)
        except DatabaseUnavailable:
            if tx.answered:
                raise
        finally:
            self._pool.putconn(connection)  # a broken connection: the pool drops it
        connection = self._checked_connection(max(0.01, deadline - time.monotonic()))
        try:
            return fn(PostgresTx(connection))
        finally:
            self._pool.putconn(connection)

    def _run(self, fn: Callable[[Tx], T], timeout: float) -> T:
        connection = self._begun(time.monotonic() + timeout)
        try:
            try:
                result = fn(PostgresTx(connection))
            except BaseException:
                with contextlib.suppress(psycopg.Error):  # a broken connection: the pool drops it
                    connection.execute("ROLLBACK")
                raise
            try:
                connection.execute("COMMIT")
            except psycopg.Error as exc:
                with contextlib.suppress(psycopg.Error):
                    connection.execute("ROLLBACK")
                _translate(exc)
            return result
        finally:
            self._pool.putconn(connection)

    def _begun(self, deadline: float) -> psycopg.Connection[Row]:
        """A pooled connection in a transaction (an explicit BEGIN: the connections are in
        autocommit mode). The BEGIN is also the check that the connection lives: on one the
        server terminated while it sat in the pool it fails before anything ran, and the
        transaction starts on a checked connection instead. No extra round trip per
        transaction when the connection is fine."""
        try:
            connection = self._pool.getconn(timeout=max(0.01, deadline - time.monotonic()))
        except PoolTimeout:
            raise DatabaseUnavailable("no database connection within the acquire timeout") from None
        try:
            connection.execute("BEGIN")
            return connection
        except psycopg.Error:
            self._pool.putconn(connection)  # the pool sees it is broken and replaces it
        connection = self._checked_connection(max(0.01, deadline - time.monotonic()))
        try:
            connection.execute("BEGIN")
        except psycopg.Error as exc:
            self._pool.putconn(connection)
            _translate(exc)
        return connection

    def _checked_connection(self, timeout: float) -> psycopg.Connection[Row]:
        """A pooled connection that answered a round trip just now. One the server terminated
        goes back to the pool (which drops and replaces it) and the next is tried at once:
        psycopg_pool's own `check=` sleeps 1, 2, 4 s between failed checks, so a few dead
        connections in a row would outlast the acquire timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                connection = self._pool.getconn(timeout=max(0.01, deadline - time.monotonic()))
            except PoolTimeout:
                raise DatabaseUnavailable("no database connection within the acquire timeout") from None
            try:
                ConnectionPool.check_connection(connection)
            except psycopg.Error:
                self._pool.putconn(connection)
                if time.monotonic() >= deadline:
                    raise DatabaseUnavailable("no live database connection within the acquire timeout") from None
                continue
            return connection
