"""The chat component without a database: a fake store port, commands in, outcomes out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from volthub.hub.clock import iso8601
from volthub.hub.components import chat, chat_rules
from volthub.hub.components.base import Emitted, Refused
from volthub.hub.components.chat import (
    ChatComponent,
    MessageRef,
    Moderate,
    ModerationRequest,
    ModerationResult,
    OutgoingMessage,
    PostSystem,
    ReplyRef,
    SendMessage,
    UpdateSettings,
)
from volthub.hub.components.chat_rules import ChatSettings, Standing

NOW = 1_800_000_000_000
CHANNEL = "chan"


@dataclass
class FakeStore:
    """The ChatStore port over plain dicts; records what was applied."""

    people: dict[str, Standing] = field(default_factory=dict)
    messages: dict[str, MessageRef] = field(default_factory=dict)
    last_at: dict[str, int] = field(default_factory=dict)
    bans: dict[str, bool] = field(default_factory=dict)  # user id -> permanent
    stored_settings: ChatSettings = field(default_factory=ChatSettings)
    seq: int = 0
    applied: list[Any] = field(default_factory=list)
    reads: int = 0  # of the sender together with the people a message names
    known_emotes: dict[str, str] = field(default_factory=dict)  # code -> url

    def settings(self) -> ChatSettings:
        return self.stored_settings

    def standing(self, user_id: str) -> Standing | None:
        return self.people.get(user_id)

    def user_id_of(self, username: str) -> str | None:
        return next((p.user_id for p in self.people.values() if p.username.lower() == username.lower()), None)

    def standing_and_people_named(
        self, user_id: str, usernames: list[str]
    ) -> tuple[Standing | None, dict[str, dict[str, str]]]:
        self.reads += 1
        wanted = {name.lower() for name in usernames}
        named = {p.username.lower(): chat_rules.who(p) for p in self.people.values() if p.username.lower() in wanted}
        return self.standing(user_id), named

    def message(self, message_id: str) -> MessageRef | None:
        return self.messages.get(message_id)

    def last_message_at(self, user_id: str) -> int | None:
        return self.last_at.get(user_id)

    def emotes(self, codes: list[str]) -> dict[str, str]:
        return {code: self.known_emotes[code] for code in codes if code in self.known_emotes}

    def ban_is_permanent(self, user_id: str) -> bool | None:
        return self.bans.get(user_id)

    def apply(self, write: Any) -> None:
        self.applied.append(write)
        if isinstance(write, chat.InsertMessage):
            self.seq += 1  # the store numbers a message as it stores it


BROADCASTER = Standing(CHANNEL, "streamer", "Streamer", is_broadcaster=True)
FAN = Standing("fan", "fan", "Fan", subscriber_months=3)
MOD = Standing("mod", "Moddy", "Moddy", is_moderator=True)


@pytest.fixture
def store() -> FakeStore:
    return FakeStore(people={p.user_id: p for p in (BROADCASTER, FAN, MOD)})


def component(store: FakeStore, **options: Any) -> ChatComponent:
    made = ChatComponent(CHANNEL, **options)
    made.load(store)
    return made


def refused(command: Any, store: FakeStore, made: ChatComponent | None = None) -> str:
    with pytest.raises(Refused) as caught:
        (made or component(store)).handle(command, NOW, store)
    assert store.applied == [] and store.seq == 0  # a refusal writes nothing, uses no number
    return caught.value.refusal.code


def test_a_message_is_stored_and_emitted_with_the_payload_of_spec_2_6(store):
    store.messages["orig"] = MessageRef("orig", "mod", "Moddy", deleted=False)
    text = "hi @MODDY and @nobody"
    message = OutgoingMessage(text, effect="glow", effect_color="#aabbcc", reply_to=ReplyRef("orig", "old", "snip"))
    outcome = component(store).handle(SendMessage("fan", message), NOW, store)
    [insert] = outcome.writes
    assert isinstance(insert, chat.InsertMessage) and not insert.is_system
    assert outcome.reply == insert.message_id and outcome.events == [Emitted("chat.message", insert.payload)]
    assert insert.payload == {
        "messageId": insert.message_id,
        "channelId": CHANNEL,
        "userId": "fan",
        "username": "fan",
        "displayName": "Fan",
        "message": text,
        "badges": ["subscriber"],
        "isMod": False,
        "isVip": False,
        "isSubscriber": True,
        "timestamp": iso8601(NOW),
        "subscriberMonths": 3,
        "mentions": [{"userId": "mod", "username": "Moddy", "displayName": "Moddy"}],
        "replyTo": {"messageId": "orig", "userId": "mod", "username": "Moddy", "snippet": "snip"},
        "effect": "glow",
        "effectColor": "#aabbcc",
    }
    assert not outcome.shared_state_changed
    assert store.reads == 1  # the sender and the people the text names: one read


def test_optional_members_are_left_out(store):
    outcome = component(store).handle(SendMessage(CHANNEL, OutgoingMessage("plain")), NOW, store)
    payload = outcome.events[0].data
    for absent in ("subscriberMonths", "mentions", "replyTo", "effect", "effectColor", "card", "isSystem"):
        assert absent not in payload
    assert payload["badges"] == ["broadcaster"]


def test_cards_are_system_messages_that_skip_modes_and_bans(store):
    store.stored_settings = ChatSettings(emote_only=True, followers_only=True)
    store.people["fan"] = Standing("fan", "fan", "Fan", banned=True)
    card = {"type": "sticker-send", "payload": {"stickerId": "s"}}
    outcome = component(store).handle(PostSystem("sent a sticker", card, "fan"), NOW, store)
    [insert] = outcome.writes
    assert insert.is_system and insert.payload["card"] == card and insert.payload["isSystem"] is True
    plain = component(store).handle(PostSystem("hello"), NOW, store).events[0].data
    assert plain["userId"] == CHANNEL and plain["isSystem"] is True and "card" not in plain


@pytest.mark.parametrize(
    ("settings", "who", "last_at", "code"),
    [
        (ChatSettings(), Standing("x", "x", "X", banned=True), None, "banned"),
        (ChatSettings(), Standing("x", "x", "X", timeout_ends_at=NOW + 5000), None, "timed_out"),
        (ChatSettings(followers_only=True), Standing("x", "x", "X"), None, "followers_only"),
        (ChatSettings(subscribers_only=True), Standing("x", "x", "X"), None, "subscribers_only"),
        (ChatSettings(emote_only=True), Standing("x", "x", "X"), None, "emote_only"),
        (ChatSettings(slow_mode=True, slow_mode_seconds=10), Standing("x", "x", "X"), NOW - 2000, "slow_mode"),
    ],
)
def test_refusals_write_nothing(store, settings, who, last_at, code):
    store.stored_settings = settings
    store.people["x"] = who
    if last_at is not None:
        store.last_at["x"] = last_at
    assert refused(SendMessage("x", OutgoingMessage("words")), store) == code


def test_other_refusals(store):
    assert refused(SendMessage("ghost", OutgoingMessage("hi")), store) == "not_found"
    assert refused(SendMessage("fan", OutgoingMessage("hi", as_bot=True)), store) == "bot_not_connected"
    store.messages["gone"] = MessageRef("gone", "mod", "Moddy", deleted=True)
    reply = OutgoingMessage("hi", reply_to=ReplyRef("gone", "Moddy", ""))
    assert refused(SendMessage("fan", reply), store) == "invalid_reply_to"


def test_settings_change_is_written_and_moves_the_channel_version(store):
    made = component(store)
    outcome = made.handle(UpdateSettings({"slowModeSeconds": 20}), NOW, store)
    wanted = ChatSettings(slow_mode=True, slow_mode_seconds=20)
    assert outcome.reply == wanted and made.settings == wanted
    assert outcome.writes == [chat.SaveSettings(wanted)] and outcome.shared_state_changed
    again = made.handle(UpdateSettings({"slowMode": True}), NOW, store)
    assert again.reply == wanted and again.writes == [] and not again.shared_state_changed
    assert refused(UpdateSettings({"slowMode": True, "slowModeSeconds": 0}), FakeStore(), made) == "invalid_settings"


def test_a_timeout_and_a_ban_emit_channel_ban(store):
    made = component(store)
    timeout = made.handle(Moderate("mod", ModerationRequest("timeout", user_id="fan", duration_seconds=60)), NOW, store)
    assert timeout.reply == ModerationResult("timeout", True, chat_rules.who(FAN), NOW + 60_000)
    assert timeout.writes == [chat.SetBan("fan", "mod", None, NOW + 60_000)]
    assert timeout.events[0] == Emitted(
        "channel.ban",
        {
            "userId": "fan",
            "username": "fan",
            "displayName": "Fan",
            "moderator": {"userId": "mod", "username": "Moddy", "displayName": "Moddy"},
            "reason": None,
            "isPermanent": False,
            "bannedAt": iso8601(NOW),
            "endsAt": iso8601(NOW + 60_000),
            "durationSeconds": 60,
        },
    )
    ban = made.handle(Moderate(CHANNEL, ModerationRequest("ban", username="MODDY", reason="r")), NOW, store)
    assert ban.writes == [chat.SetBan("mod", CHANNEL, "r", None)]
    data = ban.events[0].data
    assert data["isPermanent"] and data["endsAt"] is None and "durationSeconds" not in data


def test_unban_emits_only_when_a_ban_was_in_force(store):
    made = component(store)
    store.bans["fan"] = True
    lifted = made.handle(Moderate("mod", ModerationRequest("unban", user_id="fan")), NOW, store)
    assert lifted.reply.changed and lifted.writes == [chat.RemoveBan("fan")]
    assert lifted.events == [
        Emitted(
            "channel.unban",
            {
                "userId": "fan",
                "username": "fan",
                "displayName": "Fan",
                "moderator": {"userId": "mod", "username": "Moddy", "displayName": "Moddy"},
                "wasPermanent": True,
                "unbannedAt": iso8601(NOW),
            },
        )
    ]
    del store.bans["fan"]
    nothing = made.handle(Moderate("mod", ModerationRequest("unban", user_id="fan")), NOW, store)
    assert not nothing.reply.changed and nothing.events == []


def test_delete_and_its_refusals(store):
    store.messages["m1"] = MessageRef("m1", "fan", "fan", deleted=False)
    store.messages["m2"] = MessageRef("m2", "fan", "fan", deleted=True)
    made = component(store)
    deleted = made.handle(Moderate("mod", ModerationRequest("delete", message_id="m1")), NOW, store)
    assert deleted.reply == ModerationResult("delete", True, chat_rules.who(FAN), message_id="m1")
    assert deleted.writes == [chat.DeleteMessage("m1", "mod")] and deleted.events == []
    store.applied.clear()
    again = made.handle(Moderate("mod", ModerationRequest("delete", message_id="m2")), NOW, store)
    assert not again.reply.changed and again.writes == []
    store.seq = 0
    assert refused(Moderate("fan", ModerationRequest("ban", user_id="mod")), store) == "not_moderator"
    assert refused(Moderate("mod", ModerationRequest("delete", message_id="nope")), store) == "not_found"
    assert refused(Moderate("mod", ModerationRequest("ban", user_id=CHANNEL)), store) == "cannot_moderate_broadcaster"
    assert refused(Moderate("mod", ModerationRequest("ban", username="nobody")), store) == "not_found"


def test_history_is_pruned_every_tenth_of_the_limit_past_it(store):
    made = component(store, history_limit=20)
    assert made.prune_every == 2
    [insert] = made.handle(SendMessage(CHANNEL, OutgoingMessage("m")), NOW, store).writes
    assert insert.history == chat.HistoryBound(20, 2)
    # Past 20 messages, every second one drops all but the newest 20 (not those of the last
    # hour); the store applies the prune a message's number makes due.
    before = NOW - chat_rules.SLOW_MODE_MAX_SECONDS * 1000
    due = {seq: prune for seq in range(1, 26) if (prune := insert.history.prune_after(seq, NOW)) is not None}
    assert due == {22: chat.PruneHistory(2, before), 24: chat.PruneHistory(4, before)}


def test_chat_is_always_idle_and_has_no_deadline(store):
    made = component(store)
    assert made.is_idle() and made.next_deadline() is None
    assert made.on_deadline(NOW, store).writes == []
    with pytest.raises(TypeError):
        made.handle(object(), NOW, store)
    with pytest.raises(ValueError):
        ChatComponent(CHANNEL, history_limit=0)


# --- bots and emotes -----------------------------------------------------------------


def test_send_as_bot_posts_as_the_bot_with_its_badge(store: FakeStore) -> None:
    bot = Standing("bot-account", "DefaultBot", "DefaultBot")
    store.people[bot.user_id] = bot
    component = ChatComponent(CHANNEL)
    command = SendMessage(FAN.user_id, OutgoingMessage("beep", as_bot=True), chat.BotSender(bot.user_id, "Custom"))
    outcome = component.handle(command, NOW, store)
    data = outcome.events[0].data
    assert (data["userId"], data["username"], data["displayName"]) == ("bot-account", "Custom", "Custom")
    assert data["badges"] == ["bot"]
    with pytest.raises(Refused) as refused:
        component.handle(SendMessage(FAN.user_id, OutgoingMessage("beep", as_bot=True)), NOW, store)
    assert refused.value.refusal.code == "bot_not_connected"


def test_emote_only_uses_the_resolver_and_messages_carry_resolved_emotes(store: FakeStore) -> None:
    store.known_emotes = {"hype": "/api/media/1"}
    store.stored_settings = ChatSettings(emote_only=True)
    component = ChatComponent(CHANNEL)
    component.load(store)
    with pytest.raises(Refused):
        component.handle(SendMessage(FAN.user_id, OutgoingMessage(":nothere:")), NOW, store)
    outcome = component.handle(SendMessage(FAN.user_id, OutgoingMessage(":hype: :hype:")), NOW, store)
    assert outcome.events[0].data["emotes"] == [{"code": "hype", "url": "/api/media/1"}]
