"""The OpenAPI document: quart-schema's, plus each route's access declaration, plus the
answers every route can give, added BY RULE so that a new route comes out right without its
author listing them:

- every operation: 400 (invalid input), 429 (rate limited), 503 (database or storage
  unavailable, server busy; with Retry-After);
- a route with path parameters: 404; a path parameter named `*_id` / `*Id` (except
  `client_id`, which is an opaque app id) is declared `format: uuid`;
- POST / PUT / PATCH: 413 (body over the route's limit: `[server] max_body_bytes` for the
  routes marked `access.large_body`, `small_body_bytes` for every other; the operation's
  `x-max-body-bytes` gives it) and 415 (wrong content type);
- a route that needs a token: 401 and 403;
- a DELETE that documents no success: 204 (no content).

What a rule cannot know, a route states where it is defined: an error status of its own with
quart-schema's `document_response(ErrorBody, 409)`, a non-JSON answer (an HTML page, an
event stream, a redirect) with `responds(...)` below.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from quart_schema.openapi import OpenAPIProvider
from werkzeug.routing import Rule

from volthub.http.access import JSON_ONLY, accepted_body_types, body_limit_of, declaration_of
from volthub.protocol.cors import answers_cross_origin

_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
F = TypeVar("F", bound=Callable[..., Any])
_RESPONSES = "__volthub_responses__"
_UUID_PARAM = re.compile(r"(_id|Id)$")
_NOT_UUID_PARAMS = frozenset({"client_id", "clientId"})
_BODY_METHODS = frozenset({"post", "put", "patch"})


def responds(
    status: int, description: str, content_type: str | None = None, schema: dict[str, Any] | None = None
) -> Callable[[F], F]:
    """Document an answer the JSON rules cannot describe: `content_type` None is an empty
    body (a redirect); a text type documents a string; the JSON error body for 4xx/5xx
    unless `schema` says otherwise. Stated twice for one status with two content types,
    both are documented."""

    def mark(fn: F) -> F:
        entries: dict[str, Any] = dict(getattr(fn, _RESPONSES, {}))
        response: dict[str, Any] = {"description": description}
        if content_type is not None:
            if schema is not None:
                body = schema
            elif content_type.startswith("text/"):
                body = {"type": "string"}
            else:
                body = _ERROR_REF if status >= 400 else {"type": "object"}
            response["content"] = {content_type: {"schema": body}}
            earlier = entries.get(str(status), {}).get("content")
            if earlier:  # one status, several content types (negotiated by Accept)
                response["content"] = {**earlier, **response["content"]}
        entries[str(status)] = response
        setattr(fn, _RESPONSES, entries)
        return fn

    return mark


class VolthubOpenAPIProvider(OpenAPIProvider):
    def schema(self) -> dict[str, Any]:
        document = super().schema()
        document["components"]["schemas"]["ErrorBody"] = {
            "type": "object",
            "required": ["error", "message"],
            "properties": {
                "error": {"type": "string", "description": "snake_case error code"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        }
        _describe_cross_origin(document)
        return document

    def _body_limit(self, view: Any) -> int:
        server = self._app.extensions["volthub"].settings.server
        return body_limit_of(view, server.small_body_bytes, server.max_body_bytes)

    def build_paths(self, rule: Rule) -> tuple[dict[str, Any], dict[str, Any]]:
        paths, components = super().build_paths(rule)
        view = self._app.view_functions[rule.endpoint]
        declaration = declaration_of(view)
        stated: dict[str, Any] = getattr(view, _RESPONSES, {})
        for operations in paths.values():
            for method, operation in operations.items():
                _describe_raw_body(operation, accepted_body_types(view))
                # Function names repeat across blueprints (rotate_secret); endpoints do not.
                operation["operationId"] = f"{method}_{rule.endpoint.replace('.', '_')}"
                _describe_access(operation, declaration)
                _answers_by_rule(operation, method, self._body_limit(view))
                if getattr(view, "__volthub_idempotent__", False):
                    _describe_idempotency(operation)
                operation["responses"].update(stated)
                for response in operation["responses"].values():
                    response.setdefault("headers", {}).update(_RATE_HEADERS)
        return paths, components


_RATE_HEADERS = {
    "X-RateLimit-Limit": {
        "description": "requests allowed in the tightest budget that applied",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Remaining": {"description": "requests that would pass right now", "schema": {"type": "integer"}},
    "X-RateLimit-Reset": {
        "description": "Unix time (s) by which that budget is full again",
        "schema": {"type": "integer"},
    },
}


def _answers_by_rule(operation: dict[str, Any], method: str, body_limit: int) -> None:
    responses = operation["responses"]
    responses.setdefault(
        "503",
        {
            **_error("Database or storage unavailable, or the server is busy; retry after Retry-After"),
            "headers": {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}},
        },
    )
    path_params = [param for param in operation.get("parameters", []) if param.get("in") == "path"]
    if path_params:
        responses.setdefault("404", _error("Not found"))
    for param in path_params:
        if _UUID_PARAM.search(param["name"]) and param["name"] not in _NOT_UUID_PARAMS:
            param["schema"] = {"type": "string", "format": "uuid"}
    if method in _BODY_METHODS:
        operation["x-max-body-bytes"] = body_limit
        responses.setdefault(
            "413", _error(f"Request body larger than this route's {body_limit} bytes (details.maxBytes)")
        )
        responses.setdefault("415", _error("Request body of a content type this route does not take"))
    if method == "delete" and not any(str(status).startswith("2") for status in responses):
        responses["204"] = {"description": "Deleted (no content)"}


def _describe_access(operation: dict[str, Any], declaration: Any) -> None:
    responses = operation.setdefault("responses", {})
    responses.setdefault("400", _error("Invalid input"))
    responses.setdefault(
        "429",
        {
            **_error("Rate limited: the body adds retry_after (seconds)"),
            "headers": {
                **_RATE_HEADERS,
                "Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}},
            },
        },
    )
    if declaration is None or declaration.kind == "public":
        operation["security"] = []
        operation["x-access"] = "public"
        return
    operation["security"] = [{"bearer": []}]
    responses.setdefault("401", _error("Missing, invalid, expired or revoked token"))
    responses.setdefault("403", _error("Token not allowed here or missing scope"))
    if declaration.kind == "first_party":
        operation["x-access"] = "first-party"
    else:
        operation["x-access"] = "token"
        if declaration.scope:
            operation["x-required-scope"] = declaration.scope


def _describe_raw_body(operation: dict[str, Any], accepted: tuple[str, ...]) -> None:
    """A route that takes a raw body (an image upload) documents its accepted types."""
    if accepted == JSON_ONLY or "requestBody" in operation or not all(t.startswith("image/") for t in accepted):
        return
    binary = {"schema": {"type": "string", "format": "binary"}}
    operation["requestBody"] = {"required": True, "content": {kind: binary for kind in accepted}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def _describe_idempotency(operation: dict[str, Any]) -> None:
    """Money-moving POSTs (http/idempotency.py) take an Idempotency-Key header."""
    operation.setdefault("parameters", []).append(
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": "1-255 printable ASCII characters, per user and route: a repeat gets the first"
            " answer byte for byte and moves no money again",
            "schema": {"type": "string", "maxLength": 255},
        }
    )
    responses = operation.setdefault("responses", {})
    responses.setdefault("409", _error("The first request with this Idempotency-Key has not finished"))
    responses.setdefault("422", _error("idempotency_key_reused: the key was used with another body"))


_CROSS_ORIGIN_NOTE = (
    "Browsers on other origins may call the operations marked `x-cross-origin: true` (every "
    "path under /api/ and /.well-known/), from the origins the server's `[server] cors_origins` "
    "allows (any by default): preflights are answered 204 before authentication and rate limits, "
    "every answer carries `Access-Control-Allow-Origin`, errors included, and exposes "
    "X-RateLimit-*, Retry-After and X-Request-Id. Credentials (cookies) are never allowed "
    "cross-origin: send a bearer token. The HTML pages are same-origin only."
)


def _describe_cross_origin(document: dict[str, Any]) -> None:
    """Say which operations answer browsers on other origins (CORS): `x-cross-origin` on each."""
    for path, item in document.get("paths", {}).items():
        for operation in item.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["x-cross-origin"] = answers_cross_origin(path)
    info = document.setdefault("info", {})
    info["description"] = (
        f"{info['description']}\n\n{_CROSS_ORIGIN_NOTE}" if info.get("description") else _CROSS_ORIGIN_NOTE
    )
