"""Behind a trusted proxy every per-client decision judges the forwarded client: two clients
reaching volthub through the same proxy (here: loopback connections that say who they pass
on, as nginx does with X-Forwarded-For) are counted apart by the rate limits, the per-address
connection cap and the access log, and the /metrics allow-list refuses a forwarded client
outside it while the proxy's own address is in it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

from tests.conftest import ROOMY_LIMITS, make_settings
from tests.http.rawhttp import RawConnection, request
from volthub.http import serving

PROXY = ["127.0.0.1/32"]
ALICE, BOB = "203.0.113.1", "203.0.113.2"


def via_proxy(client: str) -> dict[str, str]:
    # A client may send its own X-Forwarded-For: the proxy appends the address it saw.
    return {"X-Forwarded-For": f"10.9.9.9, {client}"}


async def _serve(nursery: trio.Nursery, settings: Any) -> AsyncIterator[tuple[str, str, int]]:
    from hypercorn.trio import serve

    from volthub.http.app import create_app

    app = create_app(settings)
    config = serving.hypercorn_config(settings, bind="127.0.0.1:0")
    stop = trio.Event()
    binds = await nursery.start(
        lambda task_status: serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)
    )
    port = int(binds[0].rsplit(":", 1)[1])
    gateway = app.extensions["volthub"].gateway
    try:
        yield f"http://127.0.0.1:{port}", gateway.url, port
    finally:
        stop.set()


@pytest.fixture
async def proxied(sqlite_url: str, nursery: trio.Nursery) -> AsyncIterator[tuple[str, str, int]]:
    settings = make_settings(
        sqlite_url,
        server={"trusted_proxies": PROXY, "max_connections": 1000, "max_connections_per_address": 2},
        ratelimit={**ROOMY_LIMITS, "global_per_ip_per_minute": 3},
    )
    async for served in _serve(nursery, settings):
        yield served


async def test_rate_limits_count_each_forwarded_client_apart(proxied: tuple[str, str, int]) -> None:
    base, _, _ = proxied
    async with httpx.AsyncClient(base_url=base) as http:
        alice = [(await http.get("/livez", headers=via_proxy(ALICE))).status_code for _ in range(4)]
        bob = (await http.get("/livez", headers=via_proxy(BOB))).status_code
    assert alice == [200, 200, 200, 429] and bob == 200


async def test_the_gateway_judges_the_forwarded_client_too(proxied: tuple[str, str, int]) -> None:
    _, gateway, _ = proxied
    handshake = "/socket.io/?EIO=4&transport=polling"
    async with httpx.AsyncClient(base_url=gateway) as http:
        alice = [(await http.get(handshake, headers=via_proxy(ALICE))).status_code for _ in range(4)]
        bob = (await http.get(handshake, headers=via_proxy(BOB))).status_code
    assert alice[:3] == [200, 200, 200] and alice[3] == 429 and bob == 200


async def test_the_access_log_names_the_forwarded_client(
    proxied: tuple[str, str, int], caplog: pytest.LogCaptureFixture
) -> None:
    base, _, _ = proxied
    caplog.set_level(logging.INFO, logger="volthub.access")
    async with httpx.AsyncClient(base_url=base) as http:
        for client in (ALICE, BOB):
            assert (await http.get("/livez", headers=via_proxy(client))).status_code == 200

    def lines() -> list[str]:
        return [record.getMessage() for record in caplog.records if record.name == "volthub.access"]

    with trio.fail_after(30):  # a line is written once its response has gone out
        while len(lines()) < 2:
            await trio.sleep(0.01)
    assert [line.rsplit("client=", 1)[1] for line in lines()] == [ALICE, BOB], lines()


async def test_the_connection_cap_counts_each_forwarded_client(proxied: tuple[str, str, int]) -> None:
    """Alice holds two requests through the proxy (bodies still coming): her third is refused
    while Bob, through the same proxy, gets in; the proxy's own connections (four here, cap
    two) are not capped per address."""
    _, _, port = proxied
    held = [await RawConnection.open(port) for _ in range(2)]
    try:
        for connection in held:
            head = request("POST", "/api/auth/login", headers={**via_proxy(ALICE), "Content-Length": "40"})
            await connection.send(head)
        with trio.fail_after(30):
            while serving.LIMITS.by_address[ALICE] < 2:
                await trio.sleep(0.01)
        third, bobs = await RawConnection.open(port), await RawConnection.open(port)
        await third.send(request("GET", "/livez", headers=via_proxy(ALICE)))
        await bobs.send(request("GET", "/livez", headers=via_proxy(BOB)))
        with trio.fail_after(30):
            refused, answered = await third.response(), await bobs.response()
        third.close()
        bobs.close()
        assert refused.status == 503 and answered.status == 200
    finally:
        for connection in held:
            connection.close()


async def test_a_gateway_websocket_counts_for_its_forwarded_client_until_it_closes(
    proxied: tuple[str, str, int],
) -> None:
    """A WebSocket holds one of its client's connections for as long as it lives; a plain
    request on the gateway gives its connection back once answered."""
    _, gateway, _ = proxied
    port = int(gateway.rsplit(":", 1)[1])

    async def until(alice_holds: int) -> None:
        with trio.fail_after(30):
            while serving.LIMITS.by_address.get(ALICE, 0) != alice_holds:
                await trio.sleep(0.01)

    plain = await RawConnection.open(port)
    await plain.send(request("GET", "/socket.io/?EIO=4&transport=polling", headers=via_proxy(ALICE)))
    with trio.fail_after(30):
        assert (await plain.response()).status == 200
    await until(0)  # answered, and the kept-alive connection holds nothing
    upgrade = {
        **via_proxy(ALICE),
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version": "13",
    }
    socket = await RawConnection.open(port)
    await socket.send(request("GET", "/socket.io/?EIO=4&transport=websocket", headers=upgrade))
    with trio.fail_after(30):
        assert (await socket.response()).status == 101
    await until(1)
    socket.close()
    await until(0)
    plain.close()


async def test_metrics_refuse_a_forwarded_client_outside_the_allow_list(proxied: tuple[str, str, int]) -> None:
    base, _, _ = proxied
    async with httpx.AsyncClient(base_url=base) as http:
        forwarded = await http.get("/metrics", headers=via_proxy(ALICE))
        proxy_itself = await http.get("/metrics")
        forwarded_loopback = await http.get("/metrics", headers=via_proxy("127.0.0.1"))
    assert forwarded.status_code == 404
    assert proxy_itself.status_code == 200 and forwarded_loopback.status_code == 200


async def test_without_trusted_proxies_the_header_is_ignored(sqlite_url: str, nursery: trio.Nursery) -> None:
    settings = make_settings(sqlite_url, ratelimit={**ROOMY_LIMITS, "global_per_ip_per_minute": 2})
    async for base, _, _ in _serve(nursery, settings):
        async with httpx.AsyncClient(base_url=base) as http:
            metrics = await http.get("/metrics", headers=via_proxy(ALICE))
            statuses = [(await http.get("/livez", headers=via_proxy(c))).status_code for c in (ALICE, BOB)]
        assert metrics.status_code == 200 and statuses == [200, 429]  # all three count as the peer
