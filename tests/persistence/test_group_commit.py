"""The group-commit queue on its own: which caller runs a group, and what waits."""

from __future__ import annotations

from typing import Any

import outcome
import trio
import trio.testing

from volthub.persistence.group_commit import GroupQueue, QueuedCall


async def test_a_caller_taken_into_another_callers_group_waits_for_it_past_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The queue alone (no database): caller B's call is taken into the group caller A
    runs; while that group runs past B's acquire deadline, with a slot free, B neither
    fails nor starts groups of its own (there is nothing left to run): it waits."""
    del autojump_clock
    releases: dict[str, trio.Event] = {}
    groups: list[list[str]] = []

    async def run(group: list[Any]) -> None:
        names = [job.order for job in group]
        groups.append(names)
        if not names:  # the fault this test is about: record it, and let the test end
            releases.setdefault("a", trio.Event()).set()
            await trio.lowlevel.checkpoint()
            return
        release = releases.setdefault(names[0], trio.Event())
        await release.wait()
        for job in group:
            job.result = outcome.Value(job.order)

    # Both slots open at once (no spare-slot delay): the two holders run side by side.
    queue = GroupQueue(slots=2, acquire_timeout=5.0, run=run, spare_after=0)
    answers: dict[str, Any] = {}

    async def call(name: str) -> None:
        answers[name] = (await queue.outcome(QueuedCall(lambda tx: None, name))).unwrap()

    async with trio.open_nursery() as nursery:
        for name in ("holder1", "holder2", "a", "b"):
            nursery.start_soon(call, name)
            await trio.testing.wait_all_tasks_blocked()
        releases["holder1"].set()  # a slot frees: `a` runs the next group, which takes `b` too
        await trio.testing.wait_all_tasks_blocked()
        releases["holder2"].set()  # another slot frees while that group still runs
        await trio.sleep(10)  # past `b`'s acquire deadline
        assert "b" not in answers
        releases["a"].set()
    assert answers == {"holder1": "holder1", "holder2": "holder2", "a": "a", "b": "b"}
    assert groups == [["holder1"], ["holder2"], ["a", "b"]]


class _Groups:
    """A group runner that records each group's calls and the time it started, and holds
    each group until the test releases it by its first call's name."""

    def __init__(self) -> None:
        self.started: list[tuple[float, list[str]]] = []
        self.releases: dict[str, trio.Event] = {}

    async def run(self, group: list[Any]) -> None:
        names = [job.order for job in group]
        self.started.append((trio.current_time(), names))
        await self.releases.setdefault(names[0], trio.Event()).wait()
        for job in group:
            job.result = outcome.Value(job.order)


async def _call(queue: GroupQueue, name: str) -> None:
    await queue.outcome(QueuedCall(lambda tx: None, name))


async def _queue_one_by_one(nursery: trio.Nursery, queue: GroupQueue, names: tuple[str, ...]) -> None:
    """Each call queued once the one before it is running or waiting."""
    for name in names:
        nursery.start_soon(_call, queue, name)
        await trio.testing.wait_all_tasks_blocked()


async def test_calls_queued_behind_a_quick_group_form_one_group_after_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A second slot is free, but the group in flight has not run long enough to be
    waiting on something: the calls that queue meanwhile wait, and then run as one group."""
    del autojump_clock
    groups = _Groups()
    queue = GroupQueue(slots=2, acquire_timeout=5.0, run=groups.run, spare_after=0.05)
    async with trio.open_nursery() as nursery:
        await _queue_one_by_one(nursery, queue, ("first", "b", "c"))
        await trio.sleep(0.04)
        groups.releases["first"].set()
        await trio.testing.wait_all_tasks_blocked()
        groups.releases["b"].set()
    assert [names for _, names in groups.started] == [["first"], ["b", "c"]]
    assert groups.started[1][0] == groups.started[0][0] + 0.04


async def test_a_group_that_runs_long_lets_the_next_start_beside_it_up_to_the_slots(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A group still running after `spare_after` (waiting for a row lock, say) does not hold
    up the calls queued behind it: the next group starts beside it then, and a third one
    (past the two slots) waits for a slot to come free."""
    del autojump_clock
    groups = _Groups()
    queue = GroupQueue(slots=2, acquire_timeout=5.0, run=groups.run, spare_after=0.05)
    async with trio.open_nursery() as nursery:
        await _queue_one_by_one(nursery, queue, ("stuck", "b", "c"))
        await trio.sleep(0.1)  # `b` and `c` have started beside `stuck` by now
        nursery.start_soon(_call, queue, "d")
        await trio.sleep(1)  # both slots busy: `d` waits, however long they run
        assert [names for _, names in groups.started] == [["stuck"], ["b", "c"]]
        groups.releases["b"].set()
        await trio.testing.wait_all_tasks_blocked()
        groups.releases["d"].set()
        groups.releases["stuck"].set()
    start = groups.started[0][0]
    assert [(round(at - start, 3), names) for at, names in groups.started] == [
        (0, ["stuck"]),
        (0.05, ["b", "c"]),
        (1.1, ["d"]),
    ]


async def test_when_the_newer_of_two_groups_ends_the_next_is_timed_from_the_older(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two groups in flight, the newer ends first: the older one has run past
    `spare_after`, so a call queued now starts beside it at once."""
    del autojump_clock
    groups = _Groups()
    queue = GroupQueue(slots=2, acquire_timeout=5.0, run=groups.run, spare_after=0.05)
    async with trio.open_nursery() as nursery:
        await _queue_one_by_one(nursery, queue, ("old", "new"))
        await trio.sleep(0.06)  # `new` has started beside `old` at 0.05
        groups.releases["new"].set()
        await trio.testing.wait_all_tasks_blocked()
        await _queue_one_by_one(nursery, queue, ("next",))
        groups.releases.setdefault("next", trio.Event()).set()  # it ends once it has run
        await trio.sleep(1)
        groups.releases["old"].set()
    start = groups.started[0][0]
    assert [(round(at - start, 3), names) for at, names in groups.started] == [
        (0, ["old"]),
        (0.05, ["new"]),
        (0.06, ["next"]),
    ], "not 1.06, when `old` ended"
