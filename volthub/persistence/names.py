"""The one namespace of names (users, bots, custom bot names), kept unique by a primary key.

A claim is either in use (`reserved_until` NULL) or held until a time after its holder let
it go. Claiming first removes a lapsed hold of that name, then inserts; two racing claims
meet at the primary key, so exactly one wins whatever the backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import IntegrityError, Tx
from volthub.persistence.records import Record


class NameTaken(Exception):
    def __init__(self, name: str, reserved_until: int | None = None) -> None:
        super().__init__(name)
        self.name = name
        self.reserved_until = reserved_until


@dataclass(frozen=True)
class Claim(Record):
    name_lower: str
    kind: str  # user | bot | custom_bot
    holder: str
    claimed_at: int
    released_at: int | None
    reserved_until: int | None


def current(tx: Tx, name: str, now_ms: int) -> Claim | None:
    """The claim that keeps `name` (any case) from being taken now, or None."""
    row = tx.one(
        "SELECT name_lower, kind, holder, claimed_at, released_at, reserved_until FROM name_claims"
        " WHERE name_lower = ? AND (reserved_until IS NULL OR reserved_until > ?)",
        (name.lower(), now_ms),
    )
    return Claim.from_row(row) if row else None


def claim(tx: Tx, name: str, kind: str, holder: str, now_ms: int) -> None:
    """Take `name` for `holder`, or raise `NameTaken`. A holder may take back a name it
    still holds in reserve (a bot reverting and then choosing its old name again)."""
    lowered = name.lower()
    tx.execute(
        "DELETE FROM name_claims WHERE name_lower = ? AND reserved_until IS NOT NULL AND reserved_until <= ?",
        (lowered, now_ms),
    )
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO name_claims (name_lower, kind, holder, claimed_at) VALUES (?, ?, ?, ?)",
                (lowered, kind, holder, now_ms),
            )
        return
    except IntegrityError:
        pass
    rows = tx.execute(
        "UPDATE name_claims SET released_at = NULL, reserved_until = NULL, claimed_at = ?"
        " WHERE name_lower = ? AND kind = ? AND holder = ? RETURNING name_lower",
        (now_ms, lowered, kind, holder),
    )
    if not rows:
        held = current(tx, name, now_ms)
        raise NameTaken(name, held.reserved_until if held else None)


def release(tx: Tx, name: str, holder: str, now_ms: int, hold_ms: int) -> int:
    """Stop using `name`; it stays reserved for `hold_ms`. Returns the end of the hold."""
    until = now_ms + hold_ms
    tx.execute(
        "UPDATE name_claims SET released_at = ?, reserved_until = ? WHERE name_lower = ? AND holder = ?",
        (now_ms, until, name.lower(), holder),
    )
    return until


def holds_of(tx: Tx, holder_prefix: str, now_ms: int) -> list[Claim]:
    """Names in reserve whose holder starts with `holder_prefix` (a bot's past names; the
    holders are made of UUIDs and colons, so the prefix holds no LIKE wildcard)."""
    rows = tx.execute(
        "SELECT name_lower, kind, holder, claimed_at, released_at, reserved_until FROM name_claims"
        " WHERE holder LIKE ? AND reserved_until IS NOT NULL AND reserved_until > ? ORDER BY released_at",
        (holder_prefix + "%", now_ms),
    )
    return [Claim.from_row(row) for row in rows]
