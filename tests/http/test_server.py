"""The app's server: both listeners and their one ordered start and stop. (The stop's effect
on real clients, under SIGTERM to `volthub serve` and the `hypercorn` command, is in
tests/test_sigterm.py.)"""

from __future__ import annotations

import functools
import socket
from typing import Any

import httpx
import trio

from tests.conftest import free_port, make_settings, register_live
from tests.http.rawhttp import RawConnection, request
from volthub.http import composition
from volthub.http.app import create_app
from volthub.http.events.gateway import Gateway
from volthub.http.server import Server, server_of

DEADLINE = 30.0


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


async def test_the_gateway_takes_no_client_before_the_runtime_is_ready(
    sqlite_url: str, nursery: trio.Nursery, monkeypatch: Any
) -> None:
    held, entered = trio.Event(), trio.Event()
    hear_the_others_first = composition.cluster.wait_for_relay

    async def relay_catching_up(rt: Any) -> None:
        entered.set()
        await held.wait()
        await hear_the_others_first(rt)

    monkeypatch.setattr(composition.cluster, "wait_for_relay", relay_catching_up)
    port = free_port()
    server = server_of(create_app(make_settings(sqlite_url, events={"gateway_port": port})))
    stop = trio.Event()
    started = trio.Event()

    async def serving_started() -> None:
        await nursery.start(functools.partial(server.serve, stop.wait, bind="127.0.0.1:0"))
        started.set()

    nursery.start_soon(serving_started)
    with trio.fail_after(DEADLINE):
        await entered.wait()
    assert _refused(port), "the gateway is not bound while the runtime starts"
    held.set()
    with trio.fail_after(DEADLINE):
        await started.wait()
    assert not _refused(port)
    connection = await RawConnection.open(port)
    await connection.send(request("GET", "/nothing"))
    assert (await connection.response()).status == 404
    connection.close()
    stop.set()


async def test_a_stop_closes_both_listeners_then_the_database(sqlite_url: str, nursery: trio.Nursery) -> None:
    server = server_of(create_app(make_settings(sqlite_url)))
    stop = trio.Event()
    done = trio.Event()

    async def serve(task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        await server.serve(stop.wait, bind="127.0.0.1:0", task_status=task_status)
        done.set()

    binds = await nursery.start(serve)
    main_port = int(binds[0].rsplit(":", 1)[1])
    runtime = server.runtime
    assert runtime.gateway is not None
    gateway_port = runtime.gateway.address[1]
    closed: list[bool] = []  # whether the background services had stopped when the database closed
    close_database = runtime.db.close

    async def close_after_the_services() -> None:
        closed.append(runtime.supervisor._stopped.is_set())
        await close_database()

    runtime.db.close = close_after_the_services  # type: ignore[method-assign]
    await register_live(binds[0])  # both listeners serve
    async with httpx.AsyncClient(base_url=runtime.gateway.url) as gateway_client:
        assert (await gateway_client.get("/nothing")).status_code == 404
    stop.set()
    with trio.fail_after(DEADLINE):
        await done.wait()
    assert _refused(main_port) and _refused(gateway_port)
    assert closed == [True], "the database closes once, after the background services stopped"


async def test_the_test_app_without_a_stop_still_closes_the_gateway(sqlite_url: str) -> None:
    app = create_app(make_settings(sqlite_url))
    server: Server = server_of(app)
    async with app.test_app():
        gateway = server.runtime.gateway
        assert gateway is not None
        port = gateway.address[1]
        assert not _refused(port)
    assert _refused(port)
    assert server.runtime.supervisor._stopped.is_set()


async def test_a_failing_gateway_accept_loop_is_started_again_on_the_same_socket(
    sqlite_url: str, nursery: trio.Nursery, monkeypatch: Any
) -> None:
    accept = Gateway._accept_loop
    failures: list[str] = []

    async def failing_once(gateway: Gateway, connections: trio.Nursery) -> None:
        if not failures:
            failures.append("accept loop")
            raise RuntimeError("the accept loop failed")
        await accept(gateway, connections)

    monkeypatch.setattr(Gateway, "_accept_loop", failing_once)
    server = server_of(create_app(make_settings(sqlite_url)))
    stop = trio.Event()
    await nursery.start(functools.partial(server.serve, stop.wait, bind="127.0.0.1:0"))
    gateway = server.runtime.gateway
    assert gateway is not None
    async with httpx.AsyncClient(timeout=DEADLINE) as client:
        # Waits in the socket's backlog through the back-off, then is served.
        assert (await client.get(f"{gateway.url}/nothing")).status_code == 404
    assert failures == ["accept loop"]
    stop.set()
