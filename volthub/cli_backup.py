"""`volthub backup --to FILE` and `volthub restore --from FILE`.

- `backup`: SQLite, an online snapshot through SQLite's backup API, taken while the server
  serves; PostgreSQL, `pg_dump --format=custom`. FILE is replaced only once the new copy is
  whole.
- `restore`: into an empty database only (a new SQLite file, a new PostgreSQL database);
  one that holds any table is refused. `volthub serve` (or `volthub migrate`) then brings the
  restored schema up to the running version's.

The work is in volthub.persistence.backup; both take `--config` / `--database` as every
command does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from volthub.cli import _common, command, failed, settings_from


def _configure_backup(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument(
        "--to", metavar="FILE", required=True, type=Path, help="where to write the backup (replaced when it exists)"
    )


@command("backup", _configure_backup)
def backup_command(args: argparse.Namespace) -> int:
    """Back up the database while the server serves: SQLite's online backup, or pg_dump (custom format)."""
    from volthub.logs import mask_url
    from volthub.persistence.backup import BackupError, backup

    url = settings_from(args).database.url
    try:
        backup(url, args.to)
    except BackupError as exc:
        return failed(str(exc))
    print(f"backed up {mask_url(url)} to {args.to} ({args.to.stat().st_size} bytes)")
    return 0


def _configure_restore(parser: argparse.ArgumentParser) -> None:
    _common(parser)
    parser.add_argument("--from", dest="source", metavar="FILE", required=True, type=Path, help="a backup file")


@command("restore", _configure_restore)
def restore_command(args: argparse.Namespace) -> int:
    """Restore a backup into an empty database (one that holds any table is refused)."""
    from volthub.logs import mask_url
    from volthub.persistence.backup import BackupError, restore

    url = settings_from(args).database.url
    try:
        restore(url, args.source)
    except BackupError as exc:
        return failed(str(exc))
    print(f"restored {args.source} into {mask_url(url)}; `volthub serve` or `volthub migrate` brings it up to date")
    return 0
