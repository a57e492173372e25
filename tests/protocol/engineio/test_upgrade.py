"""The Engine.IO session's upgrade from polling to WebSocket: probe, UPGRADE, timeouts.

Scenarios follow the official engine.io-protocol v4 test-suite, with time passed in explicitly.
"""

from __future__ import annotations

import pytest

from tests.protocol.engineio.support import assert_refused, open_polling, post
from volthub.protocol.engineio.handshake import ErrorCode
from volthub.protocol.engineio.session import MessageReceived, ProbeResult, UpgradeCancelled


def test_upgrade_from_polling_to_websocket() -> None:
    session = open_polling()
    session.send_message("buffered")  # queued while polling, nobody polled: goes to the WebSocket
    assert session.upgrade_begin(0.01) is None
    assert session.upgrading
    assert session.receive_probe_frame("2probe", 0.02) == ProbeResult(reply=("3probe",))
    assert session.take_outgoing() == []  # not the session's transport yet
    assert session.receive_probe_frame("5", 0.03) == ProbeResult(upgraded=True)
    assert session.transport == "websocket" and not session.upgrading
    assert session.take_outgoing() == ["4buffered"]
    assert session.receive_frame("4hello", 0.04) == [MessageReceived("hello")]
    # Polling requests for the session are refused from now on; the session lives on.
    assert_refused(session.poll_begin(0.05), ErrorCode.BAD_REQUEST)
    assert_refused(session.upgrade_begin(0.05), ErrorCode.BAD_REQUEST)
    assert not session.closed


def test_probe_releases_the_pending_get_with_noop() -> None:
    # The official suite: after 3probe, the pending (or next) GET answers "6".
    session = open_polling()
    session.poll_begin(0.0)
    session.upgrade_begin(0.01)
    assert not session.poll_ready
    session.receive_probe_frame("2probe", 0.02)
    assert session.poll_ready
    assert session.poll_take() == "6"
    assert session.poll_begin(0.03) is None  # a GET sent just before the client paused
    assert session.poll_take() == "6"
    assert session.receive_probe_frame("5", 0.04).upgraded
    session.send_message("hello")
    assert session.take_outgoing() == ["4hello"]


def test_get_pending_when_the_upgrade_completes_gets_noop() -> None:
    session = open_polling()
    session.upgrade_begin(0.0)
    session.receive_probe_frame("2probe", 0.0)
    session.poll_begin(0.0)
    session.poll_take()
    session.poll_begin(0.0)  # could not happen with the reference client, but must be safe
    session.receive_probe_frame("5", 0.01)
    session.send_message("x")
    assert session.poll_ready
    assert session.poll_take() == "6"
    assert session.take_outgoing() == ["4x"]


def test_data_queued_during_the_probe_goes_to_the_last_poll() -> None:
    session = open_polling()
    session.upgrade_begin(0.0)
    session.receive_probe_frame("2probe", 0.0)
    session.send_message("during")
    session.poll_begin(0.0)
    assert session.poll_take() == "4during"  # the client still reads its in-flight poll


def test_heartbeat_continues_through_the_upgrade() -> None:
    session = open_polling()
    session.upgrade_begin(0.1)
    session.receive_probe_frame("2probe", 0.1)
    session.receive_probe_frame("5", 0.1)
    session.on_timer(0.3)
    assert session.take_outgoing() == ["2"]
    session.receive_frame("3", 0.35)
    assert not session.closed


@pytest.mark.parametrize(
    "frames", [["5"], ["2"], ["2probe", "4hello"], ["abc"], ["2probe", "2probe"], ["2probe", "x" * 100]]
)
def test_bad_probe_sequences_are_rejected_and_polling_continues(frames: list[str]) -> None:
    session = open_polling()
    session.upgrade_begin(0.0)
    results = [session.receive_probe_frame(f, 0.0) for f in frames]
    assert results[-1] == ProbeResult(rejected=True)
    assert session.transport == "polling" and not session.upgrading and not session.closed
    assert session.upgrade_begin(0.1) is None  # the client may try again


def test_second_websocket_during_a_probe_is_refused() -> None:
    session = open_polling()
    assert session.upgrade_begin(0.0) is None
    assert_refused(session.upgrade_begin(0.0), ErrorCode.BAD_REQUEST)


def test_upgrade_timeout_cancels_the_probe() -> None:
    session = open_polling()
    session.upgrade_begin(0.0)
    session.receive_probe_frame("2probe", 0.0)
    assert session.next_deadline() == pytest.approx(0.3)  # the ping comes first
    session.on_timer(0.3)
    session.poll_begin(0.3)
    assert session.poll_take() == "2"
    post(session, "3", 0.35)
    assert session.on_timer(1.0) == [UpgradeCancelled("upgrade timeout")]
    assert session.transport == "polling" and not session.upgrading
    assert session.receive_probe_frame("5", 1.1) == ProbeResult(rejected=True)


def test_probe_websocket_closing_aborts_the_upgrade() -> None:
    session = open_polling()
    session.upgrade_begin(0.0)
    session.receive_probe_frame("2probe", 0.0)
    session.upgrade_abort(0.1)
    assert not session.upgrading
    session.send_message("still polling")
    session.poll_begin(0.2)
    assert session.poll_take() == "4still polling"


def test_closing_during_a_probe_rejects_the_probe() -> None:
    session = open_polling()
    session.upgrade_begin(0.0)
    session.close(0.0)
    assert session.receive_probe_frame("2probe", 0.0) == ProbeResult(rejected=True)
    assert_refused(session.upgrade_begin(0.0), ErrorCode.UNKNOWN_SID)
