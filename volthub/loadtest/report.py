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
    ("generator CPU ms per connect", lambda r: fmt(_get(r, "connect", "generator_cpu_ms_per_connect"), 3)),
    (
        "messages accepted / offered",
        lambda r: f"{fmt(_get(r, 'send', 'accepted'))} / {fmt(_get(r, 'send', 'offered'))}",
    ),
    ("sends refused / failed / late", lambda r: _send_errors(r.get("send") or {})),
    ("send outcomes by status", lambda r: _statuses(_get(r, "send", "statuses"))),
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
    ("latency p50 (ms)", lambda r: _latency(r, "p50")),
    ("latency p90 (ms)", lambda r: _latency(r, "p90")),
    ("latency p99 (ms)", lambda r: _latency(r, "p99")),
    ("latency p99.9 (ms)", lambda r: _latency(r, "p99.9")),
    ("latency max (ms)", lambda r: _latency(r, "max")),
    ("disconnects", lambda r: fmt(_get(r, "clients", "disconnects"))),
    (
        "reconnects: dropped / back / recovered",
        lambda r: " / ".join(fmt(_get(r, "reconnect", key)) for key in ("dropped", "reconnected", "recovered")),
    ),
    ("server processes measured", lambda r: fmt(_get(r, "server", "processes"))),
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


TOO_FEW = "too few samples"


def _latency(result: dict[str, Any], name: str, group: tuple[str, ...] = ("delivery",)) -> str:
    figures = _get(result, *group, "latency_ms") or {}
    if figures.get(name) is None and figures.get("too_few_samples"):
        return TOO_FEW
    return fmt(figures.get(name), 2)


def _send_errors(send: dict[str, Any]) -> str:
    return " / ".join(fmt(send.get(key)) for key in ("refused", "failed", "late"))


def _statuses(statuses: dict[str, int] | None) -> str:
    if not statuses:
        return "–"
    return ", ".join(f"{status}: {count:,}" for status, count in sorted(statuses.items()))


def stages_table(result: dict[str, Any]) -> str:
    """One row per stage: its clients, sends, deliveries and latency."""
    headers = [
        "stage",
        "s",
        "clients",
        "msg/s",
        "accepted/offered",
        "refused/failed/late",
        "ratio",
        "p50 ms",
        "p99 ms",
        "lost",
        "recovered",
    ]
    body = []
    for name, stage in (result.get("stages") or {}).items():
        reconnect = stage.get("reconnect") or {}
        body.append(
            [
                name,
                fmt(stage.get("seconds")),
                f"{fmt(_get(stage, 'clients', 'connected'))}/{fmt(_get(stage, 'clients', 'target'))}",
                fmt(stage.get("rate")),
                f"{fmt(_get(stage, 'send', 'accepted'))}/{fmt(_get(stage, 'send', 'offered'))}",
                _send_errors(stage.get("send") or {}),
                fmt(_get(stage, "delivery", "ratio"), 4),
                _latency(stage, "p50"),
                _latency(stage, "p99"),
                fmt(_get(stage, "clients", "disconnects")),
                f"{fmt(reconnect.get('recovered'))}/{fmt(reconnect.get('dropped'))}"
                if reconnect.get("dropped")
                else "–",
            ]
        )
    widths = [max(len(row[i]) for row in [headers, *body]) for i in range(len(headers))]
    lines = [_line(headers, widths), "  ".join("-" * w for w in widths)]
    lines += [_line(row, widths) for row in body]
    return "\n".join(lines)


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


# The servers under test that are volthub (one per path); the others are references.
SUBJECTS = ("volthub", "volthub-gateway")


def ratios(results: Sequence[dict[str, Any]], subjects: Sequence[str] = SUBJECTS) -> list[str]:
    """How each volthub path compares with each reference run on the figures that matter per
    unit of work: CPU per 1,000 deliveries, RSS growth and CPU per connection (lower is better)."""
    by_name = {r["target"]: r for r in results}
    lines = []
    for subject, references in compared(results, subjects).items():
        for reference, figures in references.items():
            for label, path in COMPARED:
                a, b = _get(by_name[subject], *path), _get(by_name[reference], *path)
                ratio = figures[path[0]][path[1]]
                lines.append(f"{subject} / {reference}: {label} = {fmt(ratio, 2)}x ({fmt(a, 4)} vs {fmt(b, 4)})")
    return lines


# (label, where in a run) of each figure `compared` divides; checks name them vs.REF.<where>.
COMPARED = (
    ("server CPU per 1,000 deliveries", ("server", "cpu_seconds_per_1000_deliveries")),
    ("RSS growth per connection", ("server", "rss_growth_kib_per_connection")),
    ("server CPU per connect", ("connect", "server_cpu_ms_per_connect")),
)


def compared(
    results: Sequence[dict[str, Any]], subjects: Sequence[str] = SUBJECTS
) -> dict[str, dict[str, dict[str, dict[str, float | None]]]]:
    """{volthub target: {reference: {section: {figure: volthub's over the reference's}}}} for
    every volthub path and reference server that ran, to four decimals (None where either
    lacks the figure)."""
    by_name = {r["target"]: r for r in results}
    found: dict[str, dict[str, dict[str, dict[str, float | None]]]] = {}
    for subject in subjects:
        mine = by_name.get(subject)
        if mine is None:
            continue
        for other in results:
            if other["target"] in subjects:
                continue
            figures: dict[str, dict[str, float | None]] = {}
            for _, (section, name) in COMPARED:
                ratio = _ratio(_get(mine, section, name), _get(other, section, name))
                # Four decimals, as the figures under it are printed: a check reads what a person does.
                figures.setdefault(section, {})[name] = None if ratio is None else round(ratio, 4)
            found.setdefault(subject, {})[other["target"]] = figures
    return found


def _ratio(a: Any, b: Any) -> float | None:
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else None


def hold_text(found: dict[str, Any]) -> str:
    """One hold's figures, a line each."""
    server = found.get("server") or {}
    generator = found.get("generator") or {}
    casts = found.get("broadcasts") or {}
    latency = casts.get("latency_ms") or {}
    lines = [
        f"sockets held / requested        {fmt(found.get('connected'))} / {fmt(found.get('requested'))}",
        f"connect failures                {fmt(found.get('connect_failures'))}",
        f"connects per second             {fmt(found.get('connects_per_second'))} over {fmt(found.get('ramp_seconds'))} s",
        f"held for (s)                    {fmt(found.get('held_seconds'))}",
        f"disconnects during the hold     {fmt(found.get('disconnects'))}",
        f"server CPU per connect (ms)     {fmt(server.get('cpu_ms_per_connect'), 3)} "
        f"(without the upkeep of those held meanwhile {fmt(server.get('cpu_ms_per_connect_itself'), 3)})",
        f"server CPU per socket-s (us)    {fmt(server.get('cpu_us_per_socket_second'), 3)} "
        f"(away from broadcasts {fmt(server.get('quiet_cpu_us_per_socket_second'), 3)})",
        f"server CPU per delivery (us)    {fmt(server.get('cpu_us_per_delivery'), 2)} (beyond the upkeep)",
        f"generator CPU per connect (ms)  {fmt(generator.get('cpu_ms_per_connect'), 3)} "
        f"({fmt(generator.get('processes'))} processes, {fmt(generator.get('batch_processes'))} as batch jobs)",
        f"generator CPU per socket-s (us) {fmt(generator.get('cpu_us_per_socket_second'), 3)}",
        f"generator CPU per delivery (us) {fmt(generator.get('cpu_us_per_delivery'), 2)} (beyond the upkeep; "
        f"{fmt(generator.get('recognised_reads'))} reads recognised)",
        f"server RSS connected / peak MiB {fmt(server.get('rss_connected_mib'))} / {fmt(server.get('rss_peak_mib'))}",
        f"RSS growth per connection (KiB) {fmt(server.get('rss_growth_kib_per_connection'), 2)}",
        f"broadcasts sent / failed        {fmt(casts.get('sent'))} / {fmt(casts.get('failed'))}",
        f"broadcast deliveries missed     {fmt(casts.get('missed'))} ({fmt(casts.get('duplicates'))} twice)",
        f"delivery p50 / p99 / max (ms)   {fmt(latency.get('p50'))} / {fmt(latency.get('p99'))} / {fmt(latency.get('max'))}",
        f"generator processes / addresses {fmt(found.get('processes'))} / {fmt(found.get('addresses'))} "
        f"({fmt(found.get('generator_failures'))} failed)",
        f"server processes, fd limit each {fmt(found.get('server_processes'))}, {fmt(found.get('server_fd_limit'))}",
    ]
    for row in casts.get("each", []):
        lines.append(f"  broadcast {row['seq']}: reached {fmt(row['reached'])}, last delivery {fmt(row['last_ms'])} ms")
    load = found.get("load_average")
    if load:
        lines.append(
            f"machine load average before / after {' '.join(f'{x:.1f}' for x in load['before'])} / "
            f"{' '.join(f'{x:.1f}' for x in load['after'])}"
        )
    restart = found.get("restart")
    if restart:
        lines += [
            f"restart: server down (s)        {fmt(restart.get('server_down_seconds'))} (stopping "
            f"{fmt(restart.get('server_stopping_seconds'))}, starting {fmt(restart.get('server_starting_seconds'))})",
            f"restart: back / not back        {fmt(restart.get('back'))} / {fmt(restart.get('not_back'))}",
            f"restart: all back after (s)     {fmt(restart.get('seconds_until_all_back'))}",
            f"restart: recovered / resumable  {fmt(restart.get('recovered'))} / {fmt(restart.get('resumable'))}",
            f"restart: CPU per reconnect (ms) server {fmt(restart.get('server_cpu_ms_per_reconnect'), 3)}, "
            f"generator {fmt(restart.get('generator_cpu_ms_per_reconnect'), 3)}",
        ]
        if restart.get("reconnect_errors"):
            lines.append(f"restart: reconnect errors {restart['reconnect_errors']}")
    for key in ("connect_errors", "disconnect_reasons"):
        if found.get(key):
            lines.append(f"{key.replace('_', ' ')}: {found[key]}")
    if casts.get("errors"):
        lines.append(f"broadcast errors: {casts['errors']}")
    if found.get("machine_note"):
        lines.append(f"note: {found['machine_note']}")
    if found.get("note"):
        lines.append(f"note: {found['note']}")
    return "\n".join(lines)


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
