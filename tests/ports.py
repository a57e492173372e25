"""Free loopback ports for tests that run side by side (pytest-xdist, `make test`).

`volthub.loadtest.servers.free_port` asks the kernel for an ephemeral port and closes it: the
port is free at that moment only. A server started from it binds it later (a `volthub serve`
child process seconds later), and in that gap another worker's `free_port`, or any outgoing
connection, may be handed the same port. Under xdist each worker therefore draws its ports
from a block of its own below the kernel's ephemeral range (which starts at 32768 by
default), so neither another worker nor a client socket can be given one of them. A Redis
Cluster node also listens on its port + 10000: the blocks lie in 10000-19999, so those
ports (20000-29999) are nobody's either.

`use_worker_ports()` swaps the function in `volthub.loadtest.servers` (and in every module
that already imported it) before any test module is imported, so every test, helper and
in-process load generator gets it without doing anything. A single process run (no xdist,
`-n 0`) keeps the kernel's choice.
"""

from __future__ import annotations

import os
import random
import socket
import sys
from collections.abc import Callable

FIRST = 10_000
SPAN = 10_000


def worker_block(worker: str, count: int) -> range:
    """The ports of xdist worker `worker` ("gw0", "gw1", …) among `count` workers."""
    index = int(worker.removeprefix("gw"))
    size = SPAN // max(count, index + 1)
    return range(FIRST + index * size, FIRST + (index + 1) * size)


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def block_free_port(block: range, fallback: Callable[[], int]) -> Callable[[], int]:
    """A `free_port` that hands out the ports of `block` in turn, skipping those bound now.
    It starts at a random place, so two suites running at once rarely meet."""
    position = random.randrange(len(block))

    def free_port() -> int:
        nonlocal position
        for _ in range(len(block)):
            port = block[position % len(block)]
            position += 1
            if _bindable(port):
                return port
        return fallback()  # every port of the block is taken: the kernel's choice then

    return free_port


def use_worker_ports() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    from volthub.loadtest import servers

    original = servers.free_port
    if getattr(original, "worker_block", None) is not None:
        return
    block = worker_block(worker, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    replacement = block_free_port(block, original)
    replacement.worker_block = block  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] in ("volthub", "tests") and getattr(module, "free_port", None) is original:
            module.free_port = replacement  # type: ignore[attr-defined]
