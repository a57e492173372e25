"""Versioned SQL migrations: `NNNN_name.sql`, or `NNNN_name.<dialect>.sql` where the
backends must differ. Applied in order, each in its own transaction, exactly once."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from importlib import resources

from volthub.persistence import users
from volthub.persistence.database import Database, Tx

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+?)(?:\.(sqlite|postgresql))?\.sql$")
# Serialises concurrent `migrate` runs of several processes on one PostgreSQL database.
_PG_LOCK_KEY = 0x766F6C74
# The migration that adds the usernames' confusable skeletons, which are computed in Python.
USERNAME_SKELETONS = 53


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available(dialect: str) -> list[Migration]:
    chosen: dict[int, tuple[bool, Migration]] = {}
    for entry in resources.files("volthub.persistence.migrations").iterdir():
        match = _NAME.match(entry.name)
        if not match or match.group(3) not in (None, dialect):
            continue
        specific = match.group(3) is not None
        migration = Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8"))
        if migration.version not in chosen or specific:
            chosen[migration.version] = (specific, migration)
    return [chosen[v][1] for v in sorted(chosen)]


def statements(sql: str) -> list[str]:
    """Split a script on `;` at line ends, except inside a `$$`-quoted body (a function's)."""
    without_comments = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    found: list[str] = []
    for piece in re.split(r";\s*(?:\n|$)", without_comments):
        if found and found[-1].count("$$") % 2:  # still inside a body: the `;` was its own
            found[-1] += ";\n" + piece
        else:
            found.append(piece)
    return [statement.strip() for statement in found if statement.strip()]


def _ensure_table(tx: Tx) -> set[int]:
    if tx.dialect == "postgresql":
        tx.execute("SELECT pg_advisory_xact_lock(?)", (_PG_LOCK_KEY,))
    tx.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"
    )
    return {row["version"] for row in tx.execute("SELECT version FROM schema_migrations")}


def _apply_pending(tx: Tx) -> list[str]:
    done = _ensure_table(tx)
    applied = []
    for migration in available(tx.dialect):
        if migration.version in done:
            continue
        for statement in statements(migration.sql):
            tx.execute(statement)
        tx.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, int(time.time() * 1000)),
        )
        applied.append(f"{migration.version:04d}_{migration.name}")
        if migration.version == USERNAME_SKELETONS:
            _report_display_names(users.fill_username_skeletons(tx))
    return applied


def _report_display_names(found: list[tuple[str, str, str]]) -> None:
    """Display names set before the look-alike rules that break them: logged for the
    operator (docs/operating/upgrades.md), never changed."""
    for username, display_name, why in found:
        log.warning("display name %r of user %s %s; it is kept as it is", display_name, username, why)
    if found:
        log.warning("%d display name(s) break the display-name rules: ask their owners to change them", len(found))


async def migrate(database: Database) -> list[str]:
    """Apply what is pending in one transaction: a failed migration leaves no trace."""
    return await database.write(_apply_pending)


def migrate_sync(database: Database) -> list[str]:
    return database.run_sync(_apply_pending)
