"""Streams: a channel's stream settings and key, its broadcasts, VODs and clips (migration 0020)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from volthub.persistence.database import Row, Tx
from volthub.persistence.pagination import encode_cursor, newest_first
from volthub.persistence.records import Record, insert, read, to_json
from volthub.persistence.users import Page, User

# Live listings (top, growing, featured) sort in memory by presence; this bounds one read.
MAX_LIVE_SCAN = 5000


@dataclass(frozen=True)
class StreamSettings(Record):
    channel_id: str
    title: str
    category: str | None
    tags: tuple[str, ...]
    channel_tags: tuple[str, ...]
    language: str | None
    key_nonce: str
    key_hash: str
    updated_at: int


def get_settings(tx: Tx, channel_id: str) -> StreamSettings | None:
    return StreamSettings.fetch_one(
        tx, f"SELECT {StreamSettings.columns()} FROM stream_settings WHERE channel_id = ?", (channel_id,)
    )


def ensure_settings(tx: Tx, channel_id: str, key_nonce: str, key_hash: str, now_ms: int) -> StreamSettings:
    """The channel's settings, created with this key when it has none yet."""
    tx.execute(
        "INSERT INTO stream_settings (channel_id, key_nonce, key_hash, updated_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (channel_id) DO NOTHING",
        (channel_id, key_nonce, key_hash, now_ms),
    )
    found = get_settings(tx, channel_id)
    assert found is not None
    return found


def settings_by_key_hash(tx: Tx, key_hash: str) -> StreamSettings | None:
    return StreamSettings.fetch_one(
        tx, f"SELECT {StreamSettings.columns()} FROM stream_settings WHERE key_hash = ?", (key_hash,)
    )


_INFO_COLUMNS = {"title": "title", "category": "category", "language": "language"}


def update_info(tx: Tx, channel_id: str, changes: dict[str, Any], now_ms: int) -> None:
    """Write the given fields (title, category, language, tags, channel_tags) and nothing else."""
    sets: list[str] = []
    values: list[Any] = []
    for key, value in changes.items():
        if key in ("tags", "channel_tags"):
            sets.append(f"{key} = ?")
            values.append(to_json(value))
        else:
            sets.append(f"{_INFO_COLUMNS[key]} = ?")
            values.append(value)
    tx.execute(
        f"UPDATE stream_settings SET {', '.join([*sets, 'updated_at = ?'])} WHERE channel_id = ?",
        (*values, now_ms, channel_id),
    )


def set_key(tx: Tx, channel_id: str, key_nonce: str, key_hash: str, now_ms: int) -> None:
    tx.execute(
        "UPDATE stream_settings SET key_nonce = ?, key_hash = ?, updated_at = ? WHERE channel_id = ?",
        (key_nonce, key_hash, now_ms, channel_id),
    )


# --- broadcasts -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Stream(Record):
    id: str
    channel_id: str
    key_hash: str
    source: str
    media_path: str | None
    started_at: int
    last_seen_at: int
    ended_at: int | None = None
    end_reason: str | None = None


def open_stream(tx: Tx, channel_id: str) -> Stream | None:
    return Stream.fetch_one(
        tx, f"SELECT {Stream.columns()} FROM streams WHERE channel_id = ? AND ended_at IS NULL", (channel_id,)
    )


def open_stream_by_key(tx: Tx, key_hash: str) -> Stream | None:
    return Stream.fetch_one(
        tx, f"SELECT {Stream.columns()} FROM streams WHERE key_hash = ? AND ended_at IS NULL", (key_hash,)
    )


def insert_stream(tx: Tx, stream: Stream) -> None:
    insert(tx, "streams", stream)


def touch_stream(tx: Tx, stream_id: str, now_ms: int) -> None:
    tx.execute("UPDATE streams SET last_seen_at = ? WHERE id = ? AND ended_at IS NULL", (now_ms, stream_id))


def close_stream(tx: Tx, stream_id: str, now_ms: int, reason: str) -> bool:
    """End an open stream; False when it had ended already (a hook and the silence sweep raced)."""
    row = tx.one(
        "UPDATE streams SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL RETURNING id",
        (now_ms, reason, stream_id),
    )
    return row is not None


def silent_streams(tx: Tx, seen_before_ms: int, limit: int = 100) -> list[Stream]:
    rows = tx.execute(
        f"SELECT {Stream.columns()} FROM streams WHERE ended_at IS NULL AND last_seen_at < ? ORDER BY last_seen_at LIMIT ?",
        (seen_before_ms, limit),
    )
    return [Stream.from_row(row) for row in rows]


def oldest_open_heartbeat(tx: Tx) -> int | None:
    """The earliest `last_seen_at` of the open streams: the next one that may fall silent."""
    value = tx.scalar("SELECT MIN(last_seen_at) FROM streams WHERE ended_at IS NULL")
    return None if value is None else int(value)


def get_stream(tx: Tx, stream_id: str) -> Stream | None:
    return Stream.fetch_one(tx, f"SELECT {Stream.columns()} FROM streams WHERE id = ?", (stream_id,))


# --- live listings --------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveStream:
    """An open stream with its channel and the channel's current settings."""

    stream: Stream
    channel: User
    settings: StreamSettings


_LIVE = (
    "SELECT s.id, s.channel_id, s.key_hash, s.source, s.media_path, s.started_at, s.last_seen_at,"
    " s.ended_at, s.end_reason,"
    " u.username, u.display_name, u.avatar_url, u.bio, u.created_at AS user_created_at,"
    " u.updated_at AS user_updated_at,"
    " i.title, i.category, i.tags, i.channel_tags, i.language, i.key_nonce, i.key_hash AS settings_key_hash,"
    " i.updated_at AS settings_updated_at"
    " FROM streams s JOIN users u ON u.id = s.channel_id JOIN stream_settings i ON i.channel_id = s.channel_id"
    " WHERE s.ended_at IS NULL"
)


def _live(row: Row) -> LiveStream:
    # The joined row names the channel's and the settings' own columns apart from the stream's.
    channel = read(
        User,
        row,
        id=row["channel_id"],
        created_at=int(row["user_created_at"]),
        updated_at=int(row["user_updated_at"]),
    )
    settings = read(StreamSettings, row, key_hash=row["settings_key_hash"], updated_at=int(row["settings_updated_at"]))
    return LiveStream(Stream.from_row(row), channel, settings)


def _like_tag(slug: str) -> str:
    # Slugs are [a-z0-9-]: nothing in them is special to LIKE or JSON.
    return f'%"{slug}"%'


@dataclass(frozen=True)
class LiveFilter:
    category: str | None = None
    tags: tuple[str, ...] = ()
    language: str | None = None


def live_page(tx: Tx, filters: LiveFilter, limit: int, cursor: str | None) -> Page:
    """Open streams, newest first, filtered; keyset cursor on (started_at, id)."""
    sql = _LIVE
    params: list[Any] = []
    if filters.category is not None:
        sql += " AND i.category = ?"
        params.append(filters.category)
    if filters.language is not None:
        sql += " AND i.language = ?"
        params.append(filters.language)
    for slug in filters.tags:
        sql += " AND (i.tags LIKE ? OR i.channel_tags LIKE ?)"
        params += [_like_tag(slug), _like_tag(slug)]
    rows, more = newest_first(tx, sql, params, limit, cursor, at="s.started_at", key="s.id")
    items = [_live(row) for row in rows]
    last = items[-1].stream if items else None
    return Page(items, encode_cursor(last.started_at, last.id) if more and last else None)


def live_all(tx: Tx) -> list[LiveStream]:
    rows = tx.execute(_LIVE + " ORDER BY s.started_at DESC, s.id DESC LIMIT ?", (MAX_LIVE_SCAN,))
    return [_live(row) for row in rows]


def live_of_channels(tx: Tx, channel_ids: list[str]) -> list[LiveStream]:
    if not channel_ids:
        return []
    marks = ", ".join("?" for _ in channel_ids)
    rows = tx.execute(_LIVE + f" AND s.channel_id IN ({marks})", tuple(channel_ids))
    return [_live(row) for row in rows]


# --- VODs and clips -------------------------------------------------------------------------
# Both are records written once and read whole, their columns named as their fields: one
# set of functions serves both tables.


@dataclass(frozen=True)
class Vod(Record):
    id: str
    channel_id: str
    stream_id: str
    title: str
    category: str | None
    tags: tuple[str, ...]
    started_at: int
    ended_at: int
    duration_ms: int
    created_at: int


@dataclass(frozen=True)
class Clip(Record):
    id: str
    channel_id: str
    stream_id: str
    creator_id: str | None
    title: str
    description: str
    duration_ms: int
    start_offset_ms: int
    highlight: bool
    created_at: int


VodOrClip = TypeVar("VodOrClip", Vod, Clip)
_TABLES: dict[type[Any], str] = {Vod: "vods", Clip: "clips"}


def _get(tx: Tx, kind: type[VodOrClip], record_id: str) -> VodOrClip | None:
    return kind.fetch_one(tx, f"SELECT {kind.columns()} FROM {_TABLES[kind]} WHERE id = ?", (record_id,))


def _page(tx: Tx, kind: type[VodOrClip], channel_id: str, limit: int, cursor: str | None) -> Page:
    """A channel's records, newest first."""
    select = f"SELECT {kind.columns()} FROM {_TABLES[kind]} WHERE channel_id = ?"
    rows, more = newest_first(tx, select, [channel_id], limit, cursor, at="created_at", key="id")
    items = [kind.from_row(row) for row in rows]
    return Page(items, encode_cursor(items[-1].created_at, items[-1].id) if more and items else None)


def insert_vod(tx: Tx, vod: Vod) -> None:
    insert(tx, "vods", vod)


def get_vod(tx: Tx, vod_id: str) -> Vod | None:
    return _get(tx, Vod, vod_id)


def latest_vod(tx: Tx, channel_id: str) -> Vod | None:
    row = tx.one(
        f"SELECT {Vod.columns()} FROM vods WHERE channel_id = ? ORDER BY created_at DESC, id DESC LIMIT 1",
        (channel_id,),
    )
    return Vod.from_row(row) if row else None


def vods_page(tx: Tx, channel_id: str, limit: int, cursor: str | None) -> Page:
    return _page(tx, Vod, channel_id, limit, cursor)


def insert_clip(tx: Tx, clip: Clip) -> None:
    insert(tx, "clips", clip)


def get_clip(tx: Tx, clip_id: str) -> Clip | None:
    return _get(tx, Clip, clip_id)


def clips_page(tx: Tx, channel_id: str, limit: int, cursor: str | None) -> Page:
    return _page(tx, Clip, channel_id, limit, cursor)


def claim_raid_cooldown(tx: Tx, key: str, now_ms: int, until_ms: int) -> int | None:
    """Start the cooldown `key` (until `until_ms`) unless one is running: None when claimed,
    else the time (ms) the running one ends. Guarded, so concurrent raids claim it once."""
    rows = tx.execute(
        "INSERT INTO raid_cooldowns (key, until_ms) VALUES (?, ?) ON CONFLICT (key) DO UPDATE"
        " SET until_ms = excluded.until_ms WHERE raid_cooldowns.until_ms <= ? RETURNING key",
        (key, until_ms, now_ms),
    )
    if rows:
        return None
    return int(tx.scalar("SELECT until_ms FROM raid_cooldowns WHERE key = ?", (key,)))
