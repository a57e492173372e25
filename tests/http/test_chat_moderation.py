"""POST /api/integrations/oauth/chat/channels/:channelId/moderate and the channel.ban/unban events."""

from __future__ import annotations

import uuid

import pytest


async def expect_error(response, status, code):
    body = await response.get_json()
    assert response.status_code == status, body
    assert body["error"] == code, body
    return body


async def test_ban_publishes_channel_ban_and_blocks_chat(chat_env):
    streamer, troll = await chat_env.user(), await chat_env.user()
    response = await chat_env.moderate(streamer, streamer.id, action="ban", userId=troll.id, reason="spam")
    assert response.status_code == 200
    body = await response.get_json()
    assert body == {
        "success": True,
        "action": "ban",
        "changed": True,
        "endsAt": None,
        "messageId": None,
        "user": {"userId": troll.id, "username": troll.username, "displayName": troll.username},
    }
    [event] = chat_env.named("channel.ban")
    assert event.channel_id == streamer.id
    data = event.data
    assert (data["userId"], data["username"], data["displayName"]) == (troll.id, troll.username, troll.username)
    assert data["moderator"] == {"userId": streamer.id, "username": streamer.username, "displayName": streamer.username}
    assert data["reason"] == "spam" and data["isPermanent"] is True and data["endsAt"] is None
    assert (await chat_env.send(troll, streamer.id)).status_code == 403


async def test_timeout_by_username_any_case_has_an_end(chat_env, mock_clock):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    response = await chat_env.moderate(
        streamer, streamer.id, action="timeout", username=viewer.username.upper(), durationSeconds=90
    )
    body = await response.get_json()
    assert response.status_code == 200 and body["user"]["userId"] == viewer.id
    data = chat_env.named("channel.ban")[0].data
    assert data["isPermanent"] is False and data["durationSeconds"] == 90
    assert data["endsAt"] == body["endsAt"] and data["reason"] is None
    mock_clock.jump(90)
    assert (await chat_env.send(viewer, streamer.id, "free")).status_code == 200
    # An expired timeout ended by itself: unban has nothing to lift and emits nothing.
    unban = await chat_env.moderate(streamer, streamer.id, action="unban", userId=viewer.id)
    assert (await unban.get_json())["changed"] is False and chat_env.named("channel.unban") == []


async def test_unban_lifts_a_ban_and_publishes_channel_unban(chat_env):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    await chat_env.moderate(streamer, streamer.id, action="ban", userId=viewer.id)
    response = await chat_env.moderate(streamer, streamer.id, action="unban", username=viewer.username)
    assert response.status_code == 200 and (await response.get_json())["changed"] is True
    [event] = chat_env.named("channel.unban")
    assert event.data["userId"] == viewer.id and event.data["moderator"]["userId"] == streamer.id
    assert event.data["wasPermanent"] is True
    assert (await chat_env.send(viewer, streamer.id)).status_code == 200


async def test_a_later_action_replaces_the_earlier_one(chat_env, mock_clock):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    await chat_env.moderate(streamer, streamer.id, action="ban", userId=viewer.id)
    await chat_env.moderate(streamer, streamer.id, action="timeout", userId=viewer.id, durationSeconds=10)
    await expect_error(await chat_env.send(viewer, streamer.id), 403, "timed_out")
    mock_clock.jump(11)
    assert (await chat_env.send(viewer, streamer.id)).status_code == 200


async def test_delete_removes_the_message_from_history_without_an_event(chat_env):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    keep = (await (await chat_env.send(viewer, streamer.id, "keep")).get_json())["messageId"]
    drop = (await (await chat_env.send(viewer, streamer.id, "drop")).get_json())["messageId"]
    before = [event.name for event in chat_env.events]
    response = await chat_env.moderate(streamer, streamer.id, action="delete", messageId=drop)
    body = await response.get_json()
    assert response.status_code == 200 and body["messageId"] == drop and body["changed"] is True
    assert body["user"]["userId"] == viewer.id
    assert [event.name for event in chat_env.events] == before  # nothing outside the catalogue
    history = await (await chat_env.client.get(f"/api/chat/channels/{streamer.id}/history")).get_json()
    assert [m["messageId"] for m in history["messages"]] == [keep]
    again = await chat_env.moderate(streamer, streamer.id, action="delete", messageId=drop)
    assert (await again.get_json())["changed"] is False
    await expect_error(
        await chat_env.moderate(streamer, streamer.id, action="delete", messageId=str(uuid.uuid4())), 404, "not_found"
    )


async def test_a_message_of_another_channel_cannot_be_deleted_here(chat_env):
    one, two = await chat_env.user(), await chat_env.user()
    theirs = (await (await chat_env.send(two, two.id, "mine")).get_json())["messageId"]
    await expect_error(await chat_env.moderate(one, one.id, action="delete", messageId=theirs), 404, "not_found")


async def test_moderators_moderate_viewers_but_not_the_broadcaster_or_other_moderators(chat_env):
    streamer, mod, other_mod, viewer = await chat_env.users(4)
    await chat_env.grant(streamer.id, mod.id, "moderator")
    await chat_env.grant(streamer.id, other_mod.id, "moderator")
    ok = await chat_env.moderate(mod, streamer.id, action="timeout", userId=viewer.id, durationSeconds=60)
    assert ok.status_code == 200
    assert chat_env.named("channel.ban")[0].data["moderator"]["userId"] == mod.id
    await expect_error(
        await chat_env.moderate(mod, streamer.id, action="ban", userId=streamer.id), 403, "cannot_moderate_broadcaster"
    )
    await expect_error(
        await chat_env.moderate(mod, streamer.id, action="ban", userId=other_mod.id), 403, "cannot_moderate_moderator"
    )
    await expect_error(
        await chat_env.moderate(mod, streamer.id, action="ban", userId=mod.id), 400, "cannot_moderate_self"
    )
    await expect_error(
        await chat_env.moderate(streamer, streamer.id, action="ban", userId=streamer.id), 400, "cannot_moderate_self"
    )
    # The broadcaster may moderate a moderator.
    assert (
        await chat_env.moderate(streamer, streamer.id, action="timeout", userId=mod.id, durationSeconds=5)
    ).status_code == 200
    # A moderator cannot delete the broadcaster's message, but can delete their own.
    streamer_msg = (await (await chat_env.send(streamer, streamer.id, "from the streamer")).get_json())["messageId"]
    own = (await (await chat_env.send(other_mod, streamer.id, "oops")).get_json())["messageId"]
    await expect_error(
        await chat_env.moderate(other_mod, streamer.id, action="delete", messageId=streamer_msg),
        403,
        "cannot_moderate_broadcaster",
    )
    assert (await chat_env.moderate(other_mod, streamer.id, action="delete", messageId=own)).status_code == 200


async def test_viewers_vips_and_expired_moderators_may_not_moderate(chat_env, mock_clock):
    streamer, viewer, vip, former = await chat_env.users(4)
    await chat_env.grant(streamer.id, vip.id, "vip")
    await chat_env.grant(streamer.id, former.id, "moderator", expires_at=chat_env.now_ms() + 1000)
    mock_clock.jump(2)
    for who in (viewer, vip, former):
        await expect_error(
            await chat_env.moderate(who, streamer.id, action="ban", userId=streamer.id), 403, "not_moderator"
        )
    assert chat_env.named("channel.ban") == []


async def test_unknown_targets_are_404(chat_env):
    streamer = await chat_env.user()
    await expect_error(
        await chat_env.moderate(streamer, streamer.id, action="ban", userId=str(uuid.uuid4())), 404, "not_found"
    )
    await expect_error(
        await chat_env.moderate(streamer, streamer.id, action="ban", username="no_such_user_9"), 404, "not_found"
    )
    await expect_error(
        await chat_env.moderate(streamer, str(uuid.uuid4()), action="ban", username="x"), 404, "not_found"
    )


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"action": "mute", "userId": "00000000-0000-0000-0000-000000000000"},
        {"action": "ban"},
        {"action": "timeout", "username": "someone"},
        {"action": "timeout", "username": "someone", "durationSeconds": 0},
        {"action": "timeout", "username": "someone", "durationSeconds": 1_209_601},
        {"action": "timeout", "username": "someone", "durationSeconds": "60"},
        {"action": "timeout", "username": "someone", "durationSeconds": 1.5},
        {"action": "delete"},
        {"action": "ban", "userId": "not-a-uuid"},
        {"action": "ban", "username": "someone", "reason": "r" * 501},
    ],
)
async def test_invalid_moderation_bodies_are_400(chat_env, body):
    streamer = await chat_env.user()
    response = await chat_env.moderate(streamer, streamer.id, **body)
    await expect_error(response, 400, "validation_error")


async def test_timeout_bounds_are_accepted(chat_env):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    for seconds in (1, 1_209_600):
        response = await chat_env.moderate(
            streamer, streamer.id, action="timeout", userId=viewer.id, durationSeconds=seconds
        )
        assert response.status_code == 200
    data = chat_env.named("channel.ban")[-1].data
    assert data["durationSeconds"] == 1_209_600
