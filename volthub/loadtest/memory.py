"""Bytes per Events API connection, by kind, measured with tracemalloc (issue 16).

    .venv/bin/python -m volthub.loadtest.memory --connections 500 [--gateway]

Serves the app in this process (Hypercorn, trio worker, a fresh SQLite file) under
tracemalloc, and opens the connections from a child process (so the client's own objects
are not counted): first N Socket.IO connections over WebSocket (token in auth, subscribed
to their channel), then N SSE streams. After each batch it prints the traced bytes it
added per connection, grouped by where they were allocated (volthub's modules, Hypercorn,
wsproto, h11, trio, the rest). tracemalloc counts Python allocations only; the RSS per
connection that `volthub loadtest` reports also holds kernel socket buffers and allocator
slack.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import trio

GROUPS = (
    ("volthub/http/events", "volthub: Engine.IO/Socket.IO adapter"),
    ("volthub/protocol", "volthub: protocol sessions"),
    ("volthub/hub", "volthub: fan-out"),
    ("volthub", "volthub: other"),
    ("hypercorn", "Hypercorn"),
    ("wsproto", "wsproto"),
    ("h11", "h11"),
    ("trio", "trio"),
)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _group(filename: str) -> str:
    path = filename.replace(os.sep, "/")
    for marker, name in GROUPS:
        if f"/{marker}/" in path:
            return name
    return "other (stdlib, quart, ...)"


def _by_group(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot) -> Counter[str]:
    found: Counter[str] = Counter()
    for stat in after.compare_to(before, "filename"):
        found[_group(stat.traceback[0].filename)] += stat.size_diff
    return found


def _report(kind: str, grouped: Counter[str], count: int) -> None:
    total = sum(grouped.values())
    print(f"{kind}: {total / count:,.0f} traced bytes per connection ({count} connections)")
    for name, size in grouped.most_common():
        if abs(size) / count >= 1:
            print(f"  {size / count:10,.0f}  {name}")


async def _serve(connections: int, gateway: bool = False) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from volthub.config import load_settings
    from volthub.http.app import create_app

    workdir = Path(tempfile.mkdtemp(prefix="volthub-memory-"))
    settings = load_settings(
        None,
        environ={},
        overrides={
            "database": {"url": f"sqlite:///{workdir / 'memory.db'}"},
            "auth": {"argon2_time_cost": 1, "argon2_memory_kib": 1024},
            "ratelimit": {"enabled": False},
            # --gateway: the sockets go to the Events API gateway's own port (issue 16).
            "events": {"gateway_port": _free_port() if gateway else 0},
        },
    )
    app = create_app(settings)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(
            lambda task_status: serve(app, config, shutdown_trigger=stop.wait, task_status=task_status)
        )
        base = binds[0]
        gateway_url = app.extensions["volthub"].gateway.url if gateway else base
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            body = (
                await http.post("/api/auth/register", json={"username": "memory_probe", "password": "x" * 12})
            ).json()
        token = body["token"]
        child = await trio.lowlevel.open_process(
            [sys.executable, "-m", "volthub.loadtest.memory", "--client", base, token, str(connections), gateway_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stdin is not None
        lines = _lines(child.stdout)
        for kind in ("Socket.IO over WebSocket", "SSE stream"):
            await trio.sleep(0.5)
            before = tracemalloc.take_snapshot()
            await child.stdin.send_all(b"go\n")
            line = await lines.__anext__()
            assert line.startswith("ready"), line
            await trio.sleep(1.0)  # let the server finish what the last connects started
            after = tracemalloc.take_snapshot()
            _report(kind, _by_group(before, after), connections)
        await child.stdin.aclose()
        await child.wait()
        stop.set()


async def _lines(stream: Any) -> Any:
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        yield line.decode()


async def _client(base: str, token: str, count: int, sockets_base: str) -> None:
    """The child: on each "go" line, open `count` connections of the next kind, say "ready"."""
    from trio_websocket import open_websocket_url

    stdin = trio.lowlevel.FdStream(os.dup(0))
    lines = _lines(stdin)
    ws_url = sockets_base.replace("http://", "ws://") + "/ws/events?EIO=4&transport=websocket"
    async with trio.open_nursery() as nursery:
        await lines.__anext__()
        ready = trio.Semaphore(0)

        async def socket() -> None:
            async with open_websocket_url(ws_url) as ws:
                await ws.get_message()  # OPEN
                await ws.send_message('40{"token":"%s"}' % token)
                await ws.get_message()  # CONNECT
                await ws.get_message()  # connected
                ready.release()
                while True:
                    if await ws.get_message() == "2":
                        await ws.send_message("3")

        for _ in range(count):
            nursery.start_soon(socket)
        for _ in range(count):
            await ready.acquire()
        print("ready sockets", flush=True)

        await lines.__anext__()
        http = httpx.AsyncClient(base_url=base, timeout=None, limits=httpx.Limits(max_connections=None))

        async def stream() -> None:
            async with http.stream("GET", "/api/events/stream", headers={"Authorization": f"Bearer {token}"}) as r:
                async for _ in r.aiter_lines():
                    ready.release()
                    await trio.sleep_forever()

        for _ in range(count):
            nursery.start_soon(stream)
        for _ in range(count):
            await ready.acquire()
        print("ready streams", flush=True)
        async for _ in lines:
            pass
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument("--gateway", action="store_true", help="Socket.IO connections on the gateway port")
    parser.add_argument("--client", nargs=4, metavar=("BASE", "TOKEN", "N", "SOCKETS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        base, token, count, sockets_base = args.client
        trio.run(_client, base, token, int(count), sockets_base)
        return
    tracemalloc.start(1)
    trio.run(_serve, args.connections, args.gateway)


if __name__ == "__main__":
    main()
