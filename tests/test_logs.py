"""JSON logs of a whole run, under `volthub serve` and under the `hypercorn` command: every
line parses, one access line per request with the response's X-Request-Id, no secret
anywhere; the text format carries the same start-up summary once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import FAST_AUTH, free_port, wait_healthy

PASSWORD = "correct horse battery staple 42"
TOKEN_SECRET = "tok-secret-4f1d2c9a8b7e6d5c"
HOOK_SECRET = "hook-secret-9a8b7c6d5e4f3a2b"


def launch(
    kind: str, database_url: str, port: int, tmp_path: Path, log_format: str = "json"
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "VOLTHUB_AUTH__ARGON2_TIME_COST": str(FAST_AUTH["argon2_time_cost"]),
        "VOLTHUB_AUTH__ARGON2_MEMORY_KIB": str(FAST_AUTH["argon2_memory_kib"]),
        "VOLTHUB_AUTH__TOKEN_SECRET": TOKEN_SECRET,
        "VOLTHUB_INGEST__HOOK_SECRET": HOOK_SECRET,
        "VOLTHUB_LOGGING__FORMAT": log_format,
        "VOLTHUB_DATABASE__URL": database_url,
        "VOLTHUB_SERVER__PORT": str(port),
        # The gateway on a free port too: the default 8081 may be any other server's.
        "VOLTHUB_EVENTS__GATEWAY_PORT": str(free_port()),
    }
    if kind == "serve":
        argv = [sys.executable, "-m", "volthub", "serve", "--port", str(port)]
    else:
        hypercorn = str(Path(sys.executable).with_name("hypercorn"))
        argv = [hypercorn, "--worker-class", "trio", "--bind", f"127.0.0.1:{port}", "volthub.http.app:create_app()"]
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - the child writes to it
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)


def exercise(url: str) -> tuple[list[httpx.Response], list[str]]:
    """Requests of every kind; returns the responses and the secrets they involved."""
    responses: list[httpx.Response] = []
    with httpx.Client(base_url=url, timeout=10, event_hooks={"response": [responses.append]}) as http:
        registered = http.post("/api/auth/register", json={"username": "logwatcher", "password": PASSWORD}).json()
        token = registered["token"]
        auth = {"Authorization": f"Bearer {token}"}
        user_id = registered["user"]["id"]
        http.post("/api/auth/login", json={"username": "logwatcher", "password": "wrong password 1"})
        http.get("/api/users/me", headers={**auth, "X-Request-Id": "caller-chosen-id-1"})
        http.get("/api/nothing/here")
        http.get("/api/users/me", headers={"Authorization": "Bearer not-a-real-token-abcdef"})
        http.post(f"/api/integrations/oauth/chat/channels/{user_id}/messages", json={"message": "hi"}, headers=auth)
        stream_key = http.get("/api/integrations/oauth/stream/setup", headers=auth).json()["streamKey"]
        http.post(f"/api/ingest/nginx/publish?secret={HOOK_SECRET}", data={"name": stream_key})
        http.get("/metrics")
        http.get("/socket.io/", params={"EIO": "4", "transport": "polling"})
    for response in responses:
        response.read()
    return responses, [PASSWORD, token, TOKEN_SECRET, HOOK_SECRET, stream_key]


def parsed(line: str) -> dict[str, Any]:
    try:
        document = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise AssertionError(f"not a JSON line: {line!r}") from None
    assert isinstance(document, dict), line
    return document


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["serve", "hypercorn"])
def test_json_logs_parse_give_each_request_one_access_line_and_hold_no_secret(
    kind: str, sqlite_url: str, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = launch(kind, sqlite_url, port, tmp_path)
    try:
        wait_healthy(url, process)
        responses, secrets = exercise(url)
    finally:
        stop(process)
    text = (tmp_path / "server.log").read_text()
    lines = [parsed(line) for line in text.splitlines() if line.strip()]  # every line is one object
    for line in lines:
        assert {"ts", "level", "logger", "message"} <= line.keys(), line
    for secret in secrets:
        assert secret not in text, f"a secret reached the log: {secret[:6]}…"

    access = [line for line in lines if line["logger"] == "volthub.access" and "session" not in line]
    by_id = {line["request_id"]: line for line in access}
    for response in responses:
        rid = response.headers["X-Request-Id"]
        line = by_id.get(rid)
        assert line is not None, (response.request.method, response.request.url.path, rid)
        assert (line["method"], line["status"]) == (response.request.method, response.status_code)
        assert line["client"] == "127.0.0.1" and line["duration_ms"] >= 0
        assert [a["request_id"] for a in access].count(rid) == 1
        if response.status_code >= 400 and response.headers.get("content-type") == "application/json":
            assert response.json()["details"]["requestId"] == rid
    assert by_id["caller-chosen-id-1"]["path"] == "/api/users/me"
    assert any(line["path"] == "/api/integrations/oauth/chat/channels/<channel_id>/messages" for line in access)
    assert any(line["path"] == "unmatched" and line["status"] == 404 for line in access)

    messages = [line["message"] for line in lines]
    assert sum("serving http://" in m for m in messages) == 1, messages  # one start-up summary
    assert not any(m.startswith("Running on") for m in messages)  # Hypercorn's banner: once, in the summary
    assert not any("service relay finished" in m or m.split()[-1] == "finished" for m in messages)
    if kind == "serve":
        assert messages[-1] == "volthub stopped"


def test_text_logs_have_time_level_and_logger(sqlite_url: str, tmp_path: Path) -> None:
    port = free_port()
    process = launch("hypercorn", sqlite_url, port, tmp_path, log_format="text")
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process)
    finally:
        stop(process)
    lines = (tmp_path / "server.log").read_text().splitlines()
    for line in lines:
        stamp, level, rest = line.split(" ", 2)
        assert stamp.endswith("Z") and "T" in stamp, line
        assert level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), line
        assert ": " in rest, line
    assert sum("serving http://" in line for line in lines) == 1
