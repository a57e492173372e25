"""Channel-points rewards over REST (spec §2.8, §4.11) and the event catalogue route."""

from __future__ import annotations

import uuid
from typing import Any

from tests.conftest import register

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
