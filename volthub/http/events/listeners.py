"""The Events API's listeners, as the composition root makes them: the fan-out with every
wire form, both Engine.IO paths on the main port (served ahead of Quart by `mount`) and
on the gateway's own port, their admission check, and the tasks that run them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import trio
from quart import Quart

from volthub.config import EventsSettings
from volthub.config import Settings as AppSettings
from volthub.http import observe, ratelimit
from volthub.http.cors import events_policy
from volthub.http.events.asgi import Receive, Refusal, Scope, Send
from volthub.http.events.engineio import EngineIOEndpoint
from volthub.http.events.gateway import Gateway
from volthub.http.events.recovery import RecoveryStore
from volthub.http.events.registry import ConnectionRegistry
from volthub.http.events.socketio import (
    ENGINEIO_PATHS,
    SPEC_NAMESPACE,
    SSE_ENCODERS,
    EventsContext,
    EventsSocketHandler,
    socket_encoder,
    socket_wire,
    sse_wire,
)
from volthub.http.rate_budgets import RateLimits
from volthub.http.runtime import Runtime, Services
from volthub.http.serving import LIMITS, OVER_CAPACITY_RESPONSE, claim_client
from volthub.hub.broker import Broker
from volthub.hub.clock import Clock
from volthub.hub.fanout import Fanout
from volthub.protocol.engineio.session import Settings
from volthub.protocol.ratelimit import to_ns
from volthub.services.tokens import TokenService

log = logging.getLogger(__name__)


def protocol_settings(events: EventsSettings) -> Settings:
    return Settings(
        ping_interval_ms=events.ping_interval_ms,
        ping_timeout_ms=events.ping_timeout_ms,
        max_payload=events.max_payload,
        connect_timeout_ms=events.connect_timeout_ms,
        upgrade_timeout_ms=events.upgrade_timeout_ms,
    )


def make_fanout(events: EventsSettings, broker: Broker) -> Fanout:
    """The fan-out with every wire form of the Events API registered; the broker hears of
    the channels it serves."""
    fanout = Fanout(
        resume_size=events.resume_buffer_size, resume_channels=events.resume_channels, interest=broker.channel_interest
    )
    for namespace in ("/", SPEC_NAMESPACE):
        for offsets in (False, True):
            fanout.register_wire(socket_wire(namespace, offsets), socket_encoder(namespace, offsets))
    for form, encoder in SSE_ENCODERS.items():
        fanout.register_wire(sse_wire(form), encoder)
    return fanout


@dataclass(frozen=True, eq=False)
class Listeners:
    """The Engine.IO endpoints served ahead of Quart, by path, and the gateway (None when off)."""

    endpoints: dict[str, EngineIOEndpoint]
    gateway: Gateway | None


def make_listeners(
    settings: AppSettings,
    clock: Clock,
    bus: Broker,
    tokens: TokenService,
    services: Services,
    recovery: RecoveryStore,
    rate_limits: RateLimits | None,
) -> Listeners:
    """Both Engine.IO paths on the main port (served by `mount`) and on the gateway's own."""
    handler = EventsSocketHandler(EventsContext(settings, clock, bus, tokens, services, recovery))
    protocol = protocol_settings(settings.events)
    cors, admission = events_policy(settings), _admission(rate_limits, clock)
    endpoints = {
        path: EngineIOEndpoint(protocol, handler, namespaces=namespaces, cors=cors, admission=admission)
        for path, namespaces in ENGINEIO_PATHS
    }
    gateway = _gateway(settings, handler, protocol, admission) if settings.events.gateway_port else None
    gateway_endpoints = gateway.endpoints if gateway is not None else {}
    for listener, found in (("mount", endpoints), ("gateway", gateway_endpoints)):
        for path, endpoint in found.items():
            observe.FIXED_ROUTES[path] = path + "/"
            endpoint.describe(path + "/", listener, access_log=settings.logging.access_log)
    return Listeners(endpoints, gateway)


def hold_sessions(listeners: Listeners, connections: ConnectionRegistry) -> None:
    """A shutdown ends every Events API connection through the registry: its namespaces and
    streams, then the sessions of both listeners that never joined one."""
    for endpoint in listeners.endpoints.values():
        connections.hold_sessions(endpoint)
    if listeners.gateway is not None:
        connections.hold_sessions(listeners.gateway)


def _admission(rate_limits: RateLimits | None, clock: Clock) -> Callable[[Scope], Refusal | None]:
    """New Engine.IO sessions count against the global per-IP budget, as any request does."""

    def admit(scope: Scope) -> Refusal | None:
        if rate_limits is None:
            return None
        ip = ratelimit.client_ip((scope.get("client") or (None,))[0])
        decision = rate_limits.per_ip.hit(("ip", ip), to_ns(clock.now()))
        if decision.allowed:
            return None
        error = ratelimit.too_many_requests(decision, "global")
        return Refusal(error.status, error.body(), error.headers)

    return admit


def mount(app: Quart) -> None:
    """Serve both Engine.IO paths ahead of Quart (ASGI level): the serving runtime's endpoints."""
    paths = {path for path, _ in ENGINEIO_PATHS}
    inner = app.asgi_app

    # Quart types its ASGI callable with Hypercorn's TypedDict scopes; this layer passes the
    # plain dicts of ASGI through unchanged, hence the two targeted ignores.
    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            path = scope.get("path", "")
            path = path[:-1] if path.endswith("/") else path
            if path in paths:
                rt: Runtime = app.extensions["volthub"]
                await rt.engineio_endpoints[path](scope, receive, send)
                return
        await inner(scope, receive, send)  # type: ignore[arg-type]

    app.asgi_app = asgi  # type: ignore[method-assign, assignment]


def _gateway(
    app_settings: AppSettings,
    handler: EventsSocketHandler,
    settings: Settings,
    admission: Callable[[Scope], Refusal | None],
) -> Gateway:
    """The same two paths, application and admission on the gateway's own port."""
    server, events = app_settings.server, app_settings.events
    gateway = Gateway(
        events.gateway_host or server.host,
        events.gateway_port,
        keep_alive_timeout=server.keep_alive_timeout,
        body_timeout=server.body_timeout,
        access_log=app_settings.logging.access_log,
        backlog=server.listen_backlog,
        admit=LIMITS.admit,  # the same connection caps as the main port (one count per process)
        release=LIMITS.release,
        refusal=OVER_CAPACITY_RESPONSE,
        reuse_port=events.gateway_reuse_port,
        max_message_frames=events.max_message_frames,
        claim_client=claim_client,  # behind a trusted proxy: the forwarded client, capped per request
    )
    for path, namespaces in ENGINEIO_PATHS:
        gateway.add_endpoint(
            path, settings, handler, namespaces=namespaces, cors=events_policy(app_settings), admission=admission
        )
    return gateway


async def run_endpoints(endpoints: dict[str, EngineIOEndpoint]) -> None:
    """Run the Engine.IO endpoints' session drivers for the app's lifetime."""
    async with trio.open_nursery() as own:
        for endpoint in endpoints.values():
            await own.start(_supervised, endpoint)


async def _supervised(
    endpoint: EngineIOEndpoint, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    await endpoint.run(task_status=task_status)
