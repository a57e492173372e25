"""Emotes: global and per-channel collections, and the code resolver.

Images are uploaded by the channel's owner (`PUT /api/emotes/mine/:code`, the raw image as
the body) or by the operator (`volthub emotes add`, global or any channel); both go through
the same checks: PNG, JPEG, GIF or WebP by content, at most `[media] emote_max_bytes`.
Each emote's `url` serves its image with immutable cache headers.
"""

from __future__ import annotations

from pydantic import Field
from quart import Blueprint, Response
from quart_schema import tag, validate_querystring, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError
from volthub.http.runtime import runtime
from volthub.http.schemas import Model, Query, example_of
from volthub.http.uploads import ACCEPTED, read_image
from volthub.services.emotes import CODE, MAX_CODES, Emote, Emotes, emote_url

blueprint = Blueprint("emotes", __name__, url_prefix="/api/emotes")


def emotes() -> Emotes:
    return runtime().services.emotes


class EmoteOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "code": "adaWave",
        "url": "https://volthub.example/url",
        "scope": "chat:read chat:write",
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "channelUsername": "grace_plays",
        "createdAt": "2026-03-14T18:30:00Z",
    }

    id: str
    code: str = Field(description="written in chat as :code:")
    url: str = Field(description="the image on this server; immutable, cache it")
    scope: str = Field(description="global | channel")
    channelId: str | None
    channelUsername: str | None
    createdAt: str


def emote_out(emote: Emote) -> EmoteOut:
    return EmoteOut.from_record(emote, url=emote_url(emote.media_id), scope="channel" if emote.channel_id else "global")


class CollectionOut(Model):
    id: str = Field(description="global, or channel:<username>")
    title: str
    emotes: list[EmoteOut]


class CollectionsOut(Model):
    example = {
        "collections": [
            {
                "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
                "title": "Friday night speedrun",
                "emotes": [example_of(EmoteOut)],
            }
        ]
    }

    collections: list[CollectionOut]


class EmotesOut(Model):
    example = {"emotes": [example_of(EmoteOut)]}

    emotes: list[EmoteOut]


class ChannelQuery(Query):
    channel: str | None = Field(None, min_length=1, max_length=25, description="a channel username (any case)")


class ResolveQuery(Query):
    codes: str = Field(min_length=1, max_length=4000, description="comma-separated codes, with or without colons")
    channel: str | None = Field(None, min_length=1, max_length=25)


class ResolveOut(Model):
    example = {"emotes": {}, "unknown": ["notAnEmote"]}

    emotes: dict[str, EmoteOut] = Field(description="code -> emote, for the codes that resolved")
    unknown: list[str]


@blueprint.get("")
@access.public
@tag(["Emotes"])
@error_responses(404)
@validate_querystring(ChannelQuery)
@validate_response(CollectionsOut)
async def all_collections(query_args: ChannelQuery) -> CollectionsOut:
    """The global collection; with `?channel=<username>` that channel's too (404 if unknown)."""
    collections = [
        CollectionOut(id="global", title="Global", emotes=[emote_out(e) for e in await emotes().global_set()])
    ]
    if query_args.channel:
        channel_id, found = await emotes().of_channel(query_args.channel)
        name = found[0].channel_username if found else query_args.channel
        collections.append(
            CollectionOut(id=f"channel:{name}", title=f"{name}'s emotes", emotes=[emote_out(e) for e in found])
        )
    return CollectionsOut(collections=collections)


@blueprint.get("/global")
@access.public
@tag(["Emotes"])
@validate_response(EmotesOut)
async def global_emotes() -> EmotesOut:
    """The emotes every channel's chat understands, whatever the channel."""
    return EmotesOut(emotes=[emote_out(e) for e in await emotes().global_set()])


@blueprint.get("/channel/<username>")
@access.public
@tag(["Emotes"])
@error_responses(404)
@validate_response(EmotesOut)
async def channel_emotes(username: str) -> EmotesOut:
    """A channel's own emotes (404 for an unknown channel)."""
    _, found = await emotes().of_channel(username)
    return EmotesOut(emotes=[emote_out(e) for e in found])


@blueprint.get("/resolve")
@access.public
@tag(["Emotes"])
@validate_querystring(ResolveQuery)
@validate_response(ResolveOut)
@error_responses(404)
async def resolve(query_args: ResolveQuery) -> ResolveOut:
    """Emote codes -> images: the same resolver chat uses for emote-only mode and for the
    `emotes` of each chat message. With `channel`, that channel's emotes shadow global ones.
    At most 100 codes."""
    codes = list(dict.fromkeys(c.strip().strip(":") for c in query_args.codes.split(",") if c.strip().strip(":")))
    if len(codes) > MAX_CODES:
        raise ApiError(400, "validation_error", f"at most {MAX_CODES} codes", {"field": "codes"})
    found = await emotes().resolve(codes, query_args.channel)
    return ResolveOut(
        emotes={code: emote_out(found[code]) for code in codes if code in found},
        unknown=[code for code in codes if code not in found],
    )


def _code(code: str) -> str:
    if not CODE.fullmatch(code):
        raise ApiError(
            400, "validation_error", "emote codes are 2–32 letters, digits or underscores", {"field": "code"}
        )
    return code


@blueprint.put("/mine/<code>")
@access.first_party
@access.large_body
@access.accepts(*ACCEPTED)
@tag(["Emotes"])
@error_responses(409, 413, 415)
@validate_response(EmoteOut, 201)
async def upload_channel_emote(code: str) -> tuple[EmoteOut, int]:
    """Add an emote to your channel: the body is the image (PNG, JPEG, GIF or WebP, by
    content; at most `[media] emote_max_bytes`). 409 `emote_exists` when the code is used;
    415 `unsupported_image` / `content_type_mismatch`; 413 `file_too_large`. A refused
    upload stores nothing."""
    code = _code(code)
    me = access.principal().user_id
    image = await read_image(emotes().max_bytes, emotes().max_side)
    emote = await emotes().add(me, code, image, me)
    return emote_out(emote), 201


@blueprint.delete("/mine/<code>")
@access.first_party
@tag(["Emotes"])
@error_responses(404)
async def delete_channel_emote(code: str) -> Response:
    """Remove one of your channel's emotes and its image."""
    await emotes().remove(access.principal().user_id, _code(code))
    return Response("", status=204)
