"""Bots: configure, names, bot-select, sendAsBot."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import trio

from tests.conftest import LiveServer, make_settings, register_live, serve_app, unique_name
from tests.http.chat_env import ChatEnv
from tests.http.oauth.tokens import issue_oauth_token

DAY = 86_400


async def bot_app(env: ChatEnv, owner: Any, name: str | None = None) -> tuple[str, str]:
    """A bot app of `owner` with its bot configured; (client id, bot name)."""
    created = await env.client.post(
        "/api/developer/apps",
        json={"name": "Bot app", "redirectUris": ["https://bot.example/cb"], "botApp": True},
        headers=owner.headers,
    )
    assert created.status_code == 201, await created.get_data(as_text=True)
    client_id = (await created.get_json())["clientId"]
    bot_name = name or unique_name("bot")
    configured = await env.client.post(
        f"/api/developer/apps/{client_id}/bot/configure", json={"name": bot_name}, headers=owner.headers
    )
    assert configured.status_code == 200, await configured.get_data(as_text=True)
    return client_id, bot_name


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_configure_reserves_the_name_for_registration_in_any_case(chat_env: ChatEnv):
    dev = await chat_env.user()
    client_id, name = await bot_app(chat_env, dev)
    again = await chat_env.client.post("/api/auth/register", json={"username": name.upper(), "password": "x" * 12})
    assert again.status_code == 409 and (await again.get_json())["error"] == "username_taken"
    # The bot's account never signs in.
    login = await chat_env.client.post("/api/auth/login", json={"username": name, "password": "!bot"})
    assert login.status_code == 401
    taken = await chat_env.client.get(
        f"/api/developer/apps/{client_id}/bot/check-name/{dev.username}", headers=dev.headers
    )
    assert (await taken.get_json())["available"] is False and (await taken.get_json())["reason"] == "taken"
    own = await chat_env.client.get(
        f"/api/developer/apps/{client_id}/bot/check-name/{name.lower()}", headers=dev.headers
    )
    assert (await own.get_json())["available"] is True
    # A second bot app cannot take the first one's name, nor a user's.
    other = await chat_env.client.post(
        "/api/developer/apps", json={"name": "Other", "botApp": True}, headers=dev.headers
    )
    other_id = (await other.get_json())["clientId"]
    for clash in (name.lower(), dev.username):
        refused = await chat_env.client.post(
            f"/api/developer/apps/{other_id}/bot/configure", json={"name": clash}, headers=dev.headers
        )
        assert refused.status_code == 409 and (await refused.get_json())["error"] == "name_taken"


async def test_only_bot_apps_configure_bots_and_bad_input_is_refused(chat_env: ChatEnv):
    dev = await chat_env.user()
    plain = await chat_env.client.post("/api/developer/apps", json={"name": "Plain"}, headers=dev.headers)
    plain_id = (await plain.get_json())["clientId"]
    refused = await chat_env.client.post(
        f"/api/developer/apps/{plain_id}/bot/configure", json={"name": unique_name("b")}, headers=dev.headers
    )
    assert refused.status_code == 400 and (await refused.get_json())["error"] == "not_a_bot_app"
    client_id, _ = await bot_app(chat_env, dev)
    for body in ({"name": "a b"}, {"name": "x"}, {"defaultPermission": "admins"}, {"commandPrefix": "ab"}):
        bad = await chat_env.client.post(
            f"/api/developer/apps/{client_id}/bot/configure", json=body, headers=dev.headers
        )
        assert bad.status_code == 400, body
    stranger = await chat_env.user()
    hidden = await chat_env.client.get(f"/api/developer/apps/{client_id}/bot/instances", headers=stranger.headers)
    assert hidden.status_code == 404


async def test_send_as_bot_with_a_bot_app_token(chat_env: ChatEnv):
    dev, streamer = await chat_env.user(), await chat_env.user()
    client_id, name = await bot_app(chat_env, dev)
    token = await issue_oauth_token(chat_env.app, streamer.id, "chat:write", client_id=client_id)
    sent = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages",
        json={"message": "beep", "sendAsBot": True},
        headers=bearer(token),
    )
    assert sent.status_code == 200, await sent.get_data(as_text=True)
    data = chat_env.named("chat.message")[-1].data
    assert data["username"] == name and data["displayName"] == name and "bot" in data["badges"]
    assert data["userId"] != streamer.id
    # Without a bot app or a selected bot, sendAsBot says so.
    plain = await issue_oauth_token(chat_env.app, streamer.id, "chat:write")
    refused = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages",
        json={"message": "beep", "sendAsBot": True},
        headers=bearer(plain),
    )
    assert refused.status_code == 403 and (await refused.get_json())["error"] == "bot_not_connected"


async def test_bot_select_custom_name_and_revert(chat_env: ChatEnv):
    dev, streamer = await chat_env.user(), await chat_env.user()
    client_id, name = await bot_app(chat_env, dev)
    tool = await issue_oauth_token(chat_env.app, streamer.id, ["chat:write", "bot:write"])
    listed = await chat_env.client.get("/api/integrations/oauth/bot/select", headers=bearer(tool))
    assert client_id in [bot["clientId"] for bot in (await listed.get_json())["bots"]]
    # Choosing is a person's decision: first-party only.
    oauth_choice = await chat_env.client.post(
        "/api/integrations/oauth/bot/select", json={"clientId": client_id}, headers=bearer(tool)
    )
    assert oauth_choice.status_code == 403
    chosen = await chat_env.client.post(
        "/api/integrations/oauth/bot/select", json={"clientId": client_id}, headers=streamer.headers
    )
    assert chosen.status_code == 200 and (await chosen.get_json())["via"] == "selected"
    custom = unique_name("custom")
    renamed = await chat_env.client.post(
        "/api/integrations/oauth/bot/customize", json={"name": custom}, headers=bearer(tool)
    )
    assert renamed.status_code == 200 and (await renamed.get_json())["name"] == custom
    current = await (await chat_env.client.get("/api/integrations/oauth/bot/current", headers=bearer(tool))).get_json()
    assert current["name"] == custom and current["customName"] is True and current["bot"]["name"] == name
    sent = await chat_env.client.post(
        f"/api/integrations/oauth/chat/channels/{streamer.id}/messages",
        json={"message": "hi", "sendAsBot": True},
        headers=bearer(tool),
    )
    assert sent.status_code == 200
    assert chat_env.named("chat.message")[-1].data["username"] == custom
    instances = await chat_env.client.get(f"/api/developer/apps/{client_id}/bot/instances", headers=dev.headers)
    assert [c["name"] for c in (await instances.get_json())["custom"]] == [custom]
    reverted = await chat_env.client.delete("/api/integrations/oauth/bot/customize", headers=bearer(tool))
    body = await reverted.get_json()
    assert reverted.status_code == 200 and body["name"] == name and body["releasedName"] == custom
    assert body["reservedUntil"] is not None
    taken = await chat_env.client.post("/api/auth/register", json={"username": custom, "password": "x" * 12})
    assert taken.status_code == 409
    no_scope = await issue_oauth_token(chat_env.app, streamer.id, "chat:write")
    forbidden = await chat_env.client.post(
        "/api/integrations/oauth/bot/customize", json={"name": unique_name("c")}, headers=bearer(no_scope)
    )
    assert forbidden.status_code == 403


async def test_revert_keeps_the_name_reserved_for_45_days(chat_env: ChatEnv, mock_clock: trio.testing.MockClock):
    dev, streamer = await chat_env.user(), await chat_env.user()
    client_id, _ = await bot_app(chat_env, dev)
    token = await issue_oauth_token(chat_env.app, streamer.id, ["bot:write"], client_id=client_id)
    custom = unique_name("held")
    assert (
        await chat_env.client.post(
            "/api/integrations/oauth/bot/customize", json={"name": custom}, headers=bearer(token)
        )
    ).status_code == 200
    assert (
        await chat_env.client.delete("/api/integrations/oauth/bot/customize", headers=bearer(token))
    ).status_code == 200

    async def register(name: str) -> int:
        response = await chat_env.client.post("/api/auth/register", json={"username": name, "password": "x" * 12})
        return int(response.status_code)

    check = await chat_env.client.get(f"/api/developer/apps/{client_id}/bot/check-name/{custom}", headers=dev.headers)
    assert (await check.get_json())["available"] is True  # still the bot's to take back
    mock_clock.jump(44 * DAY)
    assert await register(custom.upper()) == 409
    mock_clock.jump(1 * DAY + 1)
    assert await register(custom.upper()) == 201


async def test_bot_moderation_needs_the_moderator_role(chat_env: ChatEnv):
    dev, streamer, viewer = await chat_env.user(), await chat_env.user(), await chat_env.user()
    client_id, name = await bot_app(chat_env, dev)
    token = await issue_oauth_token(chat_env.app, streamer.id, ["chat:moderate"], client_id=client_id)
    body = {"action": "timeout", "userId": viewer.id, "durationSeconds": 60, "asBot": True}
    url = f"/api/integrations/oauth/chat/channels/{streamer.id}/moderate"
    refused = await chat_env.client.post(url, json=body, headers=bearer(token))
    assert refused.status_code == 403 and (await refused.get_json())["error"] == "not_moderator"
    current = await (await chat_env.client.get("/api/integrations/oauth/bot/current", headers=bearer(token))).get_json()
    await chat_env.grant(streamer.id, current["bot"]["botUserId"], "moderator")
    allowed = await chat_env.client.post(url, json=body, headers=bearer(token))
    assert allowed.status_code == 200, await allowed.get_data(as_text=True)
    assert chat_env.named("channel.ban")[-1].data["moderator"]["username"] == name


async def test_command_check_route(chat_env: ChatEnv):
    streamer, viewer = await chat_env.user(), await chat_env.user()
    token = await issue_oauth_token(chat_env.app, streamer.id, ["chat:read"])
    url = "/api/integrations/oauth/bot/commands/check"

    async def check(level: str, user_id: str) -> bool:
        response = await chat_env.client.post(url, json={"level": level, "userId": user_id}, headers=bearer(token))
        assert response.status_code == 200, await response.get_data(as_text=True)
        return bool((await response.get_json())["allowed"])

    assert await check("everyone", viewer.id) and not await check("followers", viewer.id)
    await chat_env.follow(viewer, streamer.id)
    assert await check("followers", viewer.id) and not await check("subscribers", viewer.id)
    await chat_env.subscribe(streamer.id, viewer.id)
    assert await check("tier1", viewer.id) and not await check("tier2", viewer.id)
    await chat_env.grant(streamer.id, viewer.id, "vip")
    assert await check("vips", viewer.id) and not await check("moderators", viewer.id)
    assert await check("streamer_only", streamer.id) and not await check("bogus", streamer.id)
    levels = await chat_env.client.get("/api/integrations/oauth/bot/commands/levels")
    assert (await levels.get_json())["levels"][0] == "everyone"


def _socketio_listen(url: str, events_url: str, token: str, post: Any) -> dict[str, Any]:
    """python-socketio's client: connect, post once connected, wait for the chat.message."""
    import socketio

    async def main() -> dict[str, Any]:
        client = socketio.AsyncClient(reconnection=False)
        seen: dict[str, Any] = {}
        # The message may arrive before the POST's own response: wait for both.
        posted, done = asyncio.Event(), asyncio.Event()

        @client.on("connected", namespace="/ws/events")
        async def on_connected(data: dict[str, Any]) -> None:
            async with httpx.AsyncClient(base_url=url) as http:
                seen["status"] = (await post(http)).status_code
            posted.set()

        @client.on("chat.message", namespace="/ws/events")
        def on_message(data: dict[str, Any]) -> None:
            seen["message"] = data
            done.set()

        await client.connect(events_url, namespaces=["/ws/events"], auth={"token": token}, transports=["websocket"])
        try:
            await asyncio.wait_for(asyncio.gather(posted.wait(), done.wait()), 15)
        finally:
            await client.disconnect()
        return seen

    return asyncio.run(main())


async def test_send_as_bot_arrives_on_socketio(sqlite_url: str, nursery: trio.Nursery):
    stop = trio.Event()
    server: LiveServer = await serve_app(nursery, make_settings(sqlite_url), stop)
    dev, streamer = await register_live(server.url), await register_live(server.url)
    async with httpx.AsyncClient(base_url=server.url) as http:
        created = await http.post("/api/developer/apps", json={"name": "Bot", "botApp": True}, headers=dev.headers)
        client_id = created.json()["clientId"]
        name = unique_name("sio")
        configured = await http.post(
            f"/api/developer/apps/{client_id}/bot/configure", json={"name": name}, headers=dev.headers
        )
        assert configured.status_code == 200
    token = await issue_oauth_token(server.app, streamer.id, "chat:write", client_id=client_id)

    async def post(http: httpx.AsyncClient) -> httpx.Response:
        return await http.post(
            f"/api/integrations/oauth/chat/channels/{streamer.id}/messages",
            json={"message": "hello from the bot", "sendAsBot": True},
            headers=bearer(token),
        )

    seen = await trio.to_thread.run_sync(_socketio_listen, server.url, server.events_url, token, post)
    stop.set()
    assert seen["status"] == 200
    message = seen["message"]
    assert message["username"] == name and message["badges"][-1] == "bot"
    assert message["message"] == "hello from the bot"


@pytest.mark.parametrize("level", ["everyone"])
def test_levels_are_documented(level: str):
    from volthub.protocol.commands import LEVELS

    assert level in LEVELS


def _csrf(page: str) -> str:
    import re

    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


async def test_bot_select_page_signs_in_and_connects(chat_env: ChatEnv):
    dev, streamer = await chat_env.user(), await chat_env.user()
    client_id, name = await bot_app(chat_env, dev)
    client = chat_env.client
    page = await client.get(f"/oauth/bot/select?client_id={client_id}")
    html = await page.get_data(as_text=True)
    assert page.status_code == 200 and 'id="login-form"' in html and name in html
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    bad = await client.post(
        "/oauth/bot/select",
        form={
            "action": "login",
            "client_id": client_id,
            "csrf_token": "forged",
            "username": streamer.username,
            "password": streamer.password,
        },
    )
    assert bad.status_code == 400
    signed = await client.post(
        "/oauth/bot/select",
        form={
            "action": "login",
            "client_id": client_id,
            "csrf_token": _csrf(html),
            "username": streamer.username,
            "password": streamer.password,
        },
    )
    assert signed.status_code == 303
    page = await client.get(signed.headers["Location"])
    html = await page.get_data(as_text=True)
    assert 'id="bot-form"' in html and streamer.username in html
    cancelled = await client.post(
        "/oauth/bot/select",
        form={"action": "select", "decision": "cancel", "client_id": client_id, "csrf_token": _csrf(html)},
    )
    assert "Nothing was changed" in await cancelled.get_data(as_text=True)
    assert (await chat_env.rt.services.bots.current(streamer.id, None)) is None
    connected = await client.post(
        "/oauth/bot/select",
        form={"action": "select", "decision": "connect", "client_id": client_id, "csrf_token": _csrf(html)},
    )
    assert connected.status_code == 200 and "now your channel" in await connected.get_data(as_text=True)
    chosen = await chat_env.rt.services.bots.current(streamer.id, None)
    assert chosen is not None and chosen.name == name and chosen.via == "selected"
    unknown = await client.get("/oauth/bot/select?client_id=nope")
    assert unknown.status_code == 400


async def test_bot_names_follow_the_reserved_usernames(chat_env: ChatEnv):
    dev = await chat_env.user()
    created = await chat_env.client.post("/api/developer/apps", json={"name": "B", "botApp": True}, headers=dev.headers)
    client_id = (await created.get_json())["clientId"]
    for name in ("search", "ME", "Admin"):
        refused = await chat_env.client.post(
            f"/api/developer/apps/{client_id}/bot/configure", json={"name": name}, headers=dev.headers
        )
        assert refused.status_code == 400, name


async def test_bot_names_that_impersonate_roles_are_reserved(chat_env: ChatEnv):
    dev = await chat_env.user()
    created = await chat_env.client.post("/api/developer/apps", json={"name": "B", "botApp": True}, headers=dev.headers)
    client_id = (await created.get_json())["clientId"]
    base = f"/api/developer/apps/{client_id}/bot"
    for name in (
        "moderator",
        "Mod",
        "broadcaster",
        "STAFF",
        "admin_2",
        "system",
        "ModeratorBot",
        "xsystem",
        "OfficialHQ",
        "the_mod",
        "Staff_Team",
    ):
        refused = await chat_env.client.post(f"{base}/configure", json={"name": name}, headers=dev.headers)
        assert refused.status_code == 400, name
        checked = await (await chat_env.client.get(f"{base}/check-name/{name}", headers=dev.headers)).get_json()
        assert checked["available"] is False and checked["reason"] == "invalid", name
    for name in ("modern_art_bot", "stafford", "helper_bot", "systematic_x", "supportive_bot"):
        fine = await chat_env.client.post(f"{base}/configure", json={"name": name}, headers=dev.headers)
        assert fine.status_code == 200, (name, await fine.get_data(as_text=True))
