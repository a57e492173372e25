"""Rate limits. Routes name their budget once:

    @limited("chat_send")

Categories: chat_send, moderation, token, app_create, subscriptions, roles_write,
interactive. The global per-IP budget applies to every route.

Enforcement: two steps of the request checks every listener runs (`request_checks`):
- `client_ip_budget`, first of the checks after a browser's preflight (so before
  authentication, and a garbage token cannot dodge it): the global budget, per client IP;
- `route_budget`, after the access check (so the caller is known): the route's category
  budget, keyed by `budget_key` below;
and X-RateLimit-Limit / -Remaining / -Reset on every response, errors included, reporting
the tightest budget that applied (the refusing one on a 429).
A refusal is 429 `{error: "rate_limit_exceeded", message, retry_after}` + `Retry-After`;
`details.retry_after` repeats the seconds where a client reads the error's details.

Header meanings under GCRA (a burst of Limit, then Limit per window, evenly):
X-RateLimit-Limit = the budget per window; -Remaining = requests that would pass right
now; -Reset = Unix second by which Remaining is back at Limit; Retry-After (on a 429) =
whole seconds (>= 1) until the next request passes, which is sooner than Reset.
A refused request is not counted, so retrying early does not push the wait back.

Other users of the budgets (the Events API counts new Engine.IO sessions, which bypass
Quart): `runtime().rate_limits` is a `RateLimits` (None when disabled);
`.per_ip.hit(("ip", client_ip(...)), now_ns)` and `too_many_requests(decision, "global")`.
Chat send on the gateway (`volthub/http/chat_send.py`) runs the same steps, so a client
has one budget whichever port it posts on.

The arithmetic is `protocol.ratelimit` (sans-IO). Where the counts live is the broker's
(`rt.bus.budgets`, chosen with it at start-up): on SQLite (one process) in this process's
memory; on PostgreSQL with `[cluster] shared_rate_limits` (the default) each budget is one
row of the database, so every process spends the same budget: a client gets each budget
once, whichever process it reaches. With `[cluster] broker = "redis"` the budgets live in
Redis instead (one key each, changed by compare-and-set), falling back to the database
while Redis does not answer. New Engine.IO sessions (checked synchronously, outside Quart) are counted against the
per-IP budget in memory in either mode. `[ratelimit] enabled = false` makes no budgets
(`runtime().rate_limits` is None): the steps spend nothing and no headers are added.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from volthub.http import access
from volthub.http.errors import ApiError
from volthub.http.rate_budgets import BUDGETS
from volthub.http.runtime import Runtime
from volthub.hub.broker_budgets import LocalBudgets
from volthub.protocol.oauth.client_auth import MalformedBasic, parse_basic
from volthub.protocol.ratelimit import Decision, Gcra, to_ns

F = TypeVar("F", bound=Callable[..., Any])
ATTRIBUTE = "__volthub_rate_category__"
CATEGORIES = ("chat_send", "moderation", "token", "app_create", "subscriptions", "roles_write", "interactive")
# Client-chosen strings end up in keys: cap them so keys stay small.
_MAX_CLIENT_ID = 128
_IN_PROCESS = "__volthub_rate_limited_in_process__"
# Where the routes marked `counted_in_process` spend, whatever the broker keeps.
_IN_MEMORY = LocalBudgets()


def limited(category: str) -> Callable[[F], F]:
    if category not in CATEGORIES:
        raise ValueError(f"unknown rate-limit category {category!r}")

    def mark(fn: F) -> F:
        setattr(fn, ATTRIBUTE, category)
        return fn

    return mark


def counted_in_process(fn: F) -> F:
    """Count this route's requests in this process's memory even when budgets are shared
    in the database: a liveness probe must answer while the database is unreachable."""
    setattr(fn, _IN_PROCESS, True)
    return fn


def category_of(view: Callable[..., Any] | None) -> str | None:
    return getattr(view, ATTRIBUTE, None)


def counted_in_process_of(view: Callable[..., Any] | None) -> bool:
    return bool(getattr(view, _IN_PROCESS, False))


# --- who is counted (pure) -------------------------------------------------------------------


def client_ip(client: str | None) -> str:
    """The key a client address is counted under: IPv6 clients per /64, since one host
    commonly holds a whole /64. `client` is the request's client as the listener judged it
    (volthub.protocol.client_address: behind a trusted proxy, the forwarded client).
    """
    try:
        address = ipaddress.ip_address((client or "").strip())
    except ValueError:
        return client or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def budget_key(category: str, caller: access.Principal | None, ip: str, client_id: str | None = None) -> Hashable:
    """Whose budget a request of `category` spends.

    token:          (client_id, IP) — there is no bearer token; client_id may be None.
    app_create:     the user.
    subscriptions:  the client: an OAuth app as a whole, else the first-party user.
    other writes:   the access token identity: OAuth (app, user), "per app and
                    streamer"; first-party the user.
    Without a caller (a public route, no token) every category falls back to the IP.
    """
    if category == "token":
        return ("token", (client_id or "")[:_MAX_CLIENT_ID] or None, ip)
    if caller is None:
        return (category, "ip", ip)
    if category == "app_create" or caller.is_first_party:
        return (category, "user", caller.user_id)
    if category == "subscriptions":
        return (category, "app", caller.client_id)
    return (category, "grant", caller.client_id, caller.user_id)


def basic_client_id(authorization: str | None) -> str | None:
    """client_id from `client_secret_basic`; None when absent or malformed."""
    try:
        credentials = parse_basic(authorization)
    except MalformedBasic:
        return None
    return (credentials.client_id or None) if credentials else None


def spend(rt: Runtime, limiter: Gcra, key: Hashable, name: str, *, in_process: bool = False) -> Awaitable[Decision]:
    """Count one request against `limiter`'s budget for `key` (`name`: its category, or
    "global") where the broker keeps budgets: in this process's memory, or shared by every
    process. `in_process`: this route is always counted in memory. A plain function that
    hands back the budgets' own awaitable: no extra step per request."""
    budgets = _IN_MEMORY if in_process else rt.bus.budgets
    return budgets.spend(limiter, key, name, to_ns(rt.clock.now()))


async def forget_full_budgets(rt: Runtime) -> None:
    """Background service: the broker's budgets delete those stored that are full again,
    off the requests' path (nothing to do when they are counted in memory)."""
    if rt.rate_limits is not None:
        await rt.bus.budgets.forget_full()


def too_many_requests(decision: Decision, name: str) -> ApiError:
    seconds = decision.retry_after
    window = "hour" if BUDGETS.get(name, ("", 60))[1] == 3600 else "minute"
    return ApiError(
        429,
        "rate_limit_exceeded",
        f"rate limit exceeded ({name}: {decision.limit} per {window}); retry in {seconds} s",
        details={"retry_after": seconds},
        headers={"Retry-After": str(seconds)},
        extra={"retry_after": seconds},
    )
