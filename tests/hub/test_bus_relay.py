"""The PostgreSQL bus relay (hub/bus.py PostgresRelay, persistence/event_log.py): several
relays on one database stand for several processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
import trio

from volthub.hub.bus import PostgresRelay
from volthub.hub.clock import SystemClock
from volthub.hub.fanout import Fanout
from volthub.hub.publisher import Emitter, Event, EventPublisher
from volthub.persistence import Database, event_log, migrate, open_database

WAIT = 10.0  # a bound on waiting for real threads and PostgreSQL; never asserted on


class Process:
    """One process's share: its database pool, its relay and what its listeners got."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.relay = PostgresRelay(database, SystemClock())
        self.publisher = EventPublisher(database, self.relay, SystemClock(), event_log=self.relay)
        self.heard: list[Event] = []
        self.backfilled: list[Event] = []
        self._changed = trio.Event()
        self.relay.subscribe(self._hear)
        self.relay.add_backfill(self.backfilled.append)

    def _hear(self, event: Event) -> None:
        self.heard.append(event)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[list[Event]], bool]) -> None:
        with trio.fail_after(WAIT):
            while not predicate(self.heard):
                await self._changed.wait()

    async def emit(self, channel_id: str, *payloads: dict[str, Any]) -> None:
        def change(tx: Any, emitter: Emitter) -> None:
            for data in payloads:
                emitter.emit(channel_id, "chat.message", data)

        await self.publisher.write(change)


@pytest.fixture
async def processes(postgres_url: str, nursery: trio.Nursery) -> AsyncIterator[Callable[..., Any]]:
    databases: list[Database] = []

    async def start(run: bool = True) -> Process:
        database = open_database(postgres_url, pool_size=4)
        await database.open()
        await migrate(database)
        databases.append(database)
        process = Process(database)
        if run:
            nursery.start_soon(process.relay.run)
            with trio.fail_after(WAIT):
                await process.relay.wait_connected()
        return process

    yield start
    nursery.cancel_scope.cancel()
    for database in databases:
        await database.close()


def texts(events: list[Event], channel: str | None = None) -> list[str]:
    return [e.data["text"] for e in events if channel is None or e.channel_id == channel]


async def test_an_event_reaches_every_process_once_in_channel_order(processes: Any) -> None:
    one, two = await processes(), await processes()
    await one.emit("c1", {"text": "a"}, {"text": "b"})
    await two.emit("c1", {"text": "c"})
    await one.emit("c2", {"text": "x"})
    await two.emit("c1", {"text": "end"})
    for process in (one, two):
        await process.wait_for(lambda heard: "end" in texts(heard))
        assert texts(process.heard, "c1") == ["a", "b", "c", "end"]  # the publisher hears it once too
        assert [e.seq for e in process.heard if e.channel_id == "c1"] == [1, 2, 3, 4]
        assert texts(process.heard, "c2") == ["x"]


async def test_a_payload_too_large_for_notify_travels_by_reference(processes: Any) -> None:
    one, two = await processes(), await processes()
    big = "x" * 20_000
    await one.emit("c1", {"text": "big", "body": big})
    await two.wait_for(lambda heard: len(heard) == 1)
    assert two.heard[0].data["body"] == big


async def test_a_transaction_of_many_events_in_one_channel_is_heard_in_order_large_ones_by_reference(
    processes: Any,
) -> None:
    one, two = await processes(), await processes()
    big = "y" * 9000
    await one.emit("c1", *({"text": str(i), "body": big if i == 3 else ""} for i in range(8)))
    for process in (one, two):
        await process.wait_for(lambda heard: len(heard) == 8)
        assert texts(process.heard) == [str(i) for i in range(8)]
        assert [e.seq for e in process.heard] == list(range(1, 9))
        assert process.heard[3].data["body"] == big


async def test_a_lost_connection_reconnects_and_replays_the_gap(processes: Any, postgres_url: str) -> None:
    one, two = await processes(), await processes()
    await one.emit("c1", {"text": "before"})
    await two.wait_for(lambda heard: len(heard) == 1)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (two.relay.backend_pid,))
    for n in range(5):  # most of these land while the second relay is away
        await one.emit("c1", {"text": f"gap {n}"})
    await two.wait_for(lambda heard: "gap 4" in texts(heard))
    await one.emit("c1", {"text": "after"})
    await two.wait_for(lambda heard: "after" in texts(heard))
    assert texts(two.heard) == ["before", *(f"gap {n}" for n in range(5)), "after"]
    assert two.relay.reconnects >= 1


async def test_test_events_cross_processes_without_an_event_log_row(processes: Any) -> None:
    one, two = await processes(), await processes()
    sent = one.publisher.publish_ephemeral("c1", "channel.follow", {"text": "test follow"})
    await two.wait_for(lambda heard: len(heard) == 1)
    assert two.heard[0].id == sent.id and two.heard[0].is_test
    assert two.heard[0].data == {"text": "test follow"} and two.heard[0].seq is None
    await one.wait_for(lambda heard: len(heard) == 1)
    assert await one.database.read(event_log.last_position) == 0  # nothing of a test is stored
    await one.emit("c1", {"text": "real"})  # a real event after it is still in order, seq 1
    await two.wait_for(lambda heard: len(heard) == 2)
    assert two.heard[1].seq == 1


async def test_a_starting_process_fills_resume_buffers_but_delivers_nothing_old(processes: Any) -> None:
    one = await processes()
    await one.emit("c1", {"text": "old 1"}, {"text": "old 2"})
    await one.wait_for(lambda heard: len(heard) == 2)
    late = await processes()
    assert texts(late.backfilled) == ["old 1", "old 2"]
    await one.emit("c1", {"text": "new"})
    await late.wait_for(lambda heard: len(heard) == 1)
    assert texts(late.heard) == ["new"]

    # The fan-out's resume buffer: an id handed out by the first process resumes on the late one.
    fanout = Fanout()
    for event in late.backfilled:
        fanout.remember(event)
    fanout.publish(late.heard[0])
    resume = fanout.since("c1", one.heard[0].id)
    assert resume.found and texts(resume.events) == ["old 2", "new"]


async def test_duplicates_and_gaps_are_settled_by_channel_position(processes: Any) -> None:
    one = await processes()
    two = await processes(run=False)  # driven by hand below

    def log(channel: str, *texts_: str) -> Callable[[Any], list[event_log.LoggedEvent]]:
        entries = [event_log.NewEntry(channel, f"id-{t}", "chat.message", {"d": {"text": t}, "t": "t"}) for t in texts_]
        return lambda tx: event_log.append(tx, entries, 1)

    first = await one.database.write(log("c9", "1", "2", "3"))
    await two.relay._deliver(first[0])
    await two.relay._deliver(first[0])  # a duplicate: dropped
    await two.relay._deliver(first[2])  # 2 was missed: read back from the log first
    assert texts(two.heard) == ["1", "2", "3"]
    assert two.relay.duplicates == 1


def test_notification_payloads_round_trip() -> None:
    item = event_log.LoggedEvent(7, "c1", 3, "e", "chat.message", {"d": {"a": 1}}, 5)
    assert event_log.parse_notification(event_log.notification(item, '{"d":{"a":1}}')) == item
    huge = '{"d":"' + "y" * 9000 + '"}'
    assert event_log.parse_notification(event_log.notification(item, huge)) == 7


async def test_caught_up_returns_when_the_start_reads_what_was_published_before_listening(
    processes: Any, nursery: trio.Nursery
) -> None:
    """An event published before the relay listens reaches it by the start's read of the log,
    not by NOTIFY: a caller already waiting in `caught_up` must be woken by that read too."""
    one = await processes(run=False)
    await one.emit("c1", {"text": "before"})
    waited = trio.Event()

    async def wait_caught_up() -> None:
        await one.relay.caught_up()
        waited.set()

    nursery.start_soon(wait_caught_up)
    await trio.sleep(0)  # it waits now: nothing has been relayed yet
    assert not waited.is_set()
    nursery.start_soon(one.relay.run)
    with trio.fail_after(WAIT):
        await waited.wait()
