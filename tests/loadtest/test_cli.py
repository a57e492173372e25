"""`volthub loadtest` options: documented, validated before anything starts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from volthub import cli
from volthub.loadtest import checks
from volthub.loadtest.cli import _checks_for, _summaries
from volthub.loadtest.options import configure


def parser() -> argparse.ArgumentParser:
    built = argparse.ArgumentParser(prog="volthub loadtest")
    configure(built)
    return built


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["loadtest", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for action in parser()._actions:
        for option in action.option_strings:
            assert option in text, option
        if action.option_strings and action.dest != "help":
            assert action.help and len(action.help) > 15, f"{action.dest} needs a real help text"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "http://10.1.2.3:8080"], "--allow-remote"),
        (["--url", "http://example.com"], "--allow-remote"),
        (["--spawn", "--clients", "20001", "--max-clients", "20000"], "--max-clients"),
        (["--spawn", "--clients", "50", "--sse", "60", "--max-clients", "100"], "over --max-clients"),
        (["--spawn", "--clients", "0"], "nothing to do"),
        (["--spawn", "--duration", "7200"], "--duration"),
        (["--url", "http://127.0.0.1:1", "--target", "volthub,node"], "need --spawn"),
        (["--url", "http://127.0.0.1:1", "--profile", "p.txt"], "--profile needs"),
        (["--spawn", "--target", "node", "--sse", "5"], "volthub only"),
        (["--spawn", "--server-pid", "1"], "--server-pid is for --url"),
        (["--url", "http://127.0.0.1:1", "--clients", "0", "--hold", "10"], "--tokens FILE"),
        (["--url", "http://127.0.0.1:1", "--keep", "--hold", "10", "--hold-restart"], "needs --server-pid"),
        (["--spawn", "--hold-restart"], "goes with --hold"),
        (["--url", "http://127.0.0.1:1", "--keep", "--server-workers", "4"], "--server-workers is for --spawn"),
        (["--spawn", "--hold", "10", "--server-workers", "4"], "needs --database postgresql"),
        (["--spawn", "--target", "node", "--hold", "10"], "--hold is for volthub"),
        (["--spawn", "--hold", "300001"], "--hold is at most"),
        (["--spawn", "--ws-url", "http://127.0.0.1:2"], "--ws-url goes with --url"),
        (["--spawn", "--scenario", "hold", "--sse", "3"], "--sse goes with the plain flags"),
        (["--spawn", "--scenario", "no-such-scenario"], "bundled: fan-out"),
        (["--spawn", "--check", "delivery.ratio=>1"], "KEY OP NUMBER"),
        (["--spawn", "--check", "delivery.speed>1"], "no figure named"),
        (
            ["--spawn", "--target", "volthub,node", "--check", "nginx:send.errors==0"],
            "none of this run's: volthub, node",
        ),
        (["--url", "http://127.0.0.1:1"], "--tokens FILE"),
        (["--spawn", "--target", "node", "--tokens", "/dev/null"], "--tokens is for volthub"),
        (["--spawn", "--tokens", "/dev/null"], "no tokens"),
        (["--spawn", "--scenario", "hold", "--clients", "0"], "nothing to do"),
        (
            ["--url", "http://127.0.0.1:1", "--ws-url", "http://10.0.0.1:2", "--target", "volthub-gateway"],
            "--allow-remote",
        ),
    ],
)
def test_refused_before_anything_starts(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["loadtest", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--spawn", "--url", "http://127.0.0.1:1"],
        [],
        ["--spawn", "--target", "nginx"],
        ["--spawn", "--rate", "-1"],
        ["--spawn", "--channels", "0"],
    ],
)
def test_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["loadtest", *argv])
    assert exit_info.value.code == 2


def test_gateway_clients_need_the_gateway(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "paths.toml"
    scenario.write_text("[[stages]]\nclients = 2\nmix = { mount = 1, gateway = 1 }\n")
    assert cli.main(["loadtest", "--spawn", "--scenario", str(scenario)]) == 2
    assert "--target volthub-gateway" in capsys.readouterr().err


def test_targets_parse_as_a_list() -> None:
    args = parser().parse_args(["--spawn", "--target", "volthub, node,volthub"])
    assert args.target == ["volthub", "node"]
    args = parser().parse_args(["--spawn", "--target", "volthub,volthub-gateway,python-socketio,node"])
    assert args.target == ["volthub", "volthub-gateway", "python-socketio", "node"]
    assert parser().parse_args(["--spawn"]).target == ["volthub"]


async def test_a_spawned_servers_restart_waits_for_its_graceful_stop_as_long_as_a_restart_may_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from volthub.loadtest import cli as loadtest_cli

    graces: list[float] = []

    class Server:
        pid = 1

        def __init__(self, plan: object) -> None:
            pass

        async def start(self, timeout: float = 0.0) -> None:
            pass

        async def stop(self, grace: float = 15.0) -> None:
            graces.append(grace)

    async def holding(*args: object, restart: Any, **kwargs: object) -> dict[str, Any]:
        await restart()
        return {"accounts": []}

    async def removed(*args: object) -> int:
        return 0

    monkeypatch.setattr(loadtest_cli, "SpawnedServer", Server)
    monkeypatch.setattr(loadtest_cli.hold, "hold", holding)
    monkeypatch.setattr(loadtest_cli, "remove_accounts", removed)
    args = parser().parse_args(["--spawn", "--clients", "0", "--hold", "10", "--hold-restart"])
    args.hold_restart_timeout = 180.0
    await loadtest_cli._spawned_hold(args, "volthub", tmp_path, [])
    assert graces[0] == 180.0  # the restart's stop; the last one ends the run


def test_a_check_with_a_target_prefix_goes_to_that_targets_summary_only() -> None:
    texts = ["volthub-gateway:vs.node.server.cpu_seconds_per_1000_deliveries<=0.4", "send.errors==0"]
    args = argparse.Namespace(checks=[checks.parse(text) for text in texts], check=texts, hold_restart=False)

    def ran(target: str, cpu: float) -> dict[str, Any]:
        return {"target": target, "delivery": {"ratio": 1.0}, "server": {"cpu_seconds_per_1000_deliveries": cpu}}

    summaries = {
        s["target"]: s for s in _summaries([ran("volthub", 0.05), ran("volthub-gateway", 0.01), ran("node", 0.025)], [])
    }
    assert summaries["volthub-gateway"]["vs"]["node"]["server"]["cpu_seconds_per_1000_deliveries"] == 0.4
    assert "vs" not in summaries["node"]
    assert [c.key for c in _checks_for(args, summaries["volthub-gateway"])] == [
        "vs.node.server.cpu_seconds_per_1000_deliveries",
        "send.errors",
    ]
    assert [c.key for c in _checks_for(args, summaries["volthub"])] == ["send.errors"]
    outcome = checks.evaluate(args.checks[0], summaries["volthub-gateway"])
    assert (outcome["verdict"], outcome["figure"]) == ("pass", 0.4)
