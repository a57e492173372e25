"""`volthub serve --workers N`: N server processes on one port.

The parent process serves nothing itself. It applies pending migrations once (itself at
start; a fresh `volthub migrate` on SIGHUP), binds the listening socket, and starts N
workers (`volthub serve --listen-fd FD`, migrations off) that inherit the socket: the
kernel hands each new connection to one of them. At start the parent imports the server's
code once and forks the N workers from itself, so they do not each import it on the same
cores at once (a restart's reconnecting clients wait on that); a worker started later (a
rolling restart's, or one replacing a worker that died) is a fresh interpreter, so it runs
the code on disk. Events,
webhook deliveries, rate limits and presence are shared through PostgreSQL
(docs/operating/processes.md); with SQLite only one process may write, so more than one worker is
refused.

Signals to the parent:
- SIGTERM / SIGINT: every worker gets SIGTERM (graceful: stops accepting, lets requests
  finish) and the parent exits when they have.
- SIGHUP: rolling restart. Pending migrations are applied (by a fresh `volthub migrate`, so
  upgraded code brings its own), then one worker at a time: a new worker starts, and once
  it reports ready the old one gets SIGTERM. The socket never closes, so no connection
  attempt is refused; Events API clients of the old worker reconnect (SSE with
  Last-Event-ID, Socket.IO by its client) to the others.
A worker that dies on its own is started again after a back-off.

Metrics: the workers share a PROMETHEUS_MULTIPROC_DIR (volthub.metrics), so a scrape that
any of them answers shows the whole server; a worker that exits has its live gauges dropped.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from types import FrameType
from typing import NoReturn, Protocol

from volthub import logs, version
from volthub.config import Settings, events_ws_url

log = logging.getLogger("volthub.workers")
READY_FD_ENV = "VOLTHUB_READY_FD"  # volthub.http.cluster.report_ready writes to it
READY_TIMEOUT = 120.0
# prometheus_client picks its multiprocess mode when it is first imported, from this variable.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="run N server processes on the one port (PostgreSQL only); SIGHUP restarts them one by one",
    )
    parser.add_argument("--listen-fd", type=int, default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if settings.database.url.startswith("sqlite"):
        print("error: --workers needs PostgreSQL ([database] url); SQLite serves one process", file=sys.stderr)
        return 2
    metrics_dir, own_dir = _metrics_dir()  # before anything imports prometheus_client
    try:
        if _migrate_here(settings) != 0:
            return 1
        listener = _bind(settings)
        _preload()
        parent = Parent(args, listener, args.workers, settings.server.shutdown_timeout)
        log.info("%s", logs.startup_summary(settings, version(), workers=args.workers))
        code = parent.run()
        log.info("volthub stopped (all workers have exited)")
        return code
    finally:
        if own_dir:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _metrics_dir() -> tuple[str, bool]:
    """The directory where the workers keep their metrics, so one scrape of any worker
    shows the whole server: the operator's PROMETHEUS_MULTIPROC_DIR (emptied of an earlier
    run's files), else a fresh one removed on exit. The workers inherit it."""
    given = os.environ.get(MULTIPROC_ENV)
    directory = given or tempfile.mkdtemp(prefix="volthub-metrics-")
    os.environ[MULTIPROC_ENV] = directory
    from volthub import metrics

    metrics.prepare_multiprocess_dir(directory)
    return directory, not given


def _preload() -> None:
    """Import what a worker runs, once, in the parent: the forked workers share it. Frozen
    out of the collector, so a child's collections neither walk it nor copy its pages."""
    for module in ("hypercorn.trio", "volthub.http.app", "volthub.http.serving"):
        importlib.import_module(module)
    gc.freeze()


def _child_args(args: argparse.Namespace, command: str) -> list[str]:
    """`volthub COMMAND` with the parent's configuration, without the interpreter (see
    `_interpreter`): a forked worker runs it in the parent's interpreter."""
    argv = [command]
    if args.config:
        argv += ["--config", args.config]
    if args.database:
        argv += ["--database", args.database]
    if command == "serve" and getattr(args, "gateway_port", None) is not None:
        argv += ["--gateway-port", str(args.gateway_port)]  # each worker binds it (SO_REUSEPORT)
    return argv


def _migrate(args: argparse.Namespace) -> int:
    """In a child process, so a rolling restart applies the migrations of the new code.
    What it prints becomes log lines of the parent (one format for the whole run)."""
    result = subprocess.run(_interpreter() + _child_args(args, "migrate"), stdout=subprocess.PIPE, text=True)
    for line in result.stdout.splitlines():
        log.info("migrations: %s", line)
    return result.returncode


def _interpreter() -> list[str]:
    """What starts a fresh `volthub` process."""
    return [sys.executable, "-m", "volthub"]


def _migrate_here(settings: Settings) -> int:
    """At start, in this process: the code that runs is the code the workers will run, and
    a child's interpreter start would add to every start (a restart's clients wait on it)."""
    from volthub.cli import apply_migrations, migrations_report
    from volthub.cli_startup import StartupError

    try:
        applied = apply_migrations(settings)
    except StartupError:  # one line for the operator, printed by volthub.cli.main
        raise
    except Exception:
        log.exception("migrations failed")
        return 1
    for line in migrations_report(applied):
        log.info("migrations: %s", line)
    return 0


def _bind(settings: Settings) -> socket.socket:
    host, port = settings.server.host, settings.server.port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host.strip("[]"), port))
    listener.listen(settings.server.listen_backlog)
    listener.set_inheritable(True)
    log.info(
        "volthub workers listening on http://%s:%d (REST, SSE); Events API Socket.IO clients connect to %s/ws/events",
        host,
        listener.getsockname()[1],
        events_ws_url(settings),
    )
    return listener


class WorkerProcess(Protocol):
    """What the parent needs of a worker's process: a `subprocess.Popen` or a `Forked`."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...


@dataclass
class Forked:
    """A worker forked from the parent, watched like a `subprocess.Popen`."""

    pid: int
    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            time.sleep(0.05)
        return code

    def terminate(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def _run_forked(argv: list[str], env: dict[str, str], parents_fd: int) -> NoReturn:
    """The forked worker: `volthub serve` with its own arguments and environment, as a
    fresh interpreter would run it (`parents_fd`, the parent's end of the readiness pipe,
    closed). It never returns into the parent's code (whose `finally` blocks would remove
    the shared metrics directory), whatever fails."""
    code = 1
    try:
        os.close(parents_fd)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        os.environ.update(env)
        from volthub.cli import main

        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@dataclass
class Worker:
    process: WorkerProcess
    ready_fd: int  # read end of the readiness pipe
    index: int = 0  # 1 to N: names the worker in its log lines
    ready: bool = False


@dataclass
class Parent:
    args: argparse.Namespace
    listener: socket.socket
    count: int
    graceful_timeout: float
    workers: list[Worker] = field(default_factory=list)
    _stopping: bool = False
    _roll: bool = False

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)
        try:
            for index in range(1, self.count + 1):
                self.workers.append(self._start(index, fork=True))
            if not all(self._wait_ready(w) for w in self.workers):
                log.error("a worker did not start; stopping")
                return 1
            log.info("%d workers serving (pids %s)", self.count, " ".join(str(w.process.pid) for w in self.workers))
            failures = 0
            while not self._stopping:
                if self._roll:
                    self._roll = False
                    self._rolling_restart()
                for index, worker in enumerate(self.workers):
                    if worker.process.poll() is not None and not self._stopping:
                        failures += 1
                        _worker_exited(worker.process.pid)
                        log.warning(
                            "worker %d (pid %d) exited with status %s; starting a new one",
                            worker.index,
                            worker.process.pid,
                            worker.process.returncode,
                        )
                        time.sleep(min(10.0, 0.5 * failures))
                        self.workers[index] = self._start(worker.index)
                        if self._wait_ready(self.workers[index]):
                            failures = 0
                time.sleep(0.2)
            return 0
        finally:
            self._stop_all()
            self.listener.close()

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        log.info("received %s: stopping the workers", signal.Signals(signum).name)
        self._stopping = True

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        log.info("received SIGHUP: rolling restart")
        self._roll = True

    def _start(self, index: int, fork: bool = False) -> Worker:
        """A worker serving the listening socket: forked from this process (which imported
        the server's code) or a fresh interpreter (which imports the code on disk)."""
        read_fd, write_fd = os.pipe()
        fd = self.listener.fileno()
        env = {
            "VOLTHUB_DATABASE__MIGRATE_ON_START": "false",
            "VOLTHUB_EVENTS__GATEWAY_REUSE_PORT": "true",  # every worker binds the gateway port
            READY_FD_ENV: str(write_fd),
            logs.WORKER_ENV: str(index),
        }
        argv = _child_args(self.args, "serve") + ["--listen-fd", str(fd)]
        process: WorkerProcess
        if fork:
            pid = os.fork()
            if pid == 0:
                _run_forked(argv, env, read_fd)
            process = Forked(pid)
        else:
            process = subprocess.Popen(_interpreter() + argv, env={**os.environ, **env}, pass_fds=(fd, write_fd))
        os.close(write_fd)
        return Worker(process, read_fd, index)

    def _wait_ready(self, worker: Worker) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT
        while not worker.ready and time.monotonic() < deadline and not self._stopping:
            readable, _, _ = select.select([worker.ready_fd], [], [], 0.5)
            if readable:
                worker.ready = os.read(worker.ready_fd, 1) == b"1"
                if not worker.ready:  # end of file: the worker exited before it was ready
                    break
            elif worker.process.poll() is not None:
                break
        os.close(worker.ready_fd)
        worker.ready_fd = -1
        return worker.ready

    def _rolling_restart(self) -> None:
        if _migrate(self.args) != 0:
            log.error("migrations failed: the running workers stay")
            return
        for index, old in enumerate(list(self.workers)):
            if self._stopping:
                return
            new = self._start(old.index)
            if not self._wait_ready(new):
                log.error("a new worker did not start: the old ones stay")
                self._terminate(new)
                return
            self.workers[index] = new
            self._terminate(old)
        log.info("rolling restart done (pids %s)", " ".join(str(w.process.pid) for w in self.workers))

    def _terminate(self, worker: Worker) -> None:
        if worker.process.poll() is None:
            worker.process.terminate()
        try:
            worker.process.wait(self.graceful_timeout + 15)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()
        _worker_exited(worker.process.pid)

    def _stop_all(self) -> None:
        for worker in self.workers:
            if worker.process.poll() is None:
                worker.process.terminate()
        for worker in self.workers:
            self._terminate(worker)
            if worker.ready_fd >= 0:
                os.close(worker.ready_fd)


def _worker_exited(pid: int) -> None:
    from volthub import metrics

    metrics.worker_exited(pid)
