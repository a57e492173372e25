"""One supervisor for the process's background services.

Each service runs in the supervisor's nursery. An exception is logged and the service is
started again after an exponential back-off (doubling from `initial_delay` up to
`max_delay`), so one crashing service never tears down the app. A service that stayed up
for `healthy_after` seconds before it failed starts again from `initial_delay`: the back-off
grows only while it keeps failing fast. A service that returns is done and not restarted.
Cancelling the supervisor (`stop`, or cancelling the enclosing scope) stops every service;
a service that fails while it is being stopped has its error logged, and the stop goes on.
The back-off waits are Trio sleeps, so MockClock drives them in tests.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import trio

from volthub import metrics

log = logging.getLogger(__name__)

ServiceFn = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Backoff:
    initial_delay: float = 1.0
    max_delay: float = 60.0
    factor: float = 2.0
    healthy_after: float = 60.0

    def delay(self, failures: int) -> float:
        """The wait before restart number `failures` (1 = after the first failure)."""
        exponent = max(0, failures - 1)
        # Compared in log space, so a long run of failures cannot overflow the power.
        if exponent * math.log(self.factor) >= math.log(self.max_delay / self.initial_delay):
            return self.max_delay
        return min(self.max_delay, self.initial_delay * self.factor**exponent)


@dataclass(frozen=True)
class Service:
    name: str
    run: ServiceFn


class Supervisor:
    """Runs `Service`s until cancelled. Counters are kept for logs and tests."""

    def __init__(self, backoff: Backoff | None = None) -> None:
        self.backoff = backoff or Backoff()
        self.restarts: dict[str, int] = {}
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()

    async def run(
        self, services: Sequence[Service], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start every service, report started, and supervise until cancelled or `stop()`."""
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    for service in services:
                        self.restarts[service.name] = 0
                        nursery.start_soon(self._keep_running, service, name=f"service:{service.name}")
                    task_status.started()
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        """Cancel every service and wait until they have all ended."""
        if self._scope is not None:
            self._scope.cancel()
            await self._stopped.wait()

    async def _keep_running(self, service: Service) -> None:
        failures = 0
        while True:
            started = trio.current_time()
            try:
                await service.run()
            except Exception:
                if trio.current_time() - started >= self.backoff.healthy_after:
                    failures = 0
                failures += 1
                delay = self.backoff.delay(failures)
                log.exception("background service %s crashed; restarting it in %g s", service.name, delay)
            except BaseExceptionGroup as group:
                raise _left_to_raise(service.name, group) from None
            else:
                # Several services have nothing to do in some setups (the relay on SQLite).
                log.debug("service %s has nothing (more) to do", service.name)
                return
            await trio.sleep(delay)
            self.restarts[service.name] += 1
            metrics.SERVICE_RESTARTS.labels(service.name).inc()


def _left_to_raise(name: str, group: BaseExceptionGroup[BaseException]) -> BaseException:
    """What to raise for a service that failed while it was being cancelled: its error and
    the cancellation of its other tasks end as one group, which no `except Exception`
    catches. The error is logged and only the cancellation goes on, so a failure as the
    process stops (a database read meeting an outage, say) never escapes the supervisor.
    Any other group is raised as it is."""
    cancelled, rest = group.split(trio.Cancelled)
    if cancelled is None or rest is None:
        return group
    errors, others = rest.split(Exception)
    if others is not None:
        return group
    log.error("background service %s failed as it was stopped", name, exc_info=errors)
    return cancelled
