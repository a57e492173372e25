"""The registry's chat facade, without HTTP, on SQLite and PostgreSQL (the loop itself:\ntest_actor.py)."""

from __future__ import annotations

import uuid

import pytest

from tests.hub.conftest import Hub, make_user, retired
from volthub.hub.actor import ChatRefused, UnknownChannel
from volthub.hub.components.chat import ModerationRequest, OutgoingMessage
from volthub.persistence import chat as chat_repo


async def test_send_stores_before_replying_then_publishes(db, start_hub):
    hub = await start_hub()
    channel = await make_user(db, "streamer")
    message_id = await hub.registry.send_message(channel, channel, OutgoingMessage("hello"))
    stored = await db.read(lambda tx: chat_repo.get_message(tx, channel, message_id))
    assert stored is not None and stored.payload["message"] == "hello"
    [event] = hub.named("chat.message")
    assert event.channel_id == channel and event.data["messageId"] == message_id
    assert event.data["badges"] == ["broadcaster"]


async def test_unknown_channel_is_refused_and_leaves_no_actor(db, start_hub):
    hub = await start_hub()
    missing = str(uuid.uuid4())
    with pytest.raises(UnknownChannel):
        await hub.registry.send_message(missing, missing, OutgoingMessage("hello"))
    assert missing not in hub.registry.active_channels()


async def test_idle_actor_stops_and_the_next_one_reloads_from_the_store(db, start_hub, mock_clock):
    hub = await start_hub(idle_seconds=60)
    channel = await make_user(db, "idler")
    await hub.registry.update_settings(channel, {"slowModeSeconds": 20, "emoteOnly": True})
    first = hub.registry.actor(channel)
    assert first is not None
    await retired(first, mock_clock)
    assert channel not in hub.registry.active_channels()

    await hub.registry.send_message(channel, channel, OutgoingMessage("back"))
    second = hub.registry.actor(channel)
    assert second is not None and second is not first
    settings = second.component("chat").settings
    assert settings.slow_mode_seconds == 20 and settings.emote_only


async def test_card_messages_are_system_messages_with_a_card(db, start_hub):
    hub = await start_hub()
    channel = await make_user(db, "carded")
    fan = await make_user(db, "fan")
    message_id = await hub.registry.post_card(
        channel, "sticker-send", {"stickerId": "s1"}, message="sent a sticker", sender_id=fan
    )
    [event] = hub.named("chat.message")
    assert event.data["messageId"] == message_id
    assert event.data["card"] == {"type": "sticker-send", "payload": {"stickerId": "s1"}}
    assert event.data["isSystem"] is True and event.data["userId"] == fan
    history = await db.read(lambda tx: chat_repo.history(tx, channel, 10))
    assert [m["messageId"] for m in history] == [message_id]
    # The broadcaster is the sender when none is named; cards ignore chat modes and bans.
    await hub.registry.update_settings(channel, {"emoteOnly": True})
    await hub.registry.post_system_message(channel, "celebration!")
    assert hub.named("chat.message")[-1].data["userId"] == channel


async def test_cards_do_not_count_for_slow_mode(db, start_hub):
    hub = await start_hub()
    channel = await make_user(db, "slowcards")
    fan = await make_user(db, "slowfan")
    await hub.registry.update_settings(channel, {"slowModeSeconds": 60})
    await hub.registry.post_card(channel, "sound-send", {}, sender_id=fan)
    await hub.registry.send_message(channel, fan, OutgoingMessage("first real message"))


async def test_two_registries_on_one_store_see_each_others_changes(db, nursery):
    """Two processes' actors for one channel: settings, bans and slow mode stay exact."""
    one, two = Hub(db), Hub(db)
    await nursery.start(one.registry.run)
    await nursery.start(two.registry.run)
    channel = await make_user(db, "shared")
    fan = await make_user(db, "sharedfan")
    await one.registry.send_message(channel, fan, OutgoingMessage("warm up one"))
    await two.registry.update_settings(channel, {"slowModeSeconds": 60})
    await two.registry.send_message(channel, channel, OutgoingMessage("warm up two"))

    # one's actor was loaded before the change; the store's version tells it.
    with pytest.raises(ChatRefused) as refused:
        await one.registry.send_message(channel, fan, OutgoingMessage("too soon"))
    assert refused.value.refusal.code == "slow_mode"

    await one.registry.update_settings(channel, {"slowModeSeconds": 0})
    await two.registry.moderate(channel, channel, ModerationRequest("ban", user_id=fan))
    with pytest.raises(ChatRefused) as refused:
        await one.registry.send_message(channel, fan, OutgoingMessage("banned now"))
    assert refused.value.refusal.code == "banned"


async def test_history_is_bounded_per_channel(db, start_hub):
    hub = await start_hub(history_limit=10)
    channel = await make_user(db, "chatty")
    quiet = await make_user(db, "quiet")
    await hub.registry.send_message(quiet, quiet, OutgoingMessage("still here"))
    # Written an hour and more ago: old enough to prune (slow mode reads the last hour).
    await db.write(lambda tx: tx.execute("UPDATE chat_messages SET created_at = 1 WHERE channel_id = ?", (quiet,)))
    for number in range(1, 26):
        await hub.registry.send_message(channel, channel, OutgoingMessage(f"message {number}"))
        await db.write(
            lambda tx: tx.execute("UPDATE chat_messages SET created_at = 1 WHERE channel_id = ?", (channel,))
        )
    stored = await db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM chat_messages WHERE channel_id = ?", (channel,)))
    assert stored == 10  # pruned at 25: 16..25 stay
    history = await db.read(lambda tx: chat_repo.history(tx, channel, 100))
    assert [m["message"] for m in history] == [f"message {n}" for n in range(16, 26)]
    assert len(await db.read(lambda tx: chat_repo.history(tx, quiet, 100))) == 1


async def test_recent_messages_outlive_the_limit_so_slow_mode_stays_exact(db, start_hub):
    hub = await start_hub(history_limit=10)
    channel = await make_user(db, "busyslow")
    fan = await make_user(db, "slowpoke")
    await hub.registry.update_settings(channel, {"slowModeSeconds": 3600})
    await hub.registry.send_message(channel, fan, OutgoingMessage("my one message"))
    for number in range(30):
        await hub.registry.send_message(channel, channel, OutgoingMessage(f"flood {number}"))
    with pytest.raises(ChatRefused) as refused:
        await hub.registry.send_message(channel, fan, OutgoingMessage("again"))
    assert refused.value.refusal.code == "slow_mode"


async def test_a_command_no_component_handles_is_a_type_error(db, start_hub):
    hub = await start_hub()
    with pytest.raises(TypeError):
        await hub.registry.call(str(uuid.uuid4()), object())
