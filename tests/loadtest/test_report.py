"""Tables, ratios, target checks, JSON and the plot, from hand-made results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from volthub.loadtest import report


def result(target: str, cpu_per_1000: float | None, growth: float | None = 10.0, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target": target,
        "clients": {"requested": 2000, "connected": 2000, "connect_failures": 0, "disconnects": 0},
        "connect": {"per_second": 812.5, "latency_ms": {"p50": 30.0, "p99": 80.5}, "server_cpu_ms_per_connect": 0.9},
        "send": {"attempted": 100, "accepted": 100, "per_second": 5.0, "latency_ms": {"p50": 4.0, "p99": 9.0}},
        "delivery": {
            "expected": 20000,
            "received": 20000,
            "ratio": 1.0,
            "drops": 0,
            "clients_with_drops": 0,
            "by_name_ratio": 1.0,
            "per_second": 10000.0,
            "latency_ms": {"p50": 3.2, "p90": 7.0, "p99": 15.25, "p99.9": 40.0, "max": 51.0},
        },
        "server": {
            "cpu_percent": 45.0,
            "cpu_seconds_per_1000_deliveries": cpu_per_1000,
            "rss_before_connect_mib": 50.0,
            "rss_connected_mib": 90.0,
            "rss_peak_mib": 95.0,
            "rss_growth_kib_per_connection": growth,
        },
        "generator": {"cpu_percent": 50.0},
        "phases": {"send_start": 2.0},
        "series": {
            "seconds": [0, 1, 2, 3],
            "deliveries_per_second": [0, 0, 9000, 11000],
            "server_cpu_percent": [10.0, 60.0, 45.0, 40.0],
        },
        "latency_histogram": [[0.001, 10], [0.01, 80], [0.1, 10]],
        "notes": [],
    }
    for key, value in overrides.items():
        base[key] = {**base[key], **value}
    return base


def test_fmt() -> None:
    assert report.fmt(None) == "–"
    assert report.fmt(float("nan")) == "–"
    assert report.fmt(12345) == "12,345"
    assert report.fmt(1234.5678, 2) == "1,234.57"
    assert report.fmt(True) == "yes"


def test_table_has_a_column_per_run_and_every_figure() -> None:
    text = report.table([result("volthub", 0.05), result("node", 0.04)])
    lines = text.splitlines()
    assert lines[0].split() == ["volthub", "node"]
    for label in (
        "connects per second",
        "delivery ratio",
        "latency p99.9 (ms)",
        "disconnects",
        "server CPU s per 1,000 deliveries",
        "RSS growth per connection (KiB)",
        "generator CPU %",
    ):
        assert any(line.startswith(label) for line in lines), label
    assert "812.5" in text and "15.25" in text and "0.0500" in text and "2,000 / 2,000" in text
    widths = {len(line) for line in lines[2:] if not line.startswith("note")}
    assert len(widths) == 1, "columns line up"


def test_missing_figures_show_as_a_dash() -> None:
    text = report.table([result("volthub", None, None)])
    assert "server CPU s per 1,000 deliveries" in text
    assert "–" in text


def test_notes_are_printed_under_the_table() -> None:
    text = report.table([{**result("volthub", 0.1), "notes": ["ramp timed out after 120s"]}])
    assert text.splitlines()[-1] == "note (volthub): ramp timed out after 120s"


def test_ratios() -> None:
    runs = [result("volthub", 0.05, 12.0), result("python-socketio", 0.2, 40.0), result("node", 0.05, 24.0)]
    lines = report.ratios(runs)
    assert "volthub / python-socketio: server CPU per 1,000 deliveries = 0.25x (0.0500 vs 0.2000)" in lines
    assert "volthub / node: RSS growth per connection = 0.50x (12.0000 vs 24.0000)" in lines
    assert report.ratios([result("node", 0.1)]) == []
    assert "= –x" in report.ratios([result("volthub", None), result("node", 0.1)])[0]


def test_ratios_per_volthub_path_against_the_references_only() -> None:
    runs = [result("volthub", 0.05), result("volthub-gateway", 0.02), result("node", 0.04)]
    lines = report.ratios(runs)
    assert "volthub-gateway / node: server CPU per 1,000 deliveries = 0.50x (0.0200 vs 0.0400)" in lines
    assert not any(line.startswith("volthub / volthub-gateway") for line in lines)
    assert len(lines) == 6


def test_compared_figures_are_what_the_ratio_lines_print() -> None:
    runs = [result("volthub-gateway", 0.01, 6.0), result("node", 0.025, 24.0), result("python-socketio", None)]
    found = report.compared(runs)
    assert set(found) == {"volthub-gateway"}
    assert found["volthub-gateway"]["node"] == {
        "server": {"cpu_seconds_per_1000_deliveries": 0.4, "rss_growth_kib_per_connection": 0.25},
        "connect": {"server_cpu_ms_per_connect": 1.0},
    }
    assert found["volthub-gateway"]["python-socketio"]["server"]["cpu_seconds_per_1000_deliveries"] is None
    assert "volthub-gateway / node: server CPU per 1,000 deliveries = 0.40x (0.0100 vs 0.0250)" in report.ratios(runs)


def hold_result(target: str = "volthub", **overrides: Any) -> dict[str, Any]:
    return {
        "target": target,
        "kind": "hold",
        "requested": 20000,
        "sockets": 20000,
        "connected": 20000,
        "seconds": 60.0,
        "disconnects": 0,
        "ok": True,
        "note": None,
        **overrides,
    }


def test_a_percentile_from_too_few_samples_is_printed_as_such() -> None:
    thin = result("volthub", 0.05, delivery={"latency_ms": {"p50": 3.0, "p99": None, "too_few_samples": True}})
    lines = report.table([thin]).splitlines()
    assert next(line for line in lines if line.startswith("latency p99 (ms)")).endswith("too few samples")
    assert next(line for line in lines if line.startswith("latency p50 (ms)")).endswith("3.00")


def test_send_outcomes_by_status_are_in_the_table() -> None:
    refused = result(
        "volthub",
        0.05,
        send={"refused": 168, "failed": 0, "late": 2, "statuses": {"200": 30, "429": 168, "late": 2}},
    )
    text = report.table([refused])
    assert "168 / 0 / 2" in text and "200: 30, 429: 168, late: 2" in text


def test_stages_table_has_a_row_per_stage() -> None:
    stage = {
        "seconds": 5.0,
        "rate": 20.0,
        "clients": {"target": 100, "connected": 100, "disconnects": 0},
        "send": {"offered": 100, "accepted": 90, "refused": 10, "failed": 0, "late": 0},
        "delivery": {"ratio": 0.9, "latency_ms": {"p50": 4.0, "p99": None, "too_few_samples": True}},
        "reconnect": {"dropped": 50, "recovered": 49},
    }
    lines = report.stages_table({"stages": {"ramp": stage, "storm": stage}}).splitlines()
    assert lines[0].split()[:3] == ["stage", "s", "clients"]
    assert lines[2].startswith("ramp") and lines[3].startswith("storm")
    assert "90/100" in lines[2] and "10 / 0 / 0" in lines[2] and "too few samples" in lines[2] and "49/50" in lines[2]


def test_hold_text() -> None:
    text = report.hold_text(hold_result(connect_errors={"connect timeout": 2}, note="capped"))
    assert "20,000 / 20,000" in text and "connect errors: {'connect timeout': 2}" in text
    assert text.splitlines()[-1] == "note: capped"


def test_hold_text_has_each_broadcast_the_cpu_per_side_and_the_restart() -> None:
    found = hold_result(
        server={"cpu_ms_per_connect": 0.41, "cpu_us_per_socket_second": 3.5, "quiet_cpu_us_per_socket_second": 2.0},
        generator={"cpu_ms_per_connect": 0.9},
        broadcasts={
            "sent": 2,
            "failed": 0,
            "missed": 3,
            "latency_ms": {"p50": 120.0, "p99": 480.0, "max": 510.0},
            "each": [{"seq": 0, "reached": 20000, "last_ms": 510.0}, {"seq": 1, "reached": 19997, "last_ms": 400.0}],
        },
        restart={
            "server_down_seconds": 3.0,
            "server_stopping_seconds": 1.25,
            "server_starting_seconds": 1.75,
            "back": 19990,
            "not_back": 10,
            "recovered": 0,
            "resumable": 20000,
            "server_cpu_ms_per_reconnect": 0.52,
            "generator_cpu_ms_per_reconnect": 0.31,
        },
    )
    text = report.hold_text(found)
    assert "server CPU per connect (ms)     0.410" in text and "(away from broadcasts 2.000)" in text
    assert "generator CPU per connect (ms)  0.900" in text
    assert "broadcast 1: reached 19,997, last delivery 400.0 ms" in text
    assert "120.0 / 480.0 / 510.0" in text
    assert "restart: back / not back        19,990 / 10" in text
    assert "restart: server down (s)        3.0 (stopping 1.2, starting 1.8)" in text
    assert "restart: CPU per reconnect (ms) server 0.520, generator 0.310" in text


def test_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    report.write_json(path, {"runs": [result("node", 0.1)]})
    assert orjson.loads(path.read_bytes())["runs"][0]["target"] == "node"


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "plot.png"
    report.plot(path, [result("volthub", 0.05), result("node", 0.04)], title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
