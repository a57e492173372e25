"""The Socket.IO layer of a session: namespaces, events, acks, connect timeout.

Scenarios follow the "Socket.IO protocol" part of the official socket.io-protocol
test-suite, driven through the sans-IO session with explicit time.
"""

from __future__ import annotations

import orjson
import pytest

from volthub.protocol.engineio.packets import EngineIOProtocolError, ProtocolError
from volthub.protocol.engineio.session import SessionClosed, Settings
from volthub.protocol.socketio.packets import SocketIOProtocolError, encode_event_frame
from volthub.protocol.socketio.session import (
    MAX_NAMESPACES,
    AckReceived,
    ConnectRequest,
    Disconnected,
    EventReceived,
    SocketIOSession,
)

SETTINGS = Settings(ping_interval_ms=300, ping_timeout_ms=200, connect_timeout_ms=1000)
NAMESPACES = frozenset({"/", "/custom"})


def open_ws(namespaces: frozenset[str] | None = NAMESPACES) -> SocketIOSession:
    conn = SocketIOSession("eio1", SETTINGS, "websocket", 0.0, namespaces=namespaces)
    [handshake] = conn.take_outgoing()
    assert handshake.startswith("0{")
    return conn


def connected(*namespaces: str) -> SocketIOSession:
    conn = open_ws()
    for namespace in namespaces:
        prefix = "" if namespace == "/" else namespace + ","
        assert conn.receive_frame("40" + prefix, 0.0) == [ConnectRequest(namespace, {})]
        assert conn.accept_connect(namespace, f"sock{namespace}") == f"sock{namespace}"
    conn.take_outgoing()
    return conn


# ------------------------------------------------------------------ connect


@pytest.mark.parametrize(
    ("frame", "namespace", "auth", "reply_prefix"),
    [
        ("40", "/", {}, "40"),
        ('40{"token":"123"}', "/", {"token": "123"}, "40"),
        ("40/custom,", "/custom", {}, "40/custom,"),
        ("40/custom", "/custom", {}, "40/custom,"),
        ('40/custom,{"token":"abc"}', "/custom", {"token": "abc"}, "40/custom,"),
    ],
)
def test_connect_to_a_namespace(frame: str, namespace: str, auth: dict, reply_prefix: str) -> None:
    conn = open_ws()
    assert conn.receive_frame(frame, 0.0) == [ConnectRequest(namespace, auth)]
    assert conn.take_outgoing() == []  # the app decides
    socket_id = conn.accept_connect(namespace)
    assert isinstance(socket_id, str) and len(socket_id) == 20
    [reply] = conn.take_outgoing()
    assert reply.startswith(reply_prefix)
    assert orjson.loads(reply[len(reply_prefix) :]) == {"sid": socket_id}
    assert dict(conn.namespaces) == {namespace: socket_id}


def test_unknown_namespace_gets_connect_error_without_the_app() -> None:
    conn = open_ws()
    assert conn.receive_frame("40/random", 0.0) == []
    assert conn.take_outgoing() == ['44/random,{"message":"Invalid namespace"}']
    assert not conn.closed


def test_every_namespace_is_allowed_without_a_list() -> None:
    conn = open_ws(namespaces=None)
    assert conn.receive_frame("40/anything,", 0.0) == [ConnectRequest("/anything", {})]


def test_reject_connect_with_message_and_data() -> None:
    conn = open_ws()
    conn.receive_frame("40", 0.0)
    assert conn.reject_connect("/", "Not authorized", {"reason": "bad token"})
    assert conn.take_outgoing() == ['44{"message":"Not authorized","data":{"reason":"bad token"}}']
    assert conn.namespaces == {}
    # A packet that crossed the refusal is dropped, and the client may try again.
    assert conn.receive_frame('42["late"]', 0.1) == []
    assert conn.receive_frame("40", 0.2) == [ConnectRequest("/", {})]
    assert not conn.reject_connect("/custom", "never asked")


def test_reject_connect_without_data() -> None:
    conn = open_ws()
    conn.receive_frame("40/custom,", 0.0)
    conn.reject_connect("/custom", "nope")
    assert conn.take_outgoing() == ['44/custom,{"message":"nope"}']


def test_accept_without_a_request_does_nothing() -> None:
    conn = open_ws()
    assert conn.accept_connect("/") is None
    assert conn.take_outgoing() == []


@pytest.mark.parametrize("frame", ["4abc", '42["message"]', "431[]", "4" + '4{"message":"x"}'])
def test_first_packet_must_be_a_connect(frame: str) -> None:
    conn = open_ws()
    with pytest.raises(ProtocolError):
        conn.receive_frame(frame, 0.0)
    assert conn.closed


def test_event_while_the_connect_is_pending_is_an_error() -> None:
    conn = open_ws()
    conn.receive_frame("40", 0.0)
    with pytest.raises(SocketIOProtocolError):
        conn.receive_frame('42["too early"]', 0.0)


def test_duplicate_connect_is_an_error() -> None:
    conn = connected("/")
    with pytest.raises(SocketIOProtocolError):
        conn.receive_frame("40", 0.0)


def test_too_many_namespaces_is_an_error() -> None:
    conn = open_ws(namespaces=None)
    for i in range(MAX_NAMESPACES):
        conn.receive_frame(f"40/n{i},", 0.0)
    with pytest.raises(SocketIOProtocolError):
        conn.receive_frame("40/one-more,", 0.0)


def test_disconnect_while_pending_cancels_the_request() -> None:
    conn = open_ws()
    conn.receive_frame("40/custom,", 0.0)
    assert conn.receive_frame("41/custom,", 0.0) == []
    assert conn.accept_connect("/custom") is None


# ------------------------------------------------------------------ events and acks


def test_event_with_mixed_arguments() -> None:
    conn = connected("/")
    events = conn.receive_frame('42["message",1,"2",{"3":[true]}]', 0.0)
    assert events == [EventReceived("/", "message", [1, "2", {"3": [True]}], None)]
    assert conn.emit("/", "message-back", 1, "2", {"3": [True]})
    assert conn.take_outgoing() == ['42["message-back",1,"2",{"3":[true]}]']


def test_event_with_an_ack_and_our_ack() -> None:
    conn = connected("/")
    events = conn.receive_frame('42456["message-with-ack",1,"2",{"3":[false]}]', 0.0)
    assert events == [EventReceived("/", "message-with-ack", [1, "2", {"3": [False]}], 456)]
    assert conn.ack("/", 456, [1, "2", {"3": [False]}])
    assert conn.take_outgoing() == ['43456[1,"2",{"3":[false]}]']


def test_emit_expecting_an_ack() -> None:
    conn = connected("/")
    assert conn.emit("/", "emit-with-ack", 1, "2", {"3": [True]}, ack_id=1)
    assert conn.take_outgoing() == ['421["emit-with-ack",1,"2",{"3":[true]}]']
    assert conn.receive_frame('431[1,"2",{"3":[true]}]', 0.1) == [AckReceived("/", 1, [1, "2", {"3": [True]}])]
    # A repeated or unknown ack is ignored, as the reference server does.
    assert conn.receive_frame("431[]", 0.2) == []
    assert conn.receive_frame("4399[]", 0.2) == []


def test_events_and_acks_in_a_custom_namespace() -> None:
    conn = connected("/", "/custom")
    assert conn.receive_frame('42/custom,7["x",{"y":1}]', 0.0) == [EventReceived("/custom", "x", [{"y": 1}], 7)]
    conn.ack("/custom", 7, ())
    conn.emit("/custom", "z", ack_id=3)
    conn.emit("/", "main")
    assert conn.take_outgoing() == ["43/custom,7[]", '42/custom,3["z"]', '42["main"]']
    assert conn.receive_frame("43/custom,3[true]", 0.0) == [AckReceived("/custom", 3, [True])]
    # Acks are per namespace: the same id in "/" was never asked for.
    conn.emit("/custom", "again", ack_id=4)
    assert conn.receive_frame("434[]", 0.0) == []


def test_emit_refuses_reserved_names_and_unjoined_namespaces() -> None:
    conn = connected("/")
    with pytest.raises(ValueError):
        conn.emit("/", "connect")
    assert not conn.emit("/custom", "x")
    assert not conn.ack("/custom", 1)
    assert conn.take_outgoing() == []


def test_fan_out_frame_is_shared_by_every_session() -> None:
    frame = encode_event_frame("/", "event", orjson.dumps({"event": "stream.online", "data": {}}))
    websockets = [connected("/") for _ in range(3)]
    polling = SocketIOSession("p1", SETTINGS, "polling", 0.0, namespaces=NAMESPACES)
    polling.poll_begin(0.0)
    polling.poll_take()
    polling.receive_payload("40", 0.0)
    polling.accept_connect("/", "s")
    polling.poll_begin(0.0)
    polling.poll_take()
    for conn in [*websockets, polling]:
        assert conn.send_frame(frame)
    assert all(conn.take_outgoing() == [frame] for conn in websockets)
    polling.send_frame(frame)
    polling.poll_begin(0.0)
    assert polling.poll_take() == frame + "\x1e" + frame


# ------------------------------------------------------------------ disconnect


def test_client_disconnects_from_the_main_namespace() -> None:
    conn = connected("/")
    assert conn.receive_frame("41", 0.0) == [Disconnected("/", "client namespace disconnect")]
    assert conn.namespaces == {}
    assert not conn.closed  # the Engine.IO session outlives its namespaces
    assert not conn.emit("/", "gone")


def test_connect_then_disconnect_from_a_custom_namespace() -> None:
    conn = connected("/")
    assert conn.receive_frame("40/custom", 0.0) == [ConnectRequest("/custom", {})]
    conn.accept_connect("/custom")
    assert conn.receive_frame("41/custom", 0.0) == [Disconnected("/custom", "client namespace disconnect")]
    assert conn.receive_frame('42["message","message to main namespace",1,2]', 0.0) == [
        EventReceived("/", "message", ["message to main namespace", 1, 2], None)
    ]


def test_server_disconnects_a_namespace() -> None:
    conn = connected("/", "/custom")
    conn.emit("/custom", "x", ack_id=9)
    assert conn.disconnect("/custom")
    assert conn.take_outgoing() == ['42/custom,9["x"]', "41/custom,"]
    assert not conn.disconnect("/custom")
    # Packets that crossed our DISCONNECT are dropped, not errors.
    assert conn.receive_frame('42/custom,["late"]', 0.0) == []
    assert conn.receive_frame("43/custom,9[]", 0.0) == []
    assert list(conn.namespaces) == ["/"]


def test_connect_error_from_the_client_is_an_error() -> None:
    conn = connected("/")
    with pytest.raises(SocketIOProtocolError):
        conn.receive_frame('44{"message":"x"}', 0.0)


def test_server_close_disconnects_every_namespace() -> None:
    conn = connected("/", "/custom")
    conn.emit("/", "last")
    assert conn.close(1.0) == [
        Disconnected("/", "forced close"),
        Disconnected("/custom", "forced close"),
        SessionClosed("forced close"),
    ]
    assert conn.take_outgoing() == ['42["last"]']
    assert conn.finished
    assert not conn.emit("/", "after")
    assert conn.accept_connect("/") is None


def test_ping_timeout_disconnects_every_namespace() -> None:
    conn = connected("/custom")
    conn.on_timer(0.3)
    assert conn.on_timer(0.5) == [Disconnected("/custom", "ping timeout"), SessionClosed("ping timeout")]


# ------------------------------------------------------------------ invalid input


@pytest.mark.parametrize(
    "frame",
    [
        "4abc",  # unknown packet type
        "42{}",  # payload not an array
        '42abc["message-with-ack",1,"2",{"3":[false]}]',  # invalid ack id
        "42[]",
        '42[1,"x"]',
        '42["disconnect"]',
        '42/custom,["not joined"]',
        "41/custom,",  # DISCONNECT from a namespace never joined
        "4",
    ],
)
def test_invalid_packets_close_the_connection(frame: str) -> None:
    conn = connected("/")
    with pytest.raises(SocketIOProtocolError) as info:
        conn.receive_frame(frame, 0.0)
    assert info.value.events == [Disconnected("/", "parse error"), SessionClosed("parse error")]
    assert conn.closed and conn.finished


@pytest.mark.parametrize(
    "frames",
    [
        ['451-["message",{"_placeholder":true,"num":0}]', b"\x01\x02\x03"],
        ['462-789[{"_placeholder":true,"num":0},{"_placeholder":true,"num":1}]'],
        [b"\x01\x02\x03\x04"],
    ],
)
def test_binary_is_refused_cleanly(frames: list[str | bytes]) -> None:
    conn = connected("/")
    with pytest.raises(SocketIOProtocolError, match="binary") as info:
        conn.receive_frame(frames[0], 0.0)
    assert info.value.http_status == 400
    assert SessionClosed("parse error") in info.value.events
    assert conn.closed
    assert conn.receive_frame(b"\x01", 0.0) == []  # trailing attachments are ignored


def test_engine_level_errors_still_report_namespace_disconnects() -> None:
    conn = connected("/")
    with pytest.raises(EngineIOProtocolError) as info:
        conn.receive_frame("9", 0.0)
    assert info.value.events == [Disconnected("/", "parse error"), SessionClosed("parse error")]


# ------------------------------------------------------------------ connect timeout


def test_connect_timeout_closes_a_session_that_never_connects() -> None:
    conn = open_ws()
    for t in (0.3, 0.6, 0.9):  # keep the heartbeat happy meanwhile
        conn.on_timer(t)
        conn.receive_frame("3", t)
    assert conn.next_deadline() == pytest.approx(1.0)
    assert conn.on_timer(0.999) == []
    assert conn.on_timer(1.0) == [SessionClosed("connect timeout")]


def test_connect_timeout_counts_joined_namespaces_not_requests() -> None:
    conn = open_ws()
    conn.receive_frame("40", 0.5)  # the app never answers
    assert conn.on_timer(1.0) == [SessionClosed("connect timeout")]


def test_connect_timeout_is_disarmed_by_the_first_join() -> None:
    conn = connected("/")
    assert conn.next_deadline() == pytest.approx(0.3)  # only the heartbeat remains
    conn.on_timer(0.3)
    conn.receive_frame("3", 0.35)
    assert conn.on_timer(1.0) == []
    assert not conn.closed


def test_connect_timeout_stays_disarmed_after_leaving() -> None:
    conn = connected("/")
    conn.receive_frame("41", 0.1)
    conn.on_timer(0.3)
    conn.receive_frame("3", 0.35)
    assert conn.on_timer(1.5) == []


# ------------------------------------------------------------------ over polling


def test_sample_session_over_polling() -> None:
    # The sample session of the Socket.IO protocol document.
    conn = SocketIOSession("lv_VI97HAXpY6yYWAAAC", SETTINGS, "polling", 0.0)
    assert conn.poll_begin(0.0) is None
    assert conn.poll_take().startswith('0{"sid":"lv_VI97HAXpY6yYWAAAC","upgrades":["websocket"]')
    assert conn.post_begin(0.01) is None
    assert conn.receive_payload("40", 0.01) == [ConnectRequest("/", {})]
    conn.accept_connect("/", "wZX3oN0bSVIhsaknAAAI")
    conn.poll_begin(0.02)
    assert conn.poll_take() == '40{"sid":"wZX3oN0bSVIhsaknAAAI"}'
    conn.emit("/", "hey", "Jude")
    conn.poll_begin(0.03)
    assert conn.poll_take() == '42["hey","Jude"]'
    conn.post_begin(0.04)
    assert conn.receive_payload('42["hello"]\x1e42["world"]', 0.04) == [
        EventReceived("/", "hello", [], None),
        EventReceived("/", "world", [], None),
    ]
    # Upgrade: probe, the pending poll is released, then messages flow over WebSocket.
    conn.poll_begin(0.05)
    assert conn.upgrade_begin(0.05) is None
    assert conn.receive_probe_frame("2probe", 0.06).reply == ("3probe",)
    assert conn.poll_take() == "6"
    assert conn.receive_probe_frame("5", 0.07).upgraded
    assert conn.receive_frame('42["over websocket"]', 0.08) == [EventReceived("/", "over websocket", [], None)]


def test_invalid_socketio_packet_in_a_post() -> None:
    conn = SocketIOSession("s", SETTINGS, "polling", 0.0)
    conn.post_begin(0.0)
    with pytest.raises(SocketIOProtocolError) as info:
        conn.receive_payload("40\x1e4abc", 0.0)
    assert info.value.http_status == 400
    assert info.value.events == [SessionClosed("parse error")]
    assert conn.closed
