"""Scenarios: stages of load, each with its client count, client mix, chat rate and storms.

A scenario is a TOML file (or one bundled with the package, named without `.toml`):

    name = "fan-out"
    description = "..."
    channels = 10                    # client i listens to channel i mod channels
    slow_read_seconds = 1.0          # a slow consumer reads its socket once per this
    checks = [{ name = "no message lost", check = "delivery.ratio>=0.999" }, "send.errors==0"]
                                     # optional; replaces the default checks

    [[stages]]
    name = "ramp"
    seconds = 10                     # 0: connect everyone at once, wait for the ramp, settle
    clients = 1000                   # clients at the end: reached linearly from the stage before
    rate = 0                         # chat messages per second, all channels together
    mix = { socketio = 0.9, sse = 0.1 }   # kinds of the clients that join in this stage
    reconnect = 0.0                  # share of connected sockets dropped and reconnected
                                     # (asking for recovery) when the stage starts

Client kinds: `socketio` (Socket.IO where the target's sockets go), `mount` (Socket.IO on
the main port), `gateway` (Socket.IO on the Events API's own listener: target
volthub-gateway or --ws-url), `sse`, `slow` (Socket.IO that reads late; counted on its own,
left out of the latency figures) and `idle` (Socket.IO held open; its deliveries are not
counted).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from volthub.loadtest.checks import Check, CheckError, parse

KINDS = ("socketio", "mount", "gateway", "sse", "slow", "idle")
SOCKET_KINDS = ("socketio", "mount", "gateway", "slow", "idle")
BUNDLED = ("fan-out", "chat-heavy", "reconnect-storm", "slow-consumer", "hold")


class ScenarioError(ValueError):
    """A scenario file that does not describe a run."""


@dataclass(frozen=True)
class Stage:
    name: str
    seconds: float
    clients: int
    rate: float = 0.0
    mix: tuple[tuple[str, float], ...] = (("socketio", 1.0),)
    reconnect: float = 0.0

    @property
    def offered(self) -> int:
        return int(self.rate * self.seconds)


@dataclass(frozen=True)
class Scenario:
    name: str
    stages: tuple[Stage, ...]
    channels: int = 10
    description: str = ""
    slow_read_seconds: float = 1.0
    checks: tuple[Check, ...] = ()

    @property
    def peak_clients(self) -> int:
        return max(stage.clients for stage in self.stages)

    @property
    def kinds(self) -> set[str]:
        return {kind for stage in self.stages for kind, share in stage.mix if share > 0}

    @property
    def seconds(self) -> float:
        return sum(stage.seconds for stage in self.stages)


def fan_out(sockets: int, sse: int, channels: int, rate: float, duration: float) -> Scenario:
    """What the plain flags mean: connect everyone at once, then chat at a fixed rate."""
    total = sockets + sse
    mix = tuple((kind, count / total) for kind, count in (("socketio", sockets), ("sse", sse)) if count) or (
        ("socketio", 1.0),
    )
    return Scenario(
        "fan-out",
        (Stage("ramp", 0.0, total, 0.0, mix), Stage("send", duration, total, rate, mix)),
        channels,
        "every client connects, then chat messages at a fixed rate fan out to each channel's clients",
    )


def load(source: str) -> Scenario:
    """A scenario from a TOML file, or a bundled one by name."""
    if source in BUNDLED:
        text = resources.files("volthub.loadtest").joinpath("scenarios", f"{source}.toml").read_text()
        where = f"bundled scenario {source}"
    else:
        try:
            text = Path(source).read_text()
        except OSError as exc:
            raise ScenarioError(f"--scenario {source}: {exc.strerror or exc} (bundled: {', '.join(BUNDLED)})") from exc
        where = source
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{where}: {exc}") from exc
    try:
        return from_dict(data)
    except (CheckError, ScenarioError) as exc:
        raise ScenarioError(f"{where}: {exc}") from exc


def from_dict(data: dict[str, Any]) -> Scenario:
    _only(data, {"name", "description", "channels", "slow_read_seconds", "checks", "stages"}, "the scenario")
    stages_data = data.get("stages")
    if not isinstance(stages_data, list) or not stages_data:
        raise ScenarioError("needs at least one [[stages]]")
    stages = tuple(_stage(index, item) for index, item in enumerate(stages_data))
    if len({stage.name for stage in stages}) != len(stages):
        raise ScenarioError("stage names must differ")
    channels = _number(data.get("channels", 10), "channels", int, minimum=1)
    checks = data.get("checks", [])
    if not isinstance(checks, list) or not all(_is_check(item) for item in checks):
        raise ScenarioError("checks is a list of 'KEY OP NUMBER' strings or {name, check} tables")
    return Scenario(
        name=str(data.get("name", "scenario")),
        stages=stages,
        channels=channels,
        description=str(data.get("description", "")),
        slow_read_seconds=_number(data.get("slow_read_seconds", 1.0), "slow_read_seconds", float, minimum=0),
        checks=tuple(parse(item) if isinstance(item, str) else parse(item["check"], item["name"]) for item in checks),
    )


def _is_check(item: Any) -> bool:
    if isinstance(item, str):
        return True
    return isinstance(item, dict) and set(item) == {"name", "check"} and all(isinstance(v, str) for v in item.values())


def _stage(index: int, data: Any) -> Stage:
    if not isinstance(data, dict):
        raise ScenarioError(f"stage {index + 1} is not a table")
    _only(data, {"name", "seconds", "clients", "rate", "mix", "reconnect"}, f"stage {index + 1}")
    mix_data = data.get("mix", {"socketio": 1.0})
    if not isinstance(mix_data, dict) or not mix_data:
        raise ScenarioError(f"stage {index + 1}: mix is a table of kind = share")
    unknown = sorted(set(mix_data) - set(KINDS))
    if unknown:
        raise ScenarioError(f"stage {index + 1}: unknown client kind {unknown[0]!r} (one of {', '.join(KINDS)})")
    shares = {kind: _number(share, f"mix.{kind}", float, minimum=0) for kind, share in mix_data.items()}
    total = sum(shares.values())
    if total <= 0:
        raise ScenarioError(f"stage {index + 1}: the mix's shares add up to 0")
    reconnect = _number(data.get("reconnect", 0.0), "reconnect", float, minimum=0)
    if reconnect > 1:
        raise ScenarioError(f"stage {index + 1}: reconnect is a share between 0 and 1")
    return Stage(
        name=str(data.get("name", f"stage{index + 1}")),
        seconds=_number(data.get("seconds", 0), "seconds", float, minimum=0),
        clients=_number(data.get("clients", 0), "clients", int, minimum=0),
        rate=_number(data.get("rate", 0), "rate", float, minimum=0),
        mix=tuple((kind, share / total) for kind, share in shares.items()),
        reconnect=reconnect,
    )


def _only(data: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise ScenarioError(f"{where}: unknown key {extra[0]!r} (known: {', '.join(sorted(allowed))})")


def _number(value: Any, name: str, kind: type, minimum: float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise ScenarioError(f"{name} must be a{'n integer' if kind is int else ' number'}, not {value!r}")
    if value < minimum:
        raise ScenarioError(f"{name} must be >= {minimum:g}, not {value}")
    return kind(value)


def scaled(scenario: Scenario, clients: int | None, rate: float | None, seconds: float | None) -> Scenario:
    """The scenario with its client counts, rates and stage lengths scaled so that its peak,
    top rate and total length are the given ones (--clients, --rate, --duration)."""

    def factor(new: float | None, old: float) -> float:
        return 1.0 if new is None or old <= 0 else new / old

    f_clients = factor(clients, scenario.peak_clients)
    f_rate = factor(rate, max(stage.rate for stage in scenario.stages))
    f_seconds = factor(seconds, scenario.seconds)
    stages = tuple(
        replace(
            stage,
            clients=round(stage.clients * f_clients),
            rate=stage.rate * f_rate,
            seconds=stage.seconds * f_seconds,
        )
        for stage in scenario.stages
    )
    return replace(scenario, stages=stages)


def next_kind(mix: tuple[tuple[str, float], ...], joined: dict[str, int]) -> str:
    """The kind the next joining client gets: the one furthest below its share so far."""
    total = sum(joined.values()) + 1
    kind = max(mix, key=lambda item: item[1] * total - joined.get(item[0], 0))[0]
    joined[kind] = joined.get(kind, 0) + 1
    return kind


@dataclass(frozen=True)
class RunConfig:
    target: str = "volthub"
    sockets: int = 100
    sse: int = 0
    channels: int = 10
    rate: float = 10.0  # chat messages per second, all channels together
    duration: float = 10.0  # seconds of sending
    message_size: int = 64  # characters of chat text (the send time needs about 40)
    connect_concurrency: int = 64
    connect_rate: float = 0.0  # connects per second; 0 = as fast as the gate allows
    connect_timeout: float = 30.0
    ramp_timeout: float = 120.0
    settle: float = 1.0
    drain: float = 5.0
    send_concurrency: int = 64
    ws_client: str = "raw"
    sio_path: str = "/ws/events"
    namespace: str = "/"
    sample_interval: float = 0.5
    allow_remote: bool = False
    scenario: Scenario | None = None  # None: the fan-out the flags above describe

    @property
    def plan(self) -> Scenario:
        if self.scenario is not None:
            return self.scenario
        return fan_out(self.sockets, self.sse, self.channels, self.rate, self.duration)

    @property
    def clients(self) -> int:
        return self.plan.peak_clients

    @property
    def seconds(self) -> float:
        """An upper bound of the run's length, for a hard deadline around it."""
        plan = self.plan
        ramps = sum(self.ramp_timeout + self.settle for stage in plan.stages if stage.seconds == 0)
        return ramps + plan.seconds + self.drain + 2 * self.connect_timeout * sum(1 for s in plan.stages if s.reconnect)
