"""Engine.IO v4 packets and polling payloads (sans-IO).

A *frame* is one encoded packet as it travels in one WebSocket message: ``str`` for a
text packet (``"4hello"``, ``"2"``, ``"3probe"``), ``bytes`` for a binary message (v4
sends binary message data as is, with no type byte). A polling *payload* joins frames
with the record separator ``\\x1e`` and carries binary messages as ``b<base64>``.

Every decoder raises :class:`EngineIOProtocolError` on malformed input and nothing else.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

import orjson

from volthub.protocol.engineio.events import SessionEvent

PROTOCOL_VERSION: Final = 4
SEPARATOR: Final = "\x1e"

Frame = str | bytes


class ProtocolError(Exception):
    """Base of both layers' protocol errors, so an adapter can catch them in one place.

    ``http_status`` is what a polling POST that carried the bad input should answer.
    ``events``: when a session raises, it has already closed itself, and this holds the
    closing events (Disconnected…, SessionClosed) the adapter must still dispatch.
    """

    def __init__(self, message: str, *, http_status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.http_status = http_status
        self.events: list[SessionEvent] = []


class EngineIOProtocolError(ProtocolError):
    """Malformed or out-of-place Engine.IO input (413 when over maxPayload)."""


class PacketType(IntEnum):
    OPEN = 0
    CLOSE = 1
    PING = 2
    PONG = 3
    MESSAGE = 4
    UPGRADE = 5
    NOOP = 6


@dataclass(frozen=True, slots=True)
class Packet:
    type: PacketType
    # Text for every packet type; bytes only for a binary MESSAGE.
    data: str | bytes = ""


# Pre-built frames for the packets a server sends without data; sharing one str object
# per kind costs nothing and saves an allocation per heartbeat.
PING: Final = "2"
PONG: Final = "3"  # a client's answer to PING
PONG_PROBE: Final = "3probe"
NOOP: Final = "6"
CLOSE: Final = "1"

# "0".."6" → type; a dict lookup is both the validity check and the conversion.
_TYPE_BY_CHAR: Final = {str(int(t)): t for t in PacketType}


def encode_packet(packet: Packet) -> Frame:
    """The WebSocket frame of ``packet``: text, or the raw bytes of a binary message."""
    if isinstance(packet.data, bytes):
        if packet.type is not PacketType.MESSAGE:
            raise ValueError("only MESSAGE packets may carry binary data")
        return packet.data
    return f"{int(packet.type)}{packet.data}"


def message_frame(data: str | bytes) -> Frame:
    """The frame of a MESSAGE packet; cheaper than building a :class:`Packet` first."""
    return data if isinstance(data, bytes) else "4" + data


def decode_packet(frame: Frame) -> Packet:
    """Decode one frame (a WebSocket message, or one record of a polling payload)."""
    if isinstance(frame, (bytes, bytearray, memoryview)):
        return Packet(PacketType.MESSAGE, bytes(frame))
    if not isinstance(frame, str):
        raise EngineIOProtocolError("a frame must be str or bytes")
    if not frame:
        raise EngineIOProtocolError("empty packet")
    head = frame[0]
    if head == "b":
        # v4 carries binary as base64 in text; the reference parser accepts it anywhere.
        return Packet(PacketType.MESSAGE, _b64decode(frame[1:]))
    packet_type = _TYPE_BY_CHAR.get(head)
    if packet_type is None:
        raise EngineIOProtocolError(f"unknown packet type {head!r}")
    return Packet(packet_type, frame[1:])


def encode_payload(frames: Iterable[Frame]) -> str:
    """Join frames into a polling response body (binary messages become ``b<base64>``)."""
    return SEPARATOR.join("b" + base64.b64encode(f).decode("ascii") if isinstance(f, bytes) else f for f in frames)


def decode_payload(body: str | bytes) -> list[Packet]:
    """Split and decode a polling request body; all or nothing, so no half-applied POST."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            body = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EngineIOProtocolError("payload is not valid UTF-8") from exc
    if not isinstance(body, str):
        raise EngineIOProtocolError("a payload must be str or bytes")
    return [decode_packet(record) for record in body.split(SEPARATOR)]


def encode_open(
    sid: str,
    upgrades: Iterable[str],
    ping_interval_ms: int,
    ping_timeout_ms: int,
    max_payload: int,
) -> str:
    """The OPEN frame of the handshake; intervals are milliseconds on the wire."""
    handshake = {
        "sid": sid,
        "upgrades": list(upgrades),
        "pingInterval": ping_interval_ms,
        "pingTimeout": ping_timeout_ms,
        "maxPayload": max_payload,
    }
    return "0" + orjson.dumps(handshake).decode("utf-8")


def decode_open(frame: Frame) -> dict[str, object]:
    """The client's side of :func:`encode_open`: the handshake of an OPEN frame, which must
    name the session (``sid``)."""
    packet = decode_packet(frame)
    if packet.type is not PacketType.OPEN or not isinstance(packet.data, str):
        raise EngineIOProtocolError(f"expected an OPEN packet, got {str(frame)[:40]!r}")
    try:
        handshake = orjson.loads(packet.data)
    except orjson.JSONDecodeError as exc:
        raise EngineIOProtocolError("the OPEN packet is not JSON") from exc
    if not isinstance(handshake, dict) or not isinstance(handshake.get("sid"), str):
        raise EngineIOProtocolError("the OPEN packet names no session")
    return handshake


def _b64decode(text: str) -> bytes:
    try:
        # validate=True refuses characters outside the alphabet instead of skipping them.
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError) as exc:
        raise EngineIOProtocolError("invalid base64 in binary packet") from exc
