"""The command permission ladder: every level against every kind of viewer."""

from __future__ import annotations

import pytest

from volthub.protocol.commands import LEVELS, Viewer, allows, is_level, tier_number

NOW = 1_000_000_000_000
DAY_MS = 86_400_000

NOBODY = Viewer()
NEW_FOLLOWER = Viewer(followed_at_ms=NOW - 1000)
OLD_FOLLOWER = Viewer(followed_at_ms=NOW - 30 * DAY_MS)
TIER1 = Viewer(subscription_tier=1)
TIER2 = Viewer(subscription_tier=2)
TIER3 = Viewer(subscription_tier=3)
VIP = Viewer(is_vip=True)
MOD = Viewer(is_moderator=True)
STREAMER = Viewer(is_broadcaster=True)
VIEWERS = [NOBODY, NEW_FOLLOWER, OLD_FOLLOWER, TIER1, TIER2, TIER3, VIP, MOD, STREAMER]

# Level -> the viewers (in VIEWERS order) it lets through: 1 = allowed.
TABLE = {
    "everyone": [1, 1, 1, 1, 1, 1, 1, 1, 1],
    "followers": [0, 1, 1, 1, 1, 1, 1, 1, 1],
    "subscribers": [0, 0, 0, 1, 1, 1, 1, 1, 1],
    "tier1": [0, 0, 0, 1, 1, 1, 1, 1, 1],
    "tier2": [0, 0, 0, 0, 1, 1, 1, 1, 1],
    "tier3": [0, 0, 0, 0, 0, 1, 1, 1, 1],
    "vips": [0, 0, 0, 0, 0, 0, 1, 1, 1],
    "moderators": [0, 0, 0, 0, 0, 0, 0, 1, 1],
    "streamer_only": [0, 0, 0, 0, 0, 0, 0, 0, 1],
}


def test_the_table_covers_every_level():
    assert set(TABLE) == set(LEVELS)


@pytest.mark.parametrize("level", LEVELS)
def test_ladder(level: str):
    got = [int(allows(level, viewer, NOW)) for viewer in VIEWERS]
    assert got == TABLE[level]


def test_minimum_follow_age():
    week = 7 * 86_400
    assert not allows("followers", NEW_FOLLOWER, NOW, min_follow_seconds=week)
    assert allows("followers", OLD_FOLLOWER, NOW, min_follow_seconds=week)
    # Higher rungs do not depend on following.
    assert allows("followers", TIER1, NOW, min_follow_seconds=week)
    assert allows("followers", MOD, NOW, min_follow_seconds=week)
    assert not allows("followers", OLD_FOLLOWER, NOW, min_follow_seconds=-1)


@pytest.mark.parametrize("level", ["", "Everyone", "admins", "tier4", "vip", "moderator", "streamer", " everyone"])
def test_unknown_levels_deny_everyone(level: str):
    assert not is_level(level)
    assert not any(allows(level, viewer, NOW) for viewer in VIEWERS)


def test_tier_numbers():
    assert [tier_number(t) for t in ("tier1", "tier2", "tier3", "tier4", None, "Tier1")] == [1, 2, 3, None, None, None]
