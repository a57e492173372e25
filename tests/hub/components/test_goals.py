"""The goal component without a database: progress, completion once per period, rollover."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.hub.components.fakes import CHANNEL, NOW, FakeGoalStore
from volthub.hub.components import goals
from volthub.hub.components.base import Refused


def create(store: FakeGoalStore, component: goals.GoalsComponent, **fields: object) -> goals.Goal:
    command = goals.CreateGoal(**{"type": "custom", "title": "Goal", "target": 10, **fields})  # type: ignore[arg-type]
    outcome = store.run(component.handle(command, NOW, store))
    assert outcome.events == []
    return outcome.reply


def names(outcome: object) -> list[str]:
    return [event.name for event in outcome.events]  # type: ignore[attr-defined]


def test_completed_fires_once_per_period() -> None:
    store, component = FakeGoalStore(), goals.GoalsComponent(CHANNEL)
    goal = create(store, component)
    assert names(store.run(component.handle(goals.AdjustGoal(goal.id, 9), NOW, store))) == ["channel.goal.progress"]
    reached = store.run(component.handle(goals.AdjustGoal(goal.id, 1), NOW, store))
    assert names(reached) == ["channel.goal.progress", "channel.goal.completed"] and reached.reply.completed
    store.run(component.handle(goals.AdjustGoal(goal.id, -5), NOW, store))
    again = store.run(component.handle(goals.AdjustGoal(goal.id, 5), NOW, store))
    assert names(again) == ["channel.goal.progress"]
    floor = store.run(component.handle(goals.AdjustGoal(goal.id, -100), NOW, store))
    assert floor.reply.current == 0
    reset = store.run(component.handle(goals.ResetGoal(goal.id), NOW, store))
    assert names(reset) == ["channel.goal.progress"] and not reset.reply.completed
    target = store.run(component.handle(goals.SetGoalTarget(goal.id, 1), NOW, store))
    assert names(target) == ["channel.goal.progress"]
    assert names(store.run(component.handle(goals.AdjustGoal(goal.id, 1), NOW, store)))[-1] == "channel.goal.completed"


def test_refusals() -> None:
    store, component = FakeGoalStore(), goals.GoalsComponent(CHANNEL)
    goal = create(store, component)
    for command, code in (
        (goals.AdjustGoal(goal.id, 0), "validation_error"),
        (goals.SetGoalTarget(goal.id, 0), "validation_error"),
        (goals.AdjustGoal("nope", 1), "not_found"),
        (goals.CreateGoal("bogus", "x", 1), "validation_error"),
        (goals.CreateGoal("custom", "", 1), "validation_error"),
    ):
        with pytest.raises(Refused) as excinfo:
            component.handle(command, NOW, store)
        assert excinfo.value.refusal.code == code
    for _ in range(goals.GOALS_MAX - 1):
        create(store, component)
    with pytest.raises(Refused) as excinfo:
        create(store, component)
    assert excinfo.value.refusal.code == "too_many_goals"


def test_platform_events_move_matching_goals_once() -> None:
    store, component = FakeGoalStore(), goals.GoalsComponent(CHANNEL)
    follows = create(store, component, type="followers", target=2)
    volts = create(store, component, type="volts", target=1000)
    first = store.run(component.handle(goals.CountForGoals("ev1", "followers", 1), NOW, store))
    assert names(first) == ["channel.goal.progress"] and first.events[0].data["goalId"] == follows.id
    assert store.run(component.handle(goals.CountForGoals("ev1", "followers", 1), NOW, store)).events == []
    store.run(component.handle(goals.CountForGoals("ev2", "volts", 250), NOW, store))
    assert component.goals[volts.id].current == 250 and component.goals[follows.id].current == 1


def test_a_daily_goal_rolls_over_at_midnight_utc_once() -> None:
    store, component = FakeGoalStore(), goals.GoalsComponent(CHANNEL)
    goal = create(store, component, period="day", target=1)
    store.run(component.handle(goals.AdjustGoal(goal.id, 1), NOW, store))
    midnight = goals.period_end("day", goal.period_start)
    assert midnight is not None and component.next_deadline() == midnight and not component.is_idle()
    stale = goals.GoalsComponent(CHANNEL)
    stale.load(store)
    outcome = component.on_deadline(midnight, store)
    assert names(outcome) == ["channel.goal.progress"] and component.goals[goal.id].current == 0
    assert stale.on_deadline(midnight, store).events == []  # another process already rolled it
    assert names(store.run(component.handle(goals.AdjustGoal(goal.id, 1), midnight + 1, store)))[-1] == (
        "channel.goal.completed"
    )


def test_periods() -> None:
    start = goals.period_start("week", NOW)
    end = goals.period_end("week", start)
    assert end is not None and end - start == 7 * 86_400_000 and start <= NOW < end
    month = goals.period_start("month", NOW)
    assert goals.period_end("month", month) is not None and month <= NOW
    assert goals.period_end("none", NOW) is None and goals.period_end("stream", NOW) is None
    assert dt.datetime.fromtimestamp(start / 1000, dt.UTC).strftime("%A %H:%M") == "Monday 00:00"
    assert dt.datetime.fromtimestamp(month / 1000, dt.UTC).day == 1


def test_a_stream_goal_starts_over_when_the_channel_goes_live() -> None:
    store, component = FakeGoalStore(), goals.GoalsComponent(CHANNEL)
    goal = create(store, component, period="stream", target=1)
    store.run(component.handle(goals.AdjustGoal(goal.id, 1), NOW, store))
    outcome = store.run(component.handle(goals.StreamStarted("live1"), NOW + 5, store))
    assert names(outcome) == ["channel.goal.progress"] and component.goals[goal.id].current == 0
    assert names(store.run(component.handle(goals.AdjustGoal(goal.id, 1), NOW + 6, store)))[-1] == (
        "channel.goal.completed"
    )
