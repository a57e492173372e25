import uuid
from typing import Any

import pytest

from tests.conftest import register, unique_name


@pytest.fixture
def events(app):
    seen = []
    app.extensions["volthub"].bus.subscribe(seen.append)
    return seen


async def test_profile_update_partial(client, make_user):
    user = await make_user()
    response = await client.put("/api/users/me", headers=user.headers, json={"displayName": "New Name", "bio": "hi"})
    assert response.status_code == 200
    body = await response.get_json()
    assert body["displayName"] == "New Name" and body["bio"] == "hi"
    response = await client.put("/api/users/me", headers=user.headers, json={"avatarUrl": "https://cdn.example/a.png"})
    body = await response.get_json()
    assert body["displayName"] == "New Name" and body["avatarUrl"] == "https://cdn.example/a.png"


@pytest.mark.parametrize(
    "body",
    [
        {"displayName": None},
        {"displayName": ""},
        {"bio": "b" * 301},
        {"avatarUrl": "http://insecure/a.png"},
        {"avatarUrl": 5},
    ],
)
async def test_profile_update_rejects_bad_values(client, make_user, body):
    user = await make_user()
    response = await client.put("/api/users/me", headers=user.headers, json=body)
    assert response.status_code == 400
    me = await (await client.get("/api/users/me", headers=user.headers)).get_json()
    assert me["displayName"] == user.username and me["bio"] == ""


async def test_null_bio_clears_it(client, make_user):
    user = await make_user()
    await client.put("/api/users/me", headers=user.headers, json={"bio": "hello"})
    response = await client.put("/api/users/me", headers=user.headers, json={"bio": None})
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await response.get_json())["bio"] == ""


async def test_public_profile_is_case_sensitive(client):
    user = await register(client, "CaseUser")
    found = await client.get("/api/users/CaseUser")
    assert found.status_code == 200 and (await found.get_json())["id"] == user.id
    assert (await client.get("/api/users/caseuser")).status_code == 404


async def test_search(client):
    await register(client, "searchable_one")
    await register(client, "another_searchable")
    response = await client.get("/api/users/search?q=SEARCHABLE&limit=5")
    names = [item["username"] for item in (await response.get_json())["items"]]
    assert names == ["searchable_one", "another_searchable"]
    for query in ("", "?q=", "?q=x&limit=0", "?q=x&limit=101", "?q=x&limit=ten"):
        assert (await client.get(f"/api/users/search{query}")).status_code == 400


async def test_follow_flow_and_events(client, make_user, events):
    fan, star = await make_user(), await make_user()
    response = await client.post(f"/api/users/follow/{star.id}", headers=fan.headers)
    assert response.status_code == 200
    body = await response.get_json()
    assert body["following"] is True and body["followedAt"].endswith("Z")

    names = [(e.name, e.channel_id) for e in events]
    assert ("channel.follow", star.id) in names and ("user.follow", fan.id) in names
    follow_event = next(e for e in events if e.name == "channel.follow")
    assert follow_event.data == {
        "userId": fan.id,
        "username": fan.username,
        "displayName": fan.username,
        "followedAt": body["followedAt"],
    }

    events.clear()
    again = await client.post(f"/api/users/follow/{star.id}", headers=fan.headers)
    assert (await again.get_json())["followedAt"] == body["followedAt"] and events == []

    status = await (await client.get(f"/api/users/follow-status/{star.id}", headers=fan.headers)).get_json()
    assert status == {"following": True, "followedAt": body["followedAt"]}
    followers = await (await client.get(f"/api/users/{star.id}/followers")).get_json()
    assert [item["id"] for item in followers["items"]] == [fan.id] and followers["nextCursor"] is None
    following = await (await client.get(f"/api/users/{fan.id}/following")).get_json()
    assert [item["id"] for item in following["items"]] == [star.id]

    gone = await client.delete(f"/api/users/follow/{star.id}", headers=fan.headers)
    assert await gone.get_json() == {"following": False, "followedAt": None}
    assert [e.name for e in events] == ["user.unfollow"]
    status = await (await client.get(f"/api/users/follow-status/{star.id}", headers=fan.headers)).get_json()
    assert status == {"following": False, "followedAt": None}


async def test_follow_refusals(client, make_user):
    user = await make_user()
    self_follow = await client.post(f"/api/users/follow/{user.id}", headers=user.headers)
    assert self_follow.status_code == 400 and (await self_follow.get_json())["error"] == "cannot_follow_self"
    unknown = await client.post(f"/api/users/follow/{uuid.uuid4()}", headers=user.headers)
    assert unknown.status_code == 404
    bad = await client.post("/api/users/follow/not-a-uuid", headers=user.headers)
    assert bad.status_code == 400 and (await bad.get_json())["error"] == "invalid_id"
    assert (await client.post(f"/api/users/follow/{user.id}")).status_code == 401
    assert (await client.get(f"/api/users/{uuid.uuid4()}/followers")).status_code == 404
    assert (await client.get(f"/api/users/{user.id}/followers?cursor=garbage")).status_code == 400
    assert (await client.get(f"/api/users/{user.id}/followers?limit=101")).status_code == 400


async def test_followers_paginate(client, make_user):
    star = await make_user()
    fans = [await make_user() for _ in range(5)]
    for fan in fans:
        await client.post(f"/api/users/follow/{star.id}", headers=fan.headers)
    seen, cursor = [], None
    while True:
        query = f"?limit=2&cursor={cursor}" if cursor else "?limit=2"
        page = await (await client.get(f"/api/users/{star.id}/followers{query}")).get_json()
        seen += [item["id"] for item in page["items"]]
        cursor = page["nextCursor"]
        if not cursor:
            break
    assert sorted(seen) == sorted(fan.id for fan in fans) and len(seen) == 5


@pytest.mark.parametrize(
    "name",
    ["\u200b", "\u200b\u200c\u200d", "\u2060\ufeff", "\u3164", "\u115f\u1160", " \u00ad ", "\u0301\u0301", "\u2800"],
)
async def test_a_display_name_of_only_invisible_characters_is_refused(client: Any, name: str) -> None:
    registered = await client.post(
        "/api/auth/register", json={"username": unique_name("ghost"), "password": "x" * 12, "displayName": name}
    )
    assert registered.status_code == 400, await registered.get_data(as_text=True)
    user = await register(client)
    changed = await client.put("/api/users/me", json={"displayName": name}, headers=user.headers)
    assert changed.status_code == 400
    kept = await client.put("/api/users/me", json={"displayName": "Zoë \u3000"}, headers=user.headers)
    assert kept.status_code == 200
