"""Test events (the sandbox's) are delivered and stored nowhere, on each backend: no row in
any table, the PostgreSQL event log (the relay's transport between processes) included."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.conftest import make_settings, register
from volthub.config import Settings

TEST_EVENTS = "/api/integrations/oauth/test/events"
# Written by every request on PostgreSQL (shared rate-limit budgets, presence beats): not
# the event's doing.
PER_REQUEST = {"rate_limit_budgets", "presence"}


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Each backend, not only SQLite."""
    return make_settings(database_url)


async def row_counts(app: Any) -> dict[str, int]:
    database = app.extensions["volthub"].db

    def count(tx: Any) -> dict[str, int]:
        if database.dialect == "postgresql":
            query = "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'"
        else:
            query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        tables = sorted(row["name"] for row in tx.execute(query))
        return {t: int(tx.scalar(f"SELECT COUNT(*) FROM {t}")) for t in tables if t not in PER_REQUEST}

    return await database.read(count)


@pytest.mark.parametrize("event_type", ["follow", "volt_tip", "chat_message"])
async def test_a_test_event_is_delivered_and_leaves_no_row_in_any_table(
    app: Any, published: list[Any], event_type: str
) -> None:
    client = app.test_client()
    user = await register(client)
    before = await row_counts(app)
    if app.extensions["volthub"].db.dialect == "postgresql":
        assert "event_log" in before
    response = await client.post(
        TEST_EVENTS, headers=user.headers, json={"eventType": event_type, "channelId": user.id}
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    event_id = (await response.get_json())["eventId"]
    with trio.fail_after(10):  # on PostgreSQL delivery comes back through the relay
        while not any(e.id == event_id for e in published):
            await trio.sleep(0.01)
    assert await row_counts(app) == before
