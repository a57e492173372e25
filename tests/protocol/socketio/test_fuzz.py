"""Property tests: decoders raise only their documented error; encoders round-trip."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from volthub.protocol.engineio import packets as engineio
from volthub.protocol.engineio.handshake import EngineIORequest, HttpError, validate_request
from volthub.protocol.engineio.packets import EngineIOProtocolError, ProtocolError
from volthub.protocol.engineio.session import EngineIOSession, SessionClosed, Settings
from volthub.protocol.socketio import packets as socketio
from volthub.protocol.socketio.packets import SocketIOProtocolError
from volthub.protocol.socketio.session import SocketIOSession

# No example database: the repository is shared and tests must not write into it.
FUZZ = settings(max_examples=400, database=None, suppress_health_check=[HealthCheck.too_slow])

# Every code point, lone surrogates included: a decoder must survive what no client sends.
any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60)
# Text close to the wire formats, so the fuzzer gets past the first character.
wire_alphabet = '0123456789/,-[]{}":tnurefalsbpoeAQID=\x1e \\'
wire_text = st.text(alphabet=wire_alphabet, max_size=40)
frames = st.one_of(any_text, wire_text, st.binary(max_size=40))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
namespaces = st.just("/") | st.from_regex(r"/[a-z0-9_./-]{1,20}", fullmatch=True)
event_names = st.text(max_size=15).filter(lambda n: n not in socketio.RESERVED_EVENTS)
ack_ids = st.none() | st.integers(0, socketio.MAX_ACK_ID)


# ------------------------------------------------------------------ decoders never crash


@FUZZ
@given(frames)
def test_engineio_decode_packet_raises_only_its_error(frame: str | bytes) -> None:
    try:
        packet = engineio.decode_packet(frame)
    except EngineIOProtocolError:
        return
    assert isinstance(packet.type, engineio.PacketType)


@FUZZ
@given(st.one_of(any_text, wire_text, st.binary(max_size=60), st.lists(wire_text, max_size=5).map("\x1e".join)))
def test_engineio_decode_payload_raises_only_its_error(body: str | bytes) -> None:
    try:
        packets = engineio.decode_payload(body)
    except EngineIOProtocolError:
        return
    assert packets


@FUZZ
@given(st.one_of(any_text, wire_text, wire_text.map(lambda t: "2" + t), wire_text.map(lambda t: "0/a," + t)))
def test_socketio_decode_packet_raises_only_its_error(text: str) -> None:
    try:
        packet = socketio.decode_packet(text)
    except SocketIOProtocolError:
        return
    # Whatever is accepted is well-formed and encodes back to an equivalent packet.
    assert socketio.decode_packet(socketio.encode_packet(packet)) == packet


@FUZZ
@given(
    method=any_text,
    query=st.dictionaries(
        st.sampled_from(["EIO", "transport", "sid", "j", "t"]) | any_text,
        st.sampled_from(["4", "polling", "websocket", "known", ""]) | any_text,
    ),
    websocket=st.booleans(),
)
def test_validate_request_always_answers(method: str, query: dict[str, str], websocket: bool) -> None:
    result = validate_request(method, query, websocket=websocket, sessions={"known"})
    assert isinstance(result, (EngineIORequest, HttpError))
    if isinstance(result, HttpError):
        assert orjson.loads(result.body)["code"] == int(result.code)


# ------------------------------------------------------------------ sessions never crash

SESSION_SETTINGS = Settings(ping_interval_ms=300, ping_timeout_ms=200, max_payload=64)


def _connected_ws() -> SocketIOSession:
    conn = SocketIOSession("s", SESSION_SETTINGS, "websocket", 0.0, namespaces={"/", "/a"})
    conn.receive_frame("40", 0.0)
    conn.accept_connect("/")
    return conn


socketio_frames = st.one_of(frames, wire_text.map(lambda t: "4" + t), wire_text.map(lambda t: "42" + t))


@FUZZ
@given(st.lists(socketio_frames, max_size=8))
def test_websocket_session_raises_only_protocol_errors(inputs: list[str | bytes]) -> None:
    conn = _connected_ws()
    for i, frame in enumerate(inputs):
        try:
            conn.receive_frame(frame, i * 0.01)
        except ProtocolError as exc:
            assert conn.closed and isinstance(exc.events[-1], SessionClosed)
            return


@FUZZ
@given(
    st.lists(st.one_of(socketio_frames, st.lists(socketio_frames, max_size=4).map(engineio.encode_payload)), max_size=6)
)
def test_polling_session_raises_only_protocol_errors(bodies: list[str | bytes]) -> None:
    conn = SocketIOSession("s", SESSION_SETTINGS, "polling", 0.0)
    for i, body in enumerate(bodies):
        if conn.post_begin(i * 0.01) is not None:
            return
        try:
            conn.receive_payload(body, i * 0.01)
        except ProtocolError as exc:
            assert exc.http_status in (400, 413)
            assert conn.closed
            return


@FUZZ
@given(st.lists(frames, max_size=5))
def test_probe_frames_never_raise(inputs: list[str | bytes]) -> None:
    session = EngineIOSession("s", SESSION_SETTINGS, "polling", 0.0)
    session.upgrade_begin(0.0)
    for frame in inputs:
        result = session.receive_probe_frame(frame, 0.0)
        assert result.rejected or result.upgraded or result.reply == ("3probe",)


operations = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "get",
                "take",
                "abort_get",
                "post",
                "abort_post",
                "probe",
                "probe_frame",
                "abort_probe",
                "timer",
                "emit",
                "close",
            ]
        ),
        st.floats(0, 0.2),
        socketio_frames,
    ),
    max_size=25,
)


@FUZZ
@given(operations)
def test_random_adapter_call_sequences_keep_the_session_consistent(ops: list[tuple[str, float, Any]]) -> None:
    conn = SocketIOSession("s", SESSION_SETTINGS, "polling", 0.0)
    now = 0.0
    for op, step, data in ops:
        now += step
        try:
            if op == "get":
                conn.poll_begin(now)
            elif op == "take":
                if conn.poll_ready:
                    assert isinstance(conn.poll_take(), str)
            elif op == "abort_get":
                conn.poll_abort(now)
            elif op == "post":
                if conn.post_begin(now) is None:
                    conn.receive_payload(data, now)
            elif op == "abort_post":
                conn.post_abort(now)
            elif op == "probe":
                conn.upgrade_begin(now)
            elif op == "probe_frame":
                conn.receive_probe_frame(data, now)
            elif op == "abort_probe":
                conn.upgrade_abort(now)
            elif op == "timer":
                deadline = conn.next_deadline()
                if deadline is not None:
                    now = max(now, deadline)
                    conn.on_timer(now)
            elif op == "emit":
                conn.emit("/", "x", 1)
            elif op == "close":
                conn.close(now)
            if conn.transport == "websocket":
                conn.take_outgoing()
        except ProtocolError:
            assert conn.closed
        # A live session always has a timer running; a closed one still holding output
        # can hand it to a pending GET or has a deadline to drop it; a finished one is inert.
        if not conn.closed:
            assert conn.next_deadline() is not None
        elif not conn.finished:
            assert conn.poll_ready or conn.next_deadline() is not None
        else:
            assert conn.next_deadline() is None and conn.buffered == 0


# ------------------------------------------------------------------ encoders round-trip


@FUZZ
@given(st.sampled_from(list(engineio.PacketType)), st.text(max_size=20).filter(lambda t: "\x1e" not in t))
def test_engineio_text_packets_round_trip(packet_type: engineio.PacketType, data: str) -> None:
    packet = engineio.Packet(packet_type, data)
    assert engineio.decode_packet(engineio.encode_packet(packet)) == packet


@FUZZ
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=20), st.text(max_size=20).filter(lambda t: "\x1e" not in t).map(lambda t: "4" + t)
        ),
        min_size=1,
        max_size=6,
    )
)
def test_payloads_round_trip(frame_list: list[str | bytes]) -> None:
    decoded = engineio.decode_payload(engineio.encode_payload(frame_list))
    assert decoded == [engineio.decode_packet(f) for f in frame_list]


@FUZZ
@given(namespaces, event_names, st.lists(json_values, max_size=4), ack_ids)
def test_event_frames_encode_once_and_decode_back(
    namespace: str, name: str, args: list[Any], ack_id: int | None
) -> None:
    frame = socketio.encode_event_frame(namespace, name, *(orjson.dumps(a) for a in args), ack_id=ack_id)
    packet = socketio.Packet(socketio.PacketType.EVENT, namespace, [name, *args], ack_id)
    assert frame == socketio.encode_frame(packet)
    assert "\x1e" not in frame
    assert engineio.decode_payload(engineio.encode_payload([frame, frame]))[1].data == frame[1:]
    assert socketio.decode_packet(frame[1:]) == packet


@FUZZ
@given(
    namespaces,
    st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    st.lists(json_values, max_size=3),
    st.integers(0, socketio.MAX_ACK_ID),
)
def test_other_packets_round_trip(namespace: str, obj: dict[str, Any], args: list[Any], ack_id: int) -> None:
    types = socketio.PacketType
    for packet in (
        socketio.Packet(types.CONNECT, namespace),
        socketio.Packet(types.CONNECT, namespace, obj),
        socketio.Packet(types.DISCONNECT, namespace),
        socketio.Packet(types.ACK, namespace, args, ack_id),
        socketio.Packet(types.CONNECT_ERROR, namespace, {"message": "m", "data": obj}),
    ):
        assert socketio.decode_packet(socketio.encode_packet(packet)) == packet
