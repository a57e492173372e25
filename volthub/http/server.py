"""One process's server: its two listeners, the runtime they serve, and one ordered stop.

The listeners are the main port (Hypercorn serving the Quart app: REST, SSE, the pages and
the Engine.IO mount) and the Events API gateway (`[events] gateway_port`, an h11 listener of
its own). `create_app` makes the `Server` with the app; it holds the app's lifespan, so the
same start and stop run whoever launches it: `volthub serve` (one process, or each worker of
`--workers N`, which the parent stops with SIGTERM on a rolling restart or a stop), the
`hypercorn` command, the tests' live servers and Quart's in-process test app.

Start (the lifespan's start): `compose` builds the runtime and starts the background
services; once the runtime is ready, the gateway binds its port and serves. Hypercorn binds
the main port after the lifespan has started, so neither listener takes a client before
the runtime can serve it.

Stop, in this order:

1. Neither listener accepts: the gateway closes its listening socket, Hypercorn its own.
2. Every Events API connection, on either listener, is ended through the connection
   registry: Socket.IO clients are told why and reconnect elsewhere, SSE streams end with a
   `shutdown` event. Otherwise they would hold step 3 until its deadline.
3. Requests in flight on either listener finish, up to `[server] shutdown_timeout`
   (Hypercorn's graceful wait).
4. The gateway's remaining connections are closed; then, leaving `compose`, the background
   services stop and the broker and the database close.

Steps 1 and 2 run when the stop is asked for (`Server.serve`'s `until` returning, or the
`hypercorn` command's shutdown event); step 4 runs when Hypercorn ends the lifespan. Quart's
test app ends the lifespan without a stop being asked for: step 4 then runs steps 1 and 2
first.

The gateway is served under a supervisor of its own, as the background services are under
theirs: should its accept loop fail, it is started again with back-off
(`volthub_service_restarts_total{service="gateway"}`), on the socket it already holds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable

import trio
from quart import Quart
from quart_trio import QuartTrio

from volthub import logs, version
from volthub.config import Settings
from volthub.http import serving
from volthub.http.composition import compose
from volthub.http.events.gateway import Gateway
from volthub.http.runtime import RUNTIME_KEY, Runtime
from volthub.hub.clock import Clock
from volthub.hub.supervisor import Service, Supervisor

log = logging.getLogger(__name__)

# Where `create_app` keeps the app's server.
SERVER_KEY = "volthub.server"


class Server:
    """Both listeners of one process and their one ordered start and stop (module docstring)."""

    def __init__(self, app: QuartTrio, settings: Settings, clock: Clock) -> None:
        self.app = app
        self.settings = settings
        self._clock = clock
        self._stopping = False
        self._finishing = trio.Event()
        self._finished = trio.Event()
        app.before_serving(self._start)
        app.after_serving(self._finish)

    @property
    def runtime(self) -> Runtime:
        """The runtime being served (from the lifespan's start to its end)."""
        found: Runtime = self.app.extensions[RUNTIME_KEY]
        return found

    async def serve(
        self,
        until: Callable[[], Awaitable[object]],
        *,
        bind: str | None = None,
        task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve both listeners until `until()` returns, then stop in order. Reports the main
        port's bound addresses as started; `bind` overrides `[server] host` and `port`
        (`fd://N` serves a socket the parent of `--workers N` opened)."""
        from hypercorn.trio import serve as hypercorn_serve

        config = serving.hypercorn_config(self.settings, bind)
        trigger = self.stop_trigger(until)
        await hypercorn_serve(self.app, config, shutdown_trigger=trigger, task_status=task_status)

    def stop_trigger(self, until: Callable[..., Awaitable[object]]) -> Callable[..., Awaitable[None]]:
        """Hypercorn's shutdown trigger: once `until` returns, steps 1 and 2 of the stop, then
        Hypercorn goes on with its own (stop accepting, wait for requests in flight)."""

        async def fire(*args: object) -> None:
            await until(*args)
            self.begin_stop()

        return fire

    def begin_stop(self) -> None:
        """Steps 1 and 2: no new connections on either listener, and every Events API
        connection ended (once; nothing to do before the runtime is made)."""
        if self._stopping or RUNTIME_KEY not in self.app.extensions:
            return
        self._stopping = True
        runtime = self.runtime
        if runtime.gateway is not None:
            runtime.gateway.stop_accepting()
        ended = runtime.services.connections.close_all("server shutting down")
        log.info("shutting down: ended %d Events API connection(s)", ended)

    async def _start(self) -> None:
        self._stopping = False
        self._finishing, self._finished = trio.Event(), trio.Event()
        await self.app.nursery.start(self._hold)
        _log_started(self.settings)

    async def _finish(self) -> None:
        self._finishing.set()
        await self._finished.wait()

    async def _hold(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The runtime and the gateway from the start to step 4, in a task of the app's own
        nursery (so the supervisor's nursery inside `compose` has one owner throughout)."""
        try:
            async with compose(self.settings, self._clock) as runtime:
                self.app.extensions[RUNTIME_KEY] = runtime
                async with trio.open_nursery() as gateway_nursery:
                    if runtime.gateway is not None:
                        await gateway_nursery.start(_serve_gateway, runtime.gateway)
                    task_status.started()
                    await self._finishing.wait()
                    self.begin_stop()
                    gateway_nursery.cancel_scope.cancel()
        finally:
            self._finished.set()


async def _serve_gateway(gateway: Gateway, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Bind the gateway's port (a taken one fails the start) and serve it until cancelled."""
    host, port = gateway.bind()
    log.debug("Events API gateway listening on %s:%d", host, port)
    try:
        await Supervisor().run([Service("gateway", gateway.run)], task_status=task_status)
    finally:
        gateway.stop_accepting()  # a start that failed half-way, or a stop never asked for


def server_of(app: Quart) -> Server:
    """The server `create_app` made for `app`."""
    found: Server = app.extensions[SERVER_KEY]
    return found


def _log_started(settings: Settings) -> None:
    """One line an operator can act on: what serves where, on what."""
    worker = os.environ.get(logs.WORKER_ENV)
    if worker is not None:  # the parent of `volthub serve --workers` logs the summary once
        log.info("worker %s ready (pid %d)", worker, os.getpid())
        return
    log.info("%s", logs.startup_summary(settings, version(), workers=1))
