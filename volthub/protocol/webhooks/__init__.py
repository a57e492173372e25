"""Webhooks: sans-IO signing, target policy and retry schedule.

For receivers, the one function to know is :func:`verify`::

    from volthub.protocol.webhooks import verify, WebhookVerificationError

    try:
        event = verify(secret, request.headers, raw_body)  # raw bytes, as received
    except WebhookVerificationError:
        return 401  # bad signature or old timestamp

It accepts our ``X-Service-*`` headers or the Standard Webhooks ``webhook-*`` headers,
a list of secrets during rotation, and returns the parsed body.
"""

from volthub.protocol.webhooks.schedule import (
    DEFAULT_DELAYS,
    MAX_FAILED_ATTEMPTS,
    MAX_RETRY_AFTER,
    Outcome,
    OutcomeKind,
    attempt_offsets,
    classify_response,
    first_attempt_at,
    next_attempt_at,
    parse_retry_after,
    should_disable,
)
from volthub.protocol.webhooks.signing import (
    DEFAULT_TOLERANCE,
    WebhookVerificationError,
    delivery_headers,
    encode_delivery_body,
    generate_secret,
    sign_delivery,
    standard_signature,
    verify,
)
from volthub.protocol.webhooks.targets import (
    InvalidTarget,
    TargetURL,
    check_url,
    choose_addresses,
    classify,
    forbidden_reason,
    resolve_and_check,
)

__all__ = [
    "DEFAULT_DELAYS",
    "DEFAULT_TOLERANCE",
    "MAX_FAILED_ATTEMPTS",
    "MAX_RETRY_AFTER",
    "InvalidTarget",
    "Outcome",
    "OutcomeKind",
    "TargetURL",
    "WebhookVerificationError",
    "attempt_offsets",
    "check_url",
    "choose_addresses",
    "classify",
    "classify_response",
    "delivery_headers",
    "encode_delivery_body",
    "first_attempt_at",
    "forbidden_reason",
    "generate_secret",
    "next_attempt_at",
    "parse_retry_after",
    "resolve_and_check",
    "should_disable",
    "sign_delivery",
    "standard_signature",
    "verify",
]
