"""The chat store port over a real transaction, on SQLite and PostgreSQL."""

from __future__ import annotations

from tests.hub.conftest import make_user
from volthub.hub import chat_store
from volthub.hub.chat_store import TxChatStore
from volthub.hub.components import chat
from volthub.hub.components.chat import MessageRef
from volthub.hub.components.chat_rules import ChatSettings
from volthub.persistence import chat as repo

NOW = 1_800_000_000_000


async def test_reads_and_writes_through_the_port(db):
    channel, fan = await make_user(db, "portchan"), await make_user(db, "PortFan")

    def write(tx):
        store = TxChatStore(tx, channel, NOW)
        store.apply(chat.InsertMessage("m1", fan, False, {"messageId": "m1", "username": "PortFan"}))
        store.apply(chat.SaveSettings(ChatSettings(emote_only=True)))
        store.apply(chat.SetBan(fan, channel, "spam", NOW + 1000))

    await db.write(write)

    def read(tx):
        store = TxChatStore(tx, channel, NOW)
        return (
            store.settings(),
            store.standing(fan),
            store.user_id_of("portfan"),
            store.standing_and_people_named(channel, ["PORTFAN", "nobody"]),
            store.message("m1"),
            store.last_message_at(fan),
            store.ban_is_permanent(fan),
        )

    settings, standing, user_id, people, message, last_at, permanent = await db.read(read)
    assert settings == ChatSettings(emote_only=True)
    assert standing.timeout_ends_at == NOW + 1000 and not standing.is_broadcaster
    sender, people = people
    assert sender is not None and sender.is_broadcaster and sender.user_id == channel
    assert user_id == fan and people == {"portfan": {"userId": fan, "username": "PortFan", "displayName": "Portfan"}}
    assert message == MessageRef("m1", fan, "PortFan", deleted=False)
    assert last_at == NOW and permanent is False

    def lift_and_delete(tx):
        store = TxChatStore(tx, channel, NOW)
        store.apply(chat.RemoveBan(fan))
        store.apply(chat.DeleteMessage("m1", channel))
        return store.ban_is_permanent(fan), store.message("m1")

    assert await db.write(lift_and_delete) == (None, MessageRef("m1", fan, "PortFan", deleted=True))


async def test_prune_through_the_port(db):
    channel = await make_user(db, "portprune")

    def write(tx):
        store = TxChatStore(tx, channel, NOW)
        for number in range(1, 6):
            store.apply(chat.InsertMessage(f"p{number}-{channel}", channel, False, {"message": str(number)}))
        store.apply(chat.PruneHistory(3, NOW + 1))

    await db.write(write)
    assert [m["message"] for m in await db.read(lambda tx: repo.history(tx, channel, 100))] == ["4", "5"]


async def test_a_message_prunes_the_history_when_its_number_makes_a_prune_due(db):
    channel = await make_user(db, "portbound")
    bound = chat.HistoryBound(limit=3, every=2)

    def kept():
        return db.read(lambda tx: [m["n"] for m in repo.history(tx, channel, 100)])

    # Seven messages an hour apart, so the slow-mode keep-back spares none of the old ones.
    for number in range(1, 8):
        later = NOW + number * 3_600_000

        def insert(tx, number=number, later=later):
            TxChatStore(tx, channel, later).apply(
                chat.InsertMessage(f"b{number}-{channel}", channel, False, {"n": number}, bound)
            )

        await db.write(insert)
        if number == 3:
            assert await kept() == [1, 2, 3]  # at the limit: nothing due
    # 4 (past the limit, even) dropped 1; 5 is odd; 6 dropped 2 and 3; 7 is odd.
    assert await kept() == [4, 5, 6, 7]


async def test_reads_for_services_make_the_components_records(db):
    channel, fan = await make_user(db, "readchan"), await make_user(db, "readfan")
    assert await db.read(lambda tx: chat_store.read_settings(tx, channel)) == ChatSettings()
    members = await db.read(lambda tx: chat_store.read_members(tx, channel, [channel, fan, "missing"], NOW))
    assert set(members) == {channel, fan}
    assert members[channel].standing.is_broadcaster and members[fan].avatar_url is None
