"""What the running app holds: settings, database, clock, bus, publisher, tokens, services.

`Runtime` is made with the app (`create_app`); `Runtime.services` is made once the database
is open (`app._start`). Each long-lived service is one typed attribute of `Services`, so a
reader can see what exists and a typo is a type error, not a `KeyError` at run time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio
from quart import current_app

from volthub.config import Settings
from volthub.hub.broker import Broker
from volthub.hub.clock import Clock
from volthub.hub.presence import Presence
from volthub.hub.publisher import EventPublisher
from volthub.persistence import Database
from volthub.services.sessions import Sessions
from volthub.services.tokens import TokenService

if TYPE_CHECKING:
    from volthub.http.events.engineio import EngineIOEndpoint
    from volthub.http.events.gateway import Gateway
    from volthub.http.events.registry import ConnectionRegistry
    from volthub.http.ratelimit import RateLimits
    from volthub.hub.fanout import Fanout
    from volthub.hub.recovery_store import RecoveryStore
    from volthub.hub.registry import ActorRegistry
    from volthub.hub.supervisor import Supervisor
    from volthub.services.accounts import Accounts
    from volthub.services.apps import Apps
    from volthub.services.bots import Bots
    from volthub.services.catalogue import BadgeCatalogue, Teams
    from volthub.services.channel_points import ChannelPoints, Redemptions
    from volthub.services.channel_roles import ChannelRoles
    from volthub.services.emotes import Emotes
    from volthub.services.extvideo import ExtVideo
    from volthub.services.idempotency import Idempotency
    from volthub.services.journals import Journals
    from volthub.services.media import MediaStore
    from volthub.services.oauth import OAuthService
    from volthub.services.streams import Streams
    from volthub.services.subscriptions import Subscriptions
    from volthub.services.users import Users
    from volthub.services.volts import Volts
    from volthub.services.webhooks import Dispatcher, WebhookAdmin


@dataclass(eq=False)
class Services:
    """The app's long-lived services, one typed attribute each (made in `app._start`)."""

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
    # The channel actors' registry: made on first use (blueprints.chat.hub_for).
    chat: ActorRegistry | None = None
    # Set by the Events API start-up hook (http/events/socketio.install), which runs right
    # after this object is made; reading them earlier is an AttributeError, not a None.
    fanout: Fanout = field(init=False, repr=False)
    presence: Presence = field(init=False, repr=False)
    # Open Events API connections by token (http/events/registry): revocation ends them;
    # `connections.close_all(reason)` ends every one.
    connections: ConnectionRegistry = field(init=False, repr=False)


@dataclass(eq=False)
class Runtime:
    settings: Settings
    clock: Clock
    bus: Broker
    database: Database | None = None
    publisher: EventPublisher | None = None
    tokens: TokenService | None = None
    # Present from create_app on (None when rate limiting is disabled).
    rate_limits: RateLimits | None = None
    # The Engine.IO paths served ahead of Quart (http/events/socketio.mount), by path.
    engineio_endpoints: dict[str, EngineIOEndpoint] = field(default_factory=dict)
    # The Events API's own listener ([events] gateway_port), None when off.
    gateway: Gateway | None = None
    # The background services' supervisor, while the app serves.
    supervisor: Supervisor | None = None
    # Where Socket.IO connection states wait for recovery (set at start-up by the Events API).
    recovery: RecoveryStore | None = None
    # Set once the start-up is done (the relay caught up with the event log, where it can).
    ready: trio.Event = field(default_factory=trio.Event)
    _services: Services | None = field(default=None, repr=False)

    @property
    def db(self) -> Database:
        assert self.database is not None, "database is opened in before_serving"
        return self.database

    @property
    def events(self) -> EventPublisher:
        assert self.publisher is not None, "publisher is created in before_serving"
        return self.publisher

    @property
    def services(self) -> Services:
        assert self._services is not None, "services are made in before_serving"
        return self._services

    @services.setter
    def services(self, services: Services) -> None:
        self._services = services

    @property
    def started(self) -> bool:
        return self._services is not None


def runtime() -> Runtime:
    rt: Runtime = current_app.extensions["volthub"]
    return rt
