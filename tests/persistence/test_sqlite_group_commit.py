"""SQLite group commit: write transactions that queue up while one runs are committed
together, each in its own savepoint, with the guarantees of one transaction each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from volthub.persistence import IntegrityError
from volthub.persistence.sqlite import SQLiteDatabase


@pytest.fixture
async def database(tmp_path: Path) -> Any:
    db = SQLiteDatabase(f"sqlite:///{tmp_path / 'g.db'}", tmp_path / "g.db")
    await db.open()
    await db.write(lambda tx: tx.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)"))
    await db.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (100)"))
    yield db
    await db.close()


async def _values(db: SQLiteDatabase) -> list[int]:
    return [row["x"] for row in await db.read(lambda tx: tx.execute("SELECT x FROM t ORDER BY x"))]


async def test_queued_writes_commit_together_and_each_fails_alone(database: SQLiteDatabase) -> None:
    answers: dict[int, Any] = {}
    groups: list[int] = []
    run_group = database._run_group

    def counting(group: list[Any]) -> None:
        groups.append(len(group))
        run_group(group)

    database._run_group = counting  # type: ignore[method-assign]

    async def insert(x: int) -> None:
        def write(tx: Any) -> int:
            tx.execute("INSERT INTO t (x) VALUES (?)", (x,))
            if x == 3:
                tx.execute("INSERT INTO t (x) VALUES (100)")  # a conflict after its own insert
            return x * 10

        try:
            answers[x] = await database.write(write)
        except IntegrityError as exc:
            answers[x] = exc

    async with trio.open_nursery() as nursery:
        for x in range(1, 7):
            nursery.start_soon(insert, x)
    assert await _values(database) == [1, 2, 4, 5, 6, 100]  # 3 rolled back to its savepoint, wholly
    assert isinstance(answers.pop(3), IntegrityError)
    assert answers == {1: 10, 2: 20, 4: 40, 5: 50, 6: 60}
    assert sum(groups) == 6 and max(groups) > 1, groups  # queued writes shared a commit


async def test_a_write_cancelled_before_it_started_is_not_applied(database: SQLiteDatabase) -> None:
    release = trio.Event()
    started = trio.Event()

    def slow(tx: Any) -> None:
        tx.execute("INSERT INTO t (x) VALUES (1)")
        trio.from_thread.run_sync(started.set)  # the group runs in a worker thread
        trio.from_thread.run(release.wait)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(database.write, slow)
        await started.wait()
        with trio.move_on_after(0.01) as waited:  # queued behind the running group, then cancelled
            await database.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (2)"))
        assert waited.cancelled_caught
        release.set()
    assert await database.write(lambda tx: tx.execute("INSERT INTO t (x) VALUES (3)")) == []
    assert await _values(database) == [1, 3, 100]
