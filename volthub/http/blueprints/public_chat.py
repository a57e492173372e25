"""Public chat (spec §4.2): history, viewers, statistics, policy and slash commands."""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import ConfigDict, Field
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_response

from volthub.http import access
from volthub.http.blueprints.chat import OmitNone, SettingsOut
from volthub.http.errors import not_found
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Model, PersonOut, Query
from volthub.hub.clock import to_ms
from volthub.hub.components import chat as rules
from volthub.persistence import chat as repo
from volthub.persistence import users as users_repo
from volthub.persistence.chat import Member
from volthub.persistence.users import User

blueprint = Blueprint("public_chat", __name__, url_prefix="/api/chat")

STATS_WINDOW_SECONDS = 300
VIEWER_LIST_MAX = 1000

# --- shapes ----------------------------------------------------------------------------------


class ReplyToOut(Model):
    messageId: str
    userId: str
    username: str
    snippet: str


class CardOut(Model):
    type: str
    payload: dict[str, Any]


class ChatMessageOut(OmitNone):
    """A chat.message payload (spec §2.6) with its timestamp; optional members only when set."""

    model_config = ConfigDict(extra="allow")  # payloads written by newer versions pass through

    messageId: str
    channelId: str
    userId: str
    username: str
    displayName: str
    message: str
    badges: list[str]
    isMod: bool
    isVip: bool
    isSubscriber: bool
    timestamp: str
    subscriberMonths: int = Field(None, description="Present when subscribed.")
    color: str = Field(None, description="Accent colour, #rrggbb (not set by this server yet).")
    mentions: list[PersonOut] = Field(None, description="Present only with valid @username mentions.")
    replyTo: ReplyToOut = Field(None)
    effect: str = Field(None)
    effectColor: str = Field(None)
    card: CardOut = Field(None, description="Card messages: {type, payload}.")
    isSystem: bool = Field(None, description="true on system and card messages.")


class HistoryQuery(Query):
    limit: int = Field(100, ge=1, le=100)


class HistoryOut(Model):
    messages: list[ChatMessageOut]


class ViewerOut(Model):
    userId: str
    username: str
    displayName: str
    avatarUrl: str | None
    roles: list[str] = Field(description="broadcaster, moderator, vip, subscriber")


class ViewersOut(Model):
    channelId: str
    channelUsername: str
    viewers: list[ViewerOut] = Field(description="Signed-in viewers, broadcaster and staff first (at most 1000).")
    authenticatedCount: int
    anonymousCount: int
    total: int


class StatsOut(Model):
    channelId: str
    windowSeconds: int
    messages: int = Field(description="Messages sent in the window (card and system messages excluded).")
    messagesPerMinute: float
    chatters: int = Field(description="Distinct senders in the window.")
    viewers: int
    authenticatedViewers: int
    anonymousViewers: int


class LimitsOut(Model):
    messageMaxLength: int
    replySnippetMaxLength: int
    slowModeMaxSeconds: int
    timeoutMaxSeconds: int


class PolicyOut(Model):
    channelId: str
    settings: SettingsOut
    exemptRoles: list[str]
    rules: list[str]
    effects: list[str]
    limits: LimitsOut


class SlashCommandOut(Model):
    name: str
    usage: str
    description: str
    permission: str = Field(description="moderator (broadcaster or moderator) or broadcaster")
    method: str
    path: str
    scope: str
    body: dict[str, Any]


class SlashCommandsOut(Model):
    commands: list[SlashCommandOut]


# --- helpers ---------------------------------------------------------------------------------


async def _channel(value: str, *, by_username: bool = False) -> User:
    """A channel by id; with `by_username` a username (any case) works too."""
    if by_username and "-" not in value:
        user = await runtime().db.read(lambda tx: users_repo.get_by_username_insensitive(tx, value))
    else:
        channel_id = uuid_param(value, "channelId")
        user = await runtime().db.read(lambda tx: users_repo.get_by_id(tx, channel_id))
    if user is None:
        raise not_found("channel", channelId=value)
    return user


async def _presence(channel_id: str) -> tuple[list[str], int]:
    """(signed-in viewer ids, anonymous count) from the presence service, if one runs."""
    presence = runtime().services.get("presence")
    if presence is None:
        return [], 0
    snapshot = presence.snapshot(channel_id)
    if inspect.isawaitable(snapshot):
        snapshot = await snapshot
    user_ids, anonymous = snapshot
    return list(user_ids), int(anonymous)


def _now_ms() -> int:
    return to_ms(runtime().clock.now())


def _rank(member: Member) -> tuple[int, str]:
    """Broadcaster, moderators, VIPs, subscribers, everyone else; then by name."""
    who = member.standing
    flags = (who.is_broadcaster, who.is_moderator, who.is_vip, who.is_subscriber, True)
    return flags.index(True), who.username.lower()


# --- routes ----------------------------------------------------------------------------------


@blueprint.get("/channels/<channel_id>/history")
@access.public
@tag(["Chat"])
@validate_querystring(HistoryQuery)
@validate_response(HistoryOut, 200)
async def history(channel_id: str, query_args: HistoryQuery) -> HistoryOut:
    """Recent messages, oldest first: at most `limit` (1–100, default 100); deleted ones excluded.

    Each is the chat.message payload (spec §2.6) as it was sent, with `timestamp`.
    """
    channel = await _channel(channel_id)
    found = await runtime().db.read(lambda tx: repo.history(tx, channel.id, query_args.limit))
    return HistoryOut(messages=[ChatMessageOut.model_validate(payload) for payload in found])


@blueprint.get("/channels/<channel_id>/viewers")
@access.public
@tag(["Chat"])
@validate_response(ViewersOut, 200)
async def viewers(channel_id: str) -> ViewersOut:
    """Who is watching: signed-in viewers with avatar and roles, plus an anonymous count.

    `channelId` may also be the channel's username (any case).
    """
    channel = await _channel(channel_id, by_username=True)
    user_ids, anonymous = await _presence(channel.id)
    now_ms = _now_ms()
    members = await runtime().db.read(lambda tx: repo.standings(tx, channel.id, user_ids, now_ms))
    ranked = sorted(members.values(), key=_rank)[:VIEWER_LIST_MAX]
    listed = [
        ViewerOut(
            userId=m.standing.user_id,
            username=m.standing.username,
            displayName=m.standing.display_name,
            avatarUrl=m.avatar_url,
            roles=rules.roles(m.standing),
        )
        for m in ranked
    ]
    return ViewersOut(
        channelId=channel.id,
        channelUsername=channel.username,
        viewers=listed,
        authenticatedCount=len(members),
        anonymousCount=anonymous,
        total=len(members) + anonymous,
    )


@blueprint.get("/channels/<channel_id>/stats")
@access.public
@tag(["Chat"])
@validate_response(StatsOut, 200)
async def stats(channel_id: str) -> StatsOut:
    """Live chat statistics over the last 5 minutes: messages per minute, distinct chatters, viewers."""
    channel = await _channel(channel_id)
    since = _now_ms() - STATS_WINDOW_SECONDS * 1000
    messages, chatters = await runtime().db.read(lambda tx: repo.activity(tx, channel.id, since))
    user_ids, anonymous = await _presence(channel.id)
    signed_in = len(set(user_ids))
    return StatsOut(
        channelId=channel.id,
        windowSeconds=STATS_WINDOW_SECONDS,
        messages=messages,
        messagesPerMinute=round(messages / (STATS_WINDOW_SECONDS / 60), 2),
        chatters=chatters,
        viewers=signed_in + anonymous,
        authenticatedViewers=signed_in,
        anonymousViewers=anonymous,
    )


def _rules_text(settings: SettingsOut) -> list[str]:
    lines = [
        f"Messages are 1–{rules.MESSAGE_MAX} characters.",
        "Banned users cannot chat; timed-out users can chat again when the timeout ends.",
    ]
    if settings.slowMode:
        lines.append(f"Slow mode: one message every {settings.slowModeSeconds} seconds per user.")
    if settings.followersOnly:
        lines.append("Followers-only: follow the channel to chat.")
    if settings.subscribersOnly:
        lines.append("Subscribers-only: only subscribers can chat.")
    if settings.emoteOnly:
        lines.append("Emote-only: every word must be an emote code like :name: or an emoji.")
    if any((settings.slowMode, settings.followersOnly, settings.subscribersOnly, settings.emoteOnly)):
        lines.append("The broadcaster and moderators are exempt from chat modes.")
    return lines


@blueprint.get("/channels/<channel_id>/policy")
@access.public
@tag(["Chat"])
@validate_response(PolicyOut, 200)
async def policy(channel_id: str) -> PolicyOut:
    """The channel's chat modes and the rules they imply, as text and as limits."""
    channel = await _channel(channel_id)
    settings, _ = await runtime().db.read(lambda tx: repo.get_settings(tx, channel.id))
    current = SettingsOut.of(settings)
    return PolicyOut(
        channelId=channel.id,
        settings=current,
        exemptRoles=["broadcaster", "moderator"],
        rules=_rules_text(current),
        effects=list(rules.EFFECTS),
        limits=LimitsOut(
            messageMaxLength=rules.MESSAGE_MAX,
            replySnippetMaxLength=rules.SNIPPET_MAX,
            slowModeMaxSeconds=rules.SLOW_MODE_MAX_SECONDS,
            timeoutMaxSeconds=rules.TIMEOUT_MAX_SECONDS,
        ),
    )


_MODERATE = "/api/integrations/oauth/chat/channels/{channelId}/moderate"
_SETTINGS = "/api/integrations/oauth/chat/settings"


def _moderation(name: str, usage: str, description: str, body: dict[str, Any]) -> SlashCommandOut:
    return SlashCommandOut(
        name=name,
        usage=usage,
        description=description,
        permission="moderator",
        method="POST",
        path=_MODERATE,
        scope="chat:moderate",
        body=body,
    )


def _mode(name: str, usage: str, description: str, body: dict[str, Any]) -> SlashCommandOut:
    return SlashCommandOut(
        name=name,
        usage=usage,
        description=description,
        permission="broadcaster",
        method="PATCH",
        path=_SETTINGS,
        scope="stream:write",
        body=body,
    )


SLASH_COMMANDS = [
    _moderation(
        "/timeout",
        "/timeout <username> <seconds> [reason]",
        "Time a user out (1–1209600 s).",
        {"action": "timeout", "username": "<username>", "durationSeconds": "<seconds>", "reason": "[reason]"},
    ),
    _moderation(
        "/ban",
        "/ban <username> [reason]",
        "Ban a user from the chat.",
        {"action": "ban", "username": "<username>", "reason": "[reason]"},
    ),
    _moderation(
        "/unban", "/unban <username>", "Lift a ban or a timeout.", {"action": "unban", "username": "<username>"}
    ),
    _moderation(
        "/delete",
        "/delete <messageId>",
        "Remove a message from the chat and its history.",
        {"action": "delete", "messageId": "<messageId>"},
    ),
    _mode(
        "/slow",
        "/slow [seconds]",
        "Slow mode: one message per user every N seconds (default 30, max 3600).",
        {"slowMode": True, "slowModeSeconds": "[seconds]"},
    ),
    _mode("/slowoff", "/slowoff", "Turn slow mode off.", {"slowMode": False}),
    _mode("/followers", "/followers", "Followers-only chat.", {"followersOnly": True}),
    _mode("/followersoff", "/followersoff", "Turn followers-only off.", {"followersOnly": False}),
    _mode("/subscribers", "/subscribers", "Subscribers-only chat.", {"subscribersOnly": True}),
    _mode("/subscribersoff", "/subscribersoff", "Turn subscribers-only off.", {"subscribersOnly": False}),
    _mode("/emoteonly", "/emoteonly", "Emote-only chat (:name: codes and emoji).", {"emoteOnly": True}),
    _mode("/emoteonlyoff", "/emoteonlyoff", "Turn emote-only off.", {"emoteOnly": False}),
]


@blueprint.get("/slash-commands")
@access.public
@tag(["Chat"])
@validate_response(SlashCommandsOut, 200)
async def slash_commands() -> SlashCommandsOut:
    """The slash commands a chat client can offer, each with the API call it maps to.

    Moderation commands work for the broadcaster and the channel's moderators; chat-mode
    commands change the token owner's own channel, so only the broadcaster can use them.
    """
    return SlashCommandsOut(commands=SLASH_COMMANDS)
