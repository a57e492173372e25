"""The test-event sandbox.

A test event travels the same fan-out as real events (Socket.IO and SSE, with an event id
in the resume buffer), carries ``isTest: true`` in its data, and is never stored: no
database write (not even the PostgreSQL event log), no webhook outbox row, no money,
subscription or analytics change. It goes to the channel owner's connections only (see
volthub.hub.fanout) and, when asked, once to the owner's webhooks that want it, signed as a
real delivery (volthub.services.webhooks.direct).

Event types: the six historical test types (`follow`, `raid`, ...: built by their own
builders, which check tiers and amounts) and every event name the catalogue marks emitted
(sample payloads from its field list, volthub.protocol.trigger).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field
from quart import Blueprint
from quart_schema import tag, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model
from volthub.hub.clock import iso8601, to_ms
from volthub.hub.publisher import Event
from volthub.protocol import catalogue, trigger
from volthub.protocol.catalogue import Person
from volthub.services.accounts import User
from volthub.services.webhooks import TestDelivery

blueprint = Blueprint("sandbox", __name__, url_prefix="/api/integrations/oauth/test")

MAX_MESSAGE = 500
MAX_AMOUNT = 1_000_000
TIERS = ("tier1", "tier2", "tier3")

MAX_FIELDS = 32


class TestEventBody(Body):
    example = {
        "eventType": "follow",
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "tier": "tier1",
        "amount": 1.5,
        "message": "GG everyone!",
        "quantity": 1,
        "fields": {},
        "eventsApi": True,
        "webhooks": False,
    }

    eventType: str = Field(
        max_length=64,
        description="a test type (subscription, gift_subscription, follow, volt_tip, raid, chat_message)"
        " or any event name `GET /api/events/types` marks emitted",
    )
    channelId: str = Field(max_length=64, description="must be the token owner's id (their channel)")
    tier: str | None = Field(None, max_length=16, description="tier1, tier2 or tier3 (subscriptions)")
    amount: float | None = Field(
        None, description="months (subscription), Volts (gift_subscription, volt_tip), viewers (raid)"
    )
    message: str | None = Field(None, max_length=4096, description=f"at most {MAX_MESSAGE} characters")
    quantity: int | None = Field(None, description="gifted subscriptions, 1-100")
    fields: dict[str, Any] | None = Field(
        None, description="payload fields to set (names from the event's `fields` in `GET /api/events/types`)"
    )
    eventsApi: bool = Field(True, description="send it to the channel's Events API connections")
    webhooks: bool = Field(
        False,
        description="also POST it once to the channel owner's webhooks subscribed to it (only the token's"
        " app's webhooks with an app token), signed as a real delivery; nothing is recorded",
    )


class TestDeliveryOut(Model):
    webhookId: str
    clientId: str
    url: str
    event: str = Field(description="the name it was delivered under")
    status: int | None = Field(description="the receiver's HTTP status; null when no response came")
    error: str | None
    latencyMs: int


class TestEventOut(Model):
    example = {
        "eventId": "0b7e2a4c-5d1f-4e8a-9c3b-2b2ebb6c0000",
        "event": "chat.message",
        "eventType": "follow",
        "channelId": "0b7e2a4c-5d1f-4e8a-9c3b-9f8596ee0000",
        "timestamp": "2026-03-14T18:30:00Z",
        "data": {},
        "webhooks": [
            {
                "webhookId": "0b7e2a4c-5d1f-4e8a-9c3b-458fb6930000",
                "clientId": "0b7e2a4c-5d1f-4e8a-9c3b-ea1ce9be0000",
                "url": "https://volthub.example/url",
                "event": "chat.message",
                "status": 1,
                "error": None,
                "latencyMs": 1773513000000,
            }
        ],
    }

    eventId: str
    event: str
    eventType: str
    channelId: str
    timestamp: str
    data: dict[str, Any]
    webhooks: list[TestDeliveryOut] = Field(default_factory=list, description="one entry per webhook tried")


class TestEventTypeOut(Model):
    eventType: str
    event: str
    description: str
    fields: dict[str, str]


class TestEventTypesOut(Model):
    example = {
        "types": [
            {
                "eventType": "follow",
                "event": "chat.message",
                "description": "Speedruns and chill every Friday.",
                "fields": {},
            }
        ]
    }

    types: list[TestEventTypeOut]


@dataclass(frozen=True)
class _Kind:
    description: str
    fields: dict[str, str]
    build: Callable[[TestEventBody, _Context], dict[str, Any]]


@dataclass(frozen=True)
class _Context:
    who: Person  # the synthetic user acting
    at: str  # ISO 8601 time of the event
    channel_username: str


def _tier(body: TestEventBody) -> str:
    tier = body.tier if body.tier is not None else "tier1"
    if tier not in TIERS:
        raise _invalid("tier", "must be tier1, tier2 or tier3")
    return tier


def _amount(body: TestEventBody, default: int) -> int:
    amount = body.amount if body.amount is not None else default
    if amount != int(amount) or not 0 < amount <= MAX_AMOUNT:
        raise _invalid("amount", f"must be a positive whole number up to {MAX_AMOUNT}")
    return int(amount)


def _message(body: TestEventBody, default: str | None) -> str | None:
    message = body.message if body.message is not None else default
    if message is not None and len(message) > MAX_MESSAGE:
        raise _invalid("message", f"must be at most {MAX_MESSAGE} characters")
    return message


def _quantity(body: TestEventBody) -> int:
    quantity = body.quantity if body.quantity is not None else 1
    if not 1 <= quantity <= 100:
        raise _invalid("quantity", "must be between 1 and 100")
    return quantity


def _invalid(field: str, message: str) -> ApiError:
    return ApiError(
        400,
        "validation_error",
        f"{field}: {message}",
        {"fields": [{"field": field, "message": message, "type": "value_error"}]},
    )


# Each builds its event's payload with the catalogue's builder, the one real producers call.


def _subscription(body: TestEventBody, ctx: _Context) -> dict[str, Any]:
    return catalogue.channel_subscribe(
        subscriber=ctx.who,
        tier=_tier(body),
        months=_amount(body, 1),
        message=_message(body, None),
        subscribed_at=ctx.at,
        is_test=True,
    )


def _gift(body: TestEventBody, ctx: _Context) -> dict[str, Any]:
    return catalogue.channel_subscription_gift(
        gifter=ctx.who,
        tier=_tier(body),
        quantity=_quantity(body),
        amount=_amount(body, 1) if body.amount is not None else None,
        gifted_at=ctx.at,
        is_test=True,
    )


def _follow(body: TestEventBody, ctx: _Context) -> dict[str, Any]:
    return catalogue.channel_follow(follower=ctx.who, followed_at=ctx.at, is_test=True)


def _volts(body: TestEventBody, ctx: _Context) -> dict[str, Any]:
    return catalogue.channel_volts(
        sender=ctx.who, amount=_amount(body, 100), message=_message(body, None), sent_at=ctx.at, is_test=True
    )


def _raid(body: TestEventBody, ctx: _Context) -> dict[str, Any]:
    return catalogue.channel_raid(
        raider=ctx.who,
        target_id=body.channelId,
        target_username=ctx.channel_username,
        viewers=_amount(body, 10),
        raided_at=ctx.at,
        is_test=True,
    )


def _chat(body: TestEventBody, ctx: _Context) -> dict[str, Any]:
    text = _message(body, "This is a test message from the sandbox.") or ""
    if not text.strip():
        raise _invalid("message", "must not be blank")
    return catalogue.chat_message(
        message_id=str(uuid.uuid4()),
        channel_id=body.channelId,
        sender=ctx.who,
        text=text,
        timestamp=ctx.at,
        is_test=True,
    )


# Keyed by the spec's test event types; the event each sends is catalogue.SANDBOX_EVENTS's.
KINDS: dict[str, _Kind] = {
    "subscription": _Kind(
        "A new subscription.",
        {
            "tier": "tier1-tier3 (default tier1)",
            "amount": "months (default 1)",
            "message": "optional, at most 500 characters",
        },
        _subscription,
    ),
    "gift_subscription": _Kind(
        "Gifted subscriptions.",
        {"tier": "tier1-tier3 (default tier1)", "quantity": "1-100 (default 1)", "amount": "optional Volts paid"},
        _gift,
    ),
    "follow": _Kind("A new follower.", {}, _follow),
    "volt_tip": _Kind(
        "Volts sent to the channel.",
        {"amount": "Volts (default 100)", "message": "optional, at most 500 characters"},
        _volts,
    ),
    "raid": _Kind("An incoming raid.", {"amount": "viewers (default 10)"}, _raid),
    "chat_message": _Kind("A chat message.", {"message": "at most 500 characters (default: a sample text)"}, _chat),
}


def _test_user() -> Person:
    """A made-up viewer: a fresh id and a recognisable test name."""
    number = random.randint(1000, 9999)
    return Person(str(uuid.uuid4()), f"test_user_{number}", f"RegisteredUser{number}")


@blueprint.post("/events")
@access.token()
@tag(["Sandbox"])
@validate_request(TestEventBody)
@validate_response(TestEventOut)
async def send_test_event(data: TestEventBody) -> TestEventOut:
    """Send a synthetic event to your own channel.

    Any valid token. `channelId` must be the token owner's id (403 `channel_not_owned`
    otherwise). `eventType` is one of the six test types (they map to channel.subscribe,
    channel.subscription.gift, channel.follow, channel.volts, channel.raid and
    chat.message) or any event name the catalogue marks emitted, whose sample payload
    `fields` may adjust. The payload carries `isTest: true`. It goes to the channel's Events
    API connections (`eventsApi`, default true, for events the Events API carries) and, with
    `webhooks: true`, once to each of the owner's webhooks subscribed to it, signed exactly
    as a real delivery; each attempt's outcome is in `webhooks`. Nothing is stored, retried
    or counted.
    """
    channel_id = access.check_own_channel(data.channelId)
    channel = await runtime().services.accounts.get_user(channel_id)
    if channel is None:
        raise access.unauthorized("invalid_token", "the token's user no longer exists")
    event, tried = await publish_test(data, channel, access.principal().client_id)
    return TestEventOut(
        eventId=event.id,
        event=event.name,
        eventType=data.eventType,
        channelId=channel_id,
        timestamp=event.timestamp,
        data=event.data,
        webhooks=[TestDeliveryOut.from_record(delivery, event=delivery.event_name) for delivery in tried],
    )


async def publish_test(
    body: TestEventBody, channel: User, client_id: str | None, *, logged: bool = False
) -> tuple[Event, list[TestDelivery]]:
    """Build and send a test event of `channel` (its owner asked): to the Events API when it
    carries the event and `body.eventsApi`, and with `body.webhooks` to the owner's webhooks
    that want it (only `client_id`'s when given): once and unrecorded, or `logged` as
    ordinary outbox deliveries (the developer dashboard, which shows the delivery log)."""
    rt = runtime()
    at = iso8601(to_ms(rt.clock.now()))
    name, payload = _build(body.model_copy(update={"channelId": channel.id}), channel, at)
    to_sockets = body.eventsApi and catalogue.delivered_over_events_api(name)
    if not to_sockets and not body.webhooks:
        raise _invalid("webhooks", f"the Events API does not carry {name}: send it with webhooks: true")
    event = rt.publisher.publish_ephemeral(channel.id, name, payload, publish=to_sockets)
    tried: list[TestDelivery] = []
    if body.webhooks and logged:
        await rt.services.webhooks.enqueue_test(event, client_id)
    elif body.webhooks:
        tried = await rt.services.webhooks.deliver_test(event, client_id)
    return event, tried


def _build(body: TestEventBody, channel: User, at: str) -> tuple[str, dict[str, Any]]:
    """The event name and test payload of `body`."""
    if body.fields is not None and len(body.fields) > MAX_FIELDS:
        raise _invalid("fields", f"at most {MAX_FIELDS} fields")
    try:
        entry = trigger.resolve(body.eventType)
    except trigger.UnknownTestEvent:
        raise _invalid("eventType", "not a test type nor an emitted event name (see GET /api/events/types)") from None
    try:
        if body.eventType in KINDS:
            payload = KINDS[body.eventType].build(body, _Context(_test_user(), at, channel.username))
            payload = {**payload, **trigger.checked_fields(entry, body.fields)}
        else:
            who = trigger.Channel(channel.id, channel.username, channel.display_name)
            payload = trigger.sample(entry, who, at, body.fields)
    except trigger.InvalidField as exc:
        raise _invalid(f"fields.{exc.field}", exc.message) from None
    return entry.name, payload


def _types() -> TestEventTypesOut:
    return TestEventTypesOut(
        types=[
            TestEventTypeOut(
                eventType=name, event=catalogue.SANDBOX_EVENTS[name], description=kind.description, fields=kind.fields
            )
            for name, kind in KINDS.items()
        ]
    )


@blueprint.post("/events/types")
@access.token()
@tag(["Sandbox"])
@validate_response(TestEventTypesOut)
async def test_event_types() -> TestEventTypesOut:
    """The six test types, the event each sends, and the fields each uses. Every event
    `GET /api/events/types` marks emitted can be sent too, by its name."""
    return _types()


@blueprint.get("/events/types")
@access.token()
@tag(["Sandbox"])
@validate_response(TestEventTypesOut)
async def test_event_types_get() -> TestEventTypesOut:
    """The same list as the POST form."""
    return _types()
