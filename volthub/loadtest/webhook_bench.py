"""Webhook delivery throughput: deliveries per second to a local HTTPS receiver.

    .venv/bin/python -m volthub.loadtest.webhook_bench [--count 3000] [--workers 4]
        [--database postgresql://postgres@127.0.0.1:5432/test]

Writes `--count` events through the real publisher and outbox sink, then starts the
dispatcher (the same code `volthub serve` runs) and times until every delivery has
succeeded, or `--timeout` seconds have passed. The receiver is a separate Hypercorn process
with a trustme certificate (needs the test extra: `pip install -e '.[test]'`), answering
204 at once, so the figure is the dispatcher's: claim, sign, POST over TLS with keep-alive,
record the attempt.

Its checks decide the exit status, as `volthub loadtest`'s do: by default every delivery
succeeded (`failed==0`, `pending==0`); `--check 'KEY OP NUMBER'` replaces them, over
`per_second`, `seconds`, `succeeded`, `failed`, `pending` and `latency_ms`. Exit status 1
when one is not met, 2 on a usage error.

Measured on the 2-vCPU development VM (receiver and PostgreSQL on the same machine, other
work running, so the spread is wide), 3,000 deliveries:

    workers  sqlite            postgresql
    4        290-370 /s        120-200 /s    (the default pool)
    16       ~400 /s           ~250 /s
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from volthub.config import load_settings
from volthub.http.events.asgi import answer_lifespan
from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import SystemClock
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.loadtest import checks
from volthub.loadtest.servers import free_port
from volthub.persistence import Database, Tx, migrate, open_database, users
from volthub.persistence import webhooks as repo
from volthub.services.webhooks import Dispatcher


async def receiver(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The receiving end: drain the body, answer 204 (ASGI, run by Hypercorn)."""
    if scope["type"] == "lifespan":
        return await answer_lifespan(receive, send)
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def _tls_files(directory: Path) -> tuple[Path, Path, Path]:
    try:
        import trustme
    except ImportError:
        sys.exit("the benchmark needs trustme: pip install -e '.[test]'")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    files = directory / "ca.pem", directory / "cert.pem", directory / "key.pem"
    ca.cert_pem.write_to_path(str(files[0]))
    leaf.cert_chain_pems[0].write_to_path(str(files[1]))
    leaf.private_key_pem.write_to_path(str(files[2]))
    return files


def _start_receiver(cert: Path, key: Path, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hypercorn",
            "--certfile",
            str(cert),
            "--keyfile",
            str(key),
            "--bind",
            f"127.0.0.1:{port}",
            "--access-logfile",
            "-",
            "--log-level",
            "warning",
            "volthub.loadtest.webhook_bench:receiver",
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    sys.exit("the receiver did not start")


async def _seed(database: Database, count: int, url: str) -> str:
    owner, webhook_id = str(uuid.uuid4()), str(uuid.uuid4())

    def setup(tx: Tx) -> None:
        users.create_user(
            tx, user_id=owner, username=f"bench_{owner[:8]}", display_name="bench", password_hash="-", now_ms=0
        )
        tx.execute(
            "INSERT INTO apps (client_id, owner_id, name, created_at, updated_at) VALUES (?, ?, ?, 0, 0)",
            (f"bench_{owner[:8]}", owner, "bench"),
        )
        repo.create_webhook(
            tx,
            webhook_id=webhook_id,
            client_id=f"bench_{owner[:8]}",
            url=url,
            events=["channel.follow"],
            secret="whsec_" + "A" * 43 + "=",
            now_ms=0,
        )

    await database.write(setup)
    publisher = EventPublisher(database, InProcessBroker(), SystemClock())
    publisher.add_transaction_sink(Dispatcher.from_settings(database, SystemClock(), _settings(1, "").webhooks).sink)
    batch = 100
    for start in range(0, count, batch):

        def emit(tx: Tx, emitter: Emitter, start: int = start, n: int = min(batch, count - start)) -> None:
            for i in range(n):
                emitter.emit(owner, "channel.follow", {"userId": str(uuid.uuid4()), "n": start + i})

        await publisher.write(emit)
    return webhook_id


def _settings(workers: int, ca_file: str) -> Any:
    return load_settings(
        None,
        environ={},
        overrides={"webhooks": {"workers": workers, "allow_private_targets": True, "ca_file": ca_file}},
    )


async def _count(database: Database, webhook_id: str, state: str) -> int:
    return int(
        await database.read(
            lambda tx: tx.scalar(
                "SELECT COUNT(*) AS n FROM webhook_deliveries WHERE webhook_id = ? AND state = ?", (webhook_id, state)
            )
        )
    )


async def run(count: int, workers: int, database_url: str, port: int, ca_file: str, timeout: float) -> dict[str, float]:
    database = open_database(database_url, max(8, workers + 2))
    await database.open()
    await migrate(database)
    try:
        webhook_id = await _seed(database, count, f"https://127.0.0.1:{port}/hooks")
        dispatcher = Dispatcher.from_settings(database, SystemClock(), _settings(workers, ca_file).webhooks)
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            await nursery.start(dispatcher.run)
            with trio.move_on_after(timeout):
                while await _count(database, webhook_id, repo.SUCCEEDED) < count:
                    await trio.sleep(0.05)
            elapsed = time.perf_counter() - started
            nursery.cancel_scope.cancel()
        succeeded = await _count(database, webhook_id, repo.SUCCEEDED)
        failed = await _count(database, webhook_id, repo.FAILED)
        latency = await database.read(
            lambda tx: tx.scalar(
                "SELECT AVG(a.latency_ms) AS ms FROM webhook_attempts a JOIN webhook_deliveries d"
                " ON d.id = a.delivery_id WHERE d.webhook_id = ?",
                (webhook_id,),
            )
        )
        return {
            "deliveries": count,
            "succeeded": succeeded,
            "failed": failed,
            "pending": count - succeeded - failed,  # neither, when the time ran out
            "seconds": elapsed,
            "per_second": succeeded / elapsed,
            "latency_ms": float(latency or 0),
        }
    finally:
        await database.close()


CHECK_KEYS = ("per_second", "seconds", "succeeded", "failed", "pending", "latency_ms")
DEFAULT_CHECKS = (
    checks.Check("failed", "==", 0, "no delivery failed"),
    checks.Check("pending", "==", 0, "every delivery succeeded within --timeout"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=load_settings(None, environ={}).webhooks.workers)
    parser.add_argument("--database", help="database URL (default: a temporary SQLite file)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="give up waiting for the deliveries after this (default 300 s)"
    )
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="EXPR",
        help=f"'KEY OP NUMBER' over the run's figures ({', '.join(CHECK_KEYS)}), e.g. 'per_second>=200' "
        "(repeatable); exit status 1 when one is not met. Replaces the default checks (failed==0, pending==0)",
    )
    args = parser.parse_args(argv)
    if args.count < 1 or args.timeout <= 0:
        parser.error("--count must be >= 1 and --timeout > 0")
    given = checks.from_options(parser, args.check, CHECK_KEYS.__contains__, DEFAULT_CHECKS, "per_second>=200")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        ca, cert, key = _tls_files(directory)
        port = free_port()
        process = _start_receiver(cert, key, port)
        try:
            url = args.database or f"sqlite:///{directory / 'bench.db'}"
            result = trio.run(run, args.count, args.workers, url, port, str(ca), args.timeout)
        finally:
            process.terminate()
            process.wait(10)
    backend = "postgresql" if url.startswith("postgres") else "sqlite"
    print(
        f"{backend}: {result['succeeded']:.0f} of {result['deliveries']} deliveries with {args.workers} workers in "
        f"{result['seconds']:.2f} s = {result['per_second']:.0f} deliveries/s "
        f"(mean attempt {result['latency_ms']:.1f} ms, failed: {result['failed']:.0f}, "
        f"pending: {result['pending']:.0f})"
    )
    outcomes = checks.evaluate_each([result], given, lambda run: backend, lambda run: backend)
    print(f"checks: {checks.verdict(outcomes)}\n{checks.table(outcomes)}")
    return 0 if checks.passed(outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
