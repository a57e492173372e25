"""The webhook catalogue and the legacy channel.cheer name."""

from __future__ import annotations

from volthub.protocol.catalogue import (
    WEBHOOK_EVENTS,
    delivery_name,
    subscribed_names,
    unknown_events,
)


def test_catalogue_holds_the_spec_names() -> None:
    assert len(WEBHOOK_EVENTS) == 31  # 3 stream, 13 channel, 10 interaction, 4 user, 1 chat
    for name in (
        "channel.follow",
        "user.follow",
        "channel.cheer",
        "chat.message",
        "channel.update",
        "channel.subscription.end",
        "user.authorization.revoke",
        "channel.timer.update",
    ):
        assert name in WEBHOOK_EVENTS
    assert "channel.hype_train.begin" not in WEBHOOK_EVENTS


def test_unknown_events_keeps_order_without_repeats() -> None:
    assert unknown_events(["channel.follow", "x", "y", "x"]) == ["x", "y"]
    assert unknown_events(["channel.follow", "channel.cheer"]) == []


def test_cheer_is_delivered_under_the_name_asked_for() -> None:
    assert subscribed_names("channel.volts") == ("channel.volts", "channel.cheer")
    assert subscribed_names("channel.cheer") == ()
    assert subscribed_names("channel.hype_train.begin") == ()
    assert delivery_name("channel.volts", ["channel.cheer"]) == "channel.cheer"
    assert delivery_name("channel.volts", ["channel.cheer", "channel.volts"]) == "channel.volts"
    assert delivery_name("channel.volts", ["channel.follow"]) is None
    assert delivery_name("channel.follow", ["channel.follow"]) == "channel.follow"
