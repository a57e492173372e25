"""The fan-out: who gets which event, encode-once, bounded queues, resume buffer, presence."""

from __future__ import annotations

from typing import Any

import pytest

from volthub import metrics
from volthub.hub.fanout import Fanout
from volthub.hub.publisher import Event


class Sub:
    transport = "websocket"

    def __init__(self, wire: str = "a", capacity: int = 1000) -> None:
        self.wire = wire
        self.capacity = capacity
        self.got: list[Any] = []
        self.overflows: list[str] = []

    def deliver(self, payload: Any) -> str | None:
        if len(self.got) >= self.capacity:
            return None
        self.got.append(payload)
        return self.transport

    def note_lag(self, since: float) -> None:
        pass

    def overflow(self, reason: str) -> None:
        self.overflows.append(reason)


def event(n: int, name: str = "channel.follow", channel: str = "c1", is_test: bool = False) -> Event:
    return Event(f"e{n}", name, channel, {"n": n}, "2026-11-22T13:07:00.000Z", is_test)


@pytest.fixture
def calls() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def fanout(calls: list[tuple[str, str]]) -> Fanout:
    hub = Fanout(resume_size=3, resume_channels=2)
    hub.register_wire("a", lambda e: calls.append(("a", e.id)) or f"a:{e.id}")
    hub.register_wire("b", lambda e: calls.append(("b", e.id)) or f"b:{e.id}")
    return hub


def test_encodes_once_per_wire_format_and_shares_the_bytes(fanout: Fanout, calls: list) -> None:
    subs = [Sub("a"), Sub("a"), Sub("b"), Sub("a")]
    for sub in subs:
        fanout.subscribe(sub, "c1", owner=True)
    fanout.publish(event(1))
    assert sorted(calls) == [("a", "e1"), ("b", "e1")]
    assert [sub.got for sub in subs] == [["a:e1"], ["a:e1"], ["b:e1"], ["a:e1"]]
    assert subs[0].got[0] is subs[1].got[0]  # the very same object
    assert fanout.delivered == 4


def test_nothing_is_encoded_for_a_channel_without_subscribers(fanout: Fanout, calls: list) -> None:
    fanout.subscribe(Sub(), "other", owner=True)
    fanout.publish(event(1))
    assert calls == []


def test_owner_gets_everything_public_subscribers_only_public_events(fanout: Fanout) -> None:
    owner, viewer = Sub(), Sub()
    fanout.subscribe(owner, "c1", owner=True, user_id="c1")
    fanout.subscribe(viewer, "c1", owner=False)
    fanout.publish(event(1, "channel.follow"))  # private
    fanout.publish(event(2, "chat.message"))  # public
    fanout.publish(event(3, "chat.message", is_test=True))  # sandbox: owner only
    fanout.publish(event(4, "stream.online"))
    assert owner.got == ["a:e1", "a:e2", "a:e3", "a:e4"]
    assert viewer.got == ["a:e2", "a:e4"]


def test_webhook_only_and_never_emitted_events_are_not_sent(fanout: Fanout) -> None:
    owner = Sub()
    fanout.subscribe(owner, "c1", owner=True)
    fanout.publish(event(1, "user.follow"))
    fanout.publish(event(2, "channel.subscription.end"))
    fanout.publish(event(3, "channel.hype_train.begin"))  # listed, never sent
    assert owner.got == []
    assert fanout.since("c1", "nope").events == []


def test_name_filter(fanout: Fanout) -> None:
    sub = Sub()
    subscription = fanout.subscribe(sub, "c1", owner=True, names=["channel.raid"])
    fanout.publish(event(1, "channel.follow"))
    fanout.publish(event(2, "channel.raid"))
    assert sub.got == ["a:e2"]
    assert subscription.wants(event(3, "channel.raid")) and not subscription.wants(event(4, "chat.message"))


def test_a_public_subscription_with_a_name_filter_gets_the_named_public_events_only(fanout: Fanout) -> None:
    sub = Sub()
    subscription = fanout.subscribe(sub, "c1", owner=False, names=["chat.message", "channel.follow"])
    fanout.publish(event(1, "channel.follow"))  # named, but private
    fanout.publish(event(2, "stream.online"))  # public, but not named
    fanout.publish(event(3, "chat.message", is_test=True))  # named and public, but sandbox
    fanout.publish(event(4, "chat.message"))
    assert sub.got == ["a:e4"]
    assert subscription.wants(event(5, "chat.message")) and not subscription.wants(event(6, "channel.follow"))


def test_deliveries_are_counted_under_the_transport_each_subscriber_answers(
    fanout: Fanout, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: list[dict[str, int]] = []
    monkeypatch.setattr(metrics, "count_deliveries", lambda by_transport: counts.append(dict(by_transport)))
    subs = [Sub(), Sub(), Sub(), Sub(capacity=0)]
    subs[1].transport = "polling"
    for sub in subs:
        fanout.subscribe(sub, "c1", owner=True)
    fanout.publish(event(1))
    assert counts == [{"websocket": 2, "polling": 1}]  # the full one is not counted
    assert fanout.delivered == 3


def test_a_full_queue_disconnects_that_subscriber_only(fanout: Fanout) -> None:
    slow, fast = Sub(capacity=2), Sub()
    fanout.subscribe(slow, "c1", owner=True)
    fanout.subscribe(slow, "c1", owner=False)  # two subscriptions, one overflow
    fanout.subscribe(slow, "c2", owner=True)
    fanout.subscribe(fast, "c1", owner=True)
    for n in range(5):
        fanout.publish(event(n))
    assert len(slow.overflows) == 1 and "slow consumer" in slow.overflows[0]
    assert fanout.subscriptions_of(slow) == []  # every channel, not just this one
    assert len(fast.got) == 5
    assert fanout.overflowed == 1


def test_a_broken_overflow_handler_does_not_stop_delivery(fanout: Fanout) -> None:
    class Broken(Sub):
        def overflow(self, reason: str) -> None:
            raise RuntimeError("boom")

    broken, fine = Broken(capacity=0), Sub()
    fanout.subscribe(broken, "c1", owner=True)
    fanout.subscribe(fine, "c1", owner=True)
    fanout.publish(event(1))
    fanout.publish(event(2))
    assert fine.got == ["a:e1", "a:e2"]


def test_subscribing_needs_a_known_wire(fanout: Fanout) -> None:
    with pytest.raises(ValueError):
        fanout.subscribe(Sub("nope"), "c1", owner=True)


def test_presence_counts_signed_in_users_and_anonymous_connections(fanout: Fanout) -> None:
    a1, a2, b, anon1, anon2, stream = Sub(), Sub(), Sub(), Sub(), Sub(), Sub()
    fanout.subscribe(a1, "c1", owner=True, user_id="alice")
    fanout.subscribe(a2, "c1", owner=False, user_id="alice")
    fanout.subscribe(b, "c1", owner=False, user_id="bob")
    fanout.subscribe(anon1, "c1", owner=False)
    fanout.subscribe(anon2, "c1", owner=False)
    fanout.subscribe(stream, "c1", owner=True, user_id="carol", viewer=False)
    users, anonymous = fanout.snapshot("c1")
    assert sorted(users) == ["alice", "bob"] and anonymous == 2
    fanout.remove(a1)
    fanout.remove(anon1)
    assert sorted(fanout.snapshot("c1")[0]) == ["alice", "bob"] and fanout.snapshot("c1")[1] == 1
    for sub in (a2, b, anon2, stream):
        fanout.remove(sub)
    assert fanout.snapshot("c1") == ([], 0)
    assert fanout.subscriber_count() == 0 and fanout.subscriber_count("c1") == 0


def test_resume_buffer(fanout: Fanout) -> None:
    for n in range(5):
        fanout.publish(event(n))
    assert [e.id for e in fanout.since("c1", "e2").events] == ["e3", "e4"]
    assert fanout.since("c1", "e4").events == [] and fanout.since("c1", "e4").found
    evicted = fanout.since("c1", "e1")  # only the last 3 are kept
    assert not evicted.found and [e.id for e in evicted.events] == ["e2", "e3", "e4"]
    assert fanout.since("c1", None).events == [] and fanout.since("c1", None).found


def test_resume_buffer_keeps_the_most_recently_active_channels(fanout: Fanout) -> None:
    fanout.publish(event(1, channel="c1"))
    fanout.publish(event(2, channel="c2"))
    fanout.publish(event(3, channel="c1"))  # c1 is now the most recent
    fanout.publish(event(4, channel="c3"))  # at most 2 channels: c2 goes
    assert fanout.since("c2", "x").events == []
    assert [e.id for e in fanout.since("c1", "x").events] == ["e1", "e3"]


def test_resume_off() -> None:
    hub = Fanout(resume_size=0)
    hub.publish(event(1))
    assert hub.since("c1", "e0").events == []


def test_interest_is_told_at_a_channels_first_subscription_and_after_its_last() -> None:
    told: list[tuple[str, bool]] = []
    fanout = Fanout(interest=lambda channel, wanted: told.append((channel, wanted)))
    fanout.register_wire("a", lambda event: b"")
    one, two = Sub(), Sub()
    first = fanout.subscribe(one, "c1", owner=True)
    fanout.subscribe(two, "c1", owner=False)
    fanout.subscribe(one, "c2", owner=True)
    assert told == [("c1", True), ("c2", True)]
    fanout.unsubscribe(first)
    assert told == [("c1", True), ("c2", True)]  # two still follows c1
    fanout.remove(two)
    fanout.remove(one)
    assert told[2:] == [("c1", False), ("c2", False)]


def test_replacing_a_resume_buffer_resumes_from_the_new_events_only(fanout: Fanout) -> None:
    fanout.publish(event(1))
    fanout.replace_recent("c1", [event(5), event(6), event(7), event(8)])
    assert [e.id for e in fanout.since("c1", "e6").events] == ["e7", "e8"]
    assert not fanout.since("c1", "e1").found  # not in the new buffer: not recovered
    fanout.replace_recent("c1", [])
    assert not fanout.since("c1", "e8").found


def test_a_history_with_nothing_to_buffer_takes_no_channel_s_place() -> None:
    """A channel whose history holds no Events API event (internal ones only) gets no
    buffer: it does not push a buffered channel out of the `resume_channels` bound."""
    fanout = Fanout(resume_size=3, resume_channels=1)
    fanout.replace_recent("c1", [event(1)])
    fanout.replace_recent("c2", [event(2, name="internal.member.badges", channel="c2")])
    assert [e.id for e in fanout.since("c1", "e0").events] == ["e1"]
