"""The giveaway component without a database: transitions, refusals, deadline, fair draws."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tests.hub.components.fakes import CHANNEL, NOW, FakeGiveawayStore
from volthub.hub.components import giveaways
from volthub.hub.components.base import Refused


def setup(
    entrants: int = 0, seed: int = 1, **options: object
) -> tuple[FakeGiveawayStore, giveaways.GiveawaysComponent, str]:
    store = FakeGiveawayStore()
    component = giveaways.GiveawaysComponent(CHANNEL, rng=random.Random(seed))
    giveaway = store.run(component.handle(giveaways.StartGiveaway("Key", **options), NOW, store)).reply  # type: ignore[arg-type]
    for n in range(entrants):
        store.add(f"u{n:03}")
        store.run(component.handle(giveaways.Enter(giveaway.id, f"u{n:03}"), NOW, store))
    return store, component, giveaway.id


def code(excinfo: pytest.ExceptionInfo[Refused]) -> str:
    return excinfo.value.refusal.code


def test_start_emits_begin_and_card_once() -> None:
    store = FakeGiveawayStore()
    component = giveaways.GiveawaysComponent(CHANNEL)
    outcome = component.handle(giveaways.StartGiveaway("Key", 60, True), NOW, store)
    assert [e.name for e in outcome.events] == ["channel.giveaway.begin", "chat.message"]
    assert outcome.events[0].data["subscribersOnly"] is True
    store.run(outcome)
    with pytest.raises(Refused) as excinfo:
        component.handle(giveaways.StartGiveaway("Other"), NOW, store)
    assert code(excinfo) == "already_active"


def test_entry_rules() -> None:
    store, component, gid = setup(subscribers_only=True)
    store.add("sub", subscriber_months=2)
    store.add("plain")
    store.add("banned", banned=True)
    store.run(component.handle(giveaways.Enter(gid, "sub"), NOW, store))
    for user, expected in (
        ("sub", "already_entered"),
        ("plain", "subscribers_only"),
        ("banned", "banned"),
        (CHANNEL, "cannot_enter_own"),
        ("ghost", "not_found"),
    ):
        with pytest.raises(Refused) as excinfo:
            component.handle(giveaways.Enter(gid, user), NOW, store)
        assert code(excinfo) == expected, user


def test_draw_on_open_closes_with_one_end_event_and_never_repeats_a_winner() -> None:
    store, component, gid = setup(entrants=5)
    outcome = store.run(component.handle(giveaways.Draw(gid, 2), NOW, store))
    assert [e.name for e in outcome.events] == ["channel.giveaway.end", "chat.message"]
    first = [w["userId"] for w in outcome.events[0].data["winners"]]
    assert len(set(first)) == 2 and outcome.reply.status == "closed"
    again = store.run(component.handle(giveaways.Draw(gid, 10), NOW, store))
    assert [e.name for e in again.events] == ["chat.message"]  # a re-roll: no lifecycle event
    everyone = [w.user_id for w in again.reply.winners]
    assert len(everyone) == 5 == len(set(everyone))
    with pytest.raises(Refused) as excinfo:
        component.handle(giveaways.Draw(gid, 1), NOW, store)
    assert code(excinfo) == "no_eligible_entries"
    with pytest.raises(Refused) as excinfo:
        component.handle(giveaways.Enter(gid, "late"), NOW, store)
    assert code(excinfo) == "invalid_state"
    with pytest.raises(Refused) as excinfo:
        component.handle(giveaways.EndGiveaway(gid), NOW, store)
    assert code(excinfo) == "invalid_state" and excinfo.value.refusal.details == {"status": "closed"}


def test_draw_count_bounds() -> None:
    store, component, gid = setup(entrants=1)
    for count in (0, 51):
        with pytest.raises(Refused) as excinfo:
            component.handle(giveaways.Draw(gid, count), NOW, store)
        assert code(excinfo) == "validation_error"


def test_end_without_draw_and_the_deadline() -> None:
    store, component, gid = setup(entrants=2)
    outcome = store.run(component.handle(giveaways.EndGiveaway(gid), NOW, store))
    assert outcome.events[0].data["winners"] == [] and outcome.events[0].data["entries"] == 2

    store, component, gid = setup(entrants=1, duration_seconds=30)
    assert component.next_deadline() == NOW + 30_000 and not component.is_idle()
    with pytest.raises(Refused):
        component.handle(giveaways.Enter(gid, "u000"), NOW + 30_000, store)
    ended = component.on_deadline(NOW + 30_000, store)
    assert [e.name for e in ended.events] == ["channel.giveaway.end", "chat.message"]
    assert component.on_deadline(NOW + 30_001, store).events == [] and component.next_deadline() is None


def test_draws_are_uniform() -> None:
    """Chi-square over 6,000 single draws from 6 entrants with a seeded generator: the
    statistic stays under the 0.999 quantile of chi-square with 5 degrees of freedom."""
    counts: Counter[str] = Counter()
    rng = random.Random(12345)
    for _ in range(6000):
        store = FakeGiveawayStore()
        component = giveaways.GiveawaysComponent(CHANNEL, rng=rng)
        gid = store.run(component.handle(giveaways.StartGiveaway("Key"), NOW, store)).reply.id
        for n in range(6):
            store.add(f"u{n}")
            store.run(component.handle(giveaways.Enter(gid, f"u{n}"), NOW, store))
        counts[component.handle(giveaways.Draw(gid, 1), NOW, store).reply.winners[0].user_id] += 1
    expected = 1000
    chi_square = sum((counts[f"u{n}"] - expected) ** 2 / expected for n in range(6))
    assert len(counts) == 6 and chi_square < 20.515
