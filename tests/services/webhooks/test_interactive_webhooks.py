"""Webhooks for poll and giveaway events (1.7.0): a poll's and a giveaway's lifecycle reach a
real HTTPS receiver, signed, once per transition; votes and entries send nothing."""

from __future__ import annotations

import orjson
import trio
from trio.testing import MockClock

from tests.services.webhooks.test_delivery import Env, arrivals, assert_all_verified, env, io_clock  # noqa: F401


async def test_poll_and_giveaway_lifecycles_are_delivered(env: Env, io_clock: MockClock) -> None:  # noqa: F811
    await env.create(["channel.poll.begin", "channel.poll.end", "channel.giveaway.begin", "channel.giveaway.end"])
    headers = env.owner.headers

    async def post(path: str, user_headers: dict[str, str] = headers, **body: object) -> dict:
        response = await env.client.post(path, json=body or None, headers=user_headers)
        assert response.status_code in (200, 201), await response.get_data(as_text=True)
        return await response.get_json()

    poll = (await post("/api/dashboard/polls", title="Q?", options=["a", "b"], durationSeconds=30))["poll"]
    await post(
        f"/api/streams/{env.owner.username}/polls/{poll['id']}/vote", env.fan.headers, optionId=poll["options"][0]["id"]
    )
    giveaway = (await post("/api/dashboard/giveaways", title="Key"))["giveaway"]
    await post(f"/api/streams/{env.owner.username}/giveaways/{giveaway['id']}/join", env.fan.headers)
    await post(f"/api/dashboard/giveaways/{giveaway['id']}/draw")
    await trio.sleep(31)  # virtual: the poll ends by itself
    await arrivals(env, 4)
    assert_all_verified(env)
    names = [d.headers["x-service-event"] for d in env.receiver.received]
    assert sorted(names) == sorted(
        ["channel.poll.begin", "channel.poll.end", "channel.giveaway.begin", "channel.giveaway.end"]
    )
    bodies = {d.headers["x-service-event"]: orjson.loads(d.body) for d in env.receiver.received}
    assert bodies["channel.poll.end"]["data"]["totalVotes"] == 1
    assert bodies["channel.giveaway.end"]["data"]["winners"][0]["userId"] == env.fan.id
    await trio.sleep(5)
    assert len(env.receiver.received) == 4
