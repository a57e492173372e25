"""The chat component: the channel actor's chat part, sans-IO.

`ChatComponent` decides each chat command (send, system post, settings, moderation)
through a `ChatStore` port (reads the actor implements over its transaction, faked in unit
tests) and returns the writes and events of the decision. The rules it applies and the
records it reads are in :mod:`volthub.hub.components.chat_rules`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, Protocol

from volthub.hub.clock import iso8601
from volthub.hub.components.base import Dispatcher, Emitted, Outcome, Refusal, Refused, Store, handles, refuse
from volthub.hub.components.chat_rules import (
    BOT_BADGE,
    SLOW_MODE_MAX_SECONDS,
    ChatSettings,
    SettingsError,
    Standing,
    apply_settings_patch,
    as_person,
    badges,
    check_moderation_target,
    check_moderator,
    check_modes,
    check_standing,
    emote_codes,
    extract_mentions,
    needs_last_message,
    timeout_ends_at,
    who,
)
from volthub.protocol import catalogue

# --- requests and commands -------------------------------------------------------------------


@dataclass(frozen=True)
class ReplyRef:
    message_id: str
    username: str
    snippet: str


@dataclass(frozen=True)
class OutgoingMessage:
    text: str
    effect: str | None = None
    effect_color: str | None = None
    reply_to: ReplyRef | None = None
    as_bot: bool = False


@dataclass(frozen=True)
class ModerationRequest:
    action: str  # timeout | ban | unban | delete
    user_id: str | None = None
    username: str | None = None
    duration_seconds: int | None = None
    message_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ModerationResult:
    action: str
    changed: bool  # false: nothing to undo (unban of someone not banned, message already gone)
    user: dict[str, str] | None = None
    ends_at: int | None = None
    message_id: str | None = None


@dataclass(frozen=True)
class BotSender:
    """The channel's bot, resolved by the caller: its account and the name it uses here."""

    user_id: str
    name: str


@dataclass(frozen=True)
class SendMessage:
    """A viewer's chat message; checked against bans and chat modes. Replies its id.

    With `message.as_bot` the channel's bot (`bot`) posts instead, under its name here and
    with the `bot` badge; the same bans and modes apply to the bot's account."""

    sender_id: str
    message: OutgoingMessage
    bot: BotSender | None = None


@dataclass(frozen=True)
class PostSystem:
    """A card or system line: no chat-mode or ban checks. The sender defaults to the
    broadcaster. Replies the message id."""

    text: str
    card: dict[str, Any] | None = None
    sender_id: str | None = None


@dataclass(frozen=True)
class UpdateSettings:
    """A partial PATCH body in API names. Replies the resulting `ChatSettings`."""

    patch: dict[str, Any]


@dataclass(frozen=True)
class Moderate:
    """Timeout, ban, unban or delete. Replies a `ModerationResult`."""

    moderator_id: str
    request: ModerationRequest


# --- the store port: what chat reads and writes inside the actor's transaction ----------------


@dataclass(frozen=True)
class MessageRef:
    id: str
    user_id: str
    username: str | None  # as stored in the message
    deleted: bool


class ChatStore(Store, Protocol):
    """Reads for chat decisions, and `apply` for the writes below (hub/chat_store.py)."""

    def settings(self) -> ChatSettings: ...
    def standing(self, user_id: str) -> Standing | None: ...
    def user_id_of(self, username: str) -> str | None:
        """Any case."""

    def standing_and_people_named(
        self, user_id: str, usernames: list[str]
    ) -> tuple[Standing | None, dict[str, dict[str, str]]]:
        """`standing(user_id)`, and lower-cased username -> person for the names that are
        users (any case): one read for a message's sender and the people it mentions."""

    def message(self, message_id: str) -> MessageRef | None: ...
    def emotes(self, codes: list[str]) -> dict[str, str]:
        """Code -> image URL for the codes that are emotes here (global or the channel's)."""

    def last_message_at(self, user_id: str) -> int | None:
        """When the user last chatted here (system/card messages do not count)."""

    def ban_is_permanent(self, user_id: str) -> bool | None:
        """The active ban's kind (True: ban, False: timeout); None when none is in force."""


@dataclass(frozen=True)
class PruneHistory:
    """Drop messages numbered `up_to_seq` or lower that are older than `before_ms`."""

    up_to_seq: int
    before_ms: int


@dataclass(frozen=True)
class HistoryBound:
    """How much history a channel keeps: once the sequence passes `limit`, every
    `every`-th message drops the older ones, except those younger than the longest slow
    mode (the slow-mode clock reads the sender's last message, so that one must stay)."""

    limit: int
    every: int

    def prune_after(self, seq: int, now_ms: int) -> PruneHistory | None:
        """The prune due once the message numbered `seq` is stored (None: none due)."""
        if seq > self.limit and seq % self.every == 0:
            return PruneHistory(seq - self.limit, now_ms - SLOW_MODE_MAX_SECONDS * 1000)
        return None


@dataclass(frozen=True)
class InsertMessage:
    """Store a message under the channel's next number (the store numbers it as it
    stores it: one write, not a read of the number and then the row), then apply the
    prune `history` makes due at that number (None: the message never prunes)."""

    message_id: str
    user_id: str
    is_system: bool
    payload: dict[str, Any]
    history: HistoryBound | None = None


@dataclass(frozen=True)
class SaveSettings:
    settings: ChatSettings


@dataclass(frozen=True)
class SetBan:
    user_id: str
    moderator_id: str
    reason: str | None
    expires_at: int | None  # None: permanent


@dataclass(frozen=True)
class RemoveBan:
    user_id: str


@dataclass(frozen=True)
class DeleteMessage:
    message_id: str
    moderator_id: str


# --- the component ---------------------------------------------------------------------------

HISTORY_LIMIT_DEFAULT = 1000


class ChatComponent(Dispatcher[ChatStore]):
    """A channel's chat: keeps the settings; every other fact is read through the store.

    History is bounded (`HistoryBound`): past `history_limit` messages, every
    `prune_every`-th one drops the older ones.
    """

    UNHANDLED = "chat does not handle"

    def __init__(self, channel_id: str, *, history_limit: int = HISTORY_LIMIT_DEFAULT) -> None:
        if history_limit < 1:
            raise ValueError("history_limit must be at least 1")
        self.channel_id = channel_id
        self.history_limit = history_limit
        # Pruning every message would cost a DELETE each time; every tenth of the limit
        # keeps the table within 10% of it.
        self.prune_every = max(1, min(100, history_limit // 10))
        self.history = HistoryBound(history_limit, self.prune_every)
        self.settings = ChatSettings()

    # -- the component protocol --

    def load(self, store: ChatStore) -> None:
        self.settings = store.settings()

    def next_deadline(self) -> int | None:
        return None  # chat has no timed step: an expired timeout is ignored where read

    def on_deadline(self, now_ms: int, store: ChatStore) -> Outcome:
        return Outcome()

    def is_idle(self) -> bool:
        return True  # everything chat keeps is a cache of the store

    # -- messages --

    @handles(SendMessage)
    def _send(self, command: SendMessage, now_ms: int, store: ChatStore) -> Outcome:
        message = command.message
        extra_badges: tuple[str, ...] = ()
        if message.as_bot:
            if command.bot is None:
                raise Refused(
                    Refusal(
                        403, "bot_not_connected", "no bot is connected to this channel, so sendAsBot is not available"
                    )
                )
            member, mentions = _member_and_mentions(store, command.bot.user_id, message.text)
            sender = replace(member, username=command.bot.name, display_name=command.bot.name)
            extra_badges = (BOT_BADGE,)
        else:
            sender, mentions = _member_and_mentions(store, command.sender_id, message.text)
        refuse(check_standing(sender, now_ms))
        last = None
        if needs_last_message(self.settings, sender):  # the slow-mode clock is the store's
            last = store.last_message_at(sender.user_id)
        # One resolver for emote-only mode and for the emotes the message carries.
        codes = emote_codes(message.text)
        emotes = store.emotes(codes) if codes else {}
        refuse(check_modes(self.settings, sender, message.text, now_ms, last, emotes))
        reply_to = _reply(store, message.reply_to)
        return self._message(
            store,
            now_ms,
            sender,
            False,
            text=message.text,
            mentions=mentions,
            reply_to=reply_to,
            effect=message.effect,
            effect_color=message.effect_color,
            extra_badges=extra_badges,
            emotes=[{"code": code, "url": url} for code, url in emotes.items()],
        )

    @handles(PostSystem)
    def _post_system(self, command: PostSystem, now_ms: int, store: ChatStore) -> Outcome:
        sender, mentions = _member_and_mentions(store, command.sender_id or self.channel_id, command.text)
        return self._message(store, now_ms, sender, True, text=command.text, mentions=mentions, card=command.card)

    def _message(
        self,
        store: ChatStore,
        now_ms: int,
        sender: Standing,
        system: bool,
        extra_badges: tuple[str, ...] = (),
        **content: Any,
    ) -> Outcome:
        message_id = str(uuid.uuid4())
        payload = catalogue.chat_message(
            message_id=message_id,
            channel_id=self.channel_id,
            sender=as_person(sender),
            badges=[*badges(sender), *extra_badges],
            is_mod=sender.is_moderator,
            is_vip=sender.is_vip,
            subscriber_months=sender.subscriber_months,
            timestamp=iso8601(now_ms),
            is_system=system,
            **content,
        )
        insert = InsertMessage(message_id, sender.user_id, system, payload, self.history)
        return Outcome(message_id, [insert], [Emitted("chat.message", payload)])

    # -- settings --

    @handles(UpdateSettings)
    def _update_settings(self, command: UpdateSettings, now_ms: int, store: ChatStore) -> Outcome:
        try:
            wanted = apply_settings_patch(self.settings, command.patch)
        except SettingsError as exc:
            raise Refused(Refusal(400, "invalid_settings", str(exc), {"field": exc.field})) from None
        if wanted == self.settings:
            return Outcome(wanted)
        self.settings = wanted
        return Outcome(wanted, [SaveSettings(wanted)], shared_state_changed=True)

    # -- moderation --

    @handles(Moderate)
    def _moderate(self, command: Moderate, now_ms: int, store: ChatStore) -> Outcome:
        request = command.request
        moderator = _member(store, command.moderator_id)
        refuse(check_moderator(moderator))
        if request.action == "delete":
            return _delete(store, moderator, request)
        target = _target(store, request)
        refuse(check_moderation_target(moderator, target, request.action))
        if request.action == "unban":
            return _unban(store, moderator, target, now_ms)
        return _ban(moderator, target, request, now_ms)


def _member(store: ChatStore, user_id: str) -> Standing:
    return _known(store.standing(user_id), user_id)


def _known(found: Standing | None, user_id: str) -> Standing:
    if found is None:
        raise Refused(Refusal(404, "not_found", "user not found", {"userId": user_id}))
    return found


def _member_and_mentions(store: ChatStore, user_id: str, text: str) -> tuple[Standing, list[dict[str, str]]]:
    """The sender's standing and the text's valid `@username`s (looked up
    case-insensitively, shown as stored), in one read."""
    names = extract_mentions(text)
    found, people = store.standing_and_people_named(user_id, names)
    return _known(found, user_id), [people[name.lower()] for name in names if name.lower() in people]


def _reply(store: ChatStore, reply: ReplyRef | None) -> dict[str, Any] | None:
    """The message replied to must be in this channel and not deleted. The author's id and
    stored username are taken from it (the client's copy may be stale)."""
    if reply is None:
        return None
    original = store.message(reply.message_id)
    if original is None or original.deleted:
        raise Refused(
            Refusal(
                400,
                "invalid_reply_to",
                "replyTo.messageId is not a message in this channel's chat",
                {"field": "replyTo.messageId"},
            )
        )
    return {
        "messageId": original.id,
        "userId": original.user_id,
        "username": original.username if original.username is not None else reply.username,
        "snippet": reply.snippet,
    }


def _target(store: ChatStore, request: ModerationRequest) -> Standing:
    user_id = request.user_id
    if user_id is None and request.username is not None:
        user_id = store.user_id_of(request.username)
    found = store.standing(user_id) if user_id else None
    if found is None:
        details = {"userId": request.user_id} if request.user_id else {"username": request.username}
        raise Refused(Refusal(404, "not_found", "the user to moderate does not exist", details))
    return found


def _ban(moderator: Standing, target: Standing, request: ModerationRequest, now_ms: int) -> Outcome:
    timeout = request.action == "timeout"
    ends_at = timeout_ends_at(now_ms, request.duration_seconds or 0) if timeout else None
    data = catalogue.channel_ban(
        user=as_person(target),
        moderator=as_person(moderator),
        reason=request.reason,
        is_permanent=not timeout,
        banned_at=iso8601(now_ms),
        ends_at=iso8601(ends_at) if ends_at is not None else None,
        duration_seconds=request.duration_seconds,
    )
    return Outcome(
        ModerationResult(request.action, True, who(target), ends_at),
        [SetBan(target.user_id, moderator.user_id, request.reason, ends_at)],
        [Emitted("channel.ban", data)],
    )


def _unban(store: ChatStore, moderator: Standing, target: Standing, now_ms: int) -> Outcome:
    was_permanent = store.ban_is_permanent(target.user_id)
    # Always delete: an expired timeout's row just goes.
    outcome = Outcome(ModerationResult("unban", was_permanent is not None, who(target)), [RemoveBan(target.user_id)])
    if was_permanent is not None:
        data = catalogue.channel_unban(
            user=as_person(target),
            moderator=as_person(moderator),
            was_permanent=was_permanent,
            unbanned_at=iso8601(now_ms),
        )
        outcome.events.append(Emitted("channel.unban", data))
    return outcome


def _delete(store: ChatStore, moderator: Standing, request: ModerationRequest) -> Outcome:
    message = store.message(request.message_id or "")
    if message is None:
        raise Refused(Refusal(404, "not_found", "message not found in this channel", {"messageId": request.message_id}))
    author = _member(store, message.user_id)
    refuse(check_moderation_target(moderator, author, "delete"))
    # Not in the event catalogue, so nothing is emitted: it just leaves history.
    result = ModerationResult("delete", not message.deleted, who(author), message_id=message.id)
    writes = [] if message.deleted else [DeleteMessage(message.id, moderator.user_id)]
    return Outcome(result, writes)


def system_card(store: ChatStore, channel_id: str, now_ms: int, text: str, card: dict[str, Any]) -> Outcome:
    """A card message from the broadcaster, for other components of the same actor (a poll
    beginning, a giveaway's winners): its writes go through the chat store port, so the
    card is in the chat history and `chat.message` is emitted in the same transaction."""
    sender = _member(store, channel_id)
    message_id = str(uuid.uuid4())
    payload = catalogue.chat_message(
        message_id=message_id,
        channel_id=channel_id,
        sender=as_person(sender),
        badges=badges(sender),
        is_mod=sender.is_moderator,
        is_vip=sender.is_vip,
        subscriber_months=sender.subscriber_months,
        timestamp=iso8601(now_ms),
        is_system=True,
        text=text,
        card=card,
    )
    return Outcome(
        message_id, [InsertMessage(message_id, sender.user_id, True, payload)], [Emitted("chat.message", payload)]
    )
