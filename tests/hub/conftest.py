"""Fixtures of the actor-runtime tests: a registry started in the test's nursery."""

from __future__ import annotations

import uuid

import pytest
import trio

from tests.hub.brokers import deployment_url, kind, shared_kind, start_process
from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import TrioClock
from volthub.hub.publisher import EventPublisher
from volthub.hub.registry import ActorRegistry
from volthub.persistence import users as users_repo

__all__ = ["deployment_url", "kind", "shared_kind", "start_process"]  # the broker fixtures (tests/hub/brokers.py)


class Hub:
    """A registry with its own bus; `events` is everything it published."""

    def __init__(self, db, bus=None, clock=None, **options):
        self.db = db
        self.bus = bus or InProcessBroker()
        self.events = []
        self.bus.subscribe(self.events.append)
        clock = clock or TrioClock()
        self.publisher = EventPublisher(db, self.bus, clock)
        self.registry = ActorRegistry(db, self.publisher, clock, **options)

    def named(self, name):
        return [event for event in self.events if event.name == name]


@pytest.fixture
async def start_hub(db, nursery):
    async def start(**options) -> Hub:
        hub = Hub(db, **options)
        await nursery.start(hub.registry.run)
        return hub

    return start


async def retired(actor, mock_clock, idle_seconds=60):
    """Until `actor` stops for being idle past `idle_seconds` of the mock clock."""
    mock_clock.jump(idle_seconds + 1)
    mock_clock.autojump_threshold = 0.5  # so a never-stopping actor fails the test, not hangs it
    with trio.fail_after(3600):
        await actor.stopped.wait()
    mock_clock.autojump_threshold = float("inf")


async def two_processes(db, nursery, channel, **options):
    """Two registries started on the same database, as two processes would be; each has
    resumed `channel` (its open deadlines)."""
    hubs = Hub(db, **options), Hub(db, **options)
    for hub in hubs:
        await nursery.start(hub.registry.run)
    assert all(channel in hub.registry.active_channels() for hub in hubs)
    return hubs


async def make_user(db, name):
    user_id = str(uuid.uuid4())
    await db.write(
        lambda tx: users_repo.create_user(
            tx, user_id=user_id, username=name, display_name=name.title(), password_hash="h", now_ms=1
        )
    )
    return user_id
