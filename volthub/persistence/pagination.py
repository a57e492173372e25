"""Opaque keyset cursors: `{items, nextCursor}` lists stay stable while rows are added."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson


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


def decode_position(cursor: str) -> tuple[int, str]:
    """The (time, id) key most listings page by, from a cursor `encode_cursor(time, id)` made."""
    at, last = decode_cursor(cursor, 2)
    if not isinstance(at, int) or not isinstance(last, str):
        raise InvalidCursor("cursor is not one this server issued")
    return at, last
