"""The Events API over Socket.IO, and its wiring into the app.

Two Engine.IO endpoints, both served by :mod:`volthub.http.events.engineio` in front of
Quart (:func:`mount`):

    /ws/events   Engine.IO path; Socket.IO namespace "/"
    /socket.io   the default path; namespace "/ws/events" (so io("ws://host/ws/events")
                 works as the spec writes it) and "/" too

With `[events] gateway_port` the same two paths are also served, by the same handler, on
a port of their own by :mod:`volthub.http.events.gateway` (docs/architecture.md, "The Events API
paths").

On connect, a token (``auth.token``, else the ``token`` query parameter) is verified by
``access.authenticate``: valid, the connection is subscribed to the token owner's channel
and gets ``connected`` {channelUsername, channelId, authenticated: true, autoSubscribed:
true}; invalid or expired, the connect is refused with CONNECT_ERROR saying why. Without
a token it connects anonymously and may ``subscribe`` to channels' public events.

Client requests (each may carry an ack; the ack gets the same payload as the reply):

    subscribe {channelId} | {channel: username}  -> subscribed {channelId, channelUsername}
    unsubscribe {channelId}                      -> unsubscribed {channelId}
    channel:getRewards {channelId}               -> channel:rewards {rewards: [...]}
    anything else                                -> error {code: UNKNOWN_EVENT, ...}

Errors are ``error`` {code, message, event}; the connection lives on.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

import orjson
import trio
from quart import Quart

from volthub.http import observe, ratelimit
from volthub.http.access import Principal, authenticate
from volthub.http.cors import events_policy
from volthub.http.errors import ApiError
from volthub.http.events.asgi import CLOSE_GOING_AWAY, CLOSE_TRY_AGAIN_LATER, Receive, Refusal, Scope, Send
from volthub.http.events.connection import Connection
from volthub.http.events.engineio import SHUTTING_DOWN, EngineIOEndpoint
from volthub.http.events.gateway import Gateway
from volthub.http.events.recovery import RECOVERABLE, Lost, RecoveryStore, missed_events, note_start
from volthub.http.events.registry import AUTHORIZATION_REVOKED, ConnectionRegistry, Key
from volthub.http.params import uuid_param
from volthub.http.runtime import Runtime
from volthub.http.serving import LIMITS, OVER_CAPACITY_RESPONSE, claim_client
from volthub.hub.fanout import Fanout, Subscription
from volthub.hub.publisher import Event as PlatformEvent
from volthub.metrics import EVENTS_SUBSCRIBE_REFUSED
from volthub.protocol import sse
from volthub.protocol.engineio.session import Event, SessionClosed, Settings, new_sid
from volthub.protocol.ratelimit import Rate, decide, to_ns
from volthub.protocol.socketio.packets import encode_event_frame
from volthub.protocol.socketio.session import AckReceived, ConnectRequest, Disconnected, EventReceived
from volthub.protocol.websocket import message_frame
from volthub.services.channel_points import ChannelPoints, socket_shape
from volthub.services.lookup_cache import LookupCache
from volthub.services.users import User

log = logging.getLogger(__name__)

ENGINEIO_PATH: Final = "/ws/events"
DEFAULT_PATH: Final = "/socket.io"
SPEC_NAMESPACE: Final = "/ws/events"
# A client request that needs the database gets this long before it is answered with an error.
REQUEST_TIMEOUT_SECONDS: Final = 5.0

# Error codes of the `error` event.
UNKNOWN_EVENT: Final = "UNKNOWN_EVENT"
INVALID_REQUEST: Final = "INVALID_REQUEST"
NOT_FOUND: Final = "NOT_FOUND"
LIMIT_EXCEEDED: Final = "LIMIT_EXCEEDED"
SERVICE_UNAVAILABLE: Final = "SERVICE_UNAVAILABLE"
SLOW_CONSUMER: Final = "SLOW_CONSUMER"


def socket_wire(namespace: str, offsets: bool = False) -> str:
    return f"socket.io {namespace}{' +offsets' if offsets else ''}"


class SocketFrames(NamedTuple):
    """One event's frames for one wire, shared by every subscriber of that wire."""

    frames: tuple[str, str]
    channel_id: str
    event_id: str
    # The two frames as WebSocket bytes, built once: the gateway writes these very bytes to
    # every subscriber in one send (empty: build them from ``frames``).
    wire: bytes = b""


def socket_encoder(namespace: str, offsets: bool = False) -> Callable[[PlatformEvent], SocketFrames]:
    """Each event is emitted twice: `event` with the envelope, then by name.
    With ``offsets`` (connection state recovery), each carries the event id as a last
    argument, which the official clients remember as their offset."""

    def encode(event: PlatformEvent) -> SocketFrames:
        extra = (orjson.dumps(event.id),) if offsets else ()
        frames = (
            encode_event_frame(namespace, "event", event.envelope_json, *extra),
            encode_event_frame(namespace, event.name, event.data_json, *extra),
        )
        wire = message_frame(frames[0]) + message_frame(frames[1])
        return SocketFrames(frames, event.channel_id, event.id, wire)

    return encode


# The SSE forms of an event, chosen per stream with `?messages=`: the named message
# (`event: <name>`, the default: what `addEventListener(name)` and SSE libraries expect,
# each event once), the unnamed one (what `EventSource.onmessage` receives), or both,
# named first. Each carries the envelope and the event id, so `Last-Event-ID` resumes
# whichever form a client reads. One wire per form: each is encoded once per event.
SSE_FORMS: Final = ("named", "unnamed", "both")
SSE_DEFAULT_FORM: Final = "named"
SSE_WIRE: Final = "sse"  # the default form's wire


def sse_wire(form: str) -> str:
    return SSE_WIRE if form == SSE_DEFAULT_FORM else f"sse {form}"


def sse_named(event: PlatformEvent) -> bytes:
    return sse.encode(event.envelope_json, event=event.name, id=event.id)


def sse_unnamed(event: PlatformEvent) -> bytes:
    return sse.encode(event.envelope_json, id=event.id)


def sse_encode(event: PlatformEvent) -> bytes:
    """Both forms as one write: the named message, then the unnamed one."""
    return sse_named(event) + sse_unnamed(event)


SSE_ENCODERS: Final[dict[str, Callable[[PlatformEvent], bytes]]] = {
    "both": sse_encode,
    "named": sse_named,
    "unnamed": sse_unnamed,
}


class SocketSubscriber:
    """A namespace of a Socket.IO connection, as the fan-out sees it."""

    __slots__ = ("conn", "namespace", "wire", "limit", "last_sent")

    def __init__(self, conn: Connection, namespace: str, limit: int, offsets: bool = False) -> None:
        self.conn = conn
        self.namespace = namespace
        self.wire = socket_wire(namespace, offsets)
        self.limit = limit
        # With recovery: the last event id sent per channel (where to resume that channel).
        self.last_sent: dict[str, str] | None = {} if offsets else None

    def deliver(self, payload: SocketFrames) -> str | None:
        conn = self.conn
        session = conn.session
        if session.closed:
            return session.transport  # leaving anyway: its on_leave removes it
        transport = conn.deliver(payload.frames, payload.wire, self.limit)
        if transport is not None and self.last_sent is not None:
            self.last_sent[payload.channel_id] = payload.event_id
        return transport

    def note_lag(self, since: float) -> None:
        self.conn.note_lag(since)

    def overflow(self, reason: str) -> None:
        conn = self.conn
        # Beyond the bound by one frame, so the client learns why before the close.
        conn.socketio.emit(self.namespace, "error", {"code": SLOW_CONSUMER, "message": reason})
        conn.endpoint.dispatch_leave(conn, conn.close(reason, CLOSE_TRY_AGAIN_LATER))

    def push(self, name: str, data: dict[str, Any]) -> None:
        """The registry tells this namespace something about its user (`channel:badges`)."""
        if self.conn.session.closed:
            return
        self.conn.socketio.emit(self.namespace, name, data)
        self.conn.flush()

    def end(self, code: str, reason: str) -> None:
        """The registry ends this namespace: `error` {code, message}, then the end. A revoked
        authorization leaves the namespace (DISCONNECT: the official clients do not
        reconnect, the token is no good anyway); anything else closes the session, so the
        clients reconnect (to another process, or once this one is back)."""
        conn = self.conn
        if conn.session.closed:
            return  # already ended (another namespace of the same session, say)
        session = conn.socketio
        if self.namespace in session.namespaces:
            session.send_frame(_ending_frame(self.namespace, code, reason))
        if code == AUTHORIZATION_REVOKED:
            if session.disconnect(self.namespace):
                conn.endpoint.dispatch_leave(conn, [Disconnected(self.namespace, reason)])
        else:
            conn.endpoint.dispatch_leave(conn, conn.close(reason, CLOSE_GOING_AWAY))


@functools.lru_cache(maxsize=64)
def _ending_frame(namespace: str, code: str, reason: str) -> str:
    """The `error` {code, message} a namespace is ended with: a shutdown tells every socket
    the same, so it is encoded once per namespace, not once per socket."""
    return encode_event_frame(namespace, "error", orjson.dumps({"code": code, "message": reason}))


_USER_CACHE_SIZE = 50_000


@dataclass(frozen=True, slots=True)
class _Restored:
    pid: str
    lost: Lost
    missed: dict[str, list[PlatformEvent]]


@dataclass(slots=True)
class _Joined:
    """One joined namespace of a connection."""

    subscriber: SocketSubscriber
    user: User | None
    registered: Key
    pid: str | None = None  # connection state recovery id, when the client asked for it
    client_id: str | None = None
    channels: dict[str, Subscription] = field(default_factory=dict)
    sid: str = ""  # the socket id given to the namespace
    subscribe_budget: int | None = None  # the `subscribe` budget's GCRA state (None: full)


class EventsSocketHandler:
    def __init__(self, app: Quart, rt: Runtime) -> None:
        self._app = app
        self._rt = rt
        # In-process until start-up chooses the deployment's store (`install`).
        self._local_recovery = RecoveryStore(rt.settings.events.recovery_window_seconds)
        # Connects read only a user's id and username, which never change and whose users
        # are never deleted: caching them (for good) spares a database round trip per connect.
        self._users: LookupCache[User | None] = LookupCache(rt.clock, math.inf, _USER_CACHE_SIZE)

    @property
    def fanout(self) -> Fanout:
        return self._rt.services.fanout

    @property
    def recovery(self) -> RecoveryStore:
        shared = self._rt.recovery
        return shared if shared is not None else self._local_recovery

    @property
    def connections(self) -> ConnectionRegistry:
        return self._rt.services.connections

    # ------------------------------------------------------------------ Handler protocol

    async def on_request(self, conn: Connection, event: Event) -> None:
        if isinstance(event, ConnectRequest):
            await self._connect(conn, event)
        elif isinstance(event, EventReceived):
            await self._client_event(conn, event)
        elif not isinstance(event, AckReceived):  # we never ask for acks; nothing else comes
            log.debug("ignored %r", event)

    def on_leave(self, conn: Connection, event: Disconnected | SessionClosed) -> None:
        joined: dict[str, _Joined] = conn.app or {}
        namespaces = [event.namespace] if isinstance(event, Disconnected) else list(joined)
        for namespace in namespaces:
            state = joined.pop(namespace, None)
            if state is not None:
                self.fanout.remove(state.subscriber)
                self.connections.discard(state.subscriber, state.registered)
                if state.pid is None:
                    continue
                if event.reason == SHUTTING_DOWN and len(state.channels) <= 1:
                    # One channel: the client's offset says where it resumes, so the live
                    # state written at its subscription serves the recovery as well.
                    self.recovery.stand(state.pid, self._state_of(conn, namespace, state), conn.now())
                elif event.reason in RECOVERABLE:
                    self.recovery.keep(state.pid, self._state_of(conn, namespace, state), conn.now())
                else:
                    self.recovery.forget(state.pid, self._state_of(conn, namespace, state))

    def _state_of(self, conn: Connection, namespace: str, state: _Joined) -> Lost:
        """What a recovery of this namespace connection gets back."""
        sid = conn.socketio.namespaces.get(namespace) or state.sid
        return Lost(
            sid,
            namespace,
            state.user.id if state.user else None,
            state.client_id,
            {channel_id: subscription.owner for channel_id, subscription in state.channels.items()},
            dict(state.subscriber.last_sent or {}),
        )

    def _track(self, conn: Connection, state: _Joined) -> None:
        """A recoverable connection joined or changed its channels: its state is written
        where every process finds it, so even a killed process's clients can recover."""
        if state.pid is not None and not conn.session.closed:
            self.recovery.track(state.pid, self._state_of(conn, state.subscriber.namespace, state), conn.now())

    def _subscribed(self, state: _Joined, channel_id: str) -> None:
        if state.subscriber.last_sent is not None:
            note_start(self.fanout, state.subscriber.last_sent, channel_id)

    # ------------------------------------------------------------------ connect

    async def _connect(self, conn: Connection, request: ConnectRequest) -> None:
        session = conn.socketio
        namespace = request.namespace
        token = request.auth.get("token")
        if token is None or token == "":
            token = conn.query.get("token") or None
        user: User | None = None
        client_id: str | None = None
        session_id: str | None = None
        if token is not None:
            try:
                with trio.fail_after(REQUEST_TIMEOUT_SECONDS):
                    user, principal = await self._user_of_token(token)
                    client_id, session_id = principal.client_id, principal.session_id
            except ApiError as exc:
                session.reject_connect(namespace, exc.message, {"code": exc.code, "message": exc.message})
                return
            except Exception:
                log.exception("authenticating a Socket.IO connection failed")
                session.reject_connect(
                    namespace, "authentication is unavailable, try again", {"code": "service_unavailable"}
                )
                return
        wants_recovery = self.recovery.enabled and request.auth.get("recovery") is True
        lost = await self._take(conn, request, user) if wants_recovery else None
        # This process must hear the channels (and hold their recent events) first: with a
        # broker with per-channel interest it may not follow them yet.
        following = [user.id] if user is not None else []
        if lost is not None:
            following += [channel_id for channel_id in lost.channels if channel_id not in following]
        if following:
            await self._rt.bus.prepare(following)
        # No await from here on: the connect ack, then `connected`, then events; a recovered
        # connection's missed events are read in the same step as it subscribes again, so
        # each event is either replayed or delivered live, exactly once.
        restored = self._restore(lost, request.auth["pid"], request.auth["offset"]) if lost is not None else None
        pid = restored.pid if restored else (new_sid() if wants_recovery else None)
        sid = session.accept_connect(namespace, restored.lost.sid if restored else None, pid)
        if sid is None:
            return  # the client left while we were checking
        subscriber = SocketSubscriber(conn, namespace, self._rt.settings.events.queue_size, offsets=pid is not None)
        registered = self.connections.add(subscriber, user.id if user else None, client_id, session_id)
        state = _Joined(subscriber, user, registered, pid, client_id, sid=sid)
        conn.app = conn.app or {}
        conn.app[namespace] = state
        session.emit(
            namespace,
            "connected",
            {
                "channelUsername": user.username if user else None,
                "channelId": user.id if user else None,
                "authenticated": user is not None,
                "autoSubscribed": user is not None,
            },
        )
        if restored is not None:
            self._resubscribe(state, restored)
        elif user is not None:
            self._subscribed(state, user.id)
            state.channels[user.id] = self.fanout.subscribe(subscriber, user.id, owner=True, user_id=user.id)
        self._track(conn, state)
        self.connections.end_if_closing(subscriber)  # joined while the server shuts down

    async def _take(self, conn: Connection, request: ConnectRequest, user: User | None) -> Lost | None:
        """The state a reconnecting client names with {pid, offset}, taken from the store
        (once; kept for this user and namespace only); None when there is none."""
        pid, offset = request.auth.get("pid"), request.auth.get("offset")
        if not isinstance(pid, str) or not isinstance(offset, str) or len(pid) > 64:
            return None
        try:
            with trio.fail_after(REQUEST_TIMEOUT_SECONDS):
                return await self.recovery.take(pid, user.id if user else None, request.namespace, conn.now())
        except (Exception, trio.TooSlowError):
            log.warning("recovery: the store did not answer; the client starts afresh", exc_info=True)
            return None

    def _restore(self, lost: Lost, pid: str, offset: str) -> _Restored | None:
        found = missed_events(self.fanout, lost, offset)
        return None if found is None else _Restored(pid, lost, found)

    def _resubscribe(self, state: _Joined, restored: _Restored) -> None:
        subscriber = state.subscriber
        user_id = state.user.id if state.user else None
        encode = socket_encoder(subscriber.namespace, offsets=True)
        if subscriber.last_sent is not None:
            subscriber.last_sent.update(restored.lost.last_sent)
        for channel_id, owner in restored.lost.channels.items():
            self._subscribed(state, channel_id)
            subscription = self.fanout.subscribe(subscriber, channel_id, owner=owner, user_id=user_id)
            state.channels[channel_id] = subscription
            for event in restored.missed.get(channel_id, ()):
                if subscription.wants(event) and not subscriber.deliver(encode(event)):
                    subscriber.overflow("slow consumer: too many missed events to replay")
                    return

    async def _user_of_token(self, token: Any) -> tuple[User, Principal]:
        """The token's user, and who the token speaks for (its OAuth app or session)."""
        if not isinstance(token, str):
            raise ApiError(401, "invalid_token", "auth.token must be a string")
        principal: Principal = await authenticate(token, self._rt)
        user_id = principal.user_id
        user = await self._users.get(user_id, lambda: self._rt.services.users.by_id(user_id))
        if user is None:
            self._users.forget(user_id)
            raise ApiError(401, "invalid_token", "the token's user no longer exists")
        return user, principal

    # ------------------------------------------------------------------ client requests

    async def _client_event(self, conn: Connection, event: EventReceived) -> None:
        state: _Joined | None = (conn.app or {}).get(event.namespace)
        if state is None:
            return
        handler = self._requests.get(event.name)
        if handler is None:
            self._error(conn, event, UNKNOWN_EVENT, f"unknown event {event.name!r}")
            return
        argument = event.args[0] if event.args else None
        await handler(self, conn, state, event, argument)

    async def _get_rewards(self, conn: Connection, state: _Joined, event: EventReceived, argument: Any) -> None:
        channel_id = argument.get("channelId") if isinstance(argument, dict) else None
        rewards: list[dict[str, Any]] = []
        if isinstance(channel_id, str) and channel_id:
            try:
                with trio.fail_after(REQUEST_TIMEOUT_SECONDS):
                    rewards = await self._rewards(channel_id)
            except (Exception, trio.TooSlowError):
                log.warning("channel-points lookup failed", exc_info=True)
                self._error(conn, event, SERVICE_UNAVAILABLE, "the channel-points service is unavailable")
                return
        self._reply(conn, event, "channel:rewards", {"rewards": rewards})

    async def _rewards(self, channel_id: str) -> list[dict[str, Any]]:
        try:
            channel_id = uuid_param(channel_id, "channelId")
        except ApiError:
            return []  # not a channel id: no channel has rewards under it
        service: ChannelPoints = self._rt.services.channel_points
        if await self._rt.services.users.by_id(channel_id) is None:
            return []
        return [socket_shape(reward) for reward in await service.rewards(channel_id)]

    async def _subscribe(self, conn: Connection, state: _Joined, event: EventReceived, argument: Any) -> None:
        if not self._may_subscribe(state):
            EVENTS_SUBSCRIBE_REFUSED.inc()
            self._error(conn, event, LIMIT_EXCEEDED, "too many subscribe requests on this connection; slow down")
            return
        try:
            with trio.fail_after(REQUEST_TIMEOUT_SECONDS):
                channel = await self._channel(argument)
        except ApiError as exc:
            self._error(conn, event, exc.code, exc.message)
            return
        except (Exception, trio.TooSlowError):
            log.warning("channel lookup failed", exc_info=True)
            self._error(conn, event, SERVICE_UNAVAILABLE, "channel lookup is unavailable")
            return
        if channel.id not in state.channels:
            await self._rt.bus.prepare([channel.id])
            others = len(state.channels) - (1 if state.user is not None and state.user.id in state.channels else 0)
            if others >= self._rt.settings.events.max_subscriptions:
                self._error(conn, event, LIMIT_EXCEEDED, "too many channel subscriptions on this connection")
                return
            if conn.session.closed:
                return
            owner = state.user is not None and state.user.id == channel.id
            self._subscribed(state, channel.id)
            state.channels[channel.id] = self.fanout.subscribe(
                state.subscriber, channel.id, owner=owner, user_id=state.user.id if state.user else None
            )
            self._track(conn, state)
        self._reply(conn, event, "subscribed", {"channelId": channel.id, "channelUsername": channel.username})

    def _may_subscribe(self, state: _Joined) -> bool:
        """Spend one of the connection's `subscribe` attempts: each costs a lookup, so one
        connection must not send them without end."""
        rate = Rate.per(self._rt.settings.events.subscribe_attempts_per_minute, 60)
        decision, state.subscribe_budget = decide(rate, state.subscribe_budget, to_ns(self._rt.clock.now()))
        return decision.allowed

    async def _unsubscribe(self, conn: Connection, state: _Joined, event: EventReceived, argument: Any) -> None:
        channel_id = argument.get("channelId") if isinstance(argument, dict) else None
        if not isinstance(channel_id, str) or not channel_id:
            self._error(conn, event, INVALID_REQUEST, "unsubscribe needs {channelId}")
            return
        subscription = state.channels.pop(channel_id, None)
        if subscription is not None:
            self.fanout.unsubscribe(subscription)
            if state.subscriber.last_sent is not None:
                state.subscriber.last_sent.pop(channel_id, None)
            self._track(conn, state)
        self._reply(conn, event, "unsubscribed", {"channelId": channel_id})

    async def _channel(self, argument: Any) -> User:
        if not isinstance(argument, dict):
            raise ApiError(400, INVALID_REQUEST, "subscribe needs {channelId} or {channel: username}")
        channel_id, username = argument.get("channelId"), argument.get("channel")
        if isinstance(channel_id, str) and channel_id:
            try:
                channel_id = uuid_param(channel_id, "channelId")
            except ApiError:
                raise ApiError(400, INVALID_REQUEST, "channelId must be a UUID") from None
            found = await self._rt.services.users.by_id(channel_id)
        elif isinstance(username, str) and 0 < len(username) <= 64:
            found = await self._rt.services.users.by_username_any_case(username)
        else:
            raise ApiError(400, INVALID_REQUEST, "subscribe needs {channelId} or {channel: username}")
        if found is None:
            raise ApiError(404, NOT_FOUND, "no such channel")
        return found

    _requests: dict[str, Callable[..., Awaitable[None]]] = {
        "channel:getRewards": _get_rewards,
        "subscribe": _subscribe,
        "unsubscribe": _unsubscribe,
    }

    # ------------------------------------------------------------------ replies

    def _reply(self, conn: Connection, event: EventReceived, name: str, payload: dict[str, Any]) -> None:
        session = conn.socketio
        session.emit(event.namespace, name, payload)
        if event.ack_id is not None:
            session.ack(event.namespace, event.ack_id, [payload])

    def _error(self, conn: Connection, event: EventReceived, code: str, message: str) -> None:
        self._reply(conn, event, "error", {"code": code, "message": message, "event": event.name})


# ---------------------------------------------------------------------- wiring


def protocol_settings(rt: Runtime) -> Settings:
    events = rt.settings.events
    return Settings(
        ping_interval_ms=events.ping_interval_ms,
        ping_timeout_ms=events.ping_timeout_ms,
        max_payload=events.max_payload,
        connect_timeout_ms=events.connect_timeout_ms,
        upgrade_timeout_ms=events.upgrade_timeout_ms,
    )


async def install(rt: Runtime) -> None:
    """Start-up hook: the fan-out on the bus, and presence."""
    events = rt.settings.events
    fanout = Fanout(
        resume_size=events.resume_buffer_size, resume_channels=events.resume_channels, interest=rt.bus.channel_interest
    )
    for namespace in ("/", SPEC_NAMESPACE):
        for offsets in (False, True):
            fanout.register_wire(socket_wire(namespace, offsets), socket_encoder(namespace, offsets))
    for form, encoder in SSE_ENCODERS.items():
        fanout.register_wire(sse_wire(form), encoder)
    rt.services.fanout = fanout
    rt.recovery = rt.bus.recovery_store(events.recovery_window_seconds)
    rt.bus.subscribe(fanout.publish)
    connections = rt.services.connections = ConnectionRegistry(interest=rt.bus.member_interest)
    rt.bus.subscribe(connections.on_event)
    # A shutdown ends every Events API connection through the registry: its namespaces and
    # streams, then the sessions of both paths that never joined one.
    for endpoint in rt.engineio_endpoints.values():
        connections.hold_sessions(endpoint)
    if rt.gateway is not None:
        connections.hold_sessions(rt.gateway)
    if rt.gateway is not None:
        host, port = rt.gateway.bind()  # here, so a taken port fails the start
        log.debug("Events API gateway listening on %s:%d", host, port)


def _admission(rt: Runtime) -> Callable[[Scope], Refusal | None]:
    """New Engine.IO sessions count against the global per-IP budget, as any request does."""

    def admit(scope: Scope) -> Refusal | None:
        limits = rt.rate_limits
        if limits is None:
            return None
        ip = ratelimit.client_ip((scope.get("client") or (None,))[0])
        decision = limits.per_ip.hit(("ip", ip), to_ns(rt.clock.now()))
        if decision.allowed:
            return None
        error = ratelimit.too_many_requests(decision, "global")
        return Refusal(error.status, error.body(), error.headers)

    return admit


def mount(app: Quart) -> None:
    """Serve both Engine.IO paths ahead of Quart (ASGI level), and run their sessions."""
    rt: Runtime = app.extensions["volthub"]
    handler = EventsSocketHandler(app, rt)
    settings = protocol_settings(rt)
    cors, admission = events_policy(rt.settings), _admission(rt)
    endpoints = {
        path: EngineIOEndpoint(settings, handler, namespaces=namespaces, cors=cors, admission=admission)
        for path, namespaces in ((ENGINEIO_PATH, {"/"}), (DEFAULT_PATH, {SPEC_NAMESPACE, "/"}))
    }
    rt.engineio_endpoints = endpoints
    rt.gateway = _gateway(rt, handler, settings, admission) if rt.settings.events.gateway_port else None
    gateway_endpoints = rt.gateway.endpoints if rt.gateway is not None else {}
    for listener, found in (("mount", endpoints), ("gateway", gateway_endpoints)):
        for path, endpoint in found.items():
            observe.FIXED_ROUTES[path] = path + "/"
            endpoint.describe(path + "/", listener, access_log=rt.settings.logging.access_log)
    inner = app.asgi_app

    # Quart types its ASGI callable with Hypercorn's TypedDict scopes; this layer passes the
    # plain dicts of ASGI through unchanged, hence the two targeted ignores.
    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            path = scope.get("path", "")
            endpoint = endpoints.get(path[:-1] if path.endswith("/") else path)
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await inner(scope, receive, send)  # type: ignore[arg-type]

    app.asgi_app = asgi  # type: ignore[method-assign, assignment]


def _gateway(
    rt: Runtime, handler: EventsSocketHandler, settings: Settings, admission: Callable[[Scope], Refusal | None]
) -> Gateway:
    """The same two paths, application and admission on the gateway's own port."""
    server, events = rt.settings.server, rt.settings.events
    gateway = Gateway(
        events.gateway_host or server.host,
        events.gateway_port,
        keep_alive_timeout=server.keep_alive_timeout,
        body_timeout=server.body_timeout,
        access_log=rt.settings.logging.access_log,
        backlog=server.listen_backlog,
        admit=LIMITS.admit,  # the same connection caps as the main port (one count per process)
        release=LIMITS.release,
        claim_client=claim_client,  # behind a trusted proxy: the forwarded client, capped per request
        refusal=OVER_CAPACITY_RESPONSE,
        reuse_port=events.gateway_reuse_port,
        max_message_frames=events.max_message_frames,
    )
    for path, namespaces in ((ENGINEIO_PATH, {"/"}), (DEFAULT_PATH, {SPEC_NAMESPACE, "/"})):
        gateway.add_endpoint(
            path, settings, handler, namespaces=namespaces, cors=events_policy(rt.settings), admission=admission
        )
    return gateway


async def recovery_service(rt: Runtime) -> None:
    """Write dropped connections' states where every process finds them (shared stores)."""
    if rt.recovery is None:
        await trio.sleep_forever()
        return
    await rt.recovery.run()


async def gateway_service(rt: Runtime) -> None:
    """Serve the gateway (when `[events] gateway_port` is set) for the app's lifetime."""
    if rt.gateway is None:
        await trio.sleep_forever()
        return
    # Bound at start-up, so connections arriving meanwhile wait in its backlog; served only
    # once the app is ready: a client reconnecting before the relay has read the event log's
    # tail would find its channel's resume buffer empty and not be recovered.
    await rt.ready.wait()
    await rt.gateway.run()


async def service(rt: Runtime) -> None:
    """Run the Engine.IO endpoints' session drivers for the app's lifetime."""
    endpoints = rt.engineio_endpoints
    async with trio.open_nursery() as own:
        for endpoint in endpoints.values():
            await own.start(_supervised, endpoint)


async def _supervised(
    endpoint: EngineIOEndpoint, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    await endpoint.run(task_status=task_status)
