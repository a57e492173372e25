"""The channel actor's loop on SQLite and PostgreSQL, with test components (tests/hub/probe.py):
batching, refusal isolation, fallback, a full inbox, shutdown, idle retirement, deadlines
under MockClock and their resumption after a restart."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from tests.hub import probe
from tests.hub.conftest import Hub, make_user, retired, two_processes
from volthub.hub.actor import ChannelBusy, ChannelUnavailable, ChatRefused
from volthub.hub.clock import TrioClock
from volthub.hub.components.chat import OutgoingMessage, SendMessage, UpdateSettings
from volthub.hub.kinds import chat_kind
from volthub.persistence.postgres import PostgresDatabase

KINDS = (chat_kind(), probe.PROBE)


class CountingHub(Hub):
    """Counts the publishing transactions (one per batch)."""

    def __init__(self, db, **options):
        super().__init__(db, **options)
        self.transactions = 0
        write = self.publisher.write

        async def counted(change, **options):
            self.transactions += 1
            return await write(change, **options)

        self.publisher.write = counted


@pytest.fixture
async def start(db, nursery):
    async def start(**options) -> CountingHub:
        options.setdefault("kinds", KINDS)
        hub = CountingHub(db, **options)
        await nursery.start(hub.registry.run)
        return hub

    return start


async def hold_actor(hub, channel, nursery):
    """Start a Hold command; returns its release once the actor is inside it."""
    holding, release = threading.Event(), threading.Event()
    nursery.start_soon(hub.registry.call, channel, probe.Hold(holding, release))
    await trio.to_thread.run_sync(holding.wait)
    return release


async def test_queued_commands_share_one_transaction_and_each_gets_its_answer(db, start):
    hub = await start()
    channel = await make_user(db, "batched")
    answers: dict[str, object] = {}

    async def call(key, command):
        try:
            answers[key] = await hub.registry.call(channel, command)
        except ChatRefused as refused:
            answers[key] = refused.refusal.code

    async with trio.open_nursery() as nursery:
        release = await hold_actor(hub, channel, nursery)
        before = hub.transactions
        nursery.start_soon(call, "echo", probe.Echo(1))
        nursery.start_soon(call, "refused", probe.Refuse("no_thanks"))
        nursery.start_soon(call, "message", hub_message(channel, channel))  # exempt from modes
        nursery.start_soon(call, "settings", update(followersOnly=True))
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert hub.transactions - before == 1  # the four queued commands: one transaction
    assert answers["echo"] == 1 and answers["refused"] == "no_thanks"
    assert isinstance(answers["message"], str) and answers["settings"].followers_only
    assert [e.data["messageId"] for e in hub.named("chat.message")] == [answers["message"]]


def answering(hub, answers):
    """A call of a command on a channel whose answer, or error, goes to `answers[key]`."""

    async def call(key, channel, command):
        try:
            answers[key] = await hub.registry.call(channel, command)
        except Exception as error:
            answers[key] = error

    return call


def hub_message(channel, sender):
    return SendMessage(sender, OutgoingMessage("in a batch"))


def update(**patch):
    return UpdateSettings(patch)


async def test_a_failing_batch_falls_back_to_one_transaction_per_command(db, start):
    hub = await start()
    channel = await make_user(db, "fallback")
    answers: dict[str, object] = {}
    call = answering(hub, answers)

    async with trio.open_nursery() as nursery:
        release = await hold_actor(hub, channel, nursery)
        nursery.start_soon(call, "message", channel, hub_message(channel, channel))
        nursery.start_soon(call, "boom", channel, probe.Explode())
        nursery.start_soon(call, "echo", channel, probe.Echo("ok"))
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert isinstance(answers["boom"], RuntimeError) and answers["echo"] == "ok"
    # The message of the rolled-back batch was written again, alone, and published once.
    assert [e.data["messageId"] for e in hub.named("chat.message")] == [answers["message"]]
    actor = hub.registry.actor(channel)
    await hub.registry.call(channel, probe.Echo("still serving"))
    assert hub.registry.actor(channel) is actor


async def test_a_batch_run_again_after_another_channels_failure_starts_from_what_is_stored(postgres_url, nursery):
    # PostgreSQL commits the batches of several channels in one transaction; when one fails,
    # the others are rolled back with it and run again. The countdown a batch started in
    # its first run is not running when it runs again (which would refuse a second start),
    # and its chat message is stored and published once.
    database = PostgresDatabase(postgres_url, pool_size=4, group_slots=1)  # one group at a time
    await database.open()
    try:
        await database.write(probe.create_table)
        hub = CountingHub(database, kinds=(chat_kind(), probe.PROBE, probe.COUNTDOWN))
        await nursery.start(hub.registry.run)
        holder = await make_user(database, "holder")
        # A group runs its batches in channel order: the one that fails comes second.
        succeeding, failing = sorted([await make_user(database, "countdown"), await make_user(database, "exploder")])
        for channel in (succeeding, failing):
            await hub.registry.call(channel, probe.Echo("loaded"))  # actors up before the group forms
        answers: dict[str, object] = {}
        call = answering(hub, answers)

        async with trio.open_nursery() as calls:
            release = await hold_actor(hub, holder, calls)
            # Both reach the idle actor before it wakes: one batch.
            calls.start_soon(call, "countdown", succeeding, probe.StartCountdown(60))
            calls.start_soon(call, "message", succeeding, hub_message(succeeding, succeeding))
            calls.start_soon(call, "boom", failing, probe.Explode())
            await trio.testing.wait_all_tasks_blocked()
            release.set()
        assert isinstance(answers["boom"], RuntimeError)
        assert isinstance(answers["countdown"], int) and isinstance(answers["message"], str)
        assert await database.read(probe.open_countdowns) == [succeeding]
        assert [e.data["messageId"] for e in hub.named("chat.message")] == [answers["message"]]
        assert hub.transactions == 5  # the two echoes, the hold, then one batch per channel
    finally:
        await database.close()


async def test_a_full_inbox_is_refused_at_once(db, start):
    hub = await start(inbox_size=1)
    channel = await make_user(db, "busy")
    results = []

    async def call(command):
        results.append(await hub.registry.call(channel, command))

    async with trio.open_nursery() as nursery:
        release = await hold_actor(hub, channel, nursery)
        nursery.start_soon(call, probe.Echo("queued"))  # fills the one-slot inbox
        await trio.testing.wait_all_tasks_blocked()
        assert hub.registry.actor(channel).queued == 1
        with pytest.raises(ChannelBusy):
            await hub.registry.call(channel, probe.Echo("one too many"))
        release.set()
    assert results == ["queued"]


async def test_shutdown_answers_every_waiting_caller(db):
    """Cancelled while a batch runs in the store: that batch still commits and is answered;
    the queued caller hears ChannelUnavailable, and so does anyone after shutdown."""
    hub = Hub(db, kinds=KINDS)
    channel = await make_user(db, "closing")
    outcome = []

    async def call(command):
        try:
            outcome.append(await hub.registry.call(channel, command))
        except ChannelUnavailable:
            outcome.append("unavailable")

    with trio.fail_after(30):  # a caller left waiting would hang here: fail instead
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def run_registry(task_status=trio.TASK_STATUS_IGNORED):
                with scope:
                    await hub.registry.run(task_status=task_status)

            await nursery.start(run_registry)
            holding, release = threading.Event(), threading.Event()
            nursery.start_soon(call, probe.Hold(holding, release))
            await trio.to_thread.run_sync(holding.wait)
            nursery.start_soon(call, probe.Echo("queued"))
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            release.set()
    assert sorted(outcome) == ["held", "unavailable"]
    with pytest.raises(ChannelUnavailable):
        await hub.registry.call(channel, probe.Echo("late"))


async def test_an_idle_actor_retires_and_a_busy_component_keeps_it(db, start, mock_clock):
    await db.write(probe.create_table)
    hub = await start(idle_seconds=60, kinds=(*KINDS, probe.COUNTDOWN), clock=TrioClock())
    idle, counting = await make_user(db, "retiring"), await make_user(db, "counting")
    await hub.registry.call(idle, probe.Echo(1))
    await hub.registry.call(counting, probe.StartCountdown(600))
    await retired(hub.registry.actor(idle), mock_clock)
    assert idle not in hub.registry.active_channels()
    assert counting in hub.registry.active_channels()  # its countdown is not idle
    await finish_countdowns(db)


async def finish_countdowns(db):
    """The PostgreSQL test database is shared: leave no open countdown to later tests."""
    await db.write(lambda tx: tx.execute("UPDATE test_countdowns SET status = 'done'"))


async def settled(hub, channel):
    """Once this returns, the actor has taken any deadline step already due: its loop is
    sequential, and a second command can only be read after the step that was due."""
    for _ in range(2):
        await hub.registry.call(channel, probe.Echo(None))


async def test_a_deadline_fires_under_the_mock_clock(db, start, mock_clock):
    await db.write(probe.create_table)
    hub = await start(kinds=(*KINDS, probe.COUNTDOWN), clock=TrioClock())
    channel = await make_user(db, "countdown")
    ends_at = await hub.registry.call(channel, probe.StartCountdown(30))
    with pytest.raises(ChatRefused):  # the component's own rule: one countdown at a time
        await hub.registry.call(channel, probe.StartCountdown(30))
    mock_clock.jump(29)
    await trio.testing.wait_all_tasks_blocked()
    assert hub.named("countdown.end") == []
    mock_clock.jump(2)
    await settled(hub, channel)
    [event] = hub.named("countdown.end")
    assert event.channel_id == channel and event.data["endedAt"] >= ends_at
    status = await db.read(lambda tx: tx.scalar("SELECT status FROM test_countdowns WHERE channel_id = ?", (channel,)))
    assert status == "done"


async def test_an_open_deadline_survives_a_restart(db, nursery, mock_clock):
    await db.write(probe.create_table)
    await finish_countdowns(db)
    kinds = (*KINDS, probe.COUNTDOWN)
    clock = TrioClock()
    before = Hub(db, clock=clock, kinds=kinds)
    channel = await make_user(db, "restarted")
    async with trio.open_nursery() as first_process:
        await first_process.start(before.registry.run)
        await before.registry.call(channel, probe.StartCountdown(30))
        first_process.cancel_scope.cancel()  # the process stops before the countdown ends
    assert before.named("countdown.end") == []

    # Two processes start on the same database: each resumes the open countdown, and the
    # guarded write lets exactly one of them end it.
    after, other = await two_processes(db, nursery, channel, clock=clock, kinds=kinds)
    mock_clock.jump(31)
    for hub in (after, other):
        await settled(hub, channel)
        assert hub.registry.actor(channel).component("countdown").ends_at is None
    assert len(after.named("countdown.end")) + len(other.named("countdown.end")) == 1
