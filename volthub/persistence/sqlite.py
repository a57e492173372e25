"""Embedded SQLite backend: a WAL database file, connections used from worker threads.

Writes are group-committed. SQLite has one writer at a time and every COMMIT waits for the
disk (`synchronous=FULL`). Write transactions that queue up while one is running are run
together, one after another in one transaction, each inside its own SAVEPOINT, and
committed once: one thread hand-off and one disk flush for the group instead of one each.
Each transaction still sees the ones before it and fails alone (rolled back to its
savepoint, its caller gets the error, the others go on); no caller hears back before the
group's COMMIT is on disk, and a failed COMMIT fails every caller of the group.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import outcome
import trio

from volthub import metrics
from volthub.persistence.database import (
    QUERY_ERRORS,
    Database,
    DatabaseError,
    DatabaseUnavailable,
    IntegrityError,
    Params,
    Row,
    StorageUnavailable,
    Tx,
    count_query_error,
)
from volthub.persistence.group_commit import GroupQueue, QueuedCall

T = TypeVar("T")

# Primary result codes (the low byte of extended ones) that mean the storage, not the
# request, is at fault: 503 storage_unavailable, never a 500 with a traceback per request.
_STORAGE_FAULTS = {
    8: ("read_only", "the database is read-only"),  # SQLITE_READONLY
    10: ("io_error", "disk I/O error"),  # SQLITE_IOERR
    13: ("disk_full", "the database or disk is full"),  # SQLITE_FULL
    14: ("cannot_open", "the database file cannot be opened"),  # SQLITE_CANTOPEN
}


def _translate(exc: sqlite3.Error) -> Exception:
    if isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(str(exc))
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _STORAGE_FAULTS:
        fault, message = _STORAGE_FAULTS[code & 0xFF]
        return StorageUnavailable(fault, message)
    if code is not None and code & 0xFF in (5, 6):  # SQLITE_BUSY, SQLITE_LOCKED past busy_timeout
        return DatabaseUnavailable("the database stayed locked")
    return DatabaseError(f"{getattr(exc, 'sqlite_errorname', type(exc).__name__)}: {exc}")


def _dict_rows(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Row:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}


class SQLiteTx(Tx):
    dialect = "sqlite"

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            return self._connection.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise _translate(exc) from None

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        try:
            self._connection.executemany(sql, [tuple(r) for r in rows])
        except sqlite3.Error as exc:
            raise _translate(exc) from None


class SQLiteDatabase(Database):
    dialect = "sqlite"

    def __init__(self, url: str, path: Path, pool_size: int = 8, acquire_timeout: float = 5.0) -> None:
        self.url = url
        self.acquire_timeout = acquire_timeout
        self.path = path
        self._idle: list[sqlite3.Connection] = []
        self._all: list[sqlite3.Connection] = []
        self._idle_lock = threading.Lock()
        self._readers = trio.CapacityLimiter(pool_size)
        # SQLite has one writer at a time; queueing writers in Trio instead of letting
        # them spin on SQLITE_BUSY in threads keeps latency flat under contention, and lets
        # the queued ones commit as a group (the module's docstring).
        # One group at a time, and no give-up time: a queued write waits for its turn.
        self._writes = GroupQueue(1, math.inf, self._run_group_in_thread)

    async def open(self) -> None:
        metrics.start_db_errors(self.dialect)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = await trio.to_thread.run_sync(self._connect)
        except (OSError, sqlite3.Error) as exc:  # a directory it may not write, not a database file
            raise DatabaseUnavailable(f"cannot open {self.url}: {exc}") from None
        self._release(connection)

    async def close(self) -> None:
        with self._idle_lock:
            connections, self._all, self._idle = self._all, [], []
        for connection in connections:
            connection.close()

    async def read(self, fn: Callable[[Tx], T]) -> T:
        try:
            return await trio.to_thread.run_sync(self._run, fn, False, limiter=self._readers)
        except QUERY_ERRORS as exc:
            count_query_error(self.dialect, exc)
            raise

    def pool_stats(self) -> dict[str, int]:
        readers = self._readers.statistics()
        writing = self._writes.running  # the one writer (a group commit at a time)
        in_use = readers.borrowed_tokens + writing
        total = int(readers.total_tokens) + 1
        return {
            "in_use": in_use,
            "idle": max(0, total - in_use),
            "waiting": readers.tasks_waiting + len(self._writes.queued),
        }

    async def write(self, fn: Callable[[Tx], T], *, order: str | None = None) -> T:
        # One writer at a time: no lock order to keep, every write can join a group.
        try:
            return (await self._writes.outcome(QueuedCall(fn))).unwrap()
        except QUERY_ERRORS as exc:  # once per caller: each had its own transaction
            count_query_error(self.dialect, exc)
            raise

    async def _run_group_in_thread(self, group: list[QueuedCall[Any]]) -> None:
        await trio.to_thread.run_sync(self._run_group, group)

    def _run_group(self, group: list[QueuedCall[Any]]) -> None:
        if len(group) == 1:
            group[0].result = outcome.capture(self._run, group[0].fn, True)
            return
        try:
            connection = self._acquire()
        except sqlite3.Error as exc:
            self._fail_all(group, exc)
            return
        try:
            self._run_in_one_transaction(connection, group)
        finally:
            self._release(connection)

    def _run_in_one_transaction(self, connection: sqlite3.Connection, group: list[QueuedCall[Any]]) -> None:
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._fail_all(group, exc)
            return
        tx = SQLiteTx(connection)
        for job in group:
            try:
                connection.execute("SAVEPOINT grouped")
                job.result = outcome.Value(job.fn(tx))
                connection.execute("RELEASE grouped")
            except BaseException as exc:
                job.result = outcome.Error(_translate(exc) if isinstance(exc, sqlite3.Error) else exc)
                try:
                    connection.execute("ROLLBACK TO grouped")
                    connection.execute("RELEASE grouped")
                except sqlite3.Error as rollback:  # the whole transaction is gone: fail the rest
                    self._rollback(connection)
                    self._fail_all(
                        [rest for rest in group if rest.result is None or isinstance(rest.result, outcome.Value)],
                        rollback,
                    )
                    return
        try:
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(connection)
            self._fail_all(group, exc)

    @staticmethod
    def _fail_all(jobs: list[QueuedCall[Any]], exc: sqlite3.Error) -> None:
        """The group's transaction failed: every job hears it, each through its own outcome
        (an outcome can be unwrapped once)."""
        for job in jobs:
            job.result = outcome.Error(_translate(exc))

    def run_sync(self, fn: Callable[[Tx], T], *, write: bool = True) -> T:
        try:
            return self._run(fn, write)
        except QUERY_ERRORS as exc:
            count_query_error(self.dialect, exc)
            raise

    def _run(self, fn: Callable[[Tx], T], write: bool) -> T:
        try:
            connection = self._acquire()
        except sqlite3.Error as exc:
            raise _translate(exc) from None
        try:
            # IMMEDIATE takes the write lock up front, so a read-then-write transaction
            # can never fail half-way with a lock upgrade error.
            connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = fn(SQLiteTx(connection))
            except BaseException:
                self._rollback(connection)
                raise
            try:
                connection.execute("COMMIT")
            except sqlite3.Error:
                self._rollback(connection)
                raise
            return result
        except sqlite3.Error as exc:
            raise _translate(exc) from None
        finally:
            self._release(connection)

    @staticmethod
    def _rollback(connection: sqlite3.Connection) -> None:
        # SQLite may already have rolled back by itself (e.g. on SQLITE_FULL); a second
        # ROLLBACK would raise and hide the error that matters.
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")

    def _acquire(self) -> sqlite3.Connection:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _release(self, connection: sqlite3.Connection) -> None:
        with self._idle_lock:
            self._idle.append(connection)

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        connection.row_factory = _dict_rows
        connection.execute("PRAGMA journal_mode=WAL")
        # FULL: an acknowledged write survives power loss, not only a process crash.
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("PRAGMA busy_timeout=30000")
        with self._idle_lock:
            self._all.append(connection)
        return connection
