"""Chat's rules and records, sans-IO: limits, validators, mentions and emotes, a channel's
chat settings, who someone is in a channel, and the checks a message or a moderation
action must pass.

Nothing here touches the store, the clock or Trio. The rules are pure functions over what
the caller knows (`now_ms`, the people involved) and return a value or a `Refusal`; the HTTP
models use the validators, so each rule exists in one place only. The chat component
(:mod:`volthub.hub.components.chat`) applies them to chat commands.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Container, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from volthub.hub.clock import iso8601
from volthub.hub.components.base import Refusal
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


def as_person(standing: Standing) -> catalogue.Person:
    return catalogue.Person(standing.user_id, standing.username, standing.display_name)
