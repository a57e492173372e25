"""Uploaded images: checked by content and size before anything is written, stored in the
database or on disk ([media] storage), and served by id (immutable bytes).

`upload` never leaves anything behind on refusal: the type and size checks run before any
write, a file is written under a temporary name and renamed only when complete, and when
the caller's transaction fails the file is removed again.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import PIL.Image
import trio

from volthub.hub.clock import Clock, to_ms
from volthub.persistence import Database, Tx
from volthub.persistence import media as repo
from volthub.persistence.media import Media
from volthub.protocol import images

T = TypeVar("T")

__all__ = ["Image", "Media", "MediaStore", "UploadRefused"]


class UploadRefused(Exception):
    def __init__(self, status: int, code: str, message: str, details: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details


@dataclass(frozen=True)
class Image:
    """A checked upload, not yet stored."""

    data: bytes
    content_type: str
    sha256: str


def check_image(data: bytes, declared: str | None, max_bytes: int, max_side: int) -> Image:
    """Refuse what is too big, empty, not an accepted image, declared as another type, or
    wider or taller than `max_side` pixels (its header read by Pillow; the pixels are not
    decoded)."""
    if len(data) > max_bytes:
        raise UploadRefused(
            413, "file_too_large", f"the image must be at most {max_bytes} bytes", {"maxBytes": max_bytes}
        )
    if not data:
        raise UploadRefused(400, "empty_file", "the request body holds no image")
    sniffed = images.sniff(data)
    if sniffed is None:
        raise UploadRefused(
            415,
            "unsupported_image",
            f"the body is not one of {', '.join(images.ACCEPTED)}",
            {"accepted": list(images.ACCEPTED)},
        )
    if declared is not None and declared.split(";")[0].strip().lower() != sniffed:
        raise UploadRefused(
            415, "content_type_mismatch", f"the body is {sniffed}, not {declared}", {"detected": sniffed}
        )
    _check_size(data, max_side)
    return Image(data, sniffed, hashlib.sha256(data).hexdigest())


def _check_size(data: bytes, max_side: int) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PIL.Image.DecompressionBombWarning)
            with PIL.Image.open(io.BytesIO(data)) as opened:
                width, height = opened.size
    except PIL.Image.DecompressionBombError:
        raise UploadRefused(
            400, "invalid_image_dimensions", f"the image is larger than {max_side}×{max_side}", {"maxSide": max_side}
        ) from None
    except (OSError, ValueError, SyntaxError):  # Pillow's "cannot identify" and broken headers
        raise UploadRefused(415, "unsupported_image", "the image cannot be read") from None
    if not (0 < width <= max_side and 0 < height <= max_side):
        raise UploadRefused(
            400,
            "invalid_image_dimensions",
            f"the image is {width}×{height}; each side must be 1–{max_side} pixels",
            {"width": width, "height": height, "maxSide": max_side},
        )


class MediaStore:
    def __init__(self, database: Database, clock: Clock, *, storage: str, directory: str) -> None:
        if storage not in ("database", "disk"):
            raise ValueError("[media] storage is database or disk")
        self._db = database
        self._clock = clock
        self.storage = storage
        self.directory = Path(directory)

    async def store(self, image: Image, owner_id: str | None, purpose: str, then: Callable[[Tx, Media], T]) -> T:
        """Store `image` and run `then(tx, media)` in the same transaction (the row that
        refers to it). If that transaction fails, the image is gone too."""
        media_id = str(uuid.uuid4())
        path = None
        if self.storage == "disk":
            path = f"{media_id}.{images.EXTENSIONS[image.content_type]}"
            await trio.to_thread.run_sync(self._write_file, path, image.data)
        media = Media(
            id=media_id,
            owner_id=owner_id,
            purpose=purpose,
            content_type=image.content_type,
            size_bytes=len(image.data),
            sha256=image.sha256,
            data=base64.b64encode(image.data).decode() if path is None else None,
            path=path,
            created_at=to_ms(self._clock.now()),
        )

        def write(tx: Tx) -> T:
            repo.insert(tx, media)
            return then(tx, media)

        try:
            return await self._db.write(write)
        except BaseException:
            if path is not None:
                await trio.to_thread.run_sync(self._remove_file, path)
            raise

    async def read(self, media_id: str) -> tuple[Media, bytes] | None:
        media = await self._db.read(lambda tx: repo.get(tx, media_id))
        if media is None:
            return None
        if media.data is not None:
            return media, base64.b64decode(media.data)
        assert media.path is not None
        try:
            return media, await trio.to_thread.run_sync((self.directory / media.path).read_bytes)
        except FileNotFoundError:
            return None

    def remove_in(self, tx: Tx, media_id: str) -> Media | None:
        """Delete the row inside a caller's transaction; call `discard` after commit."""
        return repo.delete(tx, media_id)

    async def discard(self, media: Media | None) -> None:
        if media is not None and media.path is not None:
            await trio.to_thread.run_sync(self._remove_file, media.path)

    def _write_file(self, name: str, data: bytes) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / name
        partial = self.directory / f".{name}.part"
        try:
            with open(partial, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(partial, final)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    def _remove_file(self, name: str) -> None:
        (self.directory / name).unlink(missing_ok=True)
