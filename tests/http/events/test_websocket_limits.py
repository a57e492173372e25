"""WebSocket frames nobody may send, on both listeners (the gateway's own codec, the main
port's wsproto under Hypercorn), with raw sockets: close codes that may not go on the wire
are answered with 1002, and a message split into more frames than `[events]
max_message_frames` is refused with 1009 however small its frames."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator

import pytest
import trio

from tests.conftest import LiveServer, make_settings, served
from volthub.protocol.websocket import CLOSE_PROTOCOL_ERROR, CLOSE_TOO_BIG, OP_CLOSE

WAIT = 10.0
PATH = "/ws/events?EIO=4&transport=websocket"
OP_TEXT, OP_CONTINUATION = 0x1, 0x0


@pytest.fixture
async def server(database_url: str, nursery: trio.Nursery) -> AsyncIterator[LiveServer]:
    settings = make_settings(database_url, events={"max_message_frames": 16})
    async with served(nursery, settings) as server:
        yield server


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def listeners(server: LiveServer) -> dict[str, int]:
    return {"main port": port_of(server.url), "gateway": port_of(server.events_url)}


def client_frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    mask = os.urandom(4)
    assert len(payload) < 126
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    return bytes((0x80 * fin | opcode, 0x80 | len(payload))) + mask + masked


async def open_raw_websocket(port: int) -> tuple[trio.SocketStream, bytearray]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    await stream.send_all(
        f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    buffer = bytearray()
    while b"\r\n\r\n" not in buffer:
        chunk = await stream.receive_some()
        assert chunk, bytes(buffer)
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    return stream, bytearray(rest)


async def close_code_sent(stream: trio.SocketStream, buffer: bytearray) -> int:
    """Read the server's frames (unmasked, short) until its close frame; its code."""
    while True:
        while len(buffer) >= 2:
            size = buffer[1] & 0x7F
            head = 2 + (2 if size == 126 else 8 if size == 127 else 0)
            if size >= 126:
                if len(buffer) < head:
                    break
                size = int.from_bytes(buffer[2:head], "big")
            if len(buffer) < head + size:
                break
            opcode, payload = buffer[0] & 0x0F, bytes(buffer[head : head + size])
            del buffer[: head + size]
            if opcode == OP_CLOSE:
                return int.from_bytes(payload[:2], "big")
        chunk = await stream.receive_some()
        if not chunk:
            raise EOFError("the server closed without a close frame")
        buffer += chunk


async def close_codes_after(server: LiveServer, frames: bytes) -> dict[str, int]:
    """Each listener's close code for a fresh WebSocket that sent `frames`."""
    codes = {}
    for name, port in listeners(server).items():
        stream, buffer = await open_raw_websocket(port)
        with trio.fail_after(WAIT):
            await stream.send_all(frames)
            codes[name] = await close_code_sent(stream, buffer)
        await stream.aclose()
    return codes


@pytest.mark.parametrize("code", [0, 999, 1005, 1015, 2000, 5000])
async def test_a_close_code_nobody_may_send_is_answered_with_1002(server: LiveServer, code: int) -> None:
    codes = await close_codes_after(server, client_frame(OP_CLOSE, code.to_bytes(2, "big")))
    assert codes == dict.fromkeys(listeners(server), CLOSE_PROTOCOL_ERROR)


async def test_a_valid_close_code_is_still_echoed(server: LiveServer) -> None:
    codes = await close_codes_after(server, client_frame(OP_CLOSE, (4000).to_bytes(2, "big")))
    assert codes == dict.fromkeys(listeners(server), 4000)


async def test_a_message_of_too_many_empty_frames_is_refused_with_1009(server: LiveServer) -> None:
    frames = client_frame(OP_TEXT, b"", fin=False) + client_frame(OP_CONTINUATION, b"", fin=False) * 40
    assert await close_codes_after(server, frames) == dict.fromkeys(listeners(server), CLOSE_TOO_BIG)


async def test_a_message_within_the_frame_cap_is_read(server: LiveServer) -> None:
    """A Socket.IO connect split over the allowed frames is answered on both listeners."""
    for name, port in listeners(server).items():
        stream, buffer = await open_raw_websocket(port)
        frames = client_frame(OP_TEXT, b"4", fin=False) + client_frame(OP_CONTINUATION, b"", fin=False) * 14
        with trio.fail_after(WAIT):
            await stream.send_all(frames + client_frame(OP_CONTINUATION, b"0"))
            while b'40{"sid"' not in buffer:
                chunk = await stream.receive_some()
                assert chunk, name
                buffer += chunk
        await stream.aclose()
