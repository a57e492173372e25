"""Deliveries end to end: outbox → dispatcher → HTTPS receiver (trustme certificate on
Hypercorn) under MockClock, so the retry schedule runs in virtual time.

The receiver verifies every delivery with `volthub.protocol.webhooks.verify` against the webhook's
secret, on the same (virtual) clock as the server.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from trio.testing import MockClock

from tests.conftest import RegisteredUser as Account
from tests.conftest import insert_app, make_settings, register
from tests.event_payloads import stand_in
from tests.services.webhooks.support import FakeResolver, WebhookReceiver, start_receiver
from volthub.hub.clock import TrioClock, to_ms

SCHEDULE_OFFSETS_MS = [0, 60_000, 360_000, 2_160_000, 9_360_000]
# Services that wake on their own every few virtual minutes (watch-time earning every 300 s,
# the ingest silence sweep every 1,200 s) and that no test here looks at. Each wake costs an
# autojump, i.e. `autojump_threshold` of real time: over the schedule's 2.6 virtual hours
# and the disabled period after it they made the schedule test ~4x slower.
QUIET_TIMERS: dict[str, dict[str, Any]] = {
    "channel_points": {"points_per_interval": 0},
    "ingest": {"silence_timeout_seconds": 0},
    # The role-expiry service still fires each grant at its time; only its look for grants
    # written by other processes (every 60 s by default) would cost an autojump per wake.
    "channel_roles": {"poll_seconds": 86_400.0},
}


@pytest.fixture
def io_clock() -> MockClock:
    """pytest-trio runs a test under a Clock only when the test itself takes it.

    Not autojump 0: the clock must not jump while a task waits on a database thread or a
    socket."""
    return MockClock(autojump_threshold=0.2)


@dataclass
class Env:
    app: Any
    client: Any
    clock: TrioClock
    receiver: WebhookReceiver
    owner: Account
    fan: Account
    client_id: str

    @property
    def base(self) -> str:
        return f"/api/developer/apps/{self.client_id}/webhooks"

    async def create(self, events: list[str], url: str | None = None) -> dict[str, Any]:
        body = {"url": url or self.receiver.url(), "events": events}
        response = await self.client.post(self.base, json=body, headers=self.owner.headers)
        assert response.status_code == 201, await response.get_data(as_text=True)
        created = await response.get_json()
        self.receiver.secret = created["secret"]
        return created

    async def get(self, path: str, user: Account | None = None) -> Any:
        response = await self.client.get(path, headers=(user or self.owner).headers)
        assert response.status_code == 200, await response.get_data(as_text=True)
        return await response.get_json()

    async def patch(self, webhook_id: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.client.patch(f"{self.base}/{webhook_id}", json=body, headers=self.owner.headers)
        assert response.status_code == 200, await response.get_data(as_text=True)
        return await response.get_json()

    async def follow(self, follower: Account | None = None) -> None:
        follower = follower or self.fan
        response = await self.client.post(f"/api/users/follow/{self.owner.id}", headers=follower.headers)
        assert response.status_code == 200
        await self.client.delete(f"/api/users/follow/{self.owner.id}", headers=follower.headers)

    @property
    def dispatcher(self) -> Any:
        return self.app.extensions["volthub"].services.webhooks


async def make_env(
    nursery: trio.Nursery, tls: tuple[Path, Path, Path], database_url: str, **sections: dict[str, Any]
) -> AsyncIterator[Env]:
    """An app whose webhooks reach the HTTPS receiver; `sections` are the settings sections
    it runs with besides `[webhooks]` (by default QUIET_TIMERS)."""
    from volthub.http.app import create_app

    clock = TrioClock()
    receiver, stop = await start_receiver(nursery, tls, now=clock.now)
    webhooks = {"allow_private_targets": True, "ca_file": str(tls[0]), "poll_seconds": 86_400.0}
    app = create_app(make_settings(database_url, webhooks=webhooks, **(sections or QUIET_TIMERS)), clock=clock)
    try:
        async with _started(app):
            client = app.test_client()
            owner, fan = await register(client), await register(client)
            client_id = await insert_app(app.extensions["volthub"].db, owner.id)
            yield Env(app, client, clock, receiver, owner, fan, client_id)
    finally:
        stop.set()


@asynccontextmanager
async def _started(app: Any) -> AsyncIterator[None]:
    """`app.test_app()`, with the MockClock held still while the app starts and stops.

    Migrating a fresh PostgreSQL schema can keep every task waiting on a database thread
    for longer than the autojump threshold; a jump then runs out the test app's 60 s
    startup timeout, after which Quart-Trio's TrioTestApp leaves its lifespan task behind
    and the Trio run fails with TrioInternalError."""
    clock = trio.lowlevel.current_clock()
    threshold = clock.autojump_threshold if isinstance(clock, MockClock) else None

    def hold(still: bool) -> None:
        if isinstance(clock, MockClock) and threshold is not None:
            clock.autojump_threshold = math.inf if still else threshold

    hold(True)
    try:
        async with app.test_app():
            hold(False)
            try:
                yield
            finally:
                hold(True)
    finally:
        hold(False)


@pytest.fixture
async def env(io_clock: MockClock, nursery: trio.Nursery, receiver_tls: Any, sqlite_url: str) -> AsyncIterator[Env]:
    async for made in make_env(nursery, receiver_tls, sqlite_url):
        yield made


def event_ms(body: bytes) -> int:
    stamp = orjson.loads(body)["timestamp"]
    return to_ms(datetime.fromisoformat(stamp).timestamp())


def offsets(env: Env) -> list[int]:
    start = event_ms(env.receiver.received[0].body)
    return [int(d.headers["x-service-timestamp"]) - start for d in env.receiver.received]


async def arrivals(env: Env, count: int, within: float = 60) -> None:
    """Wait (virtual seconds) for `count` deliveries, then for the attempt to be recorded:
    the clock jumps only once every task is idle, database threads included."""
    with trio.fail_after(within):
        await env.receiver.wait_for(count)
    await trio.sleep(1)


def assert_all_verified(env: Env) -> None:
    problems = [d.problem for d in env.receiver.received if not d.verified]
    assert not problems, problems


@pytest.fixture
async def any_backend_env(
    io_clock: MockClock, nursery: trio.Nursery, receiver_tls: Any, database_url: str
) -> AsyncIterator[Env]:
    async for made in make_env(nursery, receiver_tls, database_url):
        yield made


async def test_failing_receiver_follows_the_schedule_then_disable_and_reenable(
    any_backend_env: Env, io_clock: MockClock
) -> None:
    env = any_backend_env
    env.receiver.respond = lambda delivery: (500, {})
    hook = await env.create(["channel.follow"])
    await env.follow()
    await arrivals(env, 5, within=20_000)
    assert_all_verified(env)
    assert offsets(env) == SCHEDULE_OFFSETS_MS
    # Same event, same body on every retry; a fresh signature timestamp each time.
    assert len({d.body for d in env.receiver.received}) == 1
    assert len({d.headers["webhook-id"] for d in env.receiver.received}) == 1
    state = await env.get(f"{env.base}/{hook['id']}")
    assert (state["status"], state["enabled"], state["disabledReason"]) == ("disabled", False, "failures")
    assert state["consecutiveFailures"] == 5
    log = await env.get(f"{env.base}/{hook['id']}/deliveries")
    [delivery] = log["items"]
    assert delivery["status"] == "failed" and delivery["attemptCount"] == 5
    assert [a["statusCode"] for a in delivery["attempts"]] == [500] * 5
    assert all(a["outcome"] == "failure" and a["error"] == "HTTP 500" for a in delivery["attempts"])
    notes = await env.get("/api/notifications")
    # Newest first: the disable, then the notification of the follow that caused the events.
    assert [n["type"] for n in notes["items"]] == ["webhook.disabled", "follow.new"]
    assert notes["items"][0]["data"]["webhookId"] == hook["id"]
    assert notes["items"][1]["data"]["userId"] == env.fan.id
    assert (await env.get("/api/notifications/unread-count")) == {"count": 2}

    # Disabled: nothing more is attempted, and new events are not queued.
    await env.follow()
    await trio.sleep(20_000)
    assert len(env.receiver.received) == 5

    env.receiver.respond = lambda delivery: (200, {})
    enabled = await env.patch(hook["id"], {"enabled": True})
    assert (enabled["status"], enabled["consecutiveFailures"]) == ("enabled", 0)
    await env.follow()
    await arrivals(env, 6)
    assert_all_verified(env)
    assert orjson.loads(env.receiver.received[5].body)["event"] == "channel.follow"
    await trio.sleep(100)
    assert len(env.receiver.received) == 6  # the event of the disabled period was not queued
    assert (await env.get(f"{env.base}/{hook['id']}"))["consecutiveFailures"] == 0


async def test_retry_after_postpones_but_never_advances(env: Env, io_clock: MockClock) -> None:
    answers = iter([(429, {"Retry-After": "600"}), (503, {"Retry-After": "5"}), (204, {})])
    env.receiver.respond = lambda delivery: next(answers)
    hook = await env.create(["channel.follow"])
    await env.follow()
    await arrivals(env, 3, within=5_000)
    assert_all_verified(env)
    # 429 asked for 600 s (later than the 60 s gap); 503 asked for 5 s (sooner than 300 s).
    assert offsets(env) == [0, 600_000, 900_000]
    [delivery] = (await env.get(f"{env.base}/{hook['id']}/deliveries"))["items"]
    assert delivery["status"] == "succeeded"
    assert [a["statusCode"] for a in delivery["attempts"]] == [429, 503, 204]


async def test_410_disables_at_once_and_parked_deliveries_resume(env: Env, io_clock: MockClock) -> None:
    env.receiver.respond = lambda delivery: (410, {})
    hook = await env.create(["channel.follow"])
    await env.follow()
    await arrivals(env, 1)
    await trio.sleep(1_000)
    assert len(env.receiver.received) == 1
    state = await env.get(f"{env.base}/{hook['id']}")
    assert (state["status"], state["disabledReason"]) == ("disabled", "gone")
    [delivery] = (await env.get(f"{env.base}/{hook['id']}/deliveries"))["items"]
    assert delivery["status"] == "pending" and delivery["attempts"][0]["outcome"] == "gone"
    # The follow that caused the delivery notified the owner too, in the same millisecond.
    notes = (await env.get("/api/notifications"))["items"]
    assert sorted(n["type"] for n in notes) == ["follow.new", "webhook.disabled"]
    [disabled] = [n for n in notes if n["type"] == "webhook.disabled"]
    assert disabled["data"]["reason"] == "gone"

    env.receiver.respond = lambda delivery: (202, {})
    before = to_ms(env.clock.now())
    await env.patch(hook["id"], {"enabled": True})
    await arrivals(env, 2)
    assert_all_verified(env)
    assert int(env.receiver.received[1].headers["x-service-timestamp"]) - before < 1_000
    assert env.receiver.received[1].body == env.receiver.received[0].body
    [delivery] = (await env.get(f"{env.base}/{hook['id']}/deliveries"))["items"]
    assert delivery["status"] == "succeeded" and delivery["attemptCount"] == 2


async def test_owner_pause_parks_pending_retries(env: Env, io_clock: MockClock) -> None:
    answers = iter([(500, {}), (200, {})])
    env.receiver.respond = lambda delivery: next(answers)
    hook = await env.create(["channel.follow"])
    await env.follow()
    await arrivals(env, 1)
    await env.patch(hook["id"], {"enabled": False})
    await trio.sleep(600)  # the 60 s retry would have run by now
    assert len(env.receiver.received) == 1
    await env.patch(hook["id"], {"enabled": True})
    await arrivals(env, 2)
    [delivery] = (await env.get(f"{env.base}/{hook['id']}/deliveries"))["items"]
    assert delivery["status"] == "succeeded"


async def test_legacy_cheer_name_redelivery_and_secret_rotation(env: Env, io_clock: MockClock) -> None:
    hook = await env.create(["channel.cheer", "user.follow"])
    rt = env.app.extensions["volthub"]
    volts = stand_in("channel.volts", amount=100)
    await rt.publisher.write(lambda tx, emit: emit.emit(env.owner.id, "channel.volts", volts))
    await arrivals(env, 1)
    first = env.receiver.received[0]
    body = orjson.loads(first.body)
    assert (body["event"], body["type"], body["data"]) == ("channel.cheer", "channel.cheer", volts)
    assert first.headers["x-service-event"] == "channel.cheer"
    assert first.headers["webhook-id"] == body["id"]

    rotated = await env.client.post(f"{env.base}/{hook['id']}/rotate-secret", headers=env.owner.headers)
    env.receiver.secret = (await rotated.get_json())["secret"]
    [delivery] = (await env.get(f"{env.base}/{hook['id']}/deliveries"))["items"]
    response = await env.client.post(
        f"{env.base}/{hook['id']}/deliveries/{delivery['id']}/redeliver", headers=env.owner.headers
    )
    assert response.status_code == 202
    queued = await response.get_json()
    assert (queued["eventId"], queued["redeliveryOf"], queued["status"]) == (body["id"], delivery["id"], "pending")
    await arrivals(env, 2)
    assert_all_verified(env)  # the redelivery is signed with the new secret
    assert env.receiver.received[1].body == first.body
    assert env.receiver.received[1].headers["webhook-id"] == body["id"]


async def test_events_of_other_channels_and_sandbox_events_are_not_delivered(env: Env, io_clock: MockClock) -> None:
    await env.create(["channel.follow", "user.follow", "channel.volts"])
    rt = env.app.extensions["volthub"]
    other = await register(env.client)
    # other's channel gets a follow: not the app owner's channel.
    response = await env.client.post(f"/api/users/follow/{other.id}", headers=env.fan.headers)
    assert response.status_code == 200
    rt.publisher.publish_ephemeral(env.owner.id, "channel.volts", {"amount": 1})
    # The owner follows someone: user.follow on the owner's channel is delivered.
    await env.client.post(f"/api/users/follow/{other.id}", headers=env.owner.headers)
    await arrivals(env, 1)
    await trio.sleep(100)
    assert [orjson.loads(d.body)["event"] for d in env.receiver.received] == ["user.follow"]


async def test_tls_is_verified_for_the_name_while_connecting_to_the_checked_ip(env: Env, io_clock: MockClock) -> None:
    # ::1 first: the receiver listens on 127.0.0.1 only, so the attempt moves on to the
    # next checked address.
    env.dispatcher.deliverer.resolver = FakeResolver(
        {"localhost": ["::1", "127.0.0.1"], "elsewhere.example.net": ["127.0.0.1"]}
    )
    hook = await env.create(["channel.follow"], url=env.receiver.url("localhost"))
    await env.follow()
    await arrivals(env, 1)
    assert_all_verified(env)
    assert env.receiver.received[0].headers["host"] == f"localhost:{env.receiver.port}"
    state = await env.get(f"{env.base}/{hook['id']}/deliveries")
    assert state["items"][0]["status"] == "succeeded"

    # A name that resolves to the receiver but is not on its certificate: TLS refuses it.
    other = await env.create(["channel.follow"], url=env.receiver.url("elsewhere.example.net"))
    await env.follow()
    with trio.fail_after(60):
        while not (await env.get(f"{env.base}/{other['id']}/deliveries"))["items"]:
            await trio.sleep(1)
        while not (await env.get(f"{env.base}/{other['id']}/deliveries"))["items"][0]["attempts"]:
            await trio.sleep(1)
    attempt = (await env.get(f"{env.base}/{other['id']}/deliveries"))["items"][0]["attempts"][0]
    assert attempt["outcome"] == "failure" and attempt["statusCode"] is None
    assert "certificate" in attempt["error"].lower()


async def test_shutdown_mid_attempt_hands_the_claim_back(
    io_clock: MockClock, nursery: trio.Nursery, receiver_tls: Any, sqlite_url: str
) -> None:
    from volthub.persistence import open_database

    made = make_env(nursery, receiver_tls, sqlite_url)
    env = await made.__anext__()
    release = trio.Event()

    async def hang(delivery: Any) -> tuple[int, dict[str, str]]:
        await release.wait()
        return 200, {}

    env.receiver.respond = hang
    await env.create(["channel.follow"])
    await env.follow()
    await arrivals(env, 1)  # in flight: the 10 s timeout has not run out
    with pytest.raises(StopAsyncIteration):  # the app shuts down: after_serving cancels the dispatcher
        await made.__anext__()
    release.set()
    database = open_database(sqlite_url)
    await database.open()
    try:
        rows = await database.read(
            lambda tx: tx.execute("SELECT state, claimed_until, claim_token, attempt_count FROM webhook_deliveries")
        )
    finally:
        await database.close()
    assert rows == [{"state": "pending", "claimed_until": None, "claim_token": None, "attempt_count": 0}]
