"""PostgreSQL group commit: keyed writes that queue up while the group slots are busy are
committed together, with the guarantees of one transaction each (one that fails is rolled
back alone; the others run again), taking their locks in the order of their keys."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
import trio
import trio.testing

from volthub.persistence import DatabaseError, DatabaseUnavailable, IntegrityError
from volthub.persistence.postgres import PostgresDatabase


@asynccontextmanager
async def _database(url: str, acquire_timeout: float = 5.0, lockstep: bool = True) -> AsyncIterator[PostgresDatabase]:
    """The database opened, with the table the writes below use: `t`, holding the row 100."""
    # One group at a time: whatever queues behind it forms the next group.
    database = PostgresDatabase(url, pool_size=4, acquire_timeout=acquire_timeout, group_slots=1, lockstep=lockstep)
    await database.open()
    try:
        await database.write(lambda tx: tx.execute("CREATE TABLE IF NOT EXISTS t (x INT PRIMARY KEY)"))
        await database.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (100) ON CONFLICT DO NOTHING"))
        yield database
    finally:
        await database.close()


async def _values(database: PostgresDatabase) -> list[int]:
    return [row["x"] for row in await database.read(lambda tx: tx.execute("SELECT x FROM t ORDER BY x"))]


# The failure tests hold for both ways a group runs: in lockstep, and one write after another
# (what lockstep falls back to).
BOTH_WAYS = pytest.mark.parametrize("lockstep", [True, False], ids=["lockstep", "one_after_another"])


def _counting_groups(database: PostgresDatabase, runner: str = "_run_group") -> list[int]:
    """The size of each group `database` runs with its method `runner`, from now on: of
    writes (`_run_group`) or of statements (`_run_statement_group`)."""
    groups: list[int] = []
    run_group = getattr(database, runner)

    def counting(group: list[Any], timeout: float) -> None:
        groups.append(len(group))
        run_group(group, timeout)

    setattr(database, runner, counting)
    return groups


class _Holder:
    """A keyed write that keeps the one group slot busy until released, so that the writes
    started meanwhile queue up and run as the next group."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.release = trio.Event()

    def __call__(self, tx: Any) -> None:
        trio.from_thread.run_sync(self.started.set)  # the group runs in a worker thread
        trio.from_thread.run(self.release.wait)


def _keyed(database: PostgresDatabase) -> Callable[[Callable[[Any], Any]], Awaitable[Any]]:
    """`database.write` with a key: the writes that group-commit."""
    return functools.partial(database.write, order="0")


async def _queued_behind(run: Callable[[Callable[[Any], Any]], Awaitable[Any]], calls: list[Callable[[], Any]]) -> None:
    """Run `calls` (async callables) queued, in their order, behind a group `run` holds,
    then release it."""
    holder = _Holder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, holder)
        await holder.started.wait()
        for call in calls:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
        holder.release.set()


def _answered(
    database: PostgresDatabase, x: int, write: Callable[[Any], Any], answers: dict[int, Any]
) -> Callable[[], Awaitable[None]]:
    """A keyed write (key `channel-x`) whose answer, or refusal, goes to `answers[x]`."""

    async def send() -> None:
        try:
            answers[x] = await database.write(write, order=f"channel-{x}")
        except (IntegrityError, LookupError) as exc:
            answers[x] = exc

    return send


async def _grouped_answers(database: PostgresDatabase, write: Callable[[Any, int], Any], count: int) -> dict[int, Any]:
    """Keyed writes `write(tx, x)` for x in 1..count, queued behind a held group so that they
    run as the next group; each caller's answer, or refusal, by x."""
    answers: dict[int, Any] = {}
    writes = [_answered(database, x, functools.partial(write, x=x), answers) for x in range(1, count + 1)]
    await _queued_behind(_keyed(database), writes)
    return answers


@BOTH_WAYS
async def test_queued_keyed_writes_commit_together_and_each_fails_alone(postgres_url: str, lockstep: bool) -> None:
    async with _database(postgres_url, lockstep=lockstep) as database:
        groups = _counting_groups(database)

        def write(tx: Any, x: int) -> int:
            tx.execute("INSERT INTO t (x) VALUES (?)", (x,))
            if x == 3:
                tx.execute("INSERT INTO t (x) VALUES (100)")  # a conflict after its own insert
            if x == 5:
                raise LookupError("refused after writing")  # not a database error: rolled back too
            return x * 10

        answers = await _grouped_answers(database, write, 6)
        assert await _values(database) == [1, 2, 4, 6, 100]  # 3 and 5 rolled back, the others run again
        assert isinstance(answers.pop(3), IntegrityError)
        assert isinstance(answers.pop(5), LookupError)
        assert answers == {1: 10, 2: 20, 4: 40, 6: 60}
        assert groups == [1, 6], groups  # the holder alone, then the six queued behind it together


@pytest.mark.parametrize(
    ("lockstep", "runs_of_4_and_5"),
    # In lockstep all five have run their insert when 3 fails after its own, so 4 and 5
    # run again too; one after another, sorted by key, 4 and 5 had not started.
    [(True, 2), (False, 1)],
    ids=["lockstep", "one_after_another"],
)
async def test_when_a_write_fails_the_others_run_again_and_only_their_last_run_commits(
    postgres_url: str, lockstep: bool, runs_of_4_and_5: int
) -> None:
    # 1 and 2 ran before 3 failed: they run again in a new transaction. What the first
    # runs wrote is gone (the table has each once).
    async with _database(postgres_url, lockstep=lockstep) as database:
        runs: dict[int, int] = {}

        def write(tx: Any, x: int) -> int:
            runs[x] = runs.get(x, 0) + 1
            tx.execute("INSERT INTO t (x) VALUES (?)", (x,))
            if x == 3:
                raise LookupError("refused after writing")
            return runs[x]

        answers = await _grouped_answers(database, write, 5)
        assert await _values(database) == [1, 2, 4, 5, 100]
        runs_again = runs_of_4_and_5
        assert runs == {1: 2, 2: 2, 3: 1, 4: runs_again, 5: runs_again}
        assert isinstance(answers.pop(3), LookupError)
        assert answers == {1: 2, 2: 2, 4: runs_again, 5: runs_again}  # each has its last run's answer


@BOTH_WAYS
async def test_a_write_that_fails_first_or_before_any_statement_leaves_the_others_whole(
    postgres_url: str, lockstep: bool
) -> None:
    # One that fails at its first statement is rolled back alone, and one refused before
    # any statement undoes nothing of the others.
    async with _database(postgres_url, lockstep=lockstep) as database:

        def write(tx: Any, x: int) -> int:
            if x == 2:
                raise LookupError("refused before any statement")
            tx.execute("INSERT INTO t (x) VALUES (?)", (100 if x in (3, 5) else x,))  # 3, 5: conflicts
            tx.execute("INSERT INTO t (x) VALUES (?)", (x + 10,))
            return x

        answers = await _grouped_answers(database, write, 6)
        assert await _values(database) == [1, 4, 6, 11, 14, 16, 100]
        assert isinstance(answers.pop(2), LookupError)
        assert isinstance(answers.pop(3), IntegrityError)
        assert isinstance(answers.pop(5), IntegrityError)
        assert answers == {1: 1, 4: 4, 6: 6}


@BOTH_WAYS
async def test_writes_that_run_no_statement_or_only_batches_fail_alone_too(postgres_url: str, lockstep: bool) -> None:
    # Writes that answer or refuse without a statement undo nothing of the others, and one
    # that refuses after a batch of statements is rolled back alone.
    async with _database(postgres_url, lockstep=lockstep) as database:

        def write(tx: Any, x: int) -> int:
            if x in (2, 5):  # 1 and 4 answer without a statement; 2 and 5 refuse without one
                raise LookupError("refused before any statement")
            if x in (3, 6, 7):
                tx.execute_many("INSERT INTO t (x) VALUES (?)", [(x,), (x + 10,)])
                if x in (6, 7):
                    raise LookupError("refused after its batch")  # rolled back, alone
            return x

        answers = await _grouped_answers(database, write, 7)
        assert await _values(database) == [3, 13, 100]
        assert {x for x, answer in answers.items() if isinstance(answer, LookupError)} == {2, 5, 6, 7}
        assert {x: answers[x] for x in (1, 3, 4)} == {1: 1, 3: 3, 4: 4}


async def test_a_groups_writes_run_in_lockstep_each_step_in_one_round_trip(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each write inserts its row, then counts the table: in lockstep every write's insert
    # has run before any count, and each step's four statements went in one pipeline.
    async with _database(postgres_url) as database:
        pipelines: list[int] = []
        original = psycopg.Connection.pipeline

        @contextlib.contextmanager
        def counted(self: Any) -> Any:
            with original(self) as pipeline:
                pipelines.append(1)
                yield pipeline

        def write(tx: Any, x: int) -> tuple[list[Any], int]:
            inserted = tx.execute("INSERT INTO t (x) VALUES (?) RETURNING x, x * 2 AS twice", (x,))
            return inserted, int(tx.scalar("SELECT count(*) AS n FROM t"))

        monkeypatch.setattr(psycopg.Connection, "pipeline", counted)
        answers = await _grouped_answers(database, write, 4)
        # Each write has its own insert's row, and every count is 100 and the four inserts.
        assert answers == {x: ([{"x": x, "twice": 2 * x}], 5) for x in (1, 2, 3, 4)}
        assert len(pipelines) == 2  # the inserts' step and the counts' step
        assert await _values(database) == [1, 2, 3, 4, 100]


async def test_a_write_that_takes_a_savepoint_makes_its_group_run_one_write_after_another(
    postgres_url: str,
) -> None:
    # A savepoint's rollback would undo the other writes' statements after it in lockstep:
    # the group runs again one write after another, where the savepoint is the write's own.
    async with _database(postgres_url) as database:
        counts: dict[int, int] = {}

        def write(tx: Any, x: int) -> int:
            tx.execute("INSERT INTO t (x) VALUES (?)", (x,))
            if x == 2:
                with contextlib.suppress(IntegrityError), tx.savepoint():
                    tx.execute("INSERT INTO t (x) VALUES (100)")  # a conflict, undone alone
            counts[x] = int(tx.scalar("SELECT count(*) AS n FROM t"))
            return x

        answers = await _grouped_answers(database, write, 3)
        assert answers == {1: 1, 2: 2, 3: 3}
        assert counts == {1: 2, 2: 3, 3: 4}  # one after another: each sees the ones before it
        assert await _values(database) == [1, 2, 3, 100]


async def test_a_statement_failing_in_a_pipeline_is_its_writes_alone_and_logs_no_warning(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The conflict comes first among many inserts: its error is back while the others are
    # still being sent, and the pipeline's exit then finds the rest of it aborted.
    async with _database(postgres_url) as database:

        def write(tx: Any, x: int) -> int:
            tx.execute("SELECT count(*) AS n FROM t WHERE x < ?", (x,))
            tx.execute("INSERT INTO t (x) VALUES (?) RETURNING x", (100 if x == 1 else x,))  # 1: a conflict
            return x

        with caplog.at_level(logging.WARNING, logger="psycopg"):
            for _ in range(3):
                await database.write(lambda tx: tx.execute("DELETE FROM t WHERE x < 100"))
                answers = await _grouped_answers(database, write, 40)
                assert isinstance(answers.pop(1), IntegrityError)
                assert answers == {x: x for x in range(2, 41)}
        assert [record.getMessage() for record in caplog.records if record.name.startswith("psycopg")] == []


async def test_writes_without_a_key_keep_a_transaction_of_their_own(postgres_url: str) -> None:
    async with _database(postgres_url) as database:
        groups = _counting_groups(database)

        async def unkeyed() -> None:
            await database.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (1)"))

        await _queued_behind(_keyed(database), [unkeyed])
        assert groups == [1]  # only the holder went through a group
        assert await _values(database) == [1, 100]


async def test_a_caller_hears_only_after_the_whole_group_committed(postgres_url: str) -> None:
    async with _database(postgres_url) as database:
        ran: list[str] = []
        seen_committed: list[bool] = []

        def committed_elsewhere(x: int) -> bool:
            with psycopg.connect(postgres_url, autocommit=True) as other:
                return other.execute("SELECT 1 FROM t WHERE x = %s", (x,)).fetchone() is not None

        async def first() -> None:
            await database.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (1)"), order="a")
            seen_committed.append("second" in ran and committed_elsewhere(1) and committed_elsewhere(2))

        def second_write(tx: Any) -> None:
            tx.execute("INSERT INTO t (x) VALUES (2)")
            ran.append("second")

        async def second() -> None:
            await database.write(second_write, order="b")

        await _queued_behind(_keyed(database), [first, second])
        assert seen_committed == [True]


async def test_groups_take_their_locks_in_key_order_and_cannot_deadlock(postgres_url: str) -> None:
    """Two processes' groups lock rows `a` and `b`, queued in opposite orders. Each write,
    once it holds its row, waits until the other group holds one too or waits for a lock:
    in queue order that is a deadlock (PostgreSQL fails one of them); in key order the
    second group waits for the first's commit."""
    async with _database(postgres_url) as one, _database(postgres_url) as two:
        await one.write(lambda tx: tx.execute("CREATE TABLE locks (k TEXT PRIMARY KEY)"))
        await one.write(lambda tx: tx.execute("INSERT INTO locks (k) VALUES ('a'), ('b')"))
        locked = {"one": threading.Event(), "two": threading.Event()}
        admin = psycopg.connect(postgres_url, autocommit=True)

        def someone_waits_for_a_lock() -> bool:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
            return bool(row and row[0])

        def lock(me: str, other: str, key: str) -> Callable[[Any], str]:
            def write(tx: Any) -> str:
                tx.execute("SELECT k FROM locks WHERE k = ? FOR UPDATE", (key,))
                locked[me].set()
                for _ in range(2000):  # bounded: a broken test fails instead of hanging
                    if locked[other].is_set() or someone_waits_for_a_lock():
                        break
                    time.sleep(0.005)
                return key

            return write

        answers: list[Any] = []

        def send(database: PostgresDatabase, me: str, other: str, key: str) -> Callable[[], Any]:
            async def run() -> None:
                try:
                    answers.append(await database.write(lock(me, other, key), order=key))
                except DatabaseError as exc:
                    answers.append(exc)

            return run

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    _queued_behind, _keyed(one), [send(one, "one", "two", "a"), send(one, "one", "two", "b")]
                )
                nursery.start_soon(
                    _queued_behind, _keyed(two), [send(two, "two", "one", "b"), send(two, "two", "one", "a")]
                )
        finally:
            admin.close()
        assert sorted(answers) == ["a", "a", "b", "b"], answers


@BOTH_WAYS
async def test_a_lost_connection_fails_every_caller_of_the_group(postgres_url: str, lockstep: bool) -> None:
    async with _database(postgres_url, lockstep=lockstep) as database:
        answers: list[Any] = []

        def lost(tx: Any) -> None:
            tx.execute("INSERT INTO t (x) VALUES (1)")
            pid = tx.scalar("SELECT pg_backend_pid() AS pid")
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            tx.execute("INSERT INTO t (x) VALUES (2)")

        def write(fn: Callable[[Any], Any], key: str) -> Callable[[], Any]:
            async def run() -> None:
                try:
                    answers.append(await database.write(fn, order=key))
                except DatabaseUnavailable as exc:
                    answers.append(exc)

            return run

        await _queued_behind(
            _keyed(database),
            [
                write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (3)"), "a"),
                write(lost, "b"),
                write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (4)"), "c"),
            ],
        )
        assert [type(answer) for answer in answers] == [DatabaseUnavailable] * 3, answers
        assert await _values(database) == [100]


async def test_a_cancelled_caller_whose_write_was_taken_waits_for_its_group(postgres_url: str) -> None:
    async with _database(postgres_url) as database:
        started = trio.Event()
        release = threading.Event()
        heard: list[str] = []

        def slow(tx: Any) -> None:
            tx.execute("INSERT INTO t (x) VALUES (2)")
            trio.from_thread.run_sync(started.set)
            release.wait()

        async def first() -> None:  # commits the group that takes both writes
            await database.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (1)"), order="a")

        async def cancelled() -> None:
            with trio.CancelScope() as scope:
                scope_box.append(scope)
                await database.write(slow, order="b")
            committed = await _values(database)
            heard.append(f"cancelled={scope.cancelled_caught} committed={committed}")

        scope_box: list[trio.CancelScope] = []

        async def cancel_once_running() -> None:
            await started.wait()
            scope_box[0].cancel()  # its write runs in another caller's group: it waits for it
            await trio.testing.wait_all_tasks_blocked()
            assert heard == []
            release.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_once_running)
            await _queued_behind(_keyed(database), [first, cancelled])
        assert heard == ["cancelled=True committed=[1, 2, 100]"]


async def test_a_keyed_write_queued_past_the_acquire_timeout_fails_and_never_runs(
    postgres_url: str, autojump_clock: trio.testing.MockClock
) -> None:
    del autojump_clock  # the clock jumps while the held group waits in its thread
    async with _database(postgres_url, acquire_timeout=2.0) as database:
        holder = _Holder()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: database.write(holder, order="0"))
            await holder.started.wait()
            try:
                await database.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (1)"), order="a")
                raise AssertionError("the queued write ran")
            except DatabaseUnavailable:
                pass
            assert database.pool_stats()["waiting"] == 0
            holder.release.set()
        assert await _values(database) == [100]


@BOTH_WAYS
async def test_grouped_publishing_writes_publish_after_the_commit_and_a_failed_one_nothing(
    postgres_url: str, lockstep: bool
) -> None:
    from volthub.hub.bus import InProcessBroker
    from volthub.hub.clock import TrioClock
    from volthub.hub.publisher import EventPublisher

    async with _database(postgres_url, lockstep=lockstep) as database:
        bus, published = InProcessBroker(), []

        def on_event(event: Any) -> None:  # the rows of every write of the group are committed by then
            with psycopg.connect(postgres_url, autocommit=True) as other:
                rows = other.execute("SELECT x FROM t WHERE x IN (1, 3) ORDER BY x").fetchall()
            published.append((event.channel_id, [row[0] for row in rows]))

        bus.subscribe(on_event)
        publisher = EventPublisher(database, bus, TrioClock())

        def change(channel: str, x: int, fail: bool = False) -> Callable[[], Any]:
            def write(tx: Any, emitter: Any) -> None:
                tx.execute("INSERT INTO t (x) VALUES (?)", (x,))
                emitter.emit(channel, "channel.follow", {"x": x})
                if fail:
                    raise LookupError("refused")

            async def run() -> None:
                with contextlib.suppress(LookupError):
                    await publisher.write(write, order=channel)

            return run

        await _queued_behind(_keyed(database), [change("c1", 1), change("c2", 2, fail=True), change("c3", 3)])
        assert sorted(published) == [("c1", [1, 3]), ("c3", [1, 3])]
        assert await _values(database) == [1, 3, 100]


async def test_queued_statements_share_a_thread_hop_and_each_commits_alone(postgres_url: str) -> None:
    async with _database(postgres_url) as database:
        groups = _counting_groups(database, "_run_statement_group")
        answers: dict[int, Any] = {}

        def insert(x: int) -> Callable[[], Any]:
            def statements(tx: Any) -> int:
                tx.execute("INSERT INTO t (x) VALUES (?)", (x,))
                assert tx.scalar("SELECT now() = statement_timestamp() AS outside") is True  # no transaction
                if x == 2:
                    tx.execute("INSERT INTO t (x) VALUES (100)")  # fails; its first insert stays
                return x

            async def call() -> None:
                try:
                    answers[x] = await database.statements(statements)
                except IntegrityError as exc:
                    answers[x] = exc

            return call

        await _queued_behind(database.statements, [insert(1), insert(2), insert(3)])
        assert isinstance(answers.pop(2), IntegrityError)
        assert answers == {1: 1, 3: 3}
        assert await _values(database) == [1, 2, 3, 100]
        assert groups == [1, 3], groups


async def test_a_connection_lost_in_a_statements_group_is_replaced_for_the_rest(postgres_url: str) -> None:
    async with _database(postgres_url) as database:
        answers: list[Any] = []

        def lost(tx: Any) -> None:
            pid = tx.scalar("SELECT pg_backend_pid() AS pid")
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            tx.execute("INSERT INTO t (x) VALUES (1)")  # something of it ran: not run again

        def call(fn: Callable[[Any], Any]) -> Callable[[], Any]:
            async def run() -> None:
                try:
                    answers.append(await database.statements(fn))
                except DatabaseUnavailable as exc:
                    answers.append(exc)

            return run

        await _queued_behind(
            database.statements, [call(lost), call(lambda tx: tx.execute("INSERT INTO t (x) VALUES (2) RETURNING x"))]
        )
        assert isinstance(answers[0], DatabaseUnavailable)
        assert answers[1] == [{"x": 2}]
        assert await _values(database) == [2, 100]
