"""Timers and subathons over HTTP: the owner's operations (mounted on the OAuth and the
dashboard blueprints) and the public by-username list for overlays.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator
from quart_schema import tag, validate_response

from volthub.http.blueprints.interactive.common import (
    Door,
    call,
    channel_of,
    channel_read,
    conflicts,
    me,
    now_ms,
    refuses,
    stacked,
)
from volthub.http.params import uuid_param
from volthub.http.ratelimit import limited
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.hub.components import timers

# --- shapes ---


class SubathonOut(Model):
    secondsPerSub: float
    secondsPerGift: float
    secondsPerVolt: float


class TimerOut(Model):
    id: str
    title: str
    status: Literal["running", "paused", "ended"]
    durationSeconds: int
    remainingSeconds: int
    endsAt: str | None
    subathon: SubathonOut | None


_TIMER_EXAMPLE = {
    "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
    "title": "Friday night speedrun",
    "status": "running",
    "durationSeconds": 60,
    "remainingSeconds": 60,
    "endsAt": "2026-03-14T18:30:00Z",
    "subathon": {"secondsPerSub": 1.5, "secondsPerGift": 1.5, "secondsPerVolt": 1.5},
}


class TimerEnvelope(Model):
    example = {"timer": _TIMER_EXAMPLE}

    timer: TimerOut


class TimersOut(Model):
    example = {"timers": [_TIMER_EXAMPLE]}

    timers: list[TimerOut]


class SubathonIn(Body):
    secondsPerSub: float = Field(0, ge=0, le=timers.SUBATHON_RATE_MAX)
    secondsPerGift: float = Field(0, ge=0, le=timers.SUBATHON_RATE_MAX, description="Per gifted subscription.")
    secondsPerVolt: float = Field(0, ge=0, le=timers.SUBATHON_RATE_MAX)


class TimerBody(Body):
    example = {
        "title": "Friday night speedrun",
        "durationSeconds": 60,
        "subathon": {"secondsPerSub": 0, "secondsPerGift": 0, "secondsPerVolt": 0},
    }

    title: str | None = Field(None, min_length=1, max_length=timers.TITLE_MAX)
    durationSeconds: int = Field(ge=timers.DURATION_MIN, le=timers.DURATION_MAX)
    subathon: SubathonIn | None = None

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None) -> str | None:
        return None if value is None else timers.check_title(value)

    def command(self) -> timers.StartTimer:
        subathon = None
        if self.subathon is not None:
            s = self.subathon
            subathon = timers.Subathon(float(s.secondsPerSub), float(s.secondsPerGift), float(s.secondsPerVolt))
        return timers.StartTimer(self.durationSeconds, self.title, subathon)


class AddTimeBody(Body):
    example = {"seconds": 60}

    seconds: int = Field(ge=-timers.ADD_MAX, le=timers.ADD_MAX, description="Non-zero; negative takes time away.")

    _seconds = field_validator("seconds")(classmethod(lambda cls, v: timers.check_added(v)))


def _timer(view: dict[str, Any]) -> TimerEnvelope:
    return TimerEnvelope(timer=TimerOut(**view))


# --- the owner's operations ---


def owner_routes(door: Door) -> None:
    """The operations on the caller's own channel, mounted through `door`."""

    @door.read("/timers", TimersOut)
    async def list_timers() -> TimersOut:
        """The channel's timers, newest first (at most 100), with their remaining time now."""
        rt = runtime()
        found = await rt.services.interactive.timers(me())
        now = now_ms(rt)
        return TimersOut(timers=[TimerOut(**timer.as_api(now)) for timer in found])

    @door.write("/timers", TimerEnvelope, status=201, body=TimerBody, refusals=refuses(409))
    async def start_timer(data: TimerBody) -> tuple[TimerEnvelope, int]:
        """Start a timer (running): `{title? (1–100), durationSeconds (1–604800), subathon?:
        {secondsPerSub, secondsPerGift, secondsPerVolt}}`. States and operations: pause
        running → paused; resume paused → running; end running|paused → ended; add-time
        running|paused; reset restores durationSeconds (running stays running, paused stays
        paused, ended runs again). A running timer reaching zero ends by itself. Each change
        emits one `channel.timer.update`, never per tick. A subathon timer gains its
        configured seconds per subscription, per gifted subscription and per Volt by itself
        (each rate 0–86400), up to 31536000 seconds held, where additions stop.
        At most 20 running or paused timers: 409 `too_many_timers`."""
        return _timer(await call(me(), data.command())), 201

    def timer_operation(operation: str) -> None:
        async def operate(timer_id: str) -> TimerEnvelope:
            return _timer(await call(me(), timers.TimerOperation(uuid_param(timer_id, "timerId"), operation)))

        operate.__name__ = f"{operation}_timer"
        operate.__doc__ = (
            f"`{operation}` the timer (see `POST timers` for the states); "
            "a state that does not allow it: 409 `invalid_state` with `details.status`."
        )
        # As door.write, but the document lists the refusals before the answer here.
        stacked(
            door.blueprint.post(f"/timers/<timer_id>/{operation}"),
            door.write_access,
            limited("interactive"),
            tag([door.label]),
            conflicts,
            validate_response(TimerEnvelope, 200),
        )(operate)

    for name in timers.OPERATIONS:
        timer_operation(name)

    @door.write("/timers/<timer_id>/add-time", TimerEnvelope, body=AddTimeBody)
    async def add_time(timer_id: str, data: AddTimeBody) -> TimerEnvelope:
        """Add `{seconds}` (non-zero, ±604800) to a running or paused timer; taking it to zero or
        below ends it. A timer holds at most 31536000 seconds (365 days): more is 400
        `validation_error` naming `seconds`. Ended: 409 `invalid_state`."""
        return _timer(await call(me(), timers.AddTime(uuid_param(timer_id, "timerId"), data.seconds)))


# --- by channel username ---


@channel_read("/timers", TimersOut)
async def stream_timers(username: str) -> TimersOut:
    """The channel's timers with their remaining time now (for overlays)."""
    rt = runtime()
    channel_id = await channel_of(username)
    found = await rt.services.interactive.timers(channel_id)
    now = now_ms(rt)
    return TimersOut(timers=[TimerOut(**timer.as_api(now)) for timer in found])
