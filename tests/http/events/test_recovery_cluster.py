"""Connection state recovery across processes: the official socket.io-client drops from one
process and reconnects to another (as behind a load balancer, or after its process was
SIGKILLed), on both brokers, and gets exactly what it missed."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import httpx
import orjson
import psycopg
import pytest
import trio

from tests.conftest import LiveServer, RegisteredUser, make_settings, register_live, serve_app
from tests.js_client import JS_DIR, node_with_official_client
from tests.redis_support import Broker, broker

__all__ = ["broker"]  # fixture

# Small, so that "too far behind" is a few messages away.
RESUME_BUFFER = 4
WITHIN = 10.0


def chat_path(channel_id: str) -> str:
    return f"/api/integrations/oauth/chat/channels/{channel_id}/messages"


class DrivenClient:
    """tests/js/recovery_driven.mjs: commands in, one JSON line per happening out."""

    def __init__(self, process: trio.Process) -> None:
        self._process = process
        self._buffer = b""

    async def command(self, line: str) -> None:
        assert self._process.stdin is not None
        await self._process.stdin.send_all(line.encode() + b"\n")

    async def next(self, *types: str) -> dict[str, Any]:
        """The next line of one of `types` (others are skipped)."""
        assert self._process.stdout is not None
        with trio.fail_after(WITHIN):
            while True:
                while b"\n" not in self._buffer:
                    chunk = await self._process.stdout.receive_some()
                    if not chunk:
                        raise AssertionError("the client ended")
                    self._buffer += chunk
                line, _, self._buffer = self._buffer.partition(b"\n")
                said = orjson.loads(line)
                if said["type"] in types:
                    return said

    async def events(self, count: int) -> list[dict[str, Any]]:
        return [await self.next("event") for _ in range(count)]

    async def drop(self) -> None:
        await self.command("drop")
        assert (await self.next("disconnect"))["reason"] == "forced close"  # engine.close(), as the client names it

    async def connect(self, url: str, token: str = "") -> dict[str, Any]:
        await self.command(f"connect {url} {token}".strip())
        return await self.next("connect", "connect_error")


async def start_client(nursery: trio.Nursery, url: str, token: str) -> DrivenClient:
    node = node_with_official_client()
    process: trio.Process = await nursery.start(
        lambda task_status: trio.run_process(
            [node, "recovery_driven.mjs", url, token],
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            check=False,
            task_status=task_status,
        )
    )
    return DrivenClient(process)


async def send_chat(base_url: str, owner: RegisteredUser, text: str) -> str:
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        sent = await http.post(chat_path(owner.id), json={"message": text}, headers=owner.headers)
    assert sent.status_code == 200, sent.text
    return str(sent.json()["messageId"])


def message_ids(events: list[dict[str, Any]]) -> list[str]:
    assert all(e["event"] == "chat.message" for e in events), events
    return [e["data"]["messageId"] for e in events]


def cluster_settings(postgres_url: str, broker: Broker) -> Any:
    """An app of the cluster: events through `broker`, a small resume buffer, no rate limits."""
    return make_settings(
        postgres_url,
        events={"resume_buffer_size": RESUME_BUFFER},
        cluster=dict(broker.section),
        ratelimit={"enabled": False},
    )


@pytest.fixture
async def two_apps(postgres_url: str, broker: Broker, nursery: trio.Nursery) -> AsyncIterator[list[LiveServer]]:
    """Two apps on one PostgreSQL database, events between them through `broker`."""
    settings = cluster_settings(postgres_url, broker)
    stop = trio.Event()
    yield [await serve_app(nursery, settings, stop), await serve_app(nursery, settings, stop)]
    stop.set()


async def test_a_client_recovers_on_another_process_exactly_once(
    two_apps: list[LiveServer], nursery: trio.Nursery
) -> None:
    a, b = two_apps
    owner = await register_live(a.url)
    intruder = await register_live(a.url)
    client = await start_client(nursery, a.events_url, owner.token)
    first = await client.next("connect")
    assert first["recovered"] is False
    sent = await send_chat(a.url, owner, "before the drop")
    assert message_ids(await client.events(1)) == [sent]

    # The connection is cut; three messages go out through the other process meanwhile.
    await client.drop()
    missed = [await send_chat(b.url, owner, f"missed {n}") for n in range(3)]
    again = await client.connect(b.events_url)
    assert again == {"type": "connect", "id": first["id"], "recovered": True}
    assert message_ids(await client.events(3)) == missed  # exactly those, in order
    later = await send_chat(a.url, owner, "after")
    assert message_ids(await client.events(1)) == [later]  # live again, no repeat before it

    # Another user's token with the pid recovers nothing, and takes nothing from the owner.
    await client.drop()
    missed = [await send_chat(a.url, owner, "missed again")]
    stranger = await client.connect(a.events_url, intruder.token)
    assert stranger["recovered"] is False and stranger["id"] != first["id"]
    await client.drop()
    await client.command("restore")
    back = await client.connect(b.events_url)
    assert back == {"type": "connect", "id": first["id"], "recovered": True}
    assert message_ids(await client.events(1)) == missed

    # Too far behind for the resume source: told it was not recovered.
    await client.drop()
    for n in range(RESUME_BUFFER + 2):
        await send_chat(a.url, owner, f"while away {n}")
    late = await client.connect(b.events_url)
    assert late["recovered"] is False and late["id"] != first["id"]
    await client.command("quit")


async def state_written(postgres_url: str, broker: Broker) -> None:
    """Until a connection state is in the shared store (it is written just after the
    connect, from a queue)."""

    def count() -> int:
        if broker.name == "redis":
            done = subprocess.run(
                ["redis-cli", "-u", broker.section["redis_url"], "--scan", "--pattern", "volthub:recovery:*"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
            return len(done.stdout.split())
        with psycopg.connect(postgres_url) as connection:
            row = connection.execute("SELECT count(*) FROM recovery_states").fetchone()
            return int(row[0]) if row else 0

    with trio.fail_after(WITHIN):
        while not await trio.to_thread.run_sync(count):
            await trio.sleep(0.05)


class DoomedSetup(NamedTuple):
    doomed: Any  # the `volthub serve` process the test kills or stops
    survivor: LiveServer  # in this process: cheaper to start
    owner: RegisteredUser
    client: DrivenClient
    connected: dict[str, Any]  # the client's first connect


async def client_on_a_doomed_process(
    postgres_url: str, server_process: Any, broker: Broker, nursery: trio.Nursery, stop: trio.Event
) -> DoomedSetup:
    """A `volthub serve` process and a survivor on one database, and the owner's client on
    the first, having seen one message there, its connection state stored."""
    env = {
        "VOLTHUB_RATELIMIT__ENABLED": "false",
        "VOLTHUB_EVENTS__RESUME_BUFFER_SIZE": str(RESUME_BUFFER),
        **broker.env,
    }
    doomed = await trio.to_thread.run_sync(server_process, postgres_url, env)
    survivor = await serve_app(nursery, cluster_settings(postgres_url, broker), stop)
    owner = await register_live(doomed.url)
    client = await start_client(nursery, doomed.events_url, owner.token)
    connected = await client.next("connect")
    sent = await send_chat(doomed.url, owner, "before it goes")
    assert message_ids(await client.events(1)) == [sent]
    await state_written(postgres_url, broker)
    return DoomedSetup(doomed, survivor, owner, client, connected)


@pytest.mark.slow
async def test_a_client_of_a_killed_process_recovers_on_another(
    postgres_url: str, server_process: Any, broker: Broker, nursery: trio.Nursery
) -> None:
    """A `volthub serve` process is SIGKILLed, which leaves it no chance to write anything
    at the drop: the state written when the connection joined, and the client's offset,
    are enough for another process."""
    stop = trio.Event()
    a, b, owner, client, first = await client_on_a_doomed_process(postgres_url, server_process, broker, nursery, stop)

    a.kill()  # SIGKILL
    assert (await client.next("disconnect"))["reason"] == "transport close"
    missed = [await send_chat(b.url, owner, f"missed {n}") for n in range(3)]
    again = await client.connect(b.events_url)
    assert again == {"type": "connect", "id": first["id"], "recovered": True}
    assert message_ids(await client.events(3)) == missed
    later = await send_chat(b.url, owner, "after")
    assert message_ids(await client.events(1)) == [later]
    await client.command("quit")
    stop.set()


def stored_states(postgres_url: str, broker: Broker) -> list[tuple[bool, dict[str, Any]]]:
    """Each kept state: whether it is still a live one (PostgreSQL; Redis keeps no such
    flag: False), and the state."""
    if broker.name == "redis":
        url = broker.section["redis_url"]
        keys = subprocess.run(
            ["redis-cli", "-u", url, "--scan", "--pattern", "volthub:recovery:*"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.split()
        values = [
            subprocess.run(["redis-cli", "-u", url, "GET", key], capture_output=True, text=True, timeout=10).stdout
            for key in keys
        ]
        return [(False, orjson.loads(value.partition("\n")[2])) for value in values]
    with psycopg.connect(postgres_url) as connection:
        rows = connection.execute("SELECT live, state FROM recovery_states").fetchall()
    return [(bool(live), orjson.loads(state)) for live, state in rows]


@pytest.mark.slow
async def test_a_client_of_a_stopped_process_recovers_on_another_from_its_live_state(
    postgres_url: str, server_process: Any, broker: Broker, nursery: trio.Nursery
) -> None:
    """SIGTERM: a connection that follows one channel gets no write of its own at the
    shutdown; the state written when it joined stands, retired with the process's others,
    and with the client's offset it recovers on another process."""
    stop = trio.Event()
    a, b, owner, client, first = await client_on_a_doomed_process(postgres_url, server_process, broker, nursery, stop)

    assert await trio.to_thread.run_sync(a.terminate) == 0  # SIGTERM
    assert (await client.next("disconnect"))["reason"] == "transport close"
    states = await trio.to_thread.run_sync(stored_states, postgres_url, broker)
    assert [(live, state["final"], state["sid"]) for live, state in states] == [(False, False, first["id"])]
    missed = [await send_chat(b.url, owner, f"missed {n}") for n in range(2)]
    again = await client.connect(b.events_url)
    assert again == {"type": "connect", "id": first["id"], "recovered": True}
    assert message_ids(await client.events(2)) == missed
    await client.command("quit")
    stop.set()
