"""Browse lists, users search and clips."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from trio.testing import MockClock

from tests.conftest import make_settings, register
from tests.http.oauth.tokens import issue_oauth_token
from tests.http.streams.support import HOOK, INFO, SETUP
from volthub.http.events.socketio import SSE_WIRE
from volthub.hub.clock import TrioClock


@pytest.fixture
def settings(sqlite_url: str) -> Any:
    # No silence timeout: these tests jump the clock past it (tests/http/streams/test_silence.py).
    return make_settings(sqlite_url, ingest={"hook_secret": HOOK["Authorization"][7:], "silence_timeout_seconds": 0})


@pytest.fixture
async def app(settings: Any, mock_clock: MockClock) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    application = create_app(settings, clock=TrioClock())
    async with application.test_app():
        yield application


async def go_live(client: Any, user: Any, **info: Any) -> str:
    if info:
        assert (await client.put(INFO, headers=user.headers, json=info)).status_code == 200
    key = (await (await client.get(SETUP, headers=user.headers)).get_json())["streamKey"]
    response = await client.post("/api/ingest/publish", json={"streamKey": key}, headers=HOOK)
    assert response.status_code == 200
    return str(key)


async def go_offline(client: Any, key: str) -> None:
    response = await client.post("/api/ingest/unpublish", json={"streamKey": key}, headers=HOOK)
    assert response.status_code == 200


async def items(client: Any, path: str) -> list[dict[str, Any]]:
    response = await client.get(path)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return list((await response.get_json())["items"])


class Watcher:
    wire = SSE_WIRE
    transport = "sse"

    def deliver(self, payload: Any) -> bool:
        return True

    def note_lag(self, since: float) -> None:
        pass

    def overflow(self, reason: str) -> None:
        pass


async def test_browse_filters_by_category_tags_and_language(app: Any, client: Any, mock_clock: MockClock) -> None:
    music = await register(client)
    games = await register(client)
    await go_live(client, music, category="Music", tags=["Chill"], language="en")
    mock_clock.jump(1)
    await go_live(client, games, category="speedrunning", tags=["Speed Run", "Ranked"], channelTags=["German"])
    assert [s["channelId"] for s in await items(client, "/api/streams/live")] == [games.id, music.id]
    assert [s["channelId"] for s in await items(client, "/api/streams/browse?category=music")] == [music.id]
    assert [s["channelId"] for s in await items(client, "/api/streams/browse?tags=speed%20run,ranked")] == [games.id]
    assert [s["channelId"] for s in await items(client, "/api/streams/browse?tags=german")] == [games.id]
    assert await items(client, "/api/streams/browse?tags=chill,ranked") == []
    assert [s["channelId"] for s in await items(client, "/api/streams/browse?language=EN")] == [music.id]
    page = await (await client.get("/api/streams/live?limit=1")).get_json()
    assert [s["channelId"] for s in page["items"]] == [games.id]
    rest = await (await client.get(f"/api/streams/live?limit=1&cursor={page['nextCursor']}")).get_json()
    assert [s["channelId"] for s in rest["items"]] == [music.id] and rest["nextCursor"] is None
    assert (await client.get("/api/streams/live?cursor=garbage")).status_code == 400
    assert (await client.get("/api/streams/live?limit=101")).status_code == 400


async def test_top_and_growing_rank_by_presence(app: Any, client: Any, mock_clock: MockClock) -> None:
    early, late = await register(client), await register(client)
    await go_live(client, early)
    mock_clock.jump(600)
    await go_live(client, late)
    mock_clock.jump(60)
    fanout = app.extensions["volthub"].services.fanout
    for _ in range(6):
        fanout.subscribe(Watcher(), early.id, owner=False)
    for _ in range(2):
        fanout.subscribe(Watcher(), late.id, owner=False)
    top = await items(client, "/api/streams/top")
    assert [(s["channelId"], s["viewers"]) for s in top] == [(early.id, 6), (late.id, 2)]
    # early: 6 viewers over 11 minutes; late: 2 over 1 minute
    assert [s["channelId"] for s in await items(client, "/api/streams/growing")] == [late.id, early.id]
    first = await (await client.get("/api/streams/top?limit=1")).get_json()
    second = await (await client.get(f"/api/streams/top?limit=1&cursor={first['nextCursor']}")).get_json()
    assert [s["channelId"] for s in second["items"]] == [late.id]
    for bad in ("garbage", "WyJ4Il0", "Wy0xXQ"):  # not base64 JSON, ["x"], [-1]
        assert (await client.get(f"/api/streams/top?cursor={bad}")).status_code == 400


async def test_featured_lists_the_configured_live_channels(sqlite_url: str, mock_clock: MockClock) -> None:
    from volthub.http.app import create_app

    settings = make_settings(
        sqlite_url, ingest={"hook_secret": HOOK["Authorization"][7:]}, streams={"featured": ["zed_feat", "amy_feat"]}
    )
    application = create_app(settings, clock=TrioClock())
    async with application.test_app():
        client = application.test_client()
        users = [await register(client, name) for name in ("amy_feat", "zed_feat", "other_feat")]
        assert await items(client, "/api/streams/featured") == []
        for user in users:
            await go_live(client, user)
        assert [s["username"] for s in await items(client, "/api/streams/featured")] == ["zed_feat", "amy_feat"]


async def test_user_stream_and_unknown_user(client: Any, app: Any) -> None:
    user = await register(client)
    await go_live(client, user, title="On air", tags=["Horror and jump scares"])
    body = await (await client.get(f"/api/streams/user/{user.username.upper()}")).get_json()
    assert body["live"] is True and body["stream"]["title"] == "On air"
    assert body["contentWarnings"] == ["horror-and-jump-scares"]
    assert (await client.get("/api/streams/user/nobody_here")).status_code == 404
    assert (await client.get("/api/streams/user/nobody_here/vods")).status_code == 404


async def test_users_search_is_a_case_insensitive_prefix(client: Any, app: Any) -> None:
    await register(client, "StreamQueen")
    await register(client, "streamking")
    await register(client, "other_one")
    found = await items(client, "/api/users/search?q=STREAM&limit=10")
    assert {user["username"] for user in found} == {"StreamQueen", "streamking"}
    assert len(await items(client, "/api/users/search?q=stream&limit=1")) == 1
    assert (await client.get("/api/users/search?q=x&limit=0")).status_code == 400


# --- clips ------------------------------------------------------------------------------------


def clip(**fields: Any) -> dict[str, Any]:
    return {"title": "Nice play", "durationMs": 30_000, "startOffsetMs": 0, **fields}


async def test_clip_rules(app: Any, client: Any, mock_clock: MockClock) -> None:
    owner, viewer = await register(client), await register(client)
    path = f"/api/streams/{owner.username}/clips"
    none_yet = await client.post(path, headers=viewer.headers, json=clip())
    assert none_yet.status_code == 409 and (await none_yet.get_json())["error"] == "no_stream"
    key = await go_live(client, owner)
    mock_clock.jump(120)
    cases = [
        ({"title": "ab"}, "title"),
        ({"title": "x" * 161}, "title"),
        ({"title": "   ab   "}, "title"),
        ({"durationMs": 14_999}, "durationMs"),
        ({"durationMs": 120_001}, "durationMs"),
        ({"durationMs": "30000"}, "durationMs"),
        ({"startOffsetMs": -1}, "startOffsetMs"),
        ({"description": "d" * 501}, "description"),
        ({"highlight": "yes"}, "highlight"),
    ]
    for change, field in cases:
        response = await client.post(path, headers=viewer.headers, json=clip(**change))
        assert response.status_code == 400, change
        assert field in str((await response.get_json())["details"]), change
    for missing in ("title", "durationMs", "startOffsetMs"):
        body = clip()
        del body[missing]
        assert (await client.post(path, headers=viewer.headers, json=body)).status_code == 400
    beyond = await client.post(path, headers=viewer.headers, json=clip(startOffsetMs=100_000))
    assert beyond.status_code == 400 and (await beyond.get_json())["error"] == "clip_out_of_range"
    edges = [
        clip(title="abc", durationMs=15_000),
        clip(title="t" * 160, durationMs=120_000, description="d" * 500, highlight=True),
    ]
    made = []
    for body in edges:
        response = await client.post(path, headers=viewer.headers, json=body)
        assert response.status_code == 201, await response.get_data(as_text=True)
        made.append(await response.get_json())
        mock_clock.jump(1)  # distinct creation times: the list order is then known
    assert made[1]["highlight"] is True and made[0]["highlight"] is False and made[1]["videoUrl"] is None
    assert made[0]["creator"]["userId"] == viewer.id and made[0]["vodId"] is None

    await go_offline(client, key)
    recorded = await client.post(path, headers=viewer.headers, json=clip(startOffsetMs=92_000))
    assert recorded.status_code == 201
    recorded_body = await recorded.get_json()
    assert recorded_body["vodId"] is not None and recorded_body["streamId"] == made[0]["streamId"]
    too_late = await client.post(path, headers=viewer.headers, json=clip(startOffsetMs=92_001))
    assert too_late.status_code == 400

    fetched = await client.get(f"/api/clips/{made[0]['id']}")
    assert (await fetched.get_json())["vodId"] == recorded_body["vodId"]  # its stream is recorded now
    assert (await client.get("/api/clips/00000000-0000-0000-0000-000000000000")).status_code == 404
    assert (await client.get("/api/clips/not-a-uuid")).status_code == 400
    listed = await items(client, path)
    assert [c["id"] for c in listed] == [recorded_body["id"], made[1]["id"], made[0]["id"]]


async def test_creating_a_clip_needs_a_token_and_user_write(app: Any, client: Any, mock_clock: MockClock) -> None:
    owner = await register(client)
    await go_live(client, owner)
    mock_clock.jump(60)
    path = f"/api/streams/{owner.username}/clips"
    assert (await client.post(path, json=clip())).status_code == 401
    token = await issue_oauth_token(app, owner.id, "stream:read")
    refused = await client.post(path, headers={"Authorization": f"Bearer {token}"}, json=clip())
    assert refused.status_code == 403
    allowed = await issue_oauth_token(app, owner.id, "user:write")
    assert (await client.post(path, headers={"Authorization": f"Bearer {allowed}"}, json=clip())).status_code == 201
    assert (await client.post("/api/streams/nobody_here/clips", headers=owner.headers, json=clip())).status_code == 404
