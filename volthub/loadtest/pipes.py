"""Line-oriented talk between a load-test parent and its child processes over pipes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any


async def lines(stream: Any) -> AsyncIterator[str]:
    """Each newline-terminated line of ``stream`` (a Trio receive stream), until it ends."""
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield line.decode()
