from __future__ import annotations

import ipaddress
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST
from quart import Blueprint, Response, request
from quart_schema import tag, validate_response
from werkzeug.exceptions import NotFound

from volthub.http import access, ratelimit
from volthub.http.errors import ApiError
from volthub.http.openapi import responds
from volthub.http.runtime import runtime
from volthub.http.schemas import StatusOut

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
@access.public
@tag(["Operations"])
@validate_response(StatusOut)
async def healthz() -> StatusOut:
    """Readiness: 200 while the database answers; 503 `database_unavailable` (or
    `storage_unavailable`) while it does not, within `[database] acquire_timeout`; 503
    `broker_unavailable` while the event broker between processes is unreachable or this
    process's subscriptions on it are lost (the message says which)."""
    problem = await runtime().services.readiness.problem()
    if problem is not None:
        raise ApiError(503, "broker_unavailable", problem)
    return StatusOut(status="ok")


@blueprint.get("/livez")
@access.public
@ratelimit.counted_in_process
@tag(["Operations"])
@validate_response(StatusOut)
async def livez() -> StatusOut:
    """Liveness: 200 while the process serves requests, whatever the database does."""
    return StatusOut(status="ok")


@blueprint.get("/metrics")
@access.public
@ratelimit.counted_in_process
@tag(["Operations"])
@responds(200, "Prometheus text exposition format", "text/plain")
async def metrics() -> Response:
    """Prometheus metrics of the whole server (every worker under `volthub serve --workers N`):
    HTTP requests and latency by route template, Events API connections, deliveries, lag
    and slow consumers, published events, webhook deliveries and outbox, channel actors,
    the event bus, the database pool, background-service restarts, process figures.
    Answered only to `[metrics] allow` (loopback by default) while `[metrics] enabled`;
    anyone else gets the same 404 as an unknown path."""
    rt = runtime()
    settings = rt.settings.metrics
    if not settings.enabled or not _allowed(request.scope.get("client"), settings.allow):
        raise NotFound()
    body = await rt.services.metrics.exposition(rt.all_engineio_endpoints())
    return Response(body, status=200, content_type=CONTENT_TYPE_LATEST)


def _allowed(client: Any, allow: list[str]) -> bool:
    if not client:
        return False
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(entry, strict=False) for entry in allow)
