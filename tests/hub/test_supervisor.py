"""The supervisor restarts a crashed service with exponential back-off, and stops cleanly."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from volthub.hub.supervisor import Backoff, Service, Supervisor


def test_backoff_doubles_up_to_its_cap() -> None:
    backoff = Backoff(initial_delay=1, max_delay=30, factor=2)
    assert [backoff.delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert backoff.delay(10_000) == 30  # no overflow however long it keeps failing


async def test_a_crashed_service_is_restarted_after_a_growing_back_off(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    starts: list[float] = []

    async def flaky() -> None:
        starts.append(trio.current_time())
        if len(starts) <= 5:
            raise RuntimeError("boom")
        await trio.sleep_forever()

    supervisor = Supervisor(Backoff(initial_delay=1, max_delay=4, healthy_after=100))
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run, [Service("flaky", flaky)])
        await trio.sleep(1000)
        gaps = [round(later - earlier, 6) for earlier, later in zip(starts, starts[1:], strict=False)]
        assert gaps == [1, 2, 4, 4, 4]  # doubling, capped; then it stays up
        assert supervisor.restarts == {"flaky": 5}
        await supervisor.stop()


async def test_one_failing_service_does_not_disturb_the_others(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0
    ticks = 0

    async def steady() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(1)
            ticks += 1

    async def broken() -> None:
        raise ValueError("always")

    supervisor = Supervisor(Backoff(initial_delay=1, max_delay=8))
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run, [Service("steady", steady), Service("broken", broken)])
        await trio.sleep(100.5)
        assert ticks == 100
        assert supervisor.restarts["steady"] == 0 and supervisor.restarts["broken"] > 5
        await supervisor.stop()


async def test_a_service_that_ran_long_enough_restarts_from_the_first_delay(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.autojump_threshold = 0
    starts: list[float] = []

    async def crashes_after(uptime: float) -> None:
        starts.append(trio.current_time())
        await trio.sleep(uptime)
        raise RuntimeError("crash")

    # Fails fast twice (back-off 1, 2), then runs 50 s (healthy) and fails: back to 1 s.
    uptimes = iter([0, 0, 50, 0])

    async def service() -> None:
        await crashes_after(next(uptimes, 1000))

    supervisor = Supervisor(Backoff(initial_delay=1, max_delay=60, healthy_after=30))
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run, [Service("s", service)])
        await trio.sleep(200)
        gaps = [round(later - earlier, 6) for earlier, later in zip(starts, starts[1:], strict=False)]
        assert gaps == [1, 2, 50 + 1, 2]
        await supervisor.stop()


async def test_stop_cancels_every_service_and_a_finished_service_is_not_restarted() -> None:
    cancelled: list[str] = []
    finished = 0

    async def forever(name: str) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(name)
            raise

    async def one_shot() -> None:
        nonlocal finished
        finished += 1

    supervisor = Supervisor()
    services = [Service("a", lambda: forever("a")), Service("b", lambda: forever("b")), Service("once", one_shot)]
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run, services)
        await trio.testing.wait_all_tasks_blocked()
        await supervisor.stop()
        assert sorted(cancelled) == ["a", "b"]
        assert finished == 1 and supervisor.restarts["once"] == 0
    # run() returned: nothing of the supervisor is left in the nursery.


async def test_cancelling_the_enclosing_scope_stops_the_supervisor(mock_clock: trio.testing.MockClock) -> None:
    mock_clock.autojump_threshold = 0

    async def failing() -> None:
        raise RuntimeError("x")

    supervisor = Supervisor(Backoff(initial_delay=5))
    with trio.move_on_after(12) as scope:
        await supervisor.run([Service("failing", failing)])
    assert scope.cancelled_caught
    assert supervisor.restarts["failing"] == 1  # restarted at 5 s; cancelled waiting for 15 s


async def test_a_service_failing_as_it_is_stopped_is_logged_and_the_stop_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fails_when_cancelled() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)  # cancelled too: the two end as one group
            try:
                await trio.sleep_forever()
            finally:  # as a database read in a worker thread failing during an outage
                raise RuntimeError("the database went away")

    supervisor = Supervisor()
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run, [Service("relay", fails_when_cancelled)])
        await trio.testing.wait_all_tasks_blocked()
        await supervisor.stop()
    failures = [record for record in caplog.records if "relay" in record.getMessage()]
    assert [record.levelname for record in failures] == ["ERROR"]
    assert "the database went away" in caplog.text
    assert supervisor.restarts == {"relay": 0}
