"""The Quart-Trio app factory.

    hypercorn --worker-class trio "volthub.http.app:create_app()"

The app's lifespan owns everything long-lived: the database, the typed `Services`
(`_make_services`), and one `volthub.hub.supervisor.Supervisor` (under a cancel scope it
owns) that runs the background services and restarts a crashed one with
back-off; after_serving stops it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import trio
from pydantic_core import to_jsonable_python
from quart import Quart, request
from quart.json.provider import DefaultJSONProvider
from quart_schema import QuartSchema, hide
from quart_trio import QuartTrio
from quart_trio.wrappers.request import TrioRequest

from volthub import logs, metrics, version
from volthub.config import Settings, load_settings
from volthub.http import access, chat_send, cluster, cors, observe, ratelimit, request_rules, serving
from volthub.http.blueprints import BLUEPRINTS
from volthub.http.blueprints import channel_points as channel_points_blueprint
from volthub.http.blueprints import channel_roles as channel_roles_blueprint
from volthub.http.blueprints import chat as chat_blueprint
from volthub.http.blueprints import interactive as interactive_blueprint
from volthub.http.blueprints import subscriptions as subscriptions_blueprint
from volthub.http.errors import ApiError, install_error_handlers
from volthub.http.events import socketio as events_api
from volthub.http.openapi import VolthubOpenAPIProvider
from volthub.http.runtime import Runtime, Services, runtime
from volthub.hub.brokers import open_broker
from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import Clock, SystemClock, to_ms
from volthub.hub.publisher import EventPublisher
from volthub.hub.supervisor import Service, Supervisor
from volthub.persistence import Database, migrate, open_database
from volthub.persistence import secrets as secret_store
from volthub.services import webhooks as webhook_delivery
from volthub.services.accounts import Accounts
from volthub.services.apps import Apps
from volthub.services.bots import Bots
from volthub.services.catalogue import BadgeCatalogue, Teams
from volthub.services.categories import Categories
from volthub.services.channel_points import ChannelPoints, Redemptions
from volthub.services.channel_roles import ChannelRoles
from volthub.services.emotes import Emotes
from volthub.services.extvideo import ExtVideo
from volthub.services.idempotency import Idempotency
from volthub.services.journals import Journals
from volthub.services.media import MediaStore
from volthub.services.oauth import build_oauth_service
from volthub.services.passwords import Passwords
from volthub.services.sessions import build_sessions
from volthub.services.streams import Streams
from volthub.services.subscriptions import Subscriptions
from volthub.services.tokens import TokenService
from volthub.services.users import Users
from volthub.services.volts import Volts
from volthub.services.webhooks import Dispatcher, WebhookAdmin

log = logging.getLogger(__name__)

# A background service runs in the supervisor's nursery until shutdown; if it fails, the
# supervisor restarts it with back-off (volthub.hub.supervisor).
BackgroundService = Callable[[Runtime], Awaitable[None]]
StartupHook = Callable[[Runtime], Awaitable[None]]

# Wiring run once `Runtime.services` exists: the Events API fan-out and presence.
STARTUP_HOOKS: list[StartupHook] = [events_api.install]
# Long-lived tasks: webhook delivery workers, channel actors, Engine.IO session drivers.
SERVICES: list[tuple[str, BackgroundService]] = [
    ("webhooks", webhook_delivery.service),
    ("chat", chat_blueprint.run_chat_hub),
    ("engineio", events_api.service),
    ("recovery", events_api.recovery_service),
    ("gateway", events_api.gateway_service),
    ("ingest-silence", lambda rt: rt.services.streams.watch_silence()),
    ("relay", cluster.relay_service),
    ("presence", cluster.presence_service),
    ("interactive", interactive_blueprint.run_interactive_feed),
    ("subscription-expiry", subscriptions_blueprint.run_expiry),
    ("role-expiry", channel_roles_blueprint.run_expiry),
    ("points-earning", channel_points_blueprint.run_watch_earnings),
    ("metrics", observe.sampler_service),
    ("rate-limit-pruning", ratelimit.forget_full_budgets),
]


class OrjsonProvider(DefaultJSONProvider):
    """orjson: fast, and strict (rejects NaN, Infinity and invalid UTF-8)."""

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        return orjson.dumps(obj, default=to_jsonable_python, option=orjson.OPT_NON_STR_KEYS).decode()

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return orjson.loads(s)


class ApiRequest(TrioRequest):
    async def get_json(self, force: bool = False, silent: bool = False, cache: bool = True) -> Any:
        """Parse the raw bytes with orjson: invalid UTF-8 or JSON is a 400, never a 500."""
        if not (force or self.is_json):
            return None
        raw = await self.get_data(cache=cache, as_text=False)
        try:
            return request_rules.parse_json(raw if isinstance(raw, bytes) else raw.encode())
        except ApiError as error:
            if silent and error.code == "invalid_json":
                return None
            raise


def create_app(
    settings: Settings | None = None, *, clock: Clock | None = None, config_file: str | None = None
) -> Quart:
    settings = settings or load_settings(config_file)
    logs.configure(settings.logging.format, settings.logging.level)
    metrics.set_enabled(settings.metrics.enabled)
    app = QuartTrio("volthub", static_folder=None)
    app.request_class = ApiRequest
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_body_bytes
    app.config["BODY_TIMEOUT"] = settings.server.body_timeout
    QuartSchema(
        app,
        openapi_path="/api/openapi.json",
        swagger_ui_path=None,
        redoc_ui_path=None,
        scalar_ui_path=None,
        info={"title": "volthub developer API", "version": version()},
        security_schemes={"bearer": {"type": "http", "scheme": "bearer", "bearer_format": "JWT"}},
        openapi_provider_class=VolthubOpenAPIProvider,
    )
    app.json = OrjsonProvider(app)
    app.extensions["volthub"] = Runtime(settings=settings, clock=clock or SystemClock(), bus=InProcessBroker())

    install_error_handlers(app)
    app.url_value_preprocessor(_note_route)  # runs before every before_request hook
    app.before_request(_refuse_nul_in_url)
    access.install(app)  # authentication and scopes before anything about the body
    app.before_request(_limit_body)
    app.before_request(_require_json_body)
    ratelimit.install(app)  # after access; puts its per-IP check first of all hooks
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    _declare_openapi_route(app)
    events_api.mount(app)  # Engine.IO paths (/ws/events, /socket.io) served ahead of Quart
    chat_send.install(app.extensions["volthub"])  # chat send on the gateway too: the bots' fast path
    app.asgi_app = cors.middleware(app.asgi_app, app.url_map, cors.api_policy(settings))  # type: ignore[method-assign, assignment, arg-type]
    serving.adapt(app, settings)  # Hypercorn's close fix, connection caps, early body reads
    # Outermost: request ids, access lines and HTTP metrics for everything, Engine.IO included.
    app.asgi_app = observe.middleware(app.asgi_app, settings.logging.access_log)  # type: ignore[method-assign, assignment, arg-type]

    @app.before_serving
    async def _startup() -> None:
        await _start(app)

    @app.after_serving
    async def _shutdown() -> None:
        await _stop(app)

    return app


def _declare_openapi_route(app: Quart) -> None:
    """quart-schema registers a bound method; wrap it so it can carry a declaration."""
    serve_document: Callable[[], Awaitable[Any]] = app.view_functions["openapi"]  # type: ignore[assignment]

    async def openapi_document() -> Any:
        return await serve_document()

    app.view_functions["openapi"] = hide(access.public(openapi_document))


def _note_route(endpoint: str | None, values: dict[str, Any] | None) -> None:
    """The matched route's template labels the request's metrics and access line."""
    if request.url_rule is not None:
        request.scope[observe.ROUTE_KEY] = request.url_rule.rule  # type: ignore[typeddict-unknown-key]


async def _refuse_nul_in_url() -> None:
    request_rules.refuse_nul_in_url(request.path, request.query_string)


async def _limit_body() -> None:
    """Each route's body limit (`[server] small_body_bytes`, or `max_body_bytes` for the
    routes marked `access.large_body`): 413 past it, before the body is used."""
    view = _view(request.endpoint) if request.endpoint else None
    server = runtime().settings.server
    limit = access.body_limit_of(view, server.small_body_bytes, server.max_body_bytes)
    length = request.content_length
    if length is None and "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        length = len(await request.get_data(cache=True))  # at most max_body_bytes, read ahead
    request_rules.check_body_size(length, limit)


async def _require_json_body() -> None:
    """Bodies are JSON unless a route opts into forms (the token endpoint, consent page)."""
    view = _view(request.endpoint) if request.endpoint else None
    request_rules.check_body_type(
        request.method, request.headers.get("Content-Type"), _has_body(), access.accepted_body_types(view)
    )


def _view(endpoint: str) -> Any:
    from quart import current_app

    return current_app.view_functions.get(endpoint)


def _has_body() -> bool:
    length = request.content_length
    return bool(length) or "chunked" in request.headers.get("Transfer-Encoding", "").lower()


async def _start(app: QuartTrio) -> None:
    rt: Runtime = app.extensions["volthub"]
    database = open_database(
        rt.settings.database.url, rt.settings.database.pool_size, rt.settings.database.acquire_timeout
    )
    await database.open()
    if rt.settings.database.migrate_on_start:
        await migrate(database)
    rt.database = database
    rt.bus = open_broker(rt.settings, database, rt.clock)
    secret = rt.settings.auth.token_secret or await database.write(
        secret_store.get_or_create("token_secret", to_ms(rt.clock.now()))
    )
    rt.tokens = TokenService(secret, rt.clock, rt.settings.auth.session_ttl_seconds)
    rt.publisher = EventPublisher(database, rt.bus, rt.clock, event_log=rt.bus)
    rt.services = await _make_services(rt, database, rt.publisher)
    for hook in STARTUP_HOOKS:
        await hook(rt)
    cluster.install(rt)  # resume backfill, presence over all processes
    await app.nursery.start(_supervise, rt)
    await cluster.wait_for_relay(rt)
    rt.ready.set()
    cluster.report_ready()
    _log_started(rt)


def _log_started(rt: Runtime) -> None:
    """One line an operator can act on: what serves where, on what."""
    settings = rt.settings
    worker = os.environ.get(logs.WORKER_ENV)
    if worker is not None:  # the parent of `volthub serve --workers` logs the summary once
        log.info("worker %s ready (pid %d)", worker, os.getpid())
        return
    log.info("%s", logs.startup_summary(settings, version(), workers=1))


async def _make_services(rt: Runtime, database: Database, publisher: EventPublisher) -> Services:
    """Every long-lived service of the app, made once the database is open."""
    settings, clock = rt.settings, rt.clock
    passwords = Passwords(
        settings.auth.argon2_time_cost,
        settings.auth.argon2_memory_kib,
        settings.auth.hash_concurrency,
        settings.auth.hash_queue,
    )
    assert rt.tokens is not None
    oauth = build_oauth_service(database, publisher, clock, settings.oauth)
    csrf_key = await database.write(secret_store.get_or_create("oauth_csrf_key", to_ms(clock.now())))
    dispatcher = Dispatcher.from_settings(database, clock, settings.webhooks)
    webhook_delivery.install(dispatcher, publisher)  # the outbox sink and its wake-up listener
    media = MediaStore(database, clock, storage=settings.media.storage, directory=settings.media.directory)
    return Services(
        accounts=Accounts(database, publisher, passwords, follow_bonus=settings.channel_points.follow_bonus),
        users=Users(database),
        apps=Apps(database, clock, oauth),
        oauth=oauth,
        oauth_csrf_key=csrf_key,
        sessions=build_sessions(database, publisher, clock, rt.tokens, settings.oauth.grant_cache_seconds),
        webhooks=dispatcher,
        webhook_admin=WebhookAdmin(database, clock, dispatcher),
        channel_points=ChannelPoints(database, clock),
        redemptions=Redemptions(database, publisher),
        streams=await _make_streams(rt, database, publisher),
        bots=Bots(database, clock, hold_days=settings.bots.name_hold_days),
        media=media,
        emotes=Emotes(
            database, clock, media, max_bytes=settings.media.emote_max_bytes, max_side=settings.media.emote_max_side
        ),
        badges=BadgeCatalogue(database, clock),
        teams=Teams(database, clock),
        journals=Journals(
            database,
            clock,
            media,
            image_max_bytes=settings.media.journal_image_max_bytes,
            image_max_side=settings.media.journal_image_max_side,
        ),
        extvideo=ExtVideo(database, clock, settings.extvideo, settings.server.public_url),
        idempotency=Idempotency(database, clock),
        volts=Volts(database, publisher, clock, settings.volts),
        subscriptions=Subscriptions(
            database, publisher, clock, settings.subscriptions, settings.volts, settings.channel_points
        ),
        channel_roles=ChannelRoles(database, clock, lambda: chat_blueprint.hub_for(rt)),
    )


async def _make_streams(rt: Runtime, database: Database, publisher: EventPublisher) -> Streams:
    """Streams need the categories file and the stream-key secret (config, or kept in the database)."""
    ingest = rt.settings.ingest
    key_secret = ingest.stream_key_secret or await database.write(
        secret_store.get_or_create("stream_key_secret", to_ms(rt.clock.now()))
    )
    if not ingest.hook_secret:
        log.warning("[ingest] hook_secret is not set: media-server hooks are refused, no stream can go live")
    categories = Categories.load(rt.settings.streams.categories_file)
    return Streams(
        database, publisher, rt.clock, categories, key_secret, ingest.silence_timeout_seconds, ingest.offers()
    )


async def _supervise(rt: Runtime, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Own the background services under a supervisor: cancelled in after_serving, never
    left running, and a crashed service is restarted rather than tearing down the app."""
    supervisor = rt.supervisor = Supervisor()
    services = [Service(name, functools.partial(run, rt)) for name, run in SERVICES]
    await supervisor.run(services, task_status=task_status)


async def _stop(app: Quart) -> None:
    rt: Runtime = app.extensions["volthub"]
    if rt.supervisor is not None:
        await rt.supervisor.stop()
    if rt.gateway is not None:
        rt.gateway.stop_accepting()
    if rt.database is not None:
        await rt.database.close()
