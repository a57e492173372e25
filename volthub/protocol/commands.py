"""The command permission ladder of bot commands, as pure code.

Levels, lowest first: everyone, followers (optionally with a minimum follow age),
subscribers, tier1, tier2, tier3 ("that tier or above"), vips (VIPs and moderators),
moderators, streamer_only. It is a ladder: whoever stands on a rung passes every level at
or below it, so a moderator passes `vips` and `subscribers`, the broadcaster passes all,
and a tier-2 subscriber passes `tier1`, `subscribers` and `followers`. A level that is not
one of these names denies everyone (a typo must never open a command to all).
"""

from __future__ import annotations

from dataclasses import dataclass

LEVELS: tuple[str, ...] = (
    "everyone",
    "followers",
    "subscribers",
    "tier1",
    "tier2",
    "tier3",
    "vips",
    "moderators",
    "streamer_only",
)

# Level -> the lowest rung that passes it.
_REQUIRED: dict[str, int] = {
    "everyone": 0,
    "followers": 1,
    "subscribers": 2,
    "tier1": 2,
    "tier2": 3,
    "tier3": 4,
    "vips": 5,
    "moderators": 6,
    "streamer_only": 7,
}


@dataclass(frozen=True)
class Viewer:
    """What the ladder needs to know about someone in one channel."""

    is_broadcaster: bool = False
    is_moderator: bool = False
    is_vip: bool = False
    followed_at_ms: int | None = None  # None: not following
    subscription_tier: int | None = None  # 1–3; None: not subscribed


def tier_number(tier: str | None) -> int | None:
    """`tier1`..`tier3` -> 1..3; anything else -> None."""
    if tier in ("tier1", "tier2", "tier3"):
        return int(tier[-1])
    return None


def rung(viewer: Viewer, now_ms: int, min_follow_seconds: int = 0) -> int:
    """The highest rung the viewer stands on (0 = everyone … 7 = the broadcaster)."""
    if viewer.is_broadcaster:
        return 7
    if viewer.is_moderator:
        return 6
    if viewer.is_vip:
        return 5
    if viewer.subscription_tier is not None and 1 <= viewer.subscription_tier <= 3:
        return 1 + viewer.subscription_tier
    if viewer.followed_at_ms is not None and now_ms - viewer.followed_at_ms >= min_follow_seconds * 1000:
        return 1
    return 0


def allows(level: str, viewer: Viewer, now_ms: int, *, min_follow_seconds: int = 0) -> bool:
    """Whether `viewer` may use a command of `level`; unknown levels deny."""
    required = _REQUIRED.get(level)
    if required is None or min_follow_seconds < 0:
        return False
    return rung(viewer, now_ms, min_follow_seconds) >= required


def is_level(level: str) -> bool:
    return level in _REQUIRED
