"""Test events of any emitted event type, built from the catalogue's field lists (sans-IO).

`volthub trigger`, the sandbox route and the developer dashboard send test events of every
event the catalogue marks emitted. The six historical sandbox types keep their own
builders (they validate tiers and amounts); every other event gets a sample payload made
from its documented fields: each required field gets a plausible value chosen by its name
and type, object and array fields whose description lists their keys (`{userId, ...}`,
`[{id, title, votes}]`) get one sample with those keys, and `isTest` is always true.
Callers override any documented field with `fields`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from volthub.protocol import catalogue
from volthub.protocol.catalogue import EventType, PayloadField

_KEYS = re.compile(r"^\[?\{([A-Za-z0-9_, ]+)\}")


class UnknownTestEvent(ValueError):
    """Not an emitted event name nor a sandbox alias."""


class InvalidField(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class Channel:
    """Whose channel the test event is about."""

    id: str
    username: str
    display_name: str


def names() -> list[str]:
    """Every event a test can send: the emitted catalogue events, catalogue order. Legacy
    webhook names (`channel.cheer`) are aliases of the event they receive, as are the
    sandbox's six test types."""
    return [e.name for e in catalogue.CATALOGUE if catalogue.is_emitted(e.name) and e.alias_of is None]


def aliases() -> dict[str, str]:
    """Alias -> the event it sends: the sandbox's test types and legacy webhook names."""
    return {**catalogue.SANDBOX_EVENTS, **catalogue.ALIASES}


def resolve(name: str) -> EventType:
    """The catalogue entry of an emitted event name or of an alias (`follow`, `channel.cheer`)."""
    real = aliases().get(name, name)
    entry = catalogue.BY_NAME.get(real)
    if entry is None or not catalogue.is_emitted(real):
        raise UnknownTestEvent(name)
    return entry


def listing() -> list[dict[str, Any]]:
    """Each event with its aliases and payload fields (for `--list` and the dashboard)."""
    by_event: dict[str, list[str]] = {}
    for alias, real in aliases().items():
        by_event.setdefault(real, []).append(alias)
    out = []
    for name in names():
        entry = catalogue.BY_NAME[name]
        out.append(
            {
                "name": name,
                "aliases": by_event.get(name, []),
                "eventsApi": catalogue.EVENTS_API in entry.transports,
                "webhooks": catalogue.WEBHOOKS in entry.transports,
                "fields": [field.document() for field in entry.fields],
            }
        )
    return out


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    """`k=v` pairs (the CLI's `--field`): a JSON value when `v` parses as JSON, else text."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidField(pair, "expected key=value")
        try:
            value: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            value = raw
        fields[key.strip()] = value
    return fields


def sample(entry: EventType, channel: Channel, at: str, fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A test payload of `entry`: required fields sampled, `fields` applied, `isTest: true`.

    `fields` may only name the event's documented fields (`InvalidField` otherwise)."""
    overrides = checked_fields(entry, fields)
    who = _person()
    about_channel = any(field.name in ("streamId", "title") for field in entry.fields) and not any(
        field.name == "messageId" for field in entry.fields
    )
    data: dict[str, Any] = {}
    for field in entry.fields:
        if field.optional and field.name != "isTest":
            continue
        data[field.name] = _value(field, channel, who, at, about_channel)
    data.update(overrides)
    data["isTest"] = True
    return data


def checked_fields(entry: EventType, fields: Mapping[str, Any] | None) -> dict[str, Any]:
    """`fields` when each names a documented payload field of `entry` (`isTest` stays true)."""
    known = {field.name for field in entry.fields} - {"isTest"}
    for key in fields or {}:
        if key not in known:
            raise InvalidField(key, f"not a payload field of {entry.name}")
    return dict(fields or {})


def _person() -> dict[str, str]:
    number = uuid.uuid4().int % 9000 + 1000
    return {"userId": str(uuid.uuid4()), "username": f"test_user_{number}", "displayName": f"TestUser{number}"}


def _value(field: PayloadField, channel: Channel, who: dict[str, str], at: str, about_channel: bool) -> Any:
    name, kind = field.name, field.type
    owner = {"userId": channel.id, "username": channel.username, "displayName": channel.display_name}
    if name == "isTest":
        return True
    if name in ("userId", "username", "displayName"):
        return (owner if about_channel else who)[name]
    if name in ("channelId", "toChannelId", "broadcasterId"):
        return channel.id
    if name in ("toUsername", "channelUsername"):
        return channel.username
    if kind.endswith("|null"):
        return None
    if kind == "boolean":
        return False
    if kind == "number":
        return _NUMBERS.get(name, 1)
    if kind == "string[]":
        return []
    if kind in ("object", "array"):
        keys = _keys(field.description)
        if not keys:
            return {} if kind == "object" else []
        item = {key: _nested(key, who, at) for key in keys}
        return item if kind == "object" else [item]
    if name.endswith("At") or name == "timestamp":
        return at
    if name.endswith("Id"):
        return str(uuid.uuid4())
    if name.endswith("Username"):
        return who["username"]
    if name.endswith("DisplayName"):
        return who["displayName"]
    return _STRINGS.get(name, f"test {name}")


def _keys(description: str) -> list[str]:
    found = _KEYS.match(description.strip())
    return [key.strip() for key in found.group(1).split(",") if key.strip()] if found else []


def _nested(key: str, who: dict[str, str], at: str) -> Any:
    if key in who:
        return who[key]
    if key in ("id",) or key.endswith("Id"):
        return str(uuid.uuid4())
    if key.endswith("At"):
        return at
    return _NUMBERS.get(key, f"test {key}")


_NUMBERS: dict[str, int] = {
    "amount": 100,
    "viewers": 10,
    "months": 1,
    "quantity": 1,
    "currentAmount": 5,
    "targetAmount": 10,
    "durationSeconds": 60,
    "remainingSeconds": 60,
    "rewardCost": 100,
    "votes": 0,
    "users": 0,
    "points": 0,
    "entries": 1,
    "totalVotes": 0,
}

_STRINGS: dict[str, str] = {
    "tier": "tier1",
    "type": "followers",
    "period": "stream",
    "message": "This is a test event.",
    "title": "Test title",
    "description": "Test description",
    "status": "active",
    "color": "#9146FF",
    "reason": "test",
    "action": "start",
    "direction": "down",
    "appName": "Test app",
    "rewardTitle": "Test reward",
}
