"""Browsers on other origins: the CORS policy (`volthub.protocol.cors`) on the main port's
API, and the two policies every listener uses.

`middleware` wraps the app below the access log and request ids (`observe`), ahead of
Quart: a preflight for `/api/*` or `/.well-known/*` is answered here (the request checks'
first step, `cors_preflight`, on the main port), 204, before the authentication and
rate-limit hooks, which would refuse it (a preflight carries no token);
every other answer on those paths, errors included, leaves with the policy's headers. The
HTML pages (consent, dashboard, API reference) are outside those paths and stay
same-origin. A request from an origin that is not allowed gets no CORS headers, a
preflight from one gets 403 `origin_not_allowed`, and both are counted
(`volthub_cors_refused_requests_total`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

import orjson
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, RoutingException

from volthub import metrics
from volthub.config import Settings
from volthub.http.errors import ApiError, error_body
from volthub.http.observe import ROUTE_KEY, request_id
from volthub.protocol.cors import (
    ENGINEIO_METHODS,
    CorsPolicy,
    Headers,
    Kind,
    Verdict,
    answers_cross_origin,
    with_headers,
)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

API: Final = "api"
EVENTS: Final = "events"
JSON: Final = (b"content-type", b"application/json")


def api_policy(settings: Settings) -> CorsPolicy:
    """`[server] cors_origins`: the API paths, on the main port and the gateway's chat send."""
    return CorsPolicy.of(settings.server.cors_origins)


def events_policy(settings: Settings) -> CorsPolicy:
    """`[events] cors_origins` (else the server's): the Engine.IO paths on either listener."""
    return CorsPolicy.of(settings.events.origins_for_browsers(settings.server), ENGINEIO_METHODS)


def judged(policy: CorsPolicy, method: str, headers: Iterable[tuple[bytes, bytes]], paths: str) -> Verdict:
    """The policy's verdict on a request, a refusal counted under `paths` (api, events)."""
    verdict = policy.judge(method, headers)
    if verdict.refused:
        metrics.count_cors_refused(paths)
    return verdict


def origin_refused(origin: str | None) -> ApiError:
    return ApiError(
        403,
        "origin_not_allowed",
        "this server does not answer browsers on this origin",
        {"origin": origin},
    )


def refused_preflight_body(verdict: Verdict, rid: str) -> bytes:
    """The body of a refused preflight's 403 (the one error body; no CORS headers go with it)."""
    return orjson.dumps(error_body(origin_refused(verdict.origin), rid))


def preflight_answer(verdict: Verdict, rid: str) -> tuple[int, bytes, Headers]:
    """The answer to a preflight (a verdict that is not `SERVE`): 204 with the policy's
    headers, or 403 `origin_not_allowed` without them (the listener adds the length)."""
    if verdict.kind is Kind.PREFLIGHT:
        return 204, b"", verdict.headers
    return 403, refused_preflight_body(verdict, rid), [JSON]


def middleware(app: ASGIApp, url_map: Map, policy: CorsPolicy) -> ASGIApp:
    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not answers_cross_origin(scope.get("path", "")):
            await app(scope, receive, send)
            return
        verdict = judged(policy, scope["method"], scope.get("headers", ()), API)
        if verdict.kind is Kind.SERVE:
            await app(scope, receive, _adding(send, verdict.headers))
            return
        _label_route(scope, url_map)
        status, body, headers = preflight_answer(verdict, request_id(scope))
        if body:
            headers = [*headers, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return asgi


def _adding(send: Send, added: Headers) -> Send:
    async def send_with_cors(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": with_headers(message.get("headers", ()), added)}
        await send(message)

    return send_with_cors


def _label_route(scope: Scope, url_map: Map) -> None:
    """A preflight answered here is counted under its route's template, as Quart would."""
    try:
        rule, _ = url_map.bind("").match(scope["path"], method="OPTIONS", return_rule=True)
    except (HTTPException, RoutingException):
        return  # no such route: counted as unmatched
    scope[ROUTE_KEY] = rule.rule
