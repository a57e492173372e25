"""Volts over HTTP on SQLite and PostgreSQL: wallet, purchase, send, history, leaderboard,
Idempotency-Key, and the concurrency rules of the issue (no overdraft, money moved once)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.conftest import RegisteredUser, make_settings
from volthub.config import Settings
from volthub.persistence import ledger


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url)


async def buy(client: Any, user: RegisteredUser, amount: int, **headers: str) -> Any:
    return await client.post("/api/volts/purchase", json={"amount": amount}, headers={**user.headers, **headers})


async def send(client: Any, user: RegisteredUser, creator_id: str, amount: int, **headers: str) -> Any:
    return await client.post(
        "/api/volts/send",
        json={"creatorId": creator_id, "amount": amount, "message": "gg"},
        headers={**user.headers, **headers},
    )


async def balance_of(client: Any, user: RegisteredUser) -> int:
    response = await client.get("/api/volts/wallet", headers=user.headers)
    assert response.status_code == 200
    return int((await response.get_json())["balance"])


async def test_purchase_credits_at_once_and_is_labelled_sandbox(client: Any, make_user: Any) -> None:
    viewer = await make_user()
    assert await balance_of(client, viewer) == 0
    response = await buy(client, viewer, 250)
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    assert body["balance"] == 250
    assert body["transaction"]["type"] == "purchase"
    assert body["transaction"]["amount"] == 250
    assert body["transaction"]["sandbox"] is True
    assert body["transaction"]["provider"] == "sandbox"
    assert await balance_of(client, viewer) == 250
    for bad in (0, -1, 100_001, "5", 1.5):
        response = await client.post("/api/volts/purchase", json={"amount": bad}, headers=viewer.headers)
        assert response.status_code == 400, bad
    assert await balance_of(client, viewer) == 250


async def test_send_moves_volts_emits_channel_volts_and_notifies(app: Any, client: Any, make_user: Any) -> None:
    viewer, creator = await make_user(), await make_user()
    events: list[Any] = []
    app.extensions["volthub"].bus.subscribe(events.append)
    await buy(client, viewer, 100)
    response = await send(client, viewer, creator.id, 40)
    assert response.status_code == 200, await response.get_data(as_text=True)
    body = await response.get_json()
    assert body["balance"] == 60
    assert body["transaction"]["amount"] == -40
    assert body["transaction"]["counterpartyId"] == creator.id
    assert await balance_of(client, creator) == 40
    [event] = [e for e in events if e.name == "channel.volts"]
    assert event.channel_id == creator.id
    assert event.data["userId"] == viewer.id and event.data["amount"] == 40 and event.data["message"] == "gg"
    notes = await (await client.get("/api/notifications", headers=creator.headers)).get_json()
    assert [n["type"] for n in notes["items"]] == ["volts.received"]

    refused = await send(client, viewer, creator.id, 61)
    assert refused.status_code == 400
    error = await refused.get_json()
    assert error["error"] == "insufficient_funds"
    assert error["details"] == {"balance": 60, "needed": 61, "requestId": refused.headers["X-Request-Id"]}
    assert (await send(client, viewer, viewer.id, 1)).status_code == 400
    assert (await send(client, viewer, "00000000-0000-0000-0000-000000000000", 1)).status_code == 404
    assert await balance_of(client, viewer) == 60


async def test_transactions_are_a_cursor_list_and_the_leaderboard_ranks_senders(client: Any, make_user: Any) -> None:
    big, small, creator = await make_user(), await make_user(), await make_user()
    await buy(client, big, 1000)
    await buy(client, small, 1000)
    for amount in (10, 20, 30):
        assert (await send(client, big, creator.id, amount)).status_code == 200
    assert (await send(client, small, creator.id, 5)).status_code == 200

    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"limit": "2", **({"cursor": cursor} if cursor else {})}
        page = await (await client.get("/api/volts/transactions", headers=big.headers, query_string=query)).get_json()
        seen += page["items"]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert [t["amount"] for t in seen] == [-30, -20, -10, 1000]
    assert seen[0]["counterparty"]["userId"] == creator.id

    board = await (await client.get(f"/api/volts/leaderboard/{creator.id}")).get_json()
    assert [(row["userId"], row["amount"], row["rank"]) for row in board["leaderboard"]] == [
        (big.id, 60, 1),
        (small.id, 5, 2),
    ]


async def test_an_idempotency_key_replays_the_first_answer_byte_for_byte(client: Any, make_user: Any) -> None:
    viewer, creator = await make_user(), await make_user()
    await buy(client, viewer, 100)
    first = await send(client, viewer, creator.id, 10, **{"Idempotency-Key": "tip-1"})
    again = await send(client, viewer, creator.id, 10, **{"Idempotency-Key": "tip-1"})
    assert first.status_code == again.status_code == 200
    assert await first.get_data() == await again.get_data()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert await balance_of(client, viewer) == 90

    reused = await send(client, viewer, creator.id, 11, **{"Idempotency-Key": "tip-1"})
    assert reused.status_code == 422
    assert (await reused.get_json())["error"] == "idempotency_key_reused"
    # Scoped per route and per user: the same key elsewhere is a new request.
    assert (await buy(client, viewer, 5, **{"Idempotency-Key": "tip-1"})).status_code == 200
    assert (await buy(client, creator, 5, **{"Idempotency-Key": "tip-1"})).status_code == 200
    assert await balance_of(client, viewer) == 95
    # A refused request is an answer too: replayed, not re-run.
    poor = await send(client, creator, viewer.id, 1000, **{"Idempotency-Key": "k2"})
    assert poor.status_code == 400
    await buy(client, creator, 2000)
    assert await (await send(client, creator, viewer.id, 1000, **{"Idempotency-Key": "k2"})).get_data() == (
        await poor.get_data()
    )
    bad_key = await send(client, viewer, creator.id, 1, **{"Idempotency-Key": "x" * 256})
    assert bad_key.status_code == 400


async def test_fifty_parallel_sends_from_one_wallet_never_overdraw(app: Any, client: Any, make_user: Any) -> None:
    viewer, creator = await make_user(), await make_user()
    await buy(client, viewer, 100)
    statuses: list[int] = []

    async def one() -> None:
        statuses.append((await send(client, viewer, creator.id, 3)).status_code)

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(one)
    assert sorted(set(statuses)) == [200, 400]
    assert statuses.count(200) == 33
    assert await balance_of(client, viewer) == 1
    assert await balance_of(client, creator) == 99
    db = app.extensions["volthub"].db
    assert await db.read(ledger.mismatched_accounts) == []


async def test_fifty_parallel_requests_with_one_key_move_money_once(app: Any, client: Any, make_user: Any) -> None:
    viewer, creator = await make_user(), await make_user()
    await buy(client, viewer, 100)
    bodies: list[bytes] = []

    async def one() -> None:
        response = await send(client, viewer, creator.id, 7, **{"Idempotency-Key": "same-tip"})
        assert response.status_code == 200
        bodies.append(await response.get_data())

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(one)
    assert len(bodies) == 50 and len(set(bodies)) == 1
    assert await balance_of(client, viewer) == 93
    assert await balance_of(client, creator) == 7


async def test_a_send_transaction_names_its_counterparty(client: Any, make_user: Any) -> None:
    viewer, creator = await make_user(), await make_user()
    await buy(client, viewer, 100)
    sent = (await (await send(client, viewer, creator.id, 40)).get_json())["transaction"]
    assert sent["counterpartyId"] == creator.id
    assert sent["counterparty"] == {"userId": creator.id, "username": creator.username, "displayName": creator.username}
    bought = (await (await buy(client, viewer, 5)).get_json())["transaction"]
    assert bought["counterpartyId"] is None and bought["counterparty"] is None
