"""Raw ASGI plumbing for the Engine.IO adapter: message shapes, headers, bodies, refusals.

Kept apart from :mod:`volthub.http.events.engineio` so that module reads as the endpoint's
transport logic (polling, WebSocket, upgrade) without the byte-level details.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

import orjson
import trio

from volthub.protocol.engineio.handshake import HttpError
from volthub.protocol.engineio.packets import Frame
from volthub.protocol.websocket import message_frame

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# WebSocket close codes (RFC 6455 §7.4.1).
CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_PROTOCOL_ERROR: Final = 1002
CLOSE_TOO_BIG: Final = 1009
CLOSE_INTERNAL_ERROR: Final = 1011
CLOSE_TRY_AGAIN_LATER: Final = 1013
# A polling POST body must arrive within this long, or the POST is dropped.
BODY_TIMEOUT_SECONDS: Final = 30.0
TEXT_PLAIN: Final = [(b"content-type", b"text/plain; charset=UTF-8")]
JSON_BODY: Final = [(b"content-type", b"application/json")]


class Refusal(Exception):
    """An HTTP refusal outside the Engine.IO error set (status, JSON body, headers)."""

    def __init__(self, status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
        super().__init__(body.get("message", ""))
        self.status = status
        self.body = orjson.dumps(body)
        self.headers = dict(headers or {})


def refusal_headers(refusal: HttpError | Refusal) -> list[tuple[bytes, bytes]]:
    """The headers of a refusal's JSON answer: a Refusal may carry its own (Retry-After)."""
    return JSON_BODY + encode_headers(refusal.headers) if isinstance(refusal, Refusal) else JSON_BODY


def query_params(scope: Scope) -> dict[str, str]:
    """First value of each query parameter (Engine.IO sends each once)."""
    raw = scope.get("query_string", b"").decode("latin-1")
    found: dict[str, str] = {}
    for key, value in parse_qsl(raw, keep_blank_values=True):
        found.setdefault(key, value)
    return found


def header(scope: Scope, name: bytes) -> str | None:
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers", ())
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def encode_headers(headers: Mapping[str, str]) -> list[tuple[bytes, bytes]]:
    return [(key.lower().encode("latin-1"), value.encode("latin-1")) for key, value in headers.items()]


def message_data(message: Mapping[str, Any]) -> Frame:
    text = message.get("text")
    return text if text is not None else bytes(message.get("bytes") or b"")


async def send_frame(send: Send, frame: Frame) -> None:
    if isinstance(frame, str):
        await send({"type": "websocket.send", "text": frame})
    else:
        await send({"type": "websocket.send", "bytes": frame})


# ---------------------------------------------------------------------- pre-built frames
#
# A server's WebSocket frame is unmasked (RFC 6455 §5.1), so the bytes of one message are
# the same for every connection: a frame fanned out to thousands of sockets is framed once
# (cached by its str object, which every subscriber shares) and a connection's queued
# frames go out as one write, instead of one ASGI message, one wsproto encode, one lock and
# one send_all per frame through Hypercorn. A message without the RSV1 bit is valid with
# or without permessage-deflate, so this holds whatever the client negotiated.

_FRAME_CACHE_SIZE: Final = 1024
_frame_cache: dict[str | bytes, bytes] = {}


def websocket_frame(frame: Frame) -> bytes:
    """The complete server-to-client WebSocket message of ``frame`` (text or binary)."""
    found = _frame_cache.get(frame)
    if found is not None:
        return found
    encoded = message_frame(frame)
    if len(_frame_cache) >= _FRAME_CACHE_SIZE:
        _frame_cache.clear()  # fan-out frames are hot for a moment only
    _frame_cache[frame] = encoded
    return encoded


RawWrite = Callable[[bytes], Awaitable[None]]


def raw_websocket_writer(send: Send) -> RawWrite | None:
    """A way to write pre-built WebSocket frames to the connection behind ``send``, when
    the server is Hypercorn (its WebSocket stream hands data bytes to the connection as
    they are); None elsewhere, and the frames then go one by one as ASGI messages."""
    stream = getattr(send, "__self__", None)
    if type(stream).__module__ != "hypercorn.protocol.ws_stream":
        return None
    try:
        from hypercorn.protocol.events import Data
    except ImportError:  # pragma: no cover - another Hypercorn layout
        return None
    stream_send = getattr(stream, "send", None)
    stream_id = getattr(stream, "stream_id", None)
    if stream_send is None or stream_id is None:
        return None

    async def write(data: bytes) -> None:
        await stream_send(Data(stream_id=stream_id, data=data))

    return write


async def close_websocket(send: Send, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):  # already closed by the peer: nothing to tell it
        await send({"type": "websocket.close", "code": code, "reason": reason})


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The request body, cut at ``limit`` bytes (enough to tell it is too big); None when
    the client went away or was too slow."""
    chunks: list[bytes] = []
    size = 0
    with trio.move_on_after(BODY_TIMEOUT_SECONDS):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            if size < limit:
                chunks.append(chunk[: limit - size])
            size += len(chunk)
            if size >= limit or not message.get("more_body", False):
                return b"".join(chunks)
    return None


async def wait_unless_disconnected(receive: Receive, waiting: Awaitable[None]) -> bool:
    """Await ``waiting``; True if the client disconnected first (then it is abandoned)."""
    dropped = False

    async def watch(cancel: trio.CancelScope) -> None:
        nonlocal dropped
        while (await receive())["type"] != "http.disconnect":
            pass
        dropped = True
        cancel.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        await waiting
        nursery.cancel_scope.cancel()
    return dropped


async def answer_lifespan(receive: Receive, send: Send) -> None:
    """An ASGI app's lifespan with nothing to start or stop: each event is completed at once,
    until shutdown."""
    while True:
        kind = (await receive())["type"].rsplit(".", 1)[-1]  # lifespan.startup / lifespan.shutdown
        await send({"type": f"lifespan.{kind}.complete"})
        if kind == "shutdown":
            return
