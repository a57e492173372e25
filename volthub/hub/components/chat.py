"""Chat rules, sans-IO: validation, mentions, emotes, chat modes and moderation decisions.

Nothing here touches the store, the clock or Trio: callers pass `now_ms` and what they
know about the people involved, and get back a value or a `Refusal`. The channel actor
(hub/actors.py) applies these decisions inside its store transaction; the HTTP models use
the validators so a rule exists in one place only.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from volthub.hub.clock import iso8601

# The records the rules are written over live with the store that fills them; importing
# them from here is the intended way.
from volthub.persistence.chat import ChatSettings, Standing

# --- limits (spec §2.1, §2.2, §8) ------------------------------------------------------------

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
    if not text.strip():
        raise ValueError("message must not be blank")
    if len(text) > MESSAGE_MAX:
        raise ValueError(f"message must be at most {MESSAGE_MAX} characters")
    _refuse_control_characters(text, "message")
    return text


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


def is_emote(token: str) -> bool:
    """An emote is an emote code `:name:` or an emoji; several may touch (`:a::b:`)."""
    rest = _EMOTE_CODE.sub("", token)
    return rest == "" or _is_emoji(rest)


def is_emote_only(text: str) -> bool:
    """True when every whitespace-separated token is an emote (see `is_emote`)."""
    tokens = text.split()
    return bool(tokens) and all(is_emote(token) for token in tokens)


# --- chat settings (spec §2.3) ---------------------------------------------------------------


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


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str
    details: dict[str, Any] | None = None


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
    settings: ChatSettings, standing: Standing, text: str, now_ms: int, last_message_ms: int | None
) -> Refusal | None:
    """Chat modes; the broadcaster and the channel's moderators are exempt from all."""
    if standing.exempt_from_modes:
        return None
    if settings.followers_only and not standing.is_follower:
        return Refusal(403, "followers_only", "this chat is in followers-only mode: follow the channel to chat")
    if settings.subscribers_only and not standing.is_subscriber:
        return Refusal(403, "subscribers_only", "this chat is in subscribers-only mode")
    if settings.emote_only and not is_emote_only(text):
        return Refusal(403, "emote_only", "this chat is in emote-only mode: send only emotes (:name: codes or emoji)")
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


# --- the chat.message payload (spec §2.6) -----------------------------------------------------


def person(user_id: str, username: str, display_name: str) -> dict[str, str]:
    return {"userId": user_id, "username": username, "displayName": display_name}


def message_payload(
    *,
    message_id: str,
    channel_id: str,
    standing: Standing,
    text: str,
    timestamp: str,
    mentions: list[dict[str, str]] | None = None,
    reply_to: dict[str, Any] | None = None,
    effect: str | None = None,
    effect_color: str | None = None,
    card: dict[str, Any] | None = None,
    is_system: bool = False,
) -> dict[str, Any]:
    """Optional members appear only when they have a value, as the spec describes them."""
    payload: dict[str, Any] = {
        "messageId": message_id,
        "channelId": channel_id,
        **person(standing.user_id, standing.username, standing.display_name),
        "message": text,
        "badges": badges(standing),
        "isMod": standing.is_moderator,
        "isVip": standing.is_vip,
        "isSubscriber": standing.is_subscriber,
        "timestamp": timestamp,
    }
    optional = {
        "subscriberMonths": standing.subscriber_months,
        "mentions": mentions or None,
        "replyTo": reply_to,
        "effect": effect,
        "effectColor": effect_color,
        "card": card,
        "isSystem": True if is_system or card is not None else None,
    }
    payload.update({key: value for key, value in optional.items() if value is not None})
    return payload
