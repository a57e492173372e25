"""The generator's own WebSocket client: what `receive` returns from a server's bytes, read
from a TCP socket's descriptor or through another stream's API."""

from __future__ import annotations

import functools

import pytest
import trio
import trio.testing

from volthub.loadtest.client import RawWebSocket
from volthub.protocol.websocket import OP_PING, OP_PONG, OP_TEXT, server_frame


def pong_payload(frame: bytes) -> bytes:
    """The payload of a client's pong, unmasked (the server's reader drops pongs unread)."""
    assert frame[0] == 0x80 | OP_PONG and frame[1] & 0x80, "a final, masked pong"
    mask, payload = frame[2:6], frame[6 : 6 + (frame[1] & 0x7F)]
    return bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))


async def _script(stream: trio.abc.Stream) -> list[bytes]:
    """Half a text frame, the rest with a ping behind it, a second text, then EOF; what the
    client wrote back meanwhile."""
    hello = server_frame(OP_TEXT, b"hello")
    await stream.send_all(hello[:3])
    await trio.sleep(0.05)  # the client reads the half on its own
    await stream.send_all(hello[3:] + server_frame(OP_PING, b"beat"))
    answered = await stream.receive_some(1024)
    await stream.send_all(server_frame(OP_TEXT, b"again"))
    await stream.send_eof() if isinstance(stream, trio.SocketStream) else await stream.aclose()
    return [answered]


async def _received(socket: RawWebSocket) -> list[list[str]]:
    found = []
    while texts := await socket.receive():
        found.append(texts)
    return found


async def test_frames_read_from_a_tcp_sockets_descriptor() -> None:
    async with trio.open_nursery() as nursery:
        written: list[bytes] = []

        async def serve(stream: trio.SocketStream) -> None:
            written.extend(await _script(stream))

        listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        socket = RawWebSocket(await trio.open_tcp_stream("127.0.0.1", port))
        assert socket._fd is not None
        assert await _received(socket) == [["hello"], ["again"]]
        await socket.aclose()
        nursery.cancel_scope.cancel()
    assert pong_payload(written[0]) == b"beat"


@pytest.mark.parametrize("close_first", [False, True])
async def test_frames_read_through_a_stream_that_is_not_a_socket(close_first: bool) -> None:
    client, server = trio.testing.memory_stream_pair()
    socket = RawWebSocket(client)
    assert socket._fd is None
    if close_first:
        await server.aclose()
        assert await socket.receive() == []
        return
    async with trio.open_nursery() as nursery:
        written: list[bytes] = []

        async def serve() -> None:
            written.extend(await _script(server))

        nursery.start_soon(serve)
        assert await _received(socket) == [["hello"], ["again"]]
    assert pong_payload(written[0]) == b"beat"


async def test_a_connection_the_server_resets_reads_as_closed() -> None:
    async with trio.open_nursery() as nursery:

        async def serve(stream: trio.SocketStream) -> None:
            stream.socket.setsockopt(trio.socket.SOL_SOCKET, trio.socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            await stream.send_all(server_frame(OP_TEXT, b"bye"))
            stream.socket.close()  # linger 0: the client gets a reset

        listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        socket = RawWebSocket(await trio.open_tcp_stream("127.0.0.1", listeners[0].socket.getsockname()[1]))
        texts = await socket.receive()
        assert texts in (["bye"], [])  # the text may arrive before the reset, or be lost to it
        assert await socket.receive() == []
        await socket.aclose()
        nursery.cancel_scope.cancel()
