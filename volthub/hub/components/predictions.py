"""Predictions, the channel actor's prediction component, sans-IO.

States: (none) → open → locked → resolved, and open | locked → cancelled. The betting
window closes by itself at `locksAt` (the actor's deadline, a guarded write). Resolving an
open prediction locks it first, so it emits `channel.prediction.lock` then
`channel.prediction.end`. One active (open or locked) prediction per channel.

Bets are channel points of this channel: a bet moves points from the viewer's account to
the prediction's escrow (`points:<channel>:system:prediction:<id>`) in the actor's
transaction. A viewer bets on one outcome (more points on the same outcome add up; another
outcome is 409 `already_bet`). Resolving pays the escrow out to the winning outcome's
bettors pro rata: each gets floor(bet × pool ÷ winning pool); the few points the rounding
leaves go one each to the largest winning bets (ties: the earlier bet, then the user id),
so the escrow ends at exactly 0. If nobody bet on the winning outcome, every bet is
refunded. Cancelling refunds every bet in full. Bets emit no event.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from volthub.hub.clock import iso8601
from volthub.hub.components import common
from volthub.hub.components.base import Dispatcher, Emitted, Outcome, Refusal, Refused, handles
from volthub.protocol import catalogue

TITLE_MAX = 100
OUTCOME_MAX = 50
OUTCOMES_MIN, OUTCOMES_MAX = 2, 10
WINDOW_MIN, WINDOW_MAX = 30, 1800
BET_MAX = 1_000_000_000
ACTIVE = ("open", "locked")


def check_title(value: str) -> str:
    return common.check_text(value, "title", TITLE_MAX)


def check_outcomes(values: list[str]) -> list[str]:
    return common.check_choices(values, "outcomes", OUTCOMES_MIN, OUTCOMES_MAX, OUTCOME_MAX)


def check_window(seconds: int) -> int:
    return common.check_seconds(seconds, "windowSeconds", WINDOW_MIN, WINDOW_MAX)


@dataclass(frozen=True)
class Choice:
    id: str
    title: str


@dataclass(frozen=True)
class Bet:
    user_id: str
    outcome_id: str
    points: int
    placed_at: int


@dataclass(frozen=True)
class Prediction:
    id: str
    title: str
    status: str  # open | locked | resolved | cancelled
    outcomes: tuple[Choice, ...]
    started_at: int
    locks_at: int
    locked_at: int | None = None
    ended_at: int | None = None
    winning_outcome_id: str | None = None
    bets: tuple[Bet, ...] = field(default_factory=tuple)

    def outcome_views(self) -> list[dict[str, Any]]:
        views = []
        for choice in self.outcomes:
            on = [bet for bet in self.bets if bet.outcome_id == choice.id]
            views.append(
                {"id": choice.id, "title": choice.title, "users": len(on), "points": sum(b.points for b in on)}
            )
        return views

    def as_api(self) -> dict[str, Any]:
        def when(ms: int | None) -> str | None:
            return iso8601(ms) if ms is not None else None

        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "outcomes": self.outcome_views(),
            "totalPoints": sum(bet.points for bet in self.bets),
            "windowSeconds": (self.locks_at - self.started_at) // 1000,
            "startedAt": iso8601(self.started_at),
            "locksAt": iso8601(self.locks_at),
            "lockedAt": when(self.locked_at),
            "endedAt": when(self.ended_at),
            "winningOutcomeId": self.winning_outcome_id,
        }


def payouts(bets: Sequence[Bet], winning_outcome_id: str) -> dict[str, int]:
    """What each bettor gets back from the pool; the values add up to the pool exactly."""
    pool = sum(bet.points for bet in bets)
    winners = [bet for bet in bets if bet.outcome_id == winning_outcome_id]
    winning_pool = sum(bet.points for bet in winners)
    if winning_pool == 0:
        return {bet.user_id: bet.points for bet in bets}
    shares = {bet.user_id: bet.points * pool // winning_pool for bet in winners}
    left = pool - sum(shares.values())  # < len(winners): each floor loses less than 1
    for bet in sorted(winners, key=lambda b: (-b.points, b.placed_at, b.user_id))[:left]:
        shares[bet.user_id] += 1
    return shares


# --- commands --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartPrediction:
    title: str
    outcomes: tuple[str, ...]
    window_seconds: int


@dataclass(frozen=True)
class LockPrediction:
    prediction_id: str


@dataclass(frozen=True)
class ResolvePrediction:
    prediction_id: str
    winning_outcome_id: str


@dataclass(frozen=True)
class CancelPrediction:
    prediction_id: str


@dataclass(frozen=True)
class PlaceBet:
    """Replies `{predictionId, outcomeId, points (the user's total), balance}`."""

    prediction_id: str
    user_id: str
    outcome_id: str
    points: int


class PredictionStore(common.CardStore, common.StandingStore, Protocol):
    def active_prediction(self) -> Prediction | None:
        """The open or locked prediction, without its bets."""

    def prediction(self, prediction_id: str) -> Prediction | None:
        """Any prediction of this channel, with its bets."""

    def bet(self, prediction_id: str, user_id: str) -> Bet | None: ...
    def points_balance(self, user_id: str) -> int: ...
    def lock(self, prediction_id: str, now_ms: int) -> bool:
        """Guarded: open → locked."""

    def finish(self, prediction_id: str, status: str, winning_outcome_id: str | None, now_ms: int) -> bool:
        """Guarded: locked → resolved | cancelled (cancel also from open)."""


@dataclass(frozen=True)
class InsertPrediction:
    prediction: Prediction


@dataclass(frozen=True)
class StakeBet:
    """Move `added` points from the user to the escrow; the user's bet becomes `bet`."""

    prediction_id: str
    bet: Bet
    added: int


@dataclass(frozen=True)
class PayOut:
    """Move `amount` points from the escrow to the user (kind: payout or refund)."""

    prediction_id: str
    user_id: str
    amount: int
    kind: str


class PredictionsComponent(Dispatcher[PredictionStore]):
    UNHANDLED = "predictions do not handle"

    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id
        self.active: Prediction | None = None

    def load(self, store: PredictionStore) -> None:
        self.active = store.active_prediction()

    def next_deadline(self) -> int | None:
        if self.active is None or self.active.status != "open":
            return None
        return self.active.locks_at

    def is_idle(self) -> bool:
        return self.active is None or self.active.status != "open"

    def on_deadline(self, now_ms: int, store: PredictionStore) -> Outcome:
        prediction = self.active
        if prediction is None or prediction.status != "open":
            return Outcome()
        current = store.prediction(prediction.id) or prediction
        return self._lock(current, now_ms, store, refuse=False)

    # -- decisions --

    def _find(self, prediction_id: str, store: PredictionStore) -> Prediction:
        return common.found(store.prediction(prediction_id), "prediction", prediction_id)

    @handles(StartPrediction)
    def _start(self, command: StartPrediction, now_ms: int, store: PredictionStore) -> Outcome:
        if self.active is not None:
            raise common.already_active("prediction", self.active.id)
        with common.refusing_invalid():
            title = check_title(command.title)
            texts = check_outcomes(list(command.outcomes))
            window = check_window(command.window_seconds)
        choices = tuple(Choice(str(uuid.uuid4()), text) for text in texts)
        prediction = Prediction(str(uuid.uuid4()), title, "open", choices, now_ms, now_ms + window * 1000)
        self.active = prediction
        data = catalogue.channel_prediction_begin(
            prediction_id=prediction.id,
            title=title,
            outcomes=prediction.outcome_views(),
            started_at=iso8601(now_ms),
            locks_at=iso8601(prediction.locks_at),
        )
        outcome = Outcome(
            prediction,
            [InsertPrediction(prediction)],
            [Emitted("channel.prediction.begin", data)],
            shared_state_changed=True,
        )
        return common.add_card(
            outcome, store, self.channel_id, now_ms, "prediction-begin", f"Prediction: {title}", data
        )

    @handles(LockPrediction)
    def _lock_command(self, command: LockPrediction, now_ms: int, store: PredictionStore) -> Outcome:
        prediction = self._find(command.prediction_id, store)
        if prediction.status != "open":
            raise common.invalid_state("prediction", prediction.status, "lock")
        return self._lock(prediction, now_ms, store, refuse=True)

    def _lock(self, prediction: Prediction, now_ms: int, store: PredictionStore, *, refuse: bool) -> Outcome:
        if not store.lock(prediction.id, now_ms):
            if refuse:
                raise common.invalid_state("prediction", "locked", "lock")
            self.active = None  # another process moved it on; reload at the next lock
            return Outcome(shared_state_changed=True)
        locked = replace(prediction, status="locked", locked_at=now_ms)
        self.active = replace(locked, bets=())
        data = catalogue.channel_prediction_lock(
            prediction_id=locked.id, title=locked.title, outcomes=locked.outcome_views(), locked_at=iso8601(now_ms)
        )
        return Outcome(locked, [], [Emitted("channel.prediction.lock", data)], shared_state_changed=True)

    @handles(ResolvePrediction)
    def _resolve(self, command: ResolvePrediction, now_ms: int, store: PredictionStore) -> Outcome:
        prediction = self._find(command.prediction_id, store)
        winning = command.winning_outcome_id
        if prediction.status not in ACTIVE:
            raise common.invalid_state("prediction", prediction.status, "resolve")
        if winning not in {choice.id for choice in prediction.outcomes}:
            raise Refused(
                Refusal(
                    400,
                    "invalid_outcome",
                    "winningOutcomeId is not an outcome of this prediction",
                    {"field": "winningOutcomeId"},
                )
            )
        first = Outcome()
        if prediction.status == "open":
            first = self._lock(prediction, now_ms, store, refuse=True)
            prediction = replace(prediction, status="locked", locked_at=now_ms)
        outcome = self._finish(prediction, "resolved", winning, now_ms, store)
        outcome.writes[:0] = first.writes
        outcome.events[:0] = first.events
        return outcome

    @handles(CancelPrediction)
    def _cancel(self, command: CancelPrediction, now_ms: int, store: PredictionStore) -> Outcome:
        prediction = self._find(command.prediction_id, store)
        if prediction.status not in ACTIVE:
            raise common.invalid_state("prediction", prediction.status, "cancel")
        return self._finish(prediction, "cancelled", None, now_ms, store)

    def _finish(
        self, prediction: Prediction, status: str, winning: str | None, now_ms: int, store: PredictionStore
    ) -> Outcome:
        if not store.finish(prediction.id, status, winning, now_ms):
            raise common.invalid_state("prediction", prediction.status, "end")
        ended = replace(
            prediction, status=status, winning_outcome_id=winning, ended_at=now_ms, locked_at=prediction.locked_at
        )
        self.active = None
        if winning is None:
            amounts = {bet.user_id: bet.points for bet in prediction.bets}
            kind = "prediction_refund"
        else:
            amounts = payouts(prediction.bets, winning)
            won = any(bet.outcome_id == winning for bet in prediction.bets)
            kind = "prediction_payout" if won else "prediction_refund"
        writes: list[Any] = [
            PayOut(prediction.id, user_id, amount, kind) for user_id, amount in sorted(amounts.items()) if amount > 0
        ]
        data = catalogue.channel_prediction_end(
            prediction_id=ended.id,
            title=ended.title,
            outcomes=ended.outcome_views(),
            status=status,
            ended_at=iso8601(now_ms),
            winning_outcome_id=winning,
        )
        outcome = Outcome(ended, writes, [Emitted("channel.prediction.end", data)], shared_state_changed=True)
        text = f"Prediction {status}: {ended.title}"
        return common.add_card(outcome, store, self.channel_id, now_ms, "prediction-end", text, data)

    @handles(PlaceBet)
    def _bet(self, command: PlaceBet, now_ms: int, store: PredictionStore) -> Outcome:
        prediction = common.current(self.active, "prediction", command.prediction_id, store.prediction, "bet on")
        if prediction.status != "open" or now_ms >= prediction.locks_at:
            raise common.invalid_state("prediction", "locked", "bet on")
        if command.outcome_id not in {choice.id for choice in prediction.outcomes}:
            raise Refused(
                Refusal(
                    400, "invalid_outcome", "outcomeId is not an outcome of this prediction", {"field": "outcomeId"}
                )
            )
        if not 1 <= command.points <= BET_MAX:
            raise Refused(Refusal(400, "validation_error", f"points must be 1–{BET_MAX}", {"field": "points"}))
        own = Refusal(403, "cannot_bet_own", "the broadcaster cannot bet on their own prediction")
        common.participant(store, command.user_id, now_ms, own)
        previous = store.bet(prediction.id, command.user_id)
        if previous is not None and previous.outcome_id != command.outcome_id:
            raise Refused(
                Refusal(
                    409,
                    "already_bet",
                    "you have already bet on another outcome of this prediction",
                    {"outcomeId": previous.outcome_id},
                )
            )
        balance = store.points_balance(command.user_id)
        if balance < command.points:
            raise Refused(
                Refusal(
                    400,
                    "insufficient_funds",
                    "not enough channel points for this bet",
                    {"balance": balance, "needed": command.points},
                )
            )
        total = command.points + (previous.points if previous is not None else 0)
        placed_at = previous.placed_at if previous is not None else now_ms
        bet = Bet(command.user_id, command.outcome_id, total, placed_at)
        reply = {
            "predictionId": prediction.id,
            "outcomeId": command.outcome_id,
            "points": total,
            "balance": balance - command.points,
        }
        return Outcome(reply, [StakeBet(prediction.id, bet, command.points)])
