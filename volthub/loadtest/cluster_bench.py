"""Several processes on one PostgreSQL database: what the bus relay costs and carries.

    .venv/bin/python -m volthub.loadtest.cluster_bench --database postgresql://postgres@127.0.0.1:5432/test
        [--broker postgres|redis [--redis-url redis://…]] [--placement spread|partition]
        [--processes 1,2,4] [--sockets 400] [--channels 10] [--rate 20] [--duration 10]

`--broker redis` runs the processes with `[cluster] broker = "redis"`: on `--redis-url`, or
on a `redis-server` (from PATH) the bench starts on a free loopback port without
persistence. Redis's own CPU per event is reported from its `INFO cpu`.
`--placement partition` puts each channel's sockets (and its sends) on one process only
(channel i on process i mod N), so each process serves a share of the channels: with a
broker with per-channel interest, a process then pays only for its own channels.

For each process count N it starts N `volthub serve` processes (each on a port of its own,
rate limits off) on a fresh schema of the database, plus one *observer* process that
serves no client. It registers one user per channel, opens `--sockets` Socket.IO
WebSocket clients spread round-robin over the N processes (each auto-subscribed to its
channel), then posts `--rate` chat messages per second for `--duration` seconds,
round-robin over the channels and over the N processes. Every message crosses processes:
its subscribers sit on all N of them.

Reported per N: deliveries per second, end-to-end latency p50/p99 (POST sent to frame
read, the send time travels in the text), server CPU per delivery (the N serving
processes together, send phase plus drain), and the relay's cost per event: the observer's
CPU per event published. The observer does only what the relay makes every process do for
every event, wherever it was published and whoever listens (hear the NOTIFY in its LISTEN
thread, hand it to Trio, parse it, drop duplicates, buffer it for resume), so that is the
per-process, per-event price of scaling out; the publisher's side (an event-log row and a
NOTIFY in the chat transaction) is inside the serving processes' CPU.

Every process also spends a little with no events at all (timers, background services).
Before sending, the bench measures that idle rate for as long as it will send, and reports
the serving processes' CPU per event per process both whole and less that idle share (the
figure that compares process counts: what events cost), and the observer's less its own.

One generator process drives everything; on a small machine it competes with the servers
for CPU, so compare runs of the same machine and load only.

`--check '[N:]KEY OP NUMBER'` holds each process count's run (or only N's) to a figure, as
`volthub loadtest` does, e.g. `deliveries_missed==0` or `2:latency_p99_ms<500`; without
it, every socket connects and stays and every delivery arrives. Exit status 1 when a check
is not met, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import orjson
import trio
from trio_websocket import ConnectionClosed, connect_websocket_url

from volthub.loadtest import checks
from volthub.loadtest.metrics import Activity, machine_busy_seconds, percentile, read_activity, read_proc
from volthub.loadtest.servers import CHEAP_PASSWORD_HASHING, free_port, serve_argv, until_healthy

SERVER_ENV = {"VOLTHUB_RATELIMIT__ENABLED": "false", **CHEAP_PASSWORD_HASHING}


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path
    events_url: str  # the Events API gateway, where Socket.IO clients connect (as by default)

    def cpu(self) -> float:
        sample = read_proc(self.process.pid, 0.0)
        return sample.cpu_seconds if sample else 0.0

    def activity(self) -> Activity:
        return read_activity(self.process.pid) or Activity(0.0, 0.0, 0, 0)


def _activity(servers: list[Server]) -> Activity:
    total = Activity(0.0, 0.0, 0, 0)
    for server in servers:
        total = total.plus(server.activity())
    return total


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    connected: int = 0
    failed: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # connected, then lost: why


def _schema_url(database: str, schema: str) -> str:
    separator = "&" if "?" in database else "?"
    return f"{database}{separator}options={quote(f'-csearch_path={schema}')}"


def _admin(database: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute(statement)


def _start(url: str, workdir: Path, index: int, plan: Plan) -> Server:
    port, gateway_port = free_port(), free_port()  # never the default 8081: servers run side by side
    log = workdir / f"server-{index}-{port}.log"
    argv = serve_argv(port, url)
    if plan.server_cpus:
        # "0": every process on CPU 0; "0/1": process i on the i-th list (mod their number), so
        # that each serving process has a core of its own as it would on its own machine.
        choices = plan.server_cpus.split("/")
        argv = ["taskset", "-c", choices[index % len(choices)], *argv]  # taskset execs: the pid stays the server's
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [*argv, "--gateway-port", str(gateway_port)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, **SERVER_ENV, **plan.broker_env},
            cwd=workdir,
        )
    return Server(process, f"http://127.0.0.1:{port}", log, f"ws://127.0.0.1:{gateway_port}")


async def _healthy(server: Server, timeout: float = 60.0) -> None:
    with trio.fail_after(timeout):
        if not await until_healthy(server.url, lambda: server.process.poll() is None):
            raise RuntimeError(f"server exited: {server.log.read_text()[-2000:]}")


async def _client(server: Server, token: str, tally: Tally, ready: trio.Semaphore, stop: trio.Event) -> None:
    url = server.events_url + "/ws/events/?EIO=4&transport=websocket"
    said = ""  # the server's last word other than pings and events (a disconnect, an error)
    connected = False
    try:
        async with trio.open_nursery() as nursery:
            ws = await connect_websocket_url(nursery, url)
            await ws.get_message()  # the Engine.IO open packet
            await ws.send_message("40" + orjson.dumps({"token": token}).decode())
            tally.connected += 1
            connected = True
            ready.release()
            while not stop.is_set():
                with trio.move_on_after(0.5):
                    frame = await ws.get_message()
                    if frame == "2":
                        await ws.send_message("3")
                    elif isinstance(frame, str) and frame.startswith('42["event"'):
                        envelope = orjson.loads(frame[2:])[1]
                        if envelope["event"] == "chat.message":
                            sent = float(envelope["data"]["message"].split("@", 1)[1])
                            tally.latencies.append(time.time() - sent)
                    elif isinstance(frame, str) and not frame.startswith("40"):
                        said = frame[:120]
            await ws.aclose()
    except BaseException as exc:
        lost = _lost_connection(exc)
        if lost is None:
            raise
        if connected:  # dropped by the server or the network after it was counted
            tally.dropped[f"{lost} after {said!r}" if said else lost] += 1
        else:
            tally.failed += 1
            ready.release()


def _lost_connection(exc: BaseException) -> str | None:
    """Why a client's connection ended, when that is what `exc` (maybe grouped by the
    client's nursery) says; None for anything else, which the bench must not hide."""
    if isinstance(exc, BaseExceptionGroup):
        reasons = [_lost_connection(inner) for inner in exc.exceptions]
        return reasons[0] if reasons and all(reasons) else None
    if isinstance(exc, ConnectionClosed):
        why = exc.reason
        return f"closed {why.code} {why.reason or ''}".strip() if why is not None else "closed"
    if isinstance(exc, OSError | trio.TooSlowError):
        return type(exc).__name__
    return None


async def _register(http: httpx.AsyncClient, base: str) -> tuple[str, str]:
    name = f"bench_{secrets.token_hex(5)}"
    response = await http.post(f"{base}/api/auth/register", json={"username": name, "password": "bench password 1"})
    response.raise_for_status()
    body = response.json()
    return body["user"]["id"], body["token"]


@dataclass(frozen=True)
class Plan:
    sockets: int
    channels: int
    rate: float
    duration: float
    placement: str = "spread"
    broker_env: dict[str, str] = field(default_factory=dict)
    redis_url: str | None = None
    server_cpus: str | None = None  # taskset -c list for every volthub process


def _redis_cpu(url: str | None) -> float | None:
    """Redis's own CPU seconds so far (user + system), from INFO cpu."""
    if url is None:
        return None
    try:
        done = subprocess.run(["redis-cli", "-u", url, "INFO", "cpu"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    try:
        return float(fields["used_cpu_sys"]) + float(fields["used_cpu_user"])
    except (KeyError, ValueError):
        return None


def start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server on a free loopback port, without persistence; (process, URL)."""
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        + ["--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while _redis_cpu(url) is None:
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)
    return process, url


class Lockstep:
    """Deployments measured side by side pass each phase together (all connected, then the
    idle window, then sending), so that whatever else the machine does in that window, a
    neighbour's noise or a slower core, weighs on all of them alike."""

    def __init__(self, parties: int) -> None:
        self._parties = parties
        self._arrived: dict[str, int] = {}
        self._all_in: dict[str, trio.Event] = {}

    async def reach(self, phase: str) -> None:
        everyone = self._all_in.setdefault(phase, trio.Event())
        self._arrived[phase] = self._arrived.get(phase, 0) + 1
        if self._arrived[phase] == self._parties:
            everyone.set()
        await everyone.wait()


SOLO = Lockstep(1)  # one deployment alone never waits


async def run_side_by_side(database: str, counts: list[int], plan: Plan, workdir: Path) -> list[dict[str, Any]]:
    """A deployment per process count (each its own schema, servers and uninterested
    process, one generator for all), measured at the same time under the same load. The
    broker's CPU per event is then shared out over every deployment's events."""
    lockstep = Lockstep(len(counts))
    results: list[dict[str, Any]] = [{} for _ in counts]

    async def one(index: int, count: int) -> None:
        results[index] = await run_once(database, count, plan, workdir, lockstep)

    async with trio.open_nursery() as nursery:
        for index, count in enumerate(counts):
            nursery.start_soon(one, index, count)
    events = sum(result["messages_accepted"] for result in results)
    for result in results:
        share = result["redis_cpu_ms_per_event"]
        if share is not None and events:
            result["redis_cpu_ms_per_event"] = round(share * result["messages_accepted"] / events, 4)
        result["side_by_side"] = True
    return results


async def run_once(
    database: str, processes: int, plan: Plan, workdir: Path, lockstep: Lockstep = SOLO
) -> dict[str, Any]:
    schema = f"bench_{secrets.token_hex(4)}"
    _admin(database, f"CREATE SCHEMA {schema}")
    url = _schema_url(database, schema)
    servers: list[Server] = []
    try:
        # The first one applies the migrations; the others start on a migrated schema.
        servers.append(_start(url, workdir, 0, plan))
        await _healthy(servers[0])
        servers += [_start(url, workdir, i, plan) for i in range(1, processes + 1)]
        for server in servers:
            await _healthy(server)
        serving, observer = servers[:processes], servers[processes]
        return await _measure(serving, observer, plan, lockstep)
    finally:
        for server in servers:
            server.process.terminate()
        for server in servers:
            try:
                server.process.wait(20)
            except subprocess.TimeoutExpired:
                server.process.kill()
        _admin(database, f"DROP SCHEMA {schema} CASCADE")


def _server_for(plan: Plan, serving: list[Server], index: int, channel: int) -> Server:
    """Spread: round-robin over every process; partition: the channel's own process."""
    return serving[(channel if plan.placement == "partition" else index) % len(serving)]


async def _measure(serving: list[Server], observer: Server, plan: Plan, lockstep: Lockstep = SOLO) -> dict[str, Any]:
    sockets, channels, rate, duration = plan.sockets, plan.channels, plan.rate, plan.duration
    tally = Tally()
    stop = trio.Event()
    async with httpx.AsyncClient(timeout=30) as http:
        owners = [await _register(http, serving[0].url) for _ in range(channels)]
        async with trio.open_nursery() as nursery:
            ready = trio.Semaphore(0)
            for i in range(sockets):
                server = _server_for(plan, serving, i, i % channels)
                nursery.start_soon(_client, server, owners[i % channels][1], tally, ready, stop)
                if i % 50 == 49:
                    await trio.sleep(0.05)  # a gentle ramp
            with trio.fail_after(120):
                for _ in range(sockets):
                    await ready.acquire()
            await lockstep.reach("connected")
            # Settle, and measure what the observer burns idle (its heartbeat loops), so
            # the relay's per-event figure counts only the work events cause. As long as the
            # send phase: background services that wake every few seconds fall in both alike.
            idle_started, idle_cpu = time.monotonic(), observer.cpu()
            serving_idle_cpu = sum(s.cpu() for s in serving)
            await trio.sleep(max(3.0, duration))
            idle_seconds = time.monotonic() - idle_started
            idle_rate = (observer.cpu() - idle_cpu) / idle_seconds
            serving_idle_rate = (sum(s.cpu() for s in serving) - serving_idle_cpu) / idle_seconds

            await lockstep.reach("idle measured")
            cpu_before = [s.cpu() for s in serving]
            activity_before = _activity(serving)
            observer_before = observer.cpu()
            machine_before = machine_busy_seconds()
            redis_before = _redis_cpu(plan.redis_url)
            started = time.monotonic()
            sent = accepted = 0
            post_times: list[float] = []
            total = int(rate * duration)
            async with trio.open_nursery() as senders:
                for n in range(total):
                    channel_id, token = owners[n % channels]
                    base = _server_for(plan, serving, n, n % channels).url

                    async def send(base: str = base, channel_id: str = channel_id, token: str = token) -> None:
                        nonlocal accepted
                        t0 = time.time()
                        response = await http.post(
                            f"{base}/api/integrations/oauth/chat/channels/{channel_id}/messages",
                            json={"message": f"bench@{t0:.6f}"},
                            headers={"Authorization": f"Bearer {token}"},
                        )
                        post_times.append(time.time() - t0)
                        if response.status_code == 200:
                            accepted += 1

                    senders.start_soon(send)
                    sent += 1
                    await trio.sleep(max(0.0, started + (n + 1) / rate - time.monotonic()))
            expected = accepted * (sockets // channels)
            with trio.move_on_after(10):
                while len(tally.latencies) < expected:
                    await trio.sleep(0.1)
            elapsed = time.monotonic() - started
            cpu = sum(s.cpu() for s in serving) - sum(cpu_before)
            activity = _activity(serving).minus(activity_before)
            # What the serving processes spend with no events at all (timers, background
            # services), left out of the per-event figure that compares process counts.
            event_cpu = max(0.0, cpu - serving_idle_rate * elapsed)
            observer_cpu = max(0.0, observer.cpu() - observer_before - idle_rate * elapsed)
            machine_after = machine_busy_seconds()
            redis_after = _redis_cpu(plan.redis_url)
            redis = None if redis_before is None or redis_after is None else redis_after - redis_before
            machine = None if machine_before is None or machine_after is None else machine_after - machine_before
            stop.set()
    delivered = len(tally.latencies)
    ordered = sorted(tally.latencies)
    return {
        "processes": len(serving),
        "sockets_connected": tally.connected,
        "connect_failures": tally.failed,
        "disconnects": sum(tally.dropped.values()),
        "disconnect_reasons": dict(tally.dropped),
        "messages_accepted": accepted,
        "deliveries": delivered,
        "deliveries_expected": expected,
        "deliveries_missed": expected - delivered,
        "deliveries_per_second": round(delivered / elapsed, 1),
        "latency_p50_ms": round(percentile(ordered, 50) * 1000, 2) if ordered else None,
        "latency_p99_ms": round(percentile(ordered, 99) * 1000, 2) if ordered else None,
        "post_p50_ms": round(percentile(sorted(post_times), 50) * 1000, 2) if post_times else None,
        "server_cpu_seconds": round(cpu, 3),
        "server_cpu_ms_per_delivery": round(cpu * 1000 / delivered, 4) if delivered else None,
        "server_cpu_ms_per_event_per_process": (round(cpu * 1000 / accepted / len(serving), 4) if accepted else None),
        "server_event_cpu_ms_per_event_per_process": (
            round(event_cpu * 1000 / accepted / len(serving), 4) if accepted else None
        ),
        **_activity_figures(activity, accepted, len(serving)),
        "relay_cpu_ms_per_event_per_process": round(observer_cpu * 1000 / accepted, 4) if accepted else None,
        "redis_cpu_ms_per_event": round(redis * 1000 / accepted, 4) if accepted and redis is not None else None,
        "machine_busy_cpu_seconds": round(machine, 2) if machine is not None else None,
        "elapsed_seconds": round(elapsed, 2),
    }


def _activity_figures(activity: Activity, events: int, processes: int) -> dict[str, float | None]:
    """The serving processes' user and kernel CPU, wake-ups and preemptions per event per
    process. More wake-ups per event mean less work done per wake-up (a process with fewer
    events batches less); more preemptions mean processes fought over the cores."""

    def per(value: float, scale: float = 1.0) -> float | None:
        return round(value * scale / events / processes, 4) if events else None

    return {
        "user_cpu_ms_per_event_per_process": per(activity.user_seconds, 1000),
        "system_cpu_ms_per_event_per_process": per(activity.system_seconds, 1000),
        "wakeups_per_event_per_process": per(activity.voluntary_switches),
        "preemptions_per_event_per_process": per(activity.involuntary_switches),
    }


def _table(results: list[dict[str, Any]]) -> str:
    rows = [
        ("processes", "processes"),
        ("sockets connected", "sockets_connected"),
        ("disconnects", "disconnects"),
        ("messages accepted", "messages_accepted"),
        ("deliveries / expected", None),
        ("deliveries per second", "deliveries_per_second"),
        ("latency p50 (ms)", "latency_p50_ms"),
        ("latency p99 (ms)", "latency_p99_ms"),
        ("chat POST p50 (ms)", "post_p50_ms"),
        ("server CPU ms per delivery", "server_cpu_ms_per_delivery"),
        ("server CPU ms per event per process", "server_cpu_ms_per_event_per_process"),
        ("  of it in user space", "user_cpu_ms_per_event_per_process"),
        ("  of it in the kernel", "system_cpu_ms_per_event_per_process"),
        ("  the same, less what idle processes spend", "server_event_cpu_ms_per_event_per_process"),
        ("wake-ups per event per process", "wakeups_per_event_per_process"),
        ("preemptions per event per process", "preemptions_per_event_per_process"),
        ("uninterested process CPU ms per event", "relay_cpu_ms_per_event_per_process"),
        ("Redis CPU ms per event", "redis_cpu_ms_per_event"),
        ("machine busy CPU s (all processes)", "machine_busy_cpu_seconds"),
    ]
    lines = []
    for label, key in rows:
        if key is None:
            cells = [f"{r['deliveries']:,} / {r['deliveries_expected']:,}" for r in results]
        else:
            cells = [f"{r[key]:,}" if isinstance(r[key], int | float) else str(r[key]) for r in results]
        lines.append(f"{label:<38}" + "".join(f"{c:>16}" for c in cells))
    return "\n".join(lines)


# The figures a --check may name, in each process count's result.
CHECK_KEYS = (
    "sockets_connected",
    "connect_failures",
    "disconnects",
    "messages_accepted",
    "deliveries",
    "deliveries_expected",
    "deliveries_missed",
    "deliveries_per_second",
    "latency_p50_ms",
    "latency_p99_ms",
    "post_p50_ms",
    "server_cpu_ms_per_delivery",
    "server_cpu_ms_per_event_per_process",
    "server_event_cpu_ms_per_event_per_process",
    "relay_cpu_ms_per_event_per_process",
    "redis_cpu_ms_per_event",
)
DEFAULT_CHECKS = (
    checks.Check("connect_failures", "==", 0, "every socket connects"),
    checks.Check("disconnects", "==", 0, "no socket lost"),
    checks.Check("deliveries_missed", "==", 0, "every message reaches every socket of its channel"),
)


def check_results(results: list[dict[str, Any]], given: list[checks.Check]) -> list[dict[str, Any]]:
    """Each check over each process count's result it applies to (also under its `checks`)."""
    return checks.evaluate_each(
        results,
        given,
        lambda result: str(result["processes"]),
        lambda result: f"{result['processes']} process{'' if result['processes'] == 1 else 'es'}",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True, help="postgresql://… (a fresh schema is made per run)")
    parser.add_argument("--broker", choices=("postgres", "redis"), default="postgres")
    parser.add_argument("--redis-url", help="with --broker redis: this server (default: start a redis-server)")
    parser.add_argument("--placement", choices=("spread", "partition"), default="spread")
    parser.add_argument("--processes", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--sockets", type=int, default=400)
    parser.add_argument("--channels", type=int, default=10)
    parser.add_argument("--rate", type=float, default=20.0, help="chat messages per second, all channels")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of sending")
    parser.add_argument(
        "--server-cpus",
        metavar="LIST",
        help="pin every volthub process to these CPUs with taskset -c (e.g. 0; run the bench itself "
        "under taskset -c 1), so that the generator's work never runs beside a server's; lists "
        "separated by / are dealt out in turn (0/1: serving process i on CPU i mod 2, the "
        "uninterested process on the next), so that each serving process has a core of its own",
    )
    parser.add_argument(
        "--side-by-side",
        action="store_true",
        help="run every process count at the same time, each a deployment of its own under the "
        "same load (the machine carries their sum), so that comparing them is not comparing "
        "two moments of a machine whose speed drifts",
    )
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="EXPR",
        help="'[N:]KEY OP NUMBER' over each process count's figures (repeatable; N: that count's "
        "only), e.g. 'deliveries_missed==0' or '2:latency_p99_ms<500'; exit status 1 when one is not "
        "met. Replaces the default checks (connect_failures==0, disconnects==0, deliveries_missed==0). "
        f"Figures: {', '.join(CHECK_KEYS)}",
    )
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = parser.parse_args(argv)
    if not args.database.startswith(("postgresql://", "postgres://")):
        parser.error("--database must be a PostgreSQL URL")
    counts = [int(n) for n in args.processes.split(",") if n.strip()]
    given = checks.from_options(
        parser, args.check, CHECK_KEYS.__contains__, DEFAULT_CHECKS, "deliveries_missed==0", [str(n) for n in counts]
    )
    import tempfile

    results = []
    with tempfile.TemporaryDirectory(prefix="volthub-cluster-bench-") as tmp:
        redis: subprocess.Popen[bytes] | None = None
        plan = Plan(args.sockets, args.channels, args.rate, args.duration, args.placement, server_cpus=args.server_cpus)
        try:
            if args.broker == "redis":
                redis_url = args.redis_url
                if redis_url is None:
                    redis, redis_url = start_redis(Path(tmp))
                broker_env = {"VOLTHUB_CLUSTER__BROKER": "redis", "VOLTHUB_CLUSTER__REDIS_URL": redis_url}
                plan = replace(plan, broker_env=broker_env, redis_url=redis_url)
            if args.side_by_side:
                print(f"-- {args.processes} processes side by side, broker {args.broker} ...", flush=True)
                together = trio.run(run_side_by_side, args.database, counts, plan, Path(tmp))
                results = [{"broker": args.broker, **result} for result in together]
                for result in results:
                    print(orjson.dumps(result).decode(), flush=True)
            else:
                for count in counts:
                    print(f"-- {count} process(es), broker {args.broker}, placement {args.placement} ...", flush=True)
                    result = {"broker": args.broker, **trio.run(run_once, args.database, count, plan, Path(tmp))}
                    print(orjson.dumps(result).decode(), flush=True)
                    results.append(result)
        finally:
            if redis is not None:
                redis.kill()
                redis.wait()
    outcomes = check_results(results, given)
    print()
    print(_table(results))
    print(f"\nchecks: {checks.verdict(outcomes)}\n{checks.table(outcomes)}")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2))
    return 0 if checks.passed(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
