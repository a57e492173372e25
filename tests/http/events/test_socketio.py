"""The Events API over Socket.IO, against a live Hypercorn, with real clients.

The official JavaScript client (once polling-then-upgrade, once WebSocket only), the
python-socketio AsyncClient, and raw Engine.IO frames for the edges: tokens in auth or
query, refused tokens, anonymous subscriptions, rewards, unknown events, oversized and
malformed input, a stalled reader, presence.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import trio
from trio_websocket import WebSocketConnection

from tests.conftest import SOCKET_PATHS, LiveServer, make_settings, register_live, serve_app, socket_path_events
from tests.conftest import RegisteredUser as Account
from tests.event_payloads import stand_in
from tests.http.events.live import closed, handshake, open_ws, poll, polling_open, push, receive
from tests.js_client import run_client
from volthub.hub.clock import TrioClock
from volthub.hub.publisher import Event
from volthub.services.tokens import TokenService

SECRET = "events-test-secret-0123456789abcdef"
EIO_PATH = "/ws/events/"
DEFAULT_PATH = "/socket.io/"


# Every test runs on both ways of serving the Socket.IO paths: the gateway (the default,
# volthub's own listener) and the single-port mount (ASGI, Hypercorn).
def events_settings(path: str, **events: Any) -> dict[str, Any]:
    return {**events, **socket_path_events(path)}


@pytest.fixture(params=SOCKET_PATHS)
async def server(sqlite_url: str, nursery: trio.Nursery, request: pytest.FixtureRequest) -> AsyncIterator[LiveServer]:
    settings = make_settings(
        sqlite_url,
        auth={"token_secret": SECRET},
        events=events_settings(request.param, queue_size=16, max_payload=10_000),
        ratelimit={"enabled": False},
    )
    stop = trio.Event()
    yield await serve_app(nursery, settings, stop)
    stop.set()


@pytest.fixture
async def owner(server: LiveServer) -> Account:
    return await register_live(server.url)


def runtime_of(server: LiveServer) -> Any:
    return server.app.extensions["volthub"]


def publish(server: LiveServer, channel_id: str, name: str, data: dict[str, Any], is_test: bool = False) -> Event:
    event = Event(str(uuid.uuid4()), name, channel_id, data, "2026-11-22T13:07:00.000Z", is_test)
    runtime_of(server).bus.publish(event)
    return event


async def create_reward(server: LiveServer, user: Account, **fields: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post(
            f"/api/channel-points/{user.id}/items",
            headers=user.headers,
            json={"name": "Hydrate", "cost": 500, **fields},
        )
    assert response.status_code == 201, response.text
    return response.json()


# ------------------------------------------------------------------ raw Socket.IO helpers


async def sio_open(
    server: LiveServer, nursery: trio.Nursery, connect: str = "40", **params: str
) -> WebSocketConnection:
    """A WebSocket on /ws/events (namespace "/") that sent `connect`."""
    ws = await open_ws(nursery, server.events_url, EIO_PATH, **params)
    handshake(await receive(ws))
    await ws.send_message(connect)
    return ws


async def next_event(ws: WebSocketConnection, namespace: str = "") -> tuple[str, Any]:
    """The next EVENT on the socket: (name, first argument)."""
    while True:
        frame = await receive(ws, skip_pings=True)
        prefix = f"42{namespace}"
        if isinstance(frame, str) and frame.startswith(prefix):
            name, *args = orjson.loads(frame[len(prefix) :])
            return name, args[0] if args else None


async def connected(ws: WebSocketConnection) -> dict[str, Any]:
    ack = await receive(ws, skip_pings=True)
    assert isinstance(ack, str) and ack.startswith("40{"), ack
    name, data = await next_event(ws)
    assert name == "connected"
    return data


# ------------------------------------------------------------------ where clients connect


async def test_clients_are_told_the_gateway_and_connect_there(live_server: LiveServer, nursery: trio.Nursery) -> None:
    """By default the API sends Socket.IO clients to the gateway's own port (`wsUrl`), and a
    client that follows it gets an authenticated connection there."""
    owner = await register_live(live_server.url)
    async with httpx.AsyncClient(base_url=live_server.url) as http:
        ws_url = (await http.get("/api/events/types")).json()["wsUrl"]
    assert ws_url == live_server.events_url.replace("http://", "ws://") != live_server.url.replace("http://", "ws://")
    ws = await open_ws(nursery, ws_url.replace("ws://", "http://"), EIO_PATH, token=owner.token)
    handshake(await receive(ws))
    await ws.send_message("40")
    assert (await connected(ws))["authenticated"] is True


# ------------------------------------------------------------------ official clients


@pytest.mark.parametrize(("transports", "target"), [("default", "namespace"), ("websocket", "path")])
async def test_official_js_client(server: LiveServer, owner: Account, transports: str, target: str) -> None:
    await create_reward(server, owner, name="Stretch", cost=250)
    args = (server.url, owner.token, owner.id, transports, target, server.events_url)
    seen = await run_client("events_client.mjs", *args)
    assert seen["connected"] == {
        "channelUsername": owner.username,
        "channelId": owner.id,
        "authenticated": True,
        "autoSubscribed": True,
    }
    assert seen["connectedBeforeAnyEvent"] is True
    assert seen["sandboxStatus"] == 200
    assert seen["envelope"]["event"] == "channel.follow"
    assert set(seen["envelope"]) == {"event", "data", "timestamp"}
    assert seen["envelope"]["data"] == seen["byName"] == seen["catchAll"]
    assert seen["byName"]["isTest"] is True
    names = [reward["name"] for reward in seen["rewards"]["rewards"]]
    assert names == ["First", "Stretch"]
    assert "requiresModeratorApproval" not in seen["rewards"]["rewards"][1]  # REST only
    expected = ["websocket"] if transports == "websocket" else ["polling", "websocket"]
    assert seen["transports"] == expected


def _python_client(url: str, token: str, channel_id: str, transports: list[str], events_url: str) -> dict[str, Any]:
    """python-socketio's AsyncClient on its own asyncio loop (run in a worker thread)."""
    import socketio

    async def main() -> dict[str, Any]:
        client = socketio.AsyncClient(reconnection=False)
        seen: dict[str, Any] = {}
        complete = asyncio.Event()
        namespace = "/ws/events"

        def check() -> None:
            if {"envelope", "by_name", "rewards"} <= set(seen):
                complete.set()

        @client.on("connected", namespace=namespace)
        async def on_connected(data: dict[str, Any]) -> None:
            seen["connected"] = data
            async with httpx.AsyncClient(base_url=url) as http:
                response = await http.post(
                    "/api/integrations/oauth/test/events",
                    headers={"Authorization": f"Bearer {token}"},
                    json={"eventType": "volt_tip", "channelId": channel_id, "amount": 42},
                )
            seen["sandbox"] = response.status_code
            await client.emit("channel:getRewards", {"channelId": channel_id}, namespace=namespace)

        @client.on("event", namespace=namespace)
        def on_event(envelope: dict[str, Any]) -> None:
            seen["envelope"] = envelope
            check()

        @client.on("channel.volts", namespace=namespace)
        def on_volts(data: dict[str, Any]) -> None:
            seen["by_name"] = data
            check()

        @client.on("channel:rewards", namespace=namespace)
        def on_rewards(payload: dict[str, Any]) -> None:
            seen["rewards"] = payload
            check()

        await client.connect(
            events_url, namespaces=[namespace], auth={"token": token}, transports=transports, wait_timeout=10
        )
        try:
            await asyncio.wait_for(complete.wait(), 15)
            seen["transport"] = client.transport()
        finally:
            await client.disconnect()
        return seen

    return asyncio.run(main())


@pytest.mark.parametrize("transports", [["polling", "websocket"], ["websocket"]])
async def test_python_socketio_client(server: LiveServer, owner: Account, transports: list[str]) -> None:
    seen = await trio.to_thread.run_sync(
        _python_client, server.url, owner.token, owner.id, transports, server.events_url
    )
    assert seen["connected"]["authenticated"] is True and seen["connected"]["channelUsername"] == owner.username
    assert seen["sandbox"] == 200
    assert seen["envelope"]["event"] == "channel.volts"
    assert seen["envelope"]["data"] == seen["by_name"]
    assert seen["by_name"]["amount"] == 42 and seen["by_name"]["isTest"] is True
    assert [reward["builtInType"] for reward in seen["rewards"]["rewards"]] == ["first"]


# ------------------------------------------------------------------ authentication


async def test_token_in_query_parameter(server: LiveServer, owner: Account, nursery: trio.Nursery) -> None:
    ws = await sio_open(server, nursery, token=owner.token)
    data = await connected(ws)
    assert data["authenticated"] is True and data["autoSubscribed"] is True


async def test_token_over_polling_and_default_path(server: LiveServer, owner: Account) -> None:
    async with httpx.AsyncClient(base_url=server.events_url) as http:
        sid = await polling_open(http, DEFAULT_PATH)
        assert (await push(http, DEFAULT_PATH, sid, '40/ws/events,{"token":"%s"}' % owner.token)).text == "ok"
        records = (await poll(http, DEFAULT_PATH, sid)).text.split("\x1e")
    assert records[0].startswith("40/ws/events,{")
    assert records[1].startswith('42/ws/events,["connected",')
    assert orjson.loads(records[1][len("42/ws/events,") :])[1]["authenticated"] is True


def _expired_token(user_id: str) -> str:
    token, _ = TokenService(SECRET, TrioClock(start=time.time() - 3600), 60).issue_session(user_id)
    return token


@pytest.mark.parametrize(
    ("kind", "message"),
    [("garbage", "token is not valid"), ("expired", "token has expired"), ("number", "auth.token must be a string")],
)
async def test_bad_tokens_are_refused_with_a_reason(
    server: LiveServer, owner: Account, nursery: trio.Nursery, kind: str, message: str
) -> None:
    token: Any = {"garbage": "not-a-jwt", "expired": _expired_token(owner.id), "number": 12}[kind]
    ws = await sio_open(server, nursery, "40" + orjson.dumps({"token": token}).decode())
    reply = await receive(ws, skip_pings=True)
    assert isinstance(reply, str) and reply.startswith("44")
    error = orjson.loads(reply[2:])
    assert error["message"] == message and error["data"]["code"] == "invalid_token"
    # The connection itself lives on: a new CONNECT without a token is accepted.
    await ws.send_message("40")
    assert (await connected(ws))["authenticated"] is False


async def test_anonymous_connection_and_public_subscription(
    server: LiveServer, owner: Account, nursery: trio.Nursery
) -> None:
    ws = await sio_open(server, nursery)
    assert await connected(ws) == {
        "channelUsername": None,
        "channelId": None,
        "authenticated": False,
        "autoSubscribed": False,
    }
    await ws.send_message('421["subscribe",{"channel":"%s"}]' % owner.username.upper())
    assert await next_event(ws) == ("subscribed", {"channelId": owner.id, "channelUsername": owner.username})
    ack = await receive(ws, skip_pings=True)
    assert ack == '431[{"channelId":"%s","channelUsername":"%s"}]' % (owner.id, owner.username)
    # Private (owner-only) and sandbox events are not sent; public ones are.
    publish(server, owner.id, "channel.follow", stand_in("channel.follow"))
    publish(server, owner.id, "chat.message", stand_in("chat.message", isTest=True), is_test=True)
    live = stand_in("stream.online", title="live!")
    publish(server, owner.id, "stream.online", live)
    assert await next_event(ws) == (
        "event",
        {"event": "stream.online", "data": live, "timestamp": "2026-11-22T13:07:00.000Z"},
    )
    assert await next_event(ws) == ("stream.online", live)


async def test_real_follow_and_chat_reach_the_owner(server: LiveServer, owner: Account, nursery: trio.Nursery) -> None:
    ws = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
    await connected(ws)
    fan = await register_live(server.url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.post(f"/api/users/follow/{owner.id}", headers=fan.headers)
        assert response.status_code == 200
        await next_event(ws)  # `event`
        name, data = await next_event(ws)
        assert name == "channel.follow" and data["userId"] == fan.id
        response = await http.post(
            f"/api/integrations/oauth/chat/channels/{owner.id}/messages",
            headers=fan.headers,
            json={"message": "hello stream"},
        )
        assert response.status_code == 200, response.text
    envelope = (await next_event(ws))[1]
    assert envelope["event"] == "chat.message" and envelope["data"]["message"] == "hello stream"


# ------------------------------------------------------------------ client requests


async def test_rewards_requests(server: LiveServer, owner: Account, nursery: trio.Nursery) -> None:
    await create_reward(server, owner)
    ws = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
    await connected(ws)
    await ws.send_message('42["channel:getRewards",{}]')
    assert await next_event(ws) == ("channel:rewards", {"rewards": []})
    await ws.send_message('42["channel:getRewards",{"channelId":"not-a-uuid"}]')
    assert await next_event(ws) == ("channel:rewards", {"rewards": []})
    await ws.send_message('427["channel:getRewards",{"channelId":"%s"}]' % owner.id)
    name, payload = await next_event(ws)
    assert name == "channel:rewards"
    assert [r["name"] for r in payload["rewards"]] == ["First", "Hydrate"]
    assert set(payload["rewards"][1]) == {"id", "name", "cost", "description", "iconUrl", "enabled", "builtInType"}
    ack = await receive(ws, skip_pings=True)
    assert isinstance(ack, str) and ack.startswith("437[")


async def test_rewards_failure_is_service_unavailable(
    server: LiveServer, owner: Account, nursery: trio.Nursery
) -> None:
    class Broken:
        async def rewards(self, channel_id: str, *, built_in: bool = True) -> list[Any]:
            raise RuntimeError("channel points are down")

    runtime_of(server).services.channel_points = Broken()
    ws = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
    await connected(ws)
    await ws.send_message('42["channel:getRewards",{"channelId":"%s"}]' % owner.id)
    name, error = await next_event(ws)
    assert name == "error" and error["code"] == "SERVICE_UNAVAILABLE"
    await ws.send_message('42["channel:getRewards",{}]')  # still connected
    assert await next_event(ws) == ("channel:rewards", {"rewards": []})


async def test_unknown_event_gets_an_error_and_the_connection_lives(server: LiveServer, nursery: trio.Nursery) -> None:
    ws = await sio_open(server, nursery)
    await connected(ws)
    await ws.send_message('42["teleport",{"to":"mars"}]')
    name, error = await next_event(ws)
    assert name == "error" and error["code"] == "UNKNOWN_EVENT" and error["event"] == "teleport"
    await ws.send_message('42["subscribe",{"channelId":"%s"}]' % uuid.uuid4())
    assert (await next_event(ws))[1]["code"] == "NOT_FOUND"
    await ws.send_message('42["subscribe","nonsense"]')
    assert (await next_event(ws))[1]["code"] == "INVALID_REQUEST"
    await ws.send_message('42["channel:getRewards",{}]')
    assert await next_event(ws) == ("channel:rewards", {"rewards": []})


async def test_subscriptions_per_connection_are_bounded(server: LiveServer, nursery: trio.Nursery) -> None:
    runtime_of(server).settings.events.max_subscriptions = 2
    channels = [await register_live(server.url) for _ in range(3)]
    ws = await sio_open(server, nursery)
    await connected(ws)
    for index, channel in enumerate(channels):
        await ws.send_message('42["subscribe",{"channelId":"%s"}]' % channel.id)
        name, payload = await next_event(ws)
        assert name == ("subscribed" if index < 2 else "error")
    await ws.send_message('42["unsubscribe",{"channelId":"%s"}]' % channels[0].id)
    assert await next_event(ws) == ("unsubscribed", {"channelId": channels[0].id})
    await ws.send_message('42["subscribe",{"channelId":"%s"}]' % channels[2].id)
    assert (await next_event(ws))[0] == "subscribed"


# ------------------------------------------------------------------ malformed input


async def test_oversized_frame_closes_only_that_connection(
    server: LiveServer, owner: Account, nursery: trio.Nursery
) -> None:
    other = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
    await connected(other)
    big = await sio_open(server, nursery)
    await connected(big)
    await big.send_message('42["channel:getRewards","' + "x" * 10_001 + '"]')
    assert await closed(big)
    assert big.closed is not None and big.closed.code == 1009
    publish(server, owner.id, "channel.follow", stand_in("channel.follow", userId="still-here"))
    assert (await next_event(other))[0] == "event"


@pytest.mark.parametrize(
    "frame", ["4abc", "42{}", '42["connected",1]', "40", "43[]", "44{}", "41/nope,", "9", "", "b!!", '42["connect"]']
)
async def test_malformed_frames_close_only_that_connection(
    server: LiveServer, owner: Account, nursery: trio.Nursery, frame: str
) -> None:
    other = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
    await connected(other)
    bad = await sio_open(server, nursery)
    await connected(bad)
    await bad.send_message(frame)
    if frame in ('42["connected",1]',):  # a well-formed but unknown request: an error, no close
        assert (await next_event(bad))[1]["code"] == "UNKNOWN_EVENT"
    else:
        assert await closed(bad)
    publish(server, owner.id, "channel.follow", stand_in("channel.follow"))
    assert (await next_event(other))[0] == "event"


async def test_unknown_sid_and_bad_requests_over_http(server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=server.events_url) as http:
        assert (await poll(http, EIO_PATH, "nope")).status_code == 400
        assert (await push(http, EIO_PATH, "nope", "40")).status_code == 400
        response = await http.get(EIO_PATH, params={"EIO": "3", "transport": "polling"})
        assert response.status_code == 400 and response.json()["code"] == 5
        response = await http.put(EIO_PATH, params={"EIO": "4", "transport": "polling"})
        assert response.status_code == 400
    async with httpx.AsyncClient(base_url=server.url) as http:
        # Quart still serves everything else.
        assert (await http.get("/healthz")).status_code == 200


# ------------------------------------------------------------------ slow consumers, presence


async def test_stalled_client_is_disconnected_and_others_are_unaffected(
    server: LiveServer, owner: Account, nursery: trio.Nursery
) -> None:
    fanout = runtime_of(server).services.fanout
    fast = []
    for _ in range(3):
        ws = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
        await connected(ws)
        fast.append(ws)
    stalled_ws = await open_ws(nursery, server.events_url, EIO_PATH)
    # trio-websocket buffers one message: a client that stops calling get_message stops reading.
    handshake(await receive(stalled_ws))
    await stalled_ws.send_message('40{"token":"%s"}' % owner.token)
    with trio.fail_after(5):
        while fanout.subscriber_count(owner.id) < 4:
            await trio.sleep(0.01)  # real time: the server reads the CONNECT from a socket
    received = [0, 0, 0]

    async def read(index: int, ws: WebSocketConnection) -> None:
        while True:
            frame = await ws.get_message()
            if isinstance(frame, str) and frame.startswith('42["channel.raid"'):
                received[index] += 1

    async with trio.open_nursery() as readers:
        for index, ws in enumerate(fast):
            readers.start_soon(read, index, ws)
        blob = "x" * 200_000
        sent = 0
        with trio.fail_after(60):
            while fanout.overflowed == 0:
                assert sent < 400, "the stalled client was never disconnected"
                publish(server, owner.id, "channel.raid", stand_in("channel.raid", viewers=sent, fromDisplayName=blob))
                sent += 1
                while min(received) < sent:  # every fast client has this one before the next
                    await trio.sleep(0.001)  # real time: frames cross real sockets
            for _ in range(5):  # and delivery goes on after the disconnect
                publish(server, owner.id, "channel.raid", stand_in("channel.raid", viewers=sent))
                sent += 1
            while min(received) < sent:
                await trio.sleep(0.001)  # real time: frames cross real sockets
        readers.cancel_scope.cancel()
    assert received == [sent] * 3
    assert fanout.overflowed == 1
    assert fanout.subscriber_count(owner.id) == 3
    # When the stalled client reads again, it finds the reason and then the close.
    reasons = []
    with trio.fail_after(30):
        try:
            while True:
                frame = await stalled_ws.get_message()
                if isinstance(frame, str) and frame.startswith('42["error"'):
                    reasons.append(orjson.loads(frame[2:])[1])
        except Exception:
            pass
    assert reasons and reasons[-1]["code"] == "SLOW_CONSUMER"
    assert stalled_ws.closed is not None and stalled_ws.closed.code == 1013


async def test_presence_snapshot(server: LiveServer, owner: Account, nursery: trio.Nursery) -> None:
    presence = runtime_of(server).services.presence
    viewer = await register_live(server.url)
    mine = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
    await connected(mine)
    theirs = await sio_open(server, nursery, '40{"token":"%s"}' % viewer.token)
    await connected(theirs)
    await theirs.send_message('42["subscribe",{"channelId":"%s"}]' % owner.id)
    await next_event(theirs)
    anonymous = await sio_open(server, nursery)
    await connected(anonymous)
    await anonymous.send_message('42["subscribe",{"channelId":"%s"}]' % owner.id)
    await next_event(anonymous)
    users, count = presence.snapshot(owner.id)
    assert sorted(users) == sorted([owner.id, viewer.id]) and count == 1
    await theirs.aclose()
    await anonymous.aclose()
    with trio.fail_after(5):
        while presence.snapshot(owner.id) != ([owner.id], 0):
            await trio.sleep(0.01)  # real time: the server sees the closes on its sockets
    async with httpx.AsyncClient(base_url=server.url) as http:
        response = await http.get(f"/api/chat/channels/{owner.username}/viewers")
    assert response.status_code == 200
    assert [v["userId"] for v in response.json()["viewers"]] == [owner.id]


async def test_random_client_requests_never_break_the_connection(
    server: LiveServer, owner: Account, nursery: trio.Nursery
) -> None:
    """Hypothesis-generated requests (known names with random arguments, random names):
    each gets a reply or an `error`, and the connection keeps working."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    json_values = st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=40),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(["channelId", "channel", "x"]) | st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=8,
    )
    names = st.sampled_from(["subscribe", "unsubscribe", "channel:getRewards"]) | st.text(min_size=1, max_size=20)
    requests: list[tuple[str, list[Any], bool]] = []

    @settings(max_examples=60, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(names, st.lists(json_values, max_size=2), st.booleans())
    def draw(name: str, args: list[Any], with_ack: bool) -> None:
        requests.append((name, args, with_ack))

    draw()
    ws = await sio_open(server, nursery, '40{"token":"%s"}' % owner.token)
    await connected(ws)
    reserved = {"connect", "connect_error", "disconnect", "disconnecting", "newListener", "removeListener"}
    for index, (name, args, with_ack) in enumerate(requests):
        if name in reserved:
            continue
        await ws.send_message(f"42{index if with_ack else ''}" + orjson.dumps([name, *args]).decode())
        reply, _ = await next_event(ws)
        assert reply in ("subscribed", "unsubscribed", "channel:rewards", "error")
        if with_ack:
            ack = await receive(ws, skip_pings=True)
            assert isinstance(ack, str) and ack.startswith(f"43{index}[")
    await ws.send_message('42["channel:getRewards",{"channelId":"%s"}]' % owner.id)
    assert (await next_event(ws))[0] == "channel:rewards"


@pytest.mark.parametrize("path", SOCKET_PATHS)
async def test_new_sessions_count_against_the_per_ip_budget(sqlite_url: str, nursery: trio.Nursery, path: str) -> None:
    settings = make_settings(
        sqlite_url, events=events_settings(path), ratelimit={"enabled": True, "global_per_ip_per_minute": 2}
    )
    stop = trio.Event()
    limited = await serve_app(nursery, settings, stop)
    async with httpx.AsyncClient(base_url=limited.events_url) as http:
        sid = await polling_open(http, EIO_PATH)
        await polling_open(http, DEFAULT_PATH)
        refused = await http.get(EIO_PATH, params={"EIO": "4", "transport": "polling"})
        assert refused.status_code == 429
        assert refused.json()["error"] == "rate_limit_exceeded" and "retry-after" in refused.headers
        # An open session is not refused: only new ones are counted.
        assert (await push(http, EIO_PATH, sid, "40")).text == "ok"
    stop.set()
