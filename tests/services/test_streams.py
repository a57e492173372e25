"""The streams service: which events a change causes, written in its transaction (both backends)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import stored_user
from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import SystemClock
from volthub.hub.publisher import Event, EventPublisher
from volthub.services.categories import Categories
from volthub.services.streams import NotLive, StreamKeyRefused, Streams, TagsRefused


@pytest.fixture
def written() -> list[Event]:
    return []


@pytest.fixture
def streams(db: Any, written: list[Event]) -> Streams:
    publisher = EventPublisher(db, InProcessBroker(), SystemClock())
    publisher.add_transaction_sink(lambda tx, events: written.extend(events))  # what the webhook outbox sees
    return Streams(
        db, publisher, SystemClock(), Categories.load(), "key-secret", 0, [("rtmp", "rtmp://127.0.0.1:1935/live")]
    )


async def test_an_info_change_emits_stream_update_and_channel_update(
    db: Any, streams: Streams, written: list[Event]
) -> None:
    channel = await stored_user(db)
    await streams.update_info(channel, {"title": "Hi", "tags": ["Speed Run"], "channelTags": ["18+"]})
    assert [event.name for event in written] == ["stream.update", "channel.update"]
    update = written[0].data
    assert (update["tags"], update["channelTags"], update["contentWarnings"]) == (
        ["speed-run"],
        ["18-plus"],
        ["18-plus"],
    )
    assert written[1].data["userId"] == channel

    written.clear()
    await streams.update_info(channel, {"title": "Hi", "tags": ["speed-run"]})  # same values
    await streams.update_info(channel, {"language": "en"})  # not described by stream.update
    assert written == []


async def test_a_refused_list_writes_nothing_and_emits_nothing(db: Any, streams: Streams, written: list[Event]) -> None:
    channel = await stored_user(db)
    with pytest.raises(TagsRefused):
        await streams.update_info(channel, {"title": "Lost", "channelTags": [f"c{i}" for i in range(6)]})
    assert written == [] and (await streams.info(channel)).settings.title == ""


async def test_online_offline_and_vod(db: Any, streams: Streams, written: list[Event]) -> None:
    channel = await stored_user(db)
    key = (await streams.setup(channel)).stream_key
    with pytest.raises(StreamKeyRefused):
        await streams.publish(key[:-1], source="hook")
    published = await streams.publish(key, source="hook")
    assert published.started and [event.name for event in written] == ["stream.online"]
    again = await streams.publish(key, source="hook")
    assert not again.started and again.stream.id == published.stream.id and len(written) == 1
    vod = await streams.unpublish(key)
    assert vod.stream_id == published.stream.id
    assert [event.name for event in written] == ["stream.online", "stream.offline"]
    assert written[1].data["vodId"] == vod.id
    with pytest.raises(NotLive):
        await streams.unpublish(key)


async def test_a_stream_live_with_a_regenerated_key_still_ends(db: Any, streams: Streams) -> None:
    channel = await stored_user(db)
    old = (await streams.setup(channel)).stream_key
    await streams.publish(old, source="hook")
    await streams.regenerate_key(channel)
    with pytest.raises(StreamKeyRefused):
        await streams.publish(old, source="hook")
    assert (await streams.unpublish(old)).channel_id == channel
