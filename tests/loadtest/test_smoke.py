"""End to end: a few clients for a few seconds against real servers started by the harness."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from volthub import cli
from volthub.loadtest.servers import bench_dir

pytestmark = pytest.mark.slow


def run(tmp_path: Path, *argv: str) -> list[dict[str, Any]]:
    out = tmp_path / "result.json"
    code = cli.main(
        [
            "loadtest",
            "--spawn",
            "--clients",
            "20",
            "--channels",
            "2",
            "--rate",
            "10",
            "--duration",
            "2",
            "--drain",
            "5",
            "--quiet",
            "--workdir",
            str(tmp_path),
            "--json",
            str(out),
            "--check",
            "delivery.ratio>=0.999",
            *argv,
        ]
    )
    assert code == 0
    return orjson.loads(out.read_bytes())["runs"]


def assert_clean(result: dict[str, Any], clients: int = 20) -> None:
    assert result["clients"]["connected"] == clients, result["clients"]
    assert result["clients"]["greeted"] == clients
    assert result["clients"]["disconnects"] == 0
    assert result["send"]["accepted"] == 20, result["send"]
    # 20 messages over 2 channels, 10 clients each: every client hears its channel's 10.
    assert result["delivery"]["expected"] == 200
    assert result["delivery"]["ratio"] == 1.0
    assert result["delivery"]["latency_ms"]["count"] == 200
    assert result["server"]["cpu_seconds"] is not None and result["server"]["rss_connected_mib"] > 0


@pytest.mark.parametrize("ws_client", ["raw", "trio-websocket"])
def test_python_socketio_reference(tmp_path: Path, ws_client: str) -> None:
    pytest.importorskip("uvicorn", reason="the bench extra installs the reference server")
    [result] = run(tmp_path, "--target", "python-socketio", "--ws-client", ws_client)
    assert_clean(result)
    assert result["delivery"]["by_name_ratio"] == 1.0


def test_node_reference(tmp_path: Path) -> None:
    if shutil.which("node") is None or not (bench_dir() / "reference_node" / "node_modules" / "socket.io").is_dir():
        pytest.skip("node or the reference server's node_modules missing (make bench installs them)")
    [result] = run(tmp_path, "--target", "node")
    assert_clean(result)


def test_volthub_sockets_and_sse(tmp_path: Path) -> None:
    [result] = run(tmp_path, "--target", "volthub", "--clients", "16", "--sse", "4")
    assert_clean(result)
    assert result["clients"]["sse_connected"] == 4
    assert result["delivery"]["by_name_ratio"] == 1.0
    assert result["send"]["statuses"] == {"200": 20}
    assert result["send"]["offered"] == 20 and result["send"]["errors"] == 0


def test_volthub_gateway_sockets_on_their_own_port(tmp_path: Path) -> None:
    """volthub-gateway: REST on the main port, Socket.IO on `[events] gateway_port`."""
    from volthub.config import EventsSettings

    if "gateway_port" not in EventsSettings.model_fields:
        pytest.skip("this build has no [events] gateway_port (the Events API's own listener)")
    [result] = run(tmp_path, "--target", "volthub-gateway")
    assert_clean(result)
    assert result["socket_url"] != result["url"]


def test_volthub_default_path_with_the_spec_namespace(tmp_path: Path) -> None:
    """`io("ws://host/ws/events")`: Engine.IO at /socket.io, namespace /ws/events."""
    [result] = run(
        tmp_path,
        "--target",
        "volthub",
        "--sio-path",
        "/socket.io",
        "--namespace",
        "/ws/events",
        "--ws-client",
        "trio-websocket",
    )
    assert_clean(result)


def test_volthub_hold_from_two_generator_processes(tmp_path: Path) -> None:
    """--hold: a fresh server, sockets opened by two worker processes, held, none lost."""
    out = tmp_path / "hold.json"
    code = cli.main(
        [
            "loadtest",
            "--spawn",
            "--target",
            "volthub",
            "--clients",
            "0",
            "--hold",
            "30",
            "--hold-seconds",
            "1",
            "--hold-processes",
            "2",
            "--quiet",
            "--workdir",
            str(tmp_path),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    payload = orjson.loads(out.read_bytes())
    [summary] = payload["runs"]
    assert set(summary) == {"target", "hold", "checks"}, "a hold alone: no run figures"
    held = summary["hold"]
    assert held["target"] == "volthub" and held["processes"] == 2
    assert held["connected"] == 30 and held["disconnects"] == 0 and held["ok"] is True
    assert held["server_fd_limit"] and held["note"] is None
    assert [(c["key"], c["verdict"]) for c in payload["checks"]] == [
        ("hold.disconnects", "pass"),
        ("hold.connect_failures", "pass"),
        ("hold.broadcasts.missed", "pass"),
        ("hold.broadcasts.duplicates", "pass"),
        ("hold.broadcasts.failed", "pass"),
        ("hold.generator_failures", "pass"),
    ]


def test_a_server_that_does_not_start_costs_only_its_own_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad server setting (here an unknown key) fails that target; the next one still runs."""
    pytest.importorskip("uvicorn", reason="the bench extra installs the reference server (the run that must go on)")
    out = tmp_path / "result.json"
    code = cli.main(
        [
            "loadtest",
            "--spawn",
            "--target",
            "volthub,python-socketio",
            "--server-env",
            "VOLTHUB_EVENTS__NO_SUCH_KEY=1",
            "--clients",
            "4",
            "--channels",
            "1",
            "--rate",
            "2",
            "--duration",
            "1",
            "--quiet",
            "--workdir",
            str(tmp_path),
            "--json",
            str(out),
        ]
    )
    assert code == 1
    assert "volthub exited with" in capsys.readouterr().err
    [result] = orjson.loads(out.read_bytes())["runs"]
    assert result["target"] == "python-socketio" and result["clients"]["connected"] == 4
