"""Code you can hold in your head: no module of volthub/ is longer than 700 lines. A module
that grows past it is split by concept (see docs/architecture.md for the layout)."""

from __future__ import annotations

from pathlib import Path

import volthub

LIMIT = 700
PACKAGE = Path(volthub.__file__).resolve().parent


def test_no_module_is_longer_than_the_limit() -> None:
    lengths = {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert lengths, "no module found"
    assert {name: length for name, length in lengths.items() if length > LIMIT} == {}
