"""Chat send on the Events API gateway: `POST /api/integrations/oauth/chat/channels/
{channelId}/messages` served by the gateway's own h11 listener (`[events] gateway_port`),
the fast path for bots, beside the same route on the main port.

It is the same route, not a copy of it: it runs the request checks every listener runs
(`request_checks.STEPS`, in their one order: a browser's preflight, the per-IP budget,
NUL in the URL, the token and its scope, the body's size and type, the route's budget,
the method, the JSON body and its model, the channel) over a view of its h11 request,
reading what to check from the route's view in `blueprints/chat.py` (its access
declaration, rate-limit category, body model and channel rule), and the send itself is
the view's `post_message`. What it skips is the main port's per-request machinery
(Hypercorn's connection and stream objects, Quart's request context, the hooks'
dispatch), which costs more per request than the send.

Every answer carries `X-Request-Id`, the CORS headers and, when rate limiting is on, the
`X-RateLimit-*` headers; it is counted in the HTTP metrics and written to the access log
under the route's template, as on the main port.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import unquote

import h11
import orjson

from volthub.http import cors, observe, request_checks, request_rules
from volthub.http.blueprints import chat
from volthub.http.errors import ApiError, api_error_of, error_body
from volthub.http.events.asgi import Scope
from volthub.http.events.gateway import Gateway
from volthub.http.events.gateway_connections import BodyTimeout, Link
from volthub.http.runtime import Runtime

log = logging.getLogger("volthub")

ROUTE: Final = "/api/integrations/oauth/chat/channels/<channel_id>/messages"
_PREFIX: Final = "/api/integrations/oauth/chat/channels/"
_SUFFIX: Final = "/messages"
_JSON: Final = (b"content-type", b"application/json")
# The interim answer to `Expect: 100-continue` (curl sends it for bodies over 1 KiB, then
# waits up to a second for it); a refusal before the body is read is sent instead.
CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"


def matches(path: str) -> bool:
    """The route's path: one non-empty segment between the prefix and `/messages`."""
    if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
        return False
    segment = path[len(_PREFIX) : -len(_SUFFIX)]
    return bool(segment) and "/" not in segment


def install(rt: Runtime) -> None:
    """Serve the route on the gateway too (when the gateway is on)."""
    if rt.gateway is not None:
        serve_on(rt.gateway, rt)


def serve_on(gateway: Gateway, rt: Runtime) -> None:
    gateway.add_route(matches, GatewayRoute(rt, chat.send_message, chat.post_message))


class GatewayRoute:
    """One route's rules, read from its view once, and the request checks run over them."""

    def __init__(self, rt: Runtime, view: Callable[..., Any], post: Callable[..., Any]) -> None:
        rules = request_checks.RouteRules.of(view, rt.settings.server)
        assert rules.declaration is not None and rules.declaration.kind != "public", "a token route"
        assert rules.model is not None and rules.own_channel is not None, "a body and a channel"
        self.rt = rt
        self.rules = rules
        # Another method: routed nowhere (the main port's 405 after its hooks, as here).
        self.other_methods = request_checks.RouteRules(
            routed=False, body_limit=rt.settings.server.small_body_bytes, unrouted=_method_not_allowed
        )
        self.post = post
        self.cors = cors.api_policy(rt.settings)

    async def __call__(self, scope: Scope, link: Link) -> None:
        started = time.perf_counter()
        rid = observe.request_id(scope)
        scope[observe.ROUTE_KEY] = ROUTE
        request = GatewayRequest(
            scope, link, rid, self.rules if scope["method"] == "POST" else self.other_methods, self
        )
        headers: list[tuple[bytes, bytes]] = []
        try:
            await request_checks.run(request)
            out = await self.post(self.rt, request.principal, request.channel_id, request.data)
            status, body = 200, orjson.dumps(out.model_dump(mode="json"))
        except request_checks.Answered as answer:  # a preflight: no CORS or rate-limit headers
            await self._respond(scope, link, rid, started, answer.status, answer.body, answer.headers, [])
            return
        except Exception as exc:
            error = api_error_of(exc)
            if error is None:
                log.exception("unhandled error", exc_info=exc)
                error = ApiError(500, "internal_error", "internal server error")
            status, body = error.status, orjson.dumps(error_body(error, rid))
            headers = [
                (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in error.headers.items()
            ]
        headers += request_checks.rate_limit_headers(request.decisions)
        headers.append(_JSON)
        verdict = request.cors
        await self._respond(scope, link, rid, started, status, body, headers, verdict.headers if verdict else [])

    async def _respond(
        self,
        scope: Scope,
        link: Link,
        rid: str,
        started: float,
        status: int,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        cors_headers: list[tuple[bytes, bytes]],
    ) -> None:
        try:
            await link.respond(status, body, [*headers, (b"x-request-id", rid.encode("latin-1"))], cors_headers)
        finally:
            observe.finished(
                scope, status, time.perf_counter() - started, False, rid, self.rt.settings.logging.access_log
            )


class GatewayRequest(request_checks.RequestView):
    """The view of a request the gateway read (its ASGI-style scope and its connection)."""

    __slots__ = ("link",)

    def __init__(
        self, scope: Scope, link: Link, rid: str, rules: request_checks.RouteRules, route: GatewayRoute
    ) -> None:
        path = unquote(scope["path"])
        super().__init__(scope, path, rid, rules, route.rt)
        self.link = link
        self.cors_policy = route.cors
        self.channel_id = path[len(_PREFIX) : -len(_SUFFIX)]

    async def body(self) -> bytes:
        link = self.link
        if (self.header(b"expect") or "").lower() == "100-continue" and link.reading_body:
            await link.send(CONTINUE)  # the checks that need no body passed: the client may send it
        return await _read_body(link, self.rules.body_limit)


def _method_not_allowed() -> ApiError:
    return ApiError(
        405, "method_not_allowed", "The method is not allowed for the requested URL.", headers={"Allow": "POST"}
    )


async def _read_body(link: Link, limit: int) -> bytes:
    """The request's body, at most `limit` bytes (413 past it: a chunked body has no length
    to refuse up front; 408 when it stops arriving within [server] body_timeout)."""
    chunks: list[bytes] = []
    size = 0
    try:
        while link.reading_body:
            event = link.buffered_event()
            if event is None:
                event = await link.body_events()
            if isinstance(event, h11.Data):
                size += len(event.data)
                request_rules.check_body_size(size, limit)
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
    except h11.RemoteProtocolError:
        raise ApiError(400, "bad_request", "the request body could not be read") from None
    except BodyTimeout:
        raise ApiError(408, "request_timeout", "the request body did not arrive in time") from None
    return b"".join(chunks)
