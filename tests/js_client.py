"""The official JavaScript socket.io-client in tests/js (`npm ci --prefix tests/js`, which
`make test` runs), for tests that drive it with Node."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

JS_DIR = Path(__file__).resolve().parent / "js"


def node_with_official_client() -> str:
    """The node binary; skips without Node, fails when the client is not installed (make test
    installs it, so its absence is a broken set-up, not an optional part)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (JS_DIR / "node_modules" / "socket.io-client").is_dir():
        pytest.fail("socket.io-client is not installed: run `npm ci --prefix tests/js` (make test does)")
    return node
