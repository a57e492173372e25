"""A revoked grant or a deleted app ends its open Events API connections, saying why."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import orjson
import pytest
import trio
from httpx_sse import aconnect_sse

from tests.conftest import SOCKET_PATHS, LiveServer, register_live, served, socket_path_events
from tests.http.events.live import handshake, open_ws, receive
from tests.http.oauth.tokens import end_grant, issue_oauth_token
from volthub.config import Settings
from volthub.http.events.registry import ConnectionRegistry

EIO_PATH = "/ws/events"


async def _socket(server: LiveServer, nursery: trio.Nursery, token: str):  # type: ignore[no-untyped-def]
    ws = await open_ws(nursery, server.events_url, EIO_PATH, token=token)
    handshake(await receive(ws))
    await ws.send_message("40")
    assert (await receive(ws, skip_pings=True)).startswith("40{")
    name, _ = orjson.loads((await receive(ws, skip_pings=True))[2:])
    assert name == "connected"
    return ws


async def stream_error_codes(http: httpx.AsyncClient, token: str, end: Callable[[], Awaitable[None]]) -> list[str]:
    """The error codes an SSE stream of `token` ends with when `end()` runs while it is open."""
    async with aconnect_sse(http, "GET", "/api/events/stream", headers={"Authorization": f"Bearer {token}"}) as source:
        events = source.aiter_sse()
        with trio.fail_after(5):
            assert (await events.__anext__()).event == "connected"
        await end()
        with trio.fail_after(5):
            ending = [sse async for sse in events if sse.event == "error"]
    return [orjson.loads(e.data)["code"] for e in ending]


async def parting_event(socket: Any) -> tuple[str, Any]:
    """The event a socket is sent just before the server disconnects it ("41")."""
    frames = []
    with trio.fail_after(5):
        while not frames or frames[-1] != "41":
            frames.append(await receive(socket, skip_pings=True))
    name, data = orjson.loads(frames[-2][2:])
    return name, data


async def assert_still_served(http: httpx.AsyncClient, user: Any, socket: Any) -> None:
    """`socket` of `user` still gets the user's events (a sandbox follow)."""
    sandbox = await http.post(
        "/api/integrations/oauth/test/events",
        headers=user.headers,
        json={"eventType": "follow", "channelId": user.id},
    )
    assert sandbox.status_code == 200
    name, _ = orjson.loads((await receive(socket, skip_pings=True))[2:])
    assert name == "event"


@pytest.fixture(params=SOCKET_PATHS)
async def live_server(
    settings: Settings, nursery: trio.Nursery, request: pytest.FixtureRequest
) -> AsyncIterator[LiveServer]:
    """The Socket.IO paths on the gateway's own port (the default) or on the main port (mount)."""
    settings = settings.model_copy(
        update={"events": settings.events.model_copy(update=socket_path_events(request.param))}
    )
    async with served(nursery, settings) as server:
        yield server


@pytest.mark.parametrize("how", ["revoke", "delete app"])
async def test_revoking_ends_the_apps_sockets_and_streams(
    live_server: LiveServer, nursery: trio.Nursery, how: str
) -> None:
    user = await register_live(live_server.url)
    token = await issue_oauth_token(live_server.app, user.id, "chat:read")
    async with httpx.AsyncClient(base_url=live_server.url, timeout=10) as http:
        app_socket = await _socket(live_server, nursery, token)
        own_socket = await _socket(live_server, nursery, user.token)  # first-party: unaffected
        assert await stream_error_codes(http, token, lambda: end_grant(http, user, how)) == ["AUTHORIZATION_REVOKED"]
        name, data = await parting_event(app_socket)
        assert name == "error" and data["code"] == "AUTHORIZATION_REVOKED" and "revoked" in data["message"]
        # The first-party socket of the same user still gets its events.
        await assert_still_served(http, user, own_socket)
        # Only the first-party socket is still registered.
        assert len(live_server.app.extensions["volthub"].services.connections) == 1
        await app_socket.aclose()
        await own_socket.aclose()


class _Recorder:
    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    def end(self, code: str, reason: str) -> None:
        self.ended.append((code, reason))


def test_registry_ends_only_that_users_connections_of_that_app() -> None:
    registry = ConnectionRegistry()
    mine, other_app, other_user, anonymous = _Recorder(), _Recorder(), _Recorder(), _Recorder()
    key = registry.add(mine, "u1", "app1")
    registry.add(other_app, "u1", "app2")
    registry.add(other_user, "u2", "app1")
    registry.add(anonymous, None, None)
    assert registry.close_app_access("u1", "app1", "revoked") == 1
    assert mine.ended == [("AUTHORIZATION_REVOKED", "revoked")]
    assert other_app.ended == other_user.ended == anonymous.ended == []
    registry.discard(mine, key)
    assert len(registry) == 3
    assert registry.close_all("bye") == 3
    assert {r.ended[-1][0] for r in (other_app, other_user, anonymous)} == {"SERVER_CLOSING"}


class _Holder:
    def __init__(self, open_sessions: int) -> None:
        self.open_sessions = open_sessions
        self.reasons: list[str] = []

    def close_sessions(self, reason: str) -> int:
        self.reasons.append(reason)
        closed, self.open_sessions = self.open_sessions, 0
        return closed


def test_close_all_is_the_one_shutdown_path() -> None:
    """Registered connections first (each told why), then the sessions the endpoints hold
    that never joined a namespace; a connection registered afterwards is ended at once."""
    registry = ConnectionRegistry()
    joined, holder = _Recorder(), _Holder(open_sessions=2)
    registry.add(joined, "u1", None)
    registry.hold_sessions(holder)
    latecomer = _Recorder()
    registry.end_if_closing(latecomer)
    assert latecomer.ended == []  # not shutting down yet
    assert registry.close_all("server shutting down") == 3
    assert joined.ended == [("SERVER_CLOSING", "server shutting down")]
    assert holder.reasons == ["server shutting down"]
    registry.add(latecomer, None, None)
    registry.end_if_closing(latecomer)
    assert latecomer.ended == [("SERVER_CLOSING", "server shutting down")]


async def test_a_revoked_session_ends_its_sockets_and_streams_only(
    live_server: LiveServer, nursery: trio.Nursery
) -> None:
    user = await register_live(live_server.url)
    async with httpx.AsyncClient(base_url=live_server.url, timeout=10) as http:
        login = await http.post("/api/auth/login", json={"username": user.username, "password": user.password})
        other = login.json()["token"]
        leaving_socket = await _socket(live_server, nursery, other)
        staying_socket = await _socket(live_server, nursery, user.token)  # another session

        async def log_out() -> None:
            out = await http.post("/api/auth/logout", headers={"Authorization": f"Bearer {other}"})
            assert out.status_code == 204

        assert await stream_error_codes(http, other, log_out) == ["AUTHORIZATION_REVOKED"]
        name, data = await parting_event(leaving_socket)
        assert name == "error" and data["code"] == "AUTHORIZATION_REVOKED"
        assert len(live_server.app.extensions["volthub"].services.connections) == 1
        await assert_still_served(http, user, staying_socket)
        await leaving_socket.aclose()
        await staying_socket.aclose()
