"""The poll benchmark runs and checks its own tally (small, on SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from volthub.loadtest import poll_bench


async def test_poll_bench_counts_every_vote(tmp_path: Path) -> None:
    result = await poll_bench.run(f"sqlite:///{tmp_path / 'bench.db'}", voters=50, rounds=2)
    assert result["votes"] == 100 and result["votes_per_second"] > 0
    assert result["miscounted_polls"] == 0


def test_a_poll_whose_tally_is_off_makes_the_exit_status_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_tally = poll_bench.interactive_repo.poll_tally

    def one_vote_lost(tx: Any, poll_id: str) -> dict[str, int]:
        tally = dict(real_tally(tx, poll_id=poll_id))
        first = next(iter(tally))
        tally[first] -= 1
        return tally

    monkeypatch.setattr(poll_bench.interactive_repo, "poll_tally", one_vote_lost)
    assert poll_bench.main(["--database", f"sqlite:///{tmp_path / 'bench.db'}", "--voters", "10", "--rounds", "1"]) == 1
    assert "NOT met: 1 of 1 polls" in capsys.readouterr().out
