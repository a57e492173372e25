"""What the generator adds to the protocol package's client role: its request target, the
event prefix of its hot path, the benchmark message, and keys and masks without a system call."""

from __future__ import annotations

import pytest

from volthub.loadtest import protocol as p
from volthub.protocol.websocket import OP_TEXT, FrameReader


def test_engineio_target() -> None:
    assert p.engineio_target("/ws/events") == "/ws/events/?EIO=4&transport=websocket"
    assert p.engineio_target("/socket.io/", "t") == "/socket.io/?EIO=4&transport=websocket&token=t"


def test_event_prefixes_match_what_servers_send() -> None:
    assert '42["event",{"event":"chat.message"}]'.startswith(p.event_prefix("/", "event"))
    assert '42/ws/events,["chat.message",{}]'.startswith(p.event_prefix("/ws/events", "chat.message"))
    assert not '42["events",{}]'.startswith(p.event_prefix("/", "event"))


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
    frames = [p.client_frame(OP_TEXT, b"40") for _ in range(50)]
    assert len({frame[2:6] for frame in frames}) > 40, "masks still vary from frame to frame"
    assert all(FrameReader(1024).feed(frame) == ["40"] for frame in frames)
    assert len({p.new_key() for _ in range(50)}) == 50
