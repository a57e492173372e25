"""The gateway (the Events API's own listener) at the socket level: HTTP edge cases with raw
sockets, and the fallback buffer behind its direct writes.

Protocol behaviour on the gateway is covered by the same tests as the single-port mount
(test_socketio.py, test_recovery.py, test_revocation.py, tools/test_conformance.py run on
both); these are what only the gateway has.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from tests.http.rawhttp import RawConnection
from volthub.http.events.gateway import Gateway, GatewayEndpoint
from volthub.http.events.gateway_connections import WireConnection
from volthub.protocol.engineio.session import EngineIOSession, Settings
from volthub.protocol.websocket import message_frame
from volthub.tools import conformance

# No heartbeat during these tests (the autojump clock would otherwise run it).
QUIET = Settings(ping_interval_ms=10**9, ping_timeout_ms=10**9, max_payload=1024)
EIO = "/engine.io/"


@pytest.fixture
async def gateway(nursery: trio.Nursery) -> AsyncIterator[Gateway]:
    listener = Gateway("127.0.0.1", 0, keep_alive_timeout=5)
    listener.add_endpoint("/engine.io", QUIET, conformance.EngineIOEcho(), session_factory=EngineIOSession)
    listener.bind()
    await nursery.start(listener.run)
    yield listener
    listener.stop_accepting()


def endpoint_of(gateway: Gateway) -> GatewayEndpoint:
    return gateway.endpoints["/engine.io"]


async def raw(gateway: Gateway) -> RawConnection:
    return await RawConnection.open(gateway.address[1])


def upgrade_request(path: str = EIO + "?EIO=4&transport=websocket", **headers: str) -> bytes:
    fields = {
        "Host": "127.0.0.1",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13",
        **headers,
    }
    lines = "".join(f"{name}: {value}\r\n" for name, value in fields.items() if value)
    return f"GET {path} HTTP/1.1\r\n{lines}\r\n".encode()


# ------------------------------------------------------------------ the port


async def test_a_taken_gateway_port_fails_the_start_unless_shared_on_purpose() -> None:
    """Two servers on one machine never silently share a gateway port; the workers of
    `serve --workers N` do, on purpose (`[events] gateway_reuse_port`)."""
    first = Gateway("127.0.0.1", 0)
    _, port = first.bind()
    try:
        with pytest.raises(OSError):
            Gateway("127.0.0.1", port).bind()
    finally:
        first.stop_accepting()
    shared = [Gateway("127.0.0.1", port, reuse_port=True) for _ in range(2)]
    try:
        assert [gateway.bind()[1] for gateway in shared] == [port, port]
    finally:
        for gateway in shared:
            gateway.stop_accepting()


# ------------------------------------------------------------------ HTTP edge cases


async def test_unknown_path_is_404_and_the_connection_stays_usable(gateway: Gateway) -> None:
    conn = await raw(gateway)
    await conn.send(b"GET /api/users/me HTTP/1.1\r\nHost: x\r\n\r\n")
    response = await conn.response()
    assert response.status == 404 and orjson.loads(response.body)["error"] == "not_found"
    await conn.send(f"GET {EIO}?EIO=4&transport=polling HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    response = await conn.response()
    assert response.status == 200 and response.body.startswith(b"0{")


async def test_a_keep_alive_connection_left_idle_is_closed_after_the_keep_alive_timeout(
    gateway: Gateway, mock_clock: trio.testing.MockClock
) -> None:
    """The timeout counts the wait for each next request (5 s here), not the connection's age."""
    conn = await raw(gateway)
    for path in ("/api/users/me", f"{EIO}?EIO=4&transport=polling", "/api/users/me"):
        await conn.send(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert (await conn.response()).status in (200, 404)  # answered, and kept alive
        await wait_all_tasks_blocked()
        mock_clock.jump(4.9)
        await wait_all_tasks_blocked()
    mock_clock.jump(0.2)
    async with trio.open_nursery() as nursery:

        async def give_up_once_all_wait() -> None:
            await wait_all_tasks_blocked()
            mock_clock.jump(1)  # fails the test below rather than hang it

        nursery.start_soon(give_up_once_all_wait)
        with trio.fail_after(1):
            assert await conn.closed_by_server()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    "request_bytes",
    [
        upgrade_request(**{"Sec-WebSocket-Key": ""}),
        upgrade_request(**{"Sec-WebSocket-Key": "too-short"}),
        upgrade_request(**{"Sec-WebSocket-Version": "8"}),
        upgrade_request().replace(b"GET ", b"POST ", 1),
    ],
    ids=["no key", "bad key", "old version", "not GET"],
)
async def test_bad_upgrade_is_400_and_closes(gateway: Gateway, request_bytes: bytes) -> None:
    conn = await raw(gateway)
    await conn.send(request_bytes)
    response = await conn.response()
    assert response.status == 400 and orjson.loads(response.body)["error"] == "bad_request"
    assert await conn.closed_by_server()


async def test_engineio_refusal_of_an_upgrade_is_an_http_answer(gateway: Gateway) -> None:
    conn = await raw(gateway)
    await conn.send(upgrade_request(EIO + "?EIO=3&transport=websocket"))
    response = await conn.response()
    assert response.status == 400 and orjson.loads(response.body)["code"] == 5


async def test_unparsable_request_is_400_and_closes(gateway: Gateway) -> None:
    conn = await raw(gateway)
    await conn.send(b"NOT HTTP AT ALL\r\n\r\n")
    response = await conn.response()
    assert response.status == 400 and orjson.loads(response.body)["error"] == "bad_request"
    assert await conn.closed_by_server()


async def test_oversized_head_is_431(gateway: Gateway) -> None:
    conn = await raw(gateway)
    await conn.send(b"GET " + EIO.encode() + b" HTTP/1.1\r\nHost: x\r\nX-Big: " + b"x" * 20_000)
    response = await conn.response()
    assert response.status == 431
    assert await conn.closed_by_server()


async def test_oversized_body_is_413_and_the_connection_closes(gateway: Gateway) -> None:
    conn = await raw(gateway)
    await conn.send(f"GET {EIO}?EIO=4&transport=polling HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    sid = orjson.loads((await conn.response()).body[1:])["sid"]
    body = b"4" + b"x" * 5000  # max_payload is 1024
    await conn.send(
        f"POST {EIO}?EIO=4&transport=polling&sid={sid} HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body[:2000]
    )
    response = await conn.response()
    assert response.status == 413 and response.headers["connection"] == "close"
    assert await conn.closed_by_server()  # the rest of the body is never read
    assert sid not in endpoint_of(gateway).sessions


async def test_half_closed_peer_still_gets_its_answer(gateway: Gateway) -> None:
    conn = await raw(gateway)
    await conn.send(f"GET {EIO}?EIO=4&transport=polling HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    conn.sock.shutdown(socket.SHUT_WR)  # sent its request, then its end of the stream
    response = await conn.response()
    assert response.status == 200 and response.body.startswith(b"0{")
    assert await conn.closed_by_server()


async def test_a_pending_poll_whose_client_leaves_is_released(gateway: Gateway) -> None:
    conn = await raw(gateway)
    await conn.send(f"GET {EIO}?EIO=4&transport=polling HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    sid = orjson.loads((await conn.response()).body[1:])["sid"]
    await conn.send(f"GET {EIO}?EIO=4&transport=polling&sid={sid} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await trio.testing.wait_all_tasks_blocked()
    conn.sock.close()  # gone while its GET is pending: the session ends (transport error)
    with trio.fail_after(5):
        while sid in endpoint_of(gateway).sessions:
            await trio.sleep(0.01)  # real time: the server sees the close on its socket


async def test_connections_past_the_cap_get_503(nursery: trio.Nursery) -> None:
    from volthub.http.serving import OVER_CAPACITY_RESPONSE

    listener = Gateway("127.0.0.1", 0, admit=lambda peer: False, refusal=OVER_CAPACITY_RESPONSE)
    listener.add_endpoint("/engine.io", QUIET, conformance.EngineIOEcho(), session_factory=EngineIOSession)
    await nursery.start(listener.run)
    conn = await RawConnection.open(listener.address[1])
    assert (await conn.response()).status == 503
    assert await conn.closed_by_server()
    listener.stop_accepting()


# ------------------------------------------------------------------ direct writes, fallback buffer


class Client:
    """A raw WebSocket client that reads only when told to."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.buffer = b""

    @classmethod
    async def open(cls, gateway: Gateway, receive_buffer: int = 4096) -> tuple[Client, WireConnection]:
        sock = trio.socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        await sock.connect(gateway.address)
        client = cls(sock)
        await sock.send(upgrade_request())
        while b"\r\n\r\n" not in client.buffer:
            client.buffer += await sock.recv(4096)
        head, _, client.buffer = client.buffer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101 ")
        assert (await client.message()).startswith(b"0{")  # the OPEN packet
        [conn] = endpoint_of(gateway).sessions.values()
        assert isinstance(conn, WireConnection)
        assert conn.sock is not None
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # fill up quickly
        return client, conn

    async def message(self) -> bytes:
        """The payload of the next server frame (unmasked, unfragmented: what we send)."""
        while True:
            if len(self.buffer) >= 2:
                size, head = self.buffer[1] & 0x7F, 2
                if size == 126:
                    size, head = int.from_bytes(self.buffer[2:4], "big"), 4
                elif size == 127:
                    size, head = int.from_bytes(self.buffer[2:10], "big"), 10
                if len(self.buffer) >= head + size:
                    payload, self.buffer = self.buffer[head : head + size], self.buffer[head + size :]
                    return payload
            chunk = await self.sock.recv(4096)
            if not chunk:
                raise EOFError
            self.buffer += chunk


async def test_slow_but_reading_peer_gets_every_byte_in_order(gateway: Gateway) -> None:
    client, conn = await Client.open(gateway)
    messages = [f"4{index:05d}" + "y" * 10_000 for index in range(200)]
    for text in messages:  # two megabytes without a checkpoint: far more than the kernel takes
        assert conn.deliver((text,), message_frame(text), limit=1000)
    assert conn.pending is not None and conn.pending_frames > 0  # the rest waits for the writer
    with trio.fail_after(30):
        received = [(await client.message()).decode() for _ in messages]
    assert received == messages
    assert conn.pending is None and conn.pending_frames == 0  # the writer finished and ended


async def test_peer_that_stops_reading_overflows_and_is_dropped(gateway: Gateway, autojump_clock: object) -> None:
    client, conn = await Client.open(gateway)
    text = "4" + "z" * 50_000
    frame = message_frame(text)
    accepted = 0
    while conn.deliver((text,), frame, limit=16):
        accepted += 1
        assert accepted <= 16, "the bound was not applied"
        await trio.testing.wait_all_tasks_blocked()  # the writer sends what the kernel takes
    assert conn.pending_frames + 1 > 16
    endpoint_of(gateway).dispatch_leave(conn, conn.close("slow consumer", 1013))
    assert conn.sid not in endpoint_of(gateway).sessions  # over for the application at once
    with trio.fail_after(60):  # the linger runs out (autojump clock): the connection is cut
        while conn.sock is not None:
            await trio.sleep(1)
    assert conn.pending is None
    with pytest.raises((EOFError, OSError)):
        while True:
            await client.message()


async def _closed_by_a_shutdown(gateway: Gateway) -> tuple[Client, WireConnection]:
    """A client whose session a stopping server ended; it has read the close frame."""
    client, conn = await Client.open(gateway)
    endpoint_of(gateway).close_sessions("server shutting down")
    assert await client.message() == (1001).to_bytes(2, "big") + b"server shutting down"
    return client, conn


async def test_once_the_client_answers_the_close_the_server_closes_without_waiting_for_its_end(
    gateway: Gateway,
) -> None:
    client, conn = await _closed_by_a_shutdown(gateway)
    await client.sock.send(_client_frame(0x88, (1001).to_bytes(2, "big")))  # the answer; its side stays open
    await wait_all_tasks_blocked()
    assert conn.sock is None  # closed at once, not after the linger
    with pytest.raises(EOFError):
        await client.message()
    client.sock.close()


async def test_a_client_that_does_not_answer_the_close_keeps_its_socket_for_the_linger(
    gateway: Gateway,
) -> None:
    client, conn = await _closed_by_a_shutdown(gateway)
    await wait_all_tasks_blocked()
    assert conn.sock is not None  # still open for the client's answer
    client.sock.close()
    with trio.fail_after(10):
        while conn.sock is not None:
            await trio.sleep(0.01)


# ------------------------------------------------------------------ `volthub serve --gateway-port`


async def test_serve_with_a_gateway_port_and_sigterm(sqlite_url: str, tmp_path: Path, nursery: trio.Nursery) -> None:
    """The CLI flag opens the gateway beside the main port; SIGTERM ends its sockets with a
    close (going away) and the process exits cleanly."""
    import httpx
    from trio_websocket import ConnectionClosed

    from tests.conftest import ServerProcess, free_port
    from tests.http.events.live import open_ws, receive

    gateway_port = free_port()
    server = ServerProcess(sqlite_url, tmp_path, args=["--gateway-port", str(gateway_port)]).start()
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            body = (
                await http.post("/api/auth/register", json={"username": "gw_cli", "password": "correct horse battery"})
            ).json()
        ws = await open_ws(nursery, f"http://127.0.0.1:{gateway_port}", "/ws/events/")
        assert (await receive(ws)).startswith("0{")
        await ws.send_message('40{"token":"%s"}' % body["token"])
        assert (await receive(ws, skip_pings=True)).startswith("40{")
        assert orjson.loads((await receive(ws, skip_pings=True))[2:])[0] == "connected"
        assert await trio.to_thread.run_sync(server.terminate) == 0
        with trio.fail_after(10), pytest.raises(ConnectionClosed) as closed:
            while True:
                await ws.get_message()
        assert closed.value.reason.code == 1001
    finally:
        server.kill()


# ------------------------------------------------------------------ the ticker


class _Timed:
    """Stands in for a WireConnection: what the ticker reads of one."""

    def __init__(self, name: str, *deadlines: float) -> None:
        self.name = name
        self.deadlines = list(deadlines)
        self.scheduled: int | None = None

    def due(self) -> float | None:
        return self.deadlines[0] if self.deadlines else None


async def test_one_ticker_runs_every_timer_in_order(nursery: trio.Nursery, mock_clock: trio.testing.MockClock) -> None:
    from volthub.http.events.gateway_connections import Ticker

    ticker = Ticker()
    fired: list[tuple[str, float]] = []

    def on_due(conn: Any, now: float) -> None:
        fired.append((conn.name, now))
        conn.deadlines.pop(0)

    start = trio.current_time()
    a, b = _Timed("a", start + 1, start + 3), _Timed("b", start + 2)
    for conn in (a, b):
        ticker.reschedule(conn)  # type: ignore[arg-type]
    nursery.start_soon(ticker.run, on_due)
    await wait_all_tasks_blocked()
    mock_clock.jump(1.5)
    await wait_all_tasks_blocked()
    assert fired == [("a", start + 1.5)]
    # A deadline earlier than the one the ticker sleeps until wakes it at that time.
    c = _Timed("c", start + 1.6)
    ticker.reschedule(c)  # type: ignore[arg-type]
    mock_clock.jump(0.2)
    await wait_all_tasks_blocked()
    assert [name for name, _ in fired] == ["a", "c"]
    mock_clock.jump(2)
    await wait_all_tasks_blocked()
    assert [name for name, _ in fired] == ["a", "c", "b", "a"]
    assert len(ticker) == 0  # nothing left to run, nothing stale kept


async def test_with_many_timers_the_ticker_runs_them_in_fewer_wakes(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """20,000 pings spread over 25 s: one wake per ping would be 20,000 wakes; waiting a
    little longer between wakes (20 ms with that many timers) runs them ~25 at a time,
    none later than TICK_MAX_SECONDS."""
    from volthub.http.events import gateway_connections as gc

    ticker = gc.Ticker()
    wakes: list[float] = []
    late: list[float] = []

    def on_due(conn: Any, now: float) -> None:
        if len(conn.deadlines) == 2:  # its first ping (the second keeps the count of timers up)
            if not wakes or wakes[-1] != now:
                wakes.append(now)
            late.append(now - conn.deadlines[0])
        conn.deadlines.pop(0)

    start = trio.current_time()
    count = 20_000
    for index in range(count):
        first = start + 0.001 + 25 * index / count
        ticker.reschedule(_Timed(str(index), first, first + 25))  # type: ignore[arg-type]  # its next ping
    nursery.start_soon(ticker.run, on_due)
    for _ in range(26 * 500):
        mock_clock.jump(0.002)
        await wait_all_tasks_blocked()
    assert len(late) == count, "each first ping ran; the next ones are still scheduled"
    assert len(wakes) < count / 10
    assert max(late) <= gc.TICK_MAX_SECONDS + 0.002  # + the test's own 2 ms steps


async def test_a_deadline_moved_later_does_not_run_at_the_earlier_entry(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """A pong moves a socket's timer from its pong deadline to its next ping: the entry at
    the pong deadline is passed by, the connection runs once, at the ping."""
    from volthub.http.events.gateway_connections import Ticker

    ticker = Ticker()
    fired: list[float] = []
    start = trio.current_time()
    conn = _Timed("a", start + 20)
    ticker.reschedule(conn)  # type: ignore[arg-type]

    def on_due(conn: Any, now: float) -> None:
        fired.append(now)
        conn.deadlines.pop(0)

    nursery.start_soon(ticker.run, on_due)
    await wait_all_tasks_blocked()
    conn.deadlines = [start + 25]  # the pong came
    ticker.reschedule(conn, moved_later=True)  # type: ignore[arg-type]
    mock_clock.jump(21)
    await wait_all_tasks_blocked()
    assert fired == [] and len(ticker) == 1  # the early entry was passed by
    mock_clock.jump(4)
    await wait_all_tasks_blocked()
    assert fired == [start + 25]


HEARTBEAT = Settings(ping_interval_ms=25_000, ping_timeout_ms=20_000, max_payload=1024)


async def test_pings_go_out_every_interval_while_pongs_come_and_a_silent_socket_is_dropped(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    listener = Gateway("127.0.0.1", 0)
    endpoint = listener.add_endpoint(
        "/engine.io", HEARTBEAT, conformance.EngineIOEcho(), session_factory=EngineIOSession
    )
    listener.bind()
    await nursery.start(listener.run)
    client = await raw(listener)
    await client.send(upgrade_request())
    assert (await client.response()).status == 101
    (conn,) = endpoint.sessions.values()

    async def next_text() -> bytes:
        while len(client.buffer) < 2 or len(client.buffer) < 2 + client.buffer[1]:
            assert await client._fill(), "the server closed the connection"
        frame, client.buffer = client.buffer[: 2 + client.buffer[1]], client.buffer[2 + client.buffer[1] :]
        return frame

    assert (await next_text())[2:3] == b"0"  # OPEN
    start = trio.current_time()
    for ping in range(3):
        mock_clock.jump(25)  # the next ping is due (counted from the last pong)
        frame = await next_text()
        assert frame == bytes([0x81, 1]) + b"2", f"ping {ping}"
        await client.send(_client_text("3"))
        for _ in range(1000):  # the carrier applies it (no task of ours to wait on)
            if conn.session.next_deadline() != trio.current_time() + 20:
                break
            await trio.sleep(0)
        assert conn.session.next_deadline() == trio.current_time() + 25
    assert trio.current_time() == start + 75
    mock_clock.jump(25)
    assert await next_text() == bytes([0x81, 1]) + b"2"  # no pong this time
    mock_clock.jump(20)  # pingTimeout: the socket is dropped
    while len(client.buffer) < 2:
        assert await client._fill()
    assert client.buffer[0] == 0x88  # the close frame
    assert conn.session.closed
    mock_clock.jump(5)  # the close's linger: then the server cuts the connection
    assert await client.closed_by_server()
    listener.stop_accepting()


# ------------------------------------------------------------------ the carrier


def _client_text(text: str) -> bytes:
    """One masked client text frame (short payloads only)."""
    return _client_frame(0x81, text.encode())


def _client_frame(first_byte: int, payload: bytes) -> bytes:
    """One masked client frame (FIN and opcode in ``first_byte``; short payloads only)."""
    mask = os.urandom(4)
    assert len(payload) < 126
    return bytes([first_byte, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class _Carried:
    """Stands in for a WireConnection: what the carrier touches of one."""

    def __init__(self) -> None:
        self.session = EngineIOSession("sid", Settings(ping_interval_ms=1000, ping_timeout_ms=1000), "websocket", 0.0)
        self.closing = False
        self.changes = 0
        self.pongs = 0
        self.written: list[bytes] = []

    def changed(self) -> None:
        self.changes += 1

    def pong(self, now: float) -> None:
        self.session.receive_pong(now)
        self.pongs += 1

    def write(self, data: bytes) -> None:
        self.written.append(data)


async def test_the_carrier_applies_pongs_itself_and_wakes_the_task_for_anything_else(nursery: trio.Nursery) -> None:
    from volthub.http.events.gateway_connections import Carrier
    from volthub.protocol.websocket import FrameReader, WebSocketError

    carrier = Carrier()
    nursery.start_soon(carrier.run)
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    conn = _Carried()
    conn.session.on_timer(1.0)  # the ping is out: a pong is due
    found: list[Any] = []

    async def task() -> None:
        found.append(await carrier.next_frames(conn, ours, FrameReader(1024)))  # type: ignore[arg-type]

    nursery.start_soon(task)
    await wait_all_tasks_blocked()
    theirs.sendall(_client_text("3") + bytes([0x89, 0x80]) + os.urandom(4))  # a pong, then a WebSocket ping
    await wait_all_tasks_blocked()
    assert found == [] and len(carrier) == 1  # the task still waits
    assert (
        conn.pongs == 1 and conn.session.next_deadline() != 1.0 + 1.0
    )  # applied: the next ping, not the pong deadline
    assert conn.written == [bytes([0x8A, 0x00])]  # the ping answered
    theirs.sendall(_client_text('40{"token":"t"}') + _client_text("3"))
    await wait_all_tasks_blocked()
    assert found == [['40{"token":"t"}', "3"]]  # from the first frame that needs the task on, in order
    assert len(carrier) == 0

    theirs.sendall(b"\x81\x05hello")  # unmasked: not a client's frame
    with pytest.raises(WebSocketError):
        await carrier.next_frames(conn, ours, FrameReader(1024))  # type: ignore[arg-type]
    theirs.close()
    assert await carrier.next_frames(conn, ours, FrameReader(1024)) is None  # type: ignore[arg-type]  # the end
    assert len(carrier) == 0
    ours.close()


async def test_sessions_a_stopping_server_ends_get_no_access_line_each(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    """The shutdown logs how many it ended instead: a line per session was most of what a
    mass shutdown cost."""
    from volthub.http.events.engineio import SHUTTING_DOWN

    endpoint = endpoint_of(gateway)
    endpoint.describe("/engine.io/", "gateway", access_log=True)
    for _ in range(2):
        conn = await raw(gateway)
        await conn.send(f"GET {EIO}?EIO=4&transport=polling HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert (await conn.response()).status == 200
    first, second = list(endpoint.sessions.values())
    with caplog.at_level(logging.INFO, logger="volthub.access"):
        endpoint.dispatch_leave(first, first.close("forced close"))
        endpoint.dispatch_leave(second, second.close(SHUTTING_DOWN))
    lines = [record.getMessage() for record in caplog.records if record.name == "volthub.access"]
    assert len(lines) == 1 and "forced close" in lines[0]
