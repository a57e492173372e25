"""Acknowledged writes survive SIGKILL; SIGTERM shuts down gracefully. Real server processes."""

import os
import signal
import subprocess
import sys

import httpx
import pytest

pytestmark = pytest.mark.slow


def _register(base: str, username: str) -> dict:
    response = httpx.post(
        f"{base}/api/auth/register", json={"username": username, "password": "long enough pw"}, timeout=10
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_acknowledged_register_and_follow_survive_sigkill(database_url, server_process):
    server = server_process(database_url)
    fan, star = _register(server.url, "killfan"), _register(server.url, "killstar")
    headers = {"Authorization": f"Bearer {fan['token']}"}
    follow = httpx.post(f"{server.url}/api/users/follow/{star['user']['id']}", headers=headers, timeout=10)
    assert follow.status_code == 200
    followed_at = follow.json()["followedAt"]

    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)
    restarted = server_process(database_url)

    login = httpx.post(
        f"{restarted.url}/api/auth/login", json={"username": "KILLFAN", "password": "long enough pw"}, timeout=10
    )
    assert login.status_code == 200 and login.json()["user"]["id"] == fan["user"]["id"]
    # The token issued before the crash still verifies: the signing secret was persisted too.
    status = httpx.get(f"{restarted.url}/api/users/follow-status/{star['user']['id']}", headers=headers, timeout=10)
    assert status.json() == {"following": True, "followedAt": followed_at}


def test_sigterm_shuts_down_gracefully(sqlite_url, server_process):
    server = server_process(sqlite_url)
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
    assert server.terminate() == 0
    assert "Traceback" not in server.log()


def test_bad_configuration_stops_start_naming_the_key(tmp_path):
    env = {**os.environ, "VOLTHUB_SERVER__PORT": "not-a-port"}
    result = subprocess.run(
        [sys.executable, "-m", "volthub", "serve"], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 2
    assert "server.port" in result.stderr


def test_cli_migrate_and_users(tmp_path, empty_sqlite_url):
    def run(*args, stdin=None):
        return subprocess.run(
            [sys.executable, "-m", "volthub", *args, "--database", empty_sqlite_url],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )

    migrated = run("migrate")
    assert migrated.returncode == 0 and "applied 0001_accounts" in migrated.stdout
    assert "up to date" in run("migrate").stdout
    created = run("users", "create", "cli_user", "--display-name", "CLI User", stdin="a long password\n")
    assert created.returncode == 0, created.stderr
    assert run("users", "create", "CLI_USER", "--password", "another password").returncode == 1
    assert run("users", "create", "x", "--password", "another password").returncode == 2
    listed = run("users", "list")
    assert "cli_user\tCLI User" in listed.stdout
