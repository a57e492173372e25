"""What the load generator adds to the protocol package's client role.

The wire formats themselves (WebSocket frames and handshake, Engine.IO and Socket.IO packets,
server-sent events) are read and written by `volthub.protocol` in the client role, the same
codecs the server uses in the other. Here: the masks and keys a generator draws, the request
target of a WebSocket-only Engine.IO connection, the prefix that tells an event frame apart
on the hot path, and the benchmark message, whose text carries its send time so that each
receiver measures end-to-end latency without any clock shared with the server.
"""

from __future__ import annotations

import base64
import os
import random

from volthub.protocol import websocket

# A load generator's WebSocket keys and frame masks guard nothing (masks exist so that a
# browser's scripts cannot steer what proxies cache): they come from a seeded generator
# instead of os.urandom, which is a system call per frame, two of a hold's connect.
_random = random.Random(os.urandom(16))


def new_key() -> str:
    """A `Sec-WebSocket-Key`: 16 random bytes in base64."""
    return base64.b64encode(_random.randbytes(16)).decode()


def client_frame(opcode: int, payload: bytes) -> bytes:
    """A frame as this generator's clients write it (masked, with a drawn mask)."""
    return websocket.client_frame(opcode, payload, _random.randbytes(4))


def engineio_target(path: str, token: str | None = None) -> str:
    """The request target of a WebSocket-only Engine.IO v4 connection."""
    path = path if path.endswith("/") else path + "/"
    query = "EIO=4&transport=websocket"
    return f"{path}?{query}&token={token}" if token else f"{path}?{query}"


def event_prefix(namespace: str, name: str) -> str:
    """How an EVENT frame named `name` starts, for a cheap prefix test on the hot path."""
    ns = "" if namespace == "/" else f"{namespace},"
    return f'42{ns}["{name}",'


# --- the benchmark message ---------------------------------------------------------------------

MESSAGE_MARK = "lt"


def make_message(run_tag: str, seq: int, send_ns: int, size: int = 0) -> str:
    """Chat text carrying the run, a sequence number and the send time (monotonic ns)."""
    text = f"{MESSAGE_MARK} {run_tag} {seq} {send_ns}"
    if size > len(text) + 1:
        text += " " + "x" * (size - len(text) - 1)
    return text


def parse_message(text: str, run_tag: str) -> tuple[int, int] | None:
    """(seq, send_ns) of one of this run's messages; None for anything else."""
    parts = text.split(" ", 4)
    if len(parts) < 4 or parts[0] != MESSAGE_MARK or parts[1] != run_tag:
        return None
    try:
        return int(parts[2]), int(parts[3])
    except ValueError:
        return None
