"""Store ports of the interactive components (polls, predictions, giveaways, goals, timers)
over the channel actor's open transaction, and the reads routes make outside the actor.

Each port turns the repository's plain rows (persistence.interactive) into the component's
records, applies the component's writes, and offers the guarded transitions its deadlines
use. Cards go through the channel's chat port, so they are chat history like any card.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import cached_property
from typing import Any

from volthub.hub.chat_store import TxChannelStore, TxChatStore
from volthub.hub.components import giveaways, goals, polls, predictions, timers
from volthub.persistence import Row, Tx, ledger, records
from volthub.persistence import chat as chat_repo
from volthub.persistence import interactive as repo

# --- rows -> records (columns named as the records' fields: persistence.records reads them) --


def poll_of(row: Row, votes: dict[str, int] | None = None) -> polls.Poll:
    options = tuple(polls.Option(o["id"], o["title"]) for o in row["options"])
    return records.read(polls.Poll, row, options=options, votes=votes or {})


def _bet(row: Row) -> predictions.Bet:
    return records.read(predictions.Bet, row)


def prediction_of(row: Row, bet_rows: list[Row] | None = None) -> predictions.Prediction:
    choices = tuple(predictions.Choice(o["id"], o["title"]) for o in row["outcomes"])
    bets = tuple(_bet(b) for b in bet_rows or [])
    return records.read(predictions.Prediction, row, outcomes=choices, bets=bets)


def _winner(row: Row) -> giveaways.Winner:
    return records.read(giveaways.Winner, row)


def giveaway_of(tx: Tx, row: Row) -> giveaways.Giveaway:
    entries = repo.entry_count(tx, row["id"])
    winners = tuple(_winner(w) for w in repo.winners(tx, row["id"]))
    return records.read(giveaways.Giveaway, row, entries=entries, winners=winners)


def goal_of(row: Row) -> goals.Goal:
    return records.read(goals.Goal, row)


def timer_of(row: Row) -> timers.Timer:
    config = row["subathon"]
    subathon = None
    if config is not None:
        subathon = timers.Subathon(
            float(config.get("seconds_per_sub", 0)),
            float(config.get("seconds_per_gift", 0)),
            float(config.get("seconds_per_volt", 0)),
        )
    return records.read(timers.Timer, row, subathon=subathon)


# --- the ports -------------------------------------------------------------------------------


class _Port(TxChannelStore):
    @cached_property
    def chat(self) -> TxChatStore:
        return TxChatStore(self._tx, self._channel_id, self._now_ms)

    def count_once(self, key: str) -> bool:
        return repo.count_once(self._tx, self._channel_id, key, self._now_ms)

    def apply(self, write: Any) -> None:
        if not self._apply(write):
            self.chat.apply(write)  # a card's chat message

    def _apply(self, write: Any) -> bool:
        raise NotImplementedError


class TxPollStore(_Port):
    def open_poll(self) -> polls.Poll | None:
        row = repo.open_poll(self._tx, self._channel_id)
        return None if row is None else poll_of(row)

    def poll(self, poll_id: str) -> polls.Poll | None:
        row = repo.get_poll(self._tx, self._channel_id, poll_id)
        return None if row is None else poll_of(row, repo.poll_tally(self._tx, poll_id))

    def tally(self, poll_id: str) -> dict[str, int]:
        return repo.poll_tally(self._tx, poll_id)

    def has_voted(self, poll_id: str, user_id: str) -> bool:
        return repo.has_voted(self._tx, poll_id, user_id)

    def may_take_part(self, user_id: str) -> bool:
        return chat_repo.active_ban(self._tx, self._channel_id, user_id, self._now_ms) is None

    def finish(self, poll_id: str, now_ms: int) -> bool:
        return repo.end_poll(self._tx, poll_id, now_ms)

    def _apply(self, write: Any) -> bool:
        match write:
            case polls.InsertPoll(poll=poll):
                options = [{"id": o.id, "title": o.title} for o in poll.options]
                repo.insert_poll(
                    self._tx,
                    poll_id=poll.id,
                    channel_id=self._channel_id,
                    title=poll.title,
                    options=options,
                    started_at=poll.started_at,
                    ends_at=poll.ends_at,
                )
            case polls.InsertVote():
                repo.insert_vote(self._tx, write.poll_id, write.user_id, write.option_id, self._now_ms)
            case _:
                return False
        return True


def _escrow(channel_id: str, prediction_id: str) -> str:
    return ledger.system_account("points", f"prediction:{prediction_id}", channel_id)


class TxPredictionStore(_Port):
    def active_prediction(self) -> predictions.Prediction | None:
        row = repo.active_prediction(self._tx, self._channel_id)
        return None if row is None else prediction_of(row)

    def prediction(self, prediction_id: str) -> predictions.Prediction | None:
        row = repo.get_prediction(self._tx, self._channel_id, prediction_id)
        return None if row is None else prediction_of(row, repo.bets(self._tx, prediction_id))

    def bet(self, prediction_id: str, user_id: str) -> predictions.Bet | None:
        row = repo.get_bet(self._tx, prediction_id, user_id)
        return None if row is None else _bet(row)

    def points_balance(self, user_id: str) -> int:
        return ledger.balance(self._tx, self._points(user_id))

    def _points(self, user_id: str) -> str:
        """The user's channel-points account in this channel."""
        return ledger.user_account("points", user_id, self._channel_id)

    def _move_points(self, source: str, destination: str, amount: int, kind: str, prediction_id: str) -> None:
        ledger.transfer(
            self._tx,
            currency="points",
            source=source,
            destination=destination,
            amount=amount,
            kind=kind,
            reference=prediction_id,
            now_ms=self._now_ms,
        )

    def lock(self, prediction_id: str, now_ms: int) -> bool:
        return repo.lock_prediction(self._tx, prediction_id, now_ms)

    def finish(self, prediction_id: str, status: str, winning_outcome_id: str | None, now_ms: int) -> bool:
        return repo.finish_prediction(self._tx, prediction_id, status, winning_outcome_id, now_ms)

    def _apply(self, write: Any) -> bool:
        tx, channel_id = self._tx, self._channel_id
        match write:
            case predictions.InsertPrediction(prediction=p):
                outcomes = [{"id": o.id, "title": o.title} for o in p.outcomes]
                repo.insert_prediction(
                    tx,
                    prediction_id=p.id,
                    channel_id=channel_id,
                    title=p.title,
                    outcomes=outcomes,
                    started_at=p.started_at,
                    locks_at=p.locks_at,
                )
            case predictions.StakeBet(prediction_id=pid, bet=bet, added=added):
                self._move_points(self._points(bet.user_id), _escrow(channel_id, pid), added, "prediction_bet", pid)
                repo.put_bet(tx, pid, bet.user_id, bet.outcome_id, bet.points, bet.placed_at)
            case predictions.PayOut(prediction_id=pid, user_id=user_id, amount=amount, kind=kind):
                self._move_points(_escrow(channel_id, pid), self._points(user_id), amount, kind, pid)
                repo.record_payout(tx, pid, user_id, amount)
            case _:
                return False
        return True


class TxGiveawayStore(_Port):
    def open_giveaway(self) -> giveaways.Giveaway | None:
        row = repo.open_giveaway(self._tx, self._channel_id)
        return None if row is None else giveaway_of(self._tx, row)

    def giveaway(self, giveaway_id: str) -> giveaways.Giveaway | None:
        row = repo.get_giveaway(self._tx, self._channel_id, giveaway_id)
        return None if row is None else giveaway_of(self._tx, row)

    def has_entered(self, giveaway_id: str, user_id: str) -> bool:
        return repo.has_entered(self._tx, giveaway_id, user_id)

    def eligible(self, giveaway_id: str) -> list[giveaways.Winner]:
        return [_winner(row) for row in repo.eligible_entrants(self._tx, giveaway_id)]

    def close(self, giveaway_id: str, now_ms: int) -> bool:
        return repo.close_giveaway(self._tx, giveaway_id, now_ms)

    def _apply(self, write: Any) -> bool:
        match write:
            case giveaways.InsertGiveaway(giveaway=g):
                repo.insert_giveaway(
                    self._tx,
                    giveaway_id=g.id,
                    channel_id=self._channel_id,
                    title=g.title,
                    subscribers_only=g.subscribers_only,
                    started_at=g.started_at,
                    ends_at=g.ends_at,
                )
            case giveaways.InsertEntry():
                repo.insert_entry(self._tx, write.giveaway_id, write.user_id, self._now_ms)
            case giveaways.MarkWinners():
                repo.mark_winners(self._tx, write.giveaway_id, list(write.user_ids), self._now_ms)
            case _:
                return False
        return True


class TxGoalStore(_Port):
    def goals(self) -> list[goals.Goal]:
        return [goal_of(row) for row in repo.goals(self._tx, self._channel_id)]

    def roll_over(self, goal_id: str, old_start: int, new_start: int) -> bool:
        return repo.roll_over_goal(self._tx, goal_id, old_start, new_start)

    def _apply(self, write: Any) -> bool:
        if not isinstance(write, goals.SaveGoal):
            return False
        repo.save_goal(self._tx, self._channel_id, asdict(write.goal), self._now_ms, created=write.created)
        return True


class TxTimerStore(_Port):
    def live_timers(self) -> list[timers.Timer]:
        return [timer_of(row) for row in repo.live_timers(self._tx, self._channel_id)]

    def timer(self, timer_id: str) -> timers.Timer | None:
        row = repo.get_timer(self._tx, self._channel_id, timer_id)
        return None if row is None else timer_of(row)

    def expire(self, timer_id: str, ends_at: int, now_ms: int) -> bool:
        return repo.expire_timer(self._tx, timer_id, ends_at, now_ms)

    def _apply(self, write: Any) -> bool:
        if not isinstance(write, timers.SaveTimer):
            return False
        row = asdict(write.timer)  # the subathon becomes a plain dict too
        repo.save_timer(self._tx, self._channel_id, row, self._now_ms, created=write.created)
        return True


# --- reads for routes (outside the actor; a read transaction) --------------------------------


def read_active_poll(tx: Tx, channel_id: str) -> polls.Poll | None:
    row = repo.open_poll(tx, channel_id)
    return None if row is None else poll_of(row, repo.poll_tally(tx, row["id"]))


def read_active_prediction(tx: Tx, channel_id: str) -> predictions.Prediction | None:
    row = repo.active_prediction(tx, channel_id)
    return None if row is None else prediction_of(row, repo.bets(tx, row["id"]))


def read_active_giveaway(tx: Tx, channel_id: str) -> giveaways.Giveaway | None:
    row = repo.open_giveaway(tx, channel_id)
    return None if row is None else giveaway_of(tx, row)


def read_goals(tx: Tx, channel_id: str) -> list[goals.Goal]:
    return [goal_of(row) for row in repo.goals(tx, channel_id)]


def read_timers(tx: Tx, channel_id: str) -> list[timers.Timer]:
    return [timer_of(row) for row in repo.all_timers(tx, channel_id)]
