"""persistence/ledger.py on SQLite and PostgreSQL: double entry, no overdraft, concurrency."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from volthub.persistence import Database, Tx, ledger
from volthub.persistence.ledger import InsufficientFunds, balance, system_account, transfer, user_account


def new_id() -> str:
    return str(uuid.uuid4())


def mint(tx: Tx, account: str, amount: int, channel_id: str | None = None) -> str:
    currency = ledger.parse_account(account).currency
    return transfer(
        tx,
        currency=currency,
        source=system_account(currency, "mint", channel_id),
        destination=account,
        amount=amount,
        kind="purchase",
    )


def test_account_keys_carry_currency_channel_and_holder() -> None:
    channel, user = new_id(), new_id()
    assert user_account("volts", user) == f"volts:user:{user}"
    assert user_account("points", user, channel) == f"points:{channel}:user:{user}"
    escrow = system_account("points", "prediction:p1", channel)
    parsed = ledger.parse_account(escrow)
    assert (parsed.currency, parsed.channel_id, parsed.holder_kind, parsed.holder) == (
        "points",
        channel,
        "system",
        "prediction:p1",
    )
    assert not parsed.may_go_negative
    assert ledger.parse_account(system_account("volts", "mint")).may_go_negative
    with pytest.raises(ValueError):
        user_account("points", user)
    with pytest.raises(ValueError):
        user_account("volts", user, channel)
    with pytest.raises(ValueError):
        user_account("gold", user)


async def test_a_transfer_writes_two_rows_and_both_balances(db: Database) -> None:
    alice, bob = user_account("volts", new_id()), user_account("volts", new_id())

    def run(tx: Tx) -> str:
        mint(tx, alice, 100)
        return transfer(tx, currency="volts", source=alice, destination=bob, amount=30, kind="send", reference="r1")

    transaction_id = await db.write(run)
    assert await db.read(lambda tx: (balance(tx, alice), balance(tx, bob))) == (70, 30)
    rows = await db.read(lambda tx: ledger.entries_of_transaction(tx, transaction_id))
    assert {(e.side, e.account, e.amount, e.balance_after, e.reference) for e in rows} == {
        ("debit", alice, -30, 70, "r1"),
        ("credit", bob, 30, 30, "r1"),
    }
    assert await db.read(lambda tx: balance(tx, user_account("volts", new_id()))) == 0


async def test_too_little_money_raises_and_writes_nothing(db: Database) -> None:
    alice, bob = user_account("volts", new_id()), user_account("volts", new_id())
    await db.write(lambda tx: mint(tx, alice, 10))

    def overdraw(tx: Tx) -> InsufficientFunds:
        with pytest.raises(InsufficientFunds) as caught:
            transfer(tx, currency="volts", source=alice, destination=bob, amount=11, kind="send")
        return caught.value  # the transaction commits: nothing half-written may remain

    error = await db.write(overdraw)
    assert (error.account, error.balance, error.needed) == (alice, 10, 11)
    assert await db.read(lambda tx: tx.scalar("SELECT COUNT(*) FROM ledger_accounts WHERE account = ?", (bob,))) == 0
    assert await db.read(lambda tx: balance(tx, alice)) == 10


async def test_an_escrow_may_not_go_negative_but_the_mint_may(db: Database) -> None:
    channel = new_id()
    escrow = system_account("points", "prediction:x", channel)
    viewer = user_account("points", new_id(), channel)
    with pytest.raises(InsufficientFunds):
        await db.write(
            lambda tx: transfer(tx, currency="points", source=escrow, destination=viewer, amount=1, kind="payout")
        )
    await db.write(lambda tx: mint(tx, viewer, 5, channel))
    mint_account = system_account("points", "mint", channel)
    assert await db.read(lambda tx: balance(tx, mint_account)) == -5


async def test_bad_transfers_are_refused(db: Database) -> None:
    channel = new_id()
    a, b = user_account("volts", new_id()), user_account("points", new_id(), channel)
    for amount in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            await db.write(
                lambda tx, amount=amount: transfer(
                    tx, currency="volts", source=a, destination=user_account("volts", new_id()), amount=amount, kind="x"
                )
            )
    with pytest.raises(ValueError):
        await db.write(lambda tx: transfer(tx, currency="volts", source=a, destination=b, amount=1, kind="x"))
    with pytest.raises(ValueError):
        await db.write(lambda tx: transfer(tx, currency="volts", source=a, destination=a, amount=1, kind="x"))
    other = user_account("points", new_id(), new_id())
    with pytest.raises(ValueError):
        await db.write(lambda tx: transfer(tx, currency="points", source=b, destination=other, amount=1, kind="x"))


async def test_fifty_parallel_debits_never_overdraw(db: Database) -> None:
    """50 concurrent sends of 3 from a wallet of 100: exactly 33 pass, the balance ends at 1."""
    wallet, creator = user_account("volts", new_id()), user_account("volts", new_id())
    await db.write(lambda tx: mint(tx, wallet, 100))
    outcomes: list[str] = []

    async def send() -> None:
        try:
            await db.write(
                lambda tx: transfer(tx, currency="volts", source=wallet, destination=creator, amount=3, kind="send")
            )
            outcomes.append("ok")
        except InsufficientFunds:
            outcomes.append("refused")

    async with trio.open_nursery() as nursery:
        for _ in range(50):
            nursery.start_soon(send)
    assert outcomes.count("ok") == 33
    assert await db.read(lambda tx: (balance(tx, wallet), balance(tx, creator))) == (1, 99)
    assert await db.read(ledger.mismatched_accounts) == []


async def test_opposite_transfers_in_parallel_do_not_deadlock(db: Database) -> None:
    a, b = user_account("volts", new_id()), user_account("volts", new_id())
    await db.write(lambda tx: (mint(tx, a, 1000), mint(tx, b, 1000)))

    async def move(source: str, destination: str) -> None:
        for _ in range(10):
            await db.write(
                lambda tx: transfer(tx, currency="volts", source=source, destination=destination, amount=1, kind="x")
            )

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(move, a, b)
            nursery.start_soon(move, b, a)
    assert await db.read(lambda tx: balance(tx, a) + balance(tx, b)) == 2000
    totals: dict[str, Any] = await db.read(ledger.totals)
    assert totals["volts"] == (0, 0)


async def test_the_transaction_list_pages_newest_first(db: Database) -> None:
    wallet = user_account("volts", new_id())

    def run(tx: Tx) -> None:
        for number in range(5):
            transfer(
                tx,
                currency="volts",
                source=system_account("volts", "mint"),
                destination=wallet,
                amount=number + 1,
                kind="purchase",
                now_ms=1000 + number,
            )

    await db.write(run)
    first = await db.read(lambda tx: ledger.entries_of(tx, wallet, limit=2))
    assert [e.amount for e in first] == [5, 4]
    cursor = (first[-1].created_at, first[-1].transaction_id)
    rest = await db.read(lambda tx: ledger.entries_of(tx, wallet, before=cursor, limit=10))
    assert [e.amount for e in rest] == [3, 2, 1]
