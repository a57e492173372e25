"""Login latency while another address floods wrong passwords.

    .venv/bin/python -m volthub.loadtest.login_flood [--flooders 30] [--duration 15]
        [--database sqlite:///...] [--no-throttle]

Starts `volthub serve` with the production argon2 cost (time_cost 3, 64 MiB) on a fresh
database, registers a victim account, then runs `--flooders` concurrent clients bound to
127.0.0.2 posting wrong passwords for other accounts as fast as they are answered, while a
legitimate client on 127.0.0.1 signs in once every 0.5 s. Prints the legitimate logins'
latency (p50 / p95 / max) and what the flood was answered. `--no-throttle` raises the
failed-login budgets out of reach, to measure the bounded hashing queue alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import trio

from volthub.loadtest.servers import free_port, serve_argv, until_healthy

PASSWORD = "correct horse battery"


def _start(database: str, port: int, throttle: bool, workdir: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)  # production defaults: rate limits on, argon2 at full cost
    if not throttle:
        env["VOLTHUB_AUTH__FAILED_LOGINS_PER_ACCOUNT"] = "1000000"
        env["VOLTHUB_AUTH__FAILED_LOGINS_PER_ADDRESS"] = "1000000"
    log = open(workdir / "server.log", "wb")  # noqa: SIM115 - the child keeps it
    command = [*serve_argv(port, database), "--gateway-port", "0"]
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)


async def _wait_healthy(url: str) -> None:
    with trio.move_on_after(30):
        await until_healthy(url)
        return
    raise RuntimeError("server did not start")


async def flood(url: str, flooders: int, duration: float) -> dict[int, int]:
    """Wrong passwords from 127.0.0.2, as fast as they are answered (its own process, so the
    flood's client work does not slow the legitimate client's measurements)."""
    answers: Counter[int] = Counter()

    async def flooder(index: int) -> None:
        transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        async with httpx.AsyncClient(base_url=url, transport=transport, timeout=30) as http:
            while True:
                response = await http.post(
                    "/api/auth/login", json={"username": f"target{index % 20}", "password": "wrong password"}
                )
                answers[response.status_code] += 1

    with trio.move_on_after(duration):
        async with trio.open_nursery() as nursery:
            for index in range(flooders):
                nursery.start_soon(flooder, index)
    return dict(answers)


async def run(url: str, flooders: int, duration: float) -> dict[str, object]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.post("/api/auth/register", json={"username": "victim", "password": PASSWORD})
        assert response.status_code == 201, response.text
    latencies: list[float] = []
    legit_answers: Counter[int] = Counter()
    command = [sys.executable, "-m", "volthub.loadtest.login_flood", "--flood-only", url]
    command += ["--flooders", str(flooders), "--duration", str(duration + 1.5)]
    flood_process = subprocess.Popen(command, stdout=subprocess.PIPE)
    await trio.sleep(1.5)  # let the flood build up first
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        with trio.move_on_after(duration):
            while True:
                started = time.perf_counter()
                response = await http.post("/api/auth/login", json={"username": "victim", "password": PASSWORD})
                latencies.append(time.perf_counter() - started)
                legit_answers[response.status_code] += 1
                await trio.sleep(0.5)
    flood_output, _ = await trio.to_thread.run_sync(flood_process.communicate)
    ordered = sorted(latencies)
    return {
        "legit_logins": len(latencies),
        "legit_answers": dict(legit_answers),
        "p50_s": round(statistics.median(ordered), 3),
        "p95_s": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
        "max_s": round(ordered[-1], 3),
        "flood_answers": flood_output.decode().strip(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flooders", type=int, default=30)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--database", help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--no-throttle", action="store_true")
    parser.add_argument("--flood-only", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.flood_only:
        print(trio.run(flood, args.flood_only, args.flooders, args.duration))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        port = free_port()
        database = args.database or f"sqlite:///{workdir / 'flood.db'}"
        server = _start(database, port, not args.no_throttle, workdir)
        try:
            url = f"http://127.0.0.1:{port}"
            trio.run(_wait_healthy, url)
            result = trio.run(run, url, args.flooders, args.duration)
        finally:
            server.terminate()
            server.wait(30)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
