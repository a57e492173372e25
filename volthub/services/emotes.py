"""Emotes: global and per-channel collections of operator-managed images.

Codes are 2–32 letters, digits or underscores, case-sensitive, written in chat as `:code:`.
`resolve` is the one resolver: the resolve route, emote-only mode and the emotes a chat
message carries all use it (chat through its store port, hub/chat_store.py).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import emotes as repo
from volthub.persistence.emotes import Emote, EmoteExists
from volthub.protocol.images import media_path
from volthub.services.channels import ChannelNotFound, channel_by_username
from volthub.services.media import Image, Media, MediaStore

__all__ = ["CODE", "Emote", "EmoteExists", "EmoteNotFound", "Emotes", "emote_url", "resolve_in"]

CODE = re.compile(r"^[A-Za-z0-9_]{2,32}$")
MAX_CODES = 100


@dataclass(eq=False)  # an exception: equal only to itself, and hashable
class EmoteNotFound(Exception):
    code: str


def emote_url(media_id: str) -> str:
    """Path of the emote's image on this server (immutable; cache it)."""
    return media_path(media_id)


def resolve_in(tx: Tx, codes: Iterable[str], channel_id: str | None) -> dict[str, Emote]:
    return repo.resolve(tx, [code for code in codes if CODE.fullmatch(code)], channel_id)


class Emotes:
    def __init__(self, database: Database, clock: Clock, media: MediaStore, *, max_bytes: int, max_side: int) -> None:
        self._db = database
        self._clock = clock
        self._media = media
        self.max_bytes = max_bytes
        self.max_side = max_side

    async def add(self, channel_id: str | None, code: str, image: Image, owner_id: str | None) -> Emote:
        """A new emote (global when `channel_id` is None); `EmoteExists` when the code is used."""
        if not CODE.fullmatch(code):
            raise ValueError("emote codes are 2–32 letters, digits or underscores")
        now = to_ms(self._clock.now())

        def then(tx: Tx, media: Media) -> Emote:
            emote_id = str(uuid.uuid4())
            repo.insert(tx, emote_id, channel_id, code, media.id, now)
            found = repo.get(tx, channel_id, code)
            assert found is not None
            return found

        return await self._media.store(image, owner_id, "emote", then)

    async def remove(self, channel_id: str | None, code: str) -> None:
        def change(tx: Tx) -> Media | None:
            emote = repo.delete(tx, channel_id, code)
            if emote is None:
                raise EmoteNotFound(code)
            return self._media.remove_in(tx, emote.media_id)

        media = await self._db.write(change)
        await self._media.discard(media)

    async def global_set(self) -> list[Emote]:
        return await self._db.read(lambda tx: repo.collection(tx, None))

    async def of_channel(self, username: str) -> tuple[str, list[Emote]]:
        """(the channel's id, its emotes); `ChannelNotFound` for an unknown username (any case)."""

        def read(tx: Tx) -> tuple[str, list[Emote]]:
            channel = channel_by_username(tx, username)
            return channel.id, repo.collection(tx, channel.id)

        return await self._db.read(read)

    async def channel_id(self, username: str) -> str:
        return (await self._db.read(lambda tx: channel_by_username(tx, username))).id

    async def resolve(self, codes: list[str], channel_username: str | None) -> dict[str, Emote]:
        def read(tx: Tx) -> dict[str, Emote]:
            channel_id = channel_by_username(tx, channel_username).id if channel_username else None
            return resolve_in(tx, codes, channel_id)

        return await self._db.read(read)


__all__ += ["ChannelNotFound"]
