"""The AsyncAPI 3.0 document of the platform's events (sans-IO): `GET /api/asyncapi.json`.

Every event of the catalogue is a message named after it, on each transport that carries it:

- Socket.IO (the gateway port, and the main port's mount): an envelope message, emitted as
  the Socket.IO event ``event``, and a data message, emitted under the event's own name;
- SSE (``GET /api/events/stream``): the envelope, as ``event: <name>`` with ``id:``;
- webhooks: the delivery body ``{id, event, type, timestamp, data}`` with its signed headers.

Payload schemas come from :mod:`volthub.protocol.event_schemas` (derived from the
catalogue) and each message's example from :func:`volthub.protocol.trigger.sample`, the
payload ``volthub trigger`` sends, so neither can drift from the catalogue. Socket.IO has no
AsyncAPI binding: its channels use the WebSocket binding for the Engine.IO handshake and
say in their description how Socket.IO frames carry each message (``x-socketio-event``
names the Socket.IO event of each message).
"""

from __future__ import annotations

import uuid
from typing import Any, Final
from urllib.parse import urlsplit

from volthub.protocol import catalogue, event_schemas, trigger
from volthub.protocol.catalogue import EVENTS_API, WEBHOOKS, EventType

ASYNCAPI_VERSION: Final = "3.0.0"
_EXAMPLE_TIME: Final = "2026-01-15T18:30:00.000Z"
_EXAMPLE_CHANNEL: Final = trigger.Channel("8d1f6a52-3c1e-4a57-9a49-2d0b7f7e4c11", "streamer", "Streamer")
# Example values where the sampled ones would read oddly (fields of the catalogue only).
_EXAMPLE_FIELDS: Final[dict[str, dict[str, Any]]] = {
    "channel.raid": {"direction": "incoming"},
    "channel.subscription.end": {"reason": "canceled"},
    "channel.channel_points_redemption": {"status": "unfulfilled"},
    "channel.prediction.end": {"status": "resolved"},
    "channel.timer.update": {"status": "running", "action": "started"},
}


def _ref(kind: str, key: str) -> dict[str, str]:
    return {"$ref": f"#/components/{kind}/{key}"}


def _root(kind: str, key: str) -> dict[str, str]:
    return {"$ref": f"#/{kind}/{key}"}


def _stable_ids(value: Any, seen: dict[str, str], seed: str) -> Any:
    """The sampled payload with its random UUIDs replaced by ones derived from the event
    name, so the document is the same on every build."""
    if isinstance(value, dict):
        return {key: _stable_ids(item, seen, seed) for key, item in value.items()}
    if isinstance(value, list):
        return [_stable_ids(item, seen, seed) for item in value]
    if isinstance(value, str) and len(value) == 36 and value != _EXAMPLE_CHANNEL.id:
        try:
            uuid.UUID(value)
        except ValueError:
            return value
        return seen.setdefault(value, str(uuid.uuid5(uuid.NAMESPACE_URL, f"{seed}#{len(seen)}")))
    if isinstance(value, str) and value.startswith(("test_user_", "TestUser")):
        return "viewer_42" if value.startswith("test_user_") else "Viewer42"
    return value


def example_data(entry: EventType) -> dict[str, Any]:
    """An example ``data`` of the event: what `volthub trigger` sends, made stable."""
    sampled = trigger.sample(entry, _EXAMPLE_CHANNEL, _EXAMPLE_TIME, _EXAMPLE_FIELDS.get(entry.name))
    sampled.pop(event_schemas.IS_TEST, None)
    data: dict[str, Any] = _stable_ids(sampled, {}, entry.name)
    return data


# --- messages ------------------------------------------------------------------------------


def _event_messages(entry: EventType) -> dict[str, dict[str, Any]]:
    """The messages of one event: envelope and data (Events API), delivery (webhooks)."""
    data = example_data(entry)
    schema_key = f"{entry.name}.data"
    summary = entry.description
    common = {"name": entry.name, "title": entry.name, "summary": summary, "contentType": "application/json"}
    messages: dict[str, dict[str, Any]] = {}
    if EVENTS_API in entry.transports:
        envelope = {"event": entry.name, "timestamp": _EXAMPLE_TIME, "data": data}
        messages[entry.name] = {
            **common,
            "description": f"The Events API envelope of {entry.name}: the Socket.IO event `event`, and each"
            f" SSE message `event: {entry.name}`." + _never_fires(entry),
            "payload": event_schemas.envelope_schema(entry, _ref("schemas", schema_key)),
            "examples": [{"name": "envelope", "payload": envelope}],
            "x-socketio-event": "event",
        }
        messages[f"{entry.name}.data"] = {
            **common,
            "description": f"The data of {entry.name} alone: the Socket.IO event `{entry.name}`." + _never_fires(entry),
            "payload": _ref("schemas", schema_key),
            "examples": [{"name": "data", "payload": data}],
            "x-socketio-event": entry.name,
        }
    if WEBHOOKS in entry.transports:
        delivery = {"id": _delivery_id(entry), "event": entry.name, "type": entry.name}
        messages[f"{entry.name}.webhook"] = {
            **common,
            "description": _webhook_description(entry),
            "headers": _ref("schemas", "WebhookHeaders"),
            "payload": event_schemas.delivery_schema(entry.name, _ref("schemas", schema_key)),
            "examples": [
                {
                    "name": "delivery",
                    "headers": _example_headers(entry),
                    "payload": {**delivery, "timestamp": _EXAMPLE_TIME, "data": data},
                }
            ],
        }
    return messages


def _never_fires(entry: EventType) -> str:
    return " Listed for completeness: the platform never sends it." if entry.never_fires else ""


def _webhook_description(entry: EventType) -> str:
    text = f"A webhook delivery of {entry.name}: POST to the webhook's URL, signed."
    if entry.alias_of:
        text += f" A legacy name: delivered, with {entry.alias_of}'s payload, to webhooks subscribed to it."
    if entry.webhook_scope:
        text += f" Delivered only while the app holds the `{entry.webhook_scope}` scope."
    return text


def _delivery_id(entry: EventType) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{entry.name}#delivery"))


def _example_headers(entry: EventType) -> dict[str, str]:
    return {
        "X-Service-Signature": "sha256=" + "0" * 64,
        "X-Service-Timestamp": "1768501800000",
        "X-Service-Event": entry.name,
        "webhook-id": _delivery_id(entry),
        "webhook-timestamp": "1768501800",
        "webhook-signature": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    }


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


_STRING: Final = {"type": "string"}
_NULLABLE_STRING: Final = {"type": ["string", "null"]}


def _control_messages() -> dict[str, dict[str, Any]]:
    """What the Events API sends besides events, and what Socket.IO clients may ask."""
    connected = _object(
        {
            "channelUsername": {**_NULLABLE_STRING, "description": "the token owner's channel; null: anonymous"},
            "channelId": _NULLABLE_STRING,
            "authenticated": {"type": "boolean", "description": "a valid token was sent"},
            "autoSubscribed": {"type": "boolean", "description": "subscribed to the token owner's channel"},
        }
    )
    channel_ref = _object({"channelId": _STRING, "channel": {**_STRING, "description": "a channel's username"}}, [])
    return {
        "connected": _control(
            "connected",
            "Sent once a Socket.IO connection joins.",
            connected,
            {
                "channelUsername": "streamer",
                "channelId": _EXAMPLE_CHANNEL.id,
                "authenticated": True,
                "autoSubscribed": True,
            },
        ),
        "sseConnected": _control(
            "connected",
            "The first SSE message (`event: connected`).",
            _object({"channelUsername": _STRING, "channelId": _STRING}),
            {"channelUsername": "streamer", "channelId": _EXAMPLE_CHANNEL.id},
        ),
        "error": _control(
            "error",
            "A refused request (the connection lives on), or the reason a stream ends (SSE `event: error`).",
            _object({"code": _STRING, "message": _STRING, "event": _STRING}, ["code", "message"]),
            {"code": "UNKNOWN_EVENT", "message": "unknown event", "event": "channel:getThings"},
        ),
        "shutdown": _control(
            "shutdown",
            "The last SSE message when the server shuts down: reconnect with Last-Event-ID.",
            _object({"reason": _STRING}),
            {"reason": "server shutting down"},
        ),
        "subscribe": _control(
            "subscribe",
            "Subscribe to a channel's public events (anonymous connections).",
            channel_ref,
            {"channel": "streamer"},
        ),
        "subscribed": _control(
            "subscribed",
            "The answer to subscribe (and its ack).",
            _object({"channelId": _STRING, "channelUsername": _STRING}),
            {"channelId": _EXAMPLE_CHANNEL.id, "channelUsername": "streamer"},
        ),
        "unsubscribe": _control(
            "unsubscribe", "Stop a subscription.", _object({"channelId": _STRING}), {"channelId": _EXAMPLE_CHANNEL.id}
        ),
        "unsubscribed": _control(
            "unsubscribed",
            "The answer to unsubscribe.",
            _object({"channelId": _STRING}),
            {"channelId": _EXAMPLE_CHANNEL.id},
        ),
        "getRewards": _control(
            "channel:getRewards",
            "Ask for a channel's channel-points rewards.",
            _object({"channelId": _STRING}, []),
            {"channelId": _EXAMPLE_CHANNEL.id},
        ),
        "rewards": _control(
            "channel:rewards",
            "The rewards of the channel asked for (empty without channelId).",
            _object({"rewards": {"type": "array", "items": {"type": "object"}}}),
            {"rewards": []},
        ),
    }


def _control(name: str, summary: str, payload: dict[str, Any], example: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "title": name,
        "summary": summary,
        "contentType": "application/json",
        "payload": payload,
        "examples": [{"name": name.replace(":", "-"), "payload": example}],
        "x-socketio-event": name,
    }


# --- servers, channels, operations ---------------------------------------------------------


def _server(url: str, description: str, security: list[dict[str, str]]) -> dict[str, Any]:
    parts = urlsplit(url)
    server: dict[str, Any] = {
        "host": parts.netloc,
        "protocol": parts.scheme,
        "description": description,
        "security": security,
    }
    if parts.path.strip("/"):
        server["pathname"] = parts.path.rstrip("/")
    return server


def _servers(api_url: str, ws_url: str) -> dict[str, Any]:
    return {
        "api": _server(
            api_url,
            "The main port: SSE, and the Socket.IO paths mounted next to the REST API.",
            [_ref("securitySchemes", "bearer"), _ref("securitySchemes", "socketToken")],
        ),
        "gateway": _server(
            ws_url,
            "The Events API's WebSocket address (`wsUrl` of GET /api/events/types): the gateway"
            " port, or the main port when the gateway is off.",
            [_ref("securitySchemes", "socketToken")],
        ),
        "webhookReceiver": {
            "host": "{receiver}",
            "protocol": "https",
            "description": "Your webhook endpoint: the HTTPS URL given when the webhook was created.",
            "variables": {"receiver": {"description": "host (and port) of the webhook's URL"}},
        },
    }


_ENGINE_IO_QUERY: Final = _object(
    {
        "EIO": {"type": "string", "const": "4", "description": "Engine.IO protocol version"},
        "transport": {"type": "string", "enum": ["polling", "websocket"]},
        "token": {**_STRING, "description": "an access token (or send it as the Socket.IO auth.token)"},
    },
    ["EIO", "transport"],
)

_SOCKETIO_FRAMES: Final = (
    " Socket.IO v5 over Engine.IO v4 (polling and WebSocket, with upgrade): each message is a"
    ' Socket.IO EVENT packet, `42["<x-socketio-event>", <payload>]` (with the namespace before'
    " the array when it is not `/`). Every platform event is emitted twice: `event` with its"
    " envelope, then under its own name with its data. A token (auth.token, or the token"
    " query parameter) subscribes the connection to its owner's channel; without one, send"
    " subscribe for a channel's public events. Missed events are replayed on a reconnect"
    " within the recovery window (connection state recovery)."
)


def _channels(entries: list[EventType]) -> dict[str, Any]:
    events_api = [entry for entry in entries if EVENTS_API in entry.transports]
    socket_messages = {
        key: _ref("messages", key)
        for key in ["connected", "error", "subscribe", "subscribed", "unsubscribe", "unsubscribed"]
        + ["getRewards", "rewards"]
        + [name for entry in events_api for name in (entry.name, f"{entry.name}.data")]
    }
    bindings = {"ws": {"method": "GET", "query": _ENGINE_IO_QUERY, "bindingVersion": "0.1.0"}}
    sse_messages = {
        key: _ref("messages", key)
        for key in ["sseConnected", "error", "shutdown", *[entry.name for entry in events_api]]
    }
    webhook_messages = {
        f"{entry.name}.webhook": _ref("messages", f"{entry.name}.webhook")
        for entry in entries
        if WEBHOOKS in entry.transports
    }
    return {
        "socketio": {
            "address": "/ws/events",
            "title": "Socket.IO: /ws/events",
            "description": "Engine.IO path /ws/events, Socket.IO namespace `/`."
            ' `io("<wsUrl>", {path: "/ws/events"})`.' + _SOCKETIO_FRAMES,
            "servers": [_root("servers", "gateway"), _root("servers", "api")],
            "messages": socket_messages,
            "bindings": bindings,
        },
        "socketioDefaultPath": {
            "address": "/socket.io",
            "title": "Socket.IO: /socket.io, namespace /ws/events",
            "description": "The default Engine.IO path /socket.io with the Socket.IO namespace"
            ' `/ws/events` (namespace `/` works too), so `io("<wsUrl>/ws/events")` connects.' + _SOCKETIO_FRAMES,
            "servers": [_root("servers", "gateway"), _root("servers", "api")],
            "messages": socket_messages,
            "bindings": bindings,
        },
        "sse": {
            "address": "/api/events/stream",
            "title": "Server-sent events",
            "description": "GET with `Authorization: Bearer <token>` and `Accept: text/event-stream`:"
            " the token owner's channel. `connected` first, then each event as `event: <name>`,"
            " `id: <event id>`, `data: <envelope JSON>` (`messages=unnamed` sends unnamed messages"
            " instead, `both` both forms); `events=a,b` keeps only those names; comment lines keep"
            " the stream alive; Last-Event-ID resumes after the given event.",
            "servers": [_root("servers", "api")],
            "messages": sse_messages,
        },
        "webhooks": {
            "address": None,
            "title": "Webhooks",
            "description": _WEBHOOKS,
            "servers": [_root("servers", "webhookReceiver")],
            "messages": webhook_messages,
        },
    }


_WEBHOOKS: Final = (
    "Deliveries to a webhook's HTTPS URL (the address is the URL you register). Subscribing:"
    " POST /api/developer/apps/{clientId}/webhooks with {url, events}; the answer shows the"
    " signing secret once (rotate it with .../rotate-secret). There is no verification"
    " request: the first delivery is a real event. Each delivery is a POST of"
    " {id, event, type, timestamp, data}; verify X-Service-Signature = sha256= +"
    " hex(HMAC-SHA256(secret, X-Service-Timestamp + '.' + raw body)) over the raw bytes, and"
    " reject timestamps more than 5 minutes from now. The Standard Webhooks headers"
    " (webhook-id, webhook-timestamp, webhook-signature) sign the same body. Answer 2xx within"
    " 10 seconds; failed deliveries are retried, so dedupe by id. A webhook receives the"
    " events of its app owner's channel only."
)


def _operations(channels: dict[str, Any]) -> dict[str, Any]:
    def operation(channel: str, action: str, title: str, keys: list[str], **extra: Any) -> dict[str, Any]:
        return {
            "action": action,
            "channel": _root("channels", channel),
            "title": title,
            "messages": [{"$ref": f"#/channels/{channel}/messages/{key}"} for key in keys],
            **extra,
        }

    requests = ["subscribe", "unsubscribe", "getRewards"]
    operations: dict[str, Any] = {}
    for channel in ("socketio", "socketioDefaultPath"):
        sent = [key for key in channels[channel]["messages"] if key not in requests]
        operations[f"{channel}Send"] = operation(channel, "send", "Events and answers the server emits", sent)
        operations[f"{channel}Receive"] = operation(channel, "receive", "Requests a client may emit", requests)
    # The HTTP channels: the server only sends, each over its own method.
    for key, channel, summary, method in (
        ("sseSend", "sse", "The SSE stream", "GET"),
        ("webhookSend", "webhooks", "Webhook deliveries", "POST"),
    ):
        bindings = {"http": {"method": method, "bindingVersion": "0.3.0"}}
        operations[key] = operation(channel, "send", summary, list(channels[channel]["messages"]), bindings=bindings)
    return operations


def _components(entries: list[EventType]) -> dict[str, Any]:
    schemas: dict[str, Any] = {f"{entry.name}.data": event_schemas.data_schema(entry) for entry in entries}
    schemas["WebhookHeaders"] = event_schemas.delivery_headers_schema()
    messages = _control_messages()
    for entry in entries:
        messages.update(_event_messages(entry))
    return {
        "schemas": schemas,
        "messages": messages,
        "securitySchemes": {
            "bearer": {
                "type": "http",
                "scheme": "bearer",
                "description": "An access token (first-party or OAuth) in `Authorization: Bearer` (SSE).",
            },
            "socketToken": {
                "type": "httpApiKey",
                "name": "token",
                "in": "query",
                "description": "An access token, as the Socket.IO `auth.token` or the `token` query parameter.",
            },
        },
    }


def document(*, api_url: str, ws_url: str, version: str) -> dict[str, Any]:
    """The whole AsyncAPI document, for the given public addresses."""
    entries = list(catalogue.CATALOGUE)
    channels = _channels(entries)
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "id": "urn:volthub:events",
        "info": {
            "title": "volthub events",
            "version": version,
            "description": "Every platform event, over Socket.IO, server-sent events and webhooks. Each"
            " event is a message named after it; its data schema is the same on every transport.",
        },
        "defaultContentType": "application/json",
        "servers": _servers(api_url, ws_url),
        "channels": channels,
        "operations": _operations(channels),
        "components": _components(entries),
    }
