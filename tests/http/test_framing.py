"""Request framing on both listeners (the main port: Hypercorn adapted by volthub.http.serving;
the gateway: volthub's own h11 listener), with raw sockets: a body that stops arriving, a
body that breaks HTTP/1.1's framing, and a request that says both Content-Length and
Transfer-Encoding each get one answer and a closed connection, never a traceback or a
connection left holding its place."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import orjson
import pytest
import trio
from prometheus_client import REGISTRY

from tests.conftest import LiveServer, make_settings, serve_app, served
from tests.http.rawhttp import RawConnection, request
from volthub.http import serving

WAIT = 30.0  # generous bound for what the server does on its own (deadlines of a second or two)
SLOW_SOCKETS = 40


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


async def serve(nursery: trio.Nursery, database_url: str, **server: object) -> AsyncIterator[LiveServer]:
    async with served(nursery, make_settings(database_url, server=server)) as server:
        yield server


@pytest.fixture
async def live(database_url: str, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    async for server in serve(nursery, database_url, body_timeout=1.0):
        yield server


async def polling_sid(port: int) -> str:
    connection = await RawConnection.open(port)
    try:
        await connection.send(request("GET", "/ws/events/?EIO=4&transport=polling"))
        opened = await connection.response()
    finally:
        connection.close()
    assert opened.status == 200, opened
    return str(orjson.loads(opened.body[1:])["sid"])


async def targets(server: LiveServer) -> list[tuple[str, int, str]]:
    """(listener, port, path) of requests whose body is read: a route of the main port, the
    gateway's skipped body of an unknown path, and the gateway's polling POST."""
    gateway = port_of(server.events_url)
    sid = await polling_sid(gateway)
    return [
        ("main port", port_of(server.url), "/api/auth/login"),
        ("gateway", gateway, "/nowhere"),
        ("gateway polling", gateway, f"/ws/events/?EIO=4&transport=polling&sid={sid}"),
    ]


def head(path: str, *fields: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


CHUNKED = "Transfer-Encoding: chunked"
BROKEN_BODIES = {
    "chunk size overflow": (CHUNKED, b"FFFFFFFFFFFFFFFFFFFFFFFF1\r\n"),
    "negative chunk size": (CHUNKED, b"-1\r\nx\r\n0\r\n\r\n"),
    "bare LF in a chunk extension": (CHUNKED, b"1;ext=a\nb\r\nx\r\n0\r\n\r\n"),
}


def problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR or record.exc_info]


@pytest.mark.parametrize("case", list(BROKEN_BODIES))
async def test_a_broken_body_is_answered_400_and_closed_without_a_traceback(
    live: LiveServer, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    framing, body = BROKEN_BODIES[case]
    for name, port, path in await targets(live):
        connection = await RawConnection.open(port)
        with trio.fail_after(WAIT):
            await connection.send(head(path, framing) + body)
            answer = await connection.response()
            assert answer.status == 400, (name, answer)
            assert orjson.loads(answer.body)["error"] == "bad_request", name
            assert await connection.closed_by_server()
        connection.close()
    assert problems(caplog) == []


async def test_a_client_closing_mid_body_costs_no_traceback(live: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    for name, port, path in await targets(live):
        connection = await RawConnection.open(port)
        with trio.fail_after(WAIT):
            await connection.send(head(path, "Content-Length: 100") + b'{"a": ')
            connection.sock.shutdown(trio.socket.SHUT_WR)
            assert await connection.closed_by_server(), name
        if connection.buffer:  # answered where it could still be: a 400
            assert connection.buffer.startswith(b"HTTP/1.1 400"), (name, connection.buffer)
        connection.close()
    assert problems(caplog) == []


async def test_a_gateway_framing_error_gets_one_access_line(live: LiveServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="volthub.access")
    connection = await RawConnection.open(port_of(live.events_url))
    with trio.fail_after(WAIT):
        await connection.send(head("/nowhere", CHUNKED) + b"-1\r\n")
        assert (await connection.response()).status == 400
    connection.close()
    lines = [record.getMessage() for record in caplog.records if record.name == "volthub.access"]
    assert [line for line in lines if " 400 " in line and "POST" in line] == [lines[-1]], lines


@pytest.mark.parametrize(
    "sent",
    [head("/api/auth/login", CHUNKED) + b"-1\r\n", head("/api/auth/login", "Content-Length: 5", CHUNKED)],
    ids=["negative chunk size", "both framing headers"],
)
async def test_a_main_port_framing_error_gets_one_access_line(
    live: LiveServer, caplog: pytest.LogCaptureFixture, sent: bytes
) -> None:
    """Hypercorn answers these itself (the app never sees the request); the answer is still
    counted and logged once, as every other answer is."""
    caplog.set_level(logging.INFO, logger="volthub.access")
    connection = await RawConnection.open(port_of(live.url))
    with trio.fail_after(WAIT):
        await connection.send(sent)
        assert (await connection.response()).status == 400
        assert await connection.closed_by_server()
    connection.close()
    lines = [record.getMessage() for record in caplog.records if record.name == "volthub.access"]
    assert len([line for line in lines if " 400 " in line]) == 1, lines


@pytest.mark.parametrize("framing", ["chunked first", "length first"])
async def test_content_length_with_transfer_encoding_is_refused_and_closed(live: LiveServer, framing: str) -> None:
    """RFC 9112 §6.1: the connection closes after the answer, so the request pipelined
    behind it (which a proxy framing by Content-Length would see differently) is never read."""
    fields = ["Content-Length: 5", CHUNKED]
    if framing == "chunked first":
        fields.reverse()
    smuggled = request("GET", "/livez")
    for name, port, path in await targets(live):
        connection = await RawConnection.open(port)
        with trio.fail_after(WAIT):
            await connection.send(head(path, *fields) + b"0\r\n\r\n" + smuggled)
            answer = await connection.response()
            assert answer.status == 400, (name, answer)
            assert answer.headers.get("connection") == "close", name
            assert "Content-Length or Transfer-Encoding" in orjson.loads(answer.body)["message"]
            assert await connection.closed_by_server()
        assert b"HTTP/1.1" not in connection.buffer, (name, connection.buffer)  # nothing answered the second
        connection.close()


async def healthz_status(port: int) -> int:
    connection = await RawConnection.open(port)
    try:
        await connection.send(request("GET", "/healthz"))
        return (await connection.response()).status
    except (EOFError, OSError):
        return 0
    finally:
        connection.close()


def slow_bodies_counted() -> float:
    return REGISTRY.get_sample_value("volthub_gateway_slow_bodies_total") or 0.0


@pytest.mark.parametrize("listener", ["gateway", "main port"])
async def test_slow_bodies_free_their_places_at_the_body_timeout(
    database_url: str, nursery: trio.Nursery, listener: str
) -> None:
    """Forty sockets that stop sending their bodies hold every place under max_connections
    = 40 (so /healthz gets 503); at the body deadline each is answered 408 and closed, and
    /healthz answers again."""
    stop = trio.Event()
    settings = make_settings(
        database_url,
        server={
            "body_timeout": 1.0,
            "keep_alive_timeout": 600.0,
            "max_connections": SLOW_SOCKETS,
            "max_connections_per_address": SLOW_SOCKETS,
        },
    )
    server = await serve_app(nursery, settings, stop)
    main = port_of(server.url)
    port = port_of(server.events_url if listener == "gateway" else server.url)
    path = "/nowhere" if listener == "gateway" else "/api/auth/login"
    counted_before = slow_bodies_counted()
    slow = [await RawConnection.open(port) for _ in range(SLOW_SOCKETS)]
    try:
        with trio.fail_after(WAIT):
            while serving.LIMITS.open < SLOW_SOCKETS:  # every one admitted, waiting for its head
                await trio.sleep(0.02)
        assert await healthz_status(main) == 503
        for index, connection in enumerate(slow):  # now the bodies stall (the deadline starts)
            stalled = head(path, "Content-Length: 100") + b"{" if index % 2 else head(path, CHUNKED) + b"1\r\n"
            await connection.send(stalled)
        with trio.fail_after(WAIT):
            for connection in slow:
                answer = await connection.response()
                assert answer.status == 408, answer
                assert await connection.closed_by_server()
            while await healthz_status(main) != 200:
                await trio.sleep(0.05)
        if listener == "gateway":
            assert slow_bodies_counted() - counted_before == SLOW_SOCKETS
    finally:
        for connection in slow:
            connection.close()
        stop.set()
