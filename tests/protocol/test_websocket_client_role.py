"""The WebSocket codec in the client role (what the load generator speaks): the opening
handshake, masked frames out, unmasked server frames in, and the two roles reading each other."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.protocol.websocket import (
    CLOSE_PROTOCOL_ERROR,
    OP_CONTINUATION,
    OP_PING,
    OP_TEXT,
    Close,
    FrameReader,
    HandshakeRefused,
    Ping,
    Role,
    WebSocketError,
    accept_key,
    client_frame,
    close_frame,
    server_frame,
    upgrade_answer_length,
    upgrade_request,
)

MASK = b"\xaa\xbb\xcc\xdd"
KEY = "dGhlIHNhbXBsZSBub25jZQ=="


def fragment(opcode: int, payload: bytes, *, fin: bool) -> bytes:
    """An unmasked server frame whose FIN bit is `fin` (server_frame always sets it)."""
    whole = server_frame(opcode, payload)
    return bytes((whole[0] & 0x7F if not fin else whole[0],)) + whole[1:]


def client_reader() -> FrameReader:
    return FrameReader(1 << 24, Role.CLIENT)


def test_server_frames_of_every_length_encoding_are_read() -> None:
    payloads = ["", "2", "x" * 125, "y" * 126, "z" * 65535, "w" * 65536]
    data = b"".join(server_frame(OP_TEXT, payload.encode()) for payload in payloads)
    assert client_reader().feed(data) == payloads


def test_a_frame_split_anywhere_comes_out_once_it_is_complete() -> None:
    frame = server_frame(OP_TEXT, b'42["event",{"a":1}]')
    for cut in range(1, len(frame)):
        reader = client_reader()
        assert reader.feed(frame[:cut]) == []
        assert not reader.idle()
        assert reader.feed(frame[cut:]) == ['42["event",{"a":1}]']
        assert reader.idle()


@given(
    st.lists(st.text(max_size=300), min_size=1, max_size=8),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40),
)
def test_any_chunking_yields_the_same_messages(payloads: list[str], sizes: list[int]) -> None:
    stream = b"".join(server_frame(OP_TEXT, payload.encode()) for payload in payloads)
    reader = client_reader()
    out: list[object] = []
    position, index = 0, 0
    while position < len(stream):
        size = sizes[index % len(sizes)]
        out += reader.feed(stream[position : position + size])
        position += size
        index += 1
    assert out == payloads


def test_fragments_are_joined_and_control_frames_may_interleave() -> None:
    data = (
        fragment(OP_TEXT, b"hel", fin=False)
        + server_frame(OP_PING, b"ping")
        + fragment(OP_CONTINUATION, b"lo ", fin=False)
        + fragment(OP_CONTINUATION, b"world", fin=True)
    )
    assert client_reader().feed(data) == [Ping(b"ping"), "hello world"]


def test_a_close_is_read_with_its_code() -> None:
    assert client_reader().feed(close_frame(1001, "going away")) == [Close(1001, "going away")]


def test_a_masked_server_frame_is_refused() -> None:
    with pytest.raises(WebSocketError) as refused:
        client_reader().feed(client_frame(OP_TEXT, b"masked text", MASK))
    assert refused.value.code == CLOSE_PROTOCOL_ERROR


@pytest.mark.parametrize("size", [0, 1, 5, 125, 126, 70000])
def test_client_frames_are_masked_and_the_server_role_reads_them_back(size: int) -> None:
    payload = (bytes(range(97, 123)) * (size // 26 + 1))[:size]
    frame = client_frame(OP_TEXT, payload, MASK)
    assert frame[1] & 0x80, "a client must mask"
    assert MASK in frame[:14]
    assert FrameReader(1 << 24).feed(frame) == [payload.decode()]


def test_the_opening_handshake_and_its_answer() -> None:
    request = upgrade_request("127.0.0.1:8081", "/ws/events/?EIO=4&transport=websocket", KEY, {"Origin": "x"})
    assert request.startswith(b"GET /ws/events/?EIO=4&transport=websocket HTTP/1.1\r\nHost: 127.0.0.1:8081\r\n")
    assert f"Sec-WebSocket-Key: {KEY}".encode() in request and b"\r\nOrigin: x\r\n" in request
    assert request.endswith(b"\r\n\r\n") and b"permessage-deflate" not in request
    answer = (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept_key(KEY)}\r\n\r\n"
    ).encode()
    assert upgrade_answer_length(answer[:20], KEY) is None
    assert upgrade_answer_length(answer + server_frame(OP_TEXT, b"0{}"), KEY) == len(answer)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: wrong\r\n\r\n",
        b"HTTP/1.1 101 " + b"x" * 20_000,
    ],
)
def test_refused_forged_or_endless_answers_raise(answer: bytes) -> None:
    with pytest.raises(HandshakeRefused):
        upgrade_answer_length(answer, KEY)
