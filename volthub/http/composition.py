"""The composition root: the one place that builds the running app.

    async with compose(settings, clock) as runtime:
        ...  # serve

`compose` opens (and, when configured, migrates) the database, then builds every
long-lived piece in dependency order, each complete when made:

    broker (hub.brokers.open_broker) -> secrets and tokens -> publisher
    -> actor registry -> fan-out, connection registry and presence -> services
    -> recovery store -> rate limits -> Events API listeners -> Runtime

then starts the background services (`background_services`, the one list of them) under
a supervisor in a nursery it owns, and marks the runtime ready. On the way out it stops
the background services, then closes the database. The app's `Server` (`http/server.py`)
enters it at start-up under every launcher (`volthub serve`, one process or `--workers N`,
the `hypercorn` entry, the tests) and serves the listeners around it.

This module and `runtime.py` are the only ones of `volthub.http` that name the
persistence layer: routes reach data through services.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from volthub.config import Settings
from volthub.http import chat_send, cluster, observe, ratelimit
from volthub.http.events import listeners as events_api
from volthub.http.events.registry import ConnectionRegistry
from volthub.http.rate_budgets import RateLimits
from volthub.http.runtime import Runtime, Services
from volthub.hub.broker import Broker
from volthub.hub.brokers import open_broker
from volthub.hub.clock import Clock, to_ms
from volthub.hub.fanout import Fanout
from volthub.hub.interactive_feed import InteractiveFeed
from volthub.hub.presence import Presence
from volthub.hub.publisher import EventPublisher
from volthub.hub.registry import ActorRegistry
from volthub.hub.supervisor import Service, Supervisor
from volthub.persistence import Database, migrate, open_database
from volthub.persistence import secrets as secret_store
from volthub.services import webhooks as webhook_delivery
from volthub.services.accounts import Accounts
from volthub.services.apps import Apps
from volthub.services.bots import Bots
from volthub.services.catalogue import BadgeCatalogue, Teams
from volthub.services.categories import Categories
from volthub.services.channel_points import ChannelPoints, Redemptions, WatchEarnings
from volthub.services.channel_roles import ChannelRoles
from volthub.services.chat import ChatReads
from volthub.services.emotes import Emotes
from volthub.services.expiry import ExpiryService
from volthub.services.extvideo import ExtVideo
from volthub.services.health import Readiness
from volthub.services.idempotency import Idempotency
from volthub.services.interactive import InteractiveReads
from volthub.services.journals import Journals
from volthub.services.login_throttle import LoginThrottle
from volthub.services.media import MediaStore
from volthub.services.notifications import Notifications
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


@asynccontextmanager
async def compose(settings: Settings, clock: Clock) -> AsyncIterator[Runtime]:
    """The complete runtime, its background services running, until the block ends."""
    database = await _open_database(settings)
    try:
        runtime = await _build(settings, clock, database)
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(runtime.supervisor.run, background_services(runtime)))
            try:
                await cluster.wait_for_relay(runtime)  # hear the other processes first
                runtime.ready.set()
                cluster.report_ready()
                yield runtime
            finally:
                await runtime.supervisor.stop()
    finally:
        await database.close()


def background_services(rt: Runtime) -> list[Service]:
    """Every long-lived task of the app, each defined by the module that owns its logic. The
    supervisor restarts one that crashes with back-off; those that make an object make a
    fresh one on each restart."""
    services, settings = rt.services, rt.settings
    return [
        Service("webhooks", services.webhooks.run),
        Service("chat", services.chat.run),
        Service("engineio", functools.partial(events_api.run_endpoints, rt.engineio_endpoints)),
        Service("recovery", rt.recovery.run),
        Service("ingest-silence", services.streams.watch_silence),
        Service("relay", functools.partial(cluster.relay_service, rt)),
        Service("presence", functools.partial(cluster.presence_service, rt)),
        Service("interactive", lambda: InteractiveFeed(rt.bus, services.chat).run()),
        Service(
            "subscription-expiry",
            lambda: ExpiryService(services.subscriptions, rt.clock, settings.subscriptions.poll_seconds).run(),
        ),
        Service(
            "role-expiry",
            lambda: ExpiryService(services.channel_roles, rt.clock, settings.channel_roles.poll_seconds).run(),
        ),
        Service("points-earning", lambda: _watch_earnings(rt).run()),
        Service(
            "metrics",
            functools.partial(observe.sampler_service, rt.all_engineio_endpoints, rt.db, settings.metrics.enabled),
        ),
        Service("rate-limit-pruning", functools.partial(ratelimit.forget_full_budgets, rt)),
    ]


async def _open_database(settings: Settings) -> Database:
    config = settings.database
    database = open_database(config.url, config.pool_size, config.acquire_timeout)
    await database.open()
    try:
        if config.migrate_on_start:
            await migrate(database)
    except BaseException:
        await database.close()
        raise
    return database


async def _build(settings: Settings, clock: Clock, database: Database) -> Runtime:
    """Every long-lived piece, in dependency order, into one complete `Runtime`."""
    broker = open_broker(settings, database, clock)
    secret = settings.auth.token_secret or await _stored_secret(database, clock, "token_secret")
    tokens = TokenService(secret, clock, settings.auth.session_ttl_seconds)
    publisher = EventPublisher(database, broker, clock, event_log=broker)
    chat = ActorRegistry(
        database,
        publisher,
        clock,
        inbox_size=settings.chat.inbox_size,
        idle_seconds=settings.chat.actor_idle_seconds,
        history_limit=settings.chat.history_limit,
    )
    fanout = events_api.make_fanout(settings.events, broker)
    broker.add_history(fanout.replace_recent)  # resume buffers filled by the other processes
    connections = ConnectionRegistry(interest=broker.member_interest)
    presence = broker.presence(fanout, settings.cluster.presence_interval_seconds)
    services = await _make_services(
        settings, clock, database, broker, publisher, tokens, chat, fanout, presence, connections
    )
    # After the services' own listeners (the webhook workers' wake-up), as ever.
    broker.subscribe(fanout.publish)
    broker.subscribe(connections.on_event)
    recovery = broker.recovery_store(settings.events.recovery_window_seconds)
    rate_limits = RateLimits(settings.ratelimit) if settings.ratelimit.enabled else None
    listeners = events_api.make_listeners(settings, clock, broker, tokens, services, recovery, rate_limits)
    runtime = Runtime(
        settings=settings,
        clock=clock,
        db=database,
        bus=broker,
        publisher=publisher,
        tokens=tokens,
        services=services,
        recovery=recovery,
        rate_limits=rate_limits,
        engineio_endpoints=listeners.endpoints,
        gateway=listeners.gateway,
        supervisor=Supervisor(),
        login_throttle=LoginThrottle(settings.auth),
        ready=trio.Event(),
    )
    chat_send.install(runtime)  # chat send on the gateway too: the bots' fast path
    events_api.hold_sessions(listeners, connections)
    return runtime


async def _stored_secret(database: Database, clock: Clock, name: str) -> str:
    """A secret kept in the database (made on the first start), so every process agrees."""
    secret: str = await database.write(secret_store.get_or_create(name, to_ms(clock.now())))
    return secret


async def _make_services(
    settings: Settings,
    clock: Clock,
    database: Database,
    broker: Broker,
    publisher: EventPublisher,
    tokens: TokenService,
    chat: ActorRegistry,
    fanout: Fanout,
    presence: Presence,
    connections: ConnectionRegistry,
) -> Services:
    """Every long-lived service of the app."""
    passwords = Passwords(
        settings.auth.argon2_time_cost,
        settings.auth.argon2_memory_kib,
        settings.auth.hash_concurrency,
        settings.auth.hash_queue,
    )
    oauth = build_oauth_service(database, publisher, clock, settings.oauth)
    csrf_key = await _stored_secret(database, clock, "oauth_csrf_key")
    dispatcher = Dispatcher.from_settings(database, clock, settings.webhooks)
    webhook_delivery.install(dispatcher, publisher)  # the outbox sink and its wake-up listener
    media = MediaStore(database, clock, storage=settings.media.storage, directory=settings.media.directory)
    return Services(
        accounts=Accounts(database, publisher, passwords, follow_bonus=settings.channel_points.follow_bonus),
        users=Users(database),
        apps=Apps(database, clock, oauth),
        oauth=oauth,
        oauth_csrf_key=csrf_key,
        sessions=build_sessions(database, publisher, clock, tokens, settings.oauth.grant_cache_seconds),
        webhooks=dispatcher,
        webhook_admin=WebhookAdmin(database, clock, dispatcher),
        channel_points=ChannelPoints(database, clock),
        redemptions=Redemptions(database, publisher),
        streams=await _make_streams(settings, clock, database, publisher),
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
        channel_roles=ChannelRoles(database, clock, chat),
        chat=chat,
        chat_reads=ChatReads(database, clock, presence),
        notifications=Notifications(database, clock),
        interactive=InteractiveReads(database),
        readiness=Readiness(database, broker),
        metrics=observe.MetricsScrape(database, dispatcher),
        fanout=fanout,
        presence=presence,
        connections=connections,
    )


async def _make_streams(settings: Settings, clock: Clock, database: Database, publisher: EventPublisher) -> Streams:
    """Streams need the categories file and the stream-key secret (config, or kept in the database)."""
    ingest = settings.ingest
    key_secret = ingest.stream_key_secret or await _stored_secret(database, clock, "stream_key_secret")
    if not ingest.hook_secret:
        log.warning("[ingest] hook_secret is not set: media-server hooks are refused, no stream can go live")
    categories = Categories.load(settings.streams.categories_file)
    return Streams(database, publisher, clock, categories, key_secret, ingest.silence_timeout_seconds, ingest.offers())


def _watch_earnings(rt: Runtime) -> WatchEarnings:
    config = rt.settings.channel_points
    return WatchEarnings(
        rt.db,
        rt.clock,
        rt.services.presence,
        points=config.points_per_interval,
        interval_seconds=config.watch_interval_seconds,
    )
