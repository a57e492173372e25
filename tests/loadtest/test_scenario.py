"""Scenario files: bundled ones load, bad ones are refused with the reason, scaling."""

from __future__ import annotations

from pathlib import Path

import pytest

from volthub.loadtest import scenario


@pytest.mark.parametrize("name", scenario.BUNDLED)
def test_bundled_scenarios_load(name: str) -> None:
    found = scenario.load(name)
    assert found.name == name and found.stages and found.description
    assert found.peak_clients > 0 and found.seconds > 0


def test_the_flags_are_the_fan_out() -> None:
    found = scenario.fan_out(90, 10, 3, 5.0, 20.0)
    ramp, send = found.stages
    assert (ramp.seconds, ramp.clients, ramp.rate) == (0.0, 100, 0.0)
    assert (send.seconds, send.clients, send.rate, send.offered) == (20.0, 100, 5.0, 100)
    assert dict(send.mix) == {"socketio": 0.9, "sse": 0.1}
    assert found.channels == 3 and found.name == scenario.load("fan-out").name


def test_a_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'name = "mine"\nchannels = 2\nchecks = ["send.errors==0", {name = "all", check = "delivery.ratio>=1"}]\n'
        '[[stages]]\nname = "up"\nseconds = 4\nclients = 10\nrate = 2\nmix = {socketio = 3, sse = 1}\n'
        '[[stages]]\nname = "storm"\nseconds = 2\nclients = 10\nreconnect = 0.5\n'
    )
    found = scenario.load(str(path))
    assert [stage.name for stage in found.stages] == ["up", "storm"]
    assert dict(found.stages[0].mix) == {"socketio": 0.75, "sse": 0.25}
    assert found.stages[1].reconnect == 0.5 and found.channels == 2
    assert [check.title for check in found.checks] == ["send.errors == 0", "all"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = 'x'", "at least one"),
        ("[[stages]]\nclients = 1\nmix = {websocket = 1}", "unknown client kind 'websocket'"),
        ("[[stages]]\nclients = -1", "clients must be >= 0"),
        ("[[stages]]\nclients = 1.5", "must be an integer"),
        ("[[stages]]\nclients = 1\nreconnect = 2", "between 0 and 1"),
        ("[[stages]]\nclients = 1\nspeed = 2", "unknown key 'speed'"),
        ("checks = ['delivery.nope>1']\n[[stages]]\nclients = 1", "no figure named"),
        ("[[stages]]\nname = 'a'\n[[stages]]\nname = 'a'", "names must differ"),
        ("[[stages]", "line 1"),
    ],
)
def test_bad_scenarios_say_why(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(scenario.ScenarioError, match=message):
        scenario.load(str(path))


def test_a_missing_file_names_the_bundled_ones(tmp_path: Path) -> None:
    with pytest.raises(scenario.ScenarioError, match="reconnect-storm"):
        scenario.load(str(tmp_path / "nope.toml"))


def test_scaled_to_a_peak_rate_and_length() -> None:
    found = scenario.scaled(scenario.load("chat-heavy"), 20, 10.0, 6.0)
    assert found.peak_clients == 20 and max(s.rate for s in found.stages) == 10.0
    assert found.seconds == pytest.approx(6.0)
    assert scenario.scaled(found, None, None, None) == found


def test_kinds_follow_the_mix() -> None:
    joined: dict[str, int] = {}
    kinds = [scenario.next_kind((("socketio", 0.75), ("slow", 0.25)), joined) for _ in range(8)]
    assert kinds.count("slow") == 2 and kinds.count("socketio") == 6
