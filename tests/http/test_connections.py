"""Connection handling under Hypercorn's trio worker, with raw sockets.

Each test is one fault of Hypercorn's connection handling: the early-refusal keep-alive stall, `Connection:
close` / HTTP/1.0 / idle connections that never closed, and descriptor exhaustion. They fail
on the Hypercorn versions of `PATCHED_HYPERCORN_VERSIONS` without volthub.http.hypercorn_fixes'
adaptation (see `test_unpatched_hypercorn_still_has_the_bug`), and they fail if a Hypercorn
upgrade brings the bug back while the adaptation is skipped for an unknown version.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import trio

from tests.conftest import make_settings, register_live
from tests.http.oauth.tokens import issue_oauth_token
from tests.http.rawhttp import RawConnection, request
from volthub.http import hypercorn_fixes, serving

# The acceptance bound of the issue: a connection that must close closes within a second.
CLOSE_BOUND = 1.0
JSON = {"Content-Type": "application/json"}


async def _serve(nursery: trio.Nursery, settings: Any) -> tuple[int, Any]:
    from hypercorn.trio import serve

    from volthub.http.app import create_app

    app = create_app(settings)
    config = serving.hypercorn_config(settings, bind="127.0.0.1:0")
    stop = trio.Event()
    binds = await nursery.start(
        lambda task_status: serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)
    )
    app.extensions["test_stop"] = stop
    return int(binds[0].rsplit(":", 1)[1]), app


@pytest.fixture
async def server(database_url: str, nursery: trio.Nursery) -> AsyncIterator[tuple[int, Any]]:
    port, app = await _serve(nursery, make_settings(database_url, server={"keep_alive_timeout": 0.5}))
    yield port, app
    app.extensions["test_stop"].set()


def test_the_adaptation_is_applied_on_the_pinned_hypercorn(sqlite_url: str) -> None:
    """An upgrade to a version this adaptation was not written for fails here: re-check the
    upstream code (test_unpatched_hypercorn_still_has_the_bug) and extend or drop the pin."""
    from hypercorn.trio.tcp_server import TCPServer

    assert hypercorn_fixes.hypercorn_version() in hypercorn_fixes.PATCHED_HYPERCORN_VERSIONS
    assert hypercorn_fixes.install(make_settings(sqlite_url))
    assert hasattr(TCPServer.protocol_send, "__wrapped__")


async def test_unpatched_hypercorn_still_has_the_bug(server: tuple[int, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypercorn's own close, without the shield: `Connection: close` is not honoured. When this
    starts failing, upstream has fixed the bug and the adaptation can go."""
    from hypercorn.trio.tcp_server import TCPServer

    monkeypatch.setattr(TCPServer, "protocol_send", TCPServer.protocol_send.__wrapped__)
    port, _ = server
    connection = await RawConnection.open(port)
    await connection.send(request("GET", "/livez", headers={"Connection": "close"}))
    assert (await connection.response()).status == 200
    with trio.move_on_after(CLOSE_BOUND) as waited:
        await connection.closed_by_server()
    connection.close()
    assert waited.cancelled_caught, "Hypercorn closed by itself: the adaptation may no longer be needed"


async def _refusals(port: int, app: Any) -> list[tuple[str, str, bytes, dict[str, str], int]]:
    user = await register_live(f"http://127.0.0.1:{port}")
    oauth = await issue_oauth_token(app, user.id, "channel:read")
    body = orjson.dumps({"message": "x" * 3000})
    return [
        ("POST", "/api/users/me/nothing-here", body, JSON, 404),
        ("PUT", "/api/users/me", body, JSON, 401),
        ("POST", "/api/developer/apps", body, {**JSON, "Authorization": f"Bearer {oauth}"}, 403),
        ("PUT", "/api/users/me", body, {"Content-Type": "text/plain", **user.headers}, 415),
    ]


async def test_kept_alive_connection_answers_after_early_refusals(server: tuple[int, Any]) -> None:
    """40 rounds of refusals sent before their bodies, each followed by a request on the same
    connection: every one is answered, and the connection is never reset."""
    port, app = server
    refusals = await _refusals(port, app)
    connection = await RawConnection.open(port)
    try:
        with trio.fail_after(60):
            for _ in range(40):
                for method, path, body, headers, status in refusals:
                    head = request(method, path, body=body, headers=headers)
                    await connection.send(head[: -len(body)])  # the head alone first
                    await trio.sleep(0.01)  # the app could answer before the body arrives
                    await connection.send(body)
                    refused = await connection.response()
                    assert refused.status == status, refused.body
                    assert orjson.loads(refused.body)["error"]
                    await connection.send(request("GET", "/livez"))
                    assert (await connection.response()).status == 200
    finally:
        connection.close()


@pytest.mark.parametrize(
    "version, headers", [("1.1", {"Connection": "close"}), ("1.0", {}), ("1.0", {"Connection": "close"})]
)
async def test_connection_closes_after_the_response_when_asked(
    server: tuple[int, Any], version: str, headers: dict[str, str]
) -> None:
    port, _ = server
    connection = await RawConnection.open(port)
    await connection.send(request("GET", "/livez", headers=headers, version=version))
    assert (await connection.response()).status == 200
    with trio.fail_after(CLOSE_BOUND):
        await connection.closed_by_server()
    connection.close()


async def test_connection_close_after_a_refusal_closes(server: tuple[int, Any]) -> None:
    port, _ = server
    connection = await RawConnection.open(port)
    await connection.send(
        request("PUT", "/api/users/me", body=b'{"bio": "x"}', headers={**JSON, "Connection": "close"})
    )
    assert (await connection.response()).status == 401
    with trio.fail_after(CLOSE_BOUND):
        await connection.closed_by_server()
    connection.close()


async def test_idle_kept_alive_connection_closes_after_keep_alive_timeout(server: tuple[int, Any]) -> None:
    port, _ = server  # keep_alive_timeout = 0.5 s
    connection = await RawConnection.open(port)
    await connection.send(request("GET", "/livez"))
    assert (await connection.response()).status == 200
    with trio.fail_after(0.5 + CLOSE_BOUND):
        await connection.closed_by_server()
    connection.close()


async def test_oversized_head_and_garbage_get_a_json_error(server: tuple[int, Any]) -> None:
    port, _ = server
    for raw, status in (
        (b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431),
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
    ):
        connection = await RawConnection.open(port)
        await connection.send(raw)
        with trio.fail_after(5):
            response = await connection.response()
        connection.close()
        assert response.status == status
        assert response.headers["content-type"] == "application/json"
        assert set(orjson.loads(response.body)) == {"error", "message"}


async def test_oversized_body_is_413_with_json(server: tuple[int, Any]) -> None:
    port, _ = server
    body = b'{"bio": "' + b"a" * 70_000 + b'"}'
    connection = await RawConnection.open(port)
    await connection.send(request("PUT", "/api/users/me", body=body, headers=JSON))
    with trio.fail_after(5):
        response = await connection.response()
    connection.close()
    assert response.status in (401, 413)  # refused before or after its size; either way JSON
    assert orjson.loads(response.body)["error"]


async def test_connections_past_the_cap_get_503_not_exhaustion(nursery: trio.Nursery, sqlite_url: str) -> None:
    """Past the per-address cap a new connection is answered 503 and closed; the held ones
    and other clients are unaffected, and closing one frees a place."""
    settings = make_settings(sqlite_url, server={"max_connections": 1000, "max_connections_per_address": 20})
    port, app = await _serve(nursery, settings)
    held = [await RawConnection.open(port) for _ in range(20)]
    try:
        for connection in held[:3]:
            await connection.send(request("GET", "/livez"))
            assert (await connection.response()).status == 200
        extra = await RawConnection.open(port)
        with trio.fail_after(5):
            refused = await extra.response()
            await extra.closed_by_server()
        extra.close()
        assert refused.status == 503
        assert refused.headers["retry-after"] == "1"
        assert orjson.loads(refused.body)["error"] == "server_busy"
        held.pop().close()
        with trio.fail_after(5):
            while True:  # the server notices the close on its next read
                again = await RawConnection.open(port)
                await again.send(request("GET", "/livez"))
                try:
                    answer = await again.response()
                finally:
                    again.close()
                if answer.status == 200:
                    break
                await trio.sleep(0.05)
    finally:
        for connection in held:
            connection.close()
        app.extensions["test_stop"].set()


def test_connection_limits_count_per_address() -> None:
    limits = serving.ConnectionLimits(total=3, per_address=2)
    assert limits.admit("a") and limits.admit("a")
    assert not limits.admit("a")
    assert limits.admit("b")
    assert not limits.admit("c")  # total reached
    limits.release("a")
    assert limits.admit("c")
    assert limits.open == 3 and limits.by_address == {"a": 1, "b": 1, "c": 1}


def test_descriptor_soft_limit_is_raised_to_hard() -> None:
    import resource

    soft = serving.raise_descriptor_limit()
    now_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == now_soft
    assert hard == resource.RLIM_INFINITY or now_soft == hard


@pytest.mark.slow
async def test_the_documented_hypercorn_command_closes_too(tmp_path: Any) -> None:
    """The documented `hypercorn --worker-class trio "volthub.http.app:create_app()"`: the app
    module applies the same adaptation, so `Connection: close` is honoured there too; and
    the app's start-up serves the Events API gateway there as well."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from volthub.loadtest.servers import free_port

    port, gateway_port = free_port(), free_port()
    hypercorn = Path(sys.executable).with_name("hypercorn")
    env = {
        **os.environ,
        "VOLTHUB_DATABASE__URL": f"sqlite:///{tmp_path / 'h.db'}",
        "VOLTHUB_EVENTS__GATEWAY_PORT": str(gateway_port),  # never the default 8081 in tests
    }
    command = [str(hypercorn), "--worker-class", "trio", "--bind", f"127.0.0.1:{port}", "volthub.http.app:create_app()"]
    process = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with trio.fail_after(30):
            while True:
                try:
                    connection = await RawConnection.open(port)
                    break
                except OSError:
                    await trio.sleep(0.1)
        await connection.send(request("GET", "/livez", headers={"Connection": "close"}))
        with trio.fail_after(30):
            assert (await connection.response()).status == 200
        with trio.fail_after(CLOSE_BOUND):
            await connection.closed_by_server()
        connection.close()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway_port}") as http:
            opened = await http.get("/ws/events/", params={"EIO": "4", "transport": "polling"})
        assert opened.status_code == 200 and opened.text.startswith("0{"), opened.text
    finally:
        process.terminate()
        process.wait(30)
