"""The parts of the OpenAPI document that describe the API as a whole rather than one route:
`info`, `servers`, the global `tags`, the one `Error` component, and the summary and
description every operation takes from its docstring.

A tag used by a route but missing from `TAG_DESCRIPTIONS` makes the document fail its tests,
so a new group of routes is described when it is added.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

ERROR_COMPONENT = "Error"
ERROR_REF = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": ERROR_COMPONENT,
    "description": "Every error answer: a machine-readable code, a sentence for people, and details.",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string", "description": "snake_case error code", "examples": ["validation_error"]},
        "message": {"type": "string", "description": "what went wrong, for people"},
        "details": {
            "type": "object",
            "description": "What the error is about; open: a route may add members of its own."
            " The well-known ones are listed here.",
            "additionalProperties": True,
            "properties": {
                "requestId": {"type": "string", "description": "the request's X-Request-Id, for the operator's logs"},
                "field": {"type": "string", "description": "the input field that was refused"},
                "fields": {
                    "type": "array",
                    "description": "validation_error: every refused field of the body",
                    "items": {
                        "type": "object",
                        "properties": {
                            "field": {"type": "string", "description": "dotted path of the field"},
                            "message": {"type": "string"},
                            "type": {"type": "string", "description": "what kind of refusal"},
                        },
                    },
                },
                "status": {"type": "string", "description": "the current state, when the state forbids the action"},
                "retry_after": {"type": "integer", "description": "429: seconds to wait (as Retry-After)"},
                "waitSeconds": {"type": "integer", "description": "slow mode: seconds until the next message"},
                "remainingSeconds": {"type": "integer", "description": "a timeout: seconds until it ends"},
                "retryAfterSeconds": {"type": "integer", "description": "a cooldown: seconds until it ends"},
                "cooldown": {"type": "string", "description": "which cooldown applies"},
                "maxBytes": {"type": "integer", "description": "the route's body limit, for a 413"},
                "balance": {"type": "integer", "description": "what the account holds, for insufficient funds"},
                "limit": {"type": "integer", "description": "the limit that was reached"},
                "counted": {"type": "integer", "description": "how many were counted against that limit"},
            },
        },
        "retry_after": {"type": "integer", "description": "429 only: seconds to wait (as the Retry-After header)"},
        "error_description": {
            "type": "string",
            "description": "OAuth token and revocation endpoints only: the message again, for RFC 6749"
            " clients; `error` is then an RFC 6749 code (invalid_request, invalid_client, invalid_grant,"
            " unauthorized_client, unsupported_grant_type, invalid_scope)",
        },
    },
    "examples": [
        {
            "error": "validation_error",
            "message": "text: must not be blank",
            "details": {"field": "text", "requestId": "5f0c8a52b7e44d0c9a1e3d2f4b6a8c10"},
        }
    ],
}

INFO_DESCRIPTION = (
    "The HTTP API of a volthub server: accounts and OAuth, channels and streams, chat,"
    " polls and other interactive features, webhooks and the developer tools.\n\n"
    "Every error is JSON `{error, message, details?}` (the `Error` schema); every answer carries"
    " `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`. Real-time events are"
    " described by `/api/asyncapi.json`."
)

TAG_DESCRIPTIONS: dict[str, str] = {
    "Accounts": "Registering, signing in and out, and the session's tokens.",
    "Badges": "Chat badges a channel grants and the ones a viewer wears.",
    "Bots": "Bot accounts: registering a bot, choosing it for a channel and sending as it.",
    "Categories": "The categories streams are listed under.",
    "Channel points": "Rewards a channel offers for points, and their redemptions.",
    "Channel roles": "Moderators, editors and VIPs of a channel.",
    "Chat": "A channel's chat: messages, moderation and chat settings.",
    "Clips": "Short clips cut from a live stream or a recording.",
    "Dashboard": "The creator dashboard's interactive controls (polls, predictions, timers and more).",
    "Developer apps": "OAuth applications a developer registers, with their secrets and redirect URIs.",
    "Developer pages": "Pages and assets of the built-in developer tools.",
    "Emotes": "Custom emotes a channel uploads and uses in chat.",
    "Events": "The catalogue of real-time events and the Server-Sent Events stream.",
    "External video": "Connecting an external video provider to a channel.",
    "Giveaways": "Giveaways a channel runs for its viewers.",
    "Ingest": "Stream keys and the ingest server's callbacks.",
    "Interactive control": "Polls, predictions, giveaways, timers and other interactive features of a channel.",
    "Journals": "A channel's journal posts and their images.",
    "Media": "Uploaded images served back to clients.",
    "Notifications": "A user's notifications.",
    "OAuth": "OAuth 2.0 authorisation, tokens, scopes and connections.",
    "Operations": "Health, readiness and the machine-readable descriptions of the API.",
    "Polls and giveaways": "Polls and giveaways a channel runs and viewers take part in.",
    "Predictions": "Predictions viewers bet channel points on.",
    "Sandbox": "A scratch channel for trying the API without touching real data.",
    "Streams": "Live streams, their titles and tags, and recordings.",
    "Subscriptions": "Paid subscriptions to a channel and gifted ones.",
    "Teams": "Teams of channels.",
    "Timers": "Countdown timers shown on stream.",
    "Users": "Profiles, follows and the signed-in user.",
    "Volts": "The platform currency: balances, purchases and transfers.",
    "Webhooks": "Webhook subscriptions, their secrets and deliveries.",
}

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"])")


def info(title: str, version: str, public_url: str) -> dict[str, Any]:
    contact: dict[str, Any] = {"name": "The operator of this volthub server"}
    if public_url:
        contact["url"] = f"{public_url.rstrip('/')}/developer"
    return {
        "title": title,
        "version": version,
        "description": INFO_DESCRIPTION,
        "contact": contact,
        "license": {"name": "Proprietary", "identifier": "LicenseRef-Proprietary"},
    }


def servers(public_url: str) -> list[dict[str, str]]:
    """`[server] public_url`, else the server that serves the document (a relative URL)."""
    if public_url:
        return [{"url": public_url.rstrip("/"), "description": "this server ([server] public_url)"}]
    return [{"url": "/", "description": "the server that serves this document"}]


def global_tags(used: set[str]) -> list[dict[str, str]]:
    """The tags operations use, each described; an undescribed one gets no description so
    that the document's tests name it."""
    return [
        {"name": name, **({"description": TAG_DESCRIPTIONS[name]} if name in TAG_DESCRIPTIONS else {})}
        for name in sorted(used)
    ]


def describe_operation(operation: dict[str, Any], view: Callable[..., Any]) -> None:
    """Summary: the docstring's first sentence; description: the whole docstring."""
    operation.pop("summary", None)
    operation.pop("description", None)
    doc = inspect.getdoc(view)
    if not doc:
        return
    operation["summary"] = first_sentence(doc)
    operation["description"] = doc


def first_sentence(doc: str) -> str:
    paragraph = " ".join(doc.split("\n\n", 1)[0].split())
    return _SENTENCE_END.split(paragraph, 1)[0].rstrip(".")
