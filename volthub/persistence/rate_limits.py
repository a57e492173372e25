"""Rate-limit budgets in the database, shared by every process (PostgreSQL).

The arithmetic is `volthub.protocol.ratelimit.decide`; this module only keeps its one
number per key. A hit locks the key's row for its transaction, so concurrent requests of
one client, on any process, are counted one after another and never both spend the last
unit of a budget.
"""

from __future__ import annotations

from volthub.persistence.database import Tx
from volthub.protocol.ratelimit import Decision, Rate, decide


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
