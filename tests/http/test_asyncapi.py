"""`GET /api/asyncapi.json`: an AsyncAPI 3.0 document in which every event of
`/api/events/types` is a message with a payload schema and an example that matches it, on
servers taken from the settings, valid for the AsyncAPI CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from jsonschema import Draft202012Validator

from tests.conftest import make_settings

ROOT = Path(__file__).resolve().parents[2]
ASYNCAPI_DIR = ROOT / "tests" / "asyncapi"
ASYNCAPI_CLI = ASYNCAPI_DIR / "node_modules" / ".bin" / "asyncapi"


def _inline(value: Any, document: dict[str, Any]) -> Any:
    """`value` with every local `$ref` replaced by what it points at."""
    if isinstance(value, dict):
        if set(value) == {"$ref"}:
            target: Any = document
            for part in value["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            return _inline(target, document)
        return {key: _inline(item, document) for key, item in value.items()}
    if isinstance(value, list):
        return [_inline(item, document) for item in value]
    return value


async def _document(client: Any) -> dict[str, Any]:
    response = await client.get("/api/asyncapi.json")
    assert response.status_code == 200
    assert response.content_type == "application/json"
    document: dict[str, Any] = orjson.loads(await response.get_data())
    return document


async def test_every_event_is_a_message_with_a_schema_and_a_matching_example(client: Any) -> None:
    document = await _document(client)
    assert document["asyncapi"] == "3.0.0"
    types = (await (await client.get("/api/events/types")).get_json())["types"]
    messages = _inline(document["components"]["messages"], document)
    named = {message["name"] for message in messages.values()}
    assert {entry["name"] for entry in types} <= named
    checked = 0
    for key, message in messages.items():
        assert message["title"] == message["name"], key
        assert message["summary"] and message["examples"], key
        payload = Draft202012Validator(message["payload"])
        Draft202012Validator.check_schema(message["payload"])
        for example in message["examples"]:
            errors = [error.message for error in payload.iter_errors(example["payload"])]
            assert errors == [], f"{key}: {errors}"
            if "headers" in message:
                assert Draft202012Validator(message["headers"]).is_valid(example["headers"]), key
            checked += 1
    # An envelope and a data message per Events API event, a delivery per webhook event.
    for entry in types:
        keys = [entry["name"], f"{entry['name']}.data"] if entry["transports"]["eventsApi"] else []
        keys += [f"{entry['name']}.webhook"] if entry["transports"]["webhooks"] else []
        assert all(messages[key]["name"] == entry["name"] for key in keys), entry["name"]
    assert checked == len(messages)


async def test_each_transport_is_a_channel_with_operations(client: Any) -> None:
    document = await _document(client)
    channels = document["channels"]
    assert {channels[key]["address"] for key in channels} == {"/ws/events", "/socket.io", "/api/events/stream", None}
    for operation in document["operations"].values():
        channel = operation["channel"]["$ref"].removeprefix("#/channels/")
        for message in operation["messages"]:
            assert message["$ref"].startswith(f"#/channels/{channel}/messages/")
    webhook = document["components"]["messages"]["channel.follow.webhook"]
    headers = document["components"]["schemas"]["WebhookHeaders"]
    assert webhook["headers"] == {"$ref": "#/components/schemas/WebhookHeaders"}
    assert {"X-Service-Signature", "X-Service-Timestamp", "X-Service-Event"} <= set(headers["required"])


async def test_servers_are_the_public_addresses(sqlite_url: str) -> None:
    from volthub.http.app import create_app

    settings = make_settings(
        sqlite_url,
        server={"public_url": "https://live.example.com/platform"},
        events={"public_ws_url": "wss://events.example.com"},
    )
    app = create_app(settings)
    async with app.test_app():
        servers = (await _document(app.test_client()))["servers"]
    assert (servers["api"]["protocol"], servers["api"]["host"]) == ("https", "live.example.com")
    assert servers["api"]["pathname"] == "/platform"
    assert (servers["gateway"]["protocol"], servers["gateway"]["host"]) == ("wss", "events.example.com")


def _asyncapi_cli() -> Path:
    """The pinned CLI from tests/asyncapi (`make test` runs `npm ci` there). Skipped only
    where npm is missing and this is not CI."""
    if not ASYNCAPI_CLI.exists():
        if shutil.which("npm") is None and os.environ.get("CI") != "true":
            pytest.skip("npm is not installed")
        pytest.fail("@asyncapi/cli is not installed: run `npm ci --prefix tests/asyncapi --ignore-scripts`")
    return ASYNCAPI_CLI


async def test_the_asyncapi_cli_validates_the_served_document(client: Any, tmp_path: Path) -> None:
    cli = _asyncapi_cli()
    path = tmp_path / "asyncapi.json"
    path.write_bytes(await (await client.get("/api/asyncapi.json")).get_data())
    env = {
        **os.environ,
        # Usage statistics off: CI=true, and a settings file saying so (else it writes one in $HOME).
        "CI": "true",
        "ASYNCAPI_METRICS_CONFIG_PATH": str(ASYNCAPI_DIR / "analytics.json"),
        "SUPPRESS_NO_CONFIG_WARNING": "1",
    }
    result = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [str(cli), "validate", str(path), "--fail-severity", "warn"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "is valid" in output, output
    assert "0 errors, 0 warnings" in output or "problem" not in output, output


async def test_the_index_links_the_document(client: Any) -> None:
    index = await (await client.get("/", headers={"Accept": "application/json"})).get_json()
    assert index["links"]["asyncapi"] == "/api/asyncapi.json"
