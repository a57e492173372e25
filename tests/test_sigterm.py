"""SIGTERM on `volthub serve` (issue 18): with an idle kept-alive connection and an open SSE
stream, the process exits 0 within `[server] shutdown_timeout` (5 s), the stream ends with a
`shutdown` event and a proper end of body, and every acknowledged write is there after a
restart."""

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


async def test_sigterm_exits_promptly_and_loses_nothing(database_url: str, tmp_path: Path) -> None:
    server = ServerProcess(database_url, tmp_path).start()
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

        assert server.process is not None
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        with trio.fail_after(SHUTDOWN_TIMEOUT):
            await idle.closed_by_server()
            await stream.closed_by_server()
            while server.process.poll() is None:
                await trio.sleep(0.02)
        elapsed = time.monotonic() - started
        idle.close()
        stream.close()
        assert server.process.returncode == 0, server.log()
        assert b"event: shutdown" in stream.buffer
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
