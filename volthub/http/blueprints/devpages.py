"""The index (`/`), the API reference (`/docs`) and the developer pages' static files.

`/docs` renders the server's own OpenAPI document as HTML on the server (volthub.http.docs_page):
no script, no third-party origin, so it works with no internet access. `/` answers browsers
with a small HTML index and API clients with the same links as JSON.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from quart import Blueprint, Response, current_app, request
from quart_schema import hide, tag

from volthub.http import access, docs_page
from volthub.http.errors import not_found
from volthub.http.openapi import responds

blueprint = Blueprint("devpages", __name__)

# Strict: nothing inline, nothing from another origin. The dashboard's script and the
# stylesheet are volthub's own files; its inspector reads the SSE stream of this origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
INDEX_SCHEMA = {
    "type": "object",
    "required": ["name", "version", "links"],
    "properties": {
        "name": {"type": "string"},
        "version": {"type": "string"},
        "links": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
STATIC_TYPES = {"devtools.css": "text/css; charset=utf-8", "developer.js": "text/javascript; charset=utf-8"}


def html_response(body: str, status: int = 200) -> Response:
    response = Response(body, status=status, content_type="text/html; charset=utf-8")
    response.headers.update(SECURITY_HEADERS)
    response.headers["Cache-Control"] = "no-store"
    return response


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("volthub")
    except PackageNotFoundError:
        return "0.0.0"


@blueprint.get("/")
@access.public
@tag(["Developer pages"])
@responds(200, "The index: HTML for browsers, `{name, version, links}` JSON otherwise", "text/html")
@responds(200, "The index", "application/json", INDEX_SCHEMA, example=docs_page.index_document("0.1.0"))
async def index() -> Any:
    """Where to go from here: the API reference, the OpenAPI document, the developer
    dashboard, the event catalogue. Browsers (`Accept: text/html`) get a page."""
    accepted = request.accept_mimetypes.best_match(["application/json", "text/html"])
    if accepted == "text/html":
        return html_response(docs_page.render_index(_version()))
    return docs_page.index_document(_version())


@blueprint.get("/docs")
@access.public
@tag(["Developer pages"])
@responds(200, "The API reference, rendered from /api/openapi.json", "text/html")
async def docs() -> Response:
    """The API reference as HTML, rendered on the server from the OpenAPI document: every
    operation by tag with its access, parameters, body and responses, and every schema.
    Needs no internet access (no script, no third-party asset)."""
    return html_response(_rendered_docs())


def _rendered_docs() -> str:
    """The document is built from the code, so it is rendered once per app."""
    rendered: str | None = current_app.extensions.get(_DOCS_KEY)
    if rendered is None:
        schema: dict[str, Any] = current_app.extensions["QUART_SCHEMA"].openapi_provider.schema()
        rendered = current_app.extensions[_DOCS_KEY] = docs_page.render_docs(schema)
    return rendered


_DOCS_KEY = "volthub.docs_html"


@blueprint.get("/static/<name>")
@hide
@access.public
async def static_file(name: str) -> Response:
    content_type = STATIC_TYPES.get(name)
    if content_type is None:
        raise not_found("file", name=name[:64])
    response = Response(_static(name), status=200, content_type=content_type)
    response.headers["Cache-Control"] = "public, max-age=300"
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


@cache
def _static(name: str) -> bytes:
    return resources.files("volthub.http").joinpath("static", name).read_bytes()
