"""Notifications: the caller's own list, unread count, read marks, scopes."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import RegisteredUser as Account
from tests.http.oauth.tokens import oauth_headers
from volthub.persistence import notifications as repo


async def add(app: Any, user_id: str, created_at: int, title: str = "t") -> str:
    notification_id = str(uuid.uuid4())
    await app.extensions["volthub"].db.write(
        lambda tx: repo.create(
            tx,
            notification_id=notification_id,
            user_id=user_id,
            type="webhook.disabled",
            title=title,
            message="m",
            data={"n": created_at},
            now_ms=created_at,
        )
    )
    return notification_id


@pytest.fixture
async def me(make_user: Any) -> Account:
    return await make_user()


async def test_list_is_newest_first_with_a_cursor(app: Any, client: Any, me: Account, make_user: Any) -> None:
    other = await make_user()
    ids = [await add(app, me.id, 1_000 + i) for i in range(5)]
    await add(app, other.id, 5_000)
    first = await (await client.get("/api/notifications?limit=3", headers=me.headers)).get_json()
    assert [n["id"] for n in first["items"]] == ids[::-1][:3]
    assert first["items"][0]["read"] is False and first["items"][0]["readAt"] is None
    assert first["items"][0]["data"] == {"n": 1004}
    second = await (
        await client.get(f"/api/notifications?limit=3&cursor={first['nextCursor']}", headers=me.headers)
    ).get_json()
    assert [n["id"] for n in second["items"]] == ids[::-1][3:]
    assert second["nextCursor"] is None
    assert (await client.get("/api/notifications?limit=0", headers=me.headers)).status_code == 400
    assert (await client.get("/api/notifications?cursor=%%%", headers=me.headers)).status_code == 400


async def test_read_one_read_all_and_counts(app: Any, client: Any, me: Account, make_user: Any) -> None:
    other = await make_user()
    ids = [await add(app, me.id, 1_000 + i) for i in range(3)]
    theirs = await add(app, other.id, 2_000)

    def count() -> Any:
        return client.get("/api/notifications/unread-count", headers=me.headers)

    assert await (await count()).get_json() == {"count": 3}

    read = await client.post(f"/api/notifications/{ids[0]}/read", headers=me.headers)
    assert read.status_code == 200
    body = await read.get_json()
    assert body["read"] is True and body["readAt"] is not None
    again = await (await client.post(f"/api/notifications/{ids[0]}/read", headers=me.headers)).get_json()
    assert again["readAt"] == body["readAt"]
    assert await (await count()).get_json() == {"count": 2}
    unread = await (await client.get("/api/notifications?unread=true", headers=me.headers)).get_json()
    assert [n["id"] for n in unread["items"]] == [ids[2], ids[1]]

    assert (await client.post(f"/api/notifications/{theirs}/read", headers=me.headers)).status_code == 404
    assert (await client.post("/api/notifications/nope/read", headers=me.headers)).status_code == 400
    assert await (await client.post("/api/notifications/read-all", headers=me.headers)).get_json() == {"updated": 2}
    assert await (await count()).get_json() == {"count": 0}
    other_count = await client.get("/api/notifications/unread-count", headers=other.headers)
    assert await other_count.get_json() == {"count": 1}


async def test_oauth_tokens_need_the_notification_scopes(app: Any, client: Any, me: Account) -> None:
    headers = await oauth_headers(app, me.id, "notifications:read")
    assert (await client.get("/api/notifications", headers=headers)).status_code == 200
    assert (await client.get("/api/notifications/unread-count", headers=headers)).status_code == 200
    refused = await client.post("/api/notifications/read-all", headers=headers)
    assert refused.status_code == 403
    assert (await refused.get_json())["error"] == "insufficient_scope"
    writer_headers = await oauth_headers(app, me.id, "notifications:write")
    assert (await client.post("/api/notifications/read-all", headers=writer_headers)).status_code == 200
    assert (await client.get("/api/notifications", headers=writer_headers)).status_code == 403
    # Webhook management is first-party only, whatever the token's scopes.
    hooks = await client.get("/api/developer/apps/any/webhooks", headers=writer_headers)
    assert hooks.status_code == 403
    assert (await client.get("/api/notifications")).status_code == 401
