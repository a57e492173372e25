"""Emotes: global (channel_id NULL, scope_key '') and per channel (scope_key = channel id)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from volthub.persistence.database import IntegrityError, Tx
from volthub.persistence.records import Record

_COLUMNS = "e.id, e.channel_id, e.code, e.media_id, e.created_at, u.username AS channel_username"
_FROM = " FROM emotes e LEFT JOIN users u ON u.id = e.channel_id"


class EmoteExists(Exception):
    pass


@dataclass(frozen=True)
class Emote(Record):
    id: str
    channel_id: str | None
    channel_username: str | None
    code: str
    media_id: str
    created_at: int


def _scope(channel_id: str | None) -> str:
    return channel_id or ""


def insert(tx: Tx, emote_id: str, channel_id: str | None, code: str, media_id: str, now_ms: int) -> None:
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO emotes (id, channel_id, scope_key, code, media_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (emote_id, channel_id, _scope(channel_id), code, media_id, now_ms),
            )
    except IntegrityError:
        raise EmoteExists(code) from None


def get(tx: Tx, channel_id: str | None, code: str) -> Emote | None:
    return Emote.fetch_one(
        tx, f"SELECT {_COLUMNS}{_FROM} WHERE e.scope_key = ? AND e.code = ?", (_scope(channel_id), code)
    )


def delete(tx: Tx, channel_id: str | None, code: str) -> Emote | None:
    found = get(tx, channel_id, code)
    if found is not None:
        tx.execute("DELETE FROM emotes WHERE id = ?", (found.id,))
    return found


def collection(tx: Tx, channel_id: str | None, limit: int = 1000) -> list[Emote]:
    rows = tx.execute(
        f"SELECT {_COLUMNS}{_FROM} WHERE e.scope_key = ? ORDER BY e.code LIMIT ?", (_scope(channel_id), limit)
    )
    return [Emote.from_row(row) for row in rows]


def resolve(tx: Tx, codes: Iterable[str], channel_id: str | None) -> dict[str, Emote]:
    """Code -> emote for the codes that exist; the channel's shadow global ones."""
    wanted = sorted(set(codes))
    if not wanted:
        return {}
    marks = ", ".join("?" for _ in wanted)
    scopes = ["", channel_id] if channel_id else [""]
    scope_marks = ", ".join("?" for _ in scopes)
    rows = tx.execute(
        f"SELECT {_COLUMNS}{_FROM} WHERE e.scope_key IN ({scope_marks}) AND e.code IN ({marks})",
        (*scopes, *wanted),
    )
    found: dict[str, Emote] = {}
    for row in rows:
        emote = Emote.from_row(row)
        if emote.code not in found or emote.channel_id is not None:
            found[emote.code] = emote
    return found
