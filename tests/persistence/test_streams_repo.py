"""VOD and clip records (one mapper for both tables): what is written is read back field for
field, by id and a channel's pages newest first, on SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import Any

from tests.conftest import stored_user
from volthub.persistence import streams as repo
from volthub.persistence.streams import Clip, Stream, Vod


async def _stream(db: Any, channel_id: str, stream_id: str, at: int) -> None:
    """A finished broadcast (a channel has one open stream at most)."""
    stream = Stream(stream_id, channel_id, "keyhash", "rtmp", f"live/{stream_id}", at, at)

    def write(tx: Any) -> None:
        repo.insert_stream(tx, stream)
        assert repo.close_stream(tx, stream_id, at + 500, "ended")

    await db.write(write)


def _vod(number: int, channel_id: str, **changes: Any) -> Vod:
    values: dict[str, Any] = {
        "id": f"vod{number}",
        "channel_id": channel_id,
        "stream_id": f"s{number}",
        "title": f"Broadcast {number}",
        "category": "Chess",
        "tags": ("english", "speedrun"),
        "started_at": 1_000 * number,
        "ended_at": 1_000 * number + 500,
        "duration_ms": 500,
        "created_at": 1_000 * number + 500,
    }
    return Vod(**{**values, **changes})


async def test_vods_round_trip_and_page_newest_first(db: Any) -> None:
    channel = await stored_user(db)
    vods = [_vod(1, channel), _vod(2, channel, category=None, tags=()), _vod(3, channel, tags=("ünïcode",))]
    for vod in vods:
        await _stream(db, channel, vod.stream_id, vod.started_at)
        await db.write(lambda tx, vod=vod: repo.insert_vod(tx, vod))

    for vod in vods:
        assert await db.read(lambda tx, vod=vod: repo.get_vod(tx, vod.id)) == vod
    assert await db.read(lambda tx: repo.get_vod(tx, "missing")) is None
    assert await db.read(lambda tx: repo.latest_vod(tx, channel)) == vods[2]

    first = await db.read(lambda tx: repo.vods_page(tx, channel, 2, None))
    assert first.items == [vods[2], vods[1]] and first.next_cursor
    second = await db.read(lambda tx: repo.vods_page(tx, channel, 2, first.next_cursor))
    assert second.items == [vods[0]] and second.next_cursor is None


async def test_clips_round_trip_and_page_newest_first(db: Any) -> None:
    channel, creator = await stored_user(db), await stored_user(db)
    await _stream(db, channel, "s1", 1_000)
    clips = [
        Clip("clip1", channel, "s1", creator, "First", "", 30_000, 0, False, 2_000),
        Clip("clip2", channel, "s1", None, "Second", "the best bit", 60_000, 12_345, True, 3_000),
    ]
    for clip in clips:
        await db.write(lambda tx, clip=clip: repo.insert_clip(tx, clip))

    for clip in clips:
        got = await db.read(lambda tx, clip=clip: repo.get_clip(tx, clip.id))
        assert got == clip and type(got.highlight) is bool and type(got.duration_ms) is int
    assert await db.read(lambda tx: repo.get_clip(tx, "missing")) is None

    first = await db.read(lambda tx: repo.clips_page(tx, channel, 1, None))
    assert first.items == [clips[1]] and first.next_cursor
    second = await db.read(lambda tx: repo.clips_page(tx, channel, 1, first.next_cursor))
    assert second.items == [clips[0]] and second.next_cursor is None
    assert (await db.read(lambda tx: repo.clips_page(tx, creator, 10, None))).items == []
