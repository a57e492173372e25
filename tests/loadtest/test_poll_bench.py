"""The poll benchmark runs and checks its own tally (small, on SQLite)."""

from __future__ import annotations

from pathlib import Path

from volthub.loadtest import poll_bench


async def test_poll_bench_counts_every_vote(tmp_path: Path) -> None:
    result = await poll_bench.run(f"sqlite:///{tmp_path / 'bench.db'}", voters=50, rounds=2)
    assert result["votes"] == 100 and result["votes_per_second"] > 0
