"""GET/PATCH /api/integrations/oauth/chat/settings, and what survives a restart."""

from __future__ import annotations

import pytest

from tests.http.chat_env import CHAT_EPOCH, ChatEnv, chat_app
from volthub.hub.clock import TrioClock

FRESH = {"slowMode": False, "slowModeSeconds": 0, "followersOnly": False, "subscribersOnly": False, "emoteOnly": False}


async def get_settings(env, user):
    response = await env.client.get("/api/integrations/oauth/chat/settings", headers=user.headers)
    assert response.status_code == 200
    return await response.get_json()


async def test_a_fresh_channel_shows_all_modes_off(chat_env):
    streamer = await chat_env.user()
    assert await get_settings(chat_env, streamer) == FRESH


async def test_patch_is_partial_and_returns_the_whole_object(chat_env):
    streamer = await chat_env.user()
    response = await chat_env.patch_settings(streamer, followersOnly=True)
    assert response.status_code == 200
    assert await response.get_json() == {**FRESH, "followersOnly": True}
    response = await chat_env.patch_settings(streamer, emoteOnly=True, slowModeSeconds=15)
    expected = {**FRESH, "followersOnly": True, "emoteOnly": True, "slowMode": True, "slowModeSeconds": 15}
    assert await response.get_json() == expected
    assert await get_settings(chat_env, streamer) == expected
    assert (await (await chat_env.patch_settings(streamer)).get_json()) == expected  # empty patch: no change


async def test_settings_are_the_token_owners_channel(chat_env):
    one, two = await chat_env.user(), await chat_env.user()
    await chat_env.patch_settings(one, subscribersOnly=True)
    assert await get_settings(chat_env, two) == FRESH


async def test_slow_mode_rule_over_http(chat_env):
    streamer = await chat_env.user()
    body = await (await chat_env.patch_settings(streamer, slowMode=True)).get_json()
    assert (body["slowMode"], body["slowModeSeconds"]) == (True, 30)
    body = await (await chat_env.patch_settings(streamer, slowMode=False)).get_json()
    assert (body["slowMode"], body["slowModeSeconds"]) == (False, 0)
    response = await chat_env.patch_settings(streamer, slowMode=True, slowModeSeconds=0)
    error = await response.get_json()
    assert response.status_code == 400 and error["error"] == "invalid_settings"
    assert error["details"]["field"] == "slowModeSeconds"
    assert await get_settings(chat_env, streamer) == FRESH  # nothing half-written


@pytest.mark.parametrize(
    "body",
    [
        {"slowModeSeconds": 3601},
        {"slowModeSeconds": -1},
        {"slowModeSeconds": 2.5},
        {"slowModeSeconds": "10"},
        {"slowMode": "true"},
        {"slowMode": None},
        {"followersOnly": 1},
        {"emoteOnly": None},
    ],
)
async def test_invalid_patches_are_400(chat_env, body):
    streamer = await chat_env.user()
    response = await chat_env.patch_settings(streamer, **body)
    assert response.status_code == 400
    assert (await response.get_json())["error"] == "validation_error"
    assert await get_settings(chat_env, streamer) == FRESH


async def test_settings_routes_need_a_token(chat_env):
    assert (await chat_env.client.get("/api/integrations/oauth/chat/settings")).status_code == 401
    response = await chat_env.client.patch("/api/integrations/oauth/chat/settings", json={"emoteOnly": True})
    assert response.status_code == 401


async def test_settings_bans_and_timeouts_survive_a_restart(database_url, mock_clock):
    """Stop the app, start a new one on the same database: the channel's state is back."""
    clock = TrioClock(start=CHAT_EPOCH)  # one timeline for both apps
    first = chat_app(database_url, clock)
    async with first.test_app():
        env = ChatEnv(first)
        streamer, banned, timed_out, fan = (await env.user(), await env.user(), await env.user(), await env.user())
        await env.patch_settings(streamer, slowModeSeconds=45, followersOnly=True)
        await env.moderate(streamer, streamer.id, action="ban", userId=banned.id)
        await env.moderate(streamer, streamer.id, action="timeout", userId=timed_out.id, durationSeconds=600)
        await env.follow(fan, streamer.id)
        assert (await env.send(fan, streamer.id, "before the restart")).status_code == 200

    mock_clock.jump(100)
    second = chat_app(database_url, clock)
    async with second.test_app():
        env = ChatEnv(second)
        expected = {**FRESH, "slowMode": True, "slowModeSeconds": 45, "followersOnly": True}
        assert await get_settings(env, streamer) == expected
        for user in (banned, timed_out):
            await env.follow(user, streamer.id)
        assert (await (await env.send(banned, streamer.id)).get_json())["error"] == "banned"
        response = await env.send(timed_out, streamer.id)
        body = await response.get_json()
        assert response.status_code == 403 and body["error"] == "timed_out"
        assert body["details"]["remainingSeconds"] == 500
        # The slow-mode clock is the store's too: the fan's last message was 100 s ago (> 45).
        assert (await env.send(fan, streamer.id, "after the restart")).status_code == 200
        slow = await (await env.send(fan, streamer.id, "too soon")).get_json()
        assert slow["error"] == "slow_mode" and slow["details"]["waitSeconds"] == 45
        history = await (await env.client.get(f"/api/chat/channels/{streamer.id}/history")).get_json()
        assert [m["message"] for m in history["messages"]] == ["before the restart", "after the restart"]
        mock_clock.jump(500)
        assert (await env.send(timed_out, streamer.id, "free again")).status_code == 200
