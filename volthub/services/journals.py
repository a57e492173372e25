"""Journals: a user's Markdown posts, drafts until published.

Slugs are lower-case words joined by hyphens, unique per author; one is made from the title
when none is given (`-2`, `-3`, … on a clash). Readers see published posts only; the author
(journal:read) sees drafts too. The body is rendered to sanitised HTML once, when it is
written, in a worker thread (at most RENDERS at once) and kept beside it
(volthub.protocol.markdown, whose cost bounds refuse a body with `TooCostly`); reads serve
the stored HTML. A row written before renderings were stored is rendered on its first read. Images are uploaded per journal (checked by content and size,
stored as [media] says) and go with the journal when it is deleted.
"""

from __future__ import annotations

import re
import unicodedata
import uuid
from dataclasses import dataclass, replace
from html import escape as html_escape

import trio

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import journals as repo
from volthub.persistence.journals import Journal, SlugTaken
from volthub.protocol import markdown
from volthub.protocol.markdown import TooCostly
from volthub.services.channels import ChannelNotFound, channel_by_username
from volthub.services.media import Image, Media, MediaStore

__all__ = [
    "ChannelNotFound",
    "Journal",
    "JournalNotFound",
    "Journals",
    "SlugTaken",
    "TooCostly",
    "TooManyImages",
    "slugify",
]

SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
SLUG_MAX = 80
MAX_IMAGES = 50
# Bodies rendered at once (each in a worker thread); more wait their turn.
RENDERS = 2


class JournalNotFound(LookupError):
    pass


class TooManyImages(Exception):
    pass


def slugify(title: str) -> str:
    """'Hello, World: Part 2' -> 'hello-world-part-2' (ASCII; 'journal' when nothing is left)."""
    ascii_only = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_only.lower()).strip("-")[:SLUG_MAX].strip("-")
    return slug or "journal"


def check_slug(slug: str) -> str:
    if len(slug) > SLUG_MAX or not SLUG.fullmatch(slug):
        raise ValueError("slug is 1–80 of a–z and 0–9 in words joined by single hyphens")
    return slug


@dataclass(frozen=True)
class Upload:
    journal: Journal
    media: Media


class Journals:
    def __init__(
        self, database: Database, clock: Clock, media: MediaStore, *, image_max_bytes: int, image_max_side: int
    ) -> None:
        self._db = database
        self._clock = clock
        self._media = media
        self.image_max_bytes = image_max_bytes
        self.image_max_side = image_max_side
        self._renders = trio.CapacityLimiter(RENDERS)

    def _now(self) -> int:
        return to_ms(self._clock.now())

    async def _render(self, body: str) -> markdown.Rendered:
        """Check and render off the event loop; TooCostly when a bound is passed."""
        return await trio.to_thread.run_sync(markdown.render_post, body, limiter=self._renders)

    async def _rendered(self, journal: Journal) -> Journal:
        """The journal with its rendering (a row from before renderings were kept gets
        rendered now, and keeps it)."""
        if journal.html is not None and journal.excerpt is not None:
            return journal
        try:
            rendered = await self._render(journal.body)
        except TooCostly:  # an old body past today's bounds: shown as text, never parsed
            rendered = markdown.Rendered(f"<pre>{html_escape(journal.body)}</pre>", journal.body[:200])
        await self._db.write(
            lambda tx: repo.store_rendering(tx, journal.id, journal.body, rendered.html, rendered.excerpt)
        )
        return replace(journal, html=rendered.html, excerpt=rendered.excerpt)

    async def create(self, user_id: str, title: str, body: str, slug: str | None) -> Journal:
        now = self._now()
        rendered = await self._render(body)

        def change(tx: Tx) -> Journal:
            chosen = slug or _free_slug(tx, user_id, slugify(title))
            journal_id = str(uuid.uuid4())
            repo.insert(tx, journal_id, user_id, chosen, title, body, rendered.html, rendered.excerpt, now)
            found = repo.get(tx, user_id, chosen)
            assert found is not None
            return found

        return await self._db.write(change)

    async def mine(self, user_id: str, slug: str) -> Journal:
        found = await self._db.read(lambda tx: repo.get(tx, user_id, slug))
        if found is None:
            raise JournalNotFound(slug)
        return await self._rendered(found)

    async def update(self, user_id: str, slug: str, changes: dict[str, str]) -> Journal:
        now = self._now()
        if "body" in changes:
            rendered = await self._render(changes["body"])
            changes = {**changes, "html": rendered.html, "excerpt": rendered.excerpt}

        def change(tx: Tx) -> Journal:
            journal = _own(tx, user_id, slug)
            if changes:
                repo.update(tx, journal.id, changes, now)
            found = repo.get(tx, user_id, changes.get("slug", slug))
            assert found is not None
            return found

        return await self._db.write(change)

    async def publish(self, user_id: str, slug: str) -> Journal:
        now = self._now()

        def change(tx: Tx) -> Journal:
            repo.publish(tx, _own(tx, user_id, slug).id, now)
            found = repo.get(tx, user_id, slug)
            assert found is not None
            return found

        return await self._rendered(await self._db.write(change))

    async def delete(self, user_id: str, slug: str) -> None:
        def change(tx: Tx) -> list[Media | None]:
            media_ids = repo.delete(tx, _own(tx, user_id, slug).id)
            return [self._media.remove_in(tx, media_id) for media_id in media_ids]

        for media in await self._db.write(change):
            await self._media.discard(media)

    async def add_image(self, user_id: str, slug: str, image: Image) -> Upload:
        now = self._now()
        journal = await self.mine(user_id, slug)

        def then(tx: Tx, media: Media) -> Upload:
            current = _own(tx, user_id, slug)
            if current.id != journal.id:
                raise JournalNotFound(slug)
            if repo.count_images(tx, current.id) >= MAX_IMAGES:
                raise TooManyImages(MAX_IMAGES)
            repo.add_image(tx, current.id, media.id, now)
            return Upload(current, media)

        return await self._media.store(image, user_id, "journal", then)

    async def page_of(
        self, user_id: str, *, drafts: bool, limit: int, cursor: str | None
    ) -> tuple[list[Journal], str | None]:
        found, next_cursor = await self._db.read(
            lambda tx: repo.page(tx, user_id, published_only=not drafts, limit=limit, cursor=cursor)
        )
        return [await self._rendered(journal) for journal in found], next_cursor

    async def public_page(self, username: str, limit: int, cursor: str | None) -> tuple[list[Journal], str | None]:
        def read(tx: Tx) -> tuple[list[Journal], str | None]:
            author = channel_by_username(tx, username)
            return repo.page(tx, author.id, published_only=True, limit=limit, cursor=cursor)

        found, next_cursor = await self._db.read(read)
        return [await self._rendered(journal) for journal in found], next_cursor

    async def public(self, username: str, slug: str) -> Journal:
        def read(tx: Tx) -> Journal | None:
            author = channel_by_username(tx, username)
            return repo.get(tx, author.id, slug)

        found = await self._db.read(read)
        if found is None or found.status != "published":
            raise JournalNotFound(slug)
        return await self._rendered(found)


def _own(tx: Tx, user_id: str, slug: str) -> Journal:
    found = repo.get(tx, user_id, slug)
    if found is None:
        raise JournalNotFound(slug)
    return found


def _free_slug(tx: Tx, user_id: str, base: str) -> str:
    candidate, n = base, 1
    while repo.slug_exists(tx, user_id, candidate):
        n += 1
        suffix = f"-{n}"
        candidate = base[: SLUG_MAX - len(suffix)].rstrip("-") + suffix
    return candidate
