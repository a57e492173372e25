"""Socket.IO v5 packet encoding, the invalid packets of the official suites, fan-out frames."""

from __future__ import annotations

import orjson
import pytest

from volthub.protocol.engineio.packets import decode_payload, encode_payload
from volthub.protocol.socketio.packets import (
    Packet,
    PacketType,
    SocketIOProtocolError,
    decode_packet,
    encode_event_frame,
    encode_frame,
    encode_packet,
)

C, D, E, A, CE = (PacketType.CONNECT, PacketType.DISCONNECT, PacketType.EVENT, PacketType.ACK, PacketType.CONNECT_ERROR)


# The encodings of the protocol document's tables, both directions.
@pytest.mark.parametrize(
    ("packet", "text"),
    [
        (Packet(C), "0"),
        (Packet(C, data={"sid": "wZX3oN0bSVIhsaknAAAI"}), '0{"sid":"wZX3oN0bSVIhsaknAAAI"}'),
        (Packet(C, "/admin"), "0/admin,"),
        (Packet(C, "/admin", {"sid": "oSO0"}), '0/admin,{"sid":"oSO0"}'),
        (Packet(C, "/admin", {"token": "123"}), '0/admin,{"token":"123"}'),
        (Packet(D), "1"),
        (Packet(D, "/admin"), "1/admin,"),
        (Packet(E, data=["foo"]), '2["foo"]'),
        (Packet(E, "/admin", ["bar"]), '2/admin,["bar"]'),
        (Packet(E, data=["foo"], ack_id=12), '212["foo"]'),
        (Packet(E, "/admin", ["foo"], 13), '2/admin,13["foo"]'),
        (Packet(E, data=["message", 1, "2", {"3": [True]}]), '2["message",1,"2",{"3":[true]}]'),
        (Packet(A, data=[], ack_id=12), "312[]"),
        (Packet(A, "/admin", ["bar"], 13), '3/admin,13["bar"]'),
        (Packet(CE, data={"message": "Not authorized"}), '4{"message":"Not authorized"}'),
        (Packet(CE, "/random", {"message": "Invalid namespace"}), '4/random,{"message":"Invalid namespace"}'),
        (Packet(CE, data={"message": "no", "data": {"code": 7}}), '4{"message":"no","data":{"code":7}}'),
    ],
)
def test_every_packet_type_round_trips(packet: Packet, text: str) -> None:
    assert encode_packet(packet) == text
    assert decode_packet(text) == packet
    assert encode_frame(packet) == "4" + text


def test_namespace_without_trailing_comma() -> None:
    # The official suite sends "40/custom" and "41/custom" without the comma.
    assert decode_packet("0/custom") == Packet(C, "/custom")
    assert decode_packet("1/custom") == Packet(D, "/custom")


def test_connect_error_with_a_string_from_older_peers() -> None:
    assert decode_packet('4"Unauthorized"') == Packet(CE, data="Unauthorized")


def test_large_but_valid_ack_id() -> None:
    assert decode_packet(f"3{2**53 - 1}[]").ack_id == 2**53 - 1


# socket.io-parser's "throw an error upon parsing error" list, the socket.io-protocol
# test-suite's "invalid format" cases, plus the cases the brief names.
INVALID = [
    '442["some","data"',  # CONNECT_ERROR with truncated JSON
    '0/admin,"invalid"',  # CONNECT payload must be an object
    "0[]",  # ... not an array
    "01",  # ... not a plain number
    "0/admin,1",
    "0null",
    "1/admin,{}",  # DISCONNECT carries no payload
    '2/admin,"invalid',  # truncated JSON
    "2/admin,{}",  # EVENT payload must be an array
    "2[]",  # ... non-empty
    '2[{"toString":"foo"}]',  # event name must be a string
    '2[true,"foo"]',
    '2[null,"bar"]',
    "2[1]",
    '2["connect"]',  # reserved event names
    '2["disconnect","123"]',
    '2["connect_error"]',
    "2null",
    "2",  # EVENT without payload
    "999",  # unknown packet type 9
    "7",
    "abc",  # unknown packet type (the suite's "4abc" as an Engine.IO message)
    "{}",  # the suite's "42{}"... minus the type: no type at all
    "2{}",  # the suite's "42{}": payload is not an array
    '2abc["message-with-ack",1,"2",{"3":[false]}]',  # the suite's invalid ack id
    '2admin,["a"]',  # namespace must start with "/"
    '2/ad\nmin,["a"]',  # no control characters in a namespace
    "2/" + "a" * 300 + ',["a"]',  # namespace too long
    "3[]",  # ACK without an id
    "312",  # ACK without a payload
    '312{"a":1}',  # ACK payload must be an array
    "3" + "9" * 17 + "[]",  # ack id beyond 2**53 - 1
    f"3{2**53}[]",
    "",
]


@pytest.mark.parametrize("text", INVALID)
def test_invalid_packets_are_refused(text: str) -> None:
    with pytest.raises(SocketIOProtocolError):
        decode_packet(text)


# Binary packets (attachments) are refused whatever their shape, including the malformed
# attachment counts of socket.io-parser's "invalid attachment count" list.
@pytest.mark.parametrize(
    "text",
    [
        '51-["baz",{"_placeholder":true,"num":0}]',
        '52-/admin,["baz",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]',
        '61-15["bar",{"_placeholder":true,"num":0}]',
        "5",
        "51",
        "50-",
        "5a-",
        "51.23-",
    ],
)
def test_binary_packets_are_refused(text: str) -> None:
    with pytest.raises(SocketIOProtocolError, match="binary"):
        decode_packet(text)


def test_binary_packets_cannot_be_encoded() -> None:
    with pytest.raises(ValueError):
        encode_packet(Packet(PacketType.BINARY_EVENT, data=["x"]))


@pytest.mark.parametrize("namespace", ["admin", "/a,b", "/a\x1eb"])
def test_encoder_refuses_invalid_namespaces(namespace: str) -> None:
    with pytest.raises(ValueError):
        encode_packet(Packet(E, namespace, ["x"]))


@pytest.mark.parametrize("ack_id", [-1, 2**53, True, 1.5])
def test_encoder_refuses_invalid_ack_ids(ack_id: object) -> None:
    with pytest.raises(ValueError):
        encode_packet(Packet(E, data=["x"], ack_id=ack_id))  # type: ignore[arg-type]


# ------------------------------------------------------------------ encode-once fan-out


def test_event_frame_for_the_main_namespace() -> None:
    data = orjson.dumps({"event": "chat.message", "data": {"message": "hi"}})
    frame = encode_event_frame("/", "event", data)
    assert frame == '42["event",{"event":"chat.message","data":{"message":"hi"}}]'


def test_event_frame_for_a_custom_namespace_decodes_back() -> None:
    data = orjson.dumps({"channelUsername": "alice", "authenticated": True})
    frame = encode_event_frame("/custom", "connected", data)
    assert frame.startswith('42/custom,["connected",')
    packet = decode_packet(frame[1:])
    assert packet == Packet(E, "/custom", ["connected", orjson.loads(data)])


def test_event_frame_matches_the_generic_encoder() -> None:
    args = [{"a": [1, 2, None]}, "two", 3]
    frame = encode_event_frame("/ws/events", "multi", *(orjson.dumps(a) for a in args), ack_id=7)
    assert frame == encode_frame(Packet(E, "/ws/events", ["multi", *args], 7))


def test_event_frame_without_args_and_with_str_json() -> None:
    assert encode_event_frame("/", "ping") == '42["ping"]'
    assert encode_event_frame("/", "n", "[1]") == '42["n",[1]]'


def test_event_frame_escapes_the_name() -> None:
    frame = encode_event_frame("/", 'we"ird\x1ename', b"1")
    assert decode_packet(frame[1:]).data == ['we"ird\x1ename', 1]
    assert "\x1e" not in frame  # so it is safe inside a polling payload


def test_event_frame_works_inside_a_polling_payload() -> None:
    frame = encode_event_frame("/", "tick", orjson.dumps({"text": "a\x1eb"}))
    body = encode_payload([frame, frame])
    packets = decode_payload(body)
    assert len(packets) == 2
    assert all(decode_packet(p.data).data == ["tick", {"text": "a\x1eb"}] for p in packets)


@pytest.mark.parametrize("name", ["connect", "disconnect", "newListener", 5])
def test_event_frame_refuses_reserved_or_non_string_names(name: object) -> None:
    with pytest.raises(ValueError):
        encode_event_frame("/", name, b"{}")  # type: ignore[arg-type]
