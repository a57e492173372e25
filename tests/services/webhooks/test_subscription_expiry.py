"""A subscription's expiry, end to end under MockClock: the expiry service ends it at that
moment and `channel.subscription.end` (reason `expired`, the subscriber's `userId`) reaches
an HTTPS webhook receiver, once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import trio
from trio.testing import MockClock

from tests.services.webhooks.test_delivery import Env, assert_all_verified, io_clock, make_env

__all__ = ["io_clock"]
DAY = 86_400


@pytest.fixture
async def env(io_clock: MockClock, nursery: trio.Nursery, receiver_tls: Any, database_url: str) -> AsyncIterator[Env]:
    # The expiry service sleeps until the expiry itself, not every poll through a month.
    async for made in make_env(nursery, receiver_tls, database_url, subscriptions={"poll_seconds": 86_400.0}):
        yield made


async def test_expiry_reaches_an_https_receiver_with_reason_expired(env: Env, io_clock: MockClock) -> None:
    await env.create(["channel.subscription.end", "channel.subscribe"])
    paid = await env.client.post("/api/volts/purchase", json={"amount": 500}, headers=env.fan.headers)
    assert paid.status_code == 200
    response = await env.client.post(
        "/api/subscriptions/subscribe", json={"creatorId": env.owner.id, "tier": "tier1"}, headers=env.fan.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    expires_at = (await response.get_json())["subscription"]["expiresAt"]
    with trio.fail_after(60):
        await env.receiver.wait_for(1)
    assert orjson.loads(env.receiver.received[0].body)["data"]["userId"] == env.fan.id

    io_clock.jump(30 * DAY + 60)  # every timer of the app comes due at once, as after a long wait
    with trio.fail_after(60):
        await env.receiver.wait_for(2)
    await trio.sleep(120)
    every = [orjson.loads(d.body) for d in env.receiver.received]
    bodies = [b for b in every if b.get("event", b.get("type")) == "channel.subscription.end"]
    # Fired once: one event id (a delivery may repeat when the jump outran an attempt's
    # timeout; receivers dedupe by event id).
    assert bodies
    assert len({b["id"] for b in bodies}) == 1
    body = bodies[0]
    data = body["data"]
    assert data["reason"] == "expired" and data["userId"] == env.fan.id
    assert data["expiresAt"] == data["endedAt"] == expires_at
    assert data["isGift"] is False and data["gifter"] is None
    assert_all_verified(env)
