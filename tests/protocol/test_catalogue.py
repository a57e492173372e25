"""The one event catalogue against the spec's tables (§6.1, §6.2)."""

from __future__ import annotations

from volthub.protocol import catalogue

SPEC_EVENTS_API = {
    "stream.online",
    "stream.offline",
    "stream.update",
    "chat.message",
    "channel.follow",
    "channel.subscribe",
    "channel.subscription.gift",
    "channel.volts",
    "channel.raid",
    "channel.ban",
    "channel.unban",
    "channel.moderator.add",
    "channel.moderator.remove",
    "channel.channel_points_redemption",
    "channel.poll.begin",
    "channel.poll.end",
    "channel.giveaway.begin",
    "channel.giveaway.end",
    "channel.prediction.begin",
    "channel.prediction.lock",
    "channel.prediction.end",
    "channel.goal.progress",
    "channel.goal.completed",
    "channel.timer.update",
    "channel.hype_train.begin",
    "channel.hype_train.progress",
    "channel.hype_train.end",
}
WEBHOOK_ONLY = {
    "channel.subscription.end",
    "channel.cheer",
    "channel.update",
    "user.follow",
    "user.unfollow",
    "user.authorization.grant",
    "user.authorization.revoke",
}


def test_events_api_names_are_the_spec_table() -> None:
    assert catalogue.EVENTS_API_EVENTS == SPEC_EVENTS_API


def test_webhook_names_are_the_spec_table() -> None:
    hype = {name for name in SPEC_EVENTS_API if "hype_train" in name}
    assert (SPEC_EVENTS_API - hype) | WEBHOOK_ONLY == catalogue.WEBHOOK_EVENTS


def test_names_are_unique() -> None:
    names = [entry.name for entry in catalogue.CATALOGUE]
    assert len(names) == len(set(names))


def test_hype_train_is_listed_but_never_emitted() -> None:
    never = {entry.name for entry in catalogue.CATALOGUE if not entry.emitted}
    assert never == {"channel.hype_train.begin", "channel.hype_train.progress", "channel.hype_train.end"}


def test_public_events_are_stream_chat_and_interaction() -> None:
    groups = {catalogue.BY_NAME[name].group for name in catalogue.PUBLIC_EVENTS}
    assert groups == {"Stream", "Chat", "Interaction"}
    assert catalogue.is_public("chat.message") and catalogue.is_public("channel.poll.begin")
    assert not catalogue.is_public("channel.follow") and not catalogue.is_public("channel.ban")


def test_unknown_names() -> None:
    assert catalogue.unknown_events_api_names(["chat.message", "x", "user.follow", "x"]) == ["x", "user.follow"]


def test_document_describes_every_event() -> None:
    document = catalogue.document()
    assert document["groups"] == ["Stream", "Channel", "Interaction", "User", "Chat"]
    assert len(document["types"]) == len(catalogue.CATALOGUE)
    for entry in document["types"]:
        assert set(entry) == {
            "name",
            "group",
            "description",
            "transports",
            "emitted",
            "public",
            "aliasOf",
            "webhookScope",
            "fields",
        }
        if entry["emitted"]:
            assert entry["fields"], entry["name"]
        for field in entry["fields"]:
            assert set(field) == {"name", "type", "description", "optional"}
    follow = next(t for t in document["types"] if t["name"] == "channel.follow")
    assert [f["name"] for f in follow["fields"]][:4] == ["userId", "username", "displayName", "followedAt"]
    assert follow["transports"] == {"eventsApi": True, "webhooks": True}
