"""Servers under test as child processes: volthub, and the two reference servers.

`--spawn` starts one on a free loopback port with a bench configuration, optionally
pinned to CPUs with taskset (the generator runs on the others), waits for /healthz,
and stops it with SIGTERM (then SIGKILL) when the run ends. The child's pid is what the
/proc readings follow; taskset execs, so the pid is the server's own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

# Password hashing at its cheapest: a bench registers its users by the hundred.
CHEAP_PASSWORD_HASHING = {"VOLTHUB_AUTH__ARGON2_TIME_COST": "1", "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": "1024"}
# Rate limits off, cheap password hashing (provisioning registers one user per channel), no
# per-address connection cap (every generated client comes from 127.0.0.1, as behind a
# reverse proxy; the default cap is a third of the total), and nothing else changed: the
# hub runs with its production defaults.
VOLTHUB_BENCH_ENV = {
    "VOLTHUB_RATELIMIT__ENABLED": "false",
    "VOLTHUB_SERVER__MAX_CONNECTIONS_PER_ADDRESS": "10000000",
    **CHEAP_PASSWORD_HASHING,
}


# Both serve volthub; the second with the Events API on its own listener ([events] gateway_port).
VOLTHUB_TARGETS = ("volthub", "volthub-gateway")


def bench_dir() -> Path:
    """bench/ of the source tree this package was installed from (editable install)."""
    return Path(__file__).resolve().parents[2] / "bench"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class ServerPlan:
    target: str
    argv: list[str]
    env: dict[str, str]
    port: int
    cwd: Path
    log_path: Path
    # The Events API's own listener (volthub-gateway); None: sockets go to `port` too.
    gateway_port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def socket_url(self) -> str:
        """Where Socket.IO clients connect: the gateway's port, else the main one."""
        return f"http://127.0.0.1:{self.gateway_port or self.port}"


def serve_argv(port: int, database: str) -> list[str]:
    """`volthub serve` on 127.0.0.1:`port` over `database`, run by this Python."""
    return [
        sys.executable,
        "-m",
        "volthub",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--database",
        database,
    ]


def plan_server(
    target: str,
    workdir: Path,
    *,
    database: str | None = None,
    cpus: str | None = None,
    extra_env: dict[str, str] | None = None,
    port: int | None = None,
    workers: int = 1,
) -> ServerPlan:
    """The command line and environment that start `target` on 127.0.0.1."""
    port = port or free_port()
    env = {**os.environ, **(extra_env or {})}
    gateway_port: int | None = None
    if target in VOLTHUB_TARGETS:
        if database is None:  # a fresh file each run, so runs do not measure each other's data
            for old in workdir.glob("loadtest.db*"):
                old.unlink()
            database = f"sqlite:///{workdir / 'loadtest.db'}"
        argv = serve_argv(port, database)
        if workers > 1:  # `serve --workers N`: every worker binds the gateway port (SO_REUSEPORT)
            argv += ["--workers", str(workers)]
        # `volthub`: the mount alone (gateway off); `volthub-gateway`: the Events API's own
        # listener on a free port (never the default 8081: servers run side by side).
        env = {**os.environ, **VOLTHUB_BENCH_ENV, "VOLTHUB_EVENTS__GATEWAY_PORT": "0", **(extra_env or {})}
        if target == "volthub-gateway":
            gateway_port = free_port()
            env["VOLTHUB_EVENTS__GATEWAY_HOST"] = "127.0.0.1"
            env["VOLTHUB_EVENTS__GATEWAY_PORT"] = str(gateway_port)
    elif target == "python-socketio":
        argv = [sys.executable, str(bench_dir() / "reference_python.py"), "--host", "127.0.0.1", "--port", str(port)]
    elif target == "node":
        server = bench_dir() / "reference_node" / "server.js"
        if not (server.parent / "node_modules" / "socket.io").is_dir():
            raise RuntimeError(f"socket.io is not installed: run `npm ci --prefix {server.parent}` (make bench does)")
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not on PATH")
        argv = [node, str(server), "--host", "127.0.0.1", "--port", str(port)]
    else:
        raise ValueError(f"unknown target {target!r}")
    if cpus:
        if shutil.which("taskset") is None:
            raise RuntimeError("--server-cpus needs taskset (util-linux)")
        argv = ["taskset", "-c", cpus, *argv]
    return ServerPlan(target, argv, env, port, workdir, workdir / f"{target}.log", gateway_port)


async def until_healthy(url: str, running: Callable[[], bool] = lambda: True) -> bool:
    """Polls `url`/healthz: True once it answers 200, False once `running` says the server's
    process is gone. It sets no deadline: the caller bounds the wait."""
    async with httpx.AsyncClient(timeout=2) as http:
        while running():
            try:
                if (await http.get(f"{url}/healthz")).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            await trio.sleep(0.1)
    return False


@dataclass
class SpawnedServer:
    plan: ServerPlan
    process: trio.Process | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self, timeout: float = 60.0) -> None:
        with open(self.plan.log_path, "ab") as log:  # the child keeps its own copy of the fd
            self.process = process = await trio.lowlevel.open_process(
                self.plan.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.plan.env,
                cwd=str(self.plan.cwd),
                start_new_session=True,
            )
        with trio.move_on_after(timeout):
            if await until_healthy(self.plan.url, lambda: process.returncode is None):
                return
            raise RuntimeError(f"{self.plan.target} exited with {process.returncode}:\n{self.log_tail()}")
        await self.stop()
        raise RuntimeError(f"{self.plan.target} did not become healthy in {timeout:.0f}s:\n{self.log_tail()}")

    async def stop(self, grace: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; only our own child is signalled."""
        process = self.process
        if process is None or process.returncode is not None:
            return
        with trio.CancelScope(shield=True):
            process.send_signal(signal.SIGTERM)
            with trio.move_on_after(grace):
                await process.wait()
            if process.returncode is None:
                self.notes.append(f"{self.plan.target} ignored SIGTERM for {grace:.0f}s; killed")
                process.kill()
                await process.wait()

    def log_tail(self, limit: int = 3000) -> str:
        try:
            return self.plan.log_path.read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return ""


async def remove_accounts(plan: ServerPlan, database: str | None, user_ids: list[str] | None) -> int:
    """Undo what a run provisioned on a spawned volthub (its server stopped): the fresh SQLite
    file it made, or the accounts it registered in a database it was given. Returns how many
    accounts went (the file's: all of them, counted as -1)."""
    if database is None:
        for path in plan.cwd.glob("loadtest.db*"):
            path.unlink(missing_ok=True)
        return -1
    if not user_ids:
        return 0
    from volthub.persistence import open_database
    from volthub.persistence.users import delete_users

    opened = open_database(database, 1)
    await opened.open()
    try:
        removed: int = await opened.write(lambda tx: delete_users(tx, user_ids))
    finally:
        await opened.close()
    return removed


def make_workdir(keep: str | None) -> Path:
    if keep:
        path = Path(keep).resolve()  # servers run with it as their working directory
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(tempfile.mkdtemp(prefix="volthub-loadtest-"))


# --- profiling ---------------------------------------------------------------------------------------


def profiler_command(pid: int, output: Path, rate: int = 250) -> list[str]:
    """py-spy attached to the server, writing collapsed stacks when interrupted (SIGINT).

    --nonblocking: the server is not paused per sample, so it is measured as it runs;
    --function: lines of one function are counted together."""
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        py_spy = shutil.which("py-spy") or "py-spy"
    return [
        py_spy,
        "record",
        "--pid",
        str(pid),
        "--rate",
        str(rate),
        "--format",
        "raw",
        "--function",
        "--output",
        str(output),
        "--nonblocking",
    ]


@asynccontextmanager
async def profiling(pid: int, output: Path) -> AsyncIterator[None]:
    """py-spy attached to `pid` for the body of the `async with`, then interrupted (SIGINT)
    so it writes its collapsed stacks to `output`; its own messages go to `output`.log."""
    with open(output.with_name(output.name + ".log"), "wb") as log:  # a file: never blocks py-spy
        process = await trio.lowlevel.open_process(profiler_command(pid, output), stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        await stop_profiler(process)


async def stop_profiler(process: trio.Process) -> None:
    """Interrupt py-spy (SIGINT makes it write its output); killed after 30 s. Shielded: it
    runs while a cancelled run winds down too."""
    with trio.CancelScope(shield=True):
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        with trio.move_on_after(30):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


def top_frames(collapsed: str, limit: int = 15) -> dict[str, Any]:
    """Top functions by self and by inclusive share of samples, from py-spy's raw
    (collapsed-stack) output: one `frame;frame;...;leaf count` per line."""
    self_counts: Counter[str] = Counter()
    total_counts: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_short(frame) for frame in stack.split(";") if frame]
        if not frames:
            continue
        total += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            total_counts[frame] += count
    if not total:
        return {"self": [], "inclusive": []}

    def share(counts: Counter[str]) -> list[tuple[str, float]]:
        return [(frame, round(100 * count / total, 1)) for frame, count in counts.most_common(limit)]

    # The trunk every sample passes through (runpy, main, trio.run, ...) says nothing:
    # leave out frames that are in as many samples as the busiest one.
    trunk = max(total_counts.values())
    branches = Counter({frame: count for frame, count in total_counts.items() if count < trunk})
    return {"self": share(self_counts), "inclusive": share(branches), "samples": total}


def _short(frame: str) -> str:
    """`send_all (trio/_highlevel_socket.py:123)` -> `send_all (trio/_highlevel_socket.py)`, with
    site-packages and the source tree stripped from the path."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0] if where else ""
    for marker in ("site-packages/", "/volthub/", "lib/python3."):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker == "/volthub/":
                path = "volthub/" + path
            elif marker == "lib/python3.":
                path = path.split("/", 1)[-1]
            break
    return f"{name} ({path})" if path else name
