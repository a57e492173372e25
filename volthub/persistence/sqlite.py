"""Embedded SQLite backend: a WAL database file, connections used from worker threads."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from volthub.persistence.database import (
    Database,
    DatabaseError,
    DatabaseUnavailable,
    IntegrityError,
    Params,
    Row,
    StorageUnavailable,
    Tx,
)

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
        # them spin on SQLITE_BUSY in threads keeps latency flat under contention.
        self._writers = trio.CapacityLimiter(1)

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await trio.to_thread.run_sync(self._release, self._connect())

    async def close(self) -> None:
        with self._idle_lock:
            connections, self._all, self._idle = self._all, [], []
        for connection in connections:
            connection.close()

    async def read(self, fn: Callable[[Tx], T]) -> T:
        return await trio.to_thread.run_sync(self._run, fn, False, limiter=self._readers)

    def pool_stats(self) -> dict[str, int]:
        readers, writers = self._readers.statistics(), self._writers.statistics()
        in_use = readers.borrowed_tokens + writers.borrowed_tokens
        total = int(readers.total_tokens) + int(writers.total_tokens)
        return {
            "in_use": in_use,
            "idle": max(0, total - in_use),
            "waiting": readers.tasks_waiting + writers.tasks_waiting,
        }

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await trio.to_thread.run_sync(self._run, fn, True, limiter=self._writers)

    def run_sync(self, fn: Callable[[Tx], T], *, write: bool = True) -> T:
        return self._run(fn, write)

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
