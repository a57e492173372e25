"""Tables, ratios, JSON and the plot of one or more runs (pure formatting, plus files)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

Row = tuple[str, Callable[[dict[str, Any]], Any]]


def _get(result: dict[str, Any], *path: str) -> Any:
    value: Any = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def fmt(value: Any, digits: int = 1) -> str:
    """Numbers with thousands separators; None and NaN as an en dash."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


ROWS: list[Row] = [
    (
        "clients connected / requested",
        lambda r: f"{fmt(_get(r, 'clients', 'connected'))} / {fmt(_get(r, 'clients', 'requested'))}",
    ),
    ("connect failures", lambda r: fmt(_get(r, "clients", "connect_failures"))),
    ("connects per second", lambda r: fmt(_get(r, "connect", "per_second"))),
    (
        "connect latency p50 / p99 (ms)",
        lambda r: f"{fmt(_get(r, 'connect', 'latency_ms', 'p50'))} / {fmt(_get(r, 'connect', 'latency_ms', 'p99'))}",
    ),
    ("server CPU ms per connect", lambda r: fmt(_get(r, "connect", "server_cpu_ms_per_connect"), 3)),
    ("messages accepted / sent", lambda r: f"{fmt(_get(r, 'send', 'accepted'))} / {fmt(_get(r, 'send', 'attempted'))}"),
    ("messages per second", lambda r: fmt(_get(r, "send", "per_second"))),
    (
        "send response p50 / p99 (ms)",
        lambda r: f"{fmt(_get(r, 'send', 'latency_ms', 'p50'))} / {fmt(_get(r, 'send', 'latency_ms', 'p99'))}",
    ),
    (
        "deliveries received / expected",
        lambda r: f"{fmt(_get(r, 'delivery', 'received'))} / {fmt(_get(r, 'delivery', 'expected'))}",
    ),
    ("delivery ratio", lambda r: fmt(_get(r, "delivery", "ratio"), 4)),
    (
        "drops (clients with drops)",
        lambda r: f"{fmt(_get(r, 'delivery', 'drops'))} ({fmt(_get(r, 'delivery', 'clients_with_drops'))})",
    ),
    ("by-name frames per event frame", lambda r: fmt(_get(r, "delivery", "by_name_ratio"), 3)),
    ("deliveries per second", lambda r: fmt(_get(r, "delivery", "per_second"))),
    ("latency p50 (ms)", lambda r: fmt(_get(r, "delivery", "latency_ms", "p50"), 2)),
    ("latency p90 (ms)", lambda r: fmt(_get(r, "delivery", "latency_ms", "p90"), 2)),
    ("latency p99 (ms)", lambda r: fmt(_get(r, "delivery", "latency_ms", "p99"), 2)),
    ("latency p99.9 (ms)", lambda r: fmt(_get(r, "delivery", "latency_ms", "p99.9"), 2)),
    ("latency max (ms)", lambda r: fmt(_get(r, "delivery", "latency_ms", "max"), 2)),
    ("disconnects", lambda r: fmt(_get(r, "clients", "disconnects"))),
    ("server CPU % (send + drain)", lambda r: fmt(_get(r, "server", "cpu_percent"))),
    ("server CPU s per 1,000 deliveries", lambda r: fmt(_get(r, "server", "cpu_seconds_per_1000_deliveries"), 4)),
    (
        "server RSS before / connected / peak (MiB)",
        lambda r: " / ".join(
            fmt(_get(r, "server", key)) for key in ("rss_before_connect_mib", "rss_connected_mib", "rss_peak_mib")
        ),
    ),
    ("RSS growth per connection (KiB)", lambda r: fmt(_get(r, "server", "rss_growth_kib_per_connection"), 2)),
    ("generator CPU %", lambda r: fmt(_get(r, "generator", "cpu_percent"))),
    ("other processes CPU %", lambda r: fmt(_get(r, "machine", "other_processes_cpu_percent"))),
]


def table(results: Sequence[dict[str, Any]]) -> str:
    """One column per run, one row per figure."""
    headers = ["", *(r["target"] for r in results)]
    body = [[label, *(getter(r) for r in results)] for label, getter in ROWS]
    widths = [max(len(row[i]) for row in [headers, *body]) for i in range(len(headers))]
    lines = [_line(headers, widths), "  ".join("-" * w for w in widths)]
    lines += [_line(row, widths) for row in body]
    for result in results:
        for note in result.get("notes", []):
            lines.append(f"note ({result['target']}): {note}")
    return "\n".join(lines)


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    first = cells[0].ljust(widths[0])
    return "  ".join([first, *(cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))]).rstrip()


def ratios(results: Sequence[dict[str, Any]], subject: str = "volthub") -> list[str]:
    """How `subject` compares with each other run on the figures that matter per unit of
    work: CPU per 1,000 deliveries and RSS growth per connection (lower is better)."""
    by_name = {r["target"]: r for r in results}
    mine = by_name.get(subject)
    if mine is None:
        return []
    lines = []
    for other in results:
        if other["target"] == subject:
            continue
        for label, path in (
            ("server CPU per 1,000 deliveries", ("server", "cpu_seconds_per_1000_deliveries")),
            ("RSS growth per connection", ("server", "rss_growth_kib_per_connection")),
            ("server CPU per connect", ("connect", "server_cpu_ms_per_connect")),
        ):
            a, b = _get(mine, *path), _get(other, *path)
            ratio = a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None
            lines.append(f"{subject} / {other['target']}: {label} = {fmt(ratio, 2)}x ({fmt(a, 4)} vs {fmt(b, 4)})")
    return lines


def targets_check(results: Sequence[dict[str, Any]], subject: str = "volthub") -> list[str]:
    """The issue's targets that one run can answer, each marked met or not met."""
    by_name = {r["target"]: r for r in results}
    mine = by_name.get(subject)
    if mine is None:
        return []
    checks: list[tuple[str, bool | None]] = []
    cpu = _get(mine, "server", "cpu_seconds_per_1000_deliveries")
    node = _get(by_name.get("node", {}), "server", "cpu_seconds_per_1000_deliveries")
    pysio = _get(by_name.get("python-socketio", {}), "server", "cpu_seconds_per_1000_deliveries")
    if cpu is not None and node:
        checks.append(("CPU per delivery <= node socket.io's", cpu <= node))
    if cpu is not None and pysio:
        checks.append(("CPU per delivery <= 1/3 of python-socketio's", cpu <= pysio / 3))
    ratio = _get(mine, "delivery", "ratio")
    checks.append(("delivery ratio 1.0", None if ratio is None else ratio >= 1.0))
    p99 = _get(mine, "delivery", "latency_ms", "p99")
    checks.append(("p99 <= 200 ms", None if p99 is None else p99 <= 200))
    growth = _get(mine, "server", "rss_growth_kib_per_connection")
    checks.append(("RSS growth <= 25 KiB per connection", None if growth is None else growth <= 25))
    checks.append(("no disconnects", _get(mine, "clients", "disconnects") == 0))
    rate = _get(mine, "connect", "per_second")
    checks.append(("700 authenticated connects/s", None if rate is None else rate >= 700))
    return [f"[{'met' if ok else 'NOT met' if ok is not None else 'n/a'}] {label}" for label, ok in checks]


def write_json(path: Path, payload: Any) -> None:
    path.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def plot(path: Path, results: Sequence[dict[str, Any]], title: str = "") -> None:
    """Latency distribution (CCDF, log-log) and throughput / server CPU over time."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # the `bench` extra
        raise RuntimeError("--plot needs matplotlib: pip install -e '.[bench]'") from exc
    figure, (dist, rate, cpu) = plt.subplots(1, 3, figsize=(15, 4.5))
    for result in results:
        name = result["target"]
        edges_counts = result.get("latency_histogram") or []
        total = sum(count for _, count in edges_counts)
        if total:
            remaining, xs, ys = total, [], []
            for edge, count in edges_counts:
                remaining -= count
                xs.append(edge * 1000)
                ys.append(max(remaining / total, 0.5 / total))
            dist.step(xs, ys, where="post", label=name)
        series = result["series"]
        start = result["phases"].get("send_start", 0)
        seconds = [s - start for s in series["seconds"]]
        rate.plot(seconds, series["deliveries_per_second"], label=f"{name} deliveries/s")
        cpu.plot(seconds, series["server_cpu_percent"], label=f"{name} server CPU %")
    dist.set(
        xscale="log",
        yscale="log",
        xlabel="end-to-end latency (ms)",
        ylabel="fraction of deliveries slower",
        title="latency distribution (CCDF)",
    )
    rate.set(xlabel="seconds since sending began", ylabel="deliveries per second", title="throughput")
    cpu.set(xlabel="seconds since sending began", ylabel="% of one core", title="server CPU")
    for axes in (dist, rate, cpu):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize="small")
    if title:
        figure.suptitle(title, fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
