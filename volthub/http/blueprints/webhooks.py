"""App webhooks (spec §4.13, §2.14, §6.2): CRUD, secret rotation, delivery log, redelivery.

The app's owner manages them with a first-party token; another user's app is a 404.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import Field
from quart import Blueprint
from quart_schema import tag, validate_querystring, validate_request, validate_response

from volthub.http import access
from volthub.http.errors import ApiError, not_found
from volthub.http.params import uuid_param
from volthub.http.runtime import runtime
from volthub.http.schemas import Body, Model, PageQuery
from volthub.hub.clock import iso8601
from volthub.persistence import Tx
from volthub.persistence import apps as apps_repo
from volthub.persistence import webhooks as repo
from volthub.persistence.pagination import InvalidCursor
from volthub.protocol.catalogue import WEBHOOK_EVENT_GROUPS, unknown_events
from volthub.protocol.webhooks import InvalidTarget, generate_secret
from volthub.services.webhooks import Dispatcher

blueprint = Blueprint("webhooks", __name__, url_prefix="/api/developer/apps")

MAX_WEBHOOKS_PER_APP = 25
EventName = Annotated[str, Field(min_length=1, max_length=100)]


class WebhookCreate(Body):
    url: str = Field(min_length=1, max_length=2048, description="HTTPS endpoint")
    events: list[EventName] = Field(min_length=1, max_length=64, description="names from the webhook catalogue")


class WebhookPatch(Body):
    url: str | None = Field(None, min_length=1, max_length=2048)
    events: list[EventName] | None = Field(None, min_length=1, max_length=64)
    enabled: bool | None = Field(None, description="true re-enables a disabled webhook and resets its failure count")


class WebhookOut(Model):
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
    secret: str


class WebhookList(Model):
    items: list[WebhookOut]


class AttemptOut(Model):
    number: int
    attemptedAt: str
    outcome: Literal["success", "failure", "gone"]
    statusCode: int | None
    latencyMs: int
    error: str | None


class DeliveryOut(Model):
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
    items: list[DeliveryOut]
    nextCursor: str | None


def dispatcher() -> Dispatcher:
    return runtime().services["webhooks"]


def webhook_out(webhook: repo.Webhook) -> WebhookOut:
    return WebhookOut(
        id=webhook.id,
        url=webhook.url,
        events=webhook.events,
        enabled=webhook.enabled,
        status="enabled" if webhook.enabled else "disabled",
        disabledReason=webhook.disabled_reason,  # type: ignore[arg-type]
        consecutiveFailures=webhook.consecutive_failures,
        createdAt=iso8601(webhook.created_at),
        updatedAt=iso8601(webhook.updated_at),
    )


def with_secret(webhook: repo.Webhook) -> WebhookWithSecret:
    return WebhookWithSecret(**webhook_out(webhook).model_dump(), secret=webhook.secret)


def delivery_out(delivery: repo.Delivery) -> DeliveryOut:
    def at(ms: int | None) -> str | None:
        return None if ms is None else iso8601(ms)

    return DeliveryOut(
        id=delivery.id,
        eventId=delivery.event_id,
        event=delivery.event_name,
        status=delivery.state,  # type: ignore[arg-type]
        attemptCount=delivery.attempt_count,
        nextAttemptAt=at(delivery.next_attempt_at),
        redeliveryOf=delivery.redelivery_of,
        createdAt=iso8601(delivery.created_at),
        completedAt=at(delivery.completed_at),
        attempts=[
            AttemptOut(
                number=a.number,
                attemptedAt=iso8601(a.attempted_at),
                outcome=a.outcome,  # type: ignore[arg-type]
                statusCode=a.status_code,
                latencyMs=a.latency_ms,
                error=a.error,
            )
            for a in delivery.attempts
        ],
    )


def _own_app(tx: Tx, client_id: str, user_id: str) -> apps_repo.App:
    app = apps_repo.get_app(tx, client_id)
    if app is None or app.owner_id != user_id:  # someone else's app is not shown to exist
        raise not_found("app", clientId=client_id)
    return app


def _own_webhook(tx: Tx, client_id: str, webhook_id: str, user_id: str) -> repo.Webhook:
    _own_app(tx, client_id, user_id)
    webhook = repo.get_webhook(tx, client_id, webhook_id)
    if webhook is None:
        raise not_found("webhook", webhookId=webhook_id)
    return webhook


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


async def _check_url(url: str) -> str:
    try:
        return (await dispatcher().deliverer.check_target(url)).url
    except InvalidTarget as exc:
        raise ApiError(400, exc.code, exc.message, {"field": "url"}) from None


def _client_id(value: str) -> str:
    if not 1 <= len(value) <= 128:
        raise ApiError(400, "invalid_id", "clientId is not valid", {"field": "clientId"})
    return value


def _now_ms() -> int:
    return dispatcher().now_ms()


@blueprint.get("/<client_id>/webhooks")
@access.first_party
@tag(["Webhooks"])
@validate_response(WebhookList)
async def list_webhooks(client_id: str) -> WebhookList:
    """The app's webhooks (oldest first). Secrets are not included."""
    client_id, me = _client_id(client_id), access.principal().user_id

    def read(tx: Tx) -> list[repo.Webhook]:
        _own_app(tx, client_id, me)
        return repo.list_for_app(tx, client_id)

    return WebhookList(items=[webhook_out(w) for w in await runtime().db.read(read)])


@blueprint.post("/<client_id>/webhooks")
@access.first_party
@tag(["Webhooks"])
@validate_request(WebhookCreate)
@validate_response(WebhookWithSecret, 201)
async def create_webhook(client_id: str, data: WebhookCreate) -> tuple[WebhookWithSecret, int]:
    """Create a webhook for the app's owner's channel (spec §6.2). The signing secret
    (`whsec_…`) is returned only here and on rotate-secret.

    The URL must be HTTPS; loopback, private, link-local and other non-public targets, and
    names resolving to them, are refused (`private_target`) unless the operator set
    `[webhooks] allow_private_targets`. Unknown event names give 400 `unknown_events`.
    `chat.message` is delivered only while the owner has granted the app `chat:read`.
    At most 25 webhooks per app.
    """
    client_id, me = _client_id(client_id), access.principal().user_id
    events = _check_events(data.events)
    await runtime().db.read(lambda tx: _own_app(tx, client_id, me))
    url = await _check_url(data.url)
    now = _now_ms()

    def create(tx: Tx) -> repo.Webhook:
        _own_app(tx, client_id, me)
        if repo.count_for_app(tx, client_id) >= MAX_WEBHOOKS_PER_APP:
            raise ApiError(409, "too_many_webhooks", f"an app can have at most {MAX_WEBHOOKS_PER_APP} webhooks")
        return repo.create_webhook(
            tx,
            webhook_id=str(uuid.uuid4()),
            client_id=client_id,
            url=url,
            events=events,
            secret=generate_secret(),
            now_ms=now,
        )

    return with_secret(await runtime().db.write(create)), 201


@blueprint.get("/<client_id>/webhooks/<webhook_id>")
@access.first_party
@tag(["Webhooks"])
@validate_response(WebhookOut)
async def get_webhook(client_id: str, webhook_id: str) -> WebhookOut:
    """One webhook: `status` is `disabled` after 5 consecutive failed attempts, a 410 answer
    (`disabledReason`), or the owner's `enabled: false`."""
    client_id, webhook_id = _client_id(client_id), uuid_param(webhook_id, "id")
    me = access.principal().user_id
    return webhook_out(await runtime().db.read(lambda tx: _own_webhook(tx, client_id, webhook_id, me)))


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
    client_id, webhook_id = _client_id(client_id), uuid_param(webhook_id, "id")
    me = access.principal().user_id
    changes = data.model_dump(exclude_unset=True)
    for name, value in changes.items():
        if value is None:
            raise ApiError(400, "validation_error", f"{name} cannot be null", {"field": name})
    events = _check_events(data.events) if data.events is not None else None
    await runtime().db.read(lambda tx: _own_webhook(tx, client_id, webhook_id, me))
    url = await _check_url(data.url) if data.url is not None else None
    now = _now_ms()

    def change(tx: Tx) -> tuple[repo.Webhook, int]:
        current = _own_webhook(tx, client_id, webhook_id, me)
        repo.change_webhook(tx, webhook_id, now, url=url, events=events)
        resumed = 0
        if data.enabled is True and not current.enabled:
            resumed = repo.enable_webhook(tx, webhook_id, now)
        elif data.enabled is False and current.enabled:
            repo.disable_webhook(tx, webhook_id, repo.BY_OWNER, now)
        updated = repo.get_webhook(tx, client_id, webhook_id)
        assert updated is not None
        return updated, resumed

    webhook, resumed = await runtime().db.write(change)
    if resumed:
        dispatcher().wake()
    return webhook_out(webhook)


@blueprint.delete("/<client_id>/webhooks/<webhook_id>")
@access.first_party
@tag(["Webhooks"])
async def delete_webhook(client_id: str, webhook_id: str) -> tuple[str, int]:
    """Delete the webhook with its pending deliveries and delivery log. 204."""
    client_id, webhook_id = _client_id(client_id), uuid_param(webhook_id, "id")
    me = access.principal().user_id

    def delete(tx: Tx) -> None:
        _own_webhook(tx, client_id, webhook_id, me)
        repo.delete_webhook(tx, client_id, webhook_id)

    await runtime().db.write(delete)
    return "", 204


@blueprint.post("/<client_id>/webhooks/<webhook_id>/rotate-secret")
@access.first_party
@tag(["Webhooks"])
@validate_response(WebhookWithSecret)
async def rotate_secret(client_id: str, webhook_id: str) -> WebhookWithSecret:
    """A new signing secret, returned once. Every attempt from now on (retries of earlier
    events included) is signed with it; verify with both secrets while you switch over."""
    client_id, webhook_id = _client_id(client_id), uuid_param(webhook_id, "id")
    me = access.principal().user_id
    now, secret = _now_ms(), generate_secret()

    def rotate(tx: Tx) -> repo.Webhook:
        _own_webhook(tx, client_id, webhook_id, me)
        repo.set_secret(tx, webhook_id, secret, now)
        updated = repo.get_webhook(tx, client_id, webhook_id)
        assert updated is not None
        return updated

    return with_secret(await runtime().db.write(rotate))


@blueprint.get("/<client_id>/webhooks/<webhook_id>/deliveries")
@access.first_party
@tag(["Webhooks"])
@validate_querystring(PageQuery)
@validate_response(DeliveryPageOut)
async def list_deliveries(client_id: str, webhook_id: str, query_args: PageQuery) -> DeliveryPageOut:
    """The delivery log, newest first, each delivery with every attempt (time, status
    code, latency, error); cursor pagination, `limit` ≤ 100. Finished deliveries are kept
    for `[webhooks] log_retention_days`."""
    client_id, webhook_id = _client_id(client_id), uuid_param(webhook_id, "id")
    me = access.principal().user_id

    def read(tx: Tx) -> repo.DeliveryPage:
        _own_webhook(tx, client_id, webhook_id, me)
        return repo.list_deliveries(tx, webhook_id, query_args.limit, query_args.cursor)

    try:
        page = await runtime().db.read(read)
    except InvalidCursor as exc:
        raise ApiError(400, "invalid_cursor", str(exc), {"field": "cursor"}) from None
    return DeliveryPageOut(items=[delivery_out(d) for d in page.items], nextCursor=page.next_cursor)


@blueprint.post("/<client_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
@access.first_party
@tag(["Webhooks"])
@validate_response(DeliveryOut, 202)
async def redeliver(client_id: str, webhook_id: str, delivery_id: str) -> tuple[DeliveryOut, int]:
    """Queue a new delivery of the same event (same event id, name and body), due now,
    on a fresh retry schedule. 409 `webhook_disabled` while the webhook is disabled."""
    client_id, webhook_id = _client_id(client_id), uuid_param(webhook_id, "id")
    delivery_id = uuid_param(delivery_id, "deliveryId")
    me = access.principal().user_id
    now = _now_ms()

    def enqueue(tx: Tx) -> repo.Delivery:
        webhook = _own_webhook(tx, client_id, webhook_id, me)
        original = repo.get_delivery(tx, webhook_id, delivery_id)
        if original is None:
            raise not_found("delivery", deliveryId=delivery_id)
        if not webhook.enabled:
            raise ApiError(409, "webhook_disabled", "re-enable the webhook before redelivering")
        new_id = str(uuid.uuid4())
        repo.enqueue(
            tx,
            [
                repo.NewDelivery(
                    new_id, webhook_id, original.event_id, original.event_name, original.body, now, delivery_id
                )
            ],
            now,
        )
        created = repo.get_delivery(tx, webhook_id, new_id)
        assert created is not None
        return created

    created = await runtime().db.write(enqueue)
    dispatcher().wake()
    return delivery_out(created), 202
