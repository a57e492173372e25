"""The chat component: chat's records, rules and state machine, sans-IO.

Nothing here touches the store, the clock or Trio. The rules are pure functions over what
the caller knows (`now_ms`, the people involved) and return a value or a `Refusal`; the HTTP
models use the validators, so each rule exists in one place only. `ChatComponent` is the
channel actor's chat part: it decides each chat command through a `ChatStore` port (reads
the actor implements over its transaction, faked in unit tests) and returns the writes and
events of the decision.

Longer than ~500 lines on purpose: it is one concern (what chat allows and what a chat
command changes), and its sections (limits, validators, records, rules, commands, the
component) are read together when a chat rule changes.
"""

from __future__ import annotations

import math
import re
import unicodedata
import uuid
from collections.abc import Container, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, get_args

from volthub.hub.clock import iso8601
from volthub.hub.components.base import Emitted, Outcome, Refusal, Refused, refuse
from volthub.protocol import catalogue

# --- limits ------------------------------------------------------------

MESSAGE_MAX = 500
SNIPPET_MAX = 100
SLOW_MODE_MAX_SECONDS = 3600
# Slow mode switched on without a duration uses this (a common platform default).
SLOW_MODE_DEFAULT_SECONDS = 30
TIMEOUT_MAX_SECONDS = 1_209_600  # 14 days
REASON_MAX = 500

Effect = Literal["glow", "galaxy", "rainbow", "gigantify"]
EFFECTS: tuple[str, ...] = get_args(Effect)
ModerationAction = Literal["timeout", "ban", "unban", "delete"]

_COLOR = re.compile(r"#[0-9a-fA-F]{6}")
# `@name`: the account username alphabet; not preceded by a word character, so e-mail
# addresses (`a@b.com`) are not mentions.
_MENTION = re.compile(r"(?<![A-Za-z0-9_])@([A-Za-z0-9_]{3,25})(?![A-Za-z0-9_])")
# An emote code written `:name:` (2–32 letters, digits or underscores), e.g. `:volt_hype:`.
_EMOTE_CODE = re.compile(r":[A-Za-z0-9_]{2,32}:")
# Code points that may appear inside an emoji sequence besides pictographic symbols:
# zero-width joiner, variation selectors, the keycap combiner and tag characters.
_EMOJI_JOINERS = {0x200D, 0xFE0E, 0xFE0F, 0x20E3} | set(range(0xE0020, 0xE0080))


# --- validators (raise ValueError: pydantic turns it into a field error) -----------------


def _refuse_control_characters(text: str, field: str) -> None:
    """NUL cannot be stored by PostgreSQL, and other control codes only break renderers."""
    for char in text:
        if unicodedata.category(char) == "Cc" and char not in "\t\n\r":
            raise ValueError(f"{field} must not contain control characters")


def check_message(text: str) -> str:
    """1–500 Unicode code points, not blank. Returned unchanged when valid."""
    if not any(is_visible(character) for character in text):
        raise ValueError("message must not be blank (it holds only invisible characters)")
    if len(text) > MESSAGE_MAX:
        raise ValueError(f"message must be at most {MESSAGE_MAX} characters")
    _refuse_control_characters(text, "message")
    return text


# Characters that draw nothing though Unicode does not class them as spaces or format
# characters: Hangul fillers, the braille blank, the Mongolian vowel separator, the
# combining grapheme joiner. Variation selectors are checked by range below.
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e\u034f")


def is_visible(character: str) -> bool:
    if character.isspace() or character in _INVISIBLE:
        return False
    if unicodedata.category(character) in ("Cf", "Cc", "Zs", "Zl", "Zp", "Cs"):
        return False
    code = ord(character)
    return not (0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF)


def check_snippet(text: str) -> str:
    """The reply preview: at most 100 code points (may be empty)."""
    if len(text) > SNIPPET_MAX:
        raise ValueError(f"snippet must be at most {SNIPPET_MAX} characters")
    _refuse_control_characters(text, "snippet")
    return text


def check_effect(value: str) -> str:
    if value not in EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(EFFECTS)}")
    return value


def normalize_color(value: str) -> str:
    """`#rrggbb` with hex digits of either case; returned lower-case."""
    if not _COLOR.fullmatch(value):
        raise ValueError("effectColor must be a hex colour of the shape #rrggbb")
    return value.lower()


def check_reason(text: str) -> str:
    if len(text) > REASON_MAX:
        raise ValueError(f"reason must be at most {REASON_MAX} characters")
    _refuse_control_characters(text, "reason")
    return text


# --- mentions and emotes ---------------------------------------------------------------------


def extract_mentions(text: str) -> list[str]:
    """Candidate usernames of `@name` mentions, first-seen order, one per name (any case).

    Whether a candidate is a real user is for the caller to look up, case-insensitively.
    """
    seen: dict[str, str] = {}
    for match in _MENTION.finditer(text):
        seen.setdefault(match.group(1).lower(), match.group(1))
    return list(seen.values())


def _is_emoji(token: str) -> bool:
    """A run of pictographic symbols (category So), with joiners, skin tones, selectors."""
    has_symbol = False
    for char in token:
        code = ord(char)
        if unicodedata.category(char) == "So":
            has_symbol = True
        elif code in _EMOJI_JOINERS or 0x1F3FB <= code <= 0x1F3FF:
            continue
        else:
            return False
    return has_symbol


def emote_codes(text: str) -> list[str]:
    """The codes written `:code:` in a message, first-seen order, without the colons."""
    return list(dict.fromkeys(match.group(0)[1:-1] for match in _EMOTE_CODE.finditer(text)))


def is_emote(token: str, known: Container[str] | None = None) -> bool:
    """An emote is an emote code `:name:` or an emoji; several may touch (`:a::b:`).

    `known`: the codes the channel's emote resolver found (global and the channel's); a
    code not among them is not an emote. None checks the shape only."""
    codes = [match.group(0)[1:-1] for match in _EMOTE_CODE.finditer(token)]
    if known is not None and not all(code in known for code in codes):
        return False
    rest = _EMOTE_CODE.sub("", token)
    return rest == "" or _is_emoji(rest)


def is_emote_only(text: str, known: Container[str] | None = None) -> bool:
    """True when every whitespace-separated token is an emote (see `is_emote`)."""
    tokens = text.split()
    return bool(tokens) and all(is_emote(token, known) for token in tokens)


# --- records: a channel's chat settings, and who someone is in a channel ---------------------


@dataclass(frozen=True)
class ChatSettings:
    slow_mode: bool = False
    slow_mode_seconds: int = 0
    followers_only: bool = False
    subscribers_only: bool = False
    emote_only: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ChatSettings:
        """From the store's plain column values."""
        return cls(
            slow_mode=bool(row["slow_mode"]),
            slow_mode_seconds=int(row["slow_mode_seconds"]),
            followers_only=bool(row["followers_only"]),
            subscribers_only=bool(row["subscribers_only"]),
            emote_only=bool(row["emote_only"]),
        )

    def as_api(self) -> dict[str, Any]:
        return {
            "slowMode": self.slow_mode,
            "slowModeSeconds": self.slow_mode_seconds,
            "followersOnly": self.followers_only,
            "subscribersOnly": self.subscribers_only,
            "emoteOnly": self.emote_only,
        }


@dataclass(frozen=True)
class Standing:
    """One user in one channel, as of one moment."""

    user_id: str
    username: str
    display_name: str
    is_broadcaster: bool = False
    is_moderator: bool = False
    is_vip: bool = False
    is_follower: bool = False
    subscriber_months: int | None = None  # None: not an active subscriber
    banned: bool = False
    timeout_ends_at: int | None = None  # epoch ms of an active timeout's end

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Standing:
        """From the store's plain values (persistence.chat.standings)."""
        return cls(**{name: row[name] for name in _STANDING_FIELDS})

    @property
    def is_subscriber(self) -> bool:
        return self.subscriber_months is not None

    @property
    def exempt_from_modes(self) -> bool:
        return self.is_broadcaster or self.is_moderator


_STANDING_FIELDS = (
    "user_id",
    "username",
    "display_name",
    "is_broadcaster",
    "is_moderator",
    "is_vip",
    "is_follower",
    "subscriber_months",
    "banned",
    "timeout_ends_at",
)


@dataclass(frozen=True)
class Member:
    """A viewer-list entry: the standing and the avatar."""

    standing: Standing
    avatar_url: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Member:
        return cls(Standing.from_row(row), row["avatar_url"])


# --- chat settings ---------------------------------------------------------------


class SettingsError(ValueError):
    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


_SETTING_FIELDS = {
    "followersOnly": "followers_only",
    "subscribersOnly": "subscribers_only",
    "emoteOnly": "emote_only",
}


def apply_settings_patch(current: ChatSettings, patch: dict[str, Any]) -> ChatSettings:
    """Merge a partial PATCH body (API names) into the settings.

    Slow mode keeps one invariant: `slowMode` is true exactly when `slowModeSeconds` > 0
    (the spec: "0 means disabled"). So:
    - `slowModeSeconds: n > 0` alone turns slow mode on; `slowModeSeconds: 0` turns it off;
    - `slowMode: true` alone keeps the stored duration, or uses 30 s when none is stored;
    - `slowMode: false` sets the duration to 0;
    - a body that contradicts itself (`slowMode: true` with 0 seconds, `slowMode: false`
      with a positive duration) is refused.
    """
    changed = replace(current, **{_SETTING_FIELDS[k]: v for k, v in patch.items() if k in _SETTING_FIELDS})
    mode, seconds = patch.get("slowMode"), patch.get("slowModeSeconds")
    if seconds is not None and not 0 <= seconds <= SLOW_MODE_MAX_SECONDS:
        raise SettingsError(f"slowModeSeconds must be 0–{SLOW_MODE_MAX_SECONDS}", "slowModeSeconds")
    if mode is True and seconds == 0:
        raise SettingsError("slowMode true needs slowModeSeconds of at least 1", "slowModeSeconds")
    if mode is False and seconds:
        raise SettingsError("slowMode false needs slowModeSeconds 0 (or omitted)", "slowModeSeconds")
    if seconds is not None:
        return replace(changed, slow_mode=seconds > 0, slow_mode_seconds=seconds)
    if mode is True:
        kept = current.slow_mode_seconds or SLOW_MODE_DEFAULT_SECONDS
        return replace(changed, slow_mode=True, slow_mode_seconds=kept)
    if mode is False:
        return replace(changed, slow_mode=False, slow_mode_seconds=0)
    return changed


# --- who is sending: the facts the rules need ------------------------------------------------


# The badge of a message a bot posted (sendAsBot); a slug of the badge catalogue's system
# category like the ones `badges` gives.
BOT_BADGE = "bot"


def badges(standing: Standing) -> list[str]:
    found = []
    if standing.is_broadcaster:
        found.append("broadcaster")
    if standing.is_moderator:
        found.append("moderator")
    if standing.is_vip:
        found.append("vip")
    if standing.is_subscriber:
        found.append("subscriber")
    return found


def roles(standing: Standing) -> list[str]:
    """The viewer list's roles: the same words as the badges."""
    return badges(standing)


def _ceil_seconds(ms: int) -> int:
    return max(1, math.ceil(ms / 1000))


def check_standing(standing: Standing, now_ms: int) -> Refusal | None:
    """Bans and timeouts; the broadcaster can be neither."""
    if standing.is_broadcaster:
        return None
    if standing.banned:
        return Refusal(403, "banned", "you are banned from this channel's chat")
    if standing.timeout_ends_at is not None and standing.timeout_ends_at > now_ms:
        remaining = _ceil_seconds(standing.timeout_ends_at - now_ms)
        return Refusal(
            403,
            "timed_out",
            f"you are timed out in this channel for {remaining} more seconds",
            {"remainingSeconds": remaining, "endsAt": iso8601(standing.timeout_ends_at)},
        )
    return None


def check_modes(
    settings: ChatSettings,
    standing: Standing,
    text: str,
    now_ms: int,
    last_message_ms: int | None,
    known_emotes: Container[str] | None = None,
) -> Refusal | None:
    """Chat modes; the broadcaster and the channel's moderators are exempt from all.
    `known_emotes`: the resolver's codes for emote-only mode (see `is_emote`)."""
    if standing.exempt_from_modes:
        return None
    if settings.followers_only and not standing.is_follower:
        return Refusal(403, "followers_only", "this chat is in followers-only mode: follow the channel to chat")
    if settings.subscribers_only and not standing.is_subscriber:
        return Refusal(403, "subscribers_only", "this chat is in subscribers-only mode")
    if settings.emote_only and not is_emote_only(text, known_emotes):
        return Refusal(
            403,
            "emote_only",
            "this chat is in emote-only mode: send only emotes (:code: of this chat's emotes) or emoji",
        )
    if settings.slow_mode and settings.slow_mode_seconds > 0 and last_message_ms is not None:
        ready_at = last_message_ms + settings.slow_mode_seconds * 1000
        if ready_at > now_ms:
            wait = _ceil_seconds(ready_at - now_ms)
            return Refusal(
                403,
                "slow_mode",
                f"slow mode: wait {wait} more seconds before your next message",
                {"waitSeconds": wait, "slowModeSeconds": settings.slow_mode_seconds},
            )
    return None


def needs_last_message(settings: ChatSettings, standing: Standing) -> bool:
    """Whether the sender's previous message time matters (saves a query otherwise)."""
    return settings.slow_mode and settings.slow_mode_seconds > 0 and not standing.exempt_from_modes


# --- moderation ------------------------------------------------------------------------------


def check_moderator(moderator: Standing) -> Refusal | None:
    if moderator.is_broadcaster or moderator.is_moderator:
        return None
    return Refusal(403, "not_moderator", "only the broadcaster and the channel's moderators may moderate")


def check_moderation_target(moderator: Standing, target: Standing, action: str) -> Refusal | None:
    """Nobody moderates the broadcaster; only the broadcaster moderates a moderator.

    Deleting one's own message is allowed; banning or timing out oneself is not.
    """
    if moderator.user_id == target.user_id:
        if action == "delete":
            return None
        return Refusal(400, "cannot_moderate_self", "you cannot moderate yourself")
    if target.is_broadcaster:
        return Refusal(403, "cannot_moderate_broadcaster", "the broadcaster cannot be moderated in their own channel")
    if target.is_moderator and not moderator.is_broadcaster:
        return Refusal(403, "cannot_moderate_moderator", "only the broadcaster can moderate a moderator")
    return None


def timeout_ends_at(now_ms: int, duration_seconds: int) -> int:
    if not 1 <= duration_seconds <= TIMEOUT_MAX_SECONDS:
        raise ValueError(f"durationSeconds must be 1–{TIMEOUT_MAX_SECONDS}")
    return now_ms + duration_seconds * 1000


def person(user_id: str, username: str, display_name: str) -> dict[str, str]:
    return {"userId": user_id, "username": username, "displayName": display_name}


def who(standing: Standing) -> dict[str, str]:
    return person(standing.user_id, standing.username, standing.display_name)


def _person(standing: Standing) -> catalogue.Person:
    return catalogue.Person(standing.user_id, standing.username, standing.display_name)


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


COMMANDS: tuple[type, ...] = (SendMessage, PostSystem, UpdateSettings, Moderate)


# --- the store port: what chat reads and writes inside the actor's transaction ----------------


@dataclass(frozen=True)
class MessageRef:
    id: str
    user_id: str
    username: str | None  # as stored in the message
    deleted: bool


class ChatStore(Protocol):
    """Reads for chat decisions, and `apply` for the writes below (hub/chat_store.py)."""

    def settings(self) -> ChatSettings: ...
    def standing(self, user_id: str) -> Standing | None: ...
    def user_id_of(self, username: str) -> str | None:
        """Any case."""

    def people_named(self, usernames: list[str]) -> dict[str, dict[str, str]]:
        """Lower-cased username -> person, for the names that are users (any case)."""

    def message(self, message_id: str) -> MessageRef | None: ...
    def emotes(self, codes: list[str]) -> dict[str, str]:
        """Code -> image URL for the codes that are emotes here (global or the channel's)."""

    def last_message_at(self, user_id: str) -> int | None:
        """When the user last chatted here (system/card messages do not count)."""

    def ban_is_permanent(self, user_id: str) -> bool | None:
        """The active ban's kind (True: ban, False: timeout); None when none is in force."""

    def next_message_seq(self) -> int:
        """Moves the channel's message sequence on and returns the new number."""

    def apply(self, write: Any) -> None: ...


@dataclass(frozen=True)
class InsertMessage:
    message_id: str
    seq: int
    user_id: str
    is_system: bool
    payload: dict[str, Any]


@dataclass(frozen=True)
class PruneHistory:
    """Drop messages numbered `up_to_seq` or lower that are older than `before_ms`."""

    up_to_seq: int
    before_ms: int


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


class ChatComponent:
    """A channel's chat: keeps the settings; every other fact is read through the store.

    History is bounded: once the sequence passes `history_limit`, every `prune_every`-th
    message drops the older ones, except those younger than the longest slow mode (the
    slow-mode clock reads the sender's last message, so that one must stay).
    """

    def __init__(self, channel_id: str, *, history_limit: int = HISTORY_LIMIT_DEFAULT) -> None:
        if history_limit < 1:
            raise ValueError("history_limit must be at least 1")
        self.channel_id = channel_id
        self.history_limit = history_limit
        # Pruning every message would cost a DELETE each time; every tenth of the limit
        # keeps the table within 10% of it.
        self.prune_every = max(1, min(100, history_limit // 10))
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

    def handle(self, command: Any, now_ms: int, store: ChatStore) -> Outcome:
        if isinstance(command, SendMessage):
            return self._send(command, now_ms, store)
        if isinstance(command, PostSystem):
            return self._post_system(command, now_ms, store)
        if isinstance(command, UpdateSettings):
            return self._update_settings(command)
        if isinstance(command, Moderate):
            return self._moderate(command, now_ms, store)
        raise TypeError(f"chat does not handle {type(command).__name__}")

    # -- messages --

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
            sender = replace(
                _member(store, command.bot.user_id), username=command.bot.name, display_name=command.bot.name
            )
            extra_badges = (BOT_BADGE,)
        else:
            sender = _member(store, command.sender_id)
        refuse(check_standing(sender, now_ms))
        last = None
        if needs_last_message(self.settings, sender):  # the slow-mode clock is the store's
            last = store.last_message_at(sender.user_id)
        # One resolver for emote-only mode and for the emotes the message carries.
        codes = emote_codes(message.text)
        emotes = store.emotes(codes) if codes else {}
        refuse(check_modes(self.settings, sender, message.text, now_ms, last, emotes))
        mentions = _mentions(store, message.text)
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

    def _post_system(self, command: PostSystem, now_ms: int, store: ChatStore) -> Outcome:
        sender = _member(store, command.sender_id or self.channel_id)
        mentions = _mentions(store, command.text)
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
            sender=_person(sender),
            badges=[*badges(sender), *extra_badges],
            is_mod=sender.is_moderator,
            is_vip=sender.is_vip,
            subscriber_months=sender.subscriber_months,
            timestamp=iso8601(now_ms),
            is_system=system,
            **content,
        )
        seq = store.next_message_seq()
        writes: list[Any] = [InsertMessage(message_id, seq, sender.user_id, system, payload)]
        if seq > self.history_limit and seq % self.prune_every == 0:
            writes.append(PruneHistory(seq - self.history_limit, now_ms - SLOW_MODE_MAX_SECONDS * 1000))
        return Outcome(message_id, writes, [Emitted("chat.message", payload)])

    # -- settings --

    def _update_settings(self, command: UpdateSettings) -> Outcome:
        try:
            wanted = apply_settings_patch(self.settings, command.patch)
        except SettingsError as exc:
            raise Refused(Refusal(400, "invalid_settings", str(exc), {"field": exc.field})) from None
        if wanted == self.settings:
            return Outcome(wanted)
        self.settings = wanted
        return Outcome(wanted, [SaveSettings(wanted)], shared_state_changed=True)

    # -- moderation --

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
    found = store.standing(user_id)
    if found is None:
        raise Refused(Refusal(404, "not_found", "user not found", {"userId": user_id}))
    return found


def _mentions(store: ChatStore, text: str) -> list[dict[str, str]]:
    """Valid `@username`s only: looked up case-insensitively, shown as stored."""
    names = extract_mentions(text)
    if not names:
        return []
    found = store.people_named(names)
    return [found[name.lower()] for name in names if name.lower() in found]


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
        user=_person(target),
        moderator=_person(moderator),
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
            user=_person(target), moderator=_person(moderator), was_permanent=was_permanent, unbanned_at=iso8601(now_ms)
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
        sender=_person(sender),
        badges=badges(sender),
        is_mod=sender.is_moderator,
        is_vip=sender.is_vip,
        subscriber_months=sender.subscriber_months,
        timestamp=iso8601(now_ms),
        is_system=True,
        text=text,
        card=card,
    )
    seq = store.next_message_seq()
    return Outcome(
        message_id, [InsertMessage(message_id, seq, sender.user_id, True, payload)], [Emitted("chat.message", payload)]
    )
