"""Stream languages: BCP 47 tags checked against the IANA language subtag registry that
`langcodes` ships, stored in their canonical form, lower-cased (tags are case-insensitive;
`pt-BR` is kept as `pt-br`, a deprecated `iw` as `he`)."""

from __future__ import annotations

import re

import langcodes

_SHAPE = re.compile(r"[A-Za-z0-9]{1,8}(?:-[A-Za-z0-9]{1,8})*")


def canonical(tag: str) -> str:
    """The canonical, lower-cased form of a registered BCP 47 tag; ValueError otherwise."""
    text = tag.strip()
    if not _SHAPE.fullmatch(text) or not langcodes.tag_is_valid(text):
        raise ValueError("language must be a BCP 47 tag from the IANA registry (e.g. en, pt-BR, zh-Hant)")
    return str(langcodes.standardize_tag(text)).lower()
