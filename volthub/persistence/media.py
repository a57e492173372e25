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


def insert(tx: Tx, media: Media) -> None:
    records.insert(tx, "media", media)


def get(tx: Tx, media_id: str) -> Media | None:
    return Media.fetch_one(tx, f"SELECT {Media.columns()} FROM media WHERE id = ?", (media_id,))


def delete(tx: Tx, media_id: str) -> Media | None:
    found = get(tx, media_id)
    if found is not None:
        tx.execute("DELETE FROM media WHERE id = ?", (media_id,))
    return found
