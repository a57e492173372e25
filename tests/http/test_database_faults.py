"""Database faults as a fault-injection run found them: terminated pooled PostgreSQL
connections, an unreachable PostgreSQL, SQLite on a full disk, row data in the log."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
import trio

from tests.conftest import POSTGRES, make_settings, register
from tests.http.chat_env import ChatEnv, chat_app
from tests.http.test_metrics import db_query_errors
from volthub.http import errors as http_errors


async def _terminate_pooled(rt: Any) -> int:
    """pg_terminate_backend on the idle connections of this app's pool (only ours: other
    sessions share the server)."""
    pids = [connection.info.backend_pid for connection in list(rt.db._pool._pool)]
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return len(pids)


async def test_terminated_pooled_connections_never_cause_a_500(postgres_url: str) -> None:
    app = chat_app(postgres_url)
    async with app.test_app():
        env = ChatEnv(app)
        owner = await env.user()
        statuses: list[int] = []
        terminated = 0

        async def sender() -> None:
            for index in range(40):
                response = await env.send(owner, owner.id, f"message {index}")
                statuses.append(response.status_code)

        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(sender)
            for _ in range(5):
                await trio.sleep(0.05)
                with trio.fail_after(5):  # every connection may be in use at that moment
                    while not (ended := await _terminate_pooled(env.rt)):
                        await trio.sleep(0.01)
                terminated += ended
        assert terminated >= 5
        assert len(statuses) == 160
        # A connection handed out dead is replaced before use, so it never costs a request.
        # A connection killed while a transaction is running on it fails that one transaction,
        # honestly, as 503 database_unavailable (never 500): at most one per termination.
        assert set(statuses) <= {200, 503}, sorted(set(statuses))
        assert statuses.count(503) <= terminated, (statuses.count(503), terminated)


class TcpProxy:
    """A loopback TCP forwarder to PostgreSQL that can be stopped (an outage: refused
    connects, existing connections cut) and started again on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._scope: trio.CancelScope | None = None

    async def start(self, nursery: trio.Nursery) -> None:
        self._scope = await nursery.start(self._serve)

    def stop(self) -> None:
        assert self._scope is not None
        self._scope.cancel()

    async def _serve(self, task_status: Any) -> None:
        with trio.CancelScope() as scope:
            listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as nursery:
                task_status.started(scope)
                await trio.serve_listeners(self._forward, listeners, handler_nursery=nursery)

    async def _forward(self, client: trio.SocketStream) -> None:
        async with client, await trio.open_tcp_stream("127.0.0.1", self.target_port) as server:

            async def pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
                try:
                    async for chunk in source:
                        await sink.send_all(chunk)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
                nursery.cancel_scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump, client, server)
                nursery.start_soon(pump, server, client)


@pytest.fixture
async def proxied_app(
    postgres_url: str, nursery: trio.Nursery, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Any, TcpProxy]]:
    """The app with `[database] acquire_timeout` 1 s (or the test's indirect parameter),
    reaching PostgreSQL through a TcpProxy."""
    from urllib.parse import urlsplit

    from volthub.http.app import create_app

    target = urlsplit(POSTGRES).port or 5432
    proxy = TcpProxy(target)
    await proxy.start(nursery)
    url = postgres_url.replace(f":{target}/", f":{proxy.port}/", 1)
    app = create_app(make_settings(url, database={"acquire_timeout": getattr(request, "param", 1.0)}))
    async with app.test_app():
        yield app, proxy
    proxy.stop()


async def test_outage_answers_503_within_the_acquire_timeout_then_recovers(
    proxied_app: tuple[Any, TcpProxy], nursery: trio.Nursery
) -> None:
    app, proxy = proxied_app
    client = app.test_client()
    user = await register(client)
    assert (await client.get("/healthz")).status_code == 200
    errors_before = await db_query_errors(client, "postgresql", "unavailable")

    proxy.stop()
    started = trio.current_time()
    first_503 = 0.0
    for _ in range(3):
        with trio.fail_after(1.0 + 2.0):  # acquire_timeout plus scheduling slack
            health = await client.get("/healthz")
            write = await client.put("/api/users/me", json={"bio": "during the outage"}, headers=user.headers)
        assert health.status_code == 503
        first_503 = first_503 or trio.current_time() - started
        assert (await health.get_json())["error"] == "database_unavailable"
        assert write.status_code == 503 and write.headers["Retry-After"]
        assert (await write.get_json())["error"] == "database_unavailable"
    assert (await client.get("/livez")).status_code == 200
    assert trio.current_time() - started < 12

    await proxy.start(nursery)  # the same port again
    back = trio.current_time()
    with trio.fail_after(10):
        while (await client.get("/healthz")).status_code != 200:
            await trio.sleep(0.1)
    recovery = trio.current_time() - back
    print(f"outage: first 503 after {first_503:.2f} s; recovered {recovery:.2f} s after the database returned")
    assert recovery < 1.0 + 2.0 + 1.0  # one failing acquire, then the next steady 1 s retry
    response = await client.put("/api/users/me", json={"bio": "after the outage"}, headers=user.headers)
    assert response.status_code == 200
    # Every 503 was at least one failed transaction, counted for the operator's dashboard.
    assert await db_query_errors(client, "postgresql", "unavailable") >= errors_before + 6


@pytest.fixture
async def sqlite_app(sqlite_url: str) -> AsyncIterator[Any]:
    from volthub.http.app import create_app

    app = create_app(make_settings(sqlite_url))
    async with app.test_app():
        yield app


def _fill_disk(rt: Any, pages: int | None = None) -> int:
    """SQLITE_FULL without a full disk: cap every pooled connection's file at `pages` (its
    size now by default). Connections opened later are capped by the next call."""
    connections = list(rt.db._all)
    if pages is None:
        row = connections[0].execute("PRAGMA page_count").fetchone()
        pages = int(row["page_count"] if isinstance(row, dict) else row[0])
    for connection in connections:
        connection.execute(f"PRAGMA max_page_count = {pages}")
    return pages


async def test_sqlite_full_disk_is_503_with_a_bounded_log(sqlite_app: Any, caplog: pytest.LogCaptureFixture) -> None:
    client = sqlite_app.test_client()
    user = await register(client)
    http_errors._fault_logged_at.clear()
    errors_before = await db_query_errors(client, "sqlite", "storage")
    pages = _fill_disk(sqlite_app.extensions["volthub"])
    caplog.set_level(logging.INFO)
    caplog.clear()
    statuses = []
    for index in range(400):  # the file's last free pages fill first
        _fill_disk(sqlite_app.extensions["volthub"], pages)
        response = await client.post(
            "/api/auth/register", json={"username": f"full{index}", "password": "correct horse battery"}
        )
        if statuses or response.status_code == 503:
            statuses.append(response.status_code)
            body = await response.get_json()
            assert body["error"] == "storage_unavailable"
            assert body["details"]["fault"] == "disk_full"
        else:
            assert response.status_code == 201
        if len(statuses) == 30:
            break
    assert set(statuses) == {503}, statuses
    # volthub's own lines: a psycopg pool of an earlier test may still log its reconnects here.
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("volthub")]
    assert len(lines) == 1, [record.getMessage() for record in lines]
    assert lines[0].exc_info is None
    # Reads still work: the disk is full, not the database gone.
    assert (await client.get("/api/users/me", headers=user.headers)).status_code == 200
    # Each refused registration is one failed transaction of kind storage.
    assert await db_query_errors(client, "sqlite", "storage") == errors_before + len(statuses)


async def test_postgres_errors_carry_no_row_data(postgres_url: str) -> None:
    from volthub.persistence import DatabaseError, IntegrityError, migrate, open_database
    from volthub.persistence import users as users_repo

    database = open_database(postgres_url, 2)
    await database.open()
    try:
        await migrate(database)

        def create(tx: Any, name: str) -> None:
            users_repo.create_user(
                tx, user_id=name, username=name, display_name=name, password_hash="$argon2id$secret", now_ms=1
            )

        await database.write(lambda tx: create(tx, "00000000-0000-0000-0000-000000000001"))
        with pytest.raises(IntegrityError) as duplicate:  # DETAIL would name the key's value
            await database.write(lambda tx: tx.execute("INSERT INTO users SELECT * FROM users"))
        with pytest.raises((DatabaseError, IntegrityError)) as not_null:
            await database.write(lambda tx: tx.execute("UPDATE users SET password_hash = NULL"))
    finally:
        await database.close()
    for error in (duplicate.value, not_null.value):
        text = str(error)
        assert "argon2" not in text and "DETAIL" not in text and "00000000" not in text, text
        assert error.__cause__ is None and error.__suppress_context__


# 2 s: half of it is the allowance for a machine so busy that the test's own tasks wait
# for the CPU (a load average of 18 on two cores stalled answers by up to 0.4 s).
@pytest.mark.parametrize("proxied_app", [2.0], indirect=True)
async def test_during_a_cut_every_answer_comes_within_the_acquire_timeout_in_total(
    proxied_app: tuple[Any, TcpProxy],
) -> None:
    """Chat sends, user writes and reads from many clients at once while every connection to
    PostgreSQL is cut: each waits in the group-commit queue, for a connection slot and for
    the pool, and all of it together is bounded by `[database] acquire_timeout`."""
    app, proxy = proxied_app
    acquire_timeout = app.extensions["volthub"].settings.database.acquire_timeout
    client = app.test_client()
    env = ChatEnv(app)
    owners = [await env.user() for _ in range(3)]
    for owner in owners:
        assert (await env.send(owner, owner.id, "before the cut")).status_code == 200
    answers: list[tuple[str, int, float]] = []

    async def send(owner: Any, text: str) -> Any:  # straight to the route: ChatEnv waits for the relay
        return await client.post(
            f"/api/integrations/oauth/chat/channels/{owner.id}/messages", json={"message": text}, headers=owner.headers
        )

    async def ask(kind: str, call: Any) -> None:
        started = trio.current_time()
        status = 0  # no answer at all
        with trio.move_on_after(10 * acquire_timeout):
            status = (await call()).status_code
        answers.append((kind, status, trio.current_time() - started))

    proxy.stop()
    async with trio.open_nursery() as clients:
        for round_ in range(3):
            for index, owner in enumerate(owners * 4):
                clients.start_soon(ask, "send", lambda o=owner, text=f"cut {round_} {index}": send(o, text))
            for owner in owners:
                clients.start_soon(
                    ask, "write", lambda o=owner: client.put("/api/users/me", json={"bio": "cut"}, headers=o.headers)
                )
                clients.start_soon(ask, "read", lambda o=owner: client.get("/api/users/me", headers=o.headers))
            await trio.sleep(acquire_timeout / 2)
    # Not a guess at how fast the machine is: the waits end at a deadline the server keeps on
    # the Trio clock this test reads (the same process), and no database work runs during
    # the cut. What comes on top is the scheduling of a few tasks and building a 503, a few
    # milliseconds; half the setting is left for it. Waits that each took the whole timeout
    # anew (a rate-limit batch's queue, then the statement queue, then the pool) made
    # answers of 1.6-1.9 times the setting here.
    slowest = max(answers, key=lambda answer: answer[2])
    print(f"{len(answers)} answers during the cut; slowest {slowest}")
    assert {status for _, status, _ in answers} <= {200, 503}
    assert slowest[2] < 1.5 * acquire_timeout, sorted(answers, key=lambda answer: -answer[2])[:10]
