"""Login starvation: failed-login throttles per account and per address, and a
bounded password-hashing queue."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from tests.conftest import make_settings, register
from volthub.config import AuthSettings
from volthub.http.login_guard import LoginThrottle
from volthub.protocol.ratelimit import NS_PER_SECOND
from volthub.services.passwords import Passwords, PasswordWorkBusy


def test_failures_are_throttled_per_account_and_per_address() -> None:
    throttle = LoginThrottle(
        AuthSettings(failed_logins_per_account=3, failed_logins_per_address=5, failed_login_window_seconds=60)
    )
    now = 10 * NS_PER_SECOND
    for _ in range(4):  # the fourth failure is over the account's budget of three
        assert throttle.refusal("Victim", "10.0.0.1", now) is None
        throttle.failed("Victim", "10.0.0.1", now)
    refused = throttle.refusal("victim", "10.0.0.9", now)  # any case, any address
    assert refused is not None and refused.which == "account" and refused.retry_after == 20
    assert throttle.refusal("someone", "10.0.0.1", now) is None  # the address has budget left
    throttle.failed("other", "10.0.0.1", now)
    throttle.failed("other2", "10.0.0.1", now)  # sixth failure from the address
    assert throttle.refusal("someone", "10.0.0.1", now).which == "address"  # type: ignore[union-attr]
    assert throttle.refusal("someone", "10.0.0.2", now) is None
    later = now + 20 * NS_PER_SECOND
    assert throttle.refusal("victim", "10.0.0.9", later) is None  # one more attempt allowed


@pytest.fixture
async def throttled_app(sqlite_url: str) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    settings = make_settings(
        sqlite_url,
        auth={"failed_logins_per_account": 100, "failed_logins_per_address": 3},
        ratelimit={"trust_forwarded_for": True},
    )
    app = create_app(settings)
    async with app.test_app():
        yield app


async def test_flooding_address_gets_429_and_others_still_sign_in(throttled_app: Any) -> None:
    client = throttled_app.test_client()
    victim = await register(client)
    flood = {"X-Forwarded-For": "203.0.113.7"}
    statuses = []
    for _ in range(8):
        response = await client.post(
            "/api/auth/login", json={"username": victim.username, "password": "wrong password"}, headers=flood
        )
        statuses.append(response.status_code)
    assert statuses[:4] == [401] * 4 and set(statuses[4:]) == {429}, statuses
    refused = await client.post(
        "/api/auth/login", json={"username": victim.username, "password": victim.password}, headers=flood
    )
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    body = await refused.get_json()
    assert body["error"] == "rate_limit_exceeded" and body["retry_after"] >= 1
    ok = await client.post(
        "/api/auth/login",
        json={"username": victim.username, "password": victim.password},
        headers={"X-Forwarded-For": "198.51.100.1"},
    )
    assert ok.status_code == 200


async def test_hashing_queue_is_bounded() -> None:
    passwords = Passwords(time_cost=1, memory_kib=1024, parallel_hashes=1, max_waiting=1)
    results: list[object] = []

    async def attempt() -> None:
        try:
            results.append(await passwords.hash("correct horse battery"))
        except PasswordWorkBusy as busy:
            results.append(busy)

    async with trio.open_nursery() as nursery:
        for _ in range(3):  # no checkpoint between the starts: one runs, one waits, one is refused
            nursery.start_soon(attempt)
    assert sum(isinstance(result, PasswordWorkBusy) for result in results) == 1
    assert sum(isinstance(result, str) for result in results) == 2


async def test_busy_hashing_is_503(throttled_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from volthub.services.passwords import Passwords as Real

    def busy(self: Real) -> None:
        raise PasswordWorkBusy()

    monkeypatch.setattr(Real, "_admit", busy)
    response = await throttled_app.test_client().post(
        "/api/auth/register", json={"username": "busy_user", "password": "correct horse battery"}
    )
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "1"
    assert (await response.get_json())["error"] == "busy"


def test_concurrent_attempts_per_address_are_bounded() -> None:
    from volthub.http.login_guard import TooManyAttempts

    throttle = LoginThrottle(AuthSettings(concurrent_logins_per_address=2, failed_login_window_seconds=60))
    now = NS_PER_SECOND
    with throttle.attempt("10.0.0.1", now), throttle.attempt("10.0.0.1", now):
        with pytest.raises(TooManyAttempts), throttle.attempt("10.0.0.1", now):
            pass
        with throttle.attempt("10.0.0.2", now):  # another address is not affected
            pass
    throttle.failed("someone", "10.0.0.1", now)  # a failing address gets one at a time
    with throttle.attempt("10.0.0.1", now), pytest.raises(TooManyAttempts), throttle.attempt("10.0.0.1", now):
        pass
    later = now + 61 * NS_PER_SECOND
    with throttle.attempt("10.0.0.1", later), throttle.attempt("10.0.0.1", later):
        pass  # the window has passed: two again
