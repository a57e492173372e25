"""The one error builder: every error response is `{error, message, details?}`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from quart import Quart, Response, has_request_context, jsonify, request
from quart_schema import RequestSchemaValidationError
from werkzeug.exceptions import HTTPException

from volthub.http.observe import request_id
from volthub.hub.actor import ChannelBusy, ChannelUnavailable, ChatRefused, UnknownChannel
from volthub.hub.clock import iso8601
from volthub.persistence import DatabaseUnavailable, InvalidData, StorageUnavailable
from volthub.persistence.pagination import InvalidCursor
from volthub.protocol.webhooks import InvalidTarget
from volthub.services.accounts import DisplayNameRefused
from volthub.services.apps import AppNotFound, PublicClient
from volthub.services.bots import BotNameTaken, BotNotConfigured, NoBotConnected, NotABotApp
from volthub.services.catalogue import TeamNotFound
from volthub.services.channel_points import (
    ChannelNotLive,
    NotChannelModerator,
    RedemptionLimitReached,
    RedemptionNotFound,
    RedemptionResolved,
    RewardDisabled,
    RewardNotFound,
    StreamNotFound,
    TooManyRewards,
)
from volthub.services.channels import ChannelNotFound
from volthub.services.emotes import EmoteExists, EmoteNotFound
from volthub.services.extvideo import InvalidState, ProviderError, ReauthRequired
from volthub.services.extvideo import NotConfigured as ExtNotConfigured
from volthub.services.extvideo import NotConnected as ExtNotConnected
from volthub.services.idempotency import KeyInFlight, KeyReused
from volthub.services.journals import JournalNotFound, SlugTaken, TooCostly, TooManyImages
from volthub.services.media import UploadRefused
from volthub.services.notifications import NotificationNotFound
from volthub.services.passwords import PasswordWorkBusy
from volthub.services.payments import BadCallback, PaymentsNotConfigured
from volthub.services.raids import RaidBanned, RaidCooldown, RaidNotLive, RaidTargetNotFound, SelfRaid
from volthub.services.streams import (
    ClipNotFound,
    ClipOutOfRange,
    NoStreamToClip,
    TagsRefused,
    UnknownCategory,
    VodNotFound,
)
from volthub.services.subscriptions import AlreadySubscribed, InvalidRecipient, NoEligibleRecipients, NotSubscribed
from volthub.services.volts import InsufficientFunds, PaymentDeclined, PurchaseNotFound, SelfTransfer
from volthub.services.webhooks import DeliveryNotFound, TooManyWebhooks, WebhookDisabled, WebhookNotFound

# Codes for Quart's own HTTP errors, so 404/405/413 look like ours.
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limit_exceeded",
}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.extra = extra or {}

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"error": self.code, "message": self.message}
        if self.details is not None:
            body["details"] = self.details
        body.update(self.extra)
        return body


def bad_request(message: str, **details: Any) -> ApiError:
    return ApiError(400, "validation_error", message, details or None)


def not_found(what: str, **details: Any) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found", details or None)


def error_response(error: ApiError) -> Response:
    """The one error response: the body, its headers, and the request's id in `details`
    (`requestId`, the same as the `X-Request-Id` header) for the operator's logs."""
    rid = request_id(request.scope) if has_request_context() else None  # type: ignore[arg-type]
    response = jsonify(error_body(error, rid))
    response.status_code = error.status
    response.headers.update(error.headers)
    return response


def error_body(error: ApiError, rid: str | None) -> dict[str, Any]:
    """What :func:`error_response` sends (any listener): `requestId` joins the details."""
    body = error.body()
    if rid is not None:
        body["details"] = {**(error.details or {}), "requestId": rid}
    return body


def validation_error(error: Exception) -> ApiError:
    """A request body its model refused: 400 `validation_error` naming every field."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return ApiError(400, "validation_error", "request is not valid", {})
    fields = []
    for item in errors(include_url=False, include_input=False, include_context=False):
        location = ".".join(str(part) for part in item["loc"]) or "body"
        fields.append({"field": location, "message": item["msg"], "type": item["type"]})
    first = fields[0] if fields else None
    message = f"{first['field']}: {first['message']}" if first else "request is not valid"
    return ApiError(400, "validation_error", message, {"fields": fields})


def api_error_of(error: Exception) -> ApiError | None:
    """What a client sees of an exception a route raised (None: unexpected, a 500)."""
    if isinstance(error, ApiError):
        return error
    for kind in type(error).__mro__:
        translate = DOMAIN_ERRORS.get(kind)
        if translate is not None:
            return translate(error)
    return None


# --- domain errors → HTTP errors ------------------------------------------------------------
# The one table from what services, actors and repositories raise to what a client sees.
# Blueprints never register their own handlers: a new domain error gets a row here.

DomainError = Callable[[Any], ApiError]


# One log line per distinct store fault per this many seconds: a full disk must not write a
# traceback per request (one full-disk test measured 12,464 lines in 28 s).
FAULT_LOG_INTERVAL = 10.0
_fault_logged_at: dict[str, float] = {}
_fault_log = logging.getLogger("volthub.database")


def _log_fault(kind: str, message: str) -> None:
    now = time.monotonic()
    if now - _fault_logged_at.get(kind, -FAULT_LOG_INTERVAL) >= FAULT_LOG_INTERVAL:
        _fault_logged_at[kind] = now
        _fault_log.error("%s: %s (answering 503; logged at most every %gs)", kind, message, FAULT_LOG_INTERVAL)


def _database_unavailable(error: DatabaseUnavailable) -> ApiError:
    _log_fault("database_unavailable", str(error))
    return ApiError(
        503, "database_unavailable", "the database is unavailable; retry shortly", headers={"Retry-After": "5"}
    )


def _storage_unavailable(error: StorageUnavailable) -> ApiError:
    _log_fault(f"storage_unavailable:{error.fault}", str(error))
    return ApiError(
        503,
        "storage_unavailable",
        f"the server cannot store data right now ({error})",
        {"fault": error.fault},
        headers={"Retry-After": "30"},
    )


def _refused(error: ChatRefused) -> ApiError:
    refusal = error.refusal
    return ApiError(refusal.status, refusal.code, refusal.message, refusal.details)


def _display_name_refused(error: DisplayNameRefused) -> ApiError:
    # The shape of a field the body's model refused, which is what it is to the client.
    field = {"field": "displayName", "message": str(error), "type": "value_error"}
    return ApiError(400, "validation_error", f"displayName: {error}", {"fields": [field]})


DOMAIN_ERRORS: dict[type[Exception], DomainError] = {
    DisplayNameRefused: _display_name_refused,
    InvalidData: lambda _: ApiError(400, "invalid_value", "a value was refused by the database"),
    DatabaseUnavailable: _database_unavailable,
    PasswordWorkBusy: lambda _: ApiError(
        503, "busy", "too many sign-ins at once; retry in a moment", headers={"Retry-After": "1"}
    ),
    StorageUnavailable: _storage_unavailable,
    InvalidCursor: lambda error: ApiError(400, "invalid_cursor", str(error), {"field": "cursor"}),
    ChatRefused: _refused,
    ChannelBusy: lambda _: ApiError(
        503,
        "channel_busy",
        "this channel has too many commands queued; retry in a moment",
        headers={"Retry-After": "1"},
    ),
    ChannelUnavailable: lambda _: ApiError(
        503, "service_unavailable", "the channel service is shutting down", headers={"Retry-After": "5"}
    ),
    UnknownChannel: lambda error: ApiError(404, "not_found", "channel not found", {"channelId": str(error)}),
    ChannelNotFound: lambda error: ApiError(404, "not_found", "channel not found", {"channelId": str(error)}),
    NotificationNotFound: lambda error: ApiError(404, "not_found", "notification not found", {"id": str(error)}),
    TooManyRewards: lambda error: ApiError(409, "too_many_rewards", str(error)),
    # Channel-points redemptions (services.channel_points.Redemptions).
    RewardNotFound: lambda error: not_found("reward", itemId=error.reward_id),
    RewardDisabled: lambda _: ApiError(409, "reward_disabled", "the channel has switched this reward off"),
    ChannelNotLive: lambda _: ApiError(409, "channel_not_live", "rewards are redeemed during a live stream"),
    RedemptionLimitReached: lambda error: ApiError(
        409, "redemption_limit_reached", str(error), {"scope": error.scope, "limit": error.limit}
    ),
    StreamNotFound: lambda error: not_found("stream", streamId=str(error)),
    RedemptionNotFound: lambda error: not_found("redemption", redemptionId=str(error)),
    RedemptionResolved: lambda error: ApiError(409, "redemption_resolved", str(error), {"status": error.status}),
    # Developer apps and their webhooks (services.apps, services.webhooks).
    AppNotFound: lambda error: not_found("app", clientId=error.client_id),
    PublicClient: lambda _: ApiError(400, "public_client", "this app is a public client: it has no secret to rotate"),
    WebhookNotFound: lambda error: not_found("webhook", webhookId=error.webhook_id),
    DeliveryNotFound: lambda error: not_found("delivery", deliveryId=error.delivery_id),
    TooManyWebhooks: lambda error: ApiError(409, "too_many_webhooks", str(error)),
    WebhookDisabled: lambda _: ApiError(409, "webhook_disabled", "re-enable the webhook before redelivering"),
    InvalidTarget: lambda error: ApiError(400, error.code, error.message, {"field": "url"}),
    # Streams, tags and clips (services.streams).
    TagsRefused: lambda error: ApiError(400, error.problem.code, error.problem.message, _tag_details(error.problem)),
    UnknownCategory: lambda error: ApiError(400, "unknown_category", str(error), {"field": "category"}),
    NoStreamToClip: lambda _: ApiError(409, "no_stream", "the channel is not live and has no recorded stream"),
    ClipOutOfRange: lambda error: ApiError(
        400, "clip_out_of_range", str(error), {"field": "startOffsetMs", "availableMs": error.available_ms}
    ),
    ClipNotFound: lambda error: not_found("clip", clipId=str(error)),
    VodNotFound: lambda error: not_found("vod", vodId=str(error)),
    # Uploads, emotes (services.media, services.emotes).
    UploadRefused: lambda error: ApiError(error.status, error.code, error.message, error.details),
    EmoteExists: lambda error: ApiError(
        409, "emote_exists", "this collection already has that code", {"code": str(error)}
    ),
    EmoteNotFound: lambda error: not_found("emote", code=error.code),
    TeamNotFound: lambda error: not_found("team", slug=str(error)),
    JournalNotFound: lambda error: not_found("journal", slug=str(error)),
    SlugTaken: lambda error: ApiError(
        409, "slug_taken", "you already have a journal with that slug", {"slug": str(error)}
    ),
    TooCostly: lambda error: ApiError(400, "validation_error", str(error), {"field": "body"}),
    TooManyImages: lambda error: ApiError(409, "too_many_images", f"a journal holds at most {error} images"),
    # The external video platform (services.extvideo).
    ExtNotConfigured: lambda _: ApiError(
        409, "extvideo_not_configured", "the external video integration is not set up on this server"
    ),
    ExtNotConnected: lambda _: ApiError(409, "extvideo_not_connected", "connect your video platform account first"),
    ReauthRequired: lambda _: ApiError(
        409, "extvideo_reauth_required", "the video platform no longer accepts this connection: connect again"
    ),
    InvalidState: lambda _: ApiError(400, "invalid_state", "this authorisation is unknown, used or expired"),
    ProviderError: lambda error: ApiError(502, "extvideo_provider_error", str(error)),
    # Bots (services.bots).
    NotABotApp: lambda error: ApiError(
        400, "not_a_bot_app", "this app is not a bot app (set botApp: true)", {"clientId": error.client_id}
    ),
    BotNotConfigured: lambda error: ApiError(
        404, "bot_not_configured", "this app has no bot configured", {"clientId": error.client_id}
    ),
    NoBotConnected: lambda _: ApiError(
        404, "bot_not_connected", "no bot is connected to this channel: authorise a bot app or select a bot"
    ),
    BotNameTaken: lambda error: ApiError(
        409,
        "name_taken",
        "that name is taken or reserved",
        {"name": error.name, **({"reservedUntil": iso8601(error.reserved_until)} if error.reserved_until else {})},
    ),
    # Money and membership (services.volts, services.subscriptions, services.idempotency).
    InsufficientFunds: lambda error: ApiError(
        400, "insufficient_funds", "the balance is too low", {"balance": error.balance, "needed": error.needed}
    ),
    SelfTransfer: lambda _: ApiError(400, "invalid_recipient", "you cannot pay your own channel"),
    NotChannelModerator: lambda error: ApiError(
        403,
        "not_channel_moderator",
        "only the channel's owner or its moderators may do this",
        {"channelId": str(error)},
    ),
    # Raids (services.raids).
    RaidNotLive: lambda _: ApiError(409, "not_live", "only a live channel can raid"),
    RaidTargetNotFound: lambda error: ApiError(404, "not_found", "channel not found", {"username": str(error)}),
    SelfRaid: lambda _: ApiError(400, "invalid_target", "a channel cannot raid itself"),
    RaidBanned: lambda _: ApiError(403, "raid_refused", "that channel has banned you"),
    RaidCooldown: lambda error: ApiError(
        429,
        "raid_cooldown",
        "you raided too recently" if error.which == "raider" else "that channel was raided too recently",
        {"cooldown": error.which, "retryAfterSeconds": error.retry_after_seconds},
        headers={"Retry-After": str(error.retry_after_seconds)},
    ),
    InvalidRecipient: lambda _: ApiError(
        400, "invalid_recipient", "gift to someone other than yourself or the channel"
    ),
    AlreadySubscribed: lambda error: ApiError(
        409, "already_subscribed", "already subscribed to this channel", {"userId": error.user_id}
    ),
    NotSubscribed: lambda _: ApiError(404, "not_subscribed", "no active subscription to this channel"),
    NoEligibleRecipients: lambda _: ApiError(
        409, "no_eligible_recipients", "no follower of this channel can receive a gift subscription"
    ),
    PaymentDeclined: lambda error: ApiError(402, "payment_declined", str(error) or "the payment was declined"),
    PaymentsNotConfigured: lambda _: ApiError(
        503, "payments_not_configured", "this server takes no payments: no payment provider is configured"
    ),
    PurchaseNotFound: lambda _: ApiError(404, "not_found", "purchase not found"),
    BadCallback: lambda error: ApiError(
        401, "invalid_signature", str(error) or "the callback's signature does not verify"
    ),
    KeyReused: lambda _: ApiError(
        422,
        "idempotency_key_reused",
        "this Idempotency-Key was used with a different request",
        {"header": "Idempotency-Key"},
    ),
    KeyInFlight: lambda _: ApiError(
        409,
        "idempotency_key_in_flight",
        "the first request with this Idempotency-Key has not finished; retry later",
        {"header": "Idempotency-Key"},
        headers={"Retry-After": "5"},
    ),
}


def _tag_details(problem: Any) -> dict[str, Any]:
    details = {"field": problem.field, "limit": problem.limit, "counted": problem.counted}
    if problem.tag is not None:
        details["tag"] = problem.tag
    return details


def install_error_handlers(app: Quart) -> None:
    @app.errorhandler(ApiError)
    async def _api_error(error: ApiError) -> Response:
        return error_response(error)

    @app.errorhandler(RequestSchemaValidationError)
    async def _schema_error(error: RequestSchemaValidationError) -> Response:
        return error_response(validation_error(error.validation_error))

    @app.errorhandler(HTTPException)
    async def _http_error(error: HTTPException) -> Response:
        status = error.code or 500
        code = _HTTP_CODES.get(status, "http_error")
        message = error.description or error.name
        response = error_response(ApiError(status, code, message))
        if status == 405 and error.get_headers():
            for name, value in error.get_headers():
                if name.lower() == "allow":
                    response.headers["Allow"] = value
        return response

    for kind, translate in DOMAIN_ERRORS.items():
        _install_domain_error(app, kind, translate)

    @app.errorhandler(Exception)
    async def _unexpected(error: Exception) -> Response:
        app.logger.exception("unhandled error", exc_info=error)
        return error_response(ApiError(500, "internal_error", "internal server error"))


def _install_domain_error(app: Quart, kind: type[Exception], translate: DomainError) -> None:
    async def handle(error: Exception) -> Response:
        return error_response(translate(error))

    app.register_error_handler(kind, handle)
