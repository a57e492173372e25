"""Live state driven by the ingest hooks: SSE sees stream.online, stream.update (with tags)
and stream.offline; the live list and the VOD list follow; both backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import trio
from httpx_sse import aconnect_sse

from tests.conftest import LiveServer, make_settings, register_live, serve_app, served
from tests.http.streams.support import HOOK, HOOK_SECRET, INFO, Events, hook, ingest_settings, stream_key


@pytest.fixture
async def server(database_url: str, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    async with served(nursery, ingest_settings(database_url)) as server:
        yield server


@pytest.fixture
async def http(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
        yield client


async def test_hooks_drive_events_live_list_and_vods(http: httpx.AsyncClient, server: LiveServer) -> None:
    owner = await register_live(server.url)
    key = await stream_key(http, owner.headers)
    headers = {**owner.headers, "Accept": "text/event-stream"}
    async with aconnect_sse(http, "GET", "/api/events/stream", headers=headers, params={"messages": "named"}) as source:
        events = Events(source)
        await events.next("connected")

        published = await hook(http, "publish", key)
        assert published.status_code == 200, published.text
        _, online = await events.next()
        assert online["event"] == "stream.online"
        assert online["data"]["userId"] == owner.id and online["data"]["streamId"] == published.json()["streamId"]

        live = (await http.get("/api/streams/live")).json()["items"]
        assert [item["channelId"] for item in live] == [owner.id]

        changed = await http.put(
            INFO, headers=owner.headers, json={"title": "Any% attempts", "tags": ["Speed Run", "Gambling"]}
        )
        assert changed.status_code == 200, changed.text
        _, update = await events.next()
        assert update["event"] == "stream.update"
        assert update["data"]["tags"] == ["speed-run", "gambling"]
        assert update["data"]["contentWarnings"] == ["gambling"] and update["data"]["title"] == "Any% attempts"

        closed = await hook(http, "unpublish", key)
        assert closed.status_code == 200, closed.text
        _, offline = await events.next()
        assert offline["event"] == "stream.offline" and offline["data"]["vodId"] == closed.json()["vodId"]

    assert (await http.get("/api/streams/live")).json()["items"] == []
    vods = (await http.get(f"/api/streams/user/{owner.username}/vods")).json()
    assert [vod["title"] for vod in vods["items"]] == ["Any% attempts"]
    assert vods["items"][0]["tags"] == ["speed-run", "gambling"] and vods["nextCursor"] is None
    channel = (await http.get(f"/api/streams/user/{owner.username}")).json()
    assert channel["live"] is False and channel["stream"] is None


async def test_repeated_publish_keeps_one_stream_and_unpublish_twice_is_404(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    owner = await register_live(server.url)
    key = await stream_key(http, owner.headers)
    first = (await hook(http, "publish", key)).json()
    again = (await hook(http, "publish", key)).json()
    assert first["streamId"] == again["streamId"]
    assert (await hook(http, "heartbeat", key)).status_code == 200
    assert (await hook(http, "unpublish", key)).status_code == 200
    gone = await hook(http, "unpublish", key)
    assert gone.status_code == 404 and gone.json()["error"] == "not_live"
    assert (await hook(http, "heartbeat", key)).status_code == 404


async def test_hooks_need_the_secret_and_a_real_key(http: httpx.AsyncClient, server: LiveServer) -> None:
    owner = await register_live(server.url)
    key = await stream_key(http, owner.headers)
    no_secret = await http.post("/api/ingest/publish", json={"streamKey": key})
    assert no_secret.status_code == 401 and no_secret.json()["error"] == "invalid_hook_secret"
    wrong = await http.post("/api/ingest/publish", json={"streamKey": key}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    refused = await hook(http, "publish", key + "x")
    assert refused.status_code == 403 and refused.json()["error"] == "invalid_stream_key"
    assert key not in refused.text
    assert (await http.get("/api/streams/live")).json()["items"] == []


async def test_regenerating_the_key_refuses_the_old_one_at_once(http: httpx.AsyncClient, server: LiveServer) -> None:
    owner = await register_live(server.url)
    old = await stream_key(http, owner.headers)
    assert await stream_key(http, owner.headers) == old  # stable until regenerated
    fresh = await http.post("/api/integrations/oauth/stream/key/regenerate", headers=owner.headers)
    assert fresh.status_code == 200
    new = fresh.json()["streamKey"]
    assert new != old and await stream_key(http, owner.headers) == new
    assert (await hook(http, "publish", old)).status_code == 403
    assert (await hook(http, "publish", new)).status_code == 200


async def test_the_key_is_not_stored(http: httpx.AsyncClient, server: LiveServer) -> None:
    owner = await register_live(server.url)
    key = await stream_key(http, owner.headers)
    rt = server.app.extensions["volthub"]
    rows = await rt.db.read(lambda tx: tx.execute("SELECT * FROM stream_settings"))
    assert rows and all(key not in str(value) for row in rows for value in row.values())


async def test_nginx_rtmp_and_mediamtx_requests(http: httpx.AsyncClient, server: LiveServer) -> None:
    owner = await register_live(server.url)
    key = await stream_key(http, owner.headers)
    secret = {"secret": HOOK_SECRET}
    form = {"call": "publish", "app": "live", "name": key, "addr": "127.0.0.1", "clientid": "1"}
    assert (await http.post("/api/ingest/nginx/publish", data=form)).status_code == 401
    admitted = await http.post("/api/ingest/nginx/publish", params=secret, data=form)
    assert admitted.status_code == 200, admitted.text
    assert (await http.post("/api/ingest/nginx/update", params=secret, data=form)).status_code == 200
    assert (await http.post("/api/ingest/nginx/unpublish", params=secret, data=form)).status_code == 200
    refused = await http.post("/api/ingest/nginx/publish", params=secret, data={**form, "name": "wrong"})
    assert refused.status_code == 403

    request = {
        "user": "",
        "password": key,
        "token": "",
        "ip": "127.0.0.1",
        "action": "publish",
        "path": owner.username,
        "protocol": "rtmp",
        "id": None,
        "query": "",
    }
    mtx = "/api/ingest/mediamtx/auth"
    assert (await http.post(mtx, params=secret, json=request)).status_code == 200
    live = (await http.get(f"/api/streams/user/{owner.username}")).json()
    assert live["live"] is True
    assert (await http.post(mtx, params=secret, json={**request, "action": "read", "password": ""})).status_code == 200
    assert (await http.post(mtx, params=secret, json={**request, "action": "api"})).status_code == 403
    by_query = {**request, "password": "", "query": f"key={key}"}
    assert (await http.post(mtx, params=secret, json=by_query)).status_code == 200  # already live: same stream
    whip = {**request, "password": "", "token": "bad", "protocol": "webrtc"}
    assert (await http.post(mtx, params=secret, json=whip)).status_code == 403
    path = {"path": owner.username}
    beat = await http.post("/api/ingest/mediamtx/heartbeat", params=secret, json=path)
    assert beat.status_code == 200 and beat.json() == {"live": True, "streamId": live["stream"]["id"]}
    done = await http.post("/api/ingest/mediamtx/unpublish", params=secret, json=path)
    assert done.status_code == 200, done.text
    assert done.json()["streamId"] == live["stream"]["id"]
    assert (await http.get(f"/api/streams/user/{owner.username}")).json()["live"] is False
    gone = await http.post("/api/ingest/mediamtx/heartbeat", params=secret, json=path)
    assert gone.status_code == 404 and gone.json()["error"] == "not_live"


async def test_hooks_are_refused_when_no_secret_is_configured(sqlite_url: str, nursery: trio.Nursery) -> None:
    stop = trio.Event()
    server = await serve_app(nursery, make_settings(sqlite_url), stop)
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post("/api/ingest/publish", json={"streamKey": "x"}, headers=HOOK)
    stop.set()
    assert response.status_code == 403 and response.json()["error"] == "ingest_not_configured"


def mediamtx_publish(key: str, path: str) -> dict[str, object]:
    return {"user": "", "password": key, "token": "", "ip": "127.0.0.1", "action": "publish", "path": path}


async def test_a_mediamtx_publish_is_bound_to_the_path_of_the_keys_channel(
    http: httpx.AsyncClient, server: LiveServer
) -> None:
    a, b = await register_live(server.url), await register_live(server.url)
    key_a, key_b = await stream_key(http, a.headers), await stream_key(http, b.headers)
    secret = {"secret": HOOK_SECRET}
    mtx = "/api/ingest/mediamtx/auth"

    async def live(user: object) -> bool:
        return bool((await http.get(f"/api/streams/user/{user.username}")).json()["live"])  # type: ignore[attr-defined]

    for path in (a.username, f"live/{key_b}", "other", f"{b.username}/../{a.username}"):
        refused = await http.post(mtx, params=secret, json=mediamtx_publish(key_b, path))
        assert refused.status_code == 403, (path, refused.text)
        assert refused.json()["error"] == "path_not_allowed"
    assert not await live(a) and not await live(b)

    assert (await http.post(mtx, params=secret, json=mediamtx_publish(key_b, b.username))).status_code == 200
    assert await live(b) and not await live(a)
    # B's key on A's path, now that B is live, is still refused and changes nothing.
    assert (await http.post(mtx, params=secret, json=mediamtx_publish(key_b, a.username))).status_code == 403
    # A goes live through nginx-rtmp; MediaMTX hooks by A's path do not touch it.
    form = {"call": "publish", "app": "live", "name": key_a}
    assert (await http.post("/api/ingest/nginx/publish", params=secret, data=form)).status_code == 200
    for hook_name in ("heartbeat", "unpublish"):
        answer = await http.post(f"/api/ingest/mediamtx/{hook_name}", params=secret, json={"path": a.username})
        assert answer.status_code == 404, answer.text
    assert await live(a) and await live(b)
    done = await http.post("/api/ingest/mediamtx/unpublish", params=secret, json={"path": b.username})
    assert done.status_code == 200, done.text
    assert await live(a) and not await live(b)


async def test_ingest_hooks_check_the_secret_before_the_content_type(http: httpx.AsyncClient) -> None:
    for path, body in (("/api/ingest/nginx/publish", {"name": "k"}), ("/api/ingest/publish", None)):
        response = await http.post(
            path,
            content=b"name=k" if body is None else b'{"name": "k"}',
            headers={"Content-Type": "text/plain" if body is None else "application/json"},
        )
        assert response.status_code == 401, (path, response.text)
        assert response.json()["error"] == "invalid_hook_secret"
