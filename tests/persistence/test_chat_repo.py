"""persistence/chat.py on SQLite and PostgreSQL: roles, subscriptions, bans, standing."""

from __future__ import annotations

import uuid

import pytest

from volthub.persistence import IntegrityError
from volthub.persistence import chat as repo
from volthub.persistence import users as users_repo

NOW = 1_800_000_000_000


async def user(db, name):
    user_id = str(uuid.uuid4())
    await db.write(
        lambda tx: users_repo.create_user(
            tx, user_id=user_id, username=name, display_name=name, password_hash="h", now_ms=1
        )
    )
    return user_id


async def test_roles_grant_expire_and_revoke(db):
    channel, member = await user(db, "chan"), await user(db, "member")
    await db.write(lambda tx: repo.grant_role(tx, channel, member, "moderator", NOW))
    await db.write(lambda tx: repo.grant_role(tx, channel, member, "vip", NOW, expires_at=NOW + 10))
    assert await db.read(lambda tx: repo.roles_of(tx, channel, member, NOW)) == {"moderator", "vip"}
    assert await db.read(lambda tx: repo.roles_of(tx, channel, member, NOW + 10)) == {"moderator"}
    assert await db.write(lambda tx: repo.revoke_role(tx, channel, member, "moderator"))
    assert not await db.write(lambda tx: repo.revoke_role(tx, channel, member, "moderator"))
    with pytest.raises(ValueError):
        await db.write(lambda tx: repo.grant_role(tx, channel, member, "broadcaster", NOW))


async def test_the_schema_refuses_unknown_roles(db):
    channel, member = await user(db, "chan2"), await user(db, "member2")
    with pytest.raises(IntegrityError):
        await db.write(
            lambda tx: tx.execute(
                "INSERT INTO channel_roles (channel_id, user_id, role, granted_at) VALUES (?, ?, 'owner', 1)",
                (channel, member),
            )
        )


async def test_active_subscription_window(db):
    channel, fan = await user(db, "chan3"), await user(db, "fan3")
    await db.write(
        lambda tx: repo.add_subscription(
            tx,
            subscription_id="s1",
            channel_id=channel,
            user_id=fan,
            tier="tier2",
            started_at=NOW,
            expires_at=NOW + 1000,
            months=5,
            is_gift=True,
            gifter_id=channel,
        )
    )
    found = await db.read(lambda tx: repo.active_subscription(tx, channel, fan, NOW))
    assert (found.tier, found.months, found.is_gift, found.gifter_id) == ("tier2", 5, True, channel)
    assert await db.read(lambda tx: repo.active_subscription(tx, channel, fan, NOW - 1)) is None
    assert await db.read(lambda tx: repo.active_subscription(tx, channel, fan, NOW + 1000)) is None


async def test_standing_gathers_everything_in_one_read(db):
    channel, fan, other = await user(db, "chan4"), await user(db, "fan4"), await user(db, "other4")

    def setup(tx):
        repo.grant_role(tx, channel, fan, "vip", NOW)
        repo.add_subscription(
            tx,
            subscription_id="s2",
            channel_id=channel,
            user_id=fan,
            tier="tier1",
            started_at=NOW,
            expires_at=NOW + 5000,
            months=2,
        )
        users_repo.follow(tx, fan, channel, NOW)
        repo.set_ban(
            tx,
            channel_id=channel,
            user_id=other,
            moderator_id=channel,
            reason=None,
            now_ms=NOW,
            expires_at=NOW + 60_000,
        )

    await db.write(setup)
    found = await db.read(lambda tx: repo.standings(tx, channel, [fan, other, channel, "missing"], NOW))
    assert set(found) == {fan, other, channel}
    fan_standing = found[fan].standing
    assert (fan_standing.is_vip, fan_standing.is_follower, fan_standing.subscriber_months) == (True, True, 2)
    assert not fan_standing.is_moderator and not fan_standing.banned and fan_standing.timeout_ends_at is None
    assert found[other].standing.timeout_ends_at == NOW + 60_000 and not found[other].standing.banned
    assert found[channel].standing.is_broadcaster
    later = await db.read(lambda tx: repo.standing(tx, channel, other, NOW + 60_000))
    assert later.timeout_ends_at is None  # an expired timeout is no longer in force


async def test_bans_replace_and_lift(db):
    channel, member = await user(db, "chan5"), await user(db, "member5")
    await db.write(
        lambda tx: repo.set_ban(
            tx, channel_id=channel, user_id=member, moderator_id=channel, reason="a", now_ms=NOW, expires_at=None
        )
    )
    await db.write(
        lambda tx: repo.set_ban(
            tx, channel_id=channel, user_id=member, moderator_id=channel, reason="b", now_ms=NOW, expires_at=NOW + 5
        )
    )
    ban = await db.read(lambda tx: repo.active_ban(tx, channel, member, NOW))
    assert (ban.reason, ban.expires_at, ban.is_permanent) == ("b", NOW + 5, False)
    lifted = await db.write(lambda tx: repo.remove_ban(tx, channel, member, NOW))
    assert lifted is not None and await db.read(lambda tx: repo.active_ban(tx, channel, member, NOW)) is None


async def test_settings_default_until_the_first_write_then_versioned(db):
    channel = await user(db, "chan6")
    settings, version = await db.read(lambda tx: repo.get_settings(tx, channel))
    assert (settings, version) == (repo.ChatSettings(), 0)
    assert await db.write(lambda tx: repo.lock_channel(tx, channel, NOW, next_message=True)) == (0, 1)
    changed = repo.ChatSettings(emote_only=True)
    assert await db.write(lambda tx: repo.save_settings(tx, channel, changed, NOW)) == 1
    assert await db.read(lambda tx: repo.get_settings(tx, channel)) == (changed, 1)
