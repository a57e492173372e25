"""The Prometheus metric families of the server (prometheus-client).

Their names and labels are a contract with dashboards and alerting rules
(`docs/operating/`): change them only together. Every layer may count into them; nothing
here imports the rest of volthub.

One process: the families live in prometheus-client's default registry, with its process
and platform collectors. Several (`volthub serve --workers N`): the parent sets
`PROMETHEUS_MULTIPROC_DIR` before starting its workers, each worker's values go to files in
that directory, and a scrape answered by any worker adds them all up
(`prometheus_client.multiprocess`): counters and histograms are summed, gauges as their
`multiprocess_mode` says (connections and actors: the sum over live workers).
The ``process_*`` figures are then those of the parent and every live worker added up
(:class:`WholeServerProcess`).

Hot paths count in batches: the fan-out adds its deliveries once per event and transport,
not once per socket write.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Iterable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import REGISTRY, Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
PREFIX = "volthub_"

disable_created_metrics()  # type: ignore[no-untyped-call]  # the `_created` series double every scrape and no rule here reads them

# Latency buckets (seconds) for request handling and for fan-out lag: 1 ms to 10 s.
_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

HTTP_REQUESTS = Counter(
    PREFIX + "http_requests",
    "HTTP requests answered, by method, route template (never a raw path; unmatched paths "
    "share one label) and status code.",
    ["method", "route", "status"],
)
HTTP_DURATION = Histogram(
    PREFIX + "http_request_duration_seconds",
    "Time from a request's arrival to the end of its response, by method and route template "
    "(event streams and WebSocket sessions are left out: they last as long as the client stays).",
    ["method", "route"],
    buckets=_FAST,
)
EVENTS_CONNECTIONS = Gauge(
    PREFIX + "events_connections",
    "Open Events API connections, by transport (websocket, polling, sse) and path (gateway: "
    "the Events API's own port; mount: the main port).",
    ["transport", "path"],
    multiprocess_mode="livesum",
)
EVENTS_DELIVERIES = Counter(
    PREFIX + "events_deliveries",
    "Events handed to Events API connections (one per event and connection), by transport.",
    ["transport"],
)
EVENTS_SLOW_CONSUMERS = Counter(
    PREFIX + "events_slow_consumers",
    "Events API connections disconnected because they could not keep up (their outbound queue was full).",
)
EVENTS_SUBSCRIBE_REFUSED = Counter(
    PREFIX + "events_subscribe_refused",
    "Socket.IO `subscribe` requests refused because their connection spent its budget "
    "([events] subscribe_attempts_per_minute).",
)
GATEWAY_SLOW_BODIES = Counter(
    PREFIX + "gateway_slow_bodies",
    "Connections to the Events API gateway closed because a request body stopped arriving "
    "([server] body_timeout after its first wait); each frees its [server] max_connections slot.",
)
EVENTS_PUBLISHED = Counter(
    PREFIX + "events_published",
    "Platform events published after their transaction committed, by event name.",
    ["event"],
)
EVENTS_LAG = Histogram(
    PREFIX + "events_lag_seconds",
    "Time from an event's commit to its write to a socket: one sample per event and process, "
    "taken at the last connection the event was handed to.",
    buckets=_FAST,
)
WEBHOOK_DELIVERIES = Counter(
    PREFIX + "webhook_deliveries",
    "Webhook delivery attempts, by outcome (success; failure: will be retried or ran out of "
    "attempts; gone: the target asked to stop, the webhook is disabled).",
    ["outcome"],
)
ACTORS_ACTIVE = Gauge(
    PREFIX + "actors_active",
    "Channel actors running (one per channel with live state in use).",
    multiprocess_mode="livesum",
)
ACTOR_INBOX_DEPTH = Histogram(
    PREFIX + "actor_inbox_depth",
    "Commands a channel actor found queued when it took its next batch.",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
)
BUS_LAG = Histogram(
    PREFIX + "bus_lag_seconds",
    "Time from an event's commit to its arrival from the broker in this process (PostgreSQL LISTEN/NOTIFY or Redis).",
    buckets=_FAST,
)
BUS_RECONNECTS = Counter(
    PREFIX + "bus_reconnects",
    "Times this process's broker connection was lost and connected again.",
)
BUS_SWEPT = Counter(
    PREFIX + "bus_swept_events",
    "Events that reached this process from the event log's sweep, not from the broker: their "
    "publisher died between its commit and handing them over (Redis broker).",
)
DB_POOL_CONNECTIONS = Gauge(
    PREFIX + "db_pool_connections",
    "Database connections by state: in_use (running a transaction), idle (free in the pool), "
    "waiting (requests waiting for one).",
    ["state"],
    multiprocess_mode="livesum",
)
DB_QUERY_ERRORS = Counter(
    PREFIX + "db_query_errors",
    "Database transactions that failed with a database error, by backend (sqlite, postgresql) "
    "and kind: unavailable (no connection in time, or the one in use was lost), storage "
    "(SQLite: disk full, read-only, I/O error, file cannot be opened), constraint (a "
    "uniqueness or foreign-key refusal that reached the caller), invalid_input (a value the "
    "backend refused), other (any other database error).",
    ["backend", "kind"],
)
DB_ERROR_KINDS = ("unavailable", "storage", "constraint", "invalid_input", "other")
CORS_REFUSED = Counter(
    PREFIX + "cors_refused_requests",
    "Requests from a browser origin the server does not allow (they got no CORS headers; a "
    "refused preflight got 403), by the paths they were for: api ([server] cors_origins) or "
    "events (the Socket.IO paths, [events] cors_origins).",
    ["paths"],
)
SERVICE_RESTARTS = Counter(
    PREFIX + "service_restarts",
    "Background services restarted by the supervisor after a crash, by service.",
    ["service"],
)

# Children made once: the label lookup is a dict access and a lock, not worth on hot paths.
_DELIVERIES = {transport: EVENTS_DELIVERIES.labels(transport) for transport in ("websocket", "polling", "sse")}
# Both children exist from the start, so a scrape shows 0 before the first refusal.
_CORS_REFUSED = {paths: CORS_REFUSED.labels(paths) for paths in ("api", "events")}


# `[metrics] enabled = false` stops the per-delivery and per-request work too, not only the
# endpoint (and lets a benchmark measure what the metrics cost).
_enabled = True


def set_enabled(enabled: bool) -> None:
    global _enabled
    _enabled = enabled


def enabled() -> bool:
    return _enabled


def count_deliveries(by_transport: dict[str, int]) -> None:
    """Add one fan-out's deliveries (called once per event, not per socket)."""
    if not _enabled:
        return
    for transport, count in by_transport.items():
        child = _DELIVERIES.get(transport)
        if child is None:
            child = _DELIVERIES[transport] = EVENTS_DELIVERIES.labels(transport)
        child.inc(count)


def count_cors_refused(paths: str) -> None:
    """A request came from a browser origin that is not allowed (`paths`: api or events)."""
    if _enabled:
        _CORS_REFUSED[paths].inc()


def start_db_errors(backend: str) -> None:
    """Show every kind of `backend`'s query errors from zero (a rate needs a first sample)."""
    for kind in DB_ERROR_KINDS:
        DB_QUERY_ERRORS.labels(backend, kind)


def count_db_error(backend: str, kind: str) -> None:
    """One transaction failed (the failure path only: no cost while queries succeed)."""
    if _enabled:
        DB_QUERY_ERRORS.labels(backend, kind).inc()


def observe_lag(since: float) -> None:
    """An event committed at ``since`` (epoch seconds) was just written to a socket."""
    if _enabled:
        EVENTS_LAG.observe(max(0.0, time.time() - since))


def multiprocess_dir() -> str | None:
    """The directory of the workers' metric files, when this process is one of several."""
    return os.environ.get(MULTIPROC_ENV) or None


class Sampled(Collector):
    """Gauges read at scrape time in the process that answers it (whole-server facts such as
    the webhook outbox, which every process would report alike)."""

    def __init__(self, values: dict[str, tuple[str, float]]) -> None:
        self._values = values

    def collect(self) -> Iterable[Metric]:
        for name, (documentation, value) in self._values.items():
            yield GaugeMetricFamily(PREFIX + name, documentation, value=value)


def exposition(extra: Collector | None = None) -> bytes:
    """The text exposition of every family (all workers' under `--workers`), plus `extra`."""
    directory = multiprocess_dir()
    if directory is None:
        registry = REGISTRY
        if extra is None:
            return generate_latest(registry)
        combined = CollectorRegistry(auto_describe=False)
        combined.register(_Everything(registry))
        combined.register(extra)
        return generate_latest(combined)
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    registry.register(WholeServerProcess(directory))
    if extra is not None:
        registry.register(extra)
    return generate_latest(registry)


class WholeServerProcess(Collector):
    """prometheus-client's ``process_*`` figures for a server of several processes: the
    parent and every live worker added up (CPU seconds, memory, open descriptors), so that
    a scrape answered by any worker describes the whole server, as one process's do.

    The workers are the pids of the live gauge files in the metrics directory (a dead
    worker's are removed when the parent notices it is gone), kept only while /proc still
    has them. A worker replaced by a new one takes its CPU seconds with it: the total falls,
    which ``rate()`` reads as a counter reset."""

    SUMMED = (
        "process_cpu_seconds_total",
        "process_virtual_memory_bytes",
        "process_resident_memory_bytes",
        "process_open_fds",
    )

    def __init__(self, directory: str, proc: str = "/proc") -> None:
        self._directory = directory
        self._proc = proc

    def pids(self) -> set[int]:
        found = {os.getppid(), os.getpid()}
        for name in os.listdir(self._directory):
            match = _LIVE_GAUGE_FILE.fullmatch(name)
            if match:
                found.add(int(match.group(1)))
        return {pid for pid in found if os.path.exists(f"{self._proc}/{pid}")}

    def collect(self) -> Iterable[Metric]:
        totals: dict[str, float] = {}
        helps: dict[str, tuple[str, str]] = {}
        start: float | None = None
        for pid in sorted(self.pids()):
            collector = ProcessCollector(pid=functools.partial(int, pid), proc=self._proc, registry=None)
            for family in collector.collect():
                for sample in family.samples:
                    if sample.name in self.SUMMED:
                        totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
                        helps[sample.name] = (family.name, family.documentation)
                    elif sample.name == "process_start_time_seconds":
                        start = sample.value if start is None else min(start, sample.value)
        for name, value in totals.items():
            family_name, documentation = helps[name]
            if name.endswith("_total"):
                yield CounterMetricFamily(family_name, documentation + " (all the server's processes)", value=value)
            else:
                yield GaugeMetricFamily(family_name, documentation + " (all the server's processes)", value=value)
        if start is not None:
            yield GaugeMetricFamily(
                "process_start_time_seconds",
                "Start time of the server's oldest process since the epoch in seconds.",
                value=start,
            )


_LIVE_GAUGE_FILE = re.compile(r"gauge_live[a-z]*_(\d+)\.db")


class _Everything(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        return self._registry.collect()


def prepare_multiprocess_dir(directory: str) -> None:
    """Empty the workers' metric directory before they start (leftovers of an earlier run
    would otherwise be added to this one's)."""
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        if name.endswith(".db"):
            os.remove(os.path.join(directory, name))


def worker_exited(pid: int) -> None:
    """A worker is gone: drop its live gauges (its counters stay in the totals)."""
    directory = multiprocess_dir()
    if directory is None:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
