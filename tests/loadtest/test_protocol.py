"""The generator's sans-IO wire code: WebSocket frames, Engine.IO/Socket.IO packets, SSE."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from volthub.loadtest import protocol as p


def server_frame(opcode: int, payload: bytes, fin: bool = True, mask: bytes | None = None) -> bytes:
    """A frame as a server writes it (unmasked unless `mask`)."""
    first = (0x80 if fin else 0) | opcode
    mask_bit = 0x80 if mask else 0
    length = len(payload)
    if length < 126:
        head = struct.pack("!BB", first, mask_bit | length)
    elif length < 65536:
        head = struct.pack("!BBH", first, mask_bit | 126, length)
    else:
        head = struct.pack("!BBQ", first, mask_bit | 127, length)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return head + mask + payload
    return head + payload


def unmask_client_frame(frame: bytes) -> tuple[int, bytes]:
    parser = p.FrameParser()  # the parser tolerates masked frames, so it can read ours back
    [(opcode, payload)] = parser.feed(frame)
    return opcode, payload


def test_frames_of_every_length_encoding() -> None:
    parser = p.FrameParser()
    payloads = [b"", b"2", b"x" * 125, b"y" * 126, b"z" * 65535, b"w" * 65536]
    data = b"".join(server_frame(p.OP_TEXT, payload) for payload in payloads)
    assert parser.feed(data) == [(p.OP_TEXT, payload) for payload in payloads]


def test_a_frame_split_anywhere_comes_out_once_it_is_complete() -> None:
    frame = server_frame(p.OP_TEXT, b'42["event",{"a":1}]')
    for cut in range(1, len(frame)):
        parser = p.FrameParser()
        assert parser.feed(frame[:cut]) == []
        assert parser.feed(frame[cut:]) == [(p.OP_TEXT, b'42["event",{"a":1}]')]


@given(
    st.lists(st.binary(max_size=300), min_size=1, max_size=8),
    st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40),
)
def test_any_chunking_yields_the_same_messages(payloads: list[bytes], sizes: list[int]) -> None:
    stream = b"".join(server_frame(p.OP_TEXT, payload) for payload in payloads)
    parser = p.FrameParser()
    out: list[tuple[int, bytes]] = []
    position, index = 0, 0
    while position < len(stream):
        size = sizes[index % len(sizes)]
        out += parser.feed(stream[position : position + size])
        position += size
        index += 1
    assert out == [(p.OP_TEXT, payload) for payload in payloads]


def test_fragments_are_joined_and_control_frames_may_interleave() -> None:
    data = (
        server_frame(p.OP_TEXT, b"hel", fin=False)
        + server_frame(p.OP_PING, b"ping")
        + server_frame(p.OP_CONTINUATION, b"lo ", fin=False)
        + server_frame(p.OP_CONTINUATION, b"world")
    )
    assert p.FrameParser().feed(data) == [(p.OP_PING, b"ping"), (p.OP_TEXT, b"hello world")]


def test_a_stray_continuation_is_an_error() -> None:
    with pytest.raises(p.WebSocketError):
        p.FrameParser().feed(server_frame(p.OP_CONTINUATION, b"x"))


def test_a_masked_server_frame_is_still_read() -> None:
    frame = server_frame(p.OP_TEXT, b"masked text", mask=b"\x01\x02\x03\x04")
    assert p.FrameParser().feed(frame) == [(p.OP_TEXT, b"masked text")]


@pytest.mark.parametrize("size", [0, 1, 5, 125, 126, 70000])
def test_client_frames_are_masked_and_read_back(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    frame = p.encode_frame(p.OP_TEXT, payload, mask=b"\xaa\xbb\xcc\xdd")
    assert frame[1] & 0x80, "a client must mask"
    assert unmask_client_frame(frame) == (p.OP_TEXT, payload)


def test_upgrade_request_and_response() -> None:
    key = p.new_key()
    request = p.upgrade_request("127.0.0.1", 8080, "/ws/events/?EIO=4&transport=websocket", key)
    assert request.startswith(b"GET /ws/events/?EIO=4&transport=websocket HTTP/1.1\r\n")
    assert f"Sec-WebSocket-Key: {key}".encode() in request and request.endswith(b"\r\n\r\n")
    assert b"permessage-deflate" not in request
    head = (
        f"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {p.accept_for(key)}\r\n\r\n"
    ).encode()
    assert p.parse_upgrade_response(head[:20], key) is None
    assert p.parse_upgrade_response(head + b"\x81\x01x", key) == len(head)


def test_rfc6455_accept_example() -> None:
    assert p.accept_for("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: wrong\r\n\r\n",
    ],
)
def test_refused_or_forged_upgrades_raise(head: bytes) -> None:
    with pytest.raises(p.WebSocketError):
        p.parse_upgrade_response(head, p.new_key())


def test_engineio_target_and_open_packet() -> None:
    assert p.engineio_target("/ws/events") == "/ws/events/?EIO=4&transport=websocket"
    assert p.engineio_target("/socket.io/", "t") == "/socket.io/?EIO=4&transport=websocket&token=t"
    handshake = p.parse_open('0{"sid":"abc","upgrades":[],"pingInterval":25000,"pingTimeout":20000}')
    assert handshake["sid"] == "abc" and handshake["pingInterval"] == 25000
    for bad in ('40{"sid":"x"}', "0not json", '0{"upgrades":[]}'):
        with pytest.raises(p.ProtocolError):
            p.parse_open(bad)


def test_connect_packets() -> None:
    assert p.connect_packet("/", {"token": "abc"}) == '40{"token":"abc"}'
    assert p.connect_packet("/ws/events", {"token": "abc"}) == '40/ws/events,{"token":"abc"}'
    assert p.connect_packet() == "40"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('40{"sid":"s1"}', p.SioPacket(p.SIO_CONNECT, "/", None, {"sid": "s1"})),
        ('40/ws/events,{"sid":"s1"}', p.SioPacket(p.SIO_CONNECT, "/ws/events", None, {"sid": "s1"})),
        (
            '42["event",{"event":"chat.message"}]',
            p.SioPacket(p.SIO_EVENT, "/", None, ["event", {"event": "chat.message"}]),
        ),
        ('42/ws/events,7["x",1]', p.SioPacket(p.SIO_EVENT, "/ws/events", 7, ["x", 1])),
        ('44{"message":"invalid token"}', p.SioPacket(p.SIO_CONNECT_ERROR, "/", None, {"message": "invalid token"})),
        ("41", p.SioPacket(p.SIO_DISCONNECT, "/", None, None)),
        ("41/ws/events,", p.SioPacket(p.SIO_DISCONNECT, "/ws/events", None, None)),
    ],
)
def test_socketio_packets(text: str, expected: p.SioPacket) -> None:
    assert p.parse_socketio(text) == expected


@pytest.mark.parametrize("text", ["2", "4", "4x", '42["unterminated"'])
def test_bad_socketio_packets(text: str) -> None:
    with pytest.raises(p.ProtocolError):
        p.parse_socketio(text)


def test_event_prefixes_match_what_servers_send() -> None:
    assert '42["event",{"event":"chat.message"}]'.startswith(p.event_prefix("/", "event"))
    assert '42/ws/events,["chat.message",{}]'.startswith(p.event_prefix("/ws/events", "chat.message"))
    assert not '42["events",{}]'.startswith(p.event_prefix("/", "event"))


def test_sse_parser_across_chunks() -> None:
    parser = p.SseParser()
    stream = (
        b': keep-alive\n\nevent: connected\ndata: {"channelUsername":"a"}\n\n'
        b'event: chat.message\r\nid: 17\r\ndata: {"x":\r\ndata: 1}\r\n\r\ndata: plain\n\n'
    )
    events: list[p.SseEvent] = []
    for index in range(0, len(stream), 7):
        events += parser.feed(stream[index : index + 7])
    assert events == [
        p.SseEvent("connected", '{"channelUsername":"a"}', None),
        p.SseEvent("chat.message", '{"x":\n1}', "17"),
        p.SseEvent("message", "plain", "17"),
    ]


def test_messages_carry_their_send_time() -> None:
    text = p.make_message("ab12cd", 42, 123_456_789_000, size=120)
    assert len(text) == 120
    assert p.parse_message(text, "ab12cd") == (42, 123_456_789_000)
    assert p.parse_message(p.make_message("ab12cd", 1, 5), "ab12cd") == (1, 5)
    assert p.parse_message(text, "other1") is None
    assert p.parse_message("hello world", "ab12cd") is None
    assert p.parse_message("lt ab12cd x y", "ab12cd") is None


def test_keys_and_masks_need_no_system_call_per_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_urandom(size: int) -> bytes:
        raise AssertionError("os.urandom is a getrandom system call")

    monkeypatch.setattr(p.os, "urandom", no_urandom)
    masks = {p.encode_frame(p.OP_TEXT, b"40")[2:6] for _ in range(50)}
    assert len(masks) > 40, "masks still vary from frame to frame"
    assert len({p.new_key() for _ in range(50)}) == 50
