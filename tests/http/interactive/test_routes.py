"""Interactive control over HTTP: the OAuth routes, the routes by username and the
dashboard routes share validation and behaviour; events are emitted once per transition."""

from __future__ import annotations

from typing import Any

import pytest

from tests.http.oauth import tokens
from volthub.hub.components import timers

OAUTH = "/api/integrations/oauth"
WRITE = ["channel:interactive:write", "channel:read"]


async def settle(env: Any, channel_id: str) -> None:
    """Once this returns, the channel's actor has taken every deadline step already due: its
    loop is sequential, so a second command is read only after the step that was due."""
    for _ in range(2):
        await env.rt.services.chat.call(channel_id, timers.CountForTimers("settle", "subscription", 0))


async def oauth_headers(env: Any, user: Any, scopes: list[str] = WRITE) -> dict[str, str]:
    return await tokens.oauth_headers(env.app, user.id, scopes)


async def test_poll_lifecycle_over_oauth_and_public_routes(chat_env: Any, mock_clock: Any) -> None:
    owner, viewer, other = await chat_env.user(), await chat_env.user(), await chat_env.user()
    headers = await oauth_headers(chat_env, owner)
    body = {"title": "Best snack?", "options": ["Chips", "Fruit", "Nuts"], "durationSeconds": 60}
    created = await chat_env.client.post(f"{OAUTH}/polls", json=body, headers=headers)
    assert created.status_code == 201, await created.get_data(as_text=True)
    poll = (await created.get_json())["poll"]
    assert poll["status"] == "open" and [o["title"] for o in poll["options"]] == ["Chips", "Fruit", "Nuts"]

    again = await chat_env.client.post(f"{OAUTH}/polls", json=body, headers=headers)
    assert again.status_code == 409 and (await again.get_json())["error"] == "already_active"

    vote_url = f"/api/streams/{owner.username}/polls/{poll['id']}/vote"
    first = poll["options"][0]["id"]
    assert (await chat_env.client.post(vote_url, json={"optionId": first}, headers=viewer.headers)).status_code == 200
    repeat = await chat_env.client.post(vote_url, json={"optionId": first}, headers=viewer.headers)
    assert repeat.status_code == 409 and (await repeat.get_json())["error"] == "already_voted"
    wrong = await chat_env.client.post(vote_url, json={"optionId": "nope"}, headers=other.headers)
    assert wrong.status_code == 400 and (await wrong.get_json())["error"] == "invalid_option"

    public = await chat_env.client.get(f"/api/streams/{owner.username}/polls/active")
    assert (await public.get_json())["poll"]["totalVotes"] == 1

    mock_clock.jump(61)
    await settle(chat_env, owner.id)
    ends = chat_env.named("channel.poll.end")
    assert len(ends) == 1 and ends[0].data["totalVotes"] == 1
    assert ends[0].data["options"][0]["votes"] == 1
    late = await chat_env.client.post(f"{OAUTH}/polls/{poll['id']}/end", json=None, headers=headers)
    assert late.status_code == 409
    assert (await late.get_json())["details"]["status"] == "ended"
    assert len(chat_env.named("channel.poll.begin")) == 1
    cards = [e.data["card"]["type"] for e in chat_env.named("chat.message") if "card" in e.data]
    assert cards == ["poll-begin", "poll-end"]
    after = await chat_env.client.get(f"{OAUTH}/polls/active", headers=headers)
    assert (await after.get_json()) == {"poll": None}


async def test_poll_answers_are_called_options_in_events_and_choices_is_accepted_on_create(chat_env: Any) -> None:
    owner = await chat_env.user()
    headers = await oauth_headers(chat_env, owner)
    body = {"title": "Best snack?", "choices": ["Chips", "Fruit"], "durationSeconds": 60}
    created = await chat_env.client.post(f"{OAUTH}/polls", json=body, headers=headers)
    assert created.status_code == 201, await created.get_data(as_text=True)
    poll = (await created.get_json())["poll"]
    assert [o["title"] for o in poll["options"]] == ["Chips", "Fruit"]
    begins = chat_env.named("channel.poll.begin")
    assert len(begins) == 1 and begins[0].data["options"] == poll["options"] and "choices" not in begins[0].data
    ended = await chat_env.client.post(f"{OAUTH}/polls/{poll['id']}/end", json=None, headers=headers)
    assert ended.status_code == 200
    end = chat_env.named("channel.poll.end")[0].data
    assert end["options"] == (await ended.get_json())["poll"]["options"] and "choices" not in end


@pytest.mark.parametrize(
    "body, field",
    [
        ({"title": "", "options": ["a", "b"], "durationSeconds": 60}, "title"),
        ({"title": "x" * 101, "options": ["a", "b"], "durationSeconds": 60}, "title"),
        ({"title": "ok", "options": ["a"], "durationSeconds": 60}, "options"),
        ({"title": "ok", "options": ["a", "b", "c", "d", "e", "f"], "durationSeconds": 60}, "options"),
        ({"title": "ok", "options": ["a", "x" * 51], "durationSeconds": 60}, "options"),
        ({"title": "ok", "options": ["a", "b"], "durationSeconds": 14}, "durationSeconds"),
        ({"title": "ok", "options": ["a", "b"], "durationSeconds": 1801}, "durationSeconds"),
        ({"title": "ok", "options": ["a", "b"], "durationSeconds": "60"}, "durationSeconds"),
    ],
)
async def test_poll_validation_is_the_same_on_every_route(chat_env: Any, body: dict[str, Any], field: str) -> None:
    owner = await chat_env.user()
    headers = await oauth_headers(chat_env, owner)
    for url, h in (
        (f"{OAUTH}/polls", headers),
        (f"/api/streams/{owner.username}/polls", owner.headers),
        ("/api/dashboard/polls", owner.headers),
    ):
        response = await chat_env.client.post(url, json=body, headers=h)
        assert response.status_code == 400, (url, await response.get_data(as_text=True))
        assert field in str((await response.get_json())["details"])
    assert chat_env.named("channel.poll.begin") == []


async def test_scopes_and_ownership(chat_env: Any) -> None:
    owner, stranger = await chat_env.user(), await chat_env.user()
    read_only = await oauth_headers(chat_env, owner, ["channel:read"])
    refused = await chat_env.client.post(f"{OAUTH}/timers", json={"durationSeconds": 30}, headers=read_only)
    assert refused.status_code == 403
    assert (await chat_env.client.get(f"{OAUTH}/timers", headers=read_only)).status_code == 200
    body = {"title": "t", "options": ["a", "b"], "durationSeconds": 30}
    foreign = await chat_env.client.post(f"/api/streams/{owner.username}/polls", json=body, headers=stranger.headers)
    assert foreign.status_code == 403 and (await foreign.get_json())["error"] == "channel_not_owned"
    oauth_on_dashboard = await chat_env.client.get("/api/dashboard/goals", headers=read_only)
    assert oauth_on_dashboard.status_code == 403


async def test_giveaway_join_draw_end(chat_env: Any) -> None:
    owner = await chat_env.user()
    viewers = [await chat_env.user() for _ in range(3)]
    created = await chat_env.client.post(
        f"/api/streams/{owner.username}/giveaways", json={"title": "A key"}, headers=owner.headers
    )
    assert created.status_code == 201, await created.get_data(as_text=True)
    giveaway = (await created.get_json())["giveaway"]
    join = f"/api/streams/{owner.username}/giveaways/{giveaway['id']}/join"
    for viewer in viewers:
        assert (await chat_env.client.post(join, headers=viewer.headers)).status_code == 200
    twice = await chat_env.client.post(join, headers=viewers[0].headers)
    assert twice.status_code == 409 and (await twice.get_json())["error"] == "already_entered"
    own = await chat_env.client.post(join, headers=owner.headers)
    assert own.status_code == 403

    drawn = await chat_env.client.post(
        f"{OAUTH}/giveaways/{giveaway['id']}/draw", json={"count": 2}, headers=await oauth_headers(chat_env, owner)
    )
    assert drawn.status_code == 200, await drawn.get_data(as_text=True)
    result = (await drawn.get_json())["giveaway"]
    assert result["status"] == "closed" and len(result["winners"]) == 2
    assert len({w["userId"] for w in result["winners"]}) == 2
    ends = chat_env.named("channel.giveaway.end")
    assert len(ends) == 1 and ends[0].data["winners"] == result["winners"]

    reroll = await chat_env.client.post(f"/api/dashboard/giveaways/{giveaway['id']}/draw", headers=owner.headers)
    assert reroll.status_code == 200, await reroll.get_data(as_text=True)
    winners = (await reroll.get_json())["giveaway"]["winners"]
    assert len({w["userId"] for w in winners}) == 3
    empty = await chat_env.client.post(f"/api/dashboard/giveaways/{giveaway['id']}/draw", headers=owner.headers)
    assert empty.status_code == 409 and (await empty.get_json())["error"] == "no_eligible_entries"
    closed = await chat_env.client.post(f"/api/dashboard/giveaways/{giveaway['id']}/end", headers=owner.headers)
    assert closed.status_code == 409 and (await closed.get_json())["details"]["status"] == "closed"
    assert len(chat_env.named("channel.giveaway.end")) == 1


async def test_goals_and_timers_routes(chat_env: Any, mock_clock: Any) -> None:
    owner = await chat_env.user()
    headers = await oauth_headers(chat_env, owner)
    goal = await chat_env.client.post(
        f"{OAUTH}/goals", json={"type": "custom", "title": "Push-ups", "target": 10}, headers=headers
    )
    assert goal.status_code == 201, await goal.get_data(as_text=True)
    goal_id = (await goal.get_json())["goal"]["id"]
    adjusted = await chat_env.client.post(f"{OAUTH}/goals/{goal_id}/adjust", json={"delta": 12}, headers=headers)
    assert (await adjusted.get_json())["goal"]["completed"] is True
    await chat_env.client.post(f"{OAUTH}/goals/{goal_id}/adjust", json={"delta": -5}, headers=headers)
    await chat_env.client.post(f"{OAUTH}/goals/{goal_id}/adjust", json={"delta": 5}, headers=headers)
    assert len(chat_env.named("channel.goal.completed")) == 1
    assert len(chat_env.named("channel.goal.progress")) == 3
    zero = await chat_env.client.post(f"{OAUTH}/goals/{goal_id}/adjust", json={"delta": 0}, headers=headers)
    assert zero.status_code == 400

    timer = await chat_env.client.post(
        f"{OAUTH}/timers", json={"title": "Break", "durationSeconds": 30}, headers=headers
    )
    assert timer.status_code == 201, await timer.get_data(as_text=True)
    timer_id = (await timer.get_json())["timer"]["id"]
    paused = await chat_env.client.post(f"{OAUTH}/timers/{timer_id}/pause", headers=headers)
    assert (await paused.get_json())["timer"]["status"] == "paused"
    again = await chat_env.client.post(f"{OAUTH}/timers/{timer_id}/pause", headers=headers)
    assert again.status_code == 409 and (await again.get_json())["details"]["status"] == "paused"
    await chat_env.client.post(f"{OAUTH}/timers/{timer_id}/resume", headers=headers)
    added = await chat_env.client.post(f"{OAUTH}/timers/{timer_id}/add-time", json={"seconds": 10}, headers=headers)
    assert (await added.get_json())["timer"]["remainingSeconds"] == 40
    mock_clock.jump(41)
    await settle(chat_env, owner.id)
    actions = [e.data["action"] for e in chat_env.named("channel.timer.update")]
    assert actions == ["started", "paused", "resumed", "time_added", "ended"]


async def test_event_types_show_every_interactive_event_as_emitted(chat_env: Any) -> None:
    document = await (await chat_env.client.get("/api/events/types")).get_json()
    interactive = {t["name"]: t["emitted"] for t in document["types"] if t["group"] == "Interaction"}
    assert len(interactive) == 10 and all(interactive.values()), interactive


async def test_the_openapi_document_lists_the_routes_with_their_statuses(chat_env: Any) -> None:
    paths = (await (await chat_env.client.get("/api/openapi.json")).get_json())["paths"]
    start = paths["/api/integrations/oauth/polls"]["post"]
    assert {"201", "400", "403", "409", "429"} <= set(start["responses"])
    assert start["x-required-scope"] == "channel:interactive:write"
    pause = paths["/api/integrations/oauth/timers/{timer_id}/pause"]["post"]
    assert "invalid_state" in pause.get("summary", "") + pause.get("description", "")
    for path in (
        "/api/integrations/oauth/predictions/{prediction_id}/resolve",
        "/api/dashboard/goals/{goal_id}/adjust",
        "/api/streams/{username}/polls/{poll_id}/vote",
        "/api/streams/{username}/giveaways/{giveaway_id}/join",
    ):
        assert "post" in paths[path], path


async def test_draw_body_is_optional_but_checked(chat_env: Any) -> None:
    owner, viewer = await chat_env.user(), await chat_env.user()
    created = await chat_env.client.post("/api/dashboard/giveaways", json={"title": "Key"}, headers=owner.headers)
    giveaway_id = (await created.get_json())["giveaway"]["id"]
    join = f"/api/streams/{owner.username}/giveaways/{giveaway_id}/join"
    assert (await chat_env.client.post(join, headers=viewer.headers)).status_code == 200
    draw = f"/api/dashboard/giveaways/{giveaway_id}/draw"
    broken = await chat_env.client.post(
        draw, data=b"{nope", headers={**owner.headers, "Content-Type": "application/json"}
    )
    assert broken.status_code == 400 and (await broken.get_json())["error"] == "invalid_json"
    for body in ({"count": 0}, {"count": 51}, {"count": "2"}):
        response = await chat_env.client.post(draw, json=body, headers=owner.headers)
        assert response.status_code == 400, body
    assert chat_env.named("channel.giveaway.end") == []
    drawn = await chat_env.client.post(draw, headers=owner.headers)
    assert drawn.status_code == 200 and len((await drawn.get_json())["giveaway"]["winners"]) == 1


async def test_voting_needs_user_write_like_joining_and_betting(backend_chat_env: Any) -> None:
    chat_env = backend_chat_env
    owner, viewer = await chat_env.user(), await chat_env.user()
    body = {"title": "Scopes?", "options": ["Yes", "No"], "durationSeconds": 60}
    created = await chat_env.client.post(f"{OAUTH}/polls", json=body, headers=await oauth_headers(chat_env, owner))
    poll = (await created.get_json())["poll"]
    vote_url = f"/api/streams/{owner.username}/polls/{poll['id']}/vote"
    choice = {"optionId": poll["options"][0]["id"]}
    read_only = await oauth_headers(chat_env, viewer, ["chat:read", "channel:read"])
    refused = await chat_env.client.post(vote_url, json=choice, headers=read_only)
    assert refused.status_code == 403, await refused.get_data(as_text=True)
    assert (await refused.get_json())["error"] == "insufficient_scope"
    active = await chat_env.client.get(f"/api/streams/{owner.username}/polls/active")
    assert (await active.get_json())["poll"]["totalVotes"] == 0
    writer = await oauth_headers(chat_env, viewer, ["user:write"])
    assert (await chat_env.client.post(vote_url, json=choice, headers=writer)).status_code == 200
