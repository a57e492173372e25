"""What the running app holds, made whole by the composition root (`http/composition.py`).

A `Runtime` and its `Services` are made once, complete, in `compose`: every field has its
value from the start, none is filled in later. Routes and hooks reach the runtime of the
app that serves them with `runtime()`; code that runs outside a request is handed what it
needs when the root makes it. Each long-lived service is one typed attribute of
`Services`, so a reader can see what exists and a typo is a type error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio
from quart import current_app

from volthub.config import Settings
from volthub.hub.broker import Broker
from volthub.hub.clock import Clock
from volthub.hub.presence import Presence
from volthub.hub.publisher import EventPublisher
from volthub.hub.supervisor import Supervisor
from volthub.persistence import Database
from volthub.services.sessions import Sessions
from volthub.services.tokens import TokenService

if TYPE_CHECKING:
    from volthub.http.events.engineio import EngineIOEndpoint
    from volthub.http.events.gateway import Gateway
    from volthub.http.events.registry import ConnectionRegistry
    from volthub.http.observe import MetricsScrape
    from volthub.http.rate_budgets import RateLimits
    from volthub.hub.fanout import Fanout
    from volthub.hub.recovery_store import RecoveryStore
    from volthub.hub.registry import ActorRegistry
    from volthub.services.accounts import Accounts
    from volthub.services.apps import Apps
    from volthub.services.bots import Bots
    from volthub.services.catalogue import BadgeCatalogue, Teams
    from volthub.services.channel_points import ChannelPoints, Redemptions
    from volthub.services.channel_roles import ChannelRoles
    from volthub.services.chat import ChatReads
    from volthub.services.emotes import Emotes
    from volthub.services.extvideo import ExtVideo
    from volthub.services.health import Readiness
    from volthub.services.idempotency import Idempotency
    from volthub.services.interactive import InteractiveReads
    from volthub.services.journals import Journals
    from volthub.services.login_throttle import LoginThrottle
    from volthub.services.media import MediaStore
    from volthub.services.notifications import Notifications
    from volthub.services.oauth import OAuthService
    from volthub.services.streams import Streams
    from volthub.services.subscriptions import Subscriptions
    from volthub.services.users import Users
    from volthub.services.volts import Volts
    from volthub.services.webhooks import Dispatcher, WebhookAdmin


@dataclass(eq=False)
class Services:
    """The app's long-lived services, one typed attribute each (made by `compose`)."""

    accounts: Accounts
    users: Users
    apps: Apps
    oauth: OAuthService
    # HMAC key of the consent page's CSRF tokens (stored, so every process agrees).
    oauth_csrf_key: str
    # First-party sessions: every session token's stored, revocable side.
    sessions: Sessions
    webhooks: Dispatcher
    webhook_admin: WebhookAdmin
    channel_points: ChannelPoints
    redemptions: Redemptions
    streams: Streams
    bots: Bots
    media: MediaStore
    emotes: Emotes
    badges: BadgeCatalogue
    teams: Teams
    journals: Journals
    extvideo: ExtVideo
    idempotency: Idempotency
    volts: Volts
    subscriptions: Subscriptions
    channel_roles: ChannelRoles
    # The channel actors' registry: every chat and interactive write goes to a channel's actor.
    chat: ActorRegistry
    # Reads of chat that need no actor: history, chat modes, activity, viewers (with presence).
    chat_reads: ChatReads
    notifications: Notifications
    # Reads of the interactive features' current state (active poll, goals, timers ...).
    interactive: InteractiveReads
    # Whether this process can serve (`/healthz`): database and broker.
    readiness: Readiness
    # What `GET /metrics` reads besides the metric registry: the database pool, the webhook outbox.
    metrics: MetricsScrape
    # The Events API fan-out: per-channel subscribers and resume buffers of this process.
    fanout: Fanout
    # The fan-out itself on one process; added up over every process on PostgreSQL.
    presence: Presence
    # Open Events API connections by token (http/events/registry): revocation ends them;
    # `connections.close_all(reason)` ends every one.
    connections: ConnectionRegistry


@dataclass(eq=False)
class Runtime:
    settings: Settings
    clock: Clock
    db: Database
    # The broker (hub.broker.Broker): in-process, or between processes on PostgreSQL.
    bus: Broker
    publisher: EventPublisher
    tokens: TokenService
    services: Services
    # Where Socket.IO connection states wait for recovery (shared by every process, or in this one).
    recovery: RecoveryStore
    # None when rate limiting is disabled ([ratelimit] enabled = false).
    rate_limits: RateLimits | None
    # The Engine.IO paths served ahead of Quart (http/events/listeners.mount), by path.
    engineio_endpoints: dict[str, EngineIOEndpoint]
    # The Events API's own listener ([events] gateway_port), None when off.
    gateway: Gateway | None
    # Runs the background services (`composition.background_services`) while the app serves.
    supervisor: Supervisor
    # Failed logins per account and per client address, counted in this process.
    login_throttle: LoginThrottle
    # Set once the start-up is done (the relay caught up with the event log, where it can).
    ready: trio.Event

    def all_engineio_endpoints(self) -> list[EngineIOEndpoint]:
        """Every Engine.IO endpoint of this process: the mount's and the gateway's."""
        found = list(self.engineio_endpoints.values())
        if self.gateway is not None:
            found += list(self.gateway.endpoints.values())
        return found


# Where `create_app` keeps its settings, readable before the runtime is composed (the
# OpenAPI document is built from an app that never starts).
SETTINGS_KEY = "volthub.settings"


# Where the serving app keeps its runtime (set by its `Server` at start-up).
RUNTIME_KEY = "volthub"


def runtime() -> Runtime:
    rt: Runtime = current_app.extensions[RUNTIME_KEY]
    return rt
