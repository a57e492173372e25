"""`GET /metrics`: a real server under load (chat, SSE, Socket.IO on the gateway and the
mount, a webhook delivery, a crashing background service) moves every metric family;
`promtool check metrics` accepts the scrape when Prometheus's tools are installed."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from typing import Any

import httpx
import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port, insert_app, make_settings, register, register_live, running_app, serve_app
from tests.http.events.live import open_ws, polling_open, receive
from tests.services.webhooks.support import start_receiver
from volthub.http.events.socketio import sse_wire
from volthub.hub.publisher import Event
from volthub.persistence import streams as streams_repo

WAIT = 10.0


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    found = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.append((sample.name, dict(sample.labels), float(sample.value)))
    return found


def value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    return sum(v for n, found, v in samples(text) if n == name and labels.items() <= found.items())


async def db_query_errors(client: Any, backend: str, kind: str) -> float:
    """`volthub_db_query_errors_total` of one backend and kind, scraped through a test client
    of the app (the counter is the process's: compare before and after)."""
    response = await client.get("/metrics", scope_base={"client": ("127.0.0.1", 5000)})
    assert response.status_code == 200
    text = (await response.get_data()).decode()
    return value(text, "volthub_db_query_errors_total", backend=backend, kind=kind)


async def scrape(http: httpx.AsyncClient) -> str:
    response = await http.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


class Stalled:
    """An Events API subscriber that never has room: the fan-out drops it as a slow consumer."""

    wire = sse_wire("both")

    def deliver(self, payload: Any) -> str | None:
        return None

    def overflow(self, reason: str) -> None:
        pass

    def note_lag(self, since: float) -> None:
        pass


def moved(before: str, after: str, checks: Iterable[tuple[str, dict[str, str]]]) -> list[str]:
    return [
        f"{name}{labels}: {value(before, name, **labels)} -> {value(after, name, **labels)}"
        for name, labels in checks
        if not value(after, name, **labels) > value(before, name, **labels)
    ]


@pytest.mark.slow
async def test_a_scrape_under_load_shows_every_family_move(
    database_url: str, receiver_tls: Any, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver, stop_receiver = await start_receiver(nursery, receiver_tls)
    receiver.respond = lambda delivery: (500, {})  # fails: retried in an hour, so it waits in the outbox
    settings = make_settings(
        database_url,
        events={"gateway_port": free_port()},
        webhooks={"allow_private_targets": True, "ca_file": str(receiver_tls[0]), "retry_delays": [0, 3600]},
    )
    stop = trio.Event()
    server = await serve_app(nursery, settings, stop)
    rt = server.app.extensions["volthub"]
    postgres = rt.db.dialect == "postgresql"
    async with httpx.AsyncClient(base_url=server.url, timeout=WAIT) as http:
        before = await scrape(http)
        owner = await register_live(server.url)
        fan = await register_live(server.url)
        client_id = await insert_app(rt.db, owner.id)
        hook = await http.post(
            f"/api/developer/apps/{client_id}/webhooks",
            json={"url": receiver.url(), "events": ["channel.follow"]},
            headers=owner.headers,
        )
        assert hook.status_code == 201, hook.text
        if postgres:
            await rt.bus.wait_connected()

        # Socket.IO on the mount and on the gateway (WebSocket), a polling session, an SSE stream.
        sockets = []
        for base in (server.url, server.events_url):
            ws = await open_ws(nursery, base, "/ws/events/")
            assert (await receive(ws)).startswith("0{")
            await ws.send_message('40{"token":"%s"}' % owner.token)
            assert (await receive(ws, skip_pings=True)).startswith("40{")
            sockets.append(ws)
        await polling_open(http, "/socket.io/")
        sse_events: list[str] = []

        async def read_sse(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            # No read timeout: the stream stays quiet between events (keep-alives every 15 s).
            quiet_ok = httpx.Timeout(10, read=None)
            async with http.stream("GET", "/api/events/stream", headers=owner.headers, timeout=quiet_ok) as stream:
                task_status.started()
                async for line in stream.aiter_lines():
                    if line.startswith("event: "):
                        sse_events.append(line[7:])

        reader = trio.CancelScope()

        async def sse_until_cancelled(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with reader:
                await read_sse(task_status=task_status)

        await nursery.start(sse_until_cancelled)
        during = await scrape(http)
        assert value(during, "volthub_events_connections", transport="websocket", path="mount") >= 1
        assert value(during, "volthub_events_connections", transport="websocket", path="gateway") >= 1
        assert value(during, "volthub_events_connections", transport="polling", path="mount") >= 1
        assert value(during, "volthub_events_connections", transport="sse", path="mount") >= 1

        # Chat (a channel actor), a follow (a webhook delivery), a slow consumer, a crash.
        for text in ("hello", "again"):
            sent = await http.post(
                f"/api/integrations/oauth/chat/channels/{owner.id}/messages",
                json={"message": text},
                headers=fan.headers,
            )
            assert sent.status_code in (200, 201), sent.text
        followed = await http.post(f"/api/users/follow/{owner.id}", headers=fan.headers)
        assert followed.status_code == 200, followed.text
        with trio.fail_after(WAIT):
            await receiver.wait_for(1)
            while sse_events.count("chat.message") < 2:
                await trio.sleep(0.05)  # real time: a live server and a real client
        for ws in sockets:
            with trio.fail_after(WAIT):
                while "chat.message" not in str(await receive(ws, skip_pings=True)):
                    pass
        rt.services.fanout.subscribe(Stalled(), owner.id, owner=True)
        rt.services.fanout.publish(Event("e-stalled", "chat.message", owner.id, {}, "2026-01-01T00:00:00.000Z"))

        calls = 0
        original = streams_repo.oldest_open_heartbeat

        def fail_once(tx: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("injected crash of the silence watcher")
            return original(tx)

        monkeypatch.setattr(streams_repo, "oldest_open_heartbeat", fail_once)
        rt.services.streams._went_live.set()  # wake the watcher: it reads, crashes, is restarted
        if postgres:  # the bus relay loses its LISTEN connection and reconnects
            backend = rt.bus.backend_pid
            await rt.db.write(lambda tx: tx.scalar("SELECT pg_terminate_backend(?)", (backend,)))

        checks = [
            ("volthub_http_requests_total", {"route": "/api/auth/register", "status": "201"}),
            ("volthub_http_request_duration_seconds_count", {"method": "POST"}),
            ("volthub_events_deliveries_total", {"transport": "websocket"}),
            ("volthub_events_deliveries_total", {"transport": "sse"}),
            ("volthub_events_slow_consumers_total", {}),
            ("volthub_events_published_total", {"event": "chat.message"}),
            ("volthub_events_published_total", {"event": "channel.follow"}),
            ("volthub_events_lag_seconds_count", {}),
            ("volthub_webhook_deliveries_total", {"outcome": "failure"}),
            ("volthub_actor_inbox_depth_count", {}),
            ("volthub_service_restarts_total", {"service": "ingest-silence"}),
            ("process_cpu_seconds_total", {}),
        ]
        if postgres:
            checks += [("volthub_bus_lag_seconds_count", {}), ("volthub_bus_reconnects_total", {})]
        with trio.move_on_after(3 * WAIT):  # generous: a loaded machine runs this too
            while moved(before, after := await scrape(http), checks):
                await trio.sleep(0.2)  # real time: the supervisor's back-off, the relay's reconnect
        assert not moved(before, after, checks), moved(before, after, checks)
        assert value(after, "volthub_actors_active") >= 1
        assert value(after, "volthub_webhook_outbox_pending") >= 1
        assert value(after, "volthub_webhook_outbox_oldest_age_seconds") > 0
        assert value(after, "volthub_db_pool_connections", state="idle") >= 1
        families = {family.name for family in text_string_to_metric_families(after)}
        for family in CONTRACT_FAMILIES:
            assert family in families, family
        # Route labels are templates: no user id ever becomes a label value.
        assert owner.id not in after and fan.id not in after
        await promtool_accepts(after)
        reader.cancel()
    stop.set()
    stop_receiver.set()


# The families dashboards and alerting rules are built on (names without the _total suffix,
# as the parser reports counter families).
CONTRACT_FAMILIES = [
    "volthub_http_requests",
    "volthub_http_request_duration_seconds",
    "volthub_events_connections",
    "volthub_events_deliveries",
    "volthub_events_slow_consumers",
    "volthub_events_published",
    "volthub_events_lag_seconds",
    "volthub_webhook_deliveries",
    "volthub_webhook_outbox_pending",
    "volthub_webhook_outbox_oldest_age_seconds",
    "volthub_actors_active",
    "volthub_actor_inbox_depth",
    "volthub_bus_lag_seconds",
    "volthub_bus_reconnects",
    "volthub_db_pool_connections",
    "volthub_db_query_errors",
    "volthub_service_restarts",
]


async def promtool_accepts(exposition: str) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        return  # the Debian `prometheus` package brings it (.ci/run installs it)
    result = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [promtool, "check", "metrics"], input=exposition.encode(), capture_output=True, timeout=60
        )
    )
    assert result.returncode == 0, (result.stdout + result.stderr).decode()


async def test_metrics_answer_only_allowed_addresses_and_can_be_off(sqlite_url: str) -> None:
    for metrics in ({"allow": ["10.0.0.0/8"]}, {"enabled": False}):
        async with running_app(make_settings(sqlite_url, metrics=metrics)) as (_, client):
            response = await client.get("/metrics", scope_base={"client": ("127.0.0.1", 5000)})
            assert response.status_code == 404
            body = await response.get_json()
            unknown = await (await client.get("/no-such-path")).get_json()
            assert body["error"] == unknown["error"] == "not_found"
            assert body["message"] == unknown["message"]
    async with running_app(make_settings(sqlite_url)) as (_, client):
        response = await client.get("/metrics", scope_base={"client": ("127.0.0.1", 5000)})
        assert response.status_code == 200
        assert b"# HELP volthub_http_requests_total" in await response.get_data()


async def test_db_query_errors_count_failed_transactions_and_not_control_flow(database_url: str) -> None:
    from volthub.persistence import IntegrityError

    async with running_app(make_settings(database_url)) as (application, client):
        database = application.extensions["volthub"].db
        backend = database.dialect
        kinds = ("unavailable", "storage", "constraint", "invalid_input", "other")
        before = {kind: await db_query_errors(client, backend, kind) for kind in kinds}
        user = await register(client)

        # Not errors: a guarded UPDATE that matched nothing, a repository's own exception.
        await database.write(lambda tx: tx.execute("UPDATE users SET bio = 'x' WHERE id = 'nobody'"))

        def not_found(tx: Any) -> None:
            raise LookupError("no such row")

        with pytest.raises(LookupError):
            await database.read(not_found)
        # A constraint recovered inside the transaction (a savepoint) is not one either.

        def recovered(tx: Any) -> None:
            try:
                with tx.savepoint():
                    tx.execute("INSERT INTO users SELECT * FROM users WHERE id = ?", (user.id,))
            except IntegrityError:
                pass

        await database.write(recovered)
        middle = {kind: await db_query_errors(client, backend, kind) for kind in kinds}
        assert middle == before

        # A constraint that reaches the caller and a statement the database rejects: one each.
        with pytest.raises(IntegrityError):
            await database.write(
                lambda tx: tx.execute("INSERT INTO users SELECT * FROM users WHERE id = ?", (user.id,))
            )
        with pytest.raises(Exception, match="(?i)syntax"):
            await database.read(lambda tx: tx.execute("SELEKT 1"))
        after = {kind: await db_query_errors(client, backend, kind) for kind in kinds}
        assert after == {**before, "constraint": before["constraint"] + 1, "other": before["other"] + 1}
