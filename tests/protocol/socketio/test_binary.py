"""Opt-in binary Socket.IO packets (conformance mode): decode, reassemble, encode."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from volthub.protocol.engineio.packets import ProtocolError
from volthub.protocol.engineio.session import Settings
from volthub.protocol.socketio.binary import (
    MAX_ATTACHMENTS,
    BinarySocketIOSession,
    decode_binary_header,
    encode_binary_frames,
    reconstruct,
)
from volthub.protocol.socketio.packets import PacketType, SocketIOProtocolError
from volthub.protocol.socketio.session import AckReceived, EventReceived

SETTINGS = Settings(ping_interval_ms=300, ping_timeout_ms=200, max_payload=1000)
PH0 = {"_placeholder": True, "num": 0}
PH1 = {"_placeholder": True, "num": 1}


def joined() -> BinarySocketIOSession:
    session = BinarySocketIOSession("s1", SETTINGS, "websocket", 0.0, namespaces={"/", "/admin"})
    session.take_outgoing()
    session.receive_frame("40", 0.0)
    session.accept_connect("/")
    session.take_outgoing()
    return session


def test_decode_header() -> None:
    header = decode_binary_header('52-/admin,7["up",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]')
    assert header.attachments == 2
    assert header.packet.type is PacketType.BINARY_EVENT
    assert (header.packet.namespace, header.packet.ack_id) == ("/admin", 7)
    ack = decode_binary_header('61-15["bar",{"_placeholder":true,"num":0}]')
    assert ack.packet.type is PacketType.BINARY_ACK and ack.packet.ack_id == 15


@pytest.mark.parametrize(
    "text",
    [
        '5-["x"]',
        '5a-["x"]',
        '51["x"]',
        '51234-["x"]',
        f'5{MAX_ATTACHMENTS + 1}-["x"]',
        "51-{}",
        '51-["connect"]',
        "61-[1]",
        '61-1{"a":1}',
        "51-",
        "4",
        "",
    ],
)
def test_bad_headers(text: str) -> None:
    with pytest.raises(SocketIOProtocolError):
        decode_binary_header(text)


def test_reconstruct_checks_placeholders() -> None:
    assert reconstruct(["x", PH0, {"k": [PH1]}], [b"a", b"b"]) == ["x", b"a", {"k": [b"b"]}]
    for bad in ({"_placeholder": True, "num": 2}, {"_placeholder": True, "num": True}, {"_placeholder": True}):
        with pytest.raises(SocketIOProtocolError):
            reconstruct([bad], [b"a", b"b"])
    deep: list = []
    cursor = deep
    for _ in range(100):
        cursor.append([])
        cursor = cursor[0]
    with pytest.raises(SocketIOProtocolError):
        reconstruct(deep, [])


def test_encode_frames() -> None:
    frames = encode_binary_frames(PacketType.BINARY_EVENT, "/admin", ["up", b"\x01", {"k": b"\x02"}], 3)
    assert frames == [
        '452-/admin,3["up",{"_placeholder":true,"num":0},{"k":{"_placeholder":true,"num":1}}]',
        b"\x01",
        b"\x02",
    ]


def test_session_reassembles_events_and_acks() -> None:
    session = joined()
    assert (
        session.receive_frame('452-["message",{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]', 0.0) == []
    )
    assert session.receive_frame(b"\x01\x02", 0.0) == []
    assert session.receive_frame(b"\x03", 0.0) == [EventReceived("/", "message", [b"\x01\x02", b"\x03"], None)]
    assert session.emit("/", "ask", b"\x09", ack_id=4)
    assert session.take_outgoing() == ['451-4["ask",{"_placeholder":true,"num":0}]', b"\x09"]
    session.receive_frame('461-4[{"_placeholder":true,"num":0}]', 0.0)
    assert session.receive_frame(b"\x07", 0.0) == [AckReceived("/", 4, [b"\x07"])]
    assert session.ack("/", 9, [b"\x05"])
    assert session.take_outgoing() == ['461-9[{"_placeholder":true,"num":0}]', b"\x05"]
    assert session.emit("/", "plain", 1) and session.take_outgoing() == ['42["plain",1]']


def test_text_where_an_attachment_is_due_closes() -> None:
    session = joined()
    session.receive_frame('451-["message",{"_placeholder":true,"num":0}]', 0.0)
    with pytest.raises(SocketIOProtocolError):
        session.receive_frame('42["message"]', 0.0)
    assert session.closed


def test_attachments_are_bounded_by_max_payload() -> None:
    session = joined()
    session.receive_frame('453-["message",{"_placeholder":true,"num":0}]', 0.0)
    session.receive_frame(b"x" * 600, 0.0)
    with pytest.raises(ProtocolError) as caught:
        session.receive_frame(b"x" * 600, 0.0)
    assert caught.value.http_status == 413 and session.closed


def test_binary_without_a_header_closes() -> None:
    session = joined()
    with pytest.raises(SocketIOProtocolError):
        session.receive_frame(b"\x01", 0.0)


@settings(max_examples=300, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=30),
            st.text(alphabet='0123456789-/,[]{}":_placeholdernumtrue', max_size=40),
            st.sampled_from(['451-["m",{"_placeholder":true,"num":0}]', '42["message"]', "40/admin,"]),
        ),
        max_size=8,
    )
)
def test_any_input_raises_only_protocol_errors(frames: list[str | bytes]) -> None:
    session = joined()
    for frame in frames:
        try:
            session.receive_frame(frame, 0.0)
        except ProtocolError:
            assert session.closed
            return
