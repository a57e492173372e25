"""Public chat routes: history, viewers, stats, policy, slash commands."""

from __future__ import annotations

import uuid

import pytest

from volthub.services.chat import ChatReads


async def get(env, path, status=200):
    response = await env.client.get(path)
    body = await response.get_json()
    assert response.status_code == status, body
    return body


class FakePresence:
    """Stands in for the presence service another feature provides."""

    def __init__(self):
        self.viewers: dict[str, tuple[list[str], int]] = {}

    def snapshot(self, channel_id):
        return self.viewers.get(channel_id, ([], 0))


@pytest.fixture
def presence(chat_env):
    """The app's presence and its chat reads, which are handed presence when made, both the fake."""
    fake = FakePresence()
    rt = chat_env.rt
    rt.services.presence = fake
    rt.services.chat_reads = ChatReads(rt.db, rt.clock, fake)
    return fake


# --- history ---------------------------------------------------------------------------------


async def test_history_is_oldest_first_and_keeps_the_event_payload(chat_env, mock_clock):
    streamer, fan = await chat_env.user(), await chat_env.user()
    await chat_env.send(fan, streamer.id, f"hi @{streamer.username}", effect="rainbow")
    mock_clock.jump(1)
    await chat_env.send(streamer, streamer.id, "welcome")
    body = await get(chat_env, f"/api/chat/channels/{streamer.id}/history")
    assert [m["message"] for m in body["messages"]] == [f"hi @{streamer.username}", "welcome"]
    events = [event.data for event in chat_env.named("chat.message")]
    assert body["messages"] == events  # the chat.message payload with timestamp, optional members as sent
    assert "mentions" in body["messages"][0] and "mentions" not in body["messages"][1]


async def test_history_holds_at_most_100_and_honours_limit(chat_env):
    streamer = await chat_env.user()
    for number in range(105):
        assert (await chat_env.send(streamer, streamer.id, f"m{number}")).status_code == 200
    body = await get(chat_env, f"/api/chat/channels/{streamer.id}/history")
    assert [m["message"] for m in body["messages"]] == [f"m{n}" for n in range(5, 105)]
    body = await get(chat_env, f"/api/chat/channels/{streamer.id}/history?limit=3")
    assert [m["message"] for m in body["messages"]] == ["m102", "m103", "m104"]
    for bad in ("0", "101", "x"):
        error = await get(chat_env, f"/api/chat/channels/{streamer.id}/history?limit={bad}", 400)
        assert error["error"] == "validation_error"


async def test_history_of_an_unknown_or_malformed_channel(chat_env):
    assert (await get(chat_env, f"/api/chat/channels/{uuid.uuid4()}/history", 404))["error"] == "not_found"
    assert (await get(chat_env, "/api/chat/channels/nope!/history", 400))["error"] == "invalid_id"


async def test_history_keeps_card_messages(chat_env):
    streamer = await chat_env.user()
    await chat_env.rt.services.chat.post_card(streamer.id, "volts-celebration", {"amount": 500})
    [message] = (await get(chat_env, f"/api/chat/channels/{streamer.id}/history"))["messages"]
    assert message["card"] == {"type": "volts-celebration", "payload": {"amount": 500}}
    assert message["isSystem"] is True


# --- viewers ---------------------------------------------------------------------------------


async def test_viewers_list_roles_and_anonymous_count_by_id_or_username(chat_env, presence):
    streamer, mod, sub, plain = await chat_env.users(4)
    await chat_env.grant(streamer.id, mod.id, "moderator")
    await chat_env.subscribe(streamer.id, sub.id, months=3)
    presence.viewers[streamer.id] = ([plain.id, sub.id, mod.id, streamer.id, str(uuid.uuid4())], 7)
    for ref in (streamer.id, streamer.username, streamer.username.upper()):
        body = await get(chat_env, f"/api/chat/channels/{ref}/viewers")
        assert body["channelId"] == streamer.id and body["channelUsername"] == streamer.username
        assert [(v["userId"], v["roles"]) for v in body["viewers"]] == [
            (streamer.id, ["broadcaster"]),
            (mod.id, ["moderator"]),
            (sub.id, ["subscriber"]),
            (plain.id, []),
        ]
        assert body["viewers"][0]["username"] == streamer.username and "avatarUrl" in body["viewers"][0]
        assert (body["authenticatedCount"], body["anonymousCount"], body["total"]) == (4, 7, 11)


async def test_viewers_without_a_presence_service_is_nobody(chat_env):
    streamer = await chat_env.user()
    body = await get(chat_env, f"/api/chat/channels/{streamer.id}/viewers")
    assert (body["viewers"], body["anonymousCount"], body["total"]) == ([], 0, 0)
    assert (await get(chat_env, "/api/chat/channels/nobody_like_this/viewers", 404))["error"] == "not_found"


# --- stats -----------------------------------------------------------------------------------


async def test_stats_count_the_last_five_minutes(chat_env, presence, mock_clock):
    streamer, one, two = await chat_env.user(), await chat_env.user(), await chat_env.user()
    await chat_env.send(one, streamer.id, "old")
    mock_clock.jump(301)
    for user in (one, two, two):
        await chat_env.send(user, streamer.id, "new")
    await chat_env.rt.services.chat.post_card(streamer.id, "sound-send", {})  # not chat activity
    presence.viewers[streamer.id] = ([one.id], 4)
    body = await get(chat_env, f"/api/chat/channels/{streamer.id}/stats")
    assert body["windowSeconds"] == 300 and body["messages"] == 3
    assert body["messagesPerMinute"] == 0.6 and body["chatters"] == 2
    assert (body["viewers"], body["authenticatedViewers"], body["anonymousViewers"]) == (5, 1, 4)


# --- policy and slash commands ---------------------------------------------------------------


async def test_policy_shows_modes_and_their_rules(chat_env):
    streamer = await chat_env.user()
    body = await get(chat_env, f"/api/chat/channels/{streamer.id}/policy")
    assert body["settings"]["slowMode"] is False and body["exemptRoles"] == ["broadcaster", "moderator"]
    assert body["limits"]["messageMaxLength"] == 500 and body["limits"]["replySnippetMaxLength"] == 100
    assert set(body["effects"]) == {"glow", "galaxy", "rainbow", "gigantify"}
    await chat_env.patch_settings(streamer, slowModeSeconds=20, emoteOnly=True)
    body = await get(chat_env, f"/api/chat/channels/{streamer.id}/policy")
    assert body["settings"]["slowModeSeconds"] == 20
    text = " ".join(body["rules"])
    assert "20 seconds" in text and "Emote-only" in text and "exempt" in text


async def test_slash_commands_list_only_what_the_api_supports(chat_env):
    body = await get(chat_env, "/api/chat/slash-commands")
    names = [command["name"] for command in body["commands"]]
    assert {"/timeout", "/ban", "/unban", "/delete", "/slow", "/followers", "/subscribers", "/emoteonly"} <= set(names)
    assert "/clear" not in names
    for command in body["commands"]:
        assert command["path"].startswith("/api/integrations/oauth/chat/")
        assert command["scope"] in ("chat:moderate", "stream:write")


async def test_public_chat_routes_are_in_the_openapi_document_as_public(chat_env):
    document = await get(chat_env, "/api/openapi.json")
    for path in ("/api/chat/channels/{channel_id}/history", "/api/chat/slash-commands"):
        assert document["paths"][path]["get"]["x-access"] == "public"
    send = document["paths"]["/api/integrations/oauth/chat/channels/{channel_id}/messages"]["post"]
    assert send["x-required-scope"] == "chat:write"
    properties = document["components"]["schemas"]["ChatMessageOut"]["properties"]
    assert {"mentions", "card", "isSystem", "replyTo", "subscriberMonths"} <= set(properties)
