"""`GET /api/asyncapi.json`: the AsyncAPI 3.0 document of the platform's events.

The document is built from the event catalogue by :mod:`volthub.protocol.asyncapi`; only
the public addresses come from the settings. Like `/api/openapi.json` it is public and left
out of the OpenAPI document.
"""

from __future__ import annotations

import functools

import orjson
from quart import Blueprint, Response
from quart_schema import hide

from volthub import version
from volthub.config import events_ws_url
from volthub.http import access
from volthub.http.blueprints.oauth.metadata import issuer
from volthub.http.runtime import runtime
from volthub.protocol import asyncapi

blueprint = Blueprint("asyncapi", __name__, url_prefix="/api")


@functools.cache
def _encoded(api_url: str, ws_url: str) -> bytes:
    """The same on every request of a process: built once per address pair."""
    return orjson.dumps(asyncapi.document(api_url=api_url, ws_url=ws_url, version=version()))


@blueprint.get("/asyncapi.json")
@hide
@access.public
async def asyncapi_document() -> Response:
    """The AsyncAPI 3.0 document: Socket.IO, SSE and webhooks, every event a message."""
    body = _encoded(issuer(), events_ws_url(runtime().settings))
    return Response(body, content_type="application/json")
