"""Socket.IO v5 packets (sans-IO).

Text encoding: ``<type>[<attachments>-][<namespace>,][<ack id>][<JSON payload>]``; the
namespace appears only when it is not ``/``. Every Socket.IO packet travels inside an
Engine.IO MESSAGE, so its frame on the wire is ``"4" + encode_packet(packet)``.

Binary packets (BINARY_EVENT, BINARY_ACK) are refused: nothing we serve needs them, and
refusing keeps the attachment reassembly state (and its memory) out of every connection.

Every decoder raises :class:`SocketIOProtocolError` on malformed input and nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final

import orjson

from volthub.protocol.engineio.packets import ProtocolError

DEFAULT_NAMESPACE: Final = "/"

# Event names the reference client turns into its own lifecycle events; an EVENT carrying
# one would fire the client's "connect"/"disconnect" handlers, so neither side may send it.
RESERVED_EVENTS: Final = frozenset(
    {"connect", "connect_error", "disconnect", "disconnecting", "newListener", "removeListener"}
)

# Acks are numbered by a counter on the other side; the largest integer JavaScript holds
# exactly bounds them, and bounding the digit count first keeps int() cheap.
MAX_ACK_ID: Final = 2**53 - 1
_MAX_ACK_DIGITS: Final = 16
MAX_NAMESPACE_LENGTH: Final = 256
_CONTROL_CHARS: Final = re.compile(r"[\x00-\x1f\x7f]")


class SocketIOProtocolError(ProtocolError):
    """Malformed or out-of-place Socket.IO input (including any binary packet)."""


class PacketType(IntEnum):
    CONNECT = 0
    DISCONNECT = 1
    EVENT = 2
    ACK = 3
    CONNECT_ERROR = 4
    BINARY_EVENT = 5
    BINARY_ACK = 6


_TYPE_BY_CHAR: Final = {str(int(t)): t for t in PacketType}
_BINARY_TYPES: Final = frozenset({PacketType.BINARY_EVENT, PacketType.BINARY_ACK})
_ACK_ID_TYPES: Final = frozenset({PacketType.EVENT, PacketType.ACK})


@dataclass(frozen=True, slots=True)
class Packet:
    type: PacketType
    namespace: str = DEFAULT_NAMESPACE
    # The decoded JSON payload, or None when the packet has none (a JSON null payload is
    # invalid for every packet type, so None is never ambiguous).
    data: Any = None
    ack_id: int | None = None


# --------------------------------------------------------------------------- encoding


def encode_packet(packet: Packet) -> str:
    """The Socket.IO text of ``packet`` (without the Engine.IO ``4`` prefix)."""
    if packet.type in _BINARY_TYPES:
        raise ValueError("binary packets are not supported")
    text = str(int(packet.type)) + _namespace_prefix(packet.namespace)
    if packet.ack_id is not None:
        text += str(_checked_ack_id(packet.ack_id))
    if packet.data is not None:
        text += orjson.dumps(packet.data).decode("utf-8")
    return text


def encode_frame(packet: Packet) -> str:
    """The complete Engine.IO frame (``4`` + Socket.IO text) of ``packet``."""
    return "4" + encode_packet(packet)


def encode_event_frame(namespace: str, name: str, *args_json: bytes | str, ack_id: int | None = None) -> str:
    """Encode an EVENT once, straight to its Engine.IO frame, from pre-serialised args.

    ``args_json`` are JSON documents already serialised (e.g. by ``orjson.dumps``); they
    are spliced in without being parsed again, so one event fanned out to thousands of
    subscribers costs one encode. The result is a WebSocket text frame and, unchanged, a
    record of a polling payload (JSON escapes control characters, so it never contains
    the payload separator). The caller vouches that each ``args_json`` is valid JSON.
    """
    if not isinstance(name, str) or name in RESERVED_EVENTS:
        raise ValueError(f"invalid event name {name!r}")
    head = "42" + _namespace_prefix(namespace)
    if ack_id is not None:
        head += str(_checked_ack_id(ack_id))
    parts = [orjson.dumps(name).decode("utf-8")]
    parts.extend(a.decode("utf-8") if isinstance(a, bytes) else a for a in args_json)
    return f"{head}[{','.join(parts)}]"


def _namespace_prefix(namespace: str) -> str:
    if namespace == DEFAULT_NAMESPACE:
        return ""
    if not _is_valid_namespace(namespace):
        raise ValueError(f"invalid namespace {namespace!r}")
    return namespace + ","


def _checked_ack_id(ack_id: int) -> int:
    if isinstance(ack_id, bool) or not isinstance(ack_id, int) or not 0 <= ack_id <= MAX_ACK_ID:
        raise ValueError(f"invalid ack id {ack_id!r}")
    return ack_id


# --------------------------------------------------------------------------- decoding


def decode_packet(text: str) -> Packet:
    """Decode the Socket.IO text of one Engine.IO message; strict about every field."""
    if not isinstance(text, str):
        raise SocketIOProtocolError("a Socket.IO packet must be text")
    if not text:
        raise SocketIOProtocolError("empty packet")
    packet_type = _TYPE_BY_CHAR.get(text[0])
    if packet_type is None:
        raise SocketIOProtocolError(f"unknown packet type {text[0]!r}")
    if packet_type in _BINARY_TYPES:
        raise SocketIOProtocolError("binary packets are not supported")
    namespace, pos = _read_namespace(text, 1)
    ack_id = None
    if packet_type in _ACK_ID_TYPES:
        ack_id, pos = _read_ack_id(text, pos)
    data = _read_payload(text, pos)
    _check_payload(packet_type, data, ack_id, has_payload=pos < len(text))
    return Packet(packet_type, namespace, data, ack_id)


def _read_namespace(text: str, pos: int) -> tuple[str, int]:
    # A namespace starts with "/" and runs to the first "," (or the end of the packet).
    if not text.startswith("/", pos):
        return DEFAULT_NAMESPACE, pos
    end = text.find(",", pos)
    namespace, after = (text[pos:], len(text)) if end == -1 else (text[pos:end], end + 1)
    if not _is_valid_namespace(namespace):
        raise SocketIOProtocolError("invalid namespace")
    return namespace, after


def _is_valid_namespace(namespace: object) -> bool:
    return (
        isinstance(namespace, str)
        and namespace.startswith("/")
        and len(namespace) <= MAX_NAMESPACE_LENGTH
        and "," not in namespace
        and _CONTROL_CHARS.search(namespace) is None
    )


def _read_ack_id(text: str, pos: int) -> tuple[int | None, int]:
    end = pos
    # Only ASCII digits: str.isdigit() would also accept "²" or Arabic-Indic digits.
    while end < len(text) and "0" <= text[end] <= "9":
        end += 1
    if end == pos:
        return None, pos
    if end - pos > _MAX_ACK_DIGITS or (ack_id := int(text[pos:end])) > MAX_ACK_ID:
        raise SocketIOProtocolError("invalid ack id")
    return ack_id, end


def _read_payload(text: str, pos: int) -> Any:
    if pos >= len(text):
        return None
    try:
        return orjson.loads(text[pos:])
    except orjson.JSONDecodeError as exc:
        raise SocketIOProtocolError("invalid payload: not JSON") from exc


def _check_payload(packet_type: PacketType, data: Any, ack_id: int | None, *, has_payload: bool) -> None:
    if packet_type is PacketType.CONNECT:
        ok = not has_payload or isinstance(data, dict)
    elif packet_type is PacketType.DISCONNECT:
        ok = not has_payload
    elif packet_type is PacketType.EVENT:
        ok = isinstance(data, list) and bool(data) and isinstance(data[0], str) and data[0] not in RESERVED_EVENTS
    elif packet_type is PacketType.ACK:
        ok = ack_id is not None and isinstance(data, list)
    else:  # CONNECT_ERROR: an object ({"message", "data"?}) or, from older peers, a string
        ok = isinstance(data, (dict, str))
    if not ok:
        raise SocketIOProtocolError(f"invalid payload for {packet_type.name}")
