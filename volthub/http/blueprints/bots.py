"""Bots: a bot app's bot, the bot-select flow, custom
names per channel, and the command permission ladder.

Developer side (first-party, the app's owner): `bot/configure`, `bot/instances`,
`bot/check-name`. Channel side (the channel owner's tokens, their own channel only):
`bot/current`, `bot/customize` (bot:write), the bot-select flow `bot/select` (choosing is
first-party only: like consent, a person decides which bot speaks in their channel), and
`bot/commands/check`, the permission ladder for a bot deciding whether someone may run a command.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator
from quart import Blueprint
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.blueprints.accounts import RESERVED as RESERVED_USERNAMES
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model, example_of
from volthub.hub.clock import iso8601
from volthub.protocol import commands
from volthub.services.bots import Bot, BotIdentity, Bots, check_bot_name

blueprint = Blueprint("bots", __name__)

DEVELOPER = "/api/developer/apps/<client_id>/bot"
CHANNEL = "/api/integrations/oauth/bot"


def bots() -> Bots:
    return runtime().services.bots


class BotOut(Model):
    example = {
        "clientId": "0b7e2a4c-5d1f-4e8a-9c3b-ea1ce9be0000",
        "appName": "Ada's Helper",
        "botUserId": "0b7e2a4c-5d1f-4e8a-9c3b-57a812fa0000",
        "name": "Speedrun Club",
        "commandPrefix": "!",
        "defaultPermission": "defaultPermission",
        "logoUrl": "https://volthub.example/logoUrl",
        "reviewed": False,
        "createdAt": "2026-03-14T18:30:00Z",
        "updatedAt": "2026-03-14T18:30:00Z",
    }

    clientId: str
    appName: str
    botUserId: str = Field(description="the bot's own account; messages it posts carry this userId")
    name: str = Field(description="the default bot name, reserved platform-wide")
    commandPrefix: str
    defaultPermission: str = Field(description="a level of the permission ladder")
    logoUrl: str | None
    reviewed: bool
    createdAt: str
    updatedAt: str


def bot_out(bot: Bot) -> BotOut:
    return BotOut.from_record(bot, botUserId=bot.user_id, name=bot.username)


def _bot_name(value: str) -> str:
    """A bot name is a username: the same alphabet and the same reserved words."""
    if value.lower() in RESERVED_USERNAMES:
        raise ValueError("this name is reserved")
    return check_bot_name(value)


class ConfigureBody(Body):
    example = {"name": "Speedrun Club", "commandPrefix": "!", "defaultPermission": "defaultPermission"}

    name: str | None = Field(None, description="the default bot name (3–25 of A–Z, a–z, 0–9, _); required at first")
    commandPrefix: str | None = Field(None, min_length=1, max_length=3)
    defaultPermission: str | None = Field(None, description=f"one of {', '.join(commands.LEVELS)}")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else _bot_name(value)

    @field_validator("commandPrefix")
    @classmethod
    def _prefix(cls, value: str | None) -> str | None:
        if value is not None and (value.strip() != value or any(c.isspace() or c.isalnum() for c in value)):
            raise ValueError("commandPrefix is 1–3 punctuation characters")
        return value

    @field_validator("defaultPermission")
    @classmethod
    def _level(cls, value: str | None) -> str | None:
        if value is not None and not commands.is_level(value):
            raise ValueError(f"defaultPermission must be one of {', '.join(commands.LEVELS)}")
        return value


class CustomNameOut(Model):
    channelId: str
    channelUsername: str
    name: str
    since: str


class ReservedNameOut(Model):
    name: str
    reservedUntil: str


class InstancesOut(Model):
    example = {
        "default": example_of(BotOut),
        "custom": [
            {
                "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
                "channelUsername": "grace_plays",
                "name": "Speedrun Club",
                "since": "2026-03-14T18:30:00Z",
            }
        ],
        "reserved": [{"name": "Speedrun Club", "reservedUntil": "2026-04-14T18:30:00Z"}],
    }

    default: BotOut
    custom: list[CustomNameOut]
    reserved: list[ReservedNameOut] = Field(description="names the bot let go, held for it until reservedUntil")


class NameCheckOut(Model):
    example = {"name": "Speedrun Club", "available": False, "reason": "spam", "reservedUntil": "2026-04-14T18:30:00Z"}

    name: str
    available: bool
    reason: str | None = Field(description="invalid | taken | reserved; null when available")
    reservedUntil: str | None


class CurrentOut(Model):
    example = {
        "connected": False,
        "via": "app",
        "name": "Speedrun Club",
        "customName": False,
        "bot": example_of(BotOut),
    }

    connected: bool
    via: str | None = Field(description="app: the token's app is this bot; selected: chosen in bot-select")
    name: str | None = Field(description="the name the bot uses in this channel")
    customName: bool
    bot: BotOut | None


def current_out(identity: BotIdentity | None) -> CurrentOut:
    if identity is None:
        return CurrentOut(connected=False, via=None, name=None, customName=False, bot=None)
    return CurrentOut(
        connected=True, via=identity.via, name=identity.name, customName=identity.custom, bot=bot_out(identity.bot)
    )


class CustomizeBody(Body):
    example = {"name": "Speedrun Club"}

    name: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _bot_name(value)


class RevertOut(CurrentOut):
    example = {**example_of(CurrentOut), "releasedName": None, "reservedUntil": "2026-04-14T18:30:00Z"}

    releasedName: str | None
    reservedUntil: str | None


class SelectBody(Body):
    example = {"clientId": "0b7e2a4c-5d1f-4e8a-9c3b-ea1ce9be0000"}

    clientId: str = Field(min_length=1, max_length=64)


class DirectoryOut(Model):
    example = {"bots": [example_of(BotOut)], "selected": "selected"}

    bots: list[BotOut]
    selected: str | None = Field(description="clientId of the bot this channel selected")


class CheckBody(Body):
    example = {"level": "followers", "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000", "minFollowSeconds": 0}

    level: str = Field(max_length=64, description=f"one of {', '.join(commands.LEVELS)}; anything else denies")
    userId: str | None = None
    minFollowSeconds: int = Field(0, ge=0, le=10 * 365 * 86400, description="followers level: minimum follow age")

    @model_validator(mode="after")
    def _who(self) -> CheckBody:
        if self.userId is None:
            raise ValueError("userId is required")
        return self


class CheckOut(Model):
    example = {"allowed": False, "level": "followers", "knownLevel": False}

    allowed: bool
    level: str
    knownLevel: bool


class LevelsOut(Model):
    example = {"levels": ["followers"]}

    levels: list[str] = Field(description="lowest first; each level also admits everyone on a higher rung")


# --- developer side ---------------------------------------------------------------------------


@blueprint.post(f"{DEVELOPER}/configure")
@access.first_party
@tag(["Bots"])
@error_responses(404, 409)
@validate_request(ConfigureBody)
@validate_response(BotOut)
async def configure(client_id: str, data: ConfigureBody) -> BotOut:
    """Create or change the bot of a bot app (`botApp: true`, else 400 `not_a_bot_app`).

    The default name is reserved platform-wide in the username namespace: no one may
    register it, in any case (409 `name_taken` when someone holds it). Renaming keeps the
    old name reserved for the app's bot for 45 days."""
    try:
        bot = await bots().configure(
            access.principal().user_id, client_id, data.name, data.commandPrefix, data.defaultPermission
        )
    except ValueError as exc:
        raise ApiError(400, "validation_error", str(exc), {"field": "name"}) from None
    return bot_out(bot)


@blueprint.get(f"{DEVELOPER}/instances")
@access.first_party
@tag(["Bots"])
@error_responses(404)
@validate_response(InstancesOut)
async def instances(client_id: str) -> InstancesOut:
    """The default bot, its custom names per channel, and the names it holds in reserve."""
    bot, custom, held = await bots().instances(access.principal().user_id, client_id)
    return InstancesOut(
        default=bot_out(bot),
        custom=[
            CustomNameOut(
                channelId=c.channel_id, channelUsername=c.channel_username, name=c.name, since=iso8601(c.created_at)
            )
            for c in custom
        ],
        reserved=[ReservedNameOut(name=h.name_lower, reservedUntil=iso8601(h.reserved_until or 0)) for h in held],
    )


@blueprint.get(f"{DEVELOPER}/check-name/<bot_name>")
@access.first_party
@tag(["Bots"])
@error_responses(404)
@validate_response(NameCheckOut)
async def check_name(client_id: str, bot_name: str) -> NameCheckOut:
    """Whether the app's bot could take this name (usernames, other bots' names and names
    in their 45-day reserve are taken; the bot's own reserved names are available)."""
    found = await bots().check_name(access.principal().user_id, client_id, bot_name)
    if found.available and bot_name.lower() in RESERVED_USERNAMES:
        return NameCheckOut(name=bot_name, available=False, reason="invalid", reservedUntil=None)
    until = iso8601(found.reserved_until) if found.reserved_until else None
    return NameCheckOut(name=found.name, available=found.available, reason=found.reason, reservedUntil=until)


# --- channel side -----------------------------------------------------------------------------


@blueprint.get(f"{CHANNEL}/current")
@access.token()
@tag(["Bots"])
@validate_response(CurrentOut)
async def current() -> CurrentOut:
    """The bot of the token owner's channel: the token's own bot when its app is a bot app,
    else the one chosen in bot-select; `connected: false` when none."""
    caller = access.principal()
    return current_out(await bots().current(caller.user_id, caller.client_id))


@blueprint.post(f"{CHANNEL}/customize")
@access.token("bot:write")
@tag(["Bots"])
@error_responses(404, 409)
@validate_request(CustomizeBody)
@validate_response(CurrentOut)
async def customize(data: CustomizeBody) -> CurrentOut:
    """Give the channel's bot a custom name here (409 `name_taken` when a user, a bot or a
    reserve holds it; 404 `bot_not_connected` without a bot). A replaced custom name stays
    reserved for 45 days."""
    caller = access.principal()
    try:
        identity = await bots().customize(caller.user_id, caller.client_id, data.name)
    except ValueError as exc:
        raise ApiError(400, "validation_error", str(exc), {"field": "name"}) from None
    return current_out(identity)


@blueprint.delete(f"{CHANNEL}/customize")
@access.token("bot:write")
@tag(["Bots"])
@error_responses(404)
@validate_response(RevertOut)
async def revert() -> RevertOut:
    """Back to the default name; the custom name stays reserved for 45 days."""
    caller = access.principal()
    identity, released, until = await bots().revert(caller.user_id, caller.client_id)
    return RevertOut(
        **current_out(identity).model_dump(),
        releasedName=released,
        reservedUntil=iso8601(until) if until is not None else None,
    )


@blueprint.get(f"{CHANNEL}/select")
@access.token()
@tag(["Bots"])
@validate_response(DirectoryOut)
async def directory() -> DirectoryOut:
    """The bot-select flow's list: bots a channel may choose, and the one it chose."""
    caller = access.principal()
    found = await bots().directory()
    chosen = await bots().current(caller.user_id, None)
    selected = chosen.bot.client_id if chosen is not None else None
    return DirectoryOut(bots=[bot_out(bot) for bot in found], selected=selected)


@blueprint.post(f"{CHANNEL}/select")
@access.first_party
@tag(["Bots"])
@error_responses(404)
@validate_request(SelectBody)
@validate_response(CurrentOut)
async def select(data: SelectBody) -> CurrentOut:
    """Choose the bot of your channel (a person's decision, like consent: first-party
    tokens only). Then `sendAsBot` from any app you authorised posts as this bot."""
    return current_out(await bots().select(access.principal().user_id, data.clientId))


@blueprint.delete(f"{CHANNEL}/select")
@access.first_party
@tag(["Bots"])
@validate_response(CurrentOut)
async def unselect() -> CurrentOut:
    """Disconnect the selected bot from your channel."""
    await bots().unselect(access.principal().user_id)
    return current_out(None)


@blueprint.get(f"{CHANNEL}/commands/levels")
@access.public
@tag(["Bots"])
@validate_response(LevelsOut)
async def levels() -> LevelsOut:
    """The command permission ladder, lowest first."""
    return LevelsOut(levels=list(commands.LEVELS))


@blueprint.post(f"{CHANNEL}/commands/check")
@access.token("chat:read")
@tag(["Bots"])
@error_responses(404)
@validate_request(CheckBody)
@validate_response(CheckOut)
async def check_command(data: CheckBody) -> CheckOut:
    """May this user run a command of `level` in the token owner's channel? The ladder:
    everyone < followers (optionally `minFollowSeconds` old) < subscribers = tier1 < tier2 <
    tier3 < vips (VIPs and moderators) < moderators < streamer_only; a higher rung passes
    every lower level. An unknown level denies (`knownLevel: false`)."""
    channel_id = access.principal().user_id
    user_id = uuid_param(data.userId or "", "userId")
    viewer = await bots().viewer(channel_id, user_id)
    if viewer is None:
        raise ApiError(404, "not_found", "user not found", {"userId": user_id})
    allowed = commands.allows(data.level, viewer, bots().now_ms(), min_follow_seconds=data.minFollowSeconds)
    return CheckOut(allowed=allowed, level=data.level, knownLevel=commands.is_level(data.level))
