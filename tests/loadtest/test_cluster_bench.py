"""The multi-process benchmark (volthub/loadtest/cluster_bench.py) runs end to end, small,
with each broker; its checks decide its exit status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from trio_websocket import CloseReason, ConnectionClosed

from tests.loadtest.usage import assert_usage_error
from tests.redis_support import Broker, broker
from volthub.loadtest import checks
from volthub.loadtest.cluster_bench import (
    CHECK_KEYS,
    DEFAULT_CHECKS,
    Lockstep,
    Plan,
    _lost_connection,
    _table,
    check_results,
    main,
    run_once,
    run_side_by_side,
)

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
    assert result["deliveries_missed"] == 0
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


def _result(processes: int, **figures: Any) -> dict[str, Any]:
    return {"processes": processes, "connect_failures": 0, "disconnects": 0, "deliveries_missed": 0, **figures}


def test_checks_hold_each_process_count_or_only_the_one_they_name() -> None:
    results = [_result(1, latency_p99_ms=80.0), _result(2, latency_p99_ms=700.0, deliveries_missed=3)]
    given = [
        checks.parse(text, known=CHECK_KEYS.__contains__) for text in ("2:latency_p99_ms<500", "deliveries_missed==0")
    ]
    outcomes = check_results(results, given)
    assert [(o["target"], o["key"], o["verdict"]) for o in outcomes] == [
        ("1 process", "deliveries_missed", "pass"),
        ("2 processes", "latency_p99_ms", "fail"),
        ("2 processes", "deliveries_missed", "fail"),
    ]
    assert checks.verdict(outcomes) == "2 of 3 NOT met"
    assert [o["verdict"] for o in check_results([_result(4)], list(DEFAULT_CHECKS))] == ["pass"] * 3
    assert check_results([_result(4, disconnects=1)], list(DEFAULT_CHECKS))[1]["verdict"] == "fail"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--check", "speed>1"], "no figure named 'speed'"),
        (["--processes", "1,2", "--check", "4:disconnects==0"], "none of this run's: 1, 2"),
    ],
)
def test_a_bad_check_is_a_usage_error_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_usage_error(main, ["--database", "postgresql://nowhere/none", *argv], message, capsys)
