"""Chat send on the Events API gateway: `POST /api/integrations/oauth/chat/channels/
{channelId}/messages` served by the gateway's own h11 listener (`[events] gateway_port`),
the fast path for bots, beside the same route on the main port.

It is the same route, not a copy of it: everything it checks comes from the route's view
in `blueprints/chat.py` (its access declaration, rate-limit category, body model and
channel rule), through the same functions the app's hooks call (`access`, `ratelimit`,
`request_rules`, `errors`), in the hooks' order, and the send itself is the view's
`post_message`. What it skips is the main port's per-request machinery (Hypercorn's
connection and stream objects, Quart's request context, the hooks' dispatch), which costs
more per request than the send.

Order of the checks (the app's before_request hooks, then the view's decorators): a
browser's preflight is answered first, by the policy of the main port's API paths
(`volthub.http.cors`); then the per-IP budget; NUL in the URL; the token and its scope;
the body's size (413) and type (415); the route's budget; the JSON body and its model
(400); the channel (400 `invalid_id`, 404, 403); the send. Every answer carries
`X-Request-Id`, the CORS headers and, when rate limiting is on, the `X-RateLimit-*`
headers; it is counted in the HTTP metrics and written to the access log under the
route's template, as on the main port.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import unquote

import h11
import orjson
from quart_schema.validation import QUART_SCHEMA_REQUEST_ATTRIBUTE

from volthub.http import access, cors, observe, ratelimit, request_rules
from volthub.http.blueprints import chat
from volthub.http.errors import ApiError, api_error_of, error_body, validation_error
from volthub.http.events.asgi import Scope, header
from volthub.http.events.gateway import Gateway
from volthub.http.events.gateway_connections import BodyTimeout, Link
from volthub.http.runtime import Runtime
from volthub.protocol.cors import Kind, Verdict
from volthub.protocol.ratelimit import Decision, tightest

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
    """One route's rules, read from its view once, and the pipeline that applies them."""

    def __init__(self, rt: Runtime, view: Callable[..., Any], post: Callable[..., Any]) -> None:
        declaration = access.declaration_of(view)
        assert declaration is not None and declaration.kind != "public", "a token route"
        self.rt = rt
        self.declaration = declaration
        self.category = ratelimit.category_of(view)
        self.own_channel: access.OwnChannel = getattr(view, access.OWN_CHANNEL)
        self.model = getattr(view, QUART_SCHEMA_REQUEST_ATTRIBUTE)[0]
        self.accepted = access.accepted_body_types(view)
        self.large_body = access.body_limit_of(view, 0, 1) == 1
        self.post = post
        self.cors = cors.api_policy(rt.settings)

    async def __call__(self, scope: Scope, link: Link) -> None:
        started = time.perf_counter()
        rid = observe.request_id(scope)
        scope[observe.ROUTE_KEY] = ROUTE
        verdict = cors.judged(self.cors, scope["method"], scope["headers"], cors.API)
        if verdict.kind is not Kind.SERVE:
            await self._preflight(scope, link, verdict, rid, started)
            return
        decisions: list[Decision] = []
        headers: list[tuple[bytes, bytes]] = []
        try:
            status, document = 200, await self._answer(scope, link, decisions)
        except Exception as exc:
            error = api_error_of(exc)
            if error is None:
                log.exception("unhandled error", exc_info=exc)
                error = ApiError(500, "internal_error", "internal server error")
            status, document = error.status, error_body(error, rid)
            headers = [
                (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in error.headers.items()
            ]
        if decisions:
            shown = tightest(decisions)
            headers += [
                (b"x-ratelimit-limit", str(shown.limit).encode()),
                (b"x-ratelimit-remaining", str(shown.remaining).encode()),
                (b"x-ratelimit-reset", str(shown.reset).encode()),
            ]
        headers += [_JSON, (b"x-request-id", rid.encode("latin-1"))]
        try:
            await link.respond(status, orjson.dumps(document), headers, verdict.headers)
        finally:
            observe.finished(
                scope, status, time.perf_counter() - started, False, rid, self.rt.settings.logging.access_log
            )

    async def _preflight(self, scope: Scope, link: Link, verdict: Verdict, rid: str, started: float) -> None:
        """A preflight, answered as the main port answers it: before the rate limits and the token."""
        if verdict.kind is Kind.PREFLIGHT:
            status, body, headers = 204, b"", verdict.headers
        else:
            status, body, headers = 403, cors.refused_preflight_body(verdict, rid), [_JSON]
        try:
            await link.respond(status, body, [*headers, (b"x-request-id", rid.encode("latin-1"))], [])
        finally:
            observe.finished(
                scope, status, time.perf_counter() - started, False, rid, self.rt.settings.logging.access_log
            )

    async def _answer(self, scope: Scope, link: Link, decisions: list[Decision]) -> dict[str, Any]:
        rt = self.rt
        limits = rt.rate_limits
        ip = ""
        if limits is not None:
            ip = ratelimit.client_ip((scope.get("client") or (None,))[0])
            _spent(decisions, await ratelimit.spend(rt, limits.per_ip, ("ip", ip), "global"), "global")
        path = unquote(scope["path"])
        if scope["method"] != "POST":
            raise ApiError(
                405, "method_not_allowed", "The method is not allowed for the requested URL.", headers={"Allow": "POST"}
            )
        request_rules.refuse_nul_in_url(path, scope["query_string"])
        caller = await access.bearer_caller(header(scope, b"authorization"), rt)
        access.check_allowed(self.declaration, caller)
        server = rt.settings.server
        limit = server.max_body_bytes if self.large_body else server.small_body_bytes
        length = header(scope, b"content-length")
        request_rules.check_body_size(int(length) if length is not None else None, limit)
        content_type = header(scope, b"content-type")
        chunked = "chunked" in (header(scope, b"transfer-encoding") or "").lower()
        request_rules.check_body_type("POST", content_type, bool(length and int(length)) or chunked, self.accepted)
        if limits is not None and self.category is not None:
            key = ratelimit.budget_key(self.category, caller, ip)
            _spent(
                decisions, await ratelimit.spend(rt, limits.budgets[self.category], key, self.category), self.category
            )
        if (header(scope, b"expect") or "").lower() == "100-continue" and link.reading_body:
            await link.send(CONTINUE)  # the checks that need no body passed: the client may send it
        body = await _read_body(link, limit)
        document = request_rules.parse_json(body) if request_rules.is_json(content_type) else None
        try:
            data = self.model.model_validate(document)
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise validation_error(exc) from None
        channel_id = await self.own_channel.resolve(path[len(_PREFIX) : -len(_SUFFIX)], caller, rt)
        out = await self.post(rt, caller, channel_id, data)
        result: dict[str, Any] = out.model_dump(mode="json")
        return result


def _spent(decisions: list[Decision], decision: Decision, name: str) -> None:
    decisions.append(decision)
    if not decision.allowed:
        raise ratelimit.too_many_requests(decision, name)


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
