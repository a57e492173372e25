"""Polls, the channel actor's poll component, sans-IO.

States: (none) → open → ended. A poll ends when the owner ends it or by itself at
`endsAt` (the actor's deadline; the end is a guarded write, so with several processes on
one database a poll ends once). One open poll per channel (409 `already_active`); ending
an ended poll is 409 `invalid_state`. One vote per user per poll (409 `already_voted`);
votes emit no event. Begin and end each emit their event once and post a chat card.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from volthub.hub.clock import iso8601
from volthub.hub.components import common
from volthub.hub.components.base import Dispatcher, Emitted, Outcome, Refusal, Refused, handles
from volthub.protocol import catalogue

TITLE_MAX = 100
OPTION_MAX = 50
OPTIONS_MIN, OPTIONS_MAX = 2, 5
DURATION_MIN, DURATION_MAX = 15, 1800


# --- validators (the HTTP models call these too: one validation whichever route) ------------


def check_title(value: str) -> str:
    return common.check_text(value, "title", TITLE_MAX)


def check_options(values: list[str]) -> list[str]:
    return common.check_choices(values, "options", OPTIONS_MIN, OPTIONS_MAX, OPTION_MAX)


def check_duration(seconds: int) -> int:
    return common.check_seconds(seconds, "durationSeconds", DURATION_MIN, DURATION_MAX)


# --- records ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    id: str
    title: str


@dataclass(frozen=True)
class Poll:
    id: str
    title: str
    status: str  # open | ended
    options: tuple[Option, ...]
    started_at: int
    ends_at: int
    ended_at: int | None = None
    votes: Mapping[str, int] = field(default_factory=dict)  # option id -> votes

    @property
    def total_votes(self) -> int:
        return sum(self.votes.values())

    def option_tallies(self) -> list[dict[str, Any]]:
        return [{"id": o.id, "title": o.title, "votes": int(self.votes.get(o.id, 0))} for o in self.options]

    def as_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "options": self.option_tallies(),
            "totalVotes": self.total_votes,
            "startedAt": iso8601(self.started_at),
            "endsAt": iso8601(self.ends_at),
            "endedAt": iso8601(self.ended_at) if self.ended_at is not None else None,
            "durationSeconds": (self.ends_at - self.started_at) // 1000,
        }


# --- commands --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartPoll:
    """Replies the new `Poll`."""

    title: str
    options: tuple[str, ...]
    duration_seconds: int


@dataclass(frozen=True)
class EndPoll:
    """Replies the ended `Poll` with its final votes."""

    poll_id: str


@dataclass(frozen=True)
class Vote:
    """Replies the option id voted for."""

    poll_id: str
    user_id: str
    option_id: str


# --- the store port --------------------------------------------------------------------------


class PollStore(common.CardStore, Protocol):
    def open_poll(self) -> Poll | None:
        """The channel's open poll, without its votes."""

    def poll(self, poll_id: str) -> Poll | None:
        """Any poll of this channel, with its votes."""

    def tally(self, poll_id: str) -> dict[str, int]: ...
    def has_voted(self, poll_id: str, user_id: str) -> bool: ...
    def may_take_part(self, user_id: str) -> bool:
        """An existing user who is not banned or timed out in this channel."""

    def finish(self, poll_id: str, now_ms: int) -> bool:
        """The guarded transition open → ended; False when it was not open (someone won)."""


@dataclass(frozen=True)
class InsertPoll:
    poll: Poll


@dataclass(frozen=True)
class InsertVote:
    poll_id: str
    user_id: str
    option_id: str


# --- the component ---------------------------------------------------------------------------


class PollsComponent(Dispatcher[PollStore]):
    """Keeps the open poll (without votes: they are counted by the store)."""

    UNHANDLED = "polls do not handle"

    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id
        self.open: Poll | None = None

    def load(self, store: PollStore) -> None:
        self.open = store.open_poll()

    def next_deadline(self) -> int | None:
        return None if self.open is None else self.open.ends_at

    def is_idle(self) -> bool:
        return self.open is None

    def on_deadline(self, now_ms: int, store: PollStore) -> Outcome:
        poll, self.open = self.open, None
        if poll is None or not store.finish(poll.id, now_ms):
            return Outcome(shared_state_changed=poll is not None)  # another process ended it
        return self._ended(poll, now_ms, store)

    # -- commands --

    @handles(StartPoll)
    def _start(self, command: StartPoll, now_ms: int, store: PollStore) -> Outcome:
        if self.open is not None:
            raise common.already_active("poll", self.open.id)
        with common.refusing_invalid():
            title = check_title(command.title)
            texts = check_options(list(command.options))
            duration = check_duration(command.duration_seconds)
        options = tuple(Option(str(uuid.uuid4()), text) for text in texts)
        poll = Poll(str(uuid.uuid4()), title, "open", options, now_ms, now_ms + duration * 1000)
        self.open = poll
        data = catalogue.channel_poll_begin(
            poll_id=poll.id,
            title=poll.title,
            options=poll.option_tallies(),
            started_at=iso8601(now_ms),
            ends_at=iso8601(poll.ends_at),
            duration_seconds=duration,
        )
        outcome = Outcome(poll, [InsertPoll(poll)], [Emitted("channel.poll.begin", data)], shared_state_changed=True)
        return common.add_card(outcome, store, self.channel_id, now_ms, "poll-begin", f"Poll: {poll.title}", data)

    @handles(EndPoll)
    def _end_command(self, command: EndPoll, now_ms: int, store: PollStore) -> Outcome:
        poll = common.current(self.open, "poll", command.poll_id, store.poll, "end")
        if not store.finish(poll.id, now_ms):
            raise common.invalid_state("poll", "ended", "end")
        self.open = None
        return self._ended(poll, now_ms, store)

    def _ended(self, poll: Poll, now_ms: int, store: PollStore) -> Outcome:
        final = replace(poll, status="ended", ended_at=now_ms, votes=store.tally(poll.id))
        data = catalogue.channel_poll_end(
            poll_id=final.id,
            title=final.title,
            options=final.option_tallies(),
            total_votes=final.total_votes,
            started_at=iso8601(final.started_at),
            ended_at=iso8601(now_ms),
        )
        outcome = Outcome(final, [], [Emitted("channel.poll.end", data)], shared_state_changed=True)
        return common.add_card(outcome, store, self.channel_id, now_ms, "poll-end", f"Poll ended: {final.title}", data)

    @handles(Vote)
    def _vote(self, command: Vote, now_ms: int, store: PollStore) -> Outcome:
        poll = common.current(self.open, "poll", command.poll_id, store.poll, "vote in")
        if now_ms >= poll.ends_at:  # its end is due and about to be written
            raise common.invalid_state("poll", "ended", "vote in")
        if command.option_id not in {option.id for option in poll.options}:
            raise Refused(
                Refusal(400, "invalid_option", "optionId is not an option of this poll", {"field": "optionId"})
            )
        if not store.may_take_part(command.user_id):
            raise Refused(common.BANNED)
        if store.has_voted(poll.id, command.user_id):
            raise Refused(Refusal(409, "already_voted", "you have already voted in this poll", {"pollId": poll.id}))
        return Outcome(command.option_id, [InsertVote(poll.id, command.user_id, command.option_id)])
