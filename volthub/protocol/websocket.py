"""RFC 6455 (sans-IO) for both roles, as h11 serves both ends of HTTP: the opening
handshake (the client's request and the check of its answer; the server's accept key),
frames as each role writes them, and one reader of the peer's frames.

Why our own and not wsproto on the gateway's hot path: a server frame is never masked
(RFC 6455 §5.1), so a message's bytes are the same for every connection and are built once
(:func:`server_frame`), then written as they are; only the few frames clients send (pongs,
requests) need parsing, which :class:`FrameReader` does without per-frame objects beyond
the messages it returns. The load generator is the client role: thousands of clients share
one core there, so the reader is the same few byte reads per frame. No extension is
negotiated (no permessage-deflate): every frame has RSV bits clear.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

_GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

OP_CONTINUATION: Final = 0x0
OP_TEXT: Final = 0x1
OP_BINARY: Final = 0x2
OP_CLOSE: Final = 0x8
OP_PING: Final = 0x9
OP_PONG: Final = 0xA

# Close codes (RFC 6455 §7.4.1).
CLOSE_NORMAL: Final = 1000
CLOSE_PROTOCOL_ERROR: Final = 1002
CLOSE_INVALID_DATA: Final = 1007
CLOSE_TOO_BIG: Final = 1009
# Codes a peer may send (RFC 6455 §7.4; IANA's registry): the registered ones up to 2999,
# then 3000-4999 for libraries and applications. 1004-1006 and 1015 are reserved or
# may never go on the wire; anything else is a protocol error (answered with 1002).
_SENDABLE_CLOSE_CODES: Final = frozenset((1000, 1001, 1002, 1003, *range(1007, 1015)))
# Frames one fragmented message may take, when the reader is not told otherwise: the byte
# bound alone let a client send endless empty continuation frames, each costing a parse.
DEFAULT_MAX_FRAGMENTS: Final = 128


def valid_close_code(code: int) -> bool:
    """Whether a peer may send ``code`` in a close frame."""
    return code in _SENDABLE_CLOSE_CODES or 3000 <= code <= 4999


class Role(Enum):
    """Which end of the connection we are: it decides which frames are masked."""

    CLIENT = "client"
    SERVER = "server"


def accept_key(client_key: str) -> str:
    """``Sec-WebSocket-Accept`` for a client's ``Sec-WebSocket-Key``."""
    digest = hashlib.sha1(client_key.strip().encode("latin-1") + _GUID).digest()
    return base64.b64encode(digest).decode("ascii")


def valid_client_key(key: str | None) -> bool:
    """A ``Sec-WebSocket-Key`` is 16 random bytes in base64 (RFC 6455 §4.1)."""
    if not key:
        return False
    try:
        return len(base64.b64decode(key.strip(), validate=True)) == 16
    except ValueError:
        return False


def server_frame(opcode: int, payload: bytes) -> bytes:
    """One complete, unmasked server frame (FIN set)."""
    size = len(payload)
    head = 0x80 | opcode
    if size < 126:
        header = bytes((head, size))
    elif size < 65536:
        header = bytes((head, 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((head, 127)) + size.to_bytes(8, "big")
    return header + payload


def message_frame(message: str | bytes) -> bytes:
    """A text (str) or binary (bytes) message as one server frame."""
    if isinstance(message, str):
        return server_frame(OP_TEXT, message.encode("utf-8"))
    return server_frame(OP_BINARY, bytes(message))


def close_frame(code: int, reason: str = "") -> bytes:
    encoded = reason.encode("utf-8")[:123]  # a control frame's payload is at most 125 bytes
    return server_frame(OP_CLOSE, code.to_bytes(2, "big") + encoded)


def client_frame(opcode: int, payload: bytes, mask: bytes) -> bytes:
    """One complete frame as a client writes it: masked with the 4 bytes of ``mask``
    (RFC 6455 §5.3; the caller draws them, so this module stays free of I/O)."""
    size = len(payload)
    head = 0x80 | opcode
    if size < 126:
        header = bytes((head, 0x80 | size))
    elif size < 65536:
        header = bytes((head, 0x80 | 126)) + size.to_bytes(2, "big")
    else:
        header = bytes((head, 0x80 | 127)) + size.to_bytes(8, "big")
    return header + mask + _unmask(payload, mask)  # XOR both ways: masking is unmasking


def upgrade_request(host: str, target: str, key: str, headers: Mapping[str, str] | None = None) -> bytes:
    """The client's opening handshake (``Host`` as given, e.g. ``"127.0.0.1:8081"``); no
    extension is offered, so no frame will be compressed."""
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *(f"{name}: {value}" for name, value in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# The longest answer head a client waits for before giving up on the upgrade.
MAX_UPGRADE_HEAD: Final = 16384


def upgrade_answer_length(received: bytes | bytearray, key: str) -> int | None:
    """The length of the server's complete answer head at the start of ``received`` (frames
    may follow it in the same read), or None while the head is incomplete. Raises
    :class:`HandshakeRefused` unless it is a 101 that accepts ``key``."""
    end = received.find(b"\r\n\r\n")
    if end < 0:
        if len(received) > MAX_UPGRADE_HEAD:
            raise HandshakeRefused("upgrade answer head too long")
        return None
    status_line, *field_lines = bytes(received[:end]).decode("latin-1").split("\r\n")
    status = status_line.split(" ", 2)
    if len(status) < 2 or status[1] != "101":
        raise HandshakeRefused(f"upgrade refused: {status_line}")
    fields = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in field_lines)}
    if fields.get("sec-websocket-accept") != accept_key(key):
        raise HandshakeRefused("bad Sec-WebSocket-Accept")
    return end + 4


class WebSocketError(Exception):
    """The peer broke RFC 6455: close the connection with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class HandshakeRefused(WebSocketError):
    """The server did not accept the client's upgrade (no WebSocket, so no close frame)."""

    def __init__(self, message: str) -> None:
        super().__init__(CLOSE_PROTOCOL_ERROR, message)


@dataclass(frozen=True, slots=True)
class Ping:
    payload: bytes


@dataclass(frozen=True, slots=True)
class Close:
    code: int | None
    reason: str


# What FrameReader.feed returns: whole messages (str or bytes), pings to answer, the close.
Received = str | bytes | Ping | Close


def _unmask(payload: bytes, mask: bytes) -> bytes:
    size = len(payload)
    if not size:
        return b""
    key = int.from_bytes((mask * (size // 4 + 1))[:size], "big")
    return (int.from_bytes(payload, "big") ^ key).to_bytes(size, "big")


class FrameReader:
    """Parses the peer's frames; ``feed(data)`` returns what completed.

    ``our_role`` says which end we are: a server reads masked frames only, a client
    unmasked ones only (RFC 6455 §5.1); either is refused with 1002. ``max_message`` bounds
    a message (and so what is buffered): beyond it WebSocketError 1009 is raised before the
    rest arrives. ``max_fragments`` bounds the frames of one fragmented message: beyond it
    WebSocketError 1009 as well.
    """

    __slots__ = ("max_message", "max_fragments", "_masked", "_buffer", "_fragments", "_fragment_op", "_fragment_size")

    def __init__(
        self, max_message: int, our_role: Role = Role.SERVER, max_fragments: int = DEFAULT_MAX_FRAGMENTS
    ) -> None:
        self.max_message = max_message
        self.max_fragments = max_fragments
        self._masked = our_role is Role.SERVER
        self._buffer = b""
        self._fragments: list[bytes] | None = None
        self._fragment_op = 0
        self._fragment_size = 0

    def idle(self) -> bool:
        """Nothing held back: the next byte fed starts a new frame of a new message."""
        return not self._buffer and self._fragments is None

    def feed(self, data: bytes) -> list[Received]:
        buffer = self._buffer + data if self._buffer else bytes(data)
        masked = self._masked
        mask_size = 4 if masked else 0
        found: list[Received] = []
        offset = 0
        end = len(buffer)
        while end - offset >= 2:
            first, second = buffer[offset], buffer[offset + 1]
            if first & 0x70:
                raise WebSocketError(CLOSE_PROTOCOL_ERROR, "reserved bits set (no extension was negotiated)")
            if bool(second & 0x80) is not masked:
                raise WebSocketError(
                    CLOSE_PROTOCOL_ERROR,
                    "client frames must be masked" if masked else "server frames must not be masked",
                )
            size = second & 0x7F
            head = 2
            if size == 126:
                if end - offset < 4:
                    break
                size = int.from_bytes(buffer[offset + 2 : offset + 4], "big")
                head = 4
            elif size == 127:
                if end - offset < 10:
                    break
                size = int.from_bytes(buffer[offset + 2 : offset + 10], "big")
                head = 10
            opcode = first & 0x0F
            if opcode >= 0x8:
                if size > 125 or not first & 0x80:
                    raise WebSocketError(CLOSE_PROTOCOL_ERROR, "invalid control frame")
            elif self._fragment_size + size > self.max_message:
                raise WebSocketError(CLOSE_TOO_BIG, "message exceeds the maximum size")
            if end - offset < head + mask_size + size:
                break
            start = offset + head + mask_size
            payload = buffer[start : start + size]
            if masked:
                payload = _unmask(payload, buffer[offset + head : start])
            offset = start + size
            received = self._frame(first & 0x80 != 0, opcode, payload)
            if received is not None:
                found.append(received)
                if isinstance(received, Close):
                    offset = end  # nothing after a close counts
        self._buffer = buffer[offset:] if offset < end else b""
        return found

    def _frame(self, fin: bool, opcode: int, payload: bytes) -> Received | None:
        if opcode == OP_PING:
            return Ping(payload)
        if opcode == OP_PONG:
            return None
        if opcode == OP_CLOSE:
            return _close(payload)
        if opcode == OP_CONTINUATION:
            if self._fragments is None:
                raise WebSocketError(CLOSE_PROTOCOL_ERROR, "continuation without a message")
            if len(self._fragments) >= self.max_fragments:
                raise WebSocketError(CLOSE_TOO_BIG, "message split into too many frames")
            self._fragments.append(payload)
            self._fragment_size += len(payload)
            if not fin:
                return None
            payload, opcode = b"".join(self._fragments), self._fragment_op
            self._fragments, self._fragment_size = None, 0
        elif opcode in (OP_TEXT, OP_BINARY):
            if self._fragments is not None:
                raise WebSocketError(CLOSE_PROTOCOL_ERROR, "a new message inside a fragmented one")
            if not fin:
                self._fragments, self._fragment_op, self._fragment_size = [payload], opcode, len(payload)
                return None
        else:
            raise WebSocketError(CLOSE_PROTOCOL_ERROR, f"unknown opcode {opcode}")
        if opcode == OP_BINARY:
            return payload
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError:
            raise WebSocketError(CLOSE_INVALID_DATA, "text message is not UTF-8") from None


def _close(payload: bytes) -> Close:
    if not payload:
        return Close(None, "")
    if len(payload) == 1:
        raise WebSocketError(CLOSE_PROTOCOL_ERROR, "close payload of one byte")
    try:
        reason = payload[2:].decode("utf-8")
    except UnicodeDecodeError:
        raise WebSocketError(CLOSE_INVALID_DATA, "close reason is not UTF-8") from None
    code = int.from_bytes(payload[:2], "big")
    if not valid_close_code(code):
        raise WebSocketError(CLOSE_PROTOCOL_ERROR, f"close code {code} may not be sent")
    return Close(code, reason)
