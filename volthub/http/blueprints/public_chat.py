"""Public chat: history, viewers, statistics, policy and slash commands."""

from __future__ import annotations

from functools import partial
from typing import Any

from pydantic import ConfigDict, Field
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_response

from volthub.http import access
from volthub.http.blueprints.chat import OmitNone, SettingsOut, absent
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import PERSON_EXAMPLE, Model, PersonOut, Query
from volthub.hub.components import chat_rules as rules
from volthub.services.chat import VIEWER_LIST_MAX, ChatReads, Member

blueprint = Blueprint("public_chat", __name__, url_prefix="/api/chat")

STATS_WINDOW_SECONDS = 300

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
    """A chat.message payload with its timestamp; optional members only when set."""

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
    subscriberMonths: int = absent(description="Present when subscribed.")
    color: str = absent(description="Accent colour, #rrggbb (not set by this server yet).")
    mentions: list[PersonOut] = absent(description="Present only with valid @username mentions.")
    replyTo: ReplyToOut = absent()
    effect: str = absent()
    effectColor: str = absent()
    card: CardOut = absent(description="Card messages: {type, payload}.")
    isSystem: bool = absent(description="true on system and card messages.")


class HistoryQuery(Query):
    limit: int = Field(100, ge=1, le=100)


class HistoryOut(Model):
    example = {
        "messages": [
            {
                "messageId": "0b7e2a4c-5d1f-4e8a-9c3b-a4c3a0da0000",
                "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
                "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
                "username": "ada_streams",
                "displayName": "Ada Streams",
                "message": "GG everyone!",
                "badges": ["badge"],
                "isMod": False,
                "isVip": False,
                "isSubscriber": False,
                "timestamp": "2026-03-14T18:30:00Z",
                "subscriberMonths": 1,
                "color": "#9146ff",
                "mentions": [PERSON_EXAMPLE],
                "replyTo": {
                    "messageId": "0b7e2a4c-5d1f-4e8a-9c3b-a4c3a0da0000",
                    "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
                    "username": "ada_streams",
                    "snippet": "GG everyone!",
                },
                "effect": "effect",
                "effectColor": "#9146ff",
                "card": {"type": "chat.message", "payload": {}},
                "isSystem": False,
            }
        ]
    }

    messages: list[ChatMessageOut]


class ViewerOut(PersonOut):
    avatarUrl: str | None
    roles: list[str] = Field(description="broadcaster, moderator, vip, subscriber")

    @classmethod
    def of(cls, member: Member) -> ViewerOut:
        who = member.standing
        return cls(
            userId=who.user_id,
            username=who.username,
            displayName=who.display_name,
            avatarUrl=member.avatar_url,
            roles=rules.roles(who),
        )


class ViewersOut(Model):
    example = {
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "channelUsername": "grace_plays",
        "viewers": [
            {
                "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
                "username": "ada_streams",
                "displayName": "Ada Streams",
                "avatarUrl": "https://volthub.example/avatarUrl",
                "roles": ["member"],
            }
        ],
        "authenticatedCount": 3,
        "anonymousCount": 3,
        "total": 3,
    }

    channelId: str
    channelUsername: str
    viewers: list[ViewerOut] = Field(
        description=f"Signed-in viewers, broadcaster and staff first (at most {VIEWER_LIST_MAX})."
    )
    authenticatedCount: int
    anonymousCount: int
    total: int


class StatsOut(Model):
    example = {
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "windowSeconds": 60,
        "messages": 1,
        "messagesPerMinute": 1.5,
        "chatters": 1,
        "viewers": 1,
        "authenticatedViewers": 1,
        "anonymousViewers": 1,
    }

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
    example = {
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "settings": {
            "slowMode": False,
            "slowModeSeconds": 60,
            "followersOnly": False,
            "subscribersOnly": False,
            "emoteOnly": False,
        },
        "exemptRoles": ["moderator"],
        "rules": ["rule"],
        "effects": ["effect"],
        "limits": {
            "messageMaxLength": 1,
            "replySnippetMaxLength": 1,
            "slowModeMaxSeconds": 60,
            "timeoutMaxSeconds": 60,
        },
    }

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
    example = {
        "commands": [
            {
                "name": "Speedrun Club",
                "usage": "/poll <title> | <option> | <option>",
                "description": "Speedruns and chill every Friday.",
                "permission": "moderator",
                "method": "POST",
                "path": "live/ada_streams",
                "scope": "chat:read chat:write",
                "body": {},
            }
        ]
    }

    commands: list[SlashCommandOut]


# --- helpers ---------------------------------------------------------------------------------


def _chat() -> ChatReads:
    return runtime().services.chat_reads


# --- routes ----------------------------------------------------------------------------------


@blueprint.get("/channels/<channel_id>/history")
@access.public
@tag(["Chat"])
@validate_querystring(HistoryQuery)
@validate_response(HistoryOut, 200)
async def history(channel_id: str, query_args: HistoryQuery) -> HistoryOut:
    """Recent messages, oldest first: at most `limit` (1–100, default 100); deleted ones excluded.

    Each is the chat.message payload as it was sent, with `timestamp`.
    """
    found = await _chat().history(uuid_param(channel_id, "channelId"), query_args.limit)
    return HistoryOut(messages=[ChatMessageOut.model_validate(payload) for payload in found])


@blueprint.get("/channels/<channel_id>/viewers")
@access.public
@tag(["Chat"])
@validate_response(ViewersOut, 200)
async def viewers(channel_id: str) -> ViewersOut:
    """Who is watching: signed-in viewers with avatar and roles, plus an anonymous count.

    `channelId` may also be the channel's username (any case).
    """
    by_username = "-" not in channel_id  # a UUID has hyphens, a username never does
    found = await _chat().viewers(
        channel_id if by_username else uuid_param(channel_id, "channelId"), by_username=by_username
    )
    return ViewersOut(
        channelId=found.channel.id,
        channelUsername=found.channel.username,
        viewers=[ViewerOut.of(member) for member in found.listed],
        authenticatedCount=found.authenticated,
        anonymousCount=found.anonymous,
        total=found.authenticated + found.anonymous,
    )


@blueprint.get("/channels/<channel_id>/stats")
@access.public
@tag(["Chat"])
@validate_response(StatsOut, 200)
async def stats(channel_id: str) -> StatsOut:
    """Live chat statistics over the last 5 minutes: messages per minute, distinct chatters, viewers."""
    activity = await _chat().activity(uuid_param(channel_id, "channelId"), STATS_WINDOW_SECONDS)
    return StatsOut(
        channelId=activity.channel_id,
        windowSeconds=activity.window_seconds,
        messages=activity.messages,
        messagesPerMinute=round(activity.messages / (activity.window_seconds / 60), 2),
        chatters=activity.chatters,
        viewers=activity.signed_in + activity.anonymous,
        authenticatedViewers=activity.signed_in,
        anonymousViewers=activity.anonymous,
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
        lines.append(
            "Emote-only: every word must be an emote (:code: of a global or this channel's emote) or an emoji."
        )
    if any((settings.slowMode, settings.followersOnly, settings.subscribersOnly, settings.emoteOnly)):
        lines.append("The broadcaster and moderators are exempt from chat modes.")
    return lines


@blueprint.get("/channels/<channel_id>/policy")
@access.public
@tag(["Chat"])
@validate_response(PolicyOut, 200)
async def policy(channel_id: str) -> PolicyOut:
    """The channel's chat modes and the rules they imply, as text and as limits."""
    channel, settings = await _chat().channel_settings(uuid_param(channel_id, "channelId"))
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


# Who may run each kind of slash command, and the API call it maps to.
_MODERATION_CALL = {"permission": "moderator", "method": "POST", "path": _MODERATE, "scope": "chat:moderate"}
_MODE_CALL = {"permission": "broadcaster", "method": "PATCH", "path": _SETTINGS, "scope": "stream:write"}


def _command(call: dict[str, str], name: str, usage: str, description: str, body: dict[str, Any]) -> SlashCommandOut:
    return SlashCommandOut(name=name, usage=usage, description=description, body=body, **call)


_moderation = partial(_command, _MODERATION_CALL)
_mode = partial(_command, _MODE_CALL)


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
