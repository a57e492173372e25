"""The `volthub loadtest` command line: its options and their help, and how they resolve into
the run's plan (a scenario or the fan-out the flags describe), its checks and each target's
RunConfig; a combination that cannot run is a usage problem, said before anything starts."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from volthub.loadtest import checks
from volthub.loadtest.scenario import BUNDLED, RunConfig, Scenario, fan_out, scaled
from volthub.loadtest.scenario import load as load_scenario
from volthub.loadtest.targets import TARGETS, VOLTHUB_TARGETS, Channel, RemoteTargetRefused, check_url

MAX_DURATION = 3600.0
MAX_HOLD = 300_000


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
        "Load-test the Events API: provision channels and tokens (or use --tokens), open Socket.IO "
        "(WebSocket) and SSE clients, post chat messages through REST, and measure connect rate, "
        "deliveries over what was offered, end-to-end latency (the send time travels in the message), "
        "send outcomes, disconnects and the server's CPU and RSS; then check the figures (--check) "
        "and exit 0 when every check holds, 1 when one fails, 2 on a usage error or an unreachable "
        "target. Several --target names run one after another on the same load and are compared. "
        "Only loopback servers unless --allow-remote."
    )
    parser.formatter_class = _HelpFormatter
    parser.epilog = (
        "examples:\n"
        "  volthub loadtest --spawn --clients 2000 --channels 10 --rate 5 --duration 30 \\\n"
        "      --check 'delivery.ratio>=0.999' --check 'delivery.latency_ms.p99<200' --junit checks.xml\n"
        "  volthub loadtest --url http://127.0.0.1:8080 --tokens tokens.txt --server-pid 4242 --scenario hold\n"
        "  volthub loadtest --spawn --scenario reconnect-storm --clients 200 --duration 10\n"
        "  taskset -c 1 volthub loadtest --spawn --server-cpus 0 --target volthub,python-socketio,node \\\n"
        "      --json bench.json --plot bench.png      (what `make bench` runs)\n\n"
        f"bundled scenarios: {', '.join(BUNDLED)}\n\n"
        "figures a --check may name ([TARGET:]KEY OP NUMBER, OP one of < <= > >= == !=):\n"
        + textwrap.indent(checks.keys_table(), "  ")
        + "\n\ndefault checks (when no --check is given and the scenario names none):\n"
        + "\n".join(f"  {check.expression:<32} {check.name}" for check in checks.DEFAULT_CHECKS)
        + "\n\n"
    ) + textwrap.fill(
        "Latency is measured from just before the chat POST to the arrival of the `event` frame (or SSE "
        "event) at each client. A percentile pQ is shown only when at least Q% of the expected "
        "deliveries arrived (otherwise: too few samples, and a check on it fails). Server CPU and RSS "
        "come from /proc, summed over the server's process tree; CPU per 1,000 deliveries covers "
        "sending and the drain; RSS growth per connection covers the ramp."
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
        "Events API listener, [events] gateway_port), and where volthub's chat sends go (that "
        "listener serves chat send too); the rest of REST stays at --url",
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
        "--server-pid",
        type=int,
        metavar="PID",
        help="with --url: the server's pid, to read its CPU and RSS from /proc (summed over its "
        "children too: a server started with --workers is measured whole)",
    )
    where.add_argument(
        "--tokens",
        type=Path,
        metavar="FILE",
        help="use these tokens instead of registering accounts: one `TOKEN CHANNEL_ID` per line "
        "(# comments); each line is a channel (with an idle kind in the scenario, the last one is "
        "the quiet channel idle holds listen on)",
    )
    where.add_argument(
        "--keep",
        action="store_true",
        help="leave what the run provisioned (accounts, the spawned server's database); without it "
        "they are removed at the end. With --url and no --tokens it is required: the API cannot "
        "delete accounts",
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
        "--server-workers",
        type=_positive(int),
        default=1,
        metavar="N",
        help="with --spawn: start volthub as `serve --workers N` (more than 1 needs --database postgresql://...)",
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
        "--scenario",
        metavar="FILE|NAME",
        help=f"stages and client mixes from a TOML file, or a bundled one ({', '.join(BUNDLED)}); "
        "--clients, --rate, --duration and --channels then scale it (peak clients, top rate, total "
        "seconds, channels). Without it the flags describe the fan-out",
    )
    load.add_argument(
        "--clients",
        type=_non_negative(int),
        metavar="N",
        help="Socket.IO clients over WebSocket (default 100; with --scenario: its peak)",
    )
    load.add_argument(
        "--sse",
        type=_non_negative(int),
        default=0,
        metavar="N",
        help="SSE clients (GET /api/events/stream; volthub only)",
    )
    load.add_argument(
        "--channels",
        type=_positive(int),
        metavar="C",
        help="channels; client i listens to channel i mod C (default 10)",
    )
    load.add_argument(
        "--rate",
        type=_non_negative(float),
        metavar="R",
        help="chat messages per second, all channels together, round-robin (default 10; with --scenario: its top rate)",
    )
    load.add_argument(
        "--duration",
        type=_non_negative(float),
        metavar="S",
        help=f"seconds of sending (default 10, at most {MAX_DURATION:.0f}; with --scenario: its length)",
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
        help="chat sends in flight at most; a send that cannot start within a second of its due "
        "time is not sent and counts as late (against the delivery ratio)",
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

    held = parser.add_argument_group(
        "hold (many sockets held open in one channel; volthub targets: with --spawn a fresh server each)"
    )
    held.add_argument(
        "--hold",
        type=_non_negative(int),
        default=0,
        metavar="N",
        help="after the runs, open N authenticated sockets (one channel's, all in it) to each volthub "
        "target and hold them for --hold-seconds; capped to what the server's open-file limit allows "
        "(said in the report). They are spread over generator processes and, against a loopback "
        "server, source addresses 127.0.0.2... (each has one ephemeral port range). With --clients 0 "
        "only the hold runs; with --url it needs --tokens (its first line is the channel) or --keep",
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
    held.add_argument(
        "--hold-addresses",
        type=_non_negative(int),
        default=0,
        metavar="K",
        help="source addresses the sockets connect from, 127.0.0.2 on (0: enough that each uses at "
        "most a quarter of net.ipv4.ip_local_port_range, where connect() stays cheap)",
    )
    held.add_argument(
        "--hold-broadcast-every",
        type=_non_negative(float),
        default=10.0,
        metavar="S",
        help="during the hold, post a chat message in the channel every S seconds and time its "
        "delivery to every socket (0: none)",
    )
    held.add_argument(
        "--hold-restart",
        action="store_true",
        help="after the hold, stop the server with SIGTERM and start it again (--spawn; with --url "
        "SIGTERM goes to --server-pid and its supervisor starts it), then time until every socket "
        "reconnected (the official client's randomised back-off) and count the recovered sessions",
    )
    held.add_argument(
        "--hold-restart-timeout",
        type=_positive(float),
        default=180.0,
        metavar="S",
        help="how long to wait for the server and every socket to come back",
    )

    out = parser.add_argument_group("checks and output")
    out.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="EXPR",
        help="'[TARGET:]KEY OP NUMBER' over a run's figures, e.g. 'delivery.ratio>=0.999' or "
        "'stages.steady.delivery.latency_ms.p99<200' (repeatable; the figures are listed below). "
        "Replaces the default checks; hold.* checks apply to targets that held sockets (--hold), "
        "the others to targets that ran; with TARGET: only to that one, e.g. "
        "'volthub-gateway:vs.node.server.cpu_seconds_per_1000_deliveries<=0.4'",
    )
    out.add_argument(
        "--junit", type=Path, metavar="FILE", help="write the checks as JUnit XML, one test case per check and target"
    )
    out.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="write the whole summary: every figure, per stage, the time series and each check's "
        "figure, limit and verdict",
    )
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
    out.add_argument(
        "--quiet",
        action="store_true",
        help="no progress line (otherwise: connected, deliveries/s, p99 so far and errors, in place "
        "on a terminal, a line every 5 s when not)",
    )


def validate(args: argparse.Namespace) -> str | None:
    """A usage problem, or None; resolves the load (args.plan, args.checks, args.channels_given)."""
    if args.scenario is not None and args.sse:
        return "--sse goes with the plain flags; a scenario says its kinds in each stage's mix"
    if args.scenario is not None:
        args.plan = scaled(load_scenario(args.scenario), args.clients, args.rate, args.duration)
        if args.channels is not None:
            args.plan = _with_channels(args.plan, args.channels)
    else:
        clients = 100 if args.clients is None else args.clients
        args.plan = fan_out(
            clients,
            args.sse,
            args.channels or 10,
            10.0 if args.rate is None else args.rate,
            10.0 if args.duration is None else args.duration,
        )
    plan: Scenario = args.plan
    args.checks = [checks.parse(text) for text in args.check] or list(plan.checks) or list(checks.DEFAULT_CHECKS)
    problem = checks.stray_targets(args.checks, args.target)
    if problem is not None:
        return problem
    runs = plan.peak_clients > 0
    if not runs and not args.hold:
        return "nothing to do: no clients (--clients and --sse are 0)"
    if args.hold_restart and args.url and not args.server_pid:
        return "--hold-restart with --url needs --server-pid (the process to send SIGTERM)"
    if args.hold_restart and not args.hold:
        return "--hold-restart goes with --hold"
    if args.server_workers > 1 and not args.spawn:
        return "--server-workers is for --spawn (a running server has its own)"
    if args.server_workers > 1 and not (args.database or "").startswith("postgresql"):
        return "--server-workers above 1 needs --database postgresql://... (SQLite has one writer)"
    if args.hold > MAX_HOLD:
        return f"--hold is at most {MAX_HOLD:,}"
    if args.hold and not any(name in VOLTHUB_TARGETS for name in args.target):
        return f"--hold is for {' or '.join(VOLTHUB_TARGETS)}"
    if args.ws_url and not args.url:
        return "--ws-url goes with --url (with --spawn the harness knows the ports)"
    if plan.peak_clients > args.max_clients:
        return f"{plan.peak_clients} clients is over --max-clients {args.max_clients}"
    if plan.seconds > MAX_DURATION:
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
    if "sse" in plan.kinds and any(name not in VOLTHUB_TARGETS for name in args.target):
        return "--sse is for volthub only (the reference servers speak Socket.IO only)"
    if "gateway" in plan.kinds and not args.ws_url and any(name != "volthub-gateway" for name in args.target):
        return "the scenario's gateway clients need --target volthub-gateway (or --url with --ws-url)"
    args.channel_list = None
    if args.tokens is not None:
        if any(name not in VOLTHUB_TARGETS for name in args.target):
            return "--tokens is for volthub targets (the reference servers take no tokens)"
        args.channel_list = read_tokens(args.tokens)
    elif args.url and (runs or args.hold) and not args.keep:
        return (
            "with --url the run would register accounts on the server and the API cannot delete "
            "them: pass --tokens FILE (tokens you issued), or --keep to accept the lt_* accounts"
        )
    return None


def _with_channels(plan: Scenario, channels: int) -> Scenario:
    from dataclasses import replace

    return replace(plan, channels=channels)


def read_tokens(path: Path) -> list[Channel]:
    """`TOKEN CHANNEL_ID` per line; blank lines and # comments are skipped."""
    found: list[Channel] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected `TOKEN CHANNEL_ID`")
        found.append(Channel(len(found), parts[1], parts[0]))
    if not found:
        raise ValueError(f"{path}: no tokens")
    return found


def run_config(args: argparse.Namespace, target: str) -> RunConfig:
    plan: Scenario = args.plan
    return RunConfig(
        target=target,
        sockets=args.clients or 0,
        sse=args.sse,
        channels=plan.channels,
        rate=args.rate or 0.0,
        duration=args.duration or 0.0,
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
        scenario=plan,
    )
