"""volthub: a self-hostable developer platform for live streaming (OAuth, chat, the Events API
over Socket.IO and SSE, signed webhooks).

Start with `volthub serve`; `volthub config check` shows the settings it would use. Every
command reads `--config FILE` (TOML) and `VOLTHUB_<SECTION>__<KEY>` environment variables.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from volthub import cli_startup
from volthub.collector import tune_garbage_collector
from volthub.config import ConfigError, Settings, events_ws_url, load_settings

log = logging.getLogger("volthub")
# Later features add their own sub-commands here: name -> (configure parser, run).
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


def command(
    name: str, configure: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = (configure, run)
        return run

    return register


def failed(message: str, status: int = 1) -> int:
    """Says `error: <message>` on stderr and gives the command's exit status: 1 when it
    failed, 2 when it was given what it cannot use."""
    print(f"error: {message}", file=sys.stderr)
    return status


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument("--database", metavar="URL", help="database URL (overrides [database] url)")


def settings_from(args: argparse.Namespace, **server: Any) -> Settings:
    overrides: dict[str, dict[str, Any]] = {}
    if getattr(args, "database", None):
        overrides["database"] = {"url": args.database}
    server = {key: value for key, value in server.items() if value is not None}
    if server:
        overrides["server"] = server
    settings = load_settings(args.config, overrides=overrides)
    from volthub import logs

    logs.configure(settings.logging.format, settings.logging.level)
    return settings


# --- serve -------------------------------------------------------------------------------


def _port(text: str) -> int:
    port = int(text) if text.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return port


SERVE_EPILOG = """signals:
  SIGTERM, SIGINT  stop gracefully: stop accepting, end event streams and Socket.IO
                   sessions, let requests in flight finish ([server] shutdown_timeout), exit
  SIGHUP           with --workers: rolling restart (apply pending migrations, then replace
                   the workers one at a time; the port never closes)

GET /healthz is 200 once ready; GET /metrics serves Prometheus metrics to [metrics] allow."""


def _configure_serve(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = SERVE_EPILOG
    _common(parser)
    parser.add_argument("--host", help="address to bind (default [server] host)")
    parser.add_argument("--port", type=int, help="port to bind (default [server] port)")
    parser.add_argument(
        "--gateway-port",
        type=_port,
        help="also serve the Events API's Socket.IO paths on this port with volthub's own listener "
        "(default [events] gateway_port; 0: off)",
    )
    from volthub import cli_workers

    cli_workers.configure(parser)


@command("serve", _configure_serve)
def serve(args: argparse.Namespace) -> int:
    """Serve the API, the Events API and the pages (migrates the database first)."""
    settings = settings_from(args, host=args.host, port=args.port)
    if args.gateway_port is not None:
        events = type(settings.events).model_validate(
            {**settings.events.model_dump(), "gateway_port": args.gateway_port}
        )
        settings = settings.model_copy(update={"events": events})
    from volthub import cli_startup

    if args.listen_fd is None:  # not a worker of `serve --workers N`: its parent checked
        cli_startup.check_ports(settings)
    if args.workers > 1:  # a parent that runs N of these (volthub/cli_workers.py)
        from volthub import cli_workers

        # It reaches the database when it migrates, once it has chosen where the workers
        # keep their metrics (nothing may create a metric before): an unreachable one
        # fails there, as one line too.
        entry = cli_workers.Entry(main=main, migrate=lambda found: migrations_report(apply_migrations(found)))
        return cli_workers.run(args, settings, entry)
    if args.listen_fd is None:
        cli_startup.check_database(settings)
    try:
        trio.run(_serve, settings, args.listen_fd)
    except Exception as exc:
        line = cli_startup.failure_line(exc, settings)
        if line is None:
            raise
        raise cli_startup.StartupError(line) from None
    return 0


async def _serve(settings: Settings, listen_fd: int | None = None) -> None:
    from volthub.http.app import create_app
    from volthub.http.server import server_of
    from volthub.http.serving import hypercorn_config

    # A worker of `serve --workers N` serves the parent's socket.
    bind = hypercorn_config(settings, bind=f"fd://{listen_fd}" if listen_fd is not None else None).bind[0]
    server = server_of(create_app(settings))  # also patches Hypercorn and sets the connection caps
    tune_garbage_collector(settings.server.gc_gen0_threshold)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_wait_for_signal, stop)  # from now on: a signal during start-up stops once started
        log.info(
            "volthub listening on %s (REST, SSE); Events API Socket.IO clients connect to %s/ws/events",
            _http_url(bind),
            events_ws_url(settings),
        )
        await server.serve(stop.wait, bind=bind)  # the server's one ordered stop
        nursery.cancel_scope.cancel()
    log.info("volthub stopped")


def _http_url(bind: str) -> str:
    return bind if bind.startswith("fd://") else f"http://{bind}"


async def _wait_for_signal(stop: trio.Event) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("received %s: shutting down gracefully", signal.Signals(signum).name)
            stop.set()
            return


# --- migrate -----------------------------------------------------------------------------


@command("migrate", _common)
def migrate_command(args: argparse.Namespace) -> int:
    """Apply pending database migrations (serve does it too) and list what was applied."""
    print("\n".join(migrations_report(apply_migrations(settings_from(args)))))
    return 0


def migrations_report(applied: list[str]) -> list[str]:
    """What applying migrations did, a line each."""
    return [f"applied {name}" for name in applied] or ["database is up to date"]


def apply_migrations(settings: Settings) -> list[str]:
    """Apply the pending migrations of `settings`' database; the names applied."""
    from volthub.persistence import migrate

    async def run() -> list[str]:
        database = await _open(settings)
        try:
            return await migrate(database)
        finally:
            await database.close()

    return trio.run(run)


# Every command opens its database the one way (one line naming the cause when unreachable).
_open = cli_startup.open_configured_database


# --- users -------------------------------------------------------------------------------


def _configure_users(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    create = sub.add_parser("create", help="create a first-party account")
    _common(create)
    create.add_argument("username")
    create.add_argument("--password", help="read from stdin when omitted")
    create.add_argument("--display-name")
    listing = sub.add_parser("list", help="list accounts")
    _common(listing)
    listing.add_argument("--limit", type=int, default=100)


@command("users", _configure_users)
def users_command(args: argparse.Namespace) -> int:
    """First-party accounts: create one (password from stdin when not given) or list them."""
    settings = settings_from(args)
    return trio.run(_users_create if args.action == "create" else _users_list, settings, args)


async def _users_create(settings: Settings, args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from volthub.http.blueprints.accounts import RegisterBody
    from volthub.hub.bus import InProcessBroker
    from volthub.hub.clock import SystemClock
    from volthub.hub.publisher import EventPublisher
    from volthub.persistence import migrate
    from volthub.services.accounts import Accounts, DisplayNameRefused, UsernameTaken
    from volthub.services.passwords import Passwords

    password = args.password if args.password is not None else sys.stdin.readline().rstrip("\n")
    try:  # the same rules as the register route
        body = RegisterBody.model_validate(
            {"username": args.username, "password": password, "displayName": args.display_name}
        )
    except ValidationError as exc:
        return failed(f"{exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}", status=2)
    database = await _open(settings)
    try:
        await migrate(database)
        publisher = EventPublisher(database, InProcessBroker(), SystemClock())
        passwords = Passwords(
            settings.auth.argon2_time_cost,
            settings.auth.argon2_memory_kib,
            settings.auth.hash_concurrency,
            settings.auth.hash_queue,
        )
        user = await Accounts(database, publisher, passwords).register(body.username, body.password, body.displayName)
    except UsernameTaken:
        return failed(f"username {args.username!r} is taken")
    except DisplayNameRefused as exc:
        return failed(f"displayName: {exc}")
    finally:
        await database.close()
    print(f"{user.id}\t{user.username}")
    return 0


async def _users_list(settings: Settings, args: argparse.Namespace) -> int:
    from volthub.persistence import users as repo

    database = await _open(settings)
    try:
        found = await database.read(lambda tx: repo.list_users(tx, args.limit))
    finally:
        await database.close()
    for user in found:
        print(f"{user.id}\t{user.username}\t{user.display_name}")
    return 0


# --- config ------------------------------------------------------------------------------

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "default.toml"
_SECRET_WORDS = ("secret", "password", "token")


def _configure_config(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    check = sub.add_parser(
        "check",
        help="validate a config file and the VOLTHUB_* environment; print the effective settings",
        description="Validate --config FILE (if given) together with the VOLTHUB_<SECTION>__<KEY> environment "
        "variables, and print the settings the server would run with, as TOML, secrets masked. "
        "Exit status 2 and a message naming the key when a value is wrong.",
    )
    _common(check)
    sub.add_parser("show-defaults", help="print the documented default configuration file (every key)")


@command("config", _configure_config)
def config_command(args: argparse.Namespace) -> int:
    """Check a configuration (effective settings, secrets masked) or print the defaults."""
    if args.action == "show-defaults":
        if DEFAULT_CONFIG.is_file():
            sys.stdout.write(DEFAULT_CONFIG.read_text(encoding="utf-8"))
        else:  # an installed copy without the repository: the same values, without the comments
            sys.stdout.write(_as_toml(Settings().model_dump()))
        return 0
    settings = settings_from(args)
    source = args.config or "built-in defaults"
    print(f"# configuration is valid ({source} and the environment); secrets are masked")
    sys.stdout.write(_as_toml(_masked(settings.model_dump())))
    return 0


def _masked(values: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    from volthub.logs import mask_url

    masked: dict[str, dict[str, Any]] = {}
    for section, keys in values.items():
        masked[section] = {}
        for key, value in keys.items():
            if isinstance(value, str) and value and any(word in key for word in _SECRET_WORDS):
                value = "***"
            elif isinstance(value, str) and key.endswith("url"):
                value = mask_url(value)
            masked[section][key] = value
    return masked


def _as_toml(values: dict[str, dict[str, Any]]) -> str:
    import json

    lines: list[str] = []
    for section, keys in values.items():
        lines.append(f"\n[{section}]")
        for key, value in keys.items():
            text = str(value).lower() if isinstance(value, bool) else json.dumps(value)
            lines.append(f"{key} = {text}")
    return "\n".join(lines).lstrip("\n") + "\n"


# --- entry point ---------------------------------------------------------------------------


def _load_plugins() -> None:
    """Sub-commands defined by feature modules register themselves on import."""
    import importlib

    for module in (
        "volthub.loadtest.cli",
        "volthub.tools.conformance_cli",
        "volthub.cli_apps",
        "volthub.cli_catalogue",
        "volthub.cli_devtools",
        "volthub.cli_backup",
    ):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def main(argv: Sequence[str] | None = None) -> int:
    from volthub import logs
    from volthub.cli_startup import StartupError

    logs.configure("text", "info")  # `serve` switches to [logging] once the settings are read
    _load_plugins()
    parser = argparse.ArgumentParser(
        prog="volthub", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (configure, run) in COMMANDS.items():
        text = (run.__doc__ or "").strip()
        summary = text.split("\n\n")[0].replace("\n", " ") or None
        configure(sub.add_parser(name, help=summary, description=text or None))
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command][1](args)
    except ConfigError as exc:
        return failed(str(exc), status=2)
    except StartupError as exc:  # a port in use, a database out of reach: the fix, no traceback
        return failed(str(exc))


if __name__ == "__main__":
    sys.exit(main())
