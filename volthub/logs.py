"""Log output: readable text or JSON lines, the same under `volthub serve`, its `--workers`
and the `hypercorn` command.

`configure` puts one handler on the root logger (`[logging] format` and `level`) and routes
Hypercorn's console loggers through it, so every line of a process has one format. JSON
lines carry `ts`, `level`, `logger`, `message`; access lines (logger `volthub.access`) add
`method`, `path` (the route template), `status`, `duration_ms`, `request_id`, `client`.
Under `--workers` (or Hypercorn's own workers) every line names its worker.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

# Set by `volthub serve --workers N` in each worker's environment: its index, 1 to N.
WORKER_ENV = "VOLTHUB_WORKER"
ACCESS_LOGGER = "volthub.access"
_HANDLER_MARK = "_volthub_handler"


def worker_name() -> str | None:
    """This process's worker id when it is one of several, else None."""
    index = os.environ.get(WORKER_ENV)
    if index:
        return index
    if multiprocessing.parent_process() is not None:  # a worker of `hypercorn --workers N`
        return f"pid{os.getpid()}"
    return None


def _timestamp(created: float) -> str:
    seconds = int(created)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int((created - seconds) * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def __init__(self, worker: str | None) -> None:
        super().__init__()
        self.worker = worker

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if self.worker is not None:
            document["worker"] = self.worker
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            document.update(fields)
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(document, default=str).decode()


class TextFormatter(logging.Formatter):
    """`2026-11-26T10:00:00.123Z INFO [worker 2] volthub.http.app: message`."""

    def __init__(self, worker: str | None) -> None:
        super().__init__()
        self.prefix = f"[worker {worker}] " if worker is not None else ""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record.created)} {record.levelname} {self.prefix}{record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _DropHypercornBanner(logging.Filter):
    """Hypercorn's "Running on …" repeats per worker (and names an inherited descriptor under
    `--workers`); volthub's start-up summary says where it serves instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "hypercorn.error" and str(record.msg).startswith("Running on"))


def configure(format: str = "text", level: str = "info") -> None:
    """Install volthub's handler on the root logger (replacing the one an earlier call
    installed; other handlers, such as a test runner's, stay)."""
    worker = worker_name()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(worker) if format == "json" else TextFormatter(worker))
    handler.addFilter(_DropHypercornBanner())
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # Python warnings become log lines (logger py.warnings) too
    _route_hypercorn_loggers()


def _route_hypercorn_loggers() -> None:
    """Hypercorn gives its console loggers a handler and format of their own (and, with
    the root configured too, every line came out twice in two formats). Its loggers keep
    their names and levels but write through the root handler."""
    try:
        from hypercorn import logging as hypercorn_logging
    except ImportError:  # pragma: no cover - Hypercorn is a dependency
        return
    for name in ("hypercorn.error", "hypercorn.access"):
        _adopt(logging.getLogger(name))
    original = getattr(hypercorn_logging._create_logger, "__wrapped__", hypercorn_logging._create_logger)

    def create_logger(
        name: str, target: Any, level: str | None, sys_default: Any, *, propagate: bool = True
    ) -> logging.Logger | None:
        if target != "-":  # a file or a logger of the operator's choosing: as Hypercorn does it
            return original(name, target, level, sys_default, propagate=propagate)
        logger = _adopt(logging.getLogger(name))
        if level is not None:
            logger.setLevel(level.upper())
        return logger

    create_logger.__wrapped__ = original  # type: ignore[attr-defined]
    hypercorn_logging._create_logger = create_logger


def _adopt(logger: logging.Logger) -> logging.Logger:
    logger.handlers = [h for h in logger.handlers if not isinstance(h, logging.StreamHandler) or _is_file(h)]
    logger.propagate = True
    return logger


def _is_file(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.FileHandler)


_ACCESS = logging.getLogger(ACCESS_LOGGER)


def access(message: str, fields: dict[str, Any]) -> None:
    """One access line: `message` for text, `fields` merged into the JSON object.

    The record is made and handled directly: `Logger.info` would first walk the call stack
    for the caller's file and line, which an access line does not show, once per request."""
    if not _ACCESS.isEnabledFor(logging.INFO):
        return
    record = _ACCESS.makeRecord(ACCESS_LOGGER, logging.INFO, "", 0, "%s", (message,), None, extra={"fields": fields})
    _ACCESS.handle(record)


def startup_summary(settings: Any, version: str, workers: int) -> str:
    """The one start-up line: version, where it serves, on what database and broker."""
    server, events = settings.server, settings.events
    main = f"http://{_bracket(server.host)}:{server.port}"
    if events.gateway_port:
        gateway = f"http://{_bracket(events.gateway_host or server.host)}:{events.gateway_port}"
    else:
        gateway = "off (Events API on the main port only)"
    database = settings.database.url
    if database.startswith("sqlite"):
        broker = "in-process (one process)"
    else:
        broker = getattr(settings.cluster, "broker", "postgres")
        redis_url = getattr(settings.cluster, "redis_url", "")
        broker = f"{broker} {mask_url(redis_url)}" if broker == "redis" and redis_url else str(broker)
    return (
        f"volthub {version} serving {main} (Events API gateway: {gateway}; database: {mask_url(database)}; "
        f"broker: {broker}; workers: {workers}; metrics: "
        f"{main + '/metrics' if settings.metrics.enabled else 'off'})"
    )


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def mask_url(url: str) -> str:
    """A database or broker URL fit for a log line: its password replaced by ***."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
