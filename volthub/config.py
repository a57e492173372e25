"""Settings: built-in defaults < TOML file (--config) < VOLTHUB_SECTION__KEY environment variables.

The models below are the single source of the defaults; `config/default.toml` documents
them and a test keeps the two equal. Every value is typed and validated at start, and a bad
value stops the start with a message that names the key.
"""

from __future__ import annotations

import os
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from volthub.protocol.cors import is_origin

ENV_PREFIX = "VOLTHUB_"


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ServerSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    max_body_bytes: int = Field(65536, ge=1024, le=64 * 1024 * 1024)
    # Request bodies of routes that take small ones (every route but uploads, journals and
    # developer apps) larger than this get 413 payload_too_large.
    small_body_bytes: int = Field(16384, ge=1024, le=64 * 1024 * 1024)
    # On SIGTERM/SIGINT: stop accepting, finish requests in flight, end event streams, exit.
    shutdown_timeout: float = Field(5.0, ge=0, le=600)
    # An idle kept-alive HTTP connection is closed after this long.
    keep_alive_timeout: float = Field(5.0, gt=0, le=3600)
    # A request body must arrive within this long (seconds) of its first wait; a client that
    # stops sending gets 408 and its connection is closed, on the main port and the gateway.
    body_timeout: float = Field(30.0, gt=0, le=3600)
    # Open connections per process (0: the descriptor limit minus a reserve) and per client
    # address (0: a third of the total); past either, a new connection gets 503 and is closed.
    max_connections: int = Field(0, ge=0, le=10_000_000)
    max_connections_per_address: int = Field(0, ge=0, le=10_000_000)
    public_url: str = ""
    # Reverse proxies (CIDRs) whose last X-Forwarded-For entry names the client; every
    # per-client decision judges that address for requests they pass on.
    trusted_proxies: list[str] = Field([], max_length=1000)
    listen_backlog: int = Field(2048, ge=16, le=65535)
    gc_gen0_threshold: int = Field(100_000, ge=0, le=10_000_000)
    # Browser origins that may call the API (/api/*, /.well-known/*) from their own pages
    # (CORS); "*" allows any, an empty list none.
    cors_origins: list[str] = Field(["*"], max_length=1000)

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        return _checked_origins(origins)

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_cidrs(cls, entries: list[str]) -> list[str]:
        from volthub.protocol.client_address import parse_networks

        parse_networks(entries)
        return entries


def _checked_origins(origins: list[str]) -> list[str]:
    for origin in origins:
        if origin not in ("*", "null") and not is_origin(origin.lower()):
            raise ValueError(
                f'not an origin: {origin!r}; write "*", "null" or scheme://host[:port] with no path,'
                " e.g. https://overlay.example"
            )
    return origins


class DatabaseSettings(Section):
    url: str = "sqlite:///var/volthub.db"
    pool_size: int = Field(8, ge=1, le=256)
    # Apply pending migrations when the server starts. `volthub serve --workers N` runs
    # them once in the parent and starts its workers with this off.
    migrate_on_start: bool = True
    # A request waits this long for a database connection, then gets 503 database_unavailable.
    acquire_timeout: float = Field(5.0, gt=0, le=600)

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        if not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
            raise ValueError("must start with sqlite:/// or postgresql://")
        return url


class AuthSettings(Section):
    # Empty means: generate one on first start and keep it in the database, so every
    # process sharing that database signs and verifies with the same key.
    token_secret: str = ""
    session_ttl_seconds: int = Field(7 * 24 * 3600, ge=60, le=365 * 24 * 3600)
    # argon2id cost; the defaults follow argon2-cffi's (RFC 9106 "second choice").
    argon2_time_cost: int = Field(3, ge=1, le=20)
    argon2_memory_kib: int = Field(65536, ge=1024, le=4 * 1024 * 1024)
    # Password hashes computed at once (each holds argon2_memory_kib), and how many more may
    # wait; past that, login and register answer 503 busy instead of queueing without bound.
    hash_concurrency: int = Field(2, ge=1, le=256)
    hash_queue: int = Field(32, ge=0, le=100_000)
    # Failed logins: this many per account and per client address within the window, then
    # one more per window/limit; further attempts get 429 without a password hash being spent.
    failed_logins_per_account: int = Field(10, ge=1, le=1_000_000)
    failed_logins_per_address: int = Field(30, ge=1, le=1_000_000)
    failed_login_window_seconds: float = Field(300.0, gt=0, le=86_400)
    # Logins being checked at once from one address; more get 429 at once.
    concurrent_logins_per_address: int = Field(2, ge=1, le=10_000)


class WebhookSettings(Section):
    # Delivery workers per process (each holds at most one attempt in flight).
    workers: int = Field(4, ge=1, le=256)
    # Gaps in seconds: the first attempt runs retry_delays[0] after the event, each later
    # one that long after the preceding attempt failed; one attempt per entry.
    retry_delays: list[float] = Field([0, 60, 300, 1800, 7200], min_length=1, max_length=50)
    # Consecutive failed attempts (over all deliveries of a webhook) that disable it.
    disable_after_failures: int = Field(5, ge=1, le=1000)
    # One attempt (resolve, connect, TLS, request, response) gets this long.
    timeout_seconds: float = Field(10.0, gt=0, le=300)
    # Loopback, private, link-local and other non-public targets are refused unless true.
    allow_private_targets: bool = False
    # A PEM file of extra CA certificates trusted for deliveries (besides the system's).
    ca_file: str = ""
    # Upper bound on how long idle workers wait before looking for due deliveries that
    # another process wrote; events of this process wake them at once.
    poll_seconds: float = Field(5.0, gt=0, le=86400)
    # Finished deliveries (and their attempts) older than this are deleted; 0 keeps them.
    log_retention_days: int = Field(30, ge=0, le=3650)

    @field_validator("retry_delays")
    @classmethod
    def _non_negative(cls, delays: list[float]) -> list[float]:
        if any(not 0 <= delay <= 7 * 86400 for delay in delays):
            raise ValueError("each delay must be between 0 and 604800 seconds")
        return delays


class RateLimitSettings(Section):
    # Off means off: nothing is counted and no X-RateLimit-* headers are sent (an operator
    # turns this off when a proxy in front enforces its own limits, or for benchmarks).
    enabled: bool = True
    # Trust every peer as a proxy ([server] trusted_proxies names them instead): the last
    # X-Forwarded-For entry is the client address. Clients can send the header themselves.
    trust_forwarded_for: bool = False
    global_per_ip_per_minute: int = Field(600, ge=1, le=1_000_000)
    chat_send_per_minute: int = Field(30, ge=1, le=1_000_000)
    moderation_per_minute: int = Field(60, ge=1, le=1_000_000)
    token_per_minute: int = Field(10, ge=1, le=1_000_000)
    app_create_per_hour: int = Field(5, ge=1, le=1_000_000)
    subscriptions_per_minute: int = Field(120, ge=1, le=1_000_000)
    roles_write_per_minute: int = Field(30, ge=1, le=1_000_000)
    interactive_per_minute: int = Field(60, ge=1, le=1_000_000)


class ChatHubSettings(Section):
    # Commands a channel's actor may have queued; past that, chat writes get 503 channel_busy.
    inbox_size: int = Field(256, ge=1, le=100_000)
    # A channel actor with nothing to do for this long stops; its state reloads from the store.
    actor_idle_seconds: float = Field(300.0, gt=0, le=86_400)
    # Messages kept per channel; older ones are pruned as new ones arrive (those younger
    # than the longest slow mode, an hour, stay: the slow-mode clock reads them).
    history_limit: int = Field(1000, ge=100, le=1_000_000)


class EventsSettings(Section):
    """The Events API: Socket.IO (Engine.IO v4) and SSE connections, and their fan-out."""

    # Frames (Socket.IO) or events (SSE) one connection may have waiting to be written;
    # a connection whose queue is full is disconnected with a reason, never waited on.
    queue_size: int = Field(1000, ge=8, le=1_000_000)
    # An SSE stream idle this long gets a comment line, so proxies keep it open.
    sse_keepalive_seconds: float = Field(15.0, gt=0, le=3600)
    # Recent events kept per channel for SSE Last-Event-ID resume (in memory, per process).
    resume_buffer_size: int = Field(500, ge=0, le=100_000)
    # Channels whose resume buffer is kept; the least recently active are dropped beyond it.
    resume_channels: int = Field(10_000, ge=1, le=10_000_000)
    # Engine.IO heartbeat: the server pings every interval; no pong within the timeout closes.
    ping_interval_ms: int = Field(25_000, ge=50, le=3_600_000)
    ping_timeout_ms: int = Field(20_000, ge=50, le=3_600_000)
    # Largest polling POST body or WebSocket message accepted; larger closes the connection.
    max_payload: int = Field(100_000, ge=1024, le=16 * 1024 * 1024)
    # Frames one fragmented WebSocket message may take; more closes the connection (1009).
    max_message_frames: int = Field(128, ge=1, le=1_000_000)
    # A connection that has not joined a namespace this long after opening is closed.
    connect_timeout_ms: int = Field(45_000, ge=100, le=3_600_000)
    # A WebSocket probing an upgrade that does not complete in this long is closed.
    upgrade_timeout_ms: int = Field(10_000, ge=100, le=3_600_000)
    # Channels one Socket.IO connection may `subscribe` to besides its own.
    max_subscriptions: int = Field(20, ge=0, le=10_000)
    # `subscribe` requests one Socket.IO connection may send a minute (a burst of this many,
    # then one every 60/N seconds); past it they are refused with LIMIT_EXCEEDED.
    subscribe_attempts_per_minute: int = Field(60, ge=1, le=100_000)
    # Origins allowed to reach the Engine.IO endpoints from a browser; "*" allows any.
    # Empty: the same as [server] cors_origins.
    cors_origins: list[str] = Field([], max_length=1000)
    # Socket.IO connection state recovery (v4.6+ clients that ask with auth.recovery): a
    # connection that drops may come back within this long and get what it missed. 0: off.
    recovery_window_seconds: float = Field(120.0, ge=0, le=86_400)
    # The Events API's own listener (docs/architecture.md, "The Events API paths"): Engine.IO
    # WebSocket and polling on this port, served without Hypercorn; where Socket.IO clients
    # are sent by default. The mount on the main port stays. 0: off.
    gateway_port: int = Field(8081, ge=0, le=65535)
    # Address the gateway binds; empty: [server] host.
    gateway_host: str = ""
    # Several processes may bind the gateway port together (SO_REUSEPORT; the kernel spreads
    # connections over them). `serve --workers N` turns it on for its workers; off, a second
    # process on the same port fails to start instead of silently sharing it.
    gateway_reuse_port: bool = False
    # The Events API's WebSocket base address clients are told (`{ws_url}`: they connect to
    # `{ws_url}/ws/events`), e.g. "wss://events.example.com". Empty: the gateway's port on
    # the host of [server] public_url (else the bind address); the main port when the
    # gateway is off.
    public_ws_url: str = ""

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, origins: list[str]) -> list[str]:
        return _checked_origins(origins)

    def origins_for_browsers(self, server: ServerSettings) -> list[str]:
        """The origins the Engine.IO endpoints allow: this section's, else the server's."""
        return self.cors_origins or server.cors_origins

    @field_validator("public_ws_url")
    @classmethod
    def _ws_scheme(cls, url: str) -> str:
        if url and not url.startswith(("ws://", "wss://", "http://", "https://")):
            raise ValueError("must start with ws://, wss://, http:// or https:// (or be empty)")
        return url.rstrip("/")


class OAuthSettings(Section):
    """OAuth 2.0 for third-party apps."""

    # Lifetime of an OAuth access token (a JWT; stops working at once when its grant is revoked).
    access_token_ttl_seconds: int = Field(3600, ge=60, le=86400)
    # A refresh token expires this long after it was issued; each refresh issues a new one.
    refresh_token_ttl_seconds: int = Field(30 * 86400, ge=3600, le=365 * 86400)
    # Authorization codes are single use and expire this long after consent (RFC 6749 §4.1.2).
    code_ttl_seconds: int = Field(600, ge=10, le=600)
    # Sensitive scopes need an operator's grant per app (`volthub apps grant`).
    sensitive_scopes_need_review: bool = True
    # Public clients (no secret) must always use PKCE; true demands it of confidential ones too.
    require_pkce_for_confidential: bool = False
    # Accept code_challenge_method=plain from confidential clients (RFC 7636 allows it, RFC
    # 9700 advises against it; public clients are always refused it; S256 is always accepted).
    allow_plain_pkce: bool = False
    # How long a process may reuse a grant check for an access token (and the session check
    # of a first-party token). Revocations in the
    # same process take effect at once; other processes see them within this time. 0: no cache.
    grant_cache_seconds: float = Field(2.0, ge=0, le=60)


class IngestSettings(Section):
    """Media-server hooks and ingest addresses."""

    # Shared secret the media server presents on every hook (Bearer header, or query
    # parameter `secret` where the server cannot send headers). Empty: hooks are refused
    # with 403 ingest_not_configured and a warning is logged at start.
    hook_secret: str = ""
    # Secret the stream keys are derived from. Empty: generated once and kept in the
    # database. Set it here to keep keys out of database dumps; changing it changes every key.
    stream_key_secret: str = ""
    # A live stream with no hook or heartbeat for this long is closed (its media server
    # vanished). 0 never closes a stream on silence.
    silence_timeout_seconds: float = Field(120.0, ge=0, le=86400)
    # The ingest addresses `stream/setup` hands to encoders: only those the media server in
    # front of volthub serves. `{username}` is replaced. WHIP (MediaMTX serves it; nginx-rtmp
    # does not) is offered, first and preferred, only when set; empty: not offered.
    whip_url: str = ""
    rtmp_url: str = "rtmp://127.0.0.1:1935/live"

    def offers(self) -> list[tuple[str, str]]:
        """(protocol, URL template) of every configured ingest address, WHIP first."""
        return [(protocol, url) for protocol, url in (("whip", self.whip_url), ("rtmp", self.rtmp_url)) if url]

    @model_validator(mode="after")
    def _something_offered(self) -> IngestSettings:
        if not self.offers():
            raise ValueError("set [ingest] rtmp_url or whip_url: encoders need an address to publish to")
        return self

    @field_validator("whip_url", "rtmp_url")
    @classmethod
    def _no_srt(cls, url: str) -> str:
        if url.lower().startswith("srt://"):
            raise ValueError("SRT ingest is not offered")
        return url


class StreamsSettings(Section):
    """Browse lists and the category catalogue."""

    # Usernames of the channels `GET /api/streams/featured` lists (those live, in this order).
    featured: list[str] = Field([], max_length=1000)
    # A JSON file of extra categories, merged over the built-in volthub/data/categories.json
    # (same shape: [{"slug", "name", "group"}]; a slug already known replaces the built-in).
    categories_file: str = ""


class BotSettings(Section):
    # A bot name stays reserved this long after a bot stops using it.
    name_hold_days: int = Field(45, ge=0, le=3650)


class MediaSettings(Section):
    # Where uploaded images (emotes, journal images) live: "database" or "disk".
    storage: Literal["database", "disk"] = "database"
    # With storage = "disk": the directory of the image files.
    directory: str = "var/media"
    # Largest accepted emote image and journal image, in bytes. A request body is also
    # capped by [server] max_body_bytes: raise both for larger images.
    emote_max_bytes: int = Field(65536, ge=64, le=64 * 1024 * 1024)
    journal_image_max_bytes: int = Field(65536, ge=64, le=64 * 1024 * 1024)
    # Largest width and height in pixels, by kind (read from the image's header).
    emote_max_side: int = Field(512, ge=1, le=65_535)
    journal_image_max_side: int = Field(4096, ge=1, le=65_535)


class ExtVideoSettings(Section):
    # The external video platform's API base URL (e.g. https://api.video.example); empty:
    # the integration is off and its routes answer 409 extvideo_not_configured.
    base_url: str = ""
    # Its OAuth endpoints; empty: base_url + /oauth/authorize, /oauth/token, /oauth/revoke.
    authorize_url: str = ""
    token_url: str = ""
    revoke_url: str = ""
    # This platform's OAuth client at the provider.
    client_id: str = ""
    client_secret: str = ""
    # Where the provider sends the person back; empty: [server] public_url +
    # /api/extvideo/auth/callback.
    redirect_uri: str = ""
    scope: str = "videos.read playlists.read"
    # Send a PKCE challenge (S256) with the consent URL and its verifier with the code
    # exchange; turn off only for a provider that refuses the extra parameters.
    pkce: bool = True
    timeout_seconds: float = Field(10.0, gt=0, le=120)
    # Seconds the public widget serves a user's recent videos from memory before asking again.
    widget_cache_seconds: float = Field(60.0, ge=0, le=86400)

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.client_id)

    def callback_url(self, public_url: str) -> str:
        """Where the provider sends people back: `redirect_uri`, or public_url's callback."""
        return self.redirect_uri or f"{public_url.rstrip('/')}/api/extvideo/auth/callback"


class ClusterSettings(Section):
    """Several processes on one PostgreSQL database. SQLite ignores this section."""

    # Events are kept in the database's event log this long: a process whose LISTEN
    # connection dropped replays from it, and a starting process fills its resume buffers.
    event_log_retention_seconds: float = Field(600.0, ge=10, le=7 * 86400)
    # Newest event-log rows a starting process loads into its resume buffers.
    warm_start_rows: int = Field(50_000, ge=0, le=10_000_000)
    # Rate-limit budgets counted in the database (in Redis with broker = "redis"), shared by
    # every process (PostgreSQL). false: each process counts on its own.
    shared_rate_limits: bool = True
    # Each process publishes its Events API connections per channel this often, and the
    # viewers list adds up every process's count; a process silent for 3 times this long
    # (killed) is left out.
    presence_interval_seconds: float = Field(5.0, ge=0.5, le=300)
    # What carries events between processes: "postgres" (LISTEN/NOTIFY on the database: every
    # process hears every event) or "redis" (Redis or Valkey: a process subscribes only to the
    # channels it serves). PostgreSQL stays the system of record either way.
    broker: Literal["postgres", "redis"] = "postgres"
    # With broker = "redis": one server (redis:// or rediss://) ...
    redis_url: str = Field("", pattern=r"^(rediss?://.*)?$")
    # ... or a Redis Cluster, by some of its nodes ("host:port"); channels are sharded by slot.
    redis_cluster_nodes: list[str] = Field([], max_length=64)
    # A channel nobody here needs any more is unsubscribed from after this long (a client
    # that reconnects at once keeps the subscription).
    redis_unsubscribe_after_seconds: float = Field(5.0, ge=0, le=3600)
    # With broker = "redis": a PEM file of the CA that signed the server's TLS certificate
    # (rediss://, or TLS to every cluster node when set with redis_cluster_nodes); empty:
    # the system's trusted CAs. The certificate must name the host connected to.
    redis_ca_file: str = ""
    # With broker = "redis": how often each process looks in the event log for events of
    # the channels it follows that never reached Redis (their publisher was killed between
    # its commit and handing them over), once older than redis_sweep_grace_seconds. 0: never
    # (followers then see such events with the channel's next one).
    redis_sweep_interval_seconds: float = Field(5.0, ge=0, le=3600)
    redis_sweep_grace_seconds: float = Field(2.0, ge=0, le=3600)

    @field_validator("redis_cluster_nodes")
    @classmethod
    def _nodes(cls, nodes: list[str]) -> list[str]:
        for node in nodes:
            host, _, port = node.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"not host:port: {node!r}")
        return nodes

    @model_validator(mode="after")
    def _broker_address(self) -> ClusterSettings:
        if self.broker == "redis" and not (self.redis_url or self.redis_cluster_nodes):
            raise ValueError('broker = "redis" needs redis_url or redis_cluster_nodes')
        return self


class MetricsSettings(Section):
    """`GET /metrics` on the main port, in the Prometheus text format."""

    enabled: bool = True
    # Client addresses (CIDRs) that may read it; everyone else gets 404. Behind a reverse
    # proxy in [server] trusted_proxies, the forwarded client's address is what is checked.
    allow: list[str] = Field(["127.0.0.0/8", "::1/128"], max_length=1000)

    @field_validator("allow")
    @classmethod
    def _cidrs(cls, allow: list[str]) -> list[str]:
        import ipaddress

        for entry in allow:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"not an address or CIDR: {entry!r}") from None
        return allow


class LoggingSettings(Section):
    # "text": one readable line per record; "json": one JSON object per line
    # (ts, level, logger, message, and the fields of access lines).
    format: Literal["text", "json"] = "text"
    level: Literal["debug", "info", "warning", "error"] = "info"
    # One line per HTTP request and per Events API session end, at INFO.
    access_log: bool = True


class VoltsSettings(Section):
    # Volts a new wallet holds before its first purchase.
    starting_balance: int = Field(0, ge=0, le=1_000_000_000)
    # Share of each send kept by the platform, in percent (rounded down); 0: the creator
    # gets the whole amount.
    platform_fee_percent: int = Field(0, ge=0, le=100)
    # Who is paid for purchases. Empty: none, and purchases answer 503
    # payments_not_configured. "sandbox" (the only one built in) confirms every purchase at
    # once and takes no money: for tests and local demos only, never in production.
    payment_provider: str = Field("", pattern="^(sandbox)?$")


class SubscriptionSettings(Section):
    # Price of one subscription period per tier, in Volts.
    tier1_price: int = Field(500, ge=1, le=100_000_000)
    tier2_price: int = Field(1000, ge=1, le=100_000_000)
    tier3_price: int = Field(2500, ge=1, le=100_000_000)
    # Length of one prepaid period. Nothing renews by itself (gifts never do); subscribing
    # again after the end continues the tenure months.
    period_days: int = Field(30, ge=1, le=3650)
    # Longest the expiry service sleeps before looking for expiries another process wrote.
    poll_seconds: float = Field(3600.0, gt=0, le=86_400)

    def price(self, tier: str) -> int:
        return {"tier1": self.tier1_price, "tier2": self.tier2_price, "tier3": self.tier3_price}[tier]


class ChannelRoleSettings(Section):
    # Longest the role-expiry service sleeps before looking for grants another process
    # wrote (its own wake it at once; every expiry fires at its exact time).
    poll_seconds: float = Field(60.0, gt=0, le=86_400)


class RaidSettings(Section):
    # After a raid, the raider may not raid again for this long, and the target may not be
    # raided again for target_cooldown_seconds (429 raid_cooldown with the seconds left). 0: none.
    raider_cooldown_seconds: float = Field(120.0, ge=0, le=86_400)
    target_cooldown_seconds: float = Field(30.0, ge=0, le=86_400)


class ChannelPointsSettings(Section):
    # Points a signed-in viewer earns per `watch_interval_seconds` connected to a channel.
    points_per_interval: int = Field(10, ge=0, le=1_000_000)
    watch_interval_seconds: float = Field(300.0, gt=0, le=86_400)
    # One-time bonuses.
    follow_bonus: int = Field(300, ge=0, le=1_000_000)
    subscription_bonus: int = Field(1000, ge=0, le=1_000_000)


class Settings(Section):
    volts: VoltsSettings = VoltsSettings()
    subscriptions: SubscriptionSettings = SubscriptionSettings()
    channel_points: ChannelPointsSettings = ChannelPointsSettings()
    channel_roles: ChannelRoleSettings = ChannelRoleSettings()
    raids: RaidSettings = RaidSettings()
    server: ServerSettings = ServerSettings()
    database: DatabaseSettings = DatabaseSettings()
    auth: AuthSettings = AuthSettings()
    oauth: OAuthSettings = OAuthSettings()
    ratelimit: RateLimitSettings = RateLimitSettings()
    webhooks: WebhookSettings = WebhookSettings()
    chat: ChatHubSettings = ChatHubSettings()
    events: EventsSettings = EventsSettings()
    ingest: IngestSettings = IngestSettings()
    streams: StreamsSettings = StreamsSettings()
    bots: BotSettings = BotSettings()
    media: MediaSettings = MediaSettings()
    extvideo: ExtVideoSettings = ExtVideoSettings()
    cluster: ClusterSettings = ClusterSettings()
    metrics: MetricsSettings = MetricsSettings()
    logging: LoggingSettings = LoggingSettings()

    @model_validator(mode="after")
    def _absolute_extvideo_callback(self) -> Settings:
        """The provider needs an absolute redirect_uri: refuse to start without one."""
        if self.extvideo.configured:
            parts = urlsplit(self.extvideo.callback_url(self.server.public_url))
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    "extvideo.redirect_uri: the video platform needs an absolute http(s) redirect_uri;"
                    " set [extvideo] redirect_uri or [server] public_url"
                )
        return self


def events_ws_url(settings: Settings) -> str:
    """The Events API's WebSocket base address clients are told (`{ws_url}`; they connect to
    `{ws_url}/ws/events`): `[events] public_ws_url`, else the gateway's port on the host of
    `[server] public_url` (else of the bind address), else the main port's address."""
    events, server = settings.events, settings.server
    if events.public_ws_url:
        return events.public_ws_url
    public = urlsplit(server.public_url) if server.public_url else None
    secure = public is not None and public.scheme == "https"
    scheme = "wss" if secure else "ws"
    if events.gateway_port:
        host = public.hostname if public is not None and public.hostname else events.gateway_host or server.host
        return f"{scheme}://{_bracketed(host)}:{events.gateway_port}"
    if public is not None:
        return f"{scheme}://{public.netloc}{public.path.rstrip('/')}"
    return f"ws://{_bracketed(server.host)}:{server.port}"


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class ConfigError(Exception):
    """A configuration value is missing, unknown or invalid; the message names the key."""


def load_settings(
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Settings:
    """Merge the layers and validate once, so every error names its `section.key`."""
    merged: dict[str, dict[str, Any]] = {}
    if config_file is not None:
        _merge(merged, _read_toml(Path(config_file)))
    _merge(merged, _from_environment(os.environ if environ is None else environ))
    if overrides:
        _merge(merged, {k: dict(v) for k, v in overrides.items()})
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None


def _read_toml(path: Path) -> dict[str, dict[str, Any]]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    for section, values in data.items():
        if not isinstance(values, dict):
            raise ConfigError(f"{section}: expected a [section] table in {path}")
    return data


def _from_environment(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].lower().partition("__")
        found.setdefault(section, {})[key] = _coerce_env(section, key, raw)
    return found


def _coerce_env(section: str, key: str, raw: str) -> Any:
    """Environment values are strings; lists are written comma-separated."""
    section_field = Settings.model_fields.get(section)
    if section_field is None or section_field.annotation is None:
        return raw
    field = section_field.annotation.model_fields.get(key)
    if field is not None and typing.get_origin(field.annotation) is list:
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


def _merge(into: dict[str, dict[str, Any]], layer: Mapping[str, Mapping[str, Any]]) -> None:
    for section, values in layer.items():
        into.setdefault(section, {}).update(values)


def _describe(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        problems.append(f"{key}: {error['msg']}")
    return "invalid configuration: " + "; ".join(problems)


def defaults_as_dict() -> dict[str, dict[str, Any]]:
    return Settings().model_dump()
