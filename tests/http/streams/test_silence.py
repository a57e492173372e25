"""A live stream whose media server went silent is closed after `[ingest]
silence_timeout_seconds`; heartbeats hold it open (MockClock, both backends)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from tests.conftest import make_settings, register
from tests.http.streams.support import HOOK, HOOK_SECRET, SETUP
from volthub.hub.clock import TrioClock


@pytest.fixture
async def app(database_url: str, mock_clock: MockClock) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    settings = make_settings(database_url, ingest={"hook_secret": HOOK_SECRET, "silence_timeout_seconds": 30})
    application = create_app(settings, clock=TrioClock())
    async with application.test_app():  # the clock stands still while the app starts
        yield application


async def test_silence_closes_the_stream_and_heartbeats_hold_it(app: Any, mock_clock: MockClock) -> None:
    client = app.test_client()
    owner = await register(client)
    key = (await (await client.get(SETUP, headers=owner.headers)).get_json())["streamKey"]
    assert (await client.post("/api/ingest/publish", json={"streamKey": key}, headers=HOOK)).status_code == 200

    async def live() -> bool:
        body = await (await client.get(f"/api/streams/user/{owner.username}")).get_json()
        return bool(body["live"])

    for _ in range(4):  # 80 s of heartbeats every 20 s: still live
        mock_clock.jump(20)
        await trio.sleep(0)
        assert (await client.post("/api/ingest/heartbeat", json={"streamKey": key}, headers=HOOK)).status_code == 200
    assert await live()

    mock_clock.jump(40)  # silent past the timeout; the sweep runs every timeout / 4
    for _ in range(1000):  # each check is a database round trip, time for the sweep's write
        if not await live():
            break
    assert not await live()
    vods = await (await client.get(f"/api/streams/user/{owner.username}/vods")).get_json()
    assert len(vods["items"]) == 1
    rt = app.extensions["volthub"]
    reason = await rt.db.read(lambda tx: tx.scalar("SELECT end_reason FROM streams"))
    assert reason == "silence"
