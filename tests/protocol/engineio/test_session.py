"""The Engine.IO session state machine: polling, WebSocket, heartbeat, close (the upgrade
from polling to WebSocket: test_upgrade.py).

Scenarios follow the official engine.io-protocol v4 test-suite (PING_INTERVAL 300 ms,
PING_TIMEOUT 200 ms), with time passed in explicitly.
"""

from __future__ import annotations

import orjson
import pytest

from tests.protocol.engineio.support import SETTINGS, assert_gone, assert_refused, open_polling, open_websocket, post
from volthub.protocol.engineio.handshake import ErrorCode
from volthub.protocol.engineio.packets import EngineIOProtocolError
from volthub.protocol.engineio.session import (
    EngineIOSession,
    MessageReceived,
    SessionClosed,
    Settings,
)

# ------------------------------------------------------------------ handshake


def test_polling_handshake_offers_the_websocket_upgrade() -> None:
    session = EngineIOSession("sid1", SETTINGS, "polling", 0.0)
    assert session.poll_begin(0.0) is None
    value = orjson.loads(session.poll_take()[1:])
    assert value == {
        "sid": "sid1",
        "upgrades": ["websocket"],
        "pingInterval": 300,
        "pingTimeout": 200,
        "maxPayload": 1000,
    }


def test_websocket_handshake_offers_no_upgrade() -> None:
    session = EngineIOSession("sid1", SETTINGS, "websocket", 0.0)
    [frame] = session.take_outgoing()
    assert orjson.loads(frame[1:])["upgrades"] == []


def test_polling_without_websocket_offers_no_upgrade() -> None:
    settings = Settings(transports=("polling",))
    session = EngineIOSession("sid1", settings, "polling", 0.0)
    session.poll_begin(0.0)
    assert orjson.loads(session.poll_take()[1:])["upgrades"] == []
    with pytest.raises(ValueError):
        EngineIOSession("sid2", settings, "websocket", 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ping_interval_ms": 0},
        {"ping_timeout_ms": -1},
        {"max_payload": 1.5},
        {"connect_timeout_ms": True},
        {"transports": ()},
        {"transports": ("polling", "flashsocket")},
    ],
)
def test_settings_are_validated(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Settings(**kwargs)


# ------------------------------------------------------------------ polling messages


@pytest.mark.parametrize(
    ("body", "messages"),
    [
        ("4hello", ["hello"]),
        ("4test1\x1e4test2\x1e4test3", ["test1", "test2", "test3"]),
        ("4hello\x1ebAQIDBA==", ["hello", b"\x01\x02\x03\x04"]),
        (b"4\xe2\x82\xac", ["€"]),
    ],
)
def test_post_and_poll_echo(body: str | bytes, messages: list) -> None:
    session = open_polling()
    events = post(session, body)
    assert events == [MessageReceived(m) for m in messages]
    for event in events:
        session.send_message(event.data)
    assert session.poll_begin(0.0) is None
    assert session.poll_ready
    expected = body.decode() if isinstance(body, bytes) else body
    assert session.poll_take() == expected


def test_pending_poll_waits_for_data() -> None:
    session = open_polling()
    assert session.poll_begin(0.1) is None
    assert not session.poll_ready
    assert session.send_message("hello")
    assert session.poll_ready
    assert session.poll_take() == "4hello"
    assert not session.poll_ready


def test_poll_take_before_ready_releases_the_get_with_a_noop() -> None:
    session = open_polling()
    session.poll_begin(0.1)
    assert session.poll_take() == "6"
    assert not session.closed


def test_noop_from_the_client_is_ignored() -> None:
    session = open_polling()
    assert post(session, "6\x1e4a") == [MessageReceived("a")]


@pytest.mark.parametrize("body", ["abc", "", "2", "0{}", "5", "4a\x1ebAQ", b"\xff"])
def test_invalid_post_closes_the_session(body: str | bytes) -> None:
    session = open_polling()
    session.send_message("lost")
    with pytest.raises(EngineIOProtocolError) as info:
        post(session, body)
    assert info.value.http_status == 400
    assert info.value.events == [SessionClosed("parse error")]
    assert session.closed and session.finished
    assert_refused(session.poll_begin(0.1), ErrorCode.UNKNOWN_SID)
    assert_refused(session.post_begin(0.1), ErrorCode.UNKNOWN_SID)


def test_invalid_post_applies_nothing_of_the_payload() -> None:
    session = open_polling()
    with pytest.raises(EngineIOProtocolError):
        post(session, "4first\x1eabc")


def test_invalid_post_while_a_get_is_pending_answers_it_with_close() -> None:
    session = open_polling()
    session.poll_begin(0.0)
    with pytest.raises(EngineIOProtocolError):
        post(session, "abc")
    assert session.poll_ready
    assert session.poll_take() == "1"
    assert session.finished


def test_duplicate_poll_closes_the_session() -> None:
    session = open_polling()
    assert session.poll_begin(0.0) is None
    with pytest.raises(EngineIOProtocolError) as info:
        session.poll_begin(0.005)
    assert info.value.http_status == 400
    assert info.value.events == [SessionClosed("transport error")]
    # The first GET is answered with a CLOSE packet, then the session is gone.
    assert session.poll_ready
    assert session.poll_take() == "1"
    assert_gone(session, 0.01)


def test_cancelled_poll_closes_the_session() -> None:
    session = open_polling()
    session.poll_begin(0.0)
    assert session.poll_abort(0.005) == [SessionClosed("transport error")]
    assert_gone(session, 0.01)


def test_poll_abort_without_a_pending_get_does_nothing() -> None:
    session = open_polling()
    assert session.poll_abort(0.0) == []
    assert not session.closed


def test_overlapping_posts_close_the_session() -> None:
    session = open_polling()
    assert session.post_begin(0.0) is None
    with pytest.raises(EngineIOProtocolError) as info:
        session.post_begin(0.001)
    assert info.value.events == [SessionClosed("transport error")]
    assert session.closed


def test_aborted_post_closes_the_session() -> None:
    session = open_polling()
    session.post_begin(0.0)
    assert session.post_abort(0.001) == [SessionClosed("transport error")]
    assert session.finished


def test_sequential_posts_are_fine() -> None:
    session = open_polling()
    for i in range(3):
        assert post(session, f"4m{i}") == [MessageReceived(f"m{i}")]


def test_receive_frame_on_a_polling_session_is_a_programming_error() -> None:
    with pytest.raises(RuntimeError):
        open_polling().receive_frame("4hello", 0.0)


def test_text_messages_cannot_carry_the_separator() -> None:
    with pytest.raises(ValueError):
        open_polling().send_message("a\x1eb")


# ------------------------------------------------------------------ close


def test_client_close_releases_the_pending_get_with_noop() -> None:
    session = open_polling()
    session.poll_begin(0.0)
    session.send_message("dropped")
    assert post(session, "1", 0.001) == [SessionClosed("transport close")]
    assert session.poll_ready
    assert session.poll_take() == "6"
    assert_gone(session, 0.002)


def test_packets_after_close_in_the_same_payload_are_ignored() -> None:
    session = open_polling()
    assert post(session, "4a\x1e1\x1e4b") == [MessageReceived("a"), SessionClosed("transport close")]


def test_server_close_delivers_queued_frames_then_close_to_the_pending_get() -> None:
    session = open_polling()
    session.poll_begin(0.0)
    session.send_message("bye")
    assert session.close(0.0) == [SessionClosed("forced close")]
    assert session.poll_take() == "4bye\x1e1"
    assert session.finished
    assert not session.send_message("late")


def test_server_close_lingers_for_the_next_get() -> None:
    session = open_polling()
    session.send_message("bye")
    session.close(1.0)
    assert not session.finished
    assert session.next_deadline() == pytest.approx(1.2)  # one pingTimeout to collect
    assert session.poll_begin(1.1) is None
    assert session.poll_take() == "4bye\x1e1"
    assert session.finished
    assert session.next_deadline() is None


def test_server_close_gives_up_when_nobody_polls() -> None:
    session = open_polling()
    session.close(1.0)
    assert session.on_timer(1.19) == [] and not session.finished
    assert session.on_timer(1.2) == []
    assert_gone(session, 1.3)


def test_close_twice_reports_once() -> None:
    session = open_websocket()
    assert session.close(0.0) == [SessionClosed("forced close")]
    assert session.close(0.1) == []
    assert session.close_reason == "forced close"


# ------------------------------------------------------------------ heartbeat


def test_polling_heartbeat_pings_every_interval_after_each_pong() -> None:
    session = open_polling()
    now = 0.0
    for _ in range(3):
        assert session.next_deadline() == pytest.approx(now + 0.3)
        assert session.poll_begin(now) is None
        assert session.on_timer(now + 0.299) == []
        assert not session.poll_ready
        assert session.on_timer(now + 0.3) == []
        assert session.poll_ready
        assert session.poll_take() == "2"
        now += 0.35
        assert post(session, "3", now) == []
    assert not session.closed


def test_ping_timeout_closes_at_interval_plus_timeout() -> None:
    session = open_polling()
    session.on_timer(0.3)  # ping queued
    assert session.next_deadline() == pytest.approx(0.5)
    assert session.on_timer(0.499) == []
    assert session.on_timer(0.5) == [SessionClosed("ping timeout")]
    # No GET was pending: nothing left to say, the next request finds no session.
    assert_gone(session, 0.51)


def test_ping_timeout_answers_a_pending_get_with_close() -> None:
    session = open_polling()
    session.on_timer(0.3)
    session.poll_begin(0.31)
    assert session.poll_take() == "2"
    session.poll_begin(0.32)
    assert session.on_timer(0.5) == [SessionClosed("ping timeout")]
    assert session.poll_take() == "1"


def test_pong_resets_the_heartbeat() -> None:
    session = open_websocket()
    assert session.on_timer(0.3) == []
    assert session.take_outgoing() == ["2"]
    assert session.receive_frame("3", 0.45) == []
    assert session.next_deadline() == pytest.approx(0.75)
    assert session.on_timer(0.5) == []  # would have been the ping timeout
    assert not session.closed
    session.on_timer(0.75)
    assert session.take_outgoing() == ["2"]
    assert session.on_timer(0.95) == [SessionClosed("ping timeout")]


def test_a_late_tick_gives_the_client_its_full_ping_timeout() -> None:
    session = open_websocket()
    assert session.on_timer(5.0) == []
    assert session.take_outgoing() == ["2"]
    assert session.next_deadline() == pytest.approx(5.2)


def test_unsolicited_pong_changes_nothing() -> None:
    session = open_websocket()
    assert session.receive_frame("3", 0.1) == []
    assert session.next_deadline() == pytest.approx(0.3)


def test_client_ping_is_a_protocol_error_in_v4() -> None:
    session = open_websocket()
    with pytest.raises(EngineIOProtocolError) as info:
        session.receive_frame("2", 0.1)
    assert info.value.events == [SessionClosed("parse error")]


# ------------------------------------------------------------------ websocket


def test_websocket_text_and_binary_messages() -> None:
    session = open_websocket()
    assert session.receive_frame("4hello", 0.0) == [MessageReceived("hello")]
    assert session.receive_frame(b"\x01\x02\x03\x04", 0.0) == [MessageReceived(b"\x01\x02\x03\x04")]
    session.send_message("hello")
    session.send_message(b"\x01\x02")
    assert session.take_outgoing() == ["4hello", b"\x01\x02"]
    assert session.take_outgoing() == []


@pytest.mark.parametrize("frame", ["abc", "", "0", "5", "2probe"])
def test_websocket_invalid_frame_closes(frame: str) -> None:
    session = open_websocket()
    with pytest.raises(EngineIOProtocolError):
        session.receive_frame(frame, 0.0)
    assert session.closed and session.finished


def test_websocket_close_packet_and_transport_close() -> None:
    session = open_websocket()
    assert session.receive_frame("1", 0.0) == [SessionClosed("transport close")]
    assert session.finished
    assert session.receive_frame("4late", 0.1) == []
    other = open_websocket()
    assert other.transport_closed(0.0) == [SessionClosed("transport close")]
    assert other.transport_closed(0.1) == []


def test_websocket_server_close_flushes_without_a_close_packet() -> None:
    session = open_websocket()
    session.send_message("bye")
    session.close(0.0)
    assert not session.finished
    assert session.take_outgoing() == ["4bye"]
    assert session.finished


def test_polling_get_on_a_websocket_session_is_refused() -> None:
    session = open_websocket()
    assert_refused(session.poll_begin(0.0), ErrorCode.BAD_REQUEST)
    assert_refused(session.post_begin(0.0), ErrorCode.BAD_REQUEST)
    assert not session.closed


# ------------------------------------------------------------------ maxPayload


def test_post_at_max_payload_is_accepted() -> None:
    session = open_polling()
    body = "4" + "x" * 999
    assert post(session, body) == [MessageReceived("x" * 999)]


@pytest.mark.parametrize("body", ["4" + "x" * 1000, "4" + "€" * 334, ("4" + "x" * 1000).encode()])
def test_post_over_max_payload_is_413_and_closes(body: str | bytes) -> None:
    session = open_polling()
    with pytest.raises(EngineIOProtocolError) as info:
        post(session, body)
    assert info.value.http_status == 413
    assert info.value.events == [SessionClosed("payload too large")]
    assert session.closed


@pytest.mark.parametrize("frame", ["4" + "x" * 1000, b"\x00" * 1001])
def test_websocket_frame_over_max_payload_closes(frame: str | bytes) -> None:
    session = open_websocket()
    with pytest.raises(EngineIOProtocolError) as info:
        session.receive_frame(frame, 0.0)
    assert info.value.http_status == 413
    assert session.closed


def test_buffered_counts_waiting_frames() -> None:
    session = open_websocket()
    for frame in ("42[1]", "42[2]"):
        assert session.send_frame(frame)
    assert session.buffered == 2
    assert session.take_outgoing() == ["42[1]", "42[2]"]
    assert session.buffered == 0


def test_aborting_the_get_that_collects_a_closed_session_finishes_it() -> None:
    session = open_polling()
    session.close(1.0)
    assert session.poll_begin(1.1) is None
    assert session.poll_abort(1.15) == []
    assert session.finished and session.next_deadline() is None


def test_aborted_post_releases_a_pending_get_with_close() -> None:
    session = open_polling()
    session.poll_begin(0.0)
    session.post_begin(0.0)
    assert session.post_abort(0.01) == [SessionClosed("transport error")]
    assert session.poll_ready
    assert session.poll_take() == "1"
    assert session.finished
