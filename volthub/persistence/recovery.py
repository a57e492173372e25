"""Kept Socket.IO connection states of a PostgreSQL deployment (`recovery_states`)."""

from __future__ import annotations

from collections.abc import Sequence

from volthub.persistence.database import Tx

# (state key, state JSON, live) of one write; state None: the connection ended for good.
Write = tuple[str, str | None, bool]


def write(tx: Tx, owner: str, writes: Sequence[Write], expires_ms: int) -> None:
    """Apply a process's writes (at most one per key: each key's newest). A live state is
    this process's from now on; a dropped one replaces only a row this process owns (or
    none: another process that took the state over keeps it); an ended one deletes only a
    row this process owns. Each kind goes as one batch of statements (a stopping process
    writes thousands at once)."""
    ended = [(key, owner) for key, state, _ in writes if state is None]
    live = [(key, owner, state, expires_ms) for key, state, is_live in writes if state is not None and is_live]
    dropped = [(key, owner, state, expires_ms) for key, state, is_live in writes if state is not None and not is_live]
    if ended:
        tx.execute_many("DELETE FROM recovery_states WHERE state_key = ? AND owner = ?", ended)
    if live:
        tx.execute_many(
            "INSERT INTO recovery_states (state_key, owner, live, state, expires_at) VALUES (?, ?, 1, ?, ?) "
            "ON CONFLICT (state_key) DO UPDATE SET owner = excluded.owner, live = 1, state = excluded.state, "
            "expires_at = excluded.expires_at",
            live,
        )
    if dropped:
        tx.execute_many(
            "INSERT INTO recovery_states (state_key, owner, live, state, expires_at) VALUES (?, ?, 0, ?, ?) "
            "ON CONFLICT (state_key) DO UPDATE SET live = 0, state = excluded.state, "
            "expires_at = excluded.expires_at WHERE recovery_states.owner = excluded.owner",
            dropped,
        )


def refresh(tx: Tx, owner: str, expires_ms: int, now_ms: int) -> None:
    """This process's live states stay recoverable until `expires_ms`; expired rows of any
    process (a killed one's, a dropped state nobody came back for) go."""
    tx.execute("UPDATE recovery_states SET expires_at = ? WHERE owner = ? AND live = 1", (expires_ms, owner))
    tx.execute("DELETE FROM recovery_states WHERE expires_at < ?", (now_ms,))


def retire(tx: Tx, owner: str, expires_ms: int) -> None:
    """A stopping process's live states become dropped ones kept until `expires_ms`: one
    statement for every connection its shutdown ended."""
    tx.execute("UPDATE recovery_states SET live = 0, expires_at = ? WHERE owner = ? AND live = 1", (expires_ms, owner))


def take_many(tx: Tx, keys: Sequence[str], now_ms: int) -> dict[str, str]:
    """The states under `keys` that are there and not expired, once each (their rows go,
    expired or not): one statement for a burst of reconnects."""
    if not keys:
        return {}
    marks = ", ".join("?" * len(keys))
    rows = tx.execute(
        f"DELETE FROM recovery_states WHERE state_key IN ({marks}) RETURNING state_key, state, expires_at", tuple(keys)
    )
    return {str(row["state_key"]): str(row["state"]) for row in rows if int(row["expires_at"]) >= now_ms}
