"""The one place that chooses the broker (hub.broker.Broker) of a deployment.

Everything else uses the interface and never asks which broker it has.
"""

from __future__ import annotations

from volthub.config import Settings
from volthub.hub.broker import Broker
from volthub.hub.broker_budgets import DatabaseBudgets
from volthub.hub.bus import InProcessBroker, PostgresBroker, RelaySettings
from volthub.hub.clock import Clock
from volthub.hub.redis_bus import RedisBroker, RedisSettings
from volthub.persistence import Database


def open_broker(settings: Settings, database: Database, clock: Clock) -> Broker:
    """SQLite: one process, `InProcessBroker`. PostgreSQL: LISTEN/NOTIFY between the
    processes (`PostgresBroker`), or Redis with `[cluster] broker = "redis"`
    (`RedisBroker`); both log events in the database. Budgets are shared by every process
    with `[cluster] shared_rate_limits`, else each process counts its own."""
    if database.dialect != "postgresql":
        return InProcessBroker()
    cluster = settings.cluster
    budgets = (
        DatabaseBudgets(database, clock, settings.database.acquire_timeout) if cluster.shared_rate_limits else None
    )
    if cluster.broker == "redis":
        redis = RedisSettings(
            url=cluster.redis_url,
            cluster_nodes=tuple(cluster.redis_cluster_nodes),
            unsubscribe_after_seconds=cluster.redis_unsubscribe_after_seconds,
            ca_file=cluster.redis_ca_file,
            sweep_seconds=cluster.redis_sweep_interval_seconds,
            sweep_grace_seconds=cluster.redis_sweep_grace_seconds,
            history=max(1, settings.events.resume_buffer_size),
            retention_seconds=cluster.event_log_retention_seconds,
        )
        return RedisBroker(database, clock, redis, shared_budgets=budgets)
    relay = RelaySettings(retention_seconds=cluster.event_log_retention_seconds, warm_rows=cluster.warm_start_rows)
    return PostgresBroker(database, clock, relay, shared_budgets=budgets)
