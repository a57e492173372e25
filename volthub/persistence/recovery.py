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
    row this process owns. Each kind goes as one statement over arrays of keys and states:
    a stopping process writes thousands at once, and a restart's reconnects a few hundred
    a second per process, where a statement per row cost PostgreSQL more than its row."""
    ended = [key for key, state, _ in writes if state is None]
    live = [(key, state) for key, state, is_live in writes if state is not None and is_live]
    dropped = [(key, state) for key, state, is_live in writes if state is not None and not is_live]
    if ended:
        tx.execute("DELETE FROM recovery_states WHERE state_key = ANY(?::text[]) AND owner = ?", (ended, owner))
    if live:
        _upsert(tx, owner, live, 1, expires_ms, "owner = excluded.owner, live = 1", "")
    if dropped:
        _upsert(tx, owner, dropped, 0, expires_ms, "live = 0", " WHERE recovery_states.owner = excluded.owner")


def _upsert(
    tx: Tx, owner: str, rows: list[tuple[str, str]], live: int, expires_ms: int, claim: str, only_if: str
) -> None:
    """Insert or update `rows` (key, state) in one statement; `claim` and `only_if` say
    what an existing row becomes, and when."""
    tx.execute(
        "INSERT INTO recovery_states (state_key, owner, live, state, expires_at) "
        "SELECT given.state_key, ?, ?, given.state, ? FROM unnest(?::text[], ?::text[]) AS given (state_key, state) "
        f"ON CONFLICT (state_key) DO UPDATE SET {claim}, state = excluded.state, "
        f"expires_at = excluded.expires_at{only_if}",
        (owner, live, expires_ms, [key for key, _ in rows], [state for _, state in rows]),
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
