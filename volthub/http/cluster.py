"""Several processes on one PostgreSQL database (docs/architecture.md, "The publish path and
the brokers").

The app's side of it: the broker and presence as background services, and the readiness
report a worker of `volthub serve --workers N` sends its parent (so a rolling restart
replaces the next worker only once the new one serves). Every call goes through the
broker's interface (hub.broker.Broker): with one process each is a no-op.
"""

from __future__ import annotations

import logging
import os

import trio

from volthub.http.runtime import Runtime

# Set by `volthub serve --workers N` in each worker's environment: a pipe to write one byte
# to once the app has started.
READY_FD_ENV = "VOLTHUB_READY_FD"

# How long a starting process waits for its broker to hear the other processes before it
# serves anyway (a broker that is down at start must not keep the API down with it).
RELAY_START_WAIT_SECONDS = 10.0

log = logging.getLogger(__name__)


def install(rt: Runtime) -> None:
    """After the start-up hooks: resume buffers filled from the event log (or from the
    broker's streams, per channel followed here), and presence added up over every process."""
    fanout = rt.services.fanout
    rt.bus.add_history(fanout.replace_recent)
    rt.services.presence = rt.bus.presence(fanout, rt.settings.cluster.presence_interval_seconds)


async def wait_for_relay(rt: Runtime) -> None:
    """Start serving only once this process hears the other processes. An event published
    elsewhere after this process first answered must reach its listeners (a revoked session
    leaving its cache, a message its sockets wait for), not only its resume buffers, which
    is all that events from before the broker listened become. A broker still unreachable
    after `RELAY_START_WAIT_SECONDS` does not hold the start back: `/healthz` says why."""
    with trio.move_on_after(RELAY_START_WAIT_SECONDS) as waited:
        await rt.bus.wait_connected()
    if waited.cancelled_caught:
        log.warning(
            "serving before the event relay could hear the other processes (%s); "
            "events they publish until it does reach this process only as history",
            rt.bus.problem or "not connected yet",
        )


async def presence_service(rt: Runtime) -> None:
    """Background service: this process's share of presence (nothing to do in one process)."""
    await rt.services.presence.run()


async def relay_service(rt: Runtime) -> None:
    """Background service: the broker between processes (nothing to do in one process)."""
    await rt.bus.run()


def report_ready() -> None:
    """Tell the parent process this worker has started (no-op outside `--workers`)."""
    raw = os.environ.pop(READY_FD_ENV, None)
    if raw is None:
        return
    try:
        fd = int(raw)
        os.write(fd, b"1")
        os.close(fd)
    except (ValueError, OSError):
        pass  # the parent went away or was not ours; serving goes on regardless
