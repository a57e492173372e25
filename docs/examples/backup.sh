#!/usr/bin/env bash
# One volthub backup, for cron or a systemd timer: a file named after the time in DIRECTORY,
# then, once it is written, the backups in DIRECTORY older than KEEP_DAYS days are removed
# (a failed backup removes nothing). The database is the one volthub's settings name; the
# options after KEEP_DAYS go to `volthub backup` (e.g. --config /etc/volthub/volthub.toml).
# Usage: docs/examples/backup.sh DIRECTORY KEEP_DAYS [OPTION...]
# VOLTHUB names the volthub program (default: the one on PATH).
set -euo pipefail
dir=${1:?usage: backup.sh DIRECTORY KEEP_DAYS [OPTION...]}
keep_days=${2:?usage: backup.sh DIRECTORY KEEP_DAYS [OPTION...]}
shift 2
"${VOLTHUB:-volthub}" backup "$@" --to "$dir/volthub-$(date -u +%Y%m%dT%H%M%SZ).backup"
find "$dir" -maxdepth 1 -type f -name 'volthub-*.backup' -mtime "+$keep_days" -delete
