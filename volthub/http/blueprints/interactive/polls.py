"""Polls over HTTP: the owner's operations (mounted on the OAuth and the dashboard
blueprints) and the by-username routes, where viewers vote.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, field_validator

from volthub.http import access
from volthub.http.blueprints.interactive.common import (
    Door,
    call,
    channel_of,
    channel_read,
    channel_write,
    me,
    owned_channel,
    viewer_action,
)
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.hub.components import polls

# --- shapes ---


class PollOptionOut(Model):
    id: str
    title: str
    votes: int


class PollOut(Model):
    id: str
    title: str
    status: Literal["open", "ended"]
    options: list[PollOptionOut]
    totalVotes: int
    startedAt: str
    endsAt: str
    endedAt: str | None
    durationSeconds: int


class PollEnvelope(Model):
    example = {
        "poll": {
            "id": "6f1c2e7a-3b4d-4f5e-8a9b-0c1d2e3f4a5b",
            "title": "Next game?",
            "status": "open",
            "options": [
                {"id": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d", "title": "Chess", "votes": 3},
                {"id": "2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e", "title": "Go", "votes": 1},
            ],
            "totalVotes": 4,
            "startedAt": "2026-03-14T18:30:00Z",
            "endsAt": "2026-03-14T18:32:00Z",
            "endedAt": None,
            "durationSeconds": 120,
        }
    }

    poll: PollOut | None


class VoteOut(Model):
    example = {
        "success": True,
        "pollId": "6f1c2e7a-3b4d-4f5e-8a9b-0c1d2e3f4a5b",
        "optionId": "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
    }

    success: bool
    pollId: str
    optionId: str


class PollBody(Body):
    example = {"title": "Next game?", "options": ["Chess", "Go"], "durationSeconds": 120}

    title: str = Field(min_length=1, max_length=polls.TITLE_MAX)
    # `choices` is accepted too: the name bots knew from the poll events before they said `options`.
    options: list[str] = Field(
        min_length=polls.OPTIONS_MIN,
        max_length=polls.OPTIONS_MAX,
        validation_alias=AliasChoices("options", "choices"),
        description="The answers; `choices` is accepted as another name for this field.",
    )
    durationSeconds: int = Field(ge=polls.DURATION_MIN, le=polls.DURATION_MAX)

    _title = field_validator("title")(classmethod(lambda cls, v: polls.check_title(v)))
    _options = field_validator("options")(classmethod(lambda cls, v: polls.check_options(v)))


class VoteBody(Body):
    example = {"optionId": "0b7e2a4c-5d1f-4e8a-9c3b-ce78b7cc0000"}

    optionId: str = Field(min_length=1, max_length=64)


def _poll(poll: polls.Poll | None) -> PollEnvelope:
    return PollEnvelope(poll=None if poll is None else PollOut(**poll.as_api()))


# --- the owner's operations ---


def owner_routes(door: Door) -> None:
    """The operations on the caller's own channel, mounted through `door`."""

    @door.read("/polls/active", PollEnvelope)
    async def active_poll() -> PollEnvelope:
        """The open poll of the caller's channel with its votes so far, or `{poll: null}`."""
        return _poll(await runtime().services.interactive.active_poll(me()))

    @door.write("/polls", PollEnvelope, status=201, body=PollBody)
    async def start_poll(data: PollBody) -> tuple[PollEnvelope, int]:
        """Start a poll: `{title (1–100), options: [2–5 distinct strings of 1–50], durationSeconds
        (15–1800)}`. Emits `channel.poll.begin` and posts a `poll-begin` chat card. It ends by itself
        at `endsAt` (one `channel.poll.end`), or earlier through `POST polls/:id/end`. One open poll
        per channel: 409 `already_active`."""
        poll = await call(me(), polls.StartPoll(data.title, tuple(data.options), data.durationSeconds))
        return _poll(poll), 201

    @door.write("/polls/<poll_id>/end", PollEnvelope)
    async def end_poll(poll_id: str) -> PollEnvelope:
        """End the open poll now with its final votes (`channel.poll.end`, `poll-end` card).
        An ended poll: 409 `invalid_state` with `details.status: "ended"`; unknown: 404."""
        return _poll(await call(me(), polls.EndPoll(uuid_param(poll_id, "pollId"))))


# --- by channel username ---


@channel_read("/polls/active", PollEnvelope)
async def stream_active_poll(username: str) -> PollEnvelope:
    """The channel's open poll with its votes so far, or `{poll: null}`."""
    channel_id = await channel_of(username)
    return _poll(await runtime().services.interactive.active_poll(channel_id))


@channel_write("/polls", PollEnvelope, status=201, body=PollBody)
async def stream_start_poll(username: str, data: PollBody) -> tuple[PollEnvelope, int]:
    """Start a poll in your own channel (as `POST /api/integrations/oauth/polls`)."""
    channel_id = await owned_channel(username)
    return _poll(await call(channel_id, polls.StartPoll(data.title, tuple(data.options), data.durationSeconds))), 201


@viewer_action("/polls/<poll_id>/vote", VoteOut, body=VoteBody)
async def vote(username: str, poll_id: str, data: VoteBody) -> VoteOut:
    """Vote `{optionId}` in the channel's open poll, once per user (409 `already_voted`). An
    ended poll: 409 `invalid_state`; an option not of this poll: 400 `invalid_option`; banned
    or timed out: 403 `banned`. Votes emit no event."""
    channel_id = await channel_of(username)
    pid = uuid_param(poll_id, "pollId")
    option = await call(channel_id, polls.Vote(pid, access.principal().user_id, data.optionId))
    return VoteOut(success=True, pollId=pid, optionId=option)


@channel_write("/polls/<poll_id>/end", PollEnvelope)
async def stream_end_poll(username: str, poll_id: str) -> PollEnvelope:
    """End the open poll of your own channel now."""
    channel_id = await owned_channel(username)
    return _poll(await call(channel_id, polls.EndPoll(uuid_param(poll_id, "pollId"))))
