"""Webhooks: the outbox sink, the dispatcher with its worker pool, the
HTTPS adapter, and the owner's administration of webhooks.

    event → OutboxSink (inside the change's transaction) → webhook_deliveries row
          → Dispatcher claims due rows (lease) → worker POSTs → attempt recorded

- `outbox`: `OutboxSink`, the `EventPublisher` transaction sink that writes delivery rows.
- `client`: `Deliverer`, one HTTPS POST per attempt to a policy-checked address.
- `dispatcher`: `Dispatcher`, claiming due rows, the worker pool, the attempt recorder.
- `direct`: test deliveries: one signed POST of a test event, stored nowhere.
- `admin`: `WebhookAdmin`, CRUD, secret rotation, delivery log and redelivery for an app's owner.

Protocol decisions (body, signatures, schedule, target policy) are the sans-IO modules in
`volthub.protocol.webhooks`; this package only moves bytes and rows. Every time comes from
the hub clock and every wait from Trio's, so MockClock drives the whole schedule in tests.
"""

from __future__ import annotations

from volthub.hub.publisher import EventPublisher
from volthub.services.webhooks.admin import (
    MAX_WEBHOOKS_PER_APP,
    DeliveryNotFound,
    TooManyWebhooks,
    WebhookAdmin,
    WebhookChange,
    WebhookDisabled,
    WebhookNotFound,
)
from volthub.services.webhooks.client import (
    MAX_ERROR_TEXT,
    MAX_RESPONSE_BYTES,
    USER_AGENT,
    AttemptResult,
    Deliverer,
    Resolver,
    make_ssl_context,
)
from volthub.services.webhooks.direct import TestDelivery
from volthub.services.webhooks.dispatcher import Dispatcher, WebhookConfig
from volthub.services.webhooks.outbox import OutboxSink, ScopeCheck, app_holds_scope, event_time_ms

__all__ = [
    "MAX_ERROR_TEXT",
    "MAX_RESPONSE_BYTES",
    "MAX_WEBHOOKS_PER_APP",
    "USER_AGENT",
    "AttemptResult",
    "Deliverer",
    "DeliveryNotFound",
    "Dispatcher",
    "OutboxSink",
    "Resolver",
    "ScopeCheck",
    "TestDelivery",
    "TooManyWebhooks",
    "WebhookAdmin",
    "WebhookChange",
    "WebhookConfig",
    "WebhookDisabled",
    "WebhookNotFound",
    "app_holds_scope",
    "event_time_ms",
    "install",
    "make_ssl_context",
]


def install(dispatcher: Dispatcher, publisher: EventPublisher) -> None:
    """Start-up wiring: the outbox sink on every event-publishing transaction, and the
    post-commit bus listener that wakes the workers for rows just written."""
    publisher.add_transaction_sink(dispatcher.sink)
    publisher.bus.subscribe(dispatcher.on_event)
