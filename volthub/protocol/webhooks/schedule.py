"""The webhook retry schedule and response classification, as pure functions.

Delays are gaps, not offsets: the first attempt runs ``delays[0]`` after
the event, and each later gap starts when the preceding attempt failed. With the default
``[0, 60, 300, 1800, 7200]`` and instant failures the attempts run at 0, 1, 6, 36 and
156 minutes; after the 5th failed attempt the delivery gives up and the webhook is
disabled. All times are epoch seconds (floats), as the hub clock gives.
"""

from __future__ import annotations

import enum
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

from volthub.protocol.webhooks.signing import HeaderSource, normalize_headers

DEFAULT_DELAYS: tuple[float, ...] = (0, 60, 300, 1800, 7200)
MAX_FAILED_ATTEMPTS = 5
# A receiver's Retry-After is honoured up to this many seconds: beyond it, one
# misconfigured header would park the delivery (and its outbox row) for years.
MAX_RETRY_AFTER = 86_400.0
RETRY_AFTER_STATUSES = frozenset({429, 503})

_DELTA_SECONDS = re.compile(r"[0-9]+")


def attempt_offsets(delays: Sequence[float] = DEFAULT_DELAYS) -> list[float]:
    """Seconds from the event to each attempt when every attempt fails instantly."""
    offsets, total = [], 0.0
    for gap in delays:
        total += gap
        offsets.append(total)
    return offsets


def first_attempt_at(event_at: float, delays: Sequence[float] = DEFAULT_DELAYS) -> float:
    """When the first attempt of a new delivery is due."""
    return event_at + (delays[0] if delays else 0)


def next_attempt_at(
    failed_attempts: int,
    last_failure_at: float,
    delays: Sequence[float] = DEFAULT_DELAYS,
    retry_after: float | None = None,
    max_failed: int = MAX_FAILED_ATTEMPTS,
) -> float | None:
    """When to try again after ``failed_attempts`` failures, or None to give up.

    The gap after the n-th failure is ``delays[n]`` (the last gap repeats if
    ``max_failed`` outlasts the list). A receiver's ``retry_after`` (seconds, from a
    429/503) can postpone the attempt, never advance it, and is capped at
    :data:`MAX_RETRY_AFTER`.
    """
    if failed_attempts < 1:
        raise ValueError(f"failed_attempts counts failures so far, got {failed_attempts}")
    if failed_attempts >= max_failed or not delays:
        return None
    gap = delays[min(failed_attempts, len(delays) - 1)]
    scheduled = last_failure_at + gap
    if retry_after is None or not math.isfinite(retry_after) or retry_after <= 0:
        return scheduled
    return max(scheduled, last_failure_at + min(retry_after, MAX_RETRY_AFTER))


def should_disable(consecutive_failures: int, max_failed: int = MAX_FAILED_ATTEMPTS) -> bool:
    """Whether a webhook with this many consecutive failed attempts is disabled."""
    return consecutive_failures >= max_failed


class OutcomeKind(enum.Enum):
    SUCCESS = "success"
    GONE = "gone"  # 410: the receiver asks us to stop; disable at once
    RETRY = "retry"


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended. ``reason`` is short text for the attempt record."""

    kind: OutcomeKind
    reason: str
    status: int | None = None
    retry_after: float | None = None  # seconds, only from 429/503

    @property
    def ok(self) -> bool:
        return self.kind is OutcomeKind.SUCCESS

    @property
    def disable_now(self) -> bool:
        return self.kind is OutcomeKind.GONE


def classify_response(
    status: int | None,
    error: str | None,
    headers: HeaderSource | None = None,
    now: float | None = None,
) -> Outcome:
    """Classify an attempt: ``status`` of the response, or None with ``error`` text when
    no response came (timeout, connection refused, TLS failure...).

    2xx is success; 410 Gone disables the webhook at once; everything else, 3xx
    included (redirects are not followed: the new location was never checked against
    the address policy), is a retryable failure. ``now`` (epoch seconds) resolves an
    HTTP-date Retry-After.
    """
    if status is None:
        return Outcome(OutcomeKind.RETRY, error or "no response")
    if 200 <= status <= 299:
        return Outcome(OutcomeKind.SUCCESS, f"HTTP {status}", status)
    if status == 410:
        return Outcome(OutcomeKind.GONE, "HTTP 410 Gone", status)
    retry_after = None
    if status in RETRY_AFTER_STATUSES and headers is not None:
        value = normalize_headers(headers).get("retry-after")
        retry_after = None if value is None else parse_retry_after(value, now)
    return Outcome(OutcomeKind.RETRY, f"HTTP {status}", status, retry_after)


def parse_retry_after(value: str, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (delta-seconds or HTTP-date), or None
    when it is malformed. A date in the past gives 0."""
    text = value.strip()
    if _DELTA_SECONDS.fullmatch(text):
        # Bounded: int() refuses > 4300 digits, and anything this large is capped later.
        return float(int(text)) if len(text) <= 12 else 1e12
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment is None:
        return None
    if moment.tzinfo is None:  # asctime form or "-0000": HTTP-dates are always UTC
        moment = moment.replace(tzinfo=UTC)
    current = time.time() if now is None else now
    return max(0.0, moment.timestamp() - current)
