"""Chat for integrations: send, moderate, chat modes.

Every state change goes to the channel's actor (volthub/hub/actor.py), which checks the
rules, stores the change and publishes its events before it answers. Routes reach the
registry as `runtime().services.chat` (`chat_hub()`), e.g.
`await chat_hub().post_card(channel_id, "sticker-send", {...})`.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import Field, field_validator, model_serializer, model_validator
from quart import Blueprint
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.ratelimit import limited
from volthub.http.runtime import Runtime, runtime
from volthub.http.schemas import Body, Model, PersonOut
from volthub.hub.clock import iso8601
from volthub.hub.components import chat_rules as rules
from volthub.hub.components.chat import (
    BotSender,
    ModerationRequest,
    OutgoingMessage,
    ReplyRef,
)
from volthub.hub.components.chat_rules import ChatSettings, Effect, ModerationAction
from volthub.hub.registry import ActorRegistry

blueprint = Blueprint("chat", __name__, url_prefix="/api/integrations/oauth/chat")

# --- the actor registry -----------------------------------------------------------------------


def chat_hub() -> ActorRegistry:
    return runtime().services.chat


def _has_actor(rt: Runtime, channel_id: str) -> bool:
    """A channel with a running actor exists (or its actor answers 404 itself): sends in
    it skip the existence read."""
    return rt.services.chat.actor(channel_id) is not None


# --- shapes ----------------------------------------------------------------------------------


def absent(**field: Any) -> Any:
    """A member that may be left out but is never null: `Field(None)` on a non-nullable type.

    The OpenAPI document drops the null default (schemas._finish_schema), and a null
    sent in a body is refused. Typed `Any` because the field's type is not `None`'s.
    """
    return Field(None, **field)


class OmitNone(Model):
    """Optional members are left out rather than sent as null (a member is present only when it has a value)."""

    # No return annotation on purpose: with one, pydantic documents the annotation instead
    # of the model's fields in the OpenAPI document.
    @model_serializer(mode="wrap")
    def _omit_none(self, handler: Any):  # type: ignore[no-untyped-def]
        return {key: value for key, value in handler(self).items() if value is not None}


class ReplyToIn(Body):
    messageId: str = Field(min_length=1, max_length=64, description="Id of a message in this channel.")
    username: str = Field(
        min_length=1, max_length=50, description="The original author; the stored username is sent on."
    )
    snippet: str | None = Field(None, max_length=rules.SNIPPET_MAX, description="Preview, at most 100 characters.")
    message: str | None = Field(None, max_length=rules.SNIPPET_MAX, description="Accepted as another name of snippet.")

    @field_validator("snippet", "message")
    @classmethod
    def _snippet(cls, value: str | None) -> str | None:
        return None if value is None else rules.check_snippet(value)

    @model_validator(mode="after")
    def _needs_snippet(self) -> ReplyToIn:
        if self.snippet is None and self.message is None:
            raise ValueError("replyTo needs snippet (or its alias message)")
        return self

    def ref(self) -> ReplyRef:
        snippet = self.snippet if self.snippet is not None else self.message
        return ReplyRef(self.messageId, self.username, snippet or "")


class SendBody(Body):
    example = {"message": "GG everyone!", "sendAsBot": False}

    message: str = Field(
        min_length=1, max_length=rules.MESSAGE_MAX, description="1–500 Unicode code points, not blank."
    )
    sendAsBot: bool = Field(
        False,
        description="Post as the channel's bot: the token's own bot when its app is a bot app, else the bot"
        " the channel chose in the bot-select flow. Needs chat:write only.",
    )
    effect: Effect | None = None
    effectColor: str | None = Field(
        None, pattern=r"^#[0-9a-fA-F]{6}$", description="#rrggbb; returned lower-case. Used by glow."
    )
    replyTo: ReplyToIn | None = None

    @field_validator("message")
    @classmethod
    def _message(cls, value: str) -> str:
        return rules.check_message(value)

    @field_validator("effectColor")
    @classmethod
    def _color(cls, value: str | None) -> str | None:
        return None if value is None else rules.normalize_color(value)


class SendOut(Model):
    example = {"success": True, "messageId": "0b7e2a4c-5d1f-4e8a-9c3b-a4c3a0da0000"}

    success: bool
    messageId: str


class SettingsOut(Model):
    example = {
        "slowMode": False,
        "slowModeSeconds": 60,
        "followersOnly": False,
        "subscribersOnly": False,
        "emoteOnly": False,
    }

    slowMode: bool
    slowModeSeconds: int
    followersOnly: bool
    subscribersOnly: bool
    emoteOnly: bool

    @classmethod
    def of(cls, settings: ChatSettings) -> SettingsOut:
        return cls(**settings.as_api())


class SettingsPatch(Body):
    """Partial: omitted fields stay as they are; null is refused."""

    example = SettingsOut.example

    slowMode: bool = absent(description="true alone keeps the stored duration, or 30 s when none.")
    slowModeSeconds: int = absent(
        ge=0, le=rules.SLOW_MODE_MAX_SECONDS, description="0–3600; 0 turns slow mode off, n > 0 on."
    )
    followersOnly: bool = absent()
    subscribersOnly: bool = absent()
    emoteOnly: bool = absent()


class ModerateBody(Body):
    example = {
        "action": "timeout",
        "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
        "username": "ada_streams",
        "durationSeconds": 60,
        "messageId": "0b7e2a4c-5d1f-4e8a-9c3b-a4c3a0da0000",
        "reason": "spam",
        "asBot": False,
    }

    action: ModerationAction
    userId: str | None = Field(None, description="Target user id (timeout, ban, unban); or give username.")
    username: str | None = Field(None, min_length=1, max_length=25, description="Target username, any case.")
    durationSeconds: int | None = Field(None, ge=1, le=rules.TIMEOUT_MAX_SECONDS, description="timeout only.")
    messageId: str | None = Field(None, min_length=1, max_length=64, description="delete only.")
    reason: str | None = Field(None, max_length=rules.REASON_MAX)
    asBot: bool = Field(
        False,
        description="Moderate as the channel's bot; the bot needs the moderator role in the channel.",
    )

    @field_validator("userId")
    @classmethod
    def _uuid(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parsed = uuid.UUID(value)
        except ValueError:
            raise ValueError("userId must be a UUID") from None
        if str(parsed) != value.lower():
            raise ValueError("userId must be a UUID")
        return str(parsed)

    @field_validator("reason")
    @classmethod
    def _reason(cls, value: str | None) -> str | None:
        return None if value is None else rules.check_reason(value)

    @model_validator(mode="after")
    def _complete(self) -> ModerateBody:
        if self.action == "delete":
            if self.messageId is None:
                raise ValueError("delete needs messageId")
        elif self.userId is None and self.username is None:
            raise ValueError(f"{self.action} needs userId or username")
        if self.action == "timeout" and self.durationSeconds is None:
            raise ValueError("timeout needs durationSeconds (1–1209600)")
        return self


class ModerateOut(Model):
    example = {
        "success": True,
        "action": "action",
        "changed": False,
        "user": {
            "userId": "0b7e2a4c-5d1f-4e8a-9c3b-64b64dcc0000",
            "username": "ada_streams",
            "displayName": "Ada Streams",
        },
        "endsAt": "2026-03-14T18:30:00Z",
        "messageId": "0b7e2a4c-5d1f-4e8a-9c3b-a4c3a0da0000",
    }

    success: bool
    action: str
    changed: bool = Field(description="false when there was nothing to undo (not banned, already deleted).")
    user: PersonOut | None
    endsAt: str | None = Field(description="End of a timeout (ISO 8601); null otherwise.")
    messageId: str | None


# --- routes ----------------------------------------------------------------------------------


@blueprint.post("/channels/<channel_id>/messages")
@access.token("chat:write")
@limited("chat_send")
@tag(["Chat"])
@validate_request(SendBody)
@validate_response(SendOut, 200)
@access.own_channel(first_party_anywhere=True, must_exist=True, known_to_exist=_has_actor)
async def send_message(channel_id: str, data: SendBody) -> SendOut:
    """Post a chat message as the token's user.

    An OAuth token posts only in its owner's channel; a first-party token in any channel.
    A channel id that names no channel is 404 `not_found` (before the ownership check).
    Refusals are 403s with their own codes: `banned`, `timed_out` (details.remainingSeconds),
    `slow_mode` (details.waitSeconds), `followers_only`, `subscribers_only`, `emote_only`,
    `channel_not_owned`, `bot_not_connected`. The broadcaster and the channel's moderators
    are exempt from chat modes. In emote-only mode every word must be an emote code
    `:name:` of a global or this channel's emote (the `/api/emotes/resolve` resolver) or an
    emoji. `replyTo.messageId` must be a message of this channel (400 `invalid_reply_to`).
    503 `channel_busy` when the channel's queue is full.

    `sendAsBot: true` posts as the channel's bot (the token's own bot when its app is a bot
    app, else the bot chosen at `/oauth/bot/select`), with the `bot` badge and the bot's
    name in this channel; only the channel's owner may, and without a bot it is 403
    `bot_not_connected`. The message carries `emotes: [{code, url}]` for resolved codes.

    Fast path: the Events API gateway's port (`[events] gateway_port`, 8081 by default)
    serves this same route at the same path, with the same access, rate limits, checks and
    answers, for a fraction of the main port's cost per request: bots that post a lot
    should post there (keep-alive connections).
    """
    return await post_message(runtime(), access.principal(), channel_id, data)


async def post_message(rt: Runtime, caller: access.Principal, channel_id: str, data: SendBody) -> SendOut:
    """The send itself, once the request passed the route's access, rate-limit, body and
    channel checks: every listener that serves the route calls this (the view above, and
    the gateway's fast path, `volthub.http.chat_send`)."""
    outgoing = OutgoingMessage(
        text=data.message,
        effect=data.effect,
        effect_color=data.effectColor,
        reply_to=data.replyTo.ref() if data.replyTo else None,
        as_bot=data.sendAsBot,
    )
    bot = None
    if data.sendAsBot:
        if channel_id != caller.user_id:  # a channel that does not exist is 404 before this 403
            await access.check_channel_exists(channel_id, caller=caller, rt=rt)
        bot = await channel_bot(channel_id, caller, rt)
    message_id = await rt.services.chat.send_message(channel_id, caller.user_id, outgoing, bot)
    return SendOut(success=True, messageId=message_id)


async def channel_bot(channel_id: str, caller: access.Principal, rt: Runtime | None = None) -> BotSender | None:
    """The bot that posts in `channel_id` for this caller (None: none connected). Only the
    channel's owner speaks through its bot, even with a first-party token."""
    if channel_id != caller.user_id:
        raise ApiError(
            403, "channel_not_owned", "only the channel's owner may act as its bot", {"channelId": channel_id}
        )
    identity = await (rt or runtime()).services.bots.current(channel_id, caller.client_id)
    return None if identity is None else BotSender(identity.bot.user_id, identity.name)


@blueprint.post("/channels/<channel_id>/moderate")
@access.token("chat:moderate")
@limited("moderation")
@tag(["Chat"])
@validate_request(ModerateBody)
@validate_response(ModerateOut, 200)
@access.own_channel(first_party_anywhere=True)
async def moderate(channel_id: str, data: ModerateBody) -> ModerateOut:
    """Time out, ban, unban, or delete a message.

    Body: `{action, userId | username, durationSeconds (timeout: 1–1209600), messageId
    (delete), reason?}`. Only the broadcaster and the channel's moderators may moderate
    (403 `not_moderator`); an OAuth token only in its owner's channel. Nobody moderates the
    broadcaster (403 `cannot_moderate_broadcaster`); only the broadcaster moderates a
    moderator (403 `cannot_moderate_moderator`); banning yourself is 400
    `cannot_moderate_self`. A ban or timeout replaces the user's previous one and
    publishes `channel.ban`; lifting one publishes `channel.unban`. A timeout ends by
    itself (no event). A deleted message leaves the history; no event is published.
    Unban of someone not banned, and deleting a deleted message, succeed with
    `changed: false`.
    """
    caller = access.principal()
    moderator_id = caller.user_id
    if data.asBot:
        bot = await channel_bot(channel_id, caller)
        if bot is None:
            raise ApiError(403, "bot_not_connected", "no bot is connected to this channel")
        moderator_id = bot.user_id
    result = await chat_hub().moderate(channel_id, moderator_id, data.to_dataclass(ModerationRequest))
    return ModerateOut(
        success=True,
        action=result.action,
        changed=result.changed,
        user=PersonOut(**result.user) if result.user else None,
        endsAt=iso8601(result.ends_at) if result.ends_at is not None else None,
        messageId=result.message_id,
    )


@blueprint.get("/settings")
@access.token("stream:read")
@tag(["Chat"])
@validate_response(SettingsOut, 200)
async def get_settings() -> SettingsOut:
    """The chat modes of the token owner's channel; fresh: false, 0, false, false, false."""
    settings = await runtime().services.chat_reads.settings(access.principal().user_id)
    return SettingsOut.of(settings)


@blueprint.patch("/settings")
@access.token("stream:write")
@tag(["Chat"])
@validate_request(SettingsPatch)
@validate_response(SettingsOut, 200)
async def patch_settings(data: SettingsPatch) -> SettingsOut:
    """Change chat modes of the token owner's channel; omitted fields stay.

    Slow mode is on exactly when slowModeSeconds > 0: `slowModeSeconds: n` alone sets it
    (0 turns it off), `slowMode: true` alone keeps the stored duration or uses 30 s,
    `slowMode: false` sets the duration to 0; a contradicting pair (true with 0, false
    with n > 0) is 400 `invalid_settings`.
    """
    patch = data.model_dump(exclude_unset=True)
    settings = await chat_hub().update_settings(access.principal().user_id, patch)
    return SettingsOut.of(settings)
