"""The timer component without a database: the state table, add-time, subathons, deadline."""

from __future__ import annotations

import pytest

from tests.hub.components.fakes import CHANNEL, NOW, FakeTimerStore
from volthub.hub.components import timers
from volthub.hub.components.base import Refused


def start(store: FakeTimerStore, component: timers.TimersComponent, seconds: int = 60, **options: object) -> str:
    outcome = store.run(component.handle(timers.StartTimer(seconds, **options), NOW, store))  # type: ignore[arg-type]
    return str(outcome.reply["id"])


def op(store: FakeTimerStore, component: timers.TimersComponent, timer_id: str, operation: str, at: int) -> dict:
    outcome = store.run(component.handle(timers.TimerOperation(timer_id, operation), at, store))
    [event] = outcome.events
    assert event.name == "channel.timer.update"
    return outcome.reply


ALLOWED = {
    "running": {"pause": "paused", "end": "ended", "reset": "running"},
    "paused": {"resume": "running", "end": "ended", "reset": "paused"},
    "ended": {"reset": "running"},
}


@pytest.mark.parametrize("state", ["running", "paused", "ended"])
@pytest.mark.parametrize("operation", timers.OPERATIONS)
def test_the_state_table(state: str, operation: str) -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    timer_id = start(store, component)
    if state == "paused":
        op(store, component, timer_id, "pause", NOW)
    elif state == "ended":
        op(store, component, timer_id, "end", NOW)
    expected = ALLOWED[state].get(operation)
    if expected is None:
        with pytest.raises(Refused) as excinfo:
            component.handle(timers.TimerOperation(timer_id, operation), NOW + 1, store)
        assert excinfo.value.refusal.code == "invalid_state"
        assert excinfo.value.refusal.details == {"status": state}
    else:
        assert op(store, component, timer_id, operation, NOW + 1)["status"] == expected


def test_pause_keeps_the_remaining_time_and_resume_moves_the_end() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    timer_id = start(store, component, 60)
    assert op(store, component, timer_id, "pause", NOW + 20_000)["remainingSeconds"] == 40
    assert component.next_deadline() is None and component.is_idle()
    resumed = op(store, component, timer_id, "resume", NOW + 100_000)
    assert resumed["remainingSeconds"] == 40 and component.next_deadline() == NOW + 140_000


def test_add_time_and_taking_it_all_ends_the_timer() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    timer_id = start(store, component, 60)
    outcome = store.run(component.handle(timers.AddTime(timer_id, 30), NOW, store))
    assert outcome.reply["remainingSeconds"] == 90 and outcome.events[0].data["addedSeconds"] == 30
    outcome = store.run(component.handle(timers.AddTime(timer_id, -100), NOW, store))
    assert outcome.reply["status"] == "ended" and outcome.events[0].data["status"] == "ended"
    with pytest.raises(Refused) as excinfo:
        component.handle(timers.AddTime(timer_id, 5), NOW, store)
    assert excinfo.value.refusal.code == "invalid_state"
    other = start(store, component)
    for bad in (0, 604_801):
        with pytest.raises(Refused):
            component.handle(timers.AddTime(other, bad), NOW, store)


def test_the_deadline_ends_a_running_timer_once_and_ticks_emit_nothing() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    timer_id = start(store, component, 10)
    assert component.next_deadline() == NOW + 10_000
    outcome = component.on_deadline(NOW + 10_000, store)
    [event] = outcome.events
    assert event.data["timerId"] == timer_id and event.data["status"] == "ended" and event.data["action"] == "ended"
    assert component.next_deadline() is None and component.on_deadline(NOW + 10_001, store).events == []


def test_a_timer_changed_by_another_process_is_not_ended_by_a_stale_deadline() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    timer_id = start(store, component, 10)
    stale = timers.TimersComponent(CHANNEL)
    stale.load(store)
    store.run(component.handle(timers.AddTime(timer_id, 50), NOW, store))
    assert stale.on_deadline(NOW + 10_000, store).events == []
    assert store.stored[timer_id].status == "running"


def test_subathon_adds_configured_time_once_per_event() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    subathon = timers.Subathon(seconds_per_sub=60, seconds_per_gift=30, seconds_per_volt=0.5)
    timer_id = start(store, component, 600, subathon=subathon)
    plain = start(store, component, 600)
    for reason, amount, added in (("subscription", 1, 60), ("gift", 5, 150), ("volts", 100, 50)):
        outcome = store.run(component.handle(timers.CountForTimers(f"e-{reason}", reason, amount), NOW, store))
        [event] = outcome.events
        assert event.data["timerId"] == timer_id and event.data["addedSeconds"] == added
        assert event.data["reason"] == reason
    assert store.run(component.handle(timers.CountForTimers("e-gift", "gift", 5), NOW, store)).events == []
    assert component.live[timer_id].remaining_at(NOW) == (600 + 260) * 1000
    assert component.live[plain].remaining_at(NOW) == 600_000


def test_limits_and_validation() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    for bad in (timers.StartTimer(0), timers.StartTimer(604_801), timers.StartTimer(10, " ")):
        with pytest.raises(Refused) as excinfo:
            component.handle(bad, NOW, store)
        assert excinfo.value.refusal.code == "validation_error"
    for _ in range(timers.LIVE_TIMERS_MAX):
        start(store, component)
    with pytest.raises(Refused) as excinfo:
        component.handle(timers.StartTimer(10), NOW, store)
    assert excinfo.value.refusal.code == "too_many_timers"
    with pytest.raises(Refused) as excinfo:
        component.handle(timers.TimerOperation("nope", "pause"), NOW, store)
    assert excinfo.value.refusal.code == "not_found"


def test_subathon_additions_saturate_at_the_longest_timer() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    subathon = timers.Subathon(seconds_per_volt=timers.SUBATHON_RATE_MAX)
    timer_id = start(store, component, 600, subathon=subathon)
    outcome = store.run(component.handle(timers.CountForTimers("big", "volts", 3_000_000), NOW, store))
    [event] = outcome.events
    assert event.data["remainingSeconds"] == timers.REMAINING_MAX
    assert component.live[timer_id].remaining_at(NOW) == timers.REMAINING_MAX * 1000
    again = store.run(component.handle(timers.CountForTimers("more", "volts", 10**12), NOW, store))
    assert again.events == [] or again.events[0].data["remainingSeconds"] == timers.REMAINING_MAX
    assert component.next_deadline() == NOW + timers.REMAINING_MAX * 1000


def test_adding_time_past_the_longest_timer_is_refused_naming_seconds() -> None:
    store, component = FakeTimerStore(), timers.TimersComponent(CHANNEL)
    timer_id = start(store, component, timers.DURATION_MAX)
    steps = 0
    with pytest.raises(Refused) as excinfo:
        while True:
            store.run(component.handle(timers.AddTime(timer_id, timers.ADD_MAX), NOW, store))
            steps += 1
    assert excinfo.value.refusal.code == "validation_error"
    assert excinfo.value.refusal.details == {"field": "seconds", "remainingSeconds": timers.REMAINING_MAX}
    assert steps == (timers.REMAINING_MAX - timers.DURATION_MAX) // timers.ADD_MAX
    assert component.live[timer_id].remaining_at(NOW) <= timers.REMAINING_MAX * 1000
