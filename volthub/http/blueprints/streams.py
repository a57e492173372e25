"""Public streams, clips and categories.

Lists use the project's cursor style (`{items, nextCursor}`, `limit` ≤ 100). `live` and
`browse` are newest first; `top` ranks by viewers now connected to the channel's Events API
(the hub's presence, the count `GET /api/chat/channels/:id/viewers` reports), `growing` by
viewers gained per minute live; their cursor is a position in that ranking. `featured`
lists the live ones among `[streams] featured`.

Clips are records of a span of a live or recorded stream: volthub cuts no video.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from quart import Blueprint
from quart_schema import document_response, tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import PERSON_EXAMPLE, Body, ErrorBody, Model, PageQuery, PersonOut, Query, example_of
from volthub.hub.clock import iso8601, to_ms
from volthub.protocol import languages, streamtags
from volthub.services.chat import presence_snapshot
from volthub.services.streams import ClipView, Info, LiveFilter, LiveStream, Streams, Vod

blueprint = Blueprint("stream_browse", __name__, url_prefix="/api/streams")
clips_blueprint = Blueprint("clips", __name__, url_prefix="/api/clips")
categories_blueprint = Blueprint("categories", __name__, url_prefix="/api/categories")


def streams() -> Streams:
    return runtime().services.streams


async def viewer_count(channel_id: str) -> int:
    """Connections to the channel's Events API now (every process): signed-in viewers plus anonymous ones."""
    ids, anonymous = await presence_snapshot(runtime().services.presence, channel_id)
    return len(ids) + anonymous


async def streams_out(items: list[LiveStream]) -> list[StreamOut]:
    return [stream_out(item, await viewer_count(item.channel.id)) for item in items]


# --- shapes ---------------------------------------------------------------------------------


class CategoryOut(Model):
    slug: str
    name: str
    group: str


class StreamOut(Model):
    id: str = Field(description="the stream's id (a new one each time the channel goes live)")
    channelId: str
    username: str
    displayName: str
    avatarUrl: str | None
    title: str
    category: str | None = Field(description="category slug")
    categoryName: str | None
    tags: list[str]
    channelTags: list[str]
    contentWarnings: list[str]
    language: str | None
    startedAt: str
    viewers: int


# What a channel set for its stream (title, category, tags, language): the one sample of it
# in every example that shows it, stream_control's stream info included.
STREAM_SETTINGS_EXAMPLE = {
    "title": "Friday night speedrun",
    "category": "Just Chatting",
    "categoryName": "Just Chatting",
    "tags": ["speedrun"],
    "channelTags": ["english"],
    "contentWarnings": ["mature"],
    "language": "en",
}

_STREAM_EXAMPLE = {
    "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
    "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
    "username": "ada_streams",
    "displayName": "Ada Streams",
    "avatarUrl": "https://volthub.example/avatarUrl",
    **STREAM_SETTINGS_EXAMPLE,
    "startedAt": "2026-03-14T18:30:00Z",
    "viewers": 1,
}


class StreamPage(Model):
    example = {"items": [_STREAM_EXAMPLE], "nextCursor": None}

    items: list[StreamOut]
    nextCursor: str | None


class ChannelStreamOut(Model):
    example = {
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "username": "ada_streams",
        "displayName": "Ada Streams",
        "live": False,
        **STREAM_SETTINGS_EXAMPLE,
        "stream": _STREAM_EXAMPLE,
    }

    channelId: str
    username: str
    displayName: str
    live: bool
    title: str
    category: str | None
    categoryName: str | None
    tags: list[str]
    channelTags: list[str]
    contentWarnings: list[str]
    language: str | None
    stream: StreamOut | None


class VodOut(Model):
    id: str
    streamId: str
    channelId: str
    title: str
    category: str | None
    tags: list[str]
    startedAt: str
    endedAt: str
    durationMs: int
    createdAt: str


class VodPage(Model):
    example = {
        "items": [
            {
                "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
                "streamId": "0b7e2a4c-5d1f-4e8a-9c3b-e01370cd0000",
                "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
                "title": "Friday night speedrun",
                "category": "Just Chatting",
                "tags": ["speedrun"],
                "startedAt": "2026-03-14T18:30:00Z",
                "endedAt": "2026-03-14T18:30:00Z",
                "durationMs": 1773513000000,
                "createdAt": "2026-03-14T18:30:00Z",
            }
        ],
        "nextCursor": None,
    }

    items: list[VodOut]
    nextCursor: str | None


def _category_name(slug: str | None) -> str | None:
    found = streams().categories.get(slug) if slug else None
    return found.name if found else None


def stream_settings_out(holder: Info | LiveStream) -> dict[str, Any]:
    """What a channel set for its stream, as every answer that shows it has it (a live
    stream, a channel's stream, stream_control's stream info)."""
    settings = holder.settings
    return {
        "title": settings.title,
        "category": settings.category,
        "categoryName": _category_name(settings.category),
        "tags": list(settings.tags),
        "channelTags": list(settings.channel_tags),
        "contentWarnings": streamtags.content_warnings(settings.tags, settings.channel_tags),
        "language": settings.language,
    }


def stream_out(live: LiveStream, viewers: int) -> StreamOut:
    channel = live.channel
    return StreamOut(
        id=live.stream.id,
        channelId=channel.id,
        username=channel.username,
        displayName=channel.display_name,
        avatarUrl=channel.avatar_url,
        **stream_settings_out(live),
        startedAt=iso8601(live.stream.started_at),
        viewers=viewers,
    )


def vod_out(vod: Vod) -> VodOut:
    return VodOut.from_record(vod)


async def channel_stream_out(info: Info) -> ChannelStreamOut:
    settings, channel = info.settings, info.channel
    live = LiveStream(info.live, channel, settings) if info.live else None
    return ChannelStreamOut(
        channelId=channel.id,
        username=channel.username,
        displayName=channel.display_name,
        live=live is not None,
        **stream_settings_out(info),
        stream=stream_out(live, await viewer_count(live.channel.id)) if live else None,
    )


# --- live lists -----------------------------------------------------------------------------


class BrowseQuery(PageQuery):
    category: str | None = Field(None, max_length=100, description="category slug or name")
    tags: str | None = Field(None, max_length=500, description="comma-separated; every one must be present")
    language: str | None = Field(None, max_length=35, description="a BCP 47 tag, any case (pt-BR, pt-br)")


@blueprint.get("/live")
@access.public
@tag(["Streams"])
@validate_querystring(PageQuery)
@validate_response(StreamPage)
async def live(query_args: PageQuery) -> StreamPage:
    """Channels live now, most recently started first."""
    page = await streams().live_page(LiveFilter(), query_args.limit, query_args.cursor)
    return StreamPage(items=await streams_out(page.items), nextCursor=page.next_cursor)


def _language_filter(value: str | None) -> str | None:
    """The stored (canonical) form of a registered tag; anything else matches no channel."""
    if not value:
        return None
    try:
        return languages.canonical(value)
    except ValueError:
        return value.lower()


@blueprint.get("/browse")
@access.public
@tag(["Streams"])
@validate_querystring(BrowseQuery)
@validate_response(StreamPage)
async def browse(query_args: BrowseQuery) -> StreamPage:
    """Live channels filtered by category, tags (stream or channel tags, all of them) and
    language (as the channel set it in `stream/info`)."""
    tags = tuple(streamtags.slugify(part) for part in (query_args.tags or "").split(",") if part.strip())
    filters = LiveFilter(
        category=streamtags.slugify(query_args.category) if query_args.category else None,
        tags=tuple(slug for slug in tags if slug),
        language=_language_filter(query_args.language),
    )
    page = await streams().live_page(filters, query_args.limit, query_args.cursor)
    return StreamPage(items=await streams_out(page.items), nextCursor=page.next_cursor)


class StreamList(Model):
    example = {"items": [_STREAM_EXAMPLE]}

    items: list[StreamOut]


@blueprint.get("/featured")
@access.public
@tag(["Streams"])
@validate_response(StreamList)
async def featured() -> StreamList:
    """The live ones among the channels the operator features (`[streams] featured`), in order."""
    found = await streams().featured(runtime().settings.streams.featured)
    return StreamList(items=await streams_out(found))


@blueprint.get("/top")
@access.public
@tag(["Streams"])
@validate_querystring(PageQuery)
@validate_response(StreamPage)
async def top(query_args: PageQuery) -> StreamPage:
    """Live channels by viewers now, most first."""
    ranked, cursor = await streams().ranked(
        lambda item: viewer_count(item.channel.id), query_args.limit, query_args.cursor
    )
    return StreamPage(items=[stream_out(item, int(score)) for item, score in ranked], nextCursor=cursor)


@blueprint.get("/growing")
@access.public
@tag(["Streams"])
@validate_querystring(PageQuery)
@validate_response(StreamPage)
async def growing(query_args: PageQuery) -> StreamPage:
    """Live channels by viewers gained per minute live (viewers now / minutes since start)."""
    now = to_ms(runtime().clock.now())

    async def per_minute(item: LiveStream) -> float:
        minutes = max(1.0, (now - item.stream.started_at) / 60_000)
        return await viewer_count(item.channel.id) / minutes

    ranked, cursor = await streams().ranked(per_minute, query_args.limit, query_args.cursor)
    return StreamPage(items=await streams_out([item for item, _ in ranked]), nextCursor=cursor)


@blueprint.get("/user/<username>")
@access.public
@tag(["Streams"])
@validate_response(ChannelStreamOut)
@document_response(ErrorBody, 404)
async def channel_stream(username: str) -> ChannelStreamOut:
    """A channel's stream info, and its live stream when it is live (username in any case)."""
    return await channel_stream_out(await streams().channel(username))


@blueprint.get("/user/<username>/vods")
@access.public
@tag(["Streams"])
@validate_querystring(PageQuery)
@validate_response(VodPage)
@document_response(ErrorBody, 404)
async def vods(username: str, query_args: PageQuery) -> VodPage:
    """The records the channel's finished streams left, newest first."""
    _, page = await streams().vods(username, query_args.limit, query_args.cursor)
    return VodPage(items=[vod_out(vod) for vod in page.items], nextCursor=page.next_cursor)


# --- clips ----------------------------------------------------------------------------------


class ClipBody(Body):
    example = {
        "title": "Friday night speedrun",
        "durationMs": 120000,
        "startOffsetMs": 604800000,
        "description": "Speedruns and chill every Friday.",
        "highlight": False,
        "vodId": "0b7e2a4c-5d1f-4e8a-9c3b-f74f37d60000",
    }

    title: str = Field(min_length=3, max_length=160)
    durationMs: int = Field(ge=15_000, le=120_000)
    startOffsetMs: int = Field(ge=0, le=7 * 24 * 3600 * 1000, description="milliseconds from the stream start")
    description: str | None = Field(None, max_length=500)
    highlight: bool = False
    vodId: str | None = Field(None, description="clip this recorded stream; default: the live one, else the latest")

    @field_validator("title")
    @classmethod
    def _trimmed(cls, value: str) -> str:
        if len(value.strip()) < 3:
            raise ValueError("title must have 3 to 160 characters (surrounding space not counted)")
        return value.strip()


class ClipOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "username": "ada_streams",
        "streamId": "0b7e2a4c-5d1f-4e8a-9c3b-e01370cd0000",
        "vodId": "0b7e2a4c-5d1f-4e8a-9c3b-f74f37d60000",
        "creator": PERSON_EXAMPLE,
        "title": "Friday night speedrun",
        "description": "Speedruns and chill every Friday.",
        "durationMs": 1773513000000,
        "startOffsetMs": 1773513000000,
        "highlight": False,
        "createdAt": "2026-03-14T18:30:00Z",
        "videoUrl": None,
    }

    id: str
    channelId: str
    username: str
    streamId: str
    vodId: str | None
    creator: PersonOut | None
    title: str
    description: str
    durationMs: int
    startOffsetMs: int
    highlight: bool
    createdAt: str
    videoUrl: None = Field(None, description="always null: clips are records, volthub processes no video")


class ClipPage(Model):
    example = {"items": [example_of(ClipOut)], "nextCursor": None}

    items: list[ClipOut]
    nextCursor: str | None


def clip_out(view: ClipView) -> ClipOut:
    creator = view.creator
    return ClipOut.from_record(
        view.clip,
        username=view.channel.username,
        vodId=view.vod_id,
        creator=PersonOut.from_record(creator, userId=creator.id) if creator else None,
        videoUrl=None,
    )


@blueprint.get("/<username>/clips")
@access.public
@tag(["Clips"])
@validate_querystring(PageQuery)
@validate_response(ClipPage)
@document_response(ErrorBody, 404)
async def list_clips(username: str, query_args: PageQuery) -> ClipPage:
    """The channel's clips, newest first."""
    page = await streams().clips(username, query_args.limit, query_args.cursor)
    return ClipPage(items=[clip_out(view) for view in page.items], nextCursor=page.next_cursor)


@blueprint.post("/<username>/clips")
@access.token("user:write")
@tag(["Clips"])
@validate_request(ClipBody)
@validate_response(ClipOut, 201)
@document_response(ErrorBody, 404)
@document_response(ErrorBody, 409)
async def create_clip(username: str, data: ClipBody) -> tuple[ClipOut, int]:
    """Clip the channel's live stream (or, when it is offline, its latest recorded stream, or
    the one `vodId` names). The span must lie within that stream: 400 `clip_out_of_range`;
    409 `no_stream` when there is nothing to clip. A record only: no video is cut."""
    fields = data.model_dump()
    if fields["vodId"] is not None:
        fields["vodId"] = uuid_param(fields["vodId"], "vodId")
    view = await streams().create_clip(username, access.principal().user_id, fields)
    return clip_out(view), 201


@clips_blueprint.get("/<clip_id>")
@access.public
@tag(["Clips"])
@validate_response(ClipOut)
@document_response(ErrorBody, 404)
async def get_clip(clip_id: str) -> ClipOut:
    """One clip: its stream, its time range and who cut it."""
    return clip_out(await streams().clip(uuid_param(clip_id, "clipId")))


# --- categories -----------------------------------------------------------------------------


class CategoryList(Model):
    example = {"items": [{"slug": "speedrun-club", "name": "Speedrun Club", "group": "chat"}]}

    items: list[CategoryOut]


class CategorySearch(Query):
    q: str = Field(min_length=1, max_length=100)
    limit: int = Field(20, ge=1, le=100)


def categories_out() -> CategoryList:
    return CategoryList(
        items=[CategoryOut(slug=c.slug, name=c.name, group=c.group) for c in streams().categories.all()]
    )


@categories_blueprint.get("")
@access.public
@tag(["Categories"])
@validate_response(CategoryList)
async def categories() -> CategoryList:
    """Every category, by name (built in, plus the operator's `[streams] categories_file`)."""
    return categories_out()


@categories_blueprint.get("/search")
@access.public
@tag(["Categories"])
@validate_querystring(CategorySearch)
@validate_response(CategoryList)
async def search_categories(query_args: CategorySearch) -> CategoryList:
    """Categories whose name or slug starts with q (case-insensitive), then those containing it."""
    found = streams().categories.search(query_args.q, query_args.limit)
    return CategoryList(items=[CategoryOut(slug=c.slug, name=c.name, group=c.group) for c in found])
