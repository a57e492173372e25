import pytest
import trio

from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import TrioClock, iso8601
from volthub.hub.publisher import EventPublisher
from volthub.persistence import migrate, open_database


@pytest.fixture
async def db(sqlite_url):
    database = open_database(sqlite_url)
    await database.open()
    await migrate(database)
    yield database
    await database.close()


async def test_events_are_published_after_commit_and_sinks_see_them_inside(db):
    bus, published, sunk = InProcessBroker(), [], []
    bus.subscribe(published.append)
    publisher = EventPublisher(db, bus, TrioClock(start=1_700_000_000))

    def sink(tx, events):
        assert published == []  # still inside the transaction
        sunk.extend(e.name for e in events)
        tx.execute("INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?)", ("sink", "x", 1))

    publisher.add_transaction_sink(sink)
    result = await publisher.write(lambda tx, emitter: emitter.emit("chan", "channel.follow", {"a": 1}) and "done")
    assert result == "done" and sunk == ["channel.follow"]
    assert [e.name for e in published] == ["channel.follow"]
    assert published[0].envelope() == {
        "event": "channel.follow",
        "data": {"a": 1},
        "timestamp": iso8601(1_700_000_000_000),
    }
    assert await db.read(lambda tx: tx.scalar("SELECT value FROM server_secrets WHERE name = 'sink'")) == "x"


async def test_rolled_back_change_publishes_nothing(db):
    bus, published = InProcessBroker(), []
    bus.subscribe(published.append)
    publisher = EventPublisher(db, bus, TrioClock())

    def change(tx, emitter):
        emitter.emit("chan", "channel.follow", {})
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await publisher.write(change)
    assert published == []


async def test_a_broken_listener_does_not_starve_others():
    bus, seen = InProcessBroker(), []

    def broken(event):
        raise ValueError("listener bug")

    bus.subscribe(broken)
    unsubscribe = bus.subscribe(seen.append)
    from volthub.hub.publisher import Emitter

    event = Emitter(now_ms=0).emit("c", "x", {})
    bus.publish(event)
    unsubscribe()
    bus.publish(event)
    assert seen == [event]


async def test_trio_clock_follows_mock_clock(autojump_clock):
    clock = TrioClock(start=1000.0)
    assert clock.now() == 1000.0
    await trio.sleep(3600)
    assert clock.now() == pytest.approx(4600.0)


def test_iso8601_is_utc_with_milliseconds():
    assert iso8601(0) == "1970-01-01T00:00:00.000Z"
    assert iso8601(1_795_353_325_774) == "2026-11-22T13:15:25.774Z"


def test_sandbox_events_are_marked_and_not_written():
    bus, seen = InProcessBroker(), []
    bus.subscribe(seen.append)

    class NoDatabase:
        async def write(self, fn):  # pragma: no cover - must never be called
            raise AssertionError("ephemeral events must not touch the store")

    publisher = EventPublisher(NoDatabase(), bus, TrioClock(start=0))
    trio.run(lambda: _publish(publisher))
    assert seen[0].is_test and seen[0].name == "channel.raid"


async def _publish(publisher):
    publisher.publish_ephemeral("chan", "channel.raid", {"viewers": 5, "isTest": True})
