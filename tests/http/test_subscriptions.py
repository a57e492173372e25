"""Subscriptions over HTTP: paying, gifting, managing, rosters, chat
standing, expiry under MockClock, and the sandbox that changes nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from tests.conftest import RegisteredUser
from tests.http.chat_env import ChatEnv, chat_app
from volthub.persistence import ledger

DAY = 86_400


@pytest.fixture
async def env(database_url: str) -> Any:
    application = chat_app(database_url)
    async with application.test_app():
        yield ChatEnv(application)


async def fund(env: ChatEnv, user: RegisteredUser, amount: int = 10_000) -> None:
    response = await env.client.post("/api/volts/purchase", json={"amount": amount}, headers=user.headers)
    assert response.status_code == 200, await response.get_data(as_text=True)


async def post(env: ChatEnv, user: RegisteredUser, path: str, **body: Any) -> Any:
    return await env.client.post(f"/api/subscriptions/{path}", json=body, headers=user.headers)


async def get(env: ChatEnv, user: RegisteredUser | None, path: str, **query: Any) -> Any:
    headers = user.headers if user else {}
    response = await env.client.get(path, headers=headers, query_string=query)
    assert response.status_code == 200, await response.get_data(as_text=True)
    return await response.get_json()


async def wallet(env: ChatEnv, user: RegisteredUser) -> int:
    return int((await get(env, user, "/api/volts/wallet"))["balance"])


async def test_subscribe_pays_the_creator_emits_and_refuses_a_second(env: ChatEnv) -> None:
    creator, fan = await env.user(), await env.user()
    await fund(env, fan, 600)
    response = await post(env, fan, "subscribe", creatorId=creator.id, tier="tier1")
    assert response.status_code == 201, await response.get_data(as_text=True)
    sub = (await response.get_json())["subscription"]
    assert (sub["userId"], sub["creatorId"], sub["tier"], sub["months"], sub["status"]) == (
        fan.id,
        creator.id,
        "tier1",
        1,
        "active",
    )
    assert await wallet(env, fan) == 100 and await wallet(env, creator) == 500
    [event] = await arrived(env, "channel.subscribe", 1)
    assert event.channel_id == creator.id
    assert event.data["userId"] == fan.id and event.data["isGift"] is False and event.data["months"] == 1

    again = await post(env, fan, "subscribe", creatorId=creator.id, tier="tier1")
    assert again.status_code == 409 and (await again.get_json())["error"] == "already_subscribed"
    poor = await env.user()
    refused = await post(env, poor, "subscribe", creatorId=creator.id, tier="tier3")
    assert refused.status_code == 400 and (await refused.get_json())["error"] == "insufficient_funds"
    assert await get(env, poor, "/api/subscriptions/my-subscriptions") == {"subscriptions": []}
    assert (await post(env, fan, "subscribe", creatorId=fan.id)).status_code == 400
    assert (await post(env, fan, "subscribe", creatorId=creator.id, tier="tier9")).status_code == 400
    mine = await get(env, fan, "/api/subscriptions/my-subscriptions")
    assert [s["creatorId"] for s in mine["subscriptions"]] == [creator.id]
    db = env.rt.db
    assert await db.read(ledger.mismatched_accounts) == []


async def test_count_and_roster_are_authoritative_and_minimal(env: ChatEnv) -> None:
    creator = await env.user()
    fans = [await env.user() for _ in range(3)]
    for fan in fans:
        await fund(env, fan)
        assert (await post(env, fan, "subscribe", creatorId=creator.id)).status_code == 201
    assert await get(env, creator, "/api/developer/subscriptions/count") == {"count": 3}
    page = await get(env, creator, "/api/developer/subscriptions", page=2, perPage=2)
    assert page["total"] == 3 and page["page"] == 2 and page["perPage"] == 2
    assert len(page["roster"]) == 1
    assert set(page["roster"][0]) == {"userId", "username", "displayName", "tier", "isGift", "gifter", "expiresAt"}
    first = await get(env, creator, "/api/developer/subscriptions")
    assert first["perPage"] == 50 and [r["userId"] for r in first["roster"]] == [f.id for f in fans]
    for bad in ({"perPage": 0}, {"perPage": 101}, {"page": 0}):
        response = await env.client.get("/api/developer/subscriptions", headers=creator.headers, query_string=bad)
        assert response.status_code == 400
    mine = await get(env, creator, f"/api/subscriptions/creator/{creator.id}/subscribers", perPage=2)
    assert mine["total"] == 3 and len(mine["subscribers"]) == 2
    other = await env.client.get(f"/api/subscriptions/creator/{creator.id}/subscribers", headers=fans[0].headers)
    assert other.status_code == 403


async def test_gifts_direct_and_random_reach_the_right_people(env: ChatEnv) -> None:
    creator, gifter, friend = await env.user(), await env.user(), await env.user()
    await fund(env, gifter, 10_000)
    response = await post(env, gifter, "gift/direct", creatorId=creator.id, recipientUsername=friend.username)
    assert response.status_code == 201, await response.get_data(as_text=True)
    body = await response.get_json()
    assert body["quantity"] == 1 and body["subscriptions"][0]["userId"] == friend.id
    assert body["subscriptions"][0]["isGift"] is True
    assert body["subscriptions"][0]["gifter"]["userId"] == gifter.id
    [gift] = await arrived(env, "channel.subscription.gift", 1)
    assert gift.data["userId"] == gifter.id and gift.data["quantity"] == 1
    assert [r["userId"] for r in gift.data["recipients"]] == [friend.id]
    assert [e.data["userId"] for e in await arrived(env, "channel.subscribe", 1)] == [friend.id]
    again = await post(env, gifter, "gift/direct", creatorId=creator.id, recipientId=friend.id)
    assert again.status_code == 409
    assert (await post(env, gifter, "gift/direct", creatorId=creator.id, recipientId=gifter.id)).status_code == 400
    both = await post(env, gifter, "gift/direct", creatorId=creator.id, recipientId=friend.id, recipientUsername="x")
    assert both.status_code == 400

    followers = [await env.user() for _ in range(3)]
    for follower in [*followers, friend, gifter]:
        await env.follow(follower, creator.id)
    before = await wallet(env, gifter)
    response = await post(env, gifter, "gift/random", creatorId=creator.id, quantity=10)
    assert response.status_code == 201, await response.get_data(as_text=True)
    body = await response.get_json()
    # Never the gifter, never someone subscribed (friend): the three other followers.
    assert sorted(s["userId"] for s in body["subscriptions"]) == sorted(f.id for f in followers)
    assert body["quantity"] == 3
    assert before - await wallet(env, gifter) == 3 * 500
    none_left = await post(env, gifter, "gift/random", creatorId=creator.id, quantity=1)
    assert none_left.status_code == 409 and (await none_left.get_json())["error"] == "no_eligible_recipients"
    board = await get(env, None, f"/api/subscriptions/creator/{creator.id}/gift-leaderboard")
    assert board["leaderboard"] == [
        {"rank": 1, "userId": gifter.id, "username": gifter.username, "displayName": gifter.username, "gifts": 4}
    ]


async def test_cancel_ends_at_once_and_chat_standing_follows(env: ChatEnv) -> None:
    creator, fan = await env.user(), await env.user()
    await fund(env, fan)
    assert (await env.patch_settings(creator, subscribersOnly=True)).status_code == 200
    assert (await env.send(fan, creator.id, "before")).status_code == 403
    assert (await post(env, fan, "subscribe", creatorId=creator.id, tier="tier2")).status_code == 201
    assert (await env.send(fan, creator.id, "subbed")).status_code in (200, 201)
    [message] = [e for e in await arrived(env, "chat.message", 1) if e.data["message"] == "subbed"]
    assert message.data["isSubscriber"] is True and message.data["subscriberMonths"] == 1
    assert "subscriber" in message.data["badges"]

    update = await post(env, fan, "manage", creatorId=creator.id, action="update", tier="tier3")
    assert update.status_code == 200 and (await update.get_json())["subscription"]["tier"] == "tier3"
    cancel = await post(env, fan, "manage", creatorId=creator.id, action="cancel")
    assert cancel.status_code == 200
    ended = (await cancel.get_json())["subscription"]
    assert ended["status"] == "ended" and ended["endReason"] == "canceled"
    [end] = await arrived(env, "channel.subscription.end", 1)
    assert end.data["reason"] == "canceled" and end.data["userId"] == fan.id and end.data["tier"] == "tier3"
    assert (await env.send(fan, creator.id, "after")).status_code == 403
    assert (await post(env, fan, "manage", creatorId=creator.id, action="cancel")).status_code == 404
    # Subscribing again continues the tenure.
    again = await post(env, fan, "subscribe", creatorId=creator.id)
    assert (await again.get_json())["subscription"]["months"] == 2


async def arrived(env: ChatEnv, name: str, count: int, *, test: bool = False) -> list[Any]:
    """Wait until `count` events `name` reached the bus: on PostgreSQL they come through the
    event-log relay, a moment after the answer. The mock clock stands still meanwhile (real
    time passes only in a worker thread)."""

    def seen() -> list[Any]:
        return [e for e in env.events if (e.name == name or test) and e.is_test == test]

    for _ in range(500):
        if len(seen()) >= count:
            break
        await trio.to_thread.run_sync(time.sleep, 0.01)
    return seen()


async def ended(env: ChatEnv, count: int) -> list[Any]:
    """Wait until the app's expiry service has emitted `count` ends."""
    return await arrived(env, "channel.subscription.end", count)


async def test_expiry_fires_at_that_moment_once(env: ChatEnv, mock_clock: MockClock) -> None:
    creator, fan, gifted = await env.user(), await env.user(), await env.user()
    await fund(env, fan)
    assert (await post(env, fan, "subscribe", creatorId=creator.id)).status_code == 201
    assert (await post(env, fan, "gift/direct", creatorId=creator.id, recipientId=gifted.id)).status_code == 201
    started = env.now_ms()
    mock_clock.jump(30 * DAY - 5)
    await env.rt.services.subscriptions.expire_due()
    assert env.named("channel.subscription.end") == []
    mock_clock.jump(10)
    ends = await ended(env, 2)
    assert sorted((e.data["userId"], e.data["reason"], e.data["isGift"]) for e in ends) == sorted(
        [(fan.id, "expired", False), (gifted.id, "expired", True)]
    )
    assert all(e.data["endedAt"] == e.data["expiresAt"] for e in ends)
    assert await env.rt.services.subscriptions.expire_due() == 0
    assert len(env.named("channel.subscription.end")) == 2
    assert await env.rt.services.subscriptions.count(creator.id) == 0  # (the tokens expired too)
    assert env.now_ms() - started >= 30 * DAY * 1000


async def test_the_sandbox_sends_money_events_and_changes_nothing(env: ChatEnv) -> None:
    creator = await env.user()

    def snapshot(tx: Any) -> tuple[Any, ...]:
        return tuple(
            tx.scalar(f"SELECT COUNT(*) FROM {table}")
            for table in ("subscriptions", "ledger_entries", "ledger_accounts", "notifications", "webhook_deliveries")
        )

    before = await env.rt.db.read(snapshot)
    for event_type in ("subscription", "gift_subscription", "volt_tip"):
        response = await env.client.post(
            "/api/integrations/oauth/test/events",
            json={"eventType": event_type, "channelId": creator.id},
            headers=creator.headers,
        )
        assert response.status_code in (200, 201), await response.get_data(as_text=True)
    names = [e.name for e in await arrived(env, "", 3, test=True)]
    assert names == ["channel.subscribe", "channel.subscription.gift", "channel.volts"]
    assert all(e.data["isTest"] is True for e in env.events if e.is_test)
    assert await env.rt.db.read(snapshot) == before
    assert await get(env, creator, "/api/developer/subscriptions/count") == {"count": 0}


async def test_a_subscription_earns_the_points_bonus_in_that_channel(env: ChatEnv) -> None:
    creator, fan = await env.user(), await env.user()
    await fund(env, fan)
    assert (await post(env, fan, "subscribe", creatorId=creator.id)).status_code == 201
    balance = await get(env, fan, f"/api/channel-points/{creator.id}/balance")
    assert balance == {"channelId": creator.id, "balance": 1000}
    elsewhere = await get(env, fan, f"/api/channel-points/{fan.id}/balance")
    assert elsewhere["balance"] == 0
    board = await get(env, None, f"/api/channel-points/{creator.id}/leaderboard")
    assert [(r["userId"], r["points"]) for r in board["leaderboard"]] == [(fan.id, 1000)]
    assert await env.rt.db.read(ledger.mismatched_accounts) == []
