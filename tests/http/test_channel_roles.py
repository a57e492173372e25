"""Channel roles: grant, list, delete; the next chat message shows it."""

from __future__ import annotations

from typing import Any

from tests.http.chat_env import ChatEnv

BASE = "/api/integrations/oauth/channel-roles"


async def test_a_moderator_grant_shows_in_the_very_next_message(chat_env: ChatEnv) -> None:
    env = chat_env
    owner, member = await env.user(), await env.user()
    assert (await env.send(member, owner.id, "before")).status_code in (200, 201)
    response = await env.client.post(
        BASE, json={"roleType": "moderator", "username": member.username}, headers=owner.headers
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    role = (await response.get_json())["role"]
    assert (role["memberId"], role["roleType"], role["expiresAt"]) == (member.id, "moderator", None)
    [added] = env.named("channel.moderator.add")
    assert added.data["userId"] == member.id and added.data["moderator"]["userId"] == owner.id

    assert (await env.send(member, owner.id, "after")).status_code in (200, 201)
    by_text = {e.data["message"]: e.data for e in env.named("chat.message")}
    assert by_text["before"]["isMod"] is False
    assert by_text["after"]["isMod"] is True and "moderator" in by_text["after"]["badges"]

    listed = await (await env.client.get(BASE, headers=owner.headers)).get_json()
    assert [(r["memberId"], r["roleType"]) for r in listed["roles"]] == [(member.id, "moderator")]
    deleted = await env.client.delete(f"{BASE}/{member.id}/moderator", headers=owner.headers)
    assert deleted.status_code == 204
    assert [e.data["userId"] for e in env.named("channel.moderator.remove")] == [member.id]
    assert (await env.client.delete(f"{BASE}/{member.id}/moderator", headers=owner.headers)).status_code == 404
    assert (await env.send(member, owner.id, "later")).status_code in (200, 201)
    assert {e.data["message"]: e.data for e in env.named("chat.message")}["later"]["isMod"] is False


async def test_bad_grants_are_refused(chat_env: ChatEnv) -> None:
    env = chat_env
    owner, member = await env.user(), await env.user()

    async def grant(**body: Any) -> int:
        response = await env.client.post(BASE, json=body, headers=owner.headers)
        return int(response.status_code)

    assert await grant(roleType="broadcaster", memberId=member.id) == 400
    assert await grant(roleType="vip", memberId=owner.id) == 400
    assert await grant(roleType="vip") == 400
    assert await grant(roleType="vip", memberId=member.id, username=member.username) == 400
    assert await grant(roleType="vip", memberId=member.id, expiresAt="2000-01-01T00:00:00Z") == 400
    assert await grant(roleType="vip", memberId=member.id, expiresAt="soon") == 400
    assert await grant(roleType="vip", memberId="00000000-0000-0000-0000-000000000000") == 404
    assert await grant(roleType="vip", memberId=member.id, expiresAt="2030-01-01T00:00:00Z") == 201
    listed = await (await env.client.get(BASE, headers=owner.headers)).get_json()
    assert listed["roles"][0]["expiresAt"] == "2030-01-01T00:00:00.000Z"
    assert env.named("channel.moderator.add") == []
