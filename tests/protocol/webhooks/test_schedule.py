"""The retry schedule and response classification."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol.webhooks import (
    DEFAULT_DELAYS,
    MAX_FAILED_ATTEMPTS,
    MAX_RETRY_AFTER,
    OutcomeKind,
    attempt_offsets,
    classify_response,
    first_attempt_at,
    next_attempt_at,
    parse_retry_after,
    should_disable,
)

T0 = 1_700_000_000.0


def test_defaults() -> None:
    assert list(DEFAULT_DELAYS) == [0, 60, 300, 1800, 7200]
    assert MAX_FAILED_ATTEMPTS == 5


def test_attempt_offsets() -> None:
    # The default schedule: attempts at 0, 1, 6, 36 and 156 minutes.
    assert attempt_offsets() == [0, 60, 360, 2160, 9360]
    assert [o / 60 for o in attempt_offsets()] == [0, 1, 6, 36, 156]


def test_simulated_delivery_with_instant_failures() -> None:
    """Walk one delivery through the schedule: 5 attempts, then give up."""
    attempts = [first_attempt_at(T0)]
    failed = 0
    while True:
        failed += 1  # the attempt at attempts[-1] failed instantly
        nxt = next_attempt_at(failed, attempts[-1])
        if nxt is None:
            break
        attempts.append(nxt)
    assert [a - T0 for a in attempts] == [0, 60, 360, 2160, 9360]
    assert failed == 5


def test_gaps_start_when_the_attempt_failed() -> None:
    # The attempt after the 1st failure waits 60 s from that failure, not from the event.
    assert next_attempt_at(1, T0 + 9.5) == T0 + 9.5 + 60
    assert next_attempt_at(2, T0) == T0 + 300
    assert next_attempt_at(3, T0) == T0 + 1800
    assert next_attempt_at(4, T0) == T0 + 7200


def test_gives_up_after_fifth_failure() -> None:
    assert next_attempt_at(4, T0) is not None
    assert next_attempt_at(5, T0) is None
    assert next_attempt_at(6, T0) is None


def test_should_disable() -> None:
    assert [should_disable(n) for n in range(7)] == [False] * 5 + [True] * 2
    assert should_disable(2, max_failed=2)


def test_failed_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError):
        next_attempt_at(0, T0)


def test_configured_delays() -> None:
    # `VOLTHUB_WEBHOOKS__RETRY_DELAYS="0,1,2,3,4"`.
    delays = [0, 1, 2, 3, 4]
    assert attempt_offsets(delays) == [0, 1, 3, 6, 10]
    assert [next_attempt_at(n, T0, delays) for n in range(1, 6)] == [
        T0 + 1,
        T0 + 2,
        T0 + 3,
        T0 + 4,
        None,
    ]


def test_short_delay_list_repeats_last_gap() -> None:
    assert next_attempt_at(3, T0, [0, 10]) == T0 + 10
    assert next_attempt_at(5, T0, [0, 10]) is None
    assert next_attempt_at(1, T0, []) is None


def test_first_attempt_at() -> None:
    assert first_attempt_at(T0) == T0
    assert first_attempt_at(T0, [5, 10]) == T0 + 5


# --------------------------------------------------------------------------- Retry-After


def test_retry_after_longer_than_schedule_postpones() -> None:
    assert next_attempt_at(1, T0, retry_after=120) == T0 + 120


def test_retry_after_shorter_than_schedule_is_ignored() -> None:
    assert next_attempt_at(1, T0, retry_after=5) == T0 + 60
    assert next_attempt_at(2, T0, retry_after=299) == T0 + 300


@pytest.mark.parametrize("value", [None, 0, -10, float("nan"), float("inf")])
def test_unusable_retry_after_keeps_schedule(value) -> None:
    assert next_attempt_at(1, T0, retry_after=value) == T0 + 60


def test_retry_after_is_capped() -> None:
    assert next_attempt_at(1, T0, retry_after=10**9) == T0 + MAX_RETRY_AFTER


def test_retry_after_never_revives_a_dead_delivery() -> None:
    assert next_attempt_at(5, T0, retry_after=10) is None


@given(
    failed=st.integers(1, 10),
    at=st.floats(0, 4e9),
    retry_after=st.none() | st.floats(-1e6, 1e7, allow_nan=False),
)
def test_never_sooner_than_schedule(failed: int, at: float, retry_after: float | None) -> None:
    plain = next_attempt_at(failed, at)
    honoured = next_attempt_at(failed, at, retry_after=retry_after)
    if plain is None:
        assert honoured is None
    else:
        assert honoured is not None and plain <= honoured <= at + max(MAX_RETRY_AFTER, 7200)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("120", 120.0),
        ("0", 0.0),
        (" 30 ", 30.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("9" * 5000, 1e12),
    ],
)
def test_parse_retry_after_seconds(value: str, expected: float | None) -> None:
    assert parse_retry_after(value, now=T0) == expected


def test_parse_retry_after_http_date() -> None:
    # RFC 9110's example date, in each of its three accepted forms.
    moment = 784111777.0  # Sun, 06 Nov 1994 08:49:37 GMT
    for text in ("Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"):
        assert parse_retry_after(text, now=moment - 90) == 90.0, text
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=moment + 10) == 0.0


def test_parse_retry_after_generated_date() -> None:
    later = datetime.fromtimestamp(T0 + 600, tz=UTC)
    assert parse_retry_after(format_datetime(later, usegmt=True), now=T0) == 600.0


# --------------------------------------------------------------------------- outcomes


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_success(status: int) -> None:
    outcome = classify_response(status, None, {})
    assert outcome.kind is OutcomeKind.SUCCESS and outcome.ok and not outcome.disable_now
    assert outcome.status == status


def test_gone_disables_at_once() -> None:
    outcome = classify_response(410, None, {"Retry-After": "60"})
    assert outcome.kind is OutcomeKind.GONE and outcome.disable_now and not outcome.ok
    assert outcome.retry_after is None


@pytest.mark.parametrize("status", [100, 199, 300, 301, 302, 304, 400, 401, 404, 408, 500, 502, 504, 600])
def test_other_statuses_retry(status: int) -> None:
    outcome = classify_response(status, None, {"Retry-After": "600"})
    assert outcome.kind is OutcomeKind.RETRY
    assert outcome.retry_after is None  # only 429 and 503 carry a usable Retry-After
    assert str(status) in outcome.reason


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_on_429_and_503(status: int) -> None:
    outcome = classify_response(status, None, {"retry-after": "120"})
    assert outcome.kind is OutcomeKind.RETRY and outcome.retry_after == 120.0
    upper = classify_response(status, None, [(b"Retry-After", b"Sun, 06 Nov 1994 08:49:37 GMT")], now=784111777.0 - 30)
    assert upper.retry_after == 30.0
    assert classify_response(status, None, {"Retry-After": "garbage"}).retry_after is None
    assert classify_response(status, None, None).retry_after is None


@pytest.mark.parametrize("error", ["timeout after 10 s", "connection refused", "TLS handshake failed"])
def test_transport_errors_retry(error: str) -> None:
    outcome = classify_response(None, error, None)
    assert outcome.kind is OutcomeKind.RETRY and outcome.reason == error and outcome.status is None


def test_no_status_no_error() -> None:
    assert classify_response(None, None).kind is OutcomeKind.RETRY


def test_outcome_feeds_schedule() -> None:
    outcome = classify_response(429, None, {"Retry-After": "600"})
    assert next_attempt_at(1, T0, retry_after=outcome.retry_after) == T0 + 600
