"""Persistence: one Store interface (`Database` + repositories), SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from volthub.persistence.database import (
    Database,
    DatabaseError,
    DatabaseUnavailable,
    IntegrityError,
    InvalidData,
    Row,
    StorageUnavailable,
    Tx,
)
from volthub.persistence.migrate import migrate, migrate_sync


def open_database(url: str, pool_size: int = 8, acquire_timeout: float = 5.0) -> Database:
    """Build (not yet open) the backend a database URL names.

    `sqlite:///relative/path.db`, `sqlite:////absolute/path.db`, `postgresql://user@host/db`.
    """
    if url.startswith("sqlite:///"):
        from volthub.persistence.sqlite import SQLiteDatabase

        path = url[len("sqlite:///") :]
        if not path:
            raise ValueError("sqlite URL needs a file path: sqlite:///var/volthub.db")
        return SQLiteDatabase(url, Path(path), pool_size, acquire_timeout)
    if url.startswith(("postgresql://", "postgres://")):
        from volthub.persistence.postgres import PostgresDatabase

        return PostgresDatabase(url, pool_size, acquire_timeout)
    raise ValueError(f"unsupported database URL {url!r}: use sqlite:/// or postgresql://")


__all__ = [
    "Database",
    "DatabaseError",
    "DatabaseUnavailable",
    "IntegrityError",
    "InvalidData",
    "Row",
    "StorageUnavailable",
    "Tx",
    "migrate",
    "migrate_sync",
    "open_database",
]
