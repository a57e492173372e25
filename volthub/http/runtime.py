"""What the running app holds: settings, database, clock, bus, publisher, token service."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from quart import current_app

from volthub.config import Settings
from volthub.hub.bus import Bus
from volthub.hub.clock import Clock
from volthub.hub.publisher import EventPublisher
from volthub.persistence import Database
from volthub.services.tokens import TokenService


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    bus: Bus
    database: Database | None = None
    publisher: EventPublisher | None = None
    tokens: TokenService | None = None
    # Later features hang their services here by name (hub registry, webhooks, ...).
    services: dict[str, Any] = field(default_factory=dict)

    @property
    def db(self) -> Database:
        assert self.database is not None, "database is opened in before_serving"
        return self.database

    @property
    def events(self) -> EventPublisher:
        assert self.publisher is not None, "publisher is created in before_serving"
        return self.publisher


def runtime() -> Runtime:
    return current_app.extensions["volthub"]
