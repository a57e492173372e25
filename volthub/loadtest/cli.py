"""`volthub loadtest`: load-test the realtime hub, alone or side by side with references.

volthub loadtest --spawn --clients 2000 --channels 20 --rate 5 --duration 30
volthub loadtest --url http://127.0.0.1:8080 --server-pid 4242 --clients 500 --sse 100
volthub loadtest --spawn --target volthub,python-socketio,node --server-cpus 0 --plot bench.png
"""

from __future__ import annotations

import argparse
import logging
import resource
import shlex
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import trio

from volthub.cli import command
from volthub.loadtest import hold, report
from volthub.loadtest.runner import Run, RunConfig
from volthub.loadtest.servers import SpawnedServer, make_workdir, plan_server
from volthub.loadtest.targets import TARGETS, VOLTHUB_TARGETS, RemoteTargetRefused, check_url, make_target

MAX_DURATION = 3600.0
MAX_HOLD = 100_000


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows a default only where there is one worth showing (not None, False or [])."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "%(default)" in text or action.default in (None, False, [], argparse.SUPPRESS):
            return text
        if action.option_strings:
            text += " (default: %(default)s)"
        return text


def _targets(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in TARGETS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(TARGETS)} (comma-separated), not {value!r}")
    return list(dict.fromkeys(names))


def _env_pair(value: str) -> tuple[str, str]:
    name, sep, setting = value.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {value!r}")
    return name, setting


def _positive(kind: type) -> Any:
    def parse(value: str) -> Any:
        number = kind(value)
        if number <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, not {value}")
        return number

    return parse


def _non_negative(kind: type) -> Any:
    def parse(value: str) -> Any:
        number = kind(value)
        if number < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
        return number

    return parse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = textwrap.fill(
        "Load-test the Events API: provision channels and tokens, open Socket.IO (WebSocket) and SSE "
        "clients, post chat messages through REST at a fixed rate, and measure connect rate, "
        "deliveries, end-to-end latency (the send time travels in the message), drops, disconnects "
        "and the server's CPU and RSS. Several --target names run one after another on the same "
        "load and are compared. Only loopback servers unless --allow-remote."
    )
    parser.formatter_class = _HelpFormatter
    parser.epilog = (
        "examples:\n"
        "  volthub loadtest --spawn --clients 2000 --channels 10 --rate 5 --duration 30\n"
        "  volthub loadtest --url http://127.0.0.1:8080 --server-pid 4242 --clients 500 --sse 100\n"
        "  taskset -c 1 volthub loadtest --spawn --server-cpus 0 --target volthub,python-socketio,node \\\n"
        "      --json bench.json --plot bench.png      (what `make bench` runs)\n\n"
    ) + textwrap.fill(
        "Latency is measured from just before the chat POST to the arrival of the `event` frame (or SSE "
        "event) at each client. Server CPU and RSS come from /proc/<pid>; CPU per 1,000 deliveries "
        "covers the send phase and the drain; RSS growth per connection covers the ramp."
    )
    where = parser.add_argument_group("server under test")
    mode = where.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--spawn",
        action="store_true",
        help="start each target as a child process on a free 127.0.0.1 port (rate limits off, "
        "cheap password hashing) and stop it afterwards",
    )
    mode.add_argument("--url", metavar="URL", help="target a running server (http://127.0.0.1:PORT)")
    where.add_argument(
        "--ws-url",
        metavar="URL",
        help="with --url: where the Socket.IO clients connect, when not at --url (volthub's own "
        "Events API listener, [events] gateway_port); REST stays at --url",
    )
    where.add_argument(
        "--target",
        type=_targets,
        default="volthub",
        metavar="NAMES",
        help=f"comma-separated from {', '.join(TARGETS)}; more than one needs --spawn and "
        "prints a side-by-side table and volthub's ratios",
    )
    where.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --url that is not a loopback address (never needed on one machine)",
    )
    where.add_argument(
        "--server-pid", type=int, metavar="PID", help="with --url: the server's pid, to read its CPU and RSS from /proc"
    )
    where.add_argument(
        "--database",
        metavar="URL",
        help="with --spawn: volthub's database (sqlite:///… or postgresql://…); default a fresh "
        "SQLite file in the work directory",
    )
    where.add_argument(
        "--server-cpus",
        metavar="LIST",
        help="with --spawn: pin servers to these CPUs with taskset -c (e.g. 0; run the generator "
        "itself under taskset -c 1)",
    )
    where.add_argument(
        "--server-env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --spawn: extra environment for the server, e.g. VOLTHUB_CHAT__INBOX_SIZE=1024 (repeatable)",
    )
    where.add_argument(
        "--workdir",
        metavar="DIR",
        help="with --spawn: where server logs and the SQLite file go (default a new temporary "
        "directory, printed at the end)",
    )

    load = parser.add_argument_group("load (every run is bounded by --max-clients and --duration)")
    load.add_argument(
        "--clients", type=_non_negative(int), default=100, metavar="N", help="Socket.IO clients over WebSocket"
    )
    load.add_argument(
        "--sse",
        type=_non_negative(int),
        default=0,
        metavar="N",
        help="SSE clients (GET /api/events/stream; volthub only)",
    )
    load.add_argument(
        "--channels", type=_positive(int), default=10, metavar="C", help="channels; client i listens to channel i mod C"
    )
    load.add_argument(
        "--rate",
        type=_non_negative(float),
        default=10.0,
        metavar="R",
        help="chat messages per second, all channels together (round-robin)",
    )
    load.add_argument(
        "--duration",
        type=_non_negative(float),
        default=10.0,
        metavar="S",
        help=f"seconds of sending (at most {MAX_DURATION:.0f})",
    )
    load.add_argument(
        "--max-clients",
        type=_positive(int),
        default=10_000,
        metavar="N",
        help="refuse to run more clients (--clients + --sse) than this",
    )
    load.add_argument(
        "--message-size",
        type=_non_negative(int),
        default=64,
        metavar="CHARS",
        help="length of the chat text (at least what the send time needs)",
    )
    load.add_argument(
        "--send-concurrency",
        type=_positive(int),
        default=64,
        metavar="N",
        help="chat sends in flight at most; past it the schedule slips and sends count as late",
    )

    ramp = parser.add_argument_group("ramp and timing")
    ramp.add_argument(
        "--connect-concurrency",
        type=_positive(int),
        default=64,
        metavar="N",
        help="clients connecting at once during the ramp",
    )
    ramp.add_argument(
        "--connect-rate",
        type=_non_negative(float),
        default=0.0,
        metavar="PER_S",
        help="pace new connections to this many per second (0: only --connect-concurrency limits)",
    )
    ramp.add_argument(
        "--connect-timeout",
        type=_positive(float),
        default=30.0,
        metavar="S",
        help="one client's connect (TCP, upgrade, CONNECT answered) must finish within this",
    )
    ramp.add_argument(
        "--ramp-timeout",
        type=_positive(float),
        default=120.0,
        metavar="S",
        help="give up waiting for the ramp after this and send to whoever connected",
    )
    ramp.add_argument(
        "--settle",
        type=_non_negative(float),
        default=1.0,
        metavar="S",
        help="pause between the ramp and sending (RSS per connection is read after it)",
    )
    ramp.add_argument(
        "--drain",
        type=_non_negative(float),
        default=5.0,
        metavar="S",
        help="after sending, wait up to this long for outstanding deliveries",
    )

    wire = parser.add_argument_group("wire")
    wire.add_argument(
        "--ws-client",
        choices=("raw", "trio-websocket"),
        default="raw",
        help="WebSocket client: the generator's own minimal framing, or trio-websocket",
    )
    wire.add_argument(
        "--sio-path",
        default="/ws/events",
        metavar="PATH",
        help="Engine.IO path (volthub also serves /socket.io with --namespace /ws/events)",
    )
    wire.add_argument("--namespace", default="/", metavar="NS", help="Socket.IO namespace")

    held = parser.add_argument_group("hold (many sockets held open; volthub targets, --spawn, a fresh server each)")
    held.add_argument(
        "--hold",
        type=_non_negative(int),
        default=0,
        metavar="N",
        help="after the runs, open N authenticated sockets to each volthub target and hold them "
        "for --hold-seconds; capped to what the server's open-file limit allows (said in the "
        "report). With --clients 0 only the hold runs",
    )
    held.add_argument(
        "--hold-seconds", type=_positive(float), default=60.0, metavar="S", help="how long the hold lasts"
    )
    held.add_argument(
        "--hold-processes",
        type=_non_negative(int),
        default=0,
        metavar="K",
        help="generator processes the hold's sockets are spread over (0: as few as the "
        "generator's own open-file limit allows)",
    )

    out = parser.add_argument_group("output")
    out.add_argument("--json", type=Path, metavar="FILE", help="write every figure and time series as JSON")
    out.add_argument(
        "--plot",
        type=Path,
        metavar="FILE.png",
        help="draw the latency distribution, throughput and server CPU over time (matplotlib)",
    )
    out.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="attach py-spy to the server during --profile-phase, write collapsed stacks to FILE "
        "(FILE.<target> when several targets) and print the top functions; needs --spawn "
        "or --server-pid",
    )
    out.add_argument(
        "--profile-phase",
        choices=("send", "ramp"),
        default="send",
        help="what --profile records: the send phase and drain (fan-out), or the ramp (connects)",
    )
    out.add_argument("--quiet", action="store_true", help="no progress line")


@command("loadtest", configure)
def loadtest(args: argparse.Namespace) -> int:
    """Load-test the realtime hub (Socket.IO, SSE) and compare it with reference servers."""
    problem = _validate(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    _raise_file_limit()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per chat send otherwise
    try:
        results = trio.run(_main, args)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0 if results else 1


def _validate(args: argparse.Namespace) -> str | None:
    if args.clients + args.sse == 0 and not args.hold:
        return "nothing to do: --clients and --sse are both 0"
    if args.hold and not args.spawn:
        return "--hold needs --spawn (it reads the server's open-file limit and starts it fresh)"
    if args.hold > MAX_HOLD:
        return f"--hold is at most {MAX_HOLD:,}"
    if args.hold and not any(name in VOLTHUB_TARGETS for name in args.target):
        return f"--hold is for {' or '.join(VOLTHUB_TARGETS)}"
    if args.ws_url and not args.url:
        return "--ws-url goes with --url (with --spawn the harness knows the ports)"
    if args.clients + args.sse > args.max_clients:
        return f"{args.clients + args.sse} clients is over --max-clients {args.max_clients}"
    if args.duration > MAX_DURATION:
        return f"--duration is at most {MAX_DURATION:.0f} seconds"
    if len(args.target) > 1 and not args.spawn:
        return "several --target names need --spawn"
    if args.url:
        try:
            check_url(args.url, args.allow_remote)
            if args.ws_url:
                check_url(args.ws_url, args.allow_remote)
        except (RemoteTargetRefused, ValueError) as exc:
            return str(exc)
    if args.server_pid and args.spawn:
        return "--server-pid is for --url (with --spawn the pid is known)"
    if args.profile and not (args.spawn or args.server_pid):
        return "--profile needs --spawn or --server-pid"
    if args.sse and any(name not in VOLTHUB_TARGETS for name in args.target):
        return "--sse is for volthub only (the reference servers speak Socket.IO only)"
    return None


def _raise_file_limit() -> None:
    """Every client is a socket; spawned servers inherit the raised limit too."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))


def _config(args: argparse.Namespace, target: str) -> RunConfig:
    return RunConfig(
        target=target,
        sockets=args.clients,
        sse=args.sse,
        channels=args.channels,
        rate=args.rate,
        duration=args.duration,
        message_size=args.message_size,
        connect_concurrency=args.connect_concurrency,
        connect_rate=args.connect_rate,
        connect_timeout=args.connect_timeout,
        ramp_timeout=args.ramp_timeout,
        settle=args.settle,
        drain=args.drain,
        send_concurrency=args.send_concurrency,
        ws_client=args.ws_client,
        sio_path=args.sio_path,
        namespace=args.namespace,
        allow_remote=args.allow_remote,
    )


async def _main(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The runs (and holds), cancelled cleanly by SIGINT or SIGTERM: spawned servers are in
    their own session (a terminal's Ctrl-C must not reach them first), so the harness stops
    them. A target that could not be measured is raised after the others were reported."""
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_on_signal, nursery.cancel_scope)
        await _runs(args, results, failures)
        nursery.cancel_scope.cancel()
    if nursery.cancel_scope.cancelled_caught and len(results) < len(args.target) and not failures:
        raise RuntimeError("interrupted")
    if failures:
        raise RuntimeError("; ".join(failures))
    return results


async def _cancel_on_signal(scope: trio.CancelScope) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            print(f"\n{signal.Signals(signum).name}: stopping", file=sys.stderr)
            scope.cancel()
            return


async def _runs(args: argparse.Namespace, results: list[dict[str, Any]], failures: list[str]) -> None:
    """Each target's run, then (with --hold) each volthub target's hold; `results` gets the
    runs and the holds (kind "hold"), `failures` what could not be measured."""
    workdir = make_workdir(args.workdir) if args.spawn else None
    holds: list[dict[str, Any]] = []
    for name in args.target if args.clients + args.sse else []:
        config = _config(args, name)
        profile = args.profile
        if profile is not None and len(args.target) > 1:
            profile = profile.with_name(f"{profile.name}.{name}")
        # A hard bound on the whole run, whatever the server does.
        budget = config.ramp_timeout + config.settle + config.duration + config.drain + 180
        with trio.fail_after(budget):
            if args.spawn:
                assert workdir is not None
                try:
                    result = await _spawned_run(args, config, workdir, profile)
                except RuntimeError as exc:  # one server that does not start must not cost the others
                    failures.append(f"{name}: {exc}")
                    print(f"\n== {name} ==\nerror: {exc}", file=sys.stderr)
                    continue
            else:
                run = Run(
                    config,
                    make_target(name, args.url, args.ws_url),
                    args.server_pid,
                    progress=None if args.quiet else sys.stderr,
                    profile=profile,
                    profile_phase=args.profile_phase,
                )
                result = await run.execute()
        results.append(result)
        print(f"\n== {name} ==\n{report.table([result])}")
        if result.get("profile"):
            print(_profile_text(result["profile"]))
        sys.stdout.flush()
    if args.hold:
        assert workdir is not None
        for name in (name for name in args.target if name in VOLTHUB_TARGETS):
            found = await _spawned_hold(args, name, workdir, failures)
            if found is not None:
                holds.append(found)
                print(f"\n== {name}: hold ==\n{report.hold_text(found)}")
    _summarise(args, results, workdir, holds)
    results.extend(holds)


async def _spawned_hold(
    args: argparse.Namespace, name: str, workdir: Path, failures: list[str]
) -> dict[str, Any] | None:
    plan = plan_server(name, workdir, database=args.database, cpus=args.server_cpus, extra_env=dict(args.server_env))
    server = SpawnedServer(plan)
    try:
        await server.start()
    except RuntimeError as exc:
        failures.append(f"{name} (hold): {exc}")
        print(f"\n== {name}: hold ==\nerror: {exc}", file=sys.stderr)
        return None
    try:
        with trio.fail_after(args.ramp_timeout + args.hold_seconds + 240):
            found = await hold.hold(
                name,
                plan.url,
                plan.socket_url,
                server.pid,
                sockets=args.hold,
                seconds=args.hold_seconds,
                processes=args.hold_processes,
                connect_concurrency=args.connect_concurrency,
                connect_timeout=args.connect_timeout,
                ramp_timeout=args.ramp_timeout,
                sio_path=args.sio_path,
                progress=None if args.quiet else sys.stderr,
            )
    except (RuntimeError, trio.TooSlowError, OSError) as exc:
        failures.append(f"{name} (hold): {exc or type(exc).__name__}")
        print(f"\n== {name}: hold ==\nerror: {exc or type(exc).__name__}", file=sys.stderr)
        return None
    finally:
        await server.stop()
    return found


async def _spawned_run(
    args: argparse.Namespace, config: RunConfig, workdir: Path, profile: Path | None
) -> dict[str, Any]:
    plan = plan_server(
        config.target,
        workdir,
        database=args.database if config.target in VOLTHUB_TARGETS else None,
        cpus=args.server_cpus,
        extra_env=dict(args.server_env),
    )
    server = SpawnedServer(plan)
    if not args.quiet:
        print(f"starting {config.target}: {shlex.join(plan.argv)}", file=sys.stderr)
    await server.start()
    try:
        run = Run(
            config,
            make_target(config.target, plan.url, plan.socket_url),
            server.pid,
            progress=None if args.quiet else sys.stderr,
            profile=profile,
            profile_phase=args.profile_phase,
        )
        result = await run.execute()
    finally:
        await server.stop()
    result["command"] = plan.argv
    result["notes"].extend(server.notes)
    return result


def _summarise(
    args: argparse.Namespace, results: list[dict[str, Any]], workdir: Path | None, holds: list[dict[str, Any]]
) -> None:
    if len(results) > 1:
        print(f"\n== side by side ==\n{report.table(results)}")
        lines = report.ratios(results)
        if lines:
            print("\n== ratios (lower is better for volthub) ==\n" + "\n".join(lines))
    checks = report.targets_table(results, holds)
    if checks:
        print(f"\n== Events API targets ({_load(args)}) ==\n{checks}")
    if args.json:
        payload = {
            "argv": sys.argv,
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "runs": results,
            "holds": holds,
            "ratios": report.ratios(results),
            "targets": report.targets_rows(results, holds),
        }
        report.write_json(args.json, payload)
        print(f"\nwrote {args.json}")
    if args.plot:
        title = (
            f"{args.clients} sockets + {args.sse} SSE, {args.channels} channels, {args.rate:g} msg/s, "
            f"{args.duration:g} s"
        )
        report.plot(args.plot, results, title)
        print(f"wrote {args.plot}")
    if workdir is not None:
        print(f"server logs in {workdir}")


def _load(args: argparse.Namespace) -> str:
    parts = []
    if args.clients + args.sse:
        channels = f"{args.channels} channel{'' if args.channels == 1 else 's'}"
        parts.append(f"{args.clients:,} sockets, {channels}, {args.rate:g} msg/s for {args.duration:g} s")
    if args.hold:
        parts.append(f"hold {args.hold:,} sockets for {args.hold_seconds:g} s")
    return "; ".join(parts)


def _profile_text(profile: dict[str, Any]) -> str:
    lines = [f"top functions by own time (% of {profile.get('samples', 0)} samples, all threads):"]
    lines += [f"  {share:5.1f}%  {frame}" for frame, share in profile.get("self", [])]
    lines.append("top functions including callees:")
    lines += [f"  {share:5.1f}%  {frame}" for frame, share in profile.get("inclusive", [])]
    return "\n".join(lines)
