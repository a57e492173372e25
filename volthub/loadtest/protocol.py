"""Sans-IO client side of the wire formats the load generator speaks.

- WebSocket (RFC 6455), client side only: the upgrade request, its answer, a frame parser
  for what a server sends and masked frames for what we send. Thousands of clients share
  one core, so this is a few struct reads per frame rather than a general library.
- Engine.IO v4 / Socket.IO v5 text packets: the open packet, CONNECT, and EVENT frames.
- Server-sent events: an incremental parser of the `event:` / `id:` / `data:` stream.
- The benchmark message: the send time travels inside the chat text, so each receiver
  measures end-to-end latency without any clock shared with the server.
"""

from __future__ import annotations

import base64
import hashlib
import os
import random
import struct
from dataclasses import dataclass
from typing import Any

import orjson

# --- WebSocket ---------------------------------------------------------------------------

WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_MAX_FRAME = 16 * 1024 * 1024  # refuse absurd lengths instead of buffering them


# A load generator's WebSocket keys and frame masks guard nothing (masks exist so that a
# browser's scripts cannot steer what proxies cache): they come from a seeded generator
# instead of os.urandom, which is a system call per frame, two of a hold's connect.
_random = random.Random(os.urandom(16))


class WebSocketError(Exception):
    """The peer broke the protocol, refused the upgrade or closed the connection."""


def new_key() -> str:
    return base64.b64encode(_random.randbytes(16)).decode()


def accept_for(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()


def upgrade_request(host: str, port: int, target: str, key: str, headers: dict[str, str] | None = None) -> bytes:
    """The HTTP/1.1 upgrade request; no extensions offered, so frames are never compressed."""
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
    ]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_upgrade_response(buffer: bytes | bytearray, key: str) -> int | None:
    """Length of the complete response head in `buffer`, or None while it is incomplete.

    Raises WebSocketError unless it is a 101 with the right Sec-WebSocket-Accept."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        if len(buffer) > 16384:
            raise WebSocketError("upgrade response head too long")
        return None
    head = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    status = head[0].split(" ", 2)
    if len(status) < 2 or status[1] != "101":
        raise WebSocketError(f"upgrade refused: {head[0]}")
    fields = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    if fields.get("sec-websocket-accept") != accept_for(key):
        raise WebSocketError("bad Sec-WebSocket-Accept")
    return end + 4


def encode_frame(opcode: int, payload: bytes, mask: bytes | None = None) -> bytes:
    """A single final frame as a client sends it (masked, RFC 6455 §5.3)."""
    mask = mask if mask is not None else _random.randbytes(4)
    length = len(payload)
    if length < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    return head + mask + _apply_mask(payload, mask)


def text_frame_head(length: int) -> bytes:
    """The head of a final, unmasked text frame of `length` bytes (as a server sends it)."""
    if length < 126:
        return struct.pack("!BB", 0x80 | OP_TEXT, length)
    if length < 65536:
        return struct.pack("!BBH", 0x80 | OP_TEXT, 126, length)
    return struct.pack("!BBQ", 0x80 | OP_TEXT, 127, length)


def _apply_mask(payload: bytes, mask: bytes) -> bytes:
    if not payload:
        return b""
    # XOR as one big integer: fast for the short frames a client sends.
    repeated = (mask * (len(payload) // 4 + 1))[: len(payload)]
    value = int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")
    return value.to_bytes(len(payload), "big")


class FrameParser:
    """Turns the bytes a server sends into (opcode, payload) messages, fragments joined."""

    __slots__ = ("_buffer", "_fragments", "_fragment_opcode")

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._fragments: list[bytes] = []
        self._fragment_opcode = 0

    def idle(self) -> bool:
        """Nothing held back: the next byte fed starts a new message."""
        return not self._buffer and not self._fragments

    def feed(self, data: bytes | bytearray) -> list[tuple[int, bytes]]:
        buffer = self._buffer
        buffer += data
        out: list[tuple[int, bytes]] = []
        offset, size = 0, len(buffer)
        while size - offset >= 2:
            first, second = buffer[offset], buffer[offset + 1]
            length = second & 0x7F
            start = offset + 2
            if length == 126:
                if size - start < 2:
                    break
                (length,) = struct.unpack_from("!H", buffer, start)
                start += 2
            elif length == 127:
                if size - start < 8:
                    break
                (length,) = struct.unpack_from("!Q", buffer, start)
                start += 8
            if length > _MAX_FRAME:
                raise WebSocketError(f"frame of {length} bytes")
            mask = None
            if second & 0x80:  # servers must not mask, but tolerate it
                if size - start < 4:
                    break
                mask = bytes(buffer[start : start + 4])
                start += 4
            if size - start < length:
                break
            payload = bytes(buffer[start : start + length])
            if mask is not None:
                payload = _apply_mask(payload, mask)
            offset = start + length
            self._complete(first & 0x80, first & 0x0F, payload, out)
        if offset:
            del buffer[:offset]
        return out

    def _complete(self, fin: int, opcode: int, payload: bytes, out: list[tuple[int, bytes]]) -> None:
        if opcode >= 0x8:  # control frames are never fragmented and may interleave
            out.append((opcode, payload))
        elif opcode == OP_CONTINUATION:
            if not self._fragments:
                raise WebSocketError("continuation without a first fragment")
            self._fragments.append(payload)
            if fin:
                out.append((self._fragment_opcode, b"".join(self._fragments)))
                self._fragments = []
        elif fin:
            out.append((opcode, payload))
        else:
            self._fragment_opcode, self._fragments = opcode, [payload]


# --- Engine.IO v4 / Socket.IO v5 -----------------------------------------------------------

EIO_OPEN, EIO_CLOSE, EIO_PING, EIO_PONG, EIO_MESSAGE, EIO_NOOP = "0", "1", "2", "3", "4", "6"
SIO_CONNECT, SIO_DISCONNECT, SIO_EVENT, SIO_ACK, SIO_CONNECT_ERROR = 0, 1, 2, 3, 4


class ProtocolError(Exception):
    """A packet that does not parse."""


@dataclass(frozen=True)
class SioPacket:
    type: int
    namespace: str
    ack: int | None
    data: Any


def engineio_target(path: str, token: str | None = None) -> str:
    """The request target of a WebSocket-only Engine.IO v4 connection."""
    path = path if path.endswith("/") else path + "/"
    query = "EIO=4&transport=websocket"
    return f"{path}?{query}&token={token}" if token else f"{path}?{query}"


def parse_open(text: str) -> dict[str, Any]:
    """The Engine.IO open packet: sid, upgrades, pingInterval, pingTimeout, maxPayload."""
    if not text.startswith(EIO_OPEN):
        raise ProtocolError(f"expected an open packet, got {text[:40]!r}")
    try:
        handshake = orjson.loads(text[1:])
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"bad open packet: {exc}") from None
    if not isinstance(handshake, dict) or "sid" not in handshake:
        raise ProtocolError("open packet without sid")
    return handshake


def connect_packet(namespace: str = "/", auth: dict[str, Any] | None = None) -> str:
    """Engine.IO message carrying a Socket.IO CONNECT, e.g. `40{"token":"…"}`."""
    prefix = "40" if namespace == "/" else f"40{namespace},"
    return prefix + (orjson.dumps(auth).decode() if auth is not None else "")


def parse_socketio(text: str) -> SioPacket:
    """A Socket.IO packet inside an Engine.IO message frame (`4…`)."""
    if not text.startswith(EIO_MESSAGE) or len(text) < 2 or not text[1].isdigit():
        raise ProtocolError(f"not a Socket.IO packet: {text[:40]!r}")
    kind = int(text[1])
    position = 2
    namespace = "/"
    if position < len(text) and text[position] == "/":
        comma = text.find(",", position)
        end = comma if comma >= 0 else len(text)
        namespace = text[position:end]
        position = end + 1 if comma >= 0 else end
    digits = position
    while digits < len(text) and text[digits].isdigit():
        digits += 1
    ack = int(text[position:digits]) if digits > position else None
    body = text[digits:]
    try:
        data = orjson.loads(body) if body else None
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"bad packet body: {exc}") from None
    return SioPacket(kind, namespace, ack, data)


def event_prefix(namespace: str, name: str) -> str:
    """How an EVENT frame named `name` starts, for a cheap prefix test on the hot path."""
    ns = "" if namespace == "/" else f"{namespace},"
    return f'42{ns}["{name}",'


# --- Server-sent events ----------------------------------------------------------------------


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: str | None


class SseParser:
    """Incremental text/event-stream parser (the WHATWG rules that matter here)."""

    __slots__ = ("_pending", "_event", "_data", "_id")

    def __init__(self) -> None:
        self._pending = b""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        events: list[SseEvent] = []
        lines = (self._pending + chunk).split(b"\n")
        self._pending = lines.pop()
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    events.append(SseEvent(self._event or "message", "\n".join(self._data), self._id))
                self._event, self._data = "", []
                continue
            if line.startswith(b":"):
                continue  # keep-alive comment
            name, _, value = line.decode("utf-8", "replace").partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                self._event = value
            elif name == "data":
                self._data.append(value)
            elif name == "id":
                self._id = value
        return events


# --- the benchmark message ---------------------------------------------------------------------

MESSAGE_MARK = "lt"


def make_message(run_tag: str, seq: int, send_ns: int, size: int = 0) -> str:
    """Chat text carrying the run, a sequence number and the send time (monotonic ns)."""
    text = f"{MESSAGE_MARK} {run_tag} {seq} {send_ns}"
    if size > len(text) + 1:
        text += " " + "x" * (size - len(text) - 1)
    return text


def parse_message(text: str, run_tag: str) -> tuple[int, int] | None:
    """(seq, send_ns) of one of this run's messages; None for anything else."""
    parts = text.split(" ", 4)
    if len(parts) < 4 or parts[0] != MESSAGE_MARK or parts[1] != run_tag:
        return None
    try:
        return int(parts[2]), int(parts[3])
    except ValueError:
        return None
