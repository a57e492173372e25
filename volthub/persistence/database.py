"""The Store interface shared by both backends.

Repositories are plain synchronous functions over a `Tx` and are written once in portable
SQL (qmark `?` placeholders); a backend runs them in a worker thread inside a transaction,
so the Trio thread never blocks on the database and a change is either whole or absent.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from volthub import metrics

T = TypeVar("T")
Row = dict[str, Any]
Params = Sequence[Any]


class IntegrityError(Exception):
    """A uniqueness or foreign-key constraint refused the write."""


class InvalidData(Exception):
    """The backend refused a value (e.g. NUL in PostgreSQL text): bad input, not a fault."""


class DatabaseUnavailable(Exception):
    """No connection could be had within `[database] acquire_timeout`, or the one in use was
    lost: the request may be retried (HTTP 503 `database_unavailable` with Retry-After)."""


class StorageUnavailable(Exception):
    """The store cannot take writes: disk full, read-only file system or database file
    (HTTP 503 `storage_unavailable`). `fault` names the kind, for rate-limited logging."""

    def __init__(self, fault: str, message: str) -> None:
        super().__init__(message)
        self.fault = fault


class DatabaseError(Exception):
    """Any other backend error, reduced to its code and primary message: never the row data
    (PostgreSQL's DETAIL, statement parameters) that the driver's own message may carry."""


# The `kind` of `volthub_db_query_errors_total` each of the errors above counts as (the first
# class that matches). What a transaction raises otherwise (a repository's own "not found",
# a guarded UPDATE that matched nothing) is the caller's business, not a database error.
_ERROR_KINDS: tuple[tuple[type[Exception], str], ...] = (
    (DatabaseUnavailable, "unavailable"),
    (StorageUnavailable, "storage"),
    (IntegrityError, "constraint"),
    (InvalidData, "invalid_input"),
    (DatabaseError, "other"),
)
QUERY_ERRORS: tuple[type[Exception], ...] = tuple(cls for cls, _ in _ERROR_KINDS)


def count_query_error(backend: str, exc: Exception) -> None:
    """A transaction of `backend` failed with `exc`, one of `QUERY_ERRORS`: count it once."""
    for cls, kind in _ERROR_KINDS:
        if isinstance(exc, cls):
            metrics.count_db_error(backend, kind)
            return


class Tx(ABC):
    """One open transaction. Only ever used from the worker thread that runs it."""

    dialect: str

    @abstractmethod
    def execute(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement; return its rows (empty for statements without a result)."""

    @abstractmethod
    def execute_many(self, sql: str, rows: Sequence[Params]) -> None: ...

    def one(self, sql: str, params: Params = ()) -> Row | None:
        rows = self.execute(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else next(iter(row.values()))

    def savepoint(self) -> Savepoint:
        """Lets a repository try an insert and recover from a constraint error."""
        return Savepoint(self)


class Savepoint:
    _names = itertools.count(1)

    def __init__(self, tx: Tx) -> None:
        self._tx = tx
        self._name = f"sp_{next(Savepoint._names)}"

    def __enter__(self) -> None:
        self._tx.execute(f"SAVEPOINT {self._name}")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> Literal[False]:
        if exc_type is None:
            self._tx.execute(f"RELEASE SAVEPOINT {self._name}")
        elif isinstance(exc, DatabaseUnavailable | StorageUnavailable):
            pass  # the transaction itself is gone (SQLite rolls back on SQLITE_FULL): report that
        else:
            self._tx.execute(f"ROLLBACK TO SAVEPOINT {self._name}")
            self._tx.execute(f"RELEASE SAVEPOINT {self._name}")
        return False


class Database(ABC):
    """A connection pool for one backend, driven from Trio."""

    dialect: str
    url: str

    @abstractmethod
    async def read(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` in a read transaction on a worker thread."""

    @abstractmethod
    async def write(self, fn: Callable[[Tx], T], *, order: str | None = None) -> T:
        """Run `fn` in a write transaction; it is committed before this returns.

        `order` names the lock `fn` takes first (a channel actor's channel) when that is
        the only kind of row lock it takes out of order with other writers: a backend may
        then commit it in one transaction with other writes that name one, taking them in
        the order of their keys, may interleave their statements (so `fn` keeps to rows of
        its key, or to statements atomic on their own, such as a guarded UPDATE), and may
        run `fn` more than once (each run in a new transaction, only the last committed):
        what `fn` keeps outside the database must start over with each run. Without it,
        `fn` runs once, in a transaction of its own."""

    async def statements(self, fn: Callable[[Tx], T]) -> T:
        """Run `fn` on a worker thread with each statement committed on its own: for work
        that is atomic statement by statement (a compare-and-set), without a transaction's
        BEGIN and COMMIT. `fn` may run twice, so it must be safe to repeat until its first
        statement. A backend without that saving runs it as a write transaction."""
        return await self.write(fn)

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    def run_sync(self, fn: Callable[[Tx], T], *, write: bool = True) -> T:
        """The same transaction, on the calling thread: for the CLI and migrations only."""

    @abstractmethod
    def pool_stats(self) -> dict[str, int]:
        """Connections `in_use` and `idle`, and callers `waiting` for one (metrics)."""
