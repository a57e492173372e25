"""The OpenAPI document: quart-schema's, plus each route's access declaration."""

from __future__ import annotations

from typing import Any

from quart_schema.openapi import OpenAPIProvider
from werkzeug.routing import Rule

from volthub.http.access import declaration_of

_ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}


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
        return document

    def build_paths(self, rule: Rule) -> tuple[dict[str, Any], dict[str, Any]]:
        paths, components = super().build_paths(rule)
        view = self._app.view_functions[rule.endpoint]
        declaration = declaration_of(view)
        for operations in paths.values():
            for method, operation in operations.items():
                # Function names repeat across blueprints (rotate_secret); endpoints do not.
                operation["operationId"] = f"{method}_{rule.endpoint.replace('.', '_')}"
                _describe_access(operation, declaration)
                if getattr(view, "__volthub_idempotent__", False):
                    _describe_idempotency(operation)
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


def _describe_access(operation: dict[str, Any], declaration: Any) -> None:
    responses = operation.setdefault("responses", {})
    for response in responses.values():
        response.setdefault("headers", {}).update(_RATE_HEADERS)
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
