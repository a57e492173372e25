"""Goals, the channel actor's goal component, sans-IO.

A goal counts `followers`, `subscriptions`, `volts` (moved by themselves by the matching
platform events) or `custom` (moved only by `adjust`) towards `target`. Decided here:
- `period` is when the count starts over: `none` never, `stream` when the channel goes
  live (`stream.online`), `day`, `week` (Monday) and `month` at 00:00 UTC — fired by the
  actor's deadline as a guarded write, so it rolls over once with several processes.
  A rollover sets `current` to 0 and emits `channel.goal.progress`.
- `channel.goal.completed` fires the first time `current` reaches `target` in a period,
  never again in that period (falling below and climbing back does not repeat it);
  `reset` sets `current` to 0 and lets the goal complete again.
- Every change of `current` or `target` emits one `channel.goal.progress`. A count never
  goes below 0. Subscriptions count 1 per non-gift subscription plus the quantity of each
  gift; Volts count the amount sent.
"""

from __future__ import annotations

import calendar
import datetime as dt
import uuid
from dataclasses import dataclass, replace
from typing import Any, Protocol

from volthub.hub.clock import iso8601
from volthub.hub.components import common
from volthub.hub.components.base import Dispatcher, Emitted, Outcome, Refusal, Refused, Store, handles
from volthub.protocol import catalogue

TYPES = ("followers", "subscriptions", "volts", "custom")
PERIODS = ("stream", "day", "week", "month", "none")
CALENDAR_PERIODS = ("day", "week", "month")
TITLE_MAX = 100
AMOUNT_MAX = 1_000_000_000_000
GOALS_MAX = 50


def check_title(value: str) -> str:
    return common.check_text(value, "title", TITLE_MAX)


def check_target(target: int) -> int:
    if not 0 < target <= AMOUNT_MAX:
        raise ValueError(f"target must be 1–{AMOUNT_MAX}")
    return target


def check_delta(delta: int) -> int:
    if delta == 0 or abs(delta) > AMOUNT_MAX:
        raise ValueError(f"delta must be non-zero and at most {AMOUNT_MAX} either way")
    return delta


def period_start(period: str, now_ms: int) -> int:
    """The start of the calendar period holding `now_ms` (UTC); `now_ms` for the others."""
    if period not in CALENDAR_PERIODS:
        return now_ms
    day = dt.datetime.fromtimestamp(now_ms / 1000, dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        day -= dt.timedelta(days=day.weekday())
    elif period == "month":
        day = day.replace(day=1)
    return int(day.timestamp() * 1000)


def period_end(period: str, start_ms: int) -> int | None:
    """When a calendar period that began at `start_ms` ends; None for the others."""
    if period not in CALENDAR_PERIODS:
        return None
    start = dt.datetime.fromtimestamp(start_ms / 1000, dt.UTC)
    if period == "day":
        end = start + dt.timedelta(days=1)
    elif period == "week":
        end = start + dt.timedelta(days=7)
    else:
        end = start + dt.timedelta(days=calendar.monthrange(start.year, start.month)[1])
    return int(end.timestamp() * 1000)


@dataclass(frozen=True)
class Goal:
    id: str
    type: str
    title: str
    current: int
    target: int
    period: str
    period_start: int
    completed_period: int | None = None  # the period_start it completed in

    @property
    def completed(self) -> bool:
        return self.completed_period == self.period_start

    def as_api(self) -> dict[str, Any]:
        ends = period_end(self.period, self.period_start)
        return {
            "id": self.id,
            "type": self.type,
            "title": self.title,
            "current": self.current,
            "target": self.target,
            "completed": self.completed,
            "period": self.period,
            "periodStartedAt": iso8601(self.period_start),
            "periodEndsAt": iso8601(ends) if ends is not None else None,
            "status": "completed" if self.completed else "in_progress",
        }


@dataclass(frozen=True)
class CreateGoal:
    type: str
    title: str
    target: int
    period: str = "none"


@dataclass(frozen=True)
class AdjustGoal:
    goal_id: str
    delta: int


@dataclass(frozen=True)
class SetGoalTarget:
    goal_id: str
    target: int


@dataclass(frozen=True)
class ResetGoal:
    goal_id: str


@dataclass(frozen=True)
class CountForGoals:
    """A platform event for goals of `goal_type`; counted once per event id."""

    event_id: str
    goal_type: str
    amount: int


@dataclass(frozen=True)
class StreamStarted:
    """The channel went live: goals with period `stream` start over."""

    event_id: str


class GoalStore(Store, Protocol):
    def goals(self) -> list[Goal]: ...
    def roll_over(self, goal_id: str, old_start: int, new_start: int) -> bool:
        """Guarded: the period that began at `old_start` → the one at `new_start`, count 0."""

    def count_once(self, key: str) -> bool: ...


@dataclass(frozen=True)
class SaveGoal:
    goal: Goal
    created: bool = False


class GoalsComponent(Dispatcher[GoalStore]):
    UNHANDLED = "goals do not handle"

    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id
        self.goals: dict[str, Goal] = {}

    def load(self, store: GoalStore) -> None:
        self.goals = {goal.id: goal for goal in store.goals()}

    def next_deadline(self) -> int | None:
        ends = [e for g in self.goals.values() if (e := period_end(g.period, g.period_start)) is not None]
        return min(ends) if ends else None

    def is_idle(self) -> bool:
        # A calendar period must roll over on time, so its channel keeps its actor.
        return not any(goal.period in CALENDAR_PERIODS for goal in self.goals.values())

    def on_deadline(self, now_ms: int, store: GoalStore) -> Outcome:
        outcome = Outcome(shared_state_changed=True)
        for goal in sorted(self.goals.values(), key=lambda g: g.id):
            ends = period_end(goal.period, goal.period_start)
            if ends is None or ends > now_ms:
                continue
            new_start = period_start(goal.period, now_ms)
            rolled = replace(goal, current=0, period_start=new_start, completed_period=None)
            self.goals[goal.id] = rolled
            if store.roll_over(goal.id, goal.period_start, new_start):  # False: another process did
                outcome.events.append(Emitted("channel.goal.progress", _progress(rolled)))
        return outcome

    @handles(CreateGoal)
    def _create(self, command: CreateGoal, now_ms: int, store: GoalStore) -> Outcome:
        if len(self.goals) >= GOALS_MAX:
            raise Refused(Refusal(409, "too_many_goals", f"a channel may have at most {GOALS_MAX} goals"))
        if command.type not in TYPES or command.period not in PERIODS:
            raise Refused(Refusal(400, "validation_error", "unknown goal type or period"))
        with common.refusing_invalid():
            title, target = check_title(command.title), check_target(command.target)
        goal = Goal(
            str(uuid.uuid4()), command.type, title, 0, target, command.period, period_start(command.period, now_ms)
        )
        self.goals[goal.id] = goal
        return Outcome(goal, [SaveGoal(goal, created=True)], shared_state_changed=True)

    @handles(CountForGoals)
    def _count(self, command: CountForGoals, now_ms: int, store: GoalStore) -> Outcome:
        matching = sorted((g for g in self.goals.values() if g.type == command.goal_type), key=lambda g: g.id)
        if not matching or command.amount <= 0 or not store.count_once(f"{command.event_id}:goals"):
            return Outcome()
        outcome = Outcome(shared_state_changed=True)
        for goal in matching:
            common.add_steps(outcome, self._change(goal, goal.current + command.amount, goal.target, now_ms))
        return outcome

    @handles(StreamStarted)
    def _stream_started(self, command: StreamStarted, now_ms: int, store: GoalStore) -> Outcome:
        matching = sorted((g for g in self.goals.values() if g.period == "stream"), key=lambda g: g.id)
        if not matching or not store.count_once(f"{command.event_id}:goals"):
            return Outcome()
        outcome = Outcome(shared_state_changed=True)
        for goal in matching:
            restarted = replace(goal, period_start=now_ms, completed_period=None)
            common.add_steps(outcome, self._change(restarted, 0, goal.target, now_ms, force=True))
        return outcome

    @handles(AdjustGoal)
    def _adjust(self, command: AdjustGoal, now_ms: int, store: GoalStore) -> Outcome:
        goal = self._goal(command.goal_id)
        with common.refusing_invalid():
            return self._change(goal, goal.current + check_delta(command.delta), goal.target, now_ms)

    @handles(SetGoalTarget)
    def _set_target(self, command: SetGoalTarget, now_ms: int, store: GoalStore) -> Outcome:
        goal = self._goal(command.goal_id)
        with common.refusing_invalid():
            return self._change(goal, goal.current, check_target(command.target), now_ms)

    @handles(ResetGoal)
    def _reset(self, command: ResetGoal, now_ms: int, store: GoalStore) -> Outcome:
        goal = self._goal(command.goal_id)
        return self._change(replace(goal, completed_period=None), 0, goal.target, now_ms, force=True)

    def _goal(self, goal_id: str) -> Goal:
        return common.found(self.goals.get(goal_id), "goal", goal_id)

    def _change(self, goal: Goal, current: int, target: int, now_ms: int, *, force: bool = False) -> Outcome:
        changed = replace(goal, current=max(0, min(current, AMOUNT_MAX)), target=target)
        if changed == goal and not force:
            return Outcome(goal)
        events = [Emitted("channel.goal.progress", _progress(changed))]
        if changed.current >= changed.target and not changed.completed:
            changed = replace(changed, completed_period=changed.period_start)
            data = catalogue.channel_goal_completed(**_standing(changed), completed_at=iso8601(now_ms))
            events.append(Emitted("channel.goal.completed", data))
        self.goals[changed.id] = changed
        return Outcome(changed, [SaveGoal(changed)], events, shared_state_changed=True)


def _standing(goal: Goal) -> dict[str, Any]:
    """What every goal event says of the goal as it stands now (its catalogue builder's
    arguments)."""
    return {
        "goal_id": goal.id,
        "goal_type": goal.type,
        "title": goal.title,
        "current": goal.current,
        "target": goal.target,
        "period": goal.period,
    }


def _progress(goal: Goal) -> dict[str, Any]:
    return catalogue.channel_goal_progress(**_standing(goal))
