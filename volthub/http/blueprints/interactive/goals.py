"""Goals over HTTP: the owner's operations (mounted on the OAuth and the dashboard
blueprints) and the public by-username list for overlays.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from volthub.http.blueprints.interactive.common import (
    Door,
    call,
    channel_of,
    channel_read,
    me,
    refuses,
)
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.hub.components import goals

# --- shapes ---


class GoalOut(Model):
    id: str
    type: Literal["followers", "subscriptions", "volts", "custom"]
    title: str
    current: int
    target: int
    completed: bool
    period: Literal["stream", "day", "week", "month", "none"]
    periodStartedAt: str
    periodEndsAt: str | None
    status: Literal["in_progress", "completed"]


_GOAL_EXAMPLE = {
    "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
    "type": "followers",
    "title": "Friday night speedrun",
    "current": 1,
    "target": 1,
    "completed": False,
    "period": "stream",
    "periodStartedAt": "2026-03-14T18:30:00Z",
    "periodEndsAt": "2026-03-14T18:30:00Z",
    "status": "in_progress",
}


class GoalEnvelope(Model):
    example = {"goal": _GOAL_EXAMPLE}

    goal: GoalOut


class GoalsOut(Model):
    example = {"goals": [_GOAL_EXAMPLE]}

    goals: list[GoalOut]


class GoalBody(Body):
    example = {"type": "followers", "title": "Friday night speedrun", "target": 1, "period": "stream"}

    type: Literal["followers", "subscriptions", "volts", "custom"]
    title: str = Field(min_length=1, max_length=goals.TITLE_MAX)
    target: int = Field(gt=0, le=goals.AMOUNT_MAX)
    period: Literal["stream", "day", "week", "month", "none"] = "none"

    _title = field_validator("title")(classmethod(lambda cls, v: goals.check_title(v)))


class AdjustBody(Body):
    example = {"delta": 1}

    delta: int = Field(ge=-goals.AMOUNT_MAX, le=goals.AMOUNT_MAX, description="Non-zero; the count never goes below 0.")

    _delta = field_validator("delta")(classmethod(lambda cls, v: goals.check_delta(v)))


class TargetBody(Body):
    example = {"target": 1}

    target: int = Field(gt=0, le=goals.AMOUNT_MAX)


# --- the owner's operations ---


def owner_routes(door: Door) -> None:
    """The operations on the caller's own channel, mounted through `door`."""

    @door.read("/goals", GoalsOut)
    async def list_goals() -> GoalsOut:
        """The channel's goals, oldest first."""
        rt = runtime()
        found = await rt.services.interactive.goals(me())
        return GoalsOut(goals=[GoalOut(**goal.as_api()) for goal in found])

    @door.write("/goals", GoalEnvelope, status=201, body=GoalBody, refusals=refuses(409))
    async def create_goal(data: GoalBody) -> tuple[GoalEnvelope, int]:
        """Create a goal `{type: followers|subscriptions|volts|custom, title (1–100), target (> 0),
        period?: stream|day|week|month|none (default none)}`. Follows, subscriptions (1 per
        subscription, the quantity per gift) and Volts (the amount) move matching goals by
        themselves. `period` is when the count starts over: `stream` when the channel goes live,
        `day`/`week` (Monday)/`month` at 00:00 UTC, `none` never. `channel.goal.progress` on each
        change; `channel.goal.completed` the first time the target is reached in a period. At
        most 50 goals: 409 `too_many_goals`."""
        goal = await call(me(), goals.CreateGoal(data.type, data.title, data.target, data.period))
        return GoalEnvelope(goal=GoalOut(**goal.as_api())), 201

    @door.write("/goals/<goal_id>/adjust", GoalEnvelope, body=AdjustBody, refusals=refuses(404))
    async def adjust_goal(goal_id: str, data: AdjustBody) -> GoalEnvelope:
        """Add `{delta}` (non-zero, may be negative; the count stops at 0)."""
        goal = await call(me(), goals.AdjustGoal(uuid_param(goal_id, "goalId"), data.delta))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))

    @door.write("/goals/<goal_id>/target", GoalEnvelope, body=TargetBody, refusals=refuses(404))
    async def target_goal(goal_id: str, data: TargetBody) -> GoalEnvelope:
        """Change the target `{target (> 0)}`; reaching it this way completes the goal too."""
        goal = await call(me(), goals.SetGoalTarget(uuid_param(goal_id, "goalId"), data.target))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))

    @door.write("/goals/<goal_id>/reset", GoalEnvelope, refusals=refuses(404))
    async def reset_goal(goal_id: str) -> GoalEnvelope:
        """Set the count to 0 and let the goal complete again in this period."""
        goal = await call(me(), goals.ResetGoal(uuid_param(goal_id, "goalId")))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))


# --- by channel username ---


@channel_read("/goals", GoalsOut)
async def stream_goals(username: str) -> GoalsOut:
    """The channel's goals (for overlays)."""
    channel_id = await channel_of(username)
    found = await runtime().services.interactive.goals(channel_id)
    return GoalsOut(goals=[GoalOut(**goal.as_api()) for goal in found])
