"""SIGTERM on `volthub serve`, and on the `hypercorn` command serving the app: with an idle
kept-alive connection, an open SSE stream and Socket.IO connections on both paths (the
gateway and the main port's mount), the process exits 0 within `[server] shutdown_timeout`
(5 s; Hypercorn's graceful timeout, 3 s, under its command); every Events API connection is ended the
one way (the connection registry): each socket is told why (`error` SERVER_CLOSING) and
closed as "going away", the stream ends with a `shutdown` event and a proper end of body;
and every acknowledged write is there after a restart."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
import trio

from tests.conftest import ServerProcess
from tests.http.rawhttp import RawConnection, request

pytestmark = pytest.mark.slow

SHUTDOWN_TIMEOUT = 5.0


async def _open_sse(port: int, token: str) -> RawConnection:
    connection = await RawConnection.open(port)
    await connection.send(
        request(
            "GET", "/api/events/stream", headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
        )
    )
    while b"event: connected" not in connection.buffer:
        assert await connection._fill()
    return connection


@pytest.mark.parametrize("command", ["serve", "hypercorn"])
async def test_sigterm_exits_promptly_and_loses_nothing(
    database_url: str, tmp_path: Path, nursery: trio.Nursery, command: str
) -> None:
    from trio_websocket import ConnectionClosed

    from tests.http.events.live import open_ws

    # A login takes a noticeable while (argon2 at a real cost), so one can be in flight.
    slow_hash = {"VOLTHUB_AUTH__ARGON2_TIME_COST": "6", "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": "65536"}
    server = ServerProcess(database_url, tmp_path, slow_hash, command=command).start()
    try:
        port = server.port
        async with httpx.AsyncClient(base_url=server.url) as http:
            users = []
            for index in range(5):
                response = await http.post(
                    "/api/auth/register", json={"username": f"term{index}_{port}", "password": "correct horse battery"}
                )
                assert response.status_code == 201
                users.append(response.json())
            token = users[0]["token"]
            response = await http.put(
                "/api/users/me",
                json={"bio": "acknowledged before SIGTERM"},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == 200

        idle = await RawConnection.open(port)
        await idle.send(request("GET", "/livez"))
        assert (await idle.response()).status == 200
        stream = await _open_sse(port, token)
        sockets = {
            "gateway": await open_ws(nursery, server.events_url, "/ws/events", token=token),
            "mount": await open_ws(nursery, server.url, "/ws/events", token=token),
        }
        assert server.events_url != server.url
        for socket in sockets.values():
            assert str(await socket.get_message()).startswith("0")  # Engine.IO open
            await socket.send_message("40")
            assert str(await socket.get_message()).startswith("40")  # namespace joined

        in_flight = await RawConnection.open(port)
        body = b'{"username": "%s", "password": "correct horse battery"}' % users[1]["user"]["username"].encode()
        await in_flight.send(
            request("POST", "/api/auth/login", body=body, headers={"Content-Type": "application/json"})
        )
        await trio.sleep(0.05)  # the login is being hashed

        assert server.process is not None
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        socket_frames: dict[str, list[str]] = {path: [] for path in sockets}
        close_codes: dict[str, int | None] = {}
        with trio.fail_after(SHUTDOWN_TIMEOUT):
            assert (await in_flight.response()).status == 200  # finished, not dropped
            await idle.closed_by_server()
            await stream.closed_by_server()
            for path, socket in sockets.items():
                try:
                    while True:
                        socket_frames[path].append(str(await socket.get_message()))
                except ConnectionClosed as closed:
                    close_codes[path] = closed.reason.code
            while server.process.poll() is None:
                await trio.sleep(0.02)
        elapsed = time.monotonic() - started
        in_flight.close()
        # Told why, then a WebSocket close frame 1001 "going away" (Engine.IO over WebSocket
        # has no close packet of its own; a polling session gets the "1" packet): clients
        # reconnect elsewhere, where a Socket.IO "41" disconnect would tell them not to.
        told = '42["error",{"code":"SERVER_CLOSING","message":"server shutting down"}]'
        for path in sockets:
            assert close_codes[path] == 1001, (path, close_codes, socket_frames)
            assert told in socket_frames[path] and "41" not in socket_frames[path], (path, socket_frames)
        idle.close()
        stream.close()
        assert server.process.returncode == 0, server.log()
        assert b'event: shutdown\ndata: {"reason":"server shutting down"}\n\n' in stream.buffer
        assert stream.buffer.endswith(b"0\r\n\r\n"), stream.buffer[-80:]  # the chunked body ended
        print(f"SIGTERM to exit: {elapsed:.2f} s")  # the figure for the report
    finally:
        server.kill()

    again = ServerProcess(database_url, tmp_path).start()
    try:
        async with httpx.AsyncClient(base_url=again.url) as http:
            for user in users:
                login = await http.post(
                    "/api/auth/login", json={"username": user["user"]["username"], "password": "correct horse battery"}
                )
                assert login.status_code == 200
            me = await http.get("/api/users/me", headers={"Authorization": f"Bearer {token}"})
            assert me.json().get("bio") == "acknowledged before SIGTERM", me.json()
    finally:
        again.kill()
