"""The gateway's RFC 6455 pieces (sans-IO): the handshake answer, server frames, the reader
of client frames."""

from __future__ import annotations

import os

import pytest
from wsproto.frame_protocol import FrameProtocol, Opcode

from volthub.protocol.websocket import (
    CLOSE_INVALID_DATA,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    Close,
    FrameReader,
    Ping,
    WebSocketError,
    accept_key,
    close_frame,
    message_frame,
    valid_client_key,
)


def client_frame(opcode: int, payload: bytes, *, fin: bool = True, mask: bytes | None = None) -> bytes:
    """A masked client frame, as a browser sends it."""
    mask = mask if mask is not None else os.urandom(4)
    size = len(payload)
    head = bytes((0x80 * fin | opcode,))
    if size < 126:
        length = bytes((0x80 | size,))
    elif size < 65536:
        length = bytes((0x80 | 126,)) + size.to_bytes(2, "big")
    else:
        length = bytes((0x80 | 127,)) + size.to_bytes(8, "big")
    return head + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def test_accept_key_is_the_rfc_example() -> None:
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="  # RFC 6455 §1.3
    assert valid_client_key("dGhlIHNhbXBsZSBub25jZQ==")
    assert not valid_client_key("short") and not valid_client_key(None) and not valid_client_key("!!!!")


@pytest.mark.parametrize("size", [0, 5, 125, 126, 65535, 65536])
def test_server_frames_match_wsproto(size: int) -> None:
    text = "a" * size
    assert message_frame(text) == FrameProtocol(client=False, extensions=[]).send_data(text, fin=True)
    assert close_frame(1000, "bye") == FrameProtocol(client=False, extensions=[]).close(1000, "bye")


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65535, 65536, 70_000])
def test_reads_text_and_binary_of_every_length_class(size: int) -> None:
    reader = FrameReader(200_000)
    text = "é" * (size // 2)
    data = os.urandom(size)
    found = reader.feed(client_frame(Opcode.TEXT, text.encode()) + client_frame(Opcode.BINARY, data))
    assert found == [text, data]


def test_frames_split_at_every_byte_come_out_whole() -> None:
    wire = client_frame(Opcode.TEXT, b'42["hello"]') + client_frame(Opcode.PING, b"p") + client_frame(0x1, b"3")
    reader = FrameReader(1000)
    found = []
    for index in range(len(wire)):
        found.extend(reader.feed(wire[index : index + 1]))
    assert found == ['42["hello"]', Ping(b"p"), "3"]


def test_fragments_are_joined_and_control_frames_may_interleave() -> None:
    reader = FrameReader(1000)
    wire = (
        client_frame(Opcode.TEXT, b"4he", fin=False)
        + client_frame(Opcode.PING, b"")
        + client_frame(Opcode.CONTINUATION, b"ll", fin=False)
        + client_frame(Opcode.CONTINUATION, b"o")
    )
    assert reader.feed(wire) == [Ping(b""), "4hello"]


def test_pong_is_swallowed_and_close_ends_the_input() -> None:
    reader = FrameReader(1000)
    wire = (
        client_frame(Opcode.PONG, b"x")
        + client_frame(Opcode.CLOSE, (1001).to_bytes(2, "big") + b"away")
        + client_frame(Opcode.TEXT, b"ignored")
    )
    assert reader.feed(wire) == [Close(1001, "away")]
    assert FrameReader(10).feed(client_frame(Opcode.CLOSE, b"")) == [Close(None, "")]


@pytest.mark.parametrize(
    ("wire", "code"),
    [
        (b"\x81\x03abc", CLOSE_PROTOCOL_ERROR),  # unmasked
        (
            client_frame(Opcode.TEXT, b"x")[:0] + bytes((0xC1,)) + client_frame(Opcode.TEXT, b"x")[1:],
            CLOSE_PROTOCOL_ERROR,
        ),
        (client_frame(Opcode.CONTINUATION, b"x"), CLOSE_PROTOCOL_ERROR),
        (client_frame(0x3, b"x"), CLOSE_PROTOCOL_ERROR),
        (client_frame(Opcode.PING, b"x" * 126), CLOSE_PROTOCOL_ERROR),
        (client_frame(Opcode.PING, b"x", fin=False), CLOSE_PROTOCOL_ERROR),
        (client_frame(Opcode.TEXT, b"\xff\xfe"), CLOSE_INVALID_DATA),
        (client_frame(Opcode.CLOSE, b"\x03"), CLOSE_PROTOCOL_ERROR),
        (client_frame(Opcode.TEXT, b"a", fin=False) + client_frame(Opcode.TEXT, b"b"), CLOSE_PROTOCOL_ERROR),
    ],
    # Named, not shown: client frames carry a random mask, and pytest-xdist's workers must
    # collect the same test ids.
    ids=[
        "unmasked",
        "reserved-bit",
        "continuation-first",
        "unknown-opcode",
        "long-control-frame",
        "fragmented-control-frame",
        "invalid-utf8",
        "one-byte-close-code",
        "new-message-inside-a-fragmented-one",
    ],
)
def test_protocol_violations_raise_with_a_close_code(wire: bytes, code: int) -> None:
    with pytest.raises(WebSocketError) as raised:
        FrameReader(1000).feed(wire)
    assert raised.value.code == code


def test_a_message_over_the_limit_is_refused_from_its_header() -> None:
    reader = FrameReader(100)
    header_only = client_frame(Opcode.BINARY, b"x" * 1000)[:8]  # the length is known before the payload
    with pytest.raises(WebSocketError) as raised:
        reader.feed(header_only)
    assert raised.value.code == CLOSE_TOO_BIG
    fragmented = client_frame(Opcode.TEXT, b"x" * 60, fin=False) + client_frame(Opcode.CONTINUATION, b"x" * 60)
    with pytest.raises(WebSocketError):
        FrameReader(100).feed(fragmented)


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535])
def test_close_codes_nobody_may_send_are_a_protocol_error(code: int) -> None:
    with pytest.raises(WebSocketError) as raised:
        FrameReader(1000).feed(client_frame(Opcode.CLOSE, code.to_bytes(2, "big") + b"bye"))
    assert raised.value.code == CLOSE_PROTOCOL_ERROR


@pytest.mark.parametrize("code", [1000, 1001, 1003, 1007, 1011, 1014, 3000, 4999])
def test_close_codes_a_peer_may_send_are_read(code: int) -> None:
    assert FrameReader(1000).feed(client_frame(Opcode.CLOSE, code.to_bytes(2, "big"))) == [Close(code, "")]


def test_a_message_of_more_frames_than_the_cap_is_refused_even_when_empty() -> None:
    within = client_frame(Opcode.TEXT, b"", fin=False) + client_frame(Opcode.CONTINUATION, b"", fin=False) * 2
    assert FrameReader(1000, max_fragments=4).feed(within + client_frame(Opcode.CONTINUATION, b"ok")) == ["ok"]
    with pytest.raises(WebSocketError) as raised:
        FrameReader(1000, max_fragments=4).feed(within + client_frame(Opcode.CONTINUATION, b"", fin=False) * 2)
    assert raised.value.code == CLOSE_TOO_BIG
