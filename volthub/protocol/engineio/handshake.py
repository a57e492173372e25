"""Validation of the HTTP request that reaches an Engine.IO endpoint (sans-IO).

:func:`validate_request` looks only at the method, the query and whether the request is
a WebSocket upgrade, and returns either an :class:`EngineIORequest` saying what the
adapter must do with it or an :class:`HttpError` to answer with (a WebSocket request
that fails is refused or closed). Session-level refusals (a second pending GET, polling
after an upgrade) come from the session itself, with the same :class:`HttpError` shape.

CORS preflight (``OPTIONS``) is the adapter's business and must be answered before this.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final

import orjson

POLLING: Final = "polling"
WEBSOCKET: Final = "websocket"
TRANSPORTS: Final = (POLLING, WEBSOCKET)


class ErrorCode(IntEnum):
    """The error codes of the Engine.IO reference server, sent as ``{"code", "message"}``."""

    UNKNOWN_TRANSPORT = 0
    UNKNOWN_SID = 1
    BAD_HANDSHAKE_METHOD = 2
    BAD_REQUEST = 3
    FORBIDDEN = 4
    UNSUPPORTED_PROTOCOL_VERSION = 5


_MESSAGES: Final = {
    ErrorCode.UNKNOWN_TRANSPORT: "Transport unknown",
    ErrorCode.UNKNOWN_SID: "Session ID unknown",
    ErrorCode.BAD_HANDSHAKE_METHOD: "Bad handshake method",
    ErrorCode.BAD_REQUEST: "Bad request",
    ErrorCode.FORBIDDEN: "Forbidden",
    ErrorCode.UNSUPPORTED_PROTOCOL_VERSION: "Unsupported protocol version",
}


@dataclass(frozen=True, slots=True)
class HttpError:
    """An Engine.IO error response: HTTP status plus the JSON body clients expect."""

    status: int
    code: ErrorCode
    message: str

    @property
    def body(self) -> bytes:
        return orjson.dumps({"code": int(self.code), "message": self.message})


def http_error(code: ErrorCode, *, status: int | None = None) -> HttpError:
    """The response for ``code``: 403 for FORBIDDEN, 400 otherwise, unless ``status``."""
    if status is None:
        status = 403 if code is ErrorCode.FORBIDDEN else 400
    return HttpError(status, code, _MESSAGES[code])


class RequestKind(Enum):
    OPEN = "open"  # no sid: create a session on this transport (polling GET or WebSocket)
    POLL = "poll"  # polling GET of an existing session: wait for data to send
    SEND = "send"  # polling POST of an existing session: a payload from the client
    UPGRADE = "upgrade"  # WebSocket for an existing polling session: probe, then upgrade


@dataclass(frozen=True, slots=True)
class EngineIORequest:
    kind: RequestKind
    transport: str
    sid: str | None


def validate_request(
    method: str,
    query: Mapping[str, str],
    *,
    websocket: bool,
    sessions: Container[str],
    transports: Collection[str] = TRANSPORTS,
) -> EngineIORequest | HttpError:
    """Classify an Engine.IO request, or say why it is refused.

    ``query`` maps each query parameter to its (first) value; ``websocket`` is true for a
    WebSocket upgrade request; ``sessions`` answers ``sid in sessions`` for live sessions;
    ``transports`` are the transports this server enables.
    """
    if _param(query, "EIO") != "4":
        return http_error(ErrorCode.UNSUPPORTED_PROTOCOL_VERSION)
    transport = _param(query, "transport")
    if transport not in TRANSPORTS or transport not in transports:
        return http_error(ErrorCode.UNKNOWN_TRANSPORT)
    if websocket != (transport == WEBSOCKET):
        # An HTTP request naming the websocket transport, or a WebSocket naming polling.
        return http_error(ErrorCode.BAD_REQUEST)
    if _param(query, "j") is not None:
        return http_error(ErrorCode.BAD_REQUEST)  # JSONP polling is not served
    method = method.upper() if isinstance(method, str) else ""
    sid = _param(query, "sid")
    if not sid:  # as the reference server does, an empty sid means "no session yet"
        if method != "GET":
            return http_error(ErrorCode.BAD_HANDSHAKE_METHOD)
        return EngineIORequest(RequestKind.OPEN, transport, None)
    if sid not in sessions:
        return http_error(ErrorCode.UNKNOWN_SID)
    if websocket:
        return EngineIORequest(RequestKind.UPGRADE, transport, sid)
    if method == "GET":
        return EngineIORequest(RequestKind.POLL, transport, sid)
    if method == "POST":
        return EngineIORequest(RequestKind.SEND, transport, sid)
    return http_error(ErrorCode.BAD_REQUEST)


def _param(query: Mapping[str, str], name: str) -> str | None:
    # Tolerate mappings whose values are lists (parse_qs) as well as plain strings.
    value = query.get(name)
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    return value if isinstance(value, str) else None
