"""Server-rendered HTML of the API reference (`/docs`) and of the index (`/`) (sans-IO).

The reference is rendered from the OpenAPI document the server serves at
`/api/openapi.json`, so it cannot drift from it and needs nothing from the internet: no
script, one stylesheet served by volthub itself (`/static/devtools.css`). Every text taken
from the document is escaped; descriptions get paragraphs and `code` spans, nothing else.

Stable hooks for browser tests: `#operations`, `.operation[data-method][data-path]`,
`#schemas`, `.schema[id=schema-NAME]`, `nav a[href^="#tag-"]`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

STYLESHEET = "/static/devtools.css"
METHODS = ("get", "post", "put", "patch", "delete")
_CODE = re.compile(r"`([^`\n]+)`")
_CODE_SPAN = r"<code>\1</code>"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def prose(text: str | None) -> str:
    """Escaped paragraphs with `code` spans."""
    if not text:
        return ""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return "".join("<p>" + _CODE.sub(_CODE_SPAN, esc(p)) + "</p>" for p in paragraphs)


def page(title: str, body: str, *, scripts: tuple[str, ...] = (), nav: str = "") -> str:
    """A whole page: the stylesheet and scripts are volthub's own files (strict CSP)."""
    tags = "".join(f'<script src="{esc(src)}" defer></script>' for src in scripts)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f'<title>{esc(title)}</title><link rel=stylesheet href="{STYLESHEET}">{tags}</head>'
        f'<body><header class=top><a href="/" class=brand>volthub</a>'
        '<a href="/docs">API reference</a><a href="/developer">Developer dashboard</a>'
        f'<a href="/api/openapi.json">openapi.json</a></header>{nav}<main>{body}</main></body></html>'
    )


# --- the index -----------------------------------------------------------------------------

INDEX_LINKS: tuple[tuple[str, str, str], ...] = (
    ("docs", "/docs", "API reference (rendered from the OpenAPI document, works offline)"),
    ("openapi", "/api/openapi.json", "the OpenAPI 3 document"),
    ("developer", "/developer", "developer dashboard: apps, webhooks, delivery log, test events"),
    ("eventTypes", "/api/events/types", "the event catalogue"),
    ("asyncapi", "/api/asyncapi.json", "the AsyncAPI 3 document of the events"),
    ("health", "/healthz", "liveness"),
)


def index_document(version: str) -> dict[str, Any]:
    """What `/` answers an API client."""
    return {"name": "volthub", "version": version, "links": {key: href for key, href, _ in INDEX_LINKS}}


def render_index(version: str) -> str:
    items = "".join(
        f'<li><a href="{esc(href)}" id="link-{esc(key)}">{esc(href)}</a> — {esc(text)}</li>'
        for key, href, text in INDEX_LINKS
    )
    body = f"<h1>volthub {esc(version)}</h1><p>A self-hosted developer platform for live streaming.</p><ul>{items}</ul>"
    return page("volthub", body)


# --- the reference -------------------------------------------------------------------------


def render_docs(document: Mapping[str, Any]) -> str:
    info = document.get("info", {})
    title = f"{info.get('title', 'API')} {info.get('version', '')}".strip()
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document.get("paths", {}).items():
        for method in METHODS:
            operation = operations.get(method)
            if operation is not None:
                tag = (operation.get("tags") or ["Other"])[0]
                groups.setdefault(tag, []).append((method, path, operation))
    nav = "".join(
        f'<li><a href="#tag-{_slug(tag)}">{esc(tag)}</a> <span class=count>{len(ops)}</span></li>'
        for tag, ops in sorted(groups.items())
    )
    sections = []
    for tag, ops in sorted(groups.items()):
        rendered = "".join(_operation(method, path, op) for method, path, op in sorted(ops, key=lambda o: o[1]))
        sections.append(f'<section id="tag-{_slug(tag)}"><h2>{esc(tag)}</h2>{rendered}</section>')
    schemas = document.get("components", {}).get("schemas", {})
    schema_sections = "".join(
        f'<section class=schema id="schema-{esc(name)}"><h3>{esc(name)}</h3>{_schema(schema)}</section>'
        for name, schema in sorted(schemas.items())
    )
    count = sum(len(ops) for ops in groups.values())
    body = (
        f"<h1>{esc(title)}</h1><p>{count} operations. The machine-readable form is "
        '<a href="/api/openapi.json"><code>/api/openapi.json</code></a>.</p>'
        f"<div id=operations>{''.join(sections)}</div>"
        f"<h2 id=schemas-title>Schemas</h2><div id=schemas>{schema_sections}</div>"
    )
    side = f'<nav class=side><ul><li><a href="#schemas-title">Schemas</a></li>{nav}</ul></nav>'
    return page(f"{title} — API reference", body, nav=side)


def _slug(text: str) -> str:
    return esc(re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-"))


def _operation(method: str, path: str, op: Mapping[str, Any]) -> str:
    anchor = _slug(f"{method} {path}")
    summary = op.get("summary") or ""
    parts = [
        f'<article class=operation id="op-{anchor}" data-method="{esc(method.upper())}" data-path="{esc(path)}">',
        f'<h3><span class="method {esc(method)}">{esc(method.upper())}</span> <code>{esc(path)}</code></h3>',
    ]
    if summary:
        parts.append(f"<p class=summary>{esc(summary)}</p>")
    parts.append(prose(op.get("description")))
    security = op.get("security")
    if security == []:
        parts.append("<p class=access>Access: public (no token)</p>")
    elif security:
        parts.append("<p class=access>Access: bearer token</p>")
    params = op.get("parameters") or []
    if params:
        rows = "".join(
            f"<tr><td><code>{esc(p.get('name'))}</code></td><td>{esc(p.get('in'))}</td>"
            f"<td>{_type(p.get('schema', {}))}</td><td>{'yes' if p.get('required') else ''}</td>"
            f"<td>{prose(p.get('description') or p.get('schema', {}).get('description'))}</td></tr>"
            for p in params
        )
        parts.append(
            "<h4>Parameters</h4><table><thead><tr><th>name</th><th>in</th><th>type</th><th>required</th>"
            f"<th>description</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    body = op.get("requestBody")
    if body:
        for media, content in (body.get("content") or {}).items():
            parts.append(f"<h4>Request body <code>{esc(media)}</code></h4>{_schema(content.get('schema', {}))}")
    responses = op.get("responses") or {}
    if responses:
        answers: list[str] = []
        for status, response in sorted(responses.items(), key=lambda item: str(item[0])):
            content = response.get("content") or {}
            shapes = "".join(
                f"<div><code>{esc(media)}</code> {_schema(c.get('schema', {}), brief=True)}</div>"
                for media, c in content.items()
            )
            answers.append(f"<tr><td>{esc(status)}</td><td>{prose(response.get('description'))}{shapes}</td></tr>")
        parts.append(f"<h4>Responses</h4><table class=responses><tbody>{''.join(answers)}</tbody></table>")
    parts.append("</article>")
    return "".join(parts)


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _type(schema: Mapping[str, Any]) -> str:
    """A one-line type: links to named schemas, `array of X`, `a | b`, enums."""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f'<a href="#schema-{esc(name)}">{esc(name)}</a>'
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " | ".join(_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        kind = " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    text = esc(kind)
    if "enum" in schema:
        text += " (" + ", ".join(f"<code>{esc(v)}</code>" for v in schema["enum"]) + ")"
    if "format" in schema:
        text += f" <span class=format>{esc(schema['format'])}</span>"
    return text


def _schema(schema: Mapping[str, Any], *, brief: bool = False) -> str:
    """An object's fields as a table (nested inline objects one level deep), else its type."""
    properties = schema.get("properties")
    if not properties or ("$ref" in schema):
        return f"<p class=type>{_type(schema)}</p>" + ("" if brief else prose(schema.get("description")))
    required = set(schema.get("required") or [])
    rows = "".join(
        f"<tr><td><code>{esc(name)}</code></td><td>{_type(field)}</td><td>{'yes' if name in required else ''}</td>"
        f"<td>{prose(field.get('description'))}</td></tr>"
        for name, field in properties.items()
    )
    return (
        "<table class=fields><thead><tr><th>field</th><th>type</th><th>required</th><th>description</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
    )
