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

    queue = GroupQueue(slots=2, acquire_timeout=5.0, run=run)
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
