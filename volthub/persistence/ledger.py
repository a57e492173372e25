"""Money ledgers: Volts and channel points, double entry.

One `transfer` is one ledger transaction: a debit row, a credit row and both balance
changes, written in the caller's database transaction so it is whole or absent together
with whatever the caller writes next to it (a subscription, a bet, a redemption).

Accounts are named by strings built here, never by hand:
  volts:user:<user id>                 points:<channel id>:user:<user id>
  volts:system:<name>                  points:<channel id>:system:<name>
A user account never goes below zero. A system account named "mint" is where money enters
the platform (purchases, points earned by watching) and is the only kind that may go
negative; every other system account (an escrow such as `prediction:<id>`) may not.

Concurrency: the debit is a guarded `UPDATE … WHERE balance >= amount`, so two concurrent
debits can never both pass on PostgreSQL (the second re-checks the committed balance after
waiting on the row lock) or on SQLite (writes are serialised by BEGIN IMMEDIATE). On
PostgreSQL both rows are locked in account order first, so two opposite transfers cannot
deadlock.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from volthub.persistence.database import Tx
from volthub.persistence.records import Record

CURRENCIES = ("volts", "points")
MINT = "mint"


class InsufficientFunds(Exception):
    """The source account holds less than the amount; nothing was written."""

    def __init__(self, account: str, balance: int, needed: int) -> None:
        super().__init__(f"{account} holds {balance}, needs {needed}")
        self.account = account
        self.balance = balance
        self.needed = needed


@dataclass(frozen=True)
class AccountKey:
    account: str
    currency: str
    channel_id: str | None
    holder_kind: str  # "user" | "system"
    holder: str

    @property
    def may_go_negative(self) -> bool:
        return self.holder_kind == "system" and self.holder == MINT


def _prefix(currency: str, channel_id: str | None) -> str:
    if currency == "volts":
        if channel_id is not None:
            raise ValueError("volts accounts belong to no channel")
        return "volts"
    if currency == "points":
        if not channel_id:
            raise ValueError("points accounts need a channel_id")
        if ":" in channel_id:
            raise ValueError("a channel id holds no ':'")
        return f"points:{channel_id}"
    raise ValueError(f"unknown currency {currency!r}")


def user_account(currency: str, user_id: str, channel_id: str | None = None) -> str:
    if not user_id or ":" in user_id:
        raise ValueError("a user id is non-empty and holds no ':'")
    return f"{_prefix(currency, channel_id)}:user:{user_id}"


def system_account(currency: str, name: str, channel_id: str | None = None) -> str:
    if not name:
        raise ValueError("a system account needs a name")
    return f"{_prefix(currency, channel_id)}:system:{name}"


def parse_account(account: str) -> AccountKey:
    parts = account.split(":")
    currency = parts[0]
    if currency == "points" and len(parts) >= 4:
        channel_id: str | None = parts[1]
        rest = parts[2:]
    elif currency == "volts" and len(parts) >= 3:
        channel_id, rest = None, parts[1:]
    else:
        raise ValueError(f"not an account key: {account!r}")
    kind, holder = rest[0], ":".join(rest[1:])
    if kind not in ("user", "system") or not holder:
        raise ValueError(f"not an account key: {account!r}")
    return AccountKey(account, currency, channel_id, kind, holder)


def transfer(
    tx: Tx,
    *,
    currency: str,
    source: str,
    destination: str,
    amount: int,
    kind: str,
    reference: str | None = None,
    now_ms: int | None = None,
) -> str:
    """Move `amount` from `source` to `destination`; returns the ledger transaction id.

    Raises InsufficientFunds (nothing written) when a non-mint source holds too little.
    """
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise ValueError("amount must be a positive integer")
    if source == destination:
        raise ValueError("source and destination are the same account")
    src, dst = parse_account(source), parse_account(destination)
    if src.currency != currency or dst.currency != currency:
        raise ValueError("both accounts must be in the transfer's currency")
    if src.channel_id != dst.channel_id:
        raise ValueError("channel points never move between channels")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if not src.may_go_negative and tx.one("SELECT 1 FROM ledger_accounts WHERE account = ?", (source,)) is None:
        raise InsufficientFunds(source, 0, amount)
    # Both rows exist before any is locked: a row that appeared after a locking statement's
    # snapshot would otherwise be locked later, out of order (a deadlock on PostgreSQL).
    created = [key.account for key in sorted((src, dst), key=lambda k: k.account) if _ensure(tx, key, now)]
    if tx.dialect == "postgresql":
        # Lock both rows in one order: opposite transfers wait instead of deadlocking.
        tx.execute(
            "SELECT account FROM ledger_accounts WHERE account IN (?, ?) ORDER BY account FOR UPDATE",
            (source, destination),
        )
    try:
        source_after = _debit(tx, src, amount, now)
    except InsufficientFunds:
        for account in created:  # refused: leave nothing behind, not even an empty account
            tx.execute("DELETE FROM ledger_accounts WHERE account = ? AND balance = 0", (account,))
        raise
    destination_after = _credit(tx, dst, amount, now)
    transaction_id = str(uuid.uuid4())
    tx.execute_many(
        "INSERT INTO ledger_entries (transaction_id, side, account, counterparty, currency, amount,"
        " balance_after, kind, reference, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (transaction_id, "debit", source, destination, currency, -amount, source_after, kind, reference, now),
            (transaction_id, "credit", destination, source, currency, amount, destination_after, kind, reference, now),
        ],
    )
    return transaction_id


def _ensure(tx: Tx, key: AccountKey, now: int) -> bool:
    """Create the account row if missing; True when this call created it."""
    created = tx.one(
        "INSERT INTO ledger_accounts (account, currency, channel_id, holder_kind, holder, may_go_negative,"
        " balance, updated_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT (account) DO NOTHING RETURNING account",
        (key.account, key.currency, key.channel_id, key.holder_kind, key.holder, key.may_go_negative, now),
    )
    return created is not None


def _debit(tx: Tx, key: AccountKey, amount: int, now: int) -> int:
    if key.may_go_negative:
        row = tx.one(
            "UPDATE ledger_accounts SET balance = balance - ?, updated_at = ? WHERE account = ? RETURNING balance",
            (amount, now, key.account),
        )
    else:
        # The guard is the rule: no row updated means too little money (or no account yet).
        row = tx.one(
            "UPDATE ledger_accounts SET balance = balance - ?, updated_at = ?"
            " WHERE account = ? AND balance >= ? RETURNING balance",
            (amount, now, key.account, amount),
        )
        if row is None:
            raise InsufficientFunds(key.account, balance(tx, key.account), amount)
    assert row is not None
    return int(row["balance"])


def _credit(tx: Tx, key: AccountKey, amount: int, now: int) -> int:
    row = tx.one(
        "UPDATE ledger_accounts SET balance = balance + ?, updated_at = ? WHERE account = ? RETURNING balance",
        (amount, now, key.account),
    )
    assert row is not None
    return int(row["balance"])


def balance(tx: Tx, account: str) -> int:
    value = tx.scalar("SELECT balance FROM ledger_accounts WHERE account = ?", (account,))
    return 0 if value is None else int(value)


@dataclass(frozen=True)
class Entry(Record):
    transaction_id: str
    side: str
    account: str
    counterparty: str
    currency: str
    amount: int
    balance_after: int
    kind: str
    reference: str | None
    created_at: int


def entries_of(tx: Tx, account: str, *, before: tuple[int, str] | None = None, limit: int = 50) -> list[Entry]:
    """An account's entries, newest first; `before` is the (created_at, transaction_id) cursor."""
    if before is None:
        rows = tx.execute(
            f"SELECT {Entry.columns()} FROM ledger_entries WHERE account = ?"
            " ORDER BY created_at DESC, transaction_id DESC LIMIT ?",
            (account, limit),
        )
    else:
        rows = tx.execute(
            f"SELECT {Entry.columns()} FROM ledger_entries WHERE account = ?"
            " AND (created_at < ? OR (created_at = ? AND transaction_id < ?))"
            " ORDER BY created_at DESC, transaction_id DESC LIMIT ?",
            (account, before[0], before[0], before[1], limit),
        )
    return [Entry.from_row(row) for row in rows]


def entries_of_transaction(tx: Tx, transaction_id: str) -> list[Entry]:
    rows = tx.execute(
        f"SELECT {Entry.columns()} FROM ledger_entries WHERE transaction_id = ? ORDER BY side DESC",
        (transaction_id,),
    )
    return [Entry.from_row(row) for row in rows]


def totals(tx: Tx) -> dict[str, tuple[int, int]]:
    """Per currency: (sum of all entries, sum of all balances). Both are 0 in a sound ledger."""
    result: dict[str, tuple[int, int]] = {}
    for currency in CURRENCIES:
        entries = int(tx.scalar("SELECT COALESCE(SUM(amount), 0) FROM ledger_entries WHERE currency = ?", (currency,)))
        balances = int(
            tx.scalar("SELECT COALESCE(SUM(balance), 0) FROM ledger_accounts WHERE currency = ?", (currency,))
        )
        result[currency] = (entries, balances)
    return result


def mismatched_accounts(tx: Tx) -> list[str]:
    """Accounts whose balance differs from the sum of their entries (none in a sound ledger)."""
    rows = tx.execute(
        "SELECT a.account FROM ledger_accounts a LEFT JOIN"
        " (SELECT account, SUM(amount) AS total FROM ledger_entries GROUP BY account) e"
        " ON e.account = a.account WHERE a.balance <> COALESCE(e.total, 0)"
    )
    return [row["account"] for row in rows]
