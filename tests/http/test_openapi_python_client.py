"""openapi-python-client generates a client from the served document with no warning, and
that client, unchanged, drives a live server: sign up, read and change data, start a poll,
and read a typed error with its details."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

# Node and generator subprocesses for minutes: scheduled among the slow modules.
pytestmark = pytest.mark.slow

# The image upload routes take the image's own media type; the generator knows raw bytes as
# application/octet-stream, and still sends the real Content-Type for each.
GENERATOR_CONFIG = """\
content_type_overrides:
  image/png: application/octet-stream
  image/jpeg: application/octet-stream
  image/gif: application/octet-stream
  image/webp: application/octet-stream
post_hooks: []
"""
PACKAGE = "volthub_generated_client"


def generate_client(document: Path, where: Path) -> subprocess.CompletedProcess[str]:
    config = where / "generator.yaml"
    config.write_text(GENERATOR_CONFIG)
    generator = Path(sys.executable).parent / "openapi-python-client"
    return subprocess.run(
        [str(generator), "generate", "--path", str(document), "--output-path", str(where / PACKAGE)]
        + ["--meta", "none", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


@pytest.fixture
def generated(tmp_path: Path) -> Iterator[Any]:
    """Imports of the generated package, forgotten after the test."""
    sys.path.insert(0, str(tmp_path))
    yield lambda name: importlib.import_module(f"{PACKAGE}.{name}")
    sys.path.remove(str(tmp_path))
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]


async def test_generated_python_client_drives_a_live_server(live_server: Any, tmp_path: Path, generated: Any) -> None:
    # Building the document takes seconds on a busy machine: a generous timeout.
    async with httpx.AsyncClient(base_url=live_server.url, timeout=120) as http:
        document = tmp_path / "openapi.json"
        document.write_bytes((await http.get("/api/openapi.json")).content)
    made = generate_client(document, tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Warning" not in made.stdout + made.stderr, made.stdout + made.stderr

    client_module = generated("client")
    models = generated("models")
    register = generated("api.accounts.post_accounts_register")
    get_me = generated("api.users.get_users_get_me")
    put_me = generated("api.users.put_users_put_me")
    start_poll = generated("api.dashboard.post_dashboard_interactive_start_poll")
    active_poll = generated("api.dashboard.get_dashboard_interactive_active_poll")

    public = client_module.Client(base_url=live_server.url, raise_on_unexpected_status=True, timeout=httpx.Timeout(60))
    signed_up = await register.asyncio(
        client=public, body=models.RegisterBody(username="generated_client", password="correct horse battery")
    )
    assert isinstance(signed_up, models.SessionOut), signed_up
    client = client_module.AuthenticatedClient(
        base_url=live_server.url, token=signed_up.token, raise_on_unexpected_status=True, timeout=httpx.Timeout(60)
    )

    me = await get_me.asyncio(client=client)
    assert isinstance(me, models.UserOut) and me.username == "generated_client"
    changed = await put_me.asyncio(client=client, body=models.ProfileBody(bio="typed from the document"))
    assert isinstance(changed, models.UserOut) and changed.bio == "typed from the document"

    poll = await start_poll.asyncio(
        client=client, body=models.PollBody(title="Next game?", options=["Chess", "Go"], duration_seconds=60)
    )
    assert isinstance(poll, models.PollEnvelope) and poll.poll.title == "Next game?"
    assert [option.title for option in poll.poll.options] == ["Chess", "Go"]
    active = await active_poll.asyncio(client=client)
    assert isinstance(active, models.PollEnvelope) and active.poll.id == poll.poll.id

    refused = await start_poll.asyncio_detailed(
        client=client, body=models.PollBody(title="", options=["Only one"], duration_seconds=60)
    )
    assert refused.status_code == 400
    assert isinstance(refused.parsed, models.Error) and refused.parsed.error == "validation_error"
    assert refused.parsed.details.request_id == refused.headers["X-Request-Id"]
