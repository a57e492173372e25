"""App webhooks: CRUD, secret rotation, delivery log, redelivery.

The app's owner manages them with a first-party token; another user's app is a 404. The
work is `volthub.services.webhooks.WebhookAdmin`; its errors map to HTTP in `errors.py`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model, PageQuery, example_of
from volthub.protocol.catalogue import WEBHOOK_EVENT_GROUPS, unknown_events
from volthub.services.webhooks import WebhookAdmin, WebhookChange
from volthub.services.webhooks.admin import Delivery, Webhook

blueprint = Blueprint("webhooks", __name__, url_prefix="/api/developer/apps")

EventName = Annotated[str, Field(min_length=1, max_length=100)]


class WebhookCreate(Body):
    example = {"url": "https://volthub.example/url", "events": ["chat.message"]}

    url: str = Field(min_length=1, max_length=2048, description="HTTPS endpoint")
    events: list[EventName] = Field(min_length=1, max_length=64, description="names from the webhook catalogue")


class WebhookPatch(Body):
    example = {"url": "https://volthub.example/url", "events": ["chat.message"], "enabled": False}

    url: str | None = Field(None, min_length=1, max_length=2048)
    events: list[EventName] | None = Field(None, min_length=1, max_length=64)
    enabled: bool | None = Field(None, description="true re-enables a disabled webhook and resets its failure count")


class WebhookOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "url": "https://volthub.example/url",
        "events": ["chat.message"],
        "enabled": False,
        "status": "enabled",
        "disabledReason": "owner",
        "consecutiveFailures": 1,
        "createdAt": "2026-03-14T18:30:00Z",
        "updatedAt": "2026-03-14T18:30:00Z",
    }

    id: str
    url: str
    events: list[str]
    enabled: bool
    status: Literal["enabled", "disabled"]
    disabledReason: Literal["owner", "failures", "gone"] | None
    consecutiveFailures: int
    createdAt: str
    updatedAt: str


class WebhookWithSecret(WebhookOut):
    example = {**example_of(WebhookOut), "secret": "whsec_5kQ2n8Vb1xZr7Lp0"}

    secret: str


class WebhookList(Model):
    example = {"items": [example_of(WebhookOut)]}

    items: list[WebhookOut]


class AttemptOut(Model):
    number: int
    attemptedAt: str
    outcome: Literal["success", "failure", "gone"]
    statusCode: int | None
    latencyMs: int
    error: str | None


class DeliveryOut(Model):
    example = {
        "id": "0b7e2a4c-5d1f-4e8a-9c3b-bf3967500000",
        "eventId": "0b7e2a4c-5d1f-4e8a-9c3b-2b2ebb6c0000",
        "event": "chat.message",
        "status": "pending",
        "attemptCount": 3,
        "nextAttemptAt": "2026-03-14T18:30:00Z",
        "redeliveryOf": None,
        "createdAt": "2026-03-14T18:30:00Z",
        "completedAt": "2026-03-14T18:30:00Z",
        "attempts": [
            {
                "number": 1,
                "attemptedAt": "2026-03-14T18:30:00Z",
                "outcome": "success",
                "statusCode": 1,
                "latencyMs": 1773513000000,
                "error": None,
            }
        ],
    }

    id: str
    eventId: str
    event: str
    status: Literal["pending", "succeeded", "failed"]
    attemptCount: int
    nextAttemptAt: str | None
    redeliveryOf: str | None
    createdAt: str
    completedAt: str | None
    attempts: list[AttemptOut]


class DeliveryPageOut(Model):
    example = {"items": [example_of(DeliveryOut)], "nextCursor": None}

    items: list[DeliveryOut]
    nextCursor: str | None


def admin() -> WebhookAdmin:
    return runtime().services.webhook_admin


def webhook_out(webhook: Webhook) -> WebhookOut:
    return WebhookOut.from_record(webhook, status="enabled" if webhook.enabled else "disabled")


def with_secret(webhook: Webhook) -> WebhookWithSecret:
    return WebhookWithSecret(**webhook_out(webhook).model_dump(), secret=webhook.secret)


def delivery_out(delivery: Delivery) -> DeliveryOut:
    return DeliveryOut.from_record(
        delivery,
        event=delivery.event_name,
        status=delivery.state,
        attempts=[AttemptOut.from_record(attempt) for attempt in delivery.attempts],
    )


def _check_events(events: list[str]) -> list[str]:
    unknown = unknown_events(events)
    if unknown:
        raise ApiError(
            400,
            "unknown_events",
            f"not webhook event names: {', '.join(unknown)}",
            {"field": "events", "unknown": unknown, "known": WEBHOOK_EVENT_GROUPS},
        )
    return list(dict.fromkeys(events))  # repeats dropped, order kept


@blueprint.get("/<client_id>/webhooks")
@access.first_party
@tag(["Webhooks"])
@validate_response(WebhookList)
async def list_webhooks(client_id: str) -> WebhookList:
    """The app's webhooks (oldest first). Secrets are not included."""
    found = await admin().of_app(access.principal().user_id, client_id)
    return WebhookList(items=[webhook_out(w) for w in found])


@blueprint.post("/<client_id>/webhooks")
@access.first_party
@tag(["Webhooks"])
@validate_request(WebhookCreate)
@validate_response(WebhookWithSecret, 201)
async def create_webhook(client_id: str, data: WebhookCreate) -> tuple[WebhookWithSecret, int]:
    """Create a webhook for the app's owner's channel. The signing secret
    (`whsec_…`) is returned only here and on rotate-secret.

    The URL must be HTTPS; loopback, private, link-local and other non-public targets, and
    names resolving to them, are refused (`private_target`) unless the operator set
    `[webhooks] allow_private_targets`. Unknown event names give 400 `unknown_events`.
    `chat.message` is delivered only while the owner has granted the app `chat:read`.
    At most 25 webhooks per app (409 `too_many_webhooks`).
    """
    me, events = access.principal().user_id, _check_events(data.events)
    await admin().check_app(me, client_id)  # 404 before any DNS lookup
    url = await admin().check_target(data.url)
    return with_secret(await admin().create(me, client_id, url, events)), 201


@blueprint.get("/<client_id>/webhooks/<webhook_id>")
@access.first_party
@tag(["Webhooks"])
@validate_response(WebhookOut)
async def get_webhook(client_id: str, webhook_id: str) -> WebhookOut:
    """One webhook: `status` is `disabled` after 5 consecutive failed attempts, a 410 answer
    (`disabledReason`), or the owner's `enabled: false`."""
    webhook_id = uuid_param(webhook_id, "id")
    return webhook_out(await admin().check_webhook(access.principal().user_id, client_id, webhook_id))


@blueprint.patch("/<client_id>/webhooks/<webhook_id>")
@access.first_party
@tag(["Webhooks"])
@validate_request(WebhookPatch)
@validate_response(WebhookOut)
async def patch_webhook(client_id: str, webhook_id: str, data: WebhookPatch) -> WebhookOut:
    """Change `url`, `events` or `enabled`; omitted fields stay.

    `enabled: true` on a disabled webhook re-enables it: the failure count resets and its
    pending deliveries (kept while it was disabled) are retried at once with a fresh
    schedule. Events that happened while it was disabled are not delivered.
    `enabled: false` pauses it; pending deliveries wait.
    """
    webhook_id, me = uuid_param(webhook_id, "id"), access.principal().user_id
    changes = data.model_dump(exclude_unset=True)
    for name, value in changes.items():
        if value is None:
            raise ApiError(400, "validation_error", f"{name} cannot be null", {"field": name})
    events = _check_events(data.events) if data.events is not None else None
    await admin().check_webhook(me, client_id, webhook_id)  # 404 before any DNS lookup
    url = await admin().check_target(data.url) if data.url is not None else None
    change = WebhookChange(url=url, events=events, enabled=data.enabled)
    return webhook_out(await admin().change(me, client_id, webhook_id, change))


@blueprint.delete("/<client_id>/webhooks/<webhook_id>")
@access.first_party
@tag(["Webhooks"])
async def delete_webhook(client_id: str, webhook_id: str) -> tuple[str, int]:
    """Delete the webhook with its pending deliveries and delivery log. 204."""
    webhook_id = uuid_param(webhook_id, "id")
    await admin().delete(access.principal().user_id, client_id, webhook_id)
    return "", 204


@blueprint.post("/<client_id>/webhooks/<webhook_id>/rotate-secret")
@access.first_party
@tag(["Webhooks"])
@validate_response(WebhookWithSecret)
async def rotate_secret(client_id: str, webhook_id: str) -> WebhookWithSecret:
    """A new signing secret, returned once. Every attempt from now on (retries of earlier
    events included) is signed with it; verify with both secrets while you switch over."""
    webhook_id = uuid_param(webhook_id, "id")
    return with_secret(await admin().rotate_secret(access.principal().user_id, client_id, webhook_id))


@blueprint.get("/<client_id>/webhooks/<webhook_id>/deliveries")
@access.first_party
@tag(["Webhooks"])
@validate_querystring(PageQuery)
@validate_response(DeliveryPageOut)
async def list_deliveries(client_id: str, webhook_id: str, query_args: PageQuery) -> DeliveryPageOut:
    """The delivery log, newest first, each delivery with every attempt (time, status
    code, latency, error); cursor pagination, `limit` ≤ 100. Finished deliveries are kept
    for `[webhooks] log_retention_days`."""
    webhook_id, me = uuid_param(webhook_id, "id"), access.principal().user_id
    page = await admin().deliveries(me, client_id, webhook_id, query_args.limit, query_args.cursor)
    return DeliveryPageOut(items=[delivery_out(d) for d in page.items], nextCursor=page.next_cursor)


@blueprint.post("/<client_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
@access.first_party
@tag(["Webhooks"])
@validate_response(DeliveryOut, 202)
async def redeliver(client_id: str, webhook_id: str, delivery_id: str) -> tuple[DeliveryOut, int]:
    """Queue a new delivery of the same event (same event id, name and body), due now,
    on a fresh retry schedule. 409 `webhook_disabled` while the webhook is disabled."""
    webhook_id, delivery_id = uuid_param(webhook_id, "id"), uuid_param(delivery_id, "deliveryId")
    created = await admin().redeliver(access.principal().user_id, client_id, webhook_id, delivery_id)
    return delivery_out(created), 202
