"""Start-up and command-line failures an operator meets first, as one line that names the fix.

A port in use, a database that cannot be reached: `volthub` prints one line on stderr and
exits with status 1, no traceback. `volthub serve` checks its ports and its database before
it starts anything (`check_ports`, `check_database`; under `--workers` the parent's
migrations reach the database); whatever still fails during the start (another process took
a port in between) is put into one line by `failure_line`, in the one place that runs the
server (volthub/cli.py).
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Iterator

import trio

from volthub.config import Settings
from volthub.logs import mask_url


class StartupError(Exception):
    """A failure the operator fixes; its message is the one line `volthub` prints."""


# What moves each listener: the serve flag, the config key, the environment variable.
_MOVERS = {
    "main": ("--port", "[server] port", "VOLTHUB_SERVER__PORT"),
    "gateway": ("--gateway-port", "[events] gateway_port", "VOLTHUB_EVENTS__GATEWAY_PORT"),
}
_NAMES = {"main": "the main port", "gateway": "the Events API gateway port"}


def port_line(which: str, host: str, port: int, cause: OSError) -> str:
    flag, key, variable = _MOVERS[which]
    if cause.errno == errno.EADDRINUSE:
        problem = "is already in use"
    elif cause.errno == errno.EACCES:
        problem = "needs privileges to bind (ports below 1024)"
    else:
        problem = f"cannot be bound ({cause.strerror or cause})"
    return f"{_NAMES[which]} {host}:{port} {problem}: choose another with {flag}, {key} or {variable}"


def database_line(url: str, cause: Exception) -> str:
    text = str(cause) or type(cause).__name__
    if mask_url(url) not in text:
        text = f"cannot reach {mask_url(url)}: {text}"
    return f"{text} (the database is set by --database, [database] url or VOLTHUB_DATABASE__URL)"


def _listeners(settings: Settings) -> list[tuple[str, str, int]]:
    server, events = settings.server, settings.events
    found = [("main", server.host, server.port)]
    if events.gateway_port:
        found.append(("gateway", events.gateway_host or server.host, events.gateway_port))
    return found


def check_ports(settings: Settings) -> None:
    """Bind and listen on every port `serve` will use, all at once (so a gateway port equal
    to the main port shows too), then let go: StartupError naming the first that fails."""
    with contextlib.ExitStack() as held:
        for which, host, port in _listeners(settings):
            if port == 0:
                continue
            address = host.strip("[]")
            listener = held.enter_context(
                socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
            )
            # As the server's own listeners: a port left in TIME_WAIT by an earlier run is free.
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                listener.bind((address, port))
                listener.listen(1)
            except OSError as exc:
                raise StartupError(port_line(which, host, port, exc)) from None


def check_database(settings: Settings) -> None:
    """Open the database once and let go: StartupError with the URL (password hidden) and
    the cause when it cannot be reached."""
    from volthub.cli import _open

    async def reach() -> None:
        database = await _open(settings, pool_size=1)
        await database.close()

    trio.run(reach)


def failure_line(exc: BaseException, settings: Settings) -> str | None:
    """One line for a failure of the server's start, or None when it is not one of those
    (a bug, which keeps its traceback)."""
    listeners = {which: (host, port) for which, host, port in _listeners(settings)}
    for found in _leaves(exc):
        if isinstance(found, StartupError):
            return str(found)
        # Hypercorn binds the main port after the app has started: its bind fails as such.
        if isinstance(found, OSError) and found.errno in (errno.EADDRINUSE, errno.EACCES):
            return port_line("main", *listeners["main"], found)
        # The gateway binds while the app starts, and Hypercorn keeps only the message.
        if type(found).__name__ == "LifespanFailureError":
            if "Address already in use" in str(found) and "gateway" in listeners:
                return port_line("gateway", *listeners["gateway"], OSError(errno.EADDRINUSE, "in use"))
            return f"the server could not start: {' '.join(str(found).split())}"
    return None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
