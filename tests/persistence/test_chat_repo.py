"""persistence/chat.py and channels.py on SQLite and PostgreSQL: roles, subscriptions, bans,
standing, settings, the message sequence and pruning, the channel lock."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import insert_chat_message, insert_subscription
from tests.conftest import stored_user as user
from volthub.persistence import IntegrityError
from volthub.persistence import channels as channels_repo
from volthub.persistence import chat as repo
from volthub.persistence import users as users_repo

NOW = 1_800_000_000_000


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


async def test_a_subscription_counts_within_its_window(db):
    channel, fan = await user(db, "chan3"), await user(db, "fan3")
    await db.write(
        lambda tx: insert_subscription(
            tx, channel, fan, started_at=NOW, expires_at=NOW + 1000, tier="tier2", months=5, gifter_id=channel
        )
    )

    async def months(at: int) -> int | None:
        found = await db.read(lambda tx: repo.standing(tx, channel, fan, at))
        return found["subscriber_months"]

    assert await months(NOW) == 5
    assert await months(NOW - 1) is None
    assert await months(NOW + 1000) is None


async def test_standing_gathers_everything_in_one_read(db):
    channel, fan, other = await user(db, "chan4"), await user(db, "fan4"), await user(db, "other4")

    def setup(tx):
        repo.grant_role(tx, channel, fan, "vip", NOW)
        insert_subscription(tx, channel, fan, started_at=NOW, expires_at=NOW + 5000, months=2)
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
    fan_standing = found[fan]
    assert (fan_standing["is_vip"], fan_standing["is_follower"], fan_standing["subscriber_months"]) == (True, True, 2)
    assert not fan_standing["is_moderator"] and not fan_standing["banned"] and fan_standing["timeout_ends_at"] is None
    assert found[other]["timeout_ends_at"] == NOW + 60_000 and not found[other]["banned"]
    assert found[channel]["is_broadcaster"] and found[channel]["avatar_url"] is None
    later = await db.read(lambda tx: repo.standing(tx, channel, other, NOW + 60_000))
    assert later["timeout_ends_at"] is None  # an expired timeout is no longer in force


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


DEFAULTS = {
    "slow_mode": False,
    "slow_mode_seconds": 0,
    "followers_only": False,
    "subscribers_only": False,
    "emote_only": False,
}


async def test_settings_default_until_the_first_write(db):
    channel = await user(db, "chan6")
    assert await db.read(lambda tx: repo.get_settings(tx, channel)) == DEFAULTS
    changed = {**DEFAULTS, "emote_only": True, "slow_mode": True, "slow_mode_seconds": 30}
    await db.write(lambda tx: repo.save_settings(tx, channel, changed, NOW))
    assert await db.read(lambda tx: repo.get_settings(tx, channel)) == changed


async def test_the_message_sequence_counts_from_one_per_channel(db):
    one, two = await user(db, "seq1"), await user(db, "seq2")
    assert [await db.write(lambda tx: repo.next_message_seq(tx, one, NOW)) for _ in range(3)] == [1, 2, 3]
    assert await db.write(lambda tx: repo.next_message_seq(tx, two, NOW)) == 1


async def test_every_user_is_a_channel_with_a_lockable_versioned_row(db):
    channel = await user(db, "chan7")
    assert await db.read(lambda tx: channels_repo.version(tx, channel)) == 0
    assert await db.write(lambda tx: channels_repo.lock(tx, channel)) == 0
    assert await db.write(lambda tx: channels_repo.bump(tx, channel)) == 1
    assert await db.write(lambda tx: channels_repo.lock(tx, channel)) == 1
    assert await db.write(lambda tx: channels_repo.lock(tx, str(uuid.uuid4()))) is None


async def add_messages(db, channel, count, at):
    return await db.write(
        lambda tx: [insert_chat_message(tx, channel, channel, f"{at}:{index}", at) for index in range(count)]
    )


async def test_pruning_drops_old_numbers_but_keeps_recent_messages(db):
    channel, other = await user(db, "pruned"), await user(db, "unpruned")
    assert await add_messages(db, channel, 6, NOW) == [1, 2, 3, 4, 5, 6]
    assert await add_messages(db, channel, 2, NOW + 10) == [7, 8]
    assert await add_messages(db, other, 3, NOW) == [1, 2, 3]
    # Up to seq 7, older than NOW + 10: 1-6 go, 7 is too young, 8 is above the bound.
    assert await db.write(lambda tx: repo.prune_messages(tx, channel, 7, NOW + 10)) == 6
    history = await db.read(lambda tx: repo.history(tx, channel, 100))
    assert [m["message"] for m in history] == [f"{NOW + 10}:0", f"{NOW + 10}:1"]
    assert len(await db.read(lambda tx: repo.history(tx, other, 100))) == 3


async def test_a_sender_and_the_people_named_are_read_together(db):
    sender, named = await user(db, "Sender1"), await user(db, "Named1")

    def read(tx):
        return repo.standings_and_named(tx, sender, [sender], ["NAMED1", "sender1", "nobody"], NOW)

    by_id, by_name = await db.read(read)
    assert set(by_id) == {sender} and by_id[sender]["is_broadcaster"]
    assert {name: row["user_id"] for name, row in by_name.items()} == {"named1": named, "sender1": sender}
    assert not by_name["named1"]["is_broadcaster"]
    assert await db.read(lambda tx: repo.standings_and_named(tx, sender, [], [], NOW)) == ({}, {})
