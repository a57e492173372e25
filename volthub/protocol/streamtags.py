"""Stream tags: slugs, the curated vocabulary and the per-list limits.

Pure functions, no I/O. The rules:

- every tag is stored as a slug: ``"Speed Run"`` -> ``speed-run`` (lower case ASCII letters
  and digits in runs joined by single hyphens; accents folded, ``+`` read as "plus" and
  ``&`` as "and", so ``18+`` -> ``18-plus``);
- a stream has at most ``STREAM_TAG_LIMIT`` tags and a channel at most
  ``CHANNEL_TAG_LIMIT`` identity tags; content-warning tags never count toward either;
- a list over its limit is refused whole (the caller saves nothing of that request);
- tags outside the vocabulary (custom tags) are allowed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

STREAM_TAG_LIMIT: Final = 7
CHANNEL_TAG_LIMIT: Final = 5
# A slug longer than this is refused: tags are short labels, not sentences.
MAX_SLUG_LENGTH: Final = 32

Tier = Literal["session", "identity", "both"]

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """The stored form of a tag (or category) as typed; "" when nothing of it is usable."""
    spelled = text.replace("+", " plus ").replace("&", " and ")
    folded = unicodedata.normalize("NFKD", spelled).encode("ascii", "ignore").decode("ascii")
    return _NON_ALNUM.sub("-", folded.lower()).strip("-")


@dataclass(frozen=True, slots=True)
class Tag:
    slug: str
    name: str
    tier: Tier
    content_warning: bool = False


def _tag(name: str, tier: Tier, content_warning: bool = False) -> Tag:
    return Tag(slugify(name), name, tier, content_warning)


# The content warnings, in their documented order. They fit both tiers.
CONTENT_WARNINGS: Final[tuple[Tag, ...]] = tuple(
    _tag(name, "both", content_warning=True)
    for name in (
        "Flashing lights",
        "Intense motion",
        "Loud or sudden audio",
        "18+",
        "Graphic violence",
        "Horror and jump scares",
        "Strong language",
        "Gambling",
        "Alcohol or substance use",
        "Sensitive topics",
    )
)

# The curated vocabulary: session tags describe one stream, identity tags the channel.
VOCABULARY: Final[tuple[Tag, ...]] = (
    _tag("Speed Run", "session"),
    _tag("Blind Playthrough", "session"),
    _tag("First Playthrough", "session"),
    _tag("Challenge Run", "session"),
    _tag("Tournament", "session"),
    _tag("Charity", "session"),
    _tag("Subathon", "session"),
    _tag("Q&A", "session"),
    _tag("Giveaway", "session"),
    _tag("Collab", "session"),
    _tag("Ranked", "session"),
    _tag("Casual", "both"),
    _tag("Competitive", "both"),
    _tag("Chill", "both"),
    _tag("Educational", "both"),
    _tag("Creative", "both"),
    _tag("Music", "both"),
    _tag("Cozy", "both"),
    _tag("Retro", "both"),
    _tag("Indie", "both"),
    _tag("Variety", "identity"),
    _tag("English", "identity"),
    _tag("Spanish", "identity"),
    _tag("German", "identity"),
    _tag("French", "identity"),
    _tag("Portuguese", "identity"),
    _tag("Japanese", "identity"),
    _tag("LGBTQIA+", "identity"),
    _tag("Family Friendly", "identity"),
    _tag("Vtuber", "identity"),
    _tag("Developer", "identity"),
    *CONTENT_WARNINGS,
)
BY_SLUG: Final[dict[str, Tag]] = {tag.slug: tag for tag in VOCABULARY}
CONTENT_WARNING_SLUGS: Final[frozenset[str]] = frozenset(tag.slug for tag in CONTENT_WARNINGS)


def is_content_warning(slug: str) -> bool:
    return slug in CONTENT_WARNING_SLUGS


@dataclass(frozen=True, slots=True)
class TagProblem:
    """Why a tag list was refused: `code` is ``tag_invalid`` or ``too_many_tags``."""

    field: str
    code: str
    message: str
    limit: int
    counted: int
    tag: str | None = None


@dataclass(frozen=True, slots=True)
class TagList:
    """A tag list checked against its limit: `slugs` in input order without repeats."""

    slugs: tuple[str, ...] = ()
    problem: TagProblem | None = None


def check_tags(raw: Sequence[str], *, field: str, limit: int) -> TagList:
    """Slug every tag, drop repeats, and hold the non-warning tags to `limit`."""
    slugs: list[str] = []
    for text in raw:
        slug = slugify(text)
        if not slug or len(slug) > MAX_SLUG_LENGTH:
            reason = "has no letters or digits" if not slug else f"is longer than {MAX_SLUG_LENGTH} characters"
            problem = TagProblem(field, "tag_invalid", f"tag {text!r} {reason}", limit, 0, text)
            return TagList(problem=problem)
        if slug not in slugs:
            slugs.append(slug)
    counted = sum(1 for slug in slugs if not is_content_warning(slug))
    if counted > limit:
        message = f"{field} holds {counted} tags; at most {limit} (content warnings do not count)"
        return TagList(problem=TagProblem(field, "too_many_tags", message, limit, counted))
    return TagList(tuple(slugs))


def content_warnings(*lists: Iterable[str]) -> list[str]:
    """The warning tags of all lists, in first-seen order, each once."""
    found: list[str] = []
    for slugs in lists:
        found.extend(slug for slug in slugs if is_content_warning(slug) and slug not in found)
    return found
