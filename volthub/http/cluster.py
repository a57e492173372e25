"""Several processes on one PostgreSQL database (docs/architecture.md, "Bus and brokers").

The app's side of it: the bus relay and presence as background services, and the readiness report a
worker of `volthub serve --workers N` sends its parent (so a rolling restart replaces the
next worker only once the new one serves).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

import trio

from volthub.config import Settings
from volthub.http.events.registry import ConnectionRegistry
from volthub.http.runtime import Presence, Runtime
from volthub.hub.bus import PostgresRelay
from volthub.hub.clock import Clock
from volthub.hub.fanout import Fanout
from volthub.hub.presence import ClusterPresence, RedisPresenceStore
from volthub.hub.redis_bus import RedisRelay

if TYPE_CHECKING:
    from volthub.persistence import Database

# Set by `volthub serve --workers N` in each worker's environment: a pipe to write one byte
# to once the app has started.
READY_FD_ENV = "VOLTHUB_READY_FD"

# How long a starting process waits for its relay to hear the other processes before it
# serves anyway (a broker that is down at start must not keep the API down with it).
RELAY_START_WAIT_SECONDS = 10.0

log = logging.getLogger(__name__)


def install(
    settings: Settings,
    clock: Clock,
    database: Database,
    relay: PostgresRelay | RedisRelay | None,
    fanout: Fanout,
    connections: ConnectionRegistry,
) -> Presence:
    """The presence of the deployment; on PostgreSQL also the resume buffers filled from the
    event log (or from the broker's streams, per channel followed here), and presence added
    up over every process."""
    if relay is None:
        return fanout  # snapshot(channel_id) -> (user ids, anonymous count)
    if isinstance(relay, RedisRelay):
        fanout.interest = relay.channel_interest
        connections.interest = relay.user_interest
        relay.add_history(fanout.replace_recent)
    else:
        relay.add_backfill(fanout.remember)
    store = RedisPresenceStore(relay) if isinstance(relay, RedisRelay) else None
    interval = settings.cluster.presence_interval_seconds
    return ClusterPresence(database, clock, fanout, interval, store)


async def wait_for_relay(rt: Runtime) -> None:
    """Start serving only once this process hears the other processes. An event published
    elsewhere after this process first answered must reach its listeners (a revoked session
    leaving its cache, a message its sockets wait for), not only its resume buffers, which
    is all that events from before the relay listened become. A broker still unreachable
    after `RELAY_START_WAIT_SECONDS` does not hold the start back: `/healthz` says why."""
    if not isinstance(rt.bus, PostgresRelay | RedisRelay):
        return
    with trio.move_on_after(RELAY_START_WAIT_SECONDS) as waited:
        await rt.bus.wait_connected()
    if waited.cancelled_caught:
        log.warning(
            "serving before the event relay could hear the other processes (%s); "
            "events they publish until it does reach this process only as history",
            rt.bus.problem or "not connected yet",
        )


async def presence_service(rt: Runtime) -> None:
    """Background service: this process's presence rows (nothing to do on SQLite)."""
    presence = rt.services.presence
    if isinstance(presence, ClusterPresence):
        await presence.run()


async def relay_service(rt: Runtime) -> None:
    """Background service: the bus relay between processes (nothing to do on SQLite)."""
    if isinstance(rt.bus, PostgresRelay | RedisRelay):
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
