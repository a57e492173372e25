"""Checks over a run's figures: `[TARGET:]KEY OP NUMBER`, evaluated into pass / fail, and JUnit XML.

KEY is a dotted path into one run's summary (what `--json` writes under `runs`), e.g.
`delivery.ratio`, `delivery.latency_ms.p99`, `stages.steady.send.errors`, or
`vs.node.server.cpu_seconds_per_1000_deliveries` (a volthub target's figure over the same
figure of a reference server run in the same invocation). A `TARGET:` prefix applies the
check to that target's run only (`volthub-gateway:vs.node...<=0.4`). A check whose
figure is missing fails as "not measured"; a latency percentile from too few samples fails
as "too few samples" (see `metrics.percentile_coverage`): a gate never passes on a figure
the run did not measure.
"""

from __future__ import annotations

import argparse
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from volthub.loadtest.report import COMPARED

OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_EXPR = re.compile(
    r"^\s*(?:([A-Za-z0-9_][A-Za-z0-9_.\-]*)\s*:)?"  # the target it applies to, when not every one
    r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(<=|>=|==|!=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$"
)

# The figures a check may name: KEY -> what it is. `stages.NAME.` before one of _STAGE_KEYS
# names that stage's own figure; `delivery.by_kind.KIND.` before `ratio`, `expected`,
# `received`, `drops` one client kind's.
KEYS: dict[str, str] = {
    "delivery.ratio": "deliveries received / deliveries of every offered message to every client that "
    "should get it (refused, failed and late sends count as undelivered)",
    "delivery.expected": "deliveries due: offered messages x clients of their channel in the window",
    "delivery.received": "deliveries that arrived",
    "delivery.drops": "expected - received",
    "delivery.clients_with_drops": "clients that missed at least one message",
    "delivery.per_second": "deliveries per second over sending and the drain",
    "delivery.latency_ms.p50": "end-to-end latency percentile (ms); also p90, p99, p99.9, max, mean",
    "delivery.latency_ms.p90": "",
    "delivery.latency_ms.p99": "",
    "delivery.latency_ms.p99.9": "",
    "delivery.latency_ms.max": "",
    "delivery.latency_ms.mean": "",
    "send.offered": "chat messages the schedule offered",
    "send.accepted": "sends answered 200",
    "send.errors": "sends refused (4xx/5xx), failed (no answer) or not sent in time",
    "send.refused": "sends answered 4xx or 5xx",
    "send.failed": "sends without an answer (connection error, timeout)",
    "send.late": "sends that could not start within a second of their due time (not sent)",
    "send.per_second": "accepted sends per second",
    "send.latency_ms.p99": "POST answer time percentile (ms); also p50, p90, max",
    "send.latency_ms.p50": "",
    "send.latency_ms.p90": "",
    "send.latency_ms.max": "",
    "clients.requested": "clients the run asked for (at its peak)",
    "clients.connected": "clients that connected",
    "clients.connect_failures": "clients that never connected",
    "clients.disconnects": "connections the server ended or lost (not the run's own drops)",
    "connect.per_second": "connects per second over the ramp",
    "connect.latency_ms.p50": "connect latency percentile (ms); also p99, max",
    "connect.latency_ms.p99": "",
    "connect.latency_ms.max": "",
    "reconnect.dropped": "sockets a reconnect storm dropped",
    "reconnect.reconnected": "of those, reconnected",
    "reconnect.recovered": "of those, recovered their session (same session, missed events replayed)",
    "reconnect.recovered_ratio": "recovered / dropped with something to resume from (not without_offset)",
    "reconnect.without_offset": "dropped before any event arrived (nothing to resume from: not recoverable)",
    "reconnect.latency_ms.p99": "drop to reconnected percentile (ms); also p50, max",
    "reconnect.latency_ms.p50": "",
    "reconnect.latency_ms.max": "",
    "server.cpu_percent": "server CPU % of one core over sending and the drain (whole process tree)",
    "server.cpu_seconds_per_1000_deliveries": "server CPU seconds per 1,000 deliveries",
    "server.rss_peak_mib": "server RSS peak (MiB, whole process tree)",
    "server.rss_growth_kib_per_connection": "server RSS growth per connection over the ramp (KiB)",
    "hold.connected": "sockets held (--hold)",
    "hold.disconnects": "sockets lost during the hold",
    "hold.connect_failures": "held sockets that never connected",
    "hold.connects_per_second": "connects per second over the hold's ramp",
    "hold.broadcasts.sent": "chat messages posted in the held sockets' channel during the hold",
    "hold.broadcasts.failed": "of those, posts refused or not answered",
    "hold.broadcasts.missed": "deliveries of the broadcasts that never arrived (sockets x broadcasts - received)",
    "hold.broadcasts.duplicates": "deliveries of a broadcast to a socket that had already read it (counted once)",
    "hold.broadcasts.last_ms_max": "the slowest broadcast: post to its last delivery (ms)",
    "hold.broadcasts.latency_ms.p99": "post to delivery percentile over every broadcast's deliveries (ms); also p50, max",
    "hold.broadcasts.latency_ms.p50": "",
    "hold.broadcasts.latency_ms.max": "",
    "hold.server.cpu_ms_per_connect": "server CPU per connect over the ramp (ms, whole process tree)",
    "hold.server.cpu_ms_per_connect_itself": "the same without the upkeep of the sockets held meanwhile (ms)",
    "hold.server.cpu_us_per_socket_second": "server CPU per held socket per second of the hold (us)",
    "hold.server.quiet_cpu_us_per_socket_second": "the same away from broadcasts: upkeep (pings, timers)",
    "hold.server.cpu_us_per_delivery": "server CPU per broadcast delivery beyond the upkeep (us)",
    "hold.server.rss_growth_kib_per_connection": "server RSS growth per held socket over the ramp (KiB)",
    "hold.generator.cpu_ms_per_connect": "generator CPU per connect over the ramp (ms, all its processes)",
    "hold.generator.cpu_us_per_delivery": "generator CPU per broadcast delivery beyond its upkeep (us, all its processes)",
    "hold.generator_failures": "generator processes that ended with an error (their figures are incomplete)",
    "hold.restart.not_back": "sockets not connected again after the restart (within --hold-restart-timeout)",
    "hold.restart.seconds_until_all_back": "SIGTERM to the last socket connected again (s)",
    "hold.restart.recovered": "reconnected sockets whose session the server recovered",
    "generator.cpu_percent": "the generator's own CPU % (near 100: figures are generator-bound)",
}
# What each stage has of those (under stages.NAME.).
_STAGE_KEYS = {
    key
    for key in KEYS
    if key.startswith(("delivery.ratio", "delivery.expected", "delivery.received", "delivery.drops"))
    or key.startswith(("delivery.latency_ms.", "reconnect."))
    or key in ("clients.connected", "clients.disconnects")
    or key.startswith("send.")
    and key not in ("send.per_second",)
    and not key.startswith("send.latency_ms")
}
_KIND_KEYS = ("ratio", "expected", "received", "drops")
# The figures compared with a reference server's (under vs.REFERENCE.): lower is better.
VS_KEYS = tuple(".".join(path) for _, path in COMPARED)
PERCENTILE = re.compile(r"\.(p\d+(?:\.\d+)?|max)$")


class CheckError(ValueError):
    """A check expression that does not parse or names no figure."""


@dataclass(frozen=True)
class Check:
    key: str
    op: str
    limit: float
    name: str = ""  # what it checks, for reports and JUnit; the expression when not given
    target: str | None = None  # the one target (or run) it applies to; None: every one

    @property
    def expression(self) -> str:
        where = f"{self.target}:" if self.target else ""
        return f"{where}{self.key} {self.op} {self.limit:g}"

    def applies_to(self, target: str) -> bool:
        return self.target is None or self.target == target

    @property
    def title(self) -> str:
        return self.name or self.expression


def known_key(key: str) -> bool:
    if key in KEYS:
        return True
    parts = key.split(".")
    if len(parts) > 3 and parts[0] == "stages":  # a stage's name may hold dots itself
        return any(".".join(parts[start:]) in _STAGE_KEYS for start in range(2, len(parts)))
    if len(parts) == 4 and parts[:2] == ["delivery", "by_kind"]:
        return parts[3] in _KIND_KEYS
    if len(parts) > 2 and parts[0] == "vs":
        return ".".join(parts[2:]) in VS_KEYS
    return False


def parse(
    text: str,
    name: str = "",
    known: Callable[[str], bool] = known_key,
    listed: str = "at the end of `volthub loadtest --help`",
    example: str = "delivery.ratio>=0.999",
) -> Check:
    """A check from its expression; `known` tells the figures a check may name (listed
    where `listed` says), for tools with figures of their own."""
    match = _EXPR.match(text)
    if match is None:
        raise CheckError(f"--check {text!r}: expected [TARGET:]KEY OP NUMBER, e.g. {example!r}")
    target, key, op, number = match.groups()
    if not known(key):
        raise CheckError(f"--check {text!r}: no figure named {key!r} (the figures are listed {listed})")
    return Check(key, op, float(number), name, target)


def from_options(
    parser: argparse.ArgumentParser,
    texts: Sequence[str],
    known: Callable[[str], bool],
    defaults: Sequence[Check],
    example: str,
    targets: Sequence[str] = (),
) -> list[Check]:
    """A tool's --check expressions over its own figures, or `defaults` when none is given.
    A bad expression, or a TARGET: prefix naming none of `targets` (a check that would
    never run), ends the program with a usage error (exit status 2)."""
    try:
        given = [parse(text, known=known, listed="in --help", example=example) for text in texts] or list(defaults)
    except CheckError as exc:
        parser.error(str(exc))
    problem = stray_targets(given, targets)
    if problem is not None:
        parser.error(problem)
    return given


def stray_targets(given: Sequence[Check], targets: Sequence[str]) -> str | None:
    """The usage problem when a TARGET: prefix names none of `targets` (a check that would
    never run), or None."""
    strays = sorted({check.target for check in given if check.target is not None and check.target not in targets})
    if not strays:
        return None
    if not targets:
        return "--check takes no TARGET: prefix here (one run)"
    return f"--check names {', '.join(strays)}, which is none of this run's: {', '.join(targets)}"


# When no --check is given (and the scenario names none): what a healthy run of a hub looks like.
DEFAULT_CHECKS: tuple[Check, ...] = (
    Check("delivery.ratio", ">=", 0.999, "every offered message reaches every client that should get it"),
    Check("send.errors", "==", 0, "no send refused, failed or late"),
    Check("delivery.latency_ms.p99", "<", 200, "p99 end-to-end latency under 200 ms"),
    Check("clients.connect_failures", "==", 0, "every client connects"),
    Check("clients.disconnects", "==", 0, "no connection lost"),
)


def lookup(run: dict[str, Any], key: str) -> Any:
    """The figure at a dotted path; keys may themselves hold a dot (`p99.9`), so the longest
    key that matches wins at each level."""
    value: Any = run
    parts = key.split(".")
    position = 0
    while position < len(parts):
        if not isinstance(value, dict):
            return None
        for end in range(len(parts), position, -1):
            name = ".".join(parts[position:end])
            if name in value:
                value, position = value[name], end
                break
        else:
            return None
    return value


def evaluate(check: Check, run: dict[str, Any]) -> dict[str, Any]:
    """{name, key, op, limit, figure, verdict}; verdict one of pass, fail, too few samples,
    not measured. Only pass passes."""
    figure = lookup(run, check.key)
    verdict: str
    if isinstance(figure, bool) or not isinstance(figure, (int, float)) or math.isnan(figure):
        verdict = "too few samples" if _too_few(run, check.key) else "not measured"
        figure = None
    else:
        verdict = "pass" if OPS[check.op](figure, check.limit) else "fail"
    return {
        "name": check.title,
        "expression": check.expression,
        "key": check.key,
        "op": check.op,
        "limit": check.limit,
        "figure": figure,
        "verdict": verdict,
    }


def _too_few(run: dict[str, Any], key: str) -> bool:
    """A percentile left out because too few of the expected samples arrived."""
    match = PERCENTILE.search(key)
    if match is None or not key[: match.start()].endswith("latency_ms"):
        return False
    group = lookup(run, key[: match.start()])
    return isinstance(group, dict) and group.get("too_few_samples") is True


def evaluate_each(
    runs: Sequence[dict[str, Any]],
    given: Sequence[Check],
    target: Callable[[dict[str, Any]], str],
    label: Callable[[dict[str, Any]], str],
) -> list[dict[str, Any]]:
    """Each check over each run it applies to (`target(run)`: what a TARGET: prefix names),
    shown as `label(run)`; each outcome also goes into its run under `checks`."""
    outcomes = []
    for run in runs:
        for check in given:
            if check.applies_to(target(run)):
                outcome = evaluate(check, run)
                outcome["target"] = label(run)
                run.setdefault("checks", []).append(outcome)
                outcomes.append(outcome)
    return outcomes


def passed(outcomes: Sequence[dict[str, Any]]) -> bool:
    return all(outcome["verdict"] == "pass" for outcome in outcomes)


def verdict(outcomes: Sequence[dict[str, Any]]) -> str:
    """`all held`, or how many of the checks were not met."""
    failed = sum(1 for outcome in outcomes if outcome["verdict"] != "pass")
    return "all held" if not failed else f"{failed} of {len(outcomes)} NOT met"


def table(outcomes: Sequence[dict[str, Any]]) -> str:
    """One line per check: verdict, what it checks, figure against limit."""
    lines = []
    for outcome in outcomes:
        figure = outcome["figure"]
        shown = "–" if figure is None else f"{figure:g}" if isinstance(figure, float) else f"{figure:,}"
        verdict = {"pass": "met", "fail": "NOT met"}.get(outcome["verdict"], outcome["verdict"])
        where = f"[{outcome['target']}] " if outcome.get("target") else ""
        name = "" if outcome["name"] == outcome["expression"] else f"{outcome['name']}: "
        lines.append(f"{verdict:<16} {where}{name}{outcome['expression']} (measured {shown})")
    return "\n".join(lines)


def write_junit(path: Path, outcomes: Sequence[dict[str, Any]], suite: str = "volthub loadtest") -> None:
    """One <testcase> per check; a check that did not pass is a <failure> with its figure."""
    failures = sum(1 for outcome in outcomes if outcome["verdict"] != "pass")
    root = ElementTree.Element("testsuites", name=suite, tests=str(len(outcomes)), failures=str(failures))
    case_suite = ElementTree.SubElement(
        root, "testsuite", name=suite, tests=str(len(outcomes)), failures=str(failures), errors="0", skipped="0"
    )
    for outcome in outcomes:
        case = ElementTree.SubElement(
            case_suite,
            "testcase",
            classname=f"loadtest.{outcome.get('target') or 'run'}",
            name=f"{outcome['name']} ({outcome['expression']})"
            if outcome["name"] != outcome["expression"]
            else outcome["name"],
            time="0",
        )
        if outcome["verdict"] != "pass":
            failure = ElementTree.SubElement(
                case, "failure", message=f"{outcome['verdict']}: measured {outcome['figure']}", type=outcome["verdict"]
            )
            failure.text = f"{outcome['expression']}: measured {outcome['figure']}, verdict {outcome['verdict']}"
    ElementTree.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def keys_table() -> str:
    """The documented figures, listed at the end of `volthub loadtest --help`."""
    width = max(len(key) for key in KEYS)
    lines = [f"{key:<{width}}  {text}" for key, text in KEYS.items() if text]
    lines.append(f"{'stages.NAME.<key>':<{width}}  one stage's figure (delivery.*, send.*, clients.*, reconnect.*)")
    lines.append(f"{'delivery.by_kind.KIND.ratio':<{width}}  one client kind's (also expected, received, drops)")
    lines.append(
        f"{'vs.REF.server.cpu_seconds_per_1000_deliveries':<{width}}  a volthub target's figure over reference REF's"
        " (node, python-socketio) in the same run; also vs.REF.server.rss_growth_kib_per_connection,"
        " vs.REF.connect.server_cpu_ms_per_connect"
    )
    return "\n".join(lines)
