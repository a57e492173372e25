"""Idempotency keys of money-moving POSTs (migration 0010): claim, answer, replay."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import Tx
from volthub.persistence.records import Record

_COLUMNS = "user_id, route, idem_key, request_hash, state, claim_token, response_status, response_type, response_body, created_at"


@dataclass(frozen=True)
class KeyRecord(Record):
    request_hash: str
    state: str  # "pending" | "done"
    claim_token: str
    response_status: int | None
    response_type: str | None
    response_body: str | None
    created_at: int


def claim(
    tx: Tx, *, user_id: str, route: str, key: str, request_hash: str, claim_token: str, now_ms: int, expired_before: int
) -> KeyRecord | None:
    """Claim the key (None: this caller owns it now) or return the record that holds it.

    A record older than `expired_before` is forgotten first, so keys can be reused after
    their retention period.
    """
    tx.execute(
        "DELETE FROM idempotency_keys WHERE user_id = ? AND route = ? AND idem_key = ? AND created_at < ?",
        (user_id, route, key, expired_before),
    )
    inserted = tx.one(
        "INSERT INTO idempotency_keys (user_id, route, idem_key, request_hash, state, claim_token, created_at)"
        " VALUES (?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (user_id, route, idem_key) DO NOTHING RETURNING user_id",
        (user_id, route, key, request_hash, claim_token, now_ms),
    )
    if inserted is not None:
        return None
    return find(tx, user_id=user_id, route=route, key=key)


def find(tx: Tx, *, user_id: str, route: str, key: str) -> KeyRecord | None:
    row = tx.one(
        f"SELECT {_COLUMNS} FROM idempotency_keys WHERE user_id = ? AND route = ? AND idem_key = ?",
        (user_id, route, key),
    )
    return None if row is None else KeyRecord.from_row(row)


def answer(
    tx: Tx, *, user_id: str, route: str, key: str, claim_token: str, status: int, content_type: str, body: str
) -> None:
    tx.execute(
        "UPDATE idempotency_keys SET state = 'done', response_status = ?, response_type = ?, response_body = ?"
        " WHERE user_id = ? AND route = ? AND idem_key = ? AND claim_token = ? AND state = 'pending'",
        (status, content_type, body, user_id, route, key, claim_token),
    )


def release(tx: Tx, *, user_id: str, route: str, key: str, claim_token: str) -> None:
    """Give a pending claim up (the request failed before moving anything): a retry may run."""
    tx.execute(
        "DELETE FROM idempotency_keys WHERE user_id = ? AND route = ? AND idem_key = ? AND claim_token = ?"
        " AND state = 'pending'",
        (user_id, route, key, claim_token),
    )


def forget_older_than(tx: Tx, before_ms: int) -> int:
    return len(tx.execute("DELETE FROM idempotency_keys WHERE created_at < ? RETURNING idem_key", (before_ms,)))
