"""The event payload schemas: one for every catalogue event, derived from its fields, and
every payload `volthub trigger` can send (the same builder the sandbox uses) valid against
it, on each wire shape: the Events API envelope, Socket.IO's data message, a webhook
delivery with its headers."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from tests import event_payloads
from volthub.protocol import catalogue, event_schemas, trigger
from volthub.protocol.catalogue import EventType, PayloadField
from volthub.protocol.webhooks import delivery_headers, encode_delivery_body, generate_secret

CHANNEL = trigger.Channel("5b0f7ab4-96a4-4c8c-a2f1-d3ad0c8b7a10", "owner", "Owner")
AT = "2026-03-01T12:00:00.000Z"


@pytest.mark.parametrize("entry", catalogue.CATALOGUE, ids=lambda entry: entry.name)
def test_every_event_has_a_valid_data_schema_naming_each_field(entry: EventType) -> None:
    schema = event_schemas.data_schema(entry)
    Draft202012Validator.check_schema(schema)
    assert set(schema["properties"]) == {field.name for field in entry.fields} | {"isTest"}
    assert all(schema["properties"][field.name].get("description") is not None for field in entry.fields)
    assert set(schema["required"]) == {field.name for field in entry.fields if not field.optional} - {"isTest"}


@pytest.mark.parametrize("name", [*trigger.names(), *catalogue.ALIASES], ids=str)
def test_what_trigger_sends_for_every_event_matches_its_schemas(name: str) -> None:
    entry = trigger.resolve(name)
    data = trigger.sample(entry, CHANNEL, AT)
    event_payloads.check_data(entry.name, data, "trigger")
    if catalogue.EVENTS_API in entry.transports:
        event_payloads.check_envelope({"event": entry.name, "timestamp": AT, "data": data}, "trigger")
    if catalogue.WEBHOOKS in catalogue.BY_NAME[name].transports:
        # A legacy name is delivered under its own name with its event's payload.
        body = encode_delivery_body("9b7c2d1e-0000-4000-8000-000000000001", name, AT, data)
        headers = delivery_headers(
            generate_secret(), "9b7c2d1e-0000-4000-8000-000000000001", name, 1_772_366_400_000, body
        )
        event_payloads.check_delivery(headers, body)


def test_a_payload_that_drifts_from_its_catalogue_entry_is_refused() -> None:
    entry = catalogue.BY_NAME["channel.poll.end"]
    data = trigger.sample(entry, CHANNEL, AT)
    renamed = {("choices" if key == "options" else key): value for key, value in data.items()}
    with pytest.raises(event_payloads.PayloadMismatch, match="options"):
        event_payloads.check_data(entry.name, renamed, "test")
    retyped = {**data, "totalVotes": "3"}
    with pytest.raises(event_payloads.PayloadMismatch, match="totalVotes"):
        event_payloads.check_data(entry.name, retyped, "test")
    nested = {**data, "options": [{"id": "a", "title": "A"}]}
    with pytest.raises(event_payloads.PayloadMismatch, match="votes"):
        event_payloads.check_data(entry.name, nested, "test")


def test_a_field_without_a_schema_cannot_be_catalogued() -> None:
    odd_type = EventType("x.odd", "X", "", (PayloadField("when", "date", "a day"),))
    with pytest.raises(event_schemas.UndescribedField, match="when"):
        event_schemas.data_schema(odd_type)
    odd_key = EventType("x.odd", "X", "", (PayloadField("items", "array", "[{id, weight}]"),))
    with pytest.raises(event_schemas.UndescribedField, match="weight"):
        event_schemas.data_schema(odd_key)


def test_nullable_and_nested_fields_take_their_catalogue_shape() -> None:
    schema = event_schemas.data_schema(catalogue.BY_NAME["channel.subscription.end"])
    gifter = schema["properties"]["gifter"]
    assert gifter["type"] == ["object", "null"]
    assert gifter["required"] == ["userId", "username", "displayName"]
    validator = Draft202012Validator(gifter)
    assert validator.is_valid(None)
    assert not validator.is_valid({"userId": "u"})
