"""Access, declared once per route and enforced in one place (the `access` step of the
request checks, `request_checks`, on every listener).

    @access.public                 anyone, no token needed
    @access.token()                any valid token (first-party, or OAuth with no scope needed)
    @access.token("user:write")    first-party, or an OAuth token holding that scope
    @access.first_party            first-party tokens only; OAuth tokens get 403

A route without a declaration is refused (fail closed), and a test walks every route.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from quart import Quart, g

from volthub.http.errors import ApiError
from volthub.http.params import uuid_param
from volthub.http.runtime import Runtime, Services, runtime
from volthub.services.tokens import ACCESS, TokenError, TokenService

F = TypeVar("F", bound=Callable[..., Any])
ATTRIBUTE = "__volthub_access__"
FIRST_PARTY = "first_party"
OAUTH = "oauth"


@dataclass(frozen=True)
class Access:
    kind: str  # "public" | "token" | "first_party"
    scope: str | None = None


@dataclass(frozen=True)
class Principal:
    user_id: str
    kind: str  # FIRST_PARTY or OAUTH
    scopes: frozenset[str] = frozenset()
    client_id: str | None = None
    grant_id: str | None = None
    session_id: str | None = None  # a first-party token's stored session (None: issued before them)

    @property
    def is_first_party(self) -> bool:
        return self.kind == FIRST_PARTY

    def allows(self, scope: str) -> bool:
        return self.is_first_party or scope in self.scopes


def _declare(fn: F, declaration: Access) -> F:
    setattr(fn, ATTRIBUTE, declaration)
    return fn


def public(fn: F) -> F:
    return _declare(fn, Access("public"))


def first_party(fn: F) -> F:
    return _declare(fn, Access("first_party"))


def token(scope: str | None = None) -> Callable[[F], F]:
    return lambda fn: _declare(fn, Access("token", scope))


@dataclass(frozen=True)
class OwnChannel:
    """What :func:`own_channel` declared for a route (kept on the view, so every listener
    that serves the route checks the same)."""

    param: str = "channel_id"
    name: str = "channelId"
    first_party_anywhere: bool = False
    must_exist: bool = False
    known_to_exist: Callable[[Runtime, str], bool] | None = None

    async def resolve(self, channel_id: str, caller: Principal, rt: Runtime) -> str:
        """The canonical channel id, or the route's 400/404/403."""
        if self.must_exist and not self._vouched(channel_id, caller, rt):
            # a channel that does not exist is 404, whoever asks
            await check_channel_exists(channel_id, name=self.name, caller=caller, rt=rt)
        return check_own_channel(
            channel_id, name=self.name, first_party_anywhere=self.first_party_anywhere, caller=caller
        )

    def _vouched(self, channel_id: str, caller: Principal, rt: Runtime) -> bool:
        if self.known_to_exist is None or not self.first_party_anywhere:
            return False
        return caller.is_first_party and self.known_to_exist(rt, channel_id)


OWN_CHANNEL = "__volthub_own_channel__"


def own_channel(
    param: str = "channel_id",
    *,
    name: str = "channelId",
    first_party_anywhere: bool = False,
    must_exist: bool = False,
    known_to_exist: Callable[[Runtime, str], bool] | None = None,
) -> Callable[[F], F]:
    """A channel named in the path: it must be the token owner's own.

    The path value `param` (shown to clients as `name`) must be a UUID (400 `invalid_id`),
    with `must_exist` the id of a channel (404 `not_found`, before ownership), and
    the caller's user id (403 `channel_not_owned`); the view receives it canonicalised. With
    `first_party_anywhere`, a first-party token may name any channel (a viewer's own client
    posting in chat); an OAuth token never may.

    `known_to_exist(runtime, channel_id)`: the route's own store can vouch for the channel without a
    database read (a chat channel whose actor is running); asked only for a first-party
    caller with `first_party_anywhere`, whose request passes no ownership check, so a
    channel removed meanwhile is still refused with the same 404 by the route's store.
    """
    rule = OwnChannel(param, name, first_party_anywhere, must_exist, known_to_exist)

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        async def view(*args: Any, **kwargs: Any) -> Any:
            kwargs[param] = await rule.resolve(kwargs[param], principal(), runtime())
            return await fn(*args, **kwargs)

        setattr(view, OWN_CHANNEL, rule)
        return view  # type: ignore[return-value]

    return decorate


async def check_channel_exists(
    channel_id: str, *, name: str = "channelId", caller: Principal | None = None, rt: Runtime | None = None
) -> None:
    channel_id = uuid_param(channel_id, name)
    if channel_id == (caller or principal()).user_id:
        return  # the caller's own channel: its token's user exists (no database read)
    if await (rt or runtime()).services.accounts.get_user(channel_id) is None:
        raise ApiError(404, "not_found", "no channel has this id", {name: channel_id})


def check_own_channel(
    channel_id: str, *, name: str = "channelId", first_party_anywhere: bool = False, caller: Principal | None = None
) -> str:
    """The check behind :func:`own_channel`, for a channel id that arrives in a body."""
    channel_id = uuid_param(channel_id, name)
    caller = caller or principal()
    if first_party_anywhere and caller.is_first_party:
        return channel_id
    if channel_id != caller.user_id:
        raise ApiError(403, "channel_not_owned", "this token acts only on its owner's own channel", {name: channel_id})
    return channel_id


JSON_ONLY = ("application/json",)


def accepts(*mimetypes: str) -> Callable[[F], F]:
    """Let a route take other body types than JSON (the token endpoint, the consent form)."""

    def mark(fn: F) -> F:
        setattr(fn, "__volthub_accepts__", mimetypes)  # noqa: B010  (F is any callable)
        return fn

    return mark


def accepted_body_types(view: Callable[..., Any] | None) -> tuple[str, ...]:
    return getattr(view, "__volthub_accepts__", JSON_ONLY)


def checked_first(check: Callable[[], None]) -> Callable[[F], F]:
    """Run `check` with the access check, before anything looks at the request body (its
    size or content type): for routes that authenticate otherwise than by token (the
    media-server hooks' shared secret)."""

    def mark(fn: F) -> F:
        setattr(fn, "__volthub_check_first__", check)  # noqa: B010  (F is any callable)
        return fn

    return mark


def large_body(fn: F) -> F:
    """Let a route take a body up to `[server] max_body_bytes` (uploads, journals); every
    other route takes at most `small_body_bytes`."""
    setattr(fn, "__volthub_large_body__", True)  # noqa: B010  (F is any callable)
    return fn


def body_limit_of(view: Callable[..., Any] | None, small: int, large: int) -> int:
    return large if getattr(view, "__volthub_large_body__", False) else small


def declaration_of(view: Callable[..., Any]) -> Access | None:
    return getattr(view, ATTRIBUTE, None)


def unauthorized(code: str, message: str) -> ApiError:
    challenge = f'Bearer realm="volthub", error="{code}"' if code == "invalid_token" else 'Bearer realm="volthub"'
    return ApiError(401, code, message, headers={"WWW-Authenticate": challenge})


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise unauthorized("invalid_token", "Authorization header must be 'Bearer <token>'")
    return value.strip()


class Verifier(Protocol):
    """What verifying a token reads: the `Runtime`, or the Events API's part of it."""

    @property
    def tokens(self) -> TokenService: ...

    @property
    def services(self) -> Services: ...


async def authenticate(raw_token: str, rt: Verifier | None = None) -> Principal:
    """Verify a token (also used by the Events API connections, which pass their part of the
    runtime rather than push an app context per connect)."""
    rt = rt or runtime()
    try:
        claims = rt.tokens.verify(raw_token)
    except TokenError as exc:
        text = "token has expired" if exc.reason == "expired" else "token is not valid"
        raise unauthorized("invalid_token", text) from None
    if claims.kind != ACCESS:
        # The stored session behind the token must still stand (tokens without one do).
        active = await rt.services.sessions.active(claims)
        if not active:
            raise unauthorized("invalid_token", "token has been revoked")
        return Principal(claims.user_id, FIRST_PARTY, session_id=claims.session_id)
    # The grant behind the token decides what it may do now (None: revoked or gone).
    scopes = await rt.services.oauth.token_scopes(claims)
    if scopes is None:
        raise unauthorized("invalid_token", "token has been revoked")
    return Principal(claims.user_id, OAUTH, scopes, claims.client_id, claims.grant_id)


# Where the main port keeps the request's view of the request checks (`request_checks`),
# which holds the caller once the `access` step has run.
REQUEST_VIEW_KEY = "request_view"


def optional_principal() -> Principal | None:
    """The caller, when the request carried a valid token (None on a public route without one)."""
    view = g.get(REQUEST_VIEW_KEY)
    found: Principal | None = None if view is None else view.principal
    return found


def principal() -> Principal:
    """The caller of a route declared `token` or `first_party`."""
    found = optional_principal()
    if found is None:
        raise unauthorized("missing_token", "this route needs an Authorization: Bearer token")
    return found


def check_first_of(view: Callable[..., Any]) -> Callable[[], None] | None:
    """What `checked_first` asked to run with the access check (None: nothing)."""
    return getattr(view, "__volthub_check_first__", None)


async def bearer_caller(authorization: str | None, rt: Runtime | None = None) -> Principal:
    """The caller named by an Authorization header (401 without a valid token)."""
    raw = bearer_token(authorization)
    if raw is None:
        raise unauthorized("missing_token", "this route needs an Authorization: Bearer token")
    return await authenticate(raw, rt)


def check_allowed(declaration: Access, caller: Principal) -> None:
    """403 when a route declared `token(scope)` or `first_party` is not for this caller."""
    if declaration.kind == "first_party" and not caller.is_first_party:
        raise ApiError(403, "first_party_only", "this route does not accept third-party OAuth tokens")
    if declaration.scope and not caller.allows(declaration.scope):
        raise ApiError(
            403,
            "insufficient_scope",
            f"this route needs the {declaration.scope} scope",
            {"requiredScope": declaration.scope},
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{declaration.scope}"'},
        )


async def optional_caller(authorization: str | None, rt: Runtime | None = None) -> Principal | None:
    """Public routes ignore a bad token, but know who a good one belongs to."""
    try:
        raw = bearer_token(authorization)
        return await authenticate(raw, rt) if raw else None
    except ApiError:
        return None


def install(app: Quart) -> None:
    """Refuse a WebSocket route without an access declaration (fail closed). HTTP routes
    are checked by the request checks' `access` step (`request_checks`)."""

    @app.before_websocket
    async def _enforce_websocket_access() -> None:
        from quart import websocket

        endpoint = websocket.endpoint
        view = app.view_functions.get(endpoint) if endpoint else None
        if view is not None and declaration_of(view) is None:
            raise ApiError(403, "forbidden", "this route has no access declaration")
