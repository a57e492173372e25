"""Goals over HTTP: the owner's operations (mounted on the OAuth and the dashboard
blueprints) and the public by-username list for overlays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator
from quart import Blueprint
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.blueprints.interactive.common import (
    call,
    channel_of,
    me,
    streams_blueprint,
)
from volthub.http.params import uuid_param
from volthub.http.ratelimit import limited
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, ErrorBody, Model
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


def owner_routes(blueprint: Blueprint, read: Callable[[Any], Any], write: Callable[[Any], Any], label: str) -> None:
    """The operations on the caller's own channel. `read`/`write` declare the access."""

    @blueprint.get("/goals")
    @read
    @tag([label])
    @validate_response(GoalsOut, 200)
    async def list_goals() -> GoalsOut:
        """The channel's goals, oldest first."""
        rt = runtime()
        found = await rt.services.interactive.goals(me())
        return GoalsOut(goals=[GoalOut(**goal.as_api()) for goal in found])

    @blueprint.post("/goals")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(GoalBody)
    @validate_response(GoalEnvelope, 201)
    @validate_response(ErrorBody, 409)
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

    @blueprint.post("/goals/<goal_id>/adjust")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(AdjustBody)
    @validate_response(GoalEnvelope, 200)
    @validate_response(ErrorBody, 404)
    async def adjust_goal(goal_id: str, data: AdjustBody) -> GoalEnvelope:
        """Add `{delta}` (non-zero, may be negative; the count stops at 0)."""
        goal = await call(me(), goals.AdjustGoal(uuid_param(goal_id, "goalId"), data.delta))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))

    @blueprint.post("/goals/<goal_id>/target")
    @write
    @limited("interactive")
    @tag([label])
    @validate_request(TargetBody)
    @validate_response(GoalEnvelope, 200)
    @validate_response(ErrorBody, 404)
    async def target_goal(goal_id: str, data: TargetBody) -> GoalEnvelope:
        """Change the target `{target (> 0)}`; reaching it this way completes the goal too."""
        goal = await call(me(), goals.SetGoalTarget(uuid_param(goal_id, "goalId"), data.target))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))

    @blueprint.post("/goals/<goal_id>/reset")
    @write
    @limited("interactive")
    @tag([label])
    @validate_response(GoalEnvelope, 200)
    @validate_response(ErrorBody, 404)
    async def reset_goal(goal_id: str) -> GoalEnvelope:
        """Set the count to 0 and let the goal complete again in this period."""
        goal = await call(me(), goals.ResetGoal(uuid_param(goal_id, "goalId")))
        return GoalEnvelope(goal=GoalOut(**goal.as_api()))


# --- by channel username ---


@streams_blueprint.get("/goals")
@access.public
@tag(["Polls and giveaways"])
@validate_response(GoalsOut, 200)
@validate_response(ErrorBody, 404)
async def stream_goals(username: str) -> GoalsOut:
    """The channel's goals (for overlays)."""
    channel_id = await channel_of(username)
    found = await runtime().services.interactive.goals(channel_id)
    return GoalsOut(goals=[GoalOut(**goal.as_api()) for goal in found])
