"""The repository points at nothing outside itself: no file, file name or OpenAPI description
cites the design document, a section number of the product definition or an issue number.
Behaviour is cited by its docs page (docs/architecture.md for maintainers) or its OpenAPI
operation, and a rule is said in plain words where it applies.

Section signs of public standards ("RFC 6749 §4.1.2") are fine: they point at public text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parent.parent

# Built from pieces so that this file does not match itself.
_DESIGN_DOC = re.compile(r"\b" + "DES" + r"IGN\b")
_SECTION = re.compile("\u00a7" + r" ?\d")
_ISSUE = re.compile(r"(?<![a-z])issues?[ _-]?\d+", re.IGNORECASE)
# A citation of a public standard, its further sections included: "RFC 6749 §3.2, §4.1.3, §6".
_STANDARD = re.compile(r"\bRFC ?\d+(?:,? (?:and )?\u00a7 ?[\d.]*\d)+")

SKIPPED_DIRS = {"node_modules", "__pycache__", ".venv", "site", ".mypy_cache", ".ruff_cache"}
TEXT_SUFFIXES = {
    ".py",
    ".sql",
    ".toml",
    ".md",
    ".txt",
    ".yml",
    ".yaml",
    ".json",
    ".js",
    ".html",
    ".cfg",
    ".ini",
    ".sh",
    "",
}


def references(text: str) -> list[str]:
    """The outside references in `text`, one string per offending line."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        bare = _STANDARD.sub("", line)
        if _DESIGN_DOC.search(line) or _SECTION.search(bare) or _ISSUE.search(line):
            found.append(f"{number}: {line.strip()[:160]}")
    return found


def files_under(place: str) -> list[Path]:
    path = ROOT / place
    if path.is_file():
        return [path]
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and p.suffix in TEXT_SUFFIXES and not SKIPPED_DIRS & set(p.relative_to(ROOT).parts)
    )


def test_the_patterns_catch_what_they_must_and_spare_public_standards() -> None:
    section = "\u00a7"
    assert references(f"see {'DES' + 'IGN'} {section}4.1")
    assert references(f"(spec {section}2.6)")
    assert references(f"the {section}4.7 routes")
    assert references("hold (" + "issue" + " 16: many sockets)")
    assert references("tests/services/test_" + "issue" + "15_backends.py")
    assert references("the " + "issue" + "-16 targets")
    assert not references(f"RFC 6749 {section}3.2, {section}4.1.3, {section}6 and RFC 7009")
    assert not references("a design decision, issued tokens, the design of the bus")


PLACES = ["volthub", "tests", "config", "docs", "Makefile", "pyproject.toml", ".ci", "README.md", "mkdocs.yml"]


@pytest.mark.parametrize("place", PLACES)
def test_no_file_points_outside_the_repository(place: str) -> None:
    offending = {}
    for path in files_under(place):
        relative = str(path.relative_to(ROOT))
        found = references(relative)
        try:
            found += references(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            continue
        if found:
            offending[relative] = found
    assert offending == {}


async def test_the_served_openapi_document_points_outside_nothing(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    app = create_app(make_settings(sqlite_url))
    async with app.test_app():
        response = await app.test_client().get("/api/openapi.json")
        document = await response.get_json()
    assert response.status_code == 200
    assert [found for text in strings(document) for found in references(text)] == []


def strings(value: Any) -> list[str]:
    """Every key and string of a JSON document."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value.keys(), *(s for v in value.values() for s in strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []
