"""JSON Schemas of the event payloads, derived from the event catalogue (sans-IO).

Each catalogue entry's field list is the one description of its ``data``: this module turns
it into a JSON Schema (draft 2020-12, the dialect AsyncAPI 3 messages use), so a field added,
renamed or retyped in the catalogue changes the schema with it, and a payload builder that
drifts from its entry fails the schema tests. The three wire shapes around ``data`` are
described here too: the Events API envelope (Socket.IO ``event`` messages and SSE), the
webhook delivery body, and the webhook delivery headers.

How a field's catalogue type becomes a schema:

- ``string``, ``number``, ``boolean``: that JSON type; ``string[]``: an array of strings;
- ``T|null``: the same, or null;
- ``object`` and ``array`` whose description starts with their keys (``{userId, ...}``,
  ``[{id, title, votes}]``): an object (or array of objects) with exactly those keys, each
  typed by :data:`NESTED_TYPES`; without keys, any object (or array);
- optional fields may be absent; the others are required; no other key is allowed, except
  ``isTest``, which every test event carries (``volthub trigger`` sends any event).

An unknown type or a nested key missing from :data:`NESTED_TYPES` raises
:class:`UndescribedField`, so a new event cannot be added without a schema (a test builds
every schema).
"""

from __future__ import annotations

import re
from typing import Any, Final

from volthub.protocol.catalogue import EventType, PayloadField
from volthub.protocol.webhooks.signing import (
    H_EVENT,
    H_SIGNATURE,
    H_STD_ID,
    H_STD_SIGNATURE,
    H_STD_TIMESTAMP,
    H_TIMESTAMP,
)

_KEYS: Final = re.compile(r"^\[?\{([A-Za-z0-9_, ]+)\}")

_SCALARS: Final[dict[str, dict[str, Any]]] = {
    "string": {"type": "string"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "string[]": {"type": "array", "items": {"type": "string"}},
}

# The type of each key that nested objects list in their catalogue description
# (`[{id, title, votes}]`, `{messageId, userId, username, snippet}`, ...).
NESTED_TYPES: Final[dict[str, dict[str, Any]]] = {
    "id": {"type": "string"},
    "title": {"type": "string"},
    "votes": {"type": "number"},
    "users": {"type": "number"},
    "points": {"type": "number"},
    "userId": {"type": "string"},
    "username": {"type": "string"},
    "displayName": {"type": "string"},
    "messageId": {"type": "string"},
    "snippet": {"type": "string"},
    "code": {"type": "string"},
    "url": {"type": "string"},
    "type": {"type": "string"},
    "payload": {"type": "object"},
}

IS_TEST: Final = "isTest"
_IS_TEST_SCHEMA: Final = {"type": "boolean", "const": True, "description": "true on sandbox test events"}
_ISO_8601: Final = {"type": "string", "format": "date-time", "description": "ISO 8601 time the event occurred"}


class UndescribedField(ValueError):
    """A catalogue field whose type (or a nested key) has no schema here."""


def nested_keys(description: str) -> list[str]:
    """The keys an object or array field lists at the start of its description."""
    found = _KEYS.match(description.strip())
    return [key.strip() for key in found.group(1).split(",") if key.strip()] if found else []


def field_schema(event: str, field: PayloadField) -> dict[str, Any]:
    """The JSON Schema of one payload field, with its description."""
    kind, nullable = field.type, False
    if kind.endswith("|null"):
        kind, nullable = kind[: -len("|null")], True
    if kind in _SCALARS:
        schema = dict(_SCALARS[kind])
    elif kind in ("object", "array"):
        schema = _composite(event, field, kind)
    else:
        raise UndescribedField(f"{event}: field {field.name} has type {field.type!r}, which has no schema")
    if nullable:
        schema["type"] = [schema["type"], "null"]
    if field.description:
        schema["description"] = field.description
    return schema


def _composite(event: str, field: PayloadField, kind: str) -> dict[str, Any]:
    keys = nested_keys(field.description)
    if not keys:
        return {"type": kind}
    missing = [key for key in keys if key not in NESTED_TYPES]
    if missing:
        raise UndescribedField(f"{event}: field {field.name} lists {', '.join(missing)}, which have no schema")
    item = {
        "type": "object",
        "properties": {key: NESTED_TYPES[key] for key in keys},
        "required": keys,
        "additionalProperties": False,
    }
    return item if kind == "object" else {"type": "array", "items": item}


def data_schema(entry: EventType) -> dict[str, Any]:
    """The JSON Schema of an event's ``data``."""
    properties = {field.name: field_schema(entry.name, field) for field in entry.fields}
    properties.setdefault(IS_TEST, _IS_TEST_SCHEMA)
    return {
        "type": "object",
        "description": entry.description,
        "properties": properties,
        "required": [field.name for field in entry.fields if not field.optional and field.name != IS_TEST],
        "additionalProperties": False,
    }


def envelope_schema(entry: EventType, data: dict[str, Any]) -> dict[str, Any]:
    """The Events API envelope (Socket.IO `event` messages, SSE): {event, timestamp, data}."""
    return {
        "type": "object",
        "properties": {
            "event": {"type": "string", "const": entry.name, "description": "the event name"},
            "timestamp": _ISO_8601,
            "data": data,
        },
        "required": ["event", "timestamp", "data"],
        "additionalProperties": False,
    }


def delivery_schema(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """A webhook delivery's body, {id, event, type, timestamp, data}, for the name it is
    delivered under (a legacy alias such as channel.cheer is delivered under its own name)."""
    event_name = {"type": "string", "const": name}
    return {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "the event id: receivers dedupe by it (stable across retries)"},
            "event": {**event_name, "description": "the event name"},
            "type": {**event_name, "description": "the event name again, for receivers that read `type`"},
            "timestamp": _ISO_8601,
            "data": data,
        },
        "required": ["id", "event", "type", "timestamp", "data"],
        "additionalProperties": False,
    }


def delivery_headers_schema() -> dict[str, Any]:
    """The headers of every webhook delivery (names as sent; HTTP compares them without case)."""
    return {
        "type": "object",
        "properties": {
            H_SIGNATURE: {
                "type": "string",
                "pattern": "^sha256=[0-9a-f]{64}$",
                "description": "sha256= and the hex HMAC-SHA256, keyed with the webhook's signing secret"
                " (the whole string, whsec_ included), of X-Service-Timestamp, a dot, and the raw body",
            },
            H_TIMESTAMP: {
                "type": "string",
                "pattern": "^[0-9]{1,16}$",
                "description": "when this attempt was sent, in epoch milliseconds; reject deliveries more"
                " than 5 minutes from now",
            },
            H_EVENT: {"type": "string", "description": "the event name (the body's `event`)"},
            H_STD_ID: {"type": "string", "description": "Standard Webhooks: the event id"},
            H_STD_TIMESTAMP: {
                "type": "string",
                "pattern": "^[0-9]{1,13}$",
                "description": "Standard Webhooks: the same instant in epoch seconds",
            },
            H_STD_SIGNATURE: {
                "type": "string",
                "pattern": "^v1,[A-Za-z0-9+/=]+$",
                "description": "Standard Webhooks v1: v1, and the base64 HMAC-SHA256 of"
                " `{webhook-id}.{webhook-timestamp}.` and the raw body, keyed with the base64-decoded"
                " part of the secret after whsec_",
            },
        },
        "required": [H_SIGNATURE, H_TIMESTAMP, H_EVENT, H_STD_ID, H_STD_TIMESTAMP, H_STD_SIGNATURE],
    }
