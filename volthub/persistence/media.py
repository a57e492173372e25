"""Uploaded images (emotes, journal images): metadata, and the bytes when stored here."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence import records
from volthub.persistence.database import Tx
from volthub.persistence.records import Record


@dataclass(frozen=True)
class Media(Record):
    id: str
    owner_id: str | None
    purpose: str
    content_type: str
    size_bytes: int
    sha256: str
    data: str | None  # base64, when stored in the database
    path: str | None  # file name under the media directory, when stored on disk
    created_at: int


_COLUMNS = "id, owner_id, purpose, content_type, size_bytes, sha256, data, path, created_at"


def insert(tx: Tx, media: Media) -> None:
    records.insert(tx, "media", media)


def get(tx: Tx, media_id: str) -> Media | None:
    row = tx.one(f"SELECT {_COLUMNS} FROM media WHERE id = ?", (media_id,))
    return Media.from_row(row) if row else None


def delete(tx: Tx, media_id: str) -> Media | None:
    found = get(tx, media_id)
    if found is not None:
        tx.execute("DELETE FROM media WHERE id = ?", (media_id,))
    return found
