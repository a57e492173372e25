"""Uploaded images, served by id: public, immutable, never sniffed by the browser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from quart import Blueprint, Response, request
from quart_schema import tag

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.errors import not_found
from volthub.http.openapi import responds
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.protocol.images import ACCEPTED

blueprint = Blueprint("media", __name__, url_prefix="/api/media")

# An id's bytes never change: a year, immutable.
CACHE_CONTROL = "public, max-age=31536000, immutable"
_BYTES = {"type": "string", "format": "binary"}
F = TypeVar("F", bound=Callable[..., Any])


def _image_bytes(fn: F) -> F:
    """The 200 of every image type an upload may have."""
    for kind in ACCEPTED:
        fn = responds(200, "The image's bytes, in the type it was uploaded as", kind, schema=_BYTES)(fn)
    return fn


@blueprint.get("/<media_id>")
@access.public
@tag(["Media"])
@_image_bytes
@responds(304, "Not modified: the If-None-Match ETag is the image's")
@error_responses(404)
async def get_media(media_id: str) -> Response:
    """An uploaded image (emote, journal image) with long-lived cache headers and an ETag."""
    media_id = uuid_param(media_id, "mediaId")
    found = await runtime().services.media.read(media_id)
    if found is None:
        raise not_found("image", mediaId=media_id)
    media, data = found
    etag = f'"{media.sha256}"'
    headers = {
        "Cache-Control": CACHE_CONTROL,
        "ETag": etag,
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
    }
    if etag in request.headers.get("If-None-Match", ""):
        return Response(b"", status=304, headers=headers)
    return Response(data, status=200, content_type=media.content_type, headers=headers)
