"""Giveaways over HTTP: the owner's operations (mounted on the OAuth and the dashboard
blueprints) and the by-username routes, where viewers join.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, field_validator
from quart import request
from quart_schema import RequestSchemaValidationError

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
from volthub.http.schemas import PERSON_EXAMPLE, Body, Model, PersonOut
from volthub.hub.components import giveaways

# --- shapes ---


class GiveawayOut(Model):
    id: str
    title: str
    status: Literal["open", "closed"]
    subscribersOnly: bool
    entries: int
    winners: list[PersonOut]
    startedAt: str
    endsAt: str | None
    endedAt: str | None


class GiveawayEnvelope(Model):
    example = {
        "giveaway": {
            "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
            "title": "Friday night speedrun",
            "status": "open",
            "subscribersOnly": False,
            "entries": 1,
            "winners": [PERSON_EXAMPLE],
            "startedAt": "2026-03-14T18:30:00Z",
            "endsAt": "2026-03-14T18:30:00Z",
            "endedAt": "2026-03-14T18:30:00Z",
        }
    }

    giveaway: GiveawayOut | None


class JoinOut(Model):
    example = {"success": True, "giveawayId": "0b7e2a4c-5d1f-4e8a-9c3b-a844c9410000"}

    success: bool
    giveawayId: str


class GiveawayBody(Body):
    example = {"title": "Friday night speedrun", "durationSeconds": 60, "subscribersOnly": False}

    title: str = Field(min_length=1, max_length=giveaways.TITLE_MAX)
    durationSeconds: int | None = Field(
        None, ge=giveaways.DURATION_MIN, le=giveaways.DURATION_MAX, description="Closes by itself after this long."
    )
    subscribersOnly: bool = False

    _title = field_validator("title")(classmethod(lambda cls, v: giveaways.check_title(v)))


class DrawBody(Body):
    count: int = Field(1, ge=1, le=giveaways.DRAW_MAX)


def _giveaway(giveaway: giveaways.Giveaway | None) -> GiveawayEnvelope:
    return GiveawayEnvelope(giveaway=None if giveaway is None else GiveawayOut(**giveaway.as_api()))


async def _draw_count() -> int:
    """The draw body is optional (`{count}` defaults to 1)."""
    data = await request.get_json() if await request.get_data() else None  # broken JSON: 400
    try:
        return DrawBody.model_validate(data if data is not None else {}).count
    except ValidationError as exc:
        raise RequestSchemaValidationError(exc) from None


# --- the owner's operations ---


def owner_routes(door: Door) -> None:
    """The operations on the caller's own channel, mounted through `door`."""

    @door.read("/giveaways/active", GiveawayEnvelope)
    async def active_giveaway() -> GiveawayEnvelope:
        """The open giveaway with its entry count, or `{giveaway: null}`."""
        return _giveaway(await runtime().services.interactive.active_giveaway(me()))

    @door.write("/giveaways", GiveawayEnvelope, status=201, body=GiveawayBody)
    async def start_giveaway(data: GiveawayBody) -> tuple[GiveawayEnvelope, int]:
        """Open a giveaway: `{title (1–100), durationSeconds? (10–86400), subscribersOnly?}`.
        States: `open → closed`. With a duration it closes by itself. Emits
        `channel.giveaway.begin` and posts a `giveaway-begin` card. One open giveaway per channel."""
        command = giveaways.StartGiveaway(data.title, data.durationSeconds, data.subscribersOnly)
        return _giveaway(await call(me(), command)), 201

    @door.write("/giveaways/<giveaway_id>/draw", GiveawayEnvelope)
    async def draw_giveaway(giveaway_id: str) -> GiveawayEnvelope:
        """Draw `{count? (1–50, default 1)}` winners uniformly among the entrants who have not
        won (nobody wins twice). On an open giveaway the draw closes it: one
        `channel.giveaway.end` with the winners. On a closed one it draws more winners (a
        re-roll) with a `giveaway-draw` card and no event. Nobody left: 409 `no_eligible_entries`."""
        count = await _draw_count()
        return _giveaway(await call(me(), giveaways.Draw(uuid_param(giveaway_id, "giveawayId"), count)))

    @door.write("/giveaways/<giveaway_id>/end", GiveawayEnvelope)
    async def end_giveaway(giveaway_id: str) -> GiveawayEnvelope:
        """Close an open giveaway without drawing (`channel.giveaway.end` with the winners so far).
        Closed: 409 `invalid_state`."""
        return _giveaway(await call(me(), giveaways.EndGiveaway(uuid_param(giveaway_id, "giveawayId"))))


# --- by channel username ---


@channel_read("/giveaways/active", GiveawayEnvelope)
async def stream_active_giveaway(username: str) -> GiveawayEnvelope:
    """The channel's open giveaway, or `{giveaway: null}`."""
    channel_id = await channel_of(username)
    return _giveaway(await runtime().services.interactive.active_giveaway(channel_id))


@channel_write("/giveaways", GiveawayEnvelope, status=201, body=GiveawayBody)
async def stream_start_giveaway(username: str, data: GiveawayBody) -> tuple[GiveawayEnvelope, int]:
    """Open a giveaway in your own channel (as `POST /api/integrations/oauth/giveaways`)."""
    channel_id = await owned_channel(username)
    command = giveaways.StartGiveaway(data.title, data.durationSeconds, data.subscribersOnly)
    return _giveaway(await call(channel_id, command)), 201


@viewer_action("/giveaways/<giveaway_id>/join", JoinOut)
async def join_giveaway(username: str, giveaway_id: str) -> JoinOut:
    """Enter the channel's open giveaway, once (409 `already_entered`). Subscribers-only
    giveaways take active subscribers only (403 `subscribers_only`); the broadcaster cannot
    enter (403 `cannot_enter_own`); banned or timed out: 403 `banned`; closed: 409
    `invalid_state`. Entries emit no event."""
    channel_id = await channel_of(username)
    gid = uuid_param(giveaway_id, "giveawayId")
    await call(channel_id, giveaways.Enter(gid, access.principal().user_id))
    return JoinOut(success=True, giveawayId=gid)


@channel_write("/giveaways/<giveaway_id>/draw", GiveawayEnvelope)
async def stream_draw_giveaway(username: str, giveaway_id: str) -> GiveawayEnvelope:
    """Draw winners in your own channel's giveaway (as the OAuth `giveaways/:id/draw`)."""
    channel_id = await owned_channel(username)
    count = await _draw_count()
    return _giveaway(await call(channel_id, giveaways.Draw(uuid_param(giveaway_id, "giveawayId"), count)))


@channel_write("/giveaways/<giveaway_id>/end", GiveawayEnvelope)
async def stream_end_giveaway(username: str, giveaway_id: str) -> GiveawayEnvelope:
    """Close your own channel's open giveaway."""
    channel_id = await owned_channel(username)
    return _giveaway(await call(channel_id, giveaways.EndGiveaway(uuid_param(giveaway_id, "giveawayId"))))
