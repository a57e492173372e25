"""The prediction component without a database: states, bets, payout and refund arithmetic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.hub.components.fakes import CHANNEL, NOW, FakePredictionStore
from volthub.hub.components import predictions
from volthub.hub.components.base import Refused


def setup(window: int = 60) -> tuple[FakePredictionStore, predictions.PredictionsComponent, predictions.Prediction]:
    store, component = FakePredictionStore(), predictions.PredictionsComponent(CHANNEL)
    command = predictions.StartPrediction("Win?", ("Yes", "No"), window)
    prediction = store.run(component.handle(command, NOW, store)).reply
    for user in ("a", "b", "c"):
        store.add(user)
        store.balances[user] = 1000
    return store, component, prediction


def bet(store, component, prediction, user, outcome, points, at=NOW):  # type: ignore[no-untyped-def]
    return store.run(component.handle(predictions.PlaceBet(prediction.id, user, outcome, points), at, store))


def code(excinfo: pytest.ExceptionInfo[Refused]) -> str:
    return excinfo.value.refusal.code


def test_start_lock_resolve_pays_pro_rata_and_empties_the_escrow() -> None:
    store, component, p = setup()
    yes, no = (o.id for o in p.outcomes)
    assert bet(store, component, p, "a", yes, 100).events == []
    bet(store, component, p, "a", yes, 100)  # adds up on the same outcome
    bet(store, component, p, "b", yes, 100)
    bet(store, component, p, "c", no, 301)
    assert store.escrow[p.id] == 601 and store.balances["a"] == 800
    locked = store.run(component.handle(predictions.LockPrediction(p.id), NOW + 1, store))
    assert [e.name for e in locked.events] == ["channel.prediction.lock"]
    with pytest.raises(Refused) as excinfo:
        bet(store, component, p, "b", yes, 1, at=NOW + 2)
    assert code(excinfo) == "invalid_state"
    resolved = store.run(component.handle(predictions.ResolvePrediction(p.id, yes), NOW + 3, store))
    assert [e.name for e in resolved.events] == ["channel.prediction.end", "chat.message"]
    assert resolved.events[0].data["status"] == "resolved" and resolved.events[0].data["winningOutcomeId"] == yes
    # pool 601, winning pool 300: a gets floor(200*601/300)=400 (+1 rounding), b gets 200.
    assert store.escrow[p.id] == 0
    assert store.balances == {"a": 800 + 401, "b": 900 + 200, "c": 699}


def test_resolve_from_open_locks_first() -> None:
    store, component, p = setup()
    outcome = store.run(component.handle(predictions.ResolvePrediction(p.id, p.outcomes[1].id), NOW, store))
    assert [e.name for e in outcome.events] == ["channel.prediction.lock", "channel.prediction.end", "chat.message"]


def test_cancel_refunds_everyone_from_open_or_locked() -> None:
    for lock_first in (False, True):
        store, component, p = setup()
        bet(store, component, p, "a", p.outcomes[0].id, 10)
        bet(store, component, p, "b", p.outcomes[1].id, 20)
        if lock_first:
            store.run(component.handle(predictions.LockPrediction(p.id), NOW, store))
        outcome = store.run(component.handle(predictions.CancelPrediction(p.id), NOW, store))
        assert outcome.events[0].data["status"] == "cancelled" and outcome.events[0].data["winningOutcomeId"] is None
        assert store.balances == {"a": 1000, "b": 1000, "c": 1000} and store.escrow[p.id] == 0
        for command in (
            predictions.CancelPrediction(p.id),
            predictions.LockPrediction(p.id),
            predictions.ResolvePrediction(p.id, p.outcomes[0].id),
        ):
            with pytest.raises(Refused) as excinfo:
                component.handle(command, NOW, store)
            assert code(excinfo) == "invalid_state"
            assert excinfo.value.refusal.details == {"status": "cancelled"}


def test_bet_refusals() -> None:
    store, component, p = setup()
    yes, no = (o.id for o in p.outcomes)
    store.add("banned", banned=True)
    bet(store, component, p, "a", yes, 5)
    cases = [
        (predictions.PlaceBet(p.id, "a", no, 5), "already_bet"),
        (predictions.PlaceBet(p.id, "b", yes, 1001), "insufficient_funds"),
        (predictions.PlaceBet(p.id, "b", "nope", 5), "invalid_outcome"),
        (predictions.PlaceBet(p.id, "b", yes, 0), "validation_error"),
        (predictions.PlaceBet(p.id, CHANNEL, yes, 5), "cannot_bet_own"),
        (predictions.PlaceBet(p.id, "banned", yes, 5), "banned"),
        (predictions.PlaceBet("other", "b", yes, 5), "not_found"),
    ]
    for command, expected in cases:
        with pytest.raises(Refused) as excinfo:
            component.handle(command, NOW, store)
        assert code(excinfo) == expected


def test_the_window_locks_by_itself_once() -> None:
    store, component, p = setup(window=30)
    assert component.next_deadline() == NOW + 30_000 and not component.is_idle()
    outcome = component.on_deadline(NOW + 30_000, store)
    assert [e.name for e in outcome.events] == ["channel.prediction.lock"]
    assert component.next_deadline() is None and component.is_idle()
    assert component.on_deadline(NOW + 30_001, store).events == []
    with pytest.raises(Refused) as excinfo:
        component.handle(predictions.StartPrediction("Next", ("x", "y"), 30), NOW, store)
    assert code(excinfo) == "already_active"  # locked still counts as active


def test_start_validation() -> None:
    store, component = FakePredictionStore(), predictions.PredictionsComponent(CHANNEL)
    for command in (
        predictions.StartPrediction("t", ("only",), 60),
        predictions.StartPrediction("t", tuple(str(n) for n in range(11)), 60),
        predictions.StartPrediction("t", ("a", "b"), 29),
        predictions.StartPrediction("t", ("a", "b"), 1801),
    ):
        with pytest.raises(Refused):
            component.handle(command, NOW, store)


@given(
    st.lists(st.tuples(st.integers(1, 10**6), st.booleans()), min_size=1, max_size=40),
)
def test_payouts_always_add_up_to_the_pool(raw: list[tuple[int, bool]]) -> None:
    bets = [predictions.Bet(f"u{n}", "win" if won else "lose", points, n) for n, (points, won) in enumerate(raw)]
    paid = predictions.payouts(bets, "win")
    assert sum(paid.values()) == sum(b.points for b in bets)
    if any(b.outcome_id == "win" for b in bets):
        assert all(user in {b.user_id for b in bets if b.outcome_id == "win"} for user in paid)
        winning = sum(b.points for b in bets if b.outcome_id == "win")
        pool = sum(b.points for b in bets)
        for b in bets:
            if b.outcome_id == "win":
                assert paid[b.user_id] - b.points * pool // winning in (0, 1)
