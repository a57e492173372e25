"""The external video platform integration: connect, read, disconnect.

`GET auth/url` (extvideo:manage) returns the provider's consent address and sets a cookie
(HttpOnly, SameSite=Lax, path /api/extvideo/auth) in the browser that asked; the provider
sends the person back to `GET auth/callback` (public: the person's browser arrives there),
which completes only with the one-time `state` (10 minutes) and that cookie, for the user
who asked. So the URL must be fetched by the browser that will consent. Reads need extvideo:read. Without
`[extvideo]` configured every route but `status` and `widgets` answers 409
`extvideo_not_configured`. A provider failure is 502 `extvideo_provider_error`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from quart import Blueprint, after_this_request, request
from quart_schema import tag, validate_querystring, validate_response

from volthub.http import access
from volthub.http.documented import error_responses
from volthub.http.errors import ApiError
from volthub.http.page_session import set_cookie
from volthub.http.runtime import runtime
from volthub.http.schemas import Model, Query
from volthub.hub.clock import iso8601, to_ms
from volthub.services.extvideo import Connection, ExtVideo, web_url

blueprint = Blueprint("extvideo", __name__, url_prefix="/api/extvideo")
# The cookie binding an authorisation in flight to the browser that asked for it.
BROWSER_COOKIE = "volthub_extvideo_browser"
COOKIE_PATH = "/api/extvideo/auth"


def extvideo() -> ExtVideo:
    return runtime().services.extvideo


class AuthUrlOut(Model):
    example = {"url": "https://volthub.example/url", "state": "open", "expiresAt": "2026-03-14T18:30:00Z"}

    url: str = Field(description="send the person here to consent at the video platform")
    state: str
    expiresAt: str


class AccountOut(Model):
    id: str
    name: str
    url: str | None = Field(description="an absolute http(s) address or null")


class ExternalVideoStatusOut(Model):
    example = {
        "configured": False,
        "connected": False,
        "status": "active",
        "account": {
            "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
            "name": "Speedrun Club",
            "url": "https://volthub.example/url",
        },
        "scope": "chat:read chat:write",
        "connectedAt": "2026-03-14T18:30:00Z",
    }

    configured: bool = Field(description="whether this server has the integration set up")
    connected: bool
    status: str | None = Field(description="connected | reauth_required; null when not connected")
    account: AccountOut | None
    scope: str | None
    connectedAt: str | None


def status_out(configured: bool, connection: Connection | None) -> ExternalVideoStatusOut:
    if connection is None:
        return ExternalVideoStatusOut(
            configured=configured, connected=False, status=None, account=None, scope=None, connectedAt=None
        )
    return ExternalVideoStatusOut(
        configured=configured,
        connected=connection.status == "connected",
        status=connection.status,
        account=AccountOut(id=connection.account_id, name=connection.account_name, url=web_url(connection.account_url)),
        scope=connection.scope,
        connectedAt=iso8601(connection.connected_at),
    )


WEB_URL = "an absolute http(s) address; null when the platform gave none or anything else"


class VideoOut(Model):
    id: str
    title: str
    url: str | None = Field(description=WEB_URL)
    thumbnailUrl: str | None = Field(description=WEB_URL)
    publishedAt: str | None
    durationSeconds: int | None
    views: int | None


_VIDEO_EXAMPLE = {
    "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
    "title": "Friday night speedrun",
    "url": "https://volthub.example/url",
    "thumbnailUrl": "https://volthub.example/thumbnailUrl",
    "publishedAt": "2026-03-14T18:30:00Z",
    "durationSeconds": 60,
    "views": 1,
}


class PlaylistOut(Model):
    id: str
    title: str
    url: str | None
    videoCount: int | None


class VideoList(Model):
    example = {"items": [_VIDEO_EXAMPLE]}

    items: list[VideoOut]


class LibraryOut(Model):
    example = {"items": [_VIDEO_EXAMPLE], "nextCursor": None}

    items: list[VideoOut]
    nextCursor: str | None


class PlaylistList(Model):
    example = {
        "items": [
            {
                "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
                "title": "Friday night speedrun",
                "url": "https://volthub.example/url",
                "videoCount": 3,
            }
        ]
    }

    items: list[PlaylistOut]


class WidgetOut(Model):
    example = {
        "username": "ada_streams",
        "connected": False,
        "account": {
            "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
            "name": "Speedrun Club",
            "url": "https://volthub.example/url",
        },
        "videos": [_VIDEO_EXAMPLE],
    }

    username: str
    connected: bool
    account: AccountOut | None
    videos: list[VideoOut]


class CallbackQuery(Query):
    state: str = Field(min_length=1, max_length=200)
    code: str | None = Field(None, min_length=1, max_length=2000)
    error: str | None = Field(None, max_length=200)


class LimitQuery(Query):
    limit: int = Field(12, ge=1, le=50)


class LibraryQuery(LimitQuery):
    cursor: str | None = Field(None, max_length=512)


@blueprint.get("/auth/url")
@access.token("extvideo:manage")
@tag(["External video"])
@error_responses(409)
@validate_response(AuthUrlOut)
async def auth_url() -> AuthUrlOut:
    """The provider's consent URL with a one-time state (valid 10 minutes), and a cookie
    binding it to this browser: the callback completes only in the browser that asked."""
    started = await extvideo().authorize_url(access.principal().user_id)
    max_age = max(1, (started.expires_at - to_ms(runtime().clock.now())) // 1000)

    @after_this_request
    def bind(response: Any) -> Any:
        set_cookie(response, BROWSER_COOKIE, started.browser, max_age, COOKIE_PATH)
        return response

    return AuthUrlOut(url=started.url, state=started.state, expiresAt=iso8601(started.expires_at))


@blueprint.get("/auth/callback")
@access.public
@tag(["External video"])
@error_responses(409, 502)
@validate_querystring(CallbackQuery)
@validate_response(ExternalVideoStatusOut)
async def auth_callback(query_args: CallbackQuery) -> ExternalVideoStatusOut:
    """Where the provider sends the person back (`code` and `state`). 400 `invalid_state`
    for an unknown, used or expired state, or one that was started in another browser (its
    cookie is missing or different); 400 `access_denied` when the person declined."""
    if query_args.error or not query_args.code:
        raise ApiError(400, "access_denied", "the video platform did not grant access", {"error": query_args.error})
    connection = await extvideo().complete(query_args.state, query_args.code, request.cookies.get(BROWSER_COOKIE))
    return status_out(True, connection)


@blueprint.get("/status")
@access.token("extvideo:read")
@tag(["External video"])
@validate_response(ExternalVideoStatusOut)
async def status() -> ExternalVideoStatusOut:
    """Whether this server offers the external video integration and whether the caller is
    connected to it (the account, the granted scope and since when)."""
    found = await extvideo().status(access.principal().user_id)
    return status_out(found.configured, found.connection)


@blueprint.get("/videos/recent")
@access.token("extvideo:read")
@tag(["External video"])
@error_responses(409, 502)
@validate_querystring(LimitQuery)
@validate_response(VideoList)
async def recent_videos(query_args: LimitQuery) -> VideoList:
    """Your most recent videos on the platform (409 `extvideo_not_connected`)."""
    found = await extvideo().recent(access.principal().user_id, query_args.limit)
    return VideoList(items=[VideoOut(**video) for video in found])


@blueprint.get("/library")
@access.token("extvideo:read")
@tag(["External video"])
@error_responses(409, 502)
@validate_querystring(LibraryQuery)
@validate_response(LibraryOut)
async def library(query_args: LibraryQuery) -> LibraryOut:
    """The caller's videos at the connected provider, newest first, a page at a time
    (`nextCursor`)."""
    found, next_cursor = await extvideo().library(access.principal().user_id, query_args.limit, query_args.cursor)
    return LibraryOut(items=[VideoOut(**video) for video in found], nextCursor=next_cursor)


@blueprint.get("/playlists")
@access.token("extvideo:read")
@tag(["External video"])
@error_responses(409, 502)
@validate_querystring(LimitQuery)
@validate_response(PlaylistList)
async def playlists(query_args: LimitQuery) -> PlaylistList:
    """The caller's playlists at the connected provider, up to `limit`."""
    found = await extvideo().playlists(access.principal().user_id, query_args.limit)
    return PlaylistList(items=[PlaylistOut(**playlist) for playlist in found])


@blueprint.get("/widgets/<username>")
@access.public
@tag(["External video"])
@error_responses(404)
@validate_response(WidgetOut)
async def widget(username: str) -> WidgetOut:
    """A user's public widget: account and six most recent videos; `connected: false` when
    they have not connected (or the platform is unreachable). Cached `[extvideo]
    widget_cache_seconds`. 404 for an unknown user."""
    found: dict[str, Any] = await extvideo().widget(username)
    account = found["account"]
    return WidgetOut(
        username=found["username"],
        connected=found["connected"],
        account=AccountOut(**account) if account else None,
        videos=[VideoOut(**video) for video in found["videos"]],
    )


@blueprint.post("/disconnect")
@access.token("extvideo:manage")
@tag(["External video"])
@validate_response(ExternalVideoStatusOut)
async def disconnect() -> ExternalVideoStatusOut:
    """Forget the connection (and revoke its token at the provider, best effort)."""
    me = access.principal().user_id
    await extvideo().disconnect(me)
    return status_out(extvideo().configured, None)
