"""The API reference page of the docs site, written from the OpenAPI document the code builds.

`make docs` renders it through the mkdocs hook in `docs/hooks.py`; nothing is fetched and no
server runs: the document comes from the app object (`create_app`), exactly as
`GET /api/openapi.json` serves it. `python -m volthub.tools.api_reference` prints the page.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from typing import Any

import trio

METHODS = ("get", "post", "put", "patch", "delete")


def openapi_document() -> dict[str, Any]:
    """The document `/api/openapi.json` serves, built without starting the app (no database)."""
    from volthub.config import load_settings
    from volthub.http.app import create_app

    async def build() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as scratch:  # never opened: the app is not started
            settings = load_settings(
                None,
                environ={},
                overrides={
                    "database": {"url": f"sqlite:///{scratch}/x.db"},
                    "server": {"public_url": "http://127.0.0.1:8080"},
                },
            )
            app = create_app(settings)
            async with app.app_context():
                document: dict[str, Any] = app.extensions["QUART_SCHEMA"].openapi_provider.schema()
        return document

    return trio.run(build)


def _cell(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _type(schema: dict[str, Any], document: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(_type(option, document) for option in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_type(schema.get('items', {}), document)}"
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    kind = str(schema.get("type", "any"))
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def _limits(schema: dict[str, Any]) -> str:
    words = {
        "minimum": "≥",
        "maximum": "≤",
        "exclusiveMinimum": ">",
        "minLength": "length ≥",
        "maxLength": "length ≤",
        "minItems": "items ≥",
        "maxItems": "items ≤",
    }
    found = [f"{word} {schema[key]}" for key, word in words.items() if key in schema]
    if "default" in schema:
        found.append(f"default `{schema['default']}`")
    return ", ".join(found)


def _resolve(schema: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _fields(schema: dict[str, Any], document: dict[str, Any]) -> list[str]:
    schema = _resolve(schema, document)
    properties: dict[str, Any] = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    rows = ["| field | type | required | notes |", "| --- | --- | --- | --- |"]
    for name, field in properties.items():
        notes = " ".join(part for part in (_limits(field), _cell(field.get("description", ""))) if part)
        rows.append(f"| `{name}` | {_cell(_type(field, document))} | {'yes' if name in required else ''} | {notes} |")
    return rows


def _access(operation: dict[str, Any]) -> str:
    scope = operation.get("x-required-scope")
    access = operation.get("x-access")
    if scope:
        return f"token with `{scope}`"
    if access == "public" or not operation.get("security"):
        return "public"
    return "token" if access is None else str(access).replace("_", " ")


def _operation(path: str, method: str, operation: dict[str, Any], document: dict[str, Any]) -> Iterable[str]:
    yield f"### `{method.upper()} {path}`"
    yield ""
    # The description opens with the summary sentence (both come from the route's docstring).
    text = operation.get("description") or operation.get("summary")
    if text:
        yield text
        yield ""
    yield f"Access: {_access(operation)}."
    yield ""
    parameters = operation.get("parameters", [])
    if parameters:
        yield "| parameter | in | type | required | notes |"
        yield "| --- | --- | --- | --- | --- |"
        for parameter in parameters:
            schema = parameter.get("schema", {})
            notes = " ".join(p for p in (_limits(schema), _cell(parameter.get("description", ""))) if p)
            required = "yes" if parameter.get("required") else ""
            yield f"| `{parameter['name']}` | {parameter['in']} | {_cell(_type(schema, document))} | {required} | {notes} |"
        yield ""
    for content_type, body in operation.get("requestBody", {}).get("content", {}).items():
        rows = _fields(body.get("schema", {}), document)
        yield f"Request body (`{content_type}`)" + (":" if rows else ".")
        yield ""
        yield from rows
        yield ""
        yield from _example("Example", body)
    for status, response in sorted(operation.get("responses", {}).items()):
        for content_type, answer in response.get("content", {}).items():
            if status.startswith("2") and "example" in answer:
                yield from _example(f"Example answer (`{status}`, `{content_type}`)", answer)
    answers = []
    for status, response in sorted(operation.get("responses", {}).items(), key=lambda item: str(item[0])):
        answers.append(f"`{status}` {_cell(response.get('description', ''))}")
    if answers:
        yield "Answers: " + "; ".join(answers) + "."
        yield ""


def _example(title: str, media: dict[str, Any]) -> Iterable[str]:
    if "example" not in media:
        return
    yield f"{title}:"
    yield ""
    yield "```json"
    yield json.dumps(media["example"], indent=2, ensure_ascii=False)
    yield "```"
    yield ""


def _errors(document: dict[str, Any]) -> list[str]:
    """The one error body every error answer uses, with the well-known members of details."""
    error = document["components"]["schemas"].get("Error")
    if error is None:
        return []
    lines = ["## Errors", "", _cell(error.get("description", "")), ""]
    lines += _fields(error, document) + [""]
    details = error["properties"].get("details", {})
    lines += [_cell(details.get("description", "")), ""] + _fields(details, document) + [""]
    return lines


def render(document: dict[str, Any]) -> str:
    """Markdown: one section per tag, one entry per operation, in path order."""
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in sorted(document["paths"].items()):
        for method in METHODS:
            if method in operations:
                operation = operations[method]
                for tag in operation.get("tags") or ["Other"]:
                    by_tag.setdefault(tag, []).append((path, method, operation))
    info = document.get("info", {})
    lines = [
        "# API reference",
        "",
        f"Every route of {info.get('title', 'the API')} {info.get('version', '')}, generated from the OpenAPI "
        f"{document.get('openapi', '')} document the code builds, the one a running server serves at "
        "`/api/openapi.json`. Errors are JSON `{error, message, details?}`; every answer carries the "
        "`X-RateLimit-*` headers ([Rate limits and errors](../guides/errors.md)).",
        "",
        f"{sum(len(items) for items in by_tag.values())} operations in {len(by_tag)} groups:",
        "",
    ]
    lines += [f"- [{tag}](#{_anchor(tag)}) ({len(items)})" for tag, items in sorted(by_tag.items())]
    lines.append("")
    lines += _errors(document)
    described = {tag["name"]: tag.get("description", "") for tag in document.get("tags", [])}
    for tag, items in sorted(by_tag.items()):
        lines += [f"## {tag}", ""]
        if described.get(tag):
            lines += [described[tag], ""]
        for path, method, operation in items:
            lines += list(_operation(path, method, operation, document))
    return "\n".join(lines) + "\n"


def _anchor(title: str) -> str:
    """The id mkdocs' toc extension gives a heading (lower case, words joined by '-')."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return "-".join(kept.split())


if __name__ == "__main__":
    print(render(openapi_document()), end="")
