"""The document `GET /api/openapi.json` serves, fetched once per test module, and the Node
tools of tests/contract (`npm ci --prefix tests/contract`, which `make test` runs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.conftest import make_settings

CONTRACT_DIR = Path(__file__).resolve().parent / "contract"
# No usage statistics, no update checks: the tools run without network.
QUIET_TOOLS_ENV = {
    "REDOCLY_TELEMETRY": "off",
    "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true",
    "NO_UPDATE_NOTIFIER": "1",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    "DO_NOT_TRACK": "1",
}


class DuplicateKey(ValueError):
    pass


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DuplicateKey(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def strict_json(raw: bytes) -> Any:
    """JSON as a strict parser reads it: a repeated key in one object is an error."""
    return json.loads(raw, object_pairs_hook=_refuse_duplicates)


def fetch_served_document(sqlite_template: Path, scratch: Path) -> bytes:
    """The bytes of `GET /api/openapi.json` from an app started on a copy of the template."""
    from volthub.http.app import create_app

    database = scratch / "openapi.db"
    shutil.copyfile(sqlite_template, database)
    app = create_app(make_settings(f"sqlite:///{database}", server={"public_url": "http://127.0.0.1:8080"}))

    async def fetch() -> bytes:
        async with app.test_app():
            response = await app.test_client().get("/api/openapi.json")
            assert response.status_code == 200
            return await response.get_data(as_text=False)

    return trio.run(fetch)


def contract_tool(name: str) -> Path:
    """A tool of tests/contract/node_modules/.bin. Skips only where npm is absent and CI is
    unset; in CI, or wherever npm is, a missing tool is a broken set-up."""
    if shutil.which("npm") is None and not os.environ.get("CI"):
        pytest.skip("npm is not installed")
    tool = CONTRACT_DIR / "node_modules" / ".bin" / name
    if not tool.exists():
        pytest.fail(f"{name} is not installed: run `npm ci --prefix tests/contract` (make test does)")
    return tool


def run_tool(*args: str | Path, cwd: Path = CONTRACT_DIR) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **QUIET_TOOLS_ENV}
    return subprocess.run(
        [str(arg) for arg in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )
