"""Channel-points rewards over REST and the event catalogue route."""

from __future__ import annotations

import functools
import uuid
from typing import Any

import trio

from tests.conftest import register
from tests.services.test_channel_points import fill
from volthub.services.channel_points import MAX_REWARDS_PER_CHANNEL

REST_FIELDS = {
    "id",
    "name",
    "cost",
    "description",
    "iconUrl",
    "enabled",
    "builtInType",
    "requiresModeratorApproval",
    "maxPerStream",
    "maxPerUserPerStream",
}


async def test_create_and_list(client: Any) -> None:
    user = await register(client)
    empty = await client.get(f"/api/channel-points/{user.id}/items")
    assert (empty.status_code, await empty.get_json()) == (200, {"items": []})
    created = await client.post(
        f"/api/channel-points/{user.id}/items",
        headers=user.headers,
        json={"name": " Hydrate ", "cost": 500, "maxPerStream": 3, "iconUrl": "https://cdn.example/h.png"},
    )
    assert created.status_code == 201, await created.get_data(as_text=True)
    reward = await created.get_json()
    assert set(reward) == REST_FIELDS
    assert (reward["name"], reward["cost"], reward["builtInType"], reward["maxPerStream"]) == ("Hydrate", 500, None, 3)
    custom = (await (await client.get(f"/api/channel-points/{user.id}/items")).get_json())["items"]
    assert custom == [reward]
    everything = (await (await client.get(f"/api/channel-points/{user.id}/items/with-built-in")).get_json())["items"]
    assert [r["builtInType"] for r in everything] == ["first", None]
    assert everything[1] == reward


async def test_only_in_your_own_channel(client: Any) -> None:
    user, other = await register(client), await register(client)
    response = await client.post(
        f"/api/channel-points/{other.id}/items", headers=user.headers, json={"name": "x", "cost": 1}
    )
    assert response.status_code == 403
    assert (await client.post(f"/api/channel-points/{user.id}/items", json={"name": "x", "cost": 1})).status_code == 401


async def test_unknown_and_invalid_channels(client: Any) -> None:
    assert (await client.get(f"/api/channel-points/{uuid.uuid4()}/items")).status_code == 404
    assert (await client.get("/api/channel-points/nope/items/with-built-in")).status_code == 400


async def test_validation(client: Any) -> None:
    user = await register(client)
    for body in (
        {"name": "", "cost": 1},
        {"name": "x", "cost": 0},
        {"name": "x", "cost": "1"},
        {"name": "x", "cost": 1, "iconUrl": "http://insecure"},
        {"name": "   ", "cost": 1},
    ):
        response = await client.post(f"/api/channel-points/{user.id}/items", headers=user.headers, json=body)
        assert response.status_code == 400, body


async def test_event_types_catalogue(client: Any) -> None:
    response = await client.get("/api/events/types")
    assert response.status_code == 200
    body = await response.get_json()
    by_name = {t["name"]: t for t in body["types"]}
    assert by_name["channel.hype_train.begin"]["emitted"] is False
    assert by_name["channel.hype_train.begin"]["transports"] == {"eventsApi": True, "webhooks": False}
    assert by_name["user.follow"]["transports"] == {"eventsApi": False, "webhooks": True}
    assert by_name["channel.cheer"]["aliasOf"] == "channel.volts"
    assert by_name["chat.message"]["public"] is True and by_name["chat.message"]["webhookScope"] == "chat:read"
    assert {f["name"] for f in by_name["channel.follow"]["fields"]} >= {
        "userId",
        "username",
        "displayName",
        "followedAt",
    }


async def test_the_reward_cap_holds_under_concurrent_creates(backend_app: Any) -> None:
    """The last free places, raced for: exactly that many 201s, the rest 409 (spec: at most 100)."""
    client = backend_app.test_client()
    user = await register(client)
    path = f"/api/channel-points/{user.id}/items"
    free = 2
    database = backend_app.extensions["volthub"].db
    await database.write(functools.partial(fill, channel=user.id, count=MAX_REWARDS_PER_CHANNEL - free))
    answers: list[tuple[int, Any]] = []

    async def create(number: int) -> None:
        response = await client.post(path, headers=user.headers, json={"name": f"late{number}", "cost": 1})
        answers.append((response.status_code, await response.get_json()))

    async with trio.open_nursery() as nursery:
        for number in range(10):
            nursery.start_soon(create, number)
    assert sorted(status for status, _ in answers) == [201] * free + [409] * (10 - free)
    refusal = next(body for status, body in answers if status == 409)
    assert set(refusal.pop("details")) == {"requestId"}
    assert refusal == {
        "error": "too_many_rewards",
        "message": f"a channel has at most {MAX_REWARDS_PER_CHANNEL} rewards",
    }
    listed = await (await client.get(path)).get_json()
    assert len(listed["items"]) == MAX_REWARDS_PER_CHANNEL
