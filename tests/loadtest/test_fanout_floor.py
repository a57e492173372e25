"""The fan-out floor measures the real delivery path over real sockets, and says when its run
is not one of the direct path."""

from __future__ import annotations

import dataclasses
import json

import pytest

from volthub.loadtest import fanout_floor


def test_every_event_reaches_every_socket_and_both_rounds_are_measured() -> None:
    result = fanout_floor.measure(sockets=40, events=6)
    assert result.deliveries == 40 * 6
    assert result.partial_writes == 0
    assert result.floor_us.median > 0 and result.fanout_us.median > 0
    assert result.floor_us.p25 <= result.floor_us.median <= result.floor_us.p75


def test_without_system_calls_the_path_still_delivers_everything() -> None:
    result = fanout_floor.measure(sockets=10, events=4, system_calls=False)
    assert not result.system_calls and result.deliveries == 10 * 4 and result.partial_writes == 0


def test_a_partial_write_makes_the_run_invalid(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = fanout_floor.measure

    def with_a_partial_write(sockets: int, events: int, system_calls: bool) -> fanout_floor.Result:
        result = real(sockets, events, system_calls)
        return dataclasses.replace(result, partial_writes=1)

    monkeypatch.setattr(fanout_floor, "measure", with_a_partial_write)
    monkeypatch.setattr(fanout_floor, "_pin", lambda core: None)  # leave this test process unpinned
    assert fanout_floor.main(["--sockets", "5", "--events", "2", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["partial_writes"] == 1
    assert "invalid run" in err


@pytest.mark.parametrize("argv", [["--events", "1"], ["--sockets", "0"], ["--sockets", "100000000"]])
def test_the_command_line_refuses_what_it_cannot_run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        fanout_floor.main(argv)
    assert exit_.value.code == 2 and "error:" in capsys.readouterr().err
