"""Rate-limit budgets in the database, shared by every process (PostgreSQL).

The arithmetic is `volthub.protocol.ratelimit.decide`; this module only keeps its one
number per key, and never lets concurrent requests of one client, on any process, both
spend the last unit of a budget: `compare_and_set` writes the new number only where the
row still holds the one it read (each statement atomic on its own, no transaction), and
`hit`, for when that keeps losing to other writers, locks the key's row for its
transaction, so they are counted one after another.
"""

from __future__ import annotations

from volthub.persistence.database import Tx
from volthub.protocol.ratelimit import Decision, Rate, decide

# Lost compare-and-sets before `compare_and_set` leaves the key to `hit`'s row lock.
_ATTEMPTS = 4


def compare_and_set(tx: Tx, key: str, rate: Rate, now_ns: int) -> Decision | None:
    """One request against the key's budget in two statements that need no transaction
    (`Database.statements`): read the number, write the new one only if it is unchanged.
    None when other requests kept changing it first: the caller then uses `hit`."""
    for _ in range(_ATTEMPTS):
        row = tx.one("SELECT tat FROM rate_limit_budgets WHERE key = ?", (key,))
        stored = row["tat"] if row is not None else None
        decision, new_tat = decide(rate, int(stored) if stored else None, now_ns)
        if not decision.allowed:
            return decision
        if row is None:
            written = tx.execute(
                "INSERT INTO rate_limit_budgets (key, tat, expires_ns) VALUES (?, ?, ?)"
                " ON CONFLICT (key) DO NOTHING RETURNING key",
                (key, new_tat, decision.reset_ns),
            )
        else:
            written = tx.execute(
                "UPDATE rate_limit_budgets SET tat = ?, expires_ns = ? WHERE key = ? AND tat = ? RETURNING key",
                (new_tat, decision.reset_ns, key, stored),
            )
        if written:
            return decision
    return None


def hit(tx: Tx, key: str, rate: Rate, now_ns: int) -> Decision:
    decision, new_tat = decide(rate, _locked_tat(tx, key), now_ns)
    if decision.allowed:
        tx.execute(
            "UPDATE rate_limit_budgets SET tat = ?, expires_ns = ? WHERE key = ?", (new_tat, decision.reset_ns, key)
        )
    return decision


def _locked_tat(tx: Tx, key: str) -> int | None:
    """The key's stored value, its row locked for the transaction (None: a new budget).

    A key in use has its row: one statement. A new key's row is inserted first (a no-op
    when a concurrent request inserted it), so FOR UPDATE always has a row to lock: two
    first requests of a new key cannot both start from an empty budget."""
    locked = "SELECT tat FROM rate_limit_budgets WHERE key = ? FOR UPDATE"
    row = tx.one(locked, (key,))
    if row is None:
        tx.execute(
            "INSERT INTO rate_limit_budgets (key, tat, expires_ns) VALUES (?, 0, 0) ON CONFLICT (key) DO NOTHING",
            (key,),
        )
        row = tx.one(locked, (key,))
    stored = row["tat"] if row is not None else None
    return int(stored) if stored else None


def forget_full(tx: Tx, now_ns: int, batch: int = 5_000) -> int:
    """Delete rows whose budget is full again (they mean the same as no row)."""
    rows = tx.execute(
        "DELETE FROM rate_limit_budgets WHERE key IN"
        " (SELECT key FROM rate_limit_budgets WHERE expires_ns < ? LIMIT ?) RETURNING key",
        (now_ns, batch),
    )
    return len(rows)
