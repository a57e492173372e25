"""Fake store ports of the interactive components: plain dicts, the guarded transitions
answered as the database would (only the first caller wins), every write recorded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.hub.components.test_chat_component import FakeStore as FakeChatStore
from volthub.hub.components import chat, giveaways, goals, polls, predictions, timers
from volthub.hub.components.chat import Standing

NOW = 1_800_000_000_000
CHANNEL = "chan"


def person(user_id: str, **flags: Any) -> Standing:
    return Standing(user_id, f"user_{user_id}", f"User {user_id}", **flags)


def transition(records: dict[str, Any], key: str, allowed: tuple[str, ...], **changes: Any) -> bool:
    """A guarded write, as the database makes it (`UPDATE ... WHERE status IN allowed`): the
    record changes only from an allowed status, so only the first caller wins."""
    found = records[key]
    if found.status not in allowed:
        return False
    records[key] = replace(found, **changes)
    return True


class FakePort:
    def __init__(self) -> None:
        self.chat = FakeChatStore(people={CHANNEL: person(CHANNEL, is_broadcaster=True)})
        self.people: dict[str, Standing] = {CHANNEL: self.chat.people[CHANNEL]}
        self.applied: list[Any] = []
        self.counted: set[str] = set()

    def add(self, user_id: str, **flags: Any) -> Standing:
        standing = person(user_id, **flags)
        self.people[user_id] = self.chat.people[user_id] = standing
        return standing

    def standing(self, user_id: str) -> Standing | None:
        return self.people.get(user_id)

    def count_once(self, key: str) -> bool:
        if key in self.counted:
            return False
        self.counted.add(key)
        return True

    def apply(self, write: Any) -> None:
        self.applied.append(write)
        if isinstance(write, chat.InsertMessage):
            self.chat.apply(write)
        else:
            self._apply(write)

    def _apply(self, write: Any) -> None:
        raise AssertionError(f"unexpected write {write!r}")

    def run(self, outcome: Any) -> Any:
        """Apply an outcome's writes as the actor does; return the outcome."""
        for write in outcome.writes:
            self.apply(write)
        return outcome


class FakePollStore(FakePort):
    def __init__(self) -> None:
        super().__init__()
        self.polls: dict[str, polls.Poll] = {}
        self.votes: dict[tuple[str, str], str] = {}
        self.banned: set[str] = set()

    def open_poll(self) -> polls.Poll | None:
        return next((p for p in self.polls.values() if p.status == "open"), None)

    def poll(self, poll_id: str) -> polls.Poll | None:
        found = self.polls.get(poll_id)
        return None if found is None else replace(found, votes=self.tally(poll_id))

    def tally(self, poll_id: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (pid, _), option in self.votes.items():
            if pid == poll_id:
                counts[option] = counts.get(option, 0) + 1
        return counts

    def has_voted(self, poll_id: str, user_id: str) -> bool:
        return (poll_id, user_id) in self.votes

    def may_take_part(self, user_id: str) -> bool:
        return user_id not in self.banned

    def finish(self, poll_id: str, now_ms: int) -> bool:
        return transition(self.polls, poll_id, ("open",), status="ended", ended_at=now_ms)

    def _apply(self, write: Any) -> None:
        if isinstance(write, polls.InsertPoll):
            self.polls[write.poll.id] = write.poll
        elif isinstance(write, polls.InsertVote):
            self.votes[(write.poll_id, write.user_id)] = write.option_id
        else:
            super()._apply(write)


class FakeGiveawayStore(FakePort):
    def __init__(self) -> None:
        super().__init__()
        self.giveaways: dict[str, giveaways.Giveaway] = {}
        self.entries: dict[str, list[str]] = {}
        self.won: dict[str, list[str]] = {}

    def open_giveaway(self) -> giveaways.Giveaway | None:
        return next((g for g in self.giveaways.values() if g.status == "open"), None)

    def _winner(self, user_id: str) -> giveaways.Winner:
        p = self.people[user_id]
        return giveaways.Winner(p.user_id, p.username, p.display_name)

    def giveaway(self, giveaway_id: str) -> giveaways.Giveaway | None:
        found = self.giveaways.get(giveaway_id)
        if found is None:
            return None
        winners = tuple(self._winner(u) for u in self.won.get(giveaway_id, []))
        return replace(found, entries=len(self.entries.get(giveaway_id, [])), winners=winners)

    def has_entered(self, giveaway_id: str, user_id: str) -> bool:
        return user_id in self.entries.get(giveaway_id, [])

    def eligible(self, giveaway_id: str) -> list[giveaways.Winner]:
        won = set(self.won.get(giveaway_id, []))
        return [self._winner(u) for u in sorted(self.entries.get(giveaway_id, [])) if u not in won]

    def close(self, giveaway_id: str, now_ms: int) -> bool:
        return transition(self.giveaways, giveaway_id, ("open",), status="closed", ended_at=now_ms)

    def _apply(self, write: Any) -> None:
        if isinstance(write, giveaways.InsertGiveaway):
            self.giveaways[write.giveaway.id] = write.giveaway
        elif isinstance(write, giveaways.InsertEntry):
            self.entries.setdefault(write.giveaway_id, []).append(write.user_id)
        elif isinstance(write, giveaways.MarkWinners):
            self.won.setdefault(write.giveaway_id, []).extend(write.user_ids)
        else:
            super()._apply(write)


class FakePredictionStore(FakePort):
    def __init__(self) -> None:
        super().__init__()
        self.predictions: dict[str, predictions.Prediction] = {}
        self.bets: dict[str, dict[str, predictions.Bet]] = {}
        self.balances: dict[str, int] = {}
        self.escrow: dict[str, int] = {}

    def active_prediction(self) -> predictions.Prediction | None:
        return next((p for p in self.predictions.values() if p.status in predictions.ACTIVE), None)

    def prediction(self, prediction_id: str) -> predictions.Prediction | None:
        found = self.predictions.get(prediction_id)
        if found is None:
            return None
        bets = tuple(sorted(self.bets.get(prediction_id, {}).values(), key=lambda b: (b.placed_at, b.user_id)))
        return replace(found, bets=bets)

    def bet(self, prediction_id: str, user_id: str) -> predictions.Bet | None:
        return self.bets.get(prediction_id, {}).get(user_id)

    def points_balance(self, user_id: str) -> int:
        return self.balances.get(user_id, 0)

    def lock(self, prediction_id: str, now_ms: int) -> bool:
        return transition(self.predictions, prediction_id, ("open",), status="locked", locked_at=now_ms)

    def finish(self, prediction_id: str, status: str, winning: str | None, now_ms: int) -> bool:
        allowed = ("open", "locked") if status == "cancelled" else ("locked",)
        changes = {"status": status, "winning_outcome_id": winning, "ended_at": now_ms}
        return transition(self.predictions, prediction_id, allowed, **changes)

    def _apply(self, write: Any) -> None:
        if isinstance(write, predictions.InsertPrediction):
            self.predictions[write.prediction.id] = write.prediction
        elif isinstance(write, predictions.StakeBet):
            user = write.bet.user_id
            assert self.balances.get(user, 0) >= write.added
            self.balances[user] -= write.added
            self.escrow[write.prediction_id] = self.escrow.get(write.prediction_id, 0) + write.added
            self.bets.setdefault(write.prediction_id, {})[user] = write.bet
        elif isinstance(write, predictions.PayOut):
            assert self.escrow[write.prediction_id] >= write.amount
            self.escrow[write.prediction_id] -= write.amount
            self.balances[write.user_id] = self.balances.get(write.user_id, 0) + write.amount
        else:
            super()._apply(write)


class FakeGoalStore(FakePort):
    def __init__(self) -> None:
        super().__init__()
        self.stored: dict[str, goals.Goal] = {}

    def goals(self) -> list[goals.Goal]:
        return list(self.stored.values())

    def roll_over(self, goal_id: str, old_start: int, new_start: int) -> bool:
        goal = self.stored[goal_id]
        if goal.period_start != old_start:
            return False
        self.stored[goal_id] = replace(goal, current=0, period_start=new_start, completed_period=None)
        return True

    def _apply(self, write: Any) -> None:
        assert isinstance(write, goals.SaveGoal)
        self.stored[write.goal.id] = write.goal


class FakeTimerStore(FakePort):
    def __init__(self) -> None:
        super().__init__()
        self.stored: dict[str, timers.Timer] = {}

    def live_timers(self) -> list[timers.Timer]:
        return [t for t in self.stored.values() if t.status != "ended"]

    def timer(self, timer_id: str) -> timers.Timer | None:
        return self.stored.get(timer_id)

    def expire(self, timer_id: str, ends_at: int, now_ms: int) -> bool:
        timer = self.stored[timer_id]
        if timer.status != "running" or timer.ends_at != ends_at:
            return False
        self.stored[timer_id] = replace(timer, status="ended", remaining_ms=0, ends_at=None)
        return True

    def _apply(self, write: Any) -> None:
        assert isinstance(write, timers.SaveTimer)
        self.stored[write.timer.id] = write.timer
