"""The category catalogue: built in, extended by an operator's JSON file.

The built-in list is `volthub/data/categories.json`; `[streams] categories_file` names a file
of the same shape whose entries are added (a slug already known is replaced). Both are read
once at start; a broken file stops the start with a message naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from volthub.protocol.streamtags import slugify


class CategoryFileError(ValueError):
    """The operator's categories file is missing or not the documented shape."""


@dataclass(frozen=True, slots=True)
class Category:
    slug: str
    name: str
    group: str


def _parse(document: Any, origin: str) -> list[Category]:
    if not isinstance(document, list):
        raise CategoryFileError(f"{origin}: expected a JSON array of {{slug, name, group}}")
    found: list[Category] = []
    for index, entry in enumerate(document):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"].strip():
            raise CategoryFileError(f"{origin}[{index}]: each category needs a non-empty name")
        slug = slugify(str(entry.get("slug") or entry["name"]))
        if not slug:
            raise CategoryFileError(f"{origin}[{index}]: the slug has no letters or digits")
        group = entry.get("group", "other")
        if not isinstance(group, str):
            raise CategoryFileError(f"{origin}[{index}]: group must be a string")
        found.append(Category(slug, entry["name"].strip(), group or "other"))
    return found


class Categories:
    def __init__(self, categories: list[Category]) -> None:
        self._by_slug = {category.slug: category for category in categories}

    @classmethod
    def load(cls, extra_file: str = "") -> Categories:
        built_in = resources.files("volthub.data").joinpath("categories.json").read_bytes()
        categories = _parse(orjson.loads(built_in), "categories.json")
        if extra_file:
            try:
                document = orjson.loads(Path(extra_file).read_bytes())
            except FileNotFoundError:
                raise CategoryFileError(f"[streams] categories_file not found: {extra_file}") from None
            except orjson.JSONDecodeError as exc:
                raise CategoryFileError(f"{extra_file} is not valid JSON: {exc}") from None
            categories += _parse(document, extra_file)
        return cls(categories)

    def all(self) -> list[Category]:
        return sorted(self._by_slug.values(), key=lambda category: category.name.lower())

    def get(self, slug: str) -> Category | None:
        return self._by_slug.get(slug)

    def search(self, term: str, limit: int) -> list[Category]:
        """Case-insensitive: names or slugs starting with the term first, then containing it."""
        needle = term.strip().lower()
        slug_needle = slugify(term)
        ranked: list[tuple[int, str, Category]] = []
        for category in self._by_slug.values():
            name = category.name.lower()
            if name.startswith(needle) or (slug_needle and category.slug.startswith(slug_needle)):
                ranked.append((0, name, category))
            elif needle in name or (slug_needle and slug_needle in category.slug):
                ranked.append((1, name, category))
        ranked.sort(key=lambda item: (item[0], item[1]))
        return [category for _, _, category in ranked[:limit]]
