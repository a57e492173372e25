"""Logins over HTTP behind the failed-login throttles (`services/login_throttle.py`): a
throttled attempt is refused with 429 before any password hash is spent."""

from __future__ import annotations

from typing import Any

from volthub.http.runtime import runtime
from volthub.services.login_throttle import LoginThrottle, Throttled, TooManyAttempts

__all__ = ["LoginThrottle", "LoginThrottled", "Throttled", "TooManyAttempts", "guarded_login", "request_address"]


def request_address() -> str:
    """The client address failed logins are counted under (as the rate limiter counts it)."""
    from quart import request

    from volthub.http.ratelimit import client_ip

    return client_ip((request.scope.get("client") or (None,))[0])


class LoginThrottled(Exception):
    def __init__(self, throttled: Throttled) -> None:
        super().__init__(throttled.which)
        self.throttled = throttled


async def guarded_login(username: str, password: str) -> Any:
    """`Accounts.login` behind the throttles: the one way a password is checked over HTTP
    (the login route and the consent page). The user, None for wrong credentials, or
    `LoginThrottled` before any hashing."""
    from volthub.protocol.ratelimit import to_ns

    rt = runtime()
    throttle, address, now_ns = rt.login_throttle, request_address(), to_ns(rt.clock.now())
    refused = throttle.refusal(username, address, now_ns)
    if refused is not None:
        raise LoginThrottled(refused)
    try:
        with throttle.attempt(address, now_ns):
            user = await rt.services.accounts.login(username, password)
    except TooManyAttempts as busy:
        raise LoginThrottled(busy.throttled) from None
    if user is None:
        throttle.failed(username, address, now_ns)
    return user
