"""Engine.IO v4 packet and polling payload encoding."""

from __future__ import annotations

import orjson
import pytest

from volthub.protocol.engineio.packets import (
    SEPARATOR,
    EngineIOProtocolError,
    Packet,
    PacketType,
    decode_open,
    decode_packet,
    decode_payload,
    encode_open,
    encode_packet,
    encode_payload,
    message_frame,
)


@pytest.mark.parametrize(
    ("packet", "frame"),
    [
        (Packet(PacketType.OPEN, '{"sid":"x"}'), '0{"sid":"x"}'),
        (Packet(PacketType.CLOSE), "1"),
        (Packet(PacketType.PING), "2"),
        (Packet(PacketType.PING, "probe"), "2probe"),
        (Packet(PacketType.PONG), "3"),
        (Packet(PacketType.PONG, "probe"), "3probe"),
        (Packet(PacketType.MESSAGE, "hello €亜Б"), "4hello €亜Б"),
        (Packet(PacketType.MESSAGE, ""), "4"),
        (Packet(PacketType.UPGRADE), "5"),
        (Packet(PacketType.NOOP), "6"),
        (Packet(PacketType.MESSAGE, b"\x01\x02\x03\x04"), b"\x01\x02\x03\x04"),
    ],
)
def test_every_packet_type_round_trips(packet: Packet, frame: str | bytes) -> None:
    assert encode_packet(packet) == frame
    assert decode_packet(frame) == packet


def test_binary_is_only_for_messages() -> None:
    with pytest.raises(ValueError):
        encode_packet(Packet(PacketType.PING, b"\x01"))


def test_message_frame_matches_encode_packet() -> None:
    assert message_frame("hi") == encode_packet(Packet(PacketType.MESSAGE, "hi"))
    assert message_frame(b"\x00") == b"\x00"


def test_base64_text_frame_is_a_binary_message() -> None:
    assert decode_packet("bAQIDBA==") == Packet(PacketType.MESSAGE, b"\x01\x02\x03\x04")


@pytest.mark.parametrize("frame", ["", "abc", "7", "9x", "x4hello", "b!!!!", "bAQ", "b\u00e9"])
def test_malformed_frames_are_refused(frame: str) -> None:
    with pytest.raises(EngineIOProtocolError):
        decode_packet(frame)


def test_payload_from_the_protocol_document() -> None:
    packets = decode_payload("4hello\x1e2\x1e4world")
    assert packets == [
        Packet(PacketType.MESSAGE, "hello"),
        Packet(PacketType.PING),
        Packet(PacketType.MESSAGE, "world"),
    ]


def test_payload_mixes_text_and_base64_binary() -> None:
    frames = ["4hello", b"\x01\x02\x03\x04", "2", b"", "4€€€"]
    body = encode_payload(frames)
    assert body == "4hello\x1ebAQIDBA==\x1e2\x1eb\x1e4€€€"
    assert decode_payload(body) == [decode_packet(f) for f in frames]
    # A POST body usually arrives as bytes.
    assert decode_payload(body.encode("utf-8")) == decode_payload(body)


def test_single_packet_payload_has_no_separator() -> None:
    assert encode_payload(["4hello"]) == "4hello"
    assert encode_payload([]) == ""


@pytest.mark.parametrize(
    "body",
    ["", "abc", "4hello\x1e", "\x1e4hello", "4a\x1e\x1e4b", "4hello\x1ebAQ", b"4\xff\xfe", "4a\x1e9"],
)
def test_malformed_payloads_are_refused_whole(body: str | bytes) -> None:
    with pytest.raises(EngineIOProtocolError):
        decode_payload(body)


def test_open_packet_carries_milliseconds() -> None:
    frame = encode_open("sid1", ["websocket"], 25_000, 20_000, 1_000_000)
    assert frame[0] == "0"
    assert orjson.loads(frame[1:]) == {
        "sid": "sid1",
        "upgrades": ["websocket"],
        "pingInterval": 25_000,
        "pingTimeout": 20_000,
        "maxPayload": 1_000_000,
    }


def test_the_client_reads_the_open_packet_back() -> None:
    handshake = decode_open(encode_open("sid1", [], 25_000, 20_000, 1_000_000))
    assert handshake["sid"] == "sid1" and handshake["pingInterval"] == 25_000


@pytest.mark.parametrize("frame", ['40{"sid":"x"}', "0not json", '0{"upgrades":[]}', '0{"sid":7}', "0[]"])
def test_an_open_packet_without_a_session_is_refused(frame: str) -> None:
    with pytest.raises(EngineIOProtocolError):
        decode_open(frame)


def test_separator_is_the_record_separator() -> None:
    assert SEPARATOR == "\x1e"
