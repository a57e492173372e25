"""Server command lines and the profile summary (no process is started here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from volthub.loadtest import servers


def test_volthub_plan_is_a_bench_configuration(tmp_path: Path) -> None:
    plan = servers.plan_server("volthub", tmp_path, cpus="0", port=5555, extra_env={"VOLTHUB_CHAT__INBOX_SIZE": "9"})
    assert plan.argv[:3] == ["taskset", "-c", "0"]
    assert plan.argv[3:7] == [sys.executable, "-m", "volthub", "serve"]
    database = f"sqlite:///{tmp_path / 'loadtest.db'}"
    assert " ".join(plan.argv[7:]) == f"--host 127.0.0.1 --port 5555 --database {database}"
    assert plan.env["VOLTHUB_RATELIMIT__ENABLED"] == "false"
    assert plan.env["VOLTHUB_CHAT__INBOX_SIZE"] == "9"
    assert plan.url == "http://127.0.0.1:5555"


def test_reference_plans(tmp_path: Path) -> None:
    plan = servers.plan_server("python-socketio", tmp_path, database="ignored", port=5556)
    assert plan.argv[1].endswith("bench/reference_python.py") and "127.0.0.1" in plan.argv
    assert Path(plan.argv[1]).is_file()
    assert (servers.bench_dir() / "reference_node" / "server.js").is_file()
    with pytest.raises(ValueError):
        servers.plan_server("apache", tmp_path)


def test_profiler_command() -> None:
    argv = servers.profiler_command(4242, Path("/tmp/p.txt"))
    assert argv[0].endswith("py-spy")
    assert argv[1:] == [
        "record",
        "--pid",
        "4242",
        "--rate",
        "250",
        "--format",
        "raw",
        "--function",
        "--output",
        "/tmp/p.txt",
        "--nonblocking",
    ]


def test_top_frames_from_collapsed_stacks() -> None:
    collapsed = "\n".join(
        [
            "main (volthub/cli.py:10);fan_out (/work/main/volthub/hub/bus.py:20);send_nowait (/x/site-packages/trio/_channel.py:5) 60",
            "main (volthub/cli.py:10);fan_out (/work/main/volthub/hub/bus.py:20) 30",
            "main (volthub/cli.py:10);dumps (/usr/lib/python3.11/json/__init__.py:231) 10",
            "garbage line",
        ]
    )
    top = servers.top_frames(collapsed, limit=3)
    assert top["self"] == [
        ("send_nowait (trio/_channel.py)", 60.0),
        ("fan_out (volthub/hub/bus.py)", 30.0),
        ("dumps (json/__init__.py)", 10.0),
    ]
    assert top["inclusive"][0] == ("fan_out (volthub/hub/bus.py)", 90.0), "the trunk (main) is left out"
    assert top["samples"] == 100
    assert servers.top_frames("") == {"self": [], "inclusive": []}


def test_volthub_gateway_plan_gives_the_sockets_their_own_port(tmp_path: Path) -> None:
    plan = servers.plan_server("volthub-gateway", tmp_path, port=5557)
    assert plan.gateway_port and plan.gateway_port != 5557
    assert plan.env["VOLTHUB_EVENTS__GATEWAY_PORT"] == str(plan.gateway_port)
    assert plan.env["VOLTHUB_EVENTS__GATEWAY_HOST"] == "127.0.0.1"
    assert plan.url == "http://127.0.0.1:5557"
    assert plan.socket_url == f"http://127.0.0.1:{plan.gateway_port}"
    assert servers.plan_server("volthub", tmp_path).env["VOLTHUB_EVENTS__GATEWAY_PORT"] == "0"  # the mount alone
    assert servers.plan_server("volthub", tmp_path, port=5558).socket_url == "http://127.0.0.1:5558"
    assert plan.log_path.name == "volthub-gateway.log"
