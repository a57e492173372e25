"""Two `volthub serve` processes on one PostgreSQL database: events cross processes through
the broker (PostgreSQL's LISTEN/NOTIFY relay, or Redis), a webhook is delivered by one
process only, and an SSE client resumes on the other process."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import trio
from httpx_sse import ServerSentEvent, aconnect_sse

from tests.conftest import register_live
from tests.http.events.live import handshake, open_ws, receive
from tests.http.oauth.tokens import create_test_app
from tests.redis_support import Broker, RedisServer, broker
from tests.services.webhooks.support import start_receiver
from volthub.persistence import oauth as oauth_repo
from volthub.persistence import open_database

__all__ = ["broker"]  # fixture

STREAM = "/api/events/stream"
# Processes sharing one database see each other's events within a second.
WITHIN = 1.0


def chat_path(channel_id: str) -> str:
    return f"/api/integrations/oauth/chat/channels/{channel_id}/messages"


async def grant_chat_read(database_url: str, owner_id: str) -> str:
    """An app of `owner_id` holding chat:read on the owner's channel (chat.message webhooks
    need it); its client id."""
    database = open_database(database_url, 1)
    await database.open()
    client_id = f"app_{uuid.uuid4().hex[:12]}"

    def create(tx: Any) -> None:
        create_test_app(tx, client_id, owner_id, "cluster test app")
        oauth_repo.create_grant(
            tx,
            grant_id=str(uuid.uuid4()),
            user_id=owner_id,
            client_id=client_id,
            consented_scope="chat:read",
            held=frozenset({"chat:read"}),
            now_ms=1,
        )

    try:
        await database.write(create)
    finally:
        await database.close()
    return client_id


class SseReader:
    def __init__(self, events: AsyncIterator[ServerSentEvent]) -> None:
        self._events = events

    async def next_named(self, name: str) -> ServerSentEvent:
        async for sse in self._events:
            if sse.event == name:
                return sse
        raise AssertionError("the stream ended")


async def socket_event(ws: Any, name: str) -> Any:
    """The data of the next `name` emitted on a raw Socket.IO WebSocket (namespace "/")."""
    while True:
        frame = await receive(ws, skip_pings=True)
        if isinstance(frame, str) and frame.startswith("42"):
            event, *args = orjson.loads(frame[2:])
            if event == name:
                return args[0] if args else None


def cluster_env(receiver_tls: Any, broker_env: dict[str, str]) -> dict[str, str]:
    """The settings of both processes: webhooks polled often, to the local TLS receiver."""
    return {
        "VOLTHUB_RATELIMIT__ENABLED": "false",
        "VOLTHUB_WEBHOOKS__ALLOW_PRIVATE_TARGETS": "true",
        "VOLTHUB_WEBHOOKS__CA_FILE": str(receiver_tls[0]),
        "VOLTHUB_WEBHOOKS__POLL_SECONDS": "0.5",
        **broker_env,
    }


async def start_cluster(server_process: Any, postgres_url: str, env: dict[str, str]) -> tuple[Any, Any, Any, str]:
    """Two processes on one database, an owner registered through the first, and the client
    id of the owner's app holding chat:read."""
    first = await trio.to_thread.run_sync(server_process, postgres_url, env)
    second = await trio.to_thread.run_sync(server_process, postgres_url, env)
    owner = await register_live(first.url)
    return first, second, owner, await grant_chat_read(postgres_url, owner.id)


async def watch_chat(
    nursery: trio.Nursery, one: httpx.AsyncClient, second: Any, owner: Any, client_id: str, receiver: Any
) -> Any:
    """A chat.message webhook to `receiver` (created through `one`), and a Socket.IO client of
    the owner on the `second` process; that client's WebSocket."""
    created = await one.post(
        f"/api/developer/apps/{client_id}/webhooks",
        json={"url": receiver.url(), "events": ["chat.message"]},
        headers=owner.headers,
    )
    assert created.status_code == 201, created.text
    receiver.secret = created.json()["secret"]
    ws = await open_ws(nursery, second.events_url, "/ws/events/")
    handshake(await receive(ws))
    await ws.send_message("40" + orjson.dumps({"token": owner.token}).decode())
    assert (await socket_event(ws, "connected"))["authenticated"] is True
    return ws


@pytest.mark.slow
async def test_two_processes_share_events_webhooks_and_resume(
    postgres_url: str, server_process: Any, receiver_tls: Any, nursery: trio.Nursery, broker: Broker
) -> None:
    receiver, stop_receiver = await start_receiver(nursery, receiver_tls)
    env = cluster_env(receiver_tls, {"VOLTHUB_CLUSTER__PRESENCE_INTERVAL_SECONDS": "0.5", **broker.env})
    first, second, owner, client_id = await start_cluster(server_process, postgres_url, env)
    async with (
        httpx.AsyncClient(base_url=first.url, timeout=10) as one,
        httpx.AsyncClient(base_url=second.url, timeout=10) as two,
    ):
        # An SSE client and a Socket.IO client on the second process.
        ws = await watch_chat(nursery, one, second, owner, client_id, receiver)
        # Presence adds up every process: the first lists the viewer connected to the second.
        with trio.fail_after(10):
            while True:
                viewers = (await one.get(f"/api/chat/channels/{owner.id}/viewers")).json()
                if viewers["authenticatedCount"] == 1:
                    break
                await trio.sleep(0.1)  # real processes: the second writes its presence every 0.5 s
        assert [v["username"] for v in viewers["viewers"]] == [owner.username]
        async with aconnect_sse(two, "GET", STREAM, headers=owner.headers) as source:
            stream = SseReader(source.aiter_sse())
            with trio.fail_after(5):
                await stream.next_named("connected")

            # A chat message sent through the first process reaches both within a second.
            started = time.monotonic()
            sent = await one.post(chat_path(owner.id), json={"message": "across processes"}, headers=owner.headers)
            assert sent.status_code == 200, sent.text
            message_id = sent.json()["messageId"]
            with trio.fail_after(WITHIN):
                over_sse = await stream.next_named("chat.message")
            with trio.fail_after(max(0.01, WITHIN - (time.monotonic() - started))):
                over_socket = await socket_event(ws, "chat.message")
            assert orjson.loads(over_sse.data)["data"]["messageId"] == message_id
            assert over_socket["messageId"] == message_id
            first_id = over_sse.id
        await ws.aclose()

        # The webhook gets the message once: both processes' workers poll the same outbox.
        with trio.fail_after(15):
            await receiver.wait_for(1)
        await trio.sleep(2.5)  # real processes: several poll rounds of both dispatchers
        bodies = [orjson.loads(d.body) for d in receiver.received]
        assert [b["data"]["messageId"] for b in bodies] == [message_id]
        assert receiver.received[0].verified

        # Three more messages through the second process while the SSE client is away; it
        # reconnects to the first process with Last-Event-ID and misses nothing.
        later = []
        for n in range(3):
            response = await two.post(chat_path(owner.id), json={"message": f"later {n}"}, headers=owner.headers)
            assert response.status_code == 200, response.text
            later.append(response.json()["messageId"])
        resumed: list[ServerSentEvent] = []
        async with aconnect_sse(one, "GET", STREAM, headers={**owner.headers, "Last-Event-ID": first_id}) as source:
            with trio.fail_after(5):
                async for sse in source.aiter_sse():
                    resumed.append(sse)
                    if sum(1 for e in resumed if e.event == "chat.message") == len(later):
                        break
        names = [e.event for e in resumed]
        assert "missed" not in names
        replayed = [orjson.loads(e.data)["data"]["messageId"] for e in resumed if e.event == "chat.message"]
        assert replayed == later

        # An Engine.IO polling request that reaches a process other than the one holding its
        # session gets the protocol's "Session ID unknown" 400, on which the official
        # client reconnects with a new session (sticky sessions).
        handshake_response = await one.get(
            f"{first.events_url}/ws/events/", params={"EIO": "4", "transport": "polling"}
        )
        sid = orjson.loads(handshake_response.text[1:])["sid"]
        astray = await two.get(
            f"{second.events_url}/ws/events/", params={"EIO": "4", "transport": "polling", "sid": sid}
        )
        assert astray.status_code == 400
        assert astray.json() == {"code": 1, "message": "Session ID unknown"}
    stop_receiver.set()


@pytest.mark.slow
async def test_a_broker_killed_mid_run_loses_no_acknowledged_event(
    postgres_url: str, server_process: Any, receiver_tls: Any, nursery: trio.Nursery, tmp_path: Any
) -> None:
    """Redis is SIGKILLed while messages are being sent and comes back empty: every send is
    acknowledged, webhooks go on meanwhile, `/healthz` says the broker is down while
    `/livez` stays up, and the SSE and Socket.IO clients on the other process get exactly
    the acknowledged messages, in order, once."""
    redis = RedisServer(tmp_path).start()
    receiver, stop_receiver = await start_receiver(nursery, receiver_tls)
    env = cluster_env(receiver_tls, {"VOLTHUB_CLUSTER__BROKER": "redis", "VOLTHUB_CLUSTER__REDIS_URL": redis.url})
    try:
        first, second, owner, client_id = await start_cluster(server_process, postgres_url, env)
        async with (
            httpx.AsyncClient(base_url=first.url, timeout=10) as one,
            httpx.AsyncClient(base_url=second.url, timeout=10) as two,
        ):
            ws = await watch_chat(nursery, one, second, owner, client_id, receiver)
            acknowledged: list[str] = []

            async def send(count: int) -> None:
                for n in range(count):
                    sent = await one.post(chat_path(owner.id), json={"message": f"m{n}"}, headers=owner.headers)
                    assert sent.status_code == 200, sent.text
                    acknowledged.append(sent.json()["messageId"])

            async with aconnect_sse(two, "GET", STREAM, headers=owner.headers) as source:
                stream = SseReader(source.aiter_sse())
                with trio.fail_after(5):
                    await stream.next_named("connected")
                await send(2)
                redis.stop()  # SIGKILL, with the next sends in flight
                await send(4)
                with trio.fail_after(10):
                    while (await two.get("/healthz")).status_code != 503:
                        await trio.sleep(0.1)
                health = (await two.get("/healthz")).json()
                assert health["error"] == "broker_unavailable", health
                assert (await two.get("/livez")).status_code == 200
                with trio.fail_after(15):  # webhooks do not wait for the broker
                    await receiver.wait_for(len(acknowledged))
                redis.start()  # empty: no persistence
                await send(2)
                with trio.fail_after(15):
                    over_sse = [orjson.loads((await stream.next_named("chat.message")).data) for _ in acknowledged]
                    over_socket = [await socket_event(ws, "chat.message") for _ in acknowledged]
                assert [e["data"]["messageId"] for e in over_sse] == acknowledged
                assert [e["messageId"] for e in over_socket] == acknowledged
                with trio.fail_after(10):
                    while (await two.get("/healthz")).status_code != 200:
                        await trio.sleep(0.1)
            await ws.aclose()
            with trio.fail_after(15):
                await receiver.wait_for(len(acknowledged))
            assert sorted(orjson.loads(d.body)["data"]["messageId"] for d in receiver.received) == sorted(acknowledged)
    finally:
        redis.stop()
        stop_receiver.set()
