"""Follow a channel's events over Socket.IO with python-socketio's asyncio client.

    BASE=http://127.0.0.1:8080 TOKEN=<a token> python docs/examples/socketio_client.py [--count N]

Connects to the namespace `/ws/events` (on the default path `/socket.io`) with the token in
`auth.token`, which subscribes the connection to the token owner's channel. Prints
`connected`, then each event twice, as volthub sends it: once as `event` (the envelope
`{event, data, timestamp}`) and once under its own name (the data alone). Exits 0 after
N events (default: run until Ctrl-C), 1 when the connection is refused or the
`--timeout` passes first.

Needs `python-socketio[asyncio_client]` (in volthub's `test` extra). The Events API guide
(docs/guides/events.md) runs this script; tests/test_docs_commands.py runs the guide.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import socketio

NAMESPACE = "/ws/events"


def show(kind: str, payload: Any) -> None:
    # One JSON line per frame, flushed at once: readable by people and by scripts alike.
    print(kind, json.dumps(payload, sort_keys=True), flush=True)


async def follow(base: str, token: str, count: int | None, timeout: float | None) -> int:
    client = socketio.AsyncClient(reconnection=False)
    finished = asyncio.Event()
    by_name_seen = 0

    @client.on("connected", namespace=NAMESPACE)
    async def on_connected(info: dict[str, Any]) -> None:
        show("connected", info)  # {channelUsername, channelId, authenticated, autoSubscribed}

    @client.on("event", namespace=NAMESPACE)
    async def on_event(envelope: dict[str, Any]) -> None:
        show("event", envelope)  # every event, as {event, data, timestamp}

    @client.on("*", namespace=NAMESPACE)
    async def on_named(name: str, data: Any) -> None:
        # Every other name: the by-name copy of each event (it follows its `event` frame),
        # and replies such as `error` or `subscribed`.
        nonlocal by_name_seen
        show(name, data)
        by_name_seen += 1
        if count is not None and by_name_seen >= count:
            finished.set()

    @client.on("disconnect", namespace=NAMESPACE)
    async def on_disconnect(*reason: Any) -> None:
        finished.set()

    try:
        await client.connect(base, namespaces=[NAMESPACE], auth={"token": token}, transports=["websocket"])
    except socketio.exceptions.ConnectionError as refused:
        print(f"connection refused: {refused}", file=sys.stderr)
        return 1
    try:
        await asyncio.wait_for(finished.wait(), timeout)
    except TimeoutError:
        print(f"no {count} events within {timeout} s", file=sys.stderr)
        return 1
    finally:
        await client.disconnect()
    return 0 if count is None or by_name_seen >= count else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, help="exit after this many events (default: run until Ctrl-C)")
    parser.add_argument("--timeout", type=float, help="give up after this many seconds")
    args = parser.parse_args()
    base = os.environ.get("BASE", "http://127.0.0.1:8080")
    try:
        return asyncio.run(follow(base, os.environ["TOKEN"], args.count, args.timeout))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
