"""Volts purchases (the `volt_purchases` table): pending until their payment provider
confirms or fails them, once (a guarded UPDATE)."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import Tx
from volthub.persistence.records import Record


@dataclass(frozen=True, slots=True)
class Purchase(Record):
    id: str
    user_id: str
    amount: int
    provider: str
    reference: str | None
    checkout_url: str | None
    status: str  # pending, confirmed, failed
    transaction_id: str | None
    created_at: int
    resolved_at: int | None


def create(tx: Tx, purchase_id: str, user_id: str, amount: int, provider: str, now_ms: int) -> None:
    tx.execute(
        "INSERT INTO volt_purchases (id, user_id, amount, provider, status, created_at)"
        " VALUES (?, ?, ?, ?, 'pending', ?)",
        (purchase_id, user_id, amount, provider, now_ms),
    )


def set_reference(tx: Tx, purchase_id: str, reference: str, checkout_url: str | None) -> None:
    tx.execute(
        "UPDATE volt_purchases SET reference = ?, checkout_url = ? WHERE id = ?",
        (reference, checkout_url, purchase_id),
    )


def get(tx: Tx, purchase_id: str) -> Purchase | None:
    return Purchase.fetch_one(tx, "SELECT * FROM volt_purchases WHERE id = ?", (purchase_id,))


def by_reference(tx: Tx, provider: str, reference: str) -> Purchase | None:
    return Purchase.fetch_one(
        tx, "SELECT * FROM volt_purchases WHERE provider = ? AND reference = ?", (provider, reference)
    )


def resolve(tx: Tx, purchase_id: str, status: str, now_ms: int) -> bool:
    """Move a pending purchase to `status`; False when it was not pending (already
    confirmed or failed): the guard that makes a confirmation credit once."""
    row = tx.one(
        "UPDATE volt_purchases SET status = ?, resolved_at = ? WHERE id = ? AND status = 'pending' RETURNING id",
        (status, now_ms, purchase_id),
    )
    return row is not None


def set_transaction(tx: Tx, purchase_id: str, transaction_id: str) -> None:
    tx.execute("UPDATE volt_purchases SET transaction_id = ? WHERE id = ?", (transaction_id, purchase_id))
