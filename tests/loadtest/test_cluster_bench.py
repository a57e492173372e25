"""The multi-process benchmark (volthub/loadtest/cluster_bench.py) runs end to end, small,
with each broker."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from trio_websocket import CloseReason, ConnectionClosed

from tests.redis_support import Broker, broker
from volthub.loadtest.cluster_bench import Lockstep, Plan, _lost_connection, _table, run_once, run_side_by_side

__all__ = ["broker"]  # fixture


@pytest.mark.slow
async def test_a_small_two_process_run_delivers_everything(postgres_url: str, tmp_path: Path, broker: Broker) -> None:
    redis_url = broker.section.get("redis_url")
    plan = Plan(sockets=6, channels=2, rate=4, duration=1, broker_env=broker.env, redis_url=redis_url)
    result = await run_once(postgres_url, 2, plan, workdir=tmp_path)
    assert result["processes"] == 2 and result["sockets_connected"] == 6
    assert result["disconnects"] == 0 and result["disconnect_reasons"] == {}
    assert result["messages_accepted"] == 4
    assert result["deliveries"] == result["deliveries_expected"] == 12
    assert result["relay_cpu_ms_per_event_per_process"] is not None
    assert result["wakeups_per_event_per_process"] > 0, "a delivered event wakes its process"
    assert (result["redis_cpu_ms_per_event"] is not None) == (broker.name == "redis")
    assert "deliveries per second" in _table([result])


def test_a_client_whose_connection_ends_is_counted_with_the_reason_not_raised() -> None:
    closed = ConnectionClosed(CloseReason(1000, "ping timeout"))
    assert _lost_connection(ExceptionGroup("client", [closed])) == "closed 1000 ping timeout"
    assert _lost_connection(ConnectionResetError()) == "ConnectionResetError"
    assert _lost_connection(ExceptionGroup("client", [closed, KeyError("x")])) is None, "a bug is raised"
    assert _lost_connection(KeyError("x")) is None


async def test_deployments_in_lockstep_pass_each_phase_together(autojump_clock: trio.testing.MockClock) -> None:
    lockstep = Lockstep(2)
    passed_at: dict[str, float] = {}
    start = trio.current_time()

    async def party(name: str, delay: float) -> None:
        await trio.sleep(delay)
        await lockstep.reach("connected")
        passed_at[name] = trio.current_time() - start

    async with trio.open_nursery() as nursery:
        nursery.start_soon(party, "fast", 0.0)
        nursery.start_soon(party, "slow", 5.0)
    assert passed_at == {"fast": 5.0, "slow": 5.0}, "the fast one waited for the slow one"


@pytest.mark.slow
async def test_side_by_side_measures_every_process_count_at_once(postgres_url: str, tmp_path: Path) -> None:
    plan = Plan(sockets=4, channels=2, rate=4, duration=1, placement="partition")
    one, two = await run_side_by_side(postgres_url, [1, 2], plan, tmp_path)
    assert (one["processes"], two["processes"]) == (1, 2)
    for result in (one, two):
        assert result["side_by_side"] is True and result["messages_accepted"] == 4
        assert result["deliveries"] == result["deliveries_expected"] == 8
