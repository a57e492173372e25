"""Rate-limit budgets in the database, shared by every process (PostgreSQL).

The arithmetic is `volthub.protocol.ratelimit.decide`; this module only keeps its one
number per key, and never lets concurrent requests of one client, on any process, both
spend the last unit of a budget.

`SharedBudgets` counts the requests that arrive together as one batch
(`compare_and_set_many`): one statement reads every key's number, and one writes the new
numbers only where a row still holds the one it read, each statement atomic on its own (no
transaction). `hit`, for when that keeps losing to other writers, locks the key's row for
its transaction, so they are counted one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import outcome

from volthub.persistence.database import Database, Tx
from volthub.persistence.group_commit import GroupQueue, QueuedCall, fail_all
from volthub.protocol.ratelimit import Decision, Rate, decide

# Rounds in which a batch's key may lose its write before `compare_and_set_many` leaves its
# requests to `hit`'s row lock.
_ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class Spend:
    """One request against the budget stored under `key`."""

    key: str
    rate: Rate
    now_ns: int


def compare_and_set_many(tx: Tx, spends: Sequence[Spend]) -> list[Decision | None]:
    """Count `spends` (in their order) against their keys' budgets with statements that need
    no transaction (`Database.statements`): one reads every key's number, one writes the new
    numbers where the row still holds the one read (and one inserts the keys that had no
    row). Requests of a key whose write lost are decided again on a fresh read; None for
    those that kept losing: the caller then uses `hit`."""
    decisions: list[Decision | None] = [None] * len(spends)
    pending = list(range(len(spends)))
    for _ in range(_ATTEMPTS):
        keys = sorted({spends[index].key for index in pending})
        rows = tx.execute("SELECT key, tat FROM rate_limit_budgets WHERE key = ANY(?)", (keys,))
        stored: dict[str, int] = {row["key"]: int(row["tat"]) for row in rows}
        tats = dict(stored)  # each key's number as this batch's requests spend it, in order
        expiry: dict[str, int] = {}
        for index in pending:
            spend = spends[index]
            decision, tat = decide(spend.rate, tats.get(spend.key) or None, spend.now_ns)
            decisions[index] = decision
            if decision.allowed:
                tats[spend.key] = tat
                expiry[spend.key] = decision.reset_ns
        won = _write(tx, stored, tats, expiry)
        pending = [index for index in pending if spends[index].key in expiry and spends[index].key not in won]
        for index in pending:
            decisions[index] = None
        if not pending:
            break
    return decisions


def _write(tx: Tx, stored: dict[str, int], tats: dict[str, int], expiry: dict[str, int]) -> set[str]:
    """Write each spent key's new number over the one read (a key not read is inserted);
    the keys written. Rows are locked in key order, so two processes' batches never wait
    for each other in a cycle."""
    won: set[str] = set()
    known = sorted(key for key in expiry if key in stored)
    if known:
        rows = tx.execute(
            "WITH spent AS (SELECT * FROM unnest(?::text[], ?::numeric[], ?::numeric[], ?::bigint[])"
            " AS s(key, old, tat, expires_ns)),"
            " locked AS (SELECT budget.key FROM rate_limit_budgets budget JOIN spent"
            " ON spent.key = budget.key AND budget.tat = spent.old ORDER BY budget.key FOR UPDATE OF budget)"
            " UPDATE rate_limit_budgets budget SET tat = spent.tat, expires_ns = spent.expires_ns"
            " FROM spent JOIN locked USING (key) WHERE budget.key = spent.key RETURNING budget.key",
            (known, [stored[key] for key in known], [tats[key] for key in known], [expiry[key] for key in known]),
        )
        won.update(row["key"] for row in rows)
    new = sorted(key for key in expiry if key not in stored)
    if new:
        rows = tx.execute(
            "INSERT INTO rate_limit_budgets (key, tat, expires_ns)"
            " SELECT * FROM unnest(?::text[], ?::numeric[], ?::bigint[]) AS s(key, tat, expires_ns) ORDER BY key"
            " ON CONFLICT (key) DO NOTHING RETURNING key",
            (new, [tats[key] for key in new], [expiry[key] for key in new]),
        )
        won.update(row["key"] for row in rows)
    return won


class _QueuedSpend(QueuedCall["Decision | None"]):
    """A spend waiting for its batch (`fn` is the spend counted alone)."""

    __slots__ = ("spend",)

    def __init__(self, spend: Spend) -> None:
        super().__init__(lambda tx: compare_and_set_many(tx, [spend])[0])
        self.spend = spend


class SharedBudgets:
    """Budget spends of the requests in flight, counted in the database in batches: the
    spends that arrive while a batch is running form the next one, so a busy process pays
    two statements per batch instead of two per request."""

    def __init__(self, database: Database, acquire_timeout: float) -> None:
        self._database = database
        # One batch in flight (a second beside it only once it has run long): what queues
        # meanwhile is the next batch. `acquire_timeout`: how long a spend may wait for it.
        self._queue = GroupQueue(2, acquire_timeout, self._count)

    async def spend(self, spend: Spend) -> Decision | None:
        """The request's decision; None when other writers kept changing its key first."""
        return (await self._queue.outcome(_QueuedSpend(spend))).unwrap()

    async def _count(self, batch: list[QueuedCall[Any]]) -> None:
        spends = [job.spend for job in batch if isinstance(job, _QueuedSpend)]
        try:
            decisions = await self._database.statements(lambda tx: compare_and_set_many(tx, spends))
        except Exception as exc:
            fail_all(batch, exc)
            return
        for job, decision in zip(batch, decisions, strict=True):
            job.result = outcome.Value(decision)


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


# Rows `forget_full` deletes at most in one statement.
FORGET_BATCH = 5_000


def forget_full(tx: Tx, now_ns: int, batch: int = FORGET_BATCH) -> int:
    """Delete rows whose budget is full again (they mean the same as no row)."""
    # SKIP LOCKED: a row a batch is writing is left for next time, so the delete never waits
    # for a batch (which locks its rows in key order) while holding rows the batch wants.
    rows = tx.execute(
        "DELETE FROM rate_limit_budgets WHERE key IN"
        " (SELECT key FROM rate_limit_budgets WHERE expires_ns < ? LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING key",
        (now_ns, batch),
    )
    return len(rows)
