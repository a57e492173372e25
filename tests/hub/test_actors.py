"""Channel actors and their registry, without HTTP: on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
import trio
import trio.testing

from volthub.hub.actor import (
    ActorRegistry,
    ChannelBusy,
    ChannelUnavailable,
    ChatRefused,
    ModerationRequest,
    OutgoingMessage,
    UnknownChannel,
)
from volthub.hub.bus import InProcessBus
from volthub.hub.clock import TrioClock
from volthub.hub.publisher import EventPublisher
from volthub.persistence import chat as chat_repo
from volthub.persistence import users as users_repo


class Hub:
    def __init__(self, db, bus=None, **options):
        self.db = db
        self.bus = bus or InProcessBus()
        self.events = []
        self.bus.subscribe(self.events.append)
        self.registry = ActorRegistry(db, EventPublisher(db, self.bus, TrioClock()), TrioClock(), **options)

    def named(self, name):
        return [event for event in self.events if event.name == name]


@pytest.fixture
async def start_hub(db, nursery):
    async def start(**options) -> Hub:
        hub = Hub(db, **options)
        await nursery.start(hub.registry.run)
        return hub

    return start


async def make_user(db, name):
    user_id = str(uuid.uuid4())
    await db.write(
        lambda tx: users_repo.create_user(
            tx, user_id=user_id, username=name, display_name=name.title(), password_hash="h", now_ms=1
        )
    )
    return user_id


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
    mock_clock.jump(61)
    mock_clock.autojump_threshold = 0.5  # so a never-stopping actor fails the test, not hangs it
    with trio.fail_after(3600):
        await first.stopped.wait()
    mock_clock.autojump_threshold = float("inf")
    assert channel not in hub.registry.active_channels()

    await hub.registry.send_message(channel, channel, OutgoingMessage("back"))
    second = hub.registry.actor(channel)
    assert second is not None and second is not first
    assert second.state.settings.slow_mode_seconds == 20 and second.state.settings.emote_only


async def test_commands_run_one_at_a_time(db, start_hub):
    hub = await start_hub()
    channel = await make_user(db, "serial")
    running = 0
    most = 0

    async def op(actor):
        nonlocal running, most
        running += 1
        most = max(most, running)
        await trio.sleep(0)  # a checkpoint where another command could interleave
        await actor.update_settings({"followersOnly": True})
        running -= 1

    async with trio.open_nursery() as nursery:
        for _ in range(20):
            nursery.start_soon(hub.registry.call, channel, op)
    assert most == 1


async def test_a_full_inbox_is_refused_at_once(db, start_hub):
    hub = await start_hub(inbox_size=1)
    channel = await make_user(db, "busy")
    await hub.registry.update_settings(channel, {})  # actor loaded
    release = trio.Event()
    holding = trio.Event()

    async def hold(actor):
        holding.set()
        await release.wait()
        return "held"

    async def noop(actor):
        return "queued"

    results = []

    async def call(op):
        results.append(await hub.registry.call(channel, op))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, hold)
        await holding.wait()
        nursery.start_soon(call, noop)  # fills the one-slot inbox
        await trio.testing.wait_all_tasks_blocked()
        assert hub.registry.actor(channel).queued == 1
        with pytest.raises(ChannelBusy):
            await hub.registry.call(channel, noop)
        release.set()
    assert sorted(results) == ["held", "queued"]


async def test_a_failing_command_answers_its_caller_and_the_actor_goes_on(db, start_hub):
    hub = await start_hub()
    channel = await make_user(db, "sturdy")

    async def broken(actor):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await hub.registry.call(channel, broken)
    actor = hub.registry.actor(channel)
    await hub.registry.send_message(channel, channel, OutgoingMessage("still here"))
    assert hub.registry.actor(channel) is actor


async def test_shutdown_answers_waiting_callers(db):
    """Cancelled mid-command, the actor answers that caller and the queued ones."""
    hub = Hub(db)
    channel = await make_user(db, "closing")
    outcome = []
    holding = trio.Event()

    async def hold(actor):
        holding.set()
        await trio.sleep_forever()

    async def call():
        try:
            await hub.registry.call(channel, hold)
        except ChannelUnavailable:
            outcome.append("unavailable")

    with trio.fail_after(30):  # a caller left waiting would hang here: fail instead
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def run_registry(task_status=trio.TASK_STATUS_IGNORED):
                with scope:
                    await hub.registry.run(task_status=task_status)

            await nursery.start(run_registry)
            nursery.start_soon(call)
            await holding.wait()  # the first command is running
            nursery.start_soon(call)  # the second is queued behind it
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert outcome == ["unavailable", "unavailable"]
    with pytest.raises(ChannelUnavailable):
        await hub.registry.call(channel, hold)


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
