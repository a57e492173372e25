"""Socket.IO binary packets (BINARY_EVENT, BINARY_ACK), opt-in (sans-IO).

The product refuses binary packets (see :mod:`.socketio`); the conformance mode serves the
official protocol test-suite, which sends and expects them, so it uses
:class:`BinarySocketIOSession`. Encoding: ``5<n>-[<namespace>,][<ack id>]<JSON>`` where each
binary value is replaced by ``{"_placeholder": true, "num": i}``, followed by the ``n``
attachments, each in its own Engine.IO binary message.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Final

import orjson

from volthub.protocol.engineio.packets import Frame
from volthub.protocol.engineio.session import Event, Settings
from volthub.protocol.socketio.packets import (
    RESERVED_EVENTS,
    Packet,
    PacketType,
    SocketIOProtocolError,
    _checked_ack_id,
    _namespace_prefix,
    _read_ack_id,
    _read_namespace,
    _read_payload,
)
from volthub.protocol.socketio.session import SocketIOSession

# Attachments one packet may announce; the reference has no limit, state needs one.
MAX_ATTACHMENTS: Final = 64
# Nesting walked when replacing placeholders; deeper binary packets are refused.
MAX_DEPTH: Final = 64
_MAX_COUNT_DIGITS: Final = 3


@dataclass(frozen=True, slots=True)
class BinaryHeader:
    """A decoded binary packet still waiting for its attachments."""

    packet: Packet  # data holds the placeholders
    attachments: int


def decode_binary_header(text: str) -> BinaryHeader:
    """Decode the text part of a BINARY_EVENT (``5``) or BINARY_ACK (``6``) packet."""
    if not text or text[0] not in "56":
        raise SocketIOProtocolError("not a binary packet")
    kind = PacketType.BINARY_EVENT if text[0] == "5" else PacketType.BINARY_ACK
    dash = text.find("-", 1, 2 + _MAX_COUNT_DIGITS)
    digits = text[1:dash] if dash != -1 else ""
    if not digits or not all("0" <= c <= "9" for c in digits):
        raise SocketIOProtocolError("invalid attachment count")
    count = int(digits)
    if count > MAX_ATTACHMENTS:
        raise SocketIOProtocolError("too many attachments")
    namespace, pos = _read_namespace(text, dash + 1)
    ack_id, pos = _read_ack_id(text, pos)
    data = _read_payload(text, pos)
    if kind is PacketType.BINARY_EVENT:
        ok = isinstance(data, list) and bool(data) and isinstance(data[0], str) and data[0] not in RESERVED_EVENTS
    else:
        ok = ack_id is not None and isinstance(data, list)
    if not ok:
        raise SocketIOProtocolError(f"invalid payload for {kind.name}")
    return BinaryHeader(Packet(kind, namespace, data, ack_id), count)


def reconstruct(data: Any, attachments: list[bytes], depth: int = 0) -> Any:
    """Replace every placeholder in ``data`` with its attachment."""
    if depth > MAX_DEPTH:
        raise SocketIOProtocolError("binary packet nested too deeply")
    if isinstance(data, list):
        return [reconstruct(item, attachments, depth + 1) for item in data]
    if isinstance(data, dict):
        if data.get("_placeholder") is True:
            num = data.get("num")
            if isinstance(num, bool) or not isinstance(num, int) or not 0 <= num < len(attachments):
                raise SocketIOProtocolError("invalid attachment placeholder")
            return attachments[num]
        return {key: reconstruct(value, attachments, depth + 1) for key, value in data.items()}
    return data


def has_binary(data: Any, depth: int = 0) -> bool:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return True
    if depth > MAX_DEPTH:
        return False
    if isinstance(data, (list, tuple)):
        return any(has_binary(item, depth + 1) for item in data)
    if isinstance(data, dict):
        return any(has_binary(value, depth + 1) for value in data.values())
    return False


def _deconstruct(data: Any, attachments: list[bytes]) -> Any:
    if isinstance(data, (bytes, bytearray, memoryview)):
        attachments.append(bytes(data))
        return {"_placeholder": True, "num": len(attachments) - 1}
    if isinstance(data, (list, tuple)):
        return [_deconstruct(item, attachments) for item in data]
    if isinstance(data, dict):
        return {key: _deconstruct(value, attachments) for key, value in data.items()}
    return data


def encode_binary_frames(kind: PacketType, namespace: str, data: list[Any], ack_id: int | None = None) -> list[Frame]:
    """The Engine.IO frames of a binary packet: its text frame, then each attachment."""
    if kind not in (PacketType.BINARY_EVENT, PacketType.BINARY_ACK):
        raise ValueError("not a binary packet type")
    attachments: list[bytes] = []
    payload = _deconstruct(data, attachments)
    head = f"4{int(kind)}{len(attachments)}-{_namespace_prefix(namespace)}"
    if ack_id is not None:
        head += str(_checked_ack_id(ack_id))
    return [head + orjson.dumps(payload).decode("utf-8"), *attachments]


class BinarySocketIOSession(SocketIOSession):
    """A Socket.IO session that also takes and sends binary packets."""

    __slots__ = ("_partial", "_attachments", "_attachment_bytes")

    def __init__(
        self,
        sid: str,
        settings: Settings,
        transport: str,
        now: float,
        *,
        namespaces: Container[str] | None = None,
    ) -> None:
        super().__init__(sid, settings, transport, now, namespaces=namespaces)
        self._partial: BinaryHeader | None = None
        self._attachments: list[bytes] = []
        self._attachment_bytes = 0

    def _on_message(self, data: str | bytes, now: float) -> list[Event]:
        if self._partial is not None:
            return self._on_attachment(data)
        if isinstance(data, str) and data[:1] in ("5", "6"):
            header = decode_binary_header(data)
            if header.attachments == 0:
                return self._on_packet(header.packet)
            self._partial = header
            return []
        return super()._on_message(data, now)

    def _on_attachment(self, data: str | bytes) -> list[Event]:
        assert self._partial is not None
        if not isinstance(data, bytes):
            raise SocketIOProtocolError("expected a binary attachment")
        self._attachments.append(data)
        self._attachment_bytes += len(data)
        if self._attachment_bytes > self.settings.max_payload:
            raise SocketIOProtocolError("attachments exceed maxPayload", http_status=413)
        if len(self._attachments) < self._partial.attachments:
            return []
        header, attachments = self._partial, self._attachments
        self._partial, self._attachments, self._attachment_bytes = None, [], 0
        packet = header.packet
        data_ = reconstruct(packet.data, attachments)
        return self._on_packet(Packet(packet.type, packet.namespace, data_, packet.ack_id))

    def emit(self, namespace: str, name: str, *args: Any, ack_id: int | None = None) -> bool:
        if not has_binary(args):
            return super().emit(namespace, name, *args, ack_id=ack_id)
        if not isinstance(name, str) or name in RESERVED_EVENTS:
            raise ValueError(f"invalid event name {name!r}")
        if self.closed or namespace not in self._joined:
            return False
        for frame in encode_binary_frames(PacketType.BINARY_EVENT, namespace, [name, *args], ack_id):
            self.send_frame(frame)
        if ack_id is not None:
            self._awaited_acks |= {(namespace, ack_id)}
        return True

    def ack(self, namespace: str, ack_id: int, args: list[Any] | tuple[Any, ...] = ()) -> bool:
        if not has_binary(args):
            return super().ack(namespace, ack_id, args)
        if self.closed or namespace not in self._joined:
            return False
        for frame in encode_binary_frames(PacketType.BINARY_ACK, namespace, list(args), ack_id):
            self.send_frame(frame)
        return True
