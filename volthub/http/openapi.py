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

import copy
import inspect
import re
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel
from quart_schema import DataSource
from quart_schema.conversion import model_schema
from quart_schema.openapi import OpenAPIProvider
from werkzeug.routing import Rule

from volthub.http import openapi_document
from volthub.http.access import JSON_ONLY, accepted_body_types, body_limit_of, declaration_of
from volthub.http.openapi_document import ERROR_REF
from volthub.http.schemas import ErrorBody
from volthub.protocol.cors import answers_cross_origin

F = TypeVar("F", bound=Callable[..., Any])
_RESPONSES = "__volthub_responses__"
_UUID_PARAM = re.compile(r"(_id|Id)$")
_NOT_UUID_PARAMS = frozenset({"client_id", "clientId"})
_BODY_METHODS = frozenset({"post", "put", "patch"})
SchemaMode = Literal["validation", "serialization"]
_COMPONENT_PREFIX = "#/components/schemas/"
_STATUS_WORDS = {
    "200": "OK",
    "201": "Created",
    "202": "Accepted: the work goes on after the answer",
    "204": "Done (no content)",
    "400": "Invalid input",
    "401": "Not authenticated: the client or the credentials were refused",
    "403": "Not allowed",
    "404": "Not found",
    "409": "Conflicts with the current state",
    "410": "Gone",
    "422": "Well-formed but refused",
    "423": "Locked",
    "502": "The provider behind this route failed",
    "503": "Unavailable for now",
}


class ComponentNameClash(Exception):
    """Two different models would be published under one component name."""


def responds(
    status: int,
    description: str,
    content_type: str | None = None,
    schema: dict[str, Any] | None = None,
    example: Any = None,
) -> Callable[[F], F]:
    """Document an answer the JSON rules cannot describe: `content_type` None is an empty
    body (a redirect); a text type documents a string; the JSON error body for 4xx/5xx
    unless `schema` says otherwise. Stated twice for one status with two content types,
    both are documented. `example` is a sample of the body."""

    def mark(fn: F) -> F:
        entries: dict[str, Any] = dict(getattr(fn, _RESPONSES, {}))
        response: dict[str, Any] = {"description": description}
        if content_type is not None:
            if schema is not None:
                body = schema
            elif content_type.startswith("text/"):
                body = {"type": "string"}
            else:
                body = ERROR_REF if status >= 400 else {"type": "object"}
            media: dict[str, Any] = {"schema": body}
            if example is not None:
                media["example"] = example
            response["content"] = {content_type: media}
            earlier = entries.get(str(status), {}).get("content")
            if earlier:  # one status, several content types (negotiated by Accept)
                response["content"] = {**earlier, **response["content"]}
        entries[str(status)] = response
        setattr(fn, _RESPONSES, entries)
        return fn

    return mark


class VolthubOpenAPIProvider(OpenAPIProvider):
    """quart-schema's document made strict: string status codes, every model a named
    component (referenced, never copied inline), one `Error` component, required bodies,
    examples beside their schemas, and the document-wide parts (openapi_document.py)."""

    def schema(self) -> dict[str, Any]:
        """Built once per app: the routes do not change once it serves, and building takes
        seconds of CPU that a public route must not spend per request."""
        cached: dict[str, Any] | None = getattr(self, "_document", None)
        if cached is None:
            cached = self._document = self._build()
        return cached

    def _build(self) -> dict[str, Any]:
        self._named: dict[str, tuple[Any, dict[str, Any]]] = {}
        self._nested: dict[str, dict[str, Any]] = {}
        document = super().schema()
        schemas = document["components"]["schemas"]
        schemas.pop("ErrorBody", None)
        schemas[openapi_document.ERROR_COMPONENT] = copy.deepcopy(openapi_document.ERROR_SCHEMA)
        document["components"]["schemas"] = dict(sorted(schemas.items()))
        document["components"]["headers"] = copy.deepcopy(HEADER_COMPONENTS)
        public_url = self._app.extensions["volthub"].settings.server.public_url
        info = document["info"]
        document["info"] = openapi_document.info(info["title"], info["version"], public_url)
        document["servers"] = openapi_document.servers(public_url)
        used = {name for item in document["paths"].values() for op in item.values() for name in op.get("tags", [])}
        document["tags"] = openapi_document.global_tags(used)
        _describe_cross_origin(document)
        return document

    def _component(self, model: Any, mode: SchemaMode) -> tuple[dict[str, Any], dict[str, Any]]:
        """The model as a `$ref`, its schema (and those it uses) as components."""
        schema = model_schema(
            model, preference=self._app.config["QUART_SCHEMA_CONVERSION_PREFERENCE"], schema_mode=mode
        )
        definitions = schema.pop("$defs", {})
        for nested, nested_schema in definitions.items():
            known_schema = self._nested.setdefault(nested, nested_schema)
            if known_schema != nested_schema:
                raise ComponentNameClash(f"two models named {nested} are used inside bodies; rename one")
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return schema, definitions  # a list or a mapping of models: described where used
        name = str(schema.get("title") or model.__name__)
        known = self._named.get(name)
        if known is not None and known[0] is model and known[1] != schema:
            name = f"{name}{mode.capitalize()}"  # pydantic's own naming when the modes differ
            known = self._named.get(name)
        if known is not None and (known[0] is not model or known[1] != schema):
            raise ComponentNameClash(f"two models are named {name}: {known[0]!r} and {model!r}; rename one")
        self._named[name] = (model, schema)
        return {"$ref": f"{_COMPONENT_PREFIX}{name}"}, {**definitions, name: schema}

    def build_request_body(self, model: Any, source: DataSource) -> tuple[dict[str, Any], dict[str, Any]]:
        schema, components = self._component(model, "validation")
        encoding = {
            DataSource.JSON: "application/json",
            DataSource.FORM_MULTIPART: "multipart/form-data",
        }.get(source, "application/x-www-form-urlencoded")
        # quart-schema refuses a missing body (400), so every declared body is required.
        body = {"required": True, "content": {encoding: _media(schema, components)}}
        return body, components

    def build_response_object(self, model: Any, headers_model: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        if model is ErrorBody:
            return {"description": "", "content": {"application/json": {"schema": ERROR_REF}}}, {}
        schema, components = self._component(model, "serialization")
        doc = inspect.getdoc(model) if isinstance(model, type) and model.__doc__ else ""
        description = openapi_document.first_sentence(doc) if doc else ""
        return {"description": description, "content": {"application/json": _media(schema, components)}}, components

    def _body_limit(self, view: Any) -> int:
        server = self._app.extensions["volthub"].settings.server
        return body_limit_of(view, server.small_body_bytes, server.max_body_bytes)

    def build_paths(self, rule: Rule) -> tuple[dict[str, Any], dict[str, Any]]:
        paths, components = super().build_paths(rule)
        view = self._app.view_functions[rule.endpoint]
        declaration = declaration_of(view)
        stated: dict[str, Any] = getattr(view, _RESPONSES, {})
        for operations in paths.values():
            for method in list(operations):
                # quart-schema shares one object between a rule's methods: give each its own.
                operation = operations[method] = copy.deepcopy(operations[method])
                operation["responses"] = {str(status): answer for status, answer in operation["responses"].items()}
                openapi_document.describe_operation(operation, view)
                _describe_raw_body(operation, accepted_body_types(view))
                # Function names repeat across blueprints (rotate_secret); endpoints do not.
                operation["operationId"] = f"{method}_{rule.endpoint.replace('.', '_')}"
                _describe_access(operation, declaration)
                _answers_by_rule(operation, method, self._body_limit(view))
                if getattr(view, "__volthub_idempotent__", False):
                    _describe_idempotency(operation)
                operation["responses"].update(copy.deepcopy(stated))
                for status, response in operation["responses"].items():
                    if not response.get("description"):
                        response["description"] = _STATUS_WORDS.get(status, "See the operation's description")
                    response.setdefault("headers", {}).update(_RATE_HEADERS)
        return paths, components


def _media(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """A media type object; the schema's first example, when it has one, as its `example`."""
    media: dict[str, Any] = {"schema": schema}
    target = components.get(schema["$ref"].removeprefix(_COMPONENT_PREFIX), {}) if "$ref" in schema else schema
    examples = target.get("examples")
    if examples:
        media["example"] = examples[0]
    return media


# Headers are described once (components.headers) and referenced from every response.
HEADER_COMPONENTS: dict[str, Any] = {
    "X-RateLimit-Limit": {
        "description": "requests allowed in the tightest budget that applied",
        "schema": {"type": "integer"},
    },
    "X-RateLimit-Remaining": {"description": "requests that would pass right now", "schema": {"type": "integer"}},
    "X-RateLimit-Reset": {
        "description": "Unix time (s) by which that budget is full again",
        "schema": {"type": "integer"},
    },
    "Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}},
}
_RATE_HEADERS = {name: {"$ref": f"#/components/headers/{name}"} for name in HEADER_COMPONENTS if name.startswith("X-")}
_RETRY_AFTER = {"Retry-After": {"$ref": "#/components/headers/Retry-After"}}


def _answers_by_rule(operation: dict[str, Any], method: str, body_limit: int) -> None:
    responses = operation["responses"]
    responses.setdefault(
        "503",
        {
            **_error("Database or storage unavailable, or the server is busy; retry after Retry-After"),
            "headers": dict(_RETRY_AFTER),
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
                **_RETRY_AFTER,
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
    return {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}


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
