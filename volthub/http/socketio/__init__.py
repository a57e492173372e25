"""Engine.IO v4 + Socket.IO v5 as sans-IO protocol code (no sockets, no clock).

- :mod:`.handshake` — validate the HTTP request of an Engine.IO endpoint.
- :mod:`.engineio` — Engine.IO packets and polling payloads.
- :mod:`.socketio` — Socket.IO packets; ``encode_event_frame`` for encode-once fan-out.
- :mod:`.session` — per-connection state machines; ``SocketIOSession`` is what an
  adapter holds per client.
- :mod:`.binary` — opt-in binary packets (``BinarySocketIOSession``, conformance mode only).

The I/O lives apart: :mod:`.server` is the Trio/ASGI adapter (not imported here), and
:mod:`.conformance` serves the official test-suites' reference apps on it.
"""

from .engineio import (
    EngineIOProtocolError,
    Frame,
    ProtocolError,
    decode_packet as decode_engineio_packet,
    decode_payload,
    encode_packet as encode_engineio_packet,
    encode_payload,
)
from .engineio import Packet as EngineIOPacket
from .engineio import PacketType as EngineIOPacketType
from .handshake import (
    POLLING,
    WEBSOCKET,
    EngineIORequest,
    ErrorCode,
    HttpError,
    RequestKind,
    http_error,
    validate_request,
)
from .session import (
    AckReceived,
    ConnectRequest,
    Disconnected,
    EngineIOSession,
    Event,
    EventReceived,
    MessageReceived,
    ProbeResult,
    SessionClosed,
    Settings,
    SocketIOSession,
    UpgradeCancelled,
    new_sid,
)
from .socketio import (
    DEFAULT_NAMESPACE,
    SocketIOProtocolError,
    decode_packet as decode_socketio_packet,
    encode_event_frame,
    encode_frame as encode_socketio_frame,
    encode_packet as encode_socketio_packet,
)
from .socketio import Packet as SocketIOPacket
from .socketio import PacketType as SocketIOPacketType

__all__ = [
    "DEFAULT_NAMESPACE",
    "POLLING",
    "WEBSOCKET",
    "AckReceived",
    "ConnectRequest",
    "Disconnected",
    "EngineIOPacket",
    "EngineIOPacketType",
    "EngineIOProtocolError",
    "EngineIORequest",
    "EngineIOSession",
    "ErrorCode",
    "Event",
    "EventReceived",
    "Frame",
    "HttpError",
    "MessageReceived",
    "ProbeResult",
    "ProtocolError",
    "RequestKind",
    "SessionClosed",
    "Settings",
    "SocketIOPacket",
    "SocketIOPacketType",
    "SocketIOProtocolError",
    "SocketIOSession",
    "UpgradeCancelled",
    "decode_engineio_packet",
    "decode_payload",
    "decode_socketio_packet",
    "encode_engineio_packet",
    "encode_event_frame",
    "encode_payload",
    "encode_socketio_frame",
    "encode_socketio_packet",
    "http_error",
    "new_sid",
    "validate_request",
]
