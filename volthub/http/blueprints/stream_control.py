"""Stream info, tags, categories and ingest setup of the token owner's channel, under
/api/integrations/oauth/stream.

`PUT info` is checked whole before anything is written: a tag list over its limit (7 stream
tags, 5 channel tags; content warnings never count) or an unknown category is a 400 and
nothing of that request is saved. Omitted fields are left unchanged. The ingest setup lists
the addresses `[ingest]` names (those the media server serves): WHIP first and preferred
when `whip_url` is set, RTMP otherwise; never an srt:// URL.
"""

from __future__ import annotations

from pydantic import Field, field_validator
from quart import Blueprint
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.blueprints.streams import (
    STREAM_SETTINGS_EXAMPLE,
    CategoryList,
    categories_out,
    stream_settings_out,
    streams,
)
from volthub.http.documented import error_responses
from volthub.http.ratelimit import limited
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.protocol import languages, streamtags
from volthub.services.raids import Cooldowns, raid
from volthub.services.streams import Info, Setup

blueprint = Blueprint("stream_control", __name__, url_prefix="/api/integrations/oauth/stream")

# Raw list lengths accepted before slugging and the limit check (repeats and warnings are
# allowed in a list, so it may be longer than the limit; this only bounds the work).
_MAX_RAW_TAGS = 40


class InfoOut(Model):
    example = {**STREAM_SETTINGS_EXAMPLE, "live": False, "streamId": "0b7e2a4c-5d1f-4e8a-9c3b-e01370cd0000"}

    title: str
    category: str | None = Field(description="category slug")
    categoryName: str | None
    tags: list[str] = Field(description="stream tags (slugs); at most 7 not counting content warnings")
    channelTags: list[str] = Field(description="identity tags (slugs); at most 5 not counting content warnings")
    contentWarnings: list[str] = Field(description="the content-warning tags of both lists")
    language: str | None
    live: bool
    streamId: str | None


class InfoBody(Body):
    example = {
        "title": "Friday night speedrun",
        "category": "Just Chatting",
        "tags": ["speedrun"],
        "channelTags": ["english"],
        "language": "en",
    }

    title: str | None = Field(None, max_length=140)
    category: str | None = Field(None, max_length=100, description="slug or name; null clears")
    tags: list[str] | None = Field(None, max_length=_MAX_RAW_TAGS)
    channelTags: list[str] | None = Field(None, max_length=_MAX_RAW_TAGS)
    language: str | None = Field(
        None,
        min_length=2,
        max_length=35,
        description="a BCP 47 tag from the IANA registry (e.g. en, pt-BR), stored canonical and lower-case; null clears",
    )

    @field_validator("tags", "channelTags")
    @classmethod
    def _short(cls, tags: list[str] | None) -> list[str] | None:
        if tags is not None and any(len(text) > 64 for text in tags):
            raise ValueError("each tag has at most 64 characters")
        return tags

    @field_validator("language")
    @classmethod
    def _registered(cls, value: str | None) -> str | None:
        return languages.canonical(value) if value else None


class TagOut(Model):
    slug: str
    name: str
    tier: str = Field(description="session, identity or both")
    contentWarning: bool


class TagLimits(Model):
    tags: int
    channelTags: int
    contentWarningsCount: bool = Field(description="false: content warnings never count toward a limit")


class TagVocabulary(Model):
    example = {
        "tags": [{"slug": "speedrun-club", "name": "Speedrun Club", "tier": "tier1", "contentWarning": False}],
        "limits": {"tags": 1, "channelTags": 1, "contentWarningsCount": False},
        "customTagsAllowed": False,
    }

    tags: list[TagOut]
    limits: TagLimits
    customTagsAllowed: bool


class IngestOut(Model):
    protocol: str
    url: str


class SetupOut(Model):
    example = {
        "streamKey": "live_8Qm2vX7pLk3nR0tYb5",
        "preferredProtocol": "rtmp",
        "ingest": [{"protocol": "rtmp", "url": "https://volthub.example/url"}],
    }

    streamKey: str
    preferredProtocol: str = Field(description="the first of `ingest`: whip when [ingest] whip_url is set, else rtmp")
    ingest: list[IngestOut] = Field(
        description="the addresses [ingest] names, those the media server serves: WHIP first when configured; never srt://"
    )


def info_out(info: Info) -> InfoOut:
    return InfoOut(
        **stream_settings_out(info),
        live=info.live is not None,
        streamId=info.live.id if info.live else None,
    )


def setup_out(setup: Setup) -> SetupOut:
    return SetupOut(
        streamKey=setup.stream_key,
        preferredProtocol=setup.ingest[0][0],
        ingest=[IngestOut(protocol=protocol, url=url) for protocol, url in setup.ingest],
    )


@blueprint.get("/info")
@access.token("stream:read")
@tag(["Streams"])
@validate_response(InfoOut)
async def get_info() -> InfoOut:
    """Title, category, tags, channelTags and contentWarnings (the warnings of both lists)."""
    return info_out(await streams().info(access.principal().user_id))


@blueprint.put("/info")
@access.token("stream:write")
@tag(["Streams"])
@validate_request(InfoBody)
@validate_response(InfoOut)
async def put_info(data: InfoBody) -> InfoOut:
    """Change title, category, tags, channelTags or language; omitted fields stay as they are.

    Tags are stored as slugs (`Speed Run` → `speed-run`). A list over its limit is 400
    `too_many_tags` and nothing of the request is saved. A change emits `stream.update`
    (and `channel.update` to webhooks), also while live."""
    fields = data.model_dump(exclude_unset=True)
    for field in ("title", "tags", "channelTags"):
        if field in fields and fields[field] is None:
            fields.pop(field)  # null is "leave unchanged" for fields that cannot be cleared
    return info_out(await streams().update_info(access.principal().user_id, fields))


@blueprint.get("/categories")
@access.token()
@tag(["Streams"])
@validate_response(CategoryList)
async def categories() -> CategoryList:
    """The categories a stream may be set to (the same list as GET /api/categories)."""
    return categories_out()


@blueprint.get("/tags")
@access.token()
@tag(["Streams"])
@validate_response(TagVocabulary)
async def tag_vocabulary() -> TagVocabulary:
    """The curated tags with their tier and content-warning flag, and the limits. Tags
    outside the vocabulary are allowed too."""
    return TagVocabulary(
        tags=[
            TagOut(slug=t.slug, name=t.name, tier=t.tier, contentWarning=t.content_warning)
            for t in streamtags.VOCABULARY
        ],
        limits=TagLimits(
            tags=streamtags.STREAM_TAG_LIMIT, channelTags=streamtags.CHANNEL_TAG_LIMIT, contentWarningsCount=False
        ),
        customTagsAllowed=True,
    )


@blueprint.get("/setup")
@access.token("stream:key")
@tag(["Streams"])
@validate_response(SetupOut)
async def setup() -> SetupOut:
    """The stream key and ingest URLs: WHIP first (preferred), then RTMP; never SRT."""
    return setup_out(await streams().setup(access.principal().user_id))


@blueprint.post("/key/regenerate")
@access.token("stream:key")
@tag(["Streams"])
@validate_response(SetupOut)
async def regenerate_key() -> SetupOut:
    """A new stream key; the old one is refused from now on. Returns the new setup."""
    return setup_out(await streams().regenerate_key(access.principal().user_id))


class RaidBody(Body):
    example = {"targetUsername": "grace_plays"}

    targetUsername: str = Field(min_length=1, max_length=64, description="the channel to raid")


class RaidOut(Model):
    example = {
        "targetChannelId": "0b7e2a4c-5d1f-4e8a-9c3b-e91f81440000",
        "targetUsername": "grace_plays",
        "viewers": 1,
        "raidedAt": "2026-03-14T18:30:00Z",
    }

    targetChannelId: str
    targetUsername: str
    viewers: int = Field(description="the raider's viewers (signed-in and anonymous) when the raid started")
    raidedAt: str


@blueprint.post("/raid")
@access.token("stream:write")
@limited("interactive")
@tag(["Streams"])
@error_responses(404, 409, 429)
@validate_request(RaidBody)
@validate_response(RaidOut)
async def post_raid(data: RaidBody) -> RaidOut:
    """Raid another channel while live: emits `channel.raid` on the target (`direction:
    incoming`) and on the caller's channel (`outgoing`), with the caller's viewer count, and
    notifies the target's owner (`raid.incoming`). 409 `not_live` when the caller is not
    live, 404 for an unknown target, 400 `invalid_target` for oneself, 403 `raid_refused`
    when the target's chat bans (or times out) the caller. A raider waits `[raids]
    raider_cooldown_seconds` (120) between raids and a channel is raided at most once per
    `target_cooldown_seconds` (30): 429 `raid_cooldown` with `details.cooldown` (raider |
    target), `details.retryAfterSeconds` and `Retry-After`; a refused raid starts no cooldown."""
    rt = runtime()
    cooldowns = Cooldowns(rt.settings.raids.raider_cooldown_seconds, rt.settings.raids.target_cooldown_seconds)
    done = await raid(rt.publisher, rt.services.presence, access.principal().user_id, data.targetUsername, cooldowns)
    return RaidOut(
        targetChannelId=done.target_id,
        targetUsername=done.target_username,
        viewers=done.viewers,
        raidedAt=done.raided_at,
    )
