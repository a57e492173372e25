"""The multi-process benchmark (volthub/loadtest/cluster_bench.py) runs end to end, small."""

from __future__ import annotations

from pathlib import Path

import pytest

from volthub.loadtest.cluster_bench import _table, run_once


@pytest.mark.slow
async def test_a_small_two_process_run_delivers_everything(postgres_url: str, tmp_path: Path) -> None:
    result = await run_once(postgres_url, 2, sockets=6, channels=2, rate=4, duration=1, workdir=tmp_path)
    assert result["processes"] == 2 and result["sockets_connected"] == 6
    assert result["messages_accepted"] == 4
    assert result["deliveries"] == result["deliveries_expected"] == 12
    assert result["relay_cpu_ms_per_event_per_process"] is not None
    assert "deliveries per second" in _table([result])
