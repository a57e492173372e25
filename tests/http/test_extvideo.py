"""The external video integration against a fake provider served by the test on loopback."""

from __future__ import annotations

import base64
import hashlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import trio
from quart import request
from quart_trio import QuartTrio

from tests.conftest import make_settings, register
from tests.http.chat_env import CHAT_EPOCH
from tests.http.oauth.tokens import oauth_headers
from volthub.hub.clock import TrioClock

CLIENT_ID, CLIENT_SECRET = "volthub-client", "s3cret"
VIDEOS = [{"id": f"v{i}", "title": f"Video {i}", "url": f"https://video.example/v{i}", "views": i} for i in range(30)]


@dataclass
class Provider:
    """What the fake provider has issued and seen."""

    codes: dict[str, str] = field(default_factory=dict)  # code -> redirect_uri
    challenges: dict[str, str] = field(default_factory=dict)  # code -> PKCE S256 challenge
    verified: int = 0  # code exchanges whose PKCE verifier matched
    access: set[str] = field(default_factory=set)
    refresh: set[str] = field(default_factory=set)
    revoked: list[str] = field(default_factory=list)
    refreshes: int = 0
    expires_in: int = 600
    hostile: bool = False  # answer with script and data URLs where web addresses belong


def provider_app(state: Provider) -> QuartTrio:
    app = QuartTrio("fake_provider")

    def issue() -> dict[str, Any]:
        access, refresh = secrets.token_hex(8), secrets.token_hex(8)
        state.access.add(access)
        state.refresh.add(refresh)
        return {
            "access_token": access,
            "refresh_token": refresh,
            "expires_in": state.expires_in,
            "scope": "videos.read",
        }

    @app.get("/oauth/authorize")
    async def authorize() -> Any:
        args = request.args
        assert args["client_id"] == CLIENT_ID and args["response_type"] == "code"
        code = secrets.token_hex(6)
        state.codes[code] = args["redirect_uri"]
        if "code_challenge" in args:
            assert args["code_challenge_method"] == "S256"
            state.challenges[code] = args["code_challenge"]
        return "", 302, {"Location": f"{args['redirect_uri']}?code={code}&state={args['state']}"}

    @app.post("/oauth/token")
    async def token() -> Any:
        form = await request.form
        if (form.get("client_id"), form.get("client_secret")) != (CLIENT_ID, CLIENT_SECRET):
            return {"error": "invalid_client"}, 401
        if form["grant_type"] == "authorization_code":
            if state.codes.pop(form["code"], None) != form["redirect_uri"]:
                return {"error": "invalid_grant"}, 400
            challenge = state.challenges.pop(form["code"], None)
            if challenge is not None:
                digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
                if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge:
                    return {"error": "invalid_grant"}, 400
                state.verified += 1
            return issue()
        if form["refresh_token"] not in state.refresh:
            return {"error": "invalid_grant"}, 400
        state.refresh.discard(form["refresh_token"])
        state.refreshes += 1
        return issue()

    @app.post("/oauth/revoke")
    async def revoke() -> Any:
        state.revoked.append((await request.form)["token"])
        return {}

    def authorised() -> bool:
        return request.headers.get("Authorization", "").removeprefix("Bearer ") in state.access

    @app.get("/me")
    async def me() -> Any:
        url = "javascript:alert(document.cookie)" if state.hostile else "https://video.example/@p"
        return ({"id": "acct-1", "name": "Video Person", "url": url}, 200) if authorised() else ({}, 401)

    @app.get("/videos")
    async def videos() -> Any:
        if not authorised():
            return {}, 401
        if state.hostile:
            bad = ["javascript:alert(1)", " JavaScript:alert(1)", "data:text/html,x", "//video.example/v", "vbscript:x"]
            return {"items": [{"id": f"h{i}", "url": u, "thumbnailUrl": u} for i, u in enumerate(bad)]}
        return {"items": VIDEOS[: int(request.args["limit"])] + [{"no": "id"}]}

    @app.get("/library")
    async def library() -> Any:
        if not authorised():
            return {}, 401
        start, limit = int(request.args.get("cursor", 0)), int(request.args["limit"])
        more = start + limit < len(VIDEOS)
        return {"items": VIDEOS[start : start + limit], "nextCursor": str(start + limit) if more else None}

    @app.get("/playlists")
    async def playlists() -> Any:
        return ({"items": [{"id": "p1", "title": "Best of", "videoCount": 3}]}, 200) if authorised() else ({}, 401)

    return app


@pytest.fixture
async def provider(nursery: trio.Nursery) -> AsyncIterator[tuple[str, Provider]]:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    state = Provider()
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.2
    stop = trio.Event()
    binds = await nursery.start(
        lambda task_status: serve(provider_app(state), config, shutdown_trigger=stop.wait, task_status=task_status)
    )
    yield binds[0], state
    stop.set()


@pytest.fixture
async def volthub(database_url: str, provider: tuple[str, Provider]) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    url, _ = provider
    settings = make_settings(
        database_url,
        extvideo={"base_url": url, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "widget_cache_seconds": 0},
        server={"public_url": "https://volthub.example"},
    )
    app = create_app(settings, clock=TrioClock(start=CHAT_EPOCH))
    async with app.test_app():
        yield app


async def consent_at_provider(app: Any, client: Any, headers: dict[str, str]) -> str:
    """Ask for the consent URL with `client` (the browser keeps the cookie it gets) and
    consent at the provider: the path and query the provider sends the browser back to."""
    started = await (await client.get("/api/extvideo/auth/url", headers=headers)).get_json()
    assert started["url"].startswith(app.extensions["volthub"].settings.extvideo.base_url)
    async with httpx.AsyncClient() as http:
        consent = await http.get(started["url"])
    assert consent.status_code == 302
    back = urlsplit(consent.headers["Location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == "https://volthub.example/api/extvideo/auth/callback"
    query = parse_qs(back.query)
    assert query["state"] == [started["state"]]
    return f"{back.path}?{back.query}"


async def connect(app: Any, client: Any, headers: dict[str, str]) -> Any:
    return await client.get(await consent_at_provider(app, client, headers))


async def test_connect_read_refresh_and_disconnect(volthub: Any, provider: tuple[str, Provider], mock_clock: Any):
    _, state = provider
    client = volthub.test_client()
    user = await register(client)
    reader = await oauth_headers(volthub, user.id, ["extvideo:read"])
    manager = await oauth_headers(volthub, user.id, ["extvideo:manage"])
    status = await (await client.get("/api/extvideo/status", headers=reader)).get_json()
    assert status["configured"] is True and status["connected"] is False
    assert (await client.get("/api/extvideo/videos/recent", headers=reader)).status_code == 409
    assert (await client.get("/api/extvideo/auth/url", headers=reader)).status_code == 403  # needs manage
    callback = await connect(volthub, client, manager)
    assert callback.status_code == 200 and (await callback.get_json())["account"]["name"] == "Video Person"
    assert state.verified == 1  # the code exchange carried the PKCE verifier
    replay = await client.get("/api/extvideo/auth/callback?state=forged&code=x")
    assert replay.status_code == 400 and (await replay.get_json())["error"] == "invalid_state"
    status = await (await client.get("/api/extvideo/status", headers=reader)).get_json()
    assert status["connected"] is True and status["account"]["id"] == "acct-1"
    recent = await (await client.get("/api/extvideo/videos/recent?limit=3", headers=reader)).get_json()
    assert [v["id"] for v in recent["items"]] == ["v0", "v1", "v2"]  # the malformed item is dropped
    page = await (await client.get("/api/extvideo/library?limit=20", headers=reader)).get_json()
    rest = await (
        await client.get(f"/api/extvideo/library?limit=20&cursor={page['nextCursor']}", headers=reader)
    ).get_json()
    assert len(page["items"]) == 20 and len(rest["items"]) == 10 and rest["nextCursor"] is None
    lists = await (await client.get("/api/extvideo/playlists", headers=reader)).get_json()
    assert lists["items"] == [{"id": "p1", "title": "Best of", "url": None, "videoCount": 3}]
    widget = await (await client.get(f"/api/extvideo/widgets/{user.username}")).get_json()
    assert widget["connected"] is True and len(widget["videos"]) == 6
    # The access token expires: the next read refreshes it first.
    mock_clock.jump(601)
    assert (await client.get("/api/extvideo/playlists", headers=reader)).status_code == 200
    assert state.refreshes == 1
    # The provider forgets every token: reads report that the person must connect again.
    state.access.clear()
    state.refresh.clear()
    gone = await client.get("/api/extvideo/playlists", headers=reader)
    assert gone.status_code == 409 and (await gone.get_json())["error"] == "extvideo_reauth_required"
    assert (await (await client.get("/api/extvideo/status", headers=reader)).get_json())["status"] == "reauth_required"
    disconnected = await client.post("/api/extvideo/disconnect", headers=manager)
    assert disconnected.status_code == 200 and (await disconnected.get_json())["connected"] is False
    assert state.revoked
    widget = await (await client.get(f"/api/extvideo/widgets/{user.username}")).get_json()
    assert widget == {"username": user.username, "connected": False, "account": None, "videos": []}
    assert (await client.get("/api/extvideo/widgets/nobody_at_all")).status_code == 404


async def test_provider_down_is_a_502_and_unconfigured_is_a_409(sqlite_url: str):
    from volthub.http.app import create_app

    app = create_app(make_settings(sqlite_url))
    async with app.test_app():
        client = app.test_client()
        user = await register(client)
        refused = await client.get("/api/extvideo/auth/url", headers=user.headers)
        assert refused.status_code == 409 and (await refused.get_json())["error"] == "extvideo_not_configured"
        status = await (await client.get("/api/extvideo/status", headers=user.headers)).get_json()
        assert status["configured"] is False
    from volthub.loadtest.servers import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    app = create_app(
        make_settings(
            sqlite_url,
            extvideo={"base_url": dead, "client_id": "c", "timeout_seconds": 2},
            server={"public_url": "https://volthub.example"},
        )
    )
    async with app.test_app():
        client = app.test_client()
        user = await register(client)
        started = await (await client.get("/api/extvideo/auth/url", headers=user.headers)).get_json()
        failed = await client.get(f"/api/extvideo/auth/callback?state={started['state']}&code=abc")
        assert failed.status_code == 502 and (await failed.get_json())["error"] == "extvideo_provider_error"


async def test_a_state_completes_only_in_the_browser_of_the_user_who_asked(
    volthub: Any, provider: tuple[str, Provider], mock_clock: Any
) -> None:
    streamer_browser, viewer_browser = volthub.test_client(), volthub.test_client()
    streamer, viewer = await register(streamer_browser), await register(viewer_browser)
    manage = await oauth_headers(volthub, streamer.id, ["extvideo:manage"])
    read = await oauth_headers(volthub, streamer.id, ["extvideo:read"])

    # The streamer's state completed in the viewer's browser links nothing, and is used up.
    back = await consent_at_provider(volthub, streamer_browser, manage)
    elsewhere = await viewer_browser.get(back)
    assert elsewhere.status_code == 400 and (await elsewhere.get_json())["error"] == "invalid_state"
    assert (await (await streamer_browser.get("/api/extvideo/status", headers=read)).get_json())["connected"] is False
    again = await streamer_browser.get(back)
    assert again.status_code == 400 and (await again.get_json())["error"] == "invalid_state"

    # A state is short-lived.
    back = await consent_at_provider(volthub, streamer_browser, manage)
    mock_clock.jump(11 * 60)
    late = await streamer_browser.get(back)
    assert late.status_code == 400 and (await late.get_json())["error"] == "invalid_state"

    # The browser that asked completes it.
    back = await consent_at_provider(volthub, streamer_browser, manage)
    done = await streamer_browser.get(back)
    assert done.status_code == 200, await done.get_data(as_text=True)
    assert (await (await streamer_browser.get("/api/extvideo/status", headers=read)).get_json())["connected"] is True
    widget = await (await viewer_browser.get(f"/api/extvideo/widgets/{viewer.username}")).get_json()
    assert widget["connected"] is False


async def test_script_and_data_urls_from_the_provider_never_reach_the_widget(
    volthub: Any, provider: tuple[str, Provider]
) -> None:
    _, state = provider
    state.hostile = True
    browser = volthub.test_client()
    user = await register(browser)
    manage = await oauth_headers(volthub, user.id, ["extvideo:manage"])
    read = await oauth_headers(volthub, user.id, ["extvideo:read"])
    assert (await connect(volthub, browser, manage)).status_code == 200
    widget = await (await browser.get(f"/api/extvideo/widgets/{user.username}")).get_json()
    assert widget["connected"] is True and widget["account"]["url"] is None
    assert len(widget["videos"]) == 5
    assert all(v["url"] is None and v["thumbnailUrl"] is None for v in widget["videos"])
    status = await (await browser.get("/api/extvideo/status", headers=read)).get_json()
    assert status["account"]["url"] is None
    recent = await (await browser.get("/api/extvideo/videos/recent", headers=read)).get_json()
    assert {v["url"] for v in recent["items"]} == {None}
