"""Bytes per Events API connection, by kind, measured with tracemalloc.

    .venv/bin/python -m volthub.loadtest.memory --connections 500
    .venv/bin/python -m volthub.loadtest.memory --connections 500 --gateway

Serves the app in this process (Hypercorn, trio worker, a fresh SQLite file) under
tracemalloc, and opens the connections from a child process (so the client's own objects
are not counted): first N Socket.IO connections over WebSocket (token in auth, subscribed
to their channel), then N SSE streams; with --gateway, then N more Socket.IO connections to
the Events API's own listener (`[events] gateway_port`, a free port). After each batch it prints the traced bytes it
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

from volthub.loadtest.pipes import lines as read_lines
from volthub.loadtest.servers import free_port

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


def _batches(gateway: bool) -> list[str]:
    """The kinds measured, in order (the child opens them in the same order)."""
    kinds = [SOCKETS, STREAMS]
    return [*kinds, GATEWAY_SOCKETS] if gateway else kinds


SOCKETS = "Socket.IO over WebSocket (main port)"
STREAMS = "SSE stream"
GATEWAY_SOCKETS = "Socket.IO over WebSocket (own listener, gateway_port)"


async def _serve(connections: int, gateway: bool = False) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from volthub.config import load_settings
    from volthub.http.app import create_app

    workdir = Path(tempfile.mkdtemp(prefix="volthub-memory-"))
    overrides: dict[str, dict[str, Any]] = {
        "database": {"url": f"sqlite:///{workdir / 'memory.db'}"},
        "auth": {"argon2_time_cost": 1, "argon2_memory_kib": 1024},
        "ratelimit": {"enabled": False},
    }
    gateway_port = free_port() if gateway else 0  # off unless asked: the mount is measured first
    overrides["events"] = {"gateway_host": "127.0.0.1", "gateway_port": gateway_port}
    settings = load_settings(None, environ={}, overrides=overrides)
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
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            body = (
                await http.post("/api/auth/register", json={"username": "memory_probe", "password": "x" * 12})
            ).json()
        token = body["token"]
        child = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "volthub.loadtest.memory",
                "--client",
                base,
                token,
                str(connections),
                str(gateway_port),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert child.stdout is not None and child.stdin is not None
        lines = read_lines(child.stdout)
        for kind in _batches(gateway):
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


async def _client(base: str, token: str, count: int, gateway_port: int = 0) -> None:
    """The child: on each "go" line, open `count` connections of the next kind, say "ready"."""
    from trio_websocket import open_websocket_url

    stdin = trio.lowlevel.FdStream(os.dup(0))
    lines = read_lines(stdin)
    path = "/ws/events?EIO=4&transport=websocket"
    ws_url = base.replace("http://", "ws://") + path
    async with trio.open_nursery() as nursery:
        await lines.__anext__()
        ready = trio.Semaphore(0)

        async def socket(ws_url: str = ws_url) -> None:
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
        if gateway_port:
            await lines.__anext__()
            for _ in range(count):
                nursery.start_soon(socket, f"ws://127.0.0.1:{gateway_port}{path}")
            for _ in range(count):
                await ready.acquire()
            print("ready gateway sockets", flush=True)
        async for _ in lines:
            pass
        nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=500)
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="also measure Socket.IO connections to the Events API's own listener ([events] gateway_port)",
    )
    parser.add_argument("--client", nargs=4, metavar=("BASE", "TOKEN", "N", "GATEWAY_PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        base, token, count, gateway_port = args.client
        trio.run(_client, base, token, int(count), int(gateway_port))
        return
    from volthub.config import ConfigError

    tracemalloc.start(1)
    try:
        trio.run(_serve, args.connections, args.gateway)
    except ConfigError as exc:  # e.g. --gateway on a build without [events] gateway_port
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
