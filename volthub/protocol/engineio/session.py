"""The Engine.IO session state machine (sans-IO): transports, heartbeat, upgrade.

Nothing here touches a socket or reads a clock. The adapter feeds what arrives
(``receive_payload`` for a polling POST body, ``receive_frame`` for a WebSocket message,
``on_timer`` when ``next_deadline()`` passes) together with ``now`` in seconds, gets back
a list of events, and moves the session's output to the wire: ``poll_take()`` answers a
pending polling GET once ``poll_ready``; ``take_outgoing()`` returns the WebSocket frames.

Input that breaks the protocol raises :class:`~.packets.EngineIOProtocolError` (a
:class:`~.packets.ProtocolError`) after the session has closed itself; ``exc.events`` holds
the closing events to dispatch and ``exc.http_status`` the status for a polling POST.
Refusing a single request without harming the session returns a
:class:`~.handshake.HttpError` instead. Socket.IO builds on this class in
:mod:`volthub.protocol.socketio.session`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Final

from volthub.protocol.engineio.events import SessionEvent
from volthub.protocol.engineio.handshake import POLLING, TRANSPORTS, WEBSOCKET, ErrorCode, HttpError, http_error
from volthub.protocol.engineio.packets import (
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

# Close reasons, as the reference server names them where it has a name.
CLOSE_FORCED: Final = "forced close"  # the server closed the session
CLOSE_TRANSPORT: Final = "transport close"  # the client sent CLOSE, or its WebSocket went away
CLOSE_TRANSPORT_ERROR: Final = "transport error"  # overlapping or aborted polling requests
CLOSE_PARSE_ERROR: Final = "parse error"
CLOSE_PAYLOAD_TOO_LARGE: Final = "payload too large"
CLOSE_PING_TIMEOUT: Final = "ping timeout"
CLOSE_CONNECT_TIMEOUT: Final = "connect timeout"  # no namespace joined within connectTimeout

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
        for name in ("ping_interval_ms", "ping_timeout_ms", "max_payload", "connect_timeout_ms", "upgrade_timeout_ms"):
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
class MessageReceived(SessionEvent):
    """An Engine.IO MESSAGE from the client (Engine.IO layer only)."""

    data: str | bytes


@dataclass(frozen=True, slots=True)
class SessionClosed(SessionEvent):
    """The session is over; always the last event. Drop it once ``finished``."""

    reason: str


@dataclass(frozen=True, slots=True)
class UpgradeCancelled(SessionEvent):
    """The probing WebSocket did not upgrade in time: close it; polling carries on."""

    reason: str


Event = SessionEvent


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
        "sid",
        "settings",
        "transport",
        "close_reason",
        "closed",
        "outbox",
        "_poll_pending",
        "_post_active",
        "_probe",
        "_probe_deadline",
        "_next_ping_at",
        "_pong_deadline",
        "_linger_deadline",
        "upgraded_at",
    )

    def __init__(self, sid: str, settings: Settings, transport: str, now: float) -> None:
        if transport not in settings.transports:
            raise ValueError(f"transport {transport!r} is not enabled")
        self.sid = sid
        self.settings = settings
        self.transport = transport
        self.close_reason: str | None = None
        # No more input is accepted; output may still be waiting (see ``finished``). Set by
        # the session only; a plain attribute because every fan-out delivery reads it.
        self.closed = False
        upgrades = [WEBSOCKET] if transport == POLLING and WEBSOCKET in settings.transports else []
        # Frames waiting for the transport, oldest first; changed by the session only (the
        # adapters read it: the gateway checks it once per fan-out delivery).
        self.outbox: list[Frame] = [
            encode_open(sid, upgrades, settings.ping_interval_ms, settings.ping_timeout_ms, settings.max_payload)
        ]
        self._poll_pending = False
        self._post_active = False
        self._probe = _NO_PROBE
        self._probe_deadline: float | None = None
        # v4 heartbeat: the server pings every pingInterval; the pong is due pingTimeout later.
        self._next_ping_at: float | None = now + settings.ping_interval_ms / 1000
        self._pong_deadline: float | None = None
        self._linger_deadline: float | None = None
        self.upgraded_at: float | None = None  # when a probing WebSocket took over

    # ------------------------------------------------------------------ state

    @property
    def finished(self) -> bool:
        """Closed with nothing left to deliver: forget the session, close its transport."""
        return self.closed and not self.outbox and not self._poll_pending

    @property
    def buffered(self) -> int:
        """Frames waiting for the transport (an adapter bounds this per subscriber)."""
        return len(self.outbox)

    @property
    def upgrading(self) -> bool:
        return self._probe != _NO_PROBE

    @property
    def probe_answered(self) -> bool:
        """A probing WebSocket got its ``3probe``; the client's UPGRADE comes next."""
        return self._probe == _PROBED

    @property
    def poll_ready(self) -> bool:
        """A pending polling GET can be answered now with ``poll_take()``."""
        return self._poll_pending and (bool(self.outbox) or self.transport == WEBSOCKET or self._probe == _PROBED)

    def next_deadline(self) -> float | None:
        """When ``on_timer`` must next be called, or None when no timer is running."""
        if self.closed:
            return self._linger_deadline
        # Asked after every change of every session: no list, no min() over one.
        due = self._next_ping_at
        for deadline in (self._pong_deadline, self._probe_deadline):
            if deadline is not None and (due is None or deadline < due):
                due = deadline
        return due

    def on_timer(self, now: float) -> list[Event]:
        """Run whatever timers are due: send a ping, time out a pong or an upgrade."""
        if self.closed:
            if self._linger_deadline is not None and now >= self._linger_deadline:
                # Nobody came to collect the last frames of a closed polling session.
                self.outbox.clear()
                self._linger_deadline = None
            return []
        events: list[Event] = []
        if self._probe_deadline is not None and now >= self._probe_deadline:
            self._probe, self._probe_deadline = _NO_PROBE, None
            events.append(UpgradeCancelled("upgrade timeout"))
        if self._pong_deadline is not None and now >= self._pong_deadline:
            events.extend(self._shutdown(CLOSE_PING_TIMEOUT, now, flush=False, final=CLOSE))
        elif self._next_ping_at is not None and now >= self._next_ping_at:
            self.outbox.append(PING)
            self._next_ping_at = None
            # Counted from when the ping actually left, so a late tick is not held against the client.
            self._pong_deadline = now + self.settings.ping_timeout_ms / 1000
        return events

    # ------------------------------------------------------------------ output

    def send_frame(self, frame: Frame) -> bool:
        """Queue an already encoded frame (e.g. from ``encode_event_frame``); False if closed.

        This is the fan-out path: the same frame object goes to every subscriber.
        """
        if self.closed:
            return False
        self.outbox.append(frame)
        return True

    def send_message(self, data: str | bytes) -> bool:
        """Queue an Engine.IO MESSAGE; False if the session is closed."""
        if isinstance(data, str) and SEPARATOR in data:
            raise ValueError("a text message must not contain the payload separator \\x1e")
        return self.send_frame(message_frame(data))

    def take_outgoing(self) -> list[Frame]:
        """The frames to send, in order, on the session's WebSocket (empty while polling)."""
        if self.transport != WEBSOCKET or not self.outbox:
            return []
        frames, self.outbox = self.outbox, []
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
        if self.closed:
            if self.transport == POLLING and self.outbox and not self._poll_pending:
                self._poll_pending = True  # collects the last frames of a closed session
                self._linger_deadline = None
                return None
            return http_error(ErrorCode.UNKNOWN_SID)
        if self.transport == WEBSOCKET:
            return http_error(ErrorCode.BAD_REQUEST)  # upgraded: polling is over, session is not
        if self._poll_pending:
            raise self._fail(EngineIOProtocolError("overlapping polling GET requests"), now, CLOSE_TRANSPORT_ERROR)
        self._poll_pending = True
        return None

    def poll_take(self) -> str:
        """The body answering the pending GET; it is no longer pending afterwards.

        Calling it before ``poll_ready`` ends the GET with a NOOP, which clients accept.
        """
        self._poll_pending = False
        if self.transport == POLLING and self.outbox:
            body = encode_payload(self.outbox)
            self.outbox = []
            return body
        # Upgraded or probing: a NOOP releases the GET so the client can pause polling.
        return NOOP

    def poll_abort(self, now: float) -> list[Event]:
        """The client dropped the pending GET before it was answered."""
        if not self._poll_pending:
            return []
        self._poll_pending = False
        if self.closed:
            self.outbox.clear()  # that GET was the one to collect the last frames
            return []
        if self._probe != _NO_PROBE or self.transport == WEBSOCKET:
            return []  # nothing lost: the client is moving to WebSocket
        return self._shutdown(CLOSE_TRANSPORT_ERROR, now, flush=False, final=CLOSE)

    def post_begin(self, now: float) -> HttpError | None:
        """A polling POST arrived; read its body (at most max_payload + 1 bytes) next.

        A second POST while one is being read breaks the protocol (raises, answer 400).
        """
        if self.closed:
            return http_error(ErrorCode.UNKNOWN_SID)
        if self.transport == WEBSOCKET:
            return http_error(ErrorCode.BAD_REQUEST)
        if self._post_active:
            raise self._fail(EngineIOProtocolError("overlapping polling POST requests"), now, CLOSE_TRANSPORT_ERROR)
        self._post_active = True
        return None

    def post_abort(self, now: float) -> list[Event]:
        """The POST body could not be read (the client went away)."""
        self._post_active = False
        if self.closed:
            return []
        return self._shutdown(CLOSE_TRANSPORT_ERROR, now, flush=False, final=CLOSE)

    def receive_payload(self, body: str | bytes, now: float) -> list[Event]:
        """The body of a polling POST; answer ``ok`` on return, ``exc.http_status`` on raise.

        The payload is decoded whole before anything is applied, so a malformed record
        applies none of the records before it.
        """
        self._post_active = False
        if self.closed:
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
        if self.closed:
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

    def receive_pong(self, now: float) -> None:
        """The client's PONG (a ``"3"`` message on the WebSocket, already recognised by the
        caller: held sockets send little else, so it is applied without decoding). It
        queues nothing and moves the next deadline later, never earlier."""
        if self._pong_deadline is not None and not self.closed:  # a pong nobody asked for changes nothing
            self._pong_deadline = None
            self._next_ping_at = now + self.settings.ping_interval_ms / 1000

    def transport_closed(self, now: float) -> list[Event]:
        """The session's WebSocket closed under us."""
        if self.closed:
            return []
        return self._shutdown(CLOSE_TRANSPORT, now, flush=False, final=CLOSE)

    # ------------------------------------------------------------------ upgrade

    def upgrade_begin(self, now: float) -> HttpError | None:
        """A WebSocket arrived for this polling session; on None, feed its frames to
        ``receive_probe_frame``. A second WebSocket, or one after the upgrade, is refused."""
        if self.closed:
            return http_error(ErrorCode.UNKNOWN_SID)
        if self.transport == WEBSOCKET or self._probe != _NO_PROBE:
            return http_error(ErrorCode.BAD_REQUEST)
        self._probe = _PROBING
        self._probe_deadline = now + self.settings.upgrade_timeout_ms / 1000
        return None

    def receive_probe_frame(self, frame: Frame, now: float) -> ProbeResult:
        """One message of the probing WebSocket: ``2probe`` → ``3probe``, then ``5``."""
        if self.closed or self._probe == _NO_PROBE:
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
            self.upgraded_at = now
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
            self.receive_pong(now)
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
        if self.closed:
            return []
        self.closed = True
        self.close_reason = reason
        self._probe, self._probe_deadline = _NO_PROBE, None
        self._next_ping_at = self._pong_deadline = None
        self._post_active = False
        if not flush:
            self.outbox.clear()
        if self.transport == POLLING and (flush or self._poll_pending):
            self.outbox.append(final)
            if not self._poll_pending:
                # Wait a heartbeat's worth for the client's next GET to collect it.
                self._linger_deadline = now + self.settings.ping_timeout_ms / 1000
        return self._closing_events(reason)


def _reason_for(exc: ProtocolError) -> str:
    return CLOSE_PAYLOAD_TOO_LARGE if exc.http_status == 413 else CLOSE_PARSE_ERROR
