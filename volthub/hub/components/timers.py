"""Timers and subathons, the channel actor's timer component.

The spec leaves the states open; decided here (and in the OpenAPI document):

    start  → running
    pause:    running → paused              resume: paused → running
    end:      running | paused → ended      add-time: running | paused (not ended)
    reset:    restores durationSeconds; running stays running, paused stays paused,
              ended becomes running again
    zero:     a running timer ends by itself at `endsAt` (the actor's deadline, guarded)

Any other operation is 409 `invalid_state` with the current status. Every change emits one
`channel.timer.update`; counting down emits nothing. A subathon timer also gains time by
itself: `secondsPerSub` per subscription, `secondsPerGift` per gifted subscription,
`secondsPerVolt` per Volt sent (fractions add up in milliseconds), while running or paused.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, replace
from typing import Any, Protocol

from volthub.hub.clock import iso8601
from volthub.hub.components import common
from volthub.hub.components.base import Dispatcher, Emitted, Outcome, Refusal, Refused, Store, handles
from volthub.protocol import catalogue

TITLE_MAX = 100
DURATION_MIN, DURATION_MAX = 1, 604_800
ADD_MAX = 604_800
# The most time a timer may hold: manual add-time past it is refused (400 naming `seconds`),
# subathon additions stop at it.
REMAINING_MAX = 31_536_000
SUBATHON_RATE_MAX = 86_400
LIVE_TIMERS_MAX = 20  # running or paused, per channel
DEFAULT_TITLE = "Timer"


def check_title(value: str) -> str:
    return common.check_text(value, "title", TITLE_MAX)


def check_duration(seconds: int) -> int:
    return common.check_seconds(seconds, "durationSeconds", DURATION_MIN, DURATION_MAX)


def check_added(seconds: int) -> int:
    if seconds == 0 or abs(seconds) > ADD_MAX:
        raise ValueError(f"seconds must be non-zero and between -{ADD_MAX} and {ADD_MAX}")
    return seconds


@dataclass(frozen=True)
class Subathon:
    seconds_per_sub: float = 0.0
    seconds_per_gift: float = 0.0
    seconds_per_volt: float = 0.0

    def as_api(self) -> dict[str, float]:
        return {
            "secondsPerSub": self.seconds_per_sub,
            "secondsPerGift": self.seconds_per_gift,
            "secondsPerVolt": self.seconds_per_volt,
        }

    def added_ms(self, reason: str, amount: int) -> int:
        rate = {"subscription": self.seconds_per_sub, "gift": self.seconds_per_gift, "volts": self.seconds_per_volt}
        return round(min(rate.get(reason, 0.0) * amount, REMAINING_MAX) * 1000)


@dataclass(frozen=True)
class Timer:
    id: str
    title: str
    status: str  # running | paused | ended
    duration_seconds: int
    remaining_ms: int  # authoritative while paused or ended
    ends_at: int | None  # authoritative while running
    subathon: Subathon | None = None

    def remaining_at(self, now_ms: int) -> int:
        if self.status == "running" and self.ends_at is not None:
            return max(0, self.ends_at - now_ms)
        return self.remaining_ms

    def as_api(self, now_ms: int) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "status": self.status,
            "durationSeconds": self.duration_seconds,
            "remainingSeconds": math.ceil(self.remaining_at(now_ms) / 1000),
            "endsAt": iso8601(self.ends_at) if self.status == "running" and self.ends_at is not None else None,
            "subathon": self.subathon.as_api() if self.subathon is not None else None,
        }


# --- commands (each replies the timer's API view) --------------------------------------------


@dataclass(frozen=True)
class StartTimer:
    duration_seconds: int
    title: str | None = None
    subathon: Subathon | None = None


@dataclass(frozen=True)
class TimerOperation:
    """pause | resume | end | reset."""

    timer_id: str
    operation: str


@dataclass(frozen=True)
class AddTime:
    timer_id: str
    seconds: int


@dataclass(frozen=True)
class CountForTimers:
    """A platform event for subathons: reason subscription | gift | volts, and its amount
    (1 per subscription, the gift's quantity, the Volts sent). Counted once per event id."""

    event_id: str
    reason: str
    amount: int


OPERATIONS = ("pause", "resume", "end", "reset")


class TimerStore(Store, Protocol):
    def live_timers(self) -> list[Timer]:
        """The channel's running and paused timers."""

    def timer(self, timer_id: str) -> Timer | None: ...
    def expire(self, timer_id: str, ends_at: int, now_ms: int) -> bool:
        """Guarded: running with this `ends_at` → ended. False when it changed meanwhile."""

    def count_once(self, key: str) -> bool:
        """Record a counted event; False when it was counted before."""


@dataclass(frozen=True)
class SaveTimer:
    timer: Timer
    created: bool = False


class TimersComponent(Dispatcher[TimerStore]):
    UNHANDLED = "timers do not handle"

    def __init__(self, channel_id: str) -> None:
        self.channel_id = channel_id
        self.live: dict[str, Timer] = {}

    def load(self, store: TimerStore) -> None:
        self.live = {timer.id: timer for timer in store.live_timers()}

    def next_deadline(self) -> int | None:
        ends = [t.ends_at for t in self.live.values() if t.status == "running" and t.ends_at is not None]
        return min(ends) if ends else None

    def is_idle(self) -> bool:
        return not any(t.status == "running" for t in self.live.values())

    def on_deadline(self, now_ms: int, store: TimerStore) -> Outcome:
        outcome = Outcome(shared_state_changed=True)
        for timer in sorted(self.live.values(), key=lambda t: (t.ends_at or 0, t.id)):
            if timer.status != "running" or timer.ends_at is None or timer.ends_at > now_ms:
                continue
            del self.live[timer.id]
            if store.expire(timer.id, timer.ends_at, now_ms):  # False: another process did
                ended = replace(timer, status="ended", remaining_ms=0, ends_at=None)
                outcome.events.append(self._event(ended, "ended", now_ms))
        return outcome

    # -- decisions --

    def _find(self, timer_id: str, store: TimerStore) -> Timer:
        return common.found(self.live.get(timer_id) or store.timer(timer_id), "timer", timer_id)

    def _check_room(self) -> None:
        """409 `too_many_timers` when one more live timer would pass the channel's cap."""
        if len(self.live) >= LIVE_TIMERS_MAX:
            raise Refused(
                Refusal(409, "too_many_timers", f"a channel may have {LIVE_TIMERS_MAX} running or paused timers")
            )

    @handles(StartTimer)
    def _start(self, command: StartTimer, now_ms: int, store: TimerStore) -> Outcome:
        self._check_room()
        with common.refusing_invalid():
            duration = check_duration(command.duration_seconds)
            title = check_title(command.title) if command.title is not None else DEFAULT_TITLE
        ms = duration * 1000
        timer = Timer(str(uuid.uuid4()), title, "running", duration, ms, now_ms + ms, command.subathon)
        return self._changed(timer, "started", now_ms, created=True)

    @handles(TimerOperation)
    def _operate(self, command: TimerOperation, now_ms: int, store: TimerStore) -> Outcome:
        timer = self._find(command.timer_id, store)
        operation, status = command.operation, timer.status
        if operation == "pause" and status == "running":
            return self._changed(
                replace(timer, status="paused", remaining_ms=timer.remaining_at(now_ms)), "paused", now_ms
            )
        if operation == "resume" and status == "paused":
            changed = replace(timer, status="running", ends_at=now_ms + timer.remaining_ms)
            return self._changed(changed, "resumed", now_ms)
        if operation == "end" and status in ("running", "paused"):
            return self._changed(replace(timer, status="ended", remaining_ms=0, ends_at=None), "ended", now_ms)
        if operation == "reset":
            full = timer.duration_seconds * 1000
            if status == "paused":
                return self._changed(replace(timer, remaining_ms=full), "reset", now_ms)
            if status == "ended":
                self._check_room()
            return self._changed(
                replace(timer, status="running", remaining_ms=full, ends_at=now_ms + full), "reset", now_ms
            )
        if operation not in OPERATIONS:
            raise Refused(Refusal(400, "validation_error", f"unknown timer operation {operation!r}"))
        raise common.invalid_state("timer", status, operation)

    @handles(AddTime)
    def _add_time(self, command: AddTime, now_ms: int, store: TimerStore) -> Outcome:
        timer = self._find(command.timer_id, store)
        if timer.status == "ended":
            raise common.invalid_state("timer", timer.status, "add time to")
        with common.refusing_invalid({"field": "seconds"}):
            seconds = check_added(command.seconds)
        if timer.remaining_at(now_ms) + seconds * 1000 > REMAINING_MAX * 1000:
            raise Refused(
                Refusal(
                    400,
                    "validation_error",
                    f"a timer holds at most {REMAINING_MAX} seconds",
                    {"field": "seconds", "remainingSeconds": REMAINING_MAX},
                )
            )
        return self._add(timer, seconds * 1000, "manual", now_ms)

    def _add(self, timer: Timer, added_ms: int, reason: str, now_ms: int) -> Outcome:
        """Saturates: the timer never holds more than REMAINING_MAX."""
        before = timer.remaining_at(now_ms)
        remaining = before + added_ms
        if added_ms > 0:
            remaining = max(before, min(remaining, REMAINING_MAX * 1000))
            added_ms = remaining - before
        if remaining <= 0:
            changed = replace(timer, status="ended", remaining_ms=0, ends_at=None)
        elif timer.status == "running":
            changed = replace(timer, remaining_ms=remaining, ends_at=now_ms + remaining)
        else:
            changed = replace(timer, remaining_ms=remaining)
        return self._changed(changed, "time_added", now_ms, added_ms=added_ms, reason=reason)

    @handles(CountForTimers)
    def _count(self, command: CountForTimers, now_ms: int, store: TimerStore) -> Outcome:
        subathons = [t for t in self.live.values() if t.subathon is not None]
        if not subathons or command.amount <= 0 or not store.count_once(f"{command.event_id}:timers"):
            return Outcome()
        outcome = Outcome(shared_state_changed=True)
        for timer in sorted(subathons, key=lambda t: t.id):
            assert timer.subathon is not None
            added = timer.subathon.added_ms(command.reason, command.amount)
            if added > 0 and timer.remaining_at(now_ms) < REMAINING_MAX * 1000:
                common.add_steps(outcome, self._add(timer, added, command.reason, now_ms))
        return outcome

    def _changed(
        self,
        timer: Timer,
        action: str,
        now_ms: int,
        *,
        created: bool = False,
        added_ms: int | None = None,
        reason: str | None = None,
    ) -> Outcome:
        if timer.status == "ended":
            self.live.pop(timer.id, None)
        else:
            self.live[timer.id] = timer
        event = self._event(timer, action, now_ms, added_ms=added_ms, reason=reason)
        return Outcome(timer.as_api(now_ms), [SaveTimer(timer, created)], [event], shared_state_changed=True)

    def _event(
        self, timer: Timer, action: str, now_ms: int, *, added_ms: int | None = None, reason: str | None = None
    ) -> Emitted:
        view = timer.as_api(now_ms)
        data = catalogue.channel_timer_update(
            timer_id=timer.id,
            title=timer.title,
            status=timer.status,
            action=action,
            duration_seconds=timer.duration_seconds,
            remaining_seconds=view["remainingSeconds"],
            ends_at=view["endsAt"],
            added_seconds=None if added_ms is None else round(added_ms / 1000),
            reason=reason,
        )
        return Emitted("channel.timer.update", data)
