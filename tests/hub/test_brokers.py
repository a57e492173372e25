"""The one choice of a broker (hub/brokers.py open_broker): by the database and `[cluster]`."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import make_settings
from volthub.hub.broker_budgets import DatabaseBudgets, LocalBudgets, RedisBudgets
from volthub.hub.brokers import open_broker
from volthub.hub.bus import InProcessBroker, PostgresBroker
from volthub.hub.clock import SystemClock
from volthub.hub.redis_bus import RedisBroker
from volthub.persistence import open_database

REDIS = {"broker": "redis", "redis_url": "redis://127.0.0.1:1"}  # never connected to here


@pytest.mark.parametrize(
    ("cluster", "broker_type", "budgets_type"),
    [
        ({}, PostgresBroker, DatabaseBudgets),
        ({"shared_rate_limits": False}, PostgresBroker, LocalBudgets),
        (REDIS, RedisBroker, RedisBudgets),
        ({**REDIS, "shared_rate_limits": False}, RedisBroker, LocalBudgets),
    ],
)
async def test_postgresql_gets_the_broker_and_budgets_its_cluster_settings_name(
    postgres_url: str, cluster: dict[str, Any], broker_type: type, budgets_type: type
) -> None:
    database = open_database(postgres_url, pool_size=1)
    broker = open_broker(make_settings(postgres_url, cluster=cluster), database, SystemClock())
    assert type(broker) is broker_type
    assert type(broker.budgets) is budgets_type


async def test_sqlite_gets_the_in_process_broker_whatever_the_cluster_section_says(sqlite_url: str) -> None:
    database = open_database(sqlite_url, pool_size=1)
    broker = open_broker(make_settings(sqlite_url, cluster=REDIS), database, SystemClock())
    assert type(broker) is InProcessBroker
    assert type(broker.budgets) is LocalBudgets
