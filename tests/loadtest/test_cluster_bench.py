"""The multi-process benchmark (volthub/loadtest/cluster_bench.py) runs end to end, small,
with each broker."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.redis_support import Broker, broker
from volthub.loadtest.cluster_bench import Plan, _table, run_once

__all__ = ["broker"]  # fixture


@pytest.mark.slow
async def test_a_small_two_process_run_delivers_everything(postgres_url: str, tmp_path: Path, broker: Broker) -> None:
    redis_url = broker.section.get("redis_url")
    plan = Plan(sockets=6, channels=2, rate=4, duration=1, broker_env=broker.env, redis_url=redis_url)
    result = await run_once(postgres_url, 2, plan, workdir=tmp_path)
    assert result["processes"] == 2 and result["sockets_connected"] == 6
    assert result["messages_accepted"] == 4
    assert result["deliveries"] == result["deliveries_expected"] == 12
    assert result["relay_cpu_ms_per_event_per_process"] is not None
    assert result["wakeups_per_event_per_process"] > 0, "a delivered event wakes its process"
    assert (result["redis_cpu_ms_per_event"] is not None) == (broker.name == "redis")
    assert "deliveries per second" in _table([result])
