"""Rules for the names people see: display names, and the confusable skeleton that tells
when two names look alike (Unicode TR 39's confusable detection).

A display name is NFKC-normalised (so full-width and mathematical letters become plain
ones) and may hold no format characters (Unicode category Cf: bidi controls such as
U+202E, zero-width spaces and joiners), which would let it read differently from what it
is. Its skeleton must match no other account's username and no reserved name.

The skeleton: NFKC, case folded, spaces, underscores and format characters dropped, then every
character replaced by one representative of the characters Unicode's confusables data says
look like it (the data and its character classes come from the confusable-homoglyphs
package), then NFD. Two names with one skeleton look alike. A skeleton is a comparison key,
never something to show.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Final

from confusable_homoglyphs import confusables

# Usernames nobody may register: fixed path segments under /api/users/, and names that
# would mislead people.
RESERVED_USERNAMES: Final = frozenset({"me", "search", "follow", "admin", "api", "system", "volthub", "root"})
# Names a display name may not look like either: the reserved usernames and the words that
# pose as a role or the platform in chat.
RESERVED_DISPLAY_NAMES: Final = RESERVED_USERNAMES | frozenset(
    {"mod", "mods", "moderator", "moderators", "broadcaster", "staff", "administrator", "official", "support", "owner"}
)


class UnsafeName(ValueError):
    """A display name that could mislead: the message says why."""


def normalised_display_name(text: str) -> str:
    """``text`` NFKC-normalised; UnsafeName when it holds a format character (bidi
    controls, zero-width characters)."""
    normal = unicodedata.normalize("NFKC", text)
    hidden = next((char for char in normal if unicodedata.category(char) == "Cf"), None)
    if hidden is not None:
        raise UnsafeName(
            f"must not contain invisible formatting characters such as U+{ord(hidden):04X}"
            " (text direction controls, zero-width characters)"
        )
    return normal


def skeleton(text: str) -> str:
    """The key two names share when they look alike (see the module's docstring)."""
    representative = _representatives()
    folded = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text).casefold())
    mapped = "".join(
        representative.get(char, char)
        for char in folded
        if not (char.isspace() or char == "_" or unicodedata.category(char) == "Cf")
    )
    return unicodedata.normalize("NFD", mapped)


def is_spelling_of(display_name: str, username: str) -> bool:
    """Whether ``display_name`` is ``username`` in another case or spacing (spaces for its
    underscores, or none): always one's own to take."""

    def bare(name: str) -> str:
        return "".join(name.replace("_", " ").split()).casefold()

    return bare(display_name) == bare(username)


@functools.cache
def reserved_skeletons() -> frozenset[str]:
    return frozenset(skeleton(name) for name in RESERVED_DISPLAY_NAMES)


@functools.cache
def _representatives() -> dict[str, str]:
    """Each character that has look-alikes -> the smallest code point of its class (the
    characters linked to it, directly or through others, in the confusables data)."""
    parent: dict[str, str] = {}

    def root(char: str) -> str:
        while parent.get(char, char) != char:
            parent[char] = parent.get(parent[char], parent[char])  # path halving
            char = parent[char]
        return char

    for char, entries in confusables.confusables_data.items():
        if len(char) != 1:
            continue
        for entry in entries:
            other = entry["c"]
            if len(other) == 1:
                first, second = root(char), root(other)
                if first != second:
                    parent[max(first, second)] = min(first, second)
    return {char: root(char) for char in parent}
