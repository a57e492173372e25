"""Predictions over HTTP: the owner's operations (mounted on the OAuth and the dashboard
blueprints) and the by-username routes, where viewers bet channel points.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from volthub.http import access
from volthub.http.blueprints.interactive.common import (
    Door,
    call,
    channel_of,
    channel_read,
    me,
    viewer_action,
)
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.hub.components import predictions

# --- shapes ---


class PredictionOutcomeOut(Model):
    id: str
    title: str
    users: int
    points: int


class PredictionOut(Model):
    id: str
    title: str
    status: Literal["open", "locked", "resolved", "cancelled"]
    outcomes: list[PredictionOutcomeOut]
    totalPoints: int
    windowSeconds: int
    startedAt: str
    locksAt: str
    lockedAt: str | None
    endedAt: str | None
    winningOutcomeId: str | None


class PredictionEnvelope(Model):
    example = {
        "prediction": {
            "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
            "title": "Friday night speedrun",
            "status": "open",
            "outcomes": [
                {
                    "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
                    "title": "Friday night speedrun",
                    "users": 1,
                    "points": 100,
                }
            ],
            "totalPoints": 100,
            "windowSeconds": 60,
            "startedAt": "2026-03-14T18:30:00Z",
            "locksAt": "2026-03-14T18:30:00Z",
            "lockedAt": "2026-03-14T18:30:00Z",
            "endedAt": "2026-03-14T18:30:00Z",
            "winningOutcomeId": "0b7e2a4c-5d1f-4e8a-9c3b-49d3e7360000",
        }
    }

    prediction: PredictionOut | None


class BetOut(Model):
    example = {
        "success": True,
        "predictionId": "0b7e2a4c-5d1f-4e8a-9c3b-f49354440000",
        "outcomeId": "0b7e2a4c-5d1f-4e8a-9c3b-e072db670000",
        "points": 100,
        "balance": 100,
    }

    success: bool
    predictionId: str
    outcomeId: str
    points: int = Field(description="the caller's whole bet on this prediction")
    balance: int = Field(description="the caller's channel points left")


class PredictionBody(Body):
    example = {"title": "Who wins the next round?", "outcomes": ["Ada", "Grace"], "windowSeconds": 120}

    title: str = Field(min_length=1, max_length=predictions.TITLE_MAX)
    outcomes: list[str] = Field(min_length=predictions.OUTCOMES_MIN, max_length=predictions.OUTCOMES_MAX)
    windowSeconds: int = Field(ge=predictions.WINDOW_MIN, le=predictions.WINDOW_MAX)

    _title = field_validator("title")(classmethod(lambda cls, v: predictions.check_title(v)))
    _outcomes = field_validator("outcomes")(classmethod(lambda cls, v: predictions.check_outcomes(v)))


class ResolveBody(Body):
    example = {"winningOutcomeId": "0b7e2a4c-5d1f-4e8a-9c3b-49d3e7360000"}

    winningOutcomeId: str = Field(min_length=1, max_length=64)


class BetBody(Body):
    example = {"outcomeId": "0b7e2a4c-5d1f-4e8a-9c3b-e072db670000", "points": 100}

    outcomeId: str = Field(min_length=1, max_length=64)
    points: int = Field(ge=1, le=predictions.BET_MAX)


def _prediction(prediction: predictions.Prediction | None) -> PredictionEnvelope:
    return PredictionEnvelope(prediction=None if prediction is None else PredictionOut(**prediction.as_api()))


# --- the owner's operations ---


def owner_routes(door: Door) -> None:
    """The operations on the caller's own channel, mounted through `door`."""

    @door.read("/predictions/active", PredictionEnvelope)
    async def active_prediction() -> PredictionEnvelope:
        """The open or locked prediction with the points on each outcome, or `{prediction: null}`."""
        return _prediction(await runtime().services.interactive.active_prediction(me()))

    @door.write("/predictions", PredictionEnvelope, status=201, body=PredictionBody)
    async def start_prediction(data: PredictionBody) -> tuple[PredictionEnvelope, int]:
        """Open a prediction: `{title (1–100), outcomes: [2–10 distinct strings of 1–50],
        windowSeconds (30–1800)}`. States: `open → locked → resolved`, `open | locked →
        cancelled`. Bets (channel points) are taken while open; at `locksAt` it locks by itself
        (`channel.prediction.lock`). One open or locked prediction per channel."""
        command = predictions.StartPrediction(data.title, tuple(data.outcomes), data.windowSeconds)
        return _prediction(await call(me(), command)), 201

    @door.write("/predictions/<prediction_id>/lock", PredictionEnvelope)
    async def lock_prediction(prediction_id: str) -> PredictionEnvelope:
        """Stop taking bets: open → locked (`channel.prediction.lock`). Other states: 409 `invalid_state`."""
        return _prediction(await call(me(), predictions.LockPrediction(uuid_param(prediction_id, "predictionId"))))

    @door.write("/predictions/<prediction_id>/resolve", PredictionEnvelope, body=ResolveBody)
    async def resolve_prediction(prediction_id: str, data: ResolveBody) -> PredictionEnvelope:
        """Resolve with `{winningOutcomeId}` from `locked`, or from `open` (which locks first:
        `channel.prediction.lock`, then `channel.prediction.end`). The escrow pays the winners pro
        rata — floor(bet × pool ÷ winning pool), the rounding remainder one point each to the
        largest winning bets (then the earlier bet) — so the escrow ends at exactly 0; with no
        bet on the winning outcome everyone is refunded. Unknown outcome: 400 `invalid_outcome`."""
        command = predictions.ResolvePrediction(uuid_param(prediction_id, "predictionId"), data.winningOutcomeId)
        return _prediction(await call(me(), command))

    @door.write("/predictions/<prediction_id>/cancel", PredictionEnvelope)
    async def cancel_prediction(prediction_id: str) -> PredictionEnvelope:
        """Cancel an open or locked prediction: every bet is refunded in full, atomically
        (`channel.prediction.end` with `status: "cancelled"`). Resolved or cancelled: 409."""
        return _prediction(await call(me(), predictions.CancelPrediction(uuid_param(prediction_id, "predictionId"))))


# --- by channel username ---


@channel_read("/predictions/active", PredictionEnvelope)
async def stream_active_prediction(username: str) -> PredictionEnvelope:
    """The channel's open or locked prediction, or `{prediction: null}` (for viewers and overlays)."""
    channel_id = await channel_of(username)
    return _prediction(await runtime().services.interactive.active_prediction(channel_id))


@viewer_action("/predictions/<prediction_id>/bet", BetOut, body=BetBody)
async def bet(username: str, prediction_id: str, data: BetBody) -> BetOut:
    """Bet `{outcomeId, points (≥ 1)}` of your channel points of this channel while the
    prediction is open. More points on the same outcome add up; another outcome: 409
    `already_bet`; too few points: 400 `insufficient_funds` (details.balance); locked or
    ended: 409 `invalid_state`. Bets emit no event."""
    channel_id = await channel_of(username)
    command = predictions.PlaceBet(
        uuid_param(prediction_id, "predictionId"), access.principal().user_id, data.outcomeId, data.points
    )
    return BetOut(success=True, **await call(channel_id, command))
