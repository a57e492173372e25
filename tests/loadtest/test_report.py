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


def test_targets_rows_give_every_target_its_figure_and_verdict() -> None:
    runs = [result("volthub", 0.05, connect={"per_second": 1600.0}), result("python-socketio", 0.3)]
    runs.append(result("node", 0.06))
    rows = report.targets_rows(runs, [hold_result()])
    assert [row["met"] for row in rows] == [True] * 7, rows
    figures = {row["target"]: row["figure"] for row in rows}
    assert figures["server CPU per delivery / node's <= 1.0"] == "0.83x"
    assert figures["p99 latency <= 200 ms"] == "15.2 ms"
    assert figures[">= 1,500 authenticated connects/s"] == "1,600/s"
    assert figures[report.HOLD_TARGET] == "20,000 held 60 s, 0 lost"


def test_targets_not_met_and_not_measured() -> None:
    bad = result(
        "volthub",
        0.2,
        30.0,
        clients={"disconnects": 3},
        delivery={"ratio": 0.99, "latency_ms": {"p99": 250.0}},
    )
    capped = hold_result(connected=19_880, sockets=19_880, note="the open-file limit is 20,000")
    rows = report.targets_rows([bad, result("node", 0.1)], [capped])
    assert [row["met"] for row in rows] == [False] * 7, rows
    assert rows[-1]["note"] == "the open-file limit is 20,000"
    alone = report.targets_rows([result("volthub", 0.05)])
    assert alone[0]["met"] is None, "no node run: CPU against node is not measured"
    assert report.targets_rows([result("node", 0.1)]) == []


def test_targets_table_has_a_column_per_volthub_path() -> None:
    runs = [result("volthub", 0.05), result("volthub-gateway", 0.03), result("node", 0.04)]
    text = report.targets_table(runs, [hold_result("volthub-gateway", disconnects=2, ok=False)])
    lines = text.splitlines()
    assert lines[0].split() == ["volthub", "volthub-gateway"]
    assert any(
        line.startswith("server CPU per delivery") and "1.25x NOT met" in line and "0.75x met" in line for line in lines
    )
    hold_line = next(line for line in lines if line.startswith(report.HOLD_TARGET))
    assert "–" in hold_line and "2 lost NOT met" in hold_line
    assert report.targets_table([result("node", 0.1)]) == ""


def test_hold_text() -> None:
    text = report.hold_text(hold_result(connect_errors={"connect timeout": 2}, note="capped"))
    assert "20,000 / 20,000" in text and "connect errors: {'connect timeout': 2}" in text
    assert text.splitlines()[-1] == "note: capped"


def test_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    report.write_json(path, {"runs": [result("node", 0.1)]})
    assert orjson.loads(path.read_bytes())["runs"][0]["target"] == "node"


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "plot.png"
    report.plot(path, [result("volthub", 0.05), result("node", 0.04)], title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
