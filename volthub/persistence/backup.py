"""Backups of a volthub database, and restoring one into an empty database.

- SQLite: SQLite's online backup API copies the database inside one read transaction, so
  the copy is the database at one committed moment while the server goes on writing (in WAL
  mode readers never block the writer, nor the writer them). The copy is one self-contained
  file (rollback journal, no write-ahead log beside it), written beside FILE and renamed
  into place once complete: a cut-short backup never replaces a good one.
- PostgreSQL: `pg_dump --format=custom` (one consistent snapshot too), restored with
  `pg_restore` in one transaction, so a failed restore leaves the database empty. The
  password never appears on a command line: the tools get it through `PGPASSWORD`.

Restoring refuses a database that holds any table: a restore is for an empty database (a new
file, a new `CREATE DATABASE`), never a merge into a live one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import psycopg

from volthub.logs import mask_url

# The table every volthub database has (the migrations' record): a backup without it is not one.
_MARK_TABLE = "schema_migrations"


class BackupError(Exception):
    """A backup or restore that cannot be done; the message is one line for the operator."""


def sqlite_path(url: str) -> Path:
    """The file a `sqlite:///path` URL names (`sqlite:////absolute`, `sqlite:///relative`)."""
    path = url[len("sqlite:///") :]
    if not path:
        raise ValueError("sqlite URL needs a file path: sqlite:///var/volthub.db")
    return Path(path)


def backup(url: str, target: Path) -> None:
    """Write a backup of the database at `url` to `target` (replaced once the copy is whole)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        if url.startswith("sqlite:///"):
            _sqlite_backup(sqlite_path(url), partial)
        else:
            _run_tool("pg_dump", ["--format=custom", f"--file={partial}"], url)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def restore(url: str, source: Path) -> None:
    """Restore the backup `source` into the empty database at `url`."""
    if not source.is_file():
        raise BackupError(f"no backup file at {source}")
    found = tables_in(url)
    if found:
        raise BackupError(
            f"{mask_url(url)} is not empty ({len(found)} tables, e.g. {found[0]}): "
            "restore into a new database (or a new file) and point [database] url at it"
        )
    if url.startswith("sqlite:///"):
        _sqlite_restore(source, sqlite_path(url))
    else:
        _run_tool(
            "pg_restore", ["--no-owner", "--no-privileges", "--single-transaction", "--exit-on-error"], url, source
        )


def tables_in(url: str) -> list[str]:
    """The tables of the database at `url`, by name (none for a file that does not exist)."""
    if url.startswith("sqlite:///"):
        path = sqlite_path(url)
        if not path.exists():
            return []
        with contextlib.closing(_sqlite_connect(path)) as connection:
            return _sqlite_tables(connection)
    query = (
        "SELECT table_schema || '.' || table_name FROM information_schema.tables"
        " WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1"
    )
    try:
        with psycopg.connect(url, connect_timeout=10) as connection:
            return [row[0] for row in connection.execute(query)]
    except psycopg.Error as exc:
        raise BackupError(f"cannot reach {mask_url(url)}: {one_line(str(exc))}") from None


def one_line(text: str) -> str:
    """A driver's or a tool's message (often several lines) as one line."""
    return " ".join(text.split())


# --- SQLite ------------------------------------------------------------------------------


def _sqlite_connect(path: Path) -> sqlite3.Connection:
    try:
        return sqlite3.connect(path, timeout=30.0)
    except sqlite3.Error as exc:
        raise BackupError(f"cannot open {path}: {exc}") from None


def _sqlite_tables(connection: sqlite3.Connection) -> list[str]:
    try:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    except sqlite3.Error as exc:  # not a database file, or an unreadable one
        raise BackupError(f"cannot read {connection_path(connection)}: {exc}") from None
    return [row[0] for row in rows]


def connection_path(connection: sqlite3.Connection) -> str:
    row = connection.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else "the database"


def _sqlite_backup(path: Path, partial: Path) -> None:
    if not path.is_file():
        raise BackupError(f"no database file at {path}")
    partial.unlink(missing_ok=True)
    with contextlib.closing(_sqlite_connect(path)) as source, contextlib.closing(_sqlite_connect(partial)) as copy:
        if _MARK_TABLE not in _sqlite_tables(source):
            raise BackupError(f"{path} is not a volthub database (no {_MARK_TABLE} table)")
        try:
            source.backup(copy)  # every page in one step: one read transaction, one moment
            copy.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
        except sqlite3.Error as exc:
            raise BackupError(f"backup of {path} failed: {exc}") from None
    _fsync(partial)


def _sqlite_restore(source: Path, path: Path) -> None:
    with contextlib.closing(_sqlite_connect(source)) as backup_copy:
        if _MARK_TABLE not in _sqlite_tables(backup_copy):
            raise BackupError(f"{source} is not a volthub SQLite backup (no {_MARK_TABLE} table)")
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(_sqlite_connect(path)) as restored:
            try:
                backup_copy.backup(restored)  # one write transaction on the new file
                restored.execute("PRAGMA journal_mode=WAL")  # as the server keeps it
            except sqlite3.Error as exc:
                raise BackupError(f"restore into {path} failed: {exc}") from None
    _fsync(path)


def _fsync(path: Path) -> None:
    with path.open("rb") as copy:
        os.fsync(copy.fileno())


# --- PostgreSQL --------------------------------------------------------------------------


def _run_tool(tool: str, options: list[str], url: str, *files: Path) -> None:
    """Run pg_dump or pg_restore against `url`, the password through the environment."""
    program = shutil.which(tool)
    if program is None:
        raise BackupError(f"{tool} is not installed: install PostgreSQL's client tools (Debian: postgresql-client)")
    address, environment = _without_password(url)
    completed = subprocess.run(
        [program, *options, f"--dbname={address}", *map(str, files)],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        problem = one_line(completed.stderr) or f"exit status {completed.returncode}"
        raise BackupError(f"{tool} failed for {mask_url(url)}: {problem}")


def _without_password(url: str) -> tuple[str, dict[str, str]]:
    """`url` without its password, and the environment that carries it (PGPASSWORD)."""
    parts = urlsplit(url)
    environment = dict(os.environ)
    if parts.password is None:
        return url, environment
    environment["PGPASSWORD"] = unquote(parts.password)
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.netloc.rsplit("@", 1)[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{netloc}")), environment
