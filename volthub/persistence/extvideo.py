"""Connections to the external video platform, and authorisations in flight."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import Tx
from volthub.persistence.records import Record, insert


@dataclass(frozen=True)
class Connection(Record):
    user_id: str
    account_id: str
    account_name: str
    account_url: str | None
    access_token: str
    refresh_token: str | None
    expires_at: int | None
    scope: str
    status: str
    connected_at: int
    updated_at: int


@dataclass(frozen=True)
class PendingState:
    """An authorisation in flight, as the callback finds it."""

    user_id: str
    browser_hash: str | None
    code_verifier: str | None


def add_state(
    tx: Tx,
    state_hash: str,
    user_id: str,
    now_ms: int,
    expires_at: int,
    browser_hash: str,
    code_verifier: str | None,
) -> None:
    tx.execute("DELETE FROM extvideo_states WHERE expires_at <= ?", (now_ms,))
    tx.execute(
        "INSERT INTO extvideo_states (state_hash, user_id, created_at, expires_at, browser_hash, code_verifier)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (state_hash, user_id, now_ms, expires_at, browser_hash, code_verifier),
    )


def take_state(tx: Tx, state_hash: str, now_ms: int) -> PendingState | None:
    """The live state; it is used up either way (single use, whoever presents it)."""
    rows = tx.execute(
        "DELETE FROM extvideo_states WHERE state_hash = ? RETURNING user_id, expires_at, browser_hash, code_verifier",
        (state_hash,),
    )
    if not rows or int(rows[0]["expires_at"]) <= now_ms:
        return None
    row = rows[0]
    return PendingState(str(row["user_id"]), row["browser_hash"], row["code_verifier"])


def get(tx: Tx, user_id: str) -> Connection | None:
    return Connection.fetch_one(
        tx, f"SELECT {Connection.columns()} FROM extvideo_connections WHERE user_id = ?", (user_id,)
    )


def save(tx: Tx, connection: Connection) -> None:
    tx.execute("DELETE FROM extvideo_connections WHERE user_id = ?", (connection.user_id,))
    insert(tx, "extvideo_connections", connection)


def update_tokens(
    tx: Tx, user_id: str, access_token: str, refresh_token: str | None, expires_at: int | None, now_ms: int
) -> None:
    tx.execute(
        "UPDATE extvideo_connections SET access_token = ?, refresh_token = COALESCE(?, refresh_token),"
        " expires_at = ?, status = 'connected', updated_at = ? WHERE user_id = ?",
        (access_token, refresh_token, expires_at, now_ms, user_id),
    )


def mark_reauth(tx: Tx, user_id: str, now_ms: int) -> None:
    tx.execute(
        "UPDATE extvideo_connections SET status = 'reauth_required', updated_at = ? WHERE user_id = ?",
        (now_ms, user_id),
    )


def delete(tx: Tx, user_id: str) -> Connection | None:
    found = get(tx, user_id)
    if found is not None:
        tx.execute("DELETE FROM extvideo_connections WHERE user_id = ?", (user_id,))
    return found
