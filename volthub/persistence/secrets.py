"""Server-wide secrets kept in the database, so every process shares them."""

from __future__ import annotations

import secrets
from collections.abc import Callable

from volthub.persistence.database import IntegrityError, Tx


def get_or_create(
    name: str, now_ms: int, make: Callable[[], str] = lambda: secrets.token_urlsafe(48)
) -> Callable[[Tx], str]:
    def run(tx: Tx) -> str:
        existing = tx.scalar("SELECT value FROM server_secrets WHERE name = ?", (name,))
        if existing is not None:
            return str(existing)
        value = make()
        try:
            with tx.savepoint():
                tx.execute(
                    "INSERT INTO server_secrets (name, value, created_at) VALUES (?, ?, ?)",
                    (name, value, now_ms),
                )
        except IntegrityError:  # another process created it first: use theirs
            return str(tx.scalar("SELECT value FROM server_secrets WHERE name = ?", (name,)))
        return value

    return run
