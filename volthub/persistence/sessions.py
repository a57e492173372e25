"""First-party sessions: the stored side of session tokens, so a user can list and revoke them.

A revoked session keeps its row (`revoked_at`) until it expires; expired rows are purged
as new sessions are made.
"""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import Tx
from volthub.persistence.records import Record, insert


@dataclass(frozen=True)
class Session(Record):
    id: str
    user_id: str
    label: str
    created_at: int  # epoch ms
    expires_at: int  # epoch ms
    revoked_at: int | None

    def active(self, now_ms: int) -> bool:
        return self.revoked_at is None and self.expires_at > now_ms


def create(tx: Tx, session: Session) -> None:
    insert(tx, "auth_sessions", session)


def get(tx: Tx, session_id: str) -> Session | None:
    return Session.fetch_one(tx, f"SELECT {Session.columns()} FROM auth_sessions WHERE id = ?", (session_id,))


def active_of_user(tx: Tx, user_id: str, now_ms: int) -> list[Session]:
    """The user's sessions neither revoked nor expired, newest first."""
    rows = tx.execute(
        f"SELECT {Session.columns()} FROM auth_sessions WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ?"
        " ORDER BY created_at DESC, id",
        (user_id, now_ms),
    )
    return [Session.from_row(row) for row in rows]


def revoke(tx: Tx, session_id: str, user_id: str, now_ms: int) -> bool:
    """Revoke the user's active session; False when it is unknown, someone else's, or over."""
    rows = tx.execute(
        "UPDATE auth_sessions SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL"
        " AND expires_at > ? RETURNING id",
        (now_ms, session_id, user_id, now_ms),
    )
    return bool(rows)


def purge_expired(tx: Tx, now_ms: int) -> int:
    rows = tx.execute("DELETE FROM auth_sessions WHERE expires_at <= ? RETURNING id", (now_ms,))
    return len(rows)
