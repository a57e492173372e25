"""POST /api/integrations/oauth/chat/channels/:channelId/messages, on every listener that
serves it: the main port and the Events API gateway (the chat environments below are
parametrised over both, so the two can never answer differently)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from tests.http.chat_env import LISTENERS, ChatEnv, chat_app
from tests.http.oauth.tokens import oauth_headers
from volthub.http.ratelimit import category_of


@pytest.fixture(params=LISTENERS)
async def chat_env(request: pytest.FixtureRequest, sqlite_url: str) -> AsyncIterator[ChatEnv]:
    application = chat_app(sqlite_url)
    async with application.test_app():
        yield ChatEnv(application, request.param)


@pytest.fixture(params=LISTENERS)
async def backend_chat_env(request: pytest.FixtureRequest, database_url: str) -> AsyncIterator[ChatEnv]:
    application = chat_app(database_url)
    async with application.test_app():
        yield ChatEnv(application, request.param)


async def json_of(response):
    return await response.get_json()


async def expect_error(response, status, code):
    body = await response.get_json()
    assert response.status_code == status, body
    assert body["error"] == code, body
    assert isinstance(body["message"], str) and body["message"]
    return body


# --- success and the event -------------------------------------------------------------------


async def test_send_returns_success_and_message_id_and_publishes_the_payload(chat_env):
    streamer = await chat_env.user()
    response = await chat_env.send(streamer, streamer.id, "first!")
    assert response.status_code == 200
    body = await json_of(response)
    assert body["success"] is True and uuid.UUID(body["messageId"])
    [event] = chat_env.named("chat.message")
    assert event.channel_id == streamer.id
    data = event.data
    assert data["messageId"] == body["messageId"]
    assert data["userId"] == streamer.id and data["username"] == streamer.username
    assert data["displayName"] == streamer.username and data["message"] == "first!"
    assert data["badges"] == ["broadcaster"]
    assert (data["isMod"], data["isVip"], data["isSubscriber"]) == (False, False, False)
    assert data["timestamp"].endswith("Z")
    for absent in ("subscriberMonths", "mentions", "replyTo", "effect", "effectColor", "card", "isSystem"):
        assert absent not in data


async def test_a_first_party_token_posts_in_any_channel(chat_env):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    response = await chat_env.send(viewer, streamer.id, "hi streamer")
    assert response.status_code == 200
    data = chat_env.named("chat.message")[0].data
    assert data["userId"] == viewer.id and data["badges"] == [] and data["channelId"] == streamer.id


async def test_channel_id_must_be_a_uuid_of_an_existing_channel(chat_env):
    viewer = await chat_env.user()
    await expect_error(await chat_env.send(viewer, "not-a-uuid"), 400, "invalid_id")
    await expect_error(await chat_env.send(viewer, viewer.username), 400, "invalid_id")
    await expect_error(await chat_env.send(viewer, str(uuid.uuid4())), 404, "not_found")


async def test_a_send_in_a_channel_whose_actor_runs_reads_no_account(backend_chat_env, monkeypatch):
    env = backend_chat_env
    streamer, viewer = await env.user(), await env.user()
    accounts = env.rt.services.accounts
    reads: list[str] = []
    read_user = accounts.get_user

    async def counted(user_id):
        reads.append(user_id)
        return await read_user(user_id)

    monkeypatch.setattr(accounts, "get_user", counted)
    assert (await env.send(viewer, streamer.id, "one")).status_code == 200
    assert reads == [streamer.id]  # no actor yet: the channel is looked up
    assert (await env.send(viewer, streamer.id, "two")).status_code == 200
    assert reads == [streamer.id]  # its actor runs: no second look-up
    assert [e.data["message"] for e in env.named("chat.message")] == ["one", "two"]


async def test_a_channel_removed_while_its_actor_runs_is_still_404(backend_chat_env):
    from volthub.persistence import users as users_repo

    env = backend_chat_env
    streamer, viewer = await env.user(), await env.user()
    assert (await env.send(viewer, streamer.id, "before")).status_code == 200
    await env.rt.db.write(lambda tx: users_repo.delete_users(tx, [streamer.id]))
    await expect_error(await env.send(viewer, streamer.id, "after"), 404, "not_found")
    await expect_error(await env.send(viewer, streamer.id, "after", sendAsBot=True), 404, "not_found")


async def test_a_token_is_required(chat_env):
    streamer = await chat_env.user()
    response = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages", json={"message": "hi"}
    )
    await expect_error(response, 401, "missing_token")


async def test_the_route_is_tagged_for_the_chat_send_budget(chat_env):
    view = chat_env.app.view_functions["chat.send_message"]
    assert category_of(view) == "chat_send"
    assert category_of(chat_env.app.view_functions["chat.moderate"]) == "moderation"


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"message": ""},
        {"message": "   \n\t "},
        {"message": "a" * 501},
        {"message": 42},
        {"message": None},
        {"message": "ok", "effect": "sparkle"},
        {"message": "ok", "effect": "GLOW"},
        {"message": "ok", "effectColor": "#12345"},
        {"message": "ok", "effectColor": "red"},
        {"message": "ok", "sendAsBot": "yes"},
        {"message": "ok", "replyTo": "abc"},
        {"message": "ok", "replyTo": {"messageId": "x", "username": "u"}},
        {"message": "ok", "replyTo": {"messageId": "x", "username": "u", "snippet": "s" * 101}},
        {"message": "ok", "replyTo": {"messageId": "x", "username": "u", "message": "s" * 101}},
        {"message": "other\u0007control"},
    ],
)
async def test_invalid_bodies_are_400_and_store_nothing(chat_env, body):
    streamer = await chat_env.user()
    response = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages", json=body, headers=streamer.headers
    )
    error = await expect_error(response, 400, "validation_error")
    assert error["details"]["fields"]
    assert chat_env.named("chat.message") == []
    history = await json_of(await chat_env.client.get(f"/api/chat/channels/{streamer.id}/history"))
    assert history["messages"] == []


async def test_nul_is_refused_before_validation(chat_env):
    streamer = await chat_env.user()
    response = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages",
        json={"message": "nul\u0000byte"},
        headers=streamer.headers,
    )
    await expect_error(response, 400, "invalid_request")
    assert chat_env.named("chat.message") == []


async def test_boundaries_500_code_points_and_each_effect(chat_env):
    streamer = await chat_env.user()
    assert (await chat_env.send(streamer, streamer.id, "a" * 500)).status_code == 200
    assert (await chat_env.send(streamer, streamer.id, "\U0001f525" * 500)).status_code == 200
    for effect in ("glow", "galaxy", "rainbow", "gigantify"):
        response = await chat_env.send(streamer, streamer.id, "fx", effect=effect, effectColor="#A1b2C3")
        assert response.status_code == 200
    last = chat_env.named("chat.message")[-1].data
    assert last["effect"] == "gigantify" and last["effectColor"] == "#a1b2c3"


async def test_length_rule_over_http_counts_code_points(chat_env):
    # (Hypothesis drives the validator itself in tests/hub/test_chat_rules.py; its examples
    # cannot share this test's Trio fixtures, so the HTTP check walks the boundary.)
    streamer = await chat_env.user()
    for char in ("x", "é", "\U0001f600", "界", "e\u0301"[1]):
        for length in (1, 499, 500, 501, 502):
            response = await chat_env.send(streamer, streamer.id, (char if char.strip() else "x") * length)
            assert response.status_code == (200 if length <= 500 else 400), (char, length)


async def test_send_as_bot_says_no_bot_is_connected(chat_env):
    streamer = await chat_env.user()
    body = await expect_error(
        await chat_env.send(streamer, streamer.id, "beep", sendAsBot=True), 403, "bot_not_connected"
    )
    assert "bot" in body["message"]
    assert (await chat_env.send(streamer, streamer.id, "not a bot", sendAsBot=False)).status_code == 200


# --- replies ---------------------------------------------------------------------------------


async def test_reply_carries_the_original_author_and_snippet(chat_env):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    original = (await json_of(await chat_env.send(viewer, streamer.id, "question?")))["messageId"]
    reply = {"messageId": original, "username": viewer.username.upper(), "snippet": "question?"}
    assert (await chat_env.send(streamer, streamer.id, "answer", replyTo=reply)).status_code == 200
    data = chat_env.named("chat.message")[-1].data
    assert data["replyTo"] == {
        "messageId": original,
        "userId": viewer.id,
        "username": viewer.username,
        "snippet": "question?",
    }


async def test_reply_accepts_message_as_an_alias_of_snippet(chat_env):
    streamer = await chat_env.user()
    original = (await json_of(await chat_env.send(streamer, streamer.id, "x")))["messageId"]
    alias = {"messageId": original, "username": streamer.username, "message": "s" * 100}
    assert (await chat_env.send(streamer, streamer.id, "y", replyTo=alias)).status_code == 200
    assert chat_env.named("chat.message")[-1].data["replyTo"]["snippet"] == "s" * 100


async def test_reply_to_a_message_of_another_channel_or_a_deleted_one_is_refused(chat_env):
    one, two = await chat_env.user(), await chat_env.user()
    elsewhere = (await json_of(await chat_env.send(two, two.id, "over here")))["messageId"]
    reply = {"messageId": elsewhere, "username": two.username, "snippet": "over here"}
    await expect_error(await chat_env.send(one, one.id, "re", replyTo=reply), 400, "invalid_reply_to")
    unknown = {"messageId": str(uuid.uuid4()), "username": two.username, "snippet": ""}
    await expect_error(await chat_env.send(one, one.id, "re", replyTo=unknown), 400, "invalid_reply_to")
    mine = (await json_of(await chat_env.send(one, one.id, "soon gone")))["messageId"]
    assert (await chat_env.moderate(one, one.id, action="delete", messageId=mine)).status_code == 200
    gone = {"messageId": mine, "username": one.username, "snippet": "soon gone"}
    await expect_error(await chat_env.send(one, one.id, "re", replyTo=gone), 400, "invalid_reply_to")


# --- mentions --------------------------------------------------------------------------------


async def test_mentions_resolve_existing_users_case_insensitively(chat_env):
    streamer = await chat_env.user()
    alice = await chat_env.user("Alice_" + uuid.uuid4().hex[:6])
    bob = await chat_env.user()
    text = f"hey @{alice.username.lower()} and @{bob.username.upper()} and @nobody_here_xyz and @{alice.username}"
    assert (await chat_env.send(streamer, streamer.id, text)).status_code == 200
    mentions = chat_env.named("chat.message")[-1].data["mentions"]
    assert mentions == [
        {"userId": alice.id, "username": alice.username, "displayName": alice.username},
        {"userId": bob.id, "username": bob.username, "displayName": bob.username},
    ]


async def test_no_valid_mention_means_no_mentions_field(chat_env):
    streamer = await chat_env.user()
    await chat_env.send(streamer, streamer.id, "mail me@example.com or @ghost_user_000")
    assert "mentions" not in chat_env.named("chat.message")[-1].data


# --- roles, badges, subscriptions ------------------------------------------------------------


async def test_badges_and_flags_follow_roles_and_subscriptions(chat_env):
    streamer, fan = await chat_env.user(), await chat_env.user()
    await chat_env.grant(streamer.id, fan.id, "moderator")
    await chat_env.grant(streamer.id, fan.id, "vip")
    await chat_env.subscribe(streamer.id, fan.id, months=7)
    await chat_env.send(fan, streamer.id, "hi")
    data = chat_env.named("chat.message")[-1].data
    assert data["badges"] == ["moderator", "vip", "subscriber"]
    assert (data["isMod"], data["isVip"], data["isSubscriber"], data["subscriberMonths"]) == (True, True, True, 7)
    # The roles are per channel: in another channel the same user is a plain viewer.
    other = await chat_env.user()
    await chat_env.send(fan, other.id, "hi there")
    assert chat_env.named("chat.message")[-1].data["badges"] == []


async def test_expired_roles_and_subscriptions_do_not_count(chat_env, mock_clock):
    streamer, fan = await chat_env.user(), await chat_env.user()
    await chat_env.grant(streamer.id, fan.id, "vip", expires_at=chat_env.now_ms() + 60_000)
    await chat_env.subscribe(streamer.id, fan.id, months=1, days=1)
    mock_clock.jump(2 * 86_400)
    await chat_env.send(fan, streamer.id, "still here")
    data = chat_env.named("chat.message")[-1].data
    assert data["badges"] == [] and not data["isVip"] and not data["isSubscriber"]
    assert "subscriberMonths" not in data


# --- bans and timeouts -----------------------------------------------------------------------


async def test_banned_users_get_banned(chat_env):
    streamer, troll = await chat_env.user(), await chat_env.user()
    assert (await chat_env.moderate(streamer, streamer.id, action="ban", userId=troll.id)).status_code == 200
    await expect_error(await chat_env.send(troll, streamer.id, "let me in"), 403, "banned")
    # Only in that channel.
    assert (await chat_env.send(troll, troll.id, "my own channel")).status_code == 200


async def test_timed_out_users_see_the_remaining_time_until_it_ends(chat_env, mock_clock):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    await chat_env.moderate(streamer, streamer.id, action="timeout", userId=viewer.id, durationSeconds=600)
    mock_clock.jump(100)
    body = await expect_error(await chat_env.send(viewer, streamer.id, "?"), 403, "timed_out")
    assert body["details"]["remainingSeconds"] == 500
    mock_clock.jump(500)
    assert (await chat_env.send(viewer, streamer.id, "I'm back")).status_code == 200


# --- chat modes ------------------------------------------------------------------------------


async def test_followers_only(chat_env):
    streamer = await chat_env.user()
    viewer, follower, mod = await chat_env.user(), await chat_env.user(), await chat_env.user()
    await chat_env.follow(follower, streamer.id)
    await chat_env.grant(streamer.id, mod.id, "moderator")
    assert (await chat_env.patch_settings(streamer, followersOnly=True)).status_code == 200
    await expect_error(await chat_env.send(viewer, streamer.id), 403, "followers_only")
    assert (await chat_env.send(follower, streamer.id)).status_code == 200
    assert (await chat_env.send(mod, streamer.id)).status_code == 200
    assert (await chat_env.send(streamer, streamer.id)).status_code == 200


async def test_subscribers_only(chat_env):
    streamer, viewer, subscriber = await chat_env.user(), await chat_env.user(), await chat_env.user()
    await chat_env.follow(viewer, streamer.id)
    await chat_env.subscribe(streamer.id, subscriber.id, months=2)
    await chat_env.patch_settings(streamer, subscribersOnly=True)
    await expect_error(await chat_env.send(viewer, streamer.id), 403, "subscribers_only")
    assert (await chat_env.send(subscriber, streamer.id)).status_code == 200
    assert (await chat_env.send(streamer, streamer.id)).status_code == 200


async def test_emote_only(chat_env):
    streamer, viewer, mod = await chat_env.user(), await chat_env.user(), await chat_env.user()
    await chat_env.grant(streamer.id, mod.id, "moderator")
    await chat_env.patch_settings(streamer, emoteOnly=True)
    # Emote codes count only when the emote resolver knows them (global or the channel's).
    from tests.http.test_emotes_badges_teams import PNG, upload

    for code in ("hype", "volt_love", "gg"):
        assert (await upload(chat_env, streamer, code, PNG)).status_code == 201
    await expect_error(await chat_env.send(viewer, streamer.id, ":unknown: :hype:"), 403, "emote_only")
    await expect_error(await chat_env.send(viewer, streamer.id, "words"), 403, "emote_only")
    await expect_error(await chat_env.send(viewer, streamer.id, ":hype: words"), 403, "emote_only")
    assert (await chat_env.send(viewer, streamer.id, ":hype: :volt_love:")).status_code == 200
    assert (await chat_env.send(viewer, streamer.id, "\U0001f525\U0001f525 :gg:")).status_code == 200
    assert (await chat_env.send(mod, streamer.id, "mods may type")).status_code == 200


async def test_slow_mode_is_per_user_with_a_wait(chat_env, mock_clock):
    streamer, one, two, mod = (
        await chat_env.user(),
        await chat_env.user(),
        await chat_env.user(),
        await chat_env.user(),
    )
    await chat_env.grant(streamer.id, mod.id, "moderator")
    await chat_env.patch_settings(streamer, slowMode=True, slowModeSeconds=30)
    assert (await chat_env.send(one, streamer.id)).status_code == 200
    mock_clock.jump(10)
    body = await expect_error(await chat_env.send(one, streamer.id), 403, "slow_mode")
    assert body["details"]["waitSeconds"] == 20
    assert (await chat_env.send(two, streamer.id)).status_code == 200  # per user
    for _ in range(3):
        assert (await chat_env.send(mod, streamer.id)).status_code == 200  # exempt
        assert (await chat_env.send(streamer, streamer.id)).status_code == 200
    mock_clock.jump(20)
    assert (await chat_env.send(one, streamer.id)).status_code == 200


async def test_a_refused_message_does_not_start_the_slow_mode_clock(chat_env):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    await chat_env.patch_settings(streamer, slowModeSeconds=30, emoteOnly=True)
    await expect_error(await chat_env.send(viewer, streamer.id, "text"), 403, "emote_only")
    assert (await chat_env.send(viewer, streamer.id, "\U0001f44c")).status_code == 200


async def test_concurrent_sends_never_break_slow_mode(chat_env):
    """The channel's actor serialises sends: of many at once, one per user gets through."""
    streamer, one, two = await chat_env.user(), await chat_env.user(), await chat_env.user()
    await chat_env.patch_settings(streamer, slowModeSeconds=60)
    statuses: dict[str, list[int]] = {one.id: [], two.id: []}

    async def send(user):
        response = await chat_env.send(user, streamer.id, "race")
        statuses[user.id].append(response.status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(12):
            nursery.start_soon(send, one)
            nursery.start_soon(send, two)
    for user_statuses in statuses.values():
        assert sorted(user_statuses) == [200] + [403] * 11
    assert len(chat_env.named("chat.message")) == 2


@pytest.mark.parametrize("listener", LISTENERS)
async def test_a_full_channel_queue_is_503_channel_busy(sqlite_url, listener):
    app = chat_app(sqlite_url, chat={"inbox_size": 1})
    async with app.test_app():
        env = ChatEnv(app, listener)
        streamer = await env.user()
        assert (await env.send(streamer, streamer.id, "load the actor")).status_code == 200
        # Hold the store's one writer, so the actor waits in its transaction.
        holding, release = threading.Event(), threading.Event()

        def hold(tx):
            holding.set()
            release.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(env.rt.db.write, hold)
            await trio.to_thread.run_sync(holding.wait)
            nursery.start_soon(env.send, streamer, streamer.id, "in the actor's transaction")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(env.send, streamer, streamer.id, "queued")
            await trio.testing.wait_all_tasks_blocked()
            response = await env.send(streamer, streamer.id, "one too many")
            body = await expect_error(response, 503, "channel_busy")
            assert response.headers["Retry-After"] == "1" and body["message"]
            release.set()


# --- OAuth tokens (third-party): real grants, through the OAuth feature's grant_lookup -------------


async def test_an_oauth_token_posts_only_in_its_owners_channel(chat_env):
    streamer, other = await chat_env.user(), await chat_env.user()
    await chat_env.grant(other.id, streamer.id, "moderator")  # a moderator elsewhere: still refused there
    headers = await oauth_headers(chat_env.app, streamer.id, ["chat:write", "chat:moderate"])
    path = "/api/integrations/oauth/chat/channels/{}/messages"
    ok = await chat_env.client.post(path.format(streamer.id), json={"message": "from my bot"}, headers=headers)
    assert ok.status_code == 200
    elsewhere = await chat_env.client.post(path.format(other.id), json={"message": "hi"}, headers=headers)
    body = await expect_error(elsewhere, 403, "channel_not_owned")
    assert body["details"]["channelId"] == other.id
    moderate = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{other.id}/moderate",
        json={"action": "ban", "userId": other.id},
        headers=headers,
    )
    await expect_error(moderate, 403, "channel_not_owned")


async def test_oauth_scopes_are_checked_per_route(chat_env):
    streamer = await chat_env.user()
    reader = await oauth_headers(chat_env.app, streamer.id, ["chat:read", "stream:read"])
    send = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages", json={"message": "x"}, headers=reader
    )
    body = await expect_error(send, 403, "insufficient_scope")
    assert body["details"]["requiredScope"] == "chat:write"
    moderate = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/moderate",
        json={"action": "ban", "username": "someone"},
        headers=reader,
    )
    await expect_error(moderate, 403, "insufficient_scope")
    assert (await chat_env.client.get("/api/integrations/oauth/chat/settings", headers=reader)).status_code == 200
    patch = await chat_env.client.patch(
        "/api/integrations/oauth/chat/settings", json={"emoteOnly": True}, headers=reader
    )
    await expect_error(patch, 403, "insufficient_scope")
    writer = await oauth_headers(chat_env.app, streamer.id, ["stream:write"])
    patch = await chat_env.client.patch(
        "/api/integrations/oauth/chat/settings", json={"emoteOnly": True}, headers=writer
    )
    assert patch.status_code == 200 and (await patch.get_json())["emoteOnly"] is True


async def test_a_lone_surrogate_is_a_400_not_a_500(chat_env):
    streamer = await chat_env.user()
    response = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages",
        data=b'{"message": "bad \\ud800 half"}',
        headers={**streamer.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert chat_env.named("chat.message") == []


async def test_sending_to_a_channel_that_does_not_exist_is_404_before_ownership(chat_env):
    streamer = await chat_env.user()
    headers = await oauth_headers(chat_env.app, streamer.id, ["chat:write"])
    nowhere = "00000000-0000-4000-8000-000000000000"
    for auth in (headers, streamer.headers):  # an OAuth token and a first-party one alike
        response = await chat_env.client.post(
            f"/api/integrations/oauth/chat/channels/{nowhere}/messages", json={"message": "hi"}, headers=auth
        )
        body = await expect_error(response, 404, "not_found")
        assert body["details"]["channelId"] == nowhere
    bad = await chat_env.client.post(
        "/api/integrations/oauth/chat/channels/not-a-uuid/messages", json={"message": "hi"}, headers=headers
    )
    assert bad.status_code == 400
