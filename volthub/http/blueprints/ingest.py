"""Media-server hooks: live state comes from the server that receives the video.

Every hook carries `[ingest] hook_secret`: as `Authorization: Bearer <secret>`, or as the
query parameter `secret` where the media server cannot add headers. Unset, every hook is
refused with 403 `ingest_not_configured`.

- Generic: `POST /api/ingest/publish|unpublish|heartbeat` with `{streamKey}`.
- nginx-rtmp: `on_publish`, `on_publish_done`, `on_update` at `/api/ingest/nginx/publish`,
  `/nginx/unpublish`, `/nginx/update` (form-encoded, the key in `name`). A 2xx lets the
  publisher in; the 403 for a wrong key makes nginx drop it.
- MediaMTX: `authHTTPAddress` at `/api/ingest/mediamtx/auth`, its JSON request as MediaMTX
  sends it (`ip, user, password, token, action, path, protocol, id, query, userAgent`). `publish` with a
  valid key on the path of the key's channel (its username) goes live; `read` and `playback` are allowed (streams are public); other actions
  (api, metrics, pprof) are refused. MediaMTX has no unpublish in its auth protocol:
  `runOnUnavailable` (formerly `runOnNotReady`) calls `/api/ingest/mediamtx/unpublish` with
  `{path}`, and a `runOnAvailable` loop `/mediamtx/heartbeat` (docs/guides/going-live.md); both act
  only on the channel the path names, and only on its stream that MediaMTX opened on that path.

The stream key is never logged and never echoed back.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from pydantic import Field
from quart import Blueprint, request
from quart_schema import document_response, tag, validate_request

from volthub.http import access
from volthub.http.blueprints.streams import streams
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.services.streams import NotLive, PathRefused, Stream, StreamKeyRefused, Vod

log = logging.getLogger(__name__)
blueprint = Blueprint("ingest", __name__, url_prefix="/api/ingest")
FORM = "application/x-www-form-urlencoded"


class HookOut(Model):
    example = {
        "live": False,
        "streamId": "0b7e2a4c-5d1f-4e8a-9c3b-e01370cd0000",
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "vodId": "0b7e2a4c-5d1f-4e8a-9c3b-f74f37d60000",
        "allowed": False,
    }

    live: bool
    streamId: str | None = None
    channelId: str | None = None
    vodId: str | None = None
    allowed: bool | None = None


def _check_secret() -> None:
    configured = runtime().settings.ingest.hook_secret
    if not configured:
        raise ApiError(403, "ingest_not_configured", "set [ingest] hook_secret to accept media-server hooks")
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    presented = value.strip() if scheme.lower() == "bearer" else request.args.get("secret", "")
    if not hmac.compare_digest(presented.encode(), configured.encode()):
        raise ApiError(401, "invalid_hook_secret", "the hook secret is missing or wrong")


def _hook(rule: str, *, body: type[Body] | None = None, form: bool = False) -> Callable[[Any], Any]:
    """A media-server hook at `rule`: public but for the hook secret, checked before anything
    else; it reads `body` as JSON, or a form. Documented with the answers every hook may give
    (the media server only looks at 2xx or not)."""

    def register(fn: Any) -> Any:
        if body is not None:
            fn = validate_request(body)(fn)
        fn = error_responses(401, 403, 404)(document_response(HookOut, 200)(fn))
        fn = tag(["Ingest"])(fn)
        if form:
            fn = access.accepts(FORM)(fn)
        fn = access.public(access.checked_first(_check_secret)(fn))
        return blueprint.post(rule)(fn)

    return register


def _refused_key() -> ApiError:
    return ApiError(403, "invalid_stream_key", "no channel has this stream key")


def _not_live() -> ApiError:
    return ApiError(404, "not_live", "no live stream matches this hook")


async def _publish(key: str, source: str, media_path: str | None = None) -> dict[str, Any]:
    if not key:
        raise _refused_key()
    try:
        published = await streams().publish(key, source=source, media_path=media_path)
    except StreamKeyRefused:
        log.info("publish refused: unknown stream key (source %s)", source)
        raise _refused_key() from None
    except PathRefused:
        log.info("publish refused: the path is not the key's channel (source %s)", source)
        raise ApiError(
            403, "path_not_allowed", "a stream key publishes only on its own channel's path (the username)"
        ) from None
    return {"live": True, "streamId": published.stream.id, "channelId": published.channel.id}


async def _unpublished(closing: Awaitable[Vod]) -> dict[str, Any]:
    """The answer to a hook saying a publisher stopped, its stream found by key or by path."""
    try:
        vod = await closing
    except NotLive:
        raise _not_live() from None
    return {"live": False, "streamId": vod.stream_id, "vodId": vod.id}


async def _still_live(touching: Awaitable[Stream]) -> dict[str, Any]:
    """The answer to a hook saying a publisher is still there, found by key or by path."""
    try:
        stream = await touching
    except NotLive:
        raise _not_live() from None
    return {"live": True, "streamId": stream.id}


# --- the generic hooks ----------------------------------------------------------------------


class KeyBody(Body):
    example = {"streamKey": "live_8Qm2vX7pLk3nR0tYb5"}

    streamKey: str = Field(min_length=1, max_length=200)


@_hook("/publish", body=KeyBody)
async def publish(data: KeyBody) -> dict[str, Any]:
    """The media server admitted a publisher: the channel goes live (`stream.online`).
    403 `invalid_stream_key` for a key no channel has; repeating it while live is a no-op."""
    return await _publish(data.streamKey, "hook")


@_hook("/unpublish", body=KeyBody)
async def unpublish(data: KeyBody) -> dict[str, Any]:
    """The publisher stopped: the stream closes, leaves a VOD (`stream.offline`)."""
    return await _unpublished(streams().unpublish(data.streamKey))


@_hook("/heartbeat", body=KeyBody)
async def heartbeat(data: KeyBody) -> dict[str, Any]:
    """The publisher is still there: holds off the silence timeout."""
    return await _still_live(streams().heartbeat(data.streamKey))


# --- nginx-rtmp -----------------------------------------------------------------------------


async def _form_name() -> str:
    form = await request.form
    return str(form.get("name", "")).strip()


@_hook("/nginx/publish", form=True)
async def nginx_publish() -> dict[str, Any]:
    """nginx-rtmp `on_publish` (form-encoded, key in `name`, secret in `?secret=`)."""
    return await _publish(await _form_name(), "nginx-rtmp")


@_hook("/nginx/unpublish", form=True)
async def nginx_unpublish() -> dict[str, Any]:
    """nginx-rtmp `on_publish_done`."""
    return await _unpublished(streams().unpublish(await _form_name()))


@_hook("/nginx/update", form=True)
async def nginx_update() -> dict[str, Any]:
    """nginx-rtmp `on_update` (every `notify_update_timeout`): a heartbeat."""
    return await _still_live(streams().heartbeat(await _form_name()))


# --- MediaMTX -------------------------------------------------------------------------------


class MediaMTXAuth(Body):
    """MediaMTX's external-authentication request (`authHTTPAddress`), as it sends it."""

    example = {
        "user": "",
        "password": "",
        "token": "",
        "ip": "",
        "action": "publish",
        "path": "",
        "protocol": "",
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "query": "",
    }

    user: str = Field("", max_length=1000)
    password: str = Field("", max_length=1000)
    token: str = Field("", max_length=4000)
    ip: str = Field("", max_length=100)
    action: str = Field(max_length=50, description="publish, read, playback, api, metrics, pprof")
    path: str = Field("", max_length=1000)
    protocol: str = Field("", max_length=50)
    id: str | None = Field(None, max_length=100)
    query: str = Field("", max_length=4000)


def _mediamtx_key(data: MediaMTXAuth) -> str:
    """Where publishers put the key: the password, a Bearer token (WHIP) or `?key=` in the
    publish URL (the path is the channel's username, never the key)."""
    if data.password:
        return data.password
    if data.token:
        return data.token
    query = parse_qs(data.query)
    for name in ("key", "streamKey", "stream_key"):
        if query.get(name):
            return query[name][0]
    return ""


@_hook("/mediamtx/auth", body=MediaMTXAuth)
async def mediamtx_auth(data: MediaMTXAuth) -> dict[str, Any]:
    """MediaMTX `authHTTPAddress`: `publish` with a valid key on its channel's path (the
    username, any case) goes live (2xx admits; 403 `invalid_stream_key`, or
    `path_not_allowed` for another path); `read` / `playback` are allowed; other actions
    are refused."""
    if data.action == "publish":
        return await _publish(_mediamtx_key(data), "mediamtx", media_path=data.path)
    if data.action in ("read", "playback"):
        return {"live": False, "allowed": True}
    raise ApiError(403, "action_refused", f"volthub does not grant MediaMTX action {data.action!r}")


class PathBody(Body):
    example = {"path": "live/ada_streams"}

    path: str = Field(min_length=1, max_length=1000)


@_hook("/mediamtx/unpublish", body=PathBody)
async def mediamtx_unpublish(data: PathBody) -> dict[str, Any]:
    """MediaMTX `runOnUnavailable` (curl with `{"path": "$MTX_PATH"}`): the stream closes."""
    return await _unpublished(streams().unpublish_path("mediamtx", data.path))


@_hook("/mediamtx/heartbeat", body=PathBody)
async def mediamtx_heartbeat(data: PathBody) -> dict[str, Any]:
    """A `runOnAvailable` loop's heartbeat for a MediaMTX path."""
    return await _still_live(streams().heartbeat_path("mediamtx", data.path))
