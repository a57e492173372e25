"""The official JavaScript socket.io-client in tests/js (`npm ci --prefix tests/js`, which
`make test` runs), for tests that drive it with Node."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

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


async def run_client(script: str, *args: str, deadline: float = 30) -> dict[str, Any]:
    """Run a client script of tests/js to its end and return what it saw (the JSON line it
    prints last); it must exit 0, else the test fails with its output."""
    node = node_with_official_client()
    with trio.fail_after(deadline):
        done = await trio.run_process(
            [node, script, *args], cwd=JS_DIR, capture_stdout=True, capture_stderr=True, check=False
        )
    output = done.stdout.decode().strip().splitlines()
    assert done.returncode == 0, (output, done.stderr.decode()[-2000:])
    seen: dict[str, Any] = orjson.loads(output[-1])
    return seen
