"""`volthub socketio-conformance`: the command that serves the reference applications of the
official Engine.IO/Socket.IO test-suites (volthub/tools/conformance.py). Kept apart so that
registering the command imports none of the server's code: `volthub serve --workers N`
must import it only after it has chosen where the workers keep their metrics."""

from __future__ import annotations

import argparse
import logging

import trio

from volthub.cli import command

log = logging.getLogger("volthub.tools.conformance")


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="localhost", help="address or name to bind (default localhost: both 127.0.0.1 and ::1)"
    )
    parser.add_argument("--port", type=int, default=3000, help="port (default 3000, as the test-suites use)")
    parser.add_argument(
        "--gateway",
        action="store_true",
        help="serve on the Events API's own listener (h11, one bind: give --host 127.0.0.1) instead of Hypercorn",
    )


@command("socketio-conformance", _configure)
def socketio_conformance(args: argparse.Namespace) -> int:
    """Serve the Engine.IO/Socket.IO reference apps the official protocol test-suites run against."""
    trio.run(_serve_until_signal, _binds(args.host, args.port), args.gateway)
    return 0


def _binds(host: str, port: int) -> list[str]:
    """`localhost` binds the IPv4 and (where available) IPv6 loopback: clients resolve it
    to either."""
    if host == "localhost":
        return [f"127.0.0.1:{port}"] + ([f"[::1]:{port}"] if _ipv6_loopback() else [])
    return [f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"]


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


async def _serve_until_signal(binds: list[str], gateway: bool = False) -> None:
    import signal

    from volthub.tools.conformance import serve

    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(
            lambda task_status: serve(binds, shutdown=stop, gateway=gateway, task_status=task_status)
        )
        log.info("conformance apps on %s: /engine.io/ and /socket.io/", ", ".join(bound))
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                stop.set()
                break
