"""One Socket.IO connection's `subscribe` requests are budgeted ([events]
subscribe_attempts_per_minute), on the gateway and on the mount, on both backends: past the
burst they are refused with LIMIT_EXCEEDED before any lookup, counted, and the connection
lives on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import trio
from prometheus_client import REGISTRY

from tests.conftest import SOCKET_PATHS, LiveServer, make_settings, register_live, served, socket_path_events
from tests.http.events.test_socketio import connected, next_event, sio_open

BURST = 5
ATTEMPTS = 3 * BURST


@pytest.fixture(params=SOCKET_PATHS)
async def server(database_url: str, nursery: trio.Nursery, request: pytest.FixtureRequest) -> AsyncIterator[LiveServer]:
    events = {**socket_path_events(request.param), "subscribe_attempts_per_minute": BURST}
    settings = make_settings(database_url, events=events, ratelimit={"enabled": False})
    async with served(nursery, settings) as server:
        yield server


def refusals_counted() -> float:
    return REGISTRY.get_sample_value("volthub_events_subscribe_refused_total") or 0.0


async def test_subscribe_attempts_past_the_budget_are_refused_and_counted(
    server: LiveServer, nursery: trio.Nursery
) -> None:
    channel = await register_live(server.url)
    ws = await sio_open(server, nursery)
    await connected(ws)
    counted_before = refusals_counted()
    started = trio.current_time()
    codes = []
    for _ in range(ATTEMPTS):  # random channels: each would cost a lookup
        await ws.send_message('42["subscribe",{"channelId":"%s"}]' % uuid.uuid4())
        name, payload = await next_event(ws)
        assert name == "error"
        codes.append(payload["code"])
    # A burst of BURST, then one more per 60/BURST seconds (a slow machine may earn one).
    earned = BURST + int((trio.current_time() - started) * BURST / 60)
    assert codes[:BURST] == ["NOT_FOUND"] * BURST
    assert codes.count("NOT_FOUND") <= earned and codes[-1] == "LIMIT_EXCEEDED"
    assert refusals_counted() - counted_before == codes.count("LIMIT_EXCEEDED")
    await ws.send_message('42["channel:getRewards",{"channelId":"%s"}]' % channel.id)
    assert (await next_event(ws))[0] == "channel:rewards"  # the connection is still served
