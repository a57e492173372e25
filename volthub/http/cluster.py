"""Several processes on one PostgreSQL database (issue 17; README "Several processes").

The app's side of it: the bus relay as a background service, and the readiness report a
worker of `volthub serve --workers N` sends its parent (so a rolling restart replaces the
next worker only once the new one serves).
"""

from __future__ import annotations

import os

from volthub.http.runtime import Runtime
from volthub.hub.bus import PostgresRelay

# Set by `volthub serve --workers N` in each worker's environment: a pipe to write one byte
# to once the app has started.
READY_FD_ENV = "VOLTHUB_READY_FD"


async def relay_service(rt: Runtime) -> None:
    """Background service: the PostgreSQL bus relay (nothing to do on SQLite)."""
    if isinstance(rt.bus, PostgresRelay):
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
