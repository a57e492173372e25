"""What is PostgreSQL's own in its broker (hub/bus.py PostgresBroker, persistence/event_log.py):
payloads by reference, replay after a lost connection, positions settling duplicates and
gaps. What every broker does is in test_broker_conformance.py; the set-up is shared
(tests/hub/brokers.py): several brokers on one database stand for several processes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import trio

from tests.hub.brokers import WAIT, Process, texts
from volthub.hub.publisher import Emitter
from volthub.persistence import event_log


async def start(start_process: Any, run: bool = True) -> Process:
    process: Process = await start_process("postgres", run=run)
    return process


async def emit_bodies(process: Process, channel_id: str, *bodies: dict[str, Any]) -> None:
    """Events of one transaction, each with a data of its own."""

    def change(tx: Any, emitter: Emitter) -> None:
        for data in bodies:
            emitter.emit(channel_id, "chat.message", data)

    await process.publisher.write(change)


async def test_a_payload_too_large_for_notify_travels_by_reference(start_process: Any) -> None:
    one, two = await start(start_process), await start(start_process)
    big = "x" * 20_000
    await one.emit("c1", "big", body=big)
    await two.wait_for(lambda heard: len(heard) == 1)
    assert two.heard[0].data["body"] == big


async def test_a_transaction_of_many_events_in_one_channel_is_heard_in_order_large_ones_by_reference(
    start_process: Any,
) -> None:
    one, two = await start(start_process), await start(start_process)
    big = "y" * 9000
    await emit_bodies(one, "c1", *({"text": str(i), "body": big if i == 3 else ""} for i in range(8)))
    for process in (one, two):
        await process.wait_for(lambda heard: len(heard) == 8)
        assert texts(process.heard) == [str(i) for i in range(8)]
        assert [e.seq for e in process.heard] == list(range(1, 9))
        assert process.heard[3].data["body"] == big


async def test_a_lost_connection_reconnects_and_replays_the_gap(start_process: Any, postgres_url: str) -> None:
    one, two = await start(start_process), await start(start_process)
    await one.emit("c1", "before")
    await two.wait_for(lambda heard: len(heard) == 1)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (two.broker.backend_pid,))
    for n in range(5):  # most of these land while the second broker is away
        await one.emit("c1", f"gap {n}")
    await two.wait_for(lambda heard: "gap 4" in texts(heard))
    await one.emit("c1", "after")
    await two.wait_for(lambda heard: "after" in texts(heard))
    assert texts(two.heard) == ["before", *(f"gap {n}" for n in range(5)), "after"]
    assert two.broker.reconnects >= 1


async def test_duplicates_and_gaps_are_settled_by_channel_position(start_process: Any) -> None:
    one = await start(start_process)
    two = await start(start_process, run=False)  # driven by hand below

    def log(channel: str, *texts_: str) -> Callable[[Any], list[event_log.LoggedEvent]]:
        entries = [event_log.NewEntry(channel, f"id-{t}", "chat.message", {"d": {"text": t}, "t": "t"}) for t in texts_]
        return lambda tx: event_log.append(tx, entries, 1)

    first = await one.database.write(log("c9", "1", "2", "3"))
    await two.broker._deliver(first[0])
    await two.broker._deliver(first[0])  # a duplicate: dropped
    await two.broker._deliver(first[2])  # 2 was missed: read back from the log first
    assert texts(two.heard) == ["1", "2", "3"]
    assert two.broker.duplicates == 1


def test_notification_payloads_round_trip() -> None:
    item = event_log.LoggedEvent(7, "c1", 3, "e", "chat.message", {"d": {"a": 1}}, 5)
    assert event_log.parse_notification(event_log.notification(item, '{"d":{"a":1}}')) == item
    huge = '{"d":"' + "y" * 9000 + '"}'
    assert event_log.parse_notification(event_log.notification(item, huge)) == 7


async def test_caught_up_returns_when_the_start_reads_what_was_published_before_listening(
    start_process: Any, nursery: trio.Nursery
) -> None:
    """An event published before the broker listens reaches it by the start's read of the log,
    not by NOTIFY: a caller already waiting in `caught_up` must be woken by that read too."""
    one = await start(start_process, run=False)
    await one.emit("c1", "before")
    waited = trio.Event()

    async def wait_caught_up() -> None:
        await one.broker.caught_up()
        waited.set()

    nursery.start_soon(wait_caught_up)
    await trio.sleep(0)  # it waits now: nothing has been relayed yet
    assert not waited.is_set()
    nursery.start_soon(one.broker.run)
    with trio.fail_after(WAIT):
        await waited.wait()
