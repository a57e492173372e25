"""A channel's badges come from its own data, on SQLite and PostgreSQL: the subscriber badge
milestones its subscribers have reached per tier, and the role badges its members hold."""

from __future__ import annotations

from typing import Any

from tests.conftest import insert_subscription, register
from volthub.persistence import chat as chat_repo

DAY_MS = 86_400_000


async def test_channel_badges_follow_the_channels_subscribers_and_roles(backend_app: Any) -> None:
    client = backend_app.test_client()
    quiet, busy, fan, veteran, mod = [await register(client) for _ in range(5)]
    database = backend_app.extensions["volthub"].db
    now = 1_700_000_000_000

    def populate(tx: Any) -> None:
        for user, tier, months in ((fan, "tier1", 1), (veteran, "tier2", 7)):
            insert_subscription(
                tx, busy.id, user.id, started_at=now, expires_at=now + 30 * DAY_MS, tier=tier, months=months
            )
        chat_repo.grant_role(tx, busy.id, mod.id, "moderator", now, None)

    await database.write(populate)
    quiet_badges = await (await client.get(f"/api/badges/channel/{quiet.username}")).get_json()
    assert quiet_badges["badges"] == []  # nobody ever subscribed: no subscriber badge
    assert [r["slug"] for r in quiet_badges["roles"]] == ["broadcaster"]
    busy_badges = await (await client.get(f"/api/badges/channel/{busy.username}")).get_json()
    assert [(b["tier"], b["months"]) for b in busy_badges["badges"]] == [
        ("tier1", 1),
        ("tier2", 1),
        ("tier2", 3),
        ("tier2", 6),
    ]
    assert [(r["slug"], r["holders"]) for r in busy_badges["roles"]] == [("broadcaster", 1), ("moderator", 1)]
