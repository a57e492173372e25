"""Embedded SQLite backend: a WAL database file, connections used from worker threads."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from volthub.persistence.database import Database, IntegrityError, Params, Row, Tx

T = TypeVar("T")


def _dict_rows(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Row:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}


class SQLiteTx(Tx):
    dialect = "sqlite"

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            return self._connection.execute(sql, tuple(params)).fetchall()
        except sqlite3.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc

    def execute_many(self, sql: str, rows: Sequence[Params]) -> None:
        try:
            self._connection.executemany(sql, [tuple(r) for r in rows])
        except sqlite3.IntegrityError as exc:
            raise IntegrityError(str(exc)) from exc


class SQLiteDatabase(Database):
    dialect = "sqlite"

    def __init__(self, url: str, path: Path, pool_size: int = 8) -> None:
        self.url = url
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

    async def write(self, fn: Callable[[Tx], T]) -> T:
        return await trio.to_thread.run_sync(self._run, fn, True, limiter=self._writers)

    def run_sync(self, fn: Callable[[Tx], T], *, write: bool = True) -> T:
        return self._run(fn, write)

    def _run(self, fn: Callable[[Tx], T], write: bool) -> T:
        connection = self._acquire()
        try:
            # IMMEDIATE takes the write lock up front, so a read-then-write transaction
            # can never fail half-way with a lock upgrade error.
            connection.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = fn(SQLiteTx(connection))
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")
            return result
        finally:
            self._release(connection)

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
