"""The checks a request meets before its route's handler: one ordered list of named steps
(`STEPS`), run by every listener that serves a route.

    cors_preflight    a browser's preflight is answered (204, or 403 `origin_not_allowed`)
    client_ip_budget  the global per-IP budget (before anything else costs work)
    nul_in_url        NUL in the path or query: 400 `invalid_request`
    access            the token and its scope (401, 403), or none for a public route
    body_size         413 past the route's body limit
    body_type         415 for a body that is not of the route's types
    route_budget      the route's rate-limit category, keyed by the caller
    routing           404/405 for a path or method the listener does not route
    json_body         the JSON body and the route's model (400)
    channel           the channel named in the path (400 `invalid_id`, 404, 403)

Each step takes the listener's :class:`RequestView` (method, path, headers, the caller
once known, the route's rules) and returns to go on, or raises the `ApiError` that
answers (a preflight raises :class:`Answered`). A listener adapts its own request to a
view once per request, and every answer carries `X-Request-Id`, the CORS headers and,
when rate limiting is on, the `X-RateLimit-*` headers of the budgets spent
(`rate_limit_headers`); it is counted in the HTTP metrics and gets one access line.

How each listener runs the list:

- the main port (Quart): `install` registers one before_request hook per `HOOK` step, in
  the list's order; the `AHEAD` step is `cors.middleware`, an ASGI layer ahead of Quart
  (it answers paths Quart does not route too), and the `VIEW` steps are Quart's routing
  and the route's own declarations on its view (quart-schema's `validate_request`,
  `access.own_channel`), run by the view's decorators;
- the Events API gateway's chat send (`chat_send`) runs every step itself, reading the
  same declarations from the same view, then calls the route's send.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from quart import Quart, Response, current_app, g, request
from quart_schema.validation import QUART_SCHEMA_REQUEST_ATTRIBUTE

from volthub.config import ServerSettings
from volthub.http import access, cors, observe, ratelimit, request_rules
from volthub.http.errors import ApiError, validation_error
from volthub.http.runtime import Runtime, runtime
from volthub.protocol.cors import CorsPolicy, Kind, Verdict
from volthub.protocol.ratelimit import Decision, Gcra, tightest

Headers = list[tuple[bytes, bytes]]
Check = Callable[["RequestView"], Awaitable[None] | None]

# How the main port runs a step (the gateway runs every step itself).
AHEAD: Final = "ahead of the app"  # an ASGI layer ahead of Quart
HOOK: Final = "before_request hook"
VIEW: Final = "the view"  # Quart's routing and the view's own decorators


@dataclass(frozen=True, slots=True)
class RouteRules:
    """What a route's view declares about the requests it takes, read from it once."""

    routed: bool
    declaration: access.Access | None = None
    category: str | None = None
    counted_in_process: bool = False
    accepted: tuple[str, ...] = access.JSON_ONLY
    body_limit: int = 0
    check_first: Callable[[], None] | None = None
    model: Any = None  # the body's pydantic model (quart-schema's `validate_request`)
    own_channel: access.OwnChannel | None = None
    # The listener's refusal of a request it does not route (the gateway's 405).
    unrouted: Callable[[], ApiError] | None = None

    @classmethod
    def of(cls, view: Callable[..., Any] | None, server: ServerSettings) -> RouteRules:
        if view is None:  # routing failed: the listener answers 404/405 after the hooks
            return cls(routed=False, body_limit=server.small_body_bytes)
        schema = getattr(view, QUART_SCHEMA_REQUEST_ATTRIBUTE, None)
        return cls(
            routed=True,
            declaration=access.declaration_of(view),
            category=ratelimit.category_of(view),
            counted_in_process=ratelimit.counted_in_process_of(view),
            accepted=access.accepted_body_types(view),
            body_limit=access.body_limit_of(view, server.small_body_bytes, server.max_body_bytes),
            check_first=access.check_first_of(view),
            model=schema[0] if schema else None,
            own_channel=getattr(view, access.OWN_CHANNEL, None),
        )


class Answered(Exception):
    """A step answered the request itself, with no error: a browser's preflight."""

    def __init__(self, status: int, body: bytes, headers: Headers) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers


class RequestView:
    """What the steps read of a request, and what they learn of it (the caller, the
    budgets spent, the body's data). A listener makes one per request from its own
    request object; the methods below are what differs by listener."""

    __slots__ = (
        "method",
        "path",
        "query_string",
        "headers",
        "_first_values",
        "client",
        "rid",
        "rules",
        "rt",
        "content_length",
        "chunked",
        "cors_policy",
        "cors",
        "principal",
        "ip",
        "decisions",
        "channel_id",
        "data",
    )

    def __init__(self, scope: dict[str, Any], path: str, rid: str, rules: RouteRules, rt: Runtime) -> None:
        """`scope`: the request's ASGI-style scope (both listeners have one); `path`: its
        path, percent-decoded."""
        self.method: str = scope["method"]
        self.path = path
        self.query_string: bytes = scope["query_string"]
        self.headers: Iterable[tuple[bytes, bytes]] = scope.get("headers", ())
        # Each name's first value, found in one pass: the steps look up several headers.
        self._first_values: dict[bytes, bytes] = {}
        for key, value in self.headers:
            self._first_values.setdefault(key.lower(), value)
        self.client: str | None = (scope.get("client") or (None,))[0]
        self.rid = rid
        self.rules = rules
        self.rt = rt
        length = self.header(b"content-length")
        self.content_length: int | None = int(length) if length is not None and length.isdigit() else None
        self.chunked = "chunked" in (self.header(b"transfer-encoding") or "").lower()
        self.cors_policy: CorsPolicy | None = None
        self.cors: Verdict | None = None
        self.principal: access.Principal | None = None
        self.ip = ""
        self.decisions: list[Decision] = []
        self.channel_id = ""  # the path's value, canonical once the `channel` step passed
        self.data: Any = None

    def header(self, name: bytes) -> str | None:
        """The first value of the header `name` (lower-case), or None."""
        value = self._first_values.get(name)
        return None if value is None else value.decode("latin-1")

    async def read_ahead_length(self) -> int | None:
        """The length of a chunked body, where the listener reads it ahead (None: the
        listener counts it as it reads the body)."""
        return None

    async def body_client_id(self) -> str | None:
        """The token endpoint's `client_id` from the body (None: the listener has none)."""
        return None

    async def body(self) -> bytes:
        """The request's body, at most the route's limit (413 past it): for the listeners
        that run the `json_body` step themselves (the main port's views read their own)."""
        raise NotImplementedError


# --- the steps -------------------------------------------------------------------------------


def _answer_preflight(view: RequestView) -> None:
    assert view.cors_policy is not None, "the listener names its CORS policy"
    verdict = view.cors = cors.judged(view.cors_policy, view.method, view.headers, cors.API)
    if verdict.kind is not Kind.SERVE:
        raise Answered(*cors.preflight_answer(verdict, view.rid))


async def _spend_client_ip_budget(view: RequestView) -> None:
    limits = view.rt.rate_limits
    if limits is None:
        return
    view.ip = ratelimit.client_ip(view.client)
    await _spend(view, limits.per_ip, ("ip", view.ip), "global")


def _refuse_nul_in_url(view: RequestView) -> None:
    request_rules.refuse_nul_in_url(view.path, view.query_string)


async def _check_access(view: RequestView) -> None:
    rules = view.rules
    if not rules.routed:  # routing failed: answered after the hooks
        return
    declaration = rules.declaration
    if declaration is None:
        raise ApiError(403, "forbidden", "this route has no access declaration")
    authorization = view.header(b"authorization")
    if rules.check_first is not None:
        rules.check_first()
    if declaration.kind == "public":
        view.principal = await access.optional_caller(authorization, view.rt)
        return
    caller = view.principal = await access.bearer_caller(authorization, view.rt)
    access.check_allowed(declaration, caller)


async def _limit_body_size(view: RequestView) -> None:
    """Each route's body limit (`[server] small_body_bytes`, or `max_body_bytes` for the
    routes marked `access.large_body`): 413 past it, before the body is used."""
    length = view.content_length
    if length is None and view.chunked:
        length = await view.read_ahead_length()
    request_rules.check_body_size(length, view.rules.body_limit)


def _check_body_type(view: RequestView) -> None:
    """Bodies are JSON unless a route opts into forms (the token endpoint, consent page)."""
    has_body = bool(view.content_length) or view.chunked
    request_rules.check_body_type(view.method, view.header(b"content-type"), has_body, view.rules.accepted)


async def _spend_route_budget(view: RequestView) -> None:
    limits, category = view.rt.rate_limits, view.rules.category
    if limits is None or category is None:
        return
    client_id = None
    if category == "token":
        client_id = ratelimit.basic_client_id(view.header(b"authorization")) or await view.body_client_id()
    key = ratelimit.budget_key(category, view.principal, view.ip, client_id)
    await _spend(view, limits.budgets[category], key, category)


async def _spend(view: RequestView, limiter: Gcra, key: Any, name: str) -> None:
    decision = await ratelimit.spend(view.rt, limiter, key, name, in_process=view.rules.counted_in_process)
    view.decisions.append(decision)
    if not decision.allowed:
        raise ratelimit.too_many_requests(decision, name)


def _refuse_unrouted(view: RequestView) -> None:
    unrouted = view.rules.unrouted
    if unrouted is not None:
        raise unrouted()


async def _read_json_body(view: RequestView) -> None:
    body = await view.body()
    document = request_rules.parse_json(body) if request_rules.is_json(view.header(b"content-type")) else None
    try:
        view.data = view.rules.model.model_validate(document)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise validation_error(exc) from None


async def _resolve_channel(view: RequestView) -> None:
    rule, caller = view.rules.own_channel, view.principal
    assert rule is not None and caller is not None, "a token route naming a channel"
    view.channel_id = await rule.resolve(view.channel_id, caller, view.rt)


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    check: Check  # returns None, or an awaitable to await (a step that reads or spends)
    main_port: str  # how the main port runs it: AHEAD, HOOK or VIEW


STEPS: Final[tuple[Step, ...]] = (
    Step("cors_preflight", _answer_preflight, AHEAD),
    Step("client_ip_budget", _spend_client_ip_budget, HOOK),
    Step("nul_in_url", _refuse_nul_in_url, HOOK),
    Step("access", _check_access, HOOK),
    Step("body_size", _limit_body_size, HOOK),
    Step("body_type", _check_body_type, HOOK),
    Step("route_budget", _spend_route_budget, HOOK),
    Step("routing", _refuse_unrouted, VIEW),
    Step("json_body", _read_json_body, VIEW),
    Step("channel", _resolve_channel, VIEW),
)


async def run(view: RequestView) -> None:
    """Every step, in order; the first refusal raises (an `ApiError`, or `Answered`)."""
    for step in STEPS:
        pending = step.check(view)
        if pending is not None:
            await pending


def rate_limit_headers(decisions: list[Decision]) -> Headers:
    """`X-RateLimit-*` of the tightest budget the request spent (none when it spent none),
    as they go on the wire (lower-case names, the form the gateway writes)."""
    if not decisions:
        return []
    shown = tightest(decisions)
    return [
        (b"x-ratelimit-limit", str(shown.limit).encode()),
        (b"x-ratelimit-remaining", str(shown.remaining).encode()),
        (b"x-ratelimit-reset", str(shown.reset).encode()),
    ]


# --- the main port ---------------------------------------------------------------------------


class MainPortRequest(RequestView):
    """The view of the Quart request in context."""

    __slots__ = ()

    async def read_ahead_length(self) -> int | None:
        return len(await request.get_data(cache=True))  # at most max_body_bytes, read ahead

    async def body_client_id(self) -> str | None:
        """Reading the body here is safe: Quart caches it (and the parsed form) for the
        view. An unreadable body yields None, and the request is counted per IP alone."""
        if request.mimetype == "application/x-www-form-urlencoded":
            value = (await request.form).get("client_id")
        elif request.is_json:
            body = await request.get_json(silent=True)
            value = body.get("client_id") if isinstance(body, dict) else None
        else:
            value = None
        return value if isinstance(value, str) and value else None


def install(app: Quart, server: ServerSettings, rate_limiting: bool) -> None:
    """The main port's hooks: one before_request hook per `HOOK` step, in `STEPS`' order
    (first of all hooks, so that no request goes uncounted by the per-IP budget), and the
    rate-limit headers on every answer when rate limiting is on."""
    rules_of_views: dict[str | None, RouteRules] = {}
    hooks = [_hook(step, server, rules_of_views) for step in STEPS if step.main_port == HOOK]
    app.before_request_funcs.setdefault(None, [])[:0] = hooks
    if rate_limiting:
        app.after_request(_add_rate_limit_headers)


def _hook(
    step: Step, server: ServerSettings, rules_of_views: dict[str | None, RouteRules]
) -> Callable[[], Awaitable[None]]:
    """The step as a before_request hook: the first hook of a request makes its view."""
    check = step.check

    async def hook() -> None:
        view: MainPortRequest | None = g.get(access.REQUEST_VIEW_KEY)
        if view is None:
            view = _view_of_request(server, rules_of_views)
            setattr(g, access.REQUEST_VIEW_KEY, view)
        pending = check(view)
        if pending is not None:
            await pending

    hook.__name__ = hook.__qualname__ = f"check_{step.name}"
    return hook


def _view_of_request(server: ServerSettings, rules_of_views: dict[str | None, RouteRules]) -> MainPortRequest:
    endpoint = request.endpoint
    rules = rules_of_views.get(endpoint)
    if rules is None:
        view = current_app.view_functions.get(endpoint) if endpoint else None
        rules = rules_of_views[endpoint] = RouteRules.of(view, server)
    scope: Any = request.scope  # Quart types it as its own TypedDicts: a plain ASGI scope here
    return MainPortRequest(scope, request.path, observe.request_id(scope), rules, runtime())


_HEADER_NAMES: Final = {
    b"x-ratelimit-limit": "X-RateLimit-Limit",
    b"x-ratelimit-remaining": "X-RateLimit-Remaining",
    b"x-ratelimit-reset": "X-RateLimit-Reset",
}


async def _add_rate_limit_headers(response: Response) -> Response:
    view: RequestView | None = g.get(access.REQUEST_VIEW_KEY)
    if view is not None:
        for name, value in rate_limit_headers(view.decisions):
            response.headers[_HEADER_NAMES[name]] = value.decode()
    return response
