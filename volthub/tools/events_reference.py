"""The events reference page of the docs site, written from the AsyncAPI document.

`make docs` renders it through the mkdocs hook in `docs/hooks.py`, from the document
`GET /api/asyncapi.json` serves (built by :mod:`volthub.protocol.asyncapi` for the default
addresses; no server runs). `python -m volthub.tools.events_reference` prints the page.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from volthub import version
from volthub.protocol import catalogue
from volthub.protocol.asyncapi import document

DEFAULT_API_URL = "http://127.0.0.1:8080"


def asyncapi_document() -> dict[str, Any]:
    """The document a server with the default settings and this public URL serves."""
    from volthub.config import events_ws_url, load_settings

    settings = load_settings(None, environ={}, overrides={"server": {"public_url": DEFAULT_API_URL}})
    return document(api_url=DEFAULT_API_URL, ws_url=events_ws_url(settings), version=version())


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(schema: dict[str, Any]) -> str:
    kind = schema.get("type", "any")
    kinds = kind if isinstance(kind, list) else [kind]
    words = []
    for one in kinds:
        if one == "array":
            words.append(f"array of {_type(schema.get('items', {}))}")
        elif one == "object" and schema.get("properties"):
            words.append("{" + ", ".join(schema["properties"]) + "}")
        else:
            words.append(str(one))
    return " or ".join(words)


def _fields(schema: dict[str, Any]) -> Iterable[str]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    yield "| field | type | required | description |"
    yield "| --- | --- | --- | --- |"
    for name, field in properties.items():
        mark = "yes" if name in required else ""
        yield f"| `{name}` | {_cell(_type(field))} | {mark} | {_cell(field.get('description', ''))} |"


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _transports(entry: catalogue.EventType) -> str:
    ways = []
    if catalogue.EVENTS_API in entry.transports:
        ways.append("Socket.IO and SSE" + (" (anonymous subscribers too)" if entry.public else " (the owner)"))
    if catalogue.WEBHOOKS in entry.transports:
        ways.append("webhooks" + (f" (with the `{entry.webhook_scope}` scope)" if entry.webhook_scope else ""))
    return ", ".join(ways)


def _event(entry: catalogue.EventType, doc: dict[str, Any]) -> Iterable[str]:
    messages = doc["components"]["messages"]
    yield f"### {entry.name}"
    yield ""
    yield entry.description
    yield ""
    yield f"Sent over: {_transports(entry)}." + (" Never sent." if entry.never_fires else "")
    yield ""
    schema = doc["components"]["schemas"][f"{entry.name}.data"]
    if entry.fields:
        yield from _fields(schema)
        yield ""
    example_key = entry.name if entry.name in messages else f"{entry.name}.webhook"
    example = messages[example_key]["examples"][0]["payload"]
    what = "envelope (Socket.IO `event`, SSE)" if example_key == entry.name else "webhook delivery body"
    yield f"Example {what}:"
    yield ""
    yield "```json"
    yield _json(example)
    yield "```"
    yield ""


def _channels(doc: dict[str, Any]) -> Iterable[str]:
    yield "| channel | address | servers |"
    yield "| --- | --- | --- |"
    for channel in doc["channels"].values():
        servers = ", ".join(f"`{server['$ref'].rsplit('/', 1)[-1]}`" for server in channel.get("servers", []))
        address = f"`{channel['address']}`" if channel["address"] else "your webhook URL"
        yield f"| {channel['title']} | {address} | {servers} |"
    yield ""
    for channel in doc["channels"].values():
        yield f"**{channel['title']}.** {channel['description']}"
        yield ""


def _control(doc: dict[str, Any]) -> Iterable[str]:
    yield "| message | payload | what it is |"
    yield "| --- | --- | --- |"
    for message in doc["components"]["messages"].values():
        if "x-socketio-event" in message and message["name"] not in catalogue.BY_NAME:
            payload = _type(message["payload"])
            yield f"| `{message['name']}` | {_cell(payload)} | {_cell(message['summary'])} |"
    yield ""


def render(doc: dict[str, Any]) -> str:
    """Markdown: the transports, the messages besides events, then every event by group."""
    headers = doc["components"]["schemas"]["WebhookHeaders"]
    groups = list(dict.fromkeys(entry.group for entry in catalogue.CATALOGUE))
    lines = [
        "# Events reference",
        "",
        f"Every platform event, generated from the AsyncAPI {doc['asyncapi']} document the code builds,"
        " the one a running server serves at `/api/asyncapi.json` (load it into any AsyncAPI tool to"
        " generate code or browse it). Each event is a message named after it; its `data` has the"
        " same schema on every transport. Test events (the sandbox, `volthub trigger`) carry"
        " `isTest: true` as well. How to connect: [Events API](../guides/events.md),"
        " [Webhooks](../guides/webhooks.md).",
        "",
        "## Transports",
        "",
        *_channels(doc),
        "## Messages besides events",
        "",
        *_control(doc),
        "## Webhook headers",
        "",
        *_fields(headers),
        "",
    ]
    for group in groups:
        lines += [f"## {group}", ""]
        for entry in catalogue.CATALOGUE:
            if entry.group == group:
                lines += list(_event(entry, doc))
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(asyncapi_document()))
