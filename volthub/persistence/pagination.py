"""Opaque keyset cursors: `{items, nextCursor}` lists stay stable while rows are added."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

import orjson

from volthub.persistence.database import Row, Tx


class InvalidCursor(ValueError):
    pass


def encode_cursor(*key: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode().rstrip("=")


def decode_cursor(cursor: str, arity: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        key = orjson.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (binascii.Error, orjson.JSONDecodeError, UnicodeEncodeError, ValueError):
        raise InvalidCursor("cursor is not one this server issued") from None
    if not isinstance(key, list) or len(key) != arity:
        raise InvalidCursor("cursor is not one this server issued")
    if not all(isinstance(part, (int, str)) and not isinstance(part, bool) for part in key):
        raise InvalidCursor("cursor is not one this server issued")
    return key


def newest_first(
    tx: Tx, select: str, params: Sequence[Any], limit: int, cursor: str | None, *, at: str, key: str
) -> tuple[list[Row], bool]:
    """One page of `select` (a query up to the last of its WHERE conditions) newest first by
    the columns (`at`, `key`), after the row `cursor` names (None: from the newest one): at
    most `limit` rows, and whether more follow. The next page's cursor is the last row's
    `encode_cursor(at, key)`."""
    values = list(params)
    if cursor is not None:
        when, last = decode_cursor(cursor, 2)
        select += f" AND ({at} < ? OR ({at} = ? AND {key} < ?))"
        values += [when, when, last]
    rows = tx.execute(f"{select} ORDER BY {at} DESC, {key} DESC LIMIT ?", (*values, limit + 1))
    return rows[:limit], len(rows) > limit


def decode_position(cursor: str) -> tuple[int, str]:
    """The (time, id) key most listings page by, from a cursor `encode_cursor(time, id)` made."""
    at, last = decode_cursor(cursor, 2)
    if not isinstance(at, int) or not isinstance(last, str):
        raise InvalidCursor("cursor is not one this server issued")
    return at, last
