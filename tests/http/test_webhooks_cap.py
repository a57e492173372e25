"""The per-app webhook cap holds under concurrent creates (enforced by the database).

Before, the create route counted the app's webhooks and inserted in one transaction; on
PostgreSQL (READ COMMITTED) concurrent creates each counted below the cap and all inserted.
Now the count lives on the app row and is raised by a guarded UPDATE in the insert's
transaction, so concurrent creates queue on that row and the cap holds on both backends.
"""

from __future__ import annotations

from typing import Any

import trio

from tests.conftest import insert_app, make_settings, register
from tests.services.webhooks.support import FakeResolver

PUBLIC_IP = "93.184.215.14"
CAP = 4
ATTEMPTS = 24


async def test_concurrent_creates_cannot_exceed_the_cap(database_url: str) -> None:
    from volthub.http.app import create_app

    application = create_app(make_settings(database_url, database={"pool_size": 16}))
    async with application.test_app():
        client = application.test_client()
        rt = application.extensions["volthub"]
        rt.services.webhooks.deliverer.resolver = FakeResolver({"hooks.example.com": [PUBLIC_IP]})
        rt.services.webhook_admin.max_per_app = CAP
        owner = await register(client)
        client_id = await insert_app(rt.db, owner.id)
        path = f"/api/developer/apps/{client_id}/webhooks"
        answers: list[tuple[int, Any]] = []

        async def create_one() -> None:
            body = {"url": "https://hooks.example.com/in", "events": ["channel.follow"]}
            response = await client.post(path, json=body, headers=owner.headers)
            answers.append((response.status_code, await response.get_json()))

        async with trio.open_nursery() as nursery:
            for _ in range(ATTEMPTS):
                nursery.start_soon(create_one)

        statuses = sorted(status for status, _ in answers)
        assert statuses == [201] * CAP + [409] * (ATTEMPTS - CAP)
        assert {body["error"] for status, body in answers if status == 409} == {"too_many_webhooks"}
        listed = await (await client.get(path, headers=owner.headers)).get_json()
        assert len(listed["items"]) == CAP

        # A delete frees a slot, and only one.
        webhook_id = listed["items"][0]["id"]
        assert (await client.delete(f"{path}/{webhook_id}", headers=owner.headers)).status_code == 204
        async with trio.open_nursery() as nursery:
            answers.clear()
            for _ in range(6):
                nursery.start_soon(create_one)
        assert sorted(status for status, _ in answers) == [201] + [409] * 5
