"""The per-app webhook counter behind the cap (migration 0007), on both backends."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import insert_app
from tests.conftest import stored_user as _owner
from volthub.persistence import webhooks as repo


def _create(tx: Any, client_id: str, limit: int | None) -> repo.Webhook:
    return repo.create_webhook(
        tx,
        webhook_id=str(uuid.uuid4()),
        client_id=client_id,
        url="https://hooks.example.com/in",
        events=["channel.follow"],
        secret="whsec_x",
        now_ms=1,
        max_per_app=limit,
    )


def _count(tx: Any, client_id: str) -> int:
    return int(tx.scalar("SELECT webhook_count FROM apps WHERE client_id = ?", (client_id,)))


async def test_the_counter_follows_creates_and_deletes_and_guards_the_cap(db: Any) -> None:
    client_id = await insert_app(db, await _owner(db))
    first = await db.write(lambda tx: _create(tx, client_id, 2))
    await db.write(lambda tx: _create(tx, client_id, None))  # no cap: counted all the same
    assert await db.read(lambda tx: _count(tx, client_id)) == 2
    with pytest.raises(repo.WebhookLimitReached):
        await db.write(lambda tx: _create(tx, client_id, 2))
    assert await db.read(lambda tx: repo.count_for_app(tx, client_id)) == 2  # nothing inserted
    assert await db.write(lambda tx: repo.delete_webhook(tx, client_id, first.id)) is True
    assert await db.write(lambda tx: repo.delete_webhook(tx, client_id, first.id)) is False  # no double decrement
    assert await db.read(lambda tx: _count(tx, client_id)) == 1
    await db.write(lambda tx: _create(tx, client_id, 2))
    assert await db.read(lambda tx: (_count(tx, client_id), repo.count_for_app(tx, client_id))) == (2, 2)


async def test_the_migration_backfills_the_counter(db: Any) -> None:
    """Migration 0007 counts the webhooks apps already had (its UPDATE, replayed here)."""
    from volthub.persistence.migrate import available, statements

    [migration] = [m for m in available(db.dialect) if m.version == 7]
    backfill = statements(migration.sql)[-1]
    client_id = await insert_app(db, await _owner(db))
    for _ in range(3):
        await db.write(lambda tx: _create(tx, client_id, None))

    def replay(tx: Any) -> int:
        tx.execute("UPDATE apps SET webhook_count = 0 WHERE client_id = ?", (client_id,))
        tx.execute(backfill)
        return _count(tx, client_id)

    assert await db.write(replay) == 3
