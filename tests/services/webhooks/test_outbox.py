"""The outbox: rows written inside the change's transaction, who gets what, and claims."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
import pytest
import trio

from tests.conftest import insert_app
from tests.conftest import stored_user as make_user
from volthub.hub.bus import InProcessBroker
from volthub.hub.clock import SystemClock, to_ms
from volthub.hub.publisher import Emitter, EventPublisher
from volthub.persistence import Database, Tx
from volthub.persistence import webhooks as repo
from volthub.services.webhooks.outbox import OutboxSink


class Scopes:
    def __init__(self) -> None:
        self.granted: set[tuple[str, str, str]] = set()

    def __call__(self, tx: Tx, user_id: str, client_id: str, scope: str) -> bool:
        return (user_id, client_id, scope) in self.granted


@pytest.fixture
def scopes() -> Scopes:
    return Scopes()


@pytest.fixture
def publisher(db: Database, scopes: Scopes) -> EventPublisher:
    publisher = EventPublisher(db, InProcessBroker(), SystemClock())
    publisher.add_transaction_sink(OutboxSink(0, scope_check=scopes))
    return publisher


async def make_webhook(db: Database, client_id: str, events: list[str], enabled: bool = True) -> str:
    webhook_id = str(uuid.uuid4())

    def create(tx: Tx) -> None:
        repo.create_webhook(
            tx,
            webhook_id=webhook_id,
            client_id=client_id,
            url="https://hooks.example.com/",
            events=events,
            secret="whsec_test",
            now_ms=1,
        )
        if not enabled:
            repo.disable_webhook(tx, webhook_id, repo.BY_OWNER, 2)

    await db.write(create)
    return webhook_id


async def deliveries(db: Database) -> list[dict[str, Any]]:
    return await db.read(
        lambda tx: tx.execute(
            "SELECT webhook_id, event_id, event_name, body, state, next_attempt_at FROM webhook_deliveries ORDER BY created_at, id"
        )
    )


def emit(channel: str, name: str, data: dict[str, Any] | None = None, **kw: Any) -> Any:
    return lambda tx, emitter: emitter.emit(channel, name, data or {}, **kw)


async def test_rows_are_written_with_the_change_or_not_at_all(db: Database, publisher: EventPublisher) -> None:
    owner = await make_user(db)
    client_id = await insert_app(db, owner)
    webhook_id = await make_webhook(db, client_id, ["channel.follow"])
    event = await publisher.write(emit(owner, "channel.follow", {"userId": "x"}))
    [row] = await deliveries(db)
    assert (row["webhook_id"], row["event_id"], row["event_name"], row["state"]) == (
        webhook_id,
        event.id,
        "channel.follow",
        "pending",
    )
    body = orjson.loads(row["body"])
    assert body == {
        "id": event.id,
        "event": "channel.follow",
        "type": "channel.follow",
        "timestamp": event.timestamp,
        "data": {"userId": "x"},
    }

    class Boom(Exception):
        pass

    def failing(tx: Tx, emitter: Emitter) -> None:
        emitter.emit(owner, "channel.follow", {})
        tx.execute("UPDATE users SET bio = 'changed' WHERE id = ?", (owner,))
        raise Boom()

    # The sink runs only after the change function returns, so it never sees this one;
    # and a sink failure rolls back the change with it.
    with pytest.raises(Boom):
        await publisher.write(failing)
    assert len(await deliveries(db)) == 1

    def sink_fails(tx: Tx, events: list[Any]) -> None:
        raise Boom()

    publisher.add_transaction_sink(sink_fails)
    with pytest.raises(Boom):
        await publisher.write(
            lambda tx, emitter: (
                tx.execute("UPDATE users SET bio = 'x' WHERE id = ?", (owner,)),
                emitter.emit(owner, "channel.follow", {}),
            )
        )
    assert len(await deliveries(db)) == 1
    assert await db.read(lambda tx: tx.scalar("SELECT bio FROM users WHERE id = ?", (owner,))) == ""


async def test_only_the_owners_channel_subscribed_names_and_no_sandbox(db: Database, publisher: EventPublisher) -> None:
    owner, other = await make_user(db), await make_user(db)
    client_id = await insert_app(db, owner)
    follows = await make_webhook(db, client_id, ["channel.follow"])
    cheers = await make_webhook(db, client_id, ["channel.cheer"])
    both = await make_webhook(db, client_id, ["channel.cheer", "channel.volts"])
    await make_webhook(db, client_id, ["channel.follow", "channel.volts"], enabled=False)
    await make_webhook(db, await insert_app(db, other), ["stream.online"])

    await publisher.write(emit(other, "channel.follow"))  # not the owner's channel
    await publisher.write(emit(owner, "channel.follow", is_test=True))  # sandbox
    await publisher.write(emit(owner, "stream.online"))  # nobody of the owner asked
    await publisher.write(emit(owner, "channel.hype_train.begin"))  # not in the catalogue
    await publisher.write(emit(owner, "channel.cheer"))  # a subscription alias, never an event
    volts = await publisher.write(emit(owner, "channel.volts", {"amount": 5}))
    follow = await publisher.write(emit(owner, "channel.follow"))
    rows = await deliveries(db)
    got = sorted((r["webhook_id"], r["event_id"], r["event_name"]) for r in rows)
    assert got == sorted(
        [
            (cheers, volts.id, "channel.cheer"),
            (both, volts.id, "channel.volts"),
            (follows, follow.id, "channel.follow"),
        ]
    )
    cheer_row = next(r for r in rows if r["webhook_id"] == cheers)
    assert orjson.loads(cheer_row["body"])["type"] == "channel.cheer"


async def test_chat_messages_need_chat_read(db: Database, publisher: EventPublisher, scopes: Scopes) -> None:
    owner = await make_user(db)
    client_id = await insert_app(db, owner)
    await make_webhook(db, client_id, ["chat.message"])
    await publisher.write(emit(owner, "chat.message", {"content": "hi"}))
    assert await deliveries(db) == []
    scopes.granted.add((owner, client_id, "chat:read"))
    message = await publisher.write(emit(owner, "chat.message", {"content": "hi"}))
    assert [r["event_id"] for r in await deliveries(db)] == [message.id]


async def test_chat_message_follows_the_owners_real_grant(db: Database) -> None:
    from volthub.persistence import oauth

    owner = await make_user(db)
    client_id = await insert_app(db, owner)
    await make_webhook(db, client_id, ["chat.message"])
    publisher = EventPublisher(db, InProcessBroker(), SystemClock())
    publisher.add_transaction_sink(OutboxSink(0))  # the default check: the OAuth grants

    def grant(held: list[str]) -> Any:
        return lambda tx: oauth.create_grant(
            tx,
            grant_id=str(uuid.uuid4()),
            user_id=owner,
            client_id=client_id,
            consented_scope=" ".join(held),
            held=held,
            now_ms=1,
        )

    await db.write(grant(["chat:write"]))
    await publisher.write(emit(owner, "chat.message", {"content": "no"}))
    assert await deliveries(db) == []
    read_grant = await db.write(grant(["chat:read"]))
    delivered = await publisher.write(emit(owner, "chat.message", {"content": "yes"}))
    await db.write(lambda tx: oauth.revoke_grants(tx, [read_grant.id], 2, "test"))
    await publisher.write(emit(owner, "chat.message", {"content": "revoked"}))
    assert [r["event_id"] for r in await deliveries(db)] == [delivered.id]


async def test_first_delay_sets_the_due_time(db: Database) -> None:
    owner = await make_user(db)
    await make_webhook(db, await insert_app(db, owner), ["channel.follow"])
    publisher = EventPublisher(db, InProcessBroker(), SystemClock())
    publisher.add_transaction_sink(OutboxSink(30))
    event = await publisher.write(emit(owner, "channel.follow"))
    [row] = await deliveries(db)
    from datetime import datetime

    at = to_ms(datetime.fromisoformat(event.timestamp).timestamp())
    assert row["next_attempt_at"] == at + 30_000


async def seed(db: Database, count: int, due: int = 1_000) -> str:
    owner = await make_user(db)
    webhook_id = await make_webhook(db, await insert_app(db, owner), ["channel.follow"])
    rows = [
        repo.NewDelivery(str(uuid.uuid4()), webhook_id, str(uuid.uuid4()), "channel.follow", b"{}", due)
        for _ in range(count)
    ]
    await db.write(lambda tx: repo.enqueue(tx, rows, due))
    return webhook_id


async def test_concurrent_claims_never_share_a_row(db: Database) -> None:
    await seed(db, 60)
    claimed: list[list[str]] = []

    async def claimer() -> None:
        token = uuid.uuid4().hex
        got = await db.write(lambda tx: repo.claim_due(tx, 5_000, 20_000, 10, token))
        claimed.append([c.delivery_id for c in got])

    async with trio.open_nursery() as nursery:
        for _ in range(8):
            nursery.start_soon(claimer)
    flat = [d for batch in claimed for d in batch]
    assert len(flat) == len(set(flat)) == 60
    assert await db.write(lambda tx: repo.claim_due(tx, 5_000, 20_000, 10, "x")) == []


async def test_a_lapsed_lease_is_claimed_again_and_the_stale_worker_cannot_move_it(db: Database) -> None:
    await seed(db, 1)
    [first] = await db.write(lambda tx: repo.claim_due(tx, 1_000, 16_000, 5, "first"))
    assert await db.write(lambda tx: repo.claim_due(tx, 15_999, 30_000, 5, "second")) == []
    assert await db.read(repo.next_due_at) == 16_000
    [second] = await db.write(lambda tx: repo.claim_due(tx, 16_000, 31_000, 5, "second"))
    assert second.delivery_id == first.delivery_id
    assert await db.write(lambda tx: repo.start_recording(tx, first.delivery_id, "first")) == (1, False, 0)
    assert await db.write(lambda tx: repo.start_recording(tx, first.delivery_id, "second")) == (2, True, 0)


async def test_disabled_webhooks_park_their_deliveries(db: Database) -> None:
    webhook_id = await seed(db, 2)
    await db.write(lambda tx: repo.disable_webhook(tx, webhook_id, repo.BY_FAILURES, 2_000))
    assert await db.write(lambda tx: repo.claim_due(tx, 10_000, 20_000, 5, "t")) == []
    assert await db.read(repo.next_due_at) is None
    assert await db.write(lambda tx: repo.enable_webhook(tx, webhook_id, 50_000)) == 2
    assert len(await db.write(lambda tx: repo.claim_due(tx, 50_000, 60_000, 5, "t"))) == 2


async def test_prune_removes_only_old_finished_deliveries(db: Database) -> None:
    webhook_id = await seed(db, 3)
    [a, b, c] = [r["id"] for r in await db.read(lambda tx: tx.execute("SELECT id FROM webhook_deliveries ORDER BY id"))]

    def finish(tx: Tx) -> None:
        repo.insert_attempt(tx, a, repo.Attempt(1, 1_000, "success", 200, 5, None))
        repo.finish_delivery(tx, a, repo.SUCCEEDED, 0, 1_000)
        repo.finish_delivery(tx, b, repo.FAILED, 5, 9_000)

    await db.write(finish)
    assert await db.write(lambda tx: repo.prune_finished(tx, 5_000)) == 1
    left = await db.read(lambda tx: repo.list_deliveries(tx, webhook_id, 10, None))
    assert sorted(d.id for d in left.items) == sorted([b, c])
    assert await db.read(lambda tx: tx.scalar("SELECT COUNT(*) AS n FROM webhook_attempts")) == 0


async def test_authorization_events_go_to_the_authorised_apps_webhooks_only(
    db: Database, publisher: EventPublisher
) -> None:
    owner = await make_user(db)
    authorised, sibling = await insert_app(db, owner), await insert_app(db, owner)
    mine = await make_webhook(db, authorised, ["user.authorization.grant", "user.authorization.revoke"])
    await make_webhook(db, sibling, ["user.authorization.grant", "user.authorization.revoke"])
    grant = await publisher.write(emit(owner, "user.authorization.grant", {"clientId": authorised}))
    revoke = await publisher.write(emit(owner, "user.authorization.revoke", {"clientId": authorised}))
    got = sorted((r["webhook_id"], r["event_id"]) for r in await deliveries(db))
    assert got == sorted([(mine, grant.id), (mine, revoke.id)])


async def test_on_postgresql_subscribers_are_read_again_exactly_when_they_change(postgres_url: str) -> None:
    """The event log hands each event its channel's webhook subscriptions version; the sink
    keeps the subscribers it read while the version stands. Every change to who is
    subscribed, made on another connection as another process would, shows in the next
    event's deliveries."""
    from tests.conftest import opened_database
    from volthub.hub.bus import PostgresBroker
    from volthub.persistence import apps as apps_repo

    async with opened_database(postgres_url, pool_size=2) as db:
        sink = OutboxSink(0, scope_check=lambda *_: True)
        publisher = EventPublisher(db, InProcessBroker(), SystemClock(), PostgresBroker(db, SystemClock()))
        publisher.add_transaction_sink(sink)
        owner = await make_user(db)
        client_id = await insert_app(db, owner)

        async def follow() -> tuple[int, int]:
            """Publish a follow: (rows it got, subscriber reads it took)."""
            before, reads = len(await deliveries(db)), sink.subscribers.reads
            await publisher.write(emit(owner, "channel.follow", {"userId": "x"}))
            return len(await deliveries(db)) - before, sink.subscribers.reads - reads

        assert await follow() == (0, 1)  # nobody subscribed yet; read once
        assert await follow() == (0, 0)  # kept
        webhook_id = await make_webhook(db, client_id, ["channel.follow"])
        assert await follow() == (1, 1)  # the new webhook is seen at once
        assert await follow() == (1, 0)
        await db.write(lambda tx: repo.change_webhook(tx, webhook_id, 3, events=["channel.raid"]))
        assert await follow() == (0, 1)  # subscribed elsewhere now
        await db.write(lambda tx: repo.change_webhook(tx, webhook_id, 4, events=["channel.follow"]))
        assert await follow() == (1, 1)
        await db.write(lambda tx: repo.disable_webhook(tx, webhook_id, repo.BY_OWNER, 5))
        assert await follow() == (0, 1)
        await db.write(lambda tx: repo.enable_webhook(tx, webhook_id, 6))
        assert await follow() == (1, 1)
        await db.write(lambda tx: repo.record_webhook_result(tx, webhook_id, False))  # not who is subscribed
        assert await follow() == (1, 0)
        await db.write(lambda tx: apps_repo.delete_app(tx, client_id))  # its webhooks go with it
        assert await follow() == (0, 1)


async def test_on_postgresql_a_rolled_back_first_event_leaves_no_list_that_a_later_one_takes(postgres_url: str) -> None:
    """A channel's first event read its (empty) subscribers and then rolled back, position
    row and all; a webhook added meanwhile moves no version (there is no row to move). The
    next first event starts a new row: it must not find the rolled-back read as current."""
    from tests.conftest import opened_database
    from volthub.hub.bus import PostgresBroker

    class Boom(Exception):
        pass

    async with opened_database(postgres_url, pool_size=2) as db:
        sink = OutboxSink(0, scope_check=lambda *_: True)
        publisher = EventPublisher(db, InProcessBroker(), SystemClock(), PostgresBroker(db, SystemClock()))
        publisher.add_transaction_sink(sink)

        def fail_after_the_sink(tx: Tx, events: list[Any]) -> None:
            raise Boom()

        publisher.add_transaction_sink(fail_after_the_sink)
        owner = await make_user(db)
        client_id = await insert_app(db, owner)
        with pytest.raises(Boom):
            await publisher.write(emit(owner, "channel.follow", {"userId": "x"}))
        assert sink.subscribers.reads == 1  # it read, and its transaction is gone
        await make_webhook(db, client_id, ["channel.follow"])
        publisher = EventPublisher(db, InProcessBroker(), SystemClock(), PostgresBroker(db, SystemClock()))
        publisher.add_transaction_sink(sink)
        await publisher.write(emit(owner, "channel.follow", {"userId": "x"}))
        assert len(await deliveries(db)) == 1


@pytest.mark.parametrize("earlier_events", [1, 0])
async def test_on_postgresql_removing_a_webhook_while_an_event_is_written_for_it_waits_without_deadlock(
    postgres_url: str, earlier_events: int
) -> None:
    """The publishing transaction holds its channel's position row and then writes a delivery
    row referencing the webhook; a removal of that webhook in between must wait for it, not
    lock the webhook first and then wait for the position row (a deadlock), nor go first and
    fail the publish (the channel's first event: its position row is not committed yet).
    The event's delivery row goes with the webhook."""
    import threading

    from tests.conftest import opened_database
    from volthub.persistence import event_log

    async with opened_database(postgres_url, pool_size=2) as db:
        owner = await make_user(db)
        client_id = await insert_app(db, owner)
        webhook_id = await make_webhook(db, client_id, ["channel.follow"])
        for n in range(earlier_events):
            entry = event_log.NewEntry(owner, f"e0-{n}", "channel.follow", {})
            await db.write(lambda tx, entry=entry: event_log.append(tx, [entry], 1))
        holding, removing = threading.Event(), threading.Event()

        def publish(tx: Tx) -> None:
            event_log.append(tx, [event_log.NewEntry(owner, "e1", "channel.follow", {})], 1)
            holding.set()
            assert removing.wait(5)
            threading.Event().wait(0.5)  # the removal is under way meanwhile
            repo.enqueue(tx, [repo.NewDelivery("d1", webhook_id, "e1", "channel.follow", b"{}", 1)], 1)

        def remove(tx: Tx) -> bool:
            assert holding.wait(5)
            removing.set()
            return repo.delete_webhook(tx, client_id, webhook_id)

        removed: list[bool] = []

        async def removal() -> None:
            removed.append(await db.write(remove))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(removal)
                await db.write(publish)
        assert removed == [True]
        assert await deliveries(db) == []  # removed with its webhook
