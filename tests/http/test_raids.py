"""Raids on SQLite and PostgreSQL: POST /api/integrations/oauth/stream/raid emits
`channel.raid` on both channels and notifies the target's owner; each refusal writes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from tests.conftest import make_settings
from tests.http.streams.support import HOOK, SETUP

RAID = "/api/integrations/oauth/stream/raid"


@pytest.fixture
def settings(database_url: str) -> Any:
    return make_settings(database_url, ingest={"hook_secret": HOOK["Authorization"][7:], "silence_timeout_seconds": 0})


@pytest.fixture
async def app(settings: Any) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    application = create_app(settings)
    async with application.test_app():
        yield application


async def go_live(client: Any, owner: Any) -> None:
    key = (await (await client.get(SETUP, headers=owner.headers)).get_json())["streamKey"]
    response = await client.post("/api/ingest/publish", json={"streamKey": key}, headers=HOOK)
    assert response.status_code == 200, await response.get_data(as_text=True)


async def raids_of(published: list[Any], count: int) -> list[Any]:
    """The first `count` raid events once the bus delivered them (PostgreSQL: via the relay)."""
    with trio.fail_after(10):
        while len(found := [e for e in published if e.name == "channel.raid"]) < count:
            await trio.sleep(0.01)
    return found


async def notification_count(app: Any) -> int:
    return int(await app.extensions["volthub"].db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM notifications")))


async def test_a_live_raid_emits_on_both_channels_and_notifies(
    app: Any, client: Any, make_user: Any, published: list[Any]
) -> None:
    raider, target = await make_user(), await make_user()
    await go_live(client, raider)
    response = await client.post(RAID, json={"targetUsername": target.username.upper()}, headers=raider.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    assert body["targetChannelId"] == target.id and body["targetUsername"] == target.username
    assert body["viewers"] == 0
    events = await raids_of(published, 2)
    by_channel = {e.channel_id: e for e in events}
    assert by_channel[target.id].data["direction"] == "incoming"
    assert by_channel[raider.id].data["direction"] == "outgoing"
    for event in events:
        assert event.data["fromChannelId"] == raider.id and event.data["toChannelId"] == target.id
        assert event.data["viewers"] == 0 and event.data["raidedAt"] == body["raidedAt"]
        assert not event.is_test
    notes = await (await client.get("/api/notifications", headers=target.headers)).get_json()
    assert [n["type"] for n in notes["items"]] == ["raid.incoming"]
    mine = await (await client.get("/api/notifications", headers=raider.headers)).get_json()
    assert mine["items"] == []


async def test_refusals_write_nothing(app: Any, client: Any, make_user: Any, published: list[Any]) -> None:
    raider, target = await make_user(), await make_user()
    offline = await client.post(RAID, json={"targetUsername": target.username}, headers=raider.headers)
    assert offline.status_code == 409 and (await offline.get_json())["error"] == "not_live"
    await go_live(client, raider)
    missing = await client.post(RAID, json={"targetUsername": "nobody-here-at-all"}, headers=raider.headers)
    assert missing.status_code == 404 and (await missing.get_json())["error"] == "not_found"
    itself = await client.post(RAID, json={"targetUsername": raider.username}, headers=raider.headers)
    assert itself.status_code == 400 and (await itself.get_json())["error"] == "invalid_target"
    for bad in ({}, {"targetUsername": ""}, {"targetUsername": 5}, {"targetUsername": "x" * 65}):
        assert (await client.post(RAID, json=bad, headers=raider.headers)).status_code == 400, bad
    assert (await client.post(RAID, json={"targetUsername": target.username})).status_code == 401
    assert [e for e in published if e.name == "channel.raid"] == []
    assert await notification_count(app) == 0


@pytest.fixture
async def clocked_app(settings: Any) -> AsyncIterator[Any]:
    from volthub.http.app import create_app
    from volthub.hub.clock import TrioClock

    application = create_app(settings, clock=TrioClock())
    async with application.test_app():
        yield application


async def test_raids_have_a_cooldown_per_raider_and_per_target(clocked_app: Any, mock_clock: Any) -> None:
    from tests.conftest import register

    client = clocked_app.test_client()
    raider, other, target, elsewhere = [await register(client) for _ in range(4)]
    await go_live(client, raider)
    await go_live(client, other)

    async def send(who: Any, whom: Any) -> Any:
        return await client.post(RAID, json={"targetUsername": whom.username}, headers=who.headers)

    assert (await send(raider, target)).status_code == 200
    again = await send(raider, elsewhere)
    body = await again.get_json()
    assert again.status_code == 429 and body["error"] == "raid_cooldown", body
    assert body["details"].items() >= {"cooldown": "raider", "retryAfterSeconds": 120}.items()
    assert again.headers["Retry-After"] == "120"
    crowded = await send(other, target)
    assert crowded.status_code == 429
    assert (await crowded.get_json())["details"].items() >= {"cooldown": "target", "retryAfterSeconds": 30}.items()

    mock_clock.jump(20)
    late = await (await send(other, target)).get_json()
    assert late["details"].items() >= {"cooldown": "target", "retryAfterSeconds": 10}.items()
    mock_clock.jump(10)
    assert (await send(other, target)).status_code == 200
    mock_clock.jump(90)
    assert (await send(raider, elsewhere)).status_code == 200

    async def notes(user: Any) -> int:
        listed = await (await client.get("/api/notifications", headers=user.headers)).get_json()
        return len([n for n in listed["items"] if n["type"] == "raid.incoming"])

    assert (await notes(target), await notes(elsewhere)) == (2, 1)
    raids = clocked_app.extensions["volthub"].settings.raids  # the defaults the test counts on
    assert (raids.raider_cooldown_seconds, raids.target_cooldown_seconds) == (120.0, 30.0)
