"""Interactive events reach real clients exactly once and in order: an SSE client (httpx-sse)
and the official socket.io-client (node) watch one channel while it runs a poll, a
prediction, a giveaway, a goal and a timer through the REST routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import trio
from httpx_sse import aconnect_sse

from tests.conftest import LiveServer, make_settings, register_live, served
from tests.js_client import JS_DIR, node_with_official_client

INTERACTIVE = (
    "channel.poll.begin,channel.poll.end,channel.prediction.begin,channel.prediction.lock,"
    "channel.prediction.end,channel.giveaway.begin,channel.giveaway.end,channel.goal.progress,"
    "channel.goal.completed,channel.timer.update"
)
EXPECTED = [
    "channel.poll.begin",
    "channel.poll.end",
    "channel.prediction.begin",
    "channel.prediction.lock",
    "channel.prediction.end",
    "channel.giveaway.begin",
    "channel.giveaway.end",
    "channel.goal.progress",
    "channel.goal.completed",
    "channel.timer.update",
    "channel.timer.update",
    "channel.timer.update",
]


@pytest.fixture
async def server(sqlite_url: str, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    settings = make_settings(sqlite_url, ratelimit={"enabled": False})
    async with served(nursery, settings) as server:
        yield server


async def scenario(http: httpx.AsyncClient, owner: Any, viewer: Any) -> None:
    """Every transition once, through the dashboard and by-username routes."""

    async def post(path: str, user: Any = owner, **body: Any) -> dict[str, Any]:
        response = await http.post(path, headers=user.headers, json=body or None)
        assert response.status_code in (200, 201), (path, response.text)
        return response.json()

    poll = (await post("/api/dashboard/polls", title="Q?", options=["a", "b"], durationSeconds=60))["poll"]
    await post(f"/api/streams/{owner.username}/polls/{poll['id']}/vote", viewer, optionId=poll["options"][0]["id"])
    await post(f"/api/dashboard/polls/{poll['id']}/end")
    prediction = (await post("/api/dashboard/predictions", title="W?", outcomes=["y", "n"], windowSeconds=60))[
        "prediction"
    ]
    await post(f"/api/dashboard/predictions/{prediction['id']}/lock")
    await post(
        f"/api/dashboard/predictions/{prediction['id']}/resolve", winningOutcomeId=prediction["outcomes"][0]["id"]
    )
    giveaway = (await post("/api/dashboard/giveaways", title="Key"))["giveaway"]
    await post(f"/api/streams/{owner.username}/giveaways/{giveaway['id']}/join", viewer)
    await post(f"/api/dashboard/giveaways/{giveaway['id']}/draw", count=1)
    goal = (await post("/api/dashboard/goals", type="custom", title="G", target=1))["goal"]
    await post(f"/api/dashboard/goals/{goal['id']}/adjust", delta=1)
    timer = (await post("/api/dashboard/timers", durationSeconds=600))["timer"]
    await post(f"/api/dashboard/timers/{timer['id']}/pause")
    await post(f"/api/dashboard/timers/{timer['id']}/end")


async def test_sse_and_official_socketio_client_see_each_event_once_in_order(server: LiveServer) -> None:
    node = node_with_official_client()
    owner, viewer = await register_live(server.url), await register_live(server.url)
    sse_seen: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http, trio.open_nursery() as nursery:
        process = await nursery.start(
            lambda task_status: trio.run_process(
                [node, "interactive_client.mjs", server.events_url, owner.token, str(len(EXPECTED))],
                cwd=JS_DIR,
                stdout=__import__("subprocess").PIPE,
                check=False,
                task_status=task_status,
            )
        )
        lines = b""
        with trio.fail_after(30):
            while b"ready" not in lines:
                lines += await process.stdout.receive_some()
        async with aconnect_sse(
            http,
            "GET",
            "/api/events/stream",
            headers=owner.headers,
            params={"events": INTERACTIVE, "messages": "named"},
        ) as source:
            events = source.aiter_sse()
            with trio.fail_after(10):
                assert (await events.__anext__()).event == "connected"
            await scenario(http, owner, viewer)
            with trio.fail_after(20):
                async for sse in events:
                    sse_seen.append({"name": sse.event, "envelope": orjson.loads(sse.data)})
                    if len(sse_seen) == len(EXPECTED):
                        break
            with trio.move_on_after(0.5):  # nothing more arrives
                async for sse in events:
                    sse_seen.append({"name": sse.event, "envelope": orjson.loads(sse.data)})
        with trio.fail_after(60):
            while True:
                chunk = await process.stdout.receive_some()
                if not chunk:
                    break
                lines += chunk
        await process.wait()
    assert [e["name"] for e in sse_seen] == EXPECTED
    assert [e["envelope"]["event"] for e in sse_seen] == EXPECTED
    assert [e["envelope"]["data"]["action"] for e in sse_seen[-3:]] == ["started", "paused", "ended"]
    assert process.returncode == 0, lines.decode()[-2000:]
    js = orjson.loads(lines.decode().strip().splitlines()[-1])
    assert [envelope["event"] for envelope in js["envelopes"]] == EXPECTED
    assert js["byName"] == EXPECTED
    assert [envelope["data"] for envelope in js["envelopes"]] == [e["envelope"]["data"] for e in sse_seen]
