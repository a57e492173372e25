"""Records: frozen dataclasses read from rows whose columns are named as their fields.

A field's annotation says how its column is read (SQLite stores a bool as 0/1, a list as
JSON text, ...), so a repository declares its record once and every query that selects
those columns reads it with `Kind.from_row(row)` (or runs it with `Kind.fetch_one` and
`Kind.fetch_all`): one mapper instead of one per record. Where the record's fields are its
table's columns, `Kind.columns()` lists them and `insert` writes a new row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any, Self, TypeVar

import orjson

from volthub.persistence.database import Params, Row, Tx

R = TypeVar("R")


def _as_is(value: Any) -> Any:
    return value


def optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _json_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(orjson.loads(value))


def to_json(value: Any) -> str:
    return orjson.dumps(list(value) if isinstance(value, tuple) else value).decode()


# Every annotation a record field may have; another one fails on first use, not silently.
_READ: dict[str, Callable[[Any], Any]] = {
    "str": _as_is,
    "str | None": _as_is,
    "int": int,  # BIGINT
    "int | None": optional_int,
    "bool": bool,  # SQLite stores 0/1
    "list[str]": orjson.loads,  # JSON text
    "tuple[str, ...]": _json_tuple,  # JSON text
    "dict[str, Any]": orjson.loads,  # JSON text
}
# How a value is written back where its column does not hold it as it is.
_WRITE: dict[str, Callable[[Any], Any]] = {
    "list[str]": to_json,
    "tuple[str, ...]": to_json,
    "dict[str, Any]": to_json,
}


def read(kind: type[R], row: Row, **given: Any) -> R:
    """The record `kind` of `row`. `given` holds the fields read otherwise than from a column
    of their name; a field with a default keeps it where the row has no such column, or NULL."""
    found = dict(given)
    for field in fields(kind):  # type: ignore[arg-type]  # every record is a dataclass
        name, default = field.name, field.default
        if name in found:
            continue
        value = row.get(name) if default is not MISSING else row[name]
        found[name] = default if value is None and default is not MISSING else _READ[str(field.type)](value)
    return kind(**found)


def insert(tx: Tx, table: str, record: Any, *, leave_out: tuple[str, ...] = ()) -> None:
    """Write `record` as a new row of `table`. `leave_out` names the fields that are no
    columns of it (read from a join, or derived), which the table's defaults stand for."""
    written = [f for f in fields(record) if f.name not in leave_out]
    row = tuple(_WRITE.get(str(f.type), _as_is)(getattr(record, f.name)) for f in written)
    names = ", ".join(f.name for f in written)
    tx.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", row)


class Record:
    """The base of a record read from rows (see the module): its readers and its column list."""

    __slots__ = ()

    @classmethod
    def from_row(cls, row: Row) -> Self:
        return read(cls, row)

    @classmethod
    def columns(cls) -> str:
        """The fields as a column list, for a record whose fields are its table's columns."""
        return ", ".join(f.name for f in fields(cls))  # type: ignore[arg-type]  # every record is a dataclass

    @classmethod
    def fetch_one(cls, tx: Tx, sql: str, params: Params = ()) -> Self | None:
        """The record of the first row `sql` returns; None when it returns none."""
        row = tx.one(sql, params)
        return None if row is None else cls.from_row(row)

    @classmethod
    def fetch_all(cls, tx: Tx, sql: str, params: Params = ()) -> list[Self]:
        """The records of every row `sql` returns, in its order."""
        return [cls.from_row(row) for row in tx.execute(sql, params)]
