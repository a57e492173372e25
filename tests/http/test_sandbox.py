"""The test-event sandbox: validation, own channel only, nothing stored; the six test types
and every emitted event by name."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import register
from volthub.http.blueprints import sandbox
from volthub.protocol import catalogue, trigger

TEST_EVENTS = "/api/integrations/oauth/test/events"
# The six test types: the event each sends, and fields a request may give it.
SIX_TYPES = [
    ("subscription", "channel.subscribe", {"tier": "tier2", "amount": 3, "message": "love it"}),
    ("gift_subscription", "channel.subscription.gift", {"tier": "tier3", "quantity": 5, "amount": 2500}),
    ("follow", "channel.follow", {}),
    ("volt_tip", "channel.volts", {"amount": 1000, "message": "gg"}),
    ("raid", "channel.raid", {"amount": 77}),
    ("chat_message", "chat.message", {"message": "hello from the sandbox"}),
]
EXPECTED = {event_type: event for event_type, event, _ in SIX_TYPES}


async def _row_counts(app: Any) -> dict[str, int]:
    database = app.extensions["volthub"].db

    def count(tx: Any) -> dict[str, int]:
        tables = [row["name"] for row in tx.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {table: int(tx.scalar(f"SELECT COUNT(*) FROM {table}")) for table in tables}

    return await database.read(count)


@pytest.mark.parametrize(("event_type", "event_name", "fields"), SIX_TYPES)
async def test_each_type_is_published_with_is_test_and_nothing_is_stored(
    app: Any, client: Any, published: list[Any], event_type: str, event_name: str, fields: dict[str, Any]
) -> None:
    user = await register(client)
    before = await _row_counts(app)
    response = await client.post(
        TEST_EVENTS, headers=user.headers, json={"eventType": event_type, "channelId": user.id, **fields}
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    assert body["event"] == event_name and body["eventType"] == event_type
    assert body["data"]["isTest"] is True
    [event] = [e for e in published if e.is_test]
    assert (event.id, event.name, event.channel_id, event.data) == (
        body["eventId"],
        body["event"],
        user.id,
        body["data"],
    )
    assert await _row_counts(app) == before  # no rows anywhere: no outbox, no money, no analytics
    data = body["data"]
    if event_type == "subscription":
        assert (data["tier"], data["months"], data["message"]) == ("tier2", 3, "love it")
    elif event_type == "gift_subscription":
        assert (data["tier"], data["quantity"], data["amount"]) == ("tier3", 5, 2500)
    elif event_type == "volt_tip":
        assert data["amount"] == 1000
    elif event_type == "raid":
        assert data["viewers"] == 77 and data["toChannelId"] == user.id and data["toUsername"] == user.username
    elif event_type == "chat_message":
        assert data["message"] == "hello from the sandbox" and data["channelId"] == user.id
    if event_type != "raid":
        assert data["userId"] != user.id and data["username"].startswith("test_user_")


async def test_defaults(client: Any) -> None:
    user = await register(client)
    response = await client.post(
        TEST_EVENTS, headers=user.headers, json={"eventType": "gift_subscription", "channelId": user.id}
    )
    data = (await response.get_json())["data"]
    assert (data["tier"], data["quantity"]) == ("tier1", 1) and "amount" not in data


async def test_only_the_token_owners_channel(client: Any) -> None:
    user, other = await register(client), await register(client)
    response = await client.post(TEST_EVENTS, headers=user.headers, json={"eventType": "follow", "channelId": other.id})
    assert response.status_code == 403
    assert (await response.get_json())["error"] == "channel_not_owned"
    response = await client.post(TEST_EVENTS, headers=user.headers, json={"eventType": "follow", "channelId": "nope"})
    assert response.status_code == 400


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"eventType": "subscription", "tier": "tier4"}, "tier"),
        ({"eventType": "subscription", "tier": "TIER1"}, "tier"),
        ({"eventType": "gift_subscription", "quantity": 0}, "quantity"),
        ({"eventType": "gift_subscription", "quantity": 101}, "quantity"),
        ({"eventType": "volt_tip", "amount": 0}, "amount"),
        ({"eventType": "volt_tip", "amount": -5}, "amount"),
        ({"eventType": "raid", "amount": 1.5}, "amount"),
        ({"eventType": "volt_tip", "amount": 10_000_000}, "amount"),
        ({"eventType": "chat_message", "message": "x" * 501}, "message"),
        ({"eventType": "chat_message", "message": "   "}, "message"),
        ({"eventType": "volt_tip", "message": "x" * 501}, "message"),
        ({"eventType": "volt_tip", "amount": "100"}, "amount"),
        ({"eventType": "hype_train"}, "eventType"),
        ({"eventType": None}, "eventType"),
    ],
)
async def test_per_type_validation(client: Any, published: list[Any], fields: dict[str, Any], field: str) -> None:
    user = await register(client)
    response = await client.post(TEST_EVENTS, headers=user.headers, json={"channelId": user.id, **fields})
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"] == "validation_error"
    assert any(f["field"] == field for f in body["details"]["fields"]), body
    assert not [e for e in published if e.is_test]


async def test_fields_a_type_does_not_use_are_ignored(client: Any) -> None:
    user = await register(client)
    response = await client.post(
        TEST_EVENTS,
        headers=user.headers,
        json={"eventType": "follow", "channelId": user.id, "tier": "tier9", "quantity": 0},
    )
    assert response.status_code == 200


async def test_message_of_500_characters_is_fine(client: Any) -> None:
    user = await register(client)
    response = await client.post(
        TEST_EVENTS,
        headers=user.headers,
        json={"eventType": "chat_message", "channelId": user.id, "message": "x" * 500},
    )
    assert response.status_code == 200


async def test_needs_a_token(client: Any) -> None:
    response = await client.post(TEST_EVENTS, json={"eventType": "follow", "channelId": "x"})
    assert response.status_code == 401


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_types_list(client: Any, method: str) -> None:
    user = await register(client)
    response = await client.open(f"{TEST_EVENTS}/types", method=method, headers=user.headers)
    assert response.status_code == 200
    types = (await response.get_json())["types"]
    assert {t["eventType"]: t["event"] for t in types} == EXPECTED
    assert (await client.open(f"{TEST_EVENTS}/types", method=method)).status_code == 401


def test_the_sandbox_table_is_the_catalogues() -> None:
    """The blueprint's six builders are exactly catalogue.SANDBOX_EVENTS's types."""
    assert set(sandbox.KINDS) == set(catalogue.SANDBOX_EVENTS)
    assert catalogue.SANDBOX_EVENTS == EXPECTED


async def test_event_types_route_reports_sandbox_and_real_producers(client: Any) -> None:
    response = await client.get("/api/events/types")
    by_name = {entry["name"]: entry for entry in (await response.get_json())["types"]}
    assert {name for name, entry in by_name.items() if entry["sandbox"]} == {*trigger.names(), *catalogue.ALIASES}
    assert set(EXPECTED.values()) <= set(trigger.names())
    assert by_name["channel.follow"]["emitted"] is True and by_name["user.authorization.grant"]["emitted"] is True
    # The sandbox sending an event does not make it emitted: only a real producer does.
    for name in EXPECTED.values():
        assert by_name[name]["emitted"] is (name in catalogue.PRODUCERS), name
    assert by_name["channel.hype_train.begin"]["emitted"] is False
    assert by_name["channel.hype_train.begin"]["sandbox"] is False


OVER_EVENTS_API = [name for name in trigger.names() if catalogue.delivered_over_events_api(name)]
WEBHOOK_ONLY = [name for name in trigger.names() if not catalogue.delivered_over_events_api(name)]


@pytest.mark.parametrize("name", OVER_EVENTS_API)
async def test_every_emitted_event_can_be_sent_by_name_and_nothing_is_stored(
    app: Any, client: Any, published: list[Any], name: str
) -> None:
    user = await register(client)
    before = await _row_counts(app)
    response = await client.post(TEST_EVENTS, headers=user.headers, json={"eventType": name, "channelId": user.id})
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    [event] = [e for e in published if e.is_test]
    assert (event.id, event.name, event.data) == (body["eventId"], name, body["data"])
    required = {f.name for f in catalogue.BY_NAME[name].fields if not f.optional}
    assert required <= set(body["data"]) and body["data"]["isTest"] is True
    assert body["webhooks"] == []
    assert await _row_counts(app) == before


async def test_fields_override_the_sample_payload(client: Any, published: list[Any]) -> None:
    user = await register(client)
    response = await client.post(
        TEST_EVENTS,
        headers=user.headers,
        json={
            "eventType": "channel.goal.progress",
            "channelId": user.id,
            "fields": {"currentAmount": 42, "isTest": False},
        },
    )
    assert response.status_code == 400  # isTest is not the caller's to change
    response = await client.post(
        TEST_EVENTS,
        headers=user.headers,
        json={"eventType": "channel.goal.progress", "channelId": user.id, "fields": {"currentAmount": 42}},
    )
    data = (await response.get_json())["data"]
    assert data["currentAmount"] == 42 and data["isTest"] is True
    response = await client.post(
        TEST_EVENTS,
        headers=user.headers,
        json={"eventType": "follow", "channelId": user.id, "fields": {"displayName": "Ada"}},
    )
    assert (await response.get_json())["data"]["displayName"] == "Ada"  # the six types take fields too


async def test_unknown_payload_field_is_400_and_sends_nothing(client: Any, published: list[Any]) -> None:
    user = await register(client)
    response = await client.post(
        TEST_EVENTS,
        headers=user.headers,
        json={"eventType": "stream.online", "channelId": user.id, "fields": {"nope": 1}},
    )
    assert response.status_code == 400
    body = await response.get_json()
    assert body["error"] == "validation_error" and body["details"]["fields"][0]["field"] == "fields.nope"
    assert not [e for e in published if e.is_test]


@pytest.mark.parametrize("name", WEBHOOK_ONLY)
async def test_a_webhook_only_event_needs_webhooks_true(client: Any, published: list[Any], name: str) -> None:
    user = await register(client)
    response = await client.post(TEST_EVENTS, headers=user.headers, json={"eventType": name, "channelId": user.id})
    assert response.status_code == 400
    assert (await response.get_json())["details"]["fields"][0]["field"] == "webhooks"
    response = await client.post(
        TEST_EVENTS, headers=user.headers, json={"eventType": name, "channelId": user.id, "webhooks": True}
    )
    assert response.status_code == 200
    assert (await response.get_json())["webhooks"] == []  # no webhooks yet
    assert not [e for e in published if e.is_test]  # never on the Events API
