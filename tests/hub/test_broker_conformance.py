"""What every broker (hub/broker.py) must do, run against each one through one set-up
(tests/hub/brokers.py): in-process on SQLite, PostgreSQL's (LISTEN/NOTIFY) and Redis's on a
real redis-server. The brokers of several processes are run twice on one database, as two
processes of a deployment."""

from __future__ import annotations

import uuid
from typing import Any

import trio

from tests.hub.brokers import SHARED, WAIT, Process, texts
from volthub.hub.presence import Snapshot
from volthub.hub.publisher import Event
from volthub.hub.recovery_store import Lost
from volthub.protocol.ratelimit import Gcra, Rate, to_ns
from volthub.services.chat import presence_snapshot


async def deployment(kind: str, start_process: Any, **options: Any) -> list[Process]:
    """One process in-process, two for a broker of several processes."""
    return [await start_process(kind, **options) for _ in range(2 if kind in SHARED else 1)]


async def test_an_event_reaches_every_process_once_in_channel_order(kind: str, start_process: Any) -> None:
    processes = await deployment(kind, start_process)
    first, last = processes[0], processes[-1]
    for process in processes:
        await process.follow("c1", "c2")
    await first.emit("c1", "a", "b")
    await last.emit("c1", "c")
    await first.emit("c2", "x")
    await last.emit("c1", "end")
    for process in processes:
        await process.wait_for(lambda heard: "end" in texts(heard) and "x" in texts(heard))
        await process.broker.caught_up()
        assert texts(process.heard, "c1") == ["a", "b", "c", "end"]  # the publisher hears it once too
        assert texts(process.heard, "c2") == ["x"]
        if kind in SHARED:  # the position each got in the log, the same everywhere
            assert [e.seq for e in process.heard if e.channel_id == "c1"] == [1, 2, 3, 4]
    await first.emit("c2", "barrier")  # after it, nothing of the above arrives again
    for process in processes:
        await process.wait_for(lambda heard: "barrier" in texts(heard))
        assert len(process.heard) == 6


async def test_a_removed_listener_hears_no_more_and_a_failing_one_starves_no_other(
    kind: str, start_process: Any
) -> None:
    [one, *_] = await deployment(kind, start_process)
    removed: list[Event] = []
    after_the_failing_one: list[Event] = []

    def failing(event: Event) -> None:
        raise RuntimeError("a broken listener")

    remove = one.broker.subscribe(removed.append)
    one.broker.subscribe(failing)
    one.broker.subscribe(after_the_failing_one.append)
    await one.follow("c1")
    await one.emit("c1", "a")
    await one.wait_for(lambda heard: texts(heard) == ["a"])
    remove()
    await one.emit("c1", "b")
    await one.wait_for(lambda heard: texts(heard) == ["a", "b"])
    assert texts(removed) == ["a"]
    assert texts(after_the_failing_one) == ["a", "b"]


async def test_the_event_log_stamps_channel_positions_where_processes_share_it(kind: str, start_process: Any) -> None:
    one = await start_process(kind, run=False)
    events = [Event(str(uuid.uuid4()), "chat.message", "c1", {"n": n}, "2026-01-01T00:00:00+00:00") for n in range(2)]
    stamped = await one.database.write(lambda tx: one.broker.append(tx, events, 1))
    if kind in SHARED:
        assert [(e.id, e.seq) for e in stamped] == [(e.id, n + 1) for n, e in enumerate(events)]
    else:  # one process: publish order is the order, nothing is logged
        assert stamped is events and all(e.seq is None for e in stamped)


async def test_a_test_event_reaches_every_process_and_is_stored_nowhere(kind: str, start_process: Any) -> None:
    processes = await deployment(kind, start_process)
    for process in processes:
        await process.follow("c1")
    first = processes[0]
    sent = first.publisher.publish_ephemeral("c1", "chat.message", {"text": "just a test"})
    for process in processes:
        await process.wait_for(lambda heard: len(heard) == 1)
    await first.emit("c1", "real")
    for process in processes:
        await process.wait_for(lambda heard: "real" in texts(heard))
        assert process.heard[0].id == sent.id
        seq = 1 if kind in SHARED else None  # a test event takes no place in the sequence
        assert [(e.data["text"], e.is_test, e.seq) for e in process.heard] == [
            ("just a test", True, None),
            ("real", False, seq),
        ]
    if kind in SHARED:
        assert await first.database.read(lambda tx: tx.scalar("SELECT count(*) FROM event_log")) == 1


async def test_a_process_that_starts_hearing_a_channel_gets_its_history_not_deliveries(
    kind: str, start_process: Any
) -> None:
    one = await start_process(kind)
    await one.follow("c1")
    await one.emit("c1", "old 1", "old 2")
    await one.wait_for(lambda heard: len(heard) == 2)
    if kind not in SHARED:
        assert one.history == {}  # nothing was published before the one process
        return
    late = await start_process(kind)
    await late.follow("c1")  # prepared: the history is in before a client subscribes
    assert texts(late.history["c1"]) == ["old 1", "old 2"]
    assert late.heard == []
    await one.emit("c1", "new")
    await late.wait_for(lambda heard: len(heard) == 1)
    assert texts(late.heard) == ["new"]
    # The fan-out's resume buffer: an id handed out by the first process resumes on the late one.
    resume = late.fanout.since("c1", one.heard[0].id)
    assert resume.found and texts(resume.events) == ["old 2", "new"]


class Local:
    """A process's own connections, as the fan-out reports them."""

    def __init__(self, channels: dict[str, Snapshot]) -> None:
        self.channels = channels
        self.presence_listeners: list[Any] = []

    def snapshot(self, channel_id: str) -> Snapshot:
        return self.channels.get(channel_id, ([], 0))

    def active_channels(self) -> list[str]:
        return list(self.channels)


async def test_presence_adds_up_every_process_and_a_stopped_one_leaves(kind: str, start_process: Any) -> None:
    processes = await deployment(kind, start_process)
    mine = Local({"c1": (["alice"], 2)})
    theirs = Local({"c1": (["bob"], 1), "c2": (["carol"], 0)})
    presences = [process.broker.presence(local, 5.0) for process, local in zip(processes, (mine, theirs), strict=False)]
    everyone = (["alice", "bob"], 3) if kind in SHARED else (["alice"], 2)

    async def seen(channel_id: str) -> tuple[list[str], int]:
        users, anonymous = await presence_snapshot(presences[0], channel_id)
        return sorted(users), anonymous

    async with trio.open_nursery() as nursery:
        for presence in presences:
            nursery.start_soon(presence.run)
        carol = (["carol"], 0) if kind in SHARED else ([], 0)
        with trio.fail_after(WAIT):  # a process's channels may be written one after another
            while (await seen("c1"), await seen("c2")) != (everyone, carol):
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()  # shutdown: each removes its share
    assert await seen("c1") == (["alice"], 2)


async def test_a_dropped_connections_state_is_taken_once_by_any_process(kind: str, start_process: Any) -> None:
    processes = await deployment(kind, start_process)
    stores = [process.broker.recovery_store(120.0) for process in processes]
    keeper, taker = stores[0], stores[-1]
    async with trio.open_nursery() as nursery:
        for store in stores:
            nursery.start_soon(store.run)
        keeper.keep("pid-1", Lost("sid-1", "/", "u1", None, {"c1": True}, {"c1": "e1"}), now=0.0)
        with trio.fail_after(WAIT):  # written by the store's service, at once for a drop
            while (taken := await taker.take("pid-1", "u1", "/", now=0.0)) is None:
                await trio.sleep(0.05)
        assert taken.sid == "sid-1" and taken.final and taken.last_sent == {"c1": "e1"}
        assert await keeper.take("pid-1", "u1", "/", now=0.0) is None  # once, whoever asks
        keeper.keep("pid-2", Lost("sid-2", "/", "u1", None, {"c1": True}), now=0.0)
        with trio.fail_after(WAIT):
            while (other := await taker.take("pid-2", "u1", "/", now=0.0)) is None:
                assert await taker.take("pid-2", "u2", "/", now=0.0) is None  # only by its user
                await trio.sleep(0.05)
        assert other.sid == "sid-2"
        nursery.cancel_scope.cancel()


async def test_shared_budgets_are_spent_once_across_processes(kind: str, start_process: Any) -> None:
    processes = await deployment(kind, start_process, shared_budgets=True)
    limiters = {id(process): Gcra(Rate.per(3, 60)) for process in processes}  # only the store is shared
    now_ns = to_ns(processes[0].clock.now())
    decisions = []
    for process in (processes * 4)[:4]:  # taking turns where there are two
        decision = await process.broker.budgets.spend(limiters[id(process)], ("ip", "192.0.2.1"), "global", now_ns)
        decisions.append(decision.allowed)
    assert decisions == [True, True, True, False]


async def test_budgets_are_counted_per_process_unless_shared(shared_kind: str, start_process: Any) -> None:
    processes = await deployment(shared_kind, start_process, shared_budgets=False)
    now_ns = to_ns(processes[0].clock.now())
    for process in processes:
        limiter = Gcra(Rate.per(3, 60))
        allowed = [
            (await process.broker.budgets.spend(limiter, ("ip", "192.0.2.1"), "global", now_ns)).allowed
            for _ in range(4)
        ]
        assert allowed == [True, True, True, False]


async def test_a_connected_broker_reports_no_problem_and_waits_for_nothing(kind: str, start_process: Any) -> None:
    [one, *_] = await deployment(kind, start_process)
    assert one.broker.problem is None
    with trio.fail_after(WAIT):
        await one.broker.wait_connected()
        await one.broker.caught_up()
        await one.broker.prepare([])
