"""Real Redis servers for the broker tests: Debian's `redis-server`, started on free loopback
ports without persistence (plain, or TLS only with a throw-away CA), and a three-node Redis
Cluster made with `redis-cli --cluster`."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from volthub.loadtest.servers import free_port

START_WITHIN = 10.0


def _need_redis() -> str:
    found = shutil.which("redis-server")
    if found is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server and redis-cli are not installed (Debian package redis-server)")
    return found


class RedisServer:
    """One redis-server process; `stop()` kills it (SIGKILL), `start()` brings it back on
    the same port, empty (no persistence: a broker that lost everything)."""

    def __init__(self, directory: Path, *, cluster: bool = False, tls: TlsFiles | None = None) -> None:
        self.port = free_port()
        while cluster and self.port + 10_000 > 65_535:  # a cluster node also listens on port + 10000
            self.port = free_port()
        self.directory = directory / f"redis-{self.port}"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cluster = cluster
        self.tls = tls  # TLS only: the plain port is off
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}"

    @property
    def node(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> RedisServer:
        command = [_need_redis(), "--port", str(self.port)]
        if self.tls is not None:
            command = [_need_redis(), "--port", "0", "--tls-port", str(self.port)]
            command += ["--tls-cert-file", str(self.tls.cert), "--tls-key-file", str(self.tls.key)]
            command += ["--tls-ca-cert-file", str(self.tls.ca), "--tls-auth-clients", "no"]
        command += [
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
        ]
        if self.cluster:
            command += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_WITHIN
        while self.cli("PING") != "PONG":
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.05)
        return self

    def cli(self, *args: str) -> str:
        done = subprocess.run(
            ["redis-cli", "-p", str(self.port), *self._cli_tls(), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return done.stdout.strip()

    def _cli_tls(self) -> list[str]:
        return [] if self.tls is None else ["--tls", "--cacert", str(self.tls.ca)]

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
        self._process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the throw-away CA's certificate (what a client trusts)
    cert: Path  # the server's certificate, for 127.0.0.1 and localhost
    key: Path


def make_tls_files(directory: Path) -> TlsFiles:
    """A CA made for one test, and a server certificate it signed."""
    import trustme

    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(directory / "redis-ca.pem", directory / "redis-cert.pem", directory / "redis-key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    leaf.cert_chain_pems[0].write_to_path(str(files.cert))
    leaf.private_key_pem.write_to_path(str(files.key))
    return files


@pytest.fixture
def redis_tls_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server that speaks TLS only (`rediss://`), its certificate signed by a CA
    made for the test (`server.tls.ca`)."""
    server = RedisServer(tmp_path, tls=make_tls_files(tmp_path)).start()
    yield server
    server.stop()


@pytest.fixture
def redis_cluster(tmp_path: Path) -> Iterator[list[RedisServer]]:
    """Three primaries, no replicas: the slots split in three."""
    nodes = [RedisServer(tmp_path, cluster=True).start() for _ in range(3)]
    try:
        subprocess.run(
            ["redis-cli", "--cluster", "create", *(node.node for node in nodes), "--cluster-replicas", "0"]
            + ["--cluster-yes"],
            capture_output=True,
            timeout=30,
            check=True,
        )
        deadline = time.monotonic() + START_WITHIN
        while any("cluster_state:ok" not in node.cli("CLUSTER", "INFO") for node in nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not become ready")
            time.sleep(0.1)
        yield nodes
    finally:
        for node in nodes:
            node.stop()


@dataclass(frozen=True)
class Broker:
    """What carries events between processes in a scale-out test: its name, the `[cluster]`
    settings and the environment of a `volthub serve` process that choose it."""

    name: str
    section: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        return {f"VOLTHUB_CLUSTER__{key.upper()}": str(value) for key, value in self.section.items()}


@pytest.fixture(params=["postgres", "redis"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Broker]:
    """Runs a scale-out test once per broker: PostgreSQL's LISTEN/NOTIFY, and a real
    redis-server started for the test."""
    if request.param == "postgres":
        yield Broker("postgres", {"broker": "postgres"})
        return
    server = RedisServer(tmp_path).start()
    try:
        yield Broker("redis", {"broker": "redis", "redis_url": server.url})
    finally:
        server.stop()
