"""Journals and their images."""

from __future__ import annotations

from dataclasses import dataclass

from volthub.persistence.database import IntegrityError, Tx
from volthub.persistence.pagination import encode_cursor, newest_first
from volthub.persistence.records import Record

_COLUMNS = (
    "j.id, j.user_id, j.slug, j.title, j.body, j.status, j.created_at, j.updated_at, j.published_at,"
    " u.username, u.display_name, j.html, j.excerpt"
)
_FROM = " FROM journals j JOIN users u ON u.id = j.user_id"


class SlugTaken(Exception):
    pass


@dataclass(frozen=True)
class Journal(Record):
    id: str
    user_id: str
    username: str
    display_name: str
    slug: str
    title: str
    body: str
    status: str
    created_at: int
    updated_at: int
    published_at: int | None
    html: str | None = None  # the body rendered and sanitised; None: not rendered yet
    excerpt: str | None = None


def slug_exists(tx: Tx, user_id: str, slug: str) -> bool:
    return tx.one("SELECT id FROM journals WHERE user_id = ? AND slug = ?", (user_id, slug)) is not None


def insert(
    tx: Tx, journal_id: str, user_id: str, slug: str, title: str, body: str, html: str, excerpt: str, now_ms: int
) -> None:
    try:
        with tx.savepoint():
            tx.execute(
                "INSERT INTO journals (id, user_id, slug, title, body, html, excerpt, status, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'draft', ?, ?)",
                (journal_id, user_id, slug, title, body, html, excerpt, now_ms, now_ms),
            )
    except IntegrityError:
        raise SlugTaken(slug) from None


def get(tx: Tx, user_id: str, slug: str) -> Journal | None:
    return Journal.fetch_one(tx, f"SELECT {_COLUMNS}{_FROM} WHERE j.user_id = ? AND j.slug = ?", (user_id, slug))


def update(tx: Tx, journal_id: str, changes: dict[str, str], now_ms: int) -> None:
    sets = [f"{column} = ?" for column in changes]
    try:
        with tx.savepoint():
            tx.execute(
                f"UPDATE journals SET {', '.join(sets)}, updated_at = ? WHERE id = ?",
                (*changes.values(), now_ms, journal_id),
            )
    except IntegrityError:
        raise SlugTaken(changes.get("slug", "")) from None


def store_rendering(tx: Tx, journal_id: str, body: str, html: str, excerpt: str) -> None:
    """Keep the rendering of a row written before renderings were stored (only while its
    body is still the one rendered)."""
    tx.execute(
        "UPDATE journals SET html = ?, excerpt = ? WHERE id = ? AND body = ? AND html IS NULL",
        (html, excerpt, journal_id, body),
    )


def publish(tx: Tx, journal_id: str, now_ms: int) -> None:
    tx.execute(
        "UPDATE journals SET status = 'published', published_at = COALESCE(published_at, ?), updated_at = ?"
        " WHERE id = ?",
        (now_ms, now_ms, journal_id),
    )


def delete(tx: Tx, journal_id: str) -> list[str]:
    """Deletes the journal; returns the media ids of its images (for the caller to remove)."""
    media = [
        row["media_id"] for row in tx.execute("SELECT media_id FROM journal_images WHERE journal_id = ?", (journal_id,))
    ]
    tx.execute("DELETE FROM journals WHERE id = ?", (journal_id,))
    return media


def add_image(tx: Tx, journal_id: str, media_id: str, now_ms: int) -> None:
    tx.execute(
        "INSERT INTO journal_images (journal_id, media_id, created_at) VALUES (?, ?, ?)", (journal_id, media_id, now_ms)
    )


def count_images(tx: Tx, journal_id: str) -> int:
    return int(tx.scalar("SELECT COUNT(*) FROM journal_images WHERE journal_id = ?", (journal_id,)))


def page(
    tx: Tx, user_id: str, *, published_only: bool, limit: int, cursor: str | None
) -> tuple[list[Journal], str | None]:
    """Newest first: published ones by publication time; with drafts, by last change."""
    order = "j.published_at" if published_only else "j.updated_at"
    where = "j.user_id = ?" + (" AND j.status = 'published'" if published_only else "")
    rows, more = newest_first(
        tx, f"SELECT {_COLUMNS}{_FROM} WHERE {where}", [user_id], limit, cursor or None, at=order, key="j.id"
    )
    found = [Journal.from_row(row) for row in rows]
    next_cursor = None
    if more:
        last = found[-1]
        key = last.published_at if published_only else last.updated_at
        next_cursor = encode_cursor(key, last.id)
    return found, next_cursor
