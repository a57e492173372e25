"""Failed-login throttles: per account and per client address, configurable in
`[auth]`. Only failures are counted (GCRA, volthub.protocol.ratelimit); once a key is over
its budget, attempts are refused with 429 until one more is allowed, before any password
hash is spent, so a flood of wrong passwords cannot starve other people's logins of the
bounded hashing slots."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from volthub.config import AuthSettings
from volthub.protocol.ratelimit import DEFAULT_MAX_KEYS, NS_PER_SECOND, Gcra, Rate


@dataclass(frozen=True)
class Throttled:
    which: str  # "account" or "address"
    limit: int
    retry_after: int  # whole seconds, at least 1


class TooManyAttempts(Exception):
    def __init__(self, throttled: Throttled) -> None:
        super().__init__(throttled.which)
        self.throttled = throttled


class LoginThrottle:
    def __init__(self, settings: AuthSettings, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        window = settings.failed_login_window_seconds
        self._limiters = {
            "account": Gcra(Rate.per(settings.failed_logins_per_account, window), max_keys),
            "address": Gcra(Rate.per(settings.failed_logins_per_address, window), max_keys),
        }
        # (which, key) -> the instant (ns) from which one more attempt is allowed.
        self._blocked_until: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._max_keys = max_keys
        # Attempts being checked right now, per address: one address never holds more than
        # `concurrent_logins_per_address` of the hashing slots and their queue, so others'
        # logins wait behind a couple of its hashes at most, not behind its whole burst.
        self._in_flight: dict[str, int] = {}
        self._concurrency = settings.concurrent_logins_per_address

        # Addresses with a failed login within the window, by the instant of the last one:
        # they get one attempt at a time, so a flooding address holds one hashing slot.
        self._window_ns = round(window * NS_PER_SECOND)
        self._failed_at: OrderedDict[str, int] = OrderedDict()

    @contextlib.contextmanager
    def attempt(self, address: str, now_ns: int) -> Iterator[None]:
        """Hold one of the address's concurrent-attempt places; `TooManyAttempts` when none is free."""
        held = self._in_flight.get(address, 0)
        failed_at = self._failed_at.get(address)
        allowed = 1 if failed_at is not None and now_ns - failed_at < self._window_ns else self._concurrency
        if held >= allowed:
            raise TooManyAttempts(Throttled("address", allowed, 1))
        self._in_flight[address] = held + 1
        try:
            yield
        finally:
            remaining = self._in_flight[address] - 1
            if remaining:
                self._in_flight[address] = remaining
            else:
                del self._in_flight[address]

    def refusal(self, account: str, address: str, now_ns: int) -> Throttled | None:
        """The throttle that refuses an attempt now, or None."""
        for which, key in self._keys(account, address):
            until = self._blocked_until.get((which, key))
            if until is None:
                continue
            if until > now_ns:
                seconds = max(1, -(-(until - now_ns) // NS_PER_SECOND))
                return Throttled(which, self._limiters[which].rate.limit, seconds)
            del self._blocked_until[(which, key)]
        return None

    def failed(self, account: str, address: str, now_ns: int) -> None:
        """Count a failed attempt against both keys."""
        self._failed_at[address] = now_ns
        self._failed_at.move_to_end(address)
        while len(self._failed_at) > self._max_keys:
            self._failed_at.popitem(last=False)
        for which, key in self._keys(account, address):
            decision = self._limiters[which].hit((which, key), now_ns)
            if not decision.allowed:
                self._blocked_until[(which, key)] = now_ns + decision.retry_after_ns
                self._blocked_until.move_to_end((which, key))
                while len(self._blocked_until) > self._max_keys:
                    self._blocked_until.popitem(last=False)

    @staticmethod
    def _keys(account: str, address: str) -> tuple[tuple[str, str], tuple[str, str]]:
        return ("account", account.lower()), ("address", address)


def login_throttle() -> LoginThrottle:
    """The app's throttle (made on first use, kept with the app)."""
    from quart import current_app

    from volthub.http.runtime import runtime

    found: LoginThrottle | None = current_app.extensions.get("volthub_login_throttle")
    if found is None:
        found = current_app.extensions["volthub_login_throttle"] = LoginThrottle(runtime().settings.auth)
    return found


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
    from volthub.http.runtime import runtime
    from volthub.protocol.ratelimit import to_ns

    throttle, address, now_ns = login_throttle(), request_address(), to_ns(runtime().clock.now())
    refused = throttle.refusal(username, address, now_ns)
    if refused is not None:
        raise LoginThrottled(refused)
    try:
        with throttle.attempt(address, now_ns):
            user = await runtime().services.accounts.login(username, password)
    except TooManyAttempts as busy:
        raise LoginThrottled(busy.throttled) from None
    if user is None:
        throttle.failed(username, address, now_ns)
    return user
