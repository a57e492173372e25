"""Channel-points redemptions over REST, on SQLite and PostgreSQL:
redeem through the ledger, per-stream limits, the stream's list, fulfil / reject (refund),
Idempotency-Key, concurrency, and the follow bonus and notification."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from tests.conftest import make_settings, register
from tests.http.streams.support import HOOK, SETUP
from tests.points_support import mint_points, points_balance
from volthub.persistence import ledger

FOLLOW_BONUS = 300


@pytest.fixture
def settings(database_url: str) -> Any:
    return make_settings(
        database_url,
        ingest={"hook_secret": HOOK["Authorization"][7:], "silence_timeout_seconds": 0},
        channel_points={"follow_bonus": FOLLOW_BONUS},
    )


@pytest.fixture
async def app(settings: Any) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    application = create_app(settings)
    async with application.test_app():
        yield application


async def redemption_event(published: list[Any], redemption_id: str) -> Any:
    """The redemption's event once the bus delivered it (on PostgreSQL through the event log
    relay, so a moment after the answer)."""
    with trio.fail_after(10):
        while True:
            found = [
                e
                for e in published
                if e.name == "channel.channel_points_redemption" and e.data["redemptionId"] == redemption_id
            ]
            if found:
                assert len(found) == 1
                return found[0]
            await trio.sleep(0.01)


async def go_live(client: Any, owner: Any) -> tuple[str, str]:
    """(stream key, stream id) of the owner's new live stream."""
    key = (await (await client.get(SETUP, headers=owner.headers)).get_json())["streamKey"]
    response = await client.post("/api/ingest/publish", json={"streamKey": key}, headers=HOOK)
    assert response.status_code == 200, await response.get_data(as_text=True)
    stream_id = await _db(client.app).read(
        lambda tx: tx.scalar("SELECT id FROM streams WHERE channel_id = ? AND ended_at IS NULL", (owner.id,))
    )
    return str(key), str(stream_id)


async def go_offline(client: Any, key: str) -> None:
    response = await client.post("/api/ingest/unpublish", json={"streamKey": key}, headers=HOOK)
    assert response.status_code == 200


def _db(app: Any) -> Any:
    return app.extensions["volthub"].db


async def reward(client: Any, owner: Any, **fields: Any) -> str:
    body = {"name": "Hydrate", "cost": 100, "requiresModeratorApproval": True, **fields}
    response = await client.post(f"/api/channel-points/{owner.id}/items", headers=owner.headers, json=body)
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["id"])


def redeem_path(owner: Any, item_id: str) -> str:
    return f"/api/channel-points/{owner.id}/redeem/{item_id}"


async def listed(client: Any, owner: Any, stream_id: str, query: str = "") -> list[dict[str, Any]]:
    response = await client.get(f"/api/channel-points/{owner.id}/stream/{stream_id}/redemptions{query}")
    assert response.status_code == 200, await response.get_data(as_text=True)
    return list((await response.get_json())["items"])


async def test_redeem_moves_points_emits_and_lists(app: Any, client: Any, published: list[Any]) -> None:
    owner, viewer = await register(client), await register(client)
    _, stream_id = await go_live(client, owner)
    item = await reward(client, owner, cost=120)
    await mint_points(_db(app), owner.id, viewer.id, 500)
    response = await client.post(redeem_path(owner, item), headers=viewer.headers, json={"userInput": "  hi  "})
    assert response.status_code == 201, await response.get_data(as_text=True)
    body = await response.get_json()
    assert (body["status"], body["rewardCost"], body["userInput"], body["balance"]) == ("unfulfilled", 120, "hi", 380)
    assert (body["userId"], body["username"], body["streamId"]) == (viewer.id, viewer.username, stream_id)
    assert await points_balance(client, owner.id, viewer) == 380
    event = await redemption_event(published, body["redemptionId"])
    assert event.channel_id == owner.id
    assert set(event.data) == {
        "redemptionId",
        "rewardId",
        "rewardTitle",
        "rewardCost",
        "userId",
        "username",
        "displayName",
        "userInput",
        "status",
        "redeemedAt",
    }
    assert event.data["status"] == "unfulfilled" and event.data["redemptionId"] == body["redemptionId"]
    [row] = await listed(client, owner, stream_id)
    assert row == {k: v for k, v in body.items() if k != "balance"}
    # Without input the event leaves userInput out (present only if given).
    plain = await (await client.post(redeem_path(owner, item), headers=viewer.headers, json={})).get_json()
    assert "userInput" not in (await redemption_event(published, plain["redemptionId"])).data
    totals = await _db(app).read(ledger.totals)
    assert totals["points"] == (0, 0)


async def test_refusals_write_nothing(app: Any, client: Any) -> None:
    owner, viewer = await register(client), await register(client)
    item = await reward(client, owner, cost=100)
    off = await reward(client, owner, enabled=False)
    await mint_points(_db(app), owner.id, viewer.id, 50)
    offline = await client.post(redeem_path(owner, item), headers=viewer.headers, json={})
    assert (offline.status_code, (await offline.get_json())["error"]) == (409, "channel_not_live")
    _, stream_id = await go_live(client, owner)
    poor = await client.post(redeem_path(owner, item), headers=viewer.headers, json={})
    assert (poor.status_code, (await poor.get_json())["error"]) == (400, "insufficient_funds")
    disabled = await client.post(redeem_path(owner, off), headers=viewer.headers, json={})
    assert (disabled.status_code, (await disabled.get_json())["error"]) == (409, "reward_disabled")
    unknown = await client.post(redeem_path(owner, str(uuid.uuid4())), headers=viewer.headers, json={})
    assert unknown.status_code == 404
    too_long = await client.post(redeem_path(owner, item), headers=viewer.headers, json={"userInput": "x" * 501})
    assert too_long.status_code == 400
    assert (await client.post(redeem_path(owner, item), json={})).status_code == 401
    assert await listed(client, owner, stream_id) == []
    assert await points_balance(client, owner.id, viewer) == 50
    elsewhere = await client.get(f"/api/channel-points/{owner.id}/stream/{uuid.uuid4()}/redemptions")
    assert elsewhere.status_code == 404


async def test_per_stream_and_per_user_limits_reset_with_a_new_stream(app: Any, client: Any) -> None:
    owner, first, second, third = [await register(client) for _ in range(4)]
    item = await reward(client, owner, cost=10, maxPerStream=2, maxPerUserPerStream=1)
    for viewer in (first, second, third):
        await mint_points(_db(app), owner.id, viewer.id, 100)
    key, stream_id = await go_live(client, owner)
    assert (await client.post(redeem_path(owner, item), headers=first.headers, json={})).status_code == 201
    again = await client.post(redeem_path(owner, item), headers=first.headers, json={})
    assert again.status_code == 409
    assert (await again.get_json())["details"] == {
        "scope": "user",
        "limit": 1,
        "requestId": again.headers["X-Request-Id"],
    }
    taken = await client.post(redeem_path(owner, item), headers=second.headers, json={})
    assert taken.status_code == 201
    full = await client.post(redeem_path(owner, item), headers=third.headers, json={})
    assert (await full.get_json())["details"] == {
        "scope": "stream",
        "limit": 2,
        "requestId": full.headers["X-Request-Id"],
    }
    # A rejection refunds and frees its slot.
    rejected = await client.post(
        f"/api/channel-points/{owner.id}/redemptions/{(await taken.get_json())['redemptionId']}/reject",
        headers=owner.headers,
    )
    assert rejected.status_code == 200
    assert (await client.post(redeem_path(owner, item), headers=third.headers, json={})).status_code == 201
    # The built-in "first" reward: once per stream.
    assert (await client.post(redeem_path(owner, "builtin-first"), headers=second.headers, json={})).status_code == 201
    assert (await client.post(redeem_path(owner, "builtin-first"), headers=third.headers, json={})).status_code == 409
    await go_offline(client, key)
    _, next_stream = await go_live(client, owner)
    assert next_stream != stream_id
    assert (await client.post(redeem_path(owner, item), headers=first.headers, json={})).status_code == 201
    assert len(await listed(client, owner, stream_id)) == 4
    assert [r["status"] for r in await listed(client, owner, stream_id, "?status=rejected")] == ["rejected"]


async def test_fulfil_and_reject_once_by_the_owner(app: Any, client: Any) -> None:
    owner, viewer = await register(client), await register(client)
    item = await reward(client, owner, cost=40)
    await mint_points(_db(app), owner.id, viewer.id, 100)
    await go_live(client, owner)
    ids = []
    for _ in range(2):
        response = await client.post(redeem_path(owner, item), headers=viewer.headers, json={})
        ids.append((await response.get_json())["redemptionId"])
    assert await points_balance(client, owner.id, viewer) == 20
    base = f"/api/channel-points/{owner.id}/redemptions"
    assert (await client.post(f"{base}/{ids[0]}/reject", headers=viewer.headers)).status_code == 403
    rejected = await client.post(f"{base}/{ids[0]}/reject", headers=owner.headers)
    assert (rejected.status_code, (await rejected.get_json())["status"]) == (200, "rejected")
    assert (await rejected.get_json())["resolvedAt"] is not None
    assert await points_balance(client, owner.id, viewer) == 60
    for action in ("reject", "fulfill"):
        again = await client.post(f"{base}/{ids[0]}/{action}", headers=owner.headers)
        rid = again.headers["X-Request-Id"]
        assert (again.status_code, (await again.get_json())["details"]) == (
            409,
            {"status": "rejected", "requestId": rid},
        )
    assert await points_balance(client, owner.id, viewer) == 60
    fulfilled = await client.post(f"{base}/{ids[1]}/fulfill", headers=owner.headers)
    assert (await fulfilled.get_json())["status"] == "fulfilled"
    assert (await client.post(f"{base}/{ids[1]}/reject", headers=owner.headers)).status_code == 409
    assert await points_balance(client, owner.id, viewer) == 60
    assert (await client.post(f"{base}/{uuid.uuid4()}/fulfill", headers=owner.headers)).status_code == 404


async def test_a_reward_without_approval_is_fulfilled_at_once_and_cannot_be_rejected(app: Any, client: Any) -> None:
    owner, viewer = await register(client), await register(client)
    item = await reward(client, owner, cost=30, requiresModeratorApproval=False)
    await mint_points(_db(app), owner.id, viewer.id, 100)
    _, stream_id = await go_live(client, owner)
    response = await client.post(redeem_path(owner, item), headers=viewer.headers, json={})
    body = await response.get_json()
    assert (response.status_code, body["status"], body["balance"]) == (201, "fulfilled", 70)
    assert body["resolvedAt"] is not None
    assert await listed(client, owner, stream_id, "?status=unfulfilled") == []  # nothing waits
    rejected = await client.post(
        f"/api/channel-points/{owner.id}/redemptions/{body['redemptionId']}/reject", headers=owner.headers
    )
    assert (rejected.status_code, (await rejected.get_json())["details"]["status"]) == (409, "fulfilled")
    assert await points_balance(client, owner.id, viewer) == 70


async def test_a_channel_moderator_fulfils_and_rejects_flagged_redemptions_with_one_refund(
    app: Any, client: Any
) -> None:
    owner, viewer, moderator, stranger = [await register(client) for _ in range(4)]
    granted = await client.post(
        "/api/integrations/oauth/channel-roles",
        json={"roleType": "moderator", "username": moderator.username},
        headers=owner.headers,
    )
    assert granted.status_code in (200, 201), await granted.get_data(as_text=True)
    item = await reward(client, owner, cost=25)
    await mint_points(_db(app), owner.id, viewer.id, 100)
    await go_live(client, owner)
    ids = []
    for _ in range(2):
        redeemed = await (await client.post(redeem_path(owner, item), headers=viewer.headers, json={})).get_json()
        assert redeemed["status"] == "unfulfilled"
        ids.append(redeemed["redemptionId"])
    base = f"/api/channel-points/{owner.id}/redemptions"
    refused = await client.post(f"{base}/{ids[0]}/reject", headers=stranger.headers)
    assert refused.status_code == 403
    assert await points_balance(client, owner.id, viewer) == 50
    for _ in range(2):
        await client.post(f"{base}/{ids[0]}/reject", headers=moderator.headers)
    assert await points_balance(client, owner.id, viewer) == 75  # refunded once
    fulfilled = await client.post(f"{base}/{ids[1]}/fulfill", headers=moderator.headers)
    assert (fulfilled.status_code, (await fulfilled.get_json())["status"]) == (200, "fulfilled")
    assert await points_balance(client, owner.id, viewer) == 75


async def test_concurrent_rejects_refund_once(app: Any, client: Any) -> None:
    owner, viewer = await register(client), await register(client)
    item = await reward(client, owner, cost=100)
    await mint_points(_db(app), owner.id, viewer.id, 100)
    await go_live(client, owner)
    redeemed = await (await client.post(redeem_path(owner, item), headers=viewer.headers, json={})).get_json()
    path = f"/api/channel-points/{owner.id}/redemptions/{redeemed['redemptionId']}/reject"
    statuses: list[int] = []

    async def reject() -> None:
        statuses.append((await client.post(path, headers=owner.headers)).status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(reject)
    assert sorted(statuses) == [200] + [409] * 7
    assert await points_balance(client, owner.id, viewer) == 100


async def test_parallel_redeems_never_overdraw_nor_exceed_a_limit(app: Any, client: Any) -> None:
    owner, viewer = await register(client), await register(client)
    item = await reward(client, owner, cost=100)
    capped = await reward(client, owner, name="Capped", cost=1, maxPerStream=3)
    await mint_points(_db(app), owner.id, viewer.id, 500 + 3)
    _, stream_id = await go_live(client, owner)
    statuses: dict[str, list[int]] = {item: [], capped: []}

    async def redeem(item_id: str) -> None:
        response = await client.post(redeem_path(owner, item_id), headers=viewer.headers, json={})
        statuses[item_id].append(response.status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(12):
            nursery.start_soon(redeem, item)
            nursery.start_soon(redeem, capped)
    assert statuses[item].count(201) == 5 and statuses[item].count(400) == 7
    assert statuses[capped].count(201) == 3 and statuses[capped].count(409) == 9
    assert await points_balance(client, owner.id, viewer) == 0
    assert len(await listed(client, owner, stream_id)) == 8
    assert await _db(app).read(ledger.mismatched_accounts) == []


async def test_one_idempotency_key_redeems_once(app: Any, client: Any) -> None:
    owner, viewer = await register(client), await register(client)
    item = await reward(client, owner, cost=100)
    await mint_points(_db(app), owner.id, viewer.id, 1000)
    _, stream_id = await go_live(client, owner)
    headers = {**viewer.headers, "Idempotency-Key": "redeem-once"}
    answers: list[tuple[int, bytes]] = []

    async def redeem() -> None:
        response = await client.post(redeem_path(owner, item), headers=headers, json={"userInput": "a"})
        answers.append((response.status_code, await response.get_data()))

    async with trio.open_nursery() as nursery:
        for _ in range(10):
            nursery.start_soon(redeem)
    created = [body for status, body in answers if status == 201]
    assert created and len(set(created)) == 1, answers  # replays answer byte for byte
    assert all(status in (201, 409) for status, _ in answers)  # 409: the first is still running
    assert await points_balance(client, owner.id, viewer) == 900
    assert len(await listed(client, owner, stream_id)) == 1
    other = await client.post(redeem_path(owner, item), headers=headers, json={"userInput": "b"})
    assert other.status_code == 422


async def test_follow_pays_the_bonus_once_and_notifies(app: Any, client: Any) -> None:
    owner, fan = await register(client), await register(client)
    for _ in range(3):
        assert (await client.post(f"/api/users/follow/{owner.id}", headers=fan.headers)).status_code == 200
        assert (await client.delete(f"/api/users/follow/{owner.id}", headers=fan.headers)).status_code in (200, 204)
    assert await points_balance(client, owner.id, fan) == FOLLOW_BONUS
    notes = await (await client.get("/api/notifications", headers=owner.headers)).get_json()
    follows = [n for n in notes["items"] if n["type"] == "follow.new"]
    assert len(follows) == 3 and follows[0]["data"]["userId"] == fan.id
    assert await _db(app).read(ledger.mismatched_accounts) == []
