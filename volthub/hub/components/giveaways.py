"""Giveaways, the channel actor's giveaway component, sans-IO.

States: (none) → open → closed. Decisions the spec leaves open:
- `end` closes an open giveaway; a giveaway with `durationSeconds` closes by itself at
  `endsAt` (the actor's deadline, a guarded write). Closing emits `channel.giveaway.end`
  with the winners drawn so far.
- `draw` on an open giveaway draws, then closes it: one `channel.giveaway.end` carrying
  the winners. `draw` on a closed giveaway draws more winners (a re-roll when a winner
  does not answer) and posts a chat card; no event, since no state changes.
- A draw picks uniformly at random among the entrants who have not won yet, so nobody
  wins twice; with fewer left than `count` it takes them all; with none left it is 409
  `no_eligible_entries`.
- Entering: once per user (409 `already_entered`), only while open, not the broadcaster,
  not while banned or timed out, and in a subscribers-only giveaway only as an active
  subscriber (403 `subscribers_only`). Entries emit no event.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from volthub.hub.clock import iso8601
from volthub.hub.components import common
from volthub.hub.components.base import Dispatcher, Emitted, Outcome, Refusal, Refused, handles
from volthub.protocol import catalogue

TITLE_MAX = 100
DURATION_MIN, DURATION_MAX = 10, 86_400
DRAW_MAX = 50


def check_title(value: str) -> str:
    return common.check_text(value, "title", TITLE_MAX)


def check_duration(seconds: int | None) -> int | None:
    return None if seconds is None else common.check_seconds(seconds, "durationSeconds", DURATION_MIN, DURATION_MAX)


@dataclass(frozen=True)
class Winner:
    user_id: str
    username: str
    display_name: str

    def as_api(self) -> dict[str, str]:
        return {"userId": self.user_id, "username": self.username, "displayName": self.display_name}


@dataclass(frozen=True)
class Giveaway:
    id: str
    title: str
    status: str  # open | closed
    subscribers_only: bool
    started_at: int
    ends_at: int | None = None
    ended_at: int | None = None
    entries: int = 0
    winners: tuple[Winner, ...] = field(default_factory=tuple)

    def as_api(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "subscribersOnly": self.subscribers_only,
            "entries": self.entries,
            "winners": [winner.as_api() for winner in self.winners],
            "startedAt": iso8601(self.started_at),
            "endsAt": iso8601(self.ends_at) if self.ends_at is not None else None,
            "endedAt": iso8601(self.ended_at) if self.ended_at is not None else None,
        }


@dataclass(frozen=True)
class StartGiveaway:
    title: str
    duration_seconds: int | None = None
    subscribers_only: bool = False


@dataclass(frozen=True)
class Draw:
    giveaway_id: str
    count: int = 1


@dataclass(frozen=True)
class EndGiveaway:
    giveaway_id: str


@dataclass(frozen=True)
class Enter:
    giveaway_id: str
    user_id: str


class GiveawayStore(common.CardStore, common.StandingStore, Protocol):
    def open_giveaway(self) -> Giveaway | None: ...
    def giveaway(self, giveaway_id: str) -> Giveaway | None:
        """With its entry count and winners (in the order drawn)."""

    def has_entered(self, giveaway_id: str, user_id: str) -> bool: ...
    def eligible(self, giveaway_id: str) -> list[Winner]:
        """Entrants who have not won, in a stable order (the draw's population)."""

    def close(self, giveaway_id: str, now_ms: int) -> bool:
        """The guarded transition open → closed."""


@dataclass(frozen=True)
class InsertGiveaway:
    giveaway: Giveaway


@dataclass(frozen=True)
class InsertEntry:
    giveaway_id: str
    user_id: str


@dataclass(frozen=True)
class MarkWinners:
    giveaway_id: str
    user_ids: tuple[str, ...]


class GiveawaysComponent(Dispatcher[GiveawayStore]):
    UNHANDLED = "giveaways do not handle"

    def __init__(self, channel_id: str, rng: random.Random | None = None) -> None:
        self.channel_id = channel_id
        self.open: Giveaway | None = None
        # Draws must be unpredictable in production; tests pass a seeded generator.
        self.rng = rng if rng is not None else random.SystemRandom()

    def load(self, store: GiveawayStore) -> None:
        self.open = store.open_giveaway()

    def next_deadline(self) -> int | None:
        return None if self.open is None else self.open.ends_at

    def is_idle(self) -> bool:
        # An open giveaway without a deadline needs no actor: its state is in the store.
        return self.open is None or self.open.ends_at is None

    def on_deadline(self, now_ms: int, store: GiveawayStore) -> Outcome:
        giveaway, self.open = self.open, None
        if giveaway is None or not store.close(giveaway.id, now_ms):
            return Outcome()
        current = store.giveaway(giveaway.id) or giveaway
        return self._closed(current, now_ms, store)

    @handles(StartGiveaway)
    def _start(self, command: StartGiveaway, now_ms: int, store: GiveawayStore) -> Outcome:
        if self.open is not None:
            raise common.already_active("giveaway", self.open.id)
        with common.refusing_invalid():
            title = check_title(command.title)
            duration = check_duration(command.duration_seconds)
        ends_at = None if duration is None else now_ms + duration * 1000
        giveaway = Giveaway(str(uuid.uuid4()), title, "open", command.subscribers_only, now_ms, ends_at)
        self.open = giveaway
        data = catalogue.channel_giveaway_begin(
            giveaway_id=giveaway.id,
            title=title,
            subscribers_only=giveaway.subscribers_only,
            started_at=iso8601(now_ms),
            ends_at=iso8601(ends_at) if ends_at is not None else None,
        )
        outcome = Outcome(
            giveaway, [InsertGiveaway(giveaway)], [Emitted("channel.giveaway.begin", data)], shared_state_changed=True
        )
        return common.add_card(outcome, store, self.channel_id, now_ms, "giveaway-begin", f"Giveaway: {title}", data)

    def _find(self, giveaway_id: str, store: GiveawayStore) -> Giveaway:
        return common.found(store.giveaway(giveaway_id), "giveaway", giveaway_id)

    @handles(Enter)
    def _enter(self, command: Enter, now_ms: int, store: GiveawayStore) -> Outcome:
        giveaway = common.current(self.open, "giveaway", command.giveaway_id, store.giveaway, "enter")
        if giveaway.ends_at is not None and now_ms >= giveaway.ends_at:
            raise common.invalid_state("giveaway", "closed", "enter")
        own = Refusal(403, "cannot_enter_own", "the broadcaster cannot enter their own giveaway")
        standing = common.participant(store, command.user_id, now_ms, own)
        if giveaway.subscribers_only and not standing.is_subscriber:
            raise Refused(Refusal(403, "subscribers_only", "only the channel's subscribers may enter this giveaway"))
        if store.has_entered(giveaway.id, command.user_id):
            raise Refused(Refusal(409, "already_entered", "you have already entered this giveaway"))
        return Outcome({"giveawayId": giveaway.id, "entered": True}, [InsertEntry(giveaway.id, command.user_id)])

    @handles(Draw)
    def _draw(self, command: Draw, now_ms: int, store: GiveawayStore) -> Outcome:
        if not 1 <= command.count <= DRAW_MAX:
            raise Refused(Refusal(400, "validation_error", f"count must be 1–{DRAW_MAX}", {"field": "count"}))
        giveaway = self._find(command.giveaway_id, store)
        population = store.eligible(giveaway.id)
        if not population:
            raise Refused(Refusal(409, "no_eligible_entries", "nobody is left to draw", {"entries": giveaway.entries}))
        picked = tuple(self.rng.sample(population, min(command.count, len(population))))
        mark = MarkWinners(giveaway.id, tuple(winner.user_id for winner in picked))
        current = replace(giveaway, winners=giveaway.winners + picked)
        if giveaway.status == "open":
            if not store.close(giveaway.id, now_ms):
                raise common.invalid_state("giveaway", "closed", "draw in")
            self.open = None
            outcome = self._closed(current, now_ms, store)
            outcome.writes.insert(0, mark)
            return outcome
        data = {"giveawayId": current.id, "title": current.title, "winners": [w.as_api() for w in picked]}
        names = ", ".join(w.display_name for w in picked)
        return common.add_card(
            Outcome(current, [mark]), store, self.channel_id, now_ms, "giveaway-draw", f"Also drawn: {names}", data
        )

    @handles(EndGiveaway)
    def _end(self, command: EndGiveaway, now_ms: int, store: GiveawayStore) -> Outcome:
        giveaway = common.current(self.open, "giveaway", command.giveaway_id, store.giveaway, "end")
        if not store.close(giveaway.id, now_ms):
            raise common.invalid_state("giveaway", "closed", "end")
        self.open = None
        return self._closed(self._find(giveaway.id, store), now_ms, store)

    def _closed(self, giveaway: Giveaway, now_ms: int, store: GiveawayStore) -> Outcome:
        closed = replace(giveaway, status="closed", ended_at=giveaway.ended_at or now_ms)
        winners = [catalogue.Person(w.user_id, w.username, w.display_name) for w in closed.winners]
        data = catalogue.channel_giveaway_end(
            giveaway_id=closed.id,
            title=closed.title,
            winners=winners,
            entries=closed.entries,
            ended_at=iso8601(now_ms),
        )
        outcome = Outcome(closed, [], [Emitted("channel.giveaway.end", data)], shared_state_changed=True)
        names = ", ".join(w.display_name for w in closed.winners) or "no winner drawn"
        return common.add_card(
            outcome, store, self.channel_id, now_ms, "giveaway-end", f"Giveaway ended: {names}", data
        )
