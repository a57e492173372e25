"""A subscription expiry is durable: it fires after a SIGKILL restart, once, even with two
processes racing for it. Real server processes."""

from __future__ import annotations

import signal
import sqlite3
import time
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow


def _register(base: str, username: str) -> dict[str, Any]:
    response = httpx.post(f"{base}/api/auth/register", json={"username": username, "password": "long enough pw"})
    assert response.status_code == 201, response.text
    return response.json()


def _sql(database_url: str, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Straight to the database the servers share (qmark placeholders)."""
    if database_url.startswith("sqlite:///"):
        with sqlite3.connect(database_url[len("sqlite:///") :]) as connection:
            return connection.execute(statement, params).fetchall()
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as connection:
        cursor = connection.execute(statement.replace("?", "%s"), params)
        return cursor.fetchall() if cursor.description else []


def test_an_expiry_missed_while_down_fires_after_sigkill_once(database_url: str, server_process: Any) -> None:
    server = server_process(database_url)
    creator, fan = _register(server.url, "subkillstar"), _register(server.url, "subkillfan")
    headers = {"Authorization": f"Bearer {fan['token']}"}
    assert httpx.post(f"{server.url}/api/volts/purchase", json={"amount": 500}, headers=headers).status_code == 200
    subscribed = httpx.post(
        f"{server.url}/api/subscriptions/subscribe", json={"creatorId": creator["user"]["id"]}, headers=headers
    )
    assert subscribed.status_code == 201, subscribed.text
    subscription_id = subscribed.json()["subscription"]["id"]

    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)
    # The period ran out while no process was up.
    expired_at = int(time.time() * 1000) - 1000
    _sql(database_url, "UPDATE subscriptions SET expires_at = ? WHERE id = ?", (expired_at, subscription_id))

    first, second = server_process(database_url), server_process(database_url)
    deadline = time.monotonic() + 20
    row: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        row = _sql(database_url, "SELECT ended_at, end_reason FROM subscriptions WHERE id = ?", (subscription_id,))
        if row and row[0][0] is not None:
            break
        time.sleep(0.1)  # real time: child processes run their own clocks
    assert row and row[0] == (expired_at, "expired")
    count = httpx.get(
        f"{first.url}/api/developer/subscriptions/count", headers={"Authorization": f"Bearer {creator['token']}"}
    )
    assert count.json() == {"count": 0}
    assert second.process is not None and second.process.poll() is None
