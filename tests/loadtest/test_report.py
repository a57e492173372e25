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


def test_targets_check() -> None:
    good = report.targets_check([result("volthub", 0.05), result("python-socketio", 0.3), result("node", 0.06)])
    assert all(line.startswith("[met]") for line in good), good
    bad = report.targets_check(
        [
            result(
                "volthub",
                0.2,
                30.0,
                clients={"disconnects": 3},
                connect={"per_second": 300.0},
                delivery={"ratio": 0.99, "latency_ms": {"p99": 250.0}},
            ),
            result("python-socketio", 0.3),
            result("node", 0.1),
        ]
    )
    assert all(line.startswith("[NOT met]") for line in bad), bad
    assert len(bad) == 7


def test_json_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    report.write_json(path, {"runs": [result("node", 0.1)]})
    assert orjson.loads(path.read_bytes())["runs"][0]["target"] == "node"


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "plot.png"
    report.plot(path, [result("volthub", 0.05), result("node", 0.04)], title="test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
