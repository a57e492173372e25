"""Image type by content, not by name or declared header (sans-IO).

Only raster formats browsers show inertly are accepted: PNG, JPEG, GIF and WebP. SVG is
refused on purpose (it can carry script).
"""

from __future__ import annotations

ACCEPTED: tuple[str, ...] = ("image/png", "image/jpeg", "image/gif", "image/webp")

EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def sniff(data: bytes) -> str | None:
    """The image's media type from its first bytes, or None when it is none of ACCEPTED."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def media_path(media_id: str) -> str:
    """Where an uploaded image is served on this server (GET, public, immutable)."""
    return f"/api/media/{media_id}"
