"""Pre-built server WebSocket frames are byte for byte what wsproto would send."""

from __future__ import annotations

import pytest
from wsproto.frame_protocol import FrameProtocol, Opcode

from volthub.http.events.asgi import websocket_frame


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 70000])
@pytest.mark.parametrize("binary", [False, True])
def test_frames_match_wsproto(size: int, binary: bool) -> None:
    frame: str | bytes = bytes(range(256)) * (size // 256) + bytes(range(size % 256)) if binary else "é" * (size // 2)
    expected = FrameProtocol(client=False, extensions=[]).send_data(frame, fin=True)
    assert websocket_frame(frame) == expected
    assert websocket_frame(frame) is websocket_frame(frame)  # built once, shared


def test_text_and_binary_differ_in_opcode() -> None:
    assert websocket_frame("4x")[0] == 0x80 | Opcode.TEXT
    assert websocket_frame(b"4x")[0] == 0x80 | Opcode.BINARY
