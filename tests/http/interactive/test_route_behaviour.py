"""What each interactive route does, on SQLite and PostgreSQL: the state it changes, the
channel points it moves and the events it emits. Routes here had only existence checks
before: betting, the active prediction and giveaway, cancelling a prediction, goals and
their target and reset, a timer's reset, the poll end and giveaway draw and end by username,
and the global emotes."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.http.chat_env import ChatEnv, chat_app
from tests.http.oauth import tokens
from tests.points_support import mint_points, points_balance

OAUTH = "/api/integrations/oauth"
WRITE = ["channel:interactive:write", "channel:read"]
# A 1×1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture
async def env(database_url: str) -> AsyncIterator[ChatEnv]:
    application = chat_app(database_url)
    async with application.test_app():
        yield ChatEnv(application)


async def oauth_headers(env: ChatEnv, user: Any) -> dict[str, str]:
    return await tokens.oauth_headers(env.app, user.id, WRITE)


async def test_bets_spend_points_show_on_the_active_prediction_and_a_cancel_refunds_them(env: ChatEnv) -> None:
    owner, alice, bob = await env.user(), await env.user(), await env.user()
    headers = await oauth_headers(env, owner)
    for viewer in (alice, bob):
        await mint_points(env.rt.db, owner.id, viewer.id, 100)
    assert (await (await env.client.get(f"{OAUTH}/predictions/active", headers=headers)).get_json()) == {
        "prediction": None
    }
    body = {"title": "Boss down?", "outcomes": ["Yes", "No"], "windowSeconds": 120}
    created = await env.client.post(f"{OAUTH}/predictions", json=body, headers=headers)
    assert created.status_code == 201, await created.get_data(as_text=True)
    prediction = (await created.get_json())["prediction"]
    yes, no = (o["id"] for o in prediction["outcomes"])
    bet = f"/api/streams/{owner.username}/predictions/{prediction['id']}/bet"

    placed = await env.client.post(bet, json={"outcomeId": yes, "points": 30}, headers=alice.headers)
    assert placed.status_code == 200, await placed.get_data(as_text=True)
    assert (await placed.get_json())["points"] == 30 and (await placed.get_json())["balance"] == 70
    more = await (await env.client.post(bet, json={"outcomeId": yes, "points": 20}, headers=alice.headers)).get_json()
    assert (more["points"], more["balance"]) == (50, 50)  # the same outcome adds up
    other = await env.client.post(bet, json={"outcomeId": no, "points": 5}, headers=alice.headers)
    assert other.status_code == 409 and (await other.get_json())["error"] == "already_bet"
    broke = await env.client.post(bet, json={"outcomeId": no, "points": 101}, headers=bob.headers)
    assert broke.status_code == 400 and (await broke.get_json())["error"] == "insufficient_funds"
    assert (await env.client.post(bet, json={"outcomeId": no, "points": 40}, headers=bob.headers)).status_code == 200
    assert (await points_balance(env.client, owner.id, alice), await points_balance(env.client, owner.id, bob)) == (
        50,
        60,
    )

    for path, request_headers in (
        (f"{OAUTH}/predictions/active", headers),
        (f"/api/streams/{owner.username}/predictions/active", {}),
    ):
        active = (await (await env.client.get(path, headers=request_headers)).get_json())["prediction"]
        assert active["id"] == prediction["id"] and active["totalPoints"] == 90
        assert [(o["users"], o["points"]) for o in active["outcomes"]] == [(1, 50), (1, 40)]

    cancelled = await env.client.post(f"{OAUTH}/predictions/{prediction['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200 and (await cancelled.get_json())["prediction"]["status"] == "cancelled"
    assert (await points_balance(env.client, owner.id, alice), await points_balance(env.client, owner.id, bob)) == (
        100,
        100,
    )  # refunded in full
    [end] = env.named("channel.prediction.end")
    assert end.data["status"] == "cancelled"
    again = await env.client.post(f"{OAUTH}/predictions/{prediction['id']}/cancel", headers=headers)
    assert again.status_code == 409
    assert (await points_balance(env.client, owner.id, alice)) == 100  # a second cancel refunds nothing more
    after = await env.client.get(f"/api/streams/{owner.username}/predictions/active")
    assert (await after.get_json()) == {"prediction": None}
    late = await env.client.post(bet, json={"outcomeId": yes, "points": 1}, headers=bob.headers)
    assert late.status_code == 409 and await points_balance(env.client, owner.id, bob) == 100


async def test_the_active_giveaway_and_draw_and_end_by_username(env: ChatEnv) -> None:
    owner, stranger = await env.user(), await env.user()
    viewers = [await env.user() for _ in range(3)]
    headers = await oauth_headers(env, owner)
    base = f"/api/streams/{owner.username}/giveaways"
    assert (await (await env.client.get(f"{base}/active")).get_json()) == {"giveaway": None}
    created = await env.client.post(base, json={"title": "A key"}, headers=owner.headers)
    giveaway_id = (await created.get_json())["giveaway"]["id"]
    for viewer in viewers:
        assert (await env.client.post(f"{base}/{giveaway_id}/join", headers=viewer.headers)).status_code == 200
    for path, request_headers in ((f"{OAUTH}/giveaways/active", headers), (f"{base}/active", {})):
        active = (await (await env.client.get(path, headers=request_headers)).get_json())["giveaway"]
        assert (active["id"], active["status"], active["entries"]) == (giveaway_id, "open", 3)

    refused = await env.client.post(f"{base}/{giveaway_id}/draw", json={"count": 1}, headers=stranger.headers)
    assert refused.status_code == 403 and env.named("channel.giveaway.end") == []
    drawn = await env.client.post(f"{base}/{giveaway_id}/draw", json={"count": 2}, headers=owner.headers)
    assert drawn.status_code == 200, await drawn.get_data(as_text=True)
    result = (await drawn.get_json())["giveaway"]
    assert result["status"] == "closed" and len({w["userId"] for w in result["winners"]}) == 2
    assert {w["userId"] for w in result["winners"]} <= {v.id for v in viewers}
    [ended] = env.named("channel.giveaway.end")
    assert ended.data["winners"] == result["winners"]
    assert (await (await env.client.get(f"{base}/active")).get_json()) == {"giveaway": None}

    second = await env.client.post(base, json={"title": "Another"}, headers=owner.headers)
    second_id = (await second.get_json())["giveaway"]["id"]
    assert (await env.client.post(f"{base}/{second_id}/end", headers=stranger.headers)).status_code == 403
    closed = await env.client.post(f"{base}/{second_id}/end", headers=owner.headers)
    assert closed.status_code == 200, await closed.get_data(as_text=True)
    assert (await closed.get_json())["giveaway"]["status"] == "closed"
    assert (await closed.get_json())["giveaway"]["winners"] == []
    assert len(env.named("channel.giveaway.end")) == 2
    assert (await env.client.post(f"{base}/{second_id}/end", headers=owner.headers)).status_code == 409
    assert len(env.named("channel.giveaway.end")) == 2


async def test_the_poll_end_by_username_ends_it_once_with_its_votes(env: ChatEnv) -> None:
    owner, viewer, stranger = await env.user(), await env.user(), await env.user()
    base = f"/api/streams/{owner.username}/polls"
    body = {"title": "Snack?", "options": ["Chips", "Fruit"], "durationSeconds": 300}
    poll = (await (await env.client.post(base, json=body, headers=owner.headers)).get_json())["poll"]
    fruit = poll["options"][1]["id"]
    vote = await env.client.post(f"{base}/{poll['id']}/vote", json={"optionId": fruit}, headers=viewer.headers)
    assert vote.status_code == 200
    assert (await env.client.post(f"{base}/{poll['id']}/end", headers=stranger.headers)).status_code == 403
    assert env.named("channel.poll.end") == []
    ended = await env.client.post(f"{base}/{poll['id']}/end", headers=owner.headers)
    assert ended.status_code == 200, await ended.get_data(as_text=True)
    result = (await ended.get_json())["poll"]
    assert result["status"] == "ended" and result["totalVotes"] == 1 and result["endedAt"] is not None
    assert [o["votes"] for o in result["options"]] == [0, 1]
    [end] = env.named("channel.poll.end")
    assert end.data["totalVotes"] == 1
    again = await env.client.post(f"{base}/{poll['id']}/end", headers=owner.headers)
    assert again.status_code == 409 and len(env.named("channel.poll.end")) == 1
    assert (await (await env.client.get(f"{base}/active")).get_json()) == {"poll": None}


async def test_goals_are_listed_retargeted_and_reset(env: ChatEnv) -> None:
    owner = await env.user()
    headers = await oauth_headers(env, owner)
    assert (await (await env.client.get(f"/api/streams/{owner.username}/goals")).get_json()) == {"goals": []}
    created = await env.client.post(
        f"{OAUTH}/goals", json={"type": "custom", "title": "Push-ups", "target": 10}, headers=headers
    )
    goal_id = (await created.get_json())["goal"]["id"]
    await env.client.post(f"{OAUTH}/goals/{goal_id}/adjust", json={"delta": 6}, headers=headers)
    for path, request_headers in ((f"{OAUTH}/goals", headers), (f"/api/streams/{owner.username}/goals", {})):
        [listed] = (await (await env.client.get(path, headers=request_headers)).get_json())["goals"]
        assert (listed["id"], listed["current"], listed["target"], listed["completed"]) == (goal_id, 6, 10, False)

    retarget = await env.client.post(f"{OAUTH}/goals/{goal_id}/target", json={"target": 5}, headers=headers)
    assert retarget.status_code == 200, await retarget.get_data(as_text=True)
    goal = (await retarget.get_json())["goal"]
    assert (goal["target"], goal["current"], goal["completed"]) == (5, 6, True)  # reached by the new target
    assert len(env.named("channel.goal.completed")) == 1
    bad = await env.client.post(f"{OAUTH}/goals/{goal_id}/target", json={"target": 0}, headers=headers)
    assert bad.status_code == 400

    reset = await env.client.post(f"{OAUTH}/goals/{goal_id}/reset", headers=headers)
    assert reset.status_code == 200
    goal = (await reset.get_json())["goal"]
    assert (goal["current"], goal["completed"], goal["status"]) == (0, False, "in_progress")
    await env.client.post(f"{OAUTH}/goals/{goal_id}/adjust", json={"delta": 5}, headers=headers)
    assert len(env.named("channel.goal.completed")) == 2  # completes again after the reset
    [listed] = (await (await env.client.get(f"/api/streams/{owner.username}/goals")).get_json())["goals"]
    assert listed["current"] == 5


async def test_a_timer_reset_restores_its_duration_and_keeps_its_state(env: ChatEnv) -> None:
    owner = await env.user()
    headers = await oauth_headers(env, owner)
    started = await env.client.post(f"{OAUTH}/timers", json={"title": "Break", "durationSeconds": 30}, headers=headers)
    timer_id = (await started.get_json())["timer"]["id"]
    await env.client.post(f"{OAUTH}/timers/{timer_id}/add-time", json={"seconds": 600}, headers=headers)
    await env.client.post(f"{OAUTH}/timers/{timer_id}/pause", headers=headers)
    reset = await env.client.post(f"{OAUTH}/timers/{timer_id}/reset", headers=headers)
    assert reset.status_code == 200, await reset.get_data(as_text=True)
    timer = (await reset.get_json())["timer"]
    assert (timer["status"], timer["remainingSeconds"]) == ("paused", 30)  # paused stays paused
    await env.client.post(f"{OAUTH}/timers/{timer_id}/end", headers=headers)
    rerun = (await (await env.client.post(f"{OAUTH}/timers/{timer_id}/reset", headers=headers)).get_json())["timer"]
    assert rerun["status"] == "running" and 29 <= rerun["remainingSeconds"] <= 30  # an ended timer runs again
    actions = [e.data["action"] for e in env.named("channel.timer.update")]
    assert actions == ["started", "time_added", "paused", "reset", "ended", "reset"]


async def test_the_global_emotes_are_the_operators_and_no_channels(env: ChatEnv) -> None:
    from volthub.services.media import check_image

    streamer = await env.user()
    assert (await (await env.client.get("/api/emotes/global")).get_json()) == {"emotes": []}
    emotes = env.rt.services.emotes
    await emotes.add(None, "volthype", check_image(PNG, None, emotes.max_bytes, emotes.max_side), None)
    uploaded = await env.client.put(
        "/api/emotes/mine/mine_only", data=PNG, headers={**streamer.headers, "Content-Type": "image/png"}
    )
    assert uploaded.status_code == 201, await uploaded.get_data(as_text=True)
    listed = (await (await env.client.get("/api/emotes/global")).get_json())["emotes"]
    assert [(e["code"], e["scope"]) for e in listed] == [("volthype", "global")]
    assert (await env.client.get(listed[0]["url"])).status_code == 200
