"""Chat send throughput, end to end: a real server on loopback, real HTTP clients.

    python -m volthub.loadtest.chat_bench --database sqlite:///var/bench.db --seconds 20 --concurrency 32
    python -m volthub.loadtest.chat_bench --database postgresql://postgres@127.0.0.1:5432/bench \
        --seconds 20 --concurrency 32 --channels 1

Starts `volthub serve` as a child process (rate limits off when the build has that switch,
unless `--rate-limits` keeps them on with budgets no sender reaches, so what deciding and
storing them costs is measured; cheap password hashing so registering the senders is quick), registers `--concurrency`
senders and `--channels` channels, then lets every sender post as fast as it can for
`--seconds`: sender i posts in channel i mod channels. `--channels 0` (default) gives each
sender its own channel; `--channels 1` puts everyone in one channel (one actor, the
contended case). Each channel's owner follows it over Socket.IO on the Events API gateway,
so a send counts end to end: acknowledged (200) and fanned out (`delivered` counts the
`chat.message` events those sockets got; it equals `accepted` when every acknowledged send
reached its channel's socket). Reports accepted sends per second, latency percentiles and
the server's CPU time per accepted send over the measured window.

`--listener` picks where the senders post: `main` (the main port: Hypercorn and Quart),
`gateway` (the same route on the Events API gateway's own h11 listener, the bots' fast
path) or `both` (default: one measured run each, main port first, on the same server, with
senders of their own). The senders speak HTTP/1.1 on keep-alive connections written and
read by hand, so the client takes as little of the machine's CPU as it can.

`--check '[LISTENER:]KEY OP NUMBER'` holds each run to a figure, as `volthub loadtest` does
(`gateway:sends_per_second>=1000`, `latency_ms.p99<=100`; `--help` lists the figures):
the exit status is 1 when one is not met, 2 on a usage error. Without `--check`, every
send must be answered 200 and, unless `--floor`, reach its channel's socket.

`--profile FILE` attaches py-spy to the server for the measured window, writes its
collapsed stacks to FILE and reports where the server's on-CPU samples went, by layer of
the send path (`layer_split`): Hypercorn and h11, Quart, volthub's HTTP middleware and
hooks, validation, authentication and rate limits, the channel actor, the database, the
publish and fan-out, the gateway's HTTP listener, and the rest (Trio's scheduler, socket
calls outside those). With `--listener both` each run writes its own file, FILE's name
with `-main` or `-gateway` added.

The client runs on the same machine as the server and takes CPU from it; the figures are
a floor for what the server does with its own cores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import trio

from volthub.loadtest import checks
from volthub.loadtest.metrics import percentile, read_proc
from volthub.loadtest.servers import CHEAP_PASSWORD_HASHING, free_port, profiling, serve_argv, until_healthy

PASSWORD = "bench password 123"


# Layers of the send path, each named by where its code lives. A sample counts for the
# innermost frame that matches one (a socket send under Hypercorn is Hypercorn's, the
# database work an actor awaits is the database's).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("database", ("volthub/persistence/", "psycopg", "sqlite3")),
    # The gateway's HTTP side (accepting, reading requests, writing answers); its WebSocket
    # deliveries are the fan-out's, below.
    (
        "gateway listener",
        ("Link.", "Gateway._", "send_all (volthub/http/events/gateway_connections.py")
        + ("recv (volthub/http/events/gateway_connections.py",),
    ),
    (
        "publish and fan-out",
        ("volthub/hub/publisher.py", "volthub/hub/fanout.py", "volthub/hub/bus.py", "volthub/hub/redis_bus.py")
        + ("volthub/http/events/", "wsproto", "trio_websocket"),
    ),
    ("channel actor", ("volthub/hub/", "volthub/services/chat.py")),
    (
        "auth and rate limits",
        ("volthub/http/access.py", "volthub/http/ratelimit.py", "volthub/services/tokens.py")
        + ("volthub/services/sessions.py", "volthub/services/oauth"),
    ),
    ("HTTP middleware and hooks", ("volthub/http/", "volthub/logs.py", "volthub/metrics.py", "prometheus_client")),
    ("validation", ("quart_schema", "pydantic")),
    ("Quart", ("quart/", "quart_trio/", "werkzeug/", "blinker/")),
    ("Hypercorn and h11", ("hypercorn/", "h11/")),
)
# Where the senders post: the main port (Hypercorn and Quart) or the Events API gateway,
# which serves the same route on its own h11 listener (volthub/http/chat_send.py).
LISTENERS = ("main", "gateway")
OTHER_LAYER = "Trio scheduler, I/O and the rest"
# Leaf frames where a thread waits rather than runs (py-spy counts some of those waits).
_WAITING = ("_thread_cache.py", "Condition.wait", "Event.wait", "Connection.wait", "get_events", "Queue.get")


def layer_split(collapsed: str) -> dict[str, float]:
    """Percent of the on-CPU samples per layer, from py-spy's raw output (one
    `frame;frame;...;leaf count` per line); samples of a waiting thread are left out."""
    counts: Counter[str] = Counter()
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        leaf = frames[-1]
        if any(mark in leaf for mark in _WAITING) and "(volthub/" not in leaf:
            continue
        counts[_layer_of(frames)] += int(count_text)
    total = sum(counts.values())
    if not total:
        return {}
    return {layer: round(100 * count / total, 1) for layer, count in counts.most_common()}


def _layer_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for layer, marks in LAYERS:
            if any(mark in frame for mark in marks):
                return layer
    return OTHER_LAYER


@dataclass
class Results:
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    elapsed: float = 0.0
    delivered: int = 0  # chat.message events the channels' sockets got in the measured window
    server_cpu_seconds: float | None = None
    profile: dict[str, float] | None = None  # percent of the server's samples per layer (--profile)

    @property
    def accepted(self) -> int:
        return self.statuses[200]

    def summary(self, delivering: bool = True) -> dict[str, object]:
        """The run's figures; `delivering`: the sends were chat messages, each due at its
        channel's socket (not `--floor`'s GETs)."""
        ordered = sorted(self.latencies)
        return {
            "seconds": round(self.elapsed, 2),
            "accepted": self.accepted,
            "sends_per_second": round(self.accepted / self.elapsed, 1) if self.elapsed else 0.0,
            "statuses": dict(self.statuses),
            "errors": sum(self.statuses.values()) - self.accepted,
            "delivered": self.delivered,
            "undelivered": self.accepted - self.delivered if delivering else None,
            "server_cpu_seconds": None if self.server_cpu_seconds is None else round(self.server_cpu_seconds, 3),
            "server_cpu_ms_per_send": (
                round(1000 * self.server_cpu_seconds / self.accepted, 3)
                if self.server_cpu_seconds is not None and self.accepted
                else None
            ),
            **({"profile_percent": self.profile} if self.profile is not None else {}),
            "latency_ms": {
                "mean": round(statistics.fmean(self.latencies) * 1000, 2) if self.latencies else None,
                "p50": round(percentile(ordered, 50) * 1000, 2),
                "p95": round(percentile(ordered, 95) * 1000, 2),
                "p99": round(percentile(ordered, 99) * 1000, 2),
            },
        }


# The figures a --check may name, in each run's report.
CHECK_KEYS: dict[str, str] = {
    "sends_per_second": "sends answered 200 per second over the measured window",
    "accepted": "sends answered 200",
    "errors": "sends answered otherwise, or not at all",
    "undelivered": "sends answered 200 whose chat.message never reached the channel's socket",
    "server_cpu_ms_per_send": "the server's CPU per accepted send (ms, whole process)",
    "latency_ms.p50": "POST to answer (ms); also p95, p99, mean",
    "latency_ms.p95": "",
    "latency_ms.p99": "",
    "latency_ms.mean": "",
}


EXAMPLE_CHECK = "gateway:sends_per_second>=1000"


def default_checks(floor: bool) -> list[checks.Check]:
    """Without --check: every send answered 200 and (posting chat) delivered."""
    found = [checks.Check("errors", "==", 0, "every send is answered 200")]
    if not floor:
        found.append(checks.Check("undelivered", "==", 0, "every acknowledged send reaches its channel's socket"))
    return found


def check_runs(reports: list[dict[str, Any]], given: list[checks.Check]) -> list[dict[str, Any]]:
    """Each check over each run whose listener it applies to (also under the run's `checks`)."""
    return checks.evaluate_each(
        reports, given, lambda run: str(run["listener"]), lambda run: f"{run['backend']} via {run['listener']}"
    )


def _ratelimit_switch_exists() -> bool:
    from volthub.config import Settings

    section = Settings.model_fields.get("ratelimit")
    return section is not None and "enabled" in section.annotation.model_fields  # type: ignore[union-attr]


# `--floor`: what the senders ask for instead of posting.
FLOOR_PATH = "/livez"
# `--rate-limits`: every budget this high (per minute or hour), so nothing is refused.
UNREACHED_BUDGET = 1_000_000


def _budget_fields() -> list[str]:
    from volthub.config import RateLimitSettings

    return [name for name in RateLimitSettings.model_fields if name.endswith(("_per_minute", "_per_hour"))]


class Server:
    """`volthub serve` in a child process, logging to a file."""

    def __init__(self, database: str, port: int, workdir: Path, rate_limits: bool = False) -> None:
        self.url = f"http://127.0.0.1:{port}"
        gateway_port = free_port()  # never the default 8081: benches may run beside other servers
        self.events_url = f"ws://127.0.0.1:{gateway_port}"
        self.gateway_url = f"http://127.0.0.1:{gateway_port}"
        env = {**os.environ, **CHEAP_PASSWORD_HASHING}
        if rate_limits:  # counted and stored as in production, with budgets no sender reaches
            env.update({f"VOLTHUB_RATELIMIT__{name.upper()}": str(UNREACHED_BUDGET) for name in _budget_fields()})
        elif _ratelimit_switch_exists():
            env["VOLTHUB_RATELIMIT__ENABLED"] = "false"
        self.log_path = workdir / "server.log"
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [*serve_argv(port, database), "--gateway-port", str(gateway_port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=workdir,
        )

    async def wait_ready(self, timeout: float = 60) -> None:
        with trio.fail_after(timeout):
            if not await until_healthy(self.url, lambda: self.process.poll() is None):
                raise RuntimeError(f"server exited: {self.log_path.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._log.close()


async def _register(client: httpx.AsyncClient, prefix: str) -> tuple[str, str]:
    name = f"{prefix}_{secrets.token_hex(4)}"
    response = await client.post("/api/auth/register", json={"username": name, "password": PASSWORD})
    response.raise_for_status()
    body = response.json()
    return body["user"]["id"], body["token"]


class _Connection:
    """One sender's keep-alive HTTP/1.1 connection, written and read by hand: httpx costs
    the client about a millisecond of CPU per request, more than the server's share, on
    the machine the server runs on. Answers carry a Content-Length (every volthub JSON
    answer does); a `Connection: close` answer or a failure opens a new connection."""

    def __init__(self, url: str) -> None:
        address = urlsplit(url)
        self.host, self.port = address.hostname or "127.0.0.1", address.port or 80
        self.authority = address.netloc.encode()
        self._stream: trio.SocketStream | None = None
        self._buffer = bytearray()

    async def request(self, head: bytes, body: bytes = b"") -> int:
        """Send one request (`head` without Host and the blank line); its answer's status."""
        try:
            return await self._exchange(head, body)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError, ValueError):
            await self.close()
            return 0

    async def _exchange(self, head: bytes, body: bytes) -> int:
        if self._stream is None:
            self._stream = await trio.open_tcp_stream(self.host, self.port)
            self._buffer.clear()
        await self._stream.send_all(head + b"Host: " + self.authority + b"\r\n\r\n" + body)
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            await self._fill()
        lines = bytes(self._buffer[:end]).split(b"\r\n")
        status, length, close = int(lines[0][9:12]), 0, False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection":
                close = value.strip().lower() == b"close"
        while len(self._buffer) < end + 4 + length:
            await self._fill()
        del self._buffer[: end + 4 + length]
        if close:
            await self.close()
        return status

    async def _fill(self) -> None:
        assert self._stream is not None
        chunk = await self._stream.receive_some(65536)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self._buffer += chunk

    async def close(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with contextlib.suppress(OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()


async def _sender(
    connection: _Connection,
    token: str,
    channel_id: str,
    stop_at: float,
    results: Results,
    number: int,
    floor: bool = False,
    count: int | None = None,
) -> None:
    """Post until `stop_at` (or `count` times)."""
    path = f"/api/integrations/oauth/chat/channels/{channel_id}/messages"
    head = (f"POST {path} HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n").encode()
    floor_head = f"GET {FLOOR_PATH} HTTP/1.1\r\n".encode()
    sequence = 0
    while (time.perf_counter() < stop_at) if count is None else sequence < count:
        sequence += 1
        body = orjson.dumps({"message": f"load {number}.{sequence} hello @nobody"})
        started = time.perf_counter()
        if floor:  # the HTTP stack alone: a route with no body, token or database
            status = await connection.request(floor_head)
        else:
            status = await connection.request(head + b"Content-Length: %d\r\n" % len(body), body)
        results.latencies.append(time.perf_counter() - started)
        results.statuses[status] += 1


class _Follower:
    """The channel owner's Socket.IO connection on the gateway, counting chat messages."""

    def __init__(self) -> None:
        self.counting = False
        self.seen = 0

    async def run(self, events_url: str, token: str, task_status: trio.TaskStatus[None]) -> None:
        from trio_websocket import ConnectionClosed, open_websocket_url

        async with open_websocket_url(f"{events_url}/ws/events/?EIO=4&transport=websocket") as ws:
            await ws.get_message()  # the Engine.IO open packet
            await ws.send_message("40" + orjson.dumps({"token": token}).decode())
            while not str(await ws.get_message()).startswith('42["connected"'):
                pass
            task_status.started()
            try:
                while True:
                    frame = await ws.get_message()
                    if frame == "2":
                        await ws.send_message("3")
                    elif self.counting and isinstance(frame, str) and frame.startswith('42["chat.message"'):
                        self.seen += 1
            except ConnectionClosed:
                return


async def run_bench(
    url: str,
    seconds: float,
    concurrency: int,
    channels: int,
    events_url: str | None = None,
    server_pid: int = 0,
    profile: Path | None = None,
    floor: bool = False,
    post_url: str | None = None,
) -> Results:
    """`events_url`: the gateway, where each channel's owner follows it (None: no followers);
    `server_pid`: whose CPU time to measure (0: not measured); `profile`: where py-spy writes
    the server's stacks over the measured window (None: not profiled); `floor`: the senders
    ask for FLOOR_PATH instead of posting (nothing is delivered then); `post_url`: where the
    senders post (the gateway's URL; None: `url`, the main port)."""
    connections = [_Connection(post_url or url) for _ in range(concurrency)]
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        senders = [await _register(client, "sender") for _ in range(concurrency)]
        if channels <= 0:
            owners = senders
        else:
            owners = [await _register(client, "channel") for _ in range(channels)]
        channel_ids = [user_id for user_id, _ in owners]
        targets = [channel_ids[i % len(channel_ids)] for i in range(concurrency)]
        followers = [_Follower() for _ in owners] if events_url else []
        async with trio.open_nursery() as listening:
            for follower, (_, token) in zip(followers, owners, strict=False):
                await listening.start(follower.run, events_url, token)
            # Warm up: start every channel's actor and open every connection before timing.
            async with trio.open_nursery() as nursery:
                for connection, (_, token), channel_id in zip(connections, senders, targets, strict=True):
                    nursery.start_soon(_sender, connection, token, channel_id, 0.0, Results(), -1, floor, 1)
            results = Results()
            async with contextlib.AsyncExitStack() as profiler:
                if profile is not None and server_pid:
                    await profiler.enter_async_context(profiling(server_pid, profile))
                await trio.sleep(0.5)  # the warm-up's messages reach the followers before counting starts
                for follower in followers:
                    follower.counting = True
                before = read_proc(server_pid, 0.0) if server_pid else None
                started = time.perf_counter()
                stop_at = started + seconds
                async with trio.open_nursery() as nursery:
                    for number, (connection, (_, token), channel_id) in enumerate(
                        zip(connections, senders, targets, strict=True)
                    ):
                        nursery.start_soon(_sender, connection, token, channel_id, stop_at, results, number, floor)
                results.elapsed = time.perf_counter() - started
                after = read_proc(server_pid, 0.0) if server_pid else None
            if profile is not None and profile.exists():
                results.profile = layer_split(profile.read_text())
            if before is not None and after is not None:
                results.server_cpu_seconds = after.cpu_seconds - before.cpu_seconds
            # Every acknowledged send was published before its 200; give the last frames a moment.
            with trio.move_on_after(0 if floor else 2.0):
                while sum(f.seen for f in followers) < results.accepted:
                    await trio.sleep(0.05)
            results.delivered = sum(f.seen for f in followers)
            listening.cancel_scope.cancel()
        for connection in connections:
            await connection.close()
        return results


def _listeners(args: argparse.Namespace) -> list[str]:
    return ["main"] if args.floor else (list(LISTENERS) if args.listener == "both" else [args.listener])


async def _main(args: argparse.Namespace) -> list[dict[str, object]]:
    """One measured run per listener, on one server (each run with senders of its own)."""
    listeners = _listeners(args)
    reports: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="volthub-bench-") as tmp:
        workdir = Path(tmp)
        database = args.database or f"sqlite:///{workdir / 'bench.db'}"
        backend = "postgresql" if database.startswith("postgres") else "sqlite"
        server = Server(database, args.port or free_port(), workdir, rate_limits=args.rate_limits)
        try:
            await server.wait_ready()
            for listener in listeners:
                profile = Path(args.profile).resolve() if args.profile else None
                if profile is not None and len(listeners) > 1:
                    profile = profile.with_name(f"{profile.stem}-{listener}{profile.suffix}")
                results = await run_bench(
                    server.url,
                    args.seconds,
                    args.concurrency,
                    args.channels,
                    server.events_url,
                    server.process.pid,
                    profile,
                    args.floor,
                    server.gateway_url if listener == "gateway" else None,
                )
                reports.append(
                    {
                        **({"floor": FLOOR_PATH} if args.floor else {}),
                        "backend": backend,
                        "listener": listener,
                        "concurrency": args.concurrency,
                        "channels": args.channels or args.concurrency,
                        "ratelimit_disabled": not args.rate_limits and _ratelimit_switch_exists(),
                        **results.summary(delivering=not args.floor),
                    }
                )
        finally:
            server.stop()
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m volthub.loadtest.chat_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="database URL (default: a throw-away SQLite file)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured duration (default 10)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent senders (default 16)")
    parser.add_argument(
        "--channels", type=int, default=0, help="channels to post in; 0 = one per sender (default), 1 = all in one"
    )
    parser.add_argument("--port", type=int, default=0, help="server port (default: a free one)")
    parser.add_argument(
        "--rate-limits",
        action="store_true",
        help=f"keep rate limiting on (counted and stored as configured, e.g. in the database on "
        f"PostgreSQL), every budget at {UNREACHED_BUDGET:,} so none refuses; default: off",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help=f"the senders GET {FLOOR_PATH} instead of posting: the per-request cost of the HTTP stack "
        "(Hypercorn, Quart, middleware) without the send's own work",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="attach py-spy to the server over the measured window: its collapsed stacks go to FILE, "
        "the share of samples per layer of the send path into the report",
    )
    parser.add_argument(
        "--listener",
        choices=[*LISTENERS, "both"],
        default="both",
        help="where the senders post: the main port, the Events API gateway (the same route on its own "
        "h11 listener), or both, one measured run after the other on the same server (default both)",
    )
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="EXPR",
        help="'[LISTENER:]KEY OP NUMBER' over each run's figures (repeatable), e.g. "
        "'gateway:sends_per_second>=1000' or 'latency_ms.p99<=100'; exit status 1 when one is not met. "
        "Replaces the default checks (errors==0, and undelivered==0 unless --floor). Figures: "
        + "; ".join(f"{key}: {text}" for key, text in CHECK_KEYS.items() if text),
    )
    parser.add_argument("--json", action="store_true", help="print each run's result as one JSON object per line")
    args = parser.parse_args(argv)
    if args.concurrency < 1 or args.seconds <= 0:
        parser.error("--concurrency must be >= 1 and --seconds > 0")
    given = checks.from_options(
        parser, args.check, CHECK_KEYS.__contains__, default_checks(args.floor), EXAMPLE_CHECK, _listeners(args)
    )
    reports = trio.run(_main, args)
    outcomes = check_runs(reports, given)
    for report in reports:
        _print(report, args.json)
    if not args.json:
        print(f"checks: {checks.verdict(outcomes)}\n{checks.table(outcomes)}")
    return 0 if checks.passed(outcomes) else 1


def _print(report: dict[str, object], as_json: bool) -> None:
    if as_json:
        print(orjson.dumps(report, option=orjson.OPT_NON_STR_KEYS).decode())  # statuses are keyed by int
        return
    latency: dict[str, float] = report["latency_ms"]  # type: ignore[assignment]
    print(
        f"{'floor ' + FLOOR_PATH + ' on ' if 'floor' in report else ''}"
        f"{report['backend']} via {report['listener']}{'' if report['ratelimit_disabled'] else ', rate limits on'}: "
        f"{report['sends_per_second']} sends/s accepted "
        f"({report['accepted']} in {report['seconds']} s, {report['concurrency']} senders, "
        f"{report['channels']} channels); latency ms p50 {latency['p50']} p95 {latency['p95']} "
        f"p99 {latency['p99']}; statuses {report['statuses']}; delivered {report['delivered']}; "
        f"server CPU {report['server_cpu_ms_per_send']} ms per send"
    )
    if "profile_percent" in report:
        split: dict[str, float] = report["profile_percent"]  # type: ignore[assignment]
        print("server samples by layer: " + "; ".join(f"{layer} {share}%" for layer, share in split.items()))


if __name__ == "__main__":
    sys.exit(main())
