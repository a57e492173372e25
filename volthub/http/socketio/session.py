"""Per-connection protocol state machines (sans-IO): Engine.IO session, Socket.IO on top.

Nothing here touches a socket or reads a clock. The adapter feeds what arrives
(``receive_payload`` for a polling POST body, ``receive_frame`` for a WebSocket message,
``on_timer`` when ``next_deadline()`` passes) together with ``now`` in seconds, gets back
a list of events, and moves the session's output to the wire: ``poll_take()`` answers a
pending polling GET once ``poll_ready``; ``take_outgoing()`` returns the WebSocket frames.

Input that breaks the protocol raises :class:`~.engineio.EngineIOProtocolError` or
:class:`~.socketio.SocketIOProtocolError` (both :class:`~.engineio.ProtocolError`) after the
session has closed itself; ``exc.events`` holds the closing events to dispatch and
``exc.http_status`` the status for a polling POST. Refusing a single request without
harming the session returns a :class:`~.handshake.HttpError` instead.
"""

from __future__ import annotations

import secrets
from collections.abc import Container, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from .engineio import (
    CLOSE,
    NOOP,
    PING,
    PONG_PROBE,
    SEPARATOR,
    EngineIOProtocolError,
    Frame,
    Packet,
    PacketType,
    ProtocolError,
    decode_packet,
    decode_payload,
    encode_open,
    encode_payload,
    message_frame,
)
from .handshake import POLLING, TRANSPORTS, WEBSOCKET, ErrorCode, HttpError, http_error
from .socketio import Packet as SioPacket
from .socketio import PacketType as SioType
from .socketio import RESERVED_EVENTS, SocketIOProtocolError, decode_packet as sio_decode
from .socketio import encode_frame as sio_frame

# Close reasons, as the reference server names them where it has a name.
CLOSE_FORCED: Final = "forced close"  # the server closed the session
CLOSE_TRANSPORT: Final = "transport close"  # the client sent CLOSE, or its WebSocket went away
CLOSE_TRANSPORT_ERROR: Final = "transport error"  # overlapping or aborted polling requests
CLOSE_PARSE_ERROR: Final = "parse error"
CLOSE_PAYLOAD_TOO_LARGE: Final = "payload too large"
CLOSE_PING_TIMEOUT: Final = "ping timeout"
CLOSE_CONNECT_TIMEOUT: Final = "connect timeout"  # no namespace joined within connectTimeout
DISCONNECT_CLIENT: Final = "client namespace disconnect"

# Namespaces one connection may join or ask for at once; bounds per-connection state.
MAX_NAMESPACES: Final = 32

# A probe frame is "2probe" or "5"; anything much longer is not one.
_MAX_PROBE_FRAME: Final = 16


@dataclass(frozen=True, slots=True)
class Settings:
    """Protocol settings; milliseconds, as they travel in the OPEN packet."""

    ping_interval_ms: int = 25_000
    ping_timeout_ms: int = 20_000
    max_payload: int = 1_000_000  # bytes per polling POST body or WebSocket message
    connect_timeout_ms: int = 45_000
    upgrade_timeout_ms: int = 10_000
    transports: tuple[str, ...] = TRANSPORTS

    def __post_init__(self) -> None:
        for name in ("ping_interval_ms", "ping_timeout_ms", "max_payload",
                     "connect_timeout_ms", "upgrade_timeout_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.transports or any(t not in TRANSPORTS for t in self.transports):
            raise ValueError(f"transports must be a non-empty subset of {TRANSPORTS}")


def new_sid() -> str:
    """A random session or socket id: 20 URL-safe characters, like the reference server's."""
    return secrets.token_urlsafe(15)


# ----------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class MessageReceived:
    """An Engine.IO MESSAGE from the client (Engine.IO layer only)."""

    data: str | bytes


@dataclass(frozen=True, slots=True)
class SessionClosed:
    """The session is over; always the last event. Drop it once ``finished``."""

    reason: str


@dataclass(frozen=True, slots=True)
class UpgradeCancelled:
    """The probing WebSocket did not upgrade in time: close it; polling carries on."""

    reason: str


@dataclass(frozen=True, slots=True)
class ConnectRequest:
    """The client asks to join ``namespace``: answer with accept_connect/reject_connect."""

    namespace: str
    auth: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventReceived:
    namespace: str
    name: str
    args: list[Any]
    ack_id: int | None  # when set, answer with ack(namespace, ack_id, ...)


@dataclass(frozen=True, slots=True)
class AckReceived:
    """The client acknowledged an emit(..., ack_id=...) of ours."""

    namespace: str
    ack_id: int
    args: list[Any]


@dataclass(frozen=True, slots=True)
class Disconnected:
    """``namespace`` is no longer joined (client DISCONNECT, or the session closed)."""

    namespace: str
    reason: str


Event = (
    MessageReceived | SessionClosed | UpgradeCancelled
    | ConnectRequest | EventReceived | AckReceived | Disconnected
)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What to do with the probing WebSocket after one of its frames."""

    reply: tuple[str, ...] = ()  # send these frames on the probing WebSocket
    upgraded: bool = False  # it is now the session's transport: send take_outgoing() on it
    rejected: bool = False  # close it; the session carries on over polling


_PROBE_REJECTED: Final = ProbeResult(rejected=True)
_PROBE_ANSWERED: Final = ProbeResult(reply=(PONG_PROBE,))
_PROBE_UPGRADED: Final = ProbeResult(upgraded=True)

# Upgrade progress.
_NO_PROBE, _PROBING, _PROBED = 0, 1, 2


# ---------------------------------------------------------------------- Engine.IO layer


class EngineIOSession:
    """One Engine.IO session: transports, heartbeat, upgrade, close, output buffering.

    Output is buffered as frames in one outbox whatever the transport, so nothing is lost
    across an upgrade: a polling GET drains it as one payload, the WebSocket frame by frame.
    """

    __slots__ = (
        "sid", "settings", "transport", "close_reason",
        "_closed", "_outbox", "_poll_pending", "_post_active",
        "_probe", "_probe_deadline", "_next_ping_at", "_pong_deadline", "_linger_deadline",
    )

    def __init__(self, sid: str, settings: Settings, transport: str, now: float) -> None:
        if transport not in settings.transports:
            raise ValueError(f"transport {transport!r} is not enabled")
        self.sid = sid
        self.settings = settings
        self.transport = transport
        self.close_reason: str | None = None
        self._closed = False
        upgrades = [WEBSOCKET] if transport == POLLING and WEBSOCKET in settings.transports else []
        self._outbox: list[Frame] = [
            encode_open(sid, upgrades, settings.ping_interval_ms, settings.ping_timeout_ms,
                        settings.max_payload)
        ]
        self._poll_pending = False
        self._post_active = False
        self._probe = _NO_PROBE
        self._probe_deadline: float | None = None
        # v4 heartbeat: the server pings every pingInterval; the pong is due pingTimeout later.
        self._next_ping_at: float | None = now + settings.ping_interval_ms / 1000
        self._pong_deadline: float | None = None
        self._linger_deadline: float | None = None

    # ------------------------------------------------------------------ state

    @property
    def closed(self) -> bool:
        """No more input is accepted; output may still be waiting (see ``finished``)."""
        return self._closed

    @property
    def finished(self) -> bool:
        """Closed with nothing left to deliver: forget the session, close its transport."""
        return self._closed and not self._outbox and not self._poll_pending

    @property
    def buffered(self) -> int:
        """Frames waiting for the transport (an adapter bounds this per subscriber)."""
        return len(self._outbox)

    @property
    def upgrading(self) -> bool:
        return self._probe != _NO_PROBE

    @property
    def poll_ready(self) -> bool:
        """A pending polling GET can be answered now with ``poll_take()``."""
        return self._poll_pending and (
            bool(self._outbox) or self.transport == WEBSOCKET or self._probe == _PROBED
        )

    def next_deadline(self) -> float | None:
        """When ``on_timer`` must next be called, or None when no timer is running."""
        if self._closed:
            return self._linger_deadline
        candidates = [t for t in (self._next_ping_at, self._pong_deadline, self._probe_deadline)
                      if t is not None]
        return min(candidates) if candidates else None

    def on_timer(self, now: float) -> list[Event]:
        """Run whatever timers are due: send a ping, time out a pong or an upgrade."""
        if self._closed:
            if self._linger_deadline is not None and now >= self._linger_deadline:
                # Nobody came to collect the last frames of a closed polling session.
                self._outbox.clear()
                self._linger_deadline = None
            return []
        events: list[Event] = []
        if self._probe_deadline is not None and now >= self._probe_deadline:
            self._probe, self._probe_deadline = _NO_PROBE, None
            events.append(UpgradeCancelled("upgrade timeout"))
        if self._pong_deadline is not None and now >= self._pong_deadline:
            events.extend(self._shutdown(CLOSE_PING_TIMEOUT, now, flush=False, final=CLOSE))
        elif self._next_ping_at is not None and now >= self._next_ping_at:
            self._outbox.append(PING)
            self._next_ping_at = None
            # Counted from when the ping actually left, so a late tick is not held against the client.
            self._pong_deadline = now + self.settings.ping_timeout_ms / 1000
        return events

    # ------------------------------------------------------------------ output

    def send_frame(self, frame: Frame) -> bool:
        """Queue an already encoded frame (e.g. from ``encode_event_frame``); False if closed.

        This is the fan-out path: the same frame object goes to every subscriber.
        """
        if self._closed:
            return False
        self._outbox.append(frame)
        return True

    def send_message(self, data: str | bytes) -> bool:
        """Queue an Engine.IO MESSAGE; False if the session is closed."""
        if isinstance(data, str) and SEPARATOR in data:
            raise ValueError("a text message must not contain the payload separator \\x1e")
        return self.send_frame(message_frame(data))

    def take_outgoing(self) -> list[Frame]:
        """The frames to send, in order, on the session's WebSocket (empty while polling)."""
        if self.transport != WEBSOCKET or not self._outbox:
            return []
        frames, self._outbox = self._outbox, []
        return frames

    def close(self, now: float, reason: str = CLOSE_FORCED) -> list[Event]:
        """Close from the server side; frames already queued are still delivered."""
        return self._shutdown(reason, now, flush=True, final=CLOSE)

    # ------------------------------------------------------------------ polling

    def poll_begin(self, now: float) -> HttpError | None:
        """A polling GET arrived; on None it is pending until ``poll_ready``.

        A second GET while one is pending breaks the protocol: the session closes (the
        pending GET gets a CLOSE packet) and EngineIOProtocolError is raised (answer 400).
        """
        if self._closed:
            if self.transport == POLLING and self._outbox and not self._poll_pending:
                self._poll_pending = True  # collects the last frames of a closed session
                self._linger_deadline = None
                return None
            return http_error(ErrorCode.UNKNOWN_SID)
        if self.transport == WEBSOCKET:
            return http_error(ErrorCode.BAD_REQUEST)  # upgraded: polling is over, session is not
        if self._poll_pending:
            raise self._fail(EngineIOProtocolError("overlapping polling GET requests"),
                             now, CLOSE_TRANSPORT_ERROR)
        self._poll_pending = True
        return None

    def poll_take(self) -> str:
        """The body answering the pending GET; it is no longer pending afterwards.

        Calling it before ``poll_ready`` ends the GET with a NOOP, which clients accept.
        """
        self._poll_pending = False
        if self.transport == POLLING and self._outbox:
            body = encode_payload(self._outbox)
            self._outbox = []
            return body
        # Upgraded or probing: a NOOP releases the GET so the client can pause polling.
        return NOOP

    def poll_abort(self, now: float) -> list[Event]:
        """The client dropped the pending GET before it was answered."""
        if not self._poll_pending:
            return []
        self._poll_pending = False
        if self._closed:
            self._outbox.clear()  # that GET was the one to collect the last frames
            return []
        if self._probe != _NO_PROBE or self.transport == WEBSOCKET:
            return []  # nothing lost: the client is moving to WebSocket
        return self._shutdown(CLOSE_TRANSPORT_ERROR, now, flush=False, final=CLOSE)

    def post_begin(self, now: float) -> HttpError | None:
        """A polling POST arrived; read its body (at most max_payload + 1 bytes) next.

        A second POST while one is being read breaks the protocol (raises, answer 400).
        """
        if self._closed:
            return http_error(ErrorCode.UNKNOWN_SID)
        if self.transport == WEBSOCKET:
            return http_error(ErrorCode.BAD_REQUEST)
        if self._post_active:
            raise self._fail(EngineIOProtocolError("overlapping polling POST requests"),
                             now, CLOSE_TRANSPORT_ERROR)
        self._post_active = True
        return None

    def post_abort(self, now: float) -> list[Event]:
        """The POST body could not be read (the client went away)."""
        self._post_active = False
        if self._closed:
            return []
        return self._shutdown(CLOSE_TRANSPORT_ERROR, now, flush=False, final=CLOSE)

    def receive_payload(self, body: str | bytes, now: float) -> list[Event]:
        """The body of a polling POST; answer ``ok`` on return, ``exc.http_status`` on raise.

        The payload is decoded whole before anything is applied, so a malformed record
        applies none of the records before it.
        """
        self._post_active = False
        if self._closed:
            return []
        try:
            self._check_size(body)
            events: list[Event] = []
            for packet in decode_payload(body):
                if not self._handle(packet, now, events):
                    break
            return events
        except ProtocolError as exc:
            raise self._fail(exc, now, _reason_for(exc)) from None

    # ------------------------------------------------------------------ websocket

    def receive_frame(self, frame: Frame, now: float) -> list[Event]:
        """One message of the session's WebSocket (after a WebSocket open or an upgrade)."""
        if self._closed:
            return []
        if self.transport != WEBSOCKET:
            raise RuntimeError("receive_frame on a polling session; use receive_probe_frame")
        try:
            self._check_size(frame)
            events: list[Event] = []
            self._handle(decode_packet(frame), now, events)
            return events
        except ProtocolError as exc:
            raise self._fail(exc, now, _reason_for(exc)) from None

    def transport_closed(self, now: float) -> list[Event]:
        """The session's WebSocket closed under us."""
        if self._closed:
            return []
        return self._shutdown(CLOSE_TRANSPORT, now, flush=False, final=CLOSE)

    # ------------------------------------------------------------------ upgrade

    def upgrade_begin(self, now: float) -> HttpError | None:
        """A WebSocket arrived for this polling session; on None, feed its frames to
        ``receive_probe_frame``. A second WebSocket, or one after the upgrade, is refused."""
        if self._closed:
            return http_error(ErrorCode.UNKNOWN_SID)
        if self.transport == WEBSOCKET or self._probe != _NO_PROBE:
            return http_error(ErrorCode.BAD_REQUEST)
        self._probe = _PROBING
        self._probe_deadline = now + self.settings.upgrade_timeout_ms / 1000
        return None

    def receive_probe_frame(self, frame: Frame, now: float) -> ProbeResult:
        """One message of the probing WebSocket: ``2probe`` → ``3probe``, then ``5``."""
        if self._closed or self._probe == _NO_PROBE:
            return _PROBE_REJECTED
        if len(frame) > _MAX_PROBE_FRAME:
            return self._cancel_probe()
        try:
            packet = decode_packet(frame)
        except EngineIOProtocolError:
            return self._cancel_probe()
        if self._probe == _PROBING and packet.type is PacketType.PING and packet.data == "probe":
            # From now on a pending GET is released with a NOOP, as the protocol asks.
            self._probe = _PROBED
            return _PROBE_ANSWERED
        if self._probe == _PROBED and packet.type is PacketType.UPGRADE:
            self._probe, self._probe_deadline = _NO_PROBE, None
            self.transport = WEBSOCKET
            return _PROBE_UPGRADED
        return self._cancel_probe()

    def upgrade_abort(self, now: float) -> None:
        """The probing WebSocket closed before the upgrade completed; polling carries on."""
        if self._probe != _NO_PROBE:
            self._probe, self._probe_deadline = _NO_PROBE, None

    # ------------------------------------------------------------------ internals

    def _cancel_probe(self) -> ProbeResult:
        self._probe, self._probe_deadline = _NO_PROBE, None
        return _PROBE_REJECTED

    def _check_size(self, data: str | bytes) -> None:
        limit = self.settings.max_payload
        if isinstance(data, str):
            # A character is 1 to 4 bytes: only encode when the bounds cannot decide.
            too_big = len(data) > limit or (
                len(data) * 4 > limit and len(data.encode("utf-8", "surrogatepass")) > limit
            )
        elif isinstance(data, (bytes, bytearray, memoryview)):
            too_big = len(data) > limit
        else:
            raise EngineIOProtocolError("data must be str or bytes")
        if too_big:
            raise EngineIOProtocolError("payload exceeds maxPayload", http_status=413)

    def _handle(self, packet: Packet, now: float, events: list[Event]) -> bool:
        """Apply one client packet; False when it ended the session."""
        kind = packet.type
        if kind is PacketType.MESSAGE:
            events.extend(self._on_message(packet.data, now))
        elif kind is PacketType.PONG:
            if self._pong_deadline is not None:  # a pong nobody asked for changes nothing
                self._pong_deadline = None
                self._next_ping_at = now + self.settings.ping_interval_ms / 1000
        elif kind is PacketType.CLOSE:
            # The client is leaving: a pending GET is released with a NOOP.
            events.extend(self._shutdown(CLOSE_TRANSPORT, now, flush=False, final=NOOP))
            return False
        elif kind is not PacketType.NOOP:
            # OPEN, UPGRADE outside a probe, and PING: in v4 only the server pings.
            raise EngineIOProtocolError(f"unexpected {kind.name} packet from the client")
        return True

    def _on_message(self, data: str | bytes, now: float) -> list[Event]:
        """Turn a client MESSAGE into events; the Socket.IO layer overrides this."""
        return [MessageReceived(data)]

    def _closing_events(self, reason: str) -> list[Event]:
        """The events announcing the end of the session; the Socket.IO layer adds its own."""
        return [SessionClosed(reason)]

    def _fail(self, exc: ProtocolError, now: float, reason: str) -> ProtocolError:
        exc.events = self._shutdown(reason, now, flush=False, final=CLOSE)
        return exc

    def _shutdown(self, reason: str, now: float, *, flush: bool, final: str) -> list[Event]:
        """Close the session once. ``flush`` keeps queued frames (a graceful server close);
        ``final`` is the frame that ends a polling client's view of the session (CLOSE, or
        NOOP when the client itself closed): a pending GET always gets it, so none hangs."""
        if self._closed:
            return []
        self._closed = True
        self.close_reason = reason
        self._probe, self._probe_deadline = _NO_PROBE, None
        self._next_ping_at = self._pong_deadline = None
        self._post_active = False
        if not flush:
            self._outbox.clear()
        if self.transport == POLLING and (flush or self._poll_pending):
            self._outbox.append(final)
            if not self._poll_pending:
                # Wait a heartbeat's worth for the client's next GET to collect it.
                self._linger_deadline = now + self.settings.ping_timeout_ms / 1000
        return self._closing_events(reason)


def _reason_for(exc: ProtocolError) -> str:
    return CLOSE_PAYLOAD_TOO_LARGE if exc.http_status == 413 else CLOSE_PARSE_ERROR


# ---------------------------------------------------------------------- Socket.IO layer


class SocketIOSession(EngineIOSession):
    """An Engine.IO session carrying Socket.IO: namespaces, events, acks, connect timeout.

    ``namespaces`` (when given) are the namespaces this endpoint serves; a CONNECT to any
    other is refused with CONNECT_ERROR "Invalid namespace" without bothering the app.
    """

    __slots__ = ("_allowed", "_joined", "_pending", "_left", "_awaited_acks", "_connect_deadline")

    def __init__(
        self,
        sid: str,
        settings: Settings,
        transport: str,
        now: float,
        *,
        namespaces: Container[str] | None = None,
    ) -> None:
        super().__init__(sid, settings, transport, now)
        self._allowed = namespaces
        self._joined: dict[str, str] = {}  # namespace → the socket id we gave it
        self._pending: set[str] = set()  # CONNECT received, app has not answered yet
        # Namespaces we disconnected or refused: the client may have sent packets for them
        # before it heard, so those are dropped rather than treated as protocol errors.
        self._left: set[str] = set()
        self._awaited_acks: set[tuple[str, int]] = set()
        self._connect_deadline: float | None = now + settings.connect_timeout_ms / 1000

    @property
    def namespaces(self) -> Mapping[str, str]:
        """Joined namespaces and the socket id each was given."""
        return MappingProxyType(self._joined)

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        deadline = super().next_deadline()
        if self._closed or self._connect_deadline is None:
            return deadline
        return self._connect_deadline if deadline is None else min(deadline, self._connect_deadline)

    def on_timer(self, now: float) -> list[Event]:
        events = super().on_timer(now)
        if not self._closed and self._connect_deadline is not None and now >= self._connect_deadline:
            self._connect_deadline = None
            if not self._joined:
                events.extend(self._shutdown(CLOSE_CONNECT_TIMEOUT, now, flush=False, final=CLOSE))
        return events

    # ------------------------------------------------------------------ output

    def accept_connect(self, namespace: str, sid: str | None = None) -> str | None:
        """Answer a ConnectRequest with CONNECT {sid}; returns the socket id, or None when
        there is no such request any more (the client left or the session closed)."""
        if self._closed or namespace not in self._pending:
            return None
        self._pending.discard(namespace)
        socket_id = sid or new_sid()
        self._joined[namespace] = socket_id
        self._connect_deadline = None
        self.send_frame(sio_frame(SioPacket(SioType.CONNECT, namespace, {"sid": socket_id})))
        return socket_id

    def reject_connect(self, namespace: str, message: str, data: Any = None) -> bool:
        """Answer a ConnectRequest with CONNECT_ERROR {message, data?}."""
        if self._closed or namespace not in self._pending:
            return False
        self._pending.discard(namespace)
        self._remember_left(namespace)
        self._send_connect_error(namespace, message, data)
        return True

    def emit(self, namespace: str, name: str, *args: Any, ack_id: int | None = None) -> bool:
        """Send an EVENT; with ``ack_id``, the client's ACK comes back as AckReceived.

        For one event fanned out to many sockets, encode it once with
        ``encode_event_frame`` and queue that with ``send_frame`` instead.
        """
        if not isinstance(name, str) or name in RESERVED_EVENTS:
            raise ValueError(f"invalid event name {name!r}")
        if self._closed or namespace not in self._joined:
            return False
        self.send_frame(sio_frame(SioPacket(SioType.EVENT, namespace, [name, *args], ack_id)))
        if ack_id is not None:
            self._awaited_acks.add((namespace, ack_id))
        return True

    def ack(self, namespace: str, ack_id: int, args: list[Any] | tuple[Any, ...] = ()) -> bool:
        """Answer an EventReceived that carried ``ack_id``."""
        if self._closed or namespace not in self._joined:
            return False
        self.send_frame(sio_frame(SioPacket(SioType.ACK, namespace, list(args), ack_id)))
        return True

    def disconnect(self, namespace: str) -> bool:
        """Leave ``namespace`` (DISCONNECT); the session stays open for the others.

        The reference client does not reconnect a namespace the server disconnected; to let
        it reconnect (e.g. to another worker), ``close()`` the session instead.
        """
        if self._closed or namespace not in self._joined:
            return False
        self._leave(namespace)
        self._remember_left(namespace)
        self.send_frame(sio_frame(SioPacket(SioType.DISCONNECT, namespace)))
        return True

    # ------------------------------------------------------------------ input

    def _on_message(self, data: str | bytes, now: float) -> list[Event]:
        if not isinstance(data, str):
            raise SocketIOProtocolError("binary messages are not supported")
        return self._on_packet(sio_decode(data))

    def _on_packet(self, packet: SioPacket) -> list[Event]:
        """Apply one decoded Socket.IO packet (a binary one arrives here reassembled)."""
        namespace = packet.namespace
        kind = packet.type
        if kind is SioType.CONNECT:
            return self._on_connect(namespace, packet.data)
        if kind is SioType.CONNECT_ERROR:
            raise SocketIOProtocolError("CONNECT_ERROR is sent by servers only")
        if namespace not in self._joined:
            if namespace in self._left or (kind is SioType.DISCONNECT and namespace in self._pending):
                # Crossed our DISCONNECT/CONNECT_ERROR, or gave up waiting: nothing to do.
                self._pending.discard(namespace)
                return []
            # The protocol requires a CONNECT to a namespace before anything else in it.
            raise SocketIOProtocolError(f"{kind.name} for a namespace that is not connected")
        if kind is SioType.EVENT or kind is SioType.BINARY_EVENT:
            return [EventReceived(namespace, packet.data[0], packet.data[1:], packet.ack_id)]
        if kind is SioType.ACK or kind is SioType.BINARY_ACK:
            key = (namespace, packet.ack_id)
            if key not in self._awaited_acks:
                return []  # not asked for, or already answered: ignore, as the reference does
            self._awaited_acks.discard(key)
            return [AckReceived(namespace, packet.ack_id, packet.data)]
        self._leave(namespace)  # DISCONNECT
        return [Disconnected(namespace, DISCONNECT_CLIENT)]

    def _on_connect(self, namespace: str, auth: dict[str, Any] | None) -> list[Event]:
        if namespace in self._joined or namespace in self._pending:
            raise SocketIOProtocolError("CONNECT to a namespace already connected or connecting")
        if self._allowed is not None and namespace not in self._allowed:
            self._send_connect_error(namespace, "Invalid namespace", None)
            return []
        if len(self._joined) + len(self._pending) >= MAX_NAMESPACES:
            raise SocketIOProtocolError("too many namespaces on one connection")
        self._left.discard(namespace)
        self._pending.add(namespace)
        return [ConnectRequest(namespace, auth if auth is not None else {})]

    def _closing_events(self, reason: str) -> list[Event]:
        events: list[Event] = [Disconnected(namespace, reason) for namespace in self._joined]
        self._joined.clear()
        self._pending.clear()
        self._left.clear()
        self._awaited_acks.clear()
        self._connect_deadline = None
        events.append(SessionClosed(reason))
        return events

    # ------------------------------------------------------------------ internals

    def _send_connect_error(self, namespace: str, message: str, data: Any) -> None:
        payload: dict[str, Any] = {"message": message}
        if data is not None:
            payload["data"] = data
        self.send_frame(sio_frame(SioPacket(SioType.CONNECT_ERROR, namespace, payload)))

    def _leave(self, namespace: str) -> None:
        del self._joined[namespace]
        self._awaited_acks = {key for key in self._awaited_acks if key[0] != namespace}

    def _remember_left(self, namespace: str) -> None:
        if len(self._left) >= MAX_NAMESPACES:
            self._left.pop()  # bounded: forgetting one only makes a late packet an error
        self._left.add(namespace)
