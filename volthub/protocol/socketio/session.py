"""The Socket.IO session (sans-IO): namespaces, events and acks over an Engine.IO session.

Input that breaks Socket.IO raises :class:`~.packets.SocketIOProtocolError` after the
session has closed itself, like its Engine.IO base.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from volthub.protocol.engineio.events import SessionEvent
from volthub.protocol.engineio.packets import CLOSE
from volthub.protocol.engineio.session import (
    CLOSE_CONNECT_TIMEOUT,
    EngineIOSession,
    Event,
    SessionClosed,
    Settings,
    new_sid,
)
from volthub.protocol.socketio.packets import RESERVED_EVENTS, SocketIOProtocolError
from volthub.protocol.socketio.packets import Packet as SioPacket
from volthub.protocol.socketio.packets import PacketType as SioType
from volthub.protocol.socketio.packets import decode_packet as sio_decode
from volthub.protocol.socketio.packets import encode_frame as sio_frame

DISCONNECT_CLIENT: Final = "client namespace disconnect"

# Namespaces one connection may join or ask for at once; bounds per-connection state.
MAX_NAMESPACES: Final = 32
_NONE: Final[frozenset[Any]] = frozenset()


def _without(found: frozenset[Any], item: Any) -> frozenset[Any]:
    """``found`` less ``item``; the shared empty set when nothing is left."""
    if item not in found:
        return found
    rest = found - {item}
    return rest if rest else _NONE


@dataclass(frozen=True, slots=True)
class ConnectRequest(SessionEvent):
    """The client asks to join ``namespace``: answer with accept_connect/reject_connect."""

    namespace: str
    auth: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EventReceived(SessionEvent):
    namespace: str
    name: str
    args: list[Any]
    ack_id: int | None  # when set, answer with ack(namespace, ack_id, ...)


@dataclass(frozen=True, slots=True)
class AckReceived(SessionEvent):
    """The client acknowledged an emit(..., ack_id=...) of ours."""

    namespace: str
    ack_id: int
    args: list[Any]


@dataclass(frozen=True, slots=True)
class Disconnected(SessionEvent):
    """``namespace`` is no longer joined (client DISCONNECT, or the session closed)."""

    namespace: str
    reason: str


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
        # Small sets, replaced rather than mutated, so an idle connection holds the one shared
        # empty set instead of three of its own (bytes per connection count at many thousands of sockets).
        self._pending: frozenset[str] = _NONE  # CONNECT received, app has not answered yet
        # Namespaces we disconnected or refused: the client may have sent packets for them
        # before it heard, so those are dropped rather than treated as protocol errors.
        self._left: frozenset[str] = _NONE
        self._awaited_acks: frozenset[tuple[str, int]] = _NONE
        self._connect_deadline: float | None = now + settings.connect_timeout_ms / 1000

    @property
    def namespaces(self) -> Mapping[str, str]:
        """Joined namespaces and the socket id each was given."""
        return MappingProxyType(self._joined)

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> float | None:
        deadline = super().next_deadline()
        if self.closed or self._connect_deadline is None:
            return deadline
        return self._connect_deadline if deadline is None else min(deadline, self._connect_deadline)

    def on_timer(self, now: float) -> list[Event]:
        events = super().on_timer(now)
        if not self.closed and self._connect_deadline is not None and now >= self._connect_deadline:
            self._connect_deadline = None
            if not self._joined:
                events.extend(self._shutdown(CLOSE_CONNECT_TIMEOUT, now, flush=False, final=CLOSE))
        return events

    # ------------------------------------------------------------------ output

    def accept_connect(self, namespace: str, sid: str | None = None, pid: str | None = None) -> str | None:
        """Answer a ConnectRequest with CONNECT {sid} ({sid, pid} with a connection state
        recovery id); returns the socket id, or None when there is no such request any more
        (the client left or the session closed)."""
        if self.closed or namespace not in self._pending:
            return None
        self._pending = _without(self._pending, namespace)
        socket_id = sid or new_sid()
        self._joined[namespace] = socket_id
        self._connect_deadline = None
        data = {"sid": socket_id} if pid is None else {"sid": socket_id, "pid": pid}
        self.send_frame(sio_frame(SioPacket(SioType.CONNECT, namespace, data)))
        return socket_id

    def reject_connect(self, namespace: str, message: str, data: Any = None) -> bool:
        """Answer a ConnectRequest with CONNECT_ERROR {message, data?}."""
        if self.closed or namespace not in self._pending:
            return False
        self._pending = _without(self._pending, namespace)
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
        if self.closed or namespace not in self._joined:
            return False
        self.send_frame(sio_frame(SioPacket(SioType.EVENT, namespace, [name, *args], ack_id)))
        if ack_id is not None:
            self._awaited_acks |= {(namespace, ack_id)}
        return True

    def ack(self, namespace: str, ack_id: int, args: list[Any] | tuple[Any, ...] = ()) -> bool:
        """Answer an EventReceived that carried ``ack_id``."""
        if self.closed or namespace not in self._joined:
            return False
        self.send_frame(sio_frame(SioPacket(SioType.ACK, namespace, list(args), ack_id)))
        return True

    def disconnect(self, namespace: str) -> bool:
        """Leave ``namespace`` (DISCONNECT); the session stays open for the others.

        The reference client does not reconnect a namespace the server disconnected; to let
        it reconnect (e.g. to another worker), ``close()`` the session instead.
        """
        if self.closed or namespace not in self._joined:
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
                self._pending = _without(self._pending, namespace)
                return []
            # The protocol requires a CONNECT to a namespace before anything else in it.
            raise SocketIOProtocolError(f"{kind.name} for a namespace that is not connected")
        if kind is SioType.EVENT or kind is SioType.BINARY_EVENT:
            return [EventReceived(namespace, packet.data[0], packet.data[1:], packet.ack_id)]
        if kind is SioType.ACK or kind is SioType.BINARY_ACK:
            ack_id = packet.ack_id  # never None: the decoder refuses an ACK without an id
            if ack_id is None or (namespace, ack_id) not in self._awaited_acks:
                return []  # not asked for, or already answered: ignore, as the reference does
            self._awaited_acks = _without(self._awaited_acks, (namespace, ack_id))
            return [AckReceived(namespace, ack_id, packet.data)]
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
        self._left = _without(self._left, namespace)
        self._pending |= {namespace}
        return [ConnectRequest(namespace, auth if auth is not None else {})]

    def _closing_events(self, reason: str) -> list[Event]:
        events: list[Event] = [Disconnected(namespace, reason) for namespace in self._joined]
        self._joined.clear()
        self._pending = self._left = _NONE
        self._awaited_acks = _NONE
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
        self._awaited_acks = frozenset(key for key in self._awaited_acks if key[0] != namespace)

    def _remember_left(self, namespace: str) -> None:
        left = set(self._left)
        if len(left) >= MAX_NAMESPACES:
            left.pop()  # bounded: forgetting one only makes a late packet an error
        left.add(namespace)
        self._left = frozenset(left)
