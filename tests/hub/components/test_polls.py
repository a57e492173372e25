"""The poll component without a database: every transition, refusal and deadline."""

from __future__ import annotations

import pytest

from tests.hub.components.fakes import CHANNEL, NOW, FakePollStore
from volthub.hub.components import polls
from volthub.hub.components.base import Refused


def started(store: FakePollStore, component: polls.PollsComponent, seconds: int = 60) -> polls.Poll:
    outcome = store.run(component.handle(polls.StartPoll("Snack?", ("Chips", "Fruit"), seconds), NOW, store))
    return outcome.reply


def refusal(excinfo: pytest.ExceptionInfo[Refused]) -> tuple[int, str]:
    return excinfo.value.refusal.status, excinfo.value.refusal.code


def test_start_emits_begin_and_a_card_and_sets_the_deadline() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    outcome = component.handle(polls.StartPoll(" Snack? ", ("Chips", "Fruit"), 60), NOW, store)
    names = [event.name for event in outcome.events]
    assert names == ["channel.poll.begin", "chat.message"]
    assert outcome.events[1].data["card"]["type"] == "poll-begin"
    assert outcome.reply.title == "Snack?" and outcome.shared_state_changed
    assert component.next_deadline() == NOW + 60_000 and not component.is_idle()


def test_a_second_open_poll_is_already_active() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    poll = started(store, component)
    with pytest.raises(Refused) as excinfo:
        component.handle(polls.StartPoll("Again", ("a", "b"), 60), NOW, store)
    assert refusal(excinfo) == (409, "already_active") and excinfo.value.refusal.details == {"id": poll.id}


@pytest.mark.parametrize(
    "command",
    [
        polls.StartPoll("", ("a", "b"), 60),
        polls.StartPoll("x" * 101, ("a", "b"), 60),
        polls.StartPoll("ok", ("a",), 60),
        polls.StartPoll("ok", ("a", "b", "c", "d", "e", "f"), 60),
        polls.StartPoll("ok", ("a", "A"), 60),
        polls.StartPoll("ok", ("a", "b"), 14),
        polls.StartPoll("ok", ("a", "b"), 1801),
    ],
)
def test_start_refuses_bad_input(command: polls.StartPoll) -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    with pytest.raises(Refused) as excinfo:
        component.handle(command, NOW, store)
    assert refusal(excinfo) == (400, "validation_error") and component.open is None


def test_votes_once_per_user_and_emit_nothing() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    poll = started(store, component)
    chips = poll.options[0].id
    outcome = store.run(component.handle(polls.Vote(poll.id, "fan", chips), NOW + 1, store))
    assert outcome.events == [] and outcome.reply == chips
    with pytest.raises(Refused) as excinfo:
        component.handle(polls.Vote(poll.id, "fan", poll.options[1].id), NOW + 2, store)
    assert refusal(excinfo) == (409, "already_voted")


def test_vote_refusals() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    poll = started(store, component)
    store.banned.add("troll")
    cases = [
        (polls.Vote(poll.id, "fan", "nope"), (400, "invalid_option")),
        (polls.Vote(poll.id, "troll", poll.options[0].id), (403, "banned")),
        (polls.Vote("unknown", "fan", poll.options[0].id), (404, "not_found")),
    ]
    for command, expected in cases:
        with pytest.raises(Refused) as excinfo:
            component.handle(command, NOW + 1, store)
        assert refusal(excinfo) == expected
    with pytest.raises(Refused) as excinfo:  # its end is due, not yet written
        component.handle(polls.Vote(poll.id, "fan", poll.options[0].id), NOW + 60_000, store)
    assert refusal(excinfo) == (409, "invalid_state")


def test_end_early_gives_final_votes_then_ending_again_is_invalid_state() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    poll = started(store, component)
    store.run(component.handle(polls.Vote(poll.id, "a", poll.options[1].id), NOW, store))
    store.run(component.handle(polls.Vote(poll.id, "b", poll.options[1].id), NOW, store))
    outcome = store.run(component.handle(polls.EndPoll(poll.id), NOW + 5000, store))
    [end, card] = outcome.events
    assert end.name == "channel.poll.end" and end.data["totalVotes"] == 2
    assert [c["votes"] for c in end.data["options"]] == [0, 2] and card.data["card"]["type"] == "poll-end"
    assert component.next_deadline() is None and component.is_idle()
    with pytest.raises(Refused) as excinfo:
        component.handle(polls.EndPoll(poll.id), NOW + 6000, store)
    assert refusal(excinfo) == (409, "invalid_state") and excinfo.value.refusal.details == {"status": "ended"}
    with pytest.raises(Refused) as excinfo:
        component.handle(polls.Vote(poll.id, "c", poll.options[0].id), NOW + 6000, store)
    assert refusal(excinfo) == (409, "invalid_state")


def test_the_deadline_ends_the_poll_once() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    started(store, component, seconds=15)
    outcome = component.on_deadline(NOW + 15_000, store)
    assert [e.name for e in outcome.events] == ["channel.poll.end", "chat.message"]
    assert component.on_deadline(NOW + 15_001, store).events == []


def test_a_deadline_another_process_already_took_emits_nothing() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    other = polls.PollsComponent(CHANNEL)
    poll = started(store, component)
    other.load(store)
    assert other.next_deadline() == poll.ends_at
    assert component.on_deadline(poll.ends_at, store).events[0].name == "channel.poll.end"
    assert other.on_deadline(poll.ends_at, store).events == []


def test_load_resumes_the_open_poll() -> None:
    store, component = FakePollStore(), polls.PollsComponent(CHANNEL)
    poll = started(store, component)
    restarted = polls.PollsComponent(CHANNEL)
    restarted.load(store)
    assert restarted.open is not None and restarted.open.id == poll.id
    assert restarted.next_deadline() == poll.ends_at
