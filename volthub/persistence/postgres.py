"""PostgreSQL backend: psycopg 3's sync API in Trio worker threads.

Faults: the pool checks a connection before handing it out, so one the server
terminated is replaced instead of failing the request; waiting for a connection (the
limiter and the pool together) is bounded by `acquire_timeout`, then `DatabaseUnavailable`;
after an outage the pool retries connecting every second (psycopg_pool's default backoff
doubles up to minutes), so service resumes within about a second of the database's
return. Errors leave this module as our own exceptions carrying the SQLSTATE and primary
message only, never DETAIL (which holds row data) or statement parameters.

Writes that name an ordering key (a channel actor's, keyed by its channel) are
group-committed: those that queue up while a group runs make the next group, run together
in one transaction on one connection, in one worker thread hop, and commit once. The writes
run in lockstep, statement by statement, each step's statements sent together in one round
trip (`postgres_lockstep`), or one after another when lockstep cannot serve them. Each
fails alone: when one fails, its caller gets the error, the transaction is rolled back and
the others run again in a new one, which is why a keyed write must be safe to run more than
once (a savepoint per write would cost every write a round trip, to save work only when one
fails). No caller hears back before the group's COMMIT, and a failed COMMIT or a lost
connection fails every caller of the group. A group runs its writes sorted by key, so
groups of different processes that lock the same channels take the locks in one order and
cannot deadlock. Writes without a key may lock anything in any order and keep a
transaction of their own. `statements` callers (each statement
committed on its own) that queue up likewise share a connection and a thread hop, one
caller after another.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import outcome
import psycopg
import trio
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from volthub import metrics
from volthub.logs import mask_url
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
from volthub.persistence.group_commit import GroupQueue, QueuedCall, acquire_deadline, fail_all
from volthub.persistence.postgres_lockstep import RunOneAfterAnother, rows_of, run_in_lockstep

T = TypeVar("T")
A = TypeVar("A")
R = TypeVar("R")


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """Repositories write qmark placeholders; psycopg wants %s (and a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _summary(exc: psycopg.Error) -> str:
    primary = exc.diag.message_primary if exc.diag is not None else None
    return f"{exc.sqlstate or type(exc).__name__}: {primary or type(exc).__name__}"


def _translated(exc: psycopg.Error) -> Exception:
    """Our exception for a driver error."""
    if isinstance(exc, psycopg.errors.IntegrityError):
        return IntegrityError(_summary(exc))
    if isinstance(exc, psycopg.DataError):
        return InvalidData(_summary(exc))
    if isinstance(exc, psycopg.OperationalError):
        return DatabaseUnavailable(_summary(exc))
    return DatabaseError(_summary(exc))


def _translate(exc: psycopg.Error) -> NoReturn:
    """Raise our exception for a driver error, without its chain (whose message has DETAIL)."""
    raise _translated(exc) from None


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
            rows = rows_of(cursor)
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

    def __init__(
        self,
        url: str,
        pool_size: int = 8,
        acquire_timeout: float = 5.0,
        group_slots: int | None = None,
        lockstep: bool = True,
    ) -> None:
        self.url = url
        # A group's writes interleaved statement by statement, one round trip per step
        # (`postgres_lockstep`); False runs them one after another.
        self.lockstep = lockstep
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
        # Groups in flight at most. One runs at a time, so that writes arriving meanwhile
        # queue and share the next group's transaction and thread hop; another starts
        # beside it only when it has run long (waiting for a row lock, most likely), so that
        # one waiting group does not stop every keyed write. The other connections serve
        # reads and writes without a key.
        slots = group_slots if group_slots is not None else max(1, pool_size // 4)
        self._write_groups = GroupQueue(
            slots, acquire_timeout, lambda group: self._run_group_in_thread(group, self._run_group)
        )
        # `statements` callers (the rate-limit budgets' batches) share thread hops the same way,
        # each statement still committed on its own.
        self._statement_groups = GroupQueue(
            slots, acquire_timeout, lambda group: self._run_group_in_thread(group, self._run_statement_group)
        )

    async def open(self) -> None:
        metrics.start_db_errors(self.dialect)
        await trio.to_thread.run_sync(self._open_pool)

    def _open_pool(self) -> None:
        """One connection first: a server that is down, a wrong password or a missing
        database fails the open at once with its cause (DatabaseUnavailable), where the
        pool would retry for 15 s and then say only that it timed out."""
        try:
            psycopg.connect(self.url, connect_timeout=max(1, round(self.acquire_timeout))).close()
        except psycopg.Error as exc:
            cause = " ".join(str(exc).split()) or type(exc).__name__
            raise DatabaseUnavailable(f"cannot connect to {mask_url(self.url)}: {cause}") from None
        self._pool.open(wait=True, timeout=15)

    async def close(self) -> None:
        await trio.to_thread.run_sync(self._pool.close)

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await self._call(fn)

    async def write(self, fn: Callable[[Tx], T], *, order: str | None = None) -> T:
        if order is None:
            return await self._call(fn)
        return await self._grouped(self._write_groups, QueuedCall(fn, order))

    async def statements(self, fn: Callable[[Tx], T]) -> T:
        return await self._grouped(self._statement_groups, QueuedCall(fn, ""))

    async def _grouped(self, queue: GroupQueue, job: QueuedCall[T]) -> T:
        try:
            return (await queue.outcome(job)).unwrap()
        except QUERY_ERRORS as exc:  # once per caller: each had its own transaction
            count_query_error(self.dialect, exc)
            raise

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
            "waiting": slots.tasks_waiting + len(self._write_groups.queued) + len(self._statement_groups.queued),
        }

    # -- group commit: keyed writes, and statements callers --

    async def _run_group_in_thread(
        self, group: list[QueuedCall[Any]], run: Callable[[list[QueuedCall[Any]], float], None]
    ) -> None:
        try:  # by the group's deadline: the calls' time in the queue counts
            await self._in_thread(run, group)
        except DatabaseUnavailable as exc:  # no slot in time: the group never ran
            fail_all(group, exc)

    def _run_group(self, group: list[QueuedCall[Any]], timeout: float) -> None:
        if len(group) == 1:
            group[0].result = outcome.capture(self._run, group[0].fn, timeout)
            return
        try:
            connection = self._begun(time.monotonic() + timeout)
        except QUERY_ERRORS as exc:
            fail_all(group, exc)
            return
        try:
            self._run_in_one_transaction(connection, sorted(group, key=lambda job: job.order))
        finally:
            self._pool.putconn(connection)

    def _run_in_one_transaction(self, connection: psycopg.Connection[Row], group: list[QueuedCall[Any]]) -> None:
        """The group's writes in the transaction `connection` is in, in lockstep
        (`postgres_lockstep`) or else one after another, then one COMMIT. A write that fails
        keeps its error; the transaction is rolled back and the others run again in a new
        one (each round has one write fewer)."""
        lockstep = self.lockstep
        while group:
            try:
                if lockstep:
                    failed = run_in_lockstep(connection, group, to_pyformat)
                else:
                    failed = self._run_until_one_fails(connection, group)
            except RunOneAfterAnother:
                failed, lockstep = None, False
            else:
                if failed is None:
                    self._commit_or_fail_all(connection, group)
                    return
                group = [job for job in group if job is not failed]
            try:
                connection.execute("ROLLBACK")
                if group:
                    connection.execute("BEGIN")
            except psycopg.Error as exc:  # the connection is gone: the rest hear it
                fail_all(group, _translated(exc))
                return

    @staticmethod
    def _run_until_one_fails(
        connection: psycopg.Connection[Row], group: list[QueuedCall[Any]]
    ) -> QueuedCall[Any] | None:
        """Run the writes in turn; the first that fails, with its error kept, or None."""
        tx = PostgresTx(connection)
        for job in group:
            try:
                job.result = outcome.Value(job.fn(tx))
            except BaseException as exc:
                job.result = outcome.Error(_translated(exc) if isinstance(exc, psycopg.Error) else exc)
                return job
        return None

    def _commit_or_fail_all(self, connection: psycopg.Connection[Row], group: list[QueuedCall[Any]]) -> None:
        try:
            connection.execute("COMMIT")
        except psycopg.Error as exc:
            with contextlib.suppress(psycopg.Error):
                connection.execute("ROLLBACK")
            fail_all(group, _translated(exc))

    def _run_statement_group(self, group: list[QueuedCall[Any]], timeout: float) -> None:
        """Each job's statements on one connection in autocommit, one job after another; a
        job that fails does not touch the others. A connection that is lost is replaced by
        a checked one for the jobs after; a job that met it before anything of it ran (its
        first statement) runs once more, as `_run_statements` does."""
        if len(group) == 1:
            group[0].result = outcome.capture(self._run_statements, group[0].fn, timeout)
            return
        deadline = time.monotonic() + timeout
        try:
            connection = self._pool.getconn(timeout=timeout)
        except PoolTimeout:
            fail_all(group, DatabaseUnavailable("no database connection within the acquire timeout"))
            return
        held = True
        try:
            index, again = 0, False
            while index < len(group):
                job, tx = group[index], PostgresTx(connection)
                try:
                    job.result = outcome.Value(job.fn(tx))
                except DatabaseUnavailable as lost:
                    self._pool.putconn(connection)  # a broken connection: the pool drops it
                    held = False
                    try:
                        connection = self._checked_connection(max(0.01, deadline - time.monotonic()))
                    except DatabaseUnavailable as gone:
                        fail_all(group[index:], gone)
                        return
                    held = True
                    if not tx.answered and not again:  # nothing of it ran: once more
                        again = True
                        continue
                    job.result = outcome.Error(lost)
                except BaseException as exc:
                    job.result = outcome.Error(exc)
                index, again = index + 1, False
        finally:
            if held:
                self._pool.putconn(connection)

    async def _call(self, fn: Callable[[Tx], T]) -> T:
        try:
            return await self._in_thread(self._run, fn)
        except QUERY_ERRORS as exc:  # once per transaction, whichever statement failed
            count_query_error(self.dialect, exc)
            raise

    async def _in_thread(self, run: Callable[[A, float], R], arg: A) -> R:
        """`run(arg, timeout)` on a worker thread holding a connection slot: waiting for the
        slot and then for a pooled connection share one acquire_timeout, which ends sooner
        for a group whose calls have waited in a group-commit queue (`acquire_deadline`)."""
        deadline = acquire_deadline(self.acquire_timeout)
        with trio.move_on_at(deadline) as waited:
            await self._limiter.acquire()
        if waited.cancelled_caught:
            raise DatabaseUnavailable("no database connection became free in time")
        try:
            remaining = max(0.05, deadline - trio.current_time())
            return await trio.to_thread.run_sync(run, arg, remaining, limiter=self._threads)
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
