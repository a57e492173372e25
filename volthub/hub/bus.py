"""The event bus: `publish(event)` reaches every listener of every process.

In one process it is a direct call. Listeners must not block: they hand the event to
bounded queues with `send_nowait` (DESIGN §2), so one slow consumer never delays another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from volthub.hub.publisher import Event

Listener = Callable[["Event"], None]
log = logging.getLogger(__name__)


class Bus(Protocol):
    def publish(self, event: Event) -> None: ...

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add a listener; returns the function that removes it."""


class InProcessBus:
    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def publish(self, event: Event) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # one broken listener must not starve the others
                log.exception("event listener failed for %s", event.name)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe
