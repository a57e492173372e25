"""Body limits per route, on a live Hypercorn server with raw sockets: a route that takes a
small body refuses a larger one with 413, and after a refusal sent before its large body
was read the connection either keeps answering (the body was read and dropped) or says
`Connection: close` and closes; it never leaves the next request unanswered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import trio

from tests.conftest import make_settings, register_live
from tests.http.rawhttp import RawConnection, RawResponse, request
from tests.http.test_connections import CLOSE_BOUND, JSON, _serve


@pytest.fixture
async def server(database_url: str, nursery: trio.Nursery) -> AsyncIterator[tuple[int, Any]]:
    settings = make_settings(database_url, ratelimit={"enabled": False})
    port, app = await _serve(nursery, settings)
    yield port, app
    app.extensions["test_stop"].set()


LIMIT = 16384  # [server] small_body_bytes


async def send_all(connection: RawConnection, data: bytes, sent: list[bool]) -> None:
    """Send everything, as a client that does not wait for an early answer does; a server
    that answered `Connection: close` may close before it all went."""
    view = memoryview(data)
    try:
        while view:
            count = await connection.sock.send(view[:65536])
            view = view[count:]
        sent.append(True)
    except OSError:
        sent.append(False)


async def refused_then_next(connection: RawConnection, head_and_body: bytes) -> tuple[RawResponse, bool]:
    """Send a request (writing its body while the server may already answer), read the
    answer; then True when the connection goes on answering, False when it says close and
    closes (within the bound)."""
    sent: list[bool] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all, connection, head_and_body, sent)
        with trio.fail_after(10):
            refused = await connection.response()
        if refused.headers.get("connection", "").lower() == "close":
            with trio.fail_after(CLOSE_BOUND):
                await connection.closed_by_server()
            nursery.cancel_scope.cancel()
            return refused, False
    assert sent == [True]  # kept alive: the server read the whole body
    for _ in range(20):
        await connection.send(request("GET", "/livez"))
        with trio.fail_after(5):
            assert (await connection.response()).status == 200
    return refused, True


async def test_a_small_route_refuses_a_large_body_with_413(server: tuple[int, Any]) -> None:
    port, app = server
    base = f"http://127.0.0.1:{port}"
    follower, streamer = await register_live(base), await register_live(base)
    for size in (LIMIT + 1, 60_000, 330_000):
        body = b'{"x": "' + b"a" * (size - 9) + b'"}'
        connection = await RawConnection.open(port)
        try:
            head = request("POST", f"/api/users/follow/{streamer.id}", body=body, headers={**JSON, **follower.headers})
            refused, _ = await refused_then_next(connection, head)
        finally:
            connection.close()
        assert refused.status == 413, (size, refused.body)
        answer = orjson.loads(refused.body)
        assert answer["error"] == "payload_too_large" and answer["details"]["maxBytes"] == LIMIT
    connection = await RawConnection.open(port)
    try:  # a small body still follows
        await connection.send(request("POST", f"/api/users/follow/{streamer.id}", headers=follower.headers))
        assert (await connection.response()).status == 200
    finally:
        connection.close()
    assert app.extensions["volthub"].settings.server.small_body_bytes == LIMIT


@pytest.mark.parametrize("size", [70_000, 330_000, 2_000_000])
async def test_after_an_early_refusal_of_a_large_body_the_connection_never_stalls(
    server: tuple[int, Any], size: int
) -> None:
    port, _ = server
    body = b"a" * size
    for round_ in range(5):
        connection = await RawConnection.open(port)
        try:
            head = request("PUT", "/api/users/me", body=body, headers=JSON)  # 401 or 413, before the body
            refused, _ = await refused_then_next(connection, head)
        finally:
            connection.close()
        assert refused.status in (401, 413), (round_, refused.status)
